// generate.c: `gdn generate` — prefill the prompt with the chunked forward, then decode one token at a
// time carrying only the recurrent state (conv windows + delta-rule states): memory does not grow with
// the length generated.
#include <stdlib.h>
#include <string.h>

#include "../util/common.h"
#include "infer.h"

static void help(void) {
    printf("usage: gdn generate --load MODEL --prompt TEXT [--max-new-tokens N] [--temperature T] [--top-k K]\n"
           "                    [--top-p P] [--repetition-penalty R] [--seed S] [--greedy] [--batch B]\n"
           "                    [--tokenizer PATH] [--device cpu|cuda|auto] [--no-bos] [--quiet]\n"
           "Streams the continuation of TEXT to stdout; prefill and decode speed and the state size go to stderr.\n"
           "--batch B decodes B copies of the prompt at once (throughput measurement; the first is printed).\n");
}

int cmd_generate(int argc, char **argv) {
    if (arg_is_help(argc, argv) || argc < 2) { help(); return argc < 2 ? 2 : 0; }
    const char *prompt = arg_get(argc, argv, "--prompt"), *s;
    if (!prompt) die("generate: --prompt TEXT is required");
    if (!prompt[0]) die("generate: the prompt is empty");
    SamplerCfg sc = {1.0f, 1.0f, 1.0f, 0, 0, 0};
    int max_new = 64, B = 1, quiet = arg_flag(argc, argv, "--quiet");
    if ((s = arg_get(argc, argv, "--max-new-tokens"))) max_new = atoi(s);
    if ((s = arg_get(argc, argv, "--temperature"))) sc.temperature = (float)atof(s);
    if ((s = arg_get(argc, argv, "--top-k"))) sc.top_k = atoi(s);
    if ((s = arg_get(argc, argv, "--top-p"))) sc.top_p = (float)atof(s);
    if ((s = arg_get(argc, argv, "--repetition-penalty"))) sc.repetition_penalty = (float)atof(s);
    if ((s = arg_get(argc, argv, "--batch"))) B = atoi(s);
    uint64_t rng = 1234;
    if ((s = arg_get(argc, argv, "--seed"))) rng = strtoull(s, NULL, 10);
    sc.greedy = arg_flag(argc, argv, "--greedy");
    if (max_new < 0 || B < 1 || B > 1024 || sc.top_p <= 0 || sc.top_p > 1 || sc.repetition_penalty <= 0)
        die("generate: bad sampling options (need max-new-tokens >= 0, 1 <= batch <= 1024, 0 < top-p <= 1, repetition-penalty > 0)");
    InferModel im;
    infer_open(&im, argc, argv);
    Model *m = im.m;
    int32_t *ids = NULL;
    size_t cap = 0;
    size_t n = tok_encode(im.tok, prompt, strlen(prompt), !arg_flag(argc, argv, "--no-bos"), &ids, &cap);
    if (n == 0) die("generate: the prompt encodes to no tokens");
    if (n > 65536) die("generate: the prompt is %zu tokens; the limit is 65536", n);
    int V = m->d.V, total = (int)n + max_new;
    int32_t *seq = xmalloc((size_t)total * sizeof(int32_t)), *batch = xmalloc((size_t)B * n * sizeof(int32_t));
    memcpy(seq, ids, n * sizeof(int32_t));
    for (int b = 0; b < B; b++) memcpy(batch + (size_t)b * n, ids, n * sizeof(int32_t));
    float *logits = xmalloc((size_t)B * V * sizeof(float));
    InferState *st = infer_state_new(m, B);
    double t0 = now_sec();
    model_forward_state(m, batch, B, (int)n, st);
    for (int b = 0; b < B; b++) model_logits(m, b * (int)n + (int)n - 1, 1, logits + (size_t)b * V);
    double t_prefill = now_sec() - t0;
    if (!quiet) { fputs(prompt, stdout); fflush(stdout); }
    size_t printed = 0;
    int32_t *next = xmalloc((size_t)B * sizeof(int32_t));
    t0 = now_sec();
    int produced = 0;
    for (int i = 0; i < max_new; i++) {
        for (int b = 0; b < B; b++) {
            uint64_t r = rng + (uint64_t)b * 0x9e3779b97f4a7c15ull;
            next[b] = sample_next(logits + (size_t)b * V, V, &sc, seq, (int)n + i, &r);
            if (b == 0) rng = r;
        }
        seq[n + i] = next[0];
        produced++;
        if (!quiet) { // stream: print what decodes cleanly so far (a partial UTF-8 tail waits)
            size_t len;
            char *txt = tok_decode(im.tok, seq + n, (size_t)i + 1, 1, &len);
            size_t end = len;
            if (len >= 3 && !memcmp(txt + len - 3, "\xef\xbf\xbd", 3)) end = printed > len - 3 ? printed : len - 3;
            if (end > printed) { fwrite(txt + printed, 1, end - printed, stdout); fflush(stdout); printed = end; }
            free(txt);
        }
        if (next[0] == tok_eos_id(im.tok) && B == 1) break;
        if (i + 1 < max_new) {
            model_forward_state(m, next, B, 1, st);
            model_logits(m, 0, B, logits);
        }
    }
    m->be->sync();
    double t_decode = now_sec() - t0;
    if (!quiet) printf("\n");
    fflush(stdout);
    size_t state_bytes = (size_t)m->d.L * B *
                         (((size_t)2 * m->d.Kd + m->d.Vd) * (m->d.K - 1) + (size_t)m->d.HV * m->d.dk * m->d.dv) * 4;
    fprintf(stderr, "generate: prefill %zu tokens x %d in %.1f ms (%.0f tokens/s); decode %d steps x %d in %.1f ms "
                    "(%.1f tokens/s, %.2f ms/step); recurrent state %.2f MiB, constant in length\n",
            n, B, t_prefill * 1e3, n * B / t_prefill, produced, B, t_decode * 1e3, produced * B / t_decode,
            t_decode * 1e3 / (produced ? produced : 1), state_bytes / 1048576.0);
    infer_state_free(m, st);
    free(ids); free(seq); free(batch); free(logits); free(next);
    infer_close(&im);
    return 0;
}
