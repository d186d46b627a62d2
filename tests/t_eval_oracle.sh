#!/usr/bin/env bash
# t_eval_oracle: eval's Python-semantics code checked against CPython itself (tests/eval/oracle.py):
# str.rstrip/strip/capitalize, len, re.split word counts, the hellaswag and wikitext cleaning, RACE's
# ast.literal_eval, on ~7800 seeded random and per-code-point cases; then lm-eval's bootstrap perplexity
# stderr (100000 replicates drawn with Python's random.Random(i).choices) against eval/metrics.c.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
for b in build/tests/test_eval_text build/tests/test_eval_metrics; do
  [ -x "$b" ] || { echo "missing $b (run make first)"; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
$PY tests/eval/oracle.py cases "$tmp/cases.jsonl"
build/tests/test_eval_text --oracle "$tmp/cases.jsonl" "$tmp/got.jsonl"
$PY tests/eval/oracle.py check "$tmp/cases.jsonl" "$tmp/got.jsonl"
for spec in "30 7" "200 11" "2 3"; do
  $PY tests/eval/oracle.py bootstrap $spec > "$tmp/bs.txt"
  head -n -1 "$tmp/bs.txt" > "$tmp/xs.txt"
  want=$(tail -n 1 "$tmp/bs.txt")
  got=$(build/tests/test_eval_metrics --bootstrap "$tmp/xs.txt")
  $PY -c "
import sys; w, g = float('$want'), float('$got')
ok = abs(w - g) <= 1e-9 * abs(w)
print(('PASS' if ok else 'FAIL') + ' bootstrap stderr n=%s: C %r, lm-eval/CPython %r' % ('${spec% *}', g, w))
sys.exit(0 if ok else 1)"
done
