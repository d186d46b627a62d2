#!/usr/bin/env bash
# t_fuzz.sh: a bounded fuzz smoke of every file parser under ASan + UBSan (`make sanitize`: build-san/).
# tests/fuzz/fuzz.c mutates a valid seed of each format FUZZ_N times (deterministic: the same inputs on every
# run) - safetensors, checkpoint metadata, .idx/.bin, tokenizer.json, YAML config, Parquet, JSONL, torch .pt -
# and every input must give a result or an error: a sanitizer report or a crash fails the test, and the input
# is kept as build-san/fuzz-crash-KIND.*. Then the bad-input checks of t_reliability.sh run on the
# sanitized gdn (the checkpoint format message was a use-after-free only ASan sees).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}
N=${FUZZ_N:-4000}
if [ ! -x build-san/fuzz ] || [ ! -x build-san/gdn ] || [ -n "$(find util model data io train eval infer tests/fuzz -newer build-san/fuzz -name '*.[ch]' | head -1)" ]; then
  echo "t_fuzz: make sanitize"
  make -s -j"$(nproc)" sanitize >/dev/null
fi
tmp=$(mktemp -d /tmp/gdn_t_fuzz.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1
export OMP_NUM_THREADS=1

# seeds, all valid
"$PY" tests/fuzz/make_seeds.py "$tmp" >/dev/null
"$PY" tests/ref/make_dataset.py "$tmp/seed" 3000 50 1
GDN=./gdn; [ -x "$GDN" ] || GDN=build-san/gdn
"$PY" tests/ref/make_dataset.py "$tmp/train" 2000 50 2
$GDN train --config configs/tiny.yaml --vocab_size 50 --hidden_size 16 --ffn_hidden_size 16 --num_layers 2 \
  --linear_key_head_dim 8 --linear_value_head_dim 8 --train_data_path "$tmp/train" --seq_length 16 \
  --micro_batch_size 1 --global_batch_size 1 --train_iters 1 --device cpu --save "$tmp/ck" >/dev/null
"$PY" tests/convert/fla_io.py make-pt "$tmp/seed.pt"

total=0
fuzz() { # KIND SEED
  local d="$tmp/run_$1" t0=$(date +%s)
  mkdir -p "$d"
  if ! out=$(build-san/fuzz "$1" "$2" "$d" "$N" 2>&1); then
    echo "$out" | tail -n 30
    for f in "$d"/input* "$d"/iter_0000001/model.safetensors; do
      [ -f "$f" ] && cp "$f" "build-san/fuzz-crash-$1.$(basename "$f")"
    done
    echo "FAIL: fuzz $1 crashed; the input is build-san/fuzz-crash-$1.*"
    exit 1
  fi
  echo "$(echo "$out" | tail -n 1) [$(( $(date +%s) - t0 ))s]"
  total=$((total + N))
}
fuzz st "$tmp/seed.safetensors"
fuzz ckpt "$tmp/ck/iter_0000001/model.safetensors"
fuzz idx "$tmp/seed.idx"
fuzz tok "$tmp/seed.json"
fuzz yaml configs/tiny.yaml
fuzz parquet "$tmp/seed.parquet"
fuzz jsonl "$tmp/seed.jsonl"
fuzz pt "$tmp/seed.pt"
echo "t_fuzz: $total inputs over 8 parsers, no sanitizer report"
GDN=build-san/gdn bash tests/t_reliability.sh | tail -n 1
