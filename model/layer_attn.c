// layer_attn.c: a hybrid's softmax-attention mixer (FLA Attention, spec hybrid.md §2.1), layer kind
// LAYER_ATTN: [q|k|v] = y . W^T (+b), RoPE, causal GQA attention (optional window), o_proj; its backward,
// and its decode state, a KV cache of RoPE'd keys and values at the tokens-seen position.
#include <math.h>

#include "layer.h"

static int qkv_cols(const ModelDims *d) { return d->Dq + 2 * d->Dkv; }

static void acts_alloc(Model *m, int l, int B, int T, int share) {
    AttnActs *a = &m->blk[l].attn;
    if (share >= 0) { // inference: every attention block runs on the same per-row buffers
        *a = m->blk[share].attn;
        return;
    }
    const ModelDims *d = &m->d;
    size_t N = (size_t)B * T, ab = (size_t)m->be->act_bytes;
    a->P = model_arena_take(m, N * qkv_cols(d) * ab);
    a->aQ = model_arena_take(m, N * d->Dq * ab);
    a->aK = model_arena_take(m, N * d->Dkv * ab);
    a->aV = model_arena_take(m, N * d->Dkv * ab);
    a->aO = model_arena_take(m, N * d->Dq * ab);
    a->lse = m->training ? model_arena_take(m, N * d->Ha * sizeof(float)) : NULL;
}

static void grads_alloc(Model *m, int B, int T) {
    const ModelDims *d = &m->d;
    size_t N = (size_t)B * T, ab = (size_t)m->be->act_bytes;
    AttnGrads *g = &m->attn_grads;
    g->dP = model_arena_take(m, N * qkv_cols(d) * ab);
    g->daQ = model_arena_take(m, N * d->Dq * ab);
    g->daK = model_arena_take(m, N * d->Dkv * ab);
    g->daV = model_arena_take(m, N * d->Dkv * ab);
    g->daO = model_arena_take(m, N * d->Dq * ab);
}

// Packed documents (reset_state_at_eod): each document's own RoPE positions and keys (backend.h attn_fwd), as
// FLA's varlen attention. Not with a decode state: the KV cache holds the row as one sequence (its positions
// and keys are those of the whole row; a prefill then sees across documents, unlike the GDN blocks).
static const int32_t *doc_start(const Model *m, int T, const LayerState *ls) {
    return T > 1 && !ls ? m->doc_start : NULL;
}

// With a state, k and v go to the KV cache at the tokens-seen position (st->pos, on the backend).
static void fwd(Model *m, int l, int B, int T, LayerState *ls) {
    const Backend *be = m->be;
    const ModelDims *d = &m->d;
    const LayerOffsets_attn *w = &m->lay.layer[l].attn;
    AttnActs *a = &m->blk[l].attn;
    AttnState *st = ls ? &ls->attn : NULL;
    int N = B * T, Dqkv = qkv_cols(d);
    if (d->qkv_bias) // the bias inside the GEMM, before its rounding (as FLA's Linear); q|k|v_bias are contiguous
        be->matmul_bias_fwd(a->P, Dqkv, m->blk[l].y_attn, d->h, WA(m, w->q_proj), WA(m, w->q_bias), N, Dqkv, d->h);
    else
        be->matmul_fwd(a->P, Dqkv, m->blk[l].y_attn, d->h, WA(m, w->q_proj), N, Dqkv, d->h, 0);
    void *K = st ? st->kc : a->aK, *V = st ? st->vc : a->aV;
    int kvs = st ? st->cap : T;
    const int32_t *pos = st ? st->pos : NULL, *ds = doc_start(m, T, ls);
    be->attn_qkv_fwd(a->aQ, K, V, kvs, a->P, Dqkv, NULL, pos, B, T, d->Ha, d->Hkv, d->da, d->rope_theta, ds);
    be->attn_fwd(a->aO, m->training ? a->lse : NULL, a->aQ, K, V, kvs, pos, B, T, d->Ha, d->Hkv, d->da, d->window,
                 1.0f / sqrtf((float)d->da), ds);
    be->matmul_fwd(m->out, d->h, a->aO, d->Dq, WA(m, w->o_proj), N, d->h, d->Dq, 0);
    if (st) be->pos_advance(st->pos, T); // on the stream, so a recorded step advances it too
}

static void bwd(Model *m, int l, int B, int T, const void *dout) {
    const Backend *be = m->be;
    const ModelDims *d = &m->d;
    const LayerOffsets_attn *w = &m->lay.layer[l].attn;
    const AttnActs *a = &m->blk[l].attn;
    const AttnGrads *g = &m->attn_grads;
    int N = B * T, Dqkv = qkv_cols(d);
    be->matmul_bwd(g->daO, d->Dq, GF(m, w->o_proj), dout, d->h, a->aO, d->Dq, WA(m, w->o_proj), N, d->h, d->Dq, 0);
    be->attn_bwd(g->daQ, g->daK, g->daV, g->daO, a->aQ, a->aK, a->aV, a->aO, a->lse, B, T, d->Ha, d->Hkv, d->da,
                 d->window, 1.0f / sqrtf((float)d->da), doc_start(m, T, NULL));
    be->attn_qkv_bwd(g->dP, Dqkv, d->qkv_bias ? GF(m, w->q_bias) : NULL, g->daQ, g->daK, g->daV, B, T, d->Ha, d->Hkv,
                     d->da, d->rope_theta, doc_start(m, T, NULL));
    be->matmul_bwd(m->dy, d->h, GF(m, w->q_proj), g->dP, Dqkv, m->blk[l].y_attn, d->h, WA(m, w->q_proj), N, Dqkv,
                   d->h, 0);
}

static void state_alloc(Model *m, int l, int B, LayerState *ls) {
    (void)l, (void)B;
    ls->attn.pos = m->be->alloc(sizeof(int32_t)); // zeroed; the caches come with the first tokens (state_grow)
}
static void state_reset(Model *m, int l, int B, LayerState *ls) {
    (void)l, (void)B;
    m->be->memset0(ls->attn.pos, sizeof(int32_t)); // the caches' old rows are simply not read again
    ls->attn.len = 0;
}
static void state_free(Model *m, int l, LayerState *ls) {
    (void)l;
    AttnState *st = &ls->attn;
    if (st->kc) { m->be->free(st->kc); m->be->free(st->vc); }
    m->be->free(st->pos);
}

// Room in the KV cache for T more tokens per sequence: the capacity doubles from 256 rows (rows copied over),
// which moves the cache, so the caller drops a recorded decode graph. With a window w the cache is a ring
// (position p in row p mod cap, backend.h): it needs only the last w - 1 positions plus the T new ones, so it
// stops growing at the first power-of-two multiple of 256 >= w - 1 + T (memory O(w), as FLA trims its cache);
// capacities stay multiples of 64, as the tensor-core kernels' ring tiles need.
static int state_grow(Model *m, int l, int B, int T, LayerState *ls) {
    (void)l;
    const Backend *be = m->be;
    AttnState *st = &ls->attn;
    const int w = m->d.window;
    const int need = w > 0 && w - 1 + T < st->len + T ? w - 1 + T : st->len + T;
    int moved = 0;
    if (need > st->cap) {
        int cap = st->cap ? st->cap : 256;
        while (cap < need) cap *= 2;
        size_t row = (size_t)m->d.Dkv * be->act_bytes;
        // the positions the old cache holds: all seen, or (a ring) its last cap
        const int keep0 = st->len > st->cap ? st->len - st->cap : 0;
        void **c[2] = {&st->kc, &st->vc};
        for (int i = 0; i < 2; i++) {
            void *n = be->alloc((size_t)B * cap * row);
            for (int b = 0; b < B && *c[i]; b++)
                for (int p = keep0; p < st->len;) { // runs contiguous in both layouts
                    const int ro = p % st->cap, rn = p % cap;
                    int run = st->len - p;
                    if (run > st->cap - ro) run = st->cap - ro;
                    if (run > cap - rn) run = cap - rn;
                    be->memcpy_d2d((char *)n + ((size_t)b * cap + rn) * row,
                                   (char *)*c[i] + ((size_t)b * st->cap + ro) * row, (size_t)run * row);
                    p += run;
                }
            if (*c[i]) be->free(*c[i]);
            *c[i] = n;
        }
        st->cap = cap;
        moved = 1;
    }
    st->len += T;
    return moved;
}

const LayerKindOps layer_attn = {
    .acts_alloc = acts_alloc, .grads_alloc = grads_alloc, .fwd = fwd, .bwd = bwd, .state_alloc = state_alloc,
    .state_reset = state_reset, .state_free = state_free, .state_grow = state_grow,
};
