#!/usr/bin/env bash
# The CUDA backend's kernels, run on the CPU by the emulator (cuda/emu.cuh, tests/gpu/emu/): every op of
# tests/gpu/test_cuda_ops.c --quick against its CPU twin, fp32 and bf16, with each block's threads
# scheduled in order and in reverse. This is how CI (no GPU) checks the kernels' index math, barriers and
# tensor-core fragment layouts; the real GPU run is scripts/gpu_check.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
exec bash tests/gpu/emu_check.sh
