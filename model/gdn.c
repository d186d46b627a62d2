// gdn.c: the model graph. Forward, backward and AdamW over the backend op table (backend.h).
//
// The residual stream is a chain of norm sites k = 0..2L: s_0 = embeddings, s_{k+1} = s_k + out_k where
// out_k is sublayer k's output (the block's mixer for even k, by its layer kind: layer.h, layer_<kind>.c;
// the SwiGLU MLP for odd k), and y_k = RMSNorm_k(s_k)
// feeds sublayer k. The add is fused into the next norm (FLA fuse_norm): rmsnorm_fwd(x=out_k, resid=s_k).
// y_2L (final norm) feeds the tied lm head. Backward walks the chain in reverse with ds_k =
// RMSNorm_k'(dy_k) + ds_{k+1}.
#include "gdn.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/common.h"
#include "layer.h"
#include "optim_lp.h"

// The layer kinds' mixers (config.h LAYER_KINDS), by kind
static const LayerKindOps *const KINDS[LAYER_NKINDS] = {
#define X(e, name) [e] = &layer_##name,
    LAYER_KINDS(X)
#undef X
};
static const LayerKindOps *kind_of(const Model *m, int l) { return KINDS[m->d.kind[l]]; }

// Inference shares buffers between blocks: the first block of each kind owns its kind's, the others alias.
// Returns the owner, or -1 when block l owns its buffers (always when training).
static int acts_owner(const Model *m, int l) {
    if (m->training) return -1;
    for (int j = 0; j < l; j++)
        if (m->d.kind[j] == m->d.kind[l]) return j;
    return -1;
}
static int kind_used(const Model *m, int kind) {
    for (int l = 0; l < m->d.L; l++)
        if (m->d.kind[l] == kind) return 1;
    return 0;
}

Model *model_create(const Config *cfg, const Backend *be, int training) {
    char err[ERR_LEN];
    if (config_validate(cfg, err, sizeof err)) die("%s", err);
    Model *m = xcalloc(1, sizeof *m);
    m->cfg = *cfg;
    m->d = config_dims(cfg);
    m->be = be;
    m->training = training;
    if (kind_used(m, LAYER_ATTN) &&
        !(be->attn_qkv_fwd && be->attn_qkv_bwd && be->attn_fwd && be->attn_bwd && be->pos_advance &&
          be->matmul_bias_fwd))
        die("the %s backend has no softmax-attention kernels yet: hybrid models (attn_layers %s) run on --device cpu",
            be->name, cfg->attn_layers);
    params_layout(&m->lay, &m->d);
    size_t n = m->lay.total;
    m->params = be->alloc(n * sizeof(float));
    m->wact = be->act_bytes == 4 ? (void *)m->params : be->alloc(n * (size_t)be->act_bytes);
    if (training) {
        m->grads = be->alloc(n * sizeof(float));
        model_lp_alloc_state(m); // the AdamW moments (and the masters' remainders) in the configured precision
    }
    m->scalars = be->alloc(64 * sizeof(float));
    return m;
}

void *model_arena_take(Model *m, size_t bytes) {
    size_t off = m->arena_used;
    m->arena_used += (bytes + 255) / 256 * 256;
    return m->arena ? (char *)m->arena + off : NULL;
}

static void free_acts(Model *m) {
    if (!m->blk) return;
    m->be->free(m->arena);
    m->arena = NULL;
    m->arena_used = 0;
    free(m->blk);
    m->blk = NULL;
    m->B = m->T = 0;
}

// Every activation buffer for N = B*T rows, as slices of the arena (model_arena_take).
static void layout_acts(Model *m, int B, int T) {
    const ModelDims *d = &m->d;
    size_t N = (size_t)B * T, ab = (size_t)m->be->act_bytes;
#define ACT(n) model_arena_take(m, (size_t)(n) * ab)
#define F32(n) model_arena_take(m, (size_t)(n) * sizeof(float))
    m->ids = model_arena_take(m, N * sizeof(int32_t));
    m->targets = model_arena_take(m, N * sizeof(int32_t));
    // packed documents (issue 14): nothing taken with the key off, so the layout stays as it was
    m->doc_start = m->cfg.reset_state_at_eod ? model_arena_take(m, N * sizeof(int32_t)) : NULL;
    m->emb = ACT(N * d->h);
    // Training keeps every block's activations for backward. Inference shares block 0's buffers across
    // blocks (the mixer's: the first block of the kind's); only the residual stream needs two buffers (into
    // attn norm, into mlp norm) that alternate.
    for (int l = 0; l < d->L; l++) {
        BlockActs *b = &m->blk[l];
        if (!m->training && l > 0) {
            *b = m->blk[0];
        } else {
            b->s_attn = (l == 0) ? m->emb : ACT(N * d->h);
            b->y_attn = ACT(N * d->h); b->rstd_attn = F32(N);
            b->s_mlp = ACT(N * d->h); b->y_mlp = ACT(N * d->h); b->rstd_mlp = F32(N);
            b->GU = ACT(N * 2 * d->F);
            b->Hh = m->training && m->cfg.recompute_swiglu ? NULL : ACT(N * d->F); // NULL: set to dH below
        }
        kind_of(m, l)->acts_alloc(m, l, B, T, acts_owner(m, l));
    }
    if (!m->training && d->L > 1) {
        void *sA = ACT(N * d->h);
        for (int l = 1; l < d->L; l++) m->blk[l].s_attn = sA;
    }
    m->s_final = ACT(N * d->h); m->y_final = ACT(N * d->h); m->rstd_final = F32(N);
    m->out = ACT(N * d->h);
    m->losses = F32(N);
    m->bwd_only = NULL, m->bwd_only_bytes = 0;
    m->dGU = m->dH = NULL, m->dGU_bytes = 0; // training only (the delta rule takes dGU as its scratch when set)
    if (m->training) {
        m->dy = ACT(N * d->h);
        // from ds0 to the kinds' gradients: buffers only the backward uses (dH also the forward's SwiGLU outputs
        // under recompute_swiglu, each dead after its block), so between the last block's forward and the first
        // backward op they are free: lmhead_ce may keep its logits there
        const size_t bwd_only_off = m->arena_used;
        m->ds0 = ACT(N * d->h); m->ds1 = ACT(N * d->h);
        m->dGU = ACT(N * 2 * d->F); m->dH = ACT(N * d->F);
        m->dGU_bytes = N * 2 * d->F * ab;
        // recompute_swiglu: every block's forward writes its SwiGLU output into dH (free until the backward),
        // and its backward recomputes it there from GU after dH is consumed
        if (m->cfg.recompute_swiglu)
            for (int l = 0; l < d->L; l++) m->blk[l].Hh = m->dH;
        for (int k = 0; k < LAYER_NKINDS; k++)
            if (kind_used(m, k)) KINDS[k]->grads_alloc(m, B, T);
        m->bwd_only = m->arena ? (char *)m->arena + bwd_only_off : NULL;
        m->bwd_only_bytes = m->arena ? m->arena_used - bwd_only_off : 0;
    }
#undef ACT
#undef F32
}

// Sized for (B, T) on first use; a new shape re-allocates.
static void ensure_acts(Model *m, int B, int T) {
    if (m->blk && B == m->B && T == m->T) return;
    // Inference buffers are per row (no per-chunk states), so ones allocated for more rows serve fewer, and
    // switching between prefill and decode keeps the pointers a recorded decode graph uses.
    if (m->blk && !m->training && (size_t)B * T <= m->cap_N) {
        m->B = B; m->T = T;
        return;
    }
    free_acts(m);
    m->acts_gen++;
    m->blk = xcalloc((size_t)m->d.L, sizeof *m->blk);
    layout_acts(m, B, T); // sizing pass
    size_t bytes = m->arena_used;
    m->arena = m->be->alloc(bytes);
    m->arena_used = 0;
    layout_acts(m, B, T);
    m->B = B; m->T = T; m->cap_N = (size_t)B * T;
    fprintf(stderr, "model: activations for %d x %d tokens (%s): allocating %.1f MiB (%zu bytes)\n", B, T,
            m->training ? "training" : "inference", bytes / 1048576.0, bytes);
}

static void step_graph_drop(Model *m) {
    if (m->step_graph) m->be->graph_free(m->step_graph);
    m->step_graph = NULL;
    m->step_graph_calls = 0;
}

void model_free(Model *m) {
    if (!m) return;
    step_graph_drop(m);
    free_acts(m);
    const Backend *be = m->be;
    if (m->wact != (void *)m->params) be->free(m->wact);
    if (m->params) be->free(m->params);
    model_free_small(m);
    if (m->grads) be->free(m->grads);
    if (m->adam_m) be->free(m->adam_m);
    if (m->adam_v) be->free(m->adam_v);
    if (m->adam_rem) be->free(m->adam_rem);
    be->free(m->scalars);
    adamw_plan_free(&m->adam_plan, be);
    if (m->logits_buf) be->free(m->logits_buf);
    if (m->score_idx) { be->free(m->score_idx); be->free(m->score_lp); be->free(m->score_y); }
    params_layout_free(&m->lay);
    free(m);
}

static void need_masters(const Model *m, const char *what) {
    if (!m->params) die("%s: the fp32 masters are sharded (ZeRO-1; train/zero.c has them)", what);
}

void model_set_params(Model *m, const float *host) {
    if (m->adam_rem) { model_lp_set_params(m, host); return; }
    need_masters(m, "model_set_params");
    m->be->memcpy_h2d(m->params, host, m->lay.total * sizeof(float));
    if (m->wact != (void *)m->params) m->be->to_act(m->wact, m->params, m->lay.total);
}
void model_get_params(Model *m, float *host) {
    if (m->adam_rem) { model_lp_get_params(m, host); return; }
    need_masters(m, "model_get_params");
    m->be->memcpy_d2h(host, m->params, m->lay.total * sizeof(float));
}
void model_set_optim(Model *m, const float *hm, const float *hv) {
    if (m->adam_lp) { model_lp_set_optim(m, hm, hv); return; }
    m->be->memcpy_h2d(m->adam_m, hm, m->lay.total * sizeof(float));
    m->be->memcpy_h2d(m->adam_v, hv, m->lay.total * sizeof(float));
}
void model_get_optim(Model *m, float *hm, float *hv) {
    if (m->adam_lp) { model_lp_get_optim(m, hm, hv); return; }
    m->be->memcpy_d2h(hm, m->adam_m, m->lay.total * sizeof(float));
    m->be->memcpy_d2h(hv, m->adam_v, m->lay.total * sizeof(float));
}
void model_get_grads(Model *m, float *host) { m->be->memcpy_d2h(host, m->grads, m->lay.total * sizeof(float)); }
void model_zero_grads(Model *m) { m->be->memset0(m->grads, m->lay.total * sizeof(float)); }

// Decoding's MLP as gate|up with SwiGLU in its epilogue, then down (rmsnorm_matmul_swiglu_fwd + matmul_fwd), or,
// with GDN_DECODE_SWIGLU_OUT=0, the older pair whose down GEMM stages SwiGLU (an A/B switch; the same bits)
static int swiglu_out_on(void) {
    static int on = -1;
    if (on < 0) on = !(getenv("GDN_DECODE_SWIGLU_OUT") && !strcmp(getenv("GDN_DECODE_SWIGLU_OUT"), "0"));
    return on;
}

static void check_ids(const Model *m, const int32_t *ids, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->d.V)
            die("%s: token id %d at position %zu is outside the vocabulary [0, %d)", what, ids[i], i, m->d.V);
}

// ---------------------------------------------------------------------------------------------------
// forward

static void mlp_fwd(Model *m, int l, int N) {
    const Backend *be = m->be;
    const ModelDims *d = &m->d;
    const LayerOffsets *w = &m->lay.layer[l];
    BlockActs *b = &m->blk[l];
    be->matmul_swiglu_fwd(b->GU, b->Hh, b->y_mlp, d->h, WA(m, w->gate_proj), N, d->F, d->h); // GU [N, 2F], Hh [N, F]
    be->matmul_fwd(m->out, d->h, b->Hh, d->F, WA(m, w->down_proj), N, d->h, d->F, 0);
}

void model_forward(Model *m, const int32_t *ids, int B, int T) { model_forward_state(m, ids, B, T, NULL); }

InferState *infer_state_new(Model *m, int B) {
    InferState *st = xcalloc(1, sizeof *st);
    st->B = B;
    st->layer = xcalloc((size_t)m->d.L, sizeof *st->layer);
    for (int l = 0; l < m->d.L; l++) kind_of(m, l)->state_alloc(m, l, B, &st->layer[l]);
    return st;
}
void infer_state_reset(Model *m, InferState *st) {
    for (int l = 0; l < m->d.L; l++) kind_of(m, l)->state_reset(m, l, st->B, &st->layer[l]);
}
void infer_state_free(Model *m, InferState *st) {
    if (!st) return;
    if (st->graph1.exec) m->be->graph_free(st->graph1.exec);
    if (st->graphn.exec) m->be->graph_free(st->graphn.exec);
    if (st->tok) { m->be->free(st->tok); m->be->free(st->logits); m->be->free(st->ring); m->be->free(st->ring_count); }
    for (int l = 0; l < m->d.L; l++) kind_of(m, l)->state_free(m, l, &st->layer[l]);
    free(st->layer);
    free(st);
}

// Before a forward of T more tokens with a state, outside any graph capture: room in the states that grow
// (attention KV caches); a recorded decode graph is dropped when they moved.
static void state_grow(Model *m, InferState *st, int T) {
    int moved = 0;
    for (int l = 0; l < m->d.L; l++)
        if (kind_of(m, l)->state_grow) moved |= kind_of(m, l)->state_grow(m, l, st->B, T, &st->layer[l]);
    DecodeGraph *gs[2] = {&st->graph1, &st->graphn};
    for (int i = 0; i < 2; i++)
        if (moved && gs[i]->exec) {
            m->be->graph_free(gs[i]->exec);
            gs[i]->exec = NULL;
        }
}

// The flat-buffer range of block l's parameters (they are contiguous), for grad_ready and params_needed.
static void layer_range(const ParamLayout *lay, int l, size_t *off, size_t *n) {
    *off = 0, *n = 0;
    for (int i = 0; i < lay->ntensors; i++)
        if (lay->tensors[i].layer == l) {
            if (!*n) *off = lay->tensors[i].off;
            *n += lay->tensors[i].numel;
        }
}

// The forward from token ids already in backend memory (no host round trip: a decode graph records it), with the
// final RMSNorm into y_final unless final_norm is 0 (a decode step's lm head runs it: lmhead_norm_argmax).
static void forward_tokens(Model *m, const int32_t *ids_dev, int B, int T, InferState *st, int final_norm) {
    const Backend *be = m->be;
    const ModelDims *d = &m->d;
    int N = B * T;
    if (m->doc_start && T > 1) be->doc_starts(m->doc_start, ids_dev, B, T, m->cfg.eos_token_id);
    // Decoding fuses each block's norms into the GEMMs after them and SwiGLU into the down projection (small-M
    // GEMVs on CUDA: fewer dependent kernels per step; the CPU's are the same ops in sequence).
    const int fuse = st && T == 1 && !m->training && be->rmsnorm_matmul_fwd && be->swiglu_matmul_fwd;
    m->step_ids = ids_dev;
    if (m->params_needed) m->params_needed(m, m->lay.embeddings, (size_t)d->V * d->h);
    be->embedding_fwd(m->emb, ids_dev, WA(m, m->lay.embeddings), N, d->h);
    for (int l = 0; l < d->L; l++) {
        BlockActs *b = &m->blk[l];
        const LayerOffsets *w = &m->lay.layer[l];
        if (m->params_needed) {
            size_t off, n;
            layer_range(&m->lay, l, &off, &n);
            m->params_needed(m, off, n);
        }
        // s = previous MLP output + previous block's s_mlp (block 0: the embeddings)
        const void *nx = l == 0 ? m->emb : m->out, *nres = l == 0 ? NULL : m->blk[l - 1].s_mlp;
        void *ns = l == 0 ? NULL : b->s_attn;
        // the whole block as one op where the kind and the backend have it (CUDA at batch 1: one kernel)
        if (fuse && swiglu_out_on() && kind_of(m, l)->decode_block &&
            kind_of(m, l)->decode_block(m, l, B, &st->layer[l], nx, nres, ns))
            continue;
        if (fuse && kind_of(m, l)->fuses_in_norm) // the mixer's first GEMM runs it (mixer_in_proj)
            m->in_norm.x = nx, m->in_norm.resid = nres, m->in_norm.s_out = ns, m->in_norm.w = PF(m, w->attn_norm);
        else
            be->rmsnorm_fwd(b->y_attn, b->rstd_attn, ns, nx, nres, PF(m, w->attn_norm), N, d->h, d->eps);
        kind_of(m, l)->fwd(m, l, B, T, st ? &st->layer[l] : NULL);
        m->in_norm.w = NULL;
        if (fuse && swiglu_out_on()) { // h = swiglu(RMSNorm(s_mlp) . [gate|up]^T); out = h . W_down^T
            be->rmsnorm_matmul_swiglu_fwd(b->Hh, b->s_mlp, m->out, b->s_attn, PF(m, w->mlp_norm), WA(m, w->gate_proj), N,
                                          d->F, d->h, d->eps);
            be->matmul_fwd(m->out, d->h, b->Hh, d->F, WA(m, w->down_proj), N, d->h, d->F, 0);
        } else if (fuse) { // [gate|up] = RMSNorm(s_mlp) . W^T; out = swiglu . W_down^T
            be->rmsnorm_matmul_fwd(b->GU, 2 * d->F, b->s_mlp, m->out, b->s_attn, PF(m, w->mlp_norm),
                                   WA(m, w->gate_proj), N, 2 * d->F, d->h, d->eps);
            be->swiglu_matmul_fwd(m->out, d->h, b->GU, WA(m, w->down_proj), N, d->h, d->F);
        } else {
            be->rmsnorm_fwd(b->y_mlp, b->rstd_mlp, b->s_mlp, m->out, b->s_attn, PF(m, w->mlp_norm), N, d->h, d->eps);
            mlp_fwd(m, l, N);
        }
    }
    if (!final_norm) return;
    if (m->params_needed) m->params_needed(m, m->lay.norm, (size_t)d->h);
    be->rmsnorm_fwd(m->y_final, m->rstd_final, m->s_final, m->out, m->blk[d->L - 1].s_mlp, PF(m, m->lay.norm), N,
                    d->h, d->eps);
}

void model_forward_state(Model *m, const int32_t *ids, int B, int T, InferState *st) {
    if (st && st->B != B) die("inference state holds %d sequences, batch has %d", st->B, B);
    check_ids(m, ids, (size_t)B * T, "input");
    ensure_acts(m, B, T);
    if (st) state_grow(m, st, T);
    m->be->memcpy_h2d(m->ids, ids, (size_t)B * T * sizeof(int32_t));
    forward_tokens(m, m->ids, B, T, st, 1);
}

// forward of st->tok, logits, argmax into st->tok: everything a decode step does on the backend
static void decode_ops(Model *m, InferState *st) {
    const Backend *be = m->be;
    const ModelDims *d = &m->d;
    if (be->lmhead_norm_argmax) { // the final norm, the lm head and the argmax as one op (one GEMV kernel on CUDA)
        forward_tokens(m, st->tok, st->B, 1, st, 0);
        if (m->params_needed) m->params_needed(m, m->lay.norm, (size_t)d->h);
        be->lmhead_norm_argmax(st->tok, st->logits, m->y_final, m->rstd_final, m->s_final, m->out,
                               m->blk[d->L - 1].s_mlp, PF(m, m->lay.norm), WA(m, m->lay.embeddings), st->B, d->h, d->V,
                               d->eps, st->ring, st->ring_count, DECODE_RING); // the token ring pushed too
    } else {
        forward_tokens(m, st->tok, st->B, 1, st, 1);
        be->lmhead_logits(st->logits, m->y_final, WA(m, m->lay.embeddings), st->B, d->h, d->V);
        be->logits_stats(st->tok, NULL, st->logits, NULL, st->B, d->V);
        be->token_ring_push(st->ring, st->ring_count, st->tok, st->B, DECODE_RING);
    }
}

// n steps of decode_ops: a replay of g where it holds n steps recorded against the current activations; else, with
// `record` and graphs available (not GDN_NO_GRAPH), g recorded first (every step's ops use the same buffers);
// else (or the capture failed: nothing ran) the ops run directly.
static void decode_run(Model *m, InferState *st, DecodeGraph *g, int n, int record) {
    const Backend *be = m->be;
    if (g->exec && (g->steps != n || g->gen != m->acts_gen)) { // the activations moved, or another n: record again
        be->graph_free(g->exec);
        g->exec = NULL;
    }
    const char *ng = getenv("GDN_NO_GRAPH");
    if (!g->exec && record && be->capture_begin && !(ng && *ng && strcmp(ng, "0")) && be->capture_begin() == 0) {
        for (int k = 0; k < n; k++) decode_ops(m, st);
        g->exec = be->capture_end();
        g->steps = n;
        g->gen = m->acts_gen;
    }
    if (g->exec) be->graph_launch(g->exec);
    else
        for (int k = 0; k < n; k++) decode_ops(m, st);
}

void model_decode_launch(Model *m, InferState *st, const int32_t *feed) {
    const Backend *be = m->be;
    int B = st->B, V = m->d.V;
    if (!st->tok) {
        st->tok = be->alloc((size_t)B * sizeof(int32_t));
        st->logits = be->alloc((size_t)B * V * sizeof(float));
        st->ring = be->alloc((size_t)DECODE_RING * B * sizeof(int32_t));
        st->ring_count = be->alloc(sizeof(int32_t));
        const int32_t zero = 0;
        be->memcpy_h2d(st->ring_count, &zero, sizeof zero);
    }
    if (feed) {
        check_ids(m, feed, (size_t)B, "decode input");
        be->memcpy_h2d(st->tok, feed, (size_t)B * sizeof(int32_t));
    } else if (!st->steps) {
        die("model_decode_step: the first step needs the tokens to feed");
    }
    ensure_acts(m, B, 1);
    state_grow(m, st, 1);
    // The first step runs directly (it also warms up the GEMM plans); the second is recorded.
    decode_run(m, st, &st->graph1, 1, st->steps > 0);
    st->steps++;
}

void model_decode_launch_n(Model *m, InferState *st, int n) {
    if (n < 1) die("model_decode_launch_n: %d steps", n);
    if (!st->steps) die("model_decode_launch_n: the first step needs the tokens to feed (model_decode_launch)");
    ensure_acts(m, st->B, 1);
    state_grow(m, st, n); // room for all n tokens before the recording (the KV caches of attention blocks)
    decode_run(m, st, n == 1 ? &st->graph1 : &st->graphn, n, 1);
    st->steps += n;
}

void model_decode_step(Model *m, InferState *st, const int32_t *feed, int32_t *argmax_out, float *logits_out) {
    model_decode_launch(m, st, feed);
    if (argmax_out) m->be->memcpy_d2h(argmax_out, st->tok, (size_t)st->B * sizeof(int32_t));
    if (logits_out) m->be->memcpy_d2h(logits_out, st->logits, (size_t)st->B * m->d.V * sizeof(float));
}

void model_decode_read(Model *m, InferState *st, int32_t *toks, int n) {
    const int B = st->B;
    if (n < 1 || n > DECODE_RING || n > st->steps)
        die("model_decode_read: %d steps asked, 1..%d available (%d steps so far, a ring of %d)", n,
            st->steps < DECODE_RING ? st->steps : DECODE_RING, st->steps, DECODE_RING);
    int32_t *ring = xmalloc((size_t)DECODE_RING * B * sizeof(int32_t));
    m->be->memcpy_d2h(ring, st->ring, (size_t)DECODE_RING * B * sizeof(int32_t)); // waits for the queued steps
    for (int j = 0; j < n; j++) {
        const int s = st->steps - n + j; // step s pushed into slot s % DECODE_RING
        memcpy(toks + (size_t)j * B, ring + (size_t)(s % DECODE_RING) * B, (size_t)B * sizeof(int32_t));
    }
    free(ring);
}

void model_token_losses(Model *m, const int32_t *targets, float *losses) {
    int N = m->B * m->T;
    m->be->memcpy_h2d(m->targets, targets, (size_t)N * sizeof(int32_t));
    m->be->lmhead_ce(m->losses, NULL, NULL, m->y_final, WA(m, m->lay.embeddings), m->targets, N, m->d.h, m->d.V, NULL,
                     m->bwd_only, m->bwd_only_bytes);
    m->be->memcpy_d2h(losses, m->losses, (size_t)N * sizeof(float));
}

void model_logits(Model *m, int row0, int nrows, float *out) {
    const int chunk = 64;
    if (!m->logits_buf) m->logits_buf = m->be->alloc((size_t)chunk * m->d.V * sizeof(float));
    float *dev = m->logits_buf;
    for (int r = 0; r < nrows; r += chunk) {
        int n = nrows - r < chunk ? nrows - r : chunk;
        m->be->lmhead_logits(dev, A(m, m->y_final, (size_t)(row0 + r) * m->d.h), WA(m, m->lay.embeddings), n, m->d.h,
                             m->d.V);
        m->be->memcpy_d2h(out + (size_t)r * m->d.V, dev, (size_t)n * m->d.V * sizeof(float));
    }
}

void model_score_rows(Model *m, const int32_t *rows, const int32_t *targets, int n, float *logprob, int32_t *argmax) {
    const int chunk = 64;
    const Backend *be = m->be;
    int V = m->d.V, h = m->d.h, N = m->B * m->T;
    if (!m->logits_buf) m->logits_buf = be->alloc((size_t)chunk * V * sizeof(float));
    if (!m->score_idx) {
        m->score_idx = be->alloc(2 * chunk * sizeof(int32_t));
        m->score_lp = be->alloc(chunk * sizeof(float));
        m->score_y = be->alloc((size_t)chunk * h * be->act_bytes);
    }
    for (int i = 0; i < n; i++) {
        if (rows[i] < 0 || rows[i] >= N) die("model_score_rows: row %d outside the last forward's %d rows", rows[i], N);
        if (targets[i] < 0 || targets[i] >= V)
            die("model_score_rows: target id %d outside the vocabulary [0, %d)", targets[i], V);
    }
    for (int i0 = 0; i0 < n; i0 += chunk) {
        int c = n - i0 < chunk ? n - i0 : chunk;
        for (int i = 0; i < c;) { // runs of consecutive rows: one copy each
            int r = rows[i0 + i], len = 1;
            while (i + len < c && rows[i0 + i + len] == r + len && r + len < N) len++;
            be->memcpy_d2d(A(m, m->score_y, (size_t)i * h), A(m, m->y_final, (size_t)r * h), (size_t)len * h * be->act_bytes);
            i += len;
        }
        be->memcpy_h2d(m->score_idx, targets + i0, (size_t)c * sizeof(int32_t));
        be->lmhead_logits(m->logits_buf, m->score_y, WA(m, m->lay.embeddings), c, h, V);
        be->logits_stats(m->score_idx + chunk, m->score_lp, m->logits_buf, m->score_idx, c, V);
        be->memcpy_d2h(logprob + i0, m->score_lp, (size_t)c * sizeof(float));
        be->memcpy_d2h(argmax + i0, m->score_idx + chunk, (size_t)c * sizeof(int32_t));
    }
}

// ---------------------------------------------------------------------------------------------------
// backward

static void mlp_bwd(Model *m, int l, int N, const void *dout) {
    const Backend *be = m->be;
    const ModelDims *d = &m->d;
    const LayerOffsets *w = &m->lay.layer[l];
    BlockActs *b = &m->blk[l];
    // dGU [N, 2F] from dout [N, h] through W_down [h, F] and SwiGLU's backward (m->dH: where dH goes if the backend
    // runs the two steps); recompute_swiglu: H = swiglu(GU) recomputed into m->dH for dW_down
    const int recompute = m->cfg.recompute_swiglu;
    be->matmul_swiglu_bwd(m->dGU, recompute ? m->dH : NULL, m->dH, dout, d->h, WA(m, w->down_proj), b->GU, N, d->F,
                          d->h);
    be->matmul_bwd(NULL, d->F, GF(m, w->down_proj), dout, d->h, recompute ? m->dH : b->Hh, d->F, NULL, N, d->h, d->F,
                   0);
    be->matmul_bwd(m->dy, d->h, GF(m, w->gate_proj), m->dGU, 2 * d->F, b->y_mlp, d->h, WA(m, w->gate_proj), N,
                   2 * d->F, d->h, 0);
}

// Everything model_fwd_bwd runs on the backend, from the ids, targets and loss scale already in backend memory
// (no host round trip: a graph can record it). The loss sum goes to scalar slot `slot`.
static void fwd_bwd_ops(Model *m, int B, int T, int slot) {
    const Backend *be = m->be;
    const ModelDims *d = &m->d;
    int N = B * T;
    forward_tokens(m, m->ids, B, T, NULL, 1);
    // loss and dy_final in one pass over the vocabulary; dE (tied) accumulates here and in embedding_bwd
    be->lmhead_ce(m->losses, m->dy, GF(m, m->lay.embeddings), m->y_final, WA(m, m->lay.embeddings), m->targets, N,
                  d->h, d->V, m->scalars + MODEL_SLOT_LOSS_SCALE, m->bwd_only, m->bwd_only_bytes);
    be->sum(m->scalars + slot, m->losses, (size_t)N);
    // ds ping-pongs between ds0/ds1: `next` holds ds_{k+1}, `cur` receives ds_k
    void *next = m->ds0, *cur = m->ds1, *tmp;
    be->rmsnorm_bwd(next, GF(m, m->lay.norm), m->dy, m->s_final, m->rstd_final, PF(m, m->lay.norm), NULL, N, d->h);
    if (m->grad_ready) m->grad_ready(m, m->lay.norm, (size_t)d->h);
    for (int l = d->L - 1; l >= 0; l--) {
        BlockActs *b = &m->blk[l];
        const LayerOffsets *w = &m->lay.layer[l];
        mlp_bwd(m, l, N, next);
        be->rmsnorm_bwd(cur, GF(m, w->mlp_norm), m->dy, b->s_mlp, b->rstd_mlp, PF(m, w->mlp_norm), next, N, d->h);
        tmp = next; next = cur; cur = tmp;
        kind_of(m, l)->bwd(m, l, B, T, next);
        be->rmsnorm_bwd(cur, GF(m, w->attn_norm), m->dy, b->s_attn, b->rstd_attn, PF(m, w->attn_norm), next, N, d->h);
        tmp = next; next = cur; cur = tmp;
        if (m->grad_ready) {
            size_t off, n;
            layer_range(&m->lay, l, &off, &n);
            m->grad_ready(m, off, n);
        }
    }
    be->embedding_bwd(GF(m, m->lay.embeddings), next, m->ids, N, d->h, d->V);
    if (m->grad_ready) m->grad_ready(m, m->lay.embeddings, (size_t)d->V * d->h); // tied: final only now
}

void model_fwd_bwd(Model *m, const int32_t *ids, const int32_t *targets, int B, int T, float loss_scale, int slot) {
    if (!m->training) die("model_fwd_bwd on a model created for inference");
    if (slot < 0 || slot >= 32) die("loss slot %d out of range", slot);
    const Backend *be = m->be;
    const ModelDims *d = &m->d;
    int N = B * T;
    for (int i = 0; i < N; i++)
        if (targets[i] >= d->V) die("label id %d at position %d is outside the vocabulary [0, %d)", targets[i], i, d->V);
    check_ids(m, ids, (size_t)N, "input");
    ensure_acts(m, B, T);
    // memcpy_h2d is ordered after the ops before it (a replayed graph still reading the last batch included)
    be->memcpy_h2d(m->ids, ids, (size_t)N * sizeof(int32_t));
    be->memcpy_h2d(m->targets, targets, (size_t)N * sizeof(int32_t));
    be->memcpy_h2d(m->scalars + MODEL_SLOT_LOSS_SCALE, &loss_scale, sizeof loss_scale);
    const int graphs = m->cfg.enable_cuda_graph && be->capture_begin && !m->grad_ready && !m->params_needed;
    if (!graphs) {
        fwd_bwd_ops(m, B, T, slot);
        return;
    }
    if (m->step_graph_B != B || m->step_graph_T != T || (m->step_graph && m->step_graph_gen != m->acts_gen)) {
        step_graph_drop(m); // another shape, or the activations moved: record anew
        m->step_graph_B = B, m->step_graph_T = T;
    }
    if (!m->step_graph && m->step_graph_calls++ >= 1 && be->capture_begin() == 0) {
        // the first call at a shape runs directly (GEMM plans, scratch sizes); the second is recorded
        fwd_bwd_ops(m, B, T, MODEL_SLOT_GRAPH_LOSS);
        m->step_graph = be->capture_end();
        m->step_graph_gen = m->acts_gen;
        if (!m->step_graph) { // the capture failed, so nothing ran: run the ops, and stop trying at this shape
            fwd_bwd_ops(m, B, T, slot);
            m->step_graph_calls = INT_MIN / 2; // (counts up from here: never 1 again)
            return;
        }
    }
    if (!m->step_graph) {
        fwd_bwd_ops(m, B, T, slot);
        return;
    }
    be->graph_launch(m->step_graph);
    be->memcpy_d2d(m->scalars + slot, m->scalars + MODEL_SLOT_GRAPH_LOSS, sizeof(float));
}

double model_read_loss_slots(Model *m, int nslots) {
    float h[32];
    m->be->memcpy_d2h(h, m->scalars, (size_t)nslots * sizeof(float));
    double s = 0;
    for (int i = 0; i < nslots; i++) s += h[i];
    return s;
}

void model_clip_grads(Model *m, float max_norm) {
    m->be->sumsq(m->scalars + MODEL_SLOT_SUMSQ, m->grads, m->lay.total);
    m->be->clip_scale(m->scalars + MODEL_SLOT_GSCALE, m->scalars + MODEL_SLOT_SUMSQ, max_norm);
}

double model_read_grad_norm(Model *m) {
    float h;
    m->be->memcpy_d2h(&h, m->scalars + MODEL_SLOT_SUMSQ, sizeof h);
    return sqrt((double)h);
}

void model_set_grad_scale(Model *m, float gscale) {
    m->be->memcpy_h2d(m->scalars + MODEL_SLOT_GSCALE, &gscale, sizeof gscale);
}

void model_adamw(Model *m, float lr, int step) {
    const Config *c = &m->cfg;
    if (!m->adam_rem) need_masters(m, "model_adamw");
    if (!m->adam_plan.dev) { // once (the layout is contiguous)
        if (m->adam_rem) {
            model_lp_plan(m); // tensor by tensor: the masters in small, or in wact + the remainders
        } else { // runs of adjacent tensors with the same weight decay
            for (int i = 0; i < m->lay.ntensors;) {
                const TensorInfo *t = &m->lay.tensors[i];
                size_t n = t->numel;
                int j = i + 1;
                while (j < m->lay.ntensors && m->lay.tensors[j].decay == t->decay &&
                       m->lay.tensors[j].off == t->off + n)
                    n += m->lay.tensors[j++].numel;
                adamw_plan_add(&m->adam_plan, t->off, t->off, t->off, n, t->decay);
                i = j;
            }
        }
        adamw_plan_upload(&m->adam_plan, m->be);
    }
    float *p = m->adam_rem ? m->small : m->params;
    void *pa = m->wact == (void *)m->params ? NULL : m->wact;
    if (m->adam_pa) // the state in lower precision (model/optim_lp.c)
        m->be->adamw_multi_lp(m->adam_plan.dev, m->adam_plan.n, p, m->adam_rem, pa, m->grads, m->adam_m, m->adam_v,
                              m->adam_lp, lr, c->adam_beta1, c->adam_beta2, c->adam_eps, c->weight_decay, step,
                              m->scalars + MODEL_SLOT_GSCALE);
    else
        m->be->adamw_multi(m->adam_plan.dev, m->adam_plan.n, p, pa, m->grads, m->adam_m, m->adam_v, lr, c->adam_beta1,
                           c->adam_beta2, c->adam_eps, c->weight_decay, step, m->scalars + MODEL_SLOT_GSCALE);
}
