// requests.c: strings -> token requests -> scores, as lm-eval's HFLM does for causal models (spec eval.md §1).
// Pair encoding (§1.2-1.3): trailing whitespace of the context moves to the continuation, the pair is encoded
// jointly and split by the context's token count. BOS (§0): mode "old" (lm-eval <= 0.4.9.1) never adds it;
// mode "new" (>= 0.4.9.2) lets the tokenizer add it (Llama-3.2: always), except for strings that already
// start with the BOS text. Truncation (§1.4): the last max_length + 1 tokens are kept; the model reads all
// but the last. Rolling windows (§1.7) for wikitext. Identical requests are scored once; scoring runs
// longest first (lm-eval's Collator order), so batches hold sequences of similar length.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eval/eval.h"
#include "util/common.h"

static int starts_with(const char *s, const char *prefix) {
    return prefix && *prefix && !strncmp(s, prefix, strlen(prefix));
}

// tok_encode with lm-eval's add_special_tokens choice for this string.
static int32_t *encode(const EvalTokenizer *tok, EvalBosMode mode, const char *s, size_t n, int force_no_bos,
                       int *count) {
    int32_t *ids = NULL;
    size_t cap = 0;
    int add_bos = mode == EVAL_BOS_NEW && !force_no_bos && !starts_with(s, tok->bos_text);
    size_t k = tok->encode(tok->ctx, s, n, add_bos, &ids, &cap);
    *count = (int)k;
    return ids;
}

int eval_encode_pair(const EvalTokenizer *tok, EvalBosMode mode, const char *ctx, const char *cont,
                     int32_t **ctx_ids, int *nctx, int32_t **cont_ids, int *ncont, char *err, size_t errlen) {
    *ctx_ids = *cont_ids = NULL;
    *nctx = *ncont = 0;
    if (!*ctx) { // empty context: the prefix token conditions the continuation (add_special_tokens=False)
        int n;
        int32_t *c = encode(tok, mode, cont, strlen(cont), 1, &n);
        int32_t prefix = tok->bos_id >= 0 ? tok->bos_id : tok->eos_id;
        if (n == 0) {
            free(c);
            return set_err(err, errlen, "the continuation \"%s\" encodes to no tokens", cont);
        }
        if (prefix < 0 && n < 2) {
            free(c);
            return set_err(err, errlen, "empty context and the tokenizer has neither BOS nor EOS to condition on");
        }
        if (prefix >= 0 && c[0] != prefix) {
            *ctx_ids = xmalloc(sizeof(int32_t));
            (*ctx_ids)[0] = prefix;
            *nctx = 1;
            *cont_ids = c;
            *ncont = n;
        } else { // the continuation starts with the prefix token already: it becomes the context
            *ctx_ids = xmalloc(sizeof(int32_t));
            (*ctx_ids)[0] = c[0];
            *nctx = 1;
            memmove(c, c + 1, (size_t)(n - 1) * sizeof *c);
            *cont_ids = c;
            *ncont = n - 1;
        }
    } else {
        size_t lc = strlen(ctx), lk = strlen(cont);
        size_t keep = py_rstrip_len(ctx, lc); // trailing whitespace joins the continuation
        char *whole = xmalloc(lc + lk + 1);
        memcpy(whole, ctx, lc);
        memcpy(whole + lc, cont, lk + 1);
        int nw, nc;
        int32_t *w = encode(tok, mode, whole, lc + lk, 0, &nw);
        char *c = xmalloc(keep + 1);
        memcpy(c, ctx, keep);
        c[keep] = 0;
        int32_t *ci = encode(tok, mode, c, keep, 0, &nc);
        free(c);
        free(whole);
        int ncn = nw > nc ? nw - nc : 0; // cont_ids = whole[len(ctx_ids):], sliced by count
        int32_t *co = xmalloc(((size_t)ncn + 1) * sizeof *co);
        if (ncn) memcpy(co, w + nc, (size_t)ncn * sizeof *co);
        free(w);
        *ctx_ids = ci;
        *nctx = nc;
        *cont_ids = co;
        *ncont = ncn;
    }
    if (*nctx == 0 || *ncont == 0) {
        int empty_ctx = *nctx == 0;
        free(*ctx_ids);
        free(*cont_ids);
        *ctx_ids = *cont_ids = NULL;
        return set_err(err, errlen, "the %s encodes to no tokens (context \"%.60s\", continuation \"%.60s\")",
                       empty_ctx ? "context" : "continuation", ctx, cont);
    }
    return 0;
}

void eval_rolling_windows(const int32_t *toks, int ntok, int32_t prefix, int max_length,
                          void (*fn)(void *arg, const int32_t *tokens, int n, int cont_len), void *arg) {
    if (ntok <= 0) return;
    int L = max_length;
    int first = ntok < L ? ntok : L;
    // window 1: [prefix] + toks[0:first-1] predicts toks[0:first]
    int32_t *w = xmalloc(((size_t)first + 1) * sizeof *w);
    w[0] = prefix;
    memcpy(w + 1, toks, (size_t)first * sizeof *w);
    fn(arg, w, first + 1, first);
    free(w);
    // later windows predict the next r tokens, reading the L tokens before each target (overlap as context)
    for (int done = first; done < ntok;) {
        int r = ntok - done < L ? ntok - done : L;
        int end = done + r;
        fn(arg, toks + (end - L - 1), L + 1, r);
        done = end;
    }
}

// ---- the request set ----

static uint64_t hash_req(const int32_t *t, int n, int cont_len) {
    uint64_t h = 1469598103934665603ull ^ (uint64_t)(uint32_t)cont_len;
    for (int i = 0; i < n; i++) {
        h ^= (uint32_t)t[i];
        h *= 1099511628211ull;
    }
    return h ^ ((uint64_t)n << 32);
}

void eval_reqset_init(EvalReqSet *s, int max_length, EvalBosMode mode) {
    memset(s, 0, sizeof *s);
    s->max_length = max_length;
    s->bos_mode = mode;
    s->nslots = 1024;
    s->slots = xmalloc(s->nslots * sizeof *s->slots);
    for (size_t i = 0; i < s->nslots; i++) s->slots[i] = -1;
}

void eval_reqset_free(EvalReqSet *s) {
    for (int i = 0; i < s->n; i++) free(s->reqs[i].tokens);
    free(s->reqs);
    free(s->order);
    free(s->ll);
    free(s->greedy);
    free(s->slots);
    memset(s, 0, sizeof *s);
}

static void rehash(EvalReqSet *s) {
    free(s->slots);
    s->nslots *= 2;
    s->slots = xmalloc(s->nslots * sizeof *s->slots);
    for (size_t i = 0; i < s->nslots; i++) s->slots[i] = -1;
    for (int id = 0; id < s->n; id++) {
        size_t j = s->reqs[id].hash & (s->nslots - 1);
        while (s->slots[j] >= 0) j = (j + 1) & (s->nslots - 1);
        s->slots[j] = id;
    }
}

static int reqset_add_tokens(EvalReqSet *s, const int32_t *t, int n, int cont_len) {
    s->n_total++;
    uint64_t h = hash_req(t, n, cont_len);
    size_t j = h & (s->nslots - 1);
    for (; s->slots[j] >= 0; j = (j + 1) & (s->nslots - 1)) {
        const EvalReq *q = &s->reqs[s->slots[j]];
        if (q->hash == h && q->n == n && q->cont_len == cont_len && !memcmp(q->tokens, t, (size_t)n * sizeof *t))
            return s->slots[j];
    }
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 1024;
        s->reqs = xrealloc(s->reqs, (size_t)s->cap * sizeof *s->reqs);
    }
    EvalReq *q = &s->reqs[s->n];
    q->tokens = xmalloc((size_t)n * sizeof *t);
    memcpy(q->tokens, t, (size_t)n * sizeof *t);
    q->n = n;
    q->cont_len = cont_len;
    q->hash = h;
    s->slots[j] = s->n;
    int id = s->n++;
    if ((size_t)s->n * 2 > s->nslots) rehash(s);
    return id;
}

int eval_reqset_add(EvalReqSet *s, const int32_t *ctx, int nctx, const int32_t *cont, int ncont) {
    int total = nctx + ncont, keep = total < s->max_length + 1 ? total : s->max_length + 1;
    int32_t *t = xmalloc((size_t)total * sizeof *t);
    memcpy(t, ctx, (size_t)nctx * sizeof *t);
    memcpy(t + nctx, cont, (size_t)ncont * sizeof *t);
    int id = reqset_add_tokens(s, t + (total - keep), keep, ncont); // left truncation
    free(t);
    return id;
}

// ---- building all requests ----

typedef struct { // one doc's encoded pairs (MC / loglikelihood) or its token list (rolling)
    int32_t **ctx, **cont;
    int *nctx, *ncont;
    int32_t *toks;
    int ntok;
    int failed;
} Encoded;

typedef struct {
    EvalReqSet *s;
    EvalDoc *d;
    int cap;
} WindowSink;

static void add_window(void *arg, const int32_t *tokens, int n, int cont_len) {
    WindowSink *w = arg;
    if (w->d->nreq_ids == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 4;
        w->d->req = xrealloc(w->d->req, (size_t)w->cap * sizeof *w->d->req);
    }
    w->d->req[w->d->nreq_ids++] = reqset_add_tokens(w->s, tokens, n, cont_len);
}

int eval_build_requests(EvalTask *tasks, int ntasks, const EvalTokenizer *tok, EvalReqSet *s, char *err,
                        size_t errlen) {
    const long block = 4096; // docs tokenized per parallel region (bounds the memory of pending token lists)
    int32_t prefix = tok->bos_id >= 0 ? tok->bos_id : tok->eos_id;
    long total = 0;
    for (int ti = 0; ti < ntasks; ti++) {
        if (tasks[ti].def->type == EVAL_ROLLING && prefix < 0)
            return set_err(err, errlen, "%s: rolling log-likelihood needs a BOS or EOS token to start windows",
                           tasks[ti].def->name);
        total += tasks[ti].ndocs;
    }
    // all docs of all tasks in one list, so one parallel region covers many small tasks (MMLU's 57)
    int *who_task = xmalloc(((size_t)total + 1) * sizeof *who_task), *who_doc = xmalloc(((size_t)total + 1) * sizeof *who_doc);
    for (int ti = 0, k = 0; ti < ntasks; ti++)
        for (int di = 0; di < tasks[ti].ndocs; di++, k++) {
            who_task[k] = ti;
            who_doc[k] = di;
        }
    int rc = 0;
    double t0 = now_sec(), last = t0;
    for (long b0 = 0; b0 < total && rc == 0; b0 += block) {
        if (now_sec() - last > 10) { // long inputs (hellaswag, RACE articles): say where tokenization is
            last = now_sec();
            fprintf(stderr, "eval: tokenizing: %ld/%ld docs, %ld requests so far (%.0fs)\n", b0, total, s->n_total,
                    last - t0);
        }
        long b1 = b0 + block < total ? b0 + block : total;
        Encoded *enc = xcalloc((size_t)(b1 - b0), sizeof *enc);
        char first_err[8192] = "";
        long first_bad = -1;
        // tokenization is the slow part and the tokenizer is thread-safe: one doc per iteration
#pragma omp parallel for schedule(dynamic, 4)
        for (long k = b0; k < b1; k++) {
            EvalTask *t = &tasks[who_task[k]];
            int di = who_doc[k];
            EvalDoc *d = &t->docs[di];
            Encoded *e = &enc[k - b0];
            if (t->def->type == EVAL_ROLLING) {
                e->toks = encode(tok, s->bos_mode, d->text, strlen(d->text), 0, &e->ntok);
                continue;
            }
            int nreq = d->nctx > d->ncont ? d->nctx : d->ncont;
            e->ctx = xcalloc((size_t)nreq, sizeof *e->ctx);
            e->cont = xcalloc((size_t)nreq, sizeof *e->cont);
            e->nctx = xcalloc((size_t)nreq, sizeof(int));
            e->ncont = xcalloc((size_t)nreq, sizeof(int));
            for (int i = 0; i < nreq && !e->failed; i++) {
                char msg[ERR_LEN];
                const char *c = d->ctx[d->nctx > 1 ? i : 0], *q = d->cont[d->ncont > 1 ? i : 0];
                int bad = eval_encode_pair(tok, s->bos_mode, c, q, &e->ctx[i], &e->nctx[i], &e->cont[i], &e->ncont[i],
                                           msg, sizeof msg) < 0;
                if (!bad && e->ncont[i] > s->max_length) {
                    snprintf(msg, sizeof msg, "the continuation has %d tokens, more than max_length %d", e->ncont[i],
                             s->max_length);
                    bad = 1;
                }
                if (bad) {
                    e->failed = 1;
#pragma omp critical(eval_req_err)
                    if (first_bad < 0 || k < first_bad) { // report the first bad doc in input order
                        first_bad = k;
                        char where[4200];
                        snprintf(first_err, sizeof first_err, "%s: doc %d (%s), request %d: %s", t->def->name, di,
                                 eval_row_where(&t->rows, di, where, sizeof where), i, msg);
                    }
                }
            }
        }
        if (first_bad >= 0) rc = set_err(err, errlen, "%s", first_err);
        for (long k = b0; k < b1; k++) { // serial, in input order: request ids do not depend on threads
            EvalTask *t = &tasks[who_task[k]];
            EvalDoc *d = &t->docs[who_doc[k]];
            Encoded *e = &enc[k - b0];
            free(d->req); // a rebuild (another max_length or BOS mode) starts over
            free(d->ll);
            free(d->greedy);
            d->req = NULL;
            d->ll = NULL;
            d->greedy = NULL;
            d->nreq_ids = 0;
            if (t->def->type == EVAL_ROLLING) {
                if (rc == 0) {
                    WindowSink w = {s, d, 0};
                    eval_rolling_windows(e->toks, e->ntok, prefix, s->max_length, add_window, &w);
                    d->ll = xcalloc(1, sizeof(double));
                    d->greedy = xcalloc(1, sizeof(int));
                }
                free(e->toks);
                continue;
            }
            int nreq = d->nctx > d->ncont ? d->nctx : d->ncont;
            if (rc == 0) {
                d->req = xmalloc((size_t)nreq * sizeof *d->req);
                d->nreq_ids = nreq;
                d->ll = xcalloc((size_t)nreq, sizeof(double));
                d->greedy = xcalloc((size_t)nreq, sizeof(int));
                for (int i = 0; i < nreq; i++)
                    d->req[i] = eval_reqset_add(s, e->ctx[i], e->nctx[i], e->cont[i], e->ncont[i]);
            }
            for (int i = 0; i < nreq; i++) {
                free(e->ctx[i]);
                free(e->cont[i]);
            }
            free(e->ctx);
            free(e->cont);
            free(e->nctx);
            free(e->ncont);
        }
        free(enc);
    }
    free(who_task);
    free(who_doc);
    return rc;
}

// ---- scoring ----

static const EvalReqSet *sort_set; // qsort has no context argument; scoring is single-threaded here
static int cmp_order(const void *a, const void *b) {
    const EvalReq *x = &sort_set->reqs[*(const int *)a], *y = &sort_set->reqs[*(const int *)b];
    if (x->n != y->n) return x->n > y->n ? -1 : 1; // longest first
    for (int i = 0; i < x->n; i++)
        if (x->tokens[i] != y->tokens[i]) return x->tokens[i] < y->tokens[i] ? -1 : 1;
    return x->cont_len < y->cont_len ? -1 : x->cont_len > y->cont_len;
}

static void fmt_duration(char *buf, size_t n, double s) {
    if (s < 0 || s > 1e7) snprintf(buf, n, "?");
    else if (s >= 3600) snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
    else if (s >= 60) snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else snprintf(buf, n, "%.0fs", s);
}

int eval_score_requests(EvalReqSet *s, const Scorer *sc, int batch_size, EvalTask *tasks, int ntasks, char *err,
                        size_t errlen) {
    s->order = xmalloc(((size_t)s->n + 1) * sizeof *s->order);
    for (int i = 0; i < s->n; i++) s->order[i] = i;
    sort_set = s;
    qsort(s->order, (size_t)s->n, sizeof *s->order, cmp_order);
    sort_set = NULL;
    s->ll = xcalloc((size_t)s->n + 1, sizeof *s->ll);
    s->greedy = xcalloc((size_t)s->n + 1, sizeof *s->greedy);
    LLRequest *batch = xmalloc(((size_t)s->n + 1) * sizeof *batch);
    double *bll = xmalloc(((size_t)s->n + 1) * sizeof *bll);
    int *bgr = xmalloc(((size_t)s->n + 1) * sizeof *bgr);
    int tty = isatty(2);
    double t0 = now_sec(), last = t0;
    fprintf(stderr, "eval: scoring %d requests (%ld before dedupe), max_length %d, batch %s\n", s->n, s->n_total,
            s->max_length, batch_size > 0 ? "fixed" : "auto (64Ki tokens per call)");
    int done = 0, rc = 0;
    while (done < s->n) {
        int nb = 0;
        long toks = 0;
        while (done + nb < s->n) {
            const EvalReq *q = &s->reqs[s->order[done + nb]];
            if (batch_size > 0 ? nb == batch_size : (nb > 0 && toks + q->n > 65536)) break;
            batch[nb] = (LLRequest){q->tokens, q->n, q->cont_len};
            toks += q->n;
            nb++;
        }
        if (sc->score(sc->ctx, batch, nb, bll, bgr) != 0) {
            rc = set_err(err, errlen, "the scorer failed on requests %d..%d of %d (lengths %d..%d tokens)", done,
                         done + nb - 1, s->n, batch[nb - 1].n, batch[0].n);
            break;
        }
        for (int i = 0; i < nb; i++) {
            s->ll[s->order[done + i]] = bll[i];
            s->greedy[s->order[done + i]] = bgr[i];
        }
        done += nb;
        double now = now_sec();
        if (now - last >= (tty ? 0.25 : 30.0) || done == s->n) {
            double rate = done / (now - t0 > 1e-9 ? now - t0 : 1e-9);
            char eta[32], el[32];
            fmt_duration(eta, sizeof eta, (s->n - done) / (rate > 0 ? rate : 1e-9));
            fmt_duration(el, sizeof el, now - t0);
            fprintf(stderr, "%seval: %d/%d requests (%5.1f%%)  %.1f req/s  elapsed %s  ETA %s%s", tty ? "\r" : "",
                    done, s->n, 100.0 * done / s->n, rate, el, eta, tty ? "\033[K" : "\n");
            if (tty && done == s->n) fputc('\n', stderr);
            last = now;
        }
    }
    free(batch);
    free(bll);
    free(bgr);
    if (rc < 0) return -1;
    for (int ti = 0; ti < ntasks; ti++) {
        EvalTask *t = &tasks[ti];
        for (int di = 0; di < t->ndocs; di++) {
            EvalDoc *d = &t->docs[di];
            if (t->def->type == EVAL_ROLLING) { // document ll = sum of its windows' ll
                double sum = 0;
                for (int w = 0; w < d->nreq_ids; w++) sum += s->ll[d->req[w]];
                d->ll[0] = sum;
                continue;
            }
            for (int i = 0; i < d->nreq_ids; i++) {
                d->ll[i] = s->ll[d->req[i]];
                d->greedy[i] = s->greedy[d->req[i]];
            }
        }
    }
    return 0;
}
