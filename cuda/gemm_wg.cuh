// gemm_wg.cuh: our own sm_90 GEMM (cuda/gemm_wg.cu): y[M, N] = x[M, K] W[N, K]^T, bf16 in and out, fp32
// accumulation. GDN_CUDA_GEMM=wg routes the bf16 matmul_fwd, matmul_swiglu_fwd and the lm head's logits GEMM to it where it fits
// (cu_gemm_wg_fits).
#pragma once
#include "cuda/common.cuh"

// sm_90, y, x, W 16-byte aligned, row strides multiples of 8 elements
bool cu_gemm_wg_fits(const void *y, int ldy, const void *x, int ldx, const void *W, int ldw);
// The routing rule every caller applies to a bf16 GEMM of M rows: GDN_CUDA_GEMM=wg (read once), M > 4 (fewer rows
// stay on the GEMVs / cuBLASLt) and cu_gemm_wg_fits.
bool cu_gemm_wg_takes(int M, const void *y, int ldy, const void *x, int ldx, const void *W, int ldw);
void cu_gemm_wg(const char *op, bf16 *y, int ldy, const bf16 *x, int ldx, const bf16 *W, int ldw, int M, int N, int K,
                int accumulate);
// gu[M, 2F] = x W^T (W = [gate; up], [2F, K]) and h[M, F] = swiglu(gu) in the epilogue; F a multiple of 128
void cu_gemm_wg_swiglu(const char *op, bf16 *gu, bf16 *h, const bf16 *x, int ldx, const bf16 *W, int M, int F, int K);
