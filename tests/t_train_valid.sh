#!/usr/bin/env bash
# Validation during training (train/validate.c, spec train.md §2): at every eval_interval and at the end,
# Megatron's lines in the log, rows in metrics.jsonl; each equals `gdn score --set valid` on the same items
# with that iteration's checkpoint; the sampler continues across evaluations and across a resume (the
# counter is in the checkpoint); eval_same_samples re-reads the first items; 2 ranks give the 1-rank mean.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 # a tiny model: threads only contend on a loaded machine
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 tests/ref/make_dataset.py "$tmp/A" 30000 500 3
/usr/bin/python3 tests/ref/make_dataset.py "$tmp/B" 20000 500 4
common=(--config configs/tiny.yaml --vocab_size 500 --data_path "2 $tmp/A 1 $tmp/B" --split 90,8,2 --seq_length 64
        --micro_batch_size 2 --global_batch_size 4 --log_interval 2 --device cpu --lr_warmup_iters 2 --train_iters 8
        --eval_interval 3 --eval_iters 2)
./gdn train "${common[@]}" --save "$tmp/a" --save_interval 3 > "$tmp/a.log"
# interrupted at 4 (exit_interval), resumed: the evaluations at 6 and the end read what the straight run read
./gdn train "${common[@]}" --save "$tmp/b" --exit_interval 4 > "$tmp/b1.log"
./gdn train "${common[@]}" --save "$tmp/b" --load "$tmp/b" > "$tmp/b2.log"
./gdn train "${common[@]}" --save "$tmp/s" --eval_same_samples true > "$tmp/s.log"
./gdn train "${common[@]}" --save "$tmp/w2" --nproc_per_node 2 > "$tmp/w2.log"
./gdn train "${common[@]}" --save "$tmp/n" --eval_iters 0 > "$tmp/n.log" # no validation: the same training
grep -q "^ validation loss at iteration 3 | lm loss value: .* | lm loss PPL: .* | $" "$tmp/a.log"
grep -q "^ validation loss at iteration 8 on validation set | lm loss value" "$tmp/a.log"
grep -q "^ validation loss at iteration 8 on test set | lm loss value" "$tmp/a.log"
grep -q "^Evaluating on 8 samples" "$tmp/a.log"
if grep -q "on validation set" "$tmp/b1.log"; then echo "a stopped run must not run the end-of-training evaluation"; exit 1; fi
/usr/bin/python3 - "$tmp" <<'PY'
import json, math, re, subprocess, sys
sys.path.insert(0, 'tests/ref')
from st import tensors_raw as tensors
tmp = sys.argv[1]
train = lambda d: [(r['iteration'], r['lm_loss']) for r in map(json.loads, open(f'{tmp}/{d}/metrics.jsonl')) if 'lm_loss' in r]
assert train('a') == train('n') and len(train('a')) == 8, (train('a'), train('n'))
ta, tn = tensors(f'{tmp}/a/iter_0000008/model.safetensors'), tensors(f'{tmp}/n/iter_0000008/model.safetensors')
assert ta.keys() == tn.keys() and not [k for k in ta if ta[k] != tn[k]]  # validation leaves training untouched
def rows(d):
    return [r for r in map(json.loads, open(f'{tmp}/{d}/metrics.jsonl')) if 'eval' in r]
a = rows('a')
assert [(r['iteration'], r['eval'], r['final']) for r in a] == [(3, 'valid', False), (6, 'valid', False),
        (8, 'valid', True), (8, 'test', True)], a
v = [r for r in a if r['eval'] == 'valid']
assert [r['valid_first_sample'] for r in v] == [0, 8, 16] and all(r['valid_samples'] == 8 for r in v), v
assert all(r['valid_tokens'] == 8 * 64 for r in v)
log = open(f'{tmp}/a.log').read()
for r in a:
    s = r['eval']
    L = r[f'{s}_loss']
    assert abs(r[f'{s}_ppl'] - math.exp(min(20, L))) <= 1e-6 * r[f'{s}_ppl']
    assert f'| lm loss value: {L:.6E} | lm loss PPL: {math.exp(min(20, L)):.6E} | ' in log, (L, log[-2000:])
    # gdn score on the same items with the checkpoint of that iteration: the same sum, bit for bit
    out = subprocess.run(['./gdn', 'score', '--load', f'{tmp}/a/iter_{r["iteration"]:07d}', '--set', s,
                          '--first-sample', str(r[f'{s}_first_sample']), '--max-samples', str(r[f'{s}_samples']),
                          '--micro-batch-size', '2', '--device', 'cpu'], capture_output=True, text=True, check=True).stdout
    got = float(re.search(r'loss ([0-9.e+-]+)\n', out).group(1))
    assert got == L, (r, got, out)
# resumed run: the same evaluations, the same numbers
b = rows('b')
assert [(r['iteration'], r[r['eval'] + '_loss']) for r in b] == [(r['iteration'], r[r['eval'] + '_loss']) for r in a], (a, b)
s = rows('s')
assert [r.get('valid_first_sample', 0) for r in s] == [0, 0, 0, 0], s
assert s[0]['valid_loss'] == a[0]['valid_loss'] and s[1]['valid_loss'] != a[1]['valid_loss']
w2 = rows('w2')
worst = max(abs(x[x['eval'] + '_loss'] - y[y['eval'] + '_loss']) / y[y['eval'] + '_loss'] for x, y in zip(w2, a))
assert len(w2) == len(a) and worst <= 2e-6, (worst, w2, a)
print(f'{len(a)} evaluations equal gdn score bit for bit; training with and without validation identical; resumed run identical; 2 ranks within {worst:.1e}; '
      f'eval seconds {[r["eval_seconds"] for r in a]}')
PY
