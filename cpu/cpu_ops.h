// cpu_ops.h: the CPU backend's ops (fp32 activations, host memory), one function per entry of the
// Backend table in model/backend.h, plus the token-by-token delta rule (the readable reference form).
// backend_cpu() returns the table; the functions are exported too so tests and the model's reference
// mode can call a specific form directly. Contracts (shapes, strides, accumulate vs overwrite) are
// the ones written in model/backend.h; every "act" pointer here is float*.
//
// Parallelism: OpenMP over rows / heads / sequences. Every reduction over tokens is done in an order
// fixed by the shapes alone, so results are bit-identical for any thread count.
// Aliasing: the norm, gate, SwiGLU and embedding ops read each element before writing the same index,
// so an output may overwrite an input of the same layout (e.g. rmsnorm s_out == resid, ds == dres);
// conv and the delta rule read other rows/tokens and need separate buffers (conv's state may alias).
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "model/backend.h"
#include "util/common.h"

#ifdef __cplusplus
extern "C" {
#endif

// Programmer errors (bad shapes, NULL required pointers): die with the op's name and the broken rule.
// Always on (not assert()), as the ops are called with shapes from configs.
#define CPU_REQUIRE(cond, op, ...)                                                                         \
    do {                                                                                                   \
        if (!(cond)) die("cpu backend, " op ": " __VA_ARGS__);                                             \
    } while (0)


// ---- memory (cpu/backend.c)
void *cpu_alloc(size_t bytes); // zero-filled, 64-byte aligned
void cpu_free(void *p);

// ---- embedding, SwiGLU, sums (cpu/elementwise.c)
void cpu_embedding_fwd(void *x, const int32_t *ids, const void *E, int N, int h);
void cpu_embedding_bwd(float *dE, const void *dx, const int32_t *ids, int N, int h, int V);
void cpu_swiglu_fwd(void *y, const void *gu, int N, int F);
void cpu_swiglu_bwd(void *dgu, void *y, const void *dy, const void *gu, int N, int F);
void cpu_sum(float *out, const float *x, size_t n);
void cpu_doc_starts(int32_t *doc_start, const int32_t *ids, int B, int T, int32_t eod);
void cpu_state_reset_at_eod(float *state, size_t row, const int32_t *ids, int B, int T, int32_t eod);
void cpu_sumsq(float *out, const float *x, size_t n);

// ---- norms (cpu/norms.c)
void cpu_rmsnorm_fwd(void *y, float *rstd, void *s_out, const void *x, const void *resid, const float *w, int N,
                     int h, float eps);
void cpu_rmsnorm_bwd(void *ds, float *dw, const void *dy, const void *s, const float *rstd, const float *w,
                     const void *dres, int N, int h);
void cpu_l2norm_fwd(void *y, int ldy, float *rstd, const void *x, int ldx, int N, int heads, int d);
void cpu_l2norm_bwd(void *dx, int lddx, const void *dy, int lddy, const void *y, int ldy, const float *rstd, int N,
                    int heads, int d);
void cpu_gated_rmsnorm_fwd(void *y, int ldy, float *rstd, const void *o, int ldo, const void *z, int ldz,
                           const float *w, int N, int HV, int dv, float eps);
void cpu_gated_rmsnorm_bwd(void *do_, int lddo, void *dz, int lddz, float *dw, const void *dy, int lddy,
                           const void *o, int ldo, const void *z, int ldz, const float *rstd, const float *w, int N,
                           int HV, int dv);

// ---- GEMM through OpenBLAS (cpu/matmul.c)
// C[M,N] = alpha op(A) op(B) + beta C, row-major; op(A) = A ([M,K], lda) or A^T (A is [K,M]) when transA,
// op(B) = B ([K,N], ldb) or B^T (B is [N,K]) when transB. Cut into output tiles fixed by the shape, each
// a single-threaded sgemm, tiles in parallel: the result does not depend on the thread count. Sets
// OpenBLAS's own thread count to 1 (the CPU backend's threads are OpenMP's).
void cpu_gemm(int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
              int ldb, float beta, float *C, int ldc);
void cpu_matmul_fwd(void *y, int ldy, const void *x, int ldx, const void *W, int M, int N, int K, int accumulate);
void cpu_matmul_bias_fwd(void *y, int ldy, const void *x, int ldx, const void *W, const void *bias, int M, int N, int K);
void cpu_matmul_bwd(void *dx, int lddx, float *dW, const void *dy, int lddy, const void *x, int ldx, const void *W,
                    int M, int N, int K, int accumulate_dx);

// ---- causal depthwise conv + SiLU (cpu/conv.c)
void cpu_conv_silu_fwd(void *y, int ldy, const void *x, int ldx, const float *w, const float *state_in,
                       float *state_out, int B, int T, int D, int K, const int32_t *doc_start);
void cpu_conv_silu_bwd(void *dx, int lddx, float *dw, const void *dy, int lddy, const void *x, int ldx,
                       const float *w, int B, int T, int D, int K, const int32_t *doc_start);

// ---- beta / gate (cpu/gate.c)
void cpu_gate_fwd(float *beta, float *gamma, const void *b, const void *a, int ld, const float *A_log,
                  const float *dt_bias, int N, int HV);
void cpu_gate_bwd(void *db, void *da, int ld, float *dA_log, float *ddt_bias, const float *dbeta,
                  const float *dgamma, const void *b, const void *a, const float *A_log, const float *dt_bias, int N,
                  int HV);

// ---- gated delta rule, chunked WY form, chunk 64 (cpu/delta_rule_chunk.c): the table's entries.
// h_save (NULL allowed in both) holds the chunk-start states [B, HV, NT, dk, dv]; the backward
// recomputes them when it is NULL.
void cpu_delta_rule_fwd(const DeltaRuleArgs *a, void *o, int ldo, float *state);
void cpu_delta_rule_bwd(const DeltaRuleArgs *a, const void *do_, int lddo, const DeltaRuleGrads *g);

// ---- gated delta rule, token-by-token recurrence of spec model.md §2.4 (cpu/delta_rule_recurrent.c).
// Same signatures and results as the chunked pair (to fp32 rounding). The forward fills h_save when it
// is given (the same chunk-start states, so either backward can follow either forward); the backward
// uses h_save as checkpoints when given and recomputes them otherwise.
void cpu_delta_rule_recurrent_fwd(const DeltaRuleArgs *a, void *o, int ldo, float *state);
void cpu_delta_rule_recurrent_bwd(const DeltaRuleArgs *a, const void *do_, int lddo, const DeltaRuleGrads *g);

// Shared by both delta-rule forms (cpu/delta_rule_recurrent.c): shape checks, and the dq/dk group sums.
void cpu_delta_check_dims(const char *op, int B, int T, int H, int HV, int dk, int dv);
void cpu_sum_gva_groups(float *dq, float *dK, int lddqk, const float *dqs, const float *dks, int B, int T, int H,
                        int HV, int dk);

// ---- softmax attention of hybrid blocks: RoPE'd q|k|v, causal/windowed GQA attention (cpu/attention.c)
void cpu_attn_qkv_fwd(void *Q, void *K, void *V, int kv_bstride, const void *P, int ldp, const float *bias,
                      const int32_t *pos, int B, int T, int Ha, int Hkv, int d, float theta, const int32_t *doc_start);
void cpu_attn_qkv_bwd(void *dP, int lddp, float *dbias, const void *dQ, const void *dK, const void *dV, int B, int T,
                      int Ha, int Hkv, int d, float theta, const int32_t *doc_start);
void cpu_attn_fwd(void *O, float *lse, const void *Q, const void *K, const void *V, int kv_bstride,
                  const int32_t *pos, int B, int T, int Ha, int Hkv, int d, int window, float scale,
                  const int32_t *doc_start);
void cpu_attn_bwd(void *dQ, void *dK, void *dV, const void *dO, const void *Q, const void *K, const void *V,
                  const void *O, const float *lse, int B, int T, int Ha, int Hkv, int d, int window, float scale,
                  const int32_t *doc_start);
void cpu_pos_advance(int32_t *pos, int n);
// RoPE cos/sin of position p for pairs i < d/2, fp32 as FLA computes them (shared with the CUDA twins' tests)
void cpu_rope_cs(float *c, float *s, int p, int d, float theta);

// ---- tied lm head + cross-entropy (cpu/lmhead_ce.c). dE may be NULL (then only dy is produced). The scratch is not
// used (its 32 MB logits block is small beside the CUDA backend's chunks).
void cpu_lmhead_ce(float *losses, void *dy, float *dE, const void *y, const void *E, const int32_t *targets, int N,
                   int h, int V, const float *loss_scale, void *scratch, size_t scratch_bytes);
void cpu_lmhead_logits(float *logits, const void *y, const void *E, int N, int h, int V);
// Vectorised exp loops (cpu/softmax_simd.c): sum_c exp(l[c] - mx) (float blocks of 1024, added in double),
// and l[c] = exp(l[c] - mx) * scale in place.
double cpu_sum_exp(const float *l, int V, float mx);
void cpu_exp_scale(float *l, int V, float mx, float scale);
void cpu_logits_stats(int32_t *argmax, float *logprob, const float *logits, const int32_t *targets, int rows, int V);
void cpu_token_ring_push(int32_t *ring, int32_t *count, const int32_t *tok, int B, int K);

// ---- ops fused for decoding (cpu/decode_fused.c): the ops they stand for, in sequence
void cpu_gdn_decode_fwd(void *y, int ldy, const void *P, int ldp, const float *conv_w, float *conv_state, float *S,
                        const float *A_log, const float *dt_bias, const float *norm_w, const int32_t *ids,
                        int32_t eod, int B, int H, int HV, int dk, int dv, int K, float eps);
// the same with the token-by-token delta rule (backend_cpu_recurrent's table)
void cpu_gdn_decode_recurrent_fwd(void *y, int ldy, const void *P, int ldp, const float *conv_w, float *conv_state,
                                  float *S, const float *A_log, const float *dt_bias, const float *norm_w,
                                  const int32_t *ids, int32_t eod, int B, int H, int HV, int dk, int dv, int K,
                                  float eps);
void cpu_rmsnorm_matmul_fwd(void *y, int ldy, void *s_out, const void *x, const void *resid, const float *nw,
                            const void *W, int M, int N, int K, float eps);
void cpu_swiglu_matmul_fwd(void *y, int ldy, const void *gu, const void *W, int M, int N, int K);
void cpu_rmsnorm_matmul_swiglu_fwd(void *h, void *s_out, const void *x, const void *resid, const float *nw,
                                   const void *W, int M, int F, int K, float eps);
void cpu_gdn_decode_block_fwd(const GdnDecodeBlockArgs *a);
void cpu_matmul_swiglu_fwd(void *gu, void *h, const void *x, int ldx, const void *W, int M, int F, int K);
void cpu_matmul_swiglu_bwd(void *dgu, void *y, void *dh, const void *dy, int lddy, const void *W, const void *gu, int M,
                           int F, int K);
void cpu_lmhead_norm_argmax(int32_t *argmax, float *logits, void *y, float *rstd, void *s_out, const void *x,
                            const void *resid, const float *nw, const void *E, int M, int h, int V, float eps,
                            int32_t *ring, int32_t *ring_count, int ring_k);

// ---- optimizer (cpu/adamw.c); p_act must be NULL or p (fp32 activations share the master copy)
void cpu_adamw(float *p, void *p_act, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
               float eps, float wd, int step, float gscale);
// cpu_adamw on each chunk in order, with *gscale (backend.h adamw_multi); p_act NULL or p at each chunk
void cpu_adamw_multi(const AdamwChunk *chunks, int nchunks, float *p, void *p_act, const float *g, float *m, float *v,
                     float lr, float b1, float b2, float eps, float wd, int step, const float *gscale);
// backend.h adamw_multi_lp; the act dtype is fp32 here: p_act, bf16 moments hold bf16-valued fp32
void cpu_adamw_multi_lp(const AdamwChunk *chunks, int nchunks, float *p, uint16_t *rem, void *p_act, const float *g,
                        void *m, void *v, int lp, float lr, float b1, float b2, float eps, float wd, int step,
                        const float *gscale);
void cpu_clip_scale(float *scale, const float *sumsq, float max_norm);

#ifdef __cplusplus
}
#endif
