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
#include "cuda/gemv.cuh"

#include <stdlib.h>
#include <string.h>

// grid (min(ceil(N / R), 4 per SM), ceil(M / MT)), 8 warps (gemv_run). Launched with programmatic dependent launch
// (cu_launch_pdl): the weights do not depend on the kernel before (nothing writes them while decoding), so the
// block's share goes to L2 and the first row's first batch into registers while that kernel finishes; the input rows
// are read, and y written, only after cu_pdl_wait. LM: held to 64 registers a thread (4 blocks per SM, as
// gemv_launch_s launches), and without the L2 prefetch (its 263 MB would evict the prefetched lines before their use
// and read DRAM twice).
template <typename T, int MT, bool VEC, int S, bool LM, bool SWO = false>
__global__ void __launch_bounds__(32 * GEMV_WARPS, LM ? 4 : 2) gemv_kernel(GemvArgs a) {
    CU_DYN_SMEM(float, xs);
    cu_pdl_trigger();
    if constexpr (!LM) gemv_prefetch<T, SWO, S>(a);
    gemv_run<T, MT, VEC, S, LM, SWO>(a, xs, (int)blockIdx.y * MT, [] { cu_pdl_wait(); });
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

template <typename T> static void gemv_launch(GemvArgs a) {
    const bool vec = gemv_prepare<T>(a);
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
    GemvArgs a = gemv_args(y, ldy, x, ldx, W, M, N, K, GV_PLAIN);
    a.accumulate = (uint8_t)(accumulate != 0);
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
    GemvArgs a = gemv_args(y, ldy, x, K, W, M, N, K, GV_RMSNORM);
    a.s_out = s_out, a.resid = resid, a.nw = nw, a.eps = eps;
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
    GemvArgs a = gemv_args(y, ldy, gu, 2 * K, W, M, N, K, GV_SWIGLU);
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
    GemvArgs a = gemv_args(h, F, x, K, W, M, 2 * F, K, GV_RMSNORM);
    a.s_out = s_out, a.resid = resid, a.nw = nw, a.eps = eps, a.swiglu_out = 1;
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
    GemvArgs a = gemv_args(nullptr, V, x, h, E, M, V, h, GV_RMSNORM);
    a.s_out = s_out, a.resid = resid, a.nw = nw, a.eps = eps;
    a.y32 = logits, a.xn_out = y, a.rstd_out = rstd, a.argmax = argmax;
    static int ring_on = -1; // GDN_GEMV_RING=0: token_ring_push's own kernel after the GEMV, for the A/B
    if (ring_on < 0) ring_on = !(getenv("GDN_GEMV_RING") && !strcmp(getenv("GDN_GEMV_RING"), "0"));
    if (ring_on) a.ring = ring, a.ring_count = ring_count, a.ring_k = ring_k; // pushed by the last block
    gemv_launch<T>(a);
    if (ring && !ring_on) Unfused<T>::token_ring_push(ring, ring_count, argmax, M, ring_k);
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
