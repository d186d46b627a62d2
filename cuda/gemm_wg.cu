// gemm_wg.cu: the projections' GEMMs on sm_90's warpgroup MMAs (bf16 inputs, fp32 accumulation), our own
// (notes/PERF.md, "the road to 1.25x": the lm head's statistics, SwiGLU and RMSNorm need GEMMs whose prologue and
// epilogue are ours; cuBLASLt has none of those epilogues). Four forms of one kernel:
//   FWD     y[M, N] = x[M, K] W[N, K]^T (bf16 y, optionally + y)       A = x K-major, B = W K-major
//   SWIGLU  the same with W = [gate; up] and h = swiglu(y) in the epilogue
//   DX      dx[M, K] = dy[M, N] W[N, K] (bf16, optionally + dx)        A = dy K-major, B = W MN-major
//   DX_SWIGLU  the same into SwiGLU's backward (the down projection's dx = dH): dgu = swiglu_bwd(gu, dH) and
//           optionally h = swiglu(gu) in the epilogue; dH is never stored
//   DW      dW[N, K] += dy[M, N]^T x[M, K] (fp32)                      A = dy MN-major, B = x MN-major
// (in the kernel's own terms a tile is always [128 x 256] of its output, summed over its reduction dimension; the
// MN-major operands are the backward's transposes, read by TMA boxes of 64 x 64 and MN-major descriptors, so no
// operand is ever copied transposed).
//
// Structure (as CUTLASS's sm90 "warp-specialized cooperative" kernels): a persistent grid, one block per SM of
// 3 warpgroups. Warpgroup 0 is the producer: one thread loads each 64-wide K slice of the block's x tile
// [128 x 64] and W tile [256 x 64] by TMA into a ring of 4 stages (mbarrier full[s] counts the bytes), after the
// consumers have released the stage (empty[s]). Warpgroups 1 and 2 are the consumers: each owns 64 rows of the
// 128 x 256 tile and runs 4 wgmma m64n256k16 per stage (accumulators: 128 fp32 a thread), keeping one stage's
// MMAs in flight while it waits for the next. The epilogue rounds to bf16 and goes through a per-warp shared
// buffer so y is written in 16-byte row segments; meanwhile the producer already fills the ring for the block's
// next tile. Tiles are visited in groups of 8 row tiles, column tiles within a group, so the blocks
// running at once share their x and W tiles in L2.
//
// Numerics: each y element is one fp32 sum of K bf16 products (the tensor core's order), rounded once to bf16;
// with `accumulate`, y_old is added to the fp32 sum before that rounding. Not bit-identical to cuBLASLt's
// (another summation order), within the op cases' GEMM tolerance of the CPU twin.
#include "cuda/gemm_wg.cuh"
#include "cuda/hopper.cuh"

#include <stdlib.h>
#include <string.h>

#ifndef GDN_EMU
#include <cudaTypedefs.h> // PFN_cuTensorMapEncodeTiled
#endif

enum {
    WG_BM = 128,                    // rows of x (and y) per tile: 64 per consumer warpgroup
    WG_BN = 256,                    // rows of W (columns of y) per tile
    WG_BK = 64,                     // K per stage: 128 bytes of bf16, the 128-byte swizzle's row
    WG_STAGES = 4,                  // ring depth
    WG_THREADS = 384,               // producer + 2 consumer warpgroups
    WG_A_BYTES = WG_BM * WG_BK * 2, // 16 KB
    WG_B_BYTES = WG_BN * WG_BK * 2, // 32 KB
    WG_STAGE_BYTES = WG_A_BYTES + WG_B_BYTES,
    WG_EPI_BYTES = 16 * WG_BN / 2 * 2, // per consumer warp: 16 rows x 128 columns of bf16 (half the tile's width)
    // ring (1024-aligned) + 8 epilogue buffers + 2 x STAGES mbarriers, + 1023 for aligning the ring
    WG_SMEM = 1023 + WG_STAGES * WG_STAGE_BYTES + 8 * WG_EPI_BYTES + 2 * WG_STAGES * 8,
};

enum { WG_FWD, WG_SWIGLU, WG_DX, WG_DW, WG_DX_SWIGLU }; // the kernel's forms (top of the file)

struct WgGemmArgs {
    // A and B as TMA maps: FWD x [M][K], W [N][K] (boxes 64 x 128, 64 x 256; SWIGLU 64 x 128); DX dy (64 x 128), W
    // (64 x 64 boxes along its rows, the output's columns); DW dy and x, both 64 x 64 boxes along their rows
    CUtensorMap tm_x, tm_w;
    bf16 *y;
    float *yf; // DW: the fp32 output (row stride ldy)
    int ldy, M, N, K, accumulate; // the output [M x N], the reduction K (the form's own terms)
    bf16 *h; // SWIGLU: h [M, F] (row stride F) = swiglu(y), y = [gate | up] [M, 2F], N = 2F; DX_SWIGLU: swiglu(gu)
    const bf16 *gu; // DX_SWIGLU: [gate | up] [M, 2F] of the forward; y = dgu [M, 2F], N = F
    int F;
    int group_m; // row tiles per raster group (GDN_CUDA_WG_GROUP, default 8)
};

// tile t -> (row tile, column tile): groups of G row tiles, column-major inside a group
__device__ __forceinline__ void wg_tile_coords(int t, int tiles_m, int tiles_n, int G, int &tm, int &tn) {
    const int per_group = G * tiles_n, g = t / per_group, first = g * G;
    const int rows = min(tiles_m - first, G), r = t % per_group;
    tm = first + r % rows;
    tn = r / rows;
}

// 16 rows x 8 JJ columns (128 by default) of a consumer warp's tile out to y (pointing at the block's first element,
// row stride ldy, rows_left x cols_left of it inside the tensor), val(jj, i) giving the fp32 value of fragment
// element i of n8-tile jj (0..JJ-1): rounded to bf16 into the warp's shared buffer (16-byte units swizzled by row:
// conflict-free fragment writes and row reads), then out in 16-byte row segments.
template <int JJ = 16, typename Val>
__device__ __forceinline__ void wg_store16(bf16 *buf, bf16 *y, int ldy, int rows_left, int cols_left, Val val) {
    static_assert(JJ == 8 || JJ == 16, "64 or 128 columns");
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int jj = 0; jj < JJ; jj++) // unit jj of the row (8 columns = 16 bytes); rows g and g + 8
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const int r = g + 8 * half;
            *reinterpret_cast<__nv_bfloat162 *>(buf + r * 128 + ((jj ^ (r & 7)) * 8) + 2 * t) =
                __floats2bfloat162_rn(val(jj, 2 * half), val(jj, 2 * half + 1));
        }
    cu_syncwarp();
    // 16 rows x JJ units: lane reads unit (lane % JJ) of rows (32 / JJ) i + lane / JJ
    const int u = lane % JJ;
#pragma unroll
    for (int i = 0; i < JJ / 2; i++) {
        const int r = (32 / JJ) * i + lane / JJ, col = 8 * u;
        const uint4 v = *reinterpret_cast<const uint4 *>(buf + r * 128 + ((u ^ (r & 7)) * 8));
        if (r >= rows_left || col >= cols_left) continue;
        bf16 *yp = y + (size_t)r * ldy + col;
        if (col + 8 <= cols_left) {
            *reinterpret_cast<uint4 *>(yp) = v;
            continue;
        }
        const bf16 *vb = reinterpret_cast<const bf16 *>(&v);
        for (int e = 0; e < 8 && col + e < cols_left; e++) yp[e] = vb[e];
    }
    cu_syncwarp(); // the buffer is rewritten by the next call
}

// accumulate: y_old + acc in fp32, one rounding (the half-tile is written from fp32 values, not the staged bf16);
// acc(j, i): element i of n8-tile j, j < J
template <int J, typename Acc>
__device__ __forceinline__ void wg_store_acc(const WgGemmArgs &a, Acc acc, int row0, int col0) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int j = 0; j < J; j++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int row = row0 + g + 8 * (i >> 1), col = col0 + 8 * j + 2 * t + (i & 1);
            if (row < a.M && col < a.N) {
                bf16 *yp = a.y + (size_t)row * a.ldy + col;
                *yp = __float2bfloat16_rn(acc(j, i) + __bfloat162float(*yp));
            }
        }
}

// DW: yf += acc in fp32 (a gradient accumulator), 8-byte pairs where the row allows
template <int J, typename Acc>
__device__ __forceinline__ void wg_store_f32acc(const WgGemmArgs &a, Acc acc, int row0, int col0) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const bool pairs = (a.ldy % 2) == 0 && (reinterpret_cast<uintptr_t>(a.yf) & 7) == 0;
#pragma unroll
    for (int j = 0; j < J; j++)
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const int row = row0 + g + 8 * half, col = col0 + 8 * j + 2 * t;
            if (row >= a.M || col >= a.N) continue;
            float *yp = a.yf + (size_t)row * a.ldy + col;
            const float v0 = acc(j, 2 * half), v1 = acc(j, 2 * half + 1);
            if (pairs && col + 1 < a.N) {
                float2 o = *reinterpret_cast<float2 *>(yp);
                o.x += v0, o.y += v1;
                *reinterpret_cast<float2 *>(yp) = o;
            } else {
                yp[0] += v0;
                if (col + 1 < a.N) yp[1] += v1;
            }
        }
}

// A consumer warp's 16 rows of its tile (first row row0) out, NC columns: acc(j, i) is element i of n8-tile j (j <
// NC / 8) as the fragment layout at the top of cuda/hopper.cuh places it; tn the tile's column index. The column tile
// is NC columns of y (FWD, DX, DW), or NC / 2 features' gate and up columns (SWIGLU), or NC features of dH (DX_SWIGLU).
template <int FORM, int NC, typename Acc>
__device__ __forceinline__ void wg_epilogue(const WgGemmArgs &a, bf16 *buf, Acc acc, int row0, int tn) {
    const int rows_left = a.M - row0;
    if (FORM == WG_SWIGLU) { // gate | up halves of the tile: features f0 .. f0 + NC / 2 - 1
        constexpr int H = NC / 16; // n8-tiles of one half
        const int f0 = tn * (NC / 2);
        bf16 *gu = a.y + (size_t)row0 * a.ldy;
        wg_store16<H>(buf, gu + f0, a.ldy, rows_left, a.F - f0, [&](int jj, int i) { return acc(jj, i); });
        wg_store16<H>(buf, gu + a.F + f0, a.ldy, rows_left, a.F - f0, [&](int jj, int i) { return acc(H + jj, i); });
        wg_store16<H>(buf, a.h + (size_t)row0 * a.F + f0, a.F, rows_left, a.F - f0, [&](int jj, int i) {
            const float g = rnd<bf16>(acc(jj, i)), u = rnd<bf16>(acc(H + jj, i));
            return swiglu_f(g, sigmoid_f(g), u);
        });
    } else if (FORM == WG_DW) {
        wg_store_f32acc<NC / 8>(a, acc, row0, tn * NC);
    } else if (FORM == WG_DX_SWIGLU) {
        // 64 features at a time: their gate and up values [16 rows x 64] through the warp's buffer (gate in its
        // 16-byte units 0-7, up in 8-15, swizzled by row as wg_store16's), read from memory in 16-byte row segments
        // (a warp load covers two rows' 128 bytes of each) with every load in flight at once, then into registers
        // in the fragment layout. (Session 17 measured the form at 80 TFLOP/s on an H100 with 4-byte loads in the
        // fragment layout, 8 rows of 16 bytes per instruction, notes/PERF.md.)
        const int lane = threadIdx.x & 31, F2 = 2 * a.F, gr = lane >> 2, tc = 2 * (lane & 3);
        const int lu = lane & 15, lr = lane >> 4; // the lane's unit of a row, and its row parity
#pragma unroll // unrolled: acc is indexed by constants only (registers, not the stack)
        for (int q = 0; q < NC / 64; q++) {
            const int f0 = tn * NC + 64 * q, cols_left = a.F - f0; // a multiple of 8 (F % 8 == 0)
            const bf16 *gp = a.gu + (size_t)row0 * F2 + f0 + (lu < 8 ? 8 * lu : a.F + 8 * (lu - 8));
            uint4 seg[8];
#pragma unroll
            for (int i = 0; i < 8; i++) { // rows 2 i + lr; zeros outside the tensor (never stored)
                const int r = 2 * i + lr;
                seg[i] = r < rows_left && 8 * (lu & 7) < cols_left
                             ? *reinterpret_cast<const uint4 *>(gp + (size_t)r * F2)
                             : make_uint4(0u, 0u, 0u, 0u);
            }
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const int r = 2 * i + lr;
                *reinterpret_cast<uint4 *>(buf + r * 128 + ((lu ^ (r & 7)) * 8)) = seg[i];
            }
            cu_syncwarp();
            // the gate pairs into registers (wg_store16<8> stages its output in units 0-7, over them); the up pairs
            // stay in units 8-15, read where used
            __nv_bfloat162 gv[8][2]; // element pairs (rows gr, gr + 8; features 8 jj + tc, + 1)
#pragma unroll
            for (int jj = 0; jj < 8; jj++)
#pragma unroll
                for (int hf = 0; hf < 2; hf++) {
                    const int r = gr + 8 * hf;
                    gv[jj][hf] = *reinterpret_cast<const __nv_bfloat162 *>(buf + r * 128 + ((jj ^ (r & 7)) * 8) + tc);
                }
            cu_syncwarp(); // every lane's gate pairs read before wg_store16 writes over them
            auto G = [&](int jj, int i) { return __bfloat162float((i & 1) ? gv[jj][i >> 1].y : gv[jj][i >> 1].x); };
            auto U = [&](int jj, int i) {
                const int r = gr + 8 * (i >> 1);
                const __nv_bfloat162 v =
                    *reinterpret_cast<const __nv_bfloat162 *>(buf + r * 128 + (((8 + jj) ^ (r & 7)) * 8) + tc);
                return __bfloat162float((i & 1) ? v.y : v.x);
            };
            auto dh = [&](int jj, int i) { return rnd<bf16>(acc(8 * q + jj, i)); }; // dH as stored
            bf16 *dg = a.y + (size_t)row0 * F2 + f0;
            wg_store16<8>(buf, dg, F2, rows_left, cols_left, [&](int jj, int i) {
                const float g = G(jj, i);
                return swiglu_dg(dh(jj, i), g, sigmoid_f(g), U(jj, i));
            });
            wg_store16<8>(buf, dg + a.F, F2, rows_left, cols_left, [&](int jj, int i) {
                const float g = G(jj, i);
                return swiglu_du(dh(jj, i), g, sigmoid_f(g));
            });
            if (a.h)
                wg_store16<8>(buf, a.h + (size_t)row0 * a.F + f0, a.F, rows_left, cols_left, [&](int jj, int i) {
                    const float g = G(jj, i);
                    return swiglu_f(g, sigmoid_f(g), U(jj, i));
                });
        }
    } else if (a.accumulate) {
        wg_store_acc<NC / 8>(a, acc, row0, tn * NC);
    } else {
        const int col0 = tn * NC;
        bf16 *y = a.y + (size_t)row0 * a.ldy + col0;
#pragma unroll
        for (int b = 0; b < NC / 128; b++)
            wg_store16(buf, y + 128 * b, a.ldy, rows_left, a.N - col0 - 128 * b,
                       [&](int jj, int i) { return acc(16 * b + jj, i); });
    }
}

// SWIGLU: the tile's 256 columns are 128 gate rows of W (f0 .. f0 + 127, f0 = 128 x column tile) and the same 128
// features' up rows (F + f0 ..): the epilogue writes both to y = [gate | up] and h = silu(gate) up from the rounded
// values, swiglu_fwd's formula (the same bits as the GEMM followed by swiglu_fwd).
template <int FORM>
__global__ void __launch_bounds__(WG_THREADS, 1) gemm_wg_kernel(const __grid_constant__ WgGemmArgs a) {
    constexpr bool SWIGLU = FORM == WG_SWIGLU, A_MN = FORM == WG_DW;
    constexpr bool B_MN = FORM == WG_DX || FORM == WG_DW || FORM == WG_DX_SWIGLU;
    CU_DYN_SMEM(unsigned char, raw);
    unsigned char *ring = raw + ((1024u - (smem_u32(raw) & 1023u)) & 1023u);
    bf16 *epi = reinterpret_cast<bf16 *>(ring + WG_STAGES * WG_STAGE_BYTES);
    uint64_t *full = reinterpret_cast<uint64_t *>(ring + WG_STAGES * WG_STAGE_BYTES + 8 * WG_EPI_BYTES);
    uint64_t *empty = full + WG_STAGES;
    const int wg = threadIdx.x / 128;
    const int tiles_m = (a.M + WG_BM - 1) / WG_BM, tiles = tiles_m * (SWIGLU ? a.F / 128 : (a.N + WG_BN - 1) / WG_BN);
    const int tiles_n = tiles / tiles_m;
    const int kt_n = (a.K + WG_BK - 1) / WG_BK;
    if (threadIdx.x == 0) {
        for (int s = 0; s < WG_STAGES; s++) {
            mbar_init(&full[s], 1);  // the producer's arrival (+ the TMA bytes)
            mbar_init(&empty[s], 2); // one arrival per consumer warpgroup
        }
        mbar_fence_init();
    }
    __syncthreads();

    if (wg == 0) { // producer
        wg_reg_dealloc<40>();
        if (threadIdx.x == 0) {
            tma_prefetch_map(&a.tm_x), tma_prefetch_map(&a.tm_w);
            int it = 0; // stage uses so far: stage it % STAGES, its round it / STAGES
            for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
                int tm, tn;
                wg_tile_coords(t, tiles_m, tiles_n, a.group_m, tm, tn);
                for (int kt = 0; kt < kt_n; kt++, it++) {
                    const int s = it % WG_STAGES;
                    mbar_wait(&empty[s], ((it / WG_STAGES) & 1) ^ 1); // a fresh barrier passes parity 1
                    unsigned char *st = ring + s * WG_STAGE_BYTES;
                    mbar_arrive_expect_tx(&full[s], WG_STAGE_BYTES);
                    if (A_MN) { // dy^T: the two consumers' 64 output rows, 64 of the reduction each
                        tma_load_2d(st, &a.tm_x, tm * WG_BM, kt * WG_BK, &full[s]);
                        tma_load_2d(st + WG_A_BYTES / 2, &a.tm_x, tm * WG_BM + 64, kt * WG_BK, &full[s]);
                    } else {
                        tma_load_2d(st, &a.tm_x, kt * WG_BK, tm * WG_BM, &full[s]);
                    }
                    if (B_MN) { // four 64-column blocks of the output, 64 of the reduction each, 8 KB apart
                        for (int j = 0; j < WG_BN / 64; j++)
                            tma_load_2d(st + WG_A_BYTES + j * 8192, &a.tm_w, tn * WG_BN + 64 * j, kt * WG_BK, &full[s]);
                    } else if (SWIGLU) { // gate rows, then the same features' up rows
                        tma_load_2d(st + WG_A_BYTES, &a.tm_w, kt * WG_BK, tn * 128, &full[s]);
                        tma_load_2d(st + WG_A_BYTES + WG_B_BYTES / 2, &a.tm_w, kt * WG_BK, a.F + tn * 128, &full[s]);
                    } else {
                        tma_load_2d(st + WG_A_BYTES, &a.tm_w, kt * WG_BK, tn * WG_BN, &full[s]);
                    }
                }
            }
        }
        return;
    }
    wg_reg_alloc<232>();
    const int c = wg - 1, warp = (threadIdx.x >> 5) & 3;
    bf16 *buf = epi + (size_t)(4 * c + warp) * (WG_EPI_BYTES / 2);
    float acc[128];
    int it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int tm, tn;
        wg_tile_coords(t, tiles_m, tiles_n, a.group_m, tm, tn);
        for (int kt = 0; kt < kt_n; kt++, it++) {
            const int s = it % WG_STAGES;
            mbar_wait(&full[s], (it / WG_STAGES) & 1);
            const uint32_t xa = smem_u32(ring + s * WG_STAGE_BYTES + c * (WG_A_BYTES / 2));
            const uint32_t wa = smem_u32(ring + s * WG_STAGE_BYTES + WG_A_BYTES);
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < WG_BK / 16; kk++) { // K-major: k16 steps of 32 bytes; MN-major: of 16 rows
                const uint64_t da = A_MN ? wg_desc_mn_sw128(xa + 2048 * kk, 8192) : wg_desc_sw128(xa + 32 * kk);
                const uint64_t db = B_MN ? wg_desc_mn_sw128(wa + 2048 * kk, 8192) : wg_desc_sw128(wa + 32 * kk);
                wgmma_m64n256k16<A_MN, B_MN>(acc, da, db, kt > 0 || kk > 0);
            }
            wg_commit();
            // the previous stage's MMAs are done once at most this one's group is pending: release that stage
            wg_wait<1>();
            wg_fence_regs(acc);
            if (kt > 0 && (threadIdx.x & 127) == 0) mbar_arrive(&empty[(it - 1) % WG_STAGES]);
        }
        wg_wait<0>();
        wg_fence_regs(acc);
        if ((threadIdx.x & 127) == 0) mbar_arrive(&empty[(it - 1) % WG_STAGES]);
        wg_epilogue<FORM, WG_BN>(a, buf, [&](int j, int i) { return acc[4 * j + i]; }, tm * WG_BM + 64 * c + 16 * warp,
                                 tn);
    }
}


// ---- the ping-pong schedule (GDN_CUDA_WG_SCHED=pingpong; forms FWD, SWIGLU, DX, DX_SWIGLU): each consumer
// warpgroup owns whole [128 x 128] tiles (two m64n128 accumulators, 128 registers), the block's tiles alternating
// between them; a consumer starts its main loop only once the other has finished its own (mbarrier done[c]), so
// one consumer's epilogue runs under the other's MMAs instead of stopping the tensor cores. The ring's stages
// (A [128 x 64] + B [128 x 64], 32 KB) are consumed in tile order, one consumer each (empty counts one arrival).
// Costs: B is loaded once per 128 output rows instead of 256 columns' worth per 128 rows (32 KB a stage for 2.1
// MFLOP against 48 KB for 4.2: 1.33x the shared-memory fill per MMA).
enum {
    PP_BM = 128,
    PP_BN = 128,
    PP_STAGES = 6,
    PP_STAGE_BYTES = (PP_BM + PP_BN) * WG_BK * 2, // 32 KB
    PP_SMEM = 1023 + PP_STAGES * PP_STAGE_BYTES + 8 * WG_EPI_BYTES + (2 * PP_STAGES + 2) * 8,
};

template <int FORM>
__global__ void __launch_bounds__(WG_THREADS, 1) gemm_wg_pp_kernel(const __grid_constant__ WgGemmArgs a) {
    static_assert(FORM != WG_DW, "DW's epilogue is a sliver of its long K: the cooperative schedule");
    constexpr bool SWIGLU = FORM == WG_SWIGLU, B_MN = FORM == WG_DX || FORM == WG_DX_SWIGLU;
    CU_DYN_SMEM(unsigned char, raw);
    unsigned char *ring = raw + ((1024u - (smem_u32(raw) & 1023u)) & 1023u);
    bf16 *epi = reinterpret_cast<bf16 *>(ring + PP_STAGES * PP_STAGE_BYTES);
    uint64_t *full = reinterpret_cast<uint64_t *>(ring + PP_STAGES * PP_STAGE_BYTES + 8 * WG_EPI_BYTES);
    uint64_t *empty = full + PP_STAGES, *done = empty + PP_STAGES; // done[c]: consumer c finished a main loop
    const int wg = threadIdx.x / 128;
    const int tiles_m = (a.M + PP_BM - 1) / PP_BM, tiles_n = SWIGLU ? a.F / 64 : (a.N + PP_BN - 1) / PP_BN;
    const int tiles = tiles_m * tiles_n, kt_n = (a.K + WG_BK - 1) / WG_BK;
    if (threadIdx.x == 0) {
        for (int s = 0; s < PP_STAGES; s++) mbar_init(&full[s], 1), mbar_init(&empty[s], 1);
        mbar_init(&done[0], 1), mbar_init(&done[1], 1);
        mbar_fence_init();
    }
    __syncthreads();

    if (wg == 0) { // producer: every tile of the block in order, whichever consumer takes it
        wg_reg_dealloc<40>();
        if (threadIdx.x == 0) {
            tma_prefetch_map(&a.tm_x), tma_prefetch_map(&a.tm_w);
            int it = 0;
            for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
                int tm, tn;
                wg_tile_coords(t, tiles_m, tiles_n, a.group_m, tm, tn);
                for (int kt = 0; kt < kt_n; kt++, it++) {
                    const int s = it % PP_STAGES;
                    mbar_wait(&empty[s], ((it / PP_STAGES) & 1) ^ 1);
                    unsigned char *st = ring + s * PP_STAGE_BYTES, *sb = st + PP_BM * WG_BK * 2;
                    mbar_arrive_expect_tx(&full[s], PP_STAGE_BYTES);
                    tma_load_2d(st, &a.tm_x, kt * WG_BK, tm * PP_BM, &full[s]);
                    if (B_MN) { // two 64-column blocks of the output
                        tma_load_2d(sb, &a.tm_w, tn * PP_BN, kt * WG_BK, &full[s]);
                        tma_load_2d(sb + 8192, &a.tm_w, tn * PP_BN + 64, kt * WG_BK, &full[s]);
                    } else if (SWIGLU) { // 64 features' gate rows, then their up rows
                        tma_load_2d(sb, &a.tm_w, kt * WG_BK, tn * 64, &full[s]);
                        tma_load_2d(sb + 8192, &a.tm_w, kt * WG_BK, a.F + tn * 64, &full[s]);
                    } else {
                        tma_load_2d(sb, &a.tm_w, kt * WG_BK, tn * PP_BN, &full[s]);
                    }
                }
            }
        }
        return;
    }
    wg_reg_alloc<232>();
    const int c = wg - 1, warp = (threadIdx.x >> 5) & 3;
    bf16 *buf = epi + (size_t)(4 * c + warp) * (WG_EPI_BYTES / 2);
    float acc0[64], acc1[64]; // rows 0-63 and 64-127 of the tile
    for (int t = blockIdx.x + c * gridDim.x, k = c; t < tiles; t += 2 * gridDim.x, k += 2) {
        int tm, tn;
        wg_tile_coords(t, tiles_m, tiles_n, a.group_m, tm, tn);
        if (k > 0) mbar_wait(&done[1 - c], ((k - 1) / 2) & 1); // the other consumer's main loop of tile k - 1
        int it = k * kt_n;                                      // the ring's stage uses before this tile's
        for (int kt = 0; kt < kt_n; kt++, it++) {
            const int s = it % PP_STAGES;
            mbar_wait(&full[s], (it / PP_STAGES) & 1);
            const uint32_t xa = smem_u32(ring + s * PP_STAGE_BYTES), wa = xa + PP_BM * WG_BK * 2;
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < WG_BK / 16; kk++) {
                const uint64_t db = B_MN ? wg_desc_mn_sw128(wa + 2048 * kk, 8192) : wg_desc_sw128(wa + 32 * kk);
                wgmma_m64n128k16<0, B_MN>(acc0, wg_desc_sw128(xa + 32 * kk), db, kt > 0 || kk > 0);
                wgmma_m64n128k16<0, B_MN>(acc1, wg_desc_sw128(xa + 8192 + 32 * kk), db, kt > 0 || kk > 0);
            }
            wg_commit();
            wg_wait<1>();
            wg_fence_regs(acc0), wg_fence_regs(acc1);
            if (kt > 0 && (threadIdx.x & 127) == 0) mbar_arrive(&empty[(it - 1) % PP_STAGES]);
        }
        wg_wait<0>();
        wg_fence_regs(acc0), wg_fence_regs(acc1);
        if ((threadIdx.x & 127) == 0) {
            mbar_arrive(&empty[(it - 1) % PP_STAGES]);
            mbar_arrive(&done[c]); // the other consumer's next main loop may start
        }
        const int row0 = tm * PP_BM + 16 * warp;
        wg_epilogue<FORM, PP_BN>(a, buf, [&](int j, int i) { return acc0[4 * j + i]; }, row0, tn);
        wg_epilogue<FORM, PP_BN>(a, buf, [&](int j, int i) { return acc1[4 * j + i]; }, row0 + 64, tn);
    }
}

// ---------------------------------------------------------------------------------------------------
// host side

void cu_tmap_2d_bf16(CUtensorMap *map, const void *base, uint64_t inner, uint64_t outer, uint64_t row_bytes,
                     uint32_t box_inner, uint32_t box_outer, const char *op) {
    CU_REQUIRE(((uintptr_t)base & 15u) == 0 && row_bytes % 16 == 0 && box_inner * 2 == 128 && box_outer <= 256,
               "tensor map", "%s: base %p (16-byte aligned?), row stride %llu bytes (a multiple of 16?), box %u x %u "
               "(64 wide, at most 256 rows?)",
               op, base, (unsigned long long)row_bytes, box_inner, box_outer);
#ifdef GDN_EMU
    emu::tmap_encode_2d(map, base, inner, outer, row_bytes, box_inner, box_outer);
#else
    static PFN_cuTensorMapEncodeTiled_v12000 encode = NULL;
    if (!encode) {
        void *fn = NULL;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        CU_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
        if (q != cudaDriverEntryPointSuccess || !fn)
            die("cuda backend, %s: the driver has no cuTensorMapEncodeTiled (query result %d)", op, (int)q);
        encode = (PFN_cuTensorMapEncodeTiled_v12000)fn;
    }
    const cuuint64_t dims[2] = {inner, outer}, strides[1] = {row_bytes};
    const cuuint32_t box[2] = {box_inner, box_outer}, elem_strides[2] = {1, 1};
    const CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void *>(base), dims, strides, box,
                              elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        die("cuda backend, %s: cuTensorMapEncodeTiled failed (CUresult %d) for a [%llu x %llu] bf16 tensor at %p, "
            "row stride %llu bytes, box %u x %u",
            op, (int)r, (unsigned long long)outer, (unsigned long long)inner, base, (unsigned long long)row_bytes,
            box_inner, box_outer);
#endif
}

bool cu_sm90() {
    static int sm90 = -1;
    if (sm90 < 0) {
#ifdef GDN_EMU
        sm90 = 1;
#else
        int major = 0;
        CU_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, g_cu.device));
        sm90 = major == 9;
#endif
    }
    return sm90;
}

// Whether this GEMM can run here: sm_90, 16-byte aligned x, W, y and row strides (TMA and the 16-byte stores).
bool cu_gemm_wg_fits(const void *y, int ldy, const void *x, int ldx, const void *W, int ldw) {
    return cu_sm90() && cu_aligned16(y) && cu_aligned16(x) && cu_aligned16(W) && ldy % 8 == 0 && ldx % 8 == 0 &&
           ldw % 8 == 0;
}

static bool wg_on() {
    static int on = -1; // GDN_CUDA_GEMM=wg (cu_matmul_init refuses other values than lt, ex, wg)
    if (on < 0) {
        const char *gm = getenv("GDN_CUDA_GEMM");
        on = gm && !strcmp(gm, "wg");
    }
    return on;
}

// GDN_CUDA_WG_FORMS: a comma list of WgUse names, or "all" (the default); an A/B switch (the forms measured alone)
static unsigned wg_forms() {
    static const struct {
        const char *name;
        unsigned use;
    } names[] = {{"fwd", WG_USE_FWD}, {"swiglu", WG_USE_SWIGLU}, {"dx", WG_USE_DX}, {"dx_swiglu", WG_USE_DX_SWIGLU},
                 {"dw", WG_USE_DW}, {"lm_logits", WG_USE_LM_LOGITS}, {"lm_dy", WG_USE_LM_DY}, {"lm_de", WG_USE_LM_DE},
                 {"all", 255u}};
    static int parsed = 0;
    static unsigned forms = 255u;
    if (!parsed) {
        parsed = 1;
        const char *e = getenv("GDN_CUDA_WG_FORMS");
        if (e && *e) {
            forms = 0;
            for (const char *p = e; *p;) {
                const char *end = strchr(p, ',');
                const size_t n = end ? (size_t)(end - p) : strlen(p);
                unsigned hit = 0;
                for (const auto &f : names)
                    if (strlen(f.name) == n && !strncmp(f.name, p, n)) hit = f.use;
                if (!hit)
                    die("GDN_CUDA_WG_FORMS=%s: \"%.*s\" is none of fwd, swiglu, dx, dx_swiglu, dw, lm_logits, lm_dy, "
                        "lm_de, all",
                        e, (int)n, p);
                forms |= hit;
                p += n + (end ? 1 : 0);
            }
        }
    }
    return forms;
}

bool cu_gemm_wg_takes(WgUse use, int M, const void *y, int ldy, const void *x, int ldx, const void *W, int ldw) {
    return wg_on() && (wg_forms() & (unsigned)use) && M > 4 && cu_gemm_wg_fits(y, ldy, x, ldx, W, ldw);
}

// dW's tiles are [128 x 256] of dW itself, each summing over all M rows: few tiles leave SMs idle for the whole
// GEMM (cuBLASLt splits the sum there), so it takes shapes whose tiles fill at least 3/4 of the SMs' waves.
bool cu_gemm_wg_dw_takes(WgUse use, int M, int N, int K, const float *dW, const void *dy, int lddy, const void *x,
                         int ldx) {
    if (!cu_gemm_wg_takes(use, M, dW, 8, dy, lddy, x, ldx)) return false;
    const long sms = g_cu.sm_count > 0 ? g_cu.sm_count : 1;
    const long tiles = (long)((N + WG_BM - 1) / WG_BM) * ((K + WG_BN - 1) / WG_BN), waves = (tiles + sms - 1) / sms;
    return 4 * tiles >= 3 * waves * sms;
}

// GDN_CUDA_WG_SCHED=pingpong runs the forms other than DW on the ping-pong schedule (gemm_wg_pp_kernel); coop,
// the default, on the cooperative one. An A/B switch: each output is one fp32 sum over K in the same k16 order
// either way (the same bits in the emulator; n128 and n256 wgmmas may round their partial sums differently).
static bool wg_pingpong(int form) {
    static int pp = -1;
    if (pp < 0) {
        const char *e = getenv("GDN_CUDA_WG_SCHED");
        if (e && *e && strcmp(e, "coop") && strcmp(e, "pingpong"))
            die("GDN_CUDA_WG_SCHED=%s: expected coop (the default) or pingpong", e);
        pp = e && !strcmp(e, "pingpong");
    }
    return pp && form != WG_DW;
}

// Output columns of one tile on the schedule wg_pingpong picks for the form: W rows a tile reads (SWIGLU: half of
// them gate rows, half up rows), the box the callers encode W's map with when it is K-major
static int wg_tile_n(int form) { return wg_pingpong(form) ? (int)PP_BN : (int)WG_BN; }

// Launches the form on the schedule wg_pingpong picks (W's map encoded with wg_tile_n's box), one block per SM at most.
static void wg_launch(const char *name, WgGemmArgs &a, int form) {
    static int group = -1; // a tuning knob for the benchmarks: any value gives the same results
    if (group < 0) {
        const char *e = getenv("GDN_CUDA_WG_GROUP");
        group = e && atoi(e) > 0 ? atoi(e) : 8;
    }
    a.group_m = group;
    const bool pp = wg_pingpong(form);
    const int bn = wg_tile_n(form), feat = bn / 2; // output columns per tile (SWIGLU: features bn / 2)
    const long tiles = (long)((a.M + WG_BM - 1) / WG_BM) * (form == WG_SWIGLU ? a.F / feat : (a.N + bn - 1) / bn);
    // GDN_CUDA_WG_GRID=n caps the grid (tests: many tiles a block, so the persistent loop, the ring's wrap-around
    // and the ping-pong hand-over run on small shapes)
    static int cap = -1;
    if (cap < 0) {
        const char *e = getenv("GDN_CUDA_WG_GRID");
        cap = e && atoi(e) > 0 ? atoi(e) : 0;
    }
    long blocks = tiles < g_cu.sm_count ? tiles : (g_cu.sm_count > 0 ? g_cu.sm_count : 1);
    if (cap > 0 && cap < blocks) blocks = cap;
    const dim3 grid((unsigned)blocks);
    if (pp) {
        switch (form) {
        case WG_FWD: cu_launch(name, gemm_wg_pp_kernel<WG_FWD>, grid, dim3(WG_THREADS), (size_t)PP_SMEM, a); break;
        case WG_SWIGLU:
            cu_launch(name, gemm_wg_pp_kernel<WG_SWIGLU>, grid, dim3(WG_THREADS), (size_t)PP_SMEM, a);
            break;
        case WG_DX: cu_launch(name, gemm_wg_pp_kernel<WG_DX>, grid, dim3(WG_THREADS), (size_t)PP_SMEM, a); break;
        default: cu_launch(name, gemm_wg_pp_kernel<WG_DX_SWIGLU>, grid, dim3(WG_THREADS), (size_t)PP_SMEM, a); break;
        }
        return;
    }
    switch (form) {
    case WG_FWD: cu_launch(name, gemm_wg_kernel<WG_FWD>, grid, dim3(WG_THREADS), (size_t)WG_SMEM, a); break;
    case WG_SWIGLU: cu_launch(name, gemm_wg_kernel<WG_SWIGLU>, grid, dim3(WG_THREADS), (size_t)WG_SMEM, a); break;
    case WG_DX: cu_launch(name, gemm_wg_kernel<WG_DX>, grid, dim3(WG_THREADS), (size_t)WG_SMEM, a); break;
    case WG_DW: cu_launch(name, gemm_wg_kernel<WG_DW>, grid, dim3(WG_THREADS), (size_t)WG_SMEM, a); break;
    default: cu_launch(name, gemm_wg_kernel<WG_DX_SWIGLU>, grid, dim3(WG_THREADS), (size_t)WG_SMEM, a); break;
    }
}

// y[M, N] (row stride ldy) = x[M, K] (ldx) W[N, K]^T (ldw) (+ y with accumulate); see the top of the file.
void cu_gemm_wg(const char *op, bf16 *y, int ldy, const bf16 *x, int ldx, const bf16 *W, int ldw, int M, int N, int K,
                int accumulate) {
    CU_REQUIRE(M > 0 && N > 0 && K > 0, "gemm_wg", "%s: empty GEMM M=%d N=%d K=%d", op, M, N, K);
    CU_REQUIRE(cu_gemm_wg_fits(y, ldy, x, ldx, W, ldw), "gemm_wg",
               "%s: needs sm_90 and 16-byte aligned y, x, W with row strides multiple of 8 (ldy=%d ldx=%d ldw=%d)", op,
               ldy, ldx, ldw);
    WgGemmArgs a;
    memset(&a, 0, sizeof a);
    cu_tmap_2d_bf16(&a.tm_x, x, (uint64_t)K, (uint64_t)M, (uint64_t)ldx * 2, WG_BK, WG_BM, op);
    cu_tmap_2d_bf16(&a.tm_w, W, (uint64_t)K, (uint64_t)N, (uint64_t)ldw * 2, WG_BK, wg_tile_n(WG_FWD), op);
    a.y = y, a.ldy = ldy, a.M = M, a.N = N, a.K = K, a.accumulate = accumulate;
    wg_launch("gemm_wg", a, WG_FWD);
}

// gu[M, 2F] = x[M, K] W[2F, K]^T (W = [gate; up]) and h[M, F] = swiglu(gu), both dense; F a multiple of 128.
void cu_gemm_wg_swiglu(const char *op, bf16 *gu, bf16 *h, const bf16 *x, int ldx, const bf16 *W, int M, int F, int K) {
    CU_REQUIRE(M > 0 && F > 0 && K > 0 && F % 128 == 0, "gemm_wg_swiglu", "%s: M=%d F=%d (a multiple of 128) K=%d",
               op, M, F, K);
    CU_REQUIRE(cu_gemm_wg_fits(gu, 2 * F, x, ldx, W, K) && cu_aligned16(h), "gemm_wg_swiglu",
               "%s: needs sm_90 and 16-byte aligned gu, h, x, W with row strides multiple of 8 (ldx=%d K=%d)", op, ldx,
               K);
    WgGemmArgs a;
    memset(&a, 0, sizeof a);
    cu_tmap_2d_bf16(&a.tm_x, x, (uint64_t)K, (uint64_t)M, (uint64_t)ldx * 2, WG_BK, WG_BM, op);
    // gate and up boxes of half a tile's W rows each
    cu_tmap_2d_bf16(&a.tm_w, W, (uint64_t)K, (uint64_t)(2 * F), (uint64_t)K * 2, WG_BK, wg_tile_n(WG_SWIGLU) / 2, op);
    a.y = gu, a.ldy = 2 * F, a.M = M, a.N = 2 * F, a.K = K, a.h = h, a.F = F;
    wg_launch("gemm_wg_swiglu", a, WG_SWIGLU);
}

// dx[M, K] (row stride lddx) = dy[M, N] (lddy) W[N, K] (dense) (+ dx with accumulate): W read MN-major.
void cu_gemm_wg_dx(const char *op, bf16 *dx, int lddx, const bf16 *dy, int lddy, const bf16 *W, int M, int N, int K,
                   int accumulate) {
    CU_REQUIRE(M > 0 && N > 0 && K > 0, "gemm_wg_dx", "%s: empty GEMM M=%d N=%d K=%d", op, M, N, K);
    CU_REQUIRE(cu_gemm_wg_fits(dx, lddx, dy, lddy, W, K), "gemm_wg_dx",
               "%s: needs sm_90 and 16-byte aligned dx, dy, W with row strides multiple of 8 (lddx=%d lddy=%d K=%d)",
               op, lddx, lddy, K);
    WgGemmArgs a;
    memset(&a, 0, sizeof a);
    cu_tmap_2d_bf16(&a.tm_x, dy, (uint64_t)N, (uint64_t)M, (uint64_t)lddy * 2, WG_BK, WG_BM, op);
    cu_tmap_2d_bf16(&a.tm_w, W, (uint64_t)K, (uint64_t)N, (uint64_t)K * 2, 64, WG_BK, op);
    a.y = dx, a.ldy = lddx, a.M = M, a.N = K, a.K = N, a.accumulate = accumulate;
    wg_launch("gemm_wg_dx", a, WG_DX);
}

// dgu[M, 2F] = swiglu_bwd(gu, dH) and h = swiglu(gu) (if h) with dH = dy[M, K] (lddy) W[K, F] (the down projection's
// dx, never stored); gu, dgu [M, 2F] and h [M, F] dense.
void cu_gemm_wg_dx_swiglu(const char *op, bf16 *dgu, bf16 *h, const bf16 *gu, const bf16 *dy, int lddy, const bf16 *W,
                          int M, int F, int K) {
    CU_REQUIRE(M > 0 && F > 0 && K > 0 && F % 8 == 0, "gemm_wg_dx_swiglu", "%s: M=%d F=%d (a multiple of 8) K=%d", op,
               M, F, K);
    CU_REQUIRE(cu_gemm_wg_fits(dgu, 2 * F, dy, lddy, W, F) && cu_aligned16(gu) && (!h || cu_aligned16(h)),
               "gemm_wg_dx_swiglu",
               "%s: needs sm_90 and 16-byte aligned dgu, h, gu, dy, W with row strides multiple of 8 (lddy=%d F=%d)",
               op, lddy, F);
    WgGemmArgs a;
    memset(&a, 0, sizeof a);
    cu_tmap_2d_bf16(&a.tm_x, dy, (uint64_t)K, (uint64_t)M, (uint64_t)lddy * 2, WG_BK, WG_BM, op);
    cu_tmap_2d_bf16(&a.tm_w, W, (uint64_t)F, (uint64_t)K, (uint64_t)F * 2, 64, WG_BK, op);
    a.y = dgu, a.ldy = 2 * F, a.M = M, a.N = F, a.K = K, a.h = h, a.gu = gu, a.F = F;
    wg_launch("gemm_wg_dx_swiglu", a, WG_DX_SWIGLU);
}

// dW[N, K] (dense, fp32) += dy[M, N]^T (lddy) x[M, K] (ldx): both read MN-major.
void cu_gemm_wg_dw(const char *op, float *dW, const bf16 *dy, int lddy, const bf16 *x, int ldx, int M, int N, int K) {
    CU_REQUIRE(M > 0 && N > 0 && K > 0, "gemm_wg_dw", "%s: empty GEMM M=%d N=%d K=%d", op, M, N, K);
    CU_REQUIRE(cu_gemm_wg_fits(dW, 8, dy, lddy, x, ldx), "gemm_wg_dw",
               "%s: needs sm_90 and 16-byte aligned dW, dy, x with row strides multiple of 8 (lddy=%d ldx=%d)", op,
               lddy, ldx);
    WgGemmArgs a;
    memset(&a, 0, sizeof a);
    cu_tmap_2d_bf16(&a.tm_x, dy, (uint64_t)N, (uint64_t)M, (uint64_t)lddy * 2, 64, WG_BK, op);
    cu_tmap_2d_bf16(&a.tm_w, x, (uint64_t)K, (uint64_t)M, (uint64_t)ldx * 2, 64, WG_BK, op);
    a.yf = dW, a.ldy = K, a.M = N, a.N = K, a.K = M;
    wg_launch("gemm_wg_dw", a, WG_DW);
}

// ---- ops: the forms for the table (registered after matmul, gemv and elementwise, whose ops they fall back to)
template <typename T> struct WgUnfused {
    static void (*matmul_fwd)(void *, int, const void *, int, const void *, int, int, int, int);
    static void (*swiglu_fwd)(void *, const void *, int, int);
    static void (*matmul_bwd)(void *, int, float *, const void *, int, const void *, int, const void *, int, int, int,
                              int);
    static void (*swiglu_bwd)(void *, void *, const void *, const void *, int, int);
};
template <typename T> void (*WgUnfused<T>::matmul_fwd)(void *, int, const void *, int, const void *, int, int, int, int);
template <typename T> void (*WgUnfused<T>::swiglu_fwd)(void *, const void *, int, int);
template <typename T>
void (*WgUnfused<T>::matmul_bwd)(void *, int, float *, const void *, int, const void *, int, const void *, int, int, int,
                                 int);
template <typename T> void (*WgUnfused<T>::swiglu_bwd)(void *, void *, const void *, const void *, int, int);

template <typename T>
static void cu_matmul_swiglu_fwd(void *gu, void *h, const void *x, int ldx, const void *W, int M, int F, int K) {
    CU_REQUIRE(gu && h && x && W, "matmul_swiglu_fwd", "NULL pointer (gu, h, x, W)");
    CU_REQUIRE(M >= 0 && F > 0 && K > 0 && ldx >= K, "matmul_swiglu_fwd", "bad shape M=%d F=%d K=%d ldx=%d", M, F, K,
               ldx);
    if (M == 0) return;
    if (sizeof(T) == 2 && F % 128 == 0 && cu_aligned16(h) &&
        cu_gemm_wg_takes(WG_USE_SWIGLU, M, gu, 2 * F, x, ldx, W, K)) {
        cu_gemm_wg_swiglu("matmul_swiglu_fwd", (bf16 *)gu, (bf16 *)h, (const bf16 *)x, ldx, (const bf16 *)W, M, F, K);
        return;
    }
    WgUnfused<T>::matmul_fwd(gu, 2 * F, x, ldx, W, M, 2 * F, K, 0);
    WgUnfused<T>::swiglu_fwd(h, gu, M, F);
}

template <typename T>
static void cu_matmul_swiglu_bwd(void *dgu, void *y, void *dh, const void *dy, int lddy, const void *W, const void *gu,
                                 int M, int F, int K) {
    CU_REQUIRE(dgu && dh && dy && W && gu, "matmul_swiglu_bwd", "NULL pointer (dgu, dh, dy, W, gu)");
    CU_REQUIRE(M >= 0 && F > 0 && K > 0 && lddy >= K, "matmul_swiglu_bwd", "bad shape M=%d F=%d K=%d lddy=%d", M, F, K,
               lddy);
    if (M == 0) return;
    if (sizeof(T) == 2 && cu_aligned16(gu) && (!y || cu_aligned16(y)) &&
        cu_gemm_wg_takes(WG_USE_DX_SWIGLU, M, dgu, 2 * F, dy, lddy, W, F)) {
        cu_gemm_wg_dx_swiglu("matmul_swiglu_bwd", (bf16 *)dgu, (bf16 *)y, (const bf16 *)gu, (const bf16 *)dy, lddy,
                             (const bf16 *)W, M, F, K);
        return;
    }
    WgUnfused<T>::matmul_bwd(dh, F, NULL, dy, lddy, NULL, F, W, M, K, F, 0);
    WgUnfused<T>::swiglu_bwd(dgu, y, dh, gu, M, F);
}

void cu_register_gemm_wg(Backend *b, int use_bf16) {
    if (use_bf16) {
        WgUnfused<bf16>::matmul_fwd = b->matmul_fwd, WgUnfused<bf16>::swiglu_fwd = b->swiglu_fwd;
        WgUnfused<bf16>::matmul_bwd = b->matmul_bwd, WgUnfused<bf16>::swiglu_bwd = b->swiglu_bwd;
        b->matmul_swiglu_fwd = cu_matmul_swiglu_fwd<bf16>;
        b->matmul_swiglu_bwd = cu_matmul_swiglu_bwd<bf16>;
    } else {
        WgUnfused<float>::matmul_fwd = b->matmul_fwd, WgUnfused<float>::swiglu_fwd = b->swiglu_fwd;
        WgUnfused<float>::matmul_bwd = b->matmul_bwd, WgUnfused<float>::swiglu_bwd = b->swiglu_bwd;
        b->matmul_swiglu_fwd = cu_matmul_swiglu_fwd<float>;
        b->matmul_swiglu_bwd = cu_matmul_swiglu_bwd<float>;
    }
}
