// test_optim.c: AdamW (CPU backend op), Megatron's LR schedule and global-norm clipping over 20 steps,
// checked against torch.optim.AdamW + LambdaLR + clip_grad_norm_ in float64 (tests/ref/optim_ref.py).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/backend.h"
#include "../model/config.h"
#include "../train/schedule.h"
#include "../util/common.h"

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
        fprintf(f, "%.17g %.9g\n", lr_at(&c, step - 1), norm);
        for (int i = 0; i < N; i++) fprintf(f, "%.9g ", p[i]);
        fprintf(f, "\n");
    }
    fclose(f);
    int rc = system("/usr/bin/python3 tests/ref/optim_ref.py build/tests/optim_dump.txt");
    printf("%s: AdamW + schedule + clipping vs torch over %d steps\n", rc == 0 ? "PASS" : "FAIL", STEPS);
    return rc == 0 ? 0 : 1;
}
