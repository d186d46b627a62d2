// gemm_wg.cuh: our own sm_90 GEMM (cuda/gemm_wg.cu): y[M, N] = x[M, K] W[N, K]^T, bf16 in and out, fp32
// accumulation. GDN_CUDA_GEMM=wg routes the bf16 matmul_fwd to it where it fits (cu_gemm_wg_fits).
#pragma once
#include "cuda/common.cuh"

// sm_90, y, x, W 16-byte aligned, row strides multiples of 8 elements
bool cu_gemm_wg_fits(const void *y, int ldy, const void *x, int ldx, const void *W, int ldw);
void cu_gemm_wg(const char *op, bf16 *y, int ldy, const bf16 *x, int ldx, const bf16 *W, int ldw, int M, int N, int K,
                int accumulate);
