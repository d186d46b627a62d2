// test_eval_requests: request construction (eval/requests.c, spec eval.md §1) with the toy tokenizer of
// tests/eval/toy.h: trailing-whitespace move, joint encoding split by the context's token count, BOS modes
// (incl. a string that already starts with BOS), the empty-context prefix path, left truncation to
// max_length + 1, dedupe, rolling windows (hand-derived from §1.7), scoring order and batching, the mapping
// of scores back to documents, and scorer failure.
#include <math.h>
#include <stdlib.h>

#include "tests/eval/toy.h"
#include "util/common.h"

static EvalTokenizer tok;

static void check_ids(const char *what, const int32_t *got, int ngot, const int32_t *want, int nwant) {
    int ok = ngot == nwant;
    for (int i = 0; ok && i < ngot; i++) ok = got[i] == want[i];
    if (!ok) {
        char *g = toy_decode(got, ngot), *w = toy_decode(want, nwant);
        CHECK(0, "%s: got %d tokens \"%s\", want %d tokens \"%s\"", what, ngot, g, nwant, w);
        free(g);
        free(w);
    }
}

// Encodes text with the toy tokenizer (no BOS).
static int32_t *ids_of(const char *s, int *n) {
    int32_t *ids = NULL;
    size_t cap = 0;
    *n = (int)toy_encode(NULL, s, strlen(s), 0, &ids, &cap);
    return ids;
}

static void pair(EvalBosMode mode, const char *ctx, const char *cont, const char *want_ctx_text, int want_bos,
                 const char *want_cont_text) {
    int32_t *c, *k;
    int nc, nk;
    char err[ERR_LEN];
    if (eval_encode_pair(&tok, mode, ctx, cont, &c, &nc, &k, &nk, err, sizeof err) < 0) {
        CHECK(0, "pair(\"%s\", \"%s\"): %s", ctx, cont, err);
        return;
    }
    int nw;
    int32_t *w = ids_of(want_ctx_text, &nw);
    int32_t *wb = xmalloc(((size_t)nw + 1) * sizeof *wb);
    wb[0] = TOY_BOS;
    if (nw) memcpy(wb + 1, w, (size_t)nw * sizeof *w);
    char what[256];
    snprintf(what, sizeof what, "context of (\"%s\", \"%s\") mode %s", ctx, cont, mode ? "new" : "old");
    if (want_bos) check_ids(what, c, nc, wb, nw + 1);
    else check_ids(what, c, nc, w, nw);
    char *kt = toy_decode(k, nk);
    CHECK(!strcmp(kt, want_cont_text), "continuation of (\"%s\", \"%s\"): got \"%s\", want \"%s\"", ctx, cont, kt,
          want_cont_text);
    free(kt);
    free(w);
    free(wb);
    free(c);
    free(k);
}

static void test_pairs(void) {
    pair(EVAL_BOS_OLD, "Question: Who?\nAnswer:", " Paris", "Question: Who?\nAnswer:", 0, " Paris");
    pair(EVAL_BOS_NEW, "Question: Who?\nAnswer:", " Paris", "Question: Who?\nAnswer:", 1, " Paris");
    // trailing whitespace moves: " Paris" stays one token instead of " " + "Paris"
    pair(EVAL_BOS_OLD, "Answer: ", "Paris", "Answer:", 0, " Paris");
    int32_t *c, *k;
    int nc, nk;
    char err[ERR_LEN];
    if (eval_encode_pair(&tok, EVAL_BOS_OLD, "Answer: ", "Paris", &c, &nc, &k, &nk, err, sizeof err) == 0) {
        CHECK(nk == 1, "moved space joins the word: 1 continuation token, got %d", nk);
        free(c);
        free(k);
    }
    // Unicode whitespace (NBSP) and newlines move too (str.rstrip())
    pair(EVAL_BOS_OLD, "x:\n\xC2\xA0", "y", "x:", 0, "\n\xC2\xA0y");
    // split by count, not by prefix: "q<s" is 3 tokens alone, but "<s>" is BOS in the joint string
    pair(EVAL_BOS_OLD, "q<s", "> a b", "q<s", 0, " b");
    // new mode: a context already starting with the BOS text gets no second BOS
    pair(EVAL_BOS_NEW, "<s>Question", " A", "<s>Question", 0, " A");
    // empty context: the prefix token (BOS) conditions; the continuation is encoded without BOS
    pair(EVAL_BOS_NEW, "", " single", "", 1, " single");
    pair(EVAL_BOS_OLD, "", " single", "", 1, " single");
    pair(EVAL_BOS_OLD, "", "<s> x", "", 1, " x"); // continuation starting with the prefix token
    CHECK(eval_encode_pair(&tok, EVAL_BOS_OLD, "ab", "cd", &c, &nc, &k, &nk, err, sizeof err) < 0 &&
              strstr(err, "continuation encodes to no tokens"),
          "a continuation swallowed by the context's last token is an error (lm-eval asserts): %s", err);
    CHECK(eval_encode_pair(&tok, EVAL_BOS_OLD, "  ", "x", &c, &nc, &k, &nk, err, sizeof err) < 0 &&
              strstr(err, "context encodes to no tokens"),
          "an all-whitespace context leaves no context tokens in old mode: %s", err);
}

static void test_truncation_dedupe(void) {
    EvalReqSet s;
    eval_reqset_init(&s, 4, EVAL_BOS_OLD);
    int32_t ctx[7] = {10, 11, 12, 13, 14, 15, 16}, cont[2] = {20, 21};
    int a = eval_reqset_add(&s, ctx, 7, cont, 2);
    const EvalReq *q = &s.reqs[a];
    int32_t want[5] = {14, 15, 16, 20, 21}; // the last max_length + 1 = 5 tokens
    check_ids("left truncation", q->tokens, q->n, want, 5);
    CHECK(q->cont_len == 2, "cont_len kept");
    int b = eval_reqset_add(&s, ctx + 4, 3, cont, 2); // the same tokens after truncation
    CHECK(a == b && s.n == 1 && s.n_total == 2, "identical requests deduplicated (ids %d %d, n %d)", a, b, s.n);
    int c = eval_reqset_add(&s, ctx, 6, ctx + 6, 1); // same first tokens, different split
    CHECK(c != a && s.n == 2, "same tokens with another continuation length is another request");
    int32_t shortc[1] = {7};
    int d = eval_reqset_add(&s, shortc, 1, cont, 2);
    CHECK(s.reqs[d].n == 3, "short request untouched");
    for (int i = 0; i < 3000; i++) { // grow the hash table
        int32_t x[2] = {i, i + 1};
        eval_reqset_add(&s, x, 1, x + 1, 1);
    }
    int32_t x[2] = {1234, 1235};
    int before = s.n;
    eval_reqset_add(&s, x, 1, x + 1, 1);
    CHECK(s.n == before, "dedupe survives rehashing");
    eval_reqset_free(&s);
}

typedef struct {
    int32_t tok[16][8];
    int n[16], cont[16], count;
} Windows;

static void collect(void *arg, const int32_t *t, int n, int cont_len) {
    Windows *w = arg;
    memcpy(w->tok[w->count], t, (size_t)n * sizeof *t);
    w->n[w->count] = n;
    w->cont[w->count++] = cont_len;
}

static void test_rolling(void) {
    int32_t t[10] = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19};
    Windows w = {0};
    eval_rolling_windows(t, 10, 1, 4, collect, &w);
    CHECK(w.count == 3, "10 tokens, max_length 4: 3 windows, got %d", w.count);
    if (w.count == 3) {
        int32_t w0[] = {1, 10, 11, 12, 13}, w1[] = {13, 14, 15, 16, 17}, w2[] = {15, 16, 17, 18, 19};
        check_ids("window 1 = [prefix] + t[0:4]", w.tok[0], w.n[0], w0, 5);
        check_ids("window 2 = t[3:8]", w.tok[1], w.n[1], w1, 5);
        check_ids("window 3 = t[5:10] (re-reads 2 scored tokens)", w.tok[2], w.n[2], w2, 5);
        CHECK(w.cont[0] == 4 && w.cont[1] == 4 && w.cont[2] == 2, "predicted 4 + 4 + 2 tokens");
    }
    memset(&w, 0, sizeof w);
    eval_rolling_windows(t, 3, 1, 4, collect, &w);
    int32_t s0[] = {1, 10, 11, 12};
    CHECK(w.count == 1 && w.cont[0] == 3, "a short doc is one window");
    if (w.count == 1) check_ids("short window", w.tok[0], w.n[0], s0, 4);
    memset(&w, 0, sizeof w);
    eval_rolling_windows(t, 5, 1, 4, collect, &w);
    int32_t f1[] = {10, 11, 12, 13, 14};
    CHECK(w.count == 2 && w.cont[1] == 1, "5 tokens: a 1-token second window");
    if (w.count == 2) check_ids("second window reads t[0:5]", w.tok[1], w.n[1], f1, 5);
    memset(&w, 0, sizeof w);
    eval_rolling_windows(t, 0, 1, 4, collect, &w);
    CHECK(w.count == 0, "no tokens, no windows");
}

static char dir[256];

static void test_pipeline(void) {
    toy_write(dir, "allenai/ai2_arc/ARC-Easy/test.jsonl",
              "{\"question\":\"Capital of France?\",\"choices\":{\"text\":[\"Paris\",\"Rome\",\"Paris\"],\"label\":[\"A\","
              "\"B\",\"C\"]},\"answerKey\":\"A\"}\n"
              "{\"question\":\"Pick one\",\"choices\":{\"text\":[\"Rome\",\"Oslo\"],\"label\":[\"A\",\"B\"]},"
              "\"answerKey\":\"B\"}\n");
    toy_write(dir, "EleutherAI/wikitext_document_level/wikitext-2-raw-v1/test.jsonl",
              "{\"page\":\"one two three four five six\"}\n{\"page\":\"a b\"}\n");
    char err[ERR_LEN];
    EvalTask tasks[2];
    if (eval_task_load(&tasks[0], eval_task_find("arc_easy"), dir, 0, 0, 3, NULL, err, sizeof err) < 0 ||
        eval_task_load(&tasks[1], eval_task_find("wikitext"), dir, 0, 0, 3, NULL, err, sizeof err) < 0) {
        CHECK(0, "load: %s", err);
        return;
    }
    EvalReqSet s;
    eval_reqset_init(&s, 4, EVAL_BOS_NEW);
    if (eval_build_requests(tasks, 2, &tok, &s, err, sizeof err) < 0) {
        CHECK(0, "build: %s", err);
        return;
    }
    // arc: 5 choices, " Paris" twice in doc 0 -> 4 unique; wikitext doc 0: BOS + 6 words = 7 tokens -> windows
    // of 4 + 3; doc 1: BOS + 2 = 3 tokens -> 1 window
    CHECK(s.n_total == 5 + 2 + 1, "8 requests before dedupe, got %ld", s.n_total);
    CHECK(s.n == 4 + 3, "7 unique requests, got %d", s.n);
    CHECK(tasks[0].docs[0].req[0] == tasks[0].docs[0].req[2], "duplicate choice shares one request");
    CHECK(tasks[1].docs[0].nreq_ids == 2 && tasks[1].docs[1].nreq_ids == 1, "window counts 2 and 1");
    // arc_easy requests: "Question: Capital of France?\nAnswer:" (BOS + 9 tokens) + 1 -> truncated to 5
    const EvalReq *q = &s.reqs[tasks[0].docs[0].req[1]];
    CHECK(q->n == 5 && q->cont_len == 1, "truncated to max_length + 1 = 5 tokens, got n %d", q->n);
    char *tail = toy_decode(q->tokens, q->n);
    CHECK_STR(tail, "?\nAnswer: Rome");
    free(tail);

    ToyScore table[] = {{" Paris", -1.0, 1}, {" Rome", -2.0, 0}, {" Oslo", -0.5, 1}};
    ToyScorer ts = {table, 3, 4, .fail_at_call = 0};
    Scorer sc = toy_scorer(&ts);
    if (eval_score_requests(&s, &sc, 2, tasks, 2, err, sizeof err) < 0) {
        CHECK(0, "score: %s", err);
        return;
    }
    CHECK(ts.nseen == 7 && ts.ncalls == 4 && ts.max_batch == 2, "7 requests in 4 calls of <= 2, got %d in %d (max %d)",
          ts.nseen, ts.ncalls, ts.max_batch);
    for (int i = 1; i < ts.nseen; i++) {
        int prev = ts.seen_n[i - 1], cur = ts.seen_n[i];
        int ok = prev > cur;
        if (prev == cur) { // equal length: lexicographic token order
            int j = 0;
            while (j < cur && ts.seen_tokens[i - 1][j] == ts.seen_tokens[i][j]) j++;
            ok = j == cur || ts.seen_tokens[i - 1][j] < ts.seen_tokens[i][j];
        }
        CHECK(ok, "scoring order: longest first, then by tokens (at %d)", i);
    }
    const EvalDoc *d0 = &tasks[0].docs[0], *d1 = &tasks[0].docs[1];
    CHECK(d0->ll[0] == -1.0 && d0->ll[1] == -2.0 && d0->ll[2] == -1.0 && d0->greedy[0] == 1,
          "doc 0 scores map back by choice");
    CHECK(d1->ll[0] == -2.0 && d1->ll[1] == -0.5, "doc 1 scores map back");
    toy_scorer_free(&ts);
    // wikitext: the toy scores -1 per predicted token; every token (BOS included, new mode) once
    CHECK(tasks[1].docs[0].ll[0] == -7.0 && tasks[1].docs[1].ll[0] == -3.0,
          "rolling doc ll = sum over windows (-7, -3), got %g, %g", tasks[1].docs[0].ll[0], tasks[1].docs[1].ll[0]);
    eval_reqset_free(&s);

    // auto batching: one call for these few tokens; a failing scorer reports the batch
    eval_reqset_init(&s, 4, EVAL_BOS_OLD);
    if (eval_build_requests(tasks, 2, &tok, &s, err, sizeof err) == 0) {
        ToyScorer ts2 = {table, 3, 4, .fail_at_call = 0};
        Scorer sc2 = toy_scorer(&ts2);
        if (eval_score_requests(&s, &sc2, 0, tasks, 2, err, sizeof err) == 0) {
            CHECK(ts2.ncalls == 1, "auto batch: one call, got %d", ts2.ncalls);
            CHECK(tasks[1].docs[0].ll[0] == -6.0, "old mode: no BOS in rolling docs -> 6 tokens, got %g",
                  tasks[1].docs[0].ll[0]);
        }
        toy_scorer_free(&ts2);
        eval_reqset_free(&s);
    }
    eval_reqset_init(&s, 4, EVAL_BOS_OLD);
    if (eval_build_requests(tasks, 2, &tok, &s, err, sizeof err) == 0) {
        ToyScorer ts3 = {table, 3, 4, .fail_at_call = 2};
        Scorer sc3 = toy_scorer(&ts3);
        CHECK(eval_score_requests(&s, &sc3, 3, tasks, 2, err, sizeof err) < 0 && strstr(err, "scorer failed on requests 3..5"),
              "scorer failure names the batch: %s", err);
        toy_scorer_free(&ts3);
    }
    eval_reqset_free(&s);
    for (int i = 0; i < 2; i++) eval_task_free(&tasks[i]);
}

int main(void) {
    tok = toy_tokenizer();
    snprintf(dir, sizeof dir, "/tmp/test_eval_requests.XXXXXX");
    if (!mkdtemp(dir)) die("mkdtemp failed");
    test_pairs();
    test_truncation_dedupe();
    test_rolling();
    test_pipeline();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", dir);
    if (toy_failures) {
        fprintf(stderr, "test_eval_requests: %d checks FAILED\n", toy_failures);
        return 1;
    }
    printf("PASS test_eval_requests: pair encoding (whitespace move, split by count, BOS old/new, BOS-prefixed "
           "text, empty context), truncation, dedupe, rolling windows, scoring order/batching, score mapping, "
           "scorer failure\n");
    return 0;
}
