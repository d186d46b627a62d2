// blend.c: Megatron's blends and splits (spec train.md §1). Every split is either one GPTDataset (a
// sampler over a sequence range) or a BlendedDataset over several: item s is item dataset_sample[s] of
// mid-level dataset dataset_index[s], both from the greedy rule of helpers.cpp::build_blending_indices.
#include "data/blend.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/indexed.h"
#include "util/common.h"

static const char *split_name[NSPLITS] = {"train", "valid", "test"};

typedef struct {
    int k, blended;               // mid-level datasets; through a BlendedDataset
    int nconcat;                  // FLA order: prefixes read as one dataset by smp[0]
    int src[BLEND_MAX];           // index into Datasets.ds
    Sampler *smp[BLEND_MAX];
    uint64_t lo[BLEND_MAX], hi[BLEND_MAX], target[BLEND_MAX], buffer[BLEND_MAX];
    double w[BLEND_MAX];          // blending weights (twice normalised, as BlendedDataset uses them)
    uint64_t requested, size;
    int16_t *dindex;              // [size]
    int64_t *dsample;             // [size]
} SplitSet;

struct Datasets {
    int nds;
    IndexedDataset ds[NSPLITS * BLEND_MAX];
    char name[NSPLITS * BLEND_MAX][512];
    int has[NSPLITS];
    SplitSet set[NSPLITS];
    int use_split, weighted[NSPLITS];
    double split[3];
    char split_text[64];
    int L;
    SampleOrder order;
};

// Python float(): the whole token must parse.
static int parse_float(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno) return 0;
    *out = v;
    return 1;
}

int blend_parse(const char *list, BlendList *b, char *err, size_t errlen) {
    memset(b, 0, sizeof *b);
    char tok[2 * BLEND_MAX][512];
    int n = 0;
    for (const char *p = list; *p;) {
        while (isspace((unsigned char)*p)) p++;
        if (!*p) break;
        const char *q = p;
        while (*q && !isspace((unsigned char)*q)) q++;
        if (n == 2 * BLEND_MAX) return set_err(err, errlen, "data path list: more than %d entries", 2 * BLEND_MAX);
        if ((size_t)(q - p) >= sizeof tok[0]) return set_err(err, errlen, "data path list: entry longer than 511 characters");
        memcpy(tok[n], p, (size_t)(q - p));
        tok[n++][q - p] = 0;
        p = q;
    }
    if (n == 0) return set_err(err, errlen, "data path list is empty");
    // Megatron's get_blend_from_list: weighted iff the count is even and every even-position token is a float
    int weighted = n % 2 == 0;
    double w[BLEND_MAX];
    for (int i = 0; weighted && i < n; i += 2) weighted = parse_float(tok[i], &w[i / 2]);
    if (weighted) {
        b->n = n / 2;
        b->weighted = 1;
        for (int i = 0; i < b->n; i++) {
            if (!(w[i] >= 0) || !isfinite(w[i]))
                return set_err(err, errlen, "data path list: weight '%s' of %s must be a finite number >= 0", tok[2 * i], tok[2 * i + 1]);
            b->weight[i] = w[i];
            strcpy(b->prefix[i], tok[2 * i + 1]);
        }
    } else {
        if (n > BLEND_MAX) return set_err(err, errlen, "data path list: more than %d prefixes", BLEND_MAX);
        b->n = n;
        for (int i = 0; i < n; i++) strcpy(b->prefix[i], tok[i]);
    }
    return 0;
}

// numpy's pairwise_sum for n <= 128 (blocks of 8 accumulators), then w / sum.
void blend_normalize(const double *in, int n, double *out) {
    double sum;
    if (n < 8) {
        sum = 0.;
        for (int i = 0; i < n; i++) sum += in[i];
    } else {
        double r[8];
        for (int j = 0; j < 8; j++) r[j] = in[j];
        int i = 8;
        for (; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++) r[j] += in[i + j];
        sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) sum += in[i];
    }
    for (int i = 0; i < n; i++) out[i] = in[i] / sum;
}

int split_parse(const char *s, double v[3], char *err, size_t errlen) {
    double raw[3] = {0, 0, 0};
    int n = 0;
    for (const char *p = s; *p;) { // every match of [.0-9]+ as a float
        if (!(isdigit((unsigned char)*p) || *p == '.')) { p++; continue; }
        const char *q = p;
        while (isdigit((unsigned char)*q) || *q == '.') q++;
        char tok[64];
        if ((size_t)(q - p) >= sizeof tok) return set_err(err, errlen, "split '%s': number too long", s);
        memcpy(tok, p, (size_t)(q - p));
        tok[q - p] = 0;
        if (n == 3) return set_err(err, errlen, "split '%s': expected at most 3 numbers (train, valid, test)", s);
        if (!parse_float(tok, &raw[n])) return set_err(err, errlen, "split '%s': '%s' is not a number", s, tok);
        n++;
        p = q;
    }
    if (raw[0] + raw[1] + raw[2] <= 0) return set_err(err, errlen, "split '%s': expected weights like 969,30,1", s);
    blend_normalize(raw, 3, v);
    return 0;
}

int split_range(const double v[3], uint64_t N, int k, uint64_t *lo, uint64_t *hi) {
    double e[4] = {0}; // bookends
    for (int i = 0; i < 3; i++) e[i + 1] = e[i] + v[i];
    double e0 = e[k], e1 = e[k + 1];
    if (e1 <= e0) return 0;
    *lo = (uint64_t)rint(e0 * (double)N); // Python round: half to even (the default rounding mode)
    *hi = (uint64_t)rint(e1 * (double)N);
    return 1;
}

void blend_requested(const Config *c, uint64_t S[NSPLITS]) {
    uint64_t gbs = (uint64_t)c->global_batch_size, ei = c->eval_iters > 0 ? (uint64_t)c->eval_iters : 0;
    S[SPLIT_TRAIN] = (uint64_t)c->train_iters * gbs;
    S[SPLIT_VALID] = ((c->eval_interval > 0 ? (uint64_t)(c->train_iters / c->eval_interval) : 0) + 1) * ei * gbs;
    S[SPLIT_TEST] = ei * gbs;
}

static void build_blending_indices(SplitSet *s) {
    int64_t count[BLEND_MAX] = {0};
    s->dindex = xmalloc((s->size ? s->size : 1) * sizeof *s->dindex);
    s->dsample = xmalloc((s->size ? s->size : 1) * sizeof *s->dsample);
    for (uint64_t i = 0; i < s->size; i++) {
        double x = i > 1 ? (double)i : 1.0;
        int best = 0;
        double eb = s->w[0] * x - (double)count[0];
        for (int j = 1; j < s->k; j++) {
            double e = s->w[j] * x - (double)count[j];
            if (e > eb) { best = j; eb = e; } // strict: ties go to the lowest index
        }
        s->dindex[i] = (int16_t)best;
        s->dsample[i] = count[best]++;
    }
}

static int open_prefix(Datasets *d, const char *prefix, char *err, size_t errlen) {
    for (int i = 0; i < d->nds; i++)
        if (!strcmp(d->name[i], prefix)) return i;
    if (indexed_open(&d->ds[d->nds], prefix, err, errlen)) return -1;
    strcpy(d->name[d->nds], prefix);
    return d->nds++;
}

// One split from list b; with_split: cut each prefix by d->split, else each prefix whole.
static int build_split(Datasets *d, const Config *c, int j, const BlendList *b, int with_split, uint64_t S, char *err,
                       size_t errlen) {
    SplitSet *s = &d->set[j];
    memset(s, 0, sizeof *s);
    s->k = b->n;
    s->requested = S;
    for (int i = 0; i < b->n; i++) {
        int id = open_prefix(d, b->prefix[i], err, errlen);
        if (id < 0) return -1;
        s->src[i] = id;
        uint64_t N = d->ds[id].num_seqs;
        s->lo[i] = 0;
        s->hi[i] = N;
        if (with_split && !split_range(d->split, N, j, &s->lo[i], &s->hi[i])) return 0; // None: no dataset
        if (s->lo[i] >= s->hi[i])
            return set_err(err, errlen, "%s: the %s split of its %llu sequences is empty (split %s)", b->prefix[i],
                           split_name[j], (unsigned long long)N, d->split_text);
    }
    if (d->order == ORDER_FLA) { // FLA: the prefixes as one concatenated dataset (weights have no meaning there)
        const IndexedDataset *parts[BLEND_MAX];
        for (int i = 0; i < b->n; i++) parts[i] = &d->ds[s->src[i]];
        s->smp[0] = sampler_open_fla_concat(parts, b->n, c->seq_length, (uint64_t)c->seed, err, errlen);
        if (!s->smp[0]) return -1;
        s->k = 1;
        s->nconcat = b->n;
        s->size = sampler_size(s->smp[0]);
        d->has[j] = 1;
        return 0;
    }
    // one prefix without a weight (or any prefix of a per-split list): a plain GPTDataset of S samples
    int plain = b->n == 1 && (!b->weighted || !with_split);
    double w[BLEND_MAX];
    if (b->weighted && !plain) {
        blend_normalize(b->weight, b->n, w);
        char t[32]; // the config holds a float: take back the decimal it was written as (0.005, not 0.004999...)
        snprintf(t, sizeof t, "%.7g", c->mid_level_dataset_surplus);
        double eps = strtod(t, NULL);
        for (int i = 0; i < b->n; i++) {
            s->target[i] = (uint64_t)ceil((double)S * w[i]);
            s->buffer[i] = (uint64_t)ceil((double)s->target[i] * (1 + eps));
        }
    }
    for (int i = 0; i < b->n; i++) {
        uint64_t want = plain ? S : b->weighted ? s->buffer[i] : 0; // 0: one epoch (num_samples None)
        s->smp[i] = sampler_open_docs(&d->ds[s->src[i]], d->order, c->seq_length, want, (uint64_t)c->seed, s->lo[i],
                                      s->hi[i], err, errlen);
        if (!s->smp[i]) {
            char e2[ERR_LEN];
            snprintf(e2, sizeof e2, "%s", err);
            return set_err(err, errlen, "%s (%s split): %s", b->prefix[i], split_name[j], e2);
        }
    }
    if (plain) {
        s->size = sampler_size(s->smp[0]);
        d->has[j] = 1;
        return 0;
    }
    s->blended = 1;
    if (b->weighted) {
        s->size = 0;
        for (int i = 0; i < b->n; i++) s->size += s->target[i];
    } else { // weights = dataset lengths, size = min(S, sum)
        uint64_t tot = 0;
        for (int i = 0; i < b->n; i++) tot += s->target[i] = sampler_size(s->smp[i]), w[i] = (double)s->target[i];
        s->size = S < tot ? S : tot;
    }
    blend_normalize(w, b->n, s->w); // BlendedDataset normalises once more
    build_blending_indices(s);
    int64_t used[BLEND_MAX] = {0};
    for (uint64_t i = 0; i < s->size; i++) used[s->dindex[i]] = s->dsample[i] + 1;
    for (int i = 0; i < b->n; i++)
        if ((uint64_t)used[i] > sampler_size(s->smp[i]))
            return set_err(err, errlen,
                           "%s (%s split): the blend draws %lld samples but the dataset has %llu "
                           "(raise mid_level_dataset_surplus)",
                           b->prefix[i], split_name[j], (long long)used[i], (unsigned long long)sampler_size(s->smp[i]));
    d->has[j] = 1;
    return 0;
}

Datasets *datasets_open(const Config *c, char *err, size_t errlen) {
    Datasets *d = xcalloc(1, sizeof *d);
    d->L = c->seq_length;
    d->order = !strcmp(c->data_order, "fla") ? ORDER_FLA : ORDER_MEGATRON;
    uint64_t S[NSPLITS];
    blend_requested(c, S);
    const char *per[NSPLITS] = {c->train_data_path, c->valid_data_path, c->test_data_path};
    int any_per = per[0][0] || per[1][0] || per[2][0];
    BlendList *b = xmalloc(sizeof *b);
    int rc = 0;
    if (c->data_path[0] && any_per) {
        rc = set_err(err, errlen, "data_path cannot be combined with train_data_path/valid_data_path/test_data_path");
    } else if (c->data_path[0]) {
        d->use_split = 1;
        const char *sp = c->split[0] ? c->split : "969, 30, 1";
        if (!c->split[0]) fprintf(stderr, "gdn: warning: data_path without split: using split \"%s\" (Megatron's default)\n", sp);
        snprintf(d->split_text, sizeof d->split_text, "%s", sp);
        rc = split_parse(sp, d->split, err, errlen) || blend_parse(c->data_path, b, err, errlen);
        if (!rc && d->order == ORDER_FLA && (b->weighted || d->split[0] != 1.0))
            rc = set_err(err, errlen, "data_order fla reads whole prefixes (no split, no weights): use train_data_path");
        for (int j = 0; !rc && j < NSPLITS; j++)
            if (S[j] > 0) rc = build_split(d, c, j, b, 1, S[j], err, errlen);
        for (int j = 0; !rc && j < NSPLITS; j++) d->weighted[j] = b->weighted;
    } else if (any_per) {
        if (c->split[0]) rc = set_err(err, errlen, "split and train_data_path/valid_data_path/test_data_path are incompatible (Megatron: split and blend_per_split)");
        for (int j = 0; !rc && j < NSPLITS; j++) {
            if (!per[j][0] || S[j] == 0) continue;
            rc = blend_parse(per[j], b, err, errlen);
            if (!rc && d->order == ORDER_FLA && b->weighted)
                rc = set_err(err, errlen, "data_order fla reads the prefixes as one concatenated dataset: no weights");
            if (!rc) rc = build_split(d, c, j, b, 0, S[j], err, errlen);
            d->weighted[j] = b->weighted;
        }
    } else {
        rc = set_err(err, errlen, "no data: set train_data_path (a Megatron .bin/.idx prefix; see gdn prepare) or data_path");
    }
    free(b);
    if (!rc && !d->has[SPLIT_TRAIN] && S[SPLIT_TRAIN] > 0) rc = set_err(err, errlen, "no training data (the train split is empty)");
    if (rc) { datasets_free(d); return NULL; }
    return d;
}

void datasets_free(Datasets *d) {
    if (!d) return;
    for (int j = 0; j < NSPLITS; j++) {
        for (int i = 0; i < d->set[j].k; i++) sampler_free(d->set[j].smp[i]);
        free(d->set[j].dindex);
        free(d->set[j].dsample);
    }
    for (int i = 0; i < d->nds; i++) indexed_close(&d->ds[i]);
    free(d);
}

int datasets_has(const Datasets *d, int split) { return d->has[split]; }
uint64_t datasets_size(const Datasets *d, int split) { return d->has[split] ? d->set[split].size : 0; }

void datasets_locate(const Datasets *d, int split, uint64_t g, int *dataset, uint64_t *item) {
    const SplitSet *s = &d->set[split];
    if (!d->has[split]) die("the %s split has no dataset", split_name[split]);
    if (!s->blended) { *dataset = 0; *item = g; return; }
    if (g >= s->size)
        die("sample %llu is beyond the %llu samples of the %s blend", (unsigned long long)g, (unsigned long long)s->size,
            split_name[split]);
    *dataset = s->dindex[g];
    *item = (uint64_t)s->dsample[g];
}

void datasets_get(Datasets *d, int split, uint64_t g, int32_t *inputs, int32_t *labels) {
    int k;
    uint64_t item;
    datasets_locate(d, split, g, &k, &item);
    sampler_get(d->set[split].smp[k], item, inputs, labels);
}

void datasets_describe(const Datasets *d, FILE *f) {
    if (d->use_split)
        fprintf(f, "split: %s -> [%.6g, %.6g, %.6g] of each prefix's sequences\n", d->split_text, d->split[0],
                d->split[1], d->split[2]);
    for (int j = 0; j < NSPLITS; j++) {
        const SplitSet *s = &d->set[j];
        if (!d->has[j]) { fprintf(f, "%s: none\n", split_name[j]); continue; }
        fprintf(f, "%s: %llu samples requested, %llu in the %s\n", split_name[j], (unsigned long long)s->requested,
                (unsigned long long)s->size, s->blended ? (d->weighted[j] ? "weighted blend" : "length-weighted blend") : "dataset");
        if (s->nconcat) fprintf(f, "  FLA order: the %d prefixes below read as one dataset\n", s->nconcat);
        for (int i = 0; i < (s->nconcat ? s->nconcat : s->k); i++) {
            const IndexedDataset *ds = &d->ds[s->src[i]];
            uint64_t tok = 0;
            for (uint64_t q = s->lo[i]; q < s->hi[i]; q++) tok += indexed_seq_len(ds, q);
            fprintf(f, "  %s: sequences [%llu, %llu) = %llu, tokens %llu, samples %llu", d->name[s->src[i]],
                    (unsigned long long)s->lo[i], (unsigned long long)s->hi[i], (unsigned long long)(s->hi[i] - s->lo[i]),
                    (unsigned long long)tok, (unsigned long long)(s->nconcat ? (s->hi[i] - s->lo[i]) : sampler_size(s->smp[i])));
            if (s->blended) fprintf(f, ", weight %.6g", s->w[i]);
            if (s->blended && d->weighted[j])
                fprintf(f, ", target %llu, buffer %llu", (unsigned long long)s->target[i], (unsigned long long)s->buffer[i]);
            fprintf(f, "\n");
        }
    }
}
