#!/usr/bin/env bash
# t_dataset.sh: `gdn dataset info|show` end to end: help, the info summary, sequences, Megatron and FLA
# samples (checked against the spec's worked examples, data.md §3.1 and §4.2.6), a step's rank layout,
# decoded text, and one-line errors for bad input.
set -euo pipefail
cd "$(dirname "$0")/.."
GDN=${GDN:-./gdn}  # GDN=path runs another build (e.g. a sanitizer one)
PY=${PYTHON:-/usr/bin/python3}
[ -x "$GDN" ] || { echo "t_dataset: $GDN not built (run make)"; exit 1; }
tmp=$(mktemp -d /tmp/gdn_t_dataset.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
trap 'echo "FAIL: line $LINENO: $BASH_COMMAND exited $?"' ERR

n_ok=0
ok() { n_ok=$((n_ok + 1)); echo "ok: $*"; }
fail() { echo "FAIL: $*"; exit 1; }
# expect_line OUTPUT LINE: OUTPUT has LINE as a whole line.
expect_line() { grep -qxF -- "$2" <<<"$1" || { echo "$1"; fail "missing line: $2"; }; }
# expect_error EXIT SUBSTRING CMD...: CMD fails with status EXIT, one stderr line containing SUBSTRING.
expect_error() {
  local want=$1 sub=$2; shift 2
  local rc=0
  "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [ "$rc" = "$want" ] || { cat "$tmp/err"; fail "'$*' exited $rc, expected $want"; }
  grep -qF -- "$sub" "$tmp/err" || { cat "$tmp/err"; fail "'$*': stderr lacks '$sub'"; }
  if [ "$want" = 1 ]; then
    [ "$(wc -l <"$tmp/err")" = 1 ] || { cat "$tmp/err"; fail "'$*': error is not one line"; }
    [ ! -s "$tmp/out" ] || fail "'$*': printed to stdout before failing"
  fi
  ok "error: $(head -n 1 "$tmp/err")"
}

"$PY" tests/dataset/oracle.py megatron "$tmp" >/dev/null
"$PY" tests/dataset/oracle.py fla "$tmp" >/dev/null
"$PY" tests/dataset/oracle.py cli-fixtures "$tmp"

# ---- help
for args in "--help" "info --help" "show --help" "show $tmp/worked --index 0 -h"; do
  out=$($GDN dataset $args)
  grep -q "^usage: gdn dataset info PREFIX" <<<"$out" || fail "gdn dataset $args: no usage"
done
ok "--help on dataset, info, show"
expect_error 2 "usage: gdn dataset" $GDN dataset

# ---- info (worked example: sizes [5,3,7,2], one document each)
out=$($GDN dataset info "$tmp/worked")
expect_line "$out" "dtype:       int32 (code 4, 4 bytes per token)"
expect_line "$out" "documents:   4 (document_indices: 5 entries)"
expect_line "$out" "sequences:   4"
expect_line "$out" "tokens:      17"
expect_line "$out" "seq length:  min 2, mean 4.25, max 7"
expect_line "$out" "files:       $tmp/worked.idx $(stat -c %s "$tmp/worked.idx") bytes, $tmp/worked.bin $(stat -c %s "$tmp/worked.bin") bytes"
ok "info on the worked example"
out=$($GDN dataset info "$tmp/fla_10_42")
expect_line "$out" "documents:   10 (document_indices: 10 entries, no leading 0 as convert_fla_to_megatron.py writes)"
expect_line "$out" "seq length:  min 4, mean 4.00, max 4"
ok "info on a convert_fla_to_megatron-style dataset"

# ---- show: raw sequences (token 100*doc + pos)
out=$($GDN dataset show "$tmp/worked" --index 2 --count 2)
expect_line "$out" "sequence 2 (document 2, 7 tokens at token offset 8)"
expect_line "$out" "ids (7): 200 201 202 203 204 205 206"
expect_line "$out" "ids (2): 300 301"
ok "show sequences"

# ---- show: Megatron order, spec data.md §3.1 worked example (L=4, num_samples 6, seed 42)
out=$($GDN dataset show "$tmp/worked" --order megatron --seq-length 4 --num-samples 6 --index 0 --count 3)
expect_line "$out" "megatron order over $tmp/worked: seq_length 4, seed 42, num_samples 6 -> 8 samples in the index"
expect_line "$out" "inputs (4): 202 203 204 205"
expect_line "$out" "labels (4): 203 204 205 206"
expect_line "$out" "inputs (4): 100 101 102 300"
expect_line "$out" "labels (4): 101 102 300 301"
expect_line "$out" "inputs (4): 301 0 1 2"
expect_line "$out" "labels (4): 0 1 2 3"
ok "Megatron items 0-2 of the spec's worked example"

# ---- show: FLA order, spec data.md §4.2.6 (N=10, W=2, b=2, a=1; chunk c holds 1000*c + t)
out=$($GDN dataset show "$tmp/fla_10_42" --order fla --seq-length 4 --step 0 --micro-batch-size 2 --world 2 --global-batch-size 4)
expect_line "$out" "rank 0 micro 0 row 0: position 0 ids 0 1 2 3"
expect_line "$out" "rank 0 micro 0 row 1: position 1 ids 4000 4001 4002 4003"
expect_line "$out" "rank 1 micro 0 row 0: position 2 ids 6000 6001 6002 6003"
expect_line "$out" "rank 1 micro 0 row 1: position 3 ids 1000 1001 1002 1003"
step1=$($GDN dataset show "$tmp/fla_10_42" --order fla --seq-length 4 --step 1 --micro-batch-size 1 --world 4 --global-batch-size 4 |
  sed -n 's/.* ids \([0-9]*\)000 .*/\1/p' | sort -n | tr '\n' ' ')
[ "$step1" = "2 3 5 8 " ] || fail "FLA step 1 chunk set is '$step1', spec says {C3,C2,C5,C8}"
out=$($GDN dataset show "$tmp/fla_10_42" --order fla --seq-length 4 --index 12)
expect_line "$out" "sample at position 12 (epoch 1)"
grep -q "^labels (4): [0-9]* [0-9]* [0-9]* -1$" <<<"$out" || fail "FLA labels do not end in -1"
ok "FLA order: spec §4.2.6 step 0 per rank, step 1 set, epoch 1, labels"

# ---- decoded text (tiny byte-level tokenizer: id = byte, 256 = <|eot|>)
out=$($GDN dataset show "$tmp/bytes" --index 0 --count 2 --tokenizer "$tmp/tiny_tok.json")
expect_line "$out" "text: Hi there"
expect_line "$out" "text: é!<|eot|>"
ok "--tokenizer decodes"

# ---- errors: one line, naming what is wrong
expect_error 1 "cannot open $tmp/nope.idx" $GDN dataset info "$tmp/nope"
expect_error 1 "unknown option '--bogus'" $GDN dataset show "$tmp/worked" --index 0 --bogus 3
expect_error 1 "--seed needs --order" $GDN dataset show "$tmp/worked" --index 0 --seed 3
expect_error 1 "--index: expected" $GDN dataset show "$tmp/worked" --index abc
expect_error 1 "--index I is required" $GDN dataset show "$tmp/worked"
expect_error 1 "sequence 4 is out of range: $tmp/worked has 4 sequences" $GDN dataset show "$tmp/worked" --index 3 --count 2
expect_error 1 "position 8 is beyond the 8 samples" $GDN dataset show "$tmp/worked" --order megatron --seq-length 4 --num-samples 6 --index 6 --count 3
expect_error 1 "step 2 reads positions up to 11, beyond the 8 samples" \
  $GDN dataset show "$tmp/worked" --order megatron --seq-length 4 --num-samples 6 --step 2 --micro-batch-size 2 --world 2 --global-batch-size 4
expect_error 1 "FLA order needs every sequence to be one chunk of seq_length 4 tokens, but sequence 0 has 5" \
  $GDN dataset show "$tmp/worked" --order fla --seq-length 4 --index 0
expect_error 1 "--order: expected megatron or fla" $GDN dataset show "$tmp/worked" --order random --index 0
expect_error 1 "multiple of --micro-batch-size 3 x --world 2" \
  $GDN dataset show "$tmp/fla_10_42" --order fla --seq-length 4 --step 0 --micro-batch-size 3 --world 2 --global-batch-size 8
expect_error 1 "unknown subcommand 'list'" $GDN dataset list "$tmp/worked"
expect_error 1 "missing PREFIX" $GDN dataset info
head -c 20 "$tmp/worked.idx" >"$tmp/short.idx"; cp "$tmp/worked.bin" "$tmp/short.bin"
expect_error 1 "$tmp/short.idx: file is 20 bytes, shorter than the 34-byte MMIDIDX header" $GDN dataset info "$tmp/short"

echo "t_dataset: $n_ok checks passed"
