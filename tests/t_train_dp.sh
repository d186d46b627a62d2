#!/usr/bin/env bash
# Data-parallel training on CPU ranks (shared-memory all-reduce; the NCCL path is checked on GPUs by
# scripts/gpu_check.sh): 2 ranks x 1 micro-batch and 4 ranks x 1 give the same losses as 1 rank x 4
# micro-batches of the same global batch (same samples; only the fp32 order of the gradient sums differs),
# the replicas stay identical (checked by the trainer at every save), rank 0 alone logs and saves, and a
# failing rank stops the others with its status.
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
# a rank that fails (here: a target id outside the vocabulary, found by every rank) stops the run non-zero
if ./gdn train "${common[@]}" --vocab_size 400 --nproc_per_node 2 --save "" > "$tmp/bad.log" 2>&1; then
    echo "FAIL: a failing data-parallel run exited 0"; cat "$tmp/bad.log"; exit 1
fi
grep -q "rank [01]" "$tmp/bad.log"
echo "PASS: data parallel on CPU ranks"
