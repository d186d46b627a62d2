#!/usr/bin/env bash
# t_prepare: `gdn prepare` end to end. Inputs from tests/prepare/make_inputs.py (JSONL with bad lines, text in
# line and paragraph mode, gzip/zstd copies, Parquet written by parquet-wasm); the .bin/.idx read back by the
# independent Python reader tests/prepare/check.py and compared with the ids of the tokenizer oracle
# (HF tokenizers' Rust core, scripts/tok_oracle.js); the FLA layout against a Python version of spec data.md
# §4.1 (numpy default_rng for the row shuffle); byte-identical output for 1 and 2 workers; failed, --strict,
# interrupted and killed runs leave no .bin/.idx.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/fetch_assets.sh >/dev/null
GDN=${GDN:-./gdn} # the binary under test
[ -x "$GDN" ] || { echo "t_prepare: $GDN is not built (make gdn)" >&2; exit 1; }
PY=/usr/bin/python3
TOK=.assets/llama3/tokenizer.json
T=$(mktemp -d /tmp/t_prepare.XXXXXX)
BG=""
cleanup() { [ -z "$BG" ] || kill "$BG" 2>/dev/null || true; rm -rf "$T"; }
trap cleanup EXIT
IN=$T/in O=$T/out
mkdir -p "$O"
ok() { echo "ok: $*"; }
die() { echo "t_prepare: FAIL: $*" >&2; exit 1; }
prep() { "$GDN" prepare --tokenizer "$TOK" --quiet "$@"; }
check() { $PY tests/prepare/check.py "$@"; }
same() { cmp "$1.bin" "$2.bin" && cmp "$1.idx" "$2.idx" || die "$1 and $2 differ"; }
# no_outputs PREFIX: nothing that looks like a finished dataset, and (unless KEEP_TMP) no temporaries either
no_outputs() {
  for f in "$1.bin" "$1.idx" "$1.json"; do [ ! -e "$f" ] || die "$f exists after a failed run"; done
  if [ -z "${KEEP_TMP:-}" ] && ls "$(dirname "$1")" | grep '\.tmp\.' > /dev/null; then die "temporary files left: $(ls "$(dirname "$1")")"; fi
}

$PY tests/prepare/make_inputs.py "$IN" .assets/corpus/builds
# One oracle run for all texts (it loads the tokenizer once), split back per input.
: > "$T/all.expect"
for n in docs lines paras parasfile pq rows; do cat "$IN/$n.expect.jsonl" >> "$T/all.expect"; done
NODE_PATH=.assets/oracle/node_modules node scripts/tok_oracle.js < "$T/all.expect" > "$T/all.oracle"
NODE_PATH=.assets/oracle/node_modules node scripts/tok_oracle.js --no-bos < "$IN/lines.expect.jsonl" > "$IN/lines.nobos.jsonl"
at=1
for n in docs lines paras parasfile pq rows; do
  k=$(wc -l < "$IN/$n.expect.jsonl")
  sed -n "${at},$((at + k - 1))p" "$T/all.oracle" > "$IN/$n.oracle.jsonl"
  at=$((at + k))
done

# --- documents layout: JSONL with every kind of bad line, 1 and 2 workers, gzip and zstd copies
prep --input "$IN/docs.jsonl" --output-prefix "$O/docs" --append-eod --workers 1 2> "$T/docs.err"
check docs "$O/docs" "$IN/docs.oracle.jsonl" --eod 128001
check sidecar "$O/docs" $(cat "$IN/docs.counts") counts.sequences=33 layout=documents append_eod=true dtype_code=4 \
  tokenizer_sha256="$(sha256sum "$TOK" | cut -d' ' -f1)"
grep -q "docs.jsonl:5: malformed JSON at column 39: expected ',' or '}' in an object, found end of line; skipped" "$T/docs.err" \
  || die "malformed-line message: $(cat "$T/docs.err")"
grep -q 'docs.jsonl:6: no key "text" in the JSON object; skipped' "$T/docs.err" || die "missing-key message"
grep -q 'docs.jsonl:8: key "text" is a number, expected a string; skipped' "$T/docs.err" || die "non-string message"
grep -q 'docs.jsonl:10: invalid UTF-8 (2 sequences' "$T/docs.err" || die "invalid UTF-8 message"
ok "JSONL: objects, strings, bad lines reported as file:line and skipped, ids = oracle"
prep --input "$IN/docs.jsonl" --output-prefix "$O/docs_w2" --append-eod --workers 2 2>/dev/null
same "$O/docs" "$O/docs_w2"
gzip -c "$IN/docs.jsonl" > "$IN/docs.jsonl.gz"
zstd -q -c "$IN/docs.jsonl" > "$IN/docs.jsonl.zst"
prep --input "$IN/docs.jsonl.gz" --output-prefix "$O/docs_gz" --append-eod 2>/dev/null
prep --input "$IN/docs.jsonl.zst" --output-prefix "$O/docs_zst" --append-eod --workers 2 2>/dev/null
same "$O/docs" "$O/docs_gz"
same "$O/docs" "$O/docs_zst"
ok "workers 1 = workers 2; .gz and .zst give the same bytes as plain"

# --- plain text, several inputs in order, --no-bos, Parquet
prep --input "$IN/lines.txt" --output-prefix "$O/lines" 2>/dev/null
check docs "$O/lines" "$IN/lines.oracle.jsonl"
check sidecar "$O/lines" $(cat "$IN/lines.counts") bos=true append_eod=false
prep --input "$IN/lines.txt" --output-prefix "$O/lines_nobos" --no-bos 2>/dev/null
check docs "$O/lines_nobos" "$IN/lines.nobos.jsonl"
check sidecar "$O/lines_nobos" bos=false
prep --input "$IN/paras.txt" --text-mode paragraph --output-prefix "$O/paras" 2>/dev/null
check docs "$O/paras" "$IN/paras.oracle.jsonl"
prep --input "$IN/paras.txt" --text-mode file --output-prefix "$O/parasfile" 2>/dev/null
check docs "$O/parasfile" "$IN/parasfile.oracle.jsonl"
zstd -q -c "$IN/lines.txt" > "$IN/lines.txt.zst"
prep --input "$IN/docs.jsonl" --input "$IN/lines.txt.zst" "$IN/paras.txt" --text-mode paragraph --output-prefix "$O/multi" 2>/dev/null
# lines.txt read as paragraphs: its lines are separated by single newlines, except around the empty line
$PY - "$IN/lines.txt" "$T/multi.texts" <<'EOF'
import json, re, sys
t = open(sys.argv[1], encoding="utf-8", newline="").read()
paras = [p for p in re.split(r"\n(?:[ \t\r]*\n)+", t.strip("\n"))]
open(sys.argv[2], "w").write("".join(json.dumps(p[:-1] if p.endswith("\r") else p) + "\n" for p in paras))
EOF
NODE_PATH=.assets/oracle/node_modules node scripts/tok_oracle.js < "$T/multi.texts" > "$T/multi.lines.oracle"
cat "$IN/docs.oracle.jsonl" "$T/multi.lines.oracle" "$IN/paras.oracle.jsonl" > "$T/multi.oracle"
check docs "$O/multi" "$T/multi.oracle"
ok "text (line, paragraph, file), --no-bos, three inputs of three kinds in order"

# The writer: t_parquet.sh's npm install when it ran first, else the two packages needed here.
PQ_NPM=.assets/parquet_npm
if [ ! -f "$PQ_NPM/.done" ]; then
  PQ_NPM=.assets/prepare_npm
  if [ ! -f "$PQ_NPM/.done" ]; then
    tmp=$(mktemp -d /tmp/prepare_npm.XXXXXX)
    (cd "$tmp" && npm init -y >/dev/null && npm install --silent --no-audit --no-fund parquet-wasm@0.8.0 apache-arrow@21.2.0 >/dev/null)
    touch "$tmp/.done"
    rm -rf "$PQ_NPM" && mv "$tmp" "$PQ_NPM"
  fi
fi
NODE_PATH=$PQ_NPM/node_modules node tests/prepare/write_parquet.js "$IN/pq.texts.jsonl" "$IN/pq.parquet"
prep --input "$IN/pq.parquet" --output-prefix "$O/pq" 2> "$T/pq.err"
check docs "$O/pq" "$IN/pq.oracle.jsonl"
check sidecar "$O/pq" $(cat "$IN/pq.counts")
grep -q 'pq.parquet:row 5: null value in column "text"; skipped' "$T/pq.err" || die "Parquet null message: $(cat "$T/pq.err")"
if prep --input "$IN/pq.parquet" --json-key body --output-prefix "$O/pq_badcol" 2> "$T/pqcol.err"; then die "missing column accepted"; fi
grep -q "pq.parquet" "$T/pqcol.err" || die "missing-column error does not name the file: $(cat "$T/pqcol.err")"
no_outputs "$O/pq_badcol"
ok "Parquet (parquet-wasm, SNAPPY, row groups of 5): ids = oracle, null row skipped"

# --- FLA layout: plain, shuffled from a plain file (read back in place) and from .gz (spill file)
gzip -c "$IN/rows.jsonl" > "$IN/rows.jsonl.gz"
prep --input "$IN/rows.jsonl" --output-prefix "$O/fla" --fla-chunks --seq-length 16 --fla-batch-size 7 --shards 3 --workers 1 2>/dev/null
check fla "$O/fla" "$IN/rows.oracle.jsonl" --seq 16 --batch 7 --shards 3
check sidecar "$O/fla" $(cat "$IN/rows.counts") layout=fla-chunks fla.seq_length=16 fla.shards=3 fla.batch_size=7
prep --input "$IN/rows.jsonl" --output-prefix "$O/fla_w2" --fla-chunks --seq-length 16 --fla-batch-size 7 --shards 3 --workers 2 2>/dev/null
same "$O/fla" "$O/fla_w2"
prep --input "$IN/rows.jsonl" --output-prefix "$O/fla_sh" --fla-chunks --seq-length 16 --fla-batch-size 7 --shards 3 --fla-shuffle-rows 2>/dev/null
check fla "$O/fla_sh" "$IN/rows.oracle.jsonl" --seq 16 --batch 7 --shards 3 --shuffle 42
prep --input "$IN/rows.jsonl.gz" --output-prefix "$O/fla_sh_gz" --fla-chunks --seq-length 16 --fla-batch-size 7 --shards 3 \
  --fla-shuffle-rows --tmp-dir "$T" --workers 2 2>/dev/null
same "$O/fla_sh" "$O/fla_sh_gz"
ls "$T" | grep '\.tmp\.' > /dev/null && die "spill file left in $T"
prep --input "$IN/rows.jsonl" --output-prefix "$O/fla_def" --fla-chunks --seq-length 32 --fla-shuffle-rows --seed 7 2>/dev/null
check fla "$O/fla_def" "$IN/rows.oracle.jsonl" --seq 32 --batch 2048 --shards 64 --shuffle 7
prep --input "$IN/pq.parquet" --output-prefix "$O/fla_pq" --fla-chunks --seq-length 16 --fla-batch-size 4 --shards 2 \
  --fla-shuffle-rows 2>/dev/null
check fla "$O/fla_pq" "$IN/pq.oracle.jsonl" --seq 16 --batch 4 --shards 2 --shuffle 42
# A pipe cannot be read twice: its rows go through the spill file.
mkfifo "$T/rows_pipe.jsonl"
cat "$IN/rows.jsonl" > "$T/rows_pipe.jsonl" &
BG=$!
prep --input "$T/rows_pipe.jsonl" --output-prefix "$O/fla_pipe" --fla-chunks --seq-length 16 --fla-batch-size 7 --shards 3 \
  --tmp-dir "$T" 2>/dev/null
wait "$BG"; BG=""
rm "$T/rows_pipe.jsonl"
same "$O/fla" "$O/fla_pipe"
ok "FLA chunks = spec §4.1 re-implementation (plain, shuffled, shuffled via spill from .gz and Parquet, defaults, pipe)"

# --- failures leave nothing that looks complete
if prep --input "$IN/docs.jsonl" --strict --output-prefix "$O/strict" 2> "$T/strict.err"; then die "--strict accepted a bad line"; fi
grep -q "docs.jsonl:5: malformed JSON.*(--strict)" "$T/strict.err" || die "--strict message: $(cat "$T/strict.err")"
no_outputs "$O/strict"
head -c 1500 "$IN/rows.jsonl.gz" > "$IN/trunc.jsonl.gz"
if prep --input "$IN/docs.jsonl" "$IN/trunc.jsonl.gz" --output-prefix "$O/trunc" 2> "$T/trunc.err"; then die "truncated .gz accepted"; fi
grep -q "trunc.jsonl.gz: truncated gzip stream" "$T/trunc.err" || die "truncated-gzip message: $(cat "$T/trunc.err")"
no_outputs "$O/trunc"
if prep --input "$IN/docs.jsonl" "$IN/absent.jsonl" --output-prefix "$O/absent" 2> "$T/absent.err"; then die "missing input accepted"; fi
grep -q "cannot read input .*absent.jsonl" "$T/absent.err" || die "missing-input message: $(cat "$T/absent.err")"
no_outputs "$O/absent"
printf '{"text": ""}\n{"no": "text"}\n' > "$IN/nothing.jsonl"
if prep --input "$IN/nothing.jsonl" --output-prefix "$O/nothing" 2> "$T/nothing.err"; then die "empty result accepted"; fi
grep -q "no document to write (2 records: 1 bad, 1 empty)" "$T/nothing.err" || die "empty-result message: $(cat "$T/nothing.err")"
no_outputs "$O/nothing"
ok "--strict, a truncated .gz, a missing input and an empty result fail naming the file and leave no outputs"

# An interrupted run (SIGTERM while it waits on a pipe) removes its temporaries; SIGKILL leaves no .bin/.idx.
for sig in TERM KILL; do
  mkfifo "$T/pipe.jsonl"
  (cat "$IN/docs.jsonl"; sleep 60) > "$T/pipe.jsonl" &
  BG=$!
  "$GDN" prepare --tokenizer "$TOK" --input "$T/pipe.jsonl" --output-prefix "$O/sig" --workers 2 --quiet 2> "$T/sig.err" &
  pid=$!
  for _ in $(seq 100); do ls "$O" | grep '^sig\..*tmp' > /dev/null && break; sleep 0.1; done
  ls "$O" | grep '^sig\..*tmp' > /dev/null || die "no temporary output appeared"
  sleep 0.5
  kill -"$sig" "$pid"
  rc=0; { wait "$pid"; } 2>/dev/null || rc=$? # (bash would report "Killed")
  kill "$BG" 2>/dev/null || true; wait "$BG" 2>/dev/null || true; BG=""
  rm -f "$T/pipe.jsonl"
  if [ "$sig" = TERM ]; then
    [ "$rc" = 143 ] || die "SIGTERM: exit code $rc, want 143 ($(cat "$T/sig.err"))"
    grep -q "interrupted by signal 15; partial outputs removed" "$T/sig.err" || die "SIGTERM message: $(cat "$T/sig.err")"
    no_outputs "$O/sig"
  else
    [ "$rc" = 137 ] || die "SIGKILL: exit code $rc"
    KEEP_TMP=1 no_outputs "$O/sig"
    rm -f "$O"/sig.*
  fi
done
ok "SIGTERM: exit 143, temporaries removed; SIGKILL: no .bin/.idx/.json"

"$GDN" prepare --help | grep -- "--fla-shuffle-rows" > /dev/null || die "--help"
if "$GDN" prepare --input "$IN/docs.jsonl" --tokenizer "$TOK" --output-prefix "$O/x" --shards 4 2> "$T/opt.err"; then die "--shards without --fla-chunks accepted"; fi
grep -q "shards only applies with --fla-chunks" "$T/opt.err" || die "option message: $(cat "$T/opt.err")"
if "$GDN" prepare --input "$IN/docs.jsonl" --tokenizer "$TOK" --output-prefix "$O/x.bin" 2>/dev/null; then die "prefix with .bin accepted"; fi
ok "--help and option errors"
echo "t_prepare: all checks passed"
