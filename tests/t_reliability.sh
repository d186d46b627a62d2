#!/usr/bin/env bash
# t_reliability.sh: the defects of the bad-input tour (issue 12), each one a check that failed before its fix:
#   strict flags on every subcommand (unknown flag, missing value, non-number, out of range: one line naming
#   the flag), one --config, every config key's range and float overflow, tokenizer ids bounded by the
#   vocabulary, safetensors names with NUL refused, the checkpoint format error message (a use-after-free),
#   stale temp files of killed saves/prepares removed, greedy text of special tokens shown, eval's tokenizer.
set -euo pipefail
cd "$(dirname "$0")/.."
GDN=${GDN:-./gdn}
PY=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d /tmp/gdn_t_rel.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
n_ok=0 n_fail=0
ok() { n_ok=$((n_ok + 1)); echo "ok: $*"; }
# KEEP_GOING=1 counts failures instead of stopping (to tally an older build: GDN=old/gdn KEEP_GOING=1)
fail() { n_fail=$((n_fail + 1)); echo "FAIL: $*"; [ -n "${KEEP_GOING:-}" ] || exit 1; }
# expect_error SUBSTRING CMD...: CMD exits 1 with one stderr line containing SUBSTRING and nothing on stdout.
expect_error() {
  local sub=$1; shift
  local rc=0
  "$@" >"$tmp/out" 2>"$tmp/err" </dev/null || rc=$?
  [ "$rc" = 1 ] || { head -c 300 "$tmp/err"; fail "'$*' exited $rc, expected 1"; return 0; }
  grep -qF -- "$sub" "$tmp/err" || { head -c 300 "$tmp/err"; fail "'$*': stderr lacks '$sub'"; return 0; }
  [ "$(wc -l <"$tmp/err")" = 1 ] || { head -c 300 "$tmp/err"; fail "'$*': error is not one line"; return 0; }
  [ ! -s "$tmp/out" ] || { head -c 300 "$tmp/out"; fail "'$*': printed to stdout before failing"; return 0; }
  n_ok=$((n_ok + 1))
}

# ---- a toy model (vocab 8) and dataset
"$PY" tests/ref/make_dataset.py "$tmp/data" 4000 8 1
"$PY" tests/reliability/fixtures.py tokenizers "$tmp"
common=(--config configs/tiny.yaml --vocab_size 8 --train_data_path "$tmp/data" --seq_length 16 --micro_batch_size 1
        --global_batch_size 1 --device cpu --lr_warmup_iters 0 --log_interval 1)
$GDN train "${common[@]}" --train_iters 2 --save "$tmp/ck" >"$tmp/train.log"
CK=$tmp/ck
ok "toy checkpoint"

# ---- strict flags on every subcommand
for c in "generate --load $CK --prompt a" "verify --load $CK" "score --load $CK --data $tmp/data" \
         "logits --load $CK --ids x --out y" "tokenize --tokenizer $tmp/tok_allspecial.json" \
         "eval --load $CK --tasks hellaswag --data-dir $tmp" "dataset info $tmp/data" "convert --list x" \
         "params --config configs/tiny.yaml" "bench --config configs/tiny.yaml" "train --config configs/tiny.yaml" \
         "prepare --input x --tokenizer y --output-prefix $tmp/p"; do
  # shellcheck disable=SC2086
  expect_error "--temprature" $GDN $c --temprature 1
done
ok "unknown flag named by 12 subcommands"
expect_error "generate: unknown option '--temprature'" $GDN generate --load "$CK" --prompt a --temprature 0.5
expect_error "generate: --max-new-tokens expects an integer" $GDN generate --load "$CK" --prompt a --max-new-tokens abc
expect_error "generate: --top-p must be in" $GDN generate --load "$CK" --prompt a --top-p 2
expect_error "generate: --top-k needs a value" $GDN generate --load "$CK" --prompt a --top-k --greedy
expect_error "generate: --greedy takes no value" $GDN generate --load "$CK" --prompt a --greedy=1
expect_error "generate: --seed given twice" $GDN generate --load "$CK" --prompt a --seed 1 --seed 2
expect_error "generate: unexpected argument 'stray'" $GDN generate --load "$CK" --prompt a stray
expect_error "verify: --threshold expects a number" $GDN verify --load "$CK" --threshold 6x
expect_error "verify: --max-new-tokens needs a value" $GDN verify --load "$CK" --max-new-tokens
expect_error "score: --max-samples expects an integer" $GDN score --load "$CK" --data "$tmp/data" --max-samples abc
expect_error "score: --seq-length must be in" $GDN score --load "$CK" --data "$tmp/data" --seq-length 0
expect_error "logits: --ids needs a value" $GDN logits --load "$CK" --out y --ids
expect_error "tokenize: --threads expects an integer" $GDN tokenize --tokenizer "$tmp/tok_allspecial.json" --threads two
expect_error "tokenize: --tokenizer needs a value" $GDN tokenize --tokenizer
expect_error "bench: --steps expects an integer" $GDN bench --config configs/tiny.yaml --steps 1.5
expect_error "eval: --num-fewshot expects an integer" $GDN eval --load "$CK" --tasks hellaswag --data-dir "$tmp" --num-fewshot x
ok "missing values, non-numbers, out-of-range numbers, repeats and strays: one line naming the flag"

# ---- config: one --config, every key's range, float overflow
expect_error "--config given twice" $GDN train --config configs/tiny.yaml --config configs/tiny.yaml
for kv in "adam_eps -1" "adam_eps 0" "weight_decay -0.1" "save_interval -1" "exit_interval -5" "clip_grad -1" \
          "lr -1" "min_lr -1" "init_method_std -1" "norm_epsilon 0" "seed -1" "lr_warmup_iters -1" \
          "micro_batch_size 0" "vocab_size 0" "nproc_per_node 0" "adam_beta1 1.5"; do
  set -- $kv
  expect_error "key '$1': $2 is out of range" $GDN train --config configs/tiny.yaml --"$1" "$2"
done
expect_error "key 'lr': 1e39 overflows a float" $GDN train --config configs/tiny.yaml --lr 1e39
printf 'adam_eps: -1e-8\n' >"$tmp/bad.yaml"
expect_error "$tmp/bad.yaml:1: key 'adam_eps': -1e-8 is out of range" $GDN train --config "$tmp/bad.yaml"
ok "config ranges (YAML and flags), float overflow, one --config"

# ---- tokenizer ids bounded by the vocabulary (2^31-1 overflowed max_id + 1; 999999999 allocated ~9 GB)
expect_error "added_tokens[0]: id 2147483647 is far beyond the vocabulary" $GDN tokenize --tokenizer "$tmp/tok_bigid.json"
expect_error "added_tokens[0]: id 999999999 is far beyond the vocabulary" $GDN tokenize --tokenizer "$tmp/tok_hugeid.json"
ok "tokenizer ids bounded"

# ---- safetensors: a name with NUL is refused (gdn kept "a", other readers "a\0b")
"$PY" tests/reliability/fixtures.py st-nul "$tmp/nul.safetensors"
expect_error "contains NUL" $GDN convert --list "$tmp/nul.safetensors"
ok "safetensors NUL name refused"

# ---- checkpoint format error: the message names the format (it was read after st_close freed it)
cp -r "$CK" "$tmp/evil"
"$PY" tests/reliability/fixtures.py set-meta "$tmp/evil/iter_0000002/model.safetensors" format evil
expect_error "__metadata__ format is 'evil', expected 'gdn.c-checkpoint'" \
  $GDN convert --to-hf --load "$tmp/evil" --output-dir "$tmp/evil_hf"
ok "format error message intact"

# ---- stale temp files: a dead process's are removed when the directory is next used, a live one's kept
sh -c 'exit 0' & dead=$!; wait $dead
touch "$CK/iter_0000002/model.safetensors.tmp.$dead" "$CK/latest_checkpointed_iteration.txt.tmp.$dead" \
      "$CK/iter_0000002/model.safetensors.tmp.$$"
$GDN train "${common[@]}" --train_iters 3 --save "$CK" --load "$CK" >"$tmp/train2.log" 2>&1
[ ! -e "$CK/iter_0000002/model.safetensors.tmp.$dead" ] && [ ! -e "$CK/latest_checkpointed_iteration.txt.tmp.$dead" ] \
  || fail "stale checkpoint temp files left"
[ -e "$CK/iter_0000002/model.safetensors.tmp.$$" ] || fail "a live process's temp file was removed"
grep -q "removed 2 temp files of interrupted saves" "$tmp/train2.log" || { cat "$tmp/train2.log"; fail "no removal note"; }
printf '<|s1|>\n<|s2|>\n' >"$tmp/in.txt"
mkdir -p "$tmp/prep"; touch "$tmp/prep/x.bin.tmp.$dead" "$tmp/prep/x.idx.tmp.$dead"
$GDN prepare --input "$tmp/in.txt" --tokenizer "$tmp/tok_allspecial.json" --output-prefix "$tmp/prep/x" \
  --text-mode line >"$tmp/prep.log" 2>&1 || { cat "$tmp/prep.log"; fail "prepare"; }
[ -z "$(ls "$tmp/prep" | grep "\.tmp\.")" ] || fail "stale prepare temp files left: $(ls "$tmp/prep")"
ok "stale temp files of dead processes removed (checkpoint dir and prepare's output dir), live ones kept"

# ---- greedy generate whose continuation is only special tokens: shown, and said so
mkdir -p "$tmp/sp"
$GDN train "${common[@]}" --train_iters 1 --save "$tmp/sp" >/dev/null
out=$($GDN generate --load "$tmp/sp" --tokenizer "$tmp/tok_allspecial.json" --prompt "<|s1|>" --no-bos --greedy \
      --max-new-tokens 4 --device cpu 2>"$tmp/gen.err")
grep -q "^generate: all [0-9]* generated tokens are special" "$tmp/gen.err" || { cat "$tmp/gen.err"; fail "no note"; }
[ "$(grep -o "<|s[0-7]|>" <<<"$out" | wc -l)" -ge 2 ] || fail "special tokens not shown: '$out'"
ok "greedy continuation of special tokens only: shown ('$out') and explained"

# ---- eval finds the tokenizer beside the checkpoint, as generate does
cp "$tmp/tok_allspecial.json" "$CK/tokenizer.json"
rc=0; $GDN eval --load "$CK/iter_0000003" --tasks hellaswag --data-dir "$tmp/none" >"$tmp/ev.out" 2>"$tmp/ev.err" || rc=$?
grep -q "no tokenizer" "$tmp/ev.err" && { cat "$tmp/ev.err"; fail "eval did not find $CK/tokenizer.json"; }
ok "eval finds the save dir's tokenizer.json for an iter_N dir (then fails on the data: $(head -c 120 "$tmp/ev.err"))"
echo "t_reliability: $n_ok checks passed, $n_fail failed"
[ "$n_fail" = 0 ]
