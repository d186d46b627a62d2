// test_fp32_params.c: the model without its whole fp32 master (model/fp32_params.c, ZeRO-1 on bf16
// backends). The CPU backend is fp32 (its forward reads the masters), so the test gives a CPU model a
// separate act copy of the weights first, as a bf16 backend has; after model_drop_masters the forward and
// backward read the GEMM weights from that copy and the fp32 tensors (norms, conv, A_log, dt_bias, the
// attention biases) from the kept runs: the loss and every gradient are bit for bit those of the model
// with its masters, for a pure GDN model and a hybrid with q/k/v biases; the refusals hold.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/gdn.h"
#include "../util/common.h"

static void small_config(Config *c, int hybrid) {
    config_defaults(c);
    c->hidden_size = 48; c->num_layers = 4; c->num_heads = 2; c->num_v_heads = 4; c->head_dim = 16; c->v_head_dim = 16;
    c->ffn_hidden_size = 96; c->vocab_size = 300; c->init_std = 0.2f;
    if (hybrid) {
        snprintf(c->attn_layers, sizeof c->attn_layers, "1");
        c->attn_num_heads = 3; c->attn_num_kv_heads = 1; c->attn_qkv_bias = 1;
    }
}

// One micro-batch's loss and gradients into host grads [P]; drop: the model without its masters.
static double run(int hybrid, int drop, float *grads, size_t *P, int *nsmall) {
    Config c;
    small_config(&c, hybrid);
    const Backend *be = backend_cpu();
    Model *m = model_create(&c, be, 1);
    *P = m->lay.total;
    float *host = xmalloc(*P * sizeof(float));
    params_init(&m->lay, host, 11);
    for (size_t i = 0; i < *P; i++) host[i] += 0.01f * (float)((i * 7919) % 13) - 0.06f; // ones and zeros moved
    model_set_params(m, host);
    if (drop) { // a separate act copy, as a bf16 backend keeps
        m->wact = be->alloc(*P * sizeof(float));
        be->memcpy_d2d(m->wact, m->params, *P * sizeof(float));
        model_drop_masters(m);
        if (m->params) die("model_drop_masters left the masters");
        *nsmall = m->nsmall;
    }
    int B = 2, T = 70;
    int32_t *ids = xmalloc((size_t)B * T * sizeof(int32_t)), *lab = xmalloc((size_t)B * T * sizeof(int32_t));
    for (int i = 0; i < B * T; i++) ids[i] = (i * 37 + 5) % c.vocab_size, lab[i] = (i * 53 + 1) % c.vocab_size;
    model_zero_grads(m);
    model_fwd_bwd(m, ids, lab, B, T, 1.0f / (float)(B * T), 0);
    double loss = model_read_loss_slots(m, 1);
    model_get_grads(m, grads);
    free(host); free(ids); free(lab);
    model_free(m);
    return loss;
}

int main(void) {
    int fails = 0;
    for (int hybrid = 0; hybrid < 2; hybrid++) {
        size_t P;
        int nsmall = 0;
        float *g0 = xmalloc(300000 * sizeof(float)), *g1 = xmalloc(300000 * sizeof(float));
        double l0 = run(hybrid, 0, g0, &P, &nsmall);
        if (P > 300000) die("test model too large (%zu parameters)", P);
        double l1 = run(hybrid, 1, g1, &P, &nsmall);
        int same = l0 == l1 && !memcmp(g0, g1, P * sizeof(float));
        printf("%s: %zu parameters, %d fp32 runs kept: loss %.9g vs %.9g, gradients %s\n", hybrid ? "hybrid" : "pure GDN",
               P, nsmall, l0, l1, same ? "bit for bit" : "DIFFER");
        fails += !same || nsmall < 3;
        free(g0); free(g1);
    }
    if (fails) { printf("FAIL\n"); return 1; }
    printf("PASS: the forward and backward without the masters read the same parameters\n");
    return 0;
}
