// toy.h: deterministic stand-ins for the tokenizer and the model, shared by the tests/test_eval_*.c programs.
//
// Toy tokenizer: "<s>" is BOS (id 1) and "</s>" EOS (id 2), matched as special tokens anywhere. Other text
// splits into pieces: a space followed by a word character joins that word (" Paris"), a run of word
// characters (ASCII letters/digits, any byte >= 0x80) is one piece, every other byte is its own piece.
// Piece ids are a hash (stable across runs and threads) kept in a table for decoding; a hash collision
// aborts the test. add_bos prepends BOS (the "new" BOS mode then behaves like Llama-3.2's tokenizer).
//
// Toy scorer: decodes each request's continuation tokens back to text and looks it up in a table the test
// writes by hand (text [+ context suffix] -> ll, greedy); unknown continuations score -1 per token and are not greedy. It
// records every request it sees (tokens, n, cont_len) so tests can check truncation, BOS and windows.
#pragma once
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/eval.h"
#include "util/common.h"

#define TOY_BOS 1
#define TOY_EOS 2
#define TOY_SLOTS (1 << 17) // open addressing by id; a test uses a few thousand pieces at most

static struct {
    char *piece[TOY_SLOTS];
    int32_t id[TOY_SLOTS]; // 0 = empty slot
    int n;
    pthread_mutex_t mu;
} toy_vocab = {.mu = PTHREAD_MUTEX_INITIALIZER};

static inline int toy_is_word(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}

static inline int32_t toy_piece_id(const char *p, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 16777619u;
    int32_t id = 3 + (int32_t)(h % 1000003u);
    pthread_mutex_lock(&toy_vocab.mu);
    size_t j = (size_t)id & (TOY_SLOTS - 1);
    while (toy_vocab.id[j] && toy_vocab.id[j] != id) j = (j + 1) & (TOY_SLOTS - 1);
    if (toy_vocab.id[j] == id) {
        if (strlen(toy_vocab.piece[j]) != n || memcmp(toy_vocab.piece[j], p, n)) {
            fprintf(stderr, "FAIL toy tokenizer: hash collision between '%s' and '%.*s'\n", toy_vocab.piece[j], (int)n,
                    p);
            exit(1);
        }
    } else {
        if (toy_vocab.n * 2 > TOY_SLOTS) {
            fprintf(stderr, "FAIL toy tokenizer: vocabulary full\n");
            exit(1);
        }
        char *s = malloc(n + 1);
        memcpy(s, p, n);
        s[n] = 0;
        toy_vocab.piece[j] = s;
        toy_vocab.id[j] = id;
        toy_vocab.n++;
    }
    pthread_mutex_unlock(&toy_vocab.mu);
    return id;
}

static inline const char *toy_piece_text(int32_t id) {
    if (id == TOY_BOS) return "<s>";
    if (id == TOY_EOS) return "</s>";
    const char *s = NULL;
    pthread_mutex_lock(&toy_vocab.mu);
    size_t j = (size_t)id & (TOY_SLOTS - 1);
    while (toy_vocab.id[j] && toy_vocab.id[j] != id) j = (j + 1) & (TOY_SLOTS - 1);
    if (toy_vocab.id[j] == id) s = toy_vocab.piece[j];
    pthread_mutex_unlock(&toy_vocab.mu);
    return s ? s : "<?>";
}

static inline void toy_push(int32_t **ids, size_t *cap, size_t *n, int32_t v) {
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        *ids = realloc(*ids, *cap * sizeof **ids);
    }
    (*ids)[(*n)++] = v;
}

static inline size_t toy_encode(void *ctx, const char *s, size_t len, int add_bos, int32_t **ids, size_t *cap) {
    (void)ctx;
    size_t n = 0; // callers pass an empty buffer (*ids = NULL): ids are written from the start
    if (add_bos) toy_push(ids, cap, &n, TOY_BOS);
    for (size_t i = 0; i < len;) {
        if (len - i >= 3 && !memcmp(s + i, "<s>", 3)) {
            toy_push(ids, cap, &n, TOY_BOS);
            i += 3;
            continue;
        }
        if (len - i >= 4 && !memcmp(s + i, "</s>", 4)) {
            toy_push(ids, cap, &n, TOY_EOS);
            i += 4;
            continue;
        }
        size_t j = i;
        if (s[j] == ' ' && j + 1 < len && toy_is_word((unsigned char)s[j + 1])) j++;
        if (toy_is_word((unsigned char)s[j])) {
            while (j < len && toy_is_word((unsigned char)s[j]) && !(len - j >= 3 && !memcmp(s + j, "<s>", 3))) j++;
        } else {
            j++;
        }
        toy_push(ids, cap, &n, toy_piece_id(s + i, j - i));
        i = j;
    }
    return n;
}

static inline EvalTokenizer toy_tokenizer(void) {
    EvalTokenizer t = {NULL, toy_encode, TOY_BOS, TOY_EOS, "<s>", "</s>"};
    return t;
}

// Decodes ids into a malloc'd string.
static inline char *toy_decode(const int32_t *ids, int n) {
    size_t cap = 64, len = 0;
    char *s = malloc(cap);
    s[0] = 0;
    for (int i = 0; i < n; i++) {
        const char *p = toy_piece_text(ids[i]);
        size_t k = strlen(p);
        if (len + k + 1 > cap) {
            while (len + k + 1 > cap) cap *= 2;
            s = realloc(s, cap);
        }
        memcpy(s + len, p, k + 1);
        len += k;
    }
    return s;
}

// ---- the scorer ----

typedef struct {
    const char *cont;       // continuation text as decoded from its tokens
    double ll;
    int greedy;
    const char *ctx_suffix; // NULL: any context; else the decoded context must end with this
} ToyScore;

typedef struct {
    const ToyScore *table;
    int ntable;
    int max_length;
    // every request seen, in scoring order
    int32_t **seen_tokens;
    int *seen_n, *seen_cont;
    int nseen, capseen;
    int ncalls, max_batch;
    int fail_at_call; // > 0: the scorer reports failure on that call
} ToyScorer;

static inline int toy_score(void *ctx, const LLRequest *reqs, int nreq, double *ll, int *greedy) {
    ToyScorer *s = ctx;
    s->ncalls++;
    if (s->fail_at_call && s->ncalls == s->fail_at_call) return -1;
    if (nreq > s->max_batch) s->max_batch = nreq;
    for (int i = 0; i < nreq; i++) {
        const LLRequest *r = &reqs[i];
        if (s->nseen == s->capseen) {
            s->capseen = s->capseen ? s->capseen * 2 : 256;
            s->seen_tokens = realloc(s->seen_tokens, (size_t)s->capseen * sizeof *s->seen_tokens);
            s->seen_n = realloc(s->seen_n, (size_t)s->capseen * sizeof *s->seen_n);
            s->seen_cont = realloc(s->seen_cont, (size_t)s->capseen * sizeof *s->seen_cont);
        }
        s->seen_tokens[s->nseen] = malloc((size_t)r->n * sizeof(int32_t));
        memcpy(s->seen_tokens[s->nseen], r->tokens, (size_t)r->n * sizeof(int32_t));
        s->seen_n[s->nseen] = r->n;
        s->seen_cont[s->nseen] = r->cont_len;
        s->nseen++;
        char *text = toy_decode(r->tokens + (r->n - r->cont_len), r->cont_len);
        char *ctx = toy_decode(r->tokens, r->n - r->cont_len);
        size_t lc = strlen(ctx);
        ll[i] = -1.0 * r->cont_len;
        greedy[i] = 0;
        for (int k = 0; k < s->ntable; k++)
            if (!strcmp(s->table[k].cont, text) &&
                (!s->table[k].ctx_suffix || (strlen(s->table[k].ctx_suffix) <= lc &&
                                             !strcmp(ctx + lc - strlen(s->table[k].ctx_suffix), s->table[k].ctx_suffix)))) {
                ll[i] = s->table[k].ll;
                greedy[i] = s->table[k].greedy;
                break;
            }
        free(ctx);
        free(text);
    }
    return 0;
}

static inline void toy_scorer_free(ToyScorer *s) {
    for (int i = 0; i < s->nseen; i++) free(s->seen_tokens[i]);
    free(s->seen_tokens);
    free(s->seen_n);
    free(s->seen_cont);
    s->seen_tokens = NULL;
    s->seen_n = s->seen_cont = NULL;
    s->nseen = s->capseen = 0;
}

static inline Scorer toy_scorer(ToyScorer *s) {
    Scorer sc = {s, s->max_length, toy_score};
    return sc;
}

// ---- small test helpers ----

static int toy_failures = 0;
#define CHECK(cond, ...)                                                                                         \
    do {                                                                                                         \
        if (!(cond)) {                                                                                           \
            toy_failures++;                                                                                      \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                                 \
            fprintf(stderr, __VA_ARGS__);                                                                        \
            fprintf(stderr, "\n");                                                                               \
        }                                                                                                        \
    } while (0)
#define CHECK_STR(got, want)                                                                                     \
    CHECK((got) && !strcmp((got), (want)), "got \"%s\", want \"%s\"", (got) ? (got) : "(null)", (want))
#define CHECK_NEAR(got, want, tol)                                                                               \
    CHECK(fabs((double)(got) - (double)(want)) <= (tol), "got %.17g, want %.17g (tol %g)", (double)(got),        \
          (double)(want), (double)(tol))

// Writes text to dir/rel, creating folders.
static inline void toy_write(const char *dir, const char *rel, const char *text) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    char *slash = strrchr(path, '/');
    *slash = 0;
    if (mkdir_p(path) != 0) {
        fprintf(stderr, "FAIL cannot create %s\n", path);
        exit(1);
    }
    *slash = '/';
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "FAIL cannot write %s\n", path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
}
