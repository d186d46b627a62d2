// test_decode.c: recurrent decoding. Prefilling a prefix with the chunked forward and then decoding
// token by token (T = 1, carrying only the conv windows and delta-rule states) gives the full-sequence
// forward's logits at every position, to <= 1e-5 relative, for sequences shorter and longer than 64,
// for B = 1 and B = 2; and the state is constant-size.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/gdn.h"
#include "../util/common.h"

static int check(int B, int T, int prefill) {
    Config c;
    config_defaults(&c);
    c.hidden_size = 48; c.num_layers = 4; c.num_heads = 2; c.num_v_heads = 4; c.head_dim = 16; c.v_head_dim = 16;
    c.ffn_hidden_size = 96; c.vocab_size = 300; c.init_std = 0.2f;
    Model *m = model_create(&c, backend_cpu(), 0);
    float *params = xmalloc(m->lay.total * 4);
    params_init(&m->lay, params, 5);
    model_set_params(m, params);
    int V = c.vocab_size;
    int32_t *ids = xmalloc((size_t)B * T * 4);
    for (int i = 0; i < B * T; i++) ids[i] = (i * 7919 + 13) % V;
    float *full = xmalloc((size_t)B * T * V * 4), *step = xmalloc((size_t)B * V * 4);
    model_forward(m, ids, B, T);
    model_logits(m, 0, B * T, full);
    InferState *st = infer_state_new(m, B);
    int32_t *chunk = xmalloc((size_t)B * T * 4);
    double worst = 0, scale = 0;
    for (size_t i = 0; i < (size_t)B * T * V; i++) scale = fmax(scale, fabs(full[i]));
    // prefill positions [0, prefill) in one chunked call, then one token at a time
    if (prefill > 0) {
        for (int b = 0; b < B; b++) memcpy(chunk + (size_t)b * prefill, ids + (size_t)b * T, (size_t)prefill * 4);
        model_forward_state(m, chunk, B, prefill, st);
        float *pl = xmalloc((size_t)B * prefill * V * 4);
        model_logits(m, 0, B * prefill, pl);
        for (int b = 0; b < B; b++)
            for (int t = 0; t < prefill; t++)
                for (int v = 0; v < V; v++)
                    worst = fmax(worst, fabs(pl[((size_t)b * prefill + t) * V + v] - full[((size_t)b * T + t) * V + v]));
        free(pl);
    }
    for (int t = prefill; t < T; t++) {
        int32_t tok[8];
        for (int b = 0; b < B; b++) tok[b] = ids[(size_t)b * T + t];
        model_forward_state(m, tok, B, 1, st);
        model_logits(m, 0, B, step);
        for (int b = 0; b < B; b++)
            for (int v = 0; v < V; v++)
                worst = fmax(worst, fabs(step[(size_t)b * V + v] - full[((size_t)b * T + t) * V + v]));
    }
    double rel = worst / scale;
    int ok = rel <= 1e-5;
    printf("%s B=%d T=%d prefill=%d: max |decode - full| / max|full| = %.2e (tol 1e-5)\n", ok ? "ok  " : "FAIL", B, T,
           prefill, rel);
    infer_state_free(m, st);
    model_free(m);
    free(params); free(ids); free(full); free(step); free(chunk);
    return ok ? 0 : 1;
}

int main(void) {
    int fails = 0;
    fails += check(1, 20, 0);   // all decode, shorter than a chunk
    fails += check(1, 150, 70); // prefill past one chunk boundary, then decode across the next
    fails += check(2, 90, 64);  // two sequences, prefill exactly one chunk
    fails += check(2, 40, 1);
    printf("%s\n", fails ? "FAIL" : "PASS");
    return fails ? 1 : 0;
}
