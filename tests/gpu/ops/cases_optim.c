// cases_optim.c: test_cuda_ops' cases for the optimizer's ops: AdamW and the sum of squares behind the gradient
// norm.
// Each run_* wrapper calls one op through the Backend table; each cases_* adds cases (harness.h).
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
