// cases_rows.c: test_cuda_ops' cases for the row-wise ops: embedding, RMSNorm (with the residual add), matmul,
// SwiGLU, the lm head with cross-entropy, the logits statistics.
// Each run_* wrapper calls one op through the Backend table; each cases_* adds cases (harness.h).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gpu/ops/harness.h"

static void run_embedding_fwd(const Backend *be, void **p, const Case *c) {
    be->embedding_fwd(p[2], p[0], p[1], c->i[0], c->i[1]);
}

static void run_embedding_bwd(const Backend *be, void **p, const Case *c) {
    be->embedding_bwd(p[2], p[1], p[0], c->i[0], c->i[1], c->i[2]);
}

static void run_rmsnorm_fwd(const Backend *be, void **p, const Case *c) {
    // x, resid, w, y, rstd, s_out
    be->rmsnorm_fwd(p[3], p[4], p[5], p[0], p[1], p[2], c->i[0], c->i[1], c->f[0]);
}

static void run_rmsnorm_bwd(const Backend *be, void **p, const Case *c) {
    // dy, s, rstd, w, dres, ds, dw
    be->rmsnorm_bwd(p[5], p[6], p[0], p[1], p[2], p[3], p[4], c->i[0], c->i[1]);
}

static void run_matmul_fwd(const Backend *be, void **p, const Case *c) {
    // x, W, y;  i: M N K ldx ldy acc
    be->matmul_fwd(p[2], c->i[4], p[0], c->i[3], p[1], c->i[0], c->i[1], c->i[2], c->i[5]);
}

static void run_matmul_bwd(const Backend *be, void **p, const Case *c) {
    // dy, x, W, dx, dW;  i: M N K lddx lddy ldx acc
    be->matmul_bwd(p[3], c->i[3], p[4], p[0], c->i[4], p[1], c->i[5], p[2], c->i[0], c->i[1], c->i[2], c->i[6]);
}

static void run_swiglu_fwd(const Backend *be, void **p, const Case *c) { be->swiglu_fwd(p[1], p[0], c->i[0], c->i[1]); }

static void run_swiglu_bwd(const Backend *be, void **p, const Case *c) {
    // dy, gu, dgu, y (dgu may alias gu, y dy, via c->alias; y may be NULL)
    be->swiglu_bwd(p[2], p[3], p[0], p[1], c->i[0], c->i[1]);
}

static void run_lmhead_ce(const Backend *be, void **p, const Case *c) {
    // y, E, targets, losses, dy, dE, loss_scale [1] (backend memory);  i: N h V
    be->lmhead_ce(p[3], p[4], p[5], p[0], p[1], p[2], c->i[0], c->i[1], c->i[2], p[6], NULL, 0);
}

static void run_lmhead_logits(const Backend *be, void **p, const Case *c) {
    be->lmhead_logits(p[2], p[0], p[1], c->i[0], c->i[1], c->i[2]);
}

static void run_logits_stats(const Backend *be, void **p, const Case *c) {
    // logits, targets, argmax, logprob;  i: rows V
    be->logits_stats(p[2], p[3], p[0], p[1], c->i[0], c->i[1]);
}

void cases_embedding(Rng *g, int N, int h, int V) {
    Case *c = new_case("embedding_fwd", run_embedding_fwd, "N=%d h=%d V=%d", N, h, V);
    c->i[0] = N, c->i[1] = h;
    Tensor *ids = add_in(c, "ids", K_I32, N, 1, 1);
    for (int n = 0; n < N; n++) ids->init_i[n] = n % 3 == 0 ? 3 : (int)(rng_u64(g) % V); // repeats
    fill_normal(add_in(c, "E", K_ACT, V, h, 0), g, 0, 0.02f);
    add_t(c, "x", K_ACT, R_OUT, N, h, 0, F32_EXACT, B16_EXACT);

    c = new_case("embedding_bwd", run_embedding_bwd, "N=%d h=%d V=%d", N, h, V);
    c->i[0] = N, c->i[1] = h, c->i[2] = V;
    ids = add_in(c, "ids", K_I32, N, 1, 1);
    for (int n = 0; n < N; n++) ids->init_i[n] = n % 3 == 0 ? 3 : (int)(rng_u64(g) % V);
    fill_normal(add_in(c, "dx", K_ACT, N, h, 0), g, 0, 1);
    fill_normal(add_t(c, "dE", K_F32, R_ACC, V, h, 0, F32_EXACT, B16_EXACT), g, 0, 0.1f);
}

void cases_rmsnorm(Rng *g, int N, int h, int resid, int alias_s, int big) {
    Case *c = new_case("rmsnorm_fwd", run_rmsnorm_fwd, "N=%d h=%d%s", N, h,
                       !resid    ? " no-resid"
                       : alias_s ? " s_out=resid"
                                 : "");
    c->i[0] = N, c->i[1] = h, c->f[0] = 1e-6f, c->big = big;
    fill_normal(add_in(c, "x", K_ACT, N, h, 0), g, 0, 1);
    Tensor *r = add_in(c, "resid", K_ACT, N, h, 0);
    if (resid)
        fill_normal(r, g, 0.5f, 1);
    else
        r->is_null = 1;
    fill_normal(add_in(c, "w", K_F32, 1, h, 0), g, 1, 0.1f);
    add_t(c, "y", K_ACT, R_OUT, N, h, 0, F32_ORDER, B16_STORE);
    add_t(c, "rstd", K_F32, R_OUT, N, 1, 0, F32_ORDER, B16_FP32);
    Tensor *s = add_t(c, "s_out", K_ACT, R_OUT, N, h, 0, F32_EXACT, B16_STORE);
    if (!resid) s->is_null = 1;
    if (resid && alias_s) { // s_out written over resid: resid becomes an in-out tensor
        c->t[1].role = R_ACC, c->t[1].t32 = F32_EXACT, c->t[1].t16 = B16_STORE;
        c->alias[5] = 1;
    }

    c = new_case("rmsnorm_bwd", run_rmsnorm_bwd, "N=%d h=%d%s", N, h, resid ? " dres" : "");
    c->i[0] = N, c->i[1] = h, c->big = big;
    fill_normal(add_in(c, "dy", K_ACT, N, h, 0), g, 0, 1);
    fill_normal(add_in(c, "s", K_ACT, N, h, 0), g, 0, 1);
    fill_uniform(add_in(c, "rstd", K_F32, N, 1, 0), g, 0.5f, 2.0f);
    fill_normal(add_in(c, "w", K_F32, 1, h, 0), g, 1, 0.1f);
    r = add_in(c, "dres", K_ACT, N, h, 0);
    if (resid)
        fill_normal(r, g, 0, 1);
    else
        r->is_null = 1;
    add_t(c, "ds", K_ACT, R_OUT, N, h, 0, F32_ORDER, B16_STORE);
    fill_normal(add_t(c, "dw", K_F32, R_ACC, 1, h, 0, F32_ORDER, B16_FP32), g, 0, 1);
}

void cases_matmul(Rng *g, int M, int N, int K, int pad, int acc, int big) {
    int ldx = K + pad, ldy = N + pad;
    Case *c = new_case("matmul_fwd", run_matmul_fwd, "M=%d N=%d K=%d ld+%d%s", M, N, K, pad, acc ? " accumulate" : "");
    c->i[0] = M, c->i[1] = N, c->i[2] = K, c->i[3] = ldx, c->i[4] = ldy, c->i[5] = acc, c->big = big;
    fill_normal(add_in(c, "x", K_ACT, M, K, ldx), g, 0, 1);
    fill_normal(add_in(c, "W", K_ACT, N, K, 0), g, 0, 0.05f);
    Tensor *y = add_t(c, "y", K_ACT, acc ? R_ACC : R_OUT, M, N, ldy, F32_GEMM, B16_STORE);
    if (acc) fill_normal(y, g, 0, 1);

    c = new_case("matmul_bwd", run_matmul_bwd, "M=%d N=%d K=%d ld+%d%s", M, N, K, pad, acc ? " accumulate" : "");
    c->i[0] = M, c->i[1] = N, c->i[2] = K, c->i[3] = ldx, c->i[4] = ldy, c->i[5] = ldx, c->i[6] = acc, c->big = big;
    fill_normal(add_in(c, "dy", K_ACT, M, N, ldy), g, 0, 1);
    fill_normal(add_in(c, "x", K_ACT, M, K, ldx), g, 0, 1);
    fill_normal(add_in(c, "W", K_ACT, N, K, 0), g, 0, 0.05f);
    Tensor *dx = add_t(c, "dx", K_ACT, acc ? R_ACC : R_OUT, M, K, ldx, F32_GEMM, B16_STORE);
    if (acc) fill_normal(dx, g, 0, 1);
    fill_normal(add_t(c, "dW", K_F32, R_ACC, N, K, 0, F32_GEMM, B16_GEMM32), g, 0, 1);
}

static void run_matmul_swiglu_fwd(const Backend *be, void **p, const Case *c) {
    // x, W, gu, h;  i: M F K ldx
    be->matmul_swiglu_fwd(p[2], p[3], p[0], c->i[3], p[1], c->i[0], c->i[1], c->i[2]);
}

// the MLP's forward, GEMM and SwiGLU as one op (GDN_CUDA_GEMM=wg fuses them when F % 128 == 0): gu against the CPU's
// GEMM, h against swiglu of the CPU's gu (bf16: h is computed from the rounded gu, one more rounding)
void cases_matmul_swiglu(Rng *g, int M, int F, int K, int pad, int big) {
    const int ldx = K + pad;
    Case *c = new_case("matmul_swiglu_fwd", run_matmul_swiglu_fwd, "M=%d F=%d K=%d ld+%d", M, F, K, pad);
    c->i[0] = M, c->i[1] = F, c->i[2] = K, c->i[3] = ldx, c->big = big;
    fill_normal(add_in(c, "x", K_ACT, M, K, ldx), g, 0, 1);
    fill_normal(add_in(c, "W", K_ACT, 2 * F, K, 0), g, 0, 0.05f);
    add_t(c, "gu", K_ACT, R_OUT, M, 2 * F, 0, F32_GEMM, B16_STORE);
    add_t(c, "h", K_ACT, R_OUT, M, F, 0, F32_GEMM, B16_STORE2);
}

static void run_matmul_swiglu_bwd(const Backend *be, void **p, const Case *c) {
    // dy, W, gu, dgu, y, dh;  i: M F K lddy
    be->matmul_swiglu_bwd(p[3], p[4], p[5], p[0], c->i[3], p[1], p[2], c->i[0], c->i[1], c->i[2]);
}

// the MLP's backward through the down projection into SwiGLU's backward as one op (GDN_CUDA_GEMM=wg fuses them):
// dgu and (recompute) y against the CPU's matmul_bwd then swiglu_bwd; dh is scratch, aliasing y when it is given
void cases_matmul_swiglu_bwd(Rng *g, int M, int F, int K, int pad, int recompute, int big) {
    const int lddy = K + pad;
    Case *c = new_case("matmul_swiglu_bwd", run_matmul_swiglu_bwd, "M=%d F=%d K=%d ld+%d%s", M, F, K, pad,
                       recompute ? " +y" : "");
    c->i[0] = M, c->i[1] = F, c->i[2] = K, c->i[3] = lddy, c->big = big;
    fill_normal(add_in(c, "dy", K_ACT, M, K, lddy), g, 0, 1);
    fill_normal(add_in(c, "W", K_ACT, K, F, 0), g, 0, 0.05f);
    fill_normal(add_in(c, "gu", K_ACT, M, 2 * F, 0), g, 0, 2);
    // dgu: one rounding of a product of dH (rounded, as stored between the two ops) and SwiGLU's factors
    add_t(c, "dgu", K_ACT, R_OUT, M, 2 * F, 0, F32_GEMM, B16_STORE2);
    Tensor *y = add_t(c, "y", K_ACT, R_OUT, M, F, 0, F32_ORDER, B16_STORE);
    add_t(c, "dh", K_ACT, R_SCRATCH, M, F, 0, F32_EXACT, B16_EXACT);
    if (recompute) c->alias[5] = 4; // dh is y's buffer (the model's recompute_swiglu form)
    else y->is_null = 1;
}

// mode 0: the gradient only; 1: dgu overwrites gu in place; 2: y recomputed too; 3: y overwrites dy in place (the
// model's recompute_swiglu form)
void cases_swiglu(Rng *g, int N, int F, int mode, int big) {
    Case *c = new_case("swiglu_fwd", run_swiglu_fwd, "N=%d F=%d", N, F);
    c->i[0] = N, c->i[1] = F, c->big = big;
    fill_normal(add_in(c, "gu", K_ACT, N, 2 * F, 0), g, 0, 2);
    add_t(c, "y", K_ACT, R_OUT, N, F, 0, F32_ORDER, B16_STORE);

    static const char *what[] = {"", " dgu=gu", " +y", " +y y=dy"};
    c = new_case("swiglu_bwd", run_swiglu_bwd, "N=%d F=%d%s", N, F, what[mode]);
    c->i[0] = N, c->i[1] = F, c->big = big;
    Tensor *dy = add_in(c, "dy", K_ACT, N, F, 0);
    fill_normal(dy, g, 0, 1);
    Tensor *gu = add_in(c, "gu", K_ACT, N, 2 * F, 0);
    fill_normal(gu, g, 0, 2);
    add_t(c, "dgu", K_ACT, R_OUT, N, 2 * F, 0, F32_ORDER, B16_STORE);
    Tensor *y = add_t(c, "y", K_ACT, R_OUT, N, F, 0, F32_ORDER, B16_STORE); // the forward's tolerances
    if (mode < 2) y->is_null = 1;
    if (mode == 1) { // the gradient overwrites gu in place
        gu->role = R_ACC, gu->t32 = F32_ORDER, gu->t16 = B16_STORE;
        c->alias[2] = 1;
    }
    if (mode == 3) { // the recomputed y overwrites dy in place
        dy->role = R_ACC, dy->t32 = F32_ORDER, dy->t16 = B16_STORE;
        c->alias[3] = 0;
    }
}

void cases_lmhead(Rng *g, int N, int h, int V, int with_grad, int chunk_rows, int big) {
    Case *c = new_case("lmhead_ce", run_lmhead_ce, "N=%d h=%d V=%d%s%s", N, h, V, with_grad ? " grad" : " loss-only",
                       chunk_rows ? " chunked" : "");
    c->i[0] = N, c->i[1] = h, c->i[2] = V, c->i[3] = chunk_rows, c->big = big;
    Tensor *y = add_in(c, "y", K_ACT, N, h, 0), *E = add_in(c, "E", K_ACT, V, h, 0);
    fill_normal(y, g, 0, 1);
    fill_normal(E, g, 0, 0.3f);
    Tensor *tg = add_in(c, "targets", K_I32, N, 1, 1);
    for (int n = 0; n < N; n++) tg->init_i[n] = n % 7 == 3 ? -1 : (int)(rng_u64(g) % V);
    // bf16: the kernel stores the logits in bf16 (as FLA's lm_head under autocast), rounding logit x by up to
    // 2^-9 |x|, which scales each probability by up to exp(2^-9 |x|): the bound grows with the largest logit.
    // (1e-2 while max|logit| <= 5.12; these random cases reach 10-50, several times what training sees.)
    Tol ce = B16_CE;
    if (V % 8 == 0) { // the bf16-logits path of cuda/lmhead_ce.cu; else it keeps fp32 logits
        float *logits = xmalloc((size_t)N * V * sizeof(float));
        backend_cpu()->lmhead_logits(logits, y->init, E->init, N, h, V);
        float lmax = 0;
        for (size_t x = 0; x < (size_t)N * V; x++) lmax = fmaxf(lmax, fabsf(logits[x]));
        free(logits);
        if (ldexpf(lmax, -9) > ce.tol) {
            ce.tol = ldexpf(lmax, -9);
            ce.why = "bf16 logits: each rounded by <= 2^-9 of its value, so probabilities move by up to 2^-9 max|logit|";
        }
    }
    add_t(c, "losses", K_F32, R_OUT, N, 1, 0, F32_ORDER, ce);
    Tensor *dy = add_t(c, "dy", K_ACT, R_OUT, N, h, 0, F32_GEMM, ce);
    Tensor *dE = add_t(c, "dE", K_F32, R_ACC, V, h, 0, F32_GEMM, ce);
    Tensor *scale = add_in(c, "loss_scale", K_F32, 1, 1, 0);
    scale->init[0] = 1.0f / N;
    if (with_grad)
        fill_normal(dE, g, 0, 0.01f);
    else
        dy->is_null = 1, dE->is_null = 1, scale->is_null = 1;

    if (with_grad) return;
    c = new_case("lmhead_logits", run_lmhead_logits, "N=%d h=%d V=%d", N, h, V);
    c->i[0] = N, c->i[1] = h, c->i[2] = V, c->big = big;
    fill_normal(add_in(c, "y", K_ACT, N, h, 0), g, 0, 1);
    fill_normal(add_in(c, "E", K_ACT, V, h, 0), g, 0, 0.3f);
    add_t(c, "logits", K_F32, R_OUT, N, V, 0, F32_GEMM, B16_GEMM32);
}

// Rows of logits with the cases greedy decoding and scoring meet: a tie for the maximum (the lowest index
// must win), -inf entries (masked vocabulary), the maximum at the last index; logprob NULL (decode) or not.
void cases_logits_stats(Rng *g, int rows, int V, int with_logprob, int big) {
    Case *c = new_case("logits_stats", run_logits_stats, "rows=%d V=%d%s", rows, V, with_logprob ? "" : " argmax only");
    c->i[0] = rows, c->i[1] = V, c->big = big;
    Tensor *l = add_in(c, "logits", K_F32, rows, V, 0);
    fill_normal(l, g, 0, 3);
    if (rows > 0) l->init[(size_t)0 * V + 7] = l->init[(size_t)0 * V + V / 2] = 40.0f;  // tie: 7 wins
    if (rows > 1)
        for (int v = 0; v < V; v += 3) l->init[(size_t)1 * V + v] = -INFINITY;         // masked entries
    if (rows > 2) l->init[(size_t)2 * V + V - 1] = 50.0f;                              // last index
    Tensor *tg = add_in(c, "targets", K_I32, rows, 1, 1);
    for (int r = 0; r < rows; r++) {
        int t = (int)(rng_u64(g) % V);
        if (r == 1) t = t / 3 * 3 + 1; // not a masked entry
        tg->init_i[r] = r == 2 ? V - 1 : t;
    }
    add_t(c, "argmax", K_I32, R_OUT, rows, 1, 1, F32_EXACT, B16_EXACT);
    Tensor *lp = add_t(c, "logprob", K_F32, R_OUT, rows, 1, 0, F32_ORDER, B16_FP32);
    if (!with_logprob) lp->is_null = 1;
}

static void run_token_ring_push(const Backend *be, void **p, const Case *c) {
    // tok, ring, count;  i: B K pushes
    for (int x = 0; x < c->i[2]; x++) be->token_ring_push(p[1], p[2], p[0], c->i[0], c->i[1]);
}

// `pushes` pushes of one tok from count0: the slots after count0 % K (wrapping) take tok, the others keep their
// values, count ends at count0 + pushes
void cases_token_ring_push(Rng *g, int B, int K, int count0, int pushes) {
    Case *c = new_case("token_ring_push", run_token_ring_push, "B=%d K=%d count=%d pushes=%d", B, K, count0, pushes);
    c->i[0] = B, c->i[1] = K, c->i[2] = pushes;
    Tensor *tok = add_in(c, "tok", K_I32, B, 1, 1);
    for (int b = 0; b < B; b++) tok->init_i[b] = (int32_t)(rng_u64(g) % 128256);
    Tensor *ring = add_t(c, "ring", K_I32, R_ACC, (size_t)K * B, 1, 1, F32_EXACT, B16_EXACT);
    for (int x = 0; x < K * B; x++) ring->init_i[x] = -1 - x;
    add_t(c, "count", K_I32, R_ACC, 1, 1, 1, F32_EXACT, B16_EXACT)->init_i[0] = count0;
}

// recompute_swiglu's claim, on one backend (its own kernels, not the CPU twin): the y swiglu_bwd recomputes,
// over dy in place, is swiglu_fwd's y bit for bit, and the gradient is the bits it is without y; both widths of
// F (the 16-byte vector path and the scalar one).
void check_swiglu_recompute(const Backend *be) {
    static const int shapes[2][2] = {{64, 4096}, {9, 36}};
    Rng g = {0x5a1f};
    for (int s = 0; s < 2; s++) {
        const int N = shapes[s][0], F = shapes[s][1];
        const size_t ny = (size_t)N * F, ab = (size_t)be->act_bytes;
        float *h = xmalloc(ny * 2 * 4), *st = be->alloc(ny * 2 * 4);
        void *gu = be->alloc(ny * 2 * ab), *dy = be->alloc(ny * ab), *y = be->alloc(ny * ab);
        void *dgu0 = be->alloc(ny * 2 * ab), *dgu1 = be->alloc(ny * 2 * ab);
        for (size_t e = 0; e < 2 * ny; e++) h[e] = 2 * rng_normal(&g);
        be->memcpy_h2d(st, h, ny * 2 * 4);
        be->to_act(gu, st, 2 * ny);
        for (size_t e = 0; e < ny; e++) h[e] = rng_normal(&g);
        be->memcpy_h2d(st, h, ny * 4);
        be->to_act(dy, st, ny);
        be->swiglu_fwd(y, gu, N, F);
        be->swiglu_bwd(dgu0, NULL, dy, gu, N, F);
        be->swiglu_bwd(dgu1, dy, dy, gu, N, F); // dy now holds the recomputed y
        char *a = xmalloc(ny * 2 * ab), *b = xmalloc(ny * 2 * ab);
        be->memcpy_d2h(a, y, ny * ab), be->memcpy_d2h(b, dy, ny * ab);
        int same_y = !memcmp(a, b, ny * ab);
        be->memcpy_d2h(a, dgu0, ny * 2 * ab), be->memcpy_d2h(b, dgu1, ny * 2 * ab);
        int same_g = !memcmp(a, b, ny * 2 * ab);
        g_checks++;
        if (!(same_y && same_g)) g_failures++;
        printf("%s %-62s %s  recomputed y = swiglu_fwd's: %s, dgu unchanged: %s\n", same_y && same_g ? "PASS" : "FAIL",
               s ? "swiglu_bwd y=dy vs swiglu_fwd N=9 F=36" : "swiglu_bwd y=dy vs swiglu_fwd N=64 F=4096",
               ab == 2 ? "bf16" : "fp32", same_y ? "bits" : "NO", same_g ? "bits" : "NO");
        free(a), free(b), free(h);
        be->free(st), be->free(gu), be->free(dy), be->free(y), be->free(dgu0), be->free(dgu1);
    }
}

// lmhead_ce's inputs for the scratch checks, in backend memory: y [N, h] ~ N(0, 1) and E [V, h] ~ 0.3 N(0, 1) (act),
// targets (-1, ignored, at rows n % every == at), the loss scale 1 / N.
typedef struct {
    void *y, *E;
    int32_t *tg;
    float *scale;
} LmheadIn;
static LmheadIn lmhead_inputs(const Backend *be, Rng *g, int N, int h, int V, int every, int at) {
    const size_t ab = (size_t)be->act_bytes;
    LmheadIn in = {be->alloc((size_t)N * h * ab), be->alloc((size_t)V * h * ab), be->alloc((size_t)N * 4), be->alloc(4)};
    float *hy = xmalloc((size_t)V * h * 4), *st = be->alloc((size_t)V * h * 4);
    for (int e = 0; e < N * h; e++) hy[e] = rng_normal(g);
    be->memcpy_h2d(st, hy, (size_t)N * h * 4), be->to_act(in.y, st, (size_t)N * h);
    for (int e = 0; e < V * h; e++) hy[e] = 0.3f * rng_normal(g);
    be->memcpy_h2d(st, hy, (size_t)V * h * 4), be->to_act(in.E, st, (size_t)V * h);
    int32_t *tg = xmalloc((size_t)N * 4);
    for (int n = 0; n < N; n++) tg[n] = n % every == at ? -1 : (int)(rng_u64(g) % V);
    be->memcpy_h2d(in.tg, tg, (size_t)N * 4);
    const float scale = 1.0f / N;
    be->memcpy_h2d(in.scale, &scale, 4);
    free(tg), free(hy), be->free(st);
    return in;
}
static void lmhead_inputs_free(const Backend *be, LmheadIn *in) {
    be->free(in->y), be->free(in->E), be->free(in->tg), be->free(in->scale);
}

// lmhead_ce with the caller's scratch against the same call without it: losses, dy and dE bit for bit (the same
// chunks, 16 rows each here). A scratch that holds one chunk is used (its poison overwritten) and nothing past it is
// written; one a byte short is left alone (the op allocates instead). The bf16 mode with V % 8 != 0 (separate fp32
// logits and act dlogits buffers) never takes it, and is checked for that.
void check_lmhead_scratch(const Backend *be) {
    static const int Vs[2] = {520, 517};
    const int N = 50, h = 40, R = 16, GUARD_B = 4096;
    const size_t ab = (size_t)be->act_bytes;
    Rng g = {0x1e4d};
    setenv("GDN_CUDA_CE_ROWS", "16", 1);
    for (int s = 0; s < (ab == 2 ? 2 : 1); s++) {
        const int V = Vs[s];
        const size_t lb = ab == 2 && V % 8 == 0 ? 2 : 4, chunk = (size_t)R * V * lb, total = chunk + GUARD_B;
        const int usable = ab == 4 || V % 8 == 0;
        LmheadIn in = lmhead_inputs(be, &g, N, h, V, 7, 3);
        unsigned char *pattern = xmalloc(total), *back = xmalloc(total);
        memset(pattern, 0xFF, chunk), memset(pattern + chunk, 0xA5, GUARD_B);
        void *scr = be->alloc(total);
        float *loss[3], *dE[3];
        void *dy[3];
        int used[3], guard_ok[3];
        for (int run = 0; run < 3; run++) { // 0: no scratch, 1: one chunk's bytes, 2: a byte short
            loss[run] = be->alloc((size_t)N * 4), dy[run] = be->alloc((size_t)N * h * ab);
            dE[run] = be->alloc((size_t)V * h * 4);
            be->memset0(dE[run], (size_t)V * h * 4);
            be->memcpy_h2d(scr, pattern, total);
            be->lmhead_ce(loss[run], dy[run], dE[run], in.y, in.E, in.tg, N, h, V, in.scale, run ? scr : NULL,
                          run == 1 ? chunk : run == 2 ? chunk - 1 : 0);
            be->memcpy_d2h(back, scr, total);
            used[run] = memcmp(back, pattern, chunk) != 0;
            guard_ok[run] = !memcmp(back + chunk, pattern + chunk, GUARD_B);
        }
        int same = 1;
        char *a = xmalloc((size_t)V * h * 4), *b = xmalloc((size_t)V * h * 4);
        for (int run = 1; run < 3; run++) {
            be->memcpy_d2h(a, loss[0], (size_t)N * 4), be->memcpy_d2h(b, loss[run], (size_t)N * 4);
            same &= !memcmp(a, b, (size_t)N * 4);
            be->memcpy_d2h(a, dy[0], (size_t)N * h * ab), be->memcpy_d2h(b, dy[run], (size_t)N * h * ab);
            same &= !memcmp(a, b, (size_t)N * h * ab);
            be->memcpy_d2h(a, dE[0], (size_t)V * h * 4), be->memcpy_d2h(b, dE[run], (size_t)V * h * 4);
            same &= !memcmp(a, b, (size_t)V * h * 4);
        }
        const int ok = same && used[1] == usable && !used[2] && guard_ok[1] && guard_ok[2];
        g_checks++;
        if (!ok) g_failures++;
        char name[80];
        snprintf(name, sizeof name, "lmhead_ce scratch N=%d h=%d V=%d chunks of %d", N, h, V, R);
        printf("%s %-62s %s  same bits: %s; a chunk's scratch used: %s (want %s), a byte short: %s; guard: %s\n",
               ok ? "PASS" : "FAIL", name, ab == 2 ? "bf16" : "fp32", same ? "yes" : "NO", used[1] ? "yes" : "no",
               usable ? "yes" : "no", used[2] ? "USED" : "untouched", guard_ok[1] && guard_ok[2] ? "intact" : "WRITTEN");
        free(a), free(b), free(pattern), free(back);
        for (int run = 0; run < 3; run++) be->free(loss[run]), be->free(dy[run]), be->free(dE[run]);
        lmhead_inputs_free(be, &in), be->free(scr);
    }
    unsetenv("GDN_CUDA_CE_ROWS");
}

// lmhead_ce without forced chunk rows, given a scratch smaller than its one chunk (N rows): one that holds at least
// half of it is used, in smaller chunks that fit it (ce_fit_rows), and nothing past it is written; one that holds
// less is left alone. The results match the call without scratch within fp32 reordering (dE adds the chunks in
// other groups) and, in bf16, a logit's rounding.
void check_lmhead_scratch_fit(const Backend *be) {
    const int N = 50, h = 40, V = 520, GUARD_B = 4096;
    const size_t ab = (size_t)be->act_bytes, lb = ab == 2 ? 2 : 4, row = (size_t)V * lb;
    const size_t sizes[2] = {30 * row + 7, 24 * row}; // 30 rows (>= N / 2: used, chunks of 24), 24 (< 25: not used)
    Rng g = {0x5c7a};
    LmheadIn in = lmhead_inputs(be, &g, N, h, V, 9, 4);
    float *st = be->alloc((size_t)N * h * 4); // dy to fp32
    const size_t total = sizes[0] + GUARD_B;
    unsigned char *pattern = xmalloc(total), *back = xmalloc(total);
    memset(pattern, 0xFF, total - GUARD_B), memset(pattern + total - GUARD_B, 0xA5, GUARD_B);
    void *scr = be->alloc(total);
    float *loss[3], *dE[3], *hl[3], *hdE[3];
    void *dy[3];
    float *hdy[3];
    int used[3] = {0, 0, 0}, guard_ok[3] = {1, 1, 1};
    for (int run = 0; run < 3; run++) { // 0: no scratch; 1, 2: sizes[0], sizes[1]
        loss[run] = be->alloc((size_t)N * 4), dy[run] = be->alloc((size_t)N * h * ab), dE[run] = be->alloc((size_t)V * h * 4);
        be->memset0(dE[run], (size_t)V * h * 4);
        be->memcpy_h2d(scr, pattern, total);
        const size_t sb = run ? sizes[run - 1] : 0;
        be->lmhead_ce(loss[run], dy[run], dE[run], in.y, in.E, in.tg, N, h, V, in.scale, run ? scr : NULL, sb);
        be->memcpy_d2h(back, scr, total);
        if (run) used[run] = memcmp(back, pattern, sb) != 0, guard_ok[run] = !memcmp(back + sb, pattern + sb, total - sb);
        hl[run] = xmalloc((size_t)N * 4), hdE[run] = xmalloc((size_t)V * h * 4), hdy[run] = xmalloc((size_t)N * h * 4);
        be->memcpy_d2h(hl[run], loss[run], (size_t)N * 4), be->memcpy_d2h(hdE[run], dE[run], (size_t)V * h * 4);
        be->from_act(st, dy[run], (size_t)N * h), be->memcpy_d2h(hdy[run], st, (size_t)N * h * 4);
    }
    const double tol = ab == 2 ? 2e-2 : 1e-5; // relative to each output's largest magnitude
    double worst = 0;
    for (int run = 1; run < 3; run++) {
        const float *A[3] = {hl[0], hdy[0], hdE[0]}, *B[3] = {hl[run], hdy[run], hdE[run]};
        const size_t n[3] = {(size_t)N, (size_t)N * h, (size_t)V * h};
        for (int o = 0; o < 3; o++) {
            double mx = 0, d = 0;
            for (size_t e = 0; e < n[o]; e++) {
                mx = fmax(mx, fabs(A[o][e]));
                d = fmax(d, fabs((double)A[o][e] - B[o][e]));
            }
            worst = fmax(worst, mx > 0 ? d / mx : d);
        }
    }
    const int ok = worst <= tol && used[1] && !used[2] && guard_ok[1] && guard_ok[2];
    g_checks++;
    if (!ok) g_failures++;
    printf("%s %-62s %s  30 rows' scratch used: %s, 24 rows': %s; guard: %s; max rel diff %.2e (tol %.0e)\n",
           ok ? "PASS" : "FAIL", "lmhead_ce scratch of less than a chunk N=50 h=40 V=520", ab == 2 ? "bf16" : "fp32",
           used[1] ? "yes" : "NO", used[2] ? "USED" : "untouched", guard_ok[1] && guard_ok[2] ? "intact" : "WRITTEN",
           worst, tol);
    for (int run = 0; run < 3; run++) {
        be->free(loss[run]), be->free(dy[run]), be->free(dE[run]);
        free(hl[run]), free(hdE[run]), free(hdy[run]);
    }
    free(pattern), free(back);
    lmhead_inputs_free(be, &in), be->free(st), be->free(scr);
}
