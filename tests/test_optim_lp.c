// test_optim_lp.c: the precision-aware optimizer (use_precision_aware_optimizer; model/optim_lp.c) on the CPU.
// - TransformerEngine's remainder split: join(split(x)) = x for every low half under many high halves; the bf16
//   weight is x rounded to nearest with ties up in magnitude (it differs from round-to-nearest-even only at ties).
// - adamw_multi_lp against adamw_multi over 12 steps: masters kept as remainders track the fp32 masters bit for
//   bit (the split is exact), and bf16 moments are the fp32 update's moments rounded to bf16 after every step.
// - The model: with remainders (a CPU model given a separate act copy, as a bf16 backend keeps) and bf16 moments,
//   model_set_params/get_params and model_set_optim/get_optim round-trip exactly, and model_adamw on fixed
//   gradients gives the masters and moments of the same model with fp32 masters, every step; the GEMM weights'
//   act copy is the split's high half, the fp32-read tensors' masters live in small.
// - The keys: strict values and Megatron's rules.
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/adamw_plan.h"
#include "../model/gdn.h"
#include "../util/common.h"

static int fails;
static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%s: ", ok ? "PASS" : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fails += !ok;
}

static uint64_t rs = 12345;
static uint32_t rnd32(void) {
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rs >> 32);
}
static float bits_f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint32_t f_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void split_join(void) {
    long bad_round = 0, bad_join = 0, ties = 0, differs_rne = 0;
    for (int t = 0; t < 300; t++) {
        uint32_t hi = rnd32() >> 16;
        if (((hi >> 7) & 0xff) == 0xff || ((hi >> 7) & 0xff) == 0xfe) continue; // Inf/NaN, and rounding into them
        for (uint32_t lo = 0; lo < 65536; lo++) {
            float x = bits_f(hi << 16 | lo);
            uint16_t rem, w = f32_split_remainder(x, &rem);
            bad_join += f_bits(f32_join_remainder(w, rem)) != f_bits(x);
            // nearest bf16, ties away from zero: |x - w| <= half an ulp, and strictly less unless a tie
            double d = fabs((double)x - (double)bf16_to_f32(w)), ulp = fabs((double)bf16_to_f32((uint16_t)(hi | 1)) -
                                                                             (double)bf16_to_f32((uint16_t)(hi & ~1u)));
            bad_round += d > ulp / 2 || (lo != 0x8000 && d == ulp / 2);
            ties += lo == 0x8000;
            differs_rne += w != f32_to_bf16(x);
        }
    }
    check(!bad_join && !bad_round && differs_rne <= ties,
          "remainder split: join(split(x)) == x and the weight is x rounded to nearest (%ld / %ld mismatches; "
          "%ld of the ties differ from round-to-nearest-even)", bad_join, bad_round, differs_rne);
}

// adamw_multi_lp vs adamw_multi on the same gradients. Two runs: the even tensors' masters kept as remainders
// (fp32 moments), then bf16 moments (fp32 masters).
static void op_vs_fp32(const Backend *be) {
    enum { N = 70000 + 300, STEPS = 12 };
    const size_t runs[3][3] = {{0, 70000, 1}, {70000, 200, 0}, {70200, 100, 1}};
    float *g = be->alloc(N * 4), *p = be->alloc(N * 4), *m = be->alloc(N * 4), *v = be->alloc(N * 4);
    float *p2 = be->alloc(N * 4), *a2 = be->alloc(N * 4), *m2 = be->alloc(N * 4), *v2 = be->alloc(N * 4);
    uint16_t *rem = be->alloc(N * 2);
    float *gs = be->alloc(4);
    for (int mode = 0; mode < 2; mode++) {
        const int lp = mode ? ADAMW_M_BF16 | ADAMW_V_BF16 : 0;
        for (int i = 0; i < N; i++) p[i] = (float)((int)(rnd32() % 20001) - 10000) * 1e-5f, m[i] = v[i] = 0;
        AdamwPlan plan = {0}, plan2 = {0};
        for (int r = 0; r < 3; r++) {
            adamw_plan_add(&plan, runs[r][0], runs[r][0], runs[r][0], runs[r][1], (int)runs[r][2]);
            const int first = plan2.n;
            adamw_plan_add(&plan2, runs[r][0], runs[r][0], runs[r][0], runs[r][1], (int)runs[r][2]);
            for (int k = first; k < plan2.n; k++) plan2.host[k].rem = (uint16_t)(!mode && r != 1);
        }
        adamw_plan_upload(&plan, be), adamw_plan_upload(&plan2, be);
        for (int i = 0; i < N; i++) { // the lp copy: masters split where remainders are kept (p2 holds the others)
            a2[i] = bf16_to_f32(f32_split_remainder(p[i], &rem[i]));
            p2[i] = p[i], m2[i] = v2[i] = 0;
        }
        long bad = 0;
        for (int step = 1; step <= STEPS; step++) {
            for (int i = 0; i < N; i++) g[i] = (float)((int)(rnd32() % 2001) - 1000) * 1e-3f * (float)step;
            *gs = step > 6 ? 0.5f : 1.0f;
            be->adamw_multi(plan.dev, plan.n, p, NULL, g, m, v, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, step, gs);
            be->adamw_multi_lp(plan2.dev, plan2.n, p2, mode ? NULL : rem, a2, g, m2, v2, lp, 1e-2f, 0.9f, 0.95f,
                               1e-8f, 0.1f, step, gs);
            if (mode) // the reference's moments rounded as the lp state keeps them (both start equal each step)
                for (int i = 0; i < N; i++) m[i] = bf16_to_f32(f32_to_bf16(m[i])), v[i] = bf16_to_f32(f32_to_bf16(v[i]));
            for (int i = 0; i < N; i++) {
                const int split = !mode && (i < 70000 || i >= 70200);
                float master = split ? f32_join_remainder((uint16_t)(f_bits(a2[i]) >> 16), rem[i]) : p2[i];
                uint16_t r;
                bad += f_bits(master) != f_bits(p[i]) || f_bits(m2[i]) != f_bits(m[i]) || f_bits(v2[i]) != f_bits(v[i]);
                bad += split ? f_bits(a2[i]) != (uint32_t)f32_split_remainder(p[i], &r) << 16 : a2[i] != p[i];
            }
        }
        check(!bad, "adamw_multi_lp (%s) = adamw_multi over %d steps, bit for bit (%ld mismatches)",
              mode ? "bf16 moments: the fp32 update's rounded to bf16 every step" : "masters as remainders", STEPS, bad);
        adamw_plan_free(&plan, be), adamw_plan_free(&plan2, be);
    }
    be->free(g), be->free(p), be->free(m), be->free(v), be->free(p2), be->free(a2), be->free(m2), be->free(v2);
    be->free(rem), be->free(gs);
}

static void small_config(Config *c) {
    config_defaults(c);
    c->hidden_size = 48; c->num_layers = 4; c->num_heads = 2; c->num_v_heads = 4; c->head_dim = 16; c->v_head_dim = 16;
    c->ffn_hidden_size = 96; c->vocab_size = 300; c->init_std = 0.2f;
    c->use_precision_aware_optimizer = 1;
    snprintf(c->exp_avg_dtype, sizeof c->exp_avg_dtype, "bf16");
    snprintf(c->exp_avg_sq_dtype, sizeof c->exp_avg_sq_dtype, "bf16");
}

// Two PA models on the CPU: A with fp32 masters, B with remainders (a separate act copy first, as model/fp32_params.c's
// test does); the same fixed gradients every step.
static void model_level(const Backend *be) {
    Config c;
    small_config(&c);
    Model *a = model_create(&c, be, 1), *b = model_create(&c, be, 1);
    const size_t P = a->lay.total;
    float *w = xmalloc(P * 4), *w2 = xmalloc(P * 4), *hm = xmalloc(P * 4), *hv = xmalloc(P * 4), *hm2 = xmalloc(P * 4),
          *hv2 = xmalloc(P * 4);
    params_init(&a->lay, w, 5);
    model_set_params(a, w);
    model_set_params(b, w);
    b->wact = be->alloc(P * sizeof(float)); // a bf16 backend's separate act copy (here: bf16-valued floats)
    model_keep_remainders(b);
    check(b->adam_rem && !b->params && b->nsmall >= 3, "remainders kept: masters freed, %d fp32-read runs in small",
          b->nsmall);
    model_get_params(b, w2);
    check(!memcmp(w, w2, P * 4), "model_set_params / model_get_params with remainders: the masters bit for bit");
    long act_bad = 0;
    for (size_t i = 0; i < P; i++) {
        uint16_t r;
        act_bad += f_bits(((float *)b->wact)[i]) != (uint32_t)f32_split_remainder(w[i], &r) << 16;
    }
    check(!act_bad, "the act copy is the masters' split high half (%ld differ)", act_bad);
    for (size_t i = 0; i < P; i++) hm[i] = 1e-3f * (float)((int)(rnd32() % 2001) - 1000), hv[i] = 1e-6f * (float)(rnd32() % 1000);
    model_set_optim(b, hm, hv);
    model_get_optim(b, hm2, hv2);
    long mb = 0;
    for (size_t i = 0; i < P; i++)
        mb += f_bits(hm2[i]) != f_bits(bf16_to_f32(f32_to_bf16(hm[i]))) || f_bits(hv2[i]) != f_bits(bf16_to_f32(f32_to_bf16(hv[i])));
    check(!mb, "model_set_optim / model_get_optim with bf16 moments: rounded to nearest even once, then exact (%ld)", mb);
    model_set_optim(a, hm2, hv2);
    model_set_optim(b, hm2, hv2);
    long bad = 0;
    for (int step = 1; step <= 5; step++) {
        for (size_t i = 0; i < P; i++) a->grads[i] = b->grads[i] = 1e-2f * (float)((int)(rnd32() % 2001) - 1000);
        model_set_grad_scale(a, 0.75f), model_set_grad_scale(b, 0.75f);
        model_adamw(a, 1e-2f, step);
        model_adamw(b, 1e-2f, step);
        model_get_params(a, w), model_get_params(b, w2);
        model_get_optim(a, hm, hv), model_get_optim(b, hm2, hv2);
        bad += memcmp(w, w2, P * 4) != 0 || memcmp(hm, hm2, P * 4) != 0 || memcmp(hv, hv2, P * 4) != 0;
    }
    check(!bad, "model_adamw with remainders = with fp32 masters over 5 steps (masters, moments; %ld steps differ)", bad);
    // (the CPU: moments as bf16-valued floats, 4 bytes; b's separate act copy 4 and remainders 2; a's masters 4)
    check(model_state_bytes_per_param(a) == 16 && model_state_bytes_per_param(b) == 18,
          "bytes per parameter: %.0f with fp32 masters, %.0f with remainders and a separate fp32 act copy",
          model_state_bytes_per_param(a), model_state_bytes_per_param(b));
    model_free(a), model_free(b);
    free(w), free(w2), free(hm), free(hv), free(hm2), free(hv2);
}

static void keys(void) {
    Config c;
    char err[ERR_LEN];
    config_defaults(&c);
    int ok = !config_validate(&c, err, sizeof err);
    config_set(&c, "exp_avg_dtype", "bf16", err, sizeof err);
    ok &= config_validate(&c, err, sizeof err) && strstr(err, "use_precision_aware_optimizer");
    config_set(&c, "use_precision_aware_optimizer", "true", err, sizeof err);
    ok &= !config_validate(&c, err, sizeof err);
    config_set(&c, "exp_avg_sq_dtype", "fp8", err, sizeof err);
    ok &= config_validate(&c, err, sizeof err) && strstr(err, "exp_avg_sq_dtype");
    config_set(&c, "exp_avg_sq_dtype", "bf16", err, sizeof err);
    config_set(&c, "main_grads_dtype", "bf16", err, sizeof err);
    ok &= config_validate(&c, err, sizeof err) && strstr(err, "main_grads_dtype");
    config_set(&c, "main_grads_dtype", "fp32", err, sizeof err);
    config_set(&c, "main_params_dtype", "fp16", err, sizeof err);
    ok &= config_validate(&c, err, sizeof err) && strstr(err, "main_params_dtype");
    check(ok, "keys: bf16 moments need use_precision_aware_optimizer; fp8 moments, bf16 grads, fp16 masters refused");
}

int main(void) {
    const Backend *be = backend_cpu();
    split_join();
    op_vs_fp32(be);
    model_level(be);
    keys();
    if (fails) { printf("FAIL (%d)\n", fails); return 1; }
    printf("PASS\n");
    return 0;
}
