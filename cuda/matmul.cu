// matmul.cu: every GEMM of the backend goes through cu_gemm (cuBLASLt, fp32 accumulation, a 32 MiB
// workspace, one cached plan per shape), plus the projection ops matmul_fwd / matmul_bwd / matmul_bias_fwd.
// When cuBLASLt's heuristic has no algorithm for a shape (e.g. bf16 rows at odd strides), the plan
// falls back to cublasGemmEx, which takes any leading dimension, with the same compute type.
// GDN_CUDA_GEMM=ex forces that path for every GEMM (a switch for isolating a cuBLASLt problem).
// GDN_CUDA_GEMM_ALGO=r takes the heuristic's r-th choice (0 = its first, the default; clamped to what it returns):
// a sweep knob for `test_cuda_ops --bench-gemm`, not a setting (another algorithm can change the sums' order).
//
// Row-major to column-major. A row-major matrix X[r, c] with row stride ld is, read column-major, the
// matrix X^T (c rows, r columns, leading dimension ld). cu_gemm takes column-major operands, so:
//   forward  y = x W^T:  C = y^T (N x M, ldc = ldy) = op(A) op(B) with A = W^T as stored (K x N, lda = K)
//                        and op = T (op(A) = W), B = x^T as stored (K x M, ldb = ldx), op = N.
//   dx = dy W:           C = dx^T (K x M, ldc = lddx) = W^T (K x N, lda = K) . dy^T (N x M, ldb = lddy).
//   dW += dy^T x:        C = dW^T (K x N, ldc = K) = x^T (K x M, lda = ldx) . op(dy^T as stored, N x M,
//                        ldb = lddy) with op = T.
// Check: C(i, j) lives at C[j * ldc + i] = Y[j][i] of the row-major Y, e.g. forward
// C(n, m) = sum_k W[n][k] x[m][k] = y[m][n].
#include "cuda/common.cuh"
#include "cuda/gemm_wg.cuh"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <stdlib.h>

static cublasLtHandle_t g_lt;
static cublasHandle_t g_blas; // the cublasGemmEx fallback
static int g_force_gemmex;
static int g_algo_rank; // GDN_CUDA_GEMM_ALGO
static void *g_lt_ws;
enum { ALGO_RANKS = 8 };
static size_t LT_WS_BYTES = 32u << 20; // GDN_CUDA_GEMM_WS_MB overrides (benchmarks)

#define LT_CHECK(call, what)                                                                                           \
    do {                                                                                                               \
        cublasStatus_t s_ = (call);                                                                                    \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                                               \
            die("cuda backend, %s: %s failed: %s", what, #call, cublasLtGetStatusString(s_));                          \
    } while (0)

int cu_matmul_init(char *err, size_t errlen) {
    cublasStatus_t s = cublasLtCreate(&g_lt);
    if (s != CUBLAS_STATUS_SUCCESS)
        return set_err(err, errlen, "cublasLtCreate failed: %s", cublasLtGetStatusString(s));
    if ((s = cublasCreate(&g_blas)) != CUBLAS_STATUS_SUCCESS ||
        (s = cublasSetStream(g_blas, g_cu.stream)) != CUBLAS_STATUS_SUCCESS)
        return set_err(err, errlen, "cublasCreate failed: %s", cublasGetStatusString(s));
    const char *ws = getenv("GDN_CUDA_GEMM_WS_MB");
    if (ws && atoi(ws) > 0) LT_WS_BYTES = (size_t)atoi(ws) << 20;
    cudaError_t e = cudaMalloc(&g_lt_ws, LT_WS_BYTES);
    if (e != cudaSuccess)
        return set_err(err, errlen, "allocating the cuBLASLt workspace failed: %s", cudaGetErrorString(e));
    const char *gm = getenv("GDN_CUDA_GEMM");
    if (gm && *gm && strcmp(gm, "ex") && strcmp(gm, "wg") && strcmp(gm, "lt"))
        return set_err(err, errlen, "GDN_CUDA_GEMM=%s: expected lt (cuBLASLt, the default), ex (cublasGemmEx) or wg "
                       "(our sm_90 GEMMs for the bf16 projections)", gm);
    g_force_gemmex = gm && !strcmp(gm, "ex");
    const char *ar = getenv("GDN_CUDA_GEMM_ALGO");
    g_algo_rank = ar && atoi(ar) > 0 ? (atoi(ar) < ALGO_RANKS ? atoi(ar) : ALGO_RANKS - 1) : 0;
    return 0;
}

// ---- plan cache: the heuristic query and descriptor setup happen once per distinct GEMM.

struct PlanKey { // memset to zero before filling, so padding compares equal
    int64_t lda, ldb, ldc;
    int32_t ta, tb, m, n, k, ab, c, beta_nonzero, align_a, align_b, align_c;
};
struct Plan {
    PlanKey key;
    int used;
    int gemmex; // no cuBLASLt algorithm (or forced): use cublasGemmEx
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
};
enum { PLAN_SLOTS = 1024 };
static Plan g_plans[PLAN_SLOTS];

static int32_t ptr_align(const void *p) { // largest power of two dividing the address, capped at 256
    uintptr_t a = (uintptr_t)p;
    uintptr_t low = a & (~a + 1);
    return (int32_t)(a == 0 || low >= 256 ? 256 : low);
}

static uint32_t key_hash(const PlanKey *k) {
    const unsigned char *p = (const unsigned char *)k;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < sizeof *k; i++) h = (h ^ p[i]) * 16777619u;
    return h;
}

static void plan_destroy(Plan *p) {
    cublasLtMatrixLayoutDestroy(p->la);
    cublasLtMatrixLayoutDestroy(p->lb);
    cublasLtMatrixLayoutDestroy(p->lc);
    cublasLtMatmulDescDestroy(p->desc);
    p->used = 0;
}

static void plan_build(Plan *p, const PlanKey *k, const char *op) {
    const long lda = (long)k->lda, ldb = (long)k->ldb, ldc = (long)k->ldc;
    cudaDataType_t ab = (cudaDataType_t)k->ab, c = (cudaDataType_t)k->c;
    LT_CHECK(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), op);
    cublasOperation_t opa = k->ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = k->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    LT_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa), op);
    LT_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb), op);
    // Layouts describe the matrices as stored (before op): A is k x m when transposed, else m x k.
    LT_CHECK(cublasLtMatrixLayoutCreate(&p->la, ab, k->ta ? k->k : k->m, k->ta ? k->m : k->k, lda), op);
    LT_CHECK(cublasLtMatrixLayoutCreate(&p->lb, ab, k->tb ? k->n : k->k, k->tb ? k->k : k->n, ldb), op);
    LT_CHECK(cublasLtMatrixLayoutCreate(&p->lc, c, k->m, k->n, ldc), op);
    cublasLtMatmulPreference_t pref;
    LT_CHECK(cublasLtMatmulPreferenceCreate(&pref), op);
    size_t ws = LT_WS_BYTES;
    uint32_t al_a = (uint32_t)k->align_a, al_b = (uint32_t)k->align_b, al_c = (uint32_t)k->align_c;
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws), op);
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a),
             op);
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b),
             op);
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c),
             op);
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c),
             op);
    cublasLtMatmulHeuristicResult_t rank[ALGO_RANKS];
    int found = 0;
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(g_lt, p->desc, p->la, p->lb, p->lc, p->lc, pref, g_algo_rank + 1,
                                                      rank, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    const cublasLtMatmulHeuristicResult_t &res = rank[found > 0 ? (g_algo_rank < found ? g_algo_rank : found - 1) : 0];
    p->gemmex = g_force_gemmex || s != CUBLAS_STATUS_SUCCESS || found == 0 || res.state != CUBLAS_STATUS_SUCCESS;
    if (p->gemmex && (lda > INT32_MAX || ldb > INT32_MAX || ldc > INT32_MAX))
        die("cuda backend, %s: no cuBLASLt algorithm for C[%d x %d] = op%s(A) op%s(B), k=%d, and leading "
            "dimensions lda=%ld ldb=%ld ldc=%ld too large for cublasGemmEx",
            op, k->m, k->n, k->ta ? "T" : "N", k->tb ? "T" : "N", k->k, lda, ldb, ldc);
    if (!p->gemmex) p->algo = res.algo;
    p->key = *k;
    p->used = 1;
}

static Plan *plan_get(const PlanKey *k, const char *op) {
    uint32_t h = key_hash(k) % PLAN_SLOTS;
    for (int probe = 0; probe < 16; probe++) {
        Plan *p = &g_plans[(h + probe) % PLAN_SLOTS];
        if (p->used && !memcmp(&p->key, k, sizeof *k)) return p;
        if (!p->used) {
            plan_build(p, k, op);
            return p;
        }
    }
    Plan *p = &g_plans[h]; // a crowded neighbourhood: replace the home slot
    plan_destroy(p);
    plan_build(p, k, op);
    return p;
}

void cu_gemm(const char *op, bool ta, bool tb, int m, int n, int k, const void *A, long lda, const void *B, long ldb,
             void *C, long ldc, cudaDataType_t ab, cudaDataType_t c, float beta) {
    CU_REQUIRE(m > 0 && n > 0 && k > 0, "gemm", "%s: empty GEMM m=%d n=%d k=%d", op, m, n, k);
    CU_REQUIRE(lda >= (ta ? k : m) && ldb >= (tb ? n : k) && ldc >= m, "gemm",
               "%s: leading dimensions lda=%ld ldb=%ld ldc=%ld too small for m=%d n=%d k=%d (ta=%d tb=%d)", op, lda,
               ldb, ldc, m, n, k, (int)ta, (int)tb);
    PlanKey key;
    memset(&key, 0, sizeof key);
    key.ta = ta, key.tb = tb, key.m = m, key.n = n, key.k = k, key.ab = ab, key.c = c;
    key.beta_nonzero = beta != 0.0f;
    key.align_a = ptr_align(A), key.align_b = ptr_align(B), key.align_c = ptr_align(C);
    key.lda = lda, key.ldb = ldb, key.ldc = ldc;
    Plan *p = plan_get(&key, op);
    const float alpha = 1.0f;
    if (p->gemmex) {
        cublasStatus_t s =
            cublasGemmEx(g_blas, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha, A, ab,
                         (int)lda, B, ab, (int)ldb, &beta, C, c, (int)ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        if (s != CUBLAS_STATUS_SUCCESS)
            die("cuda backend, %s: cublasGemmEx failed for C[%d x %d] = op%s(A) op%s(B), k=%d, lda=%ld ldb=%ld "
                "ldc=%ld, %s inputs, %s output: %s",
                op, m, n, ta ? "T" : "N", tb ? "T" : "N", k, lda, ldb, ldc, ab == CUDA_R_16BF ? "bf16" : "fp32",
                c == CUDA_R_16BF ? "bf16" : "fp32", cublasGetStatusString(s));
        cu_after_launch(op);
        return;
    }
    LT_CHECK(cublasLtMatmul(g_lt, p->desc, &alpha, A, p->la, B, p->lb, &beta, C, p->lc, C, p->lc, &p->algo, g_lt_ws,
                            LT_WS_BYTES, g_cu.stream),
             op);
    cu_after_launch(op);
}

// ---------------------------------------------------------------------------------------------------
// ops

// Sets rows x cols act elements (row stride ld) to zero.
static void zero_rows(void *p, long ld, int rows, int cols, size_t elem) {
    CU_CHECK(cudaMemset2DAsync(p, ld * elem, 0, cols * elem, rows, g_cu.stream));
}

template <typename T>
static void cu_matmul_fwd(void *y, int ldy, const void *x, int ldx, const void *W, int M, int N, int K,
                          int accumulate) {
    CU_REQUIRE(y && x && W, "matmul_fwd", "NULL pointer (y, x, W)");
    CU_REQUIRE(M >= 0 && N >= 0 && K >= 0, "matmul_fwd", "negative shape M=%d N=%d K=%d", M, N, K);
    CU_REQUIRE(ldx >= K && ldy >= N, "matmul_fwd", "row strides ldx=%d (K=%d), ldy=%d (N=%d) too small", ldx, K, ldy,
               N);
    if (M == 0 || N == 0) return;
    if (K == 0) { // an empty inner product: y = 0 (or unchanged)
        if (!accumulate) zero_rows(y, ldy, M, N, sizeof(T));
        return;
    }
    if (sizeof(T) == 2 && cu_gemm_wg_takes(WG_USE_FWD, M, y, ldy, x, ldx, W, K)) { // GDN_CUDA_GEMM=wg
        cu_gemm_wg("matmul_fwd", (bf16 *)y, ldy, (const bf16 *)x, ldx, (const bf16 *)W, K, M, N, K, accumulate);
        return;
    }
    cu_gemm("matmul_fwd", true, false, N, M, K, W, K, x, ldx, y, ldy, cu_dtype<T>(), cu_dtype<T>(),
            accumulate ? 1.0f : 0.0f);
}

// y[r, c] = bias[c] for r < M, c < N (row stride ldy): the C operand of the biased GEMM
template <typename T> __global__ void bias_rows_kernel(T *y, int ldy, const T *bias, int M, int N) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)M * N) return;
    y[(i / N) * ldy + i % N] = bias[i % N];
}

// y = round(acc + bias) of an fp32 GEMM result acc [M, N] (dense), one rounding to T
template <typename T>
__global__ void add_bias_round_kernel(T *y, int ldy, const float *acc, const T *bias, int M, int N) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)M * N) return;
    y[(i / N) * ldy + i % N] = from_f<T>(acc[i] + to_f(bias[i % N]));
}

// y = x W^T + bias as torch's Linear: the bias is added to the fp32 accumulator before the single rounding of y.
// fp32: y prefilled with the bias, then one GEMM with beta = 1. bf16: the GEMM writes fp32 into a scratch and
// add_bias_round_kernel rounds once; cuBLASLt with a bf16 C (beta = 1) was measured on the H200 to round the product
// before adding C (1 ulp off on sums exact in fp32, test_cuda_ops' "exact sums" case), so C is not used for bf16.
template <typename T>
static void cu_matmul_bias_fwd(void *y, int ldy, const void *x, int ldx, const void *W, const void *bias, int M, int N,
                               int K) {
    CU_REQUIRE(y && x && W && bias, "matmul_bias_fwd", "NULL pointer (y, x, W, bias)");
    CU_REQUIRE(M >= 0 && N >= 0 && K >= 0, "matmul_bias_fwd", "negative shape M=%d N=%d K=%d", M, N, K);
    CU_REQUIRE(ldx >= K && ldy >= N, "matmul_bias_fwd", "row strides ldx=%d (K=%d), ldy=%d (N=%d) too small", ldx, K,
               ldy, N);
    if (M == 0 || N == 0) return;
    if (sizeof(T) == sizeof(float) || K == 0) {
        cu_launch("matmul_bias_fwd bias", bias_rows_kernel<T>, dim3(cu_blocks((size_t)M * N, 256)), dim3(256), 0,
                  (T *)y, ldy, (const T *)bias, M, N);
        if (K > 0)
            cu_gemm("matmul_bias_fwd", true, false, N, M, K, W, K, x, ldx, y, ldy, cu_dtype<T>(), cu_dtype<T>(), 1.0f);
        return;
    }
    float *acc = (float *)cu_scratch((size_t)M * N * sizeof(float), "matmul_bias_fwd acc");
    cu_gemm("matmul_bias_fwd", true, false, N, M, K, W, K, x, ldx, acc, N, cu_dtype<T>(), CUDA_R_32F, 0.0f);
    cu_launch("matmul_bias_fwd bias", add_bias_round_kernel<T>, dim3(cu_blocks((size_t)M * N, 256)), dim3(256), 0,
              (T *)y, ldy, (const float *)acc, (const T *)bias, M, N);
    cu_scratch_free(acc);
}

template <typename T>
static void cu_matmul_bwd(void *dx, int lddx, float *dW, const void *dy, int lddy, const void *x, int ldx,
                          const void *W, int M, int N, int K, int accumulate_dx) {
    CU_REQUIRE(dy, "matmul_bwd", "NULL dy");
    CU_REQUIRE(!dx || W, "matmul_bwd", "dx asked for without W");
    CU_REQUIRE(!dW || x, "matmul_bwd", "dW asked for without x");
    CU_REQUIRE(M >= 0 && N >= 0 && K >= 0, "matmul_bwd", "negative shape M=%d N=%d K=%d", M, N, K);
    CU_REQUIRE(lddy >= N, "matmul_bwd", "row stride lddy=%d smaller than N=%d", lddy, N);
    if (M == 0 || K == 0) return;
    if (dx) {
        CU_REQUIRE(lddx >= K, "matmul_bwd", "row stride lddx=%d smaller than K=%d", lddx, K);
        if (N == 0) {
            if (!accumulate_dx) zero_rows(dx, lddx, M, K, sizeof(T));
        } else if (sizeof(T) == 2 && cu_gemm_wg_takes(WG_USE_DX, M, dx, lddx, dy, lddy, W, K)) {
            cu_gemm_wg_dx("matmul_bwd dx", (bf16 *)dx, lddx, (const bf16 *)dy, lddy, (const bf16 *)W, M, N, K,
                          accumulate_dx);
        } else {
            cu_gemm("matmul_bwd dx", false, false, K, M, N, W, K, dy, lddy, dx, lddx, cu_dtype<T>(), cu_dtype<T>(),
                    accumulate_dx ? 1.0f : 0.0f);
        }
    }
    if (dW && N > 0) {
        CU_REQUIRE(ldx >= K, "matmul_bwd", "row stride ldx=%d smaller than K=%d", ldx, K);
        if (sizeof(T) == 2 && cu_gemm_wg_dw_takes(WG_USE_DW, M, N, K, dW, dy, lddy, x, ldx))
            cu_gemm_wg_dw("matmul_bwd dW", dW, (const bf16 *)dy, lddy, (const bf16 *)x, ldx, M, N, K);
        else
            cu_gemm("matmul_bwd dW", false, true, K, N, M, x, ldx, dy, lddy, dW, K, cu_dtype<T>(), CUDA_R_32F, 1.0f);
    }
}

void cu_register_matmul(Backend *b, int use_bf16) {
    b->matmul_fwd = use_bf16 ? cu_matmul_fwd<bf16> : cu_matmul_fwd<float>;
    b->matmul_bwd = use_bf16 ? cu_matmul_bwd<bf16> : cu_matmul_bwd<float>;
    b->matmul_bias_fwd = use_bf16 ? cu_matmul_bias_fwd<bf16> : cu_matmul_bias_fwd<float>;
}
