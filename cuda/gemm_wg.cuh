// gemm_wg.cuh: our own sm_90 GEMMs (cuda/gemm_wg.cu), bf16 inputs, fp32 accumulation: y = x W^T (+ SwiGLU), dx = dy W,
// dW += dy^T x. GDN_CUDA_GEMM=wg routes the bf16 matmul_fwd, matmul_bwd, matmul_swiglu_fwd and the lm head's logits
// GEMM to them where they fit (cu_gemm_wg_takes, cu_gemm_wg_dw_takes).
#pragma once
#include "cuda/common.cuh"

// sm_90, y, x, W 16-byte aligned, row strides multiples of 8 elements
bool cu_gemm_wg_fits(const void *y, int ldy, const void *x, int ldx, const void *W, int ldw);
// The GEMMs gemm_wg can take, by use; GDN_CUDA_WG_FORMS names them (fwd, swiglu, dx, dx_swiglu, dw, lm_logits, lm_dy,
// lm_de; "all", the default)
enum WgUse {
    WG_USE_FWD = 1,        // matmul_fwd: a projection's y = x W^T
    WG_USE_SWIGLU = 2,     // matmul_swiglu_fwd: gate|up with SwiGLU in the epilogue
    WG_USE_DX = 4,         // matmul_bwd's dx
    WG_USE_DX_SWIGLU = 8,  // matmul_swiglu_bwd: the down projection's dx into SwiGLU's backward
    WG_USE_DW = 16,        // matmul_bwd's dW
    WG_USE_LM_LOGITS = 32, // lmhead_ce: the logits chunk
    WG_USE_LM_DY = 64,     // lmhead_ce: dy = dlogits E
    WG_USE_LM_DE = 128,    // lmhead_ce: dE += dlogits^T y
};
// The routing rule every caller applies to a bf16 GEMM of M rows: GDN_CUDA_GEMM=wg (read once), the use among
// GDN_CUDA_WG_FORMS, M > 4 (fewer rows stay on the GEMVs / cuBLASLt) and cu_gemm_wg_fits.
bool cu_gemm_wg_takes(WgUse use, int M, const void *y, int ldy, const void *x, int ldx, const void *W, int ldw);
void cu_gemm_wg(const char *op, bf16 *y, int ldy, const bf16 *x, int ldx, const bf16 *W, int ldw, int M, int N, int K,
                int accumulate);
// gu[M, 2F] = x W^T (W = [gate; up], [2F, K]) and h[M, F] = swiglu(gu) in the epilogue; F a multiple of 128
void cu_gemm_wg_swiglu(const char *op, bf16 *gu, bf16 *h, const bf16 *x, int ldx, const bf16 *W, int M, int F, int K);
// dx[M, K] (row stride lddx) = dy[M, N] (lddy) W[N, K] (dense) (+ dx with accumulate)
void cu_gemm_wg_dx(const char *op, bf16 *dx, int lddx, const bf16 *dy, int lddy, const bf16 *W, int M, int N, int K,
                   int accumulate);
// dW[N, K] (dense, fp32) += dy[M, N]^T x[M, K]
void cu_gemm_wg_dw(const char *op, float *dW, const bf16 *dy, int lddy, const bf16 *x, int ldx, int M, int N, int K);
// cu_gemm_wg_takes's rule and dW's [128 x 256] tiles filling >= 3/4 of the SMs' waves (use: WG_USE_DW or _LM_DE)
bool cu_gemm_wg_dw_takes(WgUse use, int M, int N, int K, const float *dW, const void *dy, int lddy, const void *x,
                         int ldx);
// dgu[M, 2F] = swiglu_bwd(gu, dy[M, K] W[K, F]) and h[M, F] = swiglu(gu) if h (dense gu, dgu, h; dy row stride lddy)
void cu_gemm_wg_dx_swiglu(const char *op, bf16 *dgu, bf16 *h, const bf16 *gu, const bf16 *dy, int lddy, const bf16 *W,
                          int M, int F, int K);
