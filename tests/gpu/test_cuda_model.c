// test_cuda_model.c (GPU): a whole training step of tiny models on CUDA against the CPU reference backend.
// Same weights, same batch: loss within 1e-5 relative in the fp32 debug mode and 1e-3 in bf16; every
// gradient's relative error (max|cuda - cpu| / max|cpu|) reported, fp32 mode held to 1e-4 (reduction
// order differs between backends); two CUDA runs must give bit-identical gradients (no atomics).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../model/gdn.h"
#include "../../util/common.h"

static uint64_t rs = 777;
static double urand(void) {
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return ((rs >> 11) + 0.5) * 0x1.0p-53;
}

typedef struct { const char *name; int h, L, H, HV, dk, dv, F, V, B, T; } Case;

static double step(const Backend *be, const Config *c, const float *params, const int32_t *ids, const int32_t *tgt,
                   int valid, float *grads) {
    Model *m = model_create(c, be, 1);
    model_set_params(m, params);
    model_zero_grads(m);
    model_fwd_bwd(m, ids, tgt, c->micro_batch_size, c->seq_length, 1.0f / valid, 0);
    double loss = model_read_loss_slots(m, 1) / valid;
    model_get_grads(m, grads);
    model_free(m);
    return loss;
}

int main(void) {
    char err[ERR_LEN];
    const Backend *cpu = backend_cpu(), *c32 = backend_cuda(0, err, sizeof err);
    if (!c32) { printf("FAIL: no CUDA backend: %s\n", err); return 1; }
    const Backend *c16 = backend_cuda(1, err, sizeof err);
    const Case cases[] = {
        {"gva2_t100", 64, 2, 2, 4, 16, 16, 128, 1000, 2, 100},
        {"heads64_t300", 128, 2, 2, 4, 64, 64, 256, 2000, 2, 300},
        {"mha_t64", 32, 1, 2, 2, 32, 32, 64, 500, 3, 64},
    };
    int fails = 0;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const Case *tc = &cases[ci];
        Config c;
        config_defaults(&c);
        c.hidden_size = tc->h; c.num_layers = 2 * tc->L; c.num_heads = tc->H; c.num_v_heads = tc->HV;
        c.head_dim = tc->dk; c.v_head_dim = tc->dv; c.ffn_hidden_size = tc->F; c.vocab_size = tc->V;
        c.seq_length = tc->T; c.micro_batch_size = tc->B; c.global_batch_size = tc->B; c.init_std = 0.1f;
        ModelDims d = config_dims(&c);
        ParamLayout pl;
        params_layout(&pl, &d);
        size_t P = pl.total;
        float *params = xmalloc(P * 4), *g_cpu = xmalloc(P * 4), *g_32 = xmalloc(P * 4), *g_16 = xmalloc(P * 4),
              *g_16b = xmalloc(P * 4);
        params_init(&pl, params, 11);
        int N = tc->B * tc->T, valid = 0;
        int32_t *ids = xmalloc(N * 4), *tgt = xmalloc(N * 4);
        for (int i = 0; i < N; i++) ids[i] = (int32_t)(urand() * tc->V);
        for (int i = 0; i < N; i++) { tgt[i] = (i + 1) % tc->T ? ids[i + 1] : -1; valid += tgt[i] >= 0; }
        double l_cpu = step(cpu, &c, params, ids, tgt, valid, g_cpu);
        double l_32 = step(c32, &c, params, ids, tgt, valid, g_32);
        double l_16 = step(c16, &c, params, ids, tgt, valid, g_16);
        step(c16, &c, params, ids, tgt, valid, g_16b);
        double e32 = fabs(l_32 - l_cpu) / fabs(l_cpu), e16 = fabs(l_16 - l_cpu) / fabs(l_cpu);
        int ok32 = e32 <= 1e-5, ok16 = e16 <= 1e-3, det = memcmp(g_16, g_16b, P * 4) == 0;
        printf("%s %s: loss cpu %.7f | cuda fp32 %.7f (rel %.2e, tol 1e-5) | cuda bf16 %.7f (rel %.2e, tol 1e-3) | "
               "bf16 grads deterministic: %s\n",
               ok32 && ok16 && det ? "PASS" : "FAIL", tc->name, l_cpu, l_32, e32, l_16, e16, det ? "yes" : "NO");
        fails += !(ok32 && ok16 && det);
        double worst32 = 0, worst16 = 0;
        for (int t = 0; t < pl.ntensors; t++) {
            const TensorInfo *ti = &pl.tensors[t];
            double mx = 0, d32 = 0, d16 = 0;
            for (size_t j = 0; j < ti->numel; j++) {
                double r = g_cpu[ti->off + j];
                mx = fmax(mx, fabs(r));
                d32 = fmax(d32, fabs(g_32[ti->off + j] - r));
                d16 = fmax(d16, fabs(g_16[ti->off + j] - r));
                if (!isfinite(g_32[ti->off + j]) || !isfinite(g_16[ti->off + j])) d32 = d16 = INFINITY;
            }
            double r32 = mx > 0 ? d32 / mx : d32, r16 = mx > 0 ? d16 / mx : d16;
            worst32 = fmax(worst32, r32);
            worst16 = fmax(worst16, r16);
            if (ti->layer <= 0) printf("    grad %-40s fp32 %.2e  bf16 %.2e\n", ti->name, r32, r16);
            if (!(r32 <= 1e-4)) { printf("    FAIL grad %s fp32 rel %.3e > 1e-4\n", ti->name, r32); fails++; }
        }
        printf("    worst gradient relative error: fp32 %.2e, bf16 %.2e\n", worst32, worst16);
        params_layout_free(&pl);
        free(params); free(g_cpu); free(g_32); free(g_16); free(g_16b); free(ids); free(tgt);
    }
    printf("%s: %d failed\n", fails ? "FAIL" : "PASS", fails);
    return fails ? 1 : 0;
}
