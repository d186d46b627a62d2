#!/usr/bin/env bash
# t_parquet_table.sh: the Parquet table reader (parquet_read_table, data/pq_table.c) against files written by real
# Parquet writers with the schemas of the lm-eval task datasets on the HF hub.
#  1. builds test_parquet_table with AddressSanitizer + UBSan and runs its unit tests (hand-built files: legacy
#     2-level lists, bare repeated fields, lists of lists, every scalar type, the errors);
#  2. tests/parquet/hf_tasks.js writes ai2_arc, hellaswag, openbookqa (main, additional), piqa, mmlu, winogrande,
#     race (ehovy, EleutherAI), lambada, wikitext and a table of the other types, with nulls at every level and
#     empty lists, through arrow-rs (parquet-wasm: codecs x dictionary/plain x data page v1/v2, DELTA and
#     BYTE_STREAM_SPLIT encodings, several row groups, many pages), DuckDB (its list layout and v2 encodings) and
#     parquetjs (lists as bare REPEATED fields: the legacy layout); every row of every file must equal the JSON
#     Lines the writer was given;
#  3. the refusals: MAP / TIMESTAMP / DECIMAL columns (DuckDB), LZ4_RAW / BROTLI, a missing column; the other
#     columns of those files stay readable;
#  4. corrupted copies (byte flips, truncations, cut-out ranges): no crash, errors name the file.
set -euo pipefail
cd "$(dirname "$0")/.."

source tests/parquet/writers.sh
parquet_writers t_parquet_table

PQJS_DIR=.assets/parquetjs_npm # parquetjs: a third writer, with the legacy list layout
if [ ! -f "$PQJS_DIR/.done" ]; then
  echo "t_parquet_table: npm install parquetjs"
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/parquetjs_npm.XXXXXX")
  (cd "$tmp" && npm init -y >/dev/null && npm install --silent --no-audit --no-fund parquetjs@0.11.2 >/dev/null)
  touch "$tmp/.done"
  mkdir -p .assets
  rm -rf "$PQJS_DIR"
  mv "$tmp" "$PQJS_DIR"
fi

B=build/parquet_table_test
mkdir -p "$B"
SRC="tests/test_parquet_table.c data/pq_table.c data/pq_table_decode.c data/pq_footer.c data/pq_pages.c data/pq_format.c data/pq_thrift.c data/pq_encoding.c util/common.c"
echo "t_parquet_table: building test_parquet_table with ASan/UBSan"
# shellcheck disable=SC2086
gcc -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -I. -g -O1 \
  -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer $SRC -o "$B/test_parquet_table_asan" \
  -lcjson -lsnappy -lzstd -lz -lm
T="$B/test_parquet_table_asan"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=99

W=$(mktemp -d "${TMPDIR:-/tmp}/t_parquet_table.XXXXXX")
trap 'rm -rf "$W"' EXIT
n=0
"$T" && n=$((n + 1))

CORPUS=()
[ -d .assets/corpus/builds ] && CORPUS=(--corpus .assets/corpus/builds)
NODE_PATH="$PWD/$NPM_DIR/node_modules:$PWD/$PQJS_DIR/node_modules" node tests/parquet/hf_tasks.js matrix "$W" "${CORPUS[@]}"
[ "$(wc -l < "$W/manifest.txt")" -ge 160 ] || { echo "FAIL: manifest lists too few files"; exit 1; }
while read -r file sidecar; do
  "$T" --check "$file" "$sidecar"
  n=$((n + 1))
done < "$W/manifest.txt"
# The same files, two columns asked for by name (nested ones included), in another order than the file's.
"$T" --check "$W/ai2_arc_duck_zstd_v2.parquet" <(/usr/bin/python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l); print(json.dumps({"answerKey": r["answerKey"], "choices": r["choices"]}))' "$W/ai2_arc.jsonl") \
  answerKey,choices
n=$((n + 1))

expect_error() { "$T" --expect-error "$@"; n=$((n + 1)); }
expect_error "$W/map.parquet" "column 'm' is a MAP, which is not supported"
expect_error "$W/timestamp.parquet" "column 'ts' has logical type TIMESTAMP, which is not supported"
expect_error "$W/decimal.parquet" "column 'price' has logical type DECIMAL, which is not supported"
expect_error "$W/arc_lz4_raw.parquet" "column 'id', row group 0: codec LZ4_RAW (7) is not supported"
expect_error "$W/arc_brotli.parquet" "codec BROTLI (4) is not supported"
expect_error "$W/mmlu_one_group.parquet" "no column 'label' (top-level columns: question, subject, choices, answer)" label
echo '{"ok":1}' > "$W/ok.jsonl"
for f in map timestamp decimal; do "$T" --check "$W/$f.parquet" "$W/ok.jsonl" ok; n=$((n + 1)); done

seed=1
for f in ai2_arc_zstd_dict_v1 hellaswag_gzip_plain_v2 types_uncompressed_plain_v1 types_duck_snappy_v1 \
         mmlu_duck_zstd_v2 mmlu_pqjs_snappy_v2 openbookqa_additional_snappy_plain_v1 race_ehovy_one_group winogrande_duck_gzip_v2 wikitext_document_duck_zstd_v2; do
  "$T" --mutate "$W/$f.parquet" 150 "$seed"
  seed=$((seed + 1)); n=$((n + 1))
done
echo "t_parquet_table: all $n checks passed"
