// hopper.cuh: the sm_90 instructions our own GEMMs are built from, each with the CPU emulator's stand-in
// (cuda/emu.cuh): mbarriers, TMA tile loads (cp.async.bulk.tensor) and warpgroup MMAs (wgmma.mma_async) reading
// both operands from shared memory through matrix descriptors.
//
// Layouts used throughout (the only ones the emulator accepts, so a kernel that assumes another fails there), all
// but the narrow one with the 128-byte swizzle: the 16-byte unit c of a 128-byte row r sits at unit c ^ (r % 8).
// TMA writes it so (CU_TENSOR_MAP_SWIZZLE_128B, a box 64 wide) and the wgmma descriptor reads it so (layout type 1).
// The swizzle is a function of the absolute shared-memory address (bits 4-6 ^= bits 7-9), so every tile starts on a
// 1024-byte boundary.
//  - K-major (wg_desc_sw128): 64 bf16 of K per 128-byte row, one row per M (or N) index, 8-row groups 1024 bytes
//    apart (stride byte offset); the k16 steps inside a 64-wide tile advance the start address by 32 bytes. A TMA
//    box [rows x 64 of K] of a row-major matrix whose rows run along K.
//  - MN-major (wg_desc_mn_sw128, the instruction's transpose flag set for that operand): 64 bf16 of M (or N) per
//    128-byte row, one row per K index, 8-row groups 1024 bytes apart (stride byte offset), the next 64 of M (N)
//    `mn_stride` bytes on (leading byte offset); a k16 step advances the start address by 2048 bytes (16 rows).
//    TMA boxes [64 of K x 64 of M (N)] of a row-major matrix whose rows run along M (N), `mn_stride` apart: the
//    transposed operands of the backward GEMMs (dx = dy W, dW = dy^T x) without a transposing copy.
//  - MN-major, narrow (wg_desc_mn_sw<NC>, NC = 32 or 16 of N): a [K rows][NC] tile with 2 NC-byte rows and the 64-
//    (32-) byte swizzle (layout type 2 (3): the 16-byte unit c of the row at byte offset o sits at unit
//    c ^ ((o >> 7) & (NC / 8 - 1))), 8-row groups 16 NC bytes apart; a k16 step is 32 NC bytes. The B operand of an
//    m64n32 (m64n16) MMA whose N is one such swizzle atom: the delta rule's per-warpgroup column slices.
//
// Semantics the kernels rely on (PTX ISA 8.x):
//  - mbarrier: init with an arrival count; a phase completes when the count of arrivals is reached and the
//    transaction bytes announced by expect_tx have landed; wait(parity) returns once the phase with that parity
//    has completed.
//  - tma_load_2d: one thread copies the box at (c0 inner, c1 outer) of a 2D tensor map into shared memory and
//    counts its bytes on the mbarrier; elements outside the tensor are written as zeros (edge tiles).
//  - wgmma_m64nNk16<TA, TB>: all 128 threads of a warpgroup (warps 4w..4w+3) issue it together; D[64 x N] (+)=
//    A[64 x 16] B[N x 16]^T, A (B) K-major with TA (TB) 0, MN-major with 1 (the instruction's imm-trans-a/b), A and
//    B read from shared memory when the MMA runs, not when it is issued: a wgmma is only
//    complete after wg_commit() and wg_wait<n>() retire its group, and its inputs must not be overwritten before.
//    Accumulator fragment of thread t of the warpgroup (warp w = t / 32, lane l): d[4 j + i] holds
//    D[16 w + l / 4 + 8 (i / 2)][8 j + 2 (l % 4) + i % 2], j = 0 .. N / 8 - 1 (mma.m16n8's C layout per 8 columns).
//    wg_fence() before the first wgmma that reads accumulators written by other instructions.
#pragma once
#include "cuda/common.cuh"

// wgmma and setmaxnreg exist on sm_90a only: in a device pass for another target (the build's compute_90 PTX)
// they become traps, and the host never launches these kernels there (cu_gemm_wg_fits).
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL) && !defined(GDN_EMU)
#define GDN_NO_SM90A 1
#endif

#include <cuda.h> // CUtensorMap (in the emulator the type only: it keeps its own fields in the opaque bytes)

// ---- shared-memory addresses
__device__ __forceinline__ uint32_t smem_u32(const void *p) {
#ifdef GDN_EMU
    return emu::smem_addr(p);
#else
    return (uint32_t)__cvta_generic_to_shared(p);
#endif
}

// ---- mbarriers (64-bit, in shared memory)
__device__ __forceinline__ void mbar_init(uint64_t *bar, unsigned count) {
#ifdef GDN_EMU
    emu::mbar_init(bar, count);
#else
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count) : "memory");
#endif
}
// Makes the barriers' initialisation visible to the async proxy (TMA) before their first use.
__device__ __forceinline__ void mbar_fence_init() {
#ifndef GDN_EMU
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
// One arrival that also announces `bytes` more transaction bytes for the current phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t *bar, unsigned bytes) {
#ifdef GDN_EMU
    emu::mbar_arrive_expect_tx(bar, bytes);
#else
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes)
                 : "memory");
#endif
}
__device__ __forceinline__ void mbar_arrive(uint64_t *bar) {
#ifdef GDN_EMU
    emu::mbar_arrive(bar);
#else
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
#endif
}
// Returns once the phase of the given parity (0 or 1) has completed.
__device__ __forceinline__ void mbar_wait(uint64_t *bar, unsigned parity) {
#ifdef GDN_EMU
    emu::mbar_wait(bar, parity);
#else
    const uint32_t a = smem_u32(bar);
    uint32_t done = 0;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(a), "r"(parity)
                     : "memory");
    } while (!done);
#endif
}

// ---- TMA
// The 2D bf16 tensor [outer][inner] at base (row stride row_bytes, a multiple of 16; base 16-byte aligned) as a
// tensor map with a box of box_inner x box_outer elements (box_inner x 2 = 128 bytes), 128-byte swizzle, zero
// fill outside. Host side; dies with `op` in the message on failure.
void cu_tmap_2d_bf16(CUtensorMap *map, const void *base, uint64_t inner, uint64_t outer, uint64_t row_bytes,
                     uint32_t box_inner, uint32_t box_outer, const char *op);

__device__ __forceinline__ void tma_load_2d(void *dst, const CUtensorMap *map, int c0, int c1, uint64_t *bar) {
#ifdef GDN_EMU
    emu::tma_load_2d(dst, map, c0, c1, bar);
#else
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], "
                 "[%2];\n" ::"r"(smem_u32(dst)),
                 "l"(map), "r"(smem_u32(bar)), "r"(c0), "r"(c1)
                 : "memory");
#endif
}
__device__ __forceinline__ void tma_prefetch_map(const CUtensorMap *map) {
#ifndef GDN_EMU
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
#else
    (void)map;
#endif
}

// ---- warpgroup register reallocation (the producer gives registers to the MMA warpgroups)
template <int R> __device__ __forceinline__ void wg_reg_dealloc() {
#if !defined(GDN_EMU) && !defined(GDN_NO_SM90A)
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
#endif
}
template <int R> __device__ __forceinline__ void wg_reg_alloc() {
#if !defined(GDN_EMU) && !defined(GDN_NO_SM90A)
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
#endif
}

// ---- wgmma
// Descriptor of a K-major, 128-byte-swizzled tile at shared address `addr` (see the top of this file): start
// address >> 4 in bits 0-13, leading byte offset (unused by this layout) 1, stride byte offset 1024 >> 4 in bits
// 32-45, layout type 1 (128-byte swizzle) in bits 62-63.
__device__ __forceinline__ uint64_t wg_desc_sw128(uint32_t addr) {
    return (uint64_t)((addr & 0x3FFFFu) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) |
           ((uint64_t)1 << 62);
}
// Descriptor of an MN-major, 128-byte-swizzled tile at `addr` (see the top of this file): leading byte offset (the
// next 64 of M or N) mn_stride >> 4 in bits 16-29, stride byte offset (the next 8 of K) 1024 >> 4, layout type 1.
__device__ __forceinline__ uint64_t wg_desc_mn_sw128(uint32_t addr, uint32_t mn_stride) {
    return (uint64_t)((addr & 0x3FFFFu) >> 4) | ((uint64_t)((mn_stride & 0x3FFFFu) >> 4) << 16) |
           ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
}
// Descriptor of a narrow MN-major tile (see the top of this file): NC = 64, 32, 16 of N per row take the 128-, 64-
// and 32-byte swizzle (layout type 1, 2, 3), the next 8 of K 16 NC bytes on; one atom of N (the leading byte offset,
// the next NC of N, is unused: set to the tile's size).
template <int NC> __device__ __forceinline__ uint64_t wg_desc_mn_sw(uint32_t addr) {
    static_assert(NC == 64 || NC == 32 || NC == 16, "one swizzle atom of N");
    constexpr uint64_t layout = NC == 64 ? 1 : NC == 32 ? 2 : 3, sbo = 16 * NC, lbo = 128 * NC;
    return (uint64_t)((addr & 0x3FFFFu) >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (layout << 62);
}
// Byte offset of element (r, c) (c < NC) in a [rows][NC] bf16 tile with that swizzle (NC = 64: the 128-byte one).
template <int NC> __device__ __forceinline__ uint32_t sw_off(int r, int c) {
    constexpr int RB = 2 * NC;
    return (uint32_t)(r * RB + ((((c >> 3) ^ ((r * RB >> 7) & (NC / 8 - 1)))) << 4) + (c & 7) * 2);
}
__device__ __forceinline__ void wg_fence() {
#ifdef GDN_EMU
    emu::wgmma_fence();
#elif defined(GDN_NO_SM90A)
    __trap();
#else
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wg_commit() {
#ifdef GDN_EMU
    emu::wgmma_commit();
#elif defined(GDN_NO_SM90A)
    __trap();
#else
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Retires all but the newest N committed groups of this warpgroup's wgmmas.
template <int N> __device__ __forceinline__ void wg_wait() {
#ifdef GDN_EMU
    emu::wgmma_wait(N);
#elif defined(GDN_NO_SM90A)
    __trap();
#else
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// The accumulator registers as the asm's operands: keeps the compiler from moving their uses across a wait.
template <int R> __device__ __forceinline__ void wg_fence_regs(float (&d)[R]) {
#ifndef GDN_EMU
#pragma unroll
    for (int i = 0; i < R; i++) asm volatile("" : "+f"(d[i])::"memory");
#else
    (void)d;
#endif
}

// D[64 x N] (+)= A B^T (scale_d 0: D = A B^T), A and B by descriptor, K-major (0) or MN-major (1) as TA, TB say;
// fragments as at the top of this file.
template <int TA = 0, int TB = 0>
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t da, uint64_t db, int scale_d) {
#ifdef GDN_EMU
    emu::wgmma_bf16(d, 256, da, db, scale_d, TA, TB);
#elif defined(GDN_NO_SM90A)
    __trap();
#else
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
                 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
                 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
                 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
                 "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
                 "}, %128, %129, p, 1, 1, %131, %132;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
                   "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                   "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
                   "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
                   "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
                   "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
                   "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
                   "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
                   "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                 : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));
#endif
}

template <int TA = 0, int TB = 0>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t da, uint64_t db, int scale_d) {
#ifdef GDN_EMU
    emu::wgmma_bf16(d, 128, da, db, scale_d, TA, TB);
#elif defined(GDN_NO_SM90A)
    __trap();
#else
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
                 "}, %64, %65, p, 1, 1, %67, %68;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));
#endif
}

template <int TA = 0, int TB = 0>
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], uint64_t da, uint64_t db, int scale_d) {
#ifdef GDN_EMU
    emu::wgmma_bf16(d, 64, da, db, scale_d, TA, TB);
#elif defined(GDN_NO_SM90A)
    __trap();
#else
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
                 "}, %32, %33, p, 1, 1, %35, %36;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));
#endif
}

template <int TA = 0, int TB = 0>
__device__ __forceinline__ void wgmma_m64n32k16(float (&d)[16], uint64_t da, uint64_t db, int scale_d) {
#ifdef GDN_EMU
    emu::wgmma_bf16(d, 32, da, db, scale_d, TA, TB);
#elif defined(GDN_NO_SM90A)
    __trap();
#else
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
                 "}, %16, %17, p, 1, 1, %19, %20;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));
#endif
}

template <int TA = 0, int TB = 0>
__device__ __forceinline__ void wgmma_m64n16k16(float (&d)[8], uint64_t da, uint64_t db, int scale_d) {
#ifdef GDN_EMU
    emu::wgmma_bf16(d, 16, da, db, scale_d, TA, TB);
#elif defined(GDN_NO_SM90A)
    __trap();
#else
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7"
                 "}, %8, %9, p, 1, 1, %11, %12;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                 : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));
#endif
}

// m64nNk16 for N = 64, 32, 16 (the delta rule's warpgroup column slices).
template <int N, int TA, int TB>
__device__ __forceinline__ void wgmma_m64nk16(float (&d)[N / 2], uint64_t da, uint64_t db, int scale_d) {
    if constexpr (N == 64) wgmma_m64n64k16<TA, TB>(d, da, db, scale_d);
    else if constexpr (N == 32) wgmma_m64n32k16<TA, TB>(d, da, db, scale_d);
    else wgmma_m64n16k16<TA, TB>(d, da, db, scale_d);
}

// Shared-memory writes of ordinary stores and cp.async (the generic proxy) made visible to the wgmmas that read
// them next (the async proxy); each writing thread fences, then a barrier.
__device__ __forceinline__ void wg_fence_proxy_smem() {
#ifndef GDN_EMU
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
