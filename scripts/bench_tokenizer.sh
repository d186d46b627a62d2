#!/usr/bin/env bash
# Tokenizer throughput: gdn.c's tok_encode against HF tokenizers (Rust core, npm tokenizers@0.23.2) on the same
# texts, on one core and on all cores, in one run. Checks that both give identical ids. Method: notes/tokenizer.md.
# Usage: bash scripts/bench_tokenizer.sh [ROUNDS]     (default 3 rounds; each round runs all four measurements)
#   english: npm nlp-corpus sentences in documents of 20 (about 9 MB)
#   mixed:   the test corpus generator (tests/tokenizer/make_corpus.py), 4 MB
# Single core: both pinned to CPU 0 with taskset; HF with TOKENIZERS_PARALLELISM=false (RAYON_NUM_THREADS=1).
# All cores:   gdn.c with one OpenMP thread per core; HF's encodeBatch with RAYON_NUM_THREADS=<cores>.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
CORES=$(nproc)
bash scripts/fetch_assets.sh >/dev/null
make -s build/libgdn.a
export NODE_PATH="$PWD/.assets/oracle/node_modules"
TOK=.assets/llama3/tokenizer.json
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
gcc -O3 -march=native -std=gnu11 -fopenmp -I. tests/tokenizer/bench_tokenizer.c build/libgdn.a $(cat build/ldlibs.txt) \
  -o "$W/bench_tokenizer"

python3 - .assets "$W/english.jsonl" <<'PY'
import glob, json, os, sys
paths = sorted(glob.glob(os.path.join(sys.argv[1], "corpus/builds/doc-*.json")), key=lambda p: int(p.rsplit("-", 1)[1][:-5]))
sents = [s for p in paths for s in json.load(open(p, encoding="utf-8"))]
with open(sys.argv[2], "w", encoding="utf-8") as f:
    for k in range(0, len(sents), 20):
        f.write(json.dumps(" ".join(sents[k:k + 20]), ensure_ascii=False) + "\n")
PY
# (the bench reader is cJSON, which stops strings at \u0000: leave those few edge-case texts out)
python3 tests/tokenizer/make_corpus.py .assets "$W/mixed_all.jsonl" 4000000
grep -v '\\u0000' "$W/mixed_all.jsonl" > "$W/mixed.jsonl"

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $CORES cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$ROUNDS"); do
  for corpus in english mixed; do
    T="$W/$corpus.jsonl"
    taskset -c 0 "$W/bench_tokenizer" "$TOK" "$T" 1 10 "$W/ids_c.jsonl" | sed "s/^/round $round $corpus 1core /"
    TOKENIZERS_PARALLELISM=false RAYON_NUM_THREADS=1 taskset -c 0 node tests/tokenizer/bench_hf.js "$TOK" "$T" 1 3 "$W/ids_hf.jsonl" |
      sed "s/^/round $round $corpus 1core /"
    "$W/bench_tokenizer" "$TOK" "$T" "$CORES" 10 | sed "s/^/round $round $corpus allcores /"
    TOKENIZERS_PARALLELISM=true RAYON_NUM_THREADS=$CORES node tests/tokenizer/bench_hf.js "$TOK" "$T" "$CORES" 3 |
      sed "s/^/round $round $corpus allcores /"
    if [ "$round" = 1 ]; then # identical ids (compared once per corpus: the code is deterministic)
      python3 tests/tokenizer/compare.py "ids $corpus gdn.c vs HF" "$T" "$W/ids_hf.jsonl" "$W/ids_c.jsonl" | tail -1 | sed 's/^/    /'
    fi
  done
done | tee "$W/log.txt"

python3 - "$W/log.txt" <<'PY'
import re, statistics, sys
rows = {}
pat = r"round (\d+) (\w+) (\w+) (gdn\.c|HF) .*?([\d.]+) MB, (\d+) tokens; best ([\d.]+) s \(median ([\d.]+) s"
for line in open(sys.argv[1]):
    m = re.match(pat, line)
    if m:
        mb, tokens, best, median = float(m[5]), int(m[6]), float(m[7]), float(m[8])
        rows.setdefault((m[2], m[3], m[4]), []).append((mb / best, tokens / 1e6 / best, mb / median))
print("\nsummary over rounds, min / median / max. MB/s and M tokens/s from each round's best pass;")
print("the last column compares each round's median passes instead (less flattering to the short gdn.c passes).")
print(f"{'corpus':8} {'cores':9} {'gdn.c MB/s':>22} {'HF MB/s':>22} {'gdn.c M tok/s':>22} {'speed-up (best)':>22} {'speed-up (median)':>22}")
fmt = lambda xs: f"{min(xs):6.2f} /{statistics.median(xs):6.2f} /{max(xs):6.2f}"
for corpus in ("english", "mixed"):
    for cores in ("1core", "allcores"):
        c, h = rows.get((corpus, cores, "gdn.c"), []), rows.get((corpus, cores, "HF"), [])
        if not c or not h:
            continue
        print(f"{corpus:8} {cores:9} {fmt([x[0] for x in c]):>22} {fmt([x[0] for x in h]):>22} "
              f"{fmt([x[1] for x in c]):>22} {fmt([a[0] / b[0] for a, b in zip(c, h)]):>22} "
              f"{fmt([a[2] / b[2] for a, b in zip(c, h)]):>22}")
PY
