// metrics.c: lm-eval's per-document metrics, aggregations and standard errors (spec eval.md §3).
// acc / acc_norm: numpy argmax over ll and ll / len(choice) (code points). Means get the closed-form stderr
// of the mean; lambada perplexity gets lm-eval's bootstrap, reproduced draw for draw: chunk c of 1000
// replicates uses Python's random.Random(c) (MT19937, init_by_array([c])) and random.choices(xs, k=n), i.e.
// index floor(random() * n). Corpus perplexities have no stderr ("N/A"). Groups pool leaf stderrs.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/rng.h"
#include "eval/eval.h"
#include "util/common.h"

// ---- basic statistics ----

int eval_argmax(const double *v, int n) {
    int best = 0;
    for (int i = 0; i < n; i++) {
        if (isnan(v[i])) return i; // numpy: the first NaN is the maximum
        if (v[i] > v[best]) best = i;
    }
    return best;
}

static double fsum(const double *x, long n) { // Neumaier compensated sum (Python >= 3.12 sum() of floats)
    double s = 0, c = 0;
    for (long i = 0; i < n; i++) {
        double t = s + x[i];
        if (fabs(s) >= fabs(x[i])) c += (s - t) + x[i];
        else c += (x[i] - t) + s;
        s = t;
    }
    return s + c;
}

double eval_mean(const double *x, long n) { return n > 0 ? fsum(x, n) / (double)n : NAN; }

double eval_sample_stddev(const double *x, long n) {
    if (n <= 1) return NAN;
    double mu = eval_mean(x, n);
    double *d = xmalloc((size_t)n * sizeof *d);
    for (long i = 0; i < n; i++) d[i] = (x[i] - mu) * (x[i] - mu);
    double s = fsum(d, n);
    free(d);
    return sqrt(s / (double)(n - 1));
}

double eval_mean_stderr(const double *x, long n) {
    return n <= 1 ? NAN : eval_sample_stddev(x, n) / sqrt((double)n);
}

double eval_bootstrap_ppl_stderr(const double *x, long n, int iters) {
    if (n <= 1 || iters <= 0) return NAN;
    int chunk = iters < 1000 ? iters : 1000, nchunks = iters / chunk;
    long total = (long)nchunks * chunk;
    double *res = xmalloc((size_t)total * sizeof *res);
#pragma omp parallel
    {
        double *sample = xmalloc((size_t)n * sizeof *sample);
#pragma omp for schedule(dynamic, 1)
        for (int c = 0; c < nchunks; c++) {
            Mt19937 r; // Python's random.Random(c)
            uint32_t key = (uint32_t)c;
            mt_seed_by_array(&r, &key, 1);
            for (int k = 0; k < chunk; k++) {
                for (long i = 0; i < n; i++) sample[i] = x[(long)floor(mt_random(&r) * (double)n)];
                res[(long)c * chunk + k] = exp(-eval_mean(sample, n));
            }
        }
        free(sample);
    }
    double sd = eval_sample_stddev(res, total);
    free(res);
    return sd;
}

double eval_pooled_stderr(const double *stderrs, const long *sizes, int k) {
    double num = 0;
    long N = 0;
    for (int i = 0; i < k; i++) {
        if (isnan(stderrs[i])) return NAN;
        num += (double)(sizes[i] - 1) * stderrs[i] * stderrs[i] * (double)sizes[i];
        N += sizes[i];
    }
    if (N - k <= 0) return NAN;
    return sqrt(num / (double)(N - k) / (double)N);
}

// ---- per task ----

int eval_task_has_acc_norm(const EvalTaskDef *d) {
    return d->family == FAM_ARC || d->family == FAM_HELLASWAG || d->family == FAM_OBQA || d->family == FAM_PIQA;
}

void eval_mc_doc(const double *ll, const double *len, int n, int gold, int *acc, int *acc_norm) {
    double *norm = xmalloc(((size_t)n + 1) * sizeof *norm);
    for (int i = 0; i < n; i++) norm[i] = ll[i] / len[i]; // IEEE: x/0 = ±inf or NaN, as numpy
    *acc = eval_argmax(ll, n) == gold;
    *acc_norm = eval_argmax(norm, n) == gold;
    free(norm);
}

void eval_task_metrics(EvalTask *t, int bootstrap_iters) {
    long n = t->ndocs;
    double *a = xcalloc((size_t)n + 1, sizeof *a), *b = xcalloc((size_t)n + 1, sizeof *b);
    switch (t->def->type) {
    case EVAL_MC:
        for (long i = 0; i < n; i++) {
            const EvalDoc *d = &t->docs[i];
            int acc, accn;
            eval_mc_doc(d->ll, d->choice_len, d->nchoice, d->gold, &acc, &accn);
            a[i] = acc;
            b[i] = accn;
        }
        t->acc = eval_mean(a, n);
        t->acc_stderr = eval_mean_stderr(a, n);
        if (eval_task_has_acc_norm(t->def)) {
            t->acc_norm = eval_mean(b, n);
            t->acc_norm_stderr = eval_mean_stderr(b, n);
        }
        break;
    case EVAL_LOGLIK:
        for (long i = 0; i < n; i++) {
            a[i] = t->docs[i].ll[0];
            b[i] = t->docs[i].greedy[0];
        }
        t->perplexity = exp(-eval_mean(a, n)); // per example, not per token
        t->perplexity_stderr = eval_bootstrap_ppl_stderr(a, n, bootstrap_iters);
        t->acc = eval_mean(b, n);
        t->acc_stderr = eval_mean_stderr(b, n);
        break;
    case EVAL_ROLLING: {
        double *words = a, *bytes = b, *lls = xcalloc((size_t)n + 1, sizeof *lls);
        for (long i = 0; i < n; i++) {
            lls[i] = t->docs[i].ll[0];
            words[i] = (double)t->docs[i].words;
            bytes[i] = (double)t->docs[i].bytes;
        }
        double sll = fsum(lls, n), sw = fsum(words, n), sb = fsum(bytes, n);
        t->word_perplexity = exp(-sll / sw);
        t->byte_perplexity = exp(-sll / sb);
        t->bits_per_byte = -sll / sb / log(2.0);
        free(lls);
        break;
    }
    }
    free(a);
    free(b);
}
