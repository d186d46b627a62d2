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
# errors: split with per-split lists; an empty split range; fla order with a blend
err() { if out=$(./gdn dataset info "$@" 2>&1); then echo "expected a failure: $*"; exit 1; fi; grep -q "$expect" <<<"$out" || { echo "want '$expect', got: $out"; exit 1; }; }
expect="incompatible" err --train_data_path "$tmp/A" --split 9,1 --seq_length 8
expect="valid split of its 40 sequences is empty" err --data_path "$tmp/C" --split 999,1,0 --seq_length 8 --eval_iters 1
expect="data_order fla" err --data_path "$tmp/A $tmp/B" --data_order fla --seq_length 8
# info names every set's prefixes, ranges and samples
./gdn dataset info --data_path "30 $tmp/A 70 $tmp/B" --split 969,30,1 --seq_length 8 --train_iters 10 \
  --global_batch_size 4 --eval_interval 5 --eval_iters 2 > "$tmp/info.txt"
grep -q "valid: 24 samples requested, 25 in the weighted blend" "$tmp/info.txt"
grep -q "A: sequences \[969, 999) = 30, .*target 8, buffer 9" "$tmp/info.txt"
echo "blend and split: $n items equal to the Python reference over 8 configurations"
