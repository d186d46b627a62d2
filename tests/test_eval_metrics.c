// test_eval_metrics: lm-eval's metric arithmetic (eval/metrics.c, spec eval.md §3) on hand-computed cases:
// argmax ties and NaN, acc / acc_norm, the stderr of a mean, perplexity, word/byte perplexity and bits per
// byte, pooled group stderr, and Python's MT19937 (reference values printed by CPython's random module).
// `--bootstrap FILE` prints the bootstrap perplexity stderr of the numbers in FILE (one per line) for
// tests/t_eval_oracle.sh, which compares it with lm-eval's algorithm run by CPython.
#include <math.h>

#include "data/rng.h"
#include "tests/eval/toy.h"
#include "util/common.h"

static void test_argmax(void) {
    double a[] = {1, 3, 3};
    CHECK(eval_argmax(a, 3) == 1, "first maximum wins");
    double b[] = {-INFINITY, -1};
    CHECK(eval_argmax(b, 2) == 1, "-inf loses");
    double c[] = {1, NAN, 5, NAN};
    CHECK(eval_argmax(c, 4) == 1, "numpy: the first NaN is the argmax");
}

static void test_mc(void) {
    int acc, accn;
    double ll[] = {-3.0, -4.0, -9.0}, len[] = {2, 8, 1};
    // ll argmax = 0; ll/len = -1.5, -0.5, -9 -> argmax 1
    eval_mc_doc(ll, len, 3, 1, &acc, &accn);
    CHECK(acc == 0 && accn == 1, "acc 0 / acc_norm 1, got %d / %d", acc, accn);
    eval_mc_doc(ll, len, 3, 0, &acc, &accn);
    CHECK(acc == 1 && accn == 0, "acc 1 / acc_norm 0, got %d / %d", acc, accn);
    double tie[] = {-2, -2}, tlen[] = {3, 3};
    eval_mc_doc(tie, tlen, 2, 1, &acc, &accn);
    CHECK(acc == 0 && accn == 0, "a tie goes to the lowest index");
    double e[] = {-1, -2}, elen[] = {0, 1}; // empty choice: -1/0 = -inf
    eval_mc_doc(e, elen, 2, 1, &acc, &accn);
    CHECK(acc == 0 && accn == 1, "an empty choice normalizes to -inf");
    eval_mc_doc(ll, len, 3, -100, &acc, &accn);
    CHECK(acc == 0 && accn == 0, "an out-of-range gold is always wrong");
}

static void test_stats(void) {
    double x[] = {1, 0, 1, 1};
    CHECK_NEAR(eval_mean(x, 4), 0.75, 0);
    // sample variance = (3 * 0.25^2 + 0.75^2) / 3 = 0.25 -> sd 0.5 -> se 0.5 / 2
    CHECK_NEAR(eval_sample_stddev(x, 4), 0.5, 1e-15);
    CHECK_NEAR(eval_mean_stderr(x, 4), 0.25, 1e-15);
    CHECK(isnan(eval_mean_stderr(x, 1)), "n = 1 has no stderr");
    double same[] = {-2, -2, -2};
    CHECK_NEAR(eval_bootstrap_ppl_stderr(same, 3, 2000), 0.0, 0);
    CHECK(isnan(eval_bootstrap_ppl_stderr(same, 1, 1000)), "bootstrap of one item is N/A");
    CHECK(isnan(eval_bootstrap_ppl_stderr(same, 3, 0)), "no iterations, no stderr");
    // pooled: sizes 4, 2 with stderrs 0.25, 0.5: (3*4*0.0625 + 1*2*0.25) / (6 - 2) / 6
    double se[] = {0.25, 0.5};
    long n[] = {4, 2};
    CHECK_NEAR(eval_pooled_stderr(se, n, 2), sqrt(1.25 / 4 / 6), 1e-15);
    double se1[] = {0.125};
    long n1[] = {10};
    CHECK_NEAR(eval_pooled_stderr(se1, n1, 1), 0.125, 1e-15); // one leaf: its own stderr
    double sen[] = {0.25, NAN};
    CHECK(isnan(eval_pooled_stderr(sen, n, 2)), "a leaf without stderr makes the group's N/A");
}

static void test_pyrandom(void) { // data/rng.c's MT19937 as Python's random.Random (the bootstrap's stream)
    Mt19937 r;
    uint32_t key = 0;
    mt_seed_by_array(&r, &key, 1); // CPython: random.Random(0).random() x3
    CHECK_NEAR(mt_random(&r), 0.8444218515250481, 0);
    CHECK_NEAR(mt_random(&r), 0.7579544029403025, 0);
    CHECK_NEAR(mt_random(&r), 0.420571580830845, 0);
    key = 1;
    mt_seed_by_array(&r, &key, 1);
    CHECK_NEAR(mt_random(&r), 0.13436424411240122, 0);
}

static EvalTask task_with(const char *name, int ndocs) {
    EvalTask t;
    memset(&t, 0, sizeof t);
    t.def = eval_task_find(name);
    t.ndocs = ndocs;
    t.docs = xcalloc((size_t)ndocs, sizeof(EvalDoc));
    t.acc = t.acc_norm = t.perplexity = NAN;
    return t;
}

static void free_docs(EvalTask *t) {
    for (int i = 0; i < t->ndocs; i++) {
        free(t->docs[i].ll);
        free(t->docs[i].greedy);
        free(t->docs[i].choice_len);
    }
    free(t->docs);
}

static void set_doc(EvalDoc *d, int n, const double *ll, const double *len, int gold) {
    d->nchoice = n;
    d->ll = xmalloc((size_t)n * sizeof(double));
    d->greedy = xcalloc((size_t)n, sizeof(int));
    d->choice_len = xmalloc((size_t)n * sizeof(double));
    memcpy(d->ll, ll, (size_t)n * sizeof(double));
    memcpy(d->choice_len, len, (size_t)n * sizeof(double));
    d->gold = gold;
}

static void test_task_metrics(void) {
    // arc_easy, 3 docs: (acc, acc_norm) = (1,0), (0,1), (1,1) -> acc 2/3, acc_norm 2/3
    EvalTask t = task_with("arc_easy", 3);
    double l0[] = {-1, -2}, n0[] = {1, 4};    // pred 0, norm -1 vs -0.5 -> 1
    double l1[] = {-5, -3, -4}, n1[] = {1, 1, 8}; // pred 1, norm -5, -3, -0.5 -> 2
    double l2[] = {-2, -9}, n2[] = {4, 4};    // pred 0, norm 0
    set_doc(&t.docs[0], 2, l0, n0, 0);
    set_doc(&t.docs[1], 3, l1, n1, 2);
    set_doc(&t.docs[2], 2, l2, n2, 0);
    eval_task_metrics(&t, 100000);
    CHECK_NEAR(t.acc, 2.0 / 3, 1e-15);
    CHECK_NEAR(t.acc_norm, 2.0 / 3, 1e-15);
    // p = 2/3, n = 3: sqrt(p (1 - p) / (n - 1)) = sqrt(1/9)
    CHECK_NEAR(t.acc_stderr, 1.0 / 3, 1e-15);
    free_docs(&t);

    EvalTask w = task_with("winogrande", 2);
    set_doc(&w.docs[0], 2, l0, n0, 0);
    set_doc(&w.docs[1], 2, l2, n2, 1);
    eval_task_metrics(&w, 100000);
    CHECK_NEAR(w.acc, 0.5, 0);
    CHECK(isnan(w.acc_norm), "winogrande reports no acc_norm");
    free_docs(&w);

    // lambada: ll -1, -3 -> perplexity exp(2); greedy 1, 0 -> acc 0.5
    EvalTask l = task_with("lambada_openai", 2);
    double a[] = {-1}, b[] = {-3}, one[] = {1};
    set_doc(&l.docs[0], 1, a, one, 0);
    set_doc(&l.docs[1], 1, b, one, 0);
    l.docs[0].greedy[0] = 1;
    eval_task_metrics(&l, 1000);
    CHECK_NEAR(l.perplexity, exp(2.0), 1e-12);
    CHECK_NEAR(l.acc, 0.5, 0);
    CHECK(l.perplexity_stderr > 0, "bootstrap stderr of two different items is positive");
    free_docs(&l);

    // wikitext: ll -10, -20 over 5 + 10 words and 20 + 40 bytes
    EvalTask k = task_with("wikitext", 2);
    double c[] = {-10}, e[] = {-20};
    set_doc(&k.docs[0], 1, c, one, 0);
    set_doc(&k.docs[1], 1, e, one, 0);
    k.docs[0].words = 5;
    k.docs[1].words = 10;
    k.docs[0].bytes = 20;
    k.docs[1].bytes = 40;
    eval_task_metrics(&k, 100000);
    CHECK_NEAR(k.word_perplexity, exp(2.0), 1e-12);
    CHECK_NEAR(k.byte_perplexity, exp(0.5), 1e-12);
    CHECK_NEAR(k.bits_per_byte, 0.5 / log(2.0), 1e-15);
    free_docs(&k);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--bootstrap")) {
        FILE *f = xfopen(argv[2], "r");
        double *x = NULL, v;
        long n = 0, cap = 0;
        while (fscanf(f, "%lf", &v) == 1) {
            if (n == cap) x = xrealloc(x, (size_t)(cap = cap ? cap * 2 : 64) * sizeof *x);
            x[n++] = v;
        }
        fclose(f);
        printf("%.17g\n", eval_bootstrap_ppl_stderr(x, n, 100000));
        free(x);
        return 0;
    }
    test_argmax();
    test_mc();
    test_stats();
    test_pyrandom();
    test_task_metrics();
    if (toy_failures) {
        fprintf(stderr, "test_eval_metrics: %d checks FAILED\n", toy_failures);
        return 1;
    }
    printf("PASS test_eval_metrics: argmax (ties, NaN), acc/acc_norm, mean stderr, perplexity, word/byte "
           "perplexity, bits_per_byte, pooled stderr, Python MT19937\n");
    return 0;
}
