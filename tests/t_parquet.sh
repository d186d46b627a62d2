#!/usr/bin/env bash
# t_parquet.sh: the Parquet reader (data/parquet.c) against files written by real Parquet writers.
#  1. installs the writers (npm: parquet-wasm = arrow-rs's writer, apache-arrow, @duckdb/node-api) into
#     .assets/parquet_npm once;
#  2. tests/parquet/gen.js writes every codec x {dictionary, plain} x {page v1, v2}, DELTA encodings, dictionary
#     fallback, REQUIRED / all-null / empty columns, a FineWeb-like schema with nested columns, unsupported
#     codecs, and DuckDB rewrites, each with a JSONL sidecar of what the writer was given;
#  3. builds test_parquet with AddressSanitizer + UBSan and checks every value against its sidecar, the error
#     messages for broken files, and a few hundred corrupted copies (no crash, errors name the file);
#  4. times the optimised reader on a FineWeb-like snappy file (PARQUET_BENCH_MB MB of text, default 20).
set -euo pipefail
cd "$(dirname "$0")/.."

source tests/parquet/writers.sh
parquet_writers t_parquet

B=build/parquet_test
mkdir -p "$B"
SRC="tests/test_parquet.c data/parquet.c data/pq_footer.c data/pq_pages.c data/pq_format.c data/pq_thrift.c data/pq_encoding.c util/common.c"
LIBS="-lsnappy -lzstd -lz -lm"
CFLAGS="-std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -I."
echo "t_parquet: building test_parquet with ASan/UBSan and -O3"
# shellcheck disable=SC2086
gcc $CFLAGS -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer $SRC -o "$B/test_parquet_asan" $LIBS
# shellcheck disable=SC2086
gcc $CFLAGS -O3 -march=native $SRC -o "$B/test_parquet_opt" $LIBS
T="$B/test_parquet_asan"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=99

W=$(mktemp -d "${TMPDIR:-/tmp}/t_parquet.XXXXXX")
trap 'rm -rf "$W"' EXIT
CORPUS=()
[ -d .assets/corpus/builds ] && CORPUS=(--corpus .assets/corpus/builds)
NODE_PATH="$PWD/$NPM_DIR/node_modules" node tests/parquet/gen.js "$W" "${CORPUS[@]}"

n=0
"$T" && n=$((n + 1))
while read -r file column sidecar; do
  "$T" --check "$file" "$column" "$sidecar"
  n=$((n + 1))
done < "$W/manifest.txt"
[ "$(wc -l < "$W/manifest.txt")" -ge 40 ] || { echo "FAIL: manifest lists too few files"; exit 1; }

expect_error() { "$T" --expect-error "$@"; n=$((n + 1)); }
# Unsupported codecs are named.
expect_error "$W/codec_lz4_raw.parquet" text "codec LZ4_RAW (7) is not supported"
expect_error "$W/codec_lz4.parquet" text "codec LZ4 (5) is not supported"
expect_error "$W/codec_brotli.parquet" text "codec BROTLI (4) is not supported"
# Columns that are missing or not strings.
expect_error "$W/fineweb_snappy_v1.parquet" nope "no column 'nope' (top-level columns: id, meta, tags, text, dump, url"
expect_error "$W/fineweb_snappy_v1.parquet" meta "column 'meta' is a nested group"
expect_error "$W/fineweb_snappy_v1.parquet" tags "column 'tags' is a nested group"
expect_error "$W/fineweb_snappy_v1.parquet" token_count "column 'token_count' has physical type INT64, expected BYTE_ARRAY"
expect_error "$W/duck_fineweb_snappy_v1.parquet" language_score "column 'language_score' has physical type DOUBLE"
expect_error "$W/no_such_file.parquet" text "cannot open $W/no_such_file.parquet: No such file"
# Truncated files: the trailing magic is gone.
src="$W/mixed_snappy_plain_v1.parquet"
size=$(stat -c %s "$src")
head -c $((size - 1)) "$src" > "$W/trunc1.parquet"
expect_error "$W/trunc1.parquet" text "no PAR1 magic at the end (offset $((size - 5)))"
head -c 1000 "$src" > "$W/trunc1000.parquet"
expect_error "$W/trunc1000.parquet" text "file truncated or not Parquet"
head -c 5 "$src" > "$W/trunc5.parquet"
expect_error "$W/trunc5.parquet" text "not a Parquet file (5 bytes"
# Bad magic at the start.
cp "$src" "$W/magic.parquet"
printf 'PAR2' | dd of="$W/magic.parquet" bs=1 seek=0 conv=notrunc status=none
expect_error "$W/magic.parquet" text "not a Parquet file (no PAR1 magic at offset 0)"
# Footer length that points before the start of the file.
cp "$src" "$W/footlen.parquet"
printf '\xff\xff\xff\x7f' | dd of="$W/footlen.parquet" bs=1 seek=$((size - 8)) conv=notrunc status=none
expect_error "$W/footlen.parquet" text "footer length 2147483647 (at offset $((size - 8))) does not fit"
# Corrupt page header: the first page of the only column starts right after the leading magic.
cp "$src" "$W/pagehdr.parquet"
printf '\xff\xff\xff\xff\xff\xff\xff\xff' | dd of="$W/pagehdr.parquet" bs=1 seek=4 conv=notrunc status=none
expect_error "$W/pagehdr.parquet" text "row group 0, page at offset 4: page header: unknown field type code at offset 4"
# Page header whose first field (page type) is cut short: a varint that runs into the next bytes forever.
cp "$src" "$W/pagevarint.parquet"
printf '\x15\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff' | dd of="$W/pagevarint.parquet" bs=1 seek=4 conv=notrunc status=none
expect_error "$W/pagevarint.parquet" text "page at offset 4: page header: varint longer than 10 bytes"
# Corrupt compressed data inside the first page.
cp "$src" "$W/snappy.parquet"
printf '\xff%.0s' $(seq 16) | dd of="$W/snappy.parquet" bs=1 seek=60 conv=notrunc status=none
expect_error "$W/snappy.parquet" text "row group 0, page at offset 4: SNAPPY: corrupt data"

# Corrupted copies: byte flips in the footer and anywhere, truncations, cut-out ranges.
for f in mixed_snappy_dict_v1 mixed_zstd_plain_v2 mixed_uncompressed_plain_v1 mixed_gzip_dict_v2 \
         mixed_delta_byte_array_v2 mixed_delta_length_byte_array_v1 all_null_v1 duck_fineweb_zstd_v2 fineweb_snappy_v2; do
  "$T" --mutate "$W/$f.parquet" text 120 "$n"
  n=$((n + 1))
done

NODE_PATH="$PWD/$NPM_DIR/node_modules" node tests/parquet/gen.js "$W/bench" "${CORPUS[@]}" --bench "${PARQUET_BENCH_MB:-20}"
"$B/test_parquet_opt" --bench "$W/bench/bench.parquet" text
echo "t_parquet: all $n checks passed"
