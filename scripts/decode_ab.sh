#!/usr/bin/env bash
# A/B of decoding speed against another commit, in one call on the GPU machine (the decode twin of bench_ab.sh):
# builds BASE's gdn (a copy of that commit's files, e.g. `git archive C | tar -x -C .base`; carry it) beside this
# tree's, saves FLA's 300M init as a gdn checkpoint (scripts/fla_ref.py, FLA's fla/ in .fla) unless CKPT names one,
# then times greedy `gdn generate` at each batch size, alternating base, head, and head under each HEAD_ENV setting,
# ROUNDS times, so drift of the machine hits all alike. Prints every run and the median steady-state ms/step last.
#   BASE=.base  BATCHES="1 16 64"  ROUNDS=3  STEPS=400  HEAD_ENV="GDN_GEMV_LMHEAD=0 GDN_DECODE_GROUP=1"  CKPT=dir
set -uo pipefail
cd "$(dirname "$0")/.."
BASE=${BASE:-.base}
[ -f "$BASE/Makefile" ] || { echo "decode_ab: $BASE/Makefile missing (copy the base commit's tree there)"; exit 2; }
if [ -d .deps ]; then MK=(CUDA=1 BLAS=0 DEPS="$PWD/.deps"); else MK=(CUDA=1); fi
O=build/decode_ab; mkdir -p "$O"
make -j"$(nproc)" "${MK[@]}" gdn > "$O/head_build.log" 2>&1 || { tail -20 "$O/head_build.log"; exit 1; }
make -C "$BASE" -j"$(nproc)" "${MK[@]}" gdn > "$O/base_build.log" 2>&1 || { tail -20 "$O/base_build.log"; exit 1; }
CK=${CKPT:-$O/ckpt}
if [ ! -d "$CK" ]; then
  PYTHONPATH=${FLA_PATH:-.fla} python3 scripts/fla_ref.py init "$O/hf_init" > "$O/fla_init.log" 2>&1 &&
    ./gdn convert --from-hf "$O/hf_init" --save "$CK" > "$O/convert.log" 2>&1 ||
    { echo "decode_ab: no checkpoint (see $O/fla_init.log, $O/convert.log)"; exit 1; }
fi
run() { # run LABEL BINARY BATCH [VAR=value]
  local label=$1 bin=$2 b=$3 line
  line=$(env ${4:-} "$bin" generate --load "$CK" --tokenizer .assets/llama3/tokenizer.json \
      --prompt "The capital of France is" --max-new-tokens "${STEPS:-400}" --greedy --batch "$b" --device cuda --quiet \
      2>&1 | grep "^generate:")
  echo "$label b$b $(echo "$line" | sed -n 's/.*steady state \([0-9.]*\) tokens\/s, \([0-9.]*\) ms\/step.*/\2 ms\/step \1 tokens\/s/p')"
}
for r in $(seq "${ROUNDS:-3}"); do
  for b in ${BATCHES:-1 16 64}; do
    run base "$BASE/gdn" "$b"
    run head ./gdn "$b"
    for e in ${HEAD_ENV:-}; do run "head:$e" ./gdn "$b" "$e"; done
  done
done | tee "$O/runs.txt"
python3 - "$O/runs.txt" <<'PY'
import collections, statistics, sys
ms = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) >= 4 and f[3] == 'ms/step': ms[(f[0], f[1])].append(float(f[2]))
print('\nvariant                         batch  median ms/step  tokens/s   runs')
for (v, b), xs in sorted(ms.items(), key=lambda kv: (int(kv[0][1][1:]), kv[0][0])):
    med = statistics.median(xs)
    print(f'{v:31s} {b:>5s}  {med:14.3f}  {int(b[1:]) / med * 1000:9,.0f}  {xs}')
PY
