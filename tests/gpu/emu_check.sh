#!/usr/bin/env bash
# emu_check.sh: runs tests/gpu/test_cuda_ops.c (+ tests/gpu/ops/) --quick with the CUDA backend's kernels executed on the
# CPU (cuda/emu.cuh + tests/gpu/emu/cuda_emu.cc and emu_sm90.cc), once with the threads of each block scheduled in order
# and once in reverse order. No GPU needed: it checks the kernels' index math, shared-memory phases and
# barriers, the cuBLASLt layout mapping and the whole test harness against the CPU twin. It cannot see
# what only hardware shows (real concurrency between blocks, timing, nvcc-specific code generation).
# First the emulator's own self-test (tests/gpu/emu/hopper_selftest.cc: its mbarrier, TMA and wgmma stand-ins
# against host references, and the mistakes they must report).
#
#   bash tests/gpu/emu_check.sh [test_cuda_ops arguments...]     (default: --quick)
# Objects go to build/emu/; other parts' sources are compiled from the tree as they are.
set -euo pipefail
cd "$(dirname "$0")/../.."
CUDA_INC=${CUDA_INC:-/usr/local/cuda/include}
OUT=build/emu
mkdir -p "$OUT"
CXXFLAGS=(-std=c++17 -DGDN_EMU -O1 -g -I. -I"$CUDA_INC" -Wall -Wextra -Wno-unused-parameter -Wno-unknown-pragmas)
CFLAGS=(-std=gnu11 -O2 -g -I. -fopenmp -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers)

objs=()
build() { # src obj compiler flags...
  local src=$1 obj=$2; shift 2
  # any header newer than the object: model/backend.h's table layout is shared by every object
  if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ] || [ -n "$(find cuda model cpu util tests/gpu -newer "$obj" \( -name '*.cuh' -o -name '*.h' \) 2>/dev/null | head -1)" ]; then
    echo "  compile $src"
    "$@" -c "$src" -o "$obj"
  fi
  objs+=("$obj")
}
build tests/gpu/emu/cuda_emu.cc "$OUT/cuda_emu.o" g++ "${CXXFLAGS[@]}"
build tests/gpu/emu/emu_sm90.cc "$OUT/emu_sm90.o" g++ "${CXXFLAGS[@]}"
# The sm_90 stand-ins (mbarriers, TMA, wgmma) against host references first: the kernels' checks rely on them.
build tests/gpu/emu/hopper_selftest.cc "$OUT/hopper_selftest.o" g++ "${CXXFLAGS[@]}"
unset 'objs[${#objs[@]}-1]' # it has its own main
g++ -o "$OUT/hopper_selftest" "$OUT/hopper_selftest.o" "$OUT/cuda_emu.o" "$OUT/emu_sm90.o"
echo "== emulator self-test: sm_90 stand-ins"
"$OUT/hopper_selftest"
for f in cuda/*.cu; do build "$f" "$OUT/$(basename "$f" .cu).o" g++ -x c++ "${CXXFLAGS[@]}"; done
# The CPU twin and the helpers it needs (not the rest of libgdn.a: this stays independent of other parts).
for f in util/common.c model/adamw_plan.c cpu/*.c; do build "$f" "$OUT/c_$(basename "$f" .c).o" gcc "${CFLAGS[@]}"; done
for f in tests/gpu/test_cuda_ops.c tests/gpu/ops/*.c; do build "$f" "$OUT/t_$(basename "$f" .c).o" gcc "${CFLAGS[@]}"; done
g++ -o "$OUT/test_cuda_ops" "${objs[@]}" -fopenmp -lopenblas -lm

export CASE_TIMES=1 # each case line ends with its seconds
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(--quick)
echo "== emulated CUDA backend, threads in order"
OMP_NUM_THREADS=1 "$OUT/test_cuda_ops" "${args[@]}"
echo "== emulated CUDA backend, threads in reverse order"
EMU_ORDER=reverse OMP_NUM_THREADS=1 "$OUT/test_cuda_ops" "${args[@]}"
launches() { sed -n "s/^cuda emu: \([0-9]*\) launches of $1\$/\1/p" "$2"; } # launches KERNEL ERR: EMU_COUNT_KERNEL's count
if [ $# -eq 0 ]; then # our sm_90 GEMM on the cases of the ops it takes under GDN_CUDA_GEMM=wg (the default: cuBLASLt's stand-in),
  # on both of its schedules (GDN_CUDA_WG_SCHED; DW runs the cooperative one only), on 3 blocks: many tiles each
  for sched in coop pingpong; do
  for order in forward reverse; do
    [ $sched = pingpong ] && [ $order = reverse ] && continue # (CI time: the schedules share the epilogues and TMA paths)
    for pair in matmul_fwd:gemm_wg matmul_swiglu:gemm_wg_swiglu lmhead_ce:gemm_wg matmul_bwd:gemm_wg_dx matmul_bwd:gemm_wg_dw matmul_swiglu_bwd:gemm_wg_dx_swiglu lmhead_ce:gemm_wg_dx lmhead_ce:gemm_wg_dw; do
      op=${pair%%:*} kern=${pair##*:}
      [ $sched = pingpong ] && [ $kern = gemm_wg_dw ] && continue
      echo "== $op through $kern (GDN_CUDA_GEMM=wg, $sched), threads in $order order"
      GDN_CUDA_GEMM=wg GDN_CUDA_WG_SCHED=$sched GDN_CUDA_WG_GRID=3 EMU_ORDER=$order EMU_COUNT_KERNEL=$kern OMP_NUM_THREADS=1 \
        "$OUT/test_cuda_ops" --quick --only $op 2> "$OUT/wg_$order.err" || { cat "$OUT/wg_$order.err"; exit 1; }
      n=$(launches "$kern" "$OUT/wg_$order.err")
      [ "${n:-0}" -ge 2 ] || { echo "emu_check: $kern ran ${n:-0} times under GDN_CUDA_GEMM=wg (expected >= 2)"; cat "$OUT/wg_$order.err"; exit 1; }
      echo "$kern launches: $n"
    done
  done
  done
  # GDN_CUDA_WG_FORMS routes only the uses it names: matmul_swiglu's fused kernel runs under "swiglu", not under "dx"
  for forms in swiglu:2 dx:0 bogus:x; do
    f=${forms%%:*} want=${forms##*:}
    GDN_CUDA_GEMM=wg GDN_CUDA_WG_FORMS=$f GDN_CUDA_WG_GRID=3 EMU_COUNT_KERNEL=gemm_wg_swiglu OMP_NUM_THREADS=1 \
      "$OUT/test_cuda_ops" --quick --only matmul_swiglu_fwd > "$OUT/wg_forms.out" 2> "$OUT/wg_forms.err" && rc=0 || rc=$?
    if [ "$want" = x ]; then # an unknown name is refused, naming it
      [ $rc -ne 0 ] && grep -q '"bogus" is none of' "$OUT/wg_forms.err" ||
        { echo "emu_check: GDN_CUDA_WG_FORMS=bogus was not refused (rc $rc)"; cat "$OUT/wg_forms.err"; exit 1; }
      echo "GDN_CUDA_WG_FORMS=bogus refused"; continue
    fi
    [ $rc -eq 0 ] || { cat "$OUT/wg_forms.out" "$OUT/wg_forms.err"; exit 1; }
    n=$(launches gemm_wg_swiglu "$OUT/wg_forms.err")
    if [ "$want" = 0 ]; then [ "${n:-0}" -eq 0 ]; else [ "${n:-0}" -ge "$want" ]; fi ||
      { echo "emu_check: GDN_CUDA_WG_FORMS=$f: gemm_wg_swiglu ran ${n:-0} times (expected ${want}$([ "$want" = 0 ] || echo ' or more'))"; exit 1; }
    echo "GDN_CUDA_WG_FORMS=$f: gemm_wg_swiglu launches ${n:-0}"
  done
  # the GDN block's decode step runs its one kernel at batch 1 (the bitwise check against the five ops would pass
  # trivially if both ran the five ops), on a grid of 3 blocks (the phases' rows and the mixer's 16 parts stride over
  # it), and GDN_DECODE_BLOCK=0 launches it only in that check (5 steps in each mode; the cases: 3 at batch 1, run
  # twice in each mode; unset, the cases set it to 1: the kernel is opt-in)
  for v in 1:22 0:10 unset:22; do
    ( [ "${v%%:*}" = unset ] && unset GDN_DECODE_BLOCK || export GDN_DECODE_BLOCK=${v%%:*}
      GDN_CUDA_GDB_GRID=3 EMU_COUNT_KERNEL=gdn_decode_block OMP_NUM_THREADS=1 \
      "$OUT/test_cuda_ops" --quick --only gdn_decode_block_fwd > "$OUT/gdb.out" 2> "$OUT/gdb.err" ) ||
      { echo "emu_check: gdn_decode_block_fwd failed on a grid of 3 blocks"; cat "$OUT/gdb.out" "$OUT/gdb.err"; exit 1; }
    n=$(launches gdn_decode_block "$OUT/gdb.err")
    [ "${n:-0}" -eq "${v##*:}" ] ||
      { echo "emu_check: GDN_DECODE_BLOCK=${v%%:*}: gdn_decode_block ran ${n:-0} times (expected ${v##*:})"; exit 1; }
    echo "GDN_DECODE_BLOCK=${v%%:*}: gdn_decode_block launches $n"
  done
  # the wgmma recurrences run in the cases at dk = dv = 64 (by default, and bv=64; each run twice for the determinism
  # check; the state kernel in the forward, dh in the backward)
  for kern in delta_rule_wg_state delta_rule_wg_dh; do
    EMU_COUNT_KERNEL=$kern OMP_NUM_THREADS=1 "$OUT/test_cuda_ops" --quick --only delta_rule \
      > "$OUT/wgs.out" 2> "$OUT/wgs.err" || { echo "emu_check: delta_rule cases failed"; cat "$OUT/wgs.out" "$OUT/wgs.err"; exit 1; }
    n=$(launches $kern "$OUT/wgs.err")
    [ "${n:-0}" -ge 2 ] || { echo "emu_check: $kern ran ${n:-0} times (expected 2 or more)"; exit 1; }
    echo "wgmma recurrences: $kern launches $n"
  done
fi
