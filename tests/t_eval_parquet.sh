#!/usr/bin/env bash
# t_eval_parquet: `gdn eval` reads every task from Parquet files as the HF hub ships them (list<string>,
# struct<list<string>>, int32/int64 columns; several shards) and gets exactly what it gets from JSON Lines.
#  1. tests/parquet/hf_tasks.js writes valid rows for arc_easy, arc_challenge, hellaswag, openbookqa, piqa,
#     winogrande, race, lambada_openai, wikitext and three MMLU subjects (test + dev) as JSON Lines, as Parquet
#     written by arrow-rs (parquet-wasm) and as DuckDB rewrites of those;
#  2. tests/parquet/eval_same.c runs the whole eval pipeline (eval_main with the product's Parquet hook, the toy
#     tokenizer and scorer of tests/eval/toy.h) on JSON Lines and on each Parquet copy: the request logs (every
#     rendered context/continuation, token sequence and score), the results JSON and the printed table must be
#     identical; MMLU also with --num-fewshot 2 (its dev split from Parquet);
#  3. the gdn binary (GDN, default ./gdn) reads every task from Parquet and stops at the missing model.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f build/libgdn.a ] || { echo "t_eval_parquet: build/libgdn.a missing (run make first)"; exit 1; }
GDN=${GDN:-./gdn}

source tests/parquet/writers.sh
parquet_writers t_eval_parquet

W=$(mktemp -d "${TMPDIR:-/tmp}/t_eval_parquet.XXXXXX")
trap 'rm -rf "$W"' EXIT
mkdir -p build/parquet_table_test
gcc -std=gnu11 -O1 -Wall -Wextra -Wno-unused-parameter -I. -fopenmp tests/parquet/eval_same.c build/libgdn.a \
  $(cat build/ldlibs.txt) -o build/parquet_table_test/eval_same
NODE_PATH="$PWD/$NPM_DIR/node_modules" node tests/parquet/hf_tasks.js eval "$W/data"

BASE=arc_easy,arc_challenge,hellaswag,openbookqa,piqa,winogrande,race,lambada_openai,wikitext
MMLU=mmlu_abstract_algebra,mmlu_anatomy,mmlu_world_religions
for writer in arrow duck; do
  mkdir -p "$W/$writer-base" "$W/$writer-mmlu"
  build/parquet_table_test/eval_same "$W/data/jsonl" "$W/data/$writer" "$W/$writer-base" "$BASE"
  build/parquet_table_test/eval_same "$W/data/jsonl" "$W/data/$writer" "$W/$writer-mmlu" "$MMLU" 2
done

# The command itself: every task read from Parquet (MMLU's dev split too), then the model is the missing piece.
[ -x "$GDN" ] || { echo "t_eval_parquet: $GDN missing (run make first)"; exit 1; }
bash scripts/fetch_assets.sh >/dev/null
TOK=.assets/llama3/tokenizer.json
[ -f "$TOK" ] || { echo "t_eval_parquet: $TOK missing after fetch_assets.sh"; exit 1; }
for run in "$BASE 0" "$MMLU 2"; do
  set -- $run
  set +e
  "$GDN" eval --load "$W/no_model" --tokenizer "$TOK" --tasks "$1" --num-fewshot "$2" --data-dir "$W/data/arrow" \
    > "$W/out.txt" 2> "$W/err.txt"
  rc=$?
  set -e
  cat "$W/err.txt"
  [ $rc -ne 0 ] || { echo "FAIL: gdn eval without a model exited 0"; exit 1; }
  for t in ${1//,/ }; do
    grep -q "^eval: $t: .* from .*\.parquet" "$W/err.txt" || { echo "FAIL: $t not read from Parquet"; exit 1; }
  done
  grep -q "^gdn: eval: $W/no_model: " "$W/err.txt" || { echo "FAIL: no one-line model error"; exit 1; }
  [ "$(grep -c '^gdn: ' "$W/err.txt")" -eq 1 ] || { echo "FAIL: more than one error line"; exit 1; }
done
echo "PASS t_eval_parquet"
