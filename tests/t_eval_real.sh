#!/usr/bin/env bash
# t_eval_real: gdn eval with the product's tokenizer and Parquet reader (eval/eval.c hooks) on small task files
# (tests/eval/real_data.py):
#  1. every (context, continuation) pair of every task, in both BOS modes, tokenized by gdn eval (real Llama-3
#     tokenizer) equals lm-eval's rule applied with the reference tokenizer (HF tokenizers through
#     scripts/tok_oracle.js), tests/eval/pairs_check.py;
#  2. winogrande, race, lambada_openai and wikitext read from Parquet files written by arrow-rs (parquet-wasm,
#     tests/eval/make_parquet.js) render exactly the same documents as from JSON Lines;
#  3. `gdn eval` itself on that data reads every task and stops at the missing model with one clear line.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
bash scripts/fetch_assets.sh >/dev/null
TOK=.assets/llama3/tokenizer.json
[ -f "$TOK" ] || { echo "t_eval_real: $TOK missing after fetch_assets.sh"; exit 1; }
[ -f build/libgdn.a ] || { echo "t_eval_real: build/libgdn.a missing (run make first)"; exit 1; }

source tests/parquet/writers.sh
parquet_writers t_eval_real

W=$(mktemp -d "${TMPDIR:-/tmp}/t_eval_real.XXXXXX")
trap 'rm -rf "$W"' EXIT
mkdir -p build/eval_test
gcc -std=gnu11 -O1 -Wall -Wextra -Wno-unused-parameter -I. -fopenmp tests/eval/real_io.c build/libgdn.a \
  $(cat build/ldlibs.txt) -o build/eval_test/real_io

$PY tests/eval/real_data.py "$W/jsonl"
TASKS=arc_easy,hellaswag,openbookqa,piqa,winogrande,race,lambada_openai,wikitext,mmlu_abstract_algebra

# 1. pair tokenization against the reference tokenizer
build/eval_test/real_io pairs "$TOK" "$W/jsonl" "$TASKS" "$W/pairs.jsonl"
$PY tests/eval/pairs_check.py texts "$W/pairs.jsonl" "$W/texts.jsonl"
export NODE_PATH="$PWD/.assets/oracle/node_modules"
node scripts/tok_oracle.js < "$W/texts.jsonl" > "$W/bos.jsonl"
node scripts/tok_oracle.js --no-bos < "$W/texts.jsonl" > "$W/nobos.jsonl"
$PY tests/eval/pairs_check.py check "$W/pairs.jsonl" "$W/texts.jsonl" "$W/bos.jsonl" "$W/nobos.jsonl"

# 2. Parquet == JSON Lines for the tasks whose columns are all strings
P="$W/parquet"
conv=()
for f in allenai/winogrande/winogrande_xl/validation-00000-of-00001 EleutherAI/race/high/test-00000-of-00001 \
         EleutherAI/lambada_openai/default/test-00000-of-00001 \
         EleutherAI/wikitext_document_level/wikitext-2-raw-v1/test-00000-of-00001; do
  conv+=("$W/jsonl/$f.jsonl" "$P/$f.parquet")
done
NODE_PATH="$PWD/$NPM_DIR/node_modules" node tests/eval/make_parquet.js "${conv[@]}"
build/eval_test/real_io compare "$W/jsonl" "$P" winogrande,race,lambada_openai,wikitext

# 3. the command: all data read (Parquet included), then the model is the missing piece
set +e
./gdn eval --load "$W/no_model" --tokenizer "$TOK" --tasks winogrande,race,lambada_openai,wikitext \
  --data-dir "$P" > "$W/out.txt" 2> "$W/err.txt"
rc=$?
set -e
cat "$W/err.txt"
[ $rc -ne 0 ] || { echo "FAIL: gdn eval without a model exited 0"; exit 1; }
for t in winogrande race lambada_openai wikitext; do
  grep -q "^eval: $t: .* from .*\.parquet" "$W/err.txt" || { echo "FAIL: $t not read from Parquet"; exit 1; }
done
grep -q "^gdn: eval: $W/no_model: " "$W/err.txt" || { echo "FAIL: no one-line model error"; exit 1; }
[ "$(grep -c '^gdn: ' "$W/err.txt")" -eq 1 ] || { echo "FAIL: more than one error line"; exit 1; }
echo "PASS t_eval_real"
