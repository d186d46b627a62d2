// infer.c: model + tokenizer opening and token sampling for generate / verify.
#include "infer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../io/model_load.h"
#include "../util/common.h"

void infer_open(InferModel *im, int argc, char **argv) {
    const char *load = arg_get(argc, argv, "--load"), *tokp = arg_get(argc, argv, "--tokenizer");
    const char *dev = arg_get(argc, argv, "--device"), *prec = arg_get(argc, argv, "--precision");
    if (!load) die("--load MODEL is required (a gdn.c checkpoint or an FLA HuggingFace dir)");
    char err[ERR_LEN], def[1300];
    if (!tokp) {
        if (model_find_tokenizer(load, def, sizeof def))
            die("no tokenizer.json in or beside %s: pass --tokenizer PATH (tokenizer.json)", load);
        tokp = def;
    }
    im->tok = tok_load(tokp, err, sizeof err);
    if (!im->tok) die("%s", err);
    im->m = model_open(load, dev, prec, err, sizeof err);
    if (!im->m) die("%s", err);
    if (tok_vocab_size(im->tok) > im->m->d.V)
        die("tokenizer %s has %d tokens but the model's vocabulary is %d", tokp, tok_vocab_size(im->tok), im->m->d.V);
}

void infer_close(InferModel *im) {
    model_free(im->m);
    tok_free(im->tok);
}

int32_t argmax_logit(const float *logits, int V) {
    int32_t best = 0;
    for (int v = 1; v < V; v++)
        if (logits[v] > logits[best]) best = v;
    return best;
}

static uint64_t next_u64(uint64_t *s) { // splitmix64
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct { float p; int32_t id; } Cand;
static int cand_desc(const void *a, const void *b) {
    const Cand *x = a, *y = b;
    return x->p > y->p ? -1 : x->p < y->p ? 1 : (x->id < y->id ? -1 : x->id > y->id);
}

// HF order: repetition penalty, temperature, top-k, top-p, then sample.
int32_t sample_next(float *logits, int V, const SamplerCfg *sc, const int32_t *seen, int nseen, uint64_t *rng) {
    if (sc->repetition_penalty != 1.0f)
        for (int i = 0; i < nseen; i++) {
            float *l = &logits[seen[i]];
            // each distinct id once: mark by checking earlier occurrences
            int dup = 0;
            for (int j = 0; j < i && !dup; j++) dup = seen[j] == seen[i];
            if (!dup) *l = *l > 0 ? *l / sc->repetition_penalty : *l * sc->repetition_penalty;
        }
    if (sc->greedy || sc->temperature <= 0) return argmax_logit(logits, V);
    float mx = logits[argmax_logit(logits, V)];
    int n = V;
    Cand *c = xmalloc((size_t)V * sizeof *c);
    if (sc->top_k > 0 && sc->top_k < V) { // keep the k largest with a min-heap (ties: lower id kept)
        n = sc->top_k;
        int hn = 0;
        for (int v = 0; v < V; v++) {
            Cand x = {logits[v], v};
            if (hn < n) { // sift up
                int i = hn++;
                c[i] = x;
                while (i > 0 && cand_desc(&c[(i - 1) / 2], &c[i]) < 0) {
                    Cand t = c[i]; c[i] = c[(i - 1) / 2]; c[(i - 1) / 2] = t; i = (i - 1) / 2;
                }
            } else if (cand_desc(&x, &c[0]) < 0) { // better than the worst kept: replace the root, sift down
                c[0] = x;
                for (int i = 0;;) {
                    int l = 2 * i + 1, r = l + 1, w = i;
                    if (l < n && cand_desc(&c[l], &c[w]) > 0) w = l;
                    if (r < n && cand_desc(&c[r], &c[w]) > 0) w = r;
                    if (w == i) break;
                    Cand t = c[i]; c[i] = c[w]; c[w] = t; i = w;
                }
            }
        }
    } else {
        for (int v = 0; v < V; v++) { c[v].p = logits[v]; c[v].id = v; }
    }
    for (int i = 0; i < n; i++) c[i].p = expf((c[i].p - mx) / sc->temperature);
    if (sc->top_p < 1.0f || n < V) qsort(c, (size_t)n, sizeof *c, cand_desc); // full vocabulary unsorted is fine
    double kept = 0;
    for (int i = 0; i < n; i++) kept += c[i].p;
    if (sc->top_p < 1.0f) { // smallest prefix whose probability reaches top_p (at least one token)
        double acc = 0;
        int keep = 0;
        while (keep < n && (keep == 0 || acc < sc->top_p * kept)) acc += c[keep++].p;
        n = keep;
        kept = acc;
    }
    double u = (next_u64(rng) >> 11) * 0x1.0p-53 * kept, acc = 0;
    int32_t pick = c[n - 1].id;
    for (int i = 0; i < n; i++) {
        acc += c[i].p;
        if (u < acc) { pick = c[i].id; break; }
    }
    free(c);
    return pick;
}
