#!/usr/bin/env bash
# Data-parallel training on CPU ranks (shared-memory all-reduce; the NCCL path is checked on GPUs by
# scripts/gpu_check.sh): 2 ranks x 1 micro-batch and 4 ranks x 1 give the same losses as 1 rank x 4
# micro-batches of the same global batch (same samples; only the fp32 order of the gradient sums differs),
# the replicas stay identical (checked by the trainer at every save), rank 0 alone logs and saves, ZeRO-1
# (plain, bucketed, overlapped) gives plain DDP's bits, a failing rank stops the others with its status,
# a hung one makes them stop within distributed_timeout_minutes, and ZeRO-1 holds ~3/4 of the moments less a rank.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 tests/ref/make_dataset.py "$tmp/data" 60000 500 3
common=(--config configs/tiny.yaml --vocab_size 500 --train_data_path "$tmp/data" --seq_length 96
        --micro_batch_size 2 --global_batch_size 8 --log_interval 1 --device cpu --lr_warmup_iters 3 --train_iters 10
        --save_interval 5)
./gdn train "${common[@]}" --save "$tmp/w1" > "$tmp/w1.log"
./gdn train "${common[@]}" --save "$tmp/w2" --nproc_per_node 2 > "$tmp/w2.log"
./gdn train "${common[@]}" --save "$tmp/w4" --nproc_per_node 4 --micro_batch_size 1 > "$tmp/w4.log"
grep -q "x 2 data-parallel ranks (shared memory)" "$tmp/w2.log"
test "$(grep -c 'iteration  *[0-9]*/' "$tmp/w2.log")" = 10 # one log line per step: rank 0 only
test -f "$tmp/w2/iter_0000010/DONE" && test -f "$tmp/w2/iter_0000005/DONE"
/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
sys.path.insert(0, 'tests/ref')
from st import tensors_f32 as tensors
tmp = sys.argv[1]
def losses(path):
    return {r['iteration']: r['lm_loss'] for r in map(json.loads, open(path)) if 'lm_loss' in r}
ref = losses(f'{tmp}/w1/metrics.jsonl')
assert sorted(ref) == list(range(1, 11)), sorted(ref)
wr = tensors(f'{tmp}/w1/iter_0000010/model.safetensors')
for w in (2, 4):
    got = losses(f'{tmp}/w{w}/metrics.jsonl')
    assert sorted(got) == sorted(ref), sorted(got)
    worst = max(abs(got[k] - ref[k]) / abs(ref[k]) for k in ref)
    assert worst <= 2e-6, (w, worst, got, ref)          # the same samples per step, fp32 sum order aside
    wt = tensors(f'{tmp}/w{w}/iter_0000010/model.safetensors')
    wdiff = max(max(abs(a - b) for a, b in zip(wr[k], wt[k])) / max(1e-30, max(abs(a) for a in wr[k])) for k in wr)
    assert wdiff <= 1e-4, (w, wdiff)
    print(f'{w} ranks vs 1 rank, 10 steps: losses within {worst:.1e} relative (tol 2e-6), weights within {wdiff:.1e}')
PY
# resume with 2 ranks: 5 steps + save + load + 5 equals 10 straight, bit for bit
./gdn train "${common[@]}" --save "$tmp/r2" --nproc_per_node 2 --exit_interval 5 > "$tmp/r2a.log"
./gdn train "${common[@]}" --save "$tmp/r2" --nproc_per_node 2 --load "$tmp/r2" > "$tmp/r2b.log"
grep -q "resuming from" "$tmp/r2b.log"
/usr/bin/python3 - "$tmp" <<'PY'
import sys
sys.path.insert(0, 'tests/ref')
from st import tensors_raw as tensors # bytes per tensor: the metadata records the run's flags, which differ
tmp = sys.argv[1]
for f in ('model.safetensors', 'optimizer.safetensors'):
    a, b = tensors(f'{tmp}/w2/iter_0000010/{f}'), tensors(f'{tmp}/r2/iter_0000010/{f}')
    assert a.keys() == b.keys() and a, f
    diff = [k for k in a if a[k] != b[k]]
    assert not diff, (f, diff[:5])
print('2 ranks: 5 + resume + 5 steps == 10 straight (weights and AdamW state bit for bit)')
PY
# ZeRO-1 (use_distributed_optimizer) through shared memory, where every sum runs in rank order as plain
# DDP's does: 4 ranks give plain DDP's losses and checkpoints bit for bit (only the grad norm is summed in
# another order: the clip is inactive here, all norms < clip_grad 1.0, asserted); in buckets (3, each
# sharded across the ranks), the reduce-scatter during the backward and the all-gather during the next
# forward (overlap_grad_reduce, overlap_param_gather) give the non-overlapped bucketed run's bits.
z=(--nproc_per_node 4 --micro_batch_size 1 --use_distributed_optimizer)
./gdn train "${common[@]}" "${z[@]}" --save "$tmp/z4" > "$tmp/z4.log"
./gdn train "${common[@]}" "${z[@]}" --ddp_bucket_size 20000 --save "$tmp/zb" > "$tmp/zb.log"
./gdn train "${common[@]}" "${z[@]}" --ddp_bucket_size 20000 --overlap_grad_reduce --overlap_param_gather \
    --save "$tmp/zo" > "$tmp/zo.log"
grep -q "x 4 data-parallel ranks (shared memory, ZeRO-1)" "$tmp/z4.log"
grep -q "ZeRO-1 over 3 buckets, each sharded across the ranks: gradients reduce-scattered during the backward, parameters all-gathered during the next forward" "$tmp/zo.log"
/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
sys.path.insert(0, 'tests/ref')
from st import tensors_raw
tmp = sys.argv[1]
def run(name):
    return {r['iteration']: r for r in map(json.loads, open(f'{tmp}/{name}/metrics.jsonl')) if 'lm_loss' in r}
def same_ckpt(a, b):
    for f in ('model.safetensors', 'optimizer.safetensors'):
        x, y = tensors_raw(f'{tmp}/{a}/iter_0000010/{f}'), tensors_raw(f'{tmp}/{b}/iter_0000010/{f}')
        assert x and x.keys() == y.keys(), (a, b, f)
        diff = [k for k in x if x[k] != y[k]]
        assert not diff, (a, b, f, diff[:5])
w4, z4, zb, zo = run('w4'), run('z4'), run('zb'), run('zo')
assert sorted(w4) == sorted(z4) == sorted(zb) == sorted(zo) == list(range(1, 11))
assert all(r['grad_norm'] < 1.0 for r in w4.values()), 'the clip is active: ZeRO-1 may then differ from DDP in the last bits'
for k in w4:
    assert z4[k]['lm_loss'] == w4[k]['lm_loss'] and zb[k]['lm_loss'] == w4[k]['lm_loss'], k
    assert abs(z4[k]['grad_norm'] - w4[k]['grad_norm']) <= 1e-6 * w4[k]['grad_norm'], k
    assert (zo[k]['lm_loss'], zo[k]['grad_norm']) == (zb[k]['lm_loss'], zb[k]['grad_norm']), k
same_ckpt('w4', 'z4')
same_ckpt('w4', 'zb')
same_ckpt('zb', 'zo')
print('ZeRO-1 4 ranks == plain DDP 4 ranks, bucketed ZeRO-1 too; overlapped == not: losses and checkpoints bit for bit (10 steps)')
PY
# ZeRO-1 with the precision-aware optimizer (bf16 moments, sharded in their storage; the CPU keeps fp32 masters):
# plain DDP's bits again, bucketed and overlapped too, and the checkpoint's moments are bf16 values
pa=(--use_precision_aware_optimizer true --exp_avg_dtype bf16 --exp_avg_sq_dtype bf16)
./gdn train "${common[@]}" --nproc_per_node 4 --micro_batch_size 1 "${pa[@]}" --save "$tmp/w4pa" > "$tmp/w4pa.log"
./gdn train "${common[@]}" "${z[@]}" "${pa[@]}" --ddp_bucket_size 20000 --overlap_grad_reduce --overlap_param_gather \
    --save "$tmp/zpa" > "$tmp/zpa.log"
/usr/bin/python3 - "$tmp" <<'PY'
import json, struct, sys
sys.path.insert(0, 'tests/ref')
from st import tensors_raw
tmp = sys.argv[1]
def run(name):
    return {r['iteration']: r['lm_loss'] for r in map(json.loads, open(f'{tmp}/{name}/metrics.jsonl')) if 'lm_loss' in r}
w, z, plain = run('w4pa'), run('zpa'), run('w4')
assert sorted(w) == list(range(1, 11)) and w == z, (w, z)
assert w != plain, 'bf16 moments gave the fp32 run'
for f in ('model.safetensors', 'optimizer.safetensors'):
    x, y = tensors_raw(f'{tmp}/w4pa/iter_0000010/{f}'), tensors_raw(f'{tmp}/zpa/iter_0000010/{f}')
    assert x and x.keys() == y.keys() and not [k for k in x if x[k] != y[k]], f
opt = tensors_raw(f'{tmp}/zpa/iter_0000010/optimizer.safetensors')
assert all(v & 0xffff == 0 for k in opt for v in struct.unpack(f'<{len(opt[k]) // 4}I', opt[k]))
print('ZeRO-1 (bucketed, overlapped) with bf16 moments == plain DDP with bf16 moments at 4 ranks, bit for bit')
PY
# ZeRO-1's memory: rank 0 holds its shard of the AdamW moments only (on the CPU's fp32 backend the masters are the
# weights, whole on every rank), so its allocated bytes (Megatron's mem-allocated-bytes) are 8 bytes x ~3/4 of the
# parameters below plain DDP's at 4 ranks; the figure the 1B's per-GPU memory at the recipe's 8 GPUs rests on
# (12 bytes a parameter / world size with bf16 weights: train/zero.h)
m=(--nproc_per_node 4 --micro_batch_size 1 --train_iters 3 --save "" --log_memory_to_tensorboard true)
./gdn train "${common[@]}" "${m[@]}" --tensorboard_dir "$tmp/mem_ddp" > "$tmp/mem_ddp.log"
./gdn train "${common[@]}" "${m[@]}" --use_distributed_optimizer --tensorboard_dir "$tmp/mem_z" > "$tmp/mem_z.log"
/usr/bin/python3 - "$tmp" <<'PY'
import re, sys
sys.path.insert(0, 'tests/report')
import tbread
tmp = sys.argv[1]
P = int(re.search(r'([0-9,]+) parameters', open(f'{tmp}/mem_ddp.log').read()).group(1).replace(',', ''))
alloc = {n: [v for _, v in tbread.read_dir(f'{tmp}/{n}')[0]['mem-allocated-bytes']] for n in ('mem_ddp', 'mem_z')}
assert len(alloc['mem_ddp']) == len(alloc['mem_z']) == 3, alloc
saved = alloc['mem_ddp'][-1] - alloc['mem_z'][-1]
share = saved / (8 * P)   # of the moments' bytes, not held by rank 0
assert 0.72 <= share <= 0.78, (P, alloc, share)
print(f'ZeRO-1 at 4 ranks: rank 0 holds {saved} bytes less than plain DDP ({share:.3f} of the moments of {P} parameters)')
PY
# a rank that hangs (SIGSTOP): the others give up within distributed_timeout_minutes (0.1: 6 s) naming it,
# the launcher stops it and exits non-zero (ranks are forked in rank order: the second child is rank 1)
./gdn train "${common[@]}" --nproc_per_node 4 --micro_batch_size 1 --train_iters 100000 --save "" \
    --distributed_timeout_minutes 0.1 > "$tmp/hang.log" 2>&1 &
launcher=$!
for _ in $(seq 300); do grep -q "iteration  *3/" "$tmp/hang.log" && break; sleep 0.1; done
kids=($(pgrep -P $launcher | sort -n))
test "${#kids[@]}" = 4 || { echo "FAIL: expected 4 ranks under the launcher, found ${kids[*]}"; cat "$tmp/hang.log"; exit 1; }
kill -STOP "${kids[1]}"
t0=$(date +%s)
if wait $launcher; then echo "FAIL: a run with a hung rank exited 0"; exit 1; fi
took=$(( $(date +%s) - t0 ))
grep -q "rank 1 died or hung (no answer within 6 s, distributed_timeout_minutes) during a collective (shared memory); stopping" "$tmp/hang.log" \
    || { echo "FAIL: the hung rank was not named"; cat "$tmp/hang.log"; exit 1; }
test "$took" -le 20 || { echo "FAIL: the ranks took $took s to stop (timeout 6 s)"; exit 1; }
! kill -0 "${kids[1]}" 2> /dev/null || { echo "FAIL: the stopped rank is still there"; kill -KILL "${kids[1]}"; exit 1; }
echo "a hung rank stopped the others in $took s (timeout 6 s), named"
if ./gdn train "${common[@]}" --overlap_param_gather --save "" > "$tmp/opg.log" 2>&1; then
    echo "FAIL: overlap_param_gather without ZeRO-1 accepted"; exit 1
fi
grep -q "overlap_param_gather needs use_distributed_optimizer" "$tmp/opg.log"
# a rank that fails (here: a target id outside the vocabulary, found by every rank) stops the run non-zero
if ./gdn train "${common[@]}" --vocab_size 400 --nproc_per_node 2 --save "" > "$tmp/bad.log" 2>&1; then
    echo "FAIL: a failing data-parallel run exited 0"; cat "$tmp/bad.log"; exit 1
fi
grep -q "rank [01]" "$tmp/bad.log"
echo "PASS: data parallel on CPU ranks"
