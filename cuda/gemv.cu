// gemv.cu: GEMMs with few rows (decoding: M = B <= GEMV_MAX_M), y[M, N] = x'[M, K] . W[N, K]^T, where x' is x itself
// (matmul_fwd), the RMSNorm of x + resid (rmsnorm_matmul_fwd) or swiglu of gu (swiglu_matmul_fwd); the MLP's gate|up
// GEMV with SwiGLU in its epilogue, h[M, F] out instead of gu (rmsnorm_matmul_swiglu_fwd); and the lm head of a decode
// step, fp32 logits and each row's argmax from the RMSNorm of the last block's output (lmhead_norm_argmax).
//
// Why: at M = 1 a decode step is ~150 dependent kernels, each a few microseconds of launch and drain, while
// the weights are read in ~0.13 ms (notes/PERF.md, v0.3). A GEMM at M = 1 is a weight read: one warp per output
// row of W (or S warps, each over a slice of K, for long K and few rows) reads it with 16-byte loads and dots it
// with the M input rows, fp32 accumulation, a fixed lane order, warp_sum and the slices added in order
// (deterministic). A warp's first weight loads are issued before the staging below, and each batch of loads
// while the previous one is being used: the kernel waits on DRAM latency about once per block, not per row. The
// input rows (K values each) are staged in shared memory as fp32 by every block, which is where the norm or
// SwiGLU before the GEMM fuses in: a block recomputes the norm of its rows (K = h values, a few microseconds of L2
// reads less than the kernel it saves) and block 0 writes s_out.
// Roundings as the unfused ops: the staged row is rounded to act (rmsnorm_fwd's and swiglu_fwd's stored
// outputs), y once from the fp32 sum (+ y with accumulate, as cuBLASLt's beta = 1). Larger M: the unfused ops
// (cuBLASLt).
#include "cuda/common.cuh"

#include <stdlib.h>
#include <string.h>

#include <type_traits>

// GEMV_MAX_M: each 16-byte weight load is dotted with M staged rows read from shared memory (M x 32 bytes per lane);
// past ~4 rows those reads, not the weights, bound the kernel (~8x the weight bytes at M = 4 against shared memory's
// ~6x HBM's bandwidth), so larger M goes to cuBLASLt
enum { GEMV_MAX_M = 4, GEMV_WARPS = 8, GEMV_SMEM = 64 * 1024 }; // staged rows: at most 64 KB per block
enum GemvIn { GV_PLAIN = 0, GV_RMSNORM = 1, GV_SWIGLU = 2 };

struct GemvArgs {
    void *y;
    void *s_out;
    const void *x, *resid, *W;
    const float *nw;
    int ldy, ldx, M, N, K, accumulate, mode;
    float eps;
    // the staging reads x (and resid, writes s_out) in 16-byte vectors (16-byte aligned, ldx and K multiples of 8 / 4)
    int xvec;
    // The lm head of a decode step (the kernel's LM form; argmax not NULL): y in fp32 into y32 (the logits), the
    // normed rows [M, K] (act, as staged) into xn_out and their rstd [M] into rstd_out by block 0, and each row's
    // argmax of y (first index on ties; 0 when all NaN or -inf). The other GEMVs' kernels have none of this code.
    float *y32;
    void *xn_out;
    float *rstd_out;
    int32_t *argmax;
    // rmsnorm_matmul_swiglu_fwd (the kernel's SWO form): W = [gate; up] (N = 2F rows), y = h [M, F] (row stride ldy)
    // = swiglu of the rounded gate and up values; gu is never written
    int swiglu_out;
    int32_t *ring, *ring_count; // LM: the token ring the last block pushes the argmax into (token_ring_push), or NULL
    int ring_k;
};

// The argmax across blocks: per row a 64-bit key, the value's bits made unsigned-orderable above the complement of
// its column, so that the largest key holds the largest value at its lowest column. Integer maxima do not depend on
// the order the blocks arrive in (deterministic). The last block to arrive (an integer counter) decodes the keys
// into argmax and resets keys and counter for the next launch (one stream: launches of this kernel never overlap).
#ifdef GDN_EMU
static unsigned long long g_gemv_key[GEMV_MAX_M];
static unsigned g_gemv_arrive;
#else
__device__ unsigned long long g_gemv_key[GEMV_MAX_M];
__device__ unsigned g_gemv_arrive;
#endif
__device__ __forceinline__ unsigned long long gemv_argmax_key(float v, int col) {
    unsigned u = __float_as_uint(v);
    u = u & 0x80000000u ? ~u : u | 0x80000000u;
    return (unsigned long long)u << 32 | (0xFFFFFFFFu - (unsigned)col);
}

// rows [m0, m0 + MT) of x' into xs [MT][K] (rows past M: zeros); LM: the normed rows and rstd out too
template <typename T, int MT, bool LM> __device__ void gemv_stage(const GemvArgs &a, float *xs, int m0) {
    const T *x = (const T *)a.x, *resid = (const T *)a.resid;
    for (int mm = 0; mm < MT; mm++) {
        const int m = m0 + mm;
        float *row = xs + (size_t)mm * a.K;
        if (m >= a.M) {
            for (int k = threadIdx.x; k < a.K; k += blockDim.x) row[k] = 0.0f;
            continue;
        }
        constexpr int V = 16 / (int)sizeof(T);
        if (a.mode == GV_PLAIN && a.xvec) { // one 16-byte load per V values: every load of a thread in flight at once
            for (int k = threadIdx.x * V; k < a.K; k += blockDim.x * V) {
                float v[V];
                load_vec<T, V>(v, x + (size_t)m * a.ldx + k);
#pragma unroll
                for (int e = 0; e < V; e++) row[k + e] = v[e];
            }
        } else if (a.mode == GV_PLAIN) {
#pragma unroll 4
            for (int k = threadIdx.x; k < a.K; k += blockDim.x) row[k] = to_f(x[(size_t)m * a.ldx + k]);
        } else if (a.mode == GV_SWIGLU && a.xvec) { // as below, V values per 16-byte load of g and of u
            for (int k = threadIdx.x * V; k < a.K; k += blockDim.x * V) {
                float g[V], u[V];
                load_vec<T, V>(g, x + (size_t)m * 2 * a.K + k);
                load_vec<T, V>(u, x + (size_t)m * 2 * a.K + a.K + k);
#pragma unroll
                for (int e = 0; e < V; e++) row[k + e] = rnd<T>(g[e] * sigmoid_f(g[e]) * u[e]);
            }
        } else if (a.mode == GV_SWIGLU) { // x = gu [M, 2K]
#pragma unroll 4
            for (int k = threadIdx.x; k < a.K; k += blockDim.x) {
                const float g = to_f(x[(size_t)m * 2 * a.K + k]), u = to_f(x[(size_t)m * 2 * a.K + a.K + k]);
                row[k] = rnd<T>(g * sigmoid_f(g) * u);
            }
        } else if (a.xvec) { // RMSNorm, V values per 16-byte load of x and resid: rmsnorm_fwd's vector order of the
            // sum of squares (at h <= V x 256 the same sum as its vector kernel: same per-thread runs, the extra warps
            // add +0), and one L2 round trip for the row instead of one per 256 values
            const size_t base = (size_t)m * a.K;
            const float ss = rmsnorm_load_row<T, V>(row, x + base, resid ? resid + base : nullptr,
                                                    a.s_out && blockIdx.x == 0 ? (T *)a.s_out + base : nullptr, a.K);
            const float rs = 1.0f / sqrtf(block_sum(ss) / (float)a.K + a.eps);
            if constexpr (LM) {
                T *xo = blockIdx.x == 0 ? (T *)a.xn_out + base : nullptr;
                if (blockIdx.x == 0 && threadIdx.x == 0) a.rstd_out[m] = rs;
                for (int k = threadIdx.x * V; k < a.K; k += blockDim.x * V) {
                    float v[V];
#pragma unroll
                    for (int e = 0; e < V; e++) row[k + e] = v[e] = rnd<T>(row[k + e] * rs * a.nw[k + e]);
                    if (xo) store_vec<T, V>(xo + k, v);
                }
            } else {
                for (int k = threadIdx.x * V; k < a.K; k += blockDim.x * V)
#pragma unroll
                    for (int e = 0; e < V; e++) row[k + e] = rnd<T>(row[k + e] * rs * a.nw[k + e]);
            }
        } else { // RMSNorm of s = x + resid from the fp32 s (rmsnorm_fwd's formula)
            float ss = 0.0f;
            for (int k = threadIdx.x; k < a.K; k += blockDim.x) {
                float s = to_f(x[(size_t)m * a.K + k]);
                if (resid) s += to_f(resid[(size_t)m * a.K + k]);
                row[k] = s;
                ss += s * s;
                if (a.s_out && blockIdx.x == 0) ((T *)a.s_out)[(size_t)m * a.K + k] = from_f<T>(s);
            }
            const float rs = 1.0f / sqrtf(block_sum(ss) / (float)a.K + a.eps);
            if constexpr (LM)
                if (blockIdx.x == 0 && threadIdx.x == 0) a.rstd_out[m] = rs;
            for (int k = threadIdx.x; k < a.K; k += blockDim.x) {
                row[k] = rnd<T>(row[k] * rs * a.nw[k]);
                if constexpr (LM)
                    if (blockIdx.x == 0) ((T *)a.xn_out)[(size_t)m * a.K + k] = from_f<T>(row[k]);
            }
        }
    }
}

// The weight loads of one lane: GEMV_U vectors of one output row at a time, kept raw (not unpacked) so that a
// batch can be issued long before its first use (before the staging, or during the previous batch's FMAs).
// Lane `lane` of slice s (of S) holds vectors j = 0, 1, ... at k = ((j S + s) 32 + lane) V: per lane the k
// order is ascending (the unsplit kernel's order when S = 1), each warp load is 512 contiguous bytes.
enum { GEMV_U = 4 };
template <typename T, bool VEC> struct GemvRaw {
    using type = typename std::conditional<VEC, uint4, T>::type;
};
template <typename T, bool VEC, int S>
__device__ __forceinline__ void gemv_load(typename GemvRaw<T, VEC>::type (&raw)[GEMV_U], const T *W, int n, int N,
                                          int K, int j0, int s, int lane) {
    constexpr int V = VEC ? 16 / (int)sizeof(T) : 1;
    if (n >= N) return;
    const T *wr = W + (size_t)n * K;
#pragma unroll
    for (int u = 0; u < GEMV_U; u++) {
        const int k = (((j0 + u) * S + s) * 32 + lane) * V;
        if (k < K) {
            if constexpr (VEC) raw[u] = *reinterpret_cast<const uint4 *>(wr + k);
            else raw[u] = wr[k];
        }
    }
}

// The W row that warp row r (of R) dots in block round nb: nb R + r; SWO (W = [gate; up], N = 2F): the round's R / 2
// features f = nb R / 2 + r mod R / 2, gate row f for r < R / 2 and up row F + f above, so one block holds both
// factors of each of its features; N (no row) for both warps of a feature f >= F
template <bool SWO, int R> __device__ __forceinline__ int gemv_row(int nb, int r, int N) {
    if constexpr (SWO) {
        constexpr int H2 = R / 2;
        const int F = N / 2, f = nb * H2 + (r < H2 ? r : r - H2);
        return f >= F ? N : r < H2 ? f : F + f;
    } else {
        return nb * R + r;
    }
}

// W rows [n0, n1) into L2, one 128-byte line per thread and step
template <typename T> __device__ __forceinline__ void gemv_prefetch_rows(const T *W, int n0, int n1, int K) {
    const uintptr_t lo = (uintptr_t)(W + (size_t)n0 * K) & ~(uintptr_t)127;
    const uintptr_t hi = (uintptr_t)(W + (size_t)n1 * K);
    for (uintptr_t p = lo + (uintptr_t)threadIdx.x * 128; p < hi; p += (uintptr_t)blockDim.x * 128)
        cu_prefetch_l2((const void *)p);
}

// The block's whole share of W (its rows of rounds nb = blockIdx.x, + gridDim.x, ...: gemv_row's) into L2: the loads
// of later rounds then wait on L2, not DRAM.
template <typename T, bool SWO, int R> __device__ void gemv_prefetch_share(const T *W, int N, int K) {
    if constexpr (SWO) {
        constexpr int H2 = R / 2;
        const int F = N / 2;
        for (int nb = blockIdx.x; nb * H2 < F; nb += gridDim.x) {
            gemv_prefetch_rows(W, nb * H2, min(nb * H2 + H2, F), K);
            gemv_prefetch_rows(W, F + nb * H2, F + min(nb * H2 + H2, F), K);
        }
    } else {
        for (int nb = blockIdx.x; nb * R < N; nb += gridDim.x) gemv_prefetch_rows(W, nb * R, min(nb * R + R, N), K);
    }
}

// grid (min(ceil(N / R), 4 per SM), ceil(M / MT)), 8 warps; R = 8 / S output rows per block and round: warp w
// dots row n = R x + w / S (then + R gridDim.x) over its K slice s = w % S. S > 1 (long K, few rows: more loads
// in flight): the S warps' warp_sum partials are added in slice order 0..S-1 through shared memory (fixed order,
// no atomics). VEC: W rows in 16-byte vectors (K a multiple of 16 / sizeof(T), W 16-byte aligned). LM: the lm
// head's form (GemvArgs), held to 64 registers a thread (4 blocks per SM, as gemv_launch_s launches), and without
// the L2 prefetch (its 263 MB would evict the prefetched lines before their use and read DRAM twice). SWO: the gate|up
// GEMV writing h = swiglu(gate, up) (gemv_row pairs the rows; each up warp hands its rounded value to its gate warp
// through shared memory): h's bits are those of swiglu_matmul_fwd's staging, which the down GEMV no longer redoes.
template <typename T, int MT, bool VEC, int S, bool LM, bool SWO = false>
__global__ void __launch_bounds__(32 * GEMV_WARPS, LM ? 4 : 2) gemv_kernel(GemvArgs a) {
    static_assert(!(LM && SWO), "the lm head has no SwiGLU");
    CU_DYN_SMEM(float, xs);
    __shared__ float red[GEMV_WARPS][MT];
    __shared__ float upv[SWO ? GEMV_WARPS : 1][MT]; // SWO: the round's up values, rounded to T, by feature
    // LM: the largest y of each warp's rows and its row, in shared memory (in registers they cost the kernel its 4
    // blocks per SM); rows ascend per warp, so > keeps the lowest on ties; NaN and -inf never win, as logits_stats
    __shared__ float wmx[LM ? GEMV_WARPS : 1][MT];
    __shared__ int wix[LM ? GEMV_WARPS : 1][MT];
    constexpr int V = VEC ? 16 / (int)sizeof(T) : 1, R = GEMV_WARPS / S;
    const int m0 = blockIdx.y * MT, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int r = warp / S, s = warp % S, K = a.K, N = a.N;
    const int J = (K + 32 * V * S - 1) / (32 * V * S); // vectors per lane and row (the last ones may be past K)
    const T *W = (const T *)a.W;
    using Raw = typename GemvRaw<T, VEC>::type;
    Raw raw[GEMV_U];
    // Launched with programmatic dependent launch (cu_launch_pdl): the weights do not depend on the kernel before
    // (nothing writes them while decoding), so the block's share goes to L2 and the first row's first batch into
    // registers while that kernel finishes; the input rows are read, and y written, only after cu_pdl_wait.
    cu_pdl_trigger();
    if constexpr (!LM) gemv_prefetch_share<T, SWO, R>(W, N, K);
    gemv_load<T, VEC, S>(raw, W, gemv_row<SWO, R>(blockIdx.x, r, N), N, K, 0, s, lane);
    cu_pdl_wait();
    gemv_stage<T, MT, LM>(a, xs, m0);
    if constexpr (LM)
        if (threadIdx.x < GEMV_WARPS * MT) wmx[0][threadIdx.x] = -INFINITY, wix[0][threadIdx.x] = N;
    __syncthreads();
    constexpr int RN = SWO ? R / 2 : R; // W rows (SWO: features) a round covers, of NR
    const int NR = SWO ? N / 2 : N;
    for (int nb = blockIdx.x; nb * RN < NR; nb += gridDim.x) { // uniform per block: the barriers below are safe
        const int n = gemv_row<SWO, R>(nb, r, N), n_next = gemv_row<SWO, R>(nb + (int)gridDim.x, r, N);
        float acc[MT];
#pragma unroll
        for (int mm = 0; mm < MT; mm++) acc[mm] = 0.0f;
        for (int j0 = 0; j0 < J; j0 += GEMV_U) {
            Raw cur[GEMV_U];
#pragma unroll
            for (int u = 0; u < GEMV_U; u++) cur[u] = raw[u];
            // the next batch (this row's or the next row's first) is in flight during this batch's FMAs
            if (j0 + GEMV_U < J) gemv_load<T, VEC, S>(raw, W, n, N, K, j0 + GEMV_U, s, lane);
            else gemv_load<T, VEC, S>(raw, W, n_next, N, K, 0, s, lane);
            if (n < N) {
#pragma unroll
                for (int u = 0; u < GEMV_U; u++) {
                    const int k = (((j0 + u) * S + s) * 32 + lane) * V;
                    if (k < K) {
                        float w[V];
                        if constexpr (VEC) unpack_vec<T, V>(w, cur[u]);
                        else w[0] = to_f(cur[u]);
#pragma unroll
                        for (int mm = 0; mm < MT; mm++) {
                            const float *xr = xs + (size_t)mm * K + k;
#pragma unroll
                            for (int v = 0; v < V; v++) acc[mm] += w[v] * xr[v];
                        }
                    }
                }
            }
        }
#pragma unroll
        for (int mm = 0; mm < MT; mm++) acc[mm] = warp_sum(acc[mm]);
        if constexpr (S > 1) {
            if (lane == 0)
#pragma unroll
                for (int mm = 0; mm < MT; mm++) red[warp][mm] = acc[mm];
            __syncthreads();
            if (s == 0 && lane == 0)
#pragma unroll
                for (int mm = 0; mm < MT; mm++) {
                    float t = 0.0f;
                    for (int q = 0; q < S; q++) t += red[warp + q][mm]; // slice order
                    acc[mm] = t;
                }
            __syncthreads(); // the next round's partials overwrite red
        }
        if constexpr (SWO) { // up warps hand their values over; gate warps write h
            constexpr int H2 = R / 2;
            if (n < N && s == 0 && lane == 0 && r >= H2)
#pragma unroll
                for (int mm = 0; mm < MT; mm++) upv[r - H2][mm] = rnd<T>(acc[mm]);
            __syncthreads();
            if (n < N && s == 0 && lane == 0 && r < H2)
                for (int mm = 0; mm < MT && m0 + mm < a.M; mm++) {
                    const float g = rnd<T>(acc[mm]), u = upv[r][mm];
                    ((T *)a.y)[(size_t)(m0 + mm) * a.ldy + n] = from_f<T>(g * sigmoid_f(g) * u);
                }
            __syncthreads(); // the next round's up values overwrite upv
        } else if (n < N && s == 0 && lane == 0) {
            if constexpr (LM) {
#pragma unroll
                for (int mm = 0; mm < MT; mm++) {
                    if (m0 + mm >= a.M) break;
                    a.y32[(size_t)(m0 + mm) * a.ldy + n] = acc[mm];
                    if (acc[mm] > wmx[warp][mm]) wmx[warp][mm] = acc[mm], wix[warp][mm] = n;
                }
            } else {
                for (int mm = 0; mm < MT && m0 + mm < a.M; mm++) {
                    T *yp = (T *)a.y + (size_t)(m0 + mm) * a.ldy + n;
                    *yp = from_f<T>(a.accumulate ? acc[mm] + to_f(*yp) : acc[mm]);
                }
            }
        }
    }
    if constexpr (LM) { // the block's warps combined by (max, lowest index), into the row's key
        __syncthreads();
        const int mm = threadIdx.x;
        if (mm < MT && m0 + mm < a.M) {
            float best = -INFINITY;
            int bi = N;
            for (int w = 0; w < GEMV_WARPS; w++)
                if (wmx[w][mm] > best || (wmx[w][mm] == best && wix[w][mm] < bi)) best = wmx[w][mm], bi = wix[w][mm];
            if (best > -INFINITY) atomicMax(&g_gemv_key[m0 + mm], gemv_argmax_key(best, bi));
            __threadfence(); // the key before this block's arrival
        }
        __syncthreads();
        if (threadIdx.x == 0 && atomicAdd(&g_gemv_arrive, 1u) == gridDim.x * gridDim.y - 1) {
            __threadfence();
            const int slot = a.ring ? a.ring_count[0] % a.ring_k : 0;
            for (int m = 0; m < a.M; m++) {
                const unsigned long long k = atomicExch(&g_gemv_key[m], 0ull);
                a.argmax[m] = k ? (int)(0xFFFFFFFFu - (unsigned)k) : 0;
                if (a.ring) a.ring[(size_t)slot * a.M + m] = a.argmax[m];
            }
            if (a.ring) a.ring_count[0] += 1;
            g_gemv_arrive = 0;
        }
    }
}

// S (K slices per output row): more warps, each with fewer loads to wait for, while the grid has fewer than
// ~4096 warps (~32 per SM on an H200) and each lane keeps at least one vector per row
static int gemv_slices(int N, int K, int V, int ytiles) {
    int S = 1;
    while (S < 4 && (size_t)N * S * ytiles < 4096 && K >= 2 * S * 32 * V) S *= 2;
    return S;
}

template <typename T, int MT, bool VEC, int S, bool LM, bool SWO> static void gemv_launch_s(const GemvArgs &a) {
    const size_t smem = (size_t)MT * a.K * sizeof(float);
    // blocks per multiprocessor (GDN_GEMV_PER_SM, default 4: the register file's worth at ~64 registers a thread);
    // fewer leave room for the next kernel's blocks to start their weight loads early (programmatic launch)
    static int per_sm = -1;
    if (per_sm < 0) {
        const char *e = getenv("GDN_GEMV_PER_SM");
        per_sm = e && atoi(e) > 0 ? atoi(e) : 4;
    }
    const unsigned gx = cu_blocks((size_t)a.N, GEMV_WARPS / S);
    const unsigned cap = (unsigned)per_sm * (unsigned)(g_cu.sm_count > 0 ? g_cu.sm_count : 1);
    const dim3 grid(gx < cap ? gx : cap, (unsigned)((a.M + MT - 1) / MT));
    cu_launch_pdl("gemv", gemv_kernel<T, MT, VEC, S, LM, SWO>, grid, dim3(32 * GEMV_WARPS), smem, a);
}

template <typename T, int MT, bool VEC, bool LM, bool SWO> static void gemv_launch_v(const GemvArgs &a) {
    const int S = gemv_slices(a.N, a.K, VEC ? 16 / (int)sizeof(T) : 1, (a.M + MT - 1) / MT);
    if (S == 4) gemv_launch_s<T, MT, VEC, 4, LM, SWO>(a);
    else if (S == 2) gemv_launch_s<T, MT, VEC, 2, LM, SWO>(a);
    else gemv_launch_s<T, MT, VEC, 1, LM, SWO>(a);
}

// SWO: 16-byte weight vectors only (cu_rmsnorm_matmul_swiglu_fwd checks; fewer kernels to build)
template <typename T, int MT, bool LM = false> static void gemv_launch_mt(const GemvArgs &a, bool vec) {
    if (a.swiglu_out) {
        if constexpr (!LM) gemv_launch_v<T, MT, true, false, true>(a);
    } else if (vec) {
        gemv_launch_v<T, MT, true, LM, false>(a);
    } else {
        gemv_launch_v<T, MT, false, LM, false>(a);
    }
}

// Whether the GEMV takes this shape: one row by default (GDN_GEMV_MAX_M, 1..GEMV_MAX_M: the multi-row tiles stay for
// A/B runs and their op cases), and the staged inputs fit in shared memory (at least 2 rows). Measured (H100, the
// 300M decoding, session 12): batch 2 0.872 ms/step through the GEMVs against 0.731 through cuBLASLt, batch 4 1.345
// against 0.685; at batch 1 the GEMVs win (~0.49 against cuBLASLt's ~0.6 in session 6).
static bool gemv_fits(int M, int K) {
    static int max_m = -1;
    if (max_m < 0) {
        const char *e = getenv("GDN_GEMV_MAX_M");
        max_m = e && atoi(e) >= 1 && atoi(e) <= GEMV_MAX_M ? atoi(e) : 1;
    }
    return M >= 1 && M <= max_m && (size_t)2 * K * sizeof(float) <= GEMV_SMEM;
}

template <typename T> static void gemv_launch(GemvArgs a) {
    const int V = 16 / (int)sizeof(T);
    const bool vec = a.K % V == 0 && cu_aligned16(a.W);
    static int xvec_on = -1; // GDN_GEMV_XVEC=0: the staging reads one value at a time (to measure what the vectors buy)
    if (xvec_on < 0) xvec_on = !(getenv("GDN_GEMV_XVEC") && !strcmp(getenv("GDN_GEMV_XVEC"), "0"));
    a.xvec = xvec_on && a.K % V == 0 && a.ldx % V == 0 && cu_aligned16(a.x) &&
             (a.mode != GV_RMSNORM || ((!a.resid || cu_aligned16(a.resid)) && (!a.s_out || cu_aligned16(a.s_out))));
    if (a.argmax) { // the lm head's form: one row (cu_lmhead_norm_argmax)
        gemv_launch_mt<T, 1, true>(a, vec);
        return;
    }
    int rows = GEMV_SMEM / (a.K * (int)sizeof(float)); // rows that fit, >= 2 (gemv_fits)
    int mt = 1;
    while (mt < a.M && mt * 2 <= rows) mt *= 2;
    switch (mt) {
    case 1: gemv_launch_mt<T, 1>(a, vec); break;
    case 2: gemv_launch_mt<T, 2>(a, vec); break;
    case 4: gemv_launch_mt<T, 4>(a, vec); break;
    default: gemv_launch_mt<T, 4>(a, vec);
    }
}

// ---- the ops. The unfused forms for larger M: the table's own ops, kept when registering.
template <typename T> struct Unfused {
    static void (*matmul_fwd)(void *, int, const void *, int, const void *, int, int, int, int);
    static void (*rmsnorm_fwd)(void *, float *, void *, const void *, const void *, const float *, int, int, float);
    static void (*swiglu_fwd)(void *, const void *, int, int);
    static void (*lmhead_logits)(float *, const void *, const void *, int, int, int);
    static void (*logits_stats)(int32_t *, float *, const float *, const int32_t *, int, int);
    static void (*token_ring_push)(int32_t *, int32_t *, const int32_t *, int, int);
};
template <typename T> void (*Unfused<T>::token_ring_push)(int32_t *, int32_t *, const int32_t *, int, int);
template <typename T> void (*Unfused<T>::lmhead_logits)(float *, const void *, const void *, int, int, int);
template <typename T> void (*Unfused<T>::logits_stats)(int32_t *, float *, const float *, const int32_t *, int, int);
template <typename T> void (*Unfused<T>::matmul_fwd)(void *, int, const void *, int, const void *, int, int, int, int);
template <typename T>
void (*Unfused<T>::rmsnorm_fwd)(void *, float *, void *, const void *, const void *, const float *, int, int, float);
template <typename T> void (*Unfused<T>::swiglu_fwd)(void *, const void *, int, int);

template <typename T>
static void cu_matmul_fwd_small(void *y, int ldy, const void *x, int ldx, const void *W, int M, int N, int K,
                                int accumulate) {
    if (!gemv_fits(M, K) || N <= 0 || !y || !x || !W || ldx < K || ldy < N) { // cuBLASLt, and its checks
        Unfused<T>::matmul_fwd(y, ldy, x, ldx, W, M, N, K, accumulate);
        return;
    }
    GemvArgs a = {y, nullptr, x, nullptr, W, nullptr, ldy, ldx, M, N, K, accumulate, GV_PLAIN, 0.0f, 0,
                  nullptr, nullptr, nullptr, nullptr, 0, nullptr, nullptr, 0};
    gemv_launch<T>(a);
}

template <typename T>
static void cu_rmsnorm_matmul_fwd(void *y, int ldy, void *s_out, const void *x, const void *resid, const float *nw,
                                  const void *W, int M, int N, int K, float eps) {
    CU_REQUIRE(y && x && nw && W, "rmsnorm_matmul_fwd", "NULL pointer (y, x, nw, W)");
    CU_REQUIRE(M >= 0 && N >= 0 && K > 0 && ldy >= N, "rmsnorm_matmul_fwd", "bad shape M=%d N=%d K=%d ldy=%d", M, N,
               K, ldy);
    CU_REQUIRE(!s_out || (s_out != x && s_out != resid), "rmsnorm_matmul_fwd",
               "s_out may not alias x or resid (other blocks still read them)");
    if (M == 0 || N == 0) return;
    if (!gemv_fits(M, K)) {
        T *xn = (T *)cu_scratch((size_t)M * K * sizeof(T), "rmsnorm_matmul_fwd");
        float *rstd = (float *)cu_scratch((size_t)M * sizeof(float), "rmsnorm_matmul_fwd");
        Unfused<T>::rmsnorm_fwd(xn, rstd, s_out, x, resid, nw, M, K, eps);
        Unfused<T>::matmul_fwd(y, ldy, xn, K, W, M, N, K, 0);
        cu_scratch_free(rstd);
        cu_scratch_free(xn);
        return;
    }
    GemvArgs a = {y, s_out, x, resid, W, nw, ldy, K, M, N, K, 0, GV_RMSNORM, eps, 0,
                  nullptr, nullptr, nullptr, nullptr, 0, nullptr, nullptr, 0};
    gemv_launch<T>(a);
}

template <typename T>
static void cu_swiglu_matmul_fwd(void *y, int ldy, const void *gu, const void *W, int M, int N, int K) {
    CU_REQUIRE(y && gu && W, "swiglu_matmul_fwd", "NULL pointer (y, gu, W)");
    CU_REQUIRE(M >= 0 && N >= 0 && K > 0 && ldy >= N, "swiglu_matmul_fwd", "bad shape M=%d N=%d K=%d ldy=%d", M, N, K,
               ldy);
    if (M == 0 || N == 0) return;
    if (!gemv_fits(M, K)) {
        T *h = (T *)cu_scratch((size_t)M * K * sizeof(T), "swiglu_matmul_fwd");
        Unfused<T>::swiglu_fwd(h, gu, M, K);
        Unfused<T>::matmul_fwd(y, ldy, h, K, W, M, N, K, 0);
        cu_scratch_free(h);
        return;
    }
    GemvArgs a = {y, nullptr, gu, nullptr, W, nullptr, ldy, 2 * K, M, N, K, 0, GV_SWIGLU, 0.0f, 0,
                  nullptr, nullptr, nullptr, nullptr, 0, nullptr, nullptr, 0};
    gemv_launch<T>(a);
}

// h[M, F] (dense) = swiglu(RMSNorm(x + resid) . W^T), W = [gate; up] [2F, K]: one GEMV at small M (K in 16-byte
// vectors), else rmsnorm_matmul_fwd into gu and swiglu_fwd
template <typename T>
static void cu_rmsnorm_matmul_swiglu_fwd(void *h, void *s_out, const void *x, const void *resid, const float *nw,
                                         const void *W, int M, int F, int K, float eps) {
    CU_REQUIRE(h && x && nw && W, "rmsnorm_matmul_swiglu_fwd", "NULL pointer (h, x, nw, W)");
    CU_REQUIRE(M >= 0 && F > 0 && K > 0, "rmsnorm_matmul_swiglu_fwd", "bad shape M=%d F=%d K=%d", M, F, K);
    CU_REQUIRE(!s_out || (s_out != x && s_out != resid), "rmsnorm_matmul_swiglu_fwd",
               "s_out may not alias x or resid (other blocks still read them)");
    if (M == 0) return;
    if (!gemv_fits(M, K) || K % (16 / (int)sizeof(T)) || !cu_aligned16(W)) {
        T *gu = (T *)cu_scratch((size_t)M * 2 * F * sizeof(T), "rmsnorm_matmul_swiglu_fwd");
        cu_rmsnorm_matmul_fwd<T>(gu, 2 * F, s_out, x, resid, nw, W, M, 2 * F, K, eps);
        Unfused<T>::swiglu_fwd(h, gu, M, F);
        cu_scratch_free(gu);
        return;
    }
    GemvArgs a = {h, s_out, x, resid, W, nw, F, K, M, 2 * F, K, 0, GV_RMSNORM, eps, 0,
                  nullptr, nullptr, nullptr, nullptr, 1, nullptr, nullptr, 0};
    gemv_launch<T>(a);
}

template <typename T>
static void cu_lmhead_norm_argmax(int32_t *argmax, float *logits, void *y, float *rstd, void *s_out, const void *x,
                                  const void *resid, const float *nw, const void *E, int M, int h, int V, float eps,
                                  int32_t *ring, int32_t *ring_count, int ring_k) {
    CU_REQUIRE(argmax && logits && y && rstd && x && nw && E, "lmhead_norm_argmax",
               "NULL pointer (argmax, logits, y, rstd, x, nw, E)");
    CU_REQUIRE(M >= 0 && h > 0 && V > 0, "lmhead_norm_argmax", "bad shape M=%d h=%d V=%d", M, h, V);
    CU_REQUIRE(!s_out || (s_out != x && s_out != resid), "lmhead_norm_argmax",
               "s_out may not alias x or resid (other blocks still read them)");
    CU_REQUIRE(!ring || (ring_count && ring_k > 0), "lmhead_norm_argmax", "a ring needs its count and K > 0 (K=%d)",
               ring_k);
    if (M == 0) return;
    static int on = -1; // GDN_GEMV_LMHEAD=0: the unfused ops (cuBLASLt's GEMM), for the A/B
    if (on < 0) on = !(getenv("GDN_GEMV_LMHEAD") && !strcmp(getenv("GDN_GEMV_LMHEAD"), "0"));
    // one row only: at M = 4 the GEMV's four staged rows made the 263 MB lm head 0.31 ms slower than cuBLASLt (H100)
    if (!on || M != 1 || !gemv_fits(M, h)) {
        Unfused<T>::rmsnorm_fwd(y, rstd, s_out, x, resid, nw, M, h, eps);
        Unfused<T>::lmhead_logits(logits, y, E, M, h, V);
        Unfused<T>::logits_stats(argmax, nullptr, logits, nullptr, M, V);
        if (ring) Unfused<T>::token_ring_push(ring, ring_count, argmax, M, ring_k);
        return;
    }
    GemvArgs a = {nullptr, s_out, x, resid, E, nw, V, h, M, V, h, 0, GV_RMSNORM, eps, 0,
                  nullptr, nullptr, nullptr, nullptr, 0, nullptr, nullptr, 0};
    a.y32 = logits, a.xn_out = y, a.rstd_out = rstd, a.argmax = argmax;
    a.ring = ring, a.ring_count = ring_count, a.ring_k = ring_k; // pushed by the last block: one kernel less a step
    gemv_launch<T>(a);
}

template <typename T> static void register_gemv_t(Backend *b) {
    Unfused<T>::lmhead_logits = b->lmhead_logits;
    Unfused<T>::logits_stats = b->logits_stats;
    Unfused<T>::token_ring_push = b->token_ring_push;
    b->lmhead_norm_argmax = cu_lmhead_norm_argmax<T>;
    Unfused<T>::matmul_fwd = b->matmul_fwd;
    Unfused<T>::rmsnorm_fwd = b->rmsnorm_fwd;
    Unfused<T>::swiglu_fwd = b->swiglu_fwd;
    b->matmul_fwd = cu_matmul_fwd_small<T>;
    b->rmsnorm_matmul_fwd = cu_rmsnorm_matmul_fwd<T>;
    b->swiglu_matmul_fwd = cu_swiglu_matmul_fwd<T>;
    b->rmsnorm_matmul_swiglu_fwd = cu_rmsnorm_matmul_swiglu_fwd<T>;
}

void cu_register_gemv(Backend *b, int use_bf16) {
    if (use_bf16) register_gemv_t<bf16>(b);
    else register_gemv_t<float>(b);
}
