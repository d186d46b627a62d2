# Helpers of the gdn convert script tests (sourced; the caller sets GDN and T, a scratch dir).
# run ARGS: gdn convert must succeed (its output is shown on failure)
run() { echo "+ gdn convert $*"; "$GDN" convert "$@" > "$T/last.log" 2>&1 || { cat "$T/last.log"; echo "FAILED: gdn convert $*"; exit 1; }; }
# expect_fail PATTERN... -- ARGS: must exit non-zero with one stderr line containing every pattern
expect_fail() {
  local pats=()
  while [ "$1" != "--" ]; do pats+=("$1"); shift; done; shift
  if "$GDN" convert "$@" > "$T/fail.out" 2> "$T/fail.err"; then echo "FAILED: accepted bad input: gdn convert $*"; exit 1; fi
  local msg; msg=$(cat "$T/fail.err")
  for p in "${pats[@]}"; do
    grep -qF -- "$p" "$T/fail.err" || { echo "FAILED: error for '$*' lacks '$p': $msg"; exit 1; }
  done
  [ "$(wc -l < "$T/fail.err")" -eq 1 ] || { echo "FAILED: multi-line error: $msg"; exit 1; }
  echo "  ok, refused: $msg"
}
