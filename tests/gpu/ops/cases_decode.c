// cases_decode.c: test_cuda_ops' cases for the ops fused for decoding (backend.h): the GDN token mixer
// (gdn_decode_fwd: conv step, L2 norms, gates, delta-rule step, gated RMSNorm, and the reset of both states after
// an EOD token), and the small-M GEMMs with the RMSNorm or SwiGLU before them (rmsnorm_matmul_fwd,
// swiglu_matmul_fwd; matmul_fwd at M <= 4 takes the same GEMV kernel: cases_matmul with small M), the lm head
// with the final norm and the argmax (lmhead_norm_argmax), and the reset of a state whose row ended in EOD across
// forward calls (state_reset_at_eod); a GDN block's whole decode step (gdn_decode_block_fwd).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gpu/ops/harness.h"

static const Tol B16_DECODE = {3e-2f, "bf16 roundings of the conv output, q, k and o (where the unfused graph stores "
                                      "them), <= 2^-8 each, through the norms and the state update"};
static const Tol B16_NORM_GEMM = {1e-2f, "the normed (or SwiGLU) row rounded to bf16 before the GEMM, as the unfused "
                                         "op stores it, <= 2^-8 per term, plus one bf16 rounding of the output"};

static void run_gdn_decode(const Backend *be, void **p, const Case *c) {
    // P, conv_w, A_log, dt_bias, norm_w, ids, conv_state, S, y;  i: B H HV dk dv K ldp ldy eod;  f: eps
    const int *I = c->i;
    be->gdn_decode_fwd(p[8], I[7], p[0], I[6], p[1], p[6], p[7], p[2], p[3], p[4], p[5], I[8], I[0], I[1], I[2],
                       I[3], I[4], I[5], c->f[0]);
}

void cases_gdn_decode(Rng *g, int B, int H, int HV, int dk, int dv, int K, int pad, int eods) {
    const int Kd = H * dk, Vd = HV * dv, Dc = 2 * Kd + Vd, Dp = Dc + Vd + 2 * HV, ldp = Dp + pad, ldy = Vd + 2 * pad;
    Case *c = new_case("gdn_decode_fwd", run_gdn_decode, "B=%d H=%d HV=%d dk=%d dv=%d K=%d ld+%d%s", B, H, HV, dk, dv,
                       K, pad, eods ? " eod" : "");
    int *I = c->i;
    I[0] = B, I[1] = H, I[2] = HV, I[3] = dk, I[4] = dv, I[5] = K, I[6] = ldp, I[7] = ldy, I[8] = 7;
    c->f[0] = 1e-6f;
    Tensor *P = add_in(c, "P", K_ACT, B, Dp, ldp);
    fill_normal(P, g, 0, 1);
    fill_normal(add_in(c, "conv_w", K_F32, Dc, K, 0), g, 0, 0.4f);
    Tensor *Al = add_in(c, "A_log", K_F32, 1, HV, 0), *dt = add_in(c, "dt_bias", K_F32, 1, HV, 0);
    for (int j = 0; j < HV; j++) Al->init[j] = logf(rng_uniform(g, 1, 16)), dt->init[j] = rng_uniform(g, -6.9f, -2.25f);
    dt->init[0] = 21.0f; // softplus's linear branch
    fill_normal(add_in(c, "norm_w", K_F32, 1, dv, 0), g, 1, 0.1f);
    Tensor *ids = add_in(c, "ids", K_I32, B, 1, 1);
    for (int b = 0; b < B; b++) ids->init_i[b] = eods && b % 3 == 1 ? 7 : 100 + b; // eod = 7
    if (!eods) ids->is_null = 1;
    fill_normal(add_t(c, "conv_state", K_F32, R_ACC, (size_t)B * Dc, K - 1 > 0 ? K - 1 : 1, 0, F32_EXACT, B16_EXACT),
                g, 0, 1);
    fill_normal(add_t(c, "S", K_F32, R_ACC, (size_t)B * HV, (size_t)dk * dv, 0, F32_ORDER, B16_DELTA_F32), g, 0, 0.3f);
    add_t(c, "y", K_ACT, R_OUT, B, Vd, ldy, F32_ORDER, B16_DECODE);
}

static void run_state_reset(const Backend *be, void **p, const Case *c) {
    // ids, state;  i: B T row eod
    be->state_reset_at_eod(p[1], (size_t)c->i[2], p[0], c->i[0], c->i[1], c->i[3]);
}

// rows whose last token is EOD (every third, from the second) become zeros, the others keep their values; EODs
// elsewhere in a row (its first token) change nothing
void cases_state_reset(Rng *g, int B, int T, int row) {
    Case *c = new_case("state_reset_at_eod", run_state_reset, "B=%d T=%d row=%d", B, T, row);
    c->i[0] = B, c->i[1] = T, c->i[2] = row, c->i[3] = 7;
    Tensor *ids = add_in(c, "ids", K_I32, (size_t)B * T, 1, 1);
    for (int i = 0; i < B * T; i++) ids->init_i[i] = 100 + i % 50;
    for (int b = 0; b < B; b++) {
        if (b % 3 == 1) ids->init_i[(size_t)b * T + T - 1] = 7;
        if (b % 3 == 0) ids->init_i[(size_t)b * T] = 7;
    }
    fill_normal(add_t(c, "state", K_F32, R_ACC, B, row, 0, F32_EXACT, B16_EXACT), g, 0, 1);
}

static void run_rmsnorm_matmul(const Backend *be, void **p, const Case *c) {
    // x, resid, nw, W, y, s_out;  i: M N K ldy;  f: eps
    be->rmsnorm_matmul_fwd(p[4], c->i[3], p[5], p[0], p[1], p[2], p[3], c->i[0], c->i[1], c->i[2], c->f[0]);
}

// The RMSNorm-into-GEMM ops' inputs x, resid (NULL unless resid), nw [K] and W [N, K], in that order
static void add_norm_gemm_inputs(Case *c, Rng *g, int M, int N, int K, int resid) {
    c->f[0] = 1e-6f;
    fill_normal(add_in(c, "x", K_ACT, M, K, 0), g, 0, 1);
    Tensor *r = add_in(c, "resid", K_ACT, M, K, 0);
    fill_normal(r, g, 0, 1);
    if (!resid) r->is_null = 1;
    fill_normal(add_in(c, "nw", K_F32, 1, K, 0), g, 1, 0.1f);
    fill_normal(add_in(c, "W", K_ACT, N, K, 0), g, 0, 0.05f);
}
// ... and their s_out = x + resid (NULL without resid), after the GEMM's output
static void add_norm_s_out(Case *c, int M, int K, int resid) {
    Tensor *s = add_t(c, "s_out", K_ACT, R_OUT, M, K, 0, F32_EXACT, B16_STORE);
    if (!resid) s->is_null = 1;
}

void cases_rmsnorm_matmul(Rng *g, int M, int N, int K, int resid, int pad) {
    Case *c = new_case("rmsnorm_matmul_fwd", run_rmsnorm_matmul, "M=%d N=%d K=%d%s ld+%d", M, N, K,
                       resid ? " resid" : "", pad);
    c->i[0] = M, c->i[1] = N, c->i[2] = K, c->i[3] = N + pad;
    add_norm_gemm_inputs(c, g, M, N, K, resid);
    add_t(c, "y", K_ACT, R_OUT, M, N, N + pad, F32_GEMM, B16_NORM_GEMM);
    add_norm_s_out(c, M, K, resid);
}

static void run_swiglu_matmul(const Backend *be, void **p, const Case *c) {
    // gu, W, y;  i: M N K ldy
    be->swiglu_matmul_fwd(p[2], c->i[3], p[0], p[1], c->i[0], c->i[1], c->i[2]);
}

void cases_swiglu_matmul(Rng *g, int M, int N, int K, int pad) {
    Case *c = new_case("swiglu_matmul_fwd", run_swiglu_matmul, "M=%d N=%d K=%d ld+%d", M, N, K, pad);
    c->i[0] = M, c->i[1] = N, c->i[2] = K, c->i[3] = N + pad;
    fill_normal(add_in(c, "gu", K_ACT, M, 2 * K, 0), g, 0, 2);
    fill_normal(add_in(c, "W", K_ACT, N, K, 0), g, 0, 0.05f);
    add_t(c, "y", K_ACT, R_OUT, M, N, N + pad, F32_GEMM, B16_NORM_GEMM);
}

static void run_rmsnorm_matmul_swiglu(const Backend *be, void **p, const Case *c) {
    // x, resid, nw, W, h, s_out;  i: M F K;  f: eps
    be->rmsnorm_matmul_swiglu_fwd(p[4], p[5], p[0], p[1], p[2], p[3], c->i[0], c->i[1], c->i[2], c->f[0]);
}

// decoding's gate|up GEMV with SwiGLU in its epilogue: h against the CPU's rmsnorm_matmul_fwd then swiglu_fwd
void cases_rmsnorm_matmul_swiglu(Rng *g, int M, int F, int K, int resid) {
    Case *c = new_case("rmsnorm_matmul_swiglu_fwd", run_rmsnorm_matmul_swiglu, "M=%d F=%d K=%d%s", M, F, K,
                       resid ? " resid" : "");
    c->i[0] = M, c->i[1] = F, c->i[2] = K;
    add_norm_gemm_inputs(c, g, M, 2 * F, K, resid);
    add_t(c, "h", K_ACT, R_OUT, M, F, 0, F32_GEMM, B16_NORM_GEMM);
    add_norm_s_out(c, M, K, resid);
}

static void run_lmhead_norm_argmax(const Backend *be, void **p, const Case *c) {
    // x, resid, nw, E, argmax, logits, y, rstd, s_out (, ring, count);  i: M h V ring_k;  f: eps
    const int k = c->i[3];
    be->lmhead_norm_argmax(p[4], p[5], p[6], p[7], p[8], p[0], p[1], p[2], p[3], c->i[0], c->i[1], c->i[2], c->f[0],
                           k ? p[9] : NULL, k ? p[10] : NULL, k);
}

// Each row's argmax is planted far above rounding differences: E row 5 + 7m (m >= 1) is x's row m / (8 + m), a logit
// of ~h rms(x) / (8 + m) against N(0, 0.05 sqrt(h)) for the others; E rows 5 and V - 3 are zero but for 20 at k0,
// x row 0's largest entry, so every row's logits there are one product, equal in any summation order (a tie the
// lower index must win), and row 0's maximum (~20 x 3). The later rows are zero at k0 (x and resid), so those two
// logits are 0 for them: 20 times their own entry there could have matched their planted ~h / (8 + m). ring_k > 0:
// the argmax is also pushed into a token ring of ring_k slots whose count starts at ring_k + 2 (slot 2 written, the
// others kept, count + 1).
void cases_lmhead_norm_argmax(Rng *g, int M, int V, int h, int resid, int big, int ring_k) {
    Case *c = new_case("lmhead_norm_argmax", run_lmhead_norm_argmax, "M=%d V=%d h=%d%s%s", M, V, h,
                       resid ? " resid" : "", ring_k ? " ring" : "");
    c->i[0] = M, c->i[1] = h, c->i[2] = V, c->i[3] = ring_k, c->big = big;
    c->f[0] = 1e-6f;
    Tensor *x = add_in(c, "x", K_ACT, M, h, 0);
    fill_normal(x, g, 0, 1);
    Tensor *r = add_in(c, "resid", K_ACT, M, h, 0);
    fill_normal(r, g, 0, 0.1f); // small beside x: the planted row stays close to the normed x + resid
    if (!resid) r->is_null = 1;
    fill_normal(add_in(c, "nw", K_F32, 1, h, 0), g, 1, 0.1f);
    Tensor *E = add_in(c, "E", K_ACT, V, h, 0);
    fill_normal(E, g, 0, 0.05f);
    for (int m = 1; m < M && 5 + 7 * m < V - 3; m++)
        for (int k = 0; k < h; k++) E->init[(size_t)(5 + 7 * m) * h + k] = x->init[(size_t)m * h + k] / (8 + m);
    int k0 = 0;
    for (int k = 1; k < h; k++)
        if (x->init[k] > x->init[k0]) k0 = k;
    for (int m = 1; m < M; m++) // rows 5 and V - 3 give the later rows a logit of exactly 0, not 20 x's entry at k0
        x->init[(size_t)m * h + k0] = r->init[(size_t)m * h + k0] = 0.0f;
    for (int k = 0; k < h; k++) E->init[(size_t)5 * h + k] = E->init[(size_t)(V - 3) * h + k] = k == k0 ? 20.0f : 0.0f;
    add_t(c, "argmax", K_I32, R_OUT, M, 1, 1, F32_EXACT, B16_EXACT);
    add_t(c, "logits", K_F32, R_OUT, M, V, 0, F32_GEMM, B16_NORM_GEMM);
    add_t(c, "y", K_ACT, R_OUT, M, h, 0, F32_ORDER, B16_STORE);
    add_t(c, "rstd", K_F32, R_OUT, M, 1, 0, F32_ORDER, B16_FP32);
    Tensor *s = add_t(c, "s_out", K_ACT, R_OUT, M, h, 0, F32_EXACT, B16_STORE);
    if (!resid) s->is_null = 1;
    if (ring_k) {
        Tensor *ring = add_t(c, "ring", K_I32, R_ACC, (size_t)ring_k * M, 1, 1, F32_EXACT, B16_EXACT);
        for (int e = 0; e < ring_k * M; e++) ring->init_i[e] = -1 - e;
        add_t(c, "count", K_I32, R_ACC, 1, 1, 1, F32_EXACT, B16_EXACT)->init_i[0] = ring_k + 2;
    }
}

// ---- gdn_decode_block_fwd: GdnDecodeBlockArgs from the case's tensors (the order below); resid NULL: block 0, whose
// input norm writes no s_attn and whose MLP norm's residual is x itself (the model's s_attn aliases the embeddings)
enum { DB_X, DB_RESID, DB_NORMS, DB_WIN, DB_CONVW, DB_GATES, DB_WO, DB_WGU, DB_WDOWN, DB_P, DB_SATTN, DB_CONV, DB_S,
       DB_ON, DB_OUT, DB_SMLP, DB_H, DB_N };
static GdnDecodeBlockArgs decode_block_args(void **p, const int *I, float eps, size_t fb) {
    // I: B h H HV dk dv K F ldp resid;  fb: bytes of an fp32
    const int h = I[1], HV = I[3], resid = I[9];
    const char *norms = p[DB_NORMS], *gates = p[DB_GATES];
    return (GdnDecodeBlockArgs){.x = p[DB_X], .resid = resid ? p[DB_RESID] : NULL, .s_attn = resid ? p[DB_SATTN] : NULL,
                                .attn_norm = (const float *)norms, .W_in = p[DB_WIN], .P = p[DB_P], .ldp = I[8],
                                .conv_w = p[DB_CONVW], .A_log = (const float *)gates,
                                .dt_bias = (const float *)(gates + HV * fb), .o_norm = (const float *)(norms + 2 * h * fb),
                                .conv_state = p[DB_CONV], .S = p[DB_S], .ids = NULL, .eod = 7, .on = p[DB_ON],
                                .W_o = p[DB_WO], .out = p[DB_OUT], .mlp_resid = resid ? p[DB_SATTN] : p[DB_X],
                                .s_mlp = p[DB_SMLP], .mlp_norm = (const float *)(norms + h * fb), .W_gu = p[DB_WGU],
                                .hbuf = p[DB_H], .W_down = p[DB_WDOWN], .B = I[0], .h = h, .H = I[2], .HV = HV,
                                .dk = I[4], .dv = I[5], .K = I[6], .F = I[7], .eps = eps};
}
static void run_gdn_decode_block(const Backend *be, void **p, const Case *c) {
    GdnDecodeBlockArgs a = decode_block_args(p, c->i, c->f[0], 4);
    be->gdn_decode_block_fwd(&a);
}

static const Tol F32_BLOCK = {2e-5f, "five ops chained: the GEMVs' fp32 sums in another order than the CPU's feed the "
                                     "mixer, the projection and the MLP (~1e-6 each)"};

// One block's decode step against the CPU's five ops in sequence (at B = 1 and the GEMVs' shapes: one kernel).
void cases_gdn_decode_block(Rng *g, int B, int h, int H, int HV, int dk, int dv, int K, int F, int resid) {
    const int Kd = H * dk, Vd = HV * dv, Dc = 2 * Kd + Vd, Dp = Dc + Vd + 2 * HV;
    Case *c = new_case("gdn_decode_block_fwd", run_gdn_decode_block, "B=%d h=%d H=%d HV=%d dk=%d dv=%d K=%d F=%d%s", B,
                       h, H, HV, dk, dv, K, F, resid ? " resid" : "");
    int *I = c->i;
    I[0] = B, I[1] = h, I[2] = H, I[3] = HV, I[4] = dk, I[5] = dv, I[6] = K, I[7] = F, I[8] = Dp, I[9] = resid;
    c->f[0] = 1e-6f;
    fill_normal(add_in(c, "x", K_ACT, B, h, 0), g, 0, 1);
    Tensor *r = add_in(c, "resid", K_ACT, B, h, 0);
    fill_normal(r, g, 0, 1);
    if (!resid) r->is_null = 1;
    fill_normal(add_in(c, "norms", K_F32, 1, 2 * h + dv, 0), g, 1, 0.1f); // attn_norm, mlp_norm, o_norm
    fill_normal(add_in(c, "W_in", K_ACT, Dp, h, 0), g, 0, 0.05f);
    fill_normal(add_in(c, "conv_w", K_F32, Dc, K, 0), g, 0, 0.4f);
    Tensor *gt = add_in(c, "gates", K_F32, 2, HV, 0); // A_log, dt_bias
    for (int j = 0; j < HV; j++) gt->init[j] = logf(rng_uniform(g, 1, 16)), gt->init[HV + j] = rng_uniform(g, -6.9f, -2.25f);
    fill_normal(add_in(c, "W_o", K_ACT, h, Vd, 0), g, 0, 0.05f);
    fill_normal(add_in(c, "W_gu", K_ACT, 2 * F, h, 0), g, 0, 0.05f);
    fill_normal(add_in(c, "W_down", K_ACT, h, F, 0), g, 0, 0.05f);
    add_t(c, "P", K_ACT, R_OUT, B, Dp, 0, F32_GEMM, B16_NORM_GEMM);
    Tensor *sa = add_t(c, "s_attn", K_ACT, R_OUT, B, h, 0, F32_EXACT, B16_STORE);
    if (!resid) sa->is_null = 1;
    fill_normal(add_t(c, "conv_state", K_F32, R_ACC, (size_t)B * Dc, K - 1 > 0 ? K - 1 : 1, 0, F32_GEMM, B16_NORM_GEMM),
                g, 0, 1);
    fill_normal(add_t(c, "S", K_F32, R_ACC, (size_t)B * HV, (size_t)dk * dv, 0, F32_BLOCK, B16_DELTA_F32), g, 0, 0.3f);
    add_t(c, "on", K_ACT, R_OUT, B, Vd, 0, F32_BLOCK, B16_DECODE);
    add_t(c, "out", K_ACT, R_OUT, B, h, 0, F32_BLOCK, B16_DECODE);
    add_t(c, "s_mlp", K_ACT, R_OUT, B, h, 0, F32_BLOCK, B16_DECODE);
    add_t(c, "h", K_ACT, R_OUT, B, F, 0, F32_BLOCK, B16_DECODE);
}

// The block kernel against the table's five ops on the same backend (GDN_DECODE_BLOCK=0 runs them), bit for bit:
// two steps from the same random inputs and states (the second reads the states the first wrote), every output and
// both states compared; with and without the residual (block 0's form).
void check_decode_block_bits(const Backend *be) {
    static const int shapes[3][9] = {
        // h H HV dk dv K F resid steps
        {1024, 4, 8, 64, 64, 4, 4096, 1, 2}, // the 300M's block
        {256, 2, 4, 32, 48, 4, 200, 1, 2},   // GVA 2, dv = 48, F not a multiple of 64
        {256, 2, 4, 32, 48, 4, 200, 0, 1},   // block 0: no residual, no s_attn
    };
    const char *env = getenv("GDN_DECODE_BLOCK");
    char *saved = env ? strdup(env) : NULL;
    Rng g = {0xb10c};
    const size_t ab = (size_t)be->act_bytes;
    for (int s = 0; s < 3; s++) {
        const int *S = shapes[s], h = S[0], H = S[1], HV = S[2], dk = S[3], dv = S[4], K = S[5], F = S[6];
        const int Kd = H * dk, Vd = HV * dv, Dc = 2 * Kd + Vd, Dp = Dc + Vd + 2 * HV;
        const int I[10] = {1, h, H, HV, dk, dv, K, F, Dp, S[7]};
        // sizes (elements) and kinds (1 = act) of the DB_* buffers
        const size_t n[DB_N] = {(size_t)h, (size_t)h, (size_t)2 * h + dv, (size_t)Dp * h, (size_t)Dc * K, (size_t)2 * HV,
                                (size_t)h * Vd, (size_t)2 * F * h, (size_t)h * F, (size_t)Dp, (size_t)h,
                                (size_t)Dc * (K - 1), (size_t)HV * dk * dv, (size_t)Vd, (size_t)h, (size_t)h, (size_t)F};
        const int act[DB_N] = {1, 1, 0, 1, 0, 0, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1};
        void *run[2][DB_N];
        float *hf = NULL;
        for (int x = 0; x < DB_N; x++) {
            hf = xrealloc(hf, n[x] * 4);
            for (size_t e = 0; e < n[x]; e++)
                hf[e] = x == DB_NORMS ? 1 + 0.1f * rng_normal(&g)
                        : x == DB_GATES ? (e < (size_t)HV ? logf(rng_uniform(&g, 1, 16)) : rng_uniform(&g, -6.9f, -2.25f))
                        : x == DB_WIN || x == DB_WO || x == DB_WGU || x == DB_WDOWN ? 0.05f * rng_normal(&g)
                        : x == DB_CONVW ? 0.4f * rng_normal(&g)
                        : x == DB_S ? 0.3f * rng_normal(&g)
                                    : rng_normal(&g); // x, resid, the conv state; outputs start as noise too
            float *st = be->alloc(n[x] * 4);
            be->memcpy_h2d(st, hf, n[x] * 4);
            for (int k = 0; k < 2; k++) {
                run[k][x] = be->alloc(n[x] * (act[x] ? ab : 4));
                if (act[x]) be->to_act(run[k][x], st, n[x]);
                else be->memcpy_d2d(run[k][x], st, n[x] * 4);
            }
            be->free(st);
        }
        free(hf);
        for (int k = 0; k < 2; k++) { // k = 0: the block kernel, 1: the five ops
            setenv("GDN_DECODE_BLOCK", k ? "0" : "1", 1);
            GdnDecodeBlockArgs a = decode_block_args(run[k], I, 1e-6f, 4);
            for (int step = 0; step < S[8]; step++) be->gdn_decode_block_fwd(&a);
        }
        int same = 1;
        char which[128] = "";
        for (int x = DB_P; x < DB_N; x++) {
            const size_t bytes = n[x] * (act[x] ? ab : 4);
            char *a = xmalloc(bytes), *b = xmalloc(bytes);
            be->memcpy_d2h(a, run[0][x], bytes), be->memcpy_d2h(b, run[1][x], bytes);
            if (memcmp(a, b, bytes) && strlen(which) < 100) {
                static const char *names[DB_N] = {[DB_P] = "P", [DB_SATTN] = "s_attn", [DB_CONV] = "conv_state",
                                                  [DB_S] = "S", [DB_ON] = "on", [DB_OUT] = "out", [DB_SMLP] = "s_mlp",
                                                  [DB_H] = "h"};
                strcat(which, " "), strcat(which, names[x]);
                same = 0;
            }
            free(a), free(b);
        }
        for (int k = 0; k < 2; k++)
            for (int x = 0; x < DB_N; x++) be->free(run[k][x]);
        g_checks++;
        if (!same) g_failures++;
        printf("%s gdn_decode_block_fwd h=%d H=%d HV=%d dv=%d F=%d%s, %d step%s: kernel vs the five ops %-8s %s%s\n",
               same ? "PASS" : "FAIL", h, H, HV, dv, F, S[7] ? " resid" : "", S[8], S[8] > 1 ? "s" : "",
               ab == 2 ? "bf16" : "fp32", same ? "bits" : "differ:", which);
    }
    if (saved) setenv("GDN_DECODE_BLOCK", saved, 1), free(saved);
    else unsetenv("GDN_DECODE_BLOCK");
}
