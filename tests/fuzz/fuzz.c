// fuzz.c: a deterministic mutation fuzzer for every file parser of gdn, built under ASan + UBSan by
// `make sanitize` (build-san/fuzz) and run by tests/t_fuzz.sh. Each iteration mutates a valid seed file
// (bit flips, interesting integers, inserted/deleted/duplicated ranges, truncation, format tokens such as
// "\u0000" or "-1e999" for the text formats), writes it to DIR, and hands it to the parser, which must
// return an error or a result, never crash: any sanitizer report aborts the process, so the test fails and
// DIR/input.* is the input that did it.
// Usage: fuzz KIND SEED DIR N [RNG]   KIND: st ckpt idx tok yaml parquet jsonl pt
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/indexed.h"
#include "data/parquet.h"
#include "data/textin.h"
#include "data/tokenizer.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "io/torch_pickle.h"
#include "model/config.h"
#include "model/params.h"
#include "util/common.h"

static uint64_t rng;
static uint64_t rnd(void) { // splitmix64
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static size_t below(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

static const char *const tokens[] = {"\\u0000", "\\ud800", "\"", "\\", "{", "}", "[", "]", ",", ":", "-1", "0",
                                     "1e999", "-1e999", "2147483647", "4294967296", "9223372036854775807",
                                     "18446744073709551616", "null", "true", "NaN", "\n", "\r\n", "- ", ": ", "&a",
                                     "*a", "!!binary", "...", "\xff\xfe", "\xc3", "\xf0\x9f\x98", "\t", "#"};

// Mutates b (n bytes, capacity cap) in place; returns the new length. text: also splice format tokens.
static size_t mutate(uint8_t *b, size_t n, size_t cap, int text) {
    int ops = below(2) ? 1 : 1 + (int)below(6); // half single edits: they get deeper into the format
    for (int o = 0; o < ops; o++) {
        int op = (int)below(text ? 9 : 8);
        size_t at = below(n + 1), len = 1 + below(16);
        switch (op) {
        case 0: if (n) b[below(n)] ^= (uint8_t)(1u << below(8)); break; // bit flip
        case 1: if (n) b[below(n)] = (uint8_t)rnd(); break;                // random byte
        case 2: { // interesting integer, little-endian, 1/2/4/8 bytes
            static const uint64_t v[] = {0, 1, 0x7f, 0x80, 0xff, 0x7fff, 0xffff, 0x7fffffff, 0x80000000u,
                                         0xffffffffu, 0x7fffffffffffffffull, ~0ull, 1ull << 40};
            uint64_t x = v[below(sizeof v / sizeof v[0])];
            size_t w = (size_t)1 << below(4);
            if (n >= w) memcpy(b + below(n - w + 1), &x, w);
            break;
        }
        case 3: if (at + len <= n) memmove(b + at, b + at + len, n - at - len), n -= len; break; // delete
        case 4: // insert random bytes
            if (n + len <= cap) {
                memmove(b + at + len, b + at, n - at);
                for (size_t i = 0; i < len; i++) b[at + i] = (uint8_t)rnd();
                n += len;
            }
            break;
        case 5: { // duplicate a range
            size_t from = below(n + 1);
            if (from + len <= n && n + len <= cap) {
                uint8_t tmp[16];
                memcpy(tmp, b + from, len);
                memmove(b + at + len, b + at, n - at);
                memcpy(b + at, tmp, len);
                n += len;
            }
            break;
        }
        case 6: n = below(n + 1); break; // truncate
        case 7: if (n) b[below(n)] = 0; break; // a NUL
        case 8: { // a format token
            const char *t = tokens[below(sizeof tokens / sizeof tokens[0])];
            size_t tl = strlen(t);
            if (n + tl <= cap) {
                if (below(2) && at + tl <= n) memcpy(b + at, t, tl); // overwrite
                else memmove(b + at + tl, b + at, n - at), memcpy(b + at, t, tl), n += tl;
            }
            break;
        }
        }
    }
    return n;
}

static void put(const char *path, const void *p, size_t n) {
    FILE *f = xfopen(path, "wb");
    if (n && fwrite(p, 1, n, f) != n) die("write %s", path);
    fclose(f);
}

// ---- one parser each: the parse result is used (every tensor, token, row touched), then freed
static int volatile sink;
static int run_st(const char *path) {
    StFile f;
    char err[ERR_LEN];
    if (st_open(&f, path, err, sizeof err)) return 0;
    for (int i = 0; i < f.ntensors; i++)
        for (size_t k = 0; k < f.tensors[i].nbytes; k += 61) sink += ((const uint8_t *)f.tensors[i].data)[k];
    for (int i = 0; i < f.nmeta; i++) sink += (int)strlen(f.meta_vals[i]);
    st_close(&f);
    return 1;
}
static ParamLayout ckpt_pl;
static int run_ckpt(const char *iter_dir) {
    char err[ERR_LEN];
    Config c;
    if (ckpt_read_config(iter_dir, &c, err, sizeof err)) return 0;
    config_validate(&c, err, sizeof err);
    float *p = xcalloc(ckpt_pl.total, sizeof(float));
    CkptState st;
    int has = 0, rc = ckpt_load(iter_dir, &ckpt_pl, p, NULL, NULL, &has, &st, err, sizeof err);
    free(p);
    return rc == 0;
}
static int run_idx(const char *prefix) {
    IndexedDataset ds;
    char err[ERR_LEN];
    if (indexed_open(&ds, prefix, err, sizeof err)) return 0;
    int32_t buf[64];
    for (uint64_t i = 0; i < ds.num_seqs && i < 64; i++) {
        uint64_t n = indexed_seq_len(&ds, i);
        indexed_read_tokens(&ds, indexed_seq_offset(&ds, i), n < 64 ? n : 64, buf);
        sink += buf[0];
    }
    for (uint64_t i = 0; i < ds.num_docs_entries && i < 64; i++) sink += (int)indexed_doc_index(&ds, i);
    indexed_close(&ds);
    return 1;
}
static int run_tok(const char *path) {
    char err[ERR_LEN];
    Tokenizer *t = tok_load(path, err, sizeof err);
    if (!t) return 0;
    static const char text[] = "Hello, world! 123 <|end_of_text|> caf\xc3\xa9 \xf0\x9f\x98\x80  \n\tx";
    int32_t *ids = NULL;
    size_t cap = 0, n = tok_encode(t, text, sizeof text - 1, 1, &ids, &cap), len;
    char *back = tok_decode(t, ids, n, 0, &len);
    sink += (int)len;
    free(back);
    free(ids);
    tok_free(t);
    return 1;
}
static int run_yaml(const char *path) {
    Config c;
    char err[ERR_LEN];
    config_defaults(&c);
    if (config_load_yaml(&c, path, err, sizeof err)) return 0;
    config_validate(&c, err, sizeof err);
    char *js = config_to_json(&c);
    Config c2;
    config_defaults(&c2);
    int rc = config_from_json(&c2, js, err, sizeof err);
    free(js);
    return rc == 0;
}
static int run_parquet(const char *path) {
    char err[ERR_LEN];
    int ok = 0;
    ParquetReader *r = parquet_open(path, "text", err, sizeof err);
    if (r) {
        const char *p;
        size_t len;
        int is_null, rc;
        for (int k = 0; k < 100000 && (rc = parquet_next(r, &p, &len, &is_null, err, sizeof err)) == 1; k++)
            if (len) sink += p[0] + p[len - 1];
        parquet_close(r);
        ok = 1;
    }
    ParquetTable *t = parquet_read_table(path, NULL, 0, err, sizeof err);
    if (t) {
        for (int64_t i = 0; i < parquet_table_num_rows(t) && i < 1000; i++) sink += parquet_table_row(t, i) != NULL;
        parquet_table_free(t);
        ok = 1;
    }
    return ok;
}
static int run_jsonl(const char *path) {
    char err[ERR_LEN];
    TextInOptions o = {"text", TEXT_MODE_LINE};
    TextInput *in = textin_open(path, &o, err, sizeof err);
    if (!in) return 0;
    TextRecord rec;
    Buf out = {0};
    int rc;
    while ((rc = textin_next(in, &rec, err, sizeof err)) == 1) {
        size_t bad = 0;
        out.n = 0;
        if (rec.is_json && textin_json_text(rec.p, rec.len, "text", &out, &bad, err, sizeof err) == 0 && out.n)
            sink += out.p[0];
    }
    buf_free(&out);
    textin_close(in);
    return rc == 0;
}
static int run_pt(const char *path) {
    TorchFile tf;
    char err[ERR_LEN];
    if (torch_load(&tf, path, err, sizeof err)) return 0;
    const PyVal *sd = py_dict_get(tf.root, "model");
    if (!sd) sd = tf.root;
    for (int i = 0; sd && i < sd->n; i++) {
        const PyVal *t = sd->items[i];
        if (!t || t->kind != PY_TENSOR) continue;
        uint64_t n = torch_tensor_numel(t);
        if (n > (1u << 22)) continue; // a mutated shape may claim terabytes; the bounds check is the point
        float *out = xmalloc((size_t)(n ? n : 1) * sizeof(float));
        torch_tensor_to_f32(&tf, t, out, err, sizeof err);
        free(out);
    }
    torch_close(&tf);
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 5) die("usage: fuzz KIND SEED DIR N [RNG]  (KIND: st ckpt idx tok yaml parquet jsonl pt)");
    const char *kind = argv[1], *seed = argv[2], *dir = argv[3];
    long iters = atol(argv[4]);
    rng = argc > 5 ? strtoull(argv[5], NULL, 0) : 0x243f6a8885a308d3ull;
    char err[ERR_LEN], path[1200], aux[1200];
    size_t n0;
    uint8_t *orig = (uint8_t *)read_file(seed, &n0, err, sizeof err);
    if (!orig) die("%s", err);
    int text = !strcmp(kind, "tok") || !strcmp(kind, "yaml") || !strcmp(kind, "jsonl") || !strcmp(kind, "ckpt");
    int (*fn)(const char *) = NULL;
    const char *name = "input";
    // ckpt: the safetensors header (metadata) is what is mutated; idx: the .bin stays the seed's
    size_t hdr_off = 0, hdr_len = n0;
    if (!strcmp(kind, "st")) fn = run_st, name = "input.safetensors";
    else if (!strcmp(kind, "tok")) fn = run_tok, name = "input.json";
    else if (!strcmp(kind, "yaml")) fn = run_yaml, name = "input.yaml";
    else if (!strcmp(kind, "parquet")) fn = run_parquet, name = "input.parquet";
    else if (!strcmp(kind, "jsonl")) fn = run_jsonl, name = "input.jsonl";
    else if (!strcmp(kind, "pt")) fn = run_pt, name = "input.pt";
    else if (!strcmp(kind, "idx")) {
        fn = run_idx, name = "input.idx";
        snprintf(aux, sizeof aux, "%.*s.bin", (int)(strlen(seed) - 4), seed); // SEED is PREFIX.idx
        size_t bl;
        char *bin = read_file(aux, &bl, err, sizeof err);
        if (!bin) die("%s", err);
        snprintf(path, sizeof path, "%s/input.bin", dir);
        put(path, bin, bl);
        free(bin);
    } else if (!strcmp(kind, "ckpt")) {
        fn = run_ckpt, name = "iter_0000001/model.safetensors";
        uint64_t hl;
        if (n0 < 8) die("%s: not a safetensors file", seed);
        memcpy(&hl, orig, 8);
        hdr_off = 8, hdr_len = (size_t)hl;
        snprintf(path, sizeof path, "%s/iter_0000001", dir);
        mkdir_p(path);
        snprintf(path, sizeof path, "%s/iter_0000001/DONE", dir);
        put(path, "iteration 1\n", 12);
        Config c;
        StFile f;
        if (st_open(&f, seed, err, sizeof err) || !st_meta(&f, "config")) die("%s: no config metadata", seed);
        config_defaults(&c);
        if (config_from_json(&c, st_meta(&f, "config"), err, sizeof err)) die("%s", err);
        st_close(&f);
        ModelDims d = config_dims(&c);
        params_layout(&ckpt_pl, &d);
    } else die("fuzz: unknown KIND '%s'", kind);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    const char *arg = path;
    char prefix[1200], iter_dir[1200];
    if (!strcmp(kind, "idx")) snprintf(prefix, sizeof prefix, "%s/input", dir), arg = prefix;
    if (!strcmp(kind, "ckpt")) snprintf(iter_dir, sizeof iter_dir, "%s/iter_0000001", dir), arg = iter_dir;

    put(path, orig, n0);
    if (!fn(arg)) die("fuzz %s: the seed %s itself is refused", kind, seed);
    size_t cap = n0 * 2 + 4096;
    uint8_t *b = xmalloc(cap), *part = xmalloc(cap);
    long accepted = 0;
    for (long it = 0; it < iters; it++) {
        size_t n;
        if (!strcmp(kind, "ckpt")) { // mutate the header JSON, keep the length field and the tensor bytes true
            memcpy(part, orig + hdr_off, hdr_len);
            size_t hn = mutate(part, hdr_len, cap - n0, text);
            uint64_t hl = hn;
            memcpy(b, &hl, 8);
            memcpy(b + 8, part, hn);
            memcpy(b + 8 + hn, orig + hdr_off + hdr_len, n0 - hdr_off - hdr_len);
            n = 8 + hn + (n0 - hdr_off - hdr_len);
        } else {
            memcpy(b, orig, n0);
            n = mutate(b, n0, cap, text);
        }
        put(path, b, n);
        accepted += fn(arg);
    }
    printf("fuzz %s: %ld mutated inputs of %s (%zu bytes), %ld accepted, the rest refused with an error; no crash\n",
           kind, iters, seed, n0, accepted);
    free(b), free(part), free(orig);
    if (ckpt_pl.total) params_layout_free(&ckpt_pl);
    return 0;
}
