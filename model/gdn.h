// gdn.h: the Gated DeltaNet causal LM (FLA's GatedDeltaNetForCausalLM) written once over the backend
// op table. Forward, backward and the optimizer step; the CPU and CUDA backends run the same graph.
#pragma once
#include <stdint.h>

#include "adamw_plan.h"
#include "backend.h"
#include "config.h"
#include "layer_attn.h"
#include "layer_gdn.h"
#include "params.h"

#ifdef __cplusplus
extern "C" {
#endif

// Activations of one block, kept from forward for backward. [N = B*T rows]
typedef struct {
    void *s_attn, *y_attn;   // residual stream into the attn norm [N,h] and its normed output
    float *rstd_attn;        // [N]
    GdnActs gdn;             // the mixer's, by kind (layer_<kind>.h); only the block's own kind is set
    AttnActs attn;
    void *s_mlp, *y_mlp;     // residual stream into the mlp norm and its normed output [N,h]
    float *rstd_mlp;         // [N]
    void *GU, *Hh;           // [N, 2F] gate|up, [N, F] silu(gate)*up
    // attention blocks of a hybrid (P then holds the raw [q|k|v] projection [N, Dq+2Dkv])
    void *aQ, *aK, *aV;      // RoPE'd q [N, Dq], k and v [N, Dkv] (training layout; decoding uses the KV cache)
    void *aO;                // attention output [N, Dq]
    float *lse;              // [B, Ha, T] softmax logsumexp, for the backward
} BlockActs;

// Decode state of one block, by kind; only the block's own kind is set.
typedef struct {
    GdnState gdn;
    AttnState attn;
} LayerState;

// Model.scalars after the 32 loss slots: the gradients' sum of squares, the clip scale, the micro-batch's loss
// scale (lmhead_ce reads it there), and the loss sum of a recorded fwd+bwd (copied to the caller's slot after)
enum { MODEL_SLOT_SUMSQ = 32, MODEL_SLOT_GSCALE = 33, MODEL_SLOT_LOSS_SCALE = 34, MODEL_SLOT_GRAPH_LOSS = 35 };

typedef struct Model {
    Config cfg;
    ModelDims d;
    ParamLayout lay;
    const Backend *be;
    int training;
    float *params;          // fp32 master [lay.total]
    void *wact;             // compute copy in act dtype (== params for fp32 backends)
    float *grads;           // training only
    void *adam_m, *adam_v;  // training only: AdamW moments, fp32 [lay.total], or in act dtype at bf16 precision
                            //   (adam_lp: use_precision_aware_optimizer; model/optim_lp.c)
    int adam_lp;            // adamw_multi_lp's flags (ADAMW_M_BF16 | ADAMW_V_BF16); 0 with the fp32 state
    int adam_pa;            // use_precision_aware_optimizer: model_adamw runs adamw_multi_lp
    uint16_t *adam_rem;     // store_param_remainders (bf16 backends): the masters' low 16 bits [lay.total]; params
                            //   is then NULL: the GEMM weights' masters are wact + these, the fp32-read tensors' small
    // activations, allocated for (B, T) on first use and re-allocated if the shape grows
    int B, T;
    int32_t *ids, *targets; // [N] backend memory
    int32_t *doc_start;     // [N] backend memory, with reset_state_at_eod (else NULL): backend.h doc_starts
    void *emb;              // s_0 [N,h]
    BlockActs *blk;         // [L]
    void *arena;            // every buffer above and below (sized for B x T), one allocation
    size_t arena_used;      // bytes laid out so far
    void *bwd_only;         // training: the arena's backward-only buffers (ds0 .. the kinds' gradients), contiguous,
    size_t bwd_only_bytes;  //   free while lmhead_ce runs (its logits scratch); NULL/0 otherwise
    void *s_final, *y_final; float *rstd_final;
    void *out;              // scratch sublayer output [N,h]
    float *losses;          // [N]
    // backward scratch: of the stream and the MLP, and per mixer kind
    void *dy, *ds0, *ds1, *dGU, *dH;
    size_t dGU_bytes;       // training: dGU's size (free during a GDN block: the delta rule's scratch); 0 otherwise
    GdnGrads gdn_grads;
    AttnGrads attn_grads;
    float *scalars;         // [64] backend scalars: loss slots 0..31, MODEL_SLOT_SUMSQ, MODEL_SLOT_GSCALE
    AdamwPlan adam_plan;    // model_adamw's chunk table, built on its first call
    float *logits_buf;      // [64, V] fp32 for model_logits / model_score_rows, allocated on first use
    int32_t *score_idx;     // [2*64] targets | argmax for model_score_rows
    float *score_lp;        // [64]
    void *score_y;          // [64, h] act: the scored rows of y_final, gathered
    size_t cap_N;           // rows the activations were allocated for (inference reuses them for fewer)
    // forward_tokens: the call's token ids [B, T] (backend memory; the states' EOD resets read them), and, when
    // decoding (a state and T = 1), the block's input RMSNorm if forward_tokens leaves it to the mixer's first
    // GEMM (rmsnorm_matmul_fwd; w NULL: it ran already and y_attn holds it)
    const int32_t *step_ids;
    struct { const void *x, *resid; void *s_out; const float *w; } in_norm;
    unsigned acts_gen;      // bumped when the activations move (graphs recorded against them are stale)
    // enable_cuda_graph: model_fwd_bwd's device ops recorded once per shape and replayed (NULL: none yet)
    void *step_graph;
    int step_graph_B, step_graph_T, step_graph_calls; // the recorded shape; calls at that shape so far
    unsigned step_graph_gen;                          // acts_gen when recorded
    // issue 19: called by the backward once parameter gradients [first_param_offset, +count) are final for this
    // micro-batch (each block, the final norm, the tied embedding last); NULL: nobody listens
    void (*grad_ready)(struct Model *m, size_t first_param_offset, size_t count);
    void *grad_ready_ctx;
    // issue 19: called by the forward before it first reads parameters [first_param_offset, +count) (the
    // embedding, each block, the final norm): ZeRO-1's all-gather overlapped with the forward waits here
    void (*params_needed)(struct Model *m, size_t first_param_offset, size_t count);
    void *params_needed_ctx;
    // ZeRO-1 on a bf16 backend (model_drop_masters): params is NULL, the masters live sharded in train/zero.c,
    // and the tensors the forward reads in fp32 stay whole here: runs [small_lo, small_hi) of the flat
    // vector, each at small_at in small
    float *small;
    int nsmall;
    size_t *small_lo, *small_hi, *small_at, nsmall_elems;
} Model;

// A decode step's ops recorded as one graph, `steps` times over, against the activations of generation `gen`
// (Model.acts_gen).
typedef struct {
    void *exec;
    unsigned gen;
    int steps;
} DecodeGraph;

// Recurrent inference state of B sequences: per block its kind's decode state (GDN: the conv windows and
// each v head's delta-rule state, constant size whatever the length decoded; attention: a KV cache that
// grows with the tokens seen).
typedef struct {
    int B;
    LayerState *layer; // [L]
    // decode step (model_decode_step): device token ids [B] (the next input; the step overwrites them with
    // its argmax), logits [B, V] fp32, and the step recorded as a graph where the backend has graphs
    int32_t *tok;
    float *logits;
    // each step's argmax also goes to ring[step % DECODE_RING] [DECODE_RING, B] (backend memory, ring_count its
    // push count): model_decode_read fetches several steps' tokens in one read
    int32_t *ring, *ring_count;
    DecodeGraph graph1, graphn; // one step; model_decode_launch_n's n steps
    int steps;
} InferState;
enum { DECODE_RING = 64 };

Model *model_create(const Config *cfg, const Backend *be, int training);
void model_free(Model *m);
void model_set_params(Model *m, const float *host);  // uploads the master weights and refreshes wact
void model_get_params(Model *m, float *host);
void model_set_optim(Model *m, const float *host_m, const float *host_v);
void model_get_optim(Model *m, float *host_m, float *host_v);
void model_get_grads(Model *m, float *host);
void model_zero_grads(Model *m);
// ZeRO-1 on a bf16 backend: frees the whole fp32 master (params = NULL) and keeps only the fp32 tensors the
// forward reads (model/fp32_params.c; the act copy holds the GEMM weights). No-op when already dropped;
// dies on fp32 backends (their forward reads the masters). model_get/set_params, model_adamw refuse after it.
void model_drop_masters(Model *m);
float *model_small_param(const Model *m, size_t off); // the fp32 copy of parameter `off` after it
void model_free_small(Model *m);
// use_precision_aware_optimizer (model/optim_lp.c): the moments' storage (model_create calls it), and the masters
// as remainders (model_create calls it on bf16 backends with store_param_remainders; a test may call it on a CPU
// model given a separate act copy): params freed, the masters of the GEMM weights kept as wact's bf16 and 16-bit
// remainders (TransformerEngine's split), those of the fp32-read tensors whole in small. model_set/get_params,
// model_set/get_optim and model_adamw then convert.
void model_lp_alloc_state(Model *m);
void model_keep_remainders(Model *m);
// Bytes per parameter the weights, gradients and optimizer state take (for logs)
double model_state_bytes_per_param(const Model *m);

// Forward to the final normed hidden state (kept in m->y_final). ids: host [B*T].
void model_forward(Model *m, const int32_t *ids, int B, int T);
// Forward that starts from and updates a recurrent state (prefill with T tokens, or decode with T = 1).
void model_forward_state(Model *m, const int32_t *ids, int B, int T, InferState *st);
InferState *infer_state_new(Model *m, int B); // zeroed
void infer_state_reset(Model *m, InferState *st);
void infer_state_free(Model *m, InferState *st);
// One recurrent decode step of st->B sequences (T = 1). feed: host ids [B] to feed, or NULL to feed the previous
// step's argmax (greedy decoding without a round trip). argmax_out (host [B]) gets each row's greedy next
// token, logits_out (host [B, V]) the logits; either may be NULL. On a backend with graphs the second and
// later steps replay one recorded graph (set GDN_NO_GRAPH=1 to run the ops one by one).
void model_decode_step(Model *m, InferState *st, const int32_t *feed, int32_t *argmax_out, float *logits_out);
// The same step, returning as soon as it is queued: nothing is read back (greedy decoding on the backend, feed NULL
// after the first step). Steps queued back to back run without a host round trip between them.
void model_decode_launch(Model *m, InferState *st, const int32_t *feed);
// n greedy steps (each takes the previous argmax; at least one step fed before), recorded together as one graph
// where the backend has graphs, so there is no launch gap between them; queued, nothing read back.
void model_decode_launch_n(Model *m, InferState *st, int n);
// The argmax tokens [n, B] of the last n steps (1 <= n <= min(DECODE_RING, steps so far)), oldest first; waits for
// them to be computed.
void model_decode_read(Model *m, InferState *st, int32_t *toks, int n);
// After model_forward: for n (row, target) pairs (host arrays), logprob[i] = log p(targets[i] | row rows[i])
// and argmax[i] = that row's greedy token (host outputs), computed on the backend.
void model_score_rows(Model *m, const int32_t *rows, const int32_t *targets, int n, float *logprob, int32_t *argmax);
// Per-token losses after model_forward (targets host [B*T], <0 = ignored) into host losses [B*T].
void model_token_losses(Model *m, const int32_t *targets, float *losses);
// Logits of rows [row0, row0+nrows) after model_forward, into host out [nrows, V].
void model_logits(Model *m, int row0, int nrows, float *out);
// Forward + backward of one micro-batch; grads accumulate. The loss sum lands in scalar slot `slot`
// (< 32) and gradients are of loss_scale * sum(token losses). With cfg.enable_cuda_graph on a backend with
// graphs (and no grad_ready / params_needed hooks), the second call at a shape records the device ops and
// later calls replay them: the same kernels in the same order, so the same bits.
void model_fwd_bwd(Model *m, const int32_t *ids, const int32_t *targets, int B, int T, float loss_scale, int slot);
double model_read_loss_slots(Model *m, int nslots); // sum of slots 0..nslots-1 (synchronises)
// The gradients' sum of squares and Megatron's clip scale from it (max_norm <= 0: 1), both left in backend
// scalars: no host round trip between the norm and model_adamw.
void model_clip_grads(Model *m, float max_norm);
double model_read_grad_norm(Model *m);              // the global L2 norm model_clip_grads computed (synchronises)
void model_set_grad_scale(Model *m, float gscale);  // a clip scale computed on the host (ZeRO-1's norm)
// AdamW over every tensor (weight decay per the tensor table) in one multi-tensor call, the grads scaled by the
// clip scale in backend memory (model_clip_grads or model_set_grad_scale) first.
void model_adamw(Model *m, float lr, int step);

#ifdef __cplusplus
}
#endif
