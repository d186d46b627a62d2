#!/usr/bin/env bash
# Blends and splits (data/blend.c) sample by sample against tests/ref/megatron_blend_ref.py, an independent
# Python model of Megatron's builder (numpy RandomState, helpers.cpp loops): weighted, length-weighted and
# single-prefix sets, 1 to 3 prefixes, a dataset too small for its share, per-split lists, and the
# spec's worked example (train.md §1.6).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ref=tests/ref/megatron_blend_ref.py
py() { /usr/bin/python3 "$@"; }
py $ref write "$tmp/A" 1000 3 12 1
py $ref write "$tmp/B" 2000 3 12 2
py $ref write "$tmp/C" 40 5 30 3      # small: its share needs several epochs
py $ref write "$tmp/D" 300 20 200 4
n=0
check() { # check SETS key=value... : every item of every listed set equal
  local sets=$1; shift
  local flags=() kv
  for kv in "$@"; do
    local k=${kv%%=*} v=${kv#*=}
    [ "$k" = surplus ] && k=mid_level_dataset_surplus
    flags+=("--$k" "$v")
  done
  for s in $sets; do
    ./gdn dataset samples "${flags[@]}" --set "$s" > "$tmp/c.txt"
    py $ref samples "$s" "$@" > "$tmp/r.txt"
    test -s "$tmp/r.txt" || { echo "reference has no $s items for: $*"; exit 1; }
    if ! cmp -s "$tmp/c.txt" "$tmp/r.txt"; then
      echo "MISMATCH in $s for: $*"; diff "$tmp/c.txt" "$tmp/r.txt" | head -5; exit 1
    fi
    n=$((n + $(wc -l < "$tmp/c.txt")))
  done
}
base=(seq_length=8 train_iters=10 global_batch_size=4 eval_interval=5 eval_iters=2)
# spec train.md §1.6: sizes 40 / 25 / 9 and the dataset_index string
check "train valid test" data_path="30 $tmp/A 70 $tmp/B" split=969,30,1 "${base[@]}"
got=$(./gdn dataset samples --data_path "30 $tmp/A 70 $tmp/B" --split 969,30,1 --seq_length 8 --train_iters 10 \
      --global_batch_size 4 --eval_interval 5 --eval_iters 2 --set train | awk '{printf "%s", $2}')
test "$got" = 1011011011011101101101110110110111011011
test "$(./gdn dataset samples --data_path "30 $tmp/A 70 $tmp/B" --split 969,30,1 --seq_length 8 --train_iters 10 \
      --global_batch_size 4 --eval_interval 5 --eval_iters 2 --set valid | wc -l)" = 25
# three weighted prefixes, C too small for its share; weights not summing to 1
check "train valid test" data_path="0.2 $tmp/A 0.5 $tmp/D 0.3 $tmp/C" split=90,8,2 seq_length=16 train_iters=30 \
  global_batch_size=8 eval_interval=10 eval_iters=3
check "train valid" data_path="5 $tmp/C 1 $tmp/D" split=95,5 seq_length=12 train_iters=40 global_batch_size=4 \
  eval_interval=20 eval_iters=1 surplus=0.05 seed=7
# no weights: length-weighted blend of one-epoch datasets, size min(S, sum)
check "train valid" data_path="$tmp/A $tmp/B $tmp/C" split=98,2,0 seq_length=8 train_iters=50 global_batch_size=8 \
  eval_interval=25 eval_iters=1
check "train" data_path="$tmp/C $tmp/D" split=1 seq_length=16 train_iters=500 global_batch_size=8
# one prefix: a plain GPTDataset per split (num_samples S), and a single weighted prefix (a blend)
check "train valid test" data_path="$tmp/D" split=80,15,5 seq_length=16 train_iters=20 global_batch_size=4 \
  eval_interval=10 eval_iters=2
check "train valid" data_path="1.0 $tmp/D" split=90,10 seq_length=16 train_iters=20 global_batch_size=4 eval_iters=2
# per-split lists: each prefix whole; one prefix ignores its weight
check "train valid test" train_data_path="1 $tmp/A 3 $tmp/B" valid_data_path="$tmp/C" test_data_path="2 $tmp/D" \
  seq_length=8 train_iters=12 global_batch_size=4 eval_interval=4 eval_iters=2
# data_order fla: several prefixes are read as one concatenated dataset (FLA's shuffle and randperm over all chunks)
/usr/bin/python3 - "$tmp" <<'PY'
import struct, sys
def mk(prefix, seqs):
    toks = [t for s in seqs for t in s]
    with open(prefix + '.bin', 'wb') as f:
        f.write(struct.pack('<%di' % len(toks), *toks))
    n = len(seqs)
    with open(prefix + '.idx', 'wb') as f:
        f.write(b'MMIDIDX\x00\x00' + struct.pack('<Q', 1) + bytes([4]) + struct.pack('<QQ', n, n + 1))
        f.write(struct.pack('<%di' % n, *[len(s) for s in seqs]))
        f.write(struct.pack('<%dq' % n, *[4 * 16 * i for i in range(n)]))
        f.write(struct.pack('<%dq' % (n + 1), *range(n + 1)))
a = [[(i * 7 + t) % 1000 for t in range(16)] for i in range(30)]
b = [[(500 + i * 11 + t) % 1000 for t in range(16)] for i in range(17)]
mk(sys.argv[1] + '/F1', a); mk(sys.argv[1] + '/F2', b); mk(sys.argv[1] + '/FC', a + b)
PY
fla=(--data_order fla --seq_length 16 --train_iters 30 --global_batch_size 4 --set train)
./gdn dataset samples "${fla[@]}" --train_data_path "$tmp/F1 $tmp/F2" > "$tmp/f12.txt"
./gdn dataset samples "${fla[@]}" --train_data_path "$tmp/FC" > "$tmp/fc.txt"
test "$(wc -l < "$tmp/fc.txt")" = 47 && cmp "$tmp/f12.txt" "$tmp/fc.txt"
# half-to-even rounding of the split bookends (spec: split 1,1 of 5 sequences -> train [0,2), valid [2,5))
py $ref write "$tmp/E" 5 30 60 5
check "train valid" data_path="$tmp/E" split=1,1 seq_length=8 train_iters=4 global_batch_size=2 eval_iters=1
./gdn dataset info --data_path "$tmp/E" --split 1,1 --seq_length 8 --train_iters 4 --global_batch_size 2 --eval_iters 1 > "$tmp/e.txt"
grep -q "E: sequences \[0, 2) = 2" "$tmp/e.txt" && grep -q "E: sequences \[2, 5) = 3" "$tmp/e.txt" && grep -q "^test: none" "$tmp/e.txt"
# YAML lists for the data keys: the same sets as the string form
printf 'data_path: [30, %s, 70, %s]\nsplit: "969,30,1"\nseq_length: 8\ntrain_iters: 10\nglobal_batch_size: 4\neval_interval: 5\neval_iters: 2\n' \
  "$tmp/A" "$tmp/B" > "$tmp/list.yaml"
./gdn dataset info --config "$tmp/list.yaml" > "$tmp/info_yaml.txt"
# errors: split with per-split lists; an empty split range; fla order with a blend
err() { if out=$(./gdn dataset info "$@" 2>&1); then echo "expected a failure: $*"; exit 1; fi; grep -q "$expect" <<<"$out" || { echo "want '$expect', got: $out"; exit 1; }; }
expect="incompatible" err --train_data_path "$tmp/A" --split 9,1 --seq_length 8
expect="valid split of its 40 sequences is empty" err --data_path "$tmp/C" --split 999,1,0 --seq_length 8 --eval_iters 1
expect="data_order fla" err --data_path "$tmp/A $tmp/B" --data_order fla --seq_length 8
expect="no weights" err --train_data_path "1 $tmp/F1 1 $tmp/F2" --data_order fla --seq_length 16
# info names every set's prefixes, ranges and samples
./gdn dataset info --data_path "30 $tmp/A 70 $tmp/B" --split 969,30,1 --seq_length 8 --train_iters 10 \
  --global_batch_size 4 --eval_interval 5 --eval_iters 2 > "$tmp/info.txt"
grep -q "valid: 24 samples requested, 25 in the weighted blend" "$tmp/info.txt"
grep -q "A: sequences \[969, 999) = 30, .*target 8, buffer 9" "$tmp/info.txt"
cmp "$tmp/info.txt" "$tmp/info_yaml.txt"
echo "blend and split: $n items equal to the Python reference over 9 configurations (+ FLA concatenation, YAML lists)"
