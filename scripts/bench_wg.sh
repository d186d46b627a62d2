#!/usr/bin/env bash
# Our sm_90 GEMMs (cuda/gemm_wg.cu) against cuBLASLt in one call on the GPU machine: the step's GEMM shapes alone
# (`test_cuda_ops --bench-gemm`) with cuBLASLt, gemm_wg cooperative and ping-pong, then `gdn bench` steps with
# gemm_wg taking some uses (GDN_CUDA_WG_FORMS) between two cuBLASLt runs, and a table of both last.
#   WG_VARIANTS="name:sched:forms ..." (default below; forms as GDN_CUDA_WG_FORMS, sched coop|pingpong)
#   BENCH_CONFIG=configs/gdn-300m.yaml  BENCH_B=16  BENCH_STEPS=10
# Logs go to build/bench_wg (and a tarball to $OUT when the device tool sets it).
set -uo pipefail
cd "$(dirname "$0")/.."
RESULTS_DIR=${OUT:-}
O=build/bench_wg; rm -rf "$O"; mkdir -p "$O"
if [ -d .deps ]; then MK=(CUDA=1 BLAS=0 DEPS=.deps); else MK=(CUDA=1); fi
make -j"$(nproc)" "${MK[@]}" gdn build/gpu_tests/test_cuda_ops > "$O/build.log" 2>&1 || { tail -30 "$O/build.log"; exit 1; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$O/gpu.txt"
T=build/gpu_tests/test_cuda_ops
timeout 90 $T --bench-gemm > "$O/gemm_lt.log" 2>&1
GDN_CUDA_GEMM=wg timeout 90 $T --bench-gemm > "$O/gemm_coop.log" 2>&1
GDN_CUDA_GEMM=wg GDN_CUDA_WG_SCHED=pingpong timeout 90 $T --bench-gemm > "$O/gemm_pingpong.log" 2>&1
VARIANTS=${WG_VARIANTS:-"fused_pp:pingpong:swiglu,dx_swiglu dxswiglu_pp:pingpong:dx_swiglu swiglu_pp:pingpong:swiglu all_coop:coop:all"}
step() { # step NAME [ENV...]
  local name=$1; shift
  env "$@" timeout 180 ./gdn bench --config "${BENCH_CONFIG:-configs/gdn-300m.yaml}" --micro_batch_size "${BENCH_B:-16}" \
      --seq_length 2048 --device cuda --steps "${BENCH_STEPS:-10}" --warmup 2 > "$O/step_$name.log" 2>&1
}
step lt_a
for v in $VARIANTS; do IFS=: read -r name sched forms <<< "$v"
  step "$name" GDN_CUDA_GEMM=wg GDN_CUDA_WG_SCHED="$sched" GDN_CUDA_WG_FORMS="$forms"; done
step lt_b
python3 - "$O" <<'PY' | tee "$O/table.txt"
import glob, os, re, sys
O = sys.argv[1]
def gemms(f):
    out = {}
    if not os.path.exists(f): return out  # (its run failed before writing)
    for l in open(f, errors='replace'):
        m = re.match(r'(\S.*?)\s+([0-9.]+) ms\s', l)
        if m: out[m.group(1).strip()] = float(m.group(2))
    return out
runs = {k: gemms(f'{O}/gemm_{k}.log') for k in ('lt', 'coop', 'pingpong')}
print(f'{"GEMM":58s} {"cuBLASLt":>9s} {"wg coop":>9s} {"wg pp":>9s}  (ms)')
for name, ms in runs['lt'].items():
    print(f'{name:58s} {ms:9.3f} ' + ' '.join(f'{runs[k].get(name, float("nan")):9.3f}' for k in ('coop', 'pingpong')))
print(f'\n{"step":14s} {"ms/step":>8s} {"tokens/s":>10s}  last-step loss')
for f in sorted(glob.glob(f'{O}/step_*.log'), key=os.path.getmtime):
    t = open(f, errors='replace').read()
    m = re.search(r'([0-9.]+) ms/step, ([0-9]+) tokens/s', t); l = re.search(r'last step loss ([0-9.]+)', t)
    print(f'{os.path.basename(f)[5:-4]:14s} {m.group(1) if m else "-":>8s} {m.group(2) if m else "-":>10s}  '
          f'{l.group(1) if l else "(failed: " + t.strip().splitlines()[-1][:60] + ")" if t.strip() else "-"}')
PY
[ -n "$RESULTS_DIR" ] && tar czf "$RESULTS_DIR/bench_wg_logs.tgz" -C "$O" . 2>/dev/null
exit 0
