// decode_fused.c: the CPU twins of the fused ops (backend.h): for decoding gdn_decode_fwd, rmsnorm_matmul_fwd,
// swiglu_matmul_fwd, rmsnorm_matmul_swiglu_fwd, gdn_decode_block_fwd, lmhead_norm_argmax; for training the MLP's matmul_swiglu_fwd and matmul_swiglu_bwd. Each runs the CPU ops it stands for in sequence, through scratch
// buffers, so the CPU results are bit-identical to the unfused graph; the CUDA kernels (cuda/gdn_decode.cu,
// cuda/gemv.cu) are held to these.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_ops.h"

typedef void (*DeltaFwd)(const DeltaRuleArgs *a, void *o, int ldo, float *state);

static void gdn_decode(DeltaFwd delta, void *y, int ldy, const void *P, int ldp, const float *conv_w,
                       float *conv_state, float *S, const float *A_log, const float *dt_bias, const float *norm_w,
                       const int32_t *ids, int32_t eod, int B, int H, int HV, int dk, int dv, int K, float eps) {
    CPU_REQUIRE(y && P && conv_w && conv_state && S && A_log && dt_bias && norm_w, "gdn_decode_fwd",
                "NULL pointer (y, P, conv_w, conv_state, S, A_log, dt_bias, norm_w)");
    cpu_delta_check_dims("gdn_decode_fwd", B, 1, H, HV, dk, dv);
    const int Kd = H * dk, Vd = HV * dv, Dc = 2 * Kd + Vd, cg = Dc, cb = cg + Vd, ca = cb + HV;
    CPU_REQUIRE(K >= 1 && ldp >= ca + HV && ldy >= Vd, "gdn_decode_fwd", "bad K=%d or strides ldp=%d ldy=%d", K, ldp,
                ldy);
    const float *Pf = P;
    float *C = xmalloc((size_t)B * Dc * sizeof(float)), *QK = xmalloc((size_t)B * 2 * Kd * sizeof(float));
    float *qk_rstd = xmalloc((size_t)B * 2 * H * sizeof(float)), *beta = xmalloc((size_t)B * HV * sizeof(float));
    float *gamma = xmalloc((size_t)B * HV * sizeof(float)), *o = xmalloc((size_t)B * Vd * sizeof(float));
    float *o_rstd = xmalloc((size_t)B * HV * sizeof(float));
    cpu_conv_silu_fwd(C, Dc, P, ldp, conv_w, conv_state, conv_state, B, 1, Dc, K, NULL);
    cpu_l2norm_fwd(QK, 2 * Kd, qk_rstd, C, Dc, B, 2 * H, dk);
    cpu_gate_fwd(beta, gamma, Pf + cb, Pf + ca, ldp, A_log, dt_bias, B, HV);
    DeltaRuleArgs a = {.q = QK, .k = QK + Kd, .ldqk = 2 * Kd, .v = C + 2 * Kd, .ldv = Dc, .beta = beta,
                       .gamma = gamma, .h_save = NULL, .B = B, .T = 1, .H = H, .HV = HV, .dk = dk, .dv = dv,
                       .scale = 1.0f / sqrtf((float)dk), .doc_start = NULL};
    delta(&a, o, Vd, S);
    cpu_gated_rmsnorm_fwd(y, ldy, o_rstd, o, Vd, Pf + cg, ldp, norm_w, B, HV, dv, eps);
    for (int b = 0; ids && b < B; b++)
        if (ids[b] == eod) { // the next token starts a document: zero conv history and delta-rule state
            memset(conv_state + (size_t)b * Dc * (K - 1), 0, (size_t)Dc * (K - 1) * sizeof(float));
            memset(S + (size_t)b * HV * dk * dv, 0, (size_t)HV * dk * dv * sizeof(float));
        }
    free(C), free(QK), free(qk_rstd), free(beta), free(gamma), free(o), free(o_rstd);
}

void cpu_gdn_decode_fwd(void *y, int ldy, const void *P, int ldp, const float *conv_w, float *conv_state, float *S,
                        const float *A_log, const float *dt_bias, const float *norm_w, const int32_t *ids,
                        int32_t eod, int B, int H, int HV, int dk, int dv, int K, float eps) {
    gdn_decode(cpu_delta_rule_fwd, y, ldy, P, ldp, conv_w, conv_state, S, A_log, dt_bias, norm_w, ids, eod, B, H, HV,
               dk, dv, K, eps);
}
void cpu_gdn_decode_recurrent_fwd(void *y, int ldy, const void *P, int ldp, const float *conv_w, float *conv_state,
                                  float *S, const float *A_log, const float *dt_bias, const float *norm_w,
                                  const int32_t *ids, int32_t eod, int B, int H, int HV, int dk, int dv, int K,
                                  float eps) {
    gdn_decode(cpu_delta_rule_recurrent_fwd, y, ldy, P, ldp, conv_w, conv_state, S, A_log, dt_bias, norm_w, ids, eod,
               B, H, HV, dk, dv, K, eps);
}

void cpu_rmsnorm_matmul_fwd(void *y, int ldy, void *s_out, const void *x, const void *resid, const float *nw,
                            const void *W, int M, int N, int K, float eps) {
    CPU_REQUIRE(y && x && nw && W, "rmsnorm_matmul_fwd", "NULL pointer (y, x, nw, W)");
    float *xn = xmalloc((size_t)M * K * sizeof(float)), *rstd = xmalloc((size_t)M * sizeof(float));
    cpu_rmsnorm_fwd(xn, rstd, s_out, x, resid, nw, M, K, eps);
    cpu_matmul_fwd(y, ldy, xn, K, W, M, N, K, 0);
    free(xn), free(rstd);
}

void cpu_swiglu_matmul_fwd(void *y, int ldy, const void *gu, const void *W, int M, int N, int K) {
    CPU_REQUIRE(y && gu && W, "swiglu_matmul_fwd", "NULL pointer (y, gu, W)");
    float *h = xmalloc((size_t)M * K * sizeof(float));
    cpu_swiglu_fwd(h, gu, M, K);
    cpu_matmul_fwd(y, ldy, h, K, W, M, N, K, 0);
    free(h);
}

// decoding's MLP input: rmsnorm_matmul_fwd into gu, then SwiGLU into h
void cpu_rmsnorm_matmul_swiglu_fwd(void *h, void *s_out, const void *x, const void *resid, const float *nw,
                                   const void *W, int M, int F, int K, float eps) {
    CPU_REQUIRE(h && x && nw && W, "rmsnorm_matmul_swiglu_fwd", "NULL pointer (h, x, nw, W)");
    float *gu = xmalloc((size_t)M * 2 * F * sizeof(float));
    cpu_rmsnorm_matmul_fwd(gu, 2 * F, s_out, x, resid, nw, W, M, 2 * F, K, eps);
    cpu_swiglu_fwd(h, gu, M, F);
    free(gu);
}

// a GDN block's decode step: the five ops GdnDecodeBlockArgs names, in sequence (this table's)
void cpu_gdn_decode_block_fwd(const GdnDecodeBlockArgs *a) {
    CPU_REQUIRE(a, "gdn_decode_block_fwd", "NULL arguments");
    gdn_decode_block_ops(backend_cpu(), a);
}

// the MLP's forward: the GEMM into [gate | up], then SwiGLU (the CUDA backend fuses them into one kernel)
void cpu_matmul_swiglu_fwd(void *gu, void *h, const void *x, int ldx, const void *W, int M, int F, int K) {
    CPU_REQUIRE(gu && h && x && W, "matmul_swiglu_fwd", "NULL pointer (gu, h, x, W)");
    cpu_matmul_fwd(gu, 2 * F, x, ldx, W, M, 2 * F, K, 0);
    cpu_swiglu_fwd(h, gu, M, F);
}

void cpu_matmul_swiglu_bwd(void *dgu, void *y, void *dh, const void *dy, int lddy, const void *W, const void *gu, int M,
                           int F, int K) {
    CPU_REQUIRE(dgu && dh && dy && W && gu, "matmul_swiglu_bwd", "NULL pointer (dgu, dh, dy, W, gu)");
    cpu_matmul_bwd(dh, F, NULL, dy, lddy, NULL, F, W, M, K, F, 0);
    cpu_swiglu_bwd(dgu, y, dh, gu, M, F);
}

void cpu_lmhead_norm_argmax(int32_t *argmax, float *logits, void *y, float *rstd, void *s_out, const void *x,
                            const void *resid, const float *nw, const void *E, int M, int h, int V, float eps,
                            int32_t *ring, int32_t *ring_count, int ring_k) {
    CPU_REQUIRE(argmax && logits && y && rstd && x && nw && E, "lmhead_norm_argmax",
                "NULL pointer (argmax, logits, y, rstd, x, nw, E)");
    cpu_rmsnorm_fwd(y, rstd, s_out, x, resid, nw, M, h, eps);
    cpu_lmhead_logits(logits, y, E, M, h, V);
    cpu_logits_stats(argmax, NULL, logits, NULL, M, V);
    if (ring) cpu_token_ring_push(ring, ring_count, argmax, M, ring_k);
}
