// cases_optim.c: test_cuda_ops' cases for the optimizer's ops: AdamW (per range and multi-tensor), the sum of
// squares behind the gradient norm and the clip scale from it.
// Each run_* wrapper calls one op through the Backend table; each cases_* adds cases (harness.h).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/adamw_plan.h"
#include "tests/gpu/ops/harness.h"

static void run_adamw(const Backend *be, void **p, const Case *c) {
    // p, g, m, v, p_act. In fp32 mode p is the compute copy (the CPU twin requires p_act NULL or p), so the
    // test copies p into p_act afterwards; in bf16 mode the op writes p_act itself.
    void *pact = be->act_bytes == 2 ? p[4] : NULL;
    be->adamw(p[0], pact, p[1], p[2], p[3], (size_t)c->i[0], c->f[0], c->f[1], c->f[2], c->f[3], c->f[4], c->i[1],
              c->f[5]);
    if (!pact) be->memcpy_d2d(p[4], p[0], (size_t)c->i[0] * 4);
}

static void run_sum(const Backend *be, void **p, const Case *c) {
    be->sum(p[1], p[0], (size_t)c->i[0]);
    be->sumsq((float *)p[1] + 1, p[0], (size_t)c->i[0]);
}

void cases_adamw(Rng *g, int n, int step) {
    Case *c = new_case("adamw", run_adamw, "n=%d step=%d", n, step);
    c->i[0] = n, c->i[1] = step;
    c->f[0] = 3e-4f, c->f[1] = 0.9f, c->f[2] = 0.95f, c->f[3] = 1e-8f, c->f[4] = 0.1f, c->f[5] = 0.5f;
    fill_normal(add_t(c, "p", K_F32, R_ACC, 1, n, 0, F32_EXACT, B16_EXACT), g, 0, 0.05f);
    fill_normal(add_in(c, "g", K_F32, 1, n, 0), g, 0, 1);
    fill_normal(add_t(c, "m", K_F32, R_ACC, 1, n, 0, F32_EXACT, B16_EXACT), g, 0, 0.1f);
    fill_uniform(add_t(c, "v", K_F32, R_ACC, 1, n, 0, F32_EXACT, B16_EXACT), g, 0, 0.01f);
    // p_act: the bf16 compute copy, compared with the CPU's p rounded to bf16
    add_t(c, "p_act", K_ACT, R_OUT, 1, n, 0, F32_EXACT, B16_EXACT)->round_ref = 1;
}

void cases_sum(Rng *g, int n) {
    Case *c = new_case("sum/sumsq", run_sum, "n=%d", n);
    c->i[0] = n;
    fill_normal(add_in(c, "x", K_F32, 1, n > 0 ? n : 1, 0), g, 0.1f, 1);
    add_t(c, "sum|sumsq", K_F32, R_OUT, 1, 2, 0, F32_SUM, F32_SUM);
}

// The multi-tensor AdamW's layouts (c->i[0]): runs {gradient offset, state offset, length, decay}; p is indexed at
// the state offset (ZeRO-1 on bf16 backends keeps its masters sharded like the moments). Layout 0: the whole flat
// vector as model_adamw covers it (state offset = gradient offset), a run longer than ADAMW_CHUNK among short ones;
// layout 1: a rank's shards, compacted in the state, with gradient elements no chunk covers (left untouched).
static const size_t MULTI_RUNS[2][6][4] = {
    {{0, 0, 1000, 1}, {1000, 1000, 64, 0}, {1064, 1064, 140000, 1}, {141064, 141064, 3, 0}, {141067, 141067, 5000, 1}},
    {{100, 0, 500, 1}, {600, 500, 7, 0}, {2000, 507, 70000, 1}, {80000, 70507, 1, 0}},
};
static const size_t MULTI_N[2] = {146067, 80100}, MULTI_NS[2] = {146067, 70508}; // gradient, state elements

static void run_adamw_multi(const Backend *be, void **p, const Case *c) {
    // p, g, m, v, p_act, gscale. fp32 mode: the op writes no act copy (p is the compute copy), so the test
    // copies each chunk of p into p_act at its gradient offset afterwards; bf16 mode: the op writes it.
    int lay = c->i[0];
    AdamwPlan plan = {0};
    for (int r = 0; r < 6 && MULTI_RUNS[lay][r][2]; r++)
        adamw_plan_add(&plan, MULTI_RUNS[lay][r][0], MULTI_RUNS[lay][r][1], MULTI_RUNS[lay][r][1],
                       MULTI_RUNS[lay][r][2], (int)MULTI_RUNS[lay][r][3]);
    adamw_plan_upload(&plan, be);
    void *pact = be->act_bytes == 2 ? p[4] : NULL;
    be->adamw_multi(plan.dev, plan.n, p[0], pact, p[1], p[2], p[3], c->f[0], c->f[1], c->f[2], c->f[3], c->f[4],
                    c->i[1], p[5]);
    if (!pact)
        for (int k = 0; k < plan.n; k++)
            be->memcpy_d2d((float *)p[4] + plan.host[k].goff, (float *)p[0] + plan.host[k].poff, plan.host[k].n * 4);
    adamw_plan_free(&plan, be);
}

void cases_adamw_multi(Rng *g, int layout, int step) {
    size_t n = MULTI_N[layout], ns = MULTI_NS[layout];
    Case *c = new_case("adamw_multi", run_adamw_multi, "layout=%d step=%d", layout, step);
    c->i[0] = layout, c->i[1] = step;
    c->f[0] = 3e-4f, c->f[1] = 0.9f, c->f[2] = 0.95f, c->f[3] = 1e-8f, c->f[4] = 0.1f;
    fill_normal(add_t(c, "p", K_F32, R_ACC, 1, ns, 0, F32_EXACT, B16_EXACT), g, 0, 0.05f);
    fill_normal(add_in(c, "g", K_F32, 1, n, 0), g, 0, 1);
    fill_normal(add_t(c, "m", K_F32, R_ACC, 1, ns, 0, F32_EXACT, B16_EXACT), g, 0, 0.1f);
    fill_uniform(add_t(c, "v", K_F32, R_ACC, 1, ns, 0, F32_EXACT, B16_EXACT), g, 0, 0.01f);
    // p_act: in-out, so elements no chunk covers must keep their values on both sides
    Tensor *pa = add_t(c, "p_act", K_ACT, R_ACC, 1, n, 0, F32_EXACT, B16_EXACT);
    fill_normal(pa, g, 0, 0.05f);
    pa->round_ref = 1;
    fill_uniform(add_in(c, "gscale", K_F32, 1, 1, 0), g, 0.2f, 0.9f);
}

static void run_clip_scale(const Backend *be, void **p, const Case *c) {
    be->clip_scale(p[1], p[0], c->f[0]);
    be->clip_scale((float *)p[1] + 1, p[0], 0.0f); // clipping off: 1
}

// sumsq is the squared norm; max_norm against it decides whether the scale is < 1
void cases_clip_scale(Rng *g, float sumsq, float max_norm) {
    Case *c = new_case("clip_scale", run_clip_scale, "sumsq=%g max_norm=%g", sumsq, max_norm);
    c->f[0] = max_norm;
    add_in(c, "sumsq", K_F32, 1, 1, 0)->init[0] = sumsq;
    (void)g;
    add_t(c, "scale|off", K_F32, R_OUT, 1, 2, 0, F32_EXACT, F32_EXACT);
}

// adamw_multi against adamw called on each run, on the same backend (its own kernels, not the CPU twin), over both
// layouts and two steps: p, m, v and (bf16) the act copy must be the same bits. This is the claim model_adamw and
// zero_step rest on when they replace the per-run calls with one multi-tensor launch.
void check_adamw_multi_per_run(const Backend *be, int bf16) {
    const float lr = 3e-4f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, gscale = 0.37f;
    Rng g = {0x5eed0f1a};
    for (int lay = 0; lay < 2; lay++) {
        size_t n = MULTI_N[lay], ns = MULTI_NS[lay], ab = (size_t)be->act_bytes;
        float *h[4] = {xmalloc(ns * 4), xmalloc(n * 4), xmalloc(ns * 4), xmalloc(ns * 4)}; // p, g, m, v
        for (size_t e = 0; e < ns; e++)
            h[0][e] = 0.05f * rng_normal(&g), h[2][e] = 0.1f * rng_normal(&g), h[3][e] = rng_uniform(&g, 0, 0.01f);
        for (size_t e = 0; e < n; e++) h[1][e] = rng_normal(&g);
        float *dg = be->alloc(n * 4), *d[2][3], *gs = be->alloc(4);
        void *act[2];
        be->memcpy_h2d(dg, h[1], n * 4);
        be->memcpy_h2d(gs, &gscale, 4);
        for (int k = 0; k < 2; k++) {
            for (int t = 0; t < 3; t++) {
                d[k][t] = be->alloc(ns * 4);
                be->memcpy_h2d(d[k][t], h[t == 0 ? 0 : t + 1], ns * 4);
            }
            act[k] = be->alloc(n * ab);
            be->memset0(act[k], n * ab);
        }
        AdamwPlan plan = {0};
        for (int r = 0; r < 6 && MULTI_RUNS[lay][r][2]; r++)
            adamw_plan_add(&plan, MULTI_RUNS[lay][r][0], MULTI_RUNS[lay][r][1], MULTI_RUNS[lay][r][1],
                           MULTI_RUNS[lay][r][2], (int)MULTI_RUNS[lay][r][3]);
        adamw_plan_upload(&plan, be);
        for (int step = 1; step <= 2; step++) {
            for (int r = 0; r < 6 && MULTI_RUNS[lay][r][2]; r++) {
                size_t go = MULTI_RUNS[lay][r][0], so = MULTI_RUNS[lay][r][1];
                be->adamw(d[0][0] + so, bf16 ? (char *)act[0] + go * ab : NULL, dg + go, d[0][1] + so, d[0][2] + so,
                          MULTI_RUNS[lay][r][2], lr, b1, b2, eps, MULTI_RUNS[lay][r][3] ? wd : 0.0f, step, gscale);
            }
            be->adamw_multi(plan.dev, plan.n, d[1][0], bf16 ? act[1] : NULL, dg, d[1][1], d[1][2], lr, b1, b2, eps, wd,
                            step, gs);
        }
        int same = 1;
        char *a = xmalloc(n * 4), *b = xmalloc(n * 4);
        for (int t = 0; t < 4; t++) {
            size_t bytes = t < 3 ? ns * 4 : n * ab;
            be->memcpy_d2h(a, t < 3 ? (void *)d[0][t] : act[0], bytes);
            be->memcpy_d2h(b, t < 3 ? (void *)d[1][t] : act[1], bytes);
            same &= !memcmp(a, b, bytes);
        }
        g_checks++;
        if (!same) g_failures++;
        printf("%s %-62s %s  adamw_multi = adamw per run (same backend), p m v p_act bit for bit\n",
               same ? "PASS" : "FAIL", lay ? "adamw_multi vs adamw: shards, 2 steps" : "adamw_multi vs adamw: whole, 2 steps",
               bf16 ? "bf16" : "fp32");
        free(a), free(b);
        adamw_plan_free(&plan, be);
        for (int k = 0; k < 2; k++) {
            for (int t = 0; t < 3; t++) be->free(d[k][t]);
            be->free(act[k]);
        }
        be->free(dg), be->free(gs);
        for (int t = 0; t < 4; t++) free(h[t]);
    }
}

// adamw_multi_lp (use_precision_aware_optimizer): layout as adamw_multi's; lp: the moments kept at bf16 precision
// (ADAMW_M_BF16 | ADAMW_V_BF16); rem_runs: bit r set = run r keeps its master as p_act's high half + a 16-bit
// remainder (TransformerEngine's split), the others in p at the state offset. rem is stored as int32 pairs (the
// harness compares integers exactly). p_act is written everywhere: its initial values are the high halves.
static void run_adamw_multi_lp(const Backend *be, void **p, const Case *c) {
    // p, g, m, v, p_act, gscale, rem
    int lay = c->i[0];
    AdamwPlan plan = {0};
    for (int r = 0; r < 6 && MULTI_RUNS[lay][r][2]; r++) {
        const int first = plan.n;
        adamw_plan_add(&plan, MULTI_RUNS[lay][r][0], MULTI_RUNS[lay][r][1], MULTI_RUNS[lay][r][1],
                       MULTI_RUNS[lay][r][2], (int)MULTI_RUNS[lay][r][3]);
        for (int k = first; k < plan.n; k++) plan.host[k].rem = (uint16_t)((c->i[3] >> r) & 1);
    }
    adamw_plan_upload(&plan, be);
    be->adamw_multi_lp(plan.dev, plan.n, p[0], c->i[3] ? (uint16_t *)p[6] : NULL, p[4], p[1], p[2], p[3], c->i[2],
                       c->f[0], c->f[1], c->f[2], c->f[3], c->f[4], c->i[1], p[5]);
    adamw_plan_free(&plan, be);
}

void cases_adamw_multi_lp(Rng *g, int layout, int step, int lp, int rem_runs) {
    size_t n = MULTI_N[layout], ns = MULTI_NS[layout];
    Case *c = new_case("adamw_multi_lp", run_adamw_multi_lp, "layout=%d step=%d m %s v %s rem runs 0x%x", layout, step,
                       lp & ADAMW_M_BF16 ? "bf16" : "fp32", lp & ADAMW_V_BF16 ? "bf16" : "fp32", rem_runs);
    c->i[0] = layout, c->i[1] = step, c->i[2] = lp, c->i[3] = rem_runs;
    c->f[0] = 3e-4f, c->f[1] = 0.9f, c->f[2] = 0.95f, c->f[3] = 1e-8f, c->f[4] = 0.1f;
    fill_normal(add_t(c, "p", K_F32, R_ACC, 1, ns, 0, F32_EXACT, B16_EXACT), g, 0, 0.05f);
    fill_normal(add_in(c, "g", K_F32, 1, n, 0), g, 0, 1);
    fill_normal(add_t(c, "m", lp & ADAMW_M_BF16 ? K_ACT : K_F32, R_ACC, 1, ns, 0, F32_EXACT, B16_EXACT), g, 0, 0.1f);
    fill_uniform(add_t(c, "v", lp & ADAMW_V_BF16 ? K_ACT : K_F32, R_ACC, 1, ns, 0, F32_EXACT, B16_EXACT), g, 0, 0.01f);
    Tensor *pa = add_t(c, "p_act", K_ACT, R_ACC, 1, n, 0, F32_EXACT, B16_EXACT);
    fill_normal(pa, g, 0, 0.05f);
    pa->round_ref = 1; // chunks with p: the CPU's fp32 act holds the fp32 master
    fill_uniform(add_in(c, "gscale", K_F32, 1, 1, 0), g, 0.2f, 0.9f);
    Tensor *rem = add_t(c, "rem", K_I32, R_ACC, 1, (ns + 1) / 2, 0, F32_EXACT, B16_EXACT);
    for (size_t e = 0; e < tsize(rem); e++) rem->init_i[e] = (int32_t)(uint32_t)rng_u64(g); // every bit pattern
    if (!rem_runs) rem->is_null = 1;
}
