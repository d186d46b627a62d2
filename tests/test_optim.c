// test_optim.c: AdamW (CPU backend op), Megatron's LR schedule and global-norm clipping over 20 steps,
// checked against torch.optim.AdamW + LambdaLR + clip_grad_norm_ in float64 (tests/ref/optim_ref.py). The
// training step's path (clip_scale on the backend, one adamw_multi over a chunk table) runs alongside on a copy
// and must give the same bits as the per-tensor calls every step; so must a chunk table of cut runs at shard
// offsets (chunked_plan_same).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/adamw_plan.h"
#include "../model/backend.h"
#include "../model/config.h"
#include "../train/schedule.h"
#include "../util/common.h"

// The chunk table itself: a run longer than 2 * ADAMW_CHUNK (cut into 3 chunks) and short runs at shifted state
// offsets (a ZeRO-1 shard; the last run continues the one before in g and the state but has the other decay), against
// adamw on each whole run: the same bits over 3 steps; state elements no run covers stay put. Then clip_scale's
// three cases: clipping (Megatron's coefficient in double), a norm under the maximum, clipping off.
static int chunked_plan_same(const Backend *be) {
    enum { C = ADAMW_CHUNK, N = 2 * C + 300, RUNS = 3 };
    const size_t runs[RUNS][4] = {{10, 0, 2 * C + 5, 1}, {2 * C + 20, 2 * C + 5, 200, 0}, {2 * C + 220, 2 * C + 205, 3, 1}};
    float *g = be->alloc(N * 4), *x[2][3], *gs = be->alloc(4);
    uint64_t st = 7;
    for (int k = 0; k < 2; k++)
        for (int t = 0; t < 3; t++) x[k][t] = be->alloc(N * 4);
    for (int i = 0; i < N; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        double u = (st >> 11) * 0x1.0p-53;
        g[i] = (float)(u - 0.5), x[0][0][i] = (float)(0.5 - u) * 0.1f, x[0][1][i] = (float)u * 0.01f;
        x[0][2][i] = 1e-4f * (float)(i % 7);
    }
    for (int t = 0; t < 3; t++) memcpy(x[1][t], x[0][t], N * 4);
    float first = x[0][0][0], last = x[0][0][N - 1]; // covered by the first run; by none
    AdamwPlan plan = {0};
    for (int r = 0; r < RUNS; r++) adamw_plan_add(&plan, runs[r][0], runs[r][1], runs[r][1], runs[r][2], (int)runs[r][3]);
    adamw_plan_upload(&plan, be);
    float gscale = 0.3f;
    memcpy(gs, &gscale, 4);
    for (int step = 1; step <= 3; step++) {
        for (int r = 0; r < RUNS; r++) {
            size_t go = runs[r][0], so = runs[r][1];
            be->adamw(x[0][0] + so, NULL, g + go, x[0][1] + so, x[0][2] + so, runs[r][2], 1e-2f, 0.9f, 0.95f, 1e-8f,
                      runs[r][3] ? 0.1f : 0.0f, step, gscale);
        }
        be->adamw_multi(plan.dev, plan.n, x[1][0], NULL, g, x[1][1], x[1][2], 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, step, gs);
    }
    int same = plan.n == 5 && x[1][0][0] != first && x[1][0][N - 1] == last; // 3 + 1 + 1 chunks
    for (int t = 0; t < 3; t++) same &= !memcmp(x[0][t], x[1][t], N * 4);
    printf("%s: adamw_multi, %d chunks over %d runs at shifted state offsets = adamw per run, bit for bit\n",
           same ? "PASS" : "FAIL", plan.n, RUNS);
    adamw_plan_free(&plan, be);
    float ss[3] = {2.25f, 0.25f, 2.25f}, mx[3] = {1.0f, 1.0f, 0.0f}, out[3];
    for (int i = 0; i < 3; i++) {
        memcpy(gs, &ss[i], 4);
        be->clip_scale(&out[i], gs, mx[i]);
    }
    int clip = out[0] == (float)(1.0 / (1.5 + 1e-6)) && out[1] == 1.0f && out[2] == 1.0f;
    printf("%s: clip_scale %.9g (norm 1.5, max 1), %g (norm 0.5), %g (off)\n", clip ? "PASS" : "FAIL", out[0], out[1],
           out[2]);
    for (int k = 0; k < 2; k++)
        for (int t = 0; t < 3; t++) be->free(x[k][t]);
    be->free(g), be->free(gs);
    return same && clip;
}

int main(void) {
    const Backend *be = backend_cpu();
    Config c;
    config_defaults(&c);
    c.train_iters = 20; c.lr = 1e-2f; c.min_lr = 1e-3f; c.lr_warmup_iters = 4; c.lr_decay_iters = 16;
    c.weight_decay = 0.1f; c.adam_beta1 = 0.9f; c.adam_beta2 = 0.95f; c.adam_eps = 1e-8f; c.clip_grad = 1.0f;
    enum { N0 = 600, N1 = 400, N = N0 + N1, STEPS = 20 };
    float *p = be->alloc(N * 4), *g = be->alloc(N * 4), *m = be->alloc(N * 4), *v = be->alloc(N * 4), *s = be->alloc(4);
    uint64_t st = 99;
    for (int i = 0; i < N; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (float)(((st >> 11) * 0x1.0p-53) - 0.5);
    }
    // the multi-tensor copy: its own p, m, v, and the clip scale in backend memory
    float *p2 = be->alloc(N * 4), *m2 = be->alloc(N * 4), *v2 = be->alloc(N * 4), *gs2 = be->alloc(4);
    memcpy(p2, p, N * 4);
    AdamwPlan plan = {0};
    adamw_plan_add(&plan, 0, 0, 0, N0, 1);
    adamw_plan_add(&plan, N0, N0, N0, N1, 0);
    adamw_plan_upload(&plan, be);
    int same = 1;
    FILE *f = xfopen("build/tests/optim_dump.txt", "w");
    fprintf(f, "%d %d %d\n", N0, N1, STEPS);
    for (int i = 0; i < N; i++) fprintf(f, "%.9g ", p[i]);
    fprintf(f, "\n");
    for (int step = 1; step <= STEPS; step++) {
        // gradients: a fixed pattern whose scale grows so that later steps are clipped
        double scale = 0.002 * step * step;
        for (int i = 0; i < N; i++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            g[i] = (float)((((st >> 11) * 0x1.0p-53) - 0.5) * scale);
        }
        for (int i = 0; i < N; i++) fprintf(f, "%.9g ", g[i]);
        fprintf(f, "\n");
        be->sumsq(s, g, N);
        double norm = sqrt(s[0]), coeff = c.clip_grad / (norm + 1e-6);
        float gscale = coeff < 1 ? (float)coeff : 1.0f;
        float lr = (float)lr_at(&c, step - 1);
        be->adamw(p, NULL, g, m, v, N0, lr, c.adam_beta1, c.adam_beta2, c.adam_eps, c.weight_decay, step, gscale);
        be->adamw(p + N0, NULL, g + N0, m + N0, v + N0, N1, lr, c.adam_beta1, c.adam_beta2, c.adam_eps, 0.0f, step, gscale);
        be->clip_scale(gs2, s, c.clip_grad);
        be->adamw_multi(plan.dev, plan.n, p2, NULL, g, m2, v2, lr, c.adam_beta1, c.adam_beta2, c.adam_eps,
                        c.weight_decay, step, gs2);
        same &= !memcmp(gs2, &gscale, 4) && !memcmp(p2, p, N * 4) && !memcmp(m2, m, N * 4) && !memcmp(v2, v, N * 4);
        fprintf(f, "%.17g %.9g\n", lr_at(&c, step - 1), norm);
        for (int i = 0; i < N; i++) fprintf(f, "%.9g ", p[i]);
        fprintf(f, "\n");
    }
    fclose(f);
    int rc = system("/usr/bin/python3 tests/ref/optim_ref.py build/tests/optim_dump.txt");
    printf("%s: AdamW + schedule + clipping vs torch over %d steps\n", rc == 0 ? "PASS" : "FAIL", STEPS);
    printf("%s: clip_scale + adamw_multi give the same bits as the host clip + per-tensor adamw over %d steps\n",
           same ? "PASS" : "FAIL", STEPS);
    adamw_plan_free(&plan, be);
    int chunked = chunked_plan_same(be);
    return rc == 0 && same && chunked ? 0 : 1;
}
