// score.c: `gdn score` — mean loss and perplexity of a model over a token dataset (validation loss).
// Samples are consecutive, non-overlapping windows of the concatenated token stream: inputs
// stream[kT, kT+T), labels stream[kT+1, kT+T+1), so every token after the first is predicted once.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../data/indexed.h"
#include "../model/gdn.h"
#include "../util/common.h"
#include "../model/model_load.h"
#include "../model/packed_flags.h"

int cmd_score(int argc, char **argv) {
    if (arg_is_help(argc, argv) || argc < 2) {
        printf("usage: gdn score --load MODEL --data PREFIX [--seq-length T] [--max-samples N] [--micro-batch-size B]\n"
               "                 [--device cpu|cuda|auto] [--precision bf16|fp32] " PACKED_FLAGS_USAGE "\n"
               "MODEL is a gdn.c checkpoint (save dir or iter_N dir) or an FLA HuggingFace dir.\n"
               "Prints `loss: X ppl: Y` over consecutive windows of T tokens of the dataset.\n" PACKED_FLAGS_HELP);
        return argc < 2 ? 2 : 0;
    }
    const char *load = arg_get(argc, argv, "--load"), *data = arg_get(argc, argv, "--data");
    const char *sl = arg_get(argc, argv, "--seq-length"), *ms = arg_get(argc, argv, "--max-samples");
    const char *mb = arg_get(argc, argv, "--micro-batch-size"), *dev = arg_get(argc, argv, "--device");
    const char *prec = arg_get(argc, argv, "--precision");
    if (!load) die("score: --load MODEL is required");
    if (!data) die("score: --data PREFIX is required");
    char err[ERR_LEN];
    Config c;
    float *params = NULL;
    if (model_load_any(load, &c, &params, err, sizeof err)) die("%s", err);
    packed_flags_apply(&c, argc, argv, "score");
    int T = sl ? atoi(sl) : c.seq_length, B = mb ? atoi(mb) : 1;
    long max_samples = ms ? atol(ms) : -1;
    if (T <= 0 || B <= 0) die("score: --seq-length and --micro-batch-size must be positive");
    IndexedDataset ds;
    if (indexed_open(&ds, data, err, sizeof err)) die("%s", err);
    uint64_t total = ds.total_tokens;
    if (total < (uint64_t)T + 1) die("%s: %llu tokens, fewer than one sample of %d+1", data, (unsigned long long)total, T);
    long nsamples = (long)((total - 1) / (uint64_t)T);
    if (max_samples > 0 && max_samples < nsamples) nsamples = max_samples;
    const Backend *be = backend_select(dev ? dev : "auto", prec ? prec : "bf16");
    Model *m = model_create(&c, be, 0);
    model_set_params(m, params);
    free(params);
    int32_t *buf = xmalloc(((size_t)T + 1) * sizeof(int32_t)), *in = xmalloc((size_t)B * T * 4),
            *lab = xmalloc((size_t)B * T * 4);
    float *losses = xmalloc((size_t)B * T * sizeof(float));
    double sum = 0;
    long count = 0;
    double t0 = now_sec();
    for (long s0 = 0; s0 < nsamples; s0 += B) {
        int nb = (int)(nsamples - s0 < B ? nsamples - s0 : B);
        for (int b = 0; b < nb; b++) {
            indexed_read_tokens(&ds, (uint64_t)(s0 + b) * T, (uint64_t)T + 1, buf);
            for (int t = 0; t < T; t++) {
                in[(size_t)b * T + t] = buf[t];
                lab[(size_t)b * T + t] = buf[t + 1];
                if (buf[t] >= c.vocab_size || buf[t + 1] >= c.vocab_size)
                    die("%s: token id %d >= vocab_size %d", data, buf[t] >= c.vocab_size ? buf[t] : buf[t + 1], c.vocab_size);
            }
        }
        model_forward(m, in, nb, T);
        model_token_losses(m, lab, losses);
        for (long i = 0; i < (long)nb * T; i++) { sum += losses[i]; count++; }
        if (isatty(2))
            fprintf(stderr, "\rscore: %ld/%ld samples, %.0f tokens/s", s0 + nb, nsamples, count / (now_sec() - t0));
    }
    if (isatty(2)) fprintf(stderr, "\n");
    double loss = sum / (double)count;
    printf("loss: %.6f ppl: %.4f (tokens: %ld, samples: %ld x %d)\n", loss, exp(loss), count, nsamples, T);
    free(buf); free(in); free(lab); free(losses);
    model_free(m);
    indexed_close(&ds);
    return 0;
}
