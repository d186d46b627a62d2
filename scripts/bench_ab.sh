#!/usr/bin/env bash
# A/B of the training step against another commit, in one call on the GPU machine: builds the tree in
# BASE (a copy of that commit's files, e.g. `git archive C | tar -x -C .base`; carry it) beside this one and
# times `gdn bench` of both, alternating ROUNDS times, so drift of the machine hits both alike.
#   BASE=.base  CONFIG=configs/gdn-300m.yaml  B=16  STEPS=10  ROUNDS=2  EXTRA="--key value ..."
set -uo pipefail
cd "$(dirname "$0")/.."
BASE=${BASE:-.base}
[ -f "$BASE/Makefile" ] || { echo "bench_ab: $BASE/Makefile missing (copy the base commit's tree there)"; exit 2; }
if [ -d .deps ]; then MK=(CUDA=1 BLAS=0 DEPS="$PWD/.deps"); else MK=(CUDA=1); fi
make -j"$(nproc)" "${MK[@]}" gdn > build/ab_head_build.log 2>&1 || { tail -20 build/ab_head_build.log; exit 1; }
make -C "$BASE" -j"$(nproc)" "${MK[@]}" gdn > build/ab_base_build.log 2>&1 || { tail -20 build/ab_base_build.log; exit 1; }
run() { # run LABEL BINARY
  "$2" bench --config "${CONFIG:-configs/gdn-300m.yaml}" --micro_batch_size "${B:-16}" --seq_length 2048 --device cuda \
      --steps "${STEPS:-10}" --warmup 2 ${EXTRA:-} 2>/dev/null | grep "^bench:" | sed "s/^/$1 /"
}
for r in $(seq "${ROUNDS:-2}"); do run base "$BASE/gdn"; run head ./gdn; done | tee build/ab.txt
python3 - build/ab.txt <<'PY'
import re, sys
ms = {'base': [], 'head': []}
for line in open(sys.argv[1]):
    m = re.search(r'([0-9.]+) ms/step', line)
    if m: ms[line.split()[0]].append(float(m.group(1)))
if ms['base'] and ms['head']:
    b, h = min(ms['base']), min(ms['head'])
    print(f"A/B: base best {b:.1f} ms/step, head best {h:.1f} ms/step: head/base {h / b:.4f} "
          f"(base runs {ms['base']}, head runs {ms['head']})")
PY
