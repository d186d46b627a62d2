// score.c: `gdn score` — mean loss and perplexity of a model over a token dataset (validation loss).
// Samples are consecutive, non-overlapping windows of the concatenated token stream: inputs
// stream[kT, kT+T), labels stream[kT+1, kT+T+1), so every token after the first is predicted once.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../data/indexed.h"
#include "../model/gdn.h"
#include "../util/args.h"
#include "../util/common.h"
#include "../io/model_load.h"
#include "validate.h"

// --set: items [first, first+n) of a run's train/valid/test set, built from the checkpoint's own config
// (its blend, split and sizes), scored as one rank's validation sums them.
static void score_set(const char *set, const Config *c, Model *m, const char *first, long n, int B) {
    int split = !strcmp(set, "train") ? SPLIT_TRAIN : !strcmp(set, "valid") ? SPLIT_VALID : !strcmp(set, "test") ? SPLIT_TEST : -1;
    if (split < 0) die("score: --set must be train, valid or test (got '%s')", set);
    char err[ERR_LEN];
    Datasets *d = datasets_open(c, err, sizeof err);
    if (!d) die("score --set %s: %s", set, err);
    if (!datasets_has(d, split)) die("score: the checkpoint's config has no %s set", set);
    uint64_t a = first ? strtoull(first, NULL, 10) : 0, size = datasets_size(d, split);
    uint64_t cnt = n > 0 ? (uint64_t)n : size > a ? size - a : 0;
    if (cnt == 0 || a + cnt > size) die("score: items [%llu, %llu) are outside the %s set's %llu", (unsigned long long)a, (unsigned long long)(a + cnt), set, (unsigned long long)size);
    double sum, tokens;
    validate_items(m, c, d, split, a, cnt, B, &sum, &tokens);
    double loss = sum / tokens;
    printf("loss: %.6f ppl: %.4f (tokens: %.0f, samples: %llu x %d, %s set from item %llu)\n", loss, exp(loss), tokens,
           (unsigned long long)cnt, c->seq_length, set, (unsigned long long)a);
    printf("lm loss value: %.6E | lm loss PPL: %.6E | loss %.17g\n", loss, exp(fmin(20.0, loss)), loss);
    datasets_free(d);
}

int cmd_score(int argc, char **argv) {
    if (arg_is_help(argc, argv) || argc < 2) {
        printf("usage: gdn score --load MODEL --data PREFIX [--seq-length T] [--max-samples N] [--micro-batch-size B]\n"
               "                 [--device cpu|cuda|auto] [--precision bf16|fp32]\n"
               "       gdn score --load CKPT --set train|valid|test [--first-sample A] [--max-samples N] [--micro-batch-size B]\n"
               "MODEL is a gdn.c checkpoint (save dir or iter_N dir) or an FLA HuggingFace dir.\n"
               "Prints `loss: X ppl: Y` over consecutive windows of T tokens of the dataset.\n"
               "--set: items A.. of the run's train/valid/test set (its blend and split, from CKPT's config), the\n"
               "token-weighted mean as gdn train's validation computes it (the JSONL rows name the items).\n");
        return argc < 2 ? 2 : 0;
    }
    static const ArgSpec spec[] = {
        {"--load", ARG_STR, 0, 0},          {"--data", ARG_STR, 0, 0},
        {"--seq-length", ARG_INT, 1, 1 << 24}, {"--max-samples", ARG_INT, 1, 9007199254740991.0},
        {"--micro-batch-size", ARG_INT, 1, 1 << 16}, {"--device", ARG_STR, 0, 0},
        {"--precision", ARG_STR, 0, 0},      {"--set", ARG_STR, 0, 0},
        {"--first-sample", ARG_INT, 0, 9007199254740991.0},
    };
    Args a;
    args_parse(&a, "score", argc, argv, spec, sizeof spec / sizeof spec[0], 0);
    const char *load = args_str(&a, "--load", NULL), *data = args_str(&a, "--data", NULL);
    const char *dev = args_str(&a, "--device", NULL), *prec = args_str(&a, "--precision", NULL);
    if (!load) die("score: --load MODEL is required");
    const char *set = args_str(&a, "--set", NULL), *first = args_str(&a, "--first-sample", NULL);
    if (!data && !set) die("score: --data PREFIX or --set SET is required");
    char err[ERR_LEN];
    Model *m = model_open(load, dev, prec, err, sizeof err);
    if (!m) die("%s", err);
    const Config c = m->cfg;
    int T = (int)args_int(&a, "--seq-length", c.seq_length), B = (int)args_int(&a, "--micro-batch-size", 1);
    long max_samples = (long)args_int(&a, "--max-samples", -1);
    if (T <= 0 || B <= 0) die("score: --seq-length and --micro-batch-size must be positive");
    if (set) {
        if (args_has(&a, "--seq-length")) die("score --set: the sequence length is the checkpoint's");
        score_set(set, &c, m, first, max_samples, B);
        model_free(m);
        return 0;
    }
    IndexedDataset ds;
    if (indexed_open(&ds, data, err, sizeof err)) die("%s", err);
    uint64_t total = ds.total_tokens;
    if (total < (uint64_t)T + 1) die("%s: %llu tokens, fewer than one sample of %d+1", data, (unsigned long long)total, T);
    long nsamples = (long)((total - 1) / (uint64_t)T);
    if (max_samples > 0 && max_samples < nsamples) nsamples = max_samples;
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
