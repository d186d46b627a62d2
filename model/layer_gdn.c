// layer_gdn.c: the Gated DeltaNet mixer (FLA GatedDeltaNet, spec model.md §2), layer kind LAYER_GDN:
// its activations, forward, backward and recurrent decode state over the backend op table.
#include <math.h>

#include "layer.h"

// fused column layout of P = in_proj output and C = conv output
typedef struct { int Dp, Dc, q, k, v, g, b, a; } ProjCols;
static ProjCols proj_cols(const ModelDims *d) {
    ProjCols c;
    c.q = 0; c.k = d->Kd; c.v = 2 * d->Kd; c.g = 2 * d->Kd + d->Vd; c.b = c.g + d->Vd; c.a = c.b + d->HV;
    c.Dp = c.a + d->HV;
    c.Dc = 2 * d->Kd + d->Vd;
    return c;
}

// Packed documents (NULL: one per row; T = 1 is decode, where the state always carries on).
static const int32_t *doc_start(const Model *m, int T) { return T > 1 ? m->doc_start : NULL; }

static int recomputes(const Model *m) { return m->training && m->cfg.recompute_gdn_acts; }

static void acts_alloc(Model *m, int l, int B, int T, int share) {
    GdnActs *b = &m->blk[l].gdn;
    if (share >= 0) { // inference: every GDN block runs on the same per-row buffers
        *b = m->blk[share].gdn;
        return;
    }
    const ModelDims *d = &m->d;
    ProjCols c = proj_cols(d);
    size_t N = (size_t)B * T, ab = (size_t)m->be->act_bytes, NT = (size_t)(T + GDN_CHUNK - 1) / GDN_CHUNK;
    const int rc = recomputes(m); // C, QK, on: set to the shared buffers by grads_alloc
    b->P = model_arena_take(m, N * c.Dp * ab);
    b->C = rc ? NULL : model_arena_take(m, N * c.Dc * ab);
    b->QK = rc ? NULL : model_arena_take(m, N * 2 * d->Kd * ab);
    b->qk_rstd = model_arena_take(m, N * 2 * d->H * sizeof(float));
    b->beta = model_arena_take(m, N * d->HV * sizeof(float));
    b->gamma = model_arena_take(m, N * d->HV * sizeof(float));
    b->h_save = m->training ? model_arena_take(m, (size_t)B * d->HV * NT * d->dk * d->dv * ab) : NULL;
    b->o = model_arena_take(m, N * d->Vd * ab);
    b->on = rc ? NULL : model_arena_take(m, N * d->Vd * ab);
    b->on_rstd = model_arena_take(m, N * d->HV * sizeof(float));
}

static void grads_alloc(Model *m, int B, int T) {
    const ModelDims *d = &m->d;
    ProjCols c = proj_cols(d);
    size_t N = (size_t)B * T, ab = (size_t)m->be->act_bytes;
    GdnGrads *g = &m->gdn_grads;
    g->dP = model_arena_take(m, N * c.Dp * ab);
    g->dC = model_arena_take(m, N * c.Dc * ab);
    g->dQK = model_arena_take(m, N * 2 * d->Kd * ab);
    g->do_ = model_arena_take(m, N * d->Vd * ab);
    g->don = model_arena_take(m, N * d->Vd * ab);
    g->dbeta = model_arena_take(m, N * d->HV * sizeof(float));
    g->dgamma = model_arena_take(m, N * d->HV * sizeof(float));
    g->C = g->QK = g->on = NULL;
    if (recomputes(m)) { // one C, QK, on for every block (grads_alloc runs after every block's acts_alloc)
        g->C = model_arena_take(m, N * c.Dc * ab);
        g->QK = model_arena_take(m, N * 2 * d->Kd * ab);
        g->on = model_arena_take(m, N * d->Vd * ab);
        for (int l = 0; l < d->L; l++)
            if (d->kind[l] == LAYER_GDN) m->blk[l].gdn.C = g->C, m->blk[l].gdn.QK = g->QK, m->blk[l].gdn.on = g->on;
    }
}

// recompute_gdn_acts: block l's C, QK and on again, with the forward's ops on the same inputs (P, o, the weights),
// so the same bits; the statistics are rewritten with the values they hold
static void recompute(Model *m, int l, int B, int T) {
    const Backend *be = m->be;
    const ModelDims *d = &m->d;
    const LayerOffsets_gdn *w = &m->lay.layer[l].gdn;
    const GdnActs *b = &m->blk[l].gdn;
    ProjCols c = proj_cols(d);
    int N = B * T;
    be->conv_silu_fwd(b->C, c.Dc, b->P, c.Dp, PF(m, w->q_conv1d), NULL, NULL, B, T, c.Dc, d->K, doc_start(m, T));
    be->l2norm_fwd(b->QK, 2 * d->Kd, b->qk_rstd, b->C, c.Dc, N, 2 * d->H, d->dk);
    be->gated_rmsnorm_fwd(b->on, d->Vd, b->on_rstd, b->o, d->Vd, A(m, b->P, c.g), c.Dp, PF(m, w->o_norm), N, d->HV,
                          d->dv, d->eps);
}

// The delta rule reads q|k from the L2-normed QK columns and v from the conv output's v columns.
static DeltaRuleArgs delta_rule_args(const Model *m, const GdnActs *b, int B, int T) {
    const ModelDims *d = &m->d;
    ProjCols c = proj_cols(d);
    return (DeltaRuleArgs){.q = b->QK, .k = A(m, b->QK, d->Kd), .ldqk = 2 * d->Kd, .v = A(m, b->C, c.v), .ldv = c.Dc,
                           .beta = b->beta, .gamma = b->gamma, .h_save = b->h_save, .B = B, .T = T, .H = d->H,
                           .HV = d->HV, .dk = d->dk, .dv = d->dv, .scale = 1.0f / sqrtf((float)d->dk),
                           .doc_start = doc_start(m, T),
                           // training: the MLP's gate|up gradient buffer is free during a GDN block's forward and
                           // backward, so the delta rule's temporaries may live there
                           .scratch = m->dGU, .scratch_bytes = m->dGU_bytes};
}

static void fwd(Model *m, int l, int B, int T, LayerState *ls) {
    const Backend *be = m->be;
    const ModelDims *d = &m->d;
    const LayerOffsets_gdn *w = &m->lay.layer[l].gdn;
    GdnActs *b = &m->blk[l].gdn;
    GdnState *st = ls ? &ls->gdn : NULL;
    ProjCols c = proj_cols(d);
    int N = B * T;
    // [q|k|v|g|b|a] = y . W_in^T, one GEMM over the contiguous q..a_proj rows (the norm fused in when decoding)
    mixer_in_proj(m, l, b->P, c.Dp, WA(m, w->q_proj), N, c.Dp);
    if (T == 1 && st && !m->training && be->gdn_decode_fwd) { // decoding: the token mixer as one op
        const int32_t *eod_ids = m->cfg.reset_state_at_eod ? m->step_ids : NULL; // after EOD: a new document
        be->gdn_decode_fwd(b->on, d->Vd, b->P, c.Dp, PF(m, w->q_conv1d), st->conv, st->S, PF(m, w->A_log),
                           PF(m, w->dt_bias), PF(m, w->o_norm), eod_ids, m->cfg.eos_token_id, B, d->H, d->HV, d->dk,
                           d->dv, d->K, d->eps);
        be->matmul_fwd(m->out, d->h, b->on, d->Vd, WA(m, w->o_proj), N, d->h, d->Vd, 0);
        return;
    }
    // causal depthwise conv + SiLU over the q|k|v columns (conv weights q|k|v are contiguous too)
    float *cs = st ? st->conv : NULL;
    be->conv_silu_fwd(b->C, c.Dc, b->P, c.Dp, PF(m, w->q_conv1d), cs, cs, B, T, c.Dc, d->K,
                      doc_start(m, T));
    // L2 norm of each q and k head vector (2H vectors of dk per token)
    be->l2norm_fwd(b->QK, 2 * d->Kd, b->qk_rstd, b->C, c.Dc, N, 2 * d->H, d->dk);
    be->gate_fwd(b->beta, b->gamma, A(m, b->P, c.b), A(m, b->P, c.a), c.Dp, PF(m, w->A_log), PF(m, w->dt_bias), N,
                 d->HV);
    DeltaRuleArgs dr = delta_rule_args(m, b, B, T);
    be->delta_rule_fwd(&dr, b->o, d->Vd, st ? st->S : NULL);
    be->gated_rmsnorm_fwd(b->on, d->Vd, b->on_rstd, b->o, d->Vd, A(m, b->P, c.g), c.Dp, PF(m, w->o_norm), N, d->HV,
                          d->dv, d->eps);
    if (st && m->cfg.reset_state_at_eod) { // a row that ended in EOD: its next token starts a document
        be->state_reset_at_eod(st->conv, (size_t)c.Dc * (d->K - 1), m->step_ids, B, T, m->cfg.eos_token_id);
        be->state_reset_at_eod(st->S, (size_t)d->HV * d->dk * d->dv, m->step_ids, B, T, m->cfg.eos_token_id);
    }
    be->matmul_fwd(m->out, d->h, b->on, d->Vd, WA(m, w->o_proj), N, d->h, d->Vd, 0);
}

static void bwd(Model *m, int l, int B, int T, const void *dout) {
    const Backend *be = m->be;
    const ModelDims *d = &m->d;
    const LayerOffsets_gdn *w = &m->lay.layer[l].gdn;
    const GdnActs *b = &m->blk[l].gdn;
    const GdnGrads *g = &m->gdn_grads;
    ProjCols c = proj_cols(d);
    int N = B * T;
    if (recomputes(m)) recompute(m, l, B, T);
    be->matmul_bwd(g->don, d->Vd, GF(m, w->o_proj), dout, d->h, b->on, d->Vd, WA(m, w->o_proj), N, d->h, d->Vd, 0);
    be->gated_rmsnorm_bwd(g->do_, d->Vd, A(m, g->dP, c.g), c.Dp, GF(m, w->o_norm), g->don, d->Vd, b->o, d->Vd,
                          A(m, b->P, c.g), c.Dp, b->on_rstd, PF(m, w->o_norm), N, d->HV, d->dv);
    DeltaRuleArgs dr = delta_rule_args(m, b, B, T);
    DeltaRuleGrads dg = {.dq = g->dQK, .dk = A(m, g->dQK, d->Kd), .lddqk = 2 * d->Kd, .dv = A(m, g->dC, c.v),
                         .lddv = c.Dc, .dbeta = g->dbeta, .dgamma = g->dgamma};
    be->delta_rule_bwd(&dr, g->do_, d->Vd, &dg);
    be->l2norm_bwd(g->dC, c.Dc, g->dQK, 2 * d->Kd, b->QK, 2 * d->Kd, b->qk_rstd, N, 2 * d->H, d->dk);
    be->gate_bwd(A(m, g->dP, c.b), A(m, g->dP, c.a), c.Dp, GF(m, w->A_log), GF(m, w->dt_bias), g->dbeta, g->dgamma,
                 A(m, b->P, c.b), A(m, b->P, c.a), PF(m, w->A_log), PF(m, w->dt_bias), N, d->HV);
    be->conv_silu_bwd(g->dP, c.Dp, GF(m, w->q_conv1d), g->dC, c.Dc, b->P, c.Dp, PF(m, w->q_conv1d), B, T, c.Dc, d->K,
                      doc_start(m, T));
    be->matmul_bwd(m->dy, d->h, GF(m, w->q_proj), g->dP, c.Dp, m->blk[l].y_attn, d->h, WA(m, w->q_proj), N, c.Dp,
                   d->h, 0);
}

static size_t conv_bytes(const Model *m, int B) {
    return (size_t)B * proj_cols(&m->d).Dc * (m->d.K - 1) * sizeof(float);
}
static size_t S_bytes(const Model *m, int B) { return (size_t)B * m->d.HV * m->d.dk * m->d.dv * sizeof(float); }
static void state_alloc(Model *m, int l, int B, LayerState *ls) {
    ls->gdn.conv = m->be->alloc(conv_bytes(m, B));
    ls->gdn.S = m->be->alloc(S_bytes(m, B));
}
static void state_reset(Model *m, int l, int B, LayerState *ls) {
    m->be->memset0(ls->gdn.conv, conv_bytes(m, B));
    m->be->memset0(ls->gdn.S, S_bytes(m, B));
}
static void state_free(Model *m, int l, LayerState *ls) {
    m->be->free(ls->gdn.conv);
    m->be->free(ls->gdn.S);
}

// A decode step of the whole block as gdn_decode_block_fwd: the same ops as forward_tokens' fused decode path
// (mixer_in_proj, fwd's decode branch, the MLP's rmsnorm_matmul_swiglu_fwd and down projection), the same buffers.
static int decode_block(Model *m, int l, int B, LayerState *ls, const void *x, const void *resid, void *s_out) {
    const Backend *be = m->be;
    if (!be->gdn_decode_block_fwd || !be->gdn_decode_fwd) return 0;
    const ModelDims *d = &m->d;
    const LayerOffsets *lw = &m->lay.layer[l];
    const LayerOffsets_gdn *w = &lw->gdn;
    BlockActs *blk = &m->blk[l];
    GdnActs *b = &blk->gdn;
    ProjCols c = proj_cols(d);
    GdnDecodeBlockArgs a = {
        .x = x, .resid = resid, .s_attn = s_out, .attn_norm = PF(m, lw->attn_norm), .W_in = WA(m, w->q_proj),
        .P = b->P, .ldp = c.Dp, .conv_w = PF(m, w->q_conv1d), .A_log = PF(m, w->A_log), .dt_bias = PF(m, w->dt_bias),
        .o_norm = PF(m, w->o_norm), .conv_state = ls->gdn.conv, .S = ls->gdn.S,
        .ids = m->cfg.reset_state_at_eod ? m->step_ids : NULL, .eod = m->cfg.eos_token_id, .on = b->on,
        .W_o = WA(m, w->o_proj), .out = m->out, .mlp_resid = blk->s_attn, .s_mlp = blk->s_mlp,
        .mlp_norm = PF(m, lw->mlp_norm), .W_gu = WA(m, lw->gate_proj), .hbuf = blk->Hh, .W_down = WA(m, lw->down_proj),
        .B = B, .h = d->h, .H = d->H, .HV = d->HV, .dk = d->dk, .dv = d->dv, .K = d->K, .F = d->F, .eps = d->eps};
    be->gdn_decode_block_fwd(&a);
    return 1;
}

const LayerKindOps layer_gdn = {
    .acts_alloc = acts_alloc, .grads_alloc = grads_alloc,
    .fwd = fwd, .bwd = bwd, .state_alloc = state_alloc, .state_reset = state_reset, .state_free = state_free,
    .fuses_in_norm = 1, .decode_block = decode_block,
};
