// validate.c: Megatron's evaluate(): each eval iteration reads one global batch of the split through
// the same sampler positions as training (sampler_position, offset by the consumed count), sums
// [loss, tokens] per rank, and the ranks add theirs (token-weighted mean, not a mean of means).
#include "train/validate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/common.h"

static const char *set_name[NSPLITS] = {"train", "valid", "test"};

// One micro-batch: in/lab [mbs][T]; adds the losses of the targets >= 0 in row-major order.
static void micro_loss(Model *m, const int32_t *in, const int32_t *lab, int mbs, int T, float *losses, double *sum,
                       double *tokens) {
    model_forward(m, in, mbs, T);
    model_token_losses(m, lab, losses);
    for (size_t i = 0; i < (size_t)mbs * T; i++)
        if (lab[i] >= 0) { *sum += losses[i]; *tokens += 1; }
}

static void fetch(Datasets *d, const Config *c, int split, uint64_t g, int32_t *in, int32_t *lab) {
    if (g >= datasets_size(d, split))
        die("validation reads %s item %llu but the split holds %llu", set_name[split], (unsigned long long)g,
            (unsigned long long)datasets_size(d, split));
    datasets_get(d, split, g, in, lab);
    if (!strcmp(c->data_order, "fla")) // as in training: FLA's collator ignores labels equal to the pad (EOS)
        for (int t = 0; t < c->seq_length; t++)
            if (lab[t] == c->eos_token_id) lab[t] = -1;
}

void validate_run(Model *m, Dist *dist, const Config *c, Datasets *d, int split, uint64_t *consumed, EvalResult *r) {
    int T = c->seq_length, mbs = c->micro_batch_size, W = dist->world, n_micro = c->global_batch_size / (mbs * W);
    int32_t *in = xmalloc((size_t)mbs * T * sizeof *in), *lab = xmalloc((size_t)mbs * T * sizeof *lab);
    float *losses = xmalloc((size_t)mbs * T * sizeof *losses);
    double t0 = now_sec(), acc[2] = {0, 0};
    uint64_t base = c->eval_same_samples ? 0 : *consumed;
    for (int e = 0; e < c->eval_iters; e++)
        for (int mu = 0; mu < n_micro; mu++) {
            for (int j = 0; j < mbs; j++) {
                uint64_t g = base + sampler_position(NULL, (uint64_t)e, mu, dist->rank, j, mbs, W, c->global_batch_size);
                fetch(d, c, split, g, in + (size_t)j * T, lab + (size_t)j * T);
            }
            micro_loss(m, in, lab, mbs, T, losses, &acc[0], &acc[1]);
        }
    dist_allreduce_host(dist, acc, 2);
    if (acc[1] == 0) die("validation on the %s split found no target tokens", set_name[split]);
    r->loss = acc[0] / acc[1];
    r->ppl = exp(fmin(20.0, r->loss));
    r->tokens = acc[1];
    r->first = base;
    r->count = (uint64_t)c->eval_iters * c->global_batch_size;
    r->seconds = now_sec() - t0;
    if (!c->eval_same_samples) *consumed += r->count;
    free(in); free(lab); free(losses);
}

void validate_report(const char *prefix, int split, long it, int final, const EvalResult *r, FILE *metrics) {
    char line[256];
    int n = snprintf(line, sizeof line, " validation loss at %s | lm loss value: %.6E | lm loss PPL: %.6E | ", prefix,
                     r->loss, r->ppl);
    char dashes[260];
    memset(dashes, '-', (size_t)n + 1);
    dashes[n + 1] = 0;
    printf("%s\n%s\n%s\n", dashes, line, dashes);
    fflush(stdout);
    if (!metrics) return;
    const char *s = set_name[split];
    fprintf(metrics,
            "{\"iteration\": %ld, \"eval\": \"%s\", \"%s_loss\": %.17g, \"%s_ppl\": %.9g, \"%s_tokens\": %.0f, "
            "\"%s_first_sample\": %llu, \"%s_samples\": %llu, \"eval_seconds\": %.3f, \"final\": %s}\n",
            it, s, s, r->loss, s, r->ppl, s, r->tokens, s, (unsigned long long)r->first, s,
            (unsigned long long)r->count, r->seconds, final ? "true" : "false");
    fflush(metrics);
}

double validate_interval(Model *m, Dist *dist, const Config *c, Datasets *d, long it, uint64_t *consumed, RunLog *rl,
                         int lead) {
    if (c->eval_iters <= 0 || c->eval_interval <= 0 || it % c->eval_interval || !datasets_has(d, SPLIT_VALID)) return 0;
    EvalResult ev;
    validate_run(m, dist, c, d, SPLIT_VALID, consumed, &ev);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "iteration %ld", it);
    if (lead) validate_report(prefix, SPLIT_VALID, it, 0, &ev, runlog_metrics(rl));
    runlog_valid_record(rl, it, ev.loss); // TensorBoard tags, the summary's final/best validation loss
    return ev.seconds;
}

void validate_at_end(Model *m, Dist *dist, const Config *c, Datasets *d, uint64_t *consumed, RunLog *rl, int lead) {
    for (int k = 0; k < 2 && c->eval_iters > 0; k++) {
        int split = k ? SPLIT_TEST : SPLIT_VALID;
        if (!datasets_has(d, split)) continue;
        uint64_t consumed_test = 0; // the test loader starts at 0
        EvalResult ev;
        if (lead) printf("Evaluating on %lld samples\n", (long long)c->eval_iters * c->global_batch_size);
        validate_run(m, dist, c, d, split, k ? &consumed_test : consumed, &ev);
        char prefix[96];
        snprintf(prefix, sizeof prefix, "iteration %d on %s set", c->train_iters, k ? "test" : "validation");
        if (lead) validate_report(prefix, split, c->train_iters, 1, &ev, runlog_metrics(rl));
        if (split == SPLIT_VALID) runlog_valid_record(rl, c->train_iters, ev.loss);
    }
}

void validate_items(Model *m, const Config *c, Datasets *d, int split, uint64_t first, uint64_t count, int mbs,
                    double *sum, double *tokens) {
    int T = c->seq_length;
    int32_t *in = xmalloc((size_t)mbs * T * sizeof *in), *lab = xmalloc((size_t)mbs * T * sizeof *lab);
    float *losses = xmalloc((size_t)mbs * T * sizeof *losses);
    *sum = 0;
    *tokens = 0;
    for (uint64_t s0 = 0; s0 < count; s0 += (uint64_t)mbs) {
        int nb = count - s0 < (uint64_t)mbs ? (int)(count - s0) : mbs;
        for (int j = 0; j < nb; j++) fetch(d, c, split, first + s0 + (uint64_t)j, in + (size_t)j * T, lab + (size_t)j * T);
        micro_loss(m, in, lab, nb, T, losses, sum, tokens);
    }
    free(in); free(lab); free(losses);
}
