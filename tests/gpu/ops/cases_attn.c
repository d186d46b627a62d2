// cases_attn.c: test_cuda_ops' cases for softmax attention: the qkv projection with RoPE and the attention itself
// (windows, GQA, KV cache steps).
// Each run_* wrapper calls one op through the Backend table; each cases_* adds cases (harness.h).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gpu/ops/harness.h"

static void run_attn_qkv_fwd(const Backend *be, void **p, const Case *c) {
    // P, bias, pos, Q, K, V;  i: B T Ha Hkv d ldp kvs;  f: theta
    be->attn_qkv_fwd(p[3], p[4], p[5], c->i[6], p[0], c->i[5], p[1], p[2], c->i[0], c->i[1], c->i[2], c->i[3],
                     c->i[4], c->f[0]);
}

static void run_attn_qkv_bwd(const Backend *be, void **p, const Case *c) {
    // dQ, dK, dV, dP, dbias;  i: B T Ha Hkv d lddp
    be->attn_qkv_bwd(p[3], c->i[5], p[4], p[0], p[1], p[2], c->i[0], c->i[1], c->i[2], c->i[3], c->i[4], c->f[0]);
}

static void run_attn_fwd(const Backend *be, void **p, const Case *c) {
    // Q, K, V, pos, O, lse;  i: B T Ha Hkv d window kvs;  f: scale
    be->attn_fwd(p[4], p[5], p[0], p[1], p[2], c->i[6], p[3], c->i[0], c->i[1], c->i[2], c->i[3], c->i[4], c->i[5],
                 c->f[0]);
}

static void run_attn_bwd(const Backend *be, void **p, const Case *c) {
    // Q, K, V, O, dO, lse, dQ, dK, dV;  i: B T Ha Hkv d window;  f: scale
    be->attn_bwd(p[6], p[7], p[8], p[4], p[0], p[1], p[2], p[3], p[5], c->i[0], c->i[1], c->i[2], c->i[3], c->i[4],
                 c->i[5], c->f[0]);
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
    add_t(c, "Q", K_ACT, R_OUT, N, Dq, 0, F32_ROPE, B16_ROPE);
    fill_normal(add_t(c, "K", K_ACT, R_ACC, (size_t)s.B * kvs, Dkv, 0, F32_ROPE, B16_ROPE), g, 0, 1);
    fill_normal(add_t(c, "V", K_ACT, R_ACC, (size_t)s.B * kvs, Dkv, 0, F32_EXACT, B16_STORE), g, 0, 1);

    c = new_case("attn_fwd", run_attn_fwd, "%s", shape);
    c->big = s.big;
    c->i[0] = s.B, c->i[1] = s.T, c->i[2] = s.Ha, c->i[3] = s.Hkv, c->i[4] = s.d, c->i[5] = s.window, c->i[6] = kvs;
    c->f[0] = 1.0f / sqrtf((float)s.d);
    fill_normal(add_in(c, "Q", K_ACT, N, Dq, 0), g, 0, 1);
    fill_normal(add_in(c, "K", K_ACT, (size_t)s.B * kvs, Dkv, 0), g, 0, 1);
    fill_normal(add_in(c, "V", K_ACT, (size_t)s.B * kvs, Dkv, 0), g, 0, 1);
    add_in(c, "pos", K_I32, 1, 1, 0)->init_i[0] = s.pos;
    add_t(c, "O", K_ACT, R_OUT, N, Dq, 0, F32_ORDER, B16_FLASH);
    Tensor *lse = add_t(c, "lse", K_F32, R_OUT, (size_t)s.B * s.Ha, s.T, 0, F32_ORDER, B16_FP32);
    if (s.pos) lse->is_null = 1; // inference calls keep no statistics

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
                            s.window, c->f[0]);
    add_t(c, "dQ", K_ACT, R_OUT, N, Dq, 0, F32_ORDER, B16_FLASH);
    add_t(c, "dK", K_ACT, R_OUT, N, Dkv, 0, F32_ORDER, B16_FLASH);
    add_t(c, "dV", K_ACT, R_OUT, N, Dkv, 0, F32_ORDER, B16_FLASH);
}
