// test_packed.c: packed documents (reset_state_at_eod, backend.h doc_start) on the CPU backend. Each document of a
// packed row must give what it gives run alone from a zero state: the conv and both delta-rule forms (outputs,
// final states, every gradient), then the whole model (logits and parameter gradients of one document; pure GDN and
// hybrids with softmax-attention blocks, whose RoPE positions and keys then stay per document). Layouts
// put boundaries inside chunks, on chunk edges (64, 128), documents of length 1, and one row of ~100 documents.
// Also: doc_starts against a direct rule, and with no EOD in the row the results bit-identical to doc_start NULL.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cpu/cpu_ops.h"
#include "../model/gdn.h"
#include "check.h"

enum { EOD = 3 };
static const double TOL = 1e-5;

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return ((rng >> 11) + 0.5) * 0x1.0p-53;
}
static float *vec_u(size_t n, double lo, double hi) {
    float *p = xmalloc(n * sizeof(float) + 4);
    for (size_t i = 0; i < n; i++) p[i] = (float)(lo + (hi - lo) * urand());
    return p;
}
static float *zeros(size_t n) { return xcalloc(n + 1, sizeof(float)); }

// ---- layouts: starts[] of each row (first 0), ascending, as the positions
// after EODs
typedef struct {
    int B, T, ndoc;
    int b[512], s[512], e[512]; // document i is row b[i], positions [s[i], e[i])
    int32_t *ids, *ds;          // [B*T]: tokens with EOD before every start; doc_start
} Layout;

static void layout_make(Layout *L, int B, int T, int row1_many) {
    memset(L, 0, sizeof *L);
    L->B = B, L->T = T;
    L->ids = xmalloc((size_t)B * T * 4), L->ds = xmalloc((size_t)B * T * 4);
    for (int b = 0; b < B; b++) {
        int starts[400], ns = 0;
        starts[ns++] = 0;
        if (b == 0) { // hand-placed: length 1 docs, chunk edges, inside chunks
            int fixed[] = {1, 2, 37, 38, 64, 100, 127, 128, 129, 191, 250};
            for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
                if (fixed[i] < T) starts[ns++] = fixed[i];
        } else if (row1_many) { // ~100 documents of 1..5 tokens, then a long one
            for (int p = 1 + (int)(urand() * 5); p < T * 2 / 3 && ns < 390; p += 1 + (int)(urand() * 5))
                starts[ns++] = p;
        } else {
            for (int p = 20 + (int)(urand() * 60); p < T; p += 1 + (int)(urand() * 90)) starts[ns++] = p;
        }
        for (int t = 0; t < T; t++) L->ids[(size_t)b * T + t] = 4 + (int)(urand() * 50); // never EOD
        for (int i = 0; i < ns; i++) {
            if (starts[i] > 0) L->ids[(size_t)b * T + starts[i] - 1] = EOD;
            int e = i + 1 < ns ? starts[i + 1] : T;
            L->b[L->ndoc] = b, L->s[L->ndoc] = starts[i], L->e[L->ndoc] = e, L->ndoc++;
            for (int t = starts[i]; t < e; t++) L->ds[(size_t)b * T + t] = starts[i];
        }
    }
}

// rows [s, e) of row b of a [B*T, ld] array, copied to [e-s, ld]
static float *slice(const float *a, int T, int ld, int b, int s, int e) {
    float *r = xmalloc((size_t)(e - s) * ld * sizeof(float) + 4);
    memcpy(r, a + ((size_t)b * T + s) * ld, (size_t)(e - s) * ld * sizeof(float));
    return r;
}
// max |a - b| / max |b| over rows x cols (a strided by lda at row offset, b the
// reference, stride ldb)
static double rel(const float *a, int lda, const float *b, int ldb, int rows, int cols) {
    double d = 0, m = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            d = fmax(d, fabs((double)a[(size_t)r * lda + c] - b[(size_t)r * ldb + c]));
            m = fmax(m, fabs(b[(size_t)r * ldb + c]));
        }
    return m > 0 ? d / m : d;
}

static void test_doc_starts(void) {
    Layout L;
    layout_make(&L, 3, 300, 1);
    int32_t *got = xmalloc((size_t)L.B * L.T * 4);
    cpu_doc_starts(got, L.ids, L.B, L.T, EOD);
    CHECK(!memcmp(got, L.ds, (size_t)L.B * L.T * 4), "doc_starts differs from the layout");
    printf("doc_starts: %d documents in 3 rows of 300 match\n", L.ndoc);
    free(got), free(L.ids), free(L.ds);
}

// ---- conv: each document alone (zero history) vs packed; dw = the sum over
// documents; the state
static void test_conv(void) {
    const int B = 2, T = 300, D = 24, K = 4;
    Layout L;
    layout_make(&L, B, T, 1);
    size_t N = (size_t)B * T;
    float *x = vec_u(N * D, -2, 2), *w = vec_u((size_t)D * K, -1, 1), *dy = vec_u(N * D, -1, 1);
    float *s0 = vec_u((size_t)B * D * (K - 1), -1, 1), *s_out = zeros((size_t)B * D * (K - 1));
    float *y = zeros(N * D), *dx = zeros(N * D), *dw = zeros((size_t)D * K), *dw_sum = zeros((size_t)D * K);
    cpu_conv_silu_fwd(y, D, x, D, w, s0, s_out, B, T, D, K, L.ds);
    cpu_conv_silu_bwd(dx, D, dw, dy, D, x, D, w, B, T, D, K, L.ds);
    double wy = 0, wdx = 0, wst = 0;
    for (int i = 0; i < L.ndoc; i++) {
        int b = L.b[i], s = L.s[i], n = L.e[i] - s;
        float *xa = slice(x, T, D, b, s, L.e[i]), *dya = slice(dy, T, D, b, s, L.e[i]);
        float *ya = zeros((size_t)n * D), *dxa = zeros((size_t)n * D), *sa = zeros((size_t)D * (K - 1));
        const float *sin = s == 0 ? s0 + (size_t)b * D * (K - 1) : NULL; // only the first document sees state_in
        cpu_conv_silu_fwd(ya, D, xa, D, w, sin, sa, 1, n, D, K, NULL);
        cpu_conv_silu_bwd(dxa, D, dw_sum, dya, D, xa, D, w, 1, n, D, K, NULL);
        wy = fmax(wy, rel(y + ((size_t)b * T + s) * D, D, ya, D, n, D));
        wdx = fmax(wdx, rel(dx + ((size_t)b * T + s) * D, D, dxa, D, n, D));
        if (L.e[i] == T) wst = fmax(wst, rel(s_out + (size_t)b * D * (K - 1), 0, sa, 0, 1, D * (K - 1)));
        free(xa), free(dya), free(ya), free(dxa), free(sa);
    }
    double wdw = rel(dw, 0, dw_sum, 0, 1, D * K);
    CHECK(wy <= TOL && wdx <= TOL && wst <= TOL && wdw <= TOL,
          "conv packed vs alone: y %.1e dx %.1e state %.1e dw %.1e", wy, wdx, wst, wdw);
    printf("conv packed (%d docs) vs alone: y %.1e dx %.1e state %.1e dw %.1e\n", L.ndoc, wy, wdx, wst, wdw);
    // bitwise: a doc_start of zeros (no EOD) is the NULL path
    int32_t *z = xcalloc(N, 4);
    float *y1 = zeros(N * D), *y2 = zeros(N * D), *dx1 = zeros(N * D), *dx2 = zeros(N * D);
    float *dw1 = zeros((size_t)D * K), *dw2 = zeros((size_t)D * K);
    cpu_conv_silu_fwd(y1, D, x, D, w, s0, NULL, B, T, D, K, NULL),
        cpu_conv_silu_fwd(y2, D, x, D, w, s0, NULL, B, T, D, K, z);
    cpu_conv_silu_bwd(dx1, D, dw1, dy, D, x, D, w, B, T, D, K, NULL);
    cpu_conv_silu_bwd(dx2, D, dw2, dy, D, x, D, w, B, T, D, K, z);
    CHECK(!memcmp(y1, y2, N * D * 4) && !memcmp(dx1, dx2, N * D * 4) && !memcmp(dw1, dw2, (size_t)D * K * 4),
          "conv: one document per row differs from doc_start NULL");
    free(z), free(y1), free(y2), free(dx1), free(dx2), free(dw1), free(dw2);
    free(x), free(w), free(dy), free(s0), free(s_out), free(y), free(dx), free(dw), free(dw_sum), free(L.ids),
        free(L.ds);
}

// ---- delta rule, both forms
// The delta rule with its arguments listed out (this test's calls read as shapes); g_recurrent picks the form.
static int g_recurrent;
static void fwd(void *o, int ldo, void *h_save, float *state, const void *q, const void *k, int ldqk, const void *v,
                int ldv, const float *beta, const float *gamma, int B, int T, int H, int HV, int dk, int dv,
                float scale, const int32_t *ds) {
    DeltaRuleArgs a = {.q = q, .k = k, .ldqk = ldqk, .v = v, .ldv = ldv, .beta = beta, .gamma = gamma,
                       .h_save = h_save, .B = B, .T = T, .H = H, .HV = HV, .dk = dk, .dv = dv, .scale = scale,
                       .doc_start = ds};
    (g_recurrent ? cpu_delta_rule_recurrent_fwd : cpu_delta_rule_fwd)(&a, o, ldo, state);
}
static void bwd(void *dq, void *dk_, int lddqk, void *dv_, int lddv, float *dbeta, float *dgamma, const void *do_,
                int lddo, const void *h_save, const void *q, const void *k, int ldqk, const void *v, int ldv,
                const float *beta, const float *gamma, int B, int T, int H, int HV, int dk, int dv, float scale,
                const int32_t *ds) {
    DeltaRuleArgs a = {.q = q, .k = k, .ldqk = ldqk, .v = v, .ldv = ldv, .beta = beta, .gamma = gamma,
                       .h_save = (void *)h_save, .B = B, .T = T, .H = H, .HV = HV, .dk = dk, .dv = dv,
                       .scale = scale, .doc_start = ds};
    DeltaRuleGrads g = {.dq = dq, .dk = dk_, .lddqk = lddqk, .dv = dv_, .lddv = lddv, .dbeta = dbeta, .dgamma = dgamma};
    (g_recurrent ? cpu_delta_rule_recurrent_bwd : cpu_delta_rule_bwd)(&a, do_, lddo, &g);
}

static void l2rows(float *a, size_t rows, int ld, int heads, int d) {
    for (size_t n = 0; n < rows; n++)
        for (int i = 0; i < heads; i++) {
            float *r = a + n * ld + (size_t)i * d;
            double ss = 0;
            for (int x = 0; x < d; x++) ss += (double)r[x] * r[x];
            for (int x = 0; x < d; x++) r[x] = (float)(r[x] / sqrt(ss));
        }
}

static void test_delta(int recurrent, int row1_many) {
    g_recurrent = recurrent;
    const int B = 2, T = 300, H = 2, HV = 4, dk = 16, dv = 8, Kd = H * dk, Vd = HV * dv;
    const float scale = 1.0f / sqrtf((float)dk);
    Layout L;
    layout_make(&L, B, T, row1_many);
    size_t N = (size_t)B * T, SS = (size_t)dk * dv, NT = (T + 63) / 64;
    float *q = vec_u(N * Kd, -1, 1), *k = vec_u(N * Kd, -1, 1), *v = vec_u(N * Vd, -1, 1);
    l2rows(q, N, Kd, H, dk), l2rows(k, N, Kd, H, dk);
    float *beta = vec_u(N * HV, 0.02, 0.98), *gamma = zeros(N * HV), *dO = vec_u(N * Vd, -1, 1);
    for (size_t i = 0; i < N * HV; i++) gamma[i] = -expf((float)(log(1e-3) + (log(5.0) - log(1e-3)) * urand()));
    float *st = vec_u((size_t)B * HV * SS, -0.5, 0.5), *st0 = xmalloc((size_t)B * HV * SS * 4);
    memcpy(st0, st, (size_t)B * HV * SS * 4);
    float *o = zeros(N * Vd), *hs = zeros((size_t)B * HV * NT * SS);
    float *dq = zeros(N * Kd), *dk_ = zeros(N * Kd), *dv_ = zeros(N * Vd), *db = zeros(N * HV), *dg = zeros(N * HV);
    fwd(o, Vd, NULL, st, q, k, Kd, v, Vd, beta, gamma, B, T, H, HV, dk, dv, scale,
        L.ds); // from st: o, final state
    float *o0 = zeros(N * Vd);
    fwd(o0, Vd, hs, NULL, q, k, Kd, v, Vd, beta, gamma, B, T, H, HV, dk, dv, scale, L.ds); // training: zero start
    bwd(dq, dk_, Kd, dv_, Vd, db, dg, dO, Vd, hs, q, k, Kd, v, Vd, beta, gamma, B, T, H, HV, dk, dv, scale, L.ds);
    double w[8] = {0}; // o (from state), final state, o0, dq, dk, dv, dbeta, dgamma
    for (int i = 0; i < L.ndoc; i++) {
        int b = L.b[i], s = L.s[i], e = L.e[i], n = e - s;
        float *qa = slice(q, T, Kd, b, s, e), *ka = slice(k, T, Kd, b, s, e), *va = slice(v, T, Vd, b, s, e);
        float *ba = slice(beta, T, HV, b, s, e), *ga = slice(gamma, T, HV, b, s, e), *da = slice(dO, T, Vd, b, s, e);
        float *oa = zeros((size_t)n * Vd), *sa = zeros(HV * SS);
        if (s == 0) memcpy(sa, st0 + (size_t)b * HV * SS,
                           HV * SS * 4); // the first document starts from the state
        fwd(oa, Vd, NULL, sa, qa, ka, Kd, va, Vd, ba, ga, 1, n, H, HV, dk, dv, scale, NULL);
        w[0] = fmax(w[0], rel(o + ((size_t)b * T + s) * Vd, Vd, oa, Vd, n, Vd));
        if (e == T) w[1] = fmax(w[1], rel(st + (size_t)b * HV * SS, 0, sa, 0, 1, (int)(HV * SS)));
        float *qd = zeros((size_t)n * Kd), *kd = zeros((size_t)n * Kd), *vd = zeros((size_t)n * Vd);
        float *bd = zeros((size_t)n * HV), *gd = zeros((size_t)n * HV);
        fwd(oa, Vd, NULL, NULL, qa, ka, Kd, va, Vd, ba, ga, 1, n, H, HV, dk, dv, scale, NULL);
        bwd(qd, kd, Kd, vd, Vd, bd, gd, da, Vd, NULL, qa, ka, Kd, va, Vd, ba, ga, 1, n, H, HV, dk, dv, scale, NULL);
        size_t r0 = (size_t)b * T + s;
        w[2] = fmax(w[2], rel(o0 + r0 * Vd, Vd, oa, Vd, n, Vd));
        w[3] = fmax(w[3], rel(dq + r0 * Kd, Kd, qd, Kd, n, Kd));
        w[4] = fmax(w[4], rel(dk_ + r0 * Kd, Kd, kd, Kd, n, Kd));
        w[5] = fmax(w[5], rel(dv_ + r0 * Vd, Vd, vd, Vd, n, Vd));
        w[6] = fmax(w[6], rel(db + r0 * HV, HV, bd, HV, n, HV));
        w[7] = fmax(w[7], rel(dg + r0 * HV, HV, gd, HV, n, HV));
        free(qa), free(ka), free(va), free(ba), free(ga), free(da), free(oa), free(sa);
        free(qd), free(kd), free(vd), free(bd), free(gd);
    }
    double worst = 0;
    for (int i = 0; i < 8; i++) worst = fmax(worst, w[i]);
    const char *form = recurrent ? "recurrent" : "chunk";
    CHECK(worst <= TOL, "delta %s packed vs alone: worst %.1e", form, worst);
    printf("delta %-9s packed (%3d docs) vs alone: o %.1e state %.1e o0 %.1e dq "
           "%.1e dk %.1e dv %.1e dbeta %.1e "
           "dgamma %.1e\n",
           form, L.ndoc, w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]);
    // bitwise: doc_start all zero (no EOD) is the NULL path
    int32_t *z = xcalloc(N, 4);
    float *o1 = zeros(N * Vd), *o2 = zeros(N * Vd), *g1 = zeros(N * HV), *g2 = zeros(N * HV);
    float *s1 = xmalloc((size_t)B * HV * SS * 4), *s2 = xmalloc((size_t)B * HV * SS * 4);
    memcpy(s1, st0, (size_t)B * HV * SS * 4), memcpy(s2, st0, (size_t)B * HV * SS * 4);
    fwd(o1, Vd, NULL, s1, q, k, Kd, v, Vd, beta, gamma, B, T, H, HV, dk, dv, scale, NULL);
    fwd(o2, Vd, NULL, s2, q, k, Kd, v, Vd, beta, gamma, B, T, H, HV, dk, dv, scale, z);
    bwd(dq, dk_, Kd, dv_, Vd, db, g1, dO, Vd, NULL, q, k, Kd, v, Vd, beta, gamma, B, T, H, HV, dk, dv, scale, NULL);
    bwd(dq, dk_, Kd, dv_, Vd, db, g2, dO, Vd, NULL, q, k, Kd, v, Vd, beta, gamma, B, T, H, HV, dk, dv, scale, z);
    CHECK(!memcmp(o1, o2, N * Vd * 4) && !memcmp(s1, s2, (size_t)B * HV * SS * 4) && !memcmp(g1, g2, N * HV * 4),
          "delta %s: one document per row differs from doc_start NULL", form);
    free(z), free(o1), free(o2), free(g1), free(g2), free(s1), free(s2);
    free(q), free(k), free(v), free(beta), free(gamma), free(dO), free(st), free(st0), free(o), free(o0), free(hs);
    free(dq), free(dk_), free(dv_), free(db), free(dg), free(L.ids), free(L.ds);
}

// ---- the model: a document packed between others gives its logits and
// parameter gradients alone
// attn: 0 pure GDN; 1 a hybrid (block 1 softmax attention, GQA 2, qkv biases); 2 the same with a window of 20
static Config tiny(const char *form, int reset, int attn) {
    Config c;
    config_defaults(&c);
    c.hidden_size = 32, c.num_layers = 4, c.num_heads = 2, c.num_v_heads = 4, c.head_dim = 16, c.v_head_dim = 16;
    c.ffn_hidden_size = 64, c.vocab_size = 61, c.eos_token_id = EOD, c.init_std = 0.1f;
    c.reset_state_at_eod = reset;
    snprintf(c.delta_rule, sizeof c.delta_rule, "%s", form);
    if (attn) {
        snprintf(c.attn_layers, sizeof c.attn_layers, "1");
        c.attn_num_heads = 4, c.attn_num_kv_heads = 2, c.attn_qkv_bias = 1, c.attn_window_size = attn == 2 ? 20 : 0;
    }
    return c;
}

static void test_model(const char *form, int attn) {
    static const char *kinds[] = {"", " hybrid", " hybrid window 20"};
    const int B = 2, T = 150, s = 60,
              e = 135; // the document: row 1, [60, 135) (crosses the chunk edge
                       // at 64, 128)
    Config c = tiny(form, 1, attn);
    Model *m = model_create(&c, backend_with_delta_rule(backend_cpu(), c.delta_rule), 1);
    size_t P = m->lay.total;
    float *params = xmalloc(P * 4);
    params_init(&m->lay, params, 11);
    for (int i = 0; i < m->lay.ntensors; i++) // the qkv biases start at 0: give them values that matter
        if (attn && m->lay.tensors[i].init == INIT_ZEROS)
            for (size_t j = 0; j < m->lay.tensors[i].numel; j++) params[m->lay.tensors[i].off + j] = (float)(urand() - 0.5);
    model_set_params(m, params);
    int32_t ids[B * T], tgt[B * T];
    for (int n = 0; n < B * T; n++) ids[n] = 4 + (int)(urand() * 57);
    int cuts[] = {T + 5, T + 17, T + 18, T + s, T + e}; // row 1: documents start here (EOD before each)
    for (int i = 0; i < 5; i++) ids[cuts[i] - 1] = EOD;
    ids[40] = EOD, ids[63] = EOD; // row 0 is packed too
    for (int n = 0; n < B * T; n++) tgt[n] = -1;
    for (int t = s; t < e; t++) tgt[T + t] = t + 1 < T ? ids[T + t + 1] : -1; // the loss of the document only
    model_zero_grads(m);
    model_fwd_bwd(m, ids, tgt, B, T, 1.0f, 0);
    float *lp = xmalloc((size_t)(e - s) * c.vocab_size * 4), *gp = xmalloc(P * 4);
    model_logits(m, T + s, e - s, lp);
    model_get_grads(m, gp);
    // alone: B = 1, the document's tokens, the same targets
    model_zero_grads(m);
    model_fwd_bwd(m, ids + T + s, tgt + T + s, 1, e - s, 1.0f, 0);
    float *la = xmalloc((size_t)(e - s) * c.vocab_size * 4), *ga = xmalloc(P * 4);
    model_logits(m, 0, e - s, la);
    model_get_grads(m, ga);
    double rl = rel(lp, 0, la, 0, 1, (e - s) * c.vocab_size), rg = 0;
    for (int i = 0; i < m->lay.ntensors; i++) {
        const TensorInfo *t = &m->lay.tensors[i];
        double r = rel(gp + t->off, 0, ga + t->off, 0, 1, (int)t->numel);
        CHECK(r <= TOL, "model %s%s: grad %s packed vs alone %.1e", form, kinds[attn], t->name, r);
        rg = fmax(rg, r);
    }
    CHECK(rl <= TOL, "model %s%s: logits packed vs alone %.1e", form, kinds[attn], rl);
    printf("model %-9s%s document packed vs alone: logits %.1e, worst parameter "
           "gradient %.1e (%d tensors)\n",
           form, kinds[attn], rl, rg, m->lay.ntensors);
    model_free(m);
    // key on, rows without EOD: bit-identical to the key off
    for (int n = 0; n < B * T; n++) ids[n] = ids[n] == EOD ? EOD + 1 : ids[n], tgt[n] = ids[(n + 1) % (B * T)];
    float *g_on = xmalloc(P * 4), *g_off = xmalloc(P * 4);
    for (int on = 0; on < 2; on++) {
        Config ck = tiny(form, on, attn);
        Model *mk = model_create(&ck, backend_with_delta_rule(backend_cpu(), ck.delta_rule), 1);
        model_set_params(mk, params);
        model_zero_grads(mk);
        model_fwd_bwd(mk, ids, tgt, B, T, 1.0f, 0);
        model_get_grads(mk, on ? g_on : g_off);
        model_free(mk);
    }
    CHECK(!memcmp(g_on, g_off, P * 4), "model %s%s: reset_state_at_eod without EOD is not bit-identical", form,
          kinds[attn]);
    free(params), free(lp), free(gp), free(la), free(ga), free(g_on), free(g_off);
}

int main(void) {
    test_doc_starts();
    test_conv();
    for (int rec = 0; rec < 2; rec++) {
        test_delta(rec, 1);
        test_delta(rec, 0);
    }
    for (int attn = 0; attn < 3; attn++) {
        test_model("chunk", attn);
        test_model("recurrent", attn);
    }
    printf("%d checks, %d failures\n", checks, failures);
    return failures != 0;
}
