#!/usr/bin/env bash
# Launcher-started ranks on CPU through Gloo, with the real torchrun (Debian's torch 1.13; `--redirects 1
# --tee 2` because its defaults crash) and mpirun:
#  * 2 "nodes" x 2 ranks (two torchrun invocations, --nnodes 2, loopback) == 1 rank at the same global
#    batch, plain DDP and ZeRO-1, within the bound of tests/ref/dp_bound.py (the samples are the same; only
#    the fp32 order of the gradient sums differs); step 1 (initial weights) within 1e-12 (a double sum);
#  * the layout printed once by rank 0, one log line per step;
#  * a ZeRO-1 checkpoint of 4 ranks at step 3 resumes on 2 ranks (ZeRO-1) and on 1 (no ZeRO) and goes on
#    with the uninterrupted run's losses (same bound from step 4); gdn convert reads it;
#  * buckets (ddp_bucket_size) overlapped with the backward (overlap_grad_reduce) or not: the same bits;
#  * ZeRO-1 in buckets (each sharded across the ranks), with the reduce-scatter overlapped with the backward
#    and the all-gather with the next forward (overlap_param_gather) == without overlap, bit for bit
#    (losses, grad norms, checkpoints); its checkpoint of step 3 resumes on 2 ranks (overlapped ZeRO-1) and
#    on 1 within the bound;
#  * mpirun -np 2 (Open MPI's variables, the same Gloo path) == 1 rank within the bound; srun's variables
#    (set by hand) give mpirun's weights bit for bit; a malformed RANK is refused by name.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 tests/ref/make_dataset.py "$tmp/data" 60000 500 3
common=(--config configs/tiny.yaml --vocab_size 500 --train_data_path "$tmp/data" --seq_length 96
        --micro_batch_size 1 --global_batch_size 8 --log_interval 1 --device cpu --lr_warmup_iters 3 --train_iters 6
        --save_interval 3)
# MASTER_PORT (torchrun's agent); gdn's store takes port+1. Below Linux's ephemeral range (32768-60999): a
# client socket there (an agent connecting to the master) once held the store's port and failed a run
port=$((10000 + $$ % 20000))
export OMP_NUM_THREADS=1
trun() { # NAME NNODES NPROC ARGS...: one torchrun per node, in parallel, each bounded in time
    local name=$1 nn=$2 np=$3; shift 3
    local pids=()
    for ((n = 0; n < nn; n++)); do
        timeout -k 10 300 torchrun --nnodes "$nn" --node_rank $n --nproc_per_node "$np" --master_addr 127.0.0.1 \
            --master_port $port --redirects 1 --tee 2 --log_dir "$tmp/logs_${name}_$n" --no_python \
            ./gdn train "${common[@]}" "$@" > "$tmp/$name.$n.log" 2>&1 &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || { echo "FAIL: torchrun $name"; cat "$tmp/$name".*.log; exit 1; }; done
    port=$((port + 2))
}
out0() { cat "$tmp"/logs_$1_0/*/attempt_0/0/stdout.log; } # rank 0's stdout

./gdn train "${common[@]}" --save "$tmp/w1" > "$tmp/w1.log"
trun t4 2 2 --save "$tmp/t4"
trun z4 2 2 --save "$tmp/z4" --use_distributed_optimizer
trun b4 2 2 --save "$tmp/b4" --ddp_bucket_size 20000                       # 3 buckets after the backward
trun o4 2 2 --save "$tmp/o4" --ddp_bucket_size 20000 --overlap_grad_reduce # the same, during the backward
zo=(--use_distributed_optimizer --ddp_bucket_size 20000)
trun zb4 2 2 --save "$tmp/zb4" "${zo[@]}"
trun zo4 2 2 --save "$tmp/zo4" "${zo[@]}" --overlap_grad_reduce --overlap_param_gather
out0 zo4 | grep "ZeRO-1 over 3 buckets, each sharded across the ranks: gradients reduce-scattered during the backward, parameters all-gathered during the next forward" > /dev/null
out0 o4 | grep "gradients reduced in 3 buckets (overlapped with the backward), the embedding's (32000 elements) last" > /dev/null
out0 t4 | grep "gdn train: 4 ranks from torchrun (2 per machine here, 2 machines), rendezvous 127.0.0.1:" > /dev/null
out0 z4 | grep "x 4 data-parallel ranks (Gloo, ZeRO-1)" > /dev/null
test "$(out0 t4 | grep -c 'iteration  *[0-9]*/')" = 6
test "$(cat "$tmp"/logs_t4_1/*/attempt_0/0/stdout.log | grep -c 'iteration  *[0-9]*/')" = 0 # rank 2 logs nothing
test -f "$tmp/z4/iter_0000003/DONE" && test -f "$tmp/z4/iter_0000006/DONE"
# resume the 4-rank ZeRO-1 checkpoint of step 3 on 2 ranks (ZeRO-1) and on 1 rank (plain)
trun r2 1 2 --use_distributed_optimizer --load "$tmp/z4/iter_0000003" --save "$tmp/r2"
./gdn train "${common[@]}" --load "$tmp/z4/iter_0000003" --save "$tmp/r1" > "$tmp/r1.log"
out0 r2 | grep "resuming from .*iter_0000003 at iteration 3" > /dev/null
trun r2o 1 2 "${zo[@]}" --overlap_grad_reduce --overlap_param_gather --load "$tmp/zo4/iter_0000003" --save "$tmp/r2o"
./gdn train "${common[@]}" --load "$tmp/zo4/iter_0000003" --save "$tmp/r1o" > "$tmp/r1o.log"
# mpirun: Open MPI's variables, the same Gloo path
timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 -x OMP_NUM_THREADS=1 -x MASTER_PORT=$port \
    ./gdn train "${common[@]}" --save "$tmp/m2" > "$tmp/m2.log" 2>&1 || { cat "$tmp/m2.log"; exit 1; }
grep -q "2 ranks from mpirun" "$tmp/m2.log"
# srun's variables (no Slurm here: set by hand as srun sets them for a 2-task step on one node)
spids=()
for r in 0 1; do
    SLURM_PROCID=$r SLURM_NTASKS=2 SLURM_LOCALID=$r SLURM_NNODES=1 SLURM_STEP_ID=0 MASTER_PORT=$((port + 2)) \
        timeout 300 ./gdn train "${common[@]}" --save "$tmp/s2" > "$tmp/s2.$r.log" 2>&1 &
    spids+=($!)
done
for p in "${spids[@]}"; do wait "$p" || { cat "$tmp"/s2.*.log; exit 1; }; done
grep -q "2 ranks from srun (2 per machine here, 1 machine)" "$tmp/s2.0.log"
# a launcher variable that is not a number is refused by name
if RANK=x WORLD_SIZE=2 ./gdn train "${common[@]}" > "$tmp/bad.log" 2>&1; then echo "FAIL: RANK=x accepted"; exit 1; fi
grep -q 'RANK="x" (set by torchrun): expected a non-negative integer' "$tmp/bad.log"
./gdn convert --to-hf --load "$tmp/z4" --output-dir "$tmp/hf" --dtype fp32 > "$tmp/conv.log"
test -s "$tmp/hf/model.safetensors"

/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
sys.path.insert(0, 'tests/ref')
from dp_bound import bound
from st import tensors_f32 as tensors, tensors_raw
tmp = sys.argv[1]
for f in ('model.safetensors', 'optimizer.safetensors'): # srun's variables, the same path as mpirun's: the same bits
    a, b = tensors_raw(f'{tmp}/m2/iter_0000006/{f}'), tensors_raw(f'{tmp}/s2/iter_0000006/{f}')
    assert a and a.keys() == b.keys() and all(a[k] == b[k] for k in a), f
print('srun variables == mpirun: weights and AdamW state bit for bit')
def run(path):
    return {r['iteration']: r for r in map(json.loads, open(path)) if 'lm_loss' in r}
P = sum(len(v) for v in tensors(f'{tmp}/w1/iter_0000006/model.safetensors').values())
ref = run(f'{tmp}/w1/metrics.jsonl')
assert sorted(ref) == list(range(1, 7)), sorted(ref)
def check(name, got, base, first, W):
    assert sorted(got) == list(range(first, 7)), (name, sorted(got))
    for k in got:
        d = abs(got[k]['lm_loss'] - base[k]['lm_loss'])
        b = bound(base, first, k, W, P)
        assert d <= b, (name, k, d, b)
    worst = max(abs(got[k]['lm_loss'] - base[k]['lm_loss']) / bound(base, first, k, W, P) for k in got)
    print(f'{name}: losses of steps {first}..6 within {worst:.2f} of the derived bound')
check('torchrun 2x2 vs 1 rank', run(f'{tmp}/t4/metrics.jsonl'), ref, 1, 4)
check('torchrun 2x2 ZeRO-1 vs 1 rank', run(f'{tmp}/z4/metrics.jsonl'), ref, 1, 4)
check('ZeRO-1 vs plain, 4 ranks', run(f'{tmp}/z4/metrics.jsonl'), run(f'{tmp}/t4/metrics.jsonl'), 1, 4)
check('mpirun 2 vs 1 rank', run(f'{tmp}/m2/metrics.jsonl'), ref, 1, 2)
check('torchrun 2x2 bucketed vs 1 rank', run(f'{tmp}/b4/metrics.jsonl'), ref, 1, 4)
b4, o4 = run(f'{tmp}/b4/metrics.jsonl'), run(f'{tmp}/o4/metrics.jsonl')
same = lambda a, b: all((a[k]['lm_loss'], a[k]['grad_norm']) == (b[k]['lm_loss'], b[k]['grad_norm']) for k in a)
assert sorted(b4) == sorted(o4) and same(b4, o4), 'overlap changed the bits'
print('buckets overlapped with the backward == after it, bit for bit (6 steps)')
zb4, zo4 = run(f'{tmp}/zb4/metrics.jsonl'), run(f'{tmp}/zo4/metrics.jsonl')
assert sorted(zb4) == sorted(zo4) and same(zb4, zo4), 'ZeRO-1 overlap changed the bits'
for f in ('model.safetensors', 'optimizer.safetensors'):
    for it in ('0000003', '0000006'):
        a, b = tensors_raw(f'{tmp}/zb4/iter_{it}/{f}'), tensors_raw(f'{tmp}/zo4/iter_{it}/{f}')
        assert a and a.keys() == b.keys() and all(a[k] == b[k] for k in a), (f, it)
print('ZeRO-1 in 3 buckets: reduce-scatter during the backward + all-gather during the forward == after, bit for bit (6 steps, checkpoints)')
check('torchrun 2x2 bucketed ZeRO-1 vs 1 rank', zb4, ref, 1, 4)
check('overlapped bucketed ZeRO-1 4 ranks @3 -> 2 ranks', run(f'{tmp}/r2o/metrics.jsonl'), zo4, 4, 4)
check('overlapped bucketed ZeRO-1 4 ranks @3 -> 1 rank', run(f'{tmp}/r1o/metrics.jsonl'), zo4, 4, 4)
z4 = run(f'{tmp}/z4/metrics.jsonl')
check('ZeRO-1 4 ranks @3 -> 2 ranks', run(f'{tmp}/r2/metrics.jsonl'), z4, 4, 4)
check('ZeRO-1 4 ranks @3 -> 1 rank', run(f'{tmp}/r1/metrics.jsonl'), z4, 4, 4)
# step 1 runs on the initial weights: the same per-token losses, summed in another order only in double
assert abs(run(f'{tmp}/t4/metrics.jsonl')[1]['lm_loss'] - ref[1]['lm_loss']) <= 1e-12 * ref[1]['lm_loss']
PY
echo "PASS: torchrun (2 nodes x 2), mpirun, ZeRO-1 and resume at another world size"
