// emu.cuh: lets g++ compile the cuda/*.cu files (-DGDN_EMU -x c++) so their kernels run on the CPU.
// Used only by tests/gpu/emu_check.sh to check index math, shared-memory phases and barriers on a
// machine without a GPU; never part of the real build.
//
// Model: a launch runs its blocks one after another; each thread of a block is a fiber (ucontext)
// that runs until it reaches __syncthreads() or a warp-level instruction, and each warp runs on to its
// next barrier before the next warp starts (warps in order, or reversed), so a missing barrier shows up
// as a read of data not yet written (dynamic shared memory is filled with NaN before every block) or of
// stale data. A barrier that
// not every thread reaches is reported as a deadlock. `__shared__` becomes `static`, which is right
// because only one block runs at a time. The CUDA runtime / cuBLASLt calls the backend makes are
// implemented on host memory by tests/gpu/emu/cuda_emu.cc (GEMMs by a plain loop that checks the
// layouts the way cuBLASLt does).
#pragma once
#include <cuda_runtime.h> // types and declarations only
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <functional>

namespace emu {
extern uint3 *cur_tid;
extern uint3 block_idx;
extern dim3 block_dim, grid_dim;
void launch(const char *name, dim3 grid, dim3 block, size_t smem, const std::function<void()> &body);
void *dyn_smem();
void syncthreads();
uint64_t shfl_xor(uint64_t v, int lane_mask);
// Warp-collective instructions (all 32 lanes of the warp must reach the same one, else "deadlock"):
// __syncwarp; ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16 (lane l gives the row address of
// row l % 8 of matrix l / 8; checked: 16-byte aligned, inside dynamic shared memory); and
// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 with the PTX ISA fragment layouts (products exact,
// sums in double, one fp32 rounding: a stand-in for the tensor core's internal accumulation).
void syncwarp();
void ldmatrix(uint32_t *r, int nmat, bool trans, const void *row_addr);
void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
// cp.async (16 bytes, or 4 with .ca): queued per thread and performed only when cp.async.wait_group
// retires its group, so a read of the destination before the wait sees the NaN fill; or, in the reverse
// pass (EMU_CP_ASYNC=eager), performed at issue, so a prefetch into a buffer that other warps still read
// corrupts their data. A thread that exits with copies still queued is an error.
void cp_async(void *dst_shared, const void *src_global, int bytes);
void cp_async_commit();
void cp_async_wait(int newest_pending);
} // namespace emu

#define threadIdx (*emu::cur_tid)
#define blockIdx (emu::block_idx)
#define blockDim (emu::block_dim)
#define gridDim (emu::grid_dim)
#define __syncthreads() emu::syncthreads()
#undef __shared__
#define __shared__ static
#undef __launch_bounds__
#define __launch_bounds__(...)

template <typename T> static inline T __shfl_xor_sync(unsigned, T v, int lane_mask) {
    static_assert(sizeof(T) <= 8, "shuffle of at most 8 bytes");
    uint64_t u = 0;
    memcpy(&u, &v, sizeof(T));
    u = emu::shfl_xor(u, lane_mask);
    memcpy(&v, &u, sizeof(T));
    return v;
}
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline int atomicCAS(int *p, int cmp, int val) {
    int old = *p;
    if (old == cmp) *p = val;
    return old;
}
// Fibers switch only at barriers and warp collectives, and blocks run one after another: these are atomic as
// plain reads and writes.
static inline unsigned long long atomicMax(unsigned long long *p, unsigned long long v) {
    const unsigned long long old = *p;
    if (v > old) *p = v;
    return old;
}
static inline unsigned long long atomicExch(unsigned long long *p, unsigned long long v) {
    const unsigned long long old = *p;
    *p = v;
    return old;
}
template <typename I> static inline I atomicAdd(I *p, I v) { // int, unsigned
    const I old = *p;
    *p = old + v;
    return old;
}
static inline void __threadfence() {}
static inline unsigned __float_as_uint(float f) {
    unsigned u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
