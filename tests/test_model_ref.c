// test_model_ref.c: the whole model on the CPU backend against an independent float64 PyTorch reference
// written from the spec (tests/ref/gdn_ref.py). For several tiny configs (grouped-value ratio 2 and 1,
// T not a multiple of 64, B > 1, ignored labels) this writes random weights and tokens, runs forward +
// backward in C (chunked and recurrent delta rule), dumps logits, loss and every gradient, and has the
// reference check them: <= 1e-5 relative, both as ||c - ref|| / ||ref|| and as max|c - ref| / max|ref| per tensor.
// Hybrid cases put softmax-attention blocks among the GDN blocks (GQA ratio 1, 2 and 4, window on and
// off, qkv biases, T not a multiple of 64), also with packed documents (reset_state_at_eod).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../model/gdn.h"
#include "../util/common.h"

static void write_bin(const char *dir, const char *name, const void *p, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = xfopen(path, "wb");
    if (fwrite(p, 1, n, f) != n) die("short write %s", path);
    fclose(f);
}

typedef struct {
    const char *name;
    int h, L, H, HV, dk, dv, F, V, B, T;
    int eod; // > 0: packed documents, reset_state_at_eod with this EOD id placed in the rows
    const char *attn; // hybrid: attention blocks ("" = pure GDN), heads, window, qkv bias
    int Ha, Hkv, window, bias;
} Case;

static uint64_t rng_state = 12345;
static double urand(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return ((rng_state >> 11) + 0.5) * 0x1.0p-53;
}

static int run_case(const Case *tc, const char *mode, const char *root) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s_%s", root, tc->name, mode);
    mkdir(dir, 0755);
    // each case draws from its own seed (FNV-1a of its name and form), so adding a case changes no other
    rng_state = 1469598103934665603ull;
    for (const char *p = dir + strlen(root) + 1; *p; p++) rng_state = (rng_state ^ (uint8_t)*p) * 1099511628211ull;
    Config c;
    config_defaults(&c);
    c.hidden_size = tc->h; c.num_layers = 2 * tc->L; c.num_heads = tc->H; c.num_v_heads = tc->HV;
    c.head_dim = tc->dk; c.v_head_dim = tc->dv; c.ffn_hidden_size = tc->F; c.vocab_size = tc->V;
    c.seq_length = tc->T; c.micro_batch_size = tc->B; c.global_batch_size = tc->B;
    // 5x FLA's init std so every path carries signal in a tiny model. (At 10x, 0.2, the fp32 forward's
    // rounding, amplified by the cancellation in the gate-gradient sums over tokens, reaches ~1.3e-5 on
    // A_log/dt_bias: the limit of fp32 arithmetic there, not of the implementation; FLA's 0.02 gives 9e-7.)
    c.init_std = 0.1f;
    if (tc->attn) {
        snprintf(c.attn_layers, sizeof c.attn_layers, "%s", tc->attn);
        c.attn_num_heads = tc->Ha; c.attn_num_kv_heads = tc->Hkv; c.attn_window_size = tc->window;
        c.attn_qkv_bias = tc->bias;
    }
    snprintf(c.delta_rule, sizeof c.delta_rule, "%s", mode);
    if (tc->eod) c.reset_state_at_eod = 1, c.eos_token_id = tc->eod;
    Model *m = model_create(&c, strcmp(mode, "recurrent") ? backend_cpu() : backend_cpu_recurrent(), 1);
    size_t P = m->lay.total;
    float *params = xmalloc(P * sizeof(float));
    params_init(&m->lay, params, 7);
    // norm weights start at 1 in FLA; randomise them so a missing weight multiply cannot pass
    for (int i = 0; i < m->lay.ntensors; i++) {
        const TensorInfo *t = &m->lay.tensors[i];
        if (t->init == INIT_ONES)
            for (size_t j = 0; j < t->numel; j++) params[t->off + j] = (float)(0.5 + urand());
        if (t->init == INIT_ZEROS) // and the qkv biases, which start at 0
            for (size_t j = 0; j < t->numel; j++) params[t->off + j] = (float)(0.2 * (urand() - 0.5));
    }
    model_set_params(m, params);
    int N = tc->B * tc->T;
    int32_t *ids = xmalloc((size_t)N * 4), *tgt = xmalloc((size_t)N * 4);
    for (int i = 0; i < N; i++) ids[i] = (int32_t)(urand() * tc->V);
    if (tc->eod) { // documents of length 1, starts inside chunks and on the chunk edges 64 and 128, in both rows
        for (int i = 0; i < N; i++)
            if (ids[i] == tc->eod) ids[i] = tc->eod + 1;
        const int ends[] = {0, 1, 20, 62, 63, 90, 110, 111, 126, 127};
        for (int b = 0; b < tc->B; b++)
            for (size_t e = 0; e < sizeof ends / sizeof ends[0]; e++)
                if (ends[e] + b < tc->T) ids[b * tc->T + ends[e] + b] = tc->eod;
    }
    int valid = 0;
    for (int b = 0; b < tc->B; b++)
        for (int t = 0; t < tc->T; t++) {
            int n = b * tc->T + t;
            tgt[n] = t + 1 < tc->T ? ids[n + 1] : -1; // labels shifted as FLA does; last position ignored
            if (t == 5) tgt[n] = -1;                  // and one ignored label inside the sequence
            valid += tgt[n] >= 0;
        }
    model_zero_grads(m);
    model_fwd_bwd(m, ids, tgt, tc->B, tc->T, 1.0f / valid, 0);
    double loss = model_read_loss_slots(m, 1) / valid;
    float *logits = xmalloc((size_t)N * tc->V * sizeof(float)), *grads = xmalloc(P * sizeof(float));
    model_logits(m, 0, N, logits);
    model_get_grads(m, grads);

    write_bin(dir, "params.bin", params, P * sizeof(float));
    write_bin(dir, "ids.bin", ids, (size_t)N * 4);
    write_bin(dir, "targets.bin", tgt, (size_t)N * 4);
    write_bin(dir, "logits.bin", logits, (size_t)N * tc->V * sizeof(float));
    write_bin(dir, "grads.bin", grads, P * sizeof(float));
    char path[600];
    snprintf(path, sizeof path, "%s/meta.json", dir);
    FILE *f = xfopen(path, "w");
    char *cfg = config_to_json(&c);
    fprintf(f, "{\"B\": %d, \"T\": %d, \"loss\": %.10g, \"config\": %s, \"tensors\": [", tc->B, tc->T, loss, cfg);
    free(cfg);
    for (int i = 0; i < m->lay.ntensors; i++) {
        const TensorInfo *t = &m->lay.tensors[i];
        fprintf(f, "%s{\"name\": \"%s\", \"off\": %zu, \"shape\": [", i ? ", " : "", t->name, t->off);
        for (int k = 0; k < t->ndim; k++) fprintf(f, "%s%lld", k ? ", " : "", (long long)t->shape[k]);
        fprintf(f, "]}");
    }
    fprintf(f, "]}\n");
    fclose(f);
    free(params); free(ids); free(tgt); free(logits); free(grads);
    model_free(m);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/ref/gdn_ref.py check %s", dir);
    int rc = system(cmd);
    printf("%s %s/%s (B=%d T=%d H=%d HV=%d)\n", rc == 0 ? "ok  " : "FAIL", tc->name, mode, tc->B, tc->T, tc->H, tc->HV);
    fflush(stdout);
    return rc == 0 ? 0 : 1;
}

int main(void) {
    char root[] = "/tmp/gdn_model_ref_XXXXXX";
    if (!mkdtemp(root)) die("mkdtemp failed");
    const Case cases[] = {
        // name      h  L  H HV dk dv  F   V  B   T
        {"gva2_t100", 32, 2, 2, 4, 16, 16, 64, 97, 2, 100}, // grouped values, partial last chunk, B > 1
        {"mha_t64", 32, 1, 2, 2, 16, 8, 48, 61, 1, 64},     // HV = H, dv != dk, exactly one chunk
        {"gva2_t130", 24, 2, 1, 2, 8, 16, 40, 50, 1, 130},  // three chunks, one q/k head
        {"packed_t150", 32, 2, 2, 4, 16, 16, 64, 97, 2, 150, 5}, // packed documents, reset_state_at_eod
        // hybrids:  h  L  H HV dk dv  F   V  B   T eod attn   Ha Hkv window bias
        {"hyb_gqa2_t100", 32, 3, 2, 4, 16, 16, 64, 97, 2, 100, 0, "1", 4, 2, 0, 1},  // GQA 2, full causal, biases
        {"hyb_mha_win_t70", 32, 2, 2, 2, 16, 16, 48, 61, 2, 70, 0, "0", 2, 2, 17, 0}, // MHA, window 17
        {"hyb_gqa4_win_t77", 32, 2, 1, 2, 16, 16, 40, 50, 1, 77, 0, "0,1", 4, 1, 9, 1}, // all attention, GQA 4, window
        // packed documents in a hybrid (reset_state_at_eod): per-document RoPE positions and attention
        {"hyb_packed_t150", 32, 2, 2, 4, 16, 16, 64, 97, 2, 150, 5, "1", 4, 2, 0, 1},      // GQA 2, biases
        {"hyb_packed_win_t130", 32, 2, 2, 2, 16, 16, 48, 61, 2, 130, 5, "0", 2, 2, 17, 0}, // window 17
    };
    int fails = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fails += run_case(&cases[i], "chunk", root);
        fails += run_case(&cases[i], "recurrent", root);
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    if (!fails && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
    printf("%s: %d failed\n", fails ? "FAIL" : "PASS", fails);
    return fails ? 1 : 0;
}
