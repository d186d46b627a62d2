// backend.h: the op table the model graph (model/gdn.c) is written against. cpu/ and cuda/ each fill one.
//
// Conventions (every backend follows them; the twin tests check it):
// * "act" buffers hold activations in the backend's activation dtype: act_bytes = 4 (fp32) or 2 (bf16).
//   float* buffers are fp32 always: parameters (master copy), parameter gradients, norm statistics,
//   beta/gamma, losses, optimizer state. All pointers are backend memory (host for CPU, device for CUDA).
// * GEMM weights are passed as act buffers: the backend's compute copy of the fp32 master (for fp32
//   backends the master itself). Small parameters (norm weights, conv, A_log, dt_bias) are fp32.
// * Row-major matrices; `ld*` is a row stride in elements, so ops can read column slices of a fused
//   projection output without copies.
// * Tokens: N = B*T rows, token n = b*T + t. Sequences never mix (conv and delta rule restart at t=0).
// * Packed documents: doc_start [N] int32 (backend memory, from the doc_starts op; NULL = one document per
//   row) gives, for each token, the position t in its row where its document begins. A token t > 0 with
//   doc_start[t] == t starts from a zero conv history and a zero delta-rule state (FLA's cu_seqlens
//   semantics); an initial state (state_in, state) feeds only the row's first document.
// * Parameter gradients (float *dw...) ACCUMULATE (+=) so micro-batches add up; activation gradients
//   OVERWRITE unless an `accumulate` argument says otherwise.
// * Reductions are deterministic: no float atomics, a fixed order independent of thread count.
// * Ops are asynchronous on CUDA (one stream); memcpy_h2d, memcpy_d2h, free and sync wait for it (so a
//   host buffer may be reused after memcpy_h2d, and free never pulls memory from under a queued op).
#pragma once
#include <stddef.h>
#include <stdint.h>

// The delta rule's chunk length (FLA's chunk_size): it fixes the layout of the per-chunk states h_save,
// [B, HV, ceil(T / GDN_CHUNK), dk, dv], which the forward writes and the backward reads.
#define GDN_CHUNK 64

#ifdef __cplusplus
extern "C" {
#endif

// Inputs of the gated delta rule, shared by its forward and backward. Token rows n = b*T + t, N = B*T.
typedef struct {
    const void *q, *k; int ldqk;   // [N, H*dk] each, L2-normed, row stride ldqk
    const void *v; int ldv;        // [N, HV*dv]; v head j reads q/k head j / (HV/H)
    const float *beta, *gamma;     // [N, HV] fp32
    void *h_save;                  // per-chunk start states [B, HV, NT, dk, dv] act (NT = ceil(T/GDN_CHUNK)): the
                                   // forward writes them (NULL: not kept), the backward reads them
    int B, T, H, HV, dk, dv;
    float scale;                   // applied to q . k (dk^-1/2)
    const int32_t *doc_start;      // [N] packed documents (see the top); NULL = one document per row
    void *scratch;                 // optional: a 16-byte aligned region free during the call where the
    size_t scratch_bytes;          // op may keep its temporaries when they all fit (else its own memory; results equal)
} DeltaRuleArgs;

// Gradients of the delta rule's inputs: dq, dk [N, H*dk] (each summed over its q/k head's v heads) with row
// stride lddqk, dv [N, HV*dv] stride lddv, dbeta and dgamma [N, HV] fp32.
typedef struct {
    void *dq, *dk; int lddqk;
    void *dv; int lddv;
    float *dbeta, *dgamma;
} DeltaRuleGrads;

// One range of a multi-tensor AdamW (adamw_multi), at most ADAMW_CHUNK elements (one CUDA block each; longer
// runs are cut: model/adamw_plan.c). Element i < n reads g[goff+i] and writes p[poff+i], p_act[goff+i] (the act
// copy is laid out as the gradients), m[soff+i], v[soff+i] (the optimizer state may be a ZeRO-1 shard).
// rem (adamw_multi_lp only): the fp32 master is p_act[goff+i]'s bf16 bits and the remainder rem[soff+i], not p.
typedef struct {
    uint64_t goff, soff, poff;
    uint32_t n;
    uint16_t decay, rem; // decay: 1 = weight decay wd, 0 = none
} AdamwChunk;
// adamw_multi_lp's state flags: the moments kept rounded to bf16
enum { ADAMW_M_BF16 = 1, ADAMW_V_BF16 = 2 };
#define ADAMW_CHUNK 65536

// One GDN block's decode step (backend.h gdn_decode_block_fwd): the block's input norm and in_proj, its token mixer,
// the output projection and the MLP, as the five ops it stands for in sequence:
//   rmsnorm_matmul_fwd(P, ldp, s_attn, x, resid, attn_norm, W_in, B, ldp, h, eps)       P = [q|k|v|g|b|a] [B, ldp]
//   gdn_decode_fwd(on, HV*dv, P, ldp, conv_w, conv_state, S, A_log, dt_bias, o_norm, ids, eod, B, H, HV, dk, dv, K, eps)
//   matmul_fwd(out, h, on, HV*dv, W_o, B, h, HV*dv, 0)
//   rmsnorm_matmul_swiglu_fwd(hbuf, s_mlp, out, mlp_resid, mlp_norm, W_gu, B, F, h, eps)
//   matmul_fwd(out, h, hbuf, F, W_down, B, h, F, 0)
// (x, resid, s_attn: the input norm's, as rmsnorm_matmul_fwd takes them; mlp_resid: the MLP norm's residual, the
// model's s_attn of the block, which aliases x in block 0.)
typedef struct GdnDecodeBlockArgs {
    const void *x, *resid;
    void *s_attn;
    const float *attn_norm;
    const void *W_in;
    void *P;
    int ldp;
    const float *conv_w, *A_log, *dt_bias, *o_norm;
    float *conv_state, *S;
    const int32_t *ids;
    int32_t eod;
    void *on;
    const void *W_o;
    void *out;
    const void *mlp_resid;
    void *s_mlp;
    const float *mlp_norm;
    const void *W_gu;
    void *hbuf;
    const void *W_down;
    int B, h, H, HV, dk, dv, K, F;
    float eps;
} GdnDecodeBlockArgs;

typedef struct BackendMemStats {
    size_t reserved, allocated, peak, count;
} BackendMemStats;

// A new compute or copy entry also goes in model/backend_profile.c's PROFILED_OPS (unlisted, `gdn bench --profile`
// forwards it untimed and its time shows as the gap).
typedef struct Backend {
    const char *name; // "cpu", "cuda": for messages only (code asks the table, never the name)
    int act_bytes;    // 4 or 2
    int eval_batch;   // preferred sequences per scoring forward (eval): small on the CPU, all at once on a GPU
    // (every entry from alloc on is a function the backend must set)

    // ---- memory
    void *(*alloc)(size_t bytes); // zero-filled; dies with the size asked and a hint on failure
    void (*free)(void *p);
    void (*memcpy_h2d)(void *dst, const void *src, size_t bytes);
    void (*memcpy_d2h)(void *dst, const void *src, size_t bytes);
    void (*memcpy_d2d)(void *dst, const void *src, size_t bytes);
    void (*memset0)(void *p, size_t bytes);
    void (*sync)(void);
    // The backend's own buffers and scratch, as PyTorch's allocator statistics (Megatron's mem-* TensorBoard tags):
    // bytes and count allocated now, and the most bytes held at once since the process started (peak: what the
    // model needs, comparable with max_memory_allocated; CUDA: the context, cuBLASLt's workspace and the pool's
    // cached blocks are not counted; a recorded graph's scratch counts as the ops asked for it when recorded);
    // reserved: the backend's memory in use now (CUDA: the device's, context and pool included).
    void (*mem_stats)(BackendMemStats *s);
    // Runs fn(ctx) reps times and returns the milliseconds per call: between events on the backend's stream
    // on CUDA, wall clock on the CPU (<0 where there is no clock, e.g. the emulator).
    double (*time_ms)(void (*fn)(void *), void *ctx, int reps);
    // Timestamps for per-op profiling (model/backend_profile.c): mark(i) takes timestamp i in stream order (CUDA:
    // an event recorded on the stream, the pool grown as i needs; CPU: the wall clock now); never inside a capture.
    // mark_ms(a, b): milliseconds from timestamp a to b, once a sync has passed both; < 0 where there is no
    // clock (the emulator).
    void (*mark)(int i);
    double (*mark_ms)(int a, int b);
    void (*to_act)(void *dst, const float *src, size_t n);   // fp32 -> act (RNE for bf16)
    void (*from_act)(float *dst, const void *src, size_t n); // act -> fp32

    // ---- embedding (tied with the lm head)
    // x[n,:] = E[ids[n],:]. ids is backend memory. E is act [V,h].
    void (*embedding_fwd)(void *x, const int32_t *ids, const void *E, int N, int h);
    // dE[ids[n],:] += dx[n,:], summed in token order per row of dE (deterministic).
    void (*embedding_bwd)(float *dE, const void *dx, const int32_t *ids, int N, int h, int V);

    // ---- RMSNorm with the residual add fused in
    // s = x + resid (resid NULL: s = x); y = s * rstd * w, rstd[n] = (mean_c s[n,c]^2 + eps)^-1/2.
    // The statistics use the fp32 sum; s_out (NULL allowed when resid is NULL) stores s in act dtype.
    void (*rmsnorm_fwd)(void *y, float *rstd, void *s_out, const void *x, const void *resid, const float *w,
                        int N, int h, float eps);
    // ds = dL/ds (through y) + dres (dres NULL: no add); dw += sum_n dy*s*rstd. s is the stored s_out.
    void (*rmsnorm_bwd)(void *ds, float *dw, const void *dy, const void *s, const float *rstd, const float *w,
                        const void *dres, int N, int h);

    // ---- GEMM: y[M,N] = x[M,K] . W[N,K]^T (+ y if accumulate)
    void (*matmul_fwd)(void *y, int ldy, const void *x, int ldx, const void *W, int M, int N, int K, int accumulate);
    // dx[M,K] = dy[M,N] . W[N,K] (+= if accumulate_dx); dW[N,K] += dy^T . x (fp32). dx or dW may be NULL.
    void (*matmul_bwd)(void *dx, int lddx, float *dW, const void *dy, int lddy, const void *x, int ldx, const void *W,
                       int M, int N, int K, int accumulate_dx);
    // y[M,N] = x[M,K] . W[N,K]^T + bias[N] (bias act, the compute copy as for W: bf16 as a torch Linear's bias under
    // autocast), the bias added to the fp32 products before y's one rounding, as torch's Linear (addmm: the GEMM's
    // epilogue) does. fp32 backends: the GEMM, then the bias added.
    void (*matmul_bias_fwd)(void *y, int ldy, const void *x, int ldx, const void *W, const void *bias, int M, int N,
                            int K);

    // ---- causal depthwise conv (width K, no bias) + SiLU, per channel c < D:
    // y[t,c] = silu(sum_{j<K} w[c*K+j] * x[t-K+1+j, c]), x[t<0] taken from state_in (or 0).
    // state_in/state_out: [B, D, K-1] fp32, the last K-1 inputs of each sequence, oldest first; either may be
    // NULL, and they may alias (decode: T=1, the state is read before it is written).
    // doc_start (nullable, see the top): x[p] with p < doc_start[t] reads as 0; state_out keeps the last document.
    void (*conv_silu_fwd)(void *y, int ldy, const void *x, int ldx, const float *w, const float *state_in,
                          float *state_out, int B, int T, int D, int K, const int32_t *doc_start);
    // dx (overwrite), dw += ; initial state taken as zero.
    void (*conv_silu_bwd)(void *dx, int lddx, float *dw, const void *dy, int lddy, const void *x, int ldx,
                          const float *w, int B, int T, int D, int K, const int32_t *doc_start);

    // ---- L2 norm of each head vector: y = x / sqrt(sum x^2 + 1e-6); rstd[n*heads+i] kept for backward.
    void (*l2norm_fwd)(void *y, int ldy, float *rstd, const void *x, int ldx, int N, int heads, int d);
    // dx = rstd * (dy - (dy . y) y), y the stored output.
    void (*l2norm_bwd)(void *dx, int lddx, const void *dy, int lddy, const void *y, int ldy, const float *rstd,
                       int N, int heads, int d);

    // ---- beta and gate: beta[n,j] = sigmoid(b[n,j]); gamma[n,j] = -exp(A_log[j]) * softplus(a[n,j] + dt_bias[j])
    // (softplus(x) = x for x > 20). b and a are act columns with row stride ld.
    void (*gate_fwd)(float *beta, float *gamma, const void *b, const void *a, int ld, const float *A_log,
                     const float *dt_bias, int N, int HV);
    // db, da (act, row stride ld, overwrite); dA_log, ddt_bias += (fp32, reduced over tokens).
    void (*gate_bwd)(void *db, void *da, int ld, float *dA_log, float *ddt_bias, const float *dbeta,
                     const float *dgamma, const void *b, const void *a, const float *A_log, const float *dt_bias,
                     int N, int HV);

    // ---- gated delta rule (spec model.md §2.4 semantics, chunk size 64 form §3); arguments in DeltaRuleArgs.
    // o: [N, HV*dv] stride ldo. state: [B, HV, dk, dv] fp32, initial state in and final state out; NULL = zero
    // initial, not returned. a->doc_start (nullable, see the top): the state restarts at zero where a document
    // starts; chunks stay at fixed 64-token positions (h_save unchanged) and never mix two documents' terms.
    void (*delta_rule_fwd)(const DeltaRuleArgs *a, void *o, int ldo, float *state);
    // Gradients into g (all overwritten) from do_ [N, HV*dv] stride lddo. Zero initial state assumed (training).
    void (*delta_rule_bwd)(const DeltaRuleArgs *a, const void *do_, int lddo, const DeltaRuleGrads *g);
    // doc_start[b*T+t] = the last s <= t with s == 0 or ids[b*T+s-1] == eod (ids, doc_start: backend memory
    // [B*T]). A token after an EOD starts a document, as FLA derives cu_seqlens from EOS ids.
    void (*doc_starts)(int32_t *doc_start, const int32_t *ids, int B, int T, int32_t eod);
    // The same rule across forward calls with a state: where a row's last token ids[b*T + T-1] == eod, its state
    // rows state[b*row, (b+1)*row) (fp32) become zeros, so the row's next call starts a document (a prefill that
    // ends in EOD; decoding through the unfused ops). ids: backend memory [B*T].
    void (*state_reset_at_eod)(float *state, size_t row, const int32_t *ids, int B, int T, int32_t eod);

    // ---- output norm and gate (FLA FusedRMSNormGated, swish): per (n, v head j), over e < dv:
    // y = o * rstd * w[e] * silu(z), rstd[n*HV+j] = (mean_e o^2 + eps)^-1/2.
    void (*gated_rmsnorm_fwd)(void *y, int ldy, float *rstd, const void *o, int ldo, const void *z, int ldz,
                              const float *w, int N, int HV, int dv, float eps);
    void (*gated_rmsnorm_bwd)(void *do_, int lddo, void *dz, int lddz, float *dw, const void *dy, int lddy,
                              const void *o, int ldo, const void *z, int ldz, const float *rstd, const float *w,
                              int N, int HV, int dv);

    // ---- decoding (T = 1): the GDN token mixer fused into one op. P [B, ldp] = the in_proj output [q|k|v|g|b|a]
    // (layer_gdn.c's columns: q, k [H*dk] each, v, g [HV*dv] each, b, a [HV] each). Per sequence b, in order:
    // conv_silu_fwd of the q|k|v columns with the conv state [B, 2Kd+Vd, K-1] (read, then updated); l2norm_fwd of
    // the q and k heads; gate_fwd from b, a; delta_rule_fwd of that one token with the state S [B, HV, dk, dv]
    // (read, then updated), scale dk^-1/2; gated_rmsnorm_fwd with z = g and the weight norm_w [dv]: y [B, ldy]
    // (HV*dv columns, act). Equal to those ops in sequence (the CPU twin runs them; CUDA keeps the same act
    // roundings of the conv output, q, k and o). ids (nullable, backend memory [B]): where ids[b] == eod both
    // states of b are written as zeros, so the next token starts a document (reset_state_at_eod).
    void (*gdn_decode_fwd)(void *y, int ldy, const void *P, int ldp, const float *conv_w, float *conv_state, float *S,
                           const float *A_log, const float *dt_bias, const float *norm_w, const int32_t *ids,
                           int32_t eod, int B, int H, int HV, int dk, int dv, int K, float eps);
    // RMSNorm into a GEMM (decoding's small M): the rmsnorm_fwd (s_out, no rstd) of x (+ resid) with weight nw
    // [K], then y[M, N] = norm . W[N, K]^T, as the two ops in sequence (the normed row rounded to act first).
    void (*rmsnorm_matmul_fwd)(void *y, int ldy, void *s_out, const void *x, const void *resid, const float *nw,
                               const void *W, int M, int N, int K, float eps);
    // SwiGLU into a GEMM: y[M, N] = swiglu(gu)[M, K] . W[N, K]^T, gu [M, 2K] = [gate | up], as swiglu_fwd then
    // matmul_fwd (the product rounded to act first).
    void (*swiglu_matmul_fwd)(void *y, int ldy, const void *gu, const void *W, int M, int N, int K);
    // A GEMM into SwiGLU, decoding's MLP input: h[M, F] (dense) = swiglu_fwd(gu), gu = RMSNorm(x + resid) . W[2F, K]^T
    // (W = [gate; up]; the rmsnorm_fwd of rmsnorm_matmul_fwd, s_out as there), the same bits as rmsnorm_matmul_fwd
    // into gu then swiglu_fwd; gu is not kept.
    void (*rmsnorm_matmul_swiglu_fwd)(void *h, void *s_out, const void *x, const void *resid, const float *nw,
                                      const void *W, int M, int F, int K, float eps);
    // A GDN block's whole decode step (GdnDecodeBlockArgs: the five ops above in sequence, the same bits). CUDA: one
    // kernel at B = 1, its five parts separated by barriers across its blocks instead of kernel boundaries.
    void (*gdn_decode_block_fwd)(const GdnDecodeBlockArgs *a);
    // A GEMM into SwiGLU (the MLP's forward): gu[M, 2F] = x[M, K] . W[2F, K]^T (row stride 2F; W = [gate; up]) and
    // h[M, F] = swiglu_fwd(gu), the same bits as matmul_fwd then swiglu_fwd (a fused kernel computes h from the
    // rounded gu in its epilogue, so gu is not read back).
    void (*matmul_swiglu_fwd)(void *gu, void *h, const void *x, int ldx, const void *W, int M, int F, int K);
    // Its backward through the down projection: dH = dy[M, K] . W[K, F] (row stride lddy; W = W_down [K, F]),
    // dgu[M, 2F] = swiglu_bwd(gu, dH) and, when y != NULL, y[M, F] = swiglu_fwd(gu) (recompute_swiglu), the same bits
    // as matmul_bwd's dx into dh then swiglu_bwd(dgu, y, dh, gu). dh [M, F]: where a backend that runs the two
    // steps stores dH (contents undefined after; may alias y); a fused kernel takes SwiGLU's backward into its
    // epilogue and never writes it.
    void (*matmul_swiglu_bwd)(void *dgu, void *y, void *dh, const void *dy, int lddy, const void *W, const void *gu,
                              int M, int F, int K);

    // ---- softmax attention of a hybrid's attention blocks (spec hybrid.md §2). Query head j reads KV head
    // j / (Ha/Hkv); head dim d. Keys and values of sequence b are rows b*kv_bstride + (tau mod kv_bstride) of K and V
    // (training: kv_bstride = T; decoding: the KV cache, kv_bstride = its capacity; with a window the cache is a ring
    // holding the last kv_bstride >= T + w - 1 positions, and kv_bstride is then a multiple of 64). pos (backend memory, [1]; NULL = 0):
    // tokens each sequence saw before this call (all alike), so the T new tokens sit at positions pos..pos+T-1 and
    // query t attends keys tau <= pos+t, and with window w > 0 only tau > pos+t-w.
    // P [N, ldp] = the fused projection [q|k|v] (Ha*d + 2*Hkv*d columns), bias fp32 [Ha*d + 2*Hkv*d] or NULL:
    // Q [N, Ha*d] = RoPE(q + bq); rows b*kv_bstride + pos + t of K, V [., Hkv*d] = RoPE(k + bk), v + bv.
    // RoPE: rotate-half over all d, angle p / theta^(2i/d), fp32 tables (spec §2.2).
    // doc_start (nullable, see the top; only with pos NULL): packed documents as FLA's varlen attention
    // (flash_attn_varlen_func with cu_seqlens): the RoPE position restarts at each document, p = t - doc_start[t],
    // and query t attends only keys tau >= doc_start[t] (with the window too). Decoding never passes it.
    void (*attn_qkv_fwd)(void *Q, void *K, void *V, int kv_bstride, const void *P, int ldp, const float *bias,
                         const int32_t *pos, int B, int T, int Ha, int Hkv, int d, float theta,
                         const int32_t *doc_start);
    // Training layout (kv_bstride = T, pos 0): dP (overwrite) = inverse rotation of dQ, dK, and dV;
    // dbias += column sums over tokens in order (NULL: no bias).
    void (*attn_qkv_bwd)(void *dP, int lddp, float *dbias, const void *dQ, const void *dK, const void *dV, int B,
                         int T, int Ha, int Hkv, int d, float theta, const int32_t *doc_start);
    // O [N, Ha*d] = softmax(scale * Q K^T, causal/window/document) V; lse [B, Ha, T] fp32 natural-log logsumexp of
    // the scaled scores, kept for the backward (NULL: not stored).
    void (*attn_fwd)(void *O, float *lse, const void *Q, const void *K, const void *V, int kv_bstride,
                     const int32_t *pos, int B, int T, int Ha, int Hkv, int d, int window, float scale,
                     const int32_t *doc_start);
    // Training layout. dQ [N, Ha*d], dK, dV [N, Hkv*d] overwrite; dK/dV sum over each group's query heads.
    // P is recomputed from lse; D = rowsum(dO * O).
    void (*attn_bwd)(void *dQ, void *dK, void *dV, const void *dO, const void *Q, const void *K, const void *V,
                     const void *O, const float *lse, int B, int T, int Ha, int Hkv, int d, int window, float scale,
                     const int32_t *doc_start);
    // *pos += n (backend memory; a decode step advances its KV-cache length inside its recorded graph)
    void (*pos_advance)(int32_t *pos, int n);

    // ---- SwiGLU: gu [N, 2F] = [gate | up]; y[N,F] = silu(gate) * up
    void (*swiglu_fwd)(void *y, const void *gu, int N, int F);
    // y (NULL: not wanted): swiglu_fwd's y recomputed, the same bits, so the forward need not keep it for
    // dW_down (recompute_swiglu); y may alias dy and dgu may alias gu (each element is read before written).
    void (*swiglu_bwd)(void *dgu, void *y, const void *dy, const void *gu, int N, int F);

    // ---- tied lm head + cross-entropy, never materialising all [N, V] logits at once.
    // logits_n = y[n,:] . E^T. For targets[n] >= 0: losses[n] = logsumexp(logits_n) - logits_n[targets[n]];
    // targets[n] < 0: losses[n] = 0 and no gradient. If dy != NULL: dy = d(*loss_scale * sum_n losses[n])/dy
    // (overwrite) and dE += the same w.r.t. E. targets and loss_scale [1] are backend memory (the scale is read
    // when the op runs, so a recorded training step replays with each step's scale); loss_scale may be NULL
    // when dy is. scratch [scratch_bytes] (may be NULL/0): backend memory nothing else uses during the call, which
    // the op may hold its logits chunks in instead of allocating them (the model passes its backward-only buffers,
    // dead between the forward and the backward); the results do not depend on it.
    void (*lmhead_ce)(float *losses, void *dy, float *dE, const void *y, const void *E, const int32_t *targets,
                      int N, int h, int V, const float *loss_scale, void *scratch, size_t scratch_bytes);
    // logits[N, V] fp32 (inference, eval).
    void (*lmhead_logits)(float *logits, const void *y, const void *E, int N, int h, int V);
    // Per row r of logits [rows, V] fp32: argmax[r] = index of the largest logit (ties: the lowest index, as
    // torch.argmax); if logprob != NULL: logprob[r] = logits[r, targets[r]] - logsumexp(logits[r, :]).
    // argmax, targets and logprob are backend memory (decode picks greedy tokens, eval scores, on the device).
    void (*logits_stats)(int32_t *argmax, float *logprob, const float *logits, const int32_t *targets, int rows,
                         int V);
    // Decoding's last op: rmsnorm_fwd(y, rstd, s_out, x, resid, nw [h]) [M, h], then logits[M, V] fp32 = y . E^T
    // (lmhead_logits) and argmax[M] of each row (logits_stats without logprob), then, when ring is not NULL,
    // token_ring_push(ring, ring_count, argmax, M, ring_k): as those ops in sequence (CUDA: one GEMV kernel at small
    // M, whose last block also pushes). argmax is backend memory.
    void (*lmhead_norm_argmax)(int32_t *argmax, float *logits, void *y, float *rstd, void *s_out, const void *x,
                               const void *resid, const float *nw, const void *E, int M, int h, int V, float eps,
                               int32_t *ring, int32_t *ring_count, int ring_k);
    // Decoding's token history, so that the host reads tokens every few steps rather than after each: ring [K, B]
    // and count [1] backend memory; ring[(count % K) * B + b] = tok[b] for b < B, then count += 1. The slot comes
    // from count, so a recorded step pushes into the next slot at every replay.
    void (*token_ring_push)(int32_t *ring, int32_t *count, const int32_t *tok, int B, int K);

    // ---- optimizer
    void (*sum)(float *out, const float *x, size_t n);   // out[0] = sum x (deterministic), backend memory
    void (*sumsq)(float *out, const float *x, size_t n); // out[0] = sum x^2
    // AdamW (decoupled decay) on n elements with g_eff = g * gscale, bias-corrected with `step` (1-based):
    // m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; p -= lr * (mhat / (sqrt(vhat) + eps) + wd * p).
    // p_act (nullable) receives the updated p in act dtype (the GEMM compute copy).
    void (*adamw)(float *p, void *p_act, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
                  float eps, float wd, int step, float gscale);
    // The same update over many ranges in one launch: chunks [nchunks] (backend memory, AdamwChunk above) with
    // weight decay wd where chunk.decay, else 0; gscale read from backend memory [1]. Bit for bit what adamw
    // called on each chunk with that gscale computes.
    void (*adamw_multi)(const AdamwChunk *chunks, int nchunks, float *p, void *p_act, const float *g, float *m,
                        float *v, float lr, float b1, float b2, float eps, float wd, int step, const float *gscale);
    // adamw_multi with the state in lower precision (Megatron's precision-aware optimizer; model/optim_lp.c): the
    // same fp32 math per element. lp & ADAMW_M_BF16 / ADAMW_V_BF16: m / v are stored in act dtype holding values
    // rounded to bf16 (to nearest even after each update: bf16 storage on bf16 backends, bf16-valued fp32 on fp32
    // ones). Chunks with rem (bf16 act, rem non-NULL) keep no fp32 p: the master is p_act's bits in its high half
    // and rem[soff+i] in its low half, split after the update as TransformerEngine's FusedAdam does with
    // store_param_remainders (p_act = the high half rounded up when the low half's top bit is set); p_act is read
    // as bf16 bits (on fp32 backends: bf16-valued fp32). Other chunks: p and p_act as adamw_multi.
    void (*adamw_multi_lp)(const AdamwChunk *chunks, int nchunks, float *p, uint16_t *rem, void *p_act,
                           const float *g, void *m, void *v, int lp, float lr, float b1, float b2, float eps, float wd,
                           int step, const float *gscale);
    // Megatron's clipping factor from a sum of squares (backend memory [1] each), in double: scale[0] =
    // max_norm / (sqrt(sumsq[0]) + 1e-6) where that is < 1 and max_norm > 0, else 1. No host round trip.
    void (*clip_scale)(float *scale, const float *sumsq, float max_norm);

    // ---- graphs (NULL where the backend has none, e.g. the CPU): ops issued between capture_begin and
    // capture_end are recorded, not run; graph_launch replays them with the same pointers and shapes.
    // Inside a capture nothing may synchronise or allocate (memcpy_h2d/d2h, alloc, free, sync).
    int (*capture_begin)(void);        // 0 = capturing; nonzero = graphs unavailable (debug mode, emulator)
    void *(*capture_end)(void);        // the replayable graph, or NULL if the capture failed
    void (*graph_launch)(void *graph); // asynchronous, on the backend's stream
    void (*graph_free)(void *graph);

    // ---- collectives across data-parallel ranks (issue 19; train/dist.c drives them). NULL where the backend
    // has none (CPU: its memory is the host's, reduced by train/dist.c through shared memory or Gloo).
    // One communicator per process; collectives run in order on the backend's stream.
    int (*comm_id_size)(void);                                   // bytes of the bootstrap id (<= 512)
    int (*comm_unique_id)(void *id, char *err, size_t errlen);   // rank 0; the id reaches the others by the CPU channel
    int (*comm_init)(const void *id, int rank, int world, char *err, size_t errlen);
    void (*comm_allreduce_sum)(float *buf, size_t n); // in place, the same bits on every rank
    // rank r owns buf[offs[r], offs[r+1]): reduce-scatter leaves the sum in each owned range (the rest of buf
    // undefined); all-gather copies every owned range to every rank. offs: host [world+1].
    void (*comm_reduce_scatter_sum)(float *buf, const size_t *offs);
    void (*comm_allgather)(float *buf, const size_t *offs);
    // the same in elements of elem_bytes each (ZeRO-1 on bf16: the act copy of the weights)
    void (*comm_allgather_bytes)(void *buf, const size_t *offs, size_t elem_bytes);
    // overlap with the backward: the all-reduce runs on a communication stream once the compute stream has
    // reached this point (an event); comm_wait makes the compute stream wait for all of them.
    void (*comm_allreduce_sum_async)(float *buf, size_t n);
    void (*comm_reduce_scatter_sum_async)(float *buf, const size_t *offs); // ZeRO-1's buckets, likewise
    void (*comm_wait)(void);
    void (*comm_free)(void);
} Backend;

// gdn_decode_block_fwd's definition, run as the five ops of the table be (the CPU twin with the CPU's; CUDA's form for
// the batches and shapes its kernel does not take, with the CUDA table's).
static inline void gdn_decode_block_ops(const Backend *be, const GdnDecodeBlockArgs *a) {
    const int Vd = a->HV * a->dv;
    be->rmsnorm_matmul_fwd(a->P, a->ldp, a->s_attn, a->x, a->resid, a->attn_norm, a->W_in, a->B, a->ldp, a->h, a->eps);
    be->gdn_decode_fwd(a->on, Vd, a->P, a->ldp, a->conv_w, a->conv_state, a->S, a->A_log, a->dt_bias, a->o_norm,
                       a->ids, a->eod, a->B, a->H, a->HV, a->dk, a->dv, a->K, a->eps);
    be->matmul_fwd(a->out, a->h, a->on, Vd, a->W_o, a->B, a->h, Vd, 0);
    be->rmsnorm_matmul_swiglu_fwd(a->hbuf, a->s_mlp, a->out, a->mlp_resid, a->mlp_norm, a->W_gu, a->B, a->F, a->h,
                                  a->eps);
    be->matmul_fwd(a->out, a->h, a->hbuf, a->F, a->W_down, a->B, a->h, a->F, 0);
}

const Backend *backend_cpu(void);
// The CPU table with the token-by-token delta rule (cpu/delta_rule_recurrent.c, the reference form that
// config key delta_rule=recurrent asks for) in place of the chunked one; everything else as backend_cpu().
const Backend *backend_cpu_recurrent(void);
// CUDA backend (cuda/backend.cu); NULL when built without CUDA or no usable GPU. precision_bf16 picks
// the activation dtype. err gets the reason for NULL.
const Backend *backend_cuda(int precision_bf16, char *err, size_t errlen);
// Picks by name: "cpu", "cuda", "auto" (cuda when available). Dies with a clear message on failure.
const Backend *backend_select(const char *device, const char *precision);
// The table for a config's delta_rule: "chunk" = be; "recurrent" = backend_cpu_recurrent() (be must be the
// CPU's; dies otherwise).
const Backend *backend_with_delta_rule(const Backend *be, const char *delta_rule);

#ifdef __cplusplus
}
#endif
