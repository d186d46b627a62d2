// test_zero_lp.c: ZeRO-1 (train/zero.c) with the precision-aware optimizer's remainders, on one CPU rank. The
// remainders exist on bf16 backends only, so, as tests/test_optim_lp.c does, a CPU model gets a separate act copy
// (bf16-valued floats) and keeps its masters as remainders; ZeRO-1 at world 1 (every collective a no-op) then runs
// its own code: the shards in the model's storage, the chunk table that sends the fp32-read tensors to small and
// the rest to the act copy + remainders (tensor by tensor inside runs of one weight decay), small's refresh, and
// the gathers behind checkpoints. Against the same model stepping itself (model_adamw), with the same gradients,
// over 4 steps: the masters, the act copy, the fp32-read tensors and the bf16 moments bit for bit.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/gdn.h"
#include "../train/buckets.h"
#include "../train/zero.h"
#include "../util/common.h"

static uint64_t rs = 99;
static float rnd(void) {
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((int)((rs >> 33) % 2001) - 1000) * 1e-2f;
}

static Model *pa_model(const Backend *be, const float *w) {
    Config c;
    config_defaults(&c);
    c.hidden_size = 48; c.num_layers = 4; c.num_heads = 2; c.num_v_heads = 4; c.head_dim = 16; c.v_head_dim = 16;
    c.ffn_hidden_size = 96; c.vocab_size = 300; c.init_std = 0.2f;
    c.use_precision_aware_optimizer = 1;
    snprintf(c.exp_avg_dtype, sizeof c.exp_avg_dtype, "bf16");
    snprintf(c.exp_avg_sq_dtype, sizeof c.exp_avg_sq_dtype, "bf16");
    Model *m = model_create(&c, be, 1);
    if (w) model_set_params(m, w);
    m->wact = be->alloc(m->lay.total * sizeof(float)); // a bf16 backend's separate act copy
    model_keep_remainders(m);
    return m;
}

int main(void) {
    const Backend *be = backend_cpu();
    Model *a = pa_model(be, NULL);
    const size_t P = a->lay.total;
    float *w = xmalloc(P * 4), *wa = xmalloc(P * 4), *wz = xmalloc(P * 4), *ma = xmalloc(P * 4), *va = xmalloc(P * 4),
          *mz = xmalloc(P * 4), *vz = xmalloc(P * 4);
    params_init(&a->lay, w, 3);
    model_set_params(a, w);
    Model *z = pa_model(be, w);
    for (size_t i = 0; i < P; i++) ma[i] = 1e-3f * rnd(), va[i] = 1e-5f * (rnd() + 10.0f);
    model_set_optim(a, ma, va);
    model_set_optim(z, ma, va);
    Dist d = {.rank = 0, .world = 1, .launcher = "none"};
    Buckets bk;
    buckets_init(&bk, z, &d, 5000, 0, 0); // several buckets: several pieces, the tensors' runs cut at their edges
    Zero zr;
    zero_init(&zr, z, &bk, &d);
    int fails = 0;
    if (!zr.rem || zr.master || z->adam_rem || bk.n < 3) {
        printf("FAIL: ZeRO-1 did not take the remainders (rem %p, master %p, %d buckets)\n", (void *)zr.rem,
               (void *)zr.master, bk.n);
        return 1;
    }
    for (int step = 1; step <= 4; step++) {
        for (size_t i = 0; i < P; i++) a->grads[i] = z->grads[i] = rnd();
        model_set_grad_scale(a, 0.6f);
        model_adamw(a, 1e-2f, step);
        zero_step(&zr, z, &d, 1e-2f, step, 0.6f);
        buckets_gather_wait(&bk);
        model_get_params(a, wa);
        zero_get_params(&zr, z, &d, wz);
        model_get_optim(a, ma, va);
        zero_get_optim(&zr, z, &d, mz, vz);
        int same = !memcmp(wa, wz, P * 4) && !memcmp(ma, mz, P * 4) && !memcmp(va, vz, P * 4) &&
                   !memcmp(a->wact, z->wact, P * 4) && !memcmp(a->small, z->small, a->nsmall_elems * 4);
        printf("%s: step %d: ZeRO-1 with master remainders and bf16 moments == the model's own AdamW (masters, act "
               "copy, fp32-read tensors, moments)\n", same ? "PASS" : "FAIL", step);
        fails += !same;
    }
    zero_free(&zr, z);
    buckets_free(&bk);
    model_free(a), model_free(z);
    free(w), free(wa), free(wz), free(ma), free(va), free(mz), free(vz);
    printf("%s\n", fails ? "FAIL" : "PASS");
    return fails ? 1 : 0;
}
