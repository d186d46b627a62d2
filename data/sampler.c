// sampler.c: which tokens make training sample g, in the order Megatron's GPTDataset (spec data.md §3)
// or FLA's HF Trainer (§4.2) would serve them.
//
// Megatron: every sequence of the .idx is a "document". The documents are repeated for e epochs and
// shuffled (document_index); F is the concatenation of the documents in that order, sample k is
// F[k*L, k*L+L+1), and dataset item i is sample shuffle_index[i]. F is never built: doc_start holds the
// prefix sums of the document sizes along document_index, and a binary search finds where a sample starts.
//
// FLA: every sequence is one chunk of L tokens. p2 = HF datasets' shuffle(seed) of the chunks at load,
// p3 = torch.randperm(N) seeded seed + epoch (the Trainer's sampler); position g reads chunk
// p2[p3[g mod N]] of epoch g / N. Labels are the chunk shifted by one with the last position ignored,
// as FLA's model shifts internally.
#include "data/sampler.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "data/rng.h"
#include "util/common.h"

struct Sampler {
    const IndexedDataset *ds;
    SampleOrder order;
    int seq_length;
    uint64_t seed;
    uint64_t size; // Megatron S, FLA N
    // Megatron
    int64_t *doc_index;     // [num_docs] sequence ids, e epochs shuffled
    int64_t *doc_start;     // [num_docs + 1] token position of each document_index entry in F
    uint64_t num_docs;
    uint64_t doc_lo, doc_hi; // the split's sequence range [lo, hi) of the .idx (spec train.md §1.5)
    int64_t *shuffle_index; // [S]
    // FLA
    const IndexedDataset *part[SAMPLER_MAX_PARTS]; // the datasets read as one concatenation (FLA's view of several prefixes)
    uint64_t part_start[SAMPLER_MAX_PARTS + 1];    // first chunk of each
    int nparts;
    int64_t *p2;            // [N] logical sample -> chunk
    int64_t *p3;            // [N] randperm of epoch p3_epoch
    uint64_t p3_epoch;
    int have_p3;
    pthread_mutex_t p3_lock; // sampler_get may run on several loader threads
};

// Megatron's RandomState shuffle of a[0..n), as int64 (the shuffle draws do not depend on the dtype).
static void np_shuffle(int64_t *a, uint64_t n, Mt19937 *rs) { legacy_shuffle_i64(a, n, mt_u32_cb, rs); }

static int megatron_build(Sampler *s, uint64_t num_samples, char *err, size_t errlen) {
    const IndexedDataset *ds = s->ds;
    const uint64_t L = (uint64_t)s->seq_length, E = 1; // E = add_extra_token_to_sequence
    uint64_t lo = s->doc_lo, D = s->doc_hi - s->doc_lo, T = 0;
    for (uint64_t d = lo; d < s->doc_hi; d++) T += indexed_seq_len(ds, d);
    if (T == 0) return set_err(err, errlen, "dataset has no tokens (%llu sequences)", (unsigned long long)D);
    if (s->seed > 0xffffffffu)
        return set_err(err, errlen, "Megatron order: seed %llu does not fit numpy RandomState's 32-bit seed",
                       (unsigned long long)s->seed);
    if (num_samples > (UINT64_MAX - E) / L) return set_err(err, errlen, "num_samples %llu is too large", (unsigned long long)num_samples);
    // Epochs: the smallest e >= 1 with e*T >= num_samples*L + E.
    uint64_t need = num_samples * L + E;
    uint64_t epochs = need <= T ? 1 : (need + T - 1) / T;
    if (epochs > (1ull << 36) / D)
        return set_err(err, errlen,
                       "Megatron order: %llu samples of %llu tokens need %llu epochs of this %llu-token dataset; "
                       "the document index would have %llu x %llu entries",
                       (unsigned long long)num_samples, (unsigned long long)L, (unsigned long long)epochs,
                       (unsigned long long)T, (unsigned long long)epochs, (unsigned long long)D);
    uint64_t S = (epochs * T - E) / L;
    if (S == 0)
        return set_err(err, errlen, "dataset has %llu tokens, fewer than one sample of seq_length %llu + 1",
                       (unsigned long long)T, (unsigned long long)L);
    int separate_final_epoch = 0;
    uint64_t S_sans = S;
    if (epochs > 1) {
        S_sans = ((epochs - 1) * T - E) / L;
        uint64_t per_epoch = (T - E) / L;
        // Python: num_samples - sans < int(0.80 * per_epoch); same double arithmetic here.
        separate_final_epoch = (int64_t)(num_samples - S_sans) < (int64_t)(0.80 * (double)per_epoch);
    }
    Mt19937 rs;
    mt_seed(&rs, (uint32_t)s->seed);
    s->num_docs = epochs * D;
    s->doc_index = xmalloc(s->num_docs * sizeof *s->doc_index);
    for (uint64_t k = 0; k < s->num_docs; k++) s->doc_index[k] = (int64_t)(lo + k % D);
    if (separate_final_epoch) {
        np_shuffle(s->doc_index, (epochs - 1) * D, &rs);
        np_shuffle(s->doc_index + (epochs - 1) * D, D, &rs);
    } else {
        np_shuffle(s->doc_index, s->num_docs, &rs);
    }
    s->doc_start = xmalloc((s->num_docs + 1) * sizeof *s->doc_start);
    int64_t pos = 0;
    for (uint64_t k = 0; k < s->num_docs; k++) {
        s->doc_start[k] = pos;
        pos += indexed_seq_len(ds, (uint64_t)s->doc_index[k]);
    }
    s->doc_start[s->num_docs] = pos;
    // The shuffle continues the same RandomState stream.
    s->shuffle_index = xmalloc(S * sizeof *s->shuffle_index);
    for (uint64_t i = 0; i < S; i++) s->shuffle_index[i] = (int64_t)i;
    if (separate_final_epoch) {
        np_shuffle(s->shuffle_index, S_sans, &rs);
        np_shuffle(s->shuffle_index + S_sans, S - S_sans, &rs);
    } else {
        np_shuffle(s->shuffle_index, S, &rs);
    }
    s->size = S;
    return 0;
}

static int fla_build(Sampler *s, char *err, size_t errlen) {
    if (s->nparts == 0) s->part[s->nparts++] = s->ds;
    uint64_t N = 0;
    for (int p = 0; p < s->nparts; p++) {
        const IndexedDataset *ds = s->part[p];
        s->part_start[p] = N;
        for (uint64_t i = 0; i < ds->num_seqs; i++) {
            uint32_t len = indexed_seq_len(ds, i);
            if (len != (uint32_t)s->seq_length)
                return set_err(err, errlen,
                               "FLA order needs every sequence to be one chunk of seq_length %d tokens, but sequence %llu "
                               "%shas %u",
                               s->seq_length, (unsigned long long)i, s->nparts > 1 ? "of a prefix " : "", len);
        }
        N += ds->num_seqs;
    }
    s->part_start[s->nparts] = N;
    if (N == 0) return set_err(err, errlen, "FLA order: dataset has no chunks");
    s->p2 = xmalloc(N * sizeof *s->p2);
    hf_shuffle_permutation(s->p2, N, s->seed);
    s->p3 = xmalloc(N * sizeof *s->p3);
    s->size = N;
    return 0;
}

Sampler *sampler_open(const IndexedDataset *ds, SampleOrder order, int seq_length, uint64_t num_samples,
                      uint64_t seed, char *err, size_t errlen) {
    return sampler_open_docs(ds, order, seq_length, num_samples, seed, 0, ds->num_seqs, err, errlen);
}

Sampler *sampler_open_fla_concat(const IndexedDataset *const *ds, int n, int seq_length, uint64_t seed, char *err,
                                 size_t errlen) {
    if (n < 1 || n > SAMPLER_MAX_PARTS) {
        set_err(err, errlen, "FLA order: 1 to %d datasets, got %d", SAMPLER_MAX_PARTS, n);
        return NULL;
    }
    if (seq_length < 1) {
        set_err(err, errlen, "seq_length must be at least 1, got %d", seq_length);
        return NULL;
    }
    Sampler *s = xcalloc(1, sizeof *s);
    s->ds = ds[0];
    s->order = ORDER_FLA;
    s->seq_length = seq_length;
    s->seed = seed;
    s->doc_hi = ds[0]->num_seqs;
    for (int i = 0; i < n; i++) s->part[i] = ds[i];
    s->nparts = n;
    pthread_mutex_init(&s->p3_lock, NULL);
    if (fla_build(s, err, errlen)) {
        sampler_free(s);
        return NULL;
    }
    return s;
}

Sampler *sampler_open_docs(const IndexedDataset *ds, SampleOrder order, int seq_length, uint64_t num_samples,
                           uint64_t seed, uint64_t doc_lo, uint64_t doc_hi, char *err, size_t errlen) {
    if (doc_lo >= doc_hi || doc_hi > ds->num_seqs) {
        set_err(err, errlen, "sequence range [%llu, %llu) is empty or outside the %llu sequences", (unsigned long long)doc_lo,
                (unsigned long long)doc_hi, (unsigned long long)ds->num_seqs);
        return NULL;
    }
    if (order == ORDER_FLA && (doc_lo != 0 || doc_hi != ds->num_seqs)) {
        set_err(err, errlen, "FLA order reads whole datasets (no split of its chunks)");
        return NULL;
    }
    if (seq_length < 1) {
        set_err(err, errlen, "seq_length must be at least 1, got %d", seq_length);
        return NULL;
    }
    if (order != ORDER_MEGATRON && order != ORDER_FLA) {
        set_err(err, errlen, "unknown sample order %d", (int)order);
        return NULL;
    }
    Sampler *s = xcalloc(1, sizeof *s);
    s->ds = ds;
    s->order = order;
    s->seq_length = seq_length;
    s->seed = seed;
    s->doc_lo = doc_lo;
    s->doc_hi = doc_hi;
    pthread_mutex_init(&s->p3_lock, NULL);
    int rc = order == ORDER_MEGATRON ? megatron_build(s, num_samples, err, errlen) : fla_build(s, err, errlen);
    if (rc != 0) {
        sampler_free(s);
        return NULL;
    }
    return s;
}

void sampler_free(Sampler *s) {
    if (!s) return;
    free(s->doc_index);
    free(s->doc_start);
    free(s->shuffle_index);
    free(s->p2);
    free(s->p3);
    pthread_mutex_destroy(&s->p3_lock);
    free(s);
}

uint64_t sampler_size(const Sampler *s) { return s->size; }

// Copies n tokens of the epoch-shuffled stream F, from token position pos on, across document boundaries.
static void megatron_read_stream(const Sampler *s, uint64_t pos, uint64_t n, int32_t *out) {
    // Last document entry starting at or before pos (empty documents share their start with the next).
    uint64_t lo = 0, hi = s->num_docs; // doc_start[lo] <= pos < doc_start[hi]
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if ((uint64_t)s->doc_start[mid] <= pos) lo = mid;
        else hi = mid;
    }
    uint64_t k = lo, within = pos - (uint64_t)s->doc_start[k];
    while (n > 0) {
        if (k >= s->num_docs) die("Megatron sample reads past the end of its %llu-document index", (unsigned long long)s->num_docs);
        uint64_t seq = (uint64_t)s->doc_index[k];
        uint64_t len = indexed_seq_len(s->ds, seq);
        if (within < len) {
            uint64_t take = len - within < n ? len - within : n;
            indexed_read_tokens(s->ds, indexed_seq_offset(s->ds, seq) + within, take, out);
            out += take;
            n -= take;
        }
        k++;
        within = 0;
    }
}

static const int64_t *fla_epoch_perm(Sampler *s, uint64_t epoch) {
    if (!s->have_p3 || s->p3_epoch != epoch) {
        torch_randperm(s->p3, s->size, s->seed + epoch);
        s->p3_epoch = epoch;
        s->have_p3 = 1;
    }
    return s->p3;
}

void sampler_get(Sampler *s, uint64_t g, int32_t *inputs, int32_t *labels) {
    const int L = s->seq_length;
    if (s->order == ORDER_MEGATRON) {
        if (g >= s->size)
            die("sample position %llu is beyond the %llu samples Megatron's index holds for this run "
                "(open the sampler with a larger num_samples)",
                (unsigned long long)g, (unsigned long long)s->size);
        uint64_t start = (uint64_t)s->shuffle_index[g] * (uint64_t)L;
        megatron_read_stream(s, start, (uint64_t)L, inputs);
        memcpy(labels, inputs + 1, (size_t)(L - 1) * sizeof *labels);
        megatron_read_stream(s, start + (uint64_t)L, 1, labels + L - 1);
        return;
    }
    uint64_t N = s->size, epoch = g / N;
    pthread_mutex_lock(&s->p3_lock);
    uint64_t logical = (uint64_t)fla_epoch_perm(s, epoch)[g % N];
    pthread_mutex_unlock(&s->p3_lock);
    uint64_t chunk = (uint64_t)s->p2[logical];
    int p = 0;
    while (chunk >= s->part_start[p + 1]) p++;
    chunk -= s->part_start[p];
    indexed_read_tokens(s->part[p], indexed_seq_offset(s->part[p], chunk), (uint64_t)L, inputs);
    memcpy(labels, inputs + 1, (size_t)(L - 1) * sizeof *labels);
    labels[L - 1] = -1;
}

// Megatron "single" (MegatronPretrainingSampler): micro-batch m = step*n_mb + micro holds items
// m*G + rank*M + j, G = M*world. FLA (accelerate BatchSamplerShard): dataloader batch
// beta = (step*accum + micro)*world + rank holds positions beta*b + j. With b = M and accum = n_mb both
// are the same closed form; each step reads positions [step*GB, step*GB + GB) whatever the world size.
uint64_t sampler_position(const Sampler *s, uint64_t step, int micro, int rank, int j, int micro_batch_size,
                          int world, int global_batch_size) {
    (void)s;
    if (micro_batch_size < 1 || world < 1 || global_batch_size < 1 ||
        global_batch_size % (micro_batch_size * world) != 0)
        die("global batch size %d is not a multiple of micro batch size %d x world size %d", global_batch_size,
            micro_batch_size, world);
    int accum = global_batch_size / (micro_batch_size * world);
    if (micro < 0 || micro >= accum || rank < 0 || rank >= world || j < 0 || j >= micro_batch_size)
        die("sampler_position: micro-batch %d / rank %d / row %d out of range (%d micro-batches, %d ranks, %d rows)",
            micro, rank, j, accum, world, micro_batch_size);
    uint64_t batch = (step * (uint64_t)accum + (uint64_t)micro) * (uint64_t)world + (uint64_t)rank;
    return batch * (uint64_t)micro_batch_size + (uint64_t)j;
}

// Not in sampler.h: the index arrays, for tests/test_indexed.c to compare with the reference's.
void sampler_debug_arrays(const Sampler *s, const int64_t **doc_index, uint64_t *num_docs,
                          const int64_t **shuffle_index, const int64_t **p2) {
    *doc_index = s->doc_index;
    *num_docs = s->num_docs;
    *shuffle_index = s->shuffle_index;
    *p2 = s->p2;
}
