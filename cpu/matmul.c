// matmul.c: the projections y = x . W^T and their backward, through OpenBLAS sgemm (row-major, row
// strides ld*), and cpu_gemm, the one deterministic GEMM entry point of the CPU backend.
//
// Why tiles: OpenBLAS's own threading changes the blocking of the inner dimension with the thread count
// (measured: 1 vs 2 threads differ in ~50% of the elements of a 300x70x90 product), which would make
// dW (a sum over tokens) depend on the machine. So every GEMM is cut into output tiles whose sizes
// depend on the shape alone; each tile is one single-threaded sgemm over the whole inner dimension, and
// OpenMP runs the tiles in parallel. An element's value then depends only on the shape.
#ifndef GDN_NO_BLAS
#include <cblas.h>
#endif

#include "cpu/cpu_ops.h"

#ifdef GDN_NO_BLAS
// Built with BLAS=0 (e.g. a GPU machine without OpenBLAS, where the CPU backend only serves as the
// tests' reference): one tile as plain loops, accumulating in the order of k.
static void tile_sgemm(int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda,
                       const float *B, int ldb, float beta, float *C, int ldc) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0;
            for (int k = 0; k < K; k++)
                acc += (transA ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]) *
                       (transB ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]);
            float *c = &C[(size_t)i * ldc + j];
            *c = alpha * acc + (beta == 0 ? 0 : beta * *c);
        }
}
#endif

enum { TILE_M = 256, TILE_N = 256 };

void cpu_gemm(int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
              int ldb, float beta, float *Cm, int ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) { // an empty inner product: C = beta C
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) Cm[(size_t)i * ldc + j] = beta == 0 ? 0 : beta * Cm[(size_t)i * ldc + j];
        return;
    }
#ifndef GDN_NO_BLAS
    // Tiles run on OpenMP threads; OpenBLAS must not split them further.
    openblas_set_num_threads(1);
#endif
    int tm = (M + TILE_M - 1) / TILE_M, tn = (N + TILE_N - 1) / TILE_N;
#pragma omp parallel for schedule(dynamic) if (tm * tn > 1)
    for (int t = 0; t < tm * tn; t++) {
        int i0 = (t / tn) * TILE_M, j0 = (t % tn) * TILE_N;
        int mb = M - i0 < TILE_M ? M - i0 : TILE_M, nb = N - j0 < TILE_N ? N - j0 : TILE_N;
        const float *At = transA ? A + i0 : A + (size_t)i0 * lda; // op(A) rows i0..: A^T is [K, M]
        const float *Bt = transB ? B + (size_t)j0 * ldb : B + j0; // op(B) cols j0..: B^T is [N, K]
#ifdef GDN_NO_BLAS
        tile_sgemm(transA, transB, mb, nb, K, alpha, At, lda, Bt, ldb, beta, Cm + (size_t)i0 * ldc + j0, ldc);
#else
        cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, mb, nb, K,
                    alpha, At, lda, Bt, ldb, beta, Cm + (size_t)i0 * ldc + j0, ldc);
#endif
    }
}

// y[M,N] = x[M,K] . W[N,K]^T (+ y if accumulate)
void cpu_matmul_fwd(void *y, int ldy, const void *x, int ldx, const void *W, int M, int N, int K, int accumulate) {
    CPU_REQUIRE(y && x && W, "matmul_fwd", "NULL pointer (y, x, W)");
    CPU_REQUIRE(ldx >= K && ldy >= N, "matmul_fwd", "row strides ldx=%d (K=%d), ldy=%d (N=%d) too small", ldx, K, ldy,
                N);
    cpu_gemm(0, 1, M, N, K, 1.0f, x, ldx, W, K, accumulate ? 1.0f : 0.0f, y, ldy);
}

// y[M,N] = x[M,K] . W[N,K]^T + bias[N]: the fp32 GEMM, then the bias added (fp32 has no rounding to fuse)
void cpu_matmul_bias_fwd(void *y, int ldy, const void *x, int ldx, const void *W, const void *bias, int M, int N,
                         int K) {
    CPU_REQUIRE(bias, "matmul_bias_fwd", "NULL bias");
    cpu_matmul_fwd(y, ldy, x, ldx, W, M, N, K, 0);
    float *Y = y;
    const float *b = bias;
#pragma omp parallel for schedule(static)
    for (int r = 0; r < M; r++)
        for (int c = 0; c < N; c++) Y[(size_t)r * ldy + c] += b[c];
}

// dx[M,K] = dy[M,N] . W[N,K] (+= if accumulate_dx); dW[N,K] += dy^T . x. dx or dW may be NULL.
void cpu_matmul_bwd(void *dx, int lddx, float *dW, const void *dy, int lddy, const void *x, int ldx, const void *W,
                    int M, int N, int K, int accumulate_dx) {
    CPU_REQUIRE(dy, "matmul_bwd", "NULL dy");
    CPU_REQUIRE(!dx || W, "matmul_bwd", "dx asked for without W");
    CPU_REQUIRE(!dW || x, "matmul_bwd", "dW asked for without x");
    CPU_REQUIRE(lddy >= N, "matmul_bwd", "row stride lddy=%d smaller than N=%d", lddy, N);
    if (dx) {
        CPU_REQUIRE(lddx >= K, "matmul_bwd", "row stride lddx=%d smaller than K=%d", lddx, K);
        cpu_gemm(0, 0, M, K, N, 1.0f, dy, lddy, W, K, accumulate_dx ? 1.0f : 0.0f, dx, lddx);
    }
    if (dW) {
        CPU_REQUIRE(ldx >= K, "matmul_bwd", "row stride ldx=%d smaller than K=%d", ldx, K);
        cpu_gemm(1, 0, N, K, M, 1.0f, dy, lddy, x, ldx, 1.0f, dW, K);
    }
}
