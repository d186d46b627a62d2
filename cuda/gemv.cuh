// gemv.cuh: the device code of the GEMVs (cuda/gemv.cu: what they compute and why, the launches and the ops), shared
// with cuda/gdn_decode_block.cu, whose block kernel runs them as phases.
#pragma once
#include "cuda/common.cuh"

#include <stdlib.h>
#include <string.h>

#include <type_traits>

// GEMV_MAX_M: each 16-byte weight load is dotted with M staged rows read from shared memory (M x 32 bytes per lane);
// past ~4 rows those reads, not the weights, bound the kernel (~8x the weight bytes at M = 4 against shared memory's
// ~6x HBM's bandwidth), so larger M goes to cuBLASLt
enum { GEMV_MAX_M = 4, GEMV_WARPS = 8, GEMV_SMEM = 64 * 1024 }; // staged rows: at most 64 KB per block
enum GemvIn { GV_PLAIN = 0, GV_RMSNORM = 1, GV_SWIGLU = 2 };

// Kept within 128 bytes (static_assert below): with the token ring's fields added at 152 bytes, nvcc read the
// by-value kernel argument from parameter memory at each use and unrolled the lm head's loop less (its PTX: 52 -> 41
// global loads, 99 -> 89 FMAs, 19 -> 47 parameter loads; any struct past 128 bytes does it, padding alone too), and a
// batch-1 decode step ran 54 us slower on an H100 (session 18). Filled by gemv_args and named fields.
struct GemvArgs {
    void *y;
    void *s_out;
    const void *x, *resid, *W;
    const float *nw;
    // The lm head of a decode step (the kernel's LM form; argmax not NULL): y in fp32 into y32 (the logits), the
    // normed rows [M, K] (act, as staged) into xn_out and their rstd [M] into rstd_out by block 0, and each row's
    // argmax of y (first index on ties; 0 when all NaN or -inf). The other GEMVs' kernels have none of this code.
    float *y32;
    void *xn_out;
    float *rstd_out;
    int32_t *argmax;
    int32_t *ring, *ring_count; // LM: the token ring the last block pushes the argmax into (token_ring_push), or NULL
    int ldy, ldx, M, N, K;
    float eps;
    int ring_k;
    uint8_t accumulate, mode; // mode: GemvIn
    // the staging reads x (and resid, writes s_out) in 16-byte vectors (16-byte aligned, ldx and K multiples of 8 / 4)
    uint8_t xvec;
    // rmsnorm_matmul_swiglu_fwd (the kernel's SWO form): W = [gate; up] (N = 2F rows), y = h [M, F] (row stride ldy)
    // = swiglu of the rounded gate and up values; gu is never written
    uint8_t swiglu_out;
};
static_assert(sizeof(GemvArgs) <= 128, "GemvArgs past 128 bytes slows the GEMVs (see above)");

// The fields every form sets; the rest zero (NULL), set by name after.
static inline GemvArgs gemv_args(void *y, int ldy, const void *x, int ldx, const void *W, int M, int N, int K,
                                 GemvIn mode) {
    GemvArgs a = {};
    a.y = y, a.ldy = ldy, a.x = x, a.ldx = ldx, a.W = W, a.M = M, a.N = N, a.K = K, a.mode = (uint8_t)mode;
    return a;
}

// The argmax across blocks: per row a 64-bit key, the value's bits made unsigned-orderable above the complement of
// its column, so that the largest key holds the largest value at its lowest column. Integer maxima do not depend on
// the order the blocks arrive in (deterministic). The last block to arrive (an integer counter) decodes the keys
// into argmax and resets keys and counter for the next launch (one stream: launches of this kernel never overlap).
#ifdef GDN_EMU
static unsigned long long g_gemv_key[GEMV_MAX_M];
static unsigned g_gemv_arrive;
#else
static __device__ unsigned long long g_gemv_key[GEMV_MAX_M]; // static: a copy per file that includes this one
static __device__ unsigned g_gemv_arrive;
#endif
__device__ __forceinline__ unsigned long long gemv_argmax_key(float v, int col) {
    unsigned u = __float_as_uint(v);
    u = u & 0x80000000u ? ~u : u | 0x80000000u;
    return (unsigned long long)u << 32 | (0xFFFFFFFFu - (unsigned)col);
}

// The LM form's last block pushes the step's tokens into the ring (token_ring_push's slot and count). Out of line:
// inlined, this cold code cost the kernel's hot loop its unrolling (PTX: 99 -> 89 FMAs, registers 61 -> 56), the
// suspect of session 18's +54 us a batch-1 decode step.
static __device__ CU_NOINLINE void gemv_ring_push(int32_t *ring, int32_t *count, const int32_t *tok, int M, int K) {
    const int slot = count[0] % K;
    for (int m = 0; m < M; m++) ring[(size_t)slot * M + m] = tok[m];
    count[0] += 1;
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

// A block of 8 warps; R = 8 / S output rows per block and round: warp w dots row n = R x + w / S (then + R gridDim.x)
// over its K slice s = w % S. S > 1 (long K, few rows: more loads in flight): the S warps' warp_sum partials are
// added in slice order 0..S-1 through shared memory (fixed order, no atomics). VEC: W rows in 16-byte vectors (K a
// multiple of 16 / sizeof(T), W 16-byte aligned). LM: the lm head's form (GemvArgs). SWO: the gate|up GEMV writing
// h = swiglu(gate, up) (gemv_row pairs the rows; each up warp hands its rounded value to its gate warp through shared
// memory): h's bits are those of swiglu_matmul_fwd's staging, which the down GEMV no longer redoes.
// The kernel's body (gemv_kernel below; cuda/gdn_decode_block.cu runs it as a phase of its block kernel): rows
// m0 .. m0 + MT - 1 of y, rounds nb = blockIdx.x, + gridDim.x, ...; xs: K * MT floats of dynamic shared memory.
// wait() is called once by every thread, after the first weight loads and before anything another kernel (or
// phase) wrote is read: cu_pdl_wait in the kernel, the grid barrier in a phase.
template <typename T, int MT, bool VEC, int S, bool LM, bool SWO, typename Wait>
__device__ __forceinline__ void gemv_run(const GemvArgs &a, float *xs, int m0, Wait wait) {
    static_assert(!(LM && SWO), "the lm head has no SwiGLU");
    __shared__ float red[GEMV_WARPS][MT];
    __shared__ float upv[SWO ? GEMV_WARPS : 1][MT]; // SWO: the round's up values, rounded to T, by feature
    // LM: the largest y of each warp's rows and its row, in shared memory (in registers they cost the kernel its 4
    // blocks per SM); rows ascend per warp, so > keeps the lowest on ties; NaN and -inf never win, as logits_stats
    __shared__ float wmx[LM ? GEMV_WARPS : 1][MT];
    __shared__ int wix[LM ? GEMV_WARPS : 1][MT];
    constexpr int V = VEC ? 16 / (int)sizeof(T) : 1, R = GEMV_WARPS / S;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int r = warp / S, s = warp % S, K = a.K, N = a.N;
    const int J = (K + 32 * V * S - 1) / (32 * V * S); // vectors per lane and row (the last ones may be past K)
    const T *W = (const T *)a.W;
    using Raw = typename GemvRaw<T, VEC>::type;
    Raw raw[GEMV_U];
    gemv_load<T, VEC, S>(raw, W, gemv_row<SWO, R>(blockIdx.x, r, N), N, K, 0, s, lane);
    wait();
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
            for (int m = 0; m < a.M; m++) {
                const unsigned long long k = atomicExch(&g_gemv_key[m], 0ull);
                a.argmax[m] = k ? (int)(0xFFFFFFFFu - (unsigned)k) : 0;
            }
            if (a.ring) gemv_ring_push(a.ring, a.ring_count, a.argmax, a.M, a.ring_k);
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

// The block's share of W into L2 (not the LM form: see below).
template <typename T, bool SWO, int S> __device__ __forceinline__ void gemv_prefetch(const GemvArgs &a) {
    gemv_prefetch_share<T, SWO, GEMV_WARPS / S>((const T *)a.W, a.N, a.K);
}

// ---- host side, shared with gdn_decode_block.cu so that its phases run each GEMV as the standalone launch would

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

// Sets a.xvec (the staging's 16-byte loads where x, resid and s_out allow them); returns whether W's rows take
// 16-byte loads (the kernel's VEC form).
template <typename T> static bool gemv_prepare(GemvArgs &a) {
    const int V = 16 / (int)sizeof(T);
    static int xvec_on = -1; // GDN_GEMV_XVEC=0: the staging reads one value at a time (to measure what the vectors buy)
    if (xvec_on < 0) xvec_on = !(getenv("GDN_GEMV_XVEC") && !strcmp(getenv("GDN_GEMV_XVEC"), "0"));
    a.xvec = (uint8_t)(xvec_on && a.K % V == 0 && a.ldx % V == 0 && cu_aligned16(a.x) &&
             (a.mode != GV_RMSNORM || ((!a.resid || cu_aligned16(a.resid)) && (!a.s_out || cu_aligned16(a.s_out)))));
    return a.K % V == 0 && cu_aligned16(a.W);
}
