// cases_attn.c: test_cuda_ops' cases for softmax attention: the qkv projection with RoPE and the attention itself
// (windows, GQA, KV cache steps).
// Each run_* wrapper calls one op through the Backend table; each cases_* adds cases (harness.h).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gpu/ops/harness.h"

static void run_attn_qkv_fwd(const Backend *be, void **p, const Case *c) {
    // P, bias, pos, Q, K, V, doc_start;  i: B T Ha Hkv d ldp kvs;  f: theta
    be->attn_qkv_fwd(p[3], p[4], p[5], c->i[6], p[0], c->i[5], p[1], p[2], c->i[0], c->i[1], c->i[2], c->i[3],
                     c->i[4], c->f[0], p[6]);
}

static void run_attn_qkv_bwd(const Backend *be, void **p, const Case *c) {
    // dQ, dK, dV, dP, dbias, doc_start;  i: B T Ha Hkv d lddp
    be->attn_qkv_bwd(p[3], c->i[5], p[4], p[0], p[1], p[2], c->i[0], c->i[1], c->i[2], c->i[3], c->i[4], c->f[0],
                     p[5]);
}

static void run_attn_fwd(const Backend *be, void **p, const Case *c) {
    // Q, K, V, pos, O, lse, doc_start;  i: B T Ha Hkv d window kvs;  f: scale
    be->attn_fwd(p[4], p[5], p[0], p[1], p[2], c->i[6], p[3], c->i[0], c->i[1], c->i[2], c->i[3], c->i[4], c->i[5],
                 c->f[0], p[6]);
}

static void run_attn_bwd(const Backend *be, void **p, const Case *c) {
    // Q, K, V, O, dO, lse, dQ, dK, dV, doc_start;  i: B T Ha Hkv d window;  f: scale
    be->attn_bwd(p[6], p[7], p[8], p[4], p[0], p[1], p[2], p[3], p[5], c->i[0], c->i[1], c->i[2], c->i[3], c->i[4],
                 c->i[5], c->f[0], p[9]);
}

static void add_attn_doc_start(Case *c, Rng *g, AttnShape s, const int32_t *copy) {
    if (!copy && s.docs == 3) {
        Tensor *ds = add_in(c, "doc_start", K_I32, (size_t)s.B * s.T, 1, 1);
        int32_t *ids = xmalloc((size_t)s.B * s.T * 4 + 4);
        doc_layout_random(g, ids, ds->init_i, s.B, s.T);
        free(ids);
    } else if (!copy) {
        add_doc_start(c, g, s.B, s.T, s.docs);
    } else {
        memcpy(add_in(c, "doc_start", K_I32, (size_t)s.B * s.T, 1, 1)->init_i, copy, (size_t)s.B * s.T * 4);
    }
}

static void run_matmul_bias_fwd(const Backend *be, void **p, const Case *c) {
    // x, W, bias, y;  i: M N K ldx ldy
    be->matmul_bias_fwd(p[3], c->i[4], p[0], c->i[3], p[1], p[2], c->i[0], c->i[1], c->i[2]);
}

void cases_attention(Rng *g, AttnShape s) {
    int N = s.B * s.T, Dq = s.Ha * s.d, Dkv = s.Hkv * s.d, W = Dq + 2 * Dkv, ldp = W + s.pad;
    int kvs = s.kvs ? s.kvs : s.T;
    char shape[128];
    snprintf(shape, sizeof shape, "B=%d T=%d Ha=%d Hkv=%d d=%d window=%d pos=%d kv_rows=%d%s%s", s.B, s.T, s.Ha, s.Hkv,
             s.d, s.window, s.pos, kvs, s.bias ? " bias" : "", s.pad ? " ld+" : "");
    Case *c = new_case("attn_qkv_fwd", run_attn_qkv_fwd, "%s", shape);
    c->big = s.big;
    c->i[0] = s.B, c->i[1] = s.T, c->i[2] = s.Ha, c->i[3] = s.Hkv, c->i[4] = s.d, c->i[5] = ldp, c->i[6] = kvs;
    c->f[0] = 10000.0f;
    fill_normal(add_in(c, "P", K_ACT, N, W, ldp), g, 0, 1);
    Tensor *bias = add_in(c, "bias", K_F32, 1, W, 0);
    if (s.bias) fill_normal(bias, g, 0, 0.5f);
    else bias->is_null = 1;
    add_in(c, "pos", K_I32, 1, 1, 0)->init_i[0] = s.pos;
    if (s.docs) c->t[c->nt - 1].is_null = 1; // documents only in the training layout
    add_t(c, "Q", K_ACT, R_OUT, N, Dq, 0, F32_ROPE, B16_ROPE);
    fill_normal(add_t(c, "K", K_ACT, R_ACC, (size_t)s.B * kvs, Dkv, 0, F32_ROPE, B16_ROPE), g, 0, 1);
    fill_normal(add_t(c, "V", K_ACT, R_ACC, (size_t)s.B * kvs, Dkv, 0, F32_EXACT, B16_STORE), g, 0, 1);
    add_attn_doc_start(c, g, s, NULL);
    const int32_t *ds = c->t[c->nt - 1].is_null ? NULL : c->t[c->nt - 1].init_i; // one layout for all four ops

    c = new_case("attn_fwd", run_attn_fwd, "%s", shape);
    c->big = s.big;
    c->i[0] = s.B, c->i[1] = s.T, c->i[2] = s.Ha, c->i[3] = s.Hkv, c->i[4] = s.d, c->i[5] = s.window, c->i[6] = kvs;
    c->f[0] = 1.0f / sqrtf((float)s.d);
    fill_normal(add_in(c, "Q", K_ACT, N, Dq, 0), g, 0, 1);
    fill_normal(add_in(c, "K", K_ACT, (size_t)s.B * kvs, Dkv, 0), g, 0, 1);
    fill_normal(add_in(c, "V", K_ACT, (size_t)s.B * kvs, Dkv, 0), g, 0, 1);
    add_in(c, "pos", K_I32, 1, 1, 0)->init_i[0] = s.pos;
    if (s.docs) c->t[c->nt - 1].is_null = 1;
    add_t(c, "O", K_ACT, R_OUT, N, Dq, 0, F32_ORDER, B16_FLASH);
    Tensor *lse = add_t(c, "lse", K_F32, R_OUT, (size_t)s.B * s.Ha, s.T, 0, F32_ORDER, B16_FP32);
    if (s.pos) lse->is_null = 1; // inference calls keep no statistics
    if (ds) add_attn_doc_start(c, g, s, ds);
    else add_in(c, "doc_start", K_I32, 1, 1, 1)->is_null = 1;

    if (s.pos || s.kvs) return; // the backward is training-only: pos 0, kv rows = T
    c = new_case("attn_qkv_bwd", run_attn_qkv_bwd, "%s", shape);
    c->big = s.big;
    c->i[0] = s.B, c->i[1] = s.T, c->i[2] = s.Ha, c->i[3] = s.Hkv, c->i[4] = s.d, c->i[5] = ldp;
    c->f[0] = 10000.0f;
    fill_normal(add_in(c, "dQ", K_ACT, N, Dq, 0), g, 0, 1);
    fill_normal(add_in(c, "dK", K_ACT, N, Dkv, 0), g, 0, 1);
    fill_normal(add_in(c, "dV", K_ACT, N, Dkv, 0), g, 0, 1);
    add_t(c, "dP", K_ACT, R_OUT, N, W, ldp, F32_ROPE, B16_ROPE);
    Tensor *db = add_t(c, "dbias", K_F32, R_ACC, 1, W, 0, F32_ORDER, B16_DA_SUM); // sums the bf16 dP, as FLA
    if (s.bias) fill_normal(db, g, 0, 1);
    else db->is_null = 1;
    if (ds) add_attn_doc_start(c, g, s, ds);
    else add_in(c, "doc_start", K_I32, 1, 1, 1)->is_null = 1;

    // O and lse from the CPU forward on the same inputs, so P recomputed from lse is a softmax
    c = new_case("attn_bwd", run_attn_bwd, "%s", shape);
    c->big = s.big;
    c->i[0] = s.B, c->i[1] = s.T, c->i[2] = s.Ha, c->i[3] = s.Hkv, c->i[4] = s.d, c->i[5] = s.window;
    c->f[0] = 1.0f / sqrtf((float)s.d);
    Tensor *Q = add_in(c, "Q", K_ACT, N, Dq, 0), *K = add_in(c, "K", K_ACT, N, Dkv, 0), *V = add_in(c, "V", K_ACT, N, Dkv, 0);
    fill_normal(Q, g, 0, 1), fill_normal(K, g, 0, 1), fill_normal(V, g, 0, 1);
    for (size_t e = 0; e < tsize(Q); e++) Q->init[e] = round_bf16(Q->init[e]);
    for (size_t e = 0; e < tsize(K); e++) K->init[e] = round_bf16(K->init[e]), V->init[e] = round_bf16(V->init[e]);
    Tensor *O = add_in(c, "O", K_ACT, N, Dq, 0);
    fill_normal(add_in(c, "dO", K_ACT, N, Dq, 0), g, 0, 1);
    Tensor *L = add_in(c, "lse", K_F32, (size_t)s.B * s.Ha, s.T, 0);
    backend_cpu()->attn_fwd(O->init, L->init, Q->init, K->init, V->init, s.T, NULL, s.B, s.T, s.Ha, s.Hkv, s.d,
                            s.window, c->f[0], ds);
    add_t(c, "dQ", K_ACT, R_OUT, N, Dq, 0, F32_ORDER, B16_FLASH);
    add_t(c, "dK", K_ACT, R_OUT, N, Dkv, 0, F32_ORDER, B16_FLASH);
    add_t(c, "dV", K_ACT, R_OUT, N, Dkv, 0, F32_ORDER, B16_FLASH);
    if (ds) add_attn_doc_start(c, g, s, ds);
    else add_in(c, "doc_start", K_I32, 1, 1, 1)->is_null = 1;
}

// The q|k|v projection with its bias (issue 21): y = x W^T + b with the bias added before y's one rounding, as
// torch's Linear. exact: small integers (x) and multiples of 1/16 (W, bias) make every product and sum exact in
// fp32, so the bf16 result must be exactly the CPU's fp32 result rounded once (round_ref); adding the bias after a
// first rounding of x W^T (the old order) misses it by an ulp wherever x W^T has more than 8 significant bits.
static void cases_matmul_bias(Rng *g, int M, int N, int K, int pad, int exact) {
    int ldx = K + pad, ldy = N + pad;
    Case *c = new_case("matmul_bias_fwd", run_matmul_bias_fwd, "M=%d N=%d K=%d ld+%d%s", M, N, K, pad,
                       exact ? " exact sums" : "");
    c->i[0] = M, c->i[1] = N, c->i[2] = K, c->i[3] = ldx, c->i[4] = ldy;
    Tensor *x = add_in(c, "x", K_ACT, M, K, ldx), *W = add_in(c, "W", K_ACT, N, K, 0), *b = add_in(c, "bias", K_ACT, 1, N, 0);
    if (exact) {
        for (size_t e = 0; e < tsize(x); e++) x->init[e] = (float)((int)(rng_u64(g) % 17) - 8);
        for (size_t e = 0; e < tsize(W); e++) W->init[e] = (float)((int)(rng_u64(g) % 17) - 8) / 16.0f;
        for (size_t e = 0; e < tsize(b); e++) b->init[e] = (float)((int)(rng_u64(g) % 33) - 16) / 16.0f;
        add_t(c, "y", K_ACT, R_OUT, M, N, ldy, F32_EXACT, B16_EXACT)->round_ref = 1;
    } else {
        fill_normal(x, g, 0, 1), fill_normal(W, g, 0, 0.05f), fill_normal(b, g, 0, 0.5f);
        add_t(c, "y", K_ACT, R_OUT, M, N, ldy, F32_GEMM, B16_STORE);
    }
}

// Attention cases of issues 14/21 (packed documents; the d = 128 tensor-core backward; the biased q|k|v GEMM; the
// ring KV cache), kept
// apart with their own random stream so the cases before and after them draw what they drew before.
void cases_attention_packed_and_d128(void) {
    Rng g = {20261202};
    cases_matmul_bias(&g, 37, 48, 40, 3, 0);
    cases_matmul_bias(&g, 70, 96, 24, 0, 1);
    //                            B    T  Ha Hkv   d  win pos kvs bias pad big docs
    cases_attention(&g, (AttnShape){1, 160, 2, 1, 32, 0, 0, 0, 1, 3, 0, 1});   // CUDA-core kernels, fixed starts
    cases_attention(&g, (AttnShape){1, 600, 2, 1, 64, 0, 0, 0, 0, 0, 0, 2});   // tensor cores, ~200 documents
    cases_attention(&g, (AttnShape){1, 300, 2, 1, 64, 40, 0, 0, 1, 0, 0, 1});  // documents and a window
    cases_attention(&g, (AttnShape){1, 200, 2, 1, 128, 0, 0, 0, 0, 0, 0, 1});  // d = 128, fixed starts
    cases_attention(&g, (AttnShape){1, 400, 2, 1, 128, 0, 0, 0, 0, 0, 0, 2});  // d = 128, many documents
    cases_attention(&g, (AttnShape){1, 150, 4, 2, 128, 0, 0, 0, 1, 0, 0, 0});  // d = 128 backward: GQA 2, partial tile
    cases_attention(&g, (AttnShape){1, 200, 2, 1, 128, 50, 0, 0, 0, 0, 0, 0}); // d = 128 backward: window skips
    // a windowed KV cache is a ring (row = position mod kv rows): a decode step past the capacity, and a prefill
    // chunk whose rows wrap (tensor cores: 64-row tiles of a 128-row ring)
    cases_attention(&g, (AttnShape){2, 1, 4, 2, 32, 20, 300, 256, 0, 0, 0, 0});
    cases_attention(&g, (AttnShape){1, 40, 2, 1, 64, 30, 500, 128, 1, 0, 0, 0});
}
