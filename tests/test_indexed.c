// test_indexed.c: data/indexed.c and data/sampler.c.
//   1. .bin/.idx written by the C writer, read back field by field by an independent Python reader
//      (tests/dataset/oracle.py dump, written from spec data.md §2); files written by the Python writer
//      read by the C reader (also the convert_fla_to_megatron layout without the leading 0).
//   2. Writer hygiene: nothing at the final paths before finish, no temporaries after finish or abort,
//      out-of-range ids reported with the prefix, sequence and position.
//   3. Corrupt and truncated .idx/.bin files: indexed_open fails naming the file and the field.
//   4. Megatron order against data_rng_ref.megatron_gpt_indices (document_index, shuffle_index, every
//      sample's tokens) on small datasets incl. the spec's worked example; "single" loader positions
//      against a simulation of MegatronPretrainingSampler.
//   5. FLA order against hf_shuffle_permutation + torch_randperm of the reference over two epochs, the
//      spec's §4.2 end-to-end vector, and rank positions against a simulation of accelerate's
//      BatchSamplerShard for world sizes 1, 2, 4 with gradient accumulation.
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/indexed.h"
#include "data/sampler.h"
#include "util/common.h"

// Internal to data/sampler.c.
void sampler_debug_arrays(const Sampler *s, const int64_t **doc_index, uint64_t *num_docs,
                          const int64_t **shuffle_index, const int64_t **p2);

static int failures, checks;
static char tmpdir[256];

#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        checks++;                                                                                                      \
        if (!(cond)) {                                                                                                 \
            failures++;                                                                                                \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                                \
            printf(__VA_ARGS__);                                                                                       \
            putchar('\n');                                                                                             \
        }                                                                                                              \
    } while (0)

static const char *python(void) { return getenv("PYTHON") ? getenv("PYTHON") : "/usr/bin/python3"; }

// Runs tests/dataset/oracle.py with args and parses its JSON output.
static cJSON *oracle_json(const char *args) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s tests/dataset/oracle.py %s", python(), args);
    FILE *f = popen(cmd, "r");
    if (!f) die("cannot run %s", cmd);
    Buf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) buf_put(&b, chunk, n);
    int rc = pclose(f);
    if (rc != 0) die("'%s' failed (status %d)", cmd, rc);
    buf_put(&b, "", 1);
    cJSON *j = cJSON_Parse(b.p);
    if (!j) die("'%s' printed no valid JSON", cmd);
    buf_free(&b);
    return j;
}

static int64_t jint(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v)) die("oracle JSON: missing number '%s'", key);
    return (int64_t)v->valuedouble;
}
static const cJSON *jarr(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsArray(v)) die("oracle JSON: missing array '%s'", key);
    return v;
}
static int64_t jat(const cJSON *a, int i) { return (int64_t)cJSON_GetArrayItem(a, i)->valuedouble; }

static int count_temporaries(void) {
    DIR *d = opendir(tmpdir);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

static char *path_in_tmp(const char *name, const char *ext) {
    char *p = xmalloc(strlen(tmpdir) + strlen(name) + 16);
    sprintf(p, "%s/%s%s", tmpdir, name, ext);
    return p;
}

// ---------------------------------------------------------------- 1, 2: writer -> Python reader

static uint32_t lcg(uint32_t *s) { return *s = *s * 1664525u + 1013904223u; }

static void writer_roundtrip(int dtype, int nseq, uint32_t seed) {
    char name[64];
    snprintf(name, sizeof name, "w_%d_%d", dtype, nseq);
    char *prefix = path_in_tmp(name, ""), *bin = path_in_tmp(name, ".bin"), *idx = path_in_tmp(name, ".idx");
    char err[ERR_LEN];
    IndexedWriter *w = indexed_writer_open(prefix, dtype, err, sizeof err);
    if (!w) die("%s", err);
    // Keep what was written, to compare with what the Python reader finds.
    int32_t *lens = xmalloc((size_t)(nseq + 1) * sizeof *lens);
    int64_t *docs = xmalloc((size_t)(nseq + 2) * sizeof *docs);
    int ndocs = 0;
    docs[ndocs++] = 0;
    Buf toks = {0};
    int32_t ids[300];
    for (int i = 0; i < nseq; i++) {
        int len = (int)(lcg(&seed) % 7 == 0 ? 0 : lcg(&seed) % 300);
        for (int k = 0; k < len; k++)
            ids[k] = dtype == 8 ? (int32_t)(lcg(&seed) % 65536) : (int32_t)lcg(&seed); // int32: any value
        CHECK(indexed_writer_add_seq(w, ids, (size_t)len) == 0, "add_seq %d", i);
        buf_put(&toks, ids, (size_t)len * sizeof *ids);
        lens[i] = len;
        if (lcg(&seed) % 3 == 0 || i == nseq - 1) {
            CHECK(indexed_writer_end_doc(w) == 0, "end_doc");
            docs[ndocs++] = i + 1;
        }
    }
    CHECK(!file_exists(bin) && !file_exists(idx), "%s: final files exist before finish", prefix);
    CHECK(count_temporaries() == 1, "%s: expected the .bin temporary while writing, found %d", prefix, count_temporaries());
    CHECK(indexed_writer_finish(w, err, sizeof err) == 0, "finish: %s", err);
    CHECK(count_temporaries() == 0, "%s: temporaries left after finish", prefix);

    char args[512];
    snprintf(args, sizeof args, "dump %s", prefix);
    cJSON *j = oracle_json(args);
    CHECK(jint(j, "version") == 1, "version");
    CHECK(jint(j, "dtype") == dtype, "dtype %" PRId64, jint(j, "dtype"));
    CHECK(jint(j, "S") == nseq, "S = %" PRId64 ", wrote %d", jint(j, "S"), nseq);
    CHECK(jint(j, "Dc") == ndocs, "Dc = %" PRId64 ", wrote %d", jint(j, "Dc"), ndocs);
    CHECK(jint(j, "trailing") == 0, "bytes after document_indices");
    const cJSON *jl = jarr(j, "lengths"), *jp = jarr(j, "pointers"), *jd = jarr(j, "doc_indices"), *jt = jarr(j, "tokens");
    int itemsize = dtype == 8 ? 2 : 4;
    int64_t pos = 0, bad = -1;
    const int32_t *all = (const int32_t *)toks.p;
    for (int i = 0; i < nseq && bad < 0; i++) {
        if (jat(jl, i) != lens[i] || jat(jp, i) != pos * itemsize) bad = i;
        const cJSON *seq = cJSON_GetArrayItem(jt, i);
        for (int k = 0; k < lens[i] && bad < 0; k++)
            if (jat(seq, k) != all[pos + k]) bad = i;
        pos += lens[i];
    }
    CHECK(bad < 0, "%s: sequence %" PRId64 " differs (length, pointer or tokens) in the Python reader's view", prefix, bad);
    for (int d = 0; d < ndocs; d++) CHECK(jat(jd, d) == docs[d], "document_indices[%d]", d);
    CHECK(jint(j, "bin_size") == pos * itemsize, ".bin size");
    cJSON_Delete(j);
    printf("writer dtype %d, %d sequences, %d document entries: every field read back by the Python reader\n", dtype,
           nseq, ndocs);
    free(lens); free(docs); buf_free(&toks); free(prefix); free(bin); free(idx);
}

static void writer_errors(void) {
    char *prefix = path_in_tmp("w_err", ""), *bin = path_in_tmp("w_err", ".bin"), *idx = path_in_tmp("w_err", ".idx");
    char err[ERR_LEN] = "";
    // Out-of-range id for uint16: add fails, finish reports it and leaves nothing behind.
    IndexedWriter *w = indexed_writer_open(prefix, 8, err, sizeof err);
    int32_t ids[3] = {5, 70000, 6};
    CHECK(indexed_writer_add_seq(w, ids, 1) == 0, "first add");
    CHECK(indexed_writer_add_seq(w, ids, 3) == -1, "id 70000 accepted for uint16");
    CHECK(indexed_writer_finish(w, err, sizeof err) == -1, "finish after a failed add succeeded");
    CHECK(strstr(err, prefix) && strstr(err, "70000") && strstr(err, "sequence 1") && strstr(err, "position 1"),
          "error names prefix, id, sequence and position: %s", err);
    CHECK(!file_exists(bin) && !file_exists(idx) && count_temporaries() == 0, "files left after failed finish");
    // Abort removes the temporary.
    w = indexed_writer_open(prefix, 4, err, sizeof err);
    CHECK(indexed_writer_add_seq(w, ids, 3) == 0, "add");
    indexed_writer_abort(w);
    CHECK(!file_exists(bin) && !file_exists(idx) && count_temporaries() == 0, "files left after abort");
    // Float dtypes are not token types.
    CHECK(indexed_writer_open(prefix, 7, err, sizeof err) == NULL && strstr(err, "dtype code 7"), "float32 writer: %s", err);
    // An empty dataset is valid: S = 0, document_indices = [0].
    w = indexed_writer_open(prefix, 4, err, sizeof err);
    CHECK(indexed_writer_finish(w, err, sizeof err) == 0, "empty finish: %s", err);
    IndexedDataset ds;
    CHECK(indexed_open(&ds, prefix, err, sizeof err) == 0, "empty open: %s", err);
    CHECK(ds.num_seqs == 0 && ds.num_docs_entries == 1 && ds.total_tokens == 0, "empty dataset fields");
    indexed_close(&ds);
    // Trailing sequences without end_doc still form a last document.
    w = indexed_writer_open(prefix, 4, err, sizeof err);
    indexed_writer_add_seq(w, ids, 1);
    indexed_writer_end_doc(w);
    indexed_writer_add_seq(w, ids, 1);
    indexed_writer_add_seq(w, ids, 1);
    CHECK(indexed_writer_finish(w, err, sizeof err) == 0, "finish: %s", err);
    CHECK(indexed_open(&ds, prefix, err, sizeof err) == 0, "open: %s", err);
    CHECK(ds.num_docs_entries == 3 && indexed_doc_index(&ds, 1) == 1 && indexed_doc_index(&ds, 2) == 3,
          "document_indices [0,1,3] after an unterminated last document");
    indexed_close(&ds);
    printf("writer errors: bad id, abort, float dtype, empty dataset, unterminated last document\n");
    free(prefix); free(bin); free(idx);
}

// ---------------------------------------------------------------- 1: Python writer -> C reader

static void reader_from_python(int dtype, int nseq, int seed, int leading_zero) {
    char name[64], args[512];
    snprintf(name, sizeof name, "py_%d_%d_%d", dtype, nseq, leading_zero);
    char *prefix = path_in_tmp(name, "");
    snprintf(args, sizeof args, "write %s %d %d %d%s", prefix, dtype, seed, nseq, leading_zero ? "" : " --no-leading-zero");
    cJSON *j = oracle_json(args);
    IndexedDataset ds;
    char err[ERR_LEN];
    if (indexed_open(&ds, prefix, err, sizeof err) != 0) {
        CHECK(0, "C reader rejects the Python-written %s: %s", prefix, err);
        cJSON_Delete(j);
        free(prefix);
        return;
    }
    CHECK(ds.dtype_code == dtype, "dtype_code %d", ds.dtype_code);
    CHECK((int64_t)ds.num_seqs == jint(j, "S"), "num_seqs");
    CHECK((int64_t)ds.num_docs_entries == jint(j, "Dc"), "num_docs_entries");
    CHECK(ds.idx_size == (size_t)jint(j, "idx_size") && ds.bin_size == (size_t)jint(j, "bin_size"), "file sizes");
    const cJSON *jl = jarr(j, "lengths"), *jp = jarr(j, "pointers"), *jd = jarr(j, "doc_indices"), *jt = jarr(j, "tokens");
    int64_t bad = -1;
    uint64_t total = 0;
    int32_t buf[128];
    for (int i = 0; i < nseq && bad < 0; i++) {
        uint32_t len = indexed_seq_len(&ds, (uint64_t)i);
        if ((int64_t)len != jat(jl, i) || (int64_t)(indexed_seq_offset(&ds, (uint64_t)i) * (uint64_t)ds.itemsize) != jat(jp, i))
            bad = i;
        if (len > 128) die("test sequence too long");
        indexed_read_tokens(&ds, indexed_seq_offset(&ds, (uint64_t)i), len, buf);
        const cJSON *seq = cJSON_GetArrayItem(jt, i);
        for (uint32_t k = 0; k < len && bad < 0; k++)
            if (buf[k] != jat(seq, (int)k)) bad = i;
        total += len;
    }
    CHECK(bad < 0, "%s: sequence %" PRId64 " differs from the Python writer's", prefix, bad);
    CHECK(ds.total_tokens == total, "total_tokens");
    for (int d = 0; d < (int)ds.num_docs_entries; d++) CHECK(indexed_doc_index(&ds, (uint64_t)d) == jat(jd, d), "doc %d", d);
    // A read across sequence boundaries equals the concatenation.
    if (total >= 40) {
        int32_t span[40];
        indexed_read_tokens(&ds, total - 40, 40, span);
        int64_t k = 39;
        for (int i = nseq - 1; i >= 0 && k >= 0; i--) {
            const cJSON *seq = cJSON_GetArrayItem(jt, i);
            for (int t = cJSON_GetArraySize(seq) - 1; t >= 0 && k >= 0; t--, k--)
                CHECK(span[k] == jat(seq, t), "read_tokens across sequences at %" PRId64, k);
        }
    }
    indexed_close(&ds);
    cJSON_Delete(j);
    printf("reader: Python-written dtype %d, %d sequences%s: every field and token matches\n", dtype, nseq,
           leading_zero ? "" : ", document_indices without the leading 0");
    free(prefix);
}

// ---------------------------------------------------------------- 3: corrupt files

static void put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

static void corrupt_case(const char *label, const uint8_t *idx, size_t idx_n, const uint8_t *bin, size_t bin_n,
                         const char *expect_file, const char *expect_field) {
    static int counter;
    char name[64];
    snprintf(name, sizeof name, "bad%d", counter++);
    char *prefix = path_in_tmp(name, ""), *ip = path_in_tmp(name, ".idx"), *bp = path_in_tmp(name, ".bin");
    char err[ERR_LEN] = "";
    if (idx) write_file_atomic(ip, idx, idx_n, err, sizeof err);
    if (bin) write_file_atomic(bp, bin, bin_n, err, sizeof err);
    IndexedDataset ds;
    int rc = indexed_open(&ds, prefix, err, sizeof err);
    char want_file[400];
    snprintf(want_file, sizeof want_file, "%s/%s%s", tmpdir, name, expect_file);
    CHECK(rc == -1, "%s: corrupt dataset opened", label);
    CHECK(rc == -1 && strstr(err, want_file) && strstr(err, expect_field), "%s: error should name %s and '%s': %s",
          label, want_file, expect_field, err);
    if (rc == 0) indexed_close(&ds);
    if (rc == -1) printf("  %-28s -> %s\n", label, err);
    free(prefix); free(ip); free(bp);
}

static void corrupt_files(void) {
    // A valid base: 3 sequences [2, 0, 3] tokens, documents [0, 2, 3], int32.
    char *prefix = path_in_tmp("base", ""), *ip = path_in_tmp("base", ".idx"), *bp = path_in_tmp("base", ".bin");
    char err[ERR_LEN];
    IndexedWriter *w = indexed_writer_open(prefix, 4, err, sizeof err);
    int32_t ids[3] = {7, 8, 9};
    indexed_writer_add_seq(w, ids, 2);
    indexed_writer_add_seq(w, ids, 0);
    indexed_writer_end_doc(w);
    indexed_writer_add_seq(w, ids, 3);
    indexed_writer_end_doc(w);
    if (indexed_writer_finish(w, err, sizeof err)) die("%s", err);
    size_t in, bn;
    uint8_t *idx = (uint8_t *)read_file(ip, &in, err, sizeof err), *bin = (uint8_t *)read_file(bp, &bn, err, sizeof err);
    CHECK(in == 34 + 12 * 3 + 8 * 3 && bn == 5 * 4, "base sizes %zu %zu", in, bn);
    uint8_t *m = xcalloc(in + 16, 1);
    const size_t LEN = 34, PTR = 34 + 12, DOC = 34 + 36;
#define MUT(label, file, field, stmt, idx_len, bin_len)                                                                \
    do {                                                                                                               \
        memcpy(m, idx, in);                                                                                            \
        stmt;                                                                                                          \
        corrupt_case(label, m, idx_len, bin, bin_len, file, field);                                                    \
    } while (0)
    printf("corrupt files (each must fail naming the file and field):\n");
    MUT("truncated header", ".idx", "header", (void)0, 20, bn);
    MUT("empty .idx", ".idx", "header", (void)0, 0, bn);
    MUT("bad magic", ".idx", "magic", m[3] = 'X', in, bn);
    MUT("version 2", ".idx", "version", put_u64(m + 9, 2), in, bn);
    MUT("dtype 9", ".idx", "dtype code", m[17] = 9, in, bn);
    MUT("dtype float32", ".idx", "not an integer token type", m[17] = 7, in, bn);
    MUT("huge sequence_count", ".idx", "sequence_count", put_u64(m + 18, 1ull << 62), in, bn);
    MUT("huge document_count", ".idx", "document_count", put_u64(m + 26, 1ull << 61), in, bn);
    MUT("truncated document_indices", ".idx", "document_count", (void)0, in - 8, bn);
    MUT("trailing garbage", ".idx", "expected", (void)0, in + 5, bn);
    MUT("negative length", ".idx", "sequence_lengths[1]", memcpy(m + LEN + 4, &(int32_t){-1}, 4), in, bn);
    MUT("pointer mismatch", ".idx", "sequence_pointers[2]", put_u64(m + PTR + 16, 4), in, bn);
    MUT("decreasing documents", ".idx", "document_indices[2]", put_u64(m + DOC + 16, 1), in, bn);
    MUT("document past S", ".idx", "document_indices[1]", put_u64(m + DOC + 8, 4), in, bn);
    MUT("last document != S", ".idx", "last document_indices", put_u64(m + DOC + 16, 2), in, bn);
    MUT("no documents with sequences", ".idx", "document_count is 0",
        put_u64(m + 26, 0), in - 24, bn);
    MUT(".bin one token short", ".bin", "5 tokens", (void)0, in, bn - 4);
    MUT(".bin one byte long", ".bin", "20 bytes", (void)0, in, bn + 1);
    memcpy(m, idx, in);
    corrupt_case("missing .bin", m, in, NULL, 0, ".bin", "cannot open");
    corrupt_case("missing .idx", NULL, 0, bin, bn, ".idx", "cannot open");
#undef MUT
    // The untouched base still opens.
    IndexedDataset ds;
    CHECK(indexed_open(&ds, prefix, err, sizeof err) == 0, "base: %s", err);
    indexed_close(&ds);
    free(m); free(idx); free(bin); free(prefix); free(ip); free(bp);
}

// ---------------------------------------------------------------- 4: Megatron order

static void check_positions(Sampler *s, const cJSON *layouts, int fla, int64_t (*chunk_of)(Sampler *, uint64_t, int),
                            int L) {
    cJSON *lay;
    cJSON_ArrayForEach(lay, layouts) {
        int M = (int)jint(lay, "M"), W = (int)jint(lay, "W"), G = (int)jint(lay, "G");
        const cJSON *exp = jarr(lay, "expect");
        int n = cJSON_GetArraySize(exp), bad = 0;
        for (int e = 0; e < n && !bad; e++) {
            const cJSON *row = cJSON_GetArrayItem(exp, e);
            uint64_t t = (uint64_t)jat(row, 0);
            int r = (int)jat(row, 1), mu = (int)jat(row, 2), j = (int)jat(row, 3);
            uint64_t g = sampler_position(s, t, mu, r, j, M, W, G);
            int64_t want = jat(row, 4), got = fla ? chunk_of(s, g, L) : (int64_t)g;
            if (got != want) {
                bad = 1;
                CHECK(0, "%s M=%d W=%d G=%d step %" PRIu64 " rank %d micro %d row %d: got %" PRId64 ", simulation says %" PRId64,
                      fla ? "FLA" : "Megatron", M, W, G, t, r, mu, j, got, want);
            }
        }
        if (n == 0) continue; // a step larger than the dataset: nothing to compare
        checks++;
        printf("  %s positions M=%d W=%d G=%d: %d rows match the loader simulation\n", fla ? "FLA" : "Megatron", M, W,
               G, n);
    }
}

static void megatron_orders(void) {
    char args[512];
    snprintf(args, sizeof args, "megatron %s", tmpdir);
    cJSON *j = oracle_json(args);
    cJSON *c;
    int ncases = 0;
    cJSON_ArrayForEach(c, jarr(j, "cases")) {
        const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
        const char *prefix = cJSON_GetObjectItem(c, "prefix")->valuestring;
        int L = (int)jint(c, "L");
        IndexedDataset ds;
        char err[ERR_LEN];
        if (indexed_open(&ds, prefix, err, sizeof err)) die("%s", err);
        Sampler *s = sampler_open(&ds, ORDER_MEGATRON, L, (uint64_t)jint(c, "num_samples"), (uint64_t)jint(c, "seed"), err, sizeof err);
        if (!s) die("%s: %s", name, err);
        uint64_t S = sampler_size(s);
        CHECK((int64_t)S == jint(c, "S"), "%s: S = %" PRIu64 ", reference %" PRId64, name, S, jint(c, "S"));
        const int64_t *doc, *shuf, *p2;
        uint64_t ndoc;
        sampler_debug_arrays(s, &doc, &ndoc, &shuf, &p2);
        const cJSON *jd = jarr(c, "document_index"), *js = jarr(c, "shuffle_index"), *ji = jarr(c, "items");
        CHECK((int)ndoc == cJSON_GetArraySize(jd), "%s: document_index length", name);
        int bad = -1;
        for (int k = 0; k < cJSON_GetArraySize(jd) && k < (int)ndoc && bad < 0; k++) if (doc[k] != jat(jd, k)) bad = k;
        CHECK(bad < 0, "%s: document_index[%d] differs from the reference", name, bad);
        bad = -1;
        for (int k = 0; k < (int)S && k < cJSON_GetArraySize(js) && bad < 0; k++) if (shuf[k] != jat(js, k)) bad = k;
        CHECK(bad < 0, "%s: shuffle_index[%d] differs from the reference", name, bad);
        int32_t *in = xmalloc((size_t)L * 4), *lab = xmalloc((size_t)L * 4);
        bad = -1;
        for (uint64_t i = 0; i < S && bad < 0; i++) {
            sampler_get(s, i, in, lab);
            const cJSON *it = cJSON_GetArrayItem(ji, (int)i);
            for (int t = 0; t < L; t++)
                if (in[t] != jat(it, t) || lab[t] != jat(it, t + 1)) bad = (int)i;
        }
        CHECK(bad < 0, "%s: item %d tokens differ from F[k*L, k*L+L+1) of the reference", name, bad);
        if (!strcmp(name, "worked")) { // spec data.md §3.1 worked example, as printed in the spec
            int64_t want_doc[8] = {1, 3, 0, 2, 1, 3, 0, 2}, want_shuf[8] = {3, 0, 1, 2, 5, 4, 7, 6};
            int32_t want_items[3][5] = {{202, 203, 204, 205, 206}, {100, 101, 102, 300, 301}, {301, 0, 1, 2, 3}};
            CHECK(S == 8 && ndoc == 8 && !memcmp(doc, want_doc, sizeof want_doc) && !memcmp(shuf, want_shuf, sizeof want_shuf),
                  "spec worked example: S, document_index, shuffle_index");
            for (int i = 0; i < 3; i++) {
                sampler_get(s, (uint64_t)i, in, lab);
                CHECK(!memcmp(in, want_items[i], 16) && lab[3] == want_items[i][4] && !memcmp(lab, want_items[i] + 1, 12),
                      "spec worked example item %d", i);
            }
        }
        printf("Megatron %-22s L=%-3d num_samples=%-4" PRId64 " S=%-4" PRIu64 " epochs=%" PRIu64
               ": document_index, shuffle_index and all items match the reference\n",
               name, L, jint(c, "num_samples"), S, ndoc / ds.num_seqs);
        check_positions(s, jarr(c, "positions"), 0, NULL, L);
        free(in); free(lab);
        sampler_free(s);
        indexed_close(&ds);
        ncases++;
    }
    CHECK(ncases >= 8, "only %d Megatron cases", ncases);
    cJSON_Delete(j);
}

// ---------------------------------------------------------------- 5: FLA order

// Chunk c of the FLA test datasets holds tokens 1000*c + t.
static int64_t fla_chunk_at(Sampler *s, uint64_t g, int L) {
    int32_t in[64], lab[64];
    if (L > 64) die("test L too large");
    sampler_get(s, g, in, lab);
    return in[0] / 1000;
}

static void fla_orders(void) {
    char args[512];
    snprintf(args, sizeof args, "fla %s", tmpdir);
    cJSON *j = oracle_json(args);
    cJSON *c;
    int ncases = 0;
    cJSON_ArrayForEach(c, jarr(j, "cases")) {
        const char *prefix = cJSON_GetObjectItem(c, "prefix")->valuestring;
        int L = (int)jint(c, "L"), N = (int)jint(c, "N");
        uint64_t seed = (uint64_t)jint(c, "seed");
        IndexedDataset ds;
        char err[ERR_LEN];
        if (indexed_open(&ds, prefix, err, sizeof err)) die("%s", err);
        Sampler *s = sampler_open(&ds, ORDER_FLA, L, 0, seed, err, sizeof err);
        if (!s) die("%s: %s", prefix, err);
        CHECK((int)sampler_size(s) == N, "FLA size");
        const int64_t *doc, *shuf, *p2;
        uint64_t ndoc;
        sampler_debug_arrays(s, &doc, &ndoc, &shuf, &p2);
        const cJSON *jp2 = jarr(c, "p2"), *jc = jarr(c, "chunk_at");
        int bad = -1;
        for (int k = 0; k < N && bad < 0; k++) if (p2[k] != jat(jp2, k)) bad = k;
        CHECK(bad < 0, "FLA N=%d: p2[%d] differs from hf_shuffle_permutation", N, bad);
        int32_t in[64], lab[64];
        bad = -1;
        // Positions in a scrambled order, so that epoch switches back and forth are exercised.
        int G = cJSON_GetArraySize(jc);
        for (int q = 0; q < G && bad < 0; q++) {
            int g = (int)(((int64_t)q * 7919) % G);
            sampler_get(s, (uint64_t)g, in, lab);
            int64_t chunk = jat(jc, g);
            for (int t = 0; t < L; t++)
                if (in[t] != 1000 * chunk + t || lab[t] != (t + 1 < L ? in[t + 1] : -1)) bad = g;
        }
        CHECK(bad < 0, "FLA N=%d seed %" PRIu64 ": position %d has the wrong chunk or labels", N, seed, bad);
        printf("FLA N=%-3d L=%d seed=%-2" PRIu64 ": p2 and %d positions over 3 epochs match the reference (labels shifted, last -1)\n",
               N, L, seed, G);
        const cJSON *lays = jarr(c, "positions");
        check_positions(s, lays, 1, fla_chunk_at, L);
        // Any world size: each step reads positions [t*GB, t*GB+GB) exactly once, hence the same chunk set.
        cJSON *lay;
        cJSON_ArrayForEach(lay, lays) {
            int M = (int)jint(lay, "M"), W = (int)jint(lay, "W"), GB = (int)jint(lay, "G");
            for (uint64_t t = 0; t < 3; t++) {
                char *seen = xcalloc((size_t)GB, 1);
                int ok = 1;
                for (int r = 0; r < W; r++)
                    for (int mu = 0; mu < GB / (M * W); mu++)
                        for (int jj = 0; jj < M; jj++) {
                            uint64_t g = sampler_position(s, t, mu, r, jj, M, W, GB);
                            if (g < t * (uint64_t)GB || g >= (t + 1) * (uint64_t)GB || seen[g - t * (uint64_t)GB]++) ok = 0;
                        }
                CHECK(ok, "FLA M=%d W=%d GB=%d step %" PRIu64 ": positions are not [t*GB, t*GB+GB) once each", M, W, GB, t);
                free(seen);
            }
        }
        if (N == 10 && seed == 42) { // spec data.md §4.2.6
            int want0[2][2] = {{0, 4}, {6, 1}};
            for (int r = 0; r < 2; r++)
                for (int jj = 0; jj < 2; jj++)
                    CHECK(fla_chunk_at(s, sampler_position(s, 0, 0, r, jj, 2, 2, 4), L) == want0[r][jj],
                          "spec §4.2.6: step 0 rank %d row %d", r, jj);
            int got1[4], k = 0, want1[4] = {2, 3, 5, 8};
            for (int r = 0; r < 2; r++)
                for (int jj = 0; jj < 2; jj++) got1[k++] = (int)fla_chunk_at(s, sampler_position(s, 1, 0, r, jj, 2, 2, 4), L);
            for (int a = 0; a < 4; a++) // sort
                for (int b = a + 1; b < 4; b++)
                    if (got1[b] < got1[a]) { int tmp = got1[a]; got1[a] = got1[b]; got1[b] = tmp; }
            CHECK(!memcmp(got1, want1, sizeof want1), "spec §4.2.6: step 1 set {C3,C2,C5,C8}");
            printf("  spec §4.2.6 end-to-end vector: step 0 rank0 [C0,C4] rank1 [C6,C1], step 1 {C2,C3,C5,C8}\n");
        }
        sampler_free(s);
        indexed_close(&ds);
        ncases++;
    }
    CHECK(ncases == 3, "FLA cases: %d", ncases);
    cJSON_Delete(j);
}

static void sampler_errors(void) {
    char *prefix = path_in_tmp("uneven", "");
    char err[ERR_LEN];
    IndexedWriter *w = indexed_writer_open(prefix, 4, err, sizeof err);
    int32_t ids[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    indexed_writer_add_seq(w, ids, 4);
    indexed_writer_add_seq(w, ids, 3);
    indexed_writer_finish(w, err, sizeof err);
    IndexedDataset ds;
    if (indexed_open(&ds, prefix, err, sizeof err)) die("%s", err);
    err[0] = 0;
    CHECK(!sampler_open(&ds, ORDER_FLA, 4, 0, 42, err, sizeof err) && strstr(err, "sequence 1 has 3"), "FLA uneven: %s", err);
    err[0] = 0;
    CHECK(!sampler_open(&ds, ORDER_MEGATRON, 7, 0, 42, err, sizeof err) && strstr(err, "fewer than one sample"),
          "Megatron short: %s", err);
    err[0] = 0;
    CHECK(!sampler_open(&ds, ORDER_MEGATRON, 2, 0, 1ull << 32, err, sizeof err) && strstr(err, "seed"), "Megatron seed: %s", err);
    Sampler *s = sampler_open(&ds, ORDER_MEGATRON, 6, 0, 42, err, sizeof err); // 7 tokens: exactly one sample
    CHECK(s && sampler_size(s) == 1, "Megatron one sample of 6+1 tokens from 7");
    sampler_free(s);
    indexed_close(&ds);
    printf("sampler errors: FLA uneven chunks, Megatron too short, Megatron 64-bit seed\n");
    free(prefix);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/gdn_test_indexed.XXXXXX");
    if (!mkdtemp(tmpdir)) die("mkdtemp failed");
    writer_roundtrip(4, 200, 1);
    writer_roundtrip(8, 150, 2);
    writer_roundtrip(4, 1, 3);
    writer_errors();
    reader_from_python(4, 60, 11, 1);
    reader_from_python(8, 60, 12, 1);
    reader_from_python(4, 60, 13, 0);
    reader_from_python(1, 30, 14, 1);
    reader_from_python(2, 30, 15, 1);
    reader_from_python(3, 30, 16, 1);
    reader_from_python(5, 30, 17, 0);
    reader_from_python(4, 0, 18, 1);
    corrupt_files();
    megatron_orders();
    fla_orders();
    sampler_errors();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (failures == 0 && system(cmd) != 0) printf("warning: could not remove %s\n", tmpdir);
    printf("%d checks, %d failures%s\n", checks, failures, failures ? " (files kept in the temp dir)" : "");
    return failures ? 1 : 0;
}
