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
// layouts the way cuBLASLt does); the sm_90 stand-ins (mbarriers, TMA, wgmma) by tests/gpu/emu/emu_sm90.cc.
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
// A cooperative launch (cu_launch_coop): every block's threads live at once, so that grid_sync() can hold them. The
// blocks run one phase at a time: block 0 (or the last, reversed) runs until all its live threads reach grid_sync
// or exit, then the next block, ...; once every block is there, all are released into the next phase. So a read of
// another block's output before the grid_sync that orders it sees stale data in one of the two block orders.
// Each block has its own dynamic shared memory (NaN at the start); `__shared__` statics are one copy shared by all
// blocks, which is safe because a block runs a whole phase before the next block starts, as long as no kernel keeps
// static shared data across a grid_sync (the phases of cuda/gdn_decode_block.cu re-stage theirs). A block that
// exits while others wait at a grid_sync is reported as a deadlock (on the GPU they would wait forever).
void launch_coop(const char *name, dim3 grid, dim3 block, size_t smem, const std::function<void()> &body);
void grid_sync();
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
// sm_90 (cuda/hopper.cuh states the semantics kept here):
// The shared-space address of a pointer into dynamic shared memory. The emulated window starts at a shared
// address that is not a multiple of 1024, so a kernel that assumes an aligned base fails its swizzle checks.
uint32_t smem_addr(const void *p);
// mbarriers in dynamic shared memory: phase, pending arrivals and transaction bytes kept by the emulator;
// mbar_wait suspends the calling thread until the phase of that parity completes (a block where every
// unfinished thread waits is reported as a deadlock).
void mbar_init(uint64_t *bar, unsigned count);
void mbar_arrive_expect_tx(uint64_t *bar, unsigned bytes);
void mbar_arrive(uint64_t *bar);
void mbar_wait(uint64_t *bar, unsigned parity);
// Tensor maps: the host encodes a 2D bf16 map (128-byte swizzle, box_inner x 2 = 128 bytes) into the opaque
// CUtensorMap bytes; tma_load_2d copies the box at (c0, c1) into dst (1024-byte aligned shared address), zeros
// outside the tensor, the 128-byte swizzle applied on the absolute shared address, and counts the box's bytes
// on bar.
void tmap_encode_2d(void *map, const void *base, uint64_t inner, uint64_t outer, uint64_t row_bytes,
                    uint32_t box_inner, uint32_t box_outer);
void tma_load_2d(void *dst, const void *map, int c0, int c1, uint64_t *bar);
// wgmma.mma_async m64nNk16 bf16 -> fp32, both operands by shared-memory descriptor (128-byte swizzle only; K-major,
// or MN-major where trans_a / trans_b is 1): a warpgroup collective (its 128 threads reach the same call);
// performed, in issue order, when wgmma_wait retires its commit group (inputs read then, not at issue); a thread
// that exits with wgmmas not retired is an error.
void wgmma_fence();
void wgmma_commit();
void wgmma_wait(int newest_pending);
void wgmma_bf16(float *d, int n, uint64_t desc_a, uint64_t desc_b, int scale_d, int trans_a, int trans_b);
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
#undef __grid_constant__
#define __grid_constant__

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
static inline float __uint_as_float(unsigned u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
