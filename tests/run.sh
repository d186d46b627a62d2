#!/usr/bin/env bash
# Runs every test: the C test binaries build/tests/test_* and the scripts tests/t_*.sh.
# Each test exits 0 on success. Prints "N passed, M failed" last; exits 1 if any failed.
# TESTS="name ..." runs only those.
set -u
cd "$(dirname "$0")/.."
pass=0; fail=0; failed=()
run_one() {
  local name=$1; shift
  local t0=$(date +%s)
  if "$@" > "build/tests/$name.log" 2>&1; then
    pass=$((pass+1)); echo "PASS $name ($(( $(date +%s) - t0 ))s)"
  else
    fail=$((fail+1)); failed+=("$name"); echo "FAIL $name ($(( $(date +%s) - t0 ))s) -- last lines of build/tests/$name.log:"
    tail -n 25 "build/tests/$name.log" | sed 's/^/    /'
  fi
}
mkdir -p build/tests
want() { [ -z "${TESTS:-}" ] && return 0; for w in $TESTS; do [ "$w" = "$1" ] && return 0; done; return 1; }
for b in build/tests/test_*; do
  [ -x "$b" ] || continue; case "$b" in *.log) continue;; esac
  n=$(basename "$b"); want "$n" && run_one "$n" "$b"
done
for s in tests/t_*.sh; do
  [ -f "$s" ] || continue
  n=$(basename "$s" .sh); want "$n" && run_one "$n" bash "$s"
done
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
