// cases_gdn.c: test_cuda_ops' cases for the GDN mixer's ops: the short causal conv, document starts (packed
// documents), the q/k L2 norm, the gates, the gated RMSNorm and the chunked delta rule (forward, backward, decode).
// Each run_* wrapper calls one op through the Backend table; each cases_* adds cases (harness.h).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gpu/ops/harness.h"

static void run_conv_fwd(const Backend *be, void **p, const Case *c) {
    // x, w, state_in, y, state_out, doc_start;  i: B T D K ldx ldy
    be->conv_silu_fwd(p[3], c->i[5], p[0], c->i[4], p[1], p[2], p[4], c->i[0], c->i[1], c->i[2], c->i[3], p[5]);
}

static void run_conv_bwd(const Backend *be, void **p, const Case *c) {
    // dy, x, w, dx, dw, doc_start;  i: B T D K lddx lddy ldx
    be->conv_silu_bwd(p[3], c->i[4], p[4], p[0], c->i[5], p[1], c->i[6], p[2], c->i[0], c->i[1], c->i[2], c->i[3],
                      p[5]);
}

static void run_doc_starts(const Backend *be, void **p, const Case *c) {
    // ids, doc_start;  i: B T eod
    be->doc_starts(p[1], p[0], c->i[0], c->i[1], c->i[2]);
}

static void run_l2norm_fwd(const Backend *be, void **p, const Case *c) {
    // x, y, rstd;  i: N heads d ldx ldy
    be->l2norm_fwd(p[1], c->i[4], p[2], p[0], c->i[3], c->i[0], c->i[1], c->i[2]);
}

static void run_l2norm_bwd(const Backend *be, void **p, const Case *c) {
    // dy, y, rstd, dx;  i: N heads d lddy ldy lddx
    be->l2norm_bwd(p[3], c->i[5], p[0], c->i[3], p[1], c->i[4], p[2], c->i[0], c->i[1], c->i[2]);
}

static void run_gate_fwd(const Backend *be, void **p, const Case *c) {
    // ba (b at column 0, a at column HV, row stride ld), A_log, dt_bias, beta, gamma;  i: N HV ld
    int HV = c->i[1];
    be->gate_fwd(p[3], p[4], p[0], ACT(p[0]) + (size_t)HV * be->act_bytes, c->i[2], p[1], p[2], c->i[0], HV);
}

static void run_gate_bwd(const Backend *be, void **p, const Case *c) {
    // ba, A_log, dt_bias, dbeta, dgamma, dba (db at column 0, da at column HV), dA_log, ddt_bias
    int HV = c->i[1];
    size_t off = (size_t)HV * be->act_bytes;
    be->gate_bwd(p[5], ACT(p[5]) + off, c->i[2], p[6], p[7], p[3], p[4], p[0], ACT(p[0]) + off, p[1], p[2], c->i[0],
                 HV);
}

static void run_gated_fwd(const Backend *be, void **p, const Case *c) {
    // o, z, w, y, rstd;  i: N HV dv ldo ldz ldy
    be->gated_rmsnorm_fwd(p[3], c->i[5], p[4], p[0], c->i[3], p[1], c->i[4], p[2], c->i[0], c->i[1], c->i[2], c->f[0]);
}

static void run_gated_bwd(const Backend *be, void **p, const Case *c) {
    // dy, o, z, rstd, w, do, dz, dw;  i: N HV dv lddy ldo ldz lddo lddz
    be->gated_rmsnorm_bwd(p[5], c->i[6], p[6], c->i[7], p[7], p[0], c->i[3], p[1], c->i[4], p[2], c->i[5], p[3], p[4],
                          c->i[0], c->i[1], c->i[2]);
}

// p: q, k, v, beta, gamma first (both directions);  i: B T H HV dk dv ldqk ldv;  ds: doc_start or NULL
static DeltaRuleArgs delta_args(void **p, void *h_save, const Case *c, const void *ds) {
    const int *I = c->i;
    return (DeltaRuleArgs){.q = p[0], .k = p[1], .ldqk = I[6], .v = p[2], .ldv = I[7], .beta = p[3], .gamma = p[4],
                           .h_save = h_save, .B = I[0], .T = I[1], .H = I[2], .HV = I[3], .dk = I[4], .dv = I[5],
                           .scale = c->f[0], .doc_start = ds};
}

static void run_delta_fwd(const Backend *be, void **p, const Case *c) {
    // q, k, v, beta, gamma, o, h_save, state, doc_start;  i: ... ldo
    DeltaRuleArgs a = delta_args(p, p[6], c, p[8]);
    be->delta_rule_fwd(&a, p[5], c->i[8], p[7]);
}

static void run_delta_bwd(const Backend *be, void **p, const Case *c) {
    // q, k, v, beta, gamma, dO, h_save, dq, dk, dv, dbeta, dgamma, doc_start;  i: ... lddo lddqk lddv
    DeltaRuleArgs a = delta_args(p, p[6], c, p[12]);
    DeltaRuleGrads g = {.dq = p[7], .dk = p[8], .lddqk = c->i[9], .dv = p[9], .lddv = c->i[10], .dbeta = p[10],
                        .dgamma = p[11]};
    be->delta_rule_bwd(&a, p[5], c->i[8], &g);
}

// Packed-document layouts (backend.h doc_start) for the ops that take one: the token ids of B rows of T with EOD
// (id 1) before every document start, and the doc_start they give. docs 0: none (the NULL path); 1: fixed starts
// (documents of length 1, starts inside chunks and on the chunk edges 64 and 128); 2: hundreds of documents of
// 1..4 tokens, then random lengths.
static void doc_layout(Rng *g, int32_t *ids, int32_t *ds, int B, int T, int docs) {
    static const int fixed[] = {1, 2, 37, 38, 63, 64, 65, 100, 127, 128, 129, 191, 250};
    for (int b = 0; b < B; b++) {
        int32_t *id = ids + (size_t)b * T, *d = ds + (size_t)b * T;
        for (int t = 0; t < T; t++) id[t] = 2 + (int)(rng_u64(g) % 50);
        if (docs == 1)
            for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
                if (fixed[i] < T) id[fixed[i] - 1] = 1;
        if (docs == 2)
            for (int t = 1 + (int)(rng_u64(g) % 4); t < T; t += t < 400 ? 1 + (int)(rng_u64(g) % 4) : 1 + (int)(rng_u64(g) % 150))
                id[t - 1] = 1;
        for (int t = 0, cur = 0; t < T; t++) d[t] = cur = t > 0 && id[t - 1] == 1 ? t : cur;
    }
}

// The bench's layout: documents of 1..1024 tokens (uniform), as EOD-separated pretraining rows.
void doc_layout_random(Rng *g, int32_t *ids, int32_t *ds, int B, int T) {
    for (int b = 0; b < B; b++)
        for (int t = 0, cur = 0, next = 1 + (int)(rng_u64(g) % 1024); t < T; t++) {
            if (t == next) cur = t, next = t + 1 + (int)(rng_u64(g) % 1024);
            ids[(size_t)b * T + t] = t + 1 == next ? 1 : 2;
            ds[(size_t)b * T + t] = cur;
        }
}

void add_doc_start(Case *c, Rng *g, int B, int T, int docs) {
    Tensor *ds = add_in(c, "doc_start", K_I32, (size_t)B * T, 1, 1);
    int32_t *ids = xmalloc((size_t)B * T * 4 + 4);
    if (docs) doc_layout(g, ids, ds->init_i, B, T, docs);
    else ds->is_null = 1;
    free(ids);
}

void cases_doc_starts(Rng *g, int B, int T, int docs) {
    Case *c = new_case("doc_starts", run_doc_starts, "B=%d T=%d layout %d", B, T, docs);
    c->i[0] = B, c->i[1] = T, c->i[2] = 1;
    Tensor *ids = add_in(c, "ids", K_I32, (size_t)B * T, 1, 1);
    int32_t *ds = xmalloc((size_t)B * T * 4 + 4);
    doc_layout(g, ids->init_i, ds, B, T, docs);
    free(ds);
    add_t(c, "doc_start", K_I32, R_OUT, (size_t)B * T, 1, 1, F32_EXACT, B16_EXACT);
}

void cases_conv(Rng *g, int B, int T, int D, int K, int pad, int state, int alias_state, int docs) {
    int ldx = D + pad, ldy = D + 2 * pad;
    static const char *layout[] = {"", " docs fixed", " docs many"};
    Case *c = new_case("conv_silu_fwd", run_conv_fwd, "B=%d T=%d D=%d K=%d ld+%d%s%s", B, T, D, K, pad,
                       alias_state ? " state in=out"
                       : state     ? " state"
                                   : "",
                       layout[docs]);
    c->i[0] = B, c->i[1] = T, c->i[2] = D, c->i[3] = K, c->i[4] = ldx, c->i[5] = ldy;
    fill_normal(add_in(c, "x", K_ACT, (size_t)B * T, D, ldx), g, 0, 1);
    fill_normal(add_in(c, "w", K_F32, D, K, 0), g, 0, 0.4f);
    Tensor *si = add_in(c, "state_in", K_F32, (size_t)B * D, K - 1 > 0 ? K - 1 : 1, 0);
    if (state)
        fill_normal(si, g, 0, 1);
    else
        si->is_null = 1;
    add_t(c, "y", K_ACT, R_OUT, (size_t)B * T, D, ldy, F32_ORDER, B16_STORE);
    Tensor *so = add_t(c, "state_out", K_F32, R_OUT, (size_t)B * D, K - 1 > 0 ? K - 1 : 1, 0, F32_EXACT, B16_EXACT);
    if (!state || K == 1) so->is_null = 1;
    if (alias_state) { // decode: the state is read and rewritten in place
        si->role = R_ACC, si->t32 = F32_EXACT, si->t16 = B16_EXACT;
        c->alias[4] = 2;
    }
    add_doc_start(c, g, B, T, docs);

    if (alias_state) return; // the backward has no state
    c = new_case("conv_silu_bwd", run_conv_bwd, "B=%d T=%d D=%d K=%d ld+%d%s", B, T, D, K, pad, layout[docs]);
    c->i[0] = B, c->i[1] = T, c->i[2] = D, c->i[3] = K, c->i[4] = ldy, c->i[5] = ldy, c->i[6] = ldx;
    fill_normal(add_in(c, "dy", K_ACT, (size_t)B * T, D, ldy), g, 0, 1);
    fill_normal(add_in(c, "x", K_ACT, (size_t)B * T, D, ldx), g, 0, 1);
    fill_normal(add_in(c, "w", K_F32, D, K, 0), g, 0, 0.4f);
    add_t(c, "dx", K_ACT, R_OUT, (size_t)B * T, D, ldy, F32_ORDER, B16_STORE);
    fill_normal(add_t(c, "dw", K_F32, R_ACC, D, K, 0, F32_ORDER, B16_FP32), g, 0, 1);
    add_doc_start(c, g, B, T, docs);
}

// step: how far apart the tensors' row strides are (odd: the scalar kernels; even with even ld and d: the
// kernels that move element pairs)
void cases_l2norm(Rng *g, int N, int heads, int d, int pad, int step) {
    int ld = heads * d + pad;
    Case *c = new_case("l2norm_fwd", run_l2norm_fwd, "N=%d heads=%d d=%d ld+%d,+%d", N, heads, d, pad, step);
    c->i[0] = N, c->i[1] = heads, c->i[2] = d, c->i[3] = ld, c->i[4] = ld + step;
    fill_normal(add_in(c, "x", K_ACT, N, heads * d, ld), g, 0, 1);
    add_t(c, "y", K_ACT, R_OUT, N, heads * d, ld + step, F32_ORDER, B16_STORE);
    add_t(c, "rstd", K_F32, R_OUT, N, heads, 0, F32_ORDER, B16_FP32);

    c = new_case("l2norm_bwd", run_l2norm_bwd, "N=%d heads=%d d=%d ld+%d,+%d", N, heads, d, pad, step);
    c->i[0] = N, c->i[1] = heads, c->i[2] = d, c->i[3] = ld, c->i[4] = ld + step, c->i[5] = ld + 2 * step;
    fill_normal(add_in(c, "dy", K_ACT, N, heads * d, ld), g, 0, 1);
    Tensor *y = add_in(c, "y", K_ACT, N, heads * d, ld + step);
    fill_normal(y, g, 0, 1);
    normalise_heads(y, heads, d);
    fill_uniform(add_in(c, "rstd", K_F32, N, heads, 0), g, 0.1f, 2.0f);
    add_t(c, "dx", K_ACT, R_OUT, N, heads * d, ld + 2 * step, F32_ORDER, B16_STORE);
}

void cases_gate(Rng *g, int N, int HV, int pad) {
    int ld = 2 * HV + pad;
    Case *c = new_case("gate_fwd", run_gate_fwd, "N=%d HV=%d ld=%d", N, HV, ld);
    c->i[0] = N, c->i[1] = HV, c->i[2] = ld;
    fill_normal(add_in(c, "b|a", K_ACT, N, ld, 0), g, 0, 2);
    Tensor *Al = add_in(c, "A_log", K_F32, 1, HV, 0), *dt = add_in(c, "dt_bias", K_F32, 1, HV, 0);
    for (int j = 0; j < HV; j++) Al->init[j] = logf(rng_uniform(g, 1, 16)), dt->init[j] = rng_uniform(g, -6.9f, -2.25f);
    dt->init[0] = 21.0f; // a + dt_bias > 20 for most rows: softplus's linear branch
    add_t(c, "beta", K_F32, R_OUT, N, HV, 0, F32_ORDER, B16_FP32);
    add_t(c, "gamma", K_F32, R_OUT, N, HV, 0, F32_ORDER, B16_FP32);

    c = new_case("gate_bwd", run_gate_bwd, "N=%d HV=%d ld=%d", N, HV, ld);
    c->i[0] = N, c->i[1] = HV, c->i[2] = ld;
    fill_normal(add_in(c, "b|a", K_ACT, N, ld, 0), g, 0, 2);
    Al = add_in(c, "A_log", K_F32, 1, HV, 0), dt = add_in(c, "dt_bias", K_F32, 1, HV, 0);
    for (int j = 0; j < HV; j++) Al->init[j] = logf(rng_uniform(g, 1, 16)), dt->init[j] = rng_uniform(g, -6.9f, -2.25f);
    fill_normal(add_in(c, "dbeta", K_F32, N, HV, 0), g, 0, 1);
    fill_normal(add_in(c, "dgamma", K_F32, N, HV, 0), g, 0, 1);
    add_t(c, "db|da", K_ACT, R_OUT, N, 2 * HV, ld, F32_ORDER, B16_STORE);
    fill_normal(add_t(c, "dA_log", K_F32, R_ACC, 1, HV, 0, F32_ORDER, B16_FP32), g, 0, 1);
    fill_normal(add_t(c, "ddt_bias", K_F32, R_ACC, 1, HV, 0, F32_ORDER, B16_DA_SUM), g, 0, 1);
}

void cases_gated(Rng *g, int N, int HV, int dv, int pad) {
    int w = HV * dv;
    Case *c = new_case("gated_rmsnorm_fwd", run_gated_fwd, "N=%d HV=%d dv=%d ld+%d", N, HV, dv, pad);
    c->i[0] = N, c->i[1] = HV, c->i[2] = dv, c->i[3] = w + pad, c->i[4] = w + 2 * pad, c->i[5] = w + pad;
    c->f[0] = 1e-6f;
    fill_normal(add_in(c, "o", K_ACT, N, w, w + pad), g, 0, 1);
    fill_normal(add_in(c, "z", K_ACT, N, w, w + 2 * pad), g, 0, 2);
    fill_normal(add_in(c, "w", K_F32, 1, dv, 0), g, 1, 0.1f);
    add_t(c, "y", K_ACT, R_OUT, N, w, w + pad, F32_ORDER, B16_STORE);
    add_t(c, "rstd", K_F32, R_OUT, N, HV, 0, F32_ORDER, B16_FP32);

    c = new_case("gated_rmsnorm_bwd", run_gated_bwd, "N=%d HV=%d dv=%d ld+%d", N, HV, dv, pad);
    c->i[0] = N, c->i[1] = HV, c->i[2] = dv;
    c->i[3] = w + pad, c->i[4] = w + 2 * pad, c->i[5] = w, c->i[6] = w + pad, c->i[7] = w + 3 * pad;
    fill_normal(add_in(c, "dy", K_ACT, N, w, w + pad), g, 0, 1);
    fill_normal(add_in(c, "o", K_ACT, N, w, w + 2 * pad), g, 0, 1);
    fill_normal(add_in(c, "z", K_ACT, N, w, 0), g, 0, 2);
    fill_uniform(add_in(c, "rstd", K_F32, N, HV, 0), g, 0.5f, 2.0f);
    fill_normal(add_in(c, "w", K_F32, 1, dv, 0), g, 1, 0.1f);
    add_t(c, "do", K_ACT, R_OUT, N, w, w + pad, F32_ORDER, B16_STORE);
    add_t(c, "dz", K_ACT, R_OUT, N, w, w + 3 * pad, F32_ORDER, B16_STORE);
    fill_normal(add_t(c, "dw", K_F32, R_ACC, 1, dv, 0, F32_ORDER, B16_FP32), g, 0, 1);
}

static void fill_delta_inputs(Case *c, Rng *g, DeltaShape s, int ldqk, int ldv) {
    int N = s.B * s.T;
    Tensor *q = add_in(c, "q", K_ACT, N, s.H * s.dk, ldqk), *k = add_in(c, "k", K_ACT, N, s.H * s.dk, ldqk);
    fill_normal(q, g, 0, 1), normalise_heads(q, s.H, s.dk);
    fill_normal(k, g, 0, 1), normalise_heads(k, s.H, s.dk);
    fill_normal(add_in(c, "v", K_ACT, N, s.HV * s.dv, ldv), g, 0, 1);
    fill_uniform(add_in(c, "beta", K_F32, N, s.HV, 0), g, 0.05f, 0.95f);
    Tensor *gm = add_in(c, "gamma", K_F32, N, s.HV, 0);
    fill_uniform(gm, g, s.weak ? -0.03f : -1.6f, 0.0f); // the init range; a few strong decays that underflow e^{G}
    for (size_t x = 0; x < tsize(gm); x += s.weak ? 211 : 37) gm->init[x] = -12.0f;
}

void cases_delta(Rng *g, DeltaShape s, int big) {
    int ldqk = s.H * s.dk + s.pad, ldv = s.HV * s.dv + s.pad, ldo = s.HV * s.dv + 2 * s.pad;
    int N = s.B * s.T, NT = (s.T + 63) / 64, BH = s.B * s.HV;
    char shape[128];
    char bv[32] = "";
    if (s.bv) snprintf(bv, sizeof bv, " bv=%d", s.bv);
    if (s.wg_nc) snprintf(bv + strlen(bv), sizeof bv - strlen(bv), " nc=%d", s.wg_nc);
    if (s.wg_tma) snprintf(bv + strlen(bv), sizeof bv - strlen(bv), s.wg_tma > 0 ? " tma" : " cp.async");
    static const char *layout[] = {"", " docs fixed", " docs many"};
    snprintf(shape, sizeof shape, "B=%d T=%d H=%d HV=%d dk=%d dv=%d%s%s%s%s%s%s", s.B, s.T, s.H, s.HV, s.dk, s.dv,
             s.pad ? " ld+" : "", s.state ? " state" : "", s.h_save ? " h_save" : "", s.weak ? " weak" : "", bv,
             layout[s.docs]);
    Case *c = new_case("delta_rule_fwd", run_delta_fwd, "%s", shape);
    c->big = big;
    int *I = c->i;
    I[0] = s.B, I[1] = s.T, I[2] = s.H, I[3] = s.HV, I[4] = s.dk, I[5] = s.dv, I[6] = ldqk, I[7] = ldv, I[8] = ldo;
    I[12] = s.bv, I[13] = s.wg_nc, I[14] = s.wg_tma;
    c->f[0] = 1.0f / sqrtf((float)s.dk);
    fill_delta_inputs(c, g, s, ldqk, ldv);
    add_t(c, "o", K_ACT, R_OUT, N, s.HV * s.dv, ldo, F32_CHAIN, B16_DELTA);
    Tensor *hs = add_t(c, "h_save", K_ACT, R_OUT, (size_t)BH * NT, (size_t)s.dk * s.dv, 0, F32_CHAIN, B16_DELTA);
    if (!s.h_save) hs->is_null = 1;
    Tensor *st = add_t(c, "state", K_F32, R_ACC, BH, (size_t)s.dk * s.dv, 0, F32_CHAIN, B16_DELTA_F32);
    if (s.state)
        fill_normal(st, g, 0, 0.3f);
    else
        st->is_null = 1;
    add_doc_start(c, g, s.B, s.T, s.docs);
    const int32_t *ds_fwd = c->t[c->nt - 1].is_null ? NULL : c->t[c->nt - 1].init_i;

    // Backward: h_save (when given) comes from the CPU forward on the same inputs.
    c = new_case("delta_rule_bwd", run_delta_bwd, "%s", shape);
    c->big = big;
    int lddqk = s.H * s.dk + 3 * s.pad, lddv = s.HV * s.dv + s.pad, lddo = s.HV * s.dv + s.pad;
    I = c->i;
    I[0] = s.B, I[1] = s.T, I[2] = s.H, I[3] = s.HV, I[4] = s.dk, I[5] = s.dv, I[6] = ldqk, I[7] = ldv;
    I[8] = lddo, I[9] = lddqk, I[10] = lddv, I[12] = s.bv, I[13] = s.wg_nc, I[14] = s.wg_tma;
    c->f[0] = 1.0f / sqrtf((float)s.dk);
    fill_delta_inputs(c, g, s, ldqk, ldv);
    fill_normal(add_in(c, "dO", K_ACT, N, s.HV * s.dv, lddo), g, 0, 1);
    hs = add_in(c, "h_save", K_ACT, (size_t)BH * NT, (size_t)s.dk * s.dv, 0);
    if (s.h_save) {
        const Backend *cpu = backend_cpu();
        float *o = xmalloc((size_t)N * ldo * sizeof(float));
        void *in[5] = {c->t[0].init, c->t[1].init, c->t[2].init, c->t[3].init, c->t[4].init};
        DeltaRuleArgs a = delta_args(in, hs->init, c, ds_fwd);
        cpu->delta_rule_fwd(&a, o, ldo, NULL);
        free(o);
    } else {
        hs->is_null = 1;
    }
    add_t(c, "dq", K_ACT, R_OUT, N, s.H * s.dk, lddqk, F32_CHAIN, B16_DELTA);
    add_t(c, "dk", K_ACT, R_OUT, N, s.H * s.dk, lddqk, F32_CHAIN, B16_DELTA);
    add_t(c, "dv", K_ACT, R_OUT, N, s.HV * s.dv, lddv, F32_CHAIN, B16_DELTA);
    add_t(c, "dbeta", K_F32, R_OUT, N, s.HV, 0, F32_CHAIN, B16_DELTA_F32);
    add_t(c, "dgamma", K_F32, R_OUT, N, s.HV, 0, F32_CHAIN, B16_DELTA_F32);
    Tensor *dsb = add_in(c, "doc_start", K_I32, (size_t)N, 1, 1); // the forward's layout
    if (ds_fwd) memcpy(dsb->init_i, ds_fwd, (size_t)N * 4);
    else dsb->is_null = 1;
}

// delta_rule_fwd and _bwd with the caller's scratch against the same calls without it: o, h_save and every gradient
// bit for bit. A large scratch is used (its poison overwritten; the backward's only by the bf16 tensor-core path,
// which keeps its seven temporaries there) and nothing past it is written; a small one is left alone.
void check_delta_scratch(const Backend *be) {
    const int B = 2, T = 150, H = 2, HV = 4, dk = 64, dv = 64, N = B * T, NT = (T + GDN_CHUNK - 1) / GDN_CHUNK;
    const size_t ab = (size_t)be->act_bytes, big = (size_t)8 << 20, GUARD_B = 4096;
    Rng g = {0xd5c7};
    const size_t nq = (size_t)N * H * dk, nv = (size_t)N * HV * dv, ng = (size_t)N * HV;
    float *hx = xmalloc(nv * 4), *st = be->alloc(nv * 4);
    void *q = be->alloc(nq * ab), *k = be->alloc(nq * ab), *v = be->alloc(nv * ab), *dO = be->alloc(nv * ab);
    void *act[4] = {q, k, v, dO};
    const size_t n[4] = {nq, nq, nv, nv};
    for (int t = 0; t < 4; t++) {
        for (size_t e = 0; e < n[t]; e++) hx[e] = (t < 2 ? 0.125f : 1.0f) * rng_normal(&g); // q, k about unit rows
        be->memcpy_h2d(st, hx, n[t] * 4), be->to_act(act[t], st, n[t]);
    }
    float *beta = be->alloc(ng * 4), *gamma = be->alloc(ng * 4);
    for (size_t e = 0; e < ng; e++) hx[e] = rng_uniform(&g, 0.05f, 0.95f);
    be->memcpy_h2d(beta, hx, ng * 4);
    for (size_t e = 0; e < ng; e++) hx[e] = rng_uniform(&g, -0.03f, 0.0f);
    be->memcpy_h2d(gamma, hx, ng * 4);
    void *h_save = be->alloc((size_t)B * HV * NT * dk * dv * ab), *o = be->alloc(nv * ab);
    DeltaRuleArgs a = {.q = q, .k = k, .ldqk = H * dk, .v = v, .ldv = HV * dv, .beta = beta, .gamma = gamma,
                       .h_save = h_save, .B = B, .T = T, .H = H, .HV = HV, .dk = dk, .dv = dv, .scale = 0.125f};
    unsigned char *pattern = xmalloc(big + GUARD_B), *back = xmalloc(big + GUARD_B);
    memset(pattern, 0xFF, big), memset(pattern + big, 0xA5, GUARD_B);
    void *scr = be->alloc(big + GUARD_B);
    const size_t sizes[3] = {0, big, 4096}; // none, all temporaries fit, too small
    // the forward (both modes keep Gc, W, U, V_new there): o and h_save bit for bit
    const size_t ob = nv * ab, hb = (size_t)B * HV * NT * dk * dv * ab;
    char *fo[3], *fh[3];
    int fused[3] = {0, 0, 0}, fguard[3] = {1, 1, 1};
    for (int run = 2; run >= 0; run--) { // run 0 last: its h_save feeds the backward below
        be->memcpy_h2d(scr, pattern, big + GUARD_B);
        DeltaRuleArgs af = a;
        af.scratch = run ? scr : NULL, af.scratch_bytes = sizes[run];
        be->delta_rule_fwd(&af, o, HV * dv, NULL);
        be->memcpy_d2h(back, scr, big + GUARD_B);
        if (run) {
            fused[run] = memcmp(back, pattern, sizes[run]) != 0;
            fguard[run] = !memcmp(back + sizes[run], pattern + sizes[run], big + GUARD_B - sizes[run]);
        }
        fo[run] = xmalloc(ob), fh[run] = xmalloc(hb);
        be->memcpy_d2h(fo[run], o, ob), be->memcpy_d2h(fh[run], h_save, hb);
    }
    int fsame = 1;
    for (int run = 1; run < 3; run++) fsame &= !memcmp(fo[0], fo[run], ob) && !memcmp(fh[0], fh[run], hb);
    const int fok = fsame && fused[1] && !fused[2] && fguard[1] && fguard[2];
    g_checks++;
    if (!fok) g_failures++;
    printf("%s %-62s %s  same bits: %s; 8 MiB scratch used: %s, 4 KiB: %s; guard: %s\n", fok ? "PASS" : "FAIL",
           "delta_rule_fwd scratch B=2 T=150 H=2 HV=4 dk=dv=64", ab == 2 ? "bf16" : "fp32", fsame ? "yes" : "NO",
           fused[1] ? "yes" : "NO", fused[2] ? "USED" : "untouched", fguard[1] && fguard[2] ? "intact" : "WRITTEN");
    for (int run = 0; run < 3; run++) free(fo[run]), free(fh[run]);
    char *out[3][5];
    int used[3] = {0, 0, 0}, guard_ok[3] = {1, 1, 1};
    const size_t on[5] = {nq * ab, nq * ab, nv * ab, ng * 4, ng * 4};
    for (int run = 0; run < 3; run++) {
        void *dq = be->alloc(on[0]), *dk_ = be->alloc(on[1]), *dv_ = be->alloc(on[2]);
        float *dbeta = be->alloc(on[3]), *dgamma = be->alloc(on[4]);
        be->memcpy_h2d(scr, pattern, big + GUARD_B);
        DeltaRuleArgs ar = a;
        ar.scratch = run ? scr : NULL, ar.scratch_bytes = sizes[run];
        DeltaRuleGrads dg = {.dq = dq, .dk = dk_, .lddqk = H * dk, .dv = dv_, .lddv = HV * dv, .dbeta = dbeta, .dgamma = dgamma};
        be->delta_rule_bwd(&ar, dO, HV * dv, &dg);
        be->memcpy_d2h(back, scr, big + GUARD_B);
        if (run) {
            used[run] = memcmp(back, pattern, sizes[run]) != 0;
            guard_ok[run] = !memcmp(back + sizes[run], pattern + sizes[run], big + GUARD_B - sizes[run]);
        }
        void *dev[5] = {dq, dk_, dv_, dbeta, dgamma};
        for (int x = 0; x < 5; x++) {
            out[run][x] = xmalloc(on[x]);
            be->memcpy_d2h(out[run][x], dev[x], on[x]);
            be->free(dev[x]);
        }
    }
    int same = 1;
    for (int run = 1; run < 3; run++)
        for (int x = 0; x < 5; x++) same &= !memcmp(out[0][x], out[run][x], on[x]);
    const int want_used = ab == 2; // the fp32 mode's CUDA-core kernels keep their own temporaries
    const int ok = same && used[1] == want_used && !used[2] && guard_ok[1] && guard_ok[2];
    g_checks++;
    if (!ok) g_failures++;
    printf("%s %-62s %s  same bits: %s; 8 MiB scratch used: %s (want %s), 4 KiB: %s; guard: %s\n", ok ? "PASS" : "FAIL",
           "delta_rule_bwd scratch B=2 T=150 H=2 HV=4 dk=dv=64", ab == 2 ? "bf16" : "fp32", same ? "yes" : "NO",
           used[1] ? "yes" : "no", want_used ? "yes" : "no", used[2] ? "USED" : "untouched",
           guard_ok[1] && guard_ok[2] ? "intact" : "WRITTEN");
    for (int run = 0; run < 3; run++)
        for (int x = 0; x < 5; x++) free(out[run][x]);
    free(hx), free(pattern), free(back);
    be->free(st), be->free(q), be->free(k), be->free(v), be->free(dO), be->free(beta), be->free(gamma);
    be->free(h_save), be->free(o), be->free(scr);
}
