// gdn.c: the model graph. Forward, backward and AdamW over the backend op table (backend.h).
//
// The residual stream is a chain of norm sites k = 0..2L: s_0 = embeddings, s_{k+1} = s_k + out_k where
// out_k is sublayer k's output (GDN mixer for even k, SwiGLU MLP for odd k), and y_k = RMSNorm_k(s_k)
// feeds sublayer k. The add is fused into the next norm (FLA fuse_norm): rmsnorm_fwd(x=out_k, resid=s_k).
// y_2L (final norm) feeds the tied lm head. Backward walks the chain in reverse with ds_k =
// RMSNorm_k'(dy_k) + ds_{k+1}.
#include "gdn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../cpu/cpu_ops.h"
#include "../util/common.h"

#define NCHUNK 64

// act-dtype pointer arithmetic: element offset into an act buffer
static inline void *A(const Model *m, const void *p, size_t elems) {
    return (char *)p + elems * (size_t)m->be->act_bytes;
}
static inline float *PF(const Model *m, size_t off) { return m->params + off; }
static inline float *GF(const Model *m, size_t off) { return m->grads + off; }
static inline void *WA(const Model *m, size_t off) { return A(m, m->wact, off); }

// fused column layout of P = in_proj output and C = conv output
typedef struct { int Dp, Dc, q, k, v, g, b, a; } ProjCols;
static ProjCols proj_cols(const ModelDims *d) {
    ProjCols c;
    c.q = 0; c.k = d->Kd; c.v = 2 * d->Kd; c.g = 2 * d->Kd + d->Vd; c.b = c.g + d->Vd; c.a = c.b + d->HV;
    c.Dp = c.a + d->HV;
    c.Dc = 2 * d->Kd + d->Vd;
    return c;
}

Model *model_create(const Config *cfg, const Backend *be, int training) {
    char err[ERR_LEN];
    if (config_validate(cfg, err, sizeof err)) die("%s", err);
    Model *m = xcalloc(1, sizeof *m);
    m->cfg = *cfg;
    m->d = config_dims(cfg);
    m->ops = *be;
    m->be = &m->ops;
    if (!strcmp(cfg->delta_rule, "recurrent")) {
        if (strcmp(be->name, "cpu")) die("delta_rule=recurrent is the CPU reference form; use chunk on %s", be->name);
        m->ops.delta_rule_fwd = cpu_delta_rule_recurrent_fwd;
        m->ops.delta_rule_bwd = cpu_delta_rule_recurrent_bwd;
    }
    m->training = training;
    if (m->d.n_attn && !(be->attn_qkv_fwd && be->attn_qkv_bwd && be->attn_fwd && be->attn_bwd && be->pos_advance))
        die("the %s backend has no softmax-attention kernels yet: hybrid models (attn_layers %s) run on --device cpu",
            be->name, cfg->attn_layers);
    params_layout(&m->lay, &m->d);
    size_t n = m->lay.total;
    m->params = be->alloc(n * sizeof(float));
    m->wact = be->act_bytes == 4 ? (void *)m->params : be->alloc(n * (size_t)be->act_bytes);
    if (training) {
        m->grads = be->alloc(n * sizeof(float));
        m->adam_m = be->alloc(n * sizeof(float));
        m->adam_v = be->alloc(n * sizeof(float));
    }
    m->scalars = be->alloc(64 * sizeof(float));
    return m;
}

static void free_acts(Model *m) {
    const Backend *be = m->be;
    if (!m->blk) return;
    for (int l = 0; l < m->d.L; l++) {
        BlockActs *b = &m->blk[l];
        if (!m->training && l > 0) { // aliases of block 0, plus the shared stream buffer freed once
            if (l == 1) be->free(b->s_attn);
            continue;
        }
        void *ps[] = {b->s_attn, b->y_attn, b->rstd_attn, b->P, b->C, b->QK, b->qk_rstd, b->beta, b->gamma,
                      b->h_save, b->o, b->on, b->on_rstd, b->s_mlp, b->y_mlp, b->rstd_mlp, b->GU, b->Hh,
                      b->aQ, b->aK, b->aV, b->aO, b->lse};
        for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
            if (ps[i] && ps[i] != m->emb) be->free(ps[i]);
    }
    free(m->blk);
    m->blk = NULL;
    void *gs[] = {m->ids, m->targets, m->emb, m->s_final, m->y_final, m->rstd_final, m->out, m->losses, m->dy,
                  m->ds0, m->ds1, m->dP, m->dC, m->dQK, m->do_, m->don, m->dGU, m->dH, m->dbeta, m->dgamma,
                  m->daQ, m->daK, m->daV, m->daO};
    for (size_t i = 0; i < sizeof gs / sizeof gs[0]; i++)
        if (gs[i]) be->free(gs[i]);
    m->B = m->T = 0;
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
    const Backend *be = m->be;
    const ModelDims *d = &m->d;
    ProjCols c = proj_cols(d);
    size_t N = (size_t)B * T, ab = (size_t)be->act_bytes, NT = (size_t)(T + NCHUNK - 1) / NCHUNK;
    // which kinds of block the buffers serve: inference shares block 0's among all blocks
    int any_gdn = d->n_attn < d->L, any_attn = d->n_attn > 0, Dqkv = d->Dq + 2 * d->Dkv;
    int Dp = any_attn && Dqkv > c.Dp ? Dqkv : c.Dp;
#define ACT(n) be->alloc((size_t)(n) * ab)
#define F32(n) be->alloc((size_t)(n) * sizeof(float))
    m->B = B; m->T = T; m->cap_N = N;
    m->ids = be->alloc(N * sizeof(int32_t));
    m->targets = be->alloc(N * sizeof(int32_t));
    m->emb = ACT(N * d->h);
    m->blk = xcalloc((size_t)d->L, sizeof *m->blk);
    // Training keeps every block's activations for backward. Inference shares block 0's buffers across
    // blocks; only the residual stream needs two buffers (into attn norm, into mlp norm) that alternate.
    for (int l = 0; l < d->L; l++) {
        BlockActs *b = &m->blk[l];
        if (!m->training && l > 0) {
            *b = m->blk[0];
            continue;
        }
        b->s_attn = (l == 0) ? m->emb : ACT(N * d->h);
        b->y_attn = ACT(N * d->h); b->rstd_attn = F32(N);
        int gdn = m->training ? !d->is_attn[l] : any_gdn, att = m->training ? d->is_attn[l] : any_attn;
        b->P = ACT(N * (gdn ? Dp : Dqkv));
        if (gdn) {
            b->C = ACT(N * c.Dc); b->QK = ACT(N * 2 * d->Kd); b->qk_rstd = F32(N * 2 * d->H);
            b->beta = F32(N * d->HV); b->gamma = F32(N * d->HV);
            b->h_save = m->training ? ACT((size_t)B * d->HV * NT * d->dk * d->dv) : NULL;
            b->o = ACT(N * d->Vd); b->on = ACT(N * d->Vd); b->on_rstd = F32(N * d->HV);
        }
        if (att) {
            b->aQ = ACT(N * d->Dq); b->aK = ACT(N * d->Dkv); b->aV = ACT(N * d->Dkv); b->aO = ACT(N * d->Dq);
            b->lse = m->training ? F32(N * d->Ha) : NULL;
        }
        b->s_mlp = ACT(N * d->h); b->y_mlp = ACT(N * d->h); b->rstd_mlp = F32(N);
        b->GU = ACT(N * 2 * d->F); b->Hh = ACT(N * d->F);
    }
    if (!m->training && d->L > 1) {
        void *sA = ACT(N * d->h);
        for (int l = 1; l < d->L; l++) m->blk[l].s_attn = sA;
    }
    m->s_final = ACT(N * d->h); m->y_final = ACT(N * d->h); m->rstd_final = F32(N);
    m->out = ACT(N * d->h);
    m->losses = F32(N);
    if (m->training) {
        m->dy = ACT(N * d->h); m->ds0 = ACT(N * d->h); m->ds1 = ACT(N * d->h);
        m->dP = ACT(N * Dp); m->dGU = ACT(N * 2 * d->F); m->dH = ACT(N * d->F);
        if (any_gdn) {
            m->dC = ACT(N * c.Dc); m->dQK = ACT(N * 2 * d->Kd);
            m->do_ = ACT(N * d->Vd); m->don = ACT(N * d->Vd);
            m->dbeta = F32(N * d->HV); m->dgamma = F32(N * d->HV);
        }
        if (any_attn) { m->daQ = ACT(N * d->Dq); m->daK = ACT(N * d->Dkv); m->daV = ACT(N * d->Dkv); m->daO = ACT(N * d->Dq); }
    }
#undef ACT
#undef F32
}

void model_free(Model *m) {
    if (!m) return;
    free_acts(m);
    const Backend *be = m->be;
    if (m->wact != (void *)m->params) be->free(m->wact);
    be->free(m->params);
    if (m->grads) { be->free(m->grads); be->free(m->adam_m); be->free(m->adam_v); }
    be->free(m->scalars);
    if (m->logits_buf) be->free(m->logits_buf);
    if (m->score_idx) { be->free(m->score_idx); be->free(m->score_lp); be->free(m->score_y); }
    params_layout_free(&m->lay);
    free(m);
}

void model_set_params(Model *m, const float *host) {
    m->be->memcpy_h2d(m->params, host, m->lay.total * sizeof(float));
    if (m->wact != (void *)m->params) m->be->to_act(m->wact, m->params, m->lay.total);
}
void model_get_params(Model *m, float *host) { m->be->memcpy_d2h(host, m->params, m->lay.total * sizeof(float)); }
void model_set_optim(Model *m, const float *hm, const float *hv) {
    m->be->memcpy_h2d(m->adam_m, hm, m->lay.total * sizeof(float));
    m->be->memcpy_h2d(m->adam_v, hv, m->lay.total * sizeof(float));
}
void model_get_optim(Model *m, float *hm, float *hv) {
    m->be->memcpy_d2h(hm, m->adam_m, m->lay.total * sizeof(float));
    m->be->memcpy_d2h(hv, m->adam_v, m->lay.total * sizeof(float));
}
void model_get_grads(Model *m, float *host) { m->be->memcpy_d2h(host, m->grads, m->lay.total * sizeof(float)); }
void model_zero_grads(Model *m) { m->be->memset0(m->grads, m->lay.total * sizeof(float)); }

static void check_ids(const Model *m, const int32_t *ids, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->d.V)
            die("%s: token id %d at position %zu is outside the vocabulary [0, %d)", what, ids[i], i, m->d.V);
}

// ---------------------------------------------------------------------------------------------------
// forward

static void gdn_mixer_fwd(Model *m, int l, int B, int T, InferState *st) {
    const Backend *be = m->be;
    const ModelDims *d = &m->d;
    const LayerOffsets *w = &m->lay.layer[l];
    BlockActs *b = &m->blk[l];
    ProjCols c = proj_cols(d);
    int N = B * T;
    // [q|k|v|g|b|a] = y . W_in^T, one GEMM over the contiguous q..a_proj rows
    be->matmul_fwd(b->P, c.Dp, b->y_attn, d->h, WA(m, w->q_proj), N, c.Dp, d->h, 0);
    // causal depthwise conv + SiLU over the q|k|v columns (conv weights q|k|v are contiguous too)
    float *cs = st ? st->conv[l] : NULL;
    be->conv_silu_fwd(b->C, c.Dc, b->P, c.Dp, PF(m, w->q_conv1d), cs, cs, B, T, c.Dc, d->K);
    // L2 norm of each q and k head vector (2H vectors of dk per token)
    be->l2norm_fwd(b->QK, 2 * d->Kd, b->qk_rstd, b->C, c.Dc, N, 2 * d->H, d->dk);
    be->gate_fwd(b->beta, b->gamma, A(m, b->P, c.b), A(m, b->P, c.a), c.Dp, PF(m, w->A_log), PF(m, w->dt_bias), N,
                 d->HV);
    be->delta_rule_fwd(b->o, d->Vd, b->h_save, st ? st->S[l] : NULL, b->QK, A(m, b->QK, d->Kd), 2 * d->Kd, A(m, b->C, c.v), c.Dc,
                       b->beta, b->gamma, B, T, d->H, d->HV, d->dk, d->dv, 1.0f / sqrtf((float)d->dk));
    be->gated_rmsnorm_fwd(b->on, d->Vd, b->on_rstd, b->o, d->Vd, A(m, b->P, c.g), c.Dp, PF(m, w->o_norm), N, d->HV,
                          d->dv, d->eps);
    be->matmul_fwd(m->out, d->h, b->on, d->Vd, WA(m, w->o_proj), N, d->h, d->Vd, 0);
}

// Softmax-attention mixer of a hybrid (spec hybrid.md §2.1): [q|k|v] = y . W^T (+b), RoPE, causal GQA
// attention, o_proj. With a state, k and v go to the KV cache at the tokens-seen position.
static void attn_mixer_fwd(Model *m, int l, int B, int T, InferState *st) {
    const Backend *be = m->be;
    const ModelDims *d = &m->d;
    const LayerOffsets *w = &m->lay.layer[l];
    BlockActs *b = &m->blk[l];
    int N = B * T, Dqkv = d->Dq + 2 * d->Dkv;
    be->matmul_fwd(b->P, Dqkv, b->y_attn, d->h, WA(m, w->q_proj), N, Dqkv, d->h, 0);
    void *K = st ? st->kc[l] : b->aK, *V = st ? st->vc[l] : b->aV;
    int kvs = st ? st->cap : T;
    const int32_t *pos = st ? st->pos : NULL;
    be->attn_qkv_fwd(b->aQ, K, V, kvs, b->P, Dqkv, d->qkv_bias ? PF(m, w->q_bias) : NULL, pos, B, T, d->Ha, d->Hkv,
                     d->da, d->rope_theta);
    be->attn_fwd(b->aO, m->training ? b->lse : NULL, b->aQ, K, V, kvs, pos, B, T, d->Ha, d->Hkv, d->da, d->window,
                 1.0f / sqrtf((float)d->da));
    be->matmul_fwd(m->out, d->h, b->aO, d->Dq, WA(m, w->o_proj), N, d->h, d->Dq, 0);
}

static void mlp_fwd(Model *m, int l, int N) {
    const Backend *be = m->be;
    const ModelDims *d = &m->d;
    const LayerOffsets *w = &m->lay.layer[l];
    BlockActs *b = &m->blk[l];
    be->matmul_fwd(b->GU, 2 * d->F, b->y_mlp, d->h, WA(m, w->gate_proj), N, 2 * d->F, d->h, 0);
    be->swiglu_fwd(b->Hh, b->GU, N, d->F);
    be->matmul_fwd(m->out, d->h, b->Hh, d->F, WA(m, w->down_proj), N, d->h, d->F, 0);
}

void model_forward(Model *m, const int32_t *ids, int B, int T) { model_forward_state(m, ids, B, T, NULL); }

InferState *infer_state_new(Model *m, int B) {
    InferState *st = xcalloc(1, sizeof *st);
    st->B = B;
    st->conv = xcalloc((size_t)m->d.L, sizeof *st->conv);
    st->S = xcalloc((size_t)m->d.L, sizeof *st->S);
    st->kc = xcalloc((size_t)m->d.L, sizeof *st->kc);
    st->vc = xcalloc((size_t)m->d.L, sizeof *st->vc);
    st->pos = m->be->alloc(sizeof(int32_t));
    ProjCols c = proj_cols(&m->d);
    for (int l = 0; l < m->d.L; l++) {
        if (m->d.is_attn[l]) continue; // KV caches: allocated by kv_reserve
        st->conv[l] = m->be->alloc((size_t)B * c.Dc * (m->d.K - 1) * sizeof(float));
        st->S[l] = m->be->alloc((size_t)B * m->d.HV * m->d.dk * m->d.dv * sizeof(float));
    }
    return st;
}
void infer_state_reset(Model *m, InferState *st) {
    ProjCols c = proj_cols(&m->d);
    m->be->memset0(st->pos, sizeof(int32_t)); // the KV caches' old rows are simply not read again
    st->len = 0;
    for (int l = 0; l < m->d.L; l++) {
        if (m->d.is_attn[l]) continue;
        m->be->memset0(st->conv[l], (size_t)st->B * c.Dc * (m->d.K - 1) * sizeof(float));
        m->be->memset0(st->S[l], (size_t)st->B * m->d.HV * m->d.dk * m->d.dv * sizeof(float));
    }
}
void infer_state_free(Model *m, InferState *st) {
    if (!st) return;
    if (st->graph) m->be->graph_free(st->graph);
    if (st->tok) { m->be->free(st->tok); m->be->free(st->logits); }
    for (int l = 0; l < m->d.L; l++) {
        if (st->conv[l]) { m->be->free(st->conv[l]); m->be->free(st->S[l]); }
        if (st->kc[l]) { m->be->free(st->kc[l]); m->be->free(st->vc[l]); }
    }
    m->be->free(st->pos);
    free(st->conv); free(st->S); free(st->kc); free(st->vc); free(st);
}

// Room in the KV caches for T more tokens per sequence: the capacity doubles (rows copied over), which
// moves the caches, so a recorded decode graph is dropped and recorded again.
static void kv_reserve(Model *m, InferState *st, int T) {
    if (!m->d.n_attn || st->len + T <= st->cap) return;
    const Backend *be = m->be;
    int cap = st->cap ? st->cap : 256;
    while (cap < st->len + T) cap *= 2;
    size_t row = (size_t)m->d.Dkv * be->act_bytes;
    for (int l = 0; l < m->d.L; l++) {
        if (!m->d.is_attn[l]) continue;
        void **c[2] = {&st->kc[l], &st->vc[l]};
        for (int i = 0; i < 2; i++) {
            void *n = be->alloc((size_t)st->B * cap * row);
            for (int b = 0; b < st->B && *c[i]; b++)
                be->memcpy_d2d((char *)n + (size_t)b * cap * row, (char *)*c[i] + (size_t)b * st->cap * row,
                               (size_t)st->len * row);
            if (*c[i]) be->free(*c[i]);
            *c[i] = n;
        }
    }
    st->cap = cap;
    if (st->graph) {
        be->graph_free(st->graph);
        st->graph = NULL;
    }
}

// The forward from token ids already in backend memory (no host round trip: a decode graph records it).
static void forward_tokens(Model *m, const int32_t *ids_dev, int B, int T, InferState *st) {
    const Backend *be = m->be;
    const ModelDims *d = &m->d;
    int N = B * T;
    be->embedding_fwd(m->emb, ids_dev, WA(m, m->lay.embeddings), N, d->h);
    for (int l = 0; l < d->L; l++) {
        BlockActs *b = &m->blk[l];
        const LayerOffsets *w = &m->lay.layer[l];
        if (l == 0)
            be->rmsnorm_fwd(b->y_attn, b->rstd_attn, NULL, m->emb, NULL, PF(m, w->attn_norm), N, d->h, d->eps);
        else // s = previous MLP output + previous block's s_mlp
            be->rmsnorm_fwd(b->y_attn, b->rstd_attn, b->s_attn, m->out, m->blk[l - 1].s_mlp, PF(m, w->attn_norm), N,
                            d->h, d->eps);
        if (d->is_attn[l]) attn_mixer_fwd(m, l, B, T, st);
        else gdn_mixer_fwd(m, l, B, T, st);
        be->rmsnorm_fwd(b->y_mlp, b->rstd_mlp, b->s_mlp, m->out, b->s_attn, PF(m, w->mlp_norm), N, d->h, d->eps);
        mlp_fwd(m, l, N);
    }
    be->rmsnorm_fwd(m->y_final, m->rstd_final, m->s_final, m->out, m->blk[d->L - 1].s_mlp, PF(m, m->lay.norm), N,
                    d->h, d->eps);
    if (st && d->n_attn) be->pos_advance(st->pos, T); // on the stream, so a recorded step advances it too
}

void model_forward_state(Model *m, const int32_t *ids, int B, int T, InferState *st) {
    if (st && st->B != B) die("inference state holds %d sequences, batch has %d", st->B, B);
    check_ids(m, ids, (size_t)B * T, "input");
    ensure_acts(m, B, T);
    if (st) kv_reserve(m, st, T);
    m->be->memcpy_h2d(m->ids, ids, (size_t)B * T * sizeof(int32_t));
    forward_tokens(m, m->ids, B, T, st);
    if (st) st->len += T;
}

// forward of st->tok, logits, argmax into st->tok: everything a decode step does on the backend
static void decode_ops(Model *m, InferState *st) {
    forward_tokens(m, st->tok, st->B, 1, st);
    m->be->lmhead_logits(st->logits, m->y_final, WA(m, m->lay.embeddings), st->B, m->d.h, m->d.V);
    m->be->logits_stats(st->tok, NULL, st->logits, NULL, st->B, m->d.V);
}

void model_decode_step(Model *m, InferState *st, const int32_t *feed, int32_t *argmax_out, float *logits_out) {
    const Backend *be = m->be;
    int B = st->B, V = m->d.V;
    if (!st->tok) {
        st->tok = be->alloc((size_t)B * sizeof(int32_t));
        st->logits = be->alloc((size_t)B * V * sizeof(float));
    }
    if (feed) {
        check_ids(m, feed, (size_t)B, "decode input");
        be->memcpy_h2d(st->tok, feed, (size_t)B * sizeof(int32_t));
    } else if (!st->steps) {
        die("model_decode_step: the first step needs the tokens to feed");
    }
    ensure_acts(m, B, 1);
    kv_reserve(m, st, 1);
    if (st->graph && st->graph_gen != m->acts_gen) { // the activations moved: record again
        be->graph_free(st->graph);
        st->graph = NULL;
    }
    if (st->graph) {
        be->graph_launch(st->graph);
    } else {
        // The first step runs directly (it also warms up the GEMM plans); the second is recorded.
        const char *ng = getenv("GDN_NO_GRAPH");
        int capture = st->steps > 0 && be->capture_begin && !(ng && *ng && strcmp(ng, "0")) && be->capture_begin() == 0;
        decode_ops(m, st);
        if (capture) {
            st->graph = be->capture_end();
            st->graph_gen = m->acts_gen;
            if (st->graph) be->graph_launch(st->graph);
            else decode_ops(m, st); // the capture failed: nothing ran, so run the ops directly
        }
    }
    st->steps++;
    st->len++;
    if (argmax_out) be->memcpy_d2h(argmax_out, st->tok, (size_t)B * sizeof(int32_t));
    if (logits_out) be->memcpy_d2h(logits_out, st->logits, (size_t)B * V * sizeof(float));
}

void model_token_losses(Model *m, const int32_t *targets, float *losses) {
    int N = m->B * m->T;
    m->be->memcpy_h2d(m->targets, targets, (size_t)N * sizeof(int32_t));
    m->be->lmhead_ce(m->losses, NULL, NULL, m->y_final, WA(m, m->lay.embeddings), m->targets, N, m->d.h, m->d.V, 1.0f);
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

// dout: gradient of the mixer output [N,h]; leaves dy_attn in m->dy.
static void gdn_mixer_bwd(Model *m, int l, int B, int T, const void *dout) {
    const Backend *be = m->be;
    const ModelDims *d = &m->d;
    const LayerOffsets *w = &m->lay.layer[l];
    BlockActs *b = &m->blk[l];
    ProjCols c = proj_cols(d);
    int N = B * T;
    be->matmul_bwd(m->don, d->Vd, GF(m, w->o_proj), dout, d->h, b->on, d->Vd, WA(m, w->o_proj), N, d->h, d->Vd, 0);
    be->gated_rmsnorm_bwd(m->do_, d->Vd, A(m, m->dP, c.g), c.Dp, GF(m, w->o_norm), m->don, d->Vd, b->o, d->Vd,
                          A(m, b->P, c.g), c.Dp, b->on_rstd, PF(m, w->o_norm), N, d->HV, d->dv);
    be->delta_rule_bwd(m->dQK, A(m, m->dQK, d->Kd), 2 * d->Kd, A(m, m->dC, c.v), c.Dc, m->dbeta, m->dgamma, m->do_,
                       d->Vd, b->h_save, b->QK, A(m, b->QK, d->Kd), 2 * d->Kd, A(m, b->C, c.v), c.Dc, b->beta,
                       b->gamma, B, T, d->H, d->HV, d->dk, d->dv, 1.0f / sqrtf((float)d->dk));
    be->l2norm_bwd(m->dC, c.Dc, m->dQK, 2 * d->Kd, b->QK, 2 * d->Kd, b->qk_rstd, N, 2 * d->H, d->dk);
    be->gate_bwd(A(m, m->dP, c.b), A(m, m->dP, c.a), c.Dp, GF(m, w->A_log), GF(m, w->dt_bias), m->dbeta, m->dgamma,
                 A(m, b->P, c.b), A(m, b->P, c.a), PF(m, w->A_log), PF(m, w->dt_bias), N, d->HV);
    be->conv_silu_bwd(m->dP, c.Dp, GF(m, w->q_conv1d), m->dC, c.Dc, b->P, c.Dp, PF(m, w->q_conv1d), B, T, c.Dc, d->K);
    be->matmul_bwd(m->dy, d->h, GF(m, w->q_proj), m->dP, c.Dp, b->y_attn, d->h, WA(m, w->q_proj), N, c.Dp, d->h, 0);
}

// dout: gradient of the attention mixer output [N,h]; leaves dy_attn in m->dy.
static void attn_mixer_bwd(Model *m, int l, int B, int T, const void *dout) {
    const Backend *be = m->be;
    const ModelDims *d = &m->d;
    const LayerOffsets *w = &m->lay.layer[l];
    BlockActs *b = &m->blk[l];
    int N = B * T, Dqkv = d->Dq + 2 * d->Dkv;
    be->matmul_bwd(m->daO, d->Dq, GF(m, w->o_proj), dout, d->h, b->aO, d->Dq, WA(m, w->o_proj), N, d->h, d->Dq, 0);
    be->attn_bwd(m->daQ, m->daK, m->daV, m->daO, b->aQ, b->aK, b->aV, b->aO, b->lse, B, T, d->Ha, d->Hkv, d->da,
                 d->window, 1.0f / sqrtf((float)d->da));
    be->attn_qkv_bwd(m->dP, Dqkv, d->qkv_bias ? GF(m, w->q_bias) : NULL, m->daQ, m->daK, m->daV, B, T, d->Ha, d->Hkv,
                     d->da, d->rope_theta);
    be->matmul_bwd(m->dy, d->h, GF(m, w->q_proj), m->dP, Dqkv, b->y_attn, d->h, WA(m, w->q_proj), N, Dqkv, d->h, 0);
}

static void mlp_bwd(Model *m, int l, int N, const void *dout) {
    const Backend *be = m->be;
    const ModelDims *d = &m->d;
    const LayerOffsets *w = &m->lay.layer[l];
    BlockActs *b = &m->blk[l];
    be->matmul_bwd(m->dH, d->F, GF(m, w->down_proj), dout, d->h, b->Hh, d->F, WA(m, w->down_proj), N, d->h, d->F, 0);
    be->swiglu_bwd(m->dGU, m->dH, b->GU, N, d->F);
    be->matmul_bwd(m->dy, d->h, GF(m, w->gate_proj), m->dGU, 2 * d->F, b->y_mlp, d->h, WA(m, w->gate_proj), N,
                   2 * d->F, d->h, 0);
}

void model_fwd_bwd(Model *m, const int32_t *ids, const int32_t *targets, int B, int T, float loss_scale, int slot) {
    if (!m->training) die("model_fwd_bwd on a model created for inference");
    if (slot < 0 || slot >= 32) die("loss slot %d out of range", slot);
    const Backend *be = m->be;
    const ModelDims *d = &m->d;
    int N = B * T;
    for (int i = 0; i < N; i++)
        if (targets[i] >= d->V) die("label id %d at position %d is outside the vocabulary [0, %d)", targets[i], i, d->V);
    model_forward(m, ids, B, T);
    be->memcpy_h2d(m->targets, targets, (size_t)N * sizeof(int32_t));
    // loss and dy_final in one pass over the vocabulary; dE (tied) accumulates here and in embedding_bwd
    be->lmhead_ce(m->losses, m->dy, GF(m, m->lay.embeddings), m->y_final, WA(m, m->lay.embeddings), m->targets, N,
                  d->h, d->V, loss_scale);
    be->sum(m->scalars + slot, m->losses, (size_t)N);
    // ds ping-pongs between ds0/ds1: `next` holds ds_{k+1}, `cur` receives ds_k
    void *next = m->ds0, *cur = m->ds1, *tmp;
    be->rmsnorm_bwd(next, GF(m, m->lay.norm), m->dy, m->s_final, m->rstd_final, PF(m, m->lay.norm), NULL, N, d->h);
    for (int l = d->L - 1; l >= 0; l--) {
        BlockActs *b = &m->blk[l];
        const LayerOffsets *w = &m->lay.layer[l];
        mlp_bwd(m, l, N, next);
        be->rmsnorm_bwd(cur, GF(m, w->mlp_norm), m->dy, b->s_mlp, b->rstd_mlp, PF(m, w->mlp_norm), next, N, d->h);
        tmp = next; next = cur; cur = tmp;
        if (d->is_attn[l]) attn_mixer_bwd(m, l, B, T, next);
        else gdn_mixer_bwd(m, l, B, T, next);
        be->rmsnorm_bwd(cur, GF(m, w->attn_norm), m->dy, b->s_attn, b->rstd_attn, PF(m, w->attn_norm), next, N, d->h);
        tmp = next; next = cur; cur = tmp;
    }
    be->embedding_bwd(GF(m, m->lay.embeddings), next, m->ids, N, d->h, d->V);
}

double model_read_loss_slots(Model *m, int nslots) {
    float h[32];
    m->be->memcpy_d2h(h, m->scalars, (size_t)nslots * sizeof(float));
    double s = 0;
    for (int i = 0; i < nslots; i++) s += h[i];
    return s;
}

double model_grad_norm(Model *m) {
    float h;
    m->be->sumsq(m->scalars + 32, m->grads, m->lay.total);
    m->be->memcpy_d2h(&h, m->scalars + 32, sizeof h);
    return sqrt((double)h);
}

void model_adamw(Model *m, float lr, int step, float gscale) {
    const Config *c = &m->cfg;
    // AdamW is elementwise: one call per run of adjacent tensors with the same weight decay (the layout is
    // contiguous), ~6 per layer instead of one per tensor
    for (int i = 0; i < m->lay.ntensors;) {
        const TensorInfo *t = &m->lay.tensors[i];
        size_t n = t->numel;
        int j = i + 1;
        while (j < m->lay.ntensors && m->lay.tensors[j].decay == t->decay && m->lay.tensors[j].off == t->off + n)
            n += m->lay.tensors[j++].numel;
        void *pa = m->wact == (void *)m->params ? NULL : WA(m, t->off);
        m->be->adamw(m->params + t->off, pa, m->grads + t->off, m->adam_m + t->off, m->adam_v + t->off, n, lr,
                     c->adam_beta1, c->adam_beta2, c->adam_eps, t->decay ? c->weight_decay : 0.0f, step, gscale);
        i = j;
    }
}
