#!/usr/bin/env bash
# Training on the CPU: the loss falls on a learnable dataset, runs are reproducible, and resuming is exact:
# 2k steps straight vs k steps + save + load + k more give identical losses and weights, bit for bit.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 tests/ref/make_dataset.py "$tmp/data" 60000 500 3
common=(--config configs/tiny.yaml --vocab_size 500 --train_data_path "$tmp/data" --seq_length 96
        --micro_batch_size 2 --global_batch_size 4 --log_interval 1 --device cpu --lr_warmup_iters 3 --train_iters 12)
./gdn train "${common[@]}" --save "$tmp/a" > "$tmp/a.log"
./gdn train "${common[@]}" --save "$tmp/b" --exit_interval 6 > "$tmp/b1.log"
test -f "$tmp/b/iter_0000006/DONE"
test "$(cat "$tmp/b/latest_checkpointed_iteration.txt")" = 6
./gdn train "${common[@]}" --save "$tmp/b" --load "$tmp/b" > "$tmp/b2.log"
grep -q "resuming from" "$tmp/b2.log"
/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
sys.path.insert(0, 'tests/ref')
from st import tensors_raw as tensors
tmp = sys.argv[1]
def losses(path):
    return {r['iteration']: r['lm_loss'] for r in map(json.loads, open(path)) if 'lm_loss' in r}
a, b = losses(f'{tmp}/a/metrics.jsonl'), losses(f'{tmp}/b/metrics.jsonl')
assert sorted(a) == list(range(1, 13)), sorted(a)
assert a == b, [(k, a[k], b.get(k)) for k in a if a[k] != b.get(k)]
first, last = sum(a[k] for k in (1, 2, 3)) / 3, sum(a[k] for k in (10, 11, 12)) / 3
assert last < first - 0.3, (first, last)   # it learns (log(500) = 6.2 at the start)
for f in ('model.safetensors', 'optimizer.safetensors'):
    ta, tb = tensors(f'{tmp}/a/iter_0000012/{f}'), tensors(f'{tmp}/b/iter_0000012/{f}')
    assert ta.keys() == tb.keys() and len(ta) > 0
    diff = [k for k in ta if ta[k] != tb[k]]
    assert not diff, diff[:5]
print(f'losses {first:.3f} -> {last:.3f}; straight and resumed runs identical over 12 steps (losses, weights, AdamW state)')
PY
# The precision-aware optimizer (bf16 AdamW moments; on the CPU store_param_remainders has no effect, as in
# TransformerEngine for fp32 weights): resuming is exact too, the checkpoint's moments are bf16 values, and it learns.
pa=(--use_precision_aware_optimizer true --exp_avg_dtype bf16 --exp_avg_sq_dtype bf16)
./gdn train "${common[@]}" "${pa[@]}" --save "$tmp/c" > "$tmp/c.log"
./gdn train "${common[@]}" "${pa[@]}" --save "$tmp/d" --exit_interval 6 > "$tmp/d1.log"
./gdn train "${common[@]}" "${pa[@]}" --save "$tmp/d" --load "$tmp/d" > "$tmp/d2.log"
/usr/bin/python3 - "$tmp" <<'PY'
import json, struct, sys
sys.path.insert(0, 'tests/ref')
from st import tensors_raw as tensors
tmp = sys.argv[1]
def losses(path):
    return {r['iteration']: r['lm_loss'] for r in map(json.loads, open(path)) if 'lm_loss' in r}
a, c, d = losses(f'{tmp}/a/metrics.jsonl'), losses(f'{tmp}/c/metrics.jsonl'), losses(f'{tmp}/d/metrics.jsonl')
assert c == d, [(k, c[k], d.get(k)) for k in c if c[k] != d.get(k)]
assert c != a and abs(c[12] - a[12]) < 0.05, (c[12], a[12])  # bf16 moments: another run, close to the fp32 one
for f in ('model.safetensors', 'optimizer.safetensors'):
    tc, td = tensors(f'{tmp}/c/iter_0000012/{f}'), tensors(f'{tmp}/d/iter_0000012/{f}')
    assert tc.keys() == td.keys() and not [k for k in tc if tc[k] != td[k]]
opt = tensors(f'{tmp}/c/iter_0000012/optimizer.safetensors')
vals = [v for k in opt for v in struct.unpack(f'<{len(opt[k]) // 4}I', opt[k])]
assert vals and all(v & 0xffff == 0 for v in vals), 'moments not bf16 values'
print(f'precision-aware optimizer: straight and resumed runs identical; {len(vals)} moment values, all bf16; '
      f'final loss {c[12]:.4f} (fp32 state {a[12]:.4f})')
PY
