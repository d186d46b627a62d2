// test_safetensors.c: the safetensors reader/writer.
//  1. C round trip of every dtype, shapes incl. scalar/empty, metadata with characters JSON must escape.
//  2. A file written by Python from torch tensors' bytes reads back equal (tests/convert/st_interop.py).
//  3. fp32 stored as BF16/F16 by the writer equals torch's own rounding of the same values (checked in Python).
//  4. Corrupt files (truncated, header length too big, bad JSON, bad dtype, overlapping/gapped offsets,
//     duplicates, span/shape mismatch, ...) give an error naming the problem, never a crash.
//     tests/t_convert_st_asan.sh runs this binary's corrupt cases under AddressSanitizer with random mutations.
// Usage: test_safetensors [--no-python] [--fuzz N]
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "util/common.h"

#include "check.h"

static char dir[256];

static void path_in(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", dir, name); }

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_u64(void) { // splitmix64
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// ---- 1. round trip ------------------------------------------------------------------------------
static void test_round_trip(void) {
    char p[512];
    path_in(p, sizeof p, "rt.safetensors");
    float f32[6] = {1.5f, -2.25f, 0.f, -0.f, INFINITY, 1e-42f};
    uint16_t bf16[4] = {0x3f80, 0xbf80, 0x7f80, 0x0001};
    uint16_t f16[3] = {0x3c00, 0xfc00, 0x0001};
    int32_t i32[2] = {INT32_MIN, INT32_MAX};
    int64_t i64[3] = {INT64_MIN, 0, INT64_MAX};
    uint8_t u8[5] = {0, 1, 127, 128, 255};
    double f64[2] = {M_PI, -1e300};
    int64_t s23[2] = {2, 3}, s4[1] = {4}, s3[1] = {3}, s2[1] = {2}, s5[1] = {5}, s221[3] = {2, 2, 1}, s0[2] = {0, 7};
    StWriter *w = st_writer_new();
    st_writer_meta(w, "format", "test");
    st_writer_meta(w, "tricky", "quote \" backslash \\ newline \n tab \t ctrl \x01 utf8 \xc3\xa9");
    st_writer_add(w, "a.f32", ST_F32, 2, s23, f32);
    st_writer_add(w, "b.bf16", ST_BF16, 1, s4, bf16);
    st_writer_add(w, "c.f16", ST_F16, 1, s3, f16);
    st_writer_add(w, "d.i32", ST_I32, 1, s2, i32);
    st_writer_add(w, "e.i64", ST_I64, 1, s3, i64);
    st_writer_add(w, "f.u8", ST_U8, 1, s5, u8);
    st_writer_add(w, "g.f64", ST_F64, 1, s2, f64);
    st_writer_add(w, "h.scalar", ST_F32, 0, NULL, f32);
    st_writer_add(w, "i.empty", ST_F32, 2, s0, NULL);
    st_writer_add(w, "j.\"quoted\"", ST_U8, 3, s221, u8);
    st_writer_meta(w, "format", "test2"); // a repeated key overrides
    char err[ERR_LEN] = "";
    CHECK(st_writer_save(w, p, err, sizeof err) == 0, "save: %s", err);
    st_writer_free(w);

    StFile f;
    CHECK(st_open(&f, p, err, sizeof err) == 0, "open: %s", err);
    if (!f.map) return;
    CHECK(f.ntensors == 10, "ntensors %d", f.ntensors);
    CHECK(f.nmeta == 2, "nmeta %d", f.nmeta);
    CHECK(st_meta(&f, "format") && !strcmp(st_meta(&f, "format"), "test2"), "meta format");
    CHECK(st_meta(&f, "tricky") &&
              !strcmp(st_meta(&f, "tricky"), "quote \" backslash \\ newline \n tab \t ctrl \x01 utf8 \xc3\xa9"),
          "meta escaping");
    CHECK(st_meta(&f, "absent") == NULL, "absent meta");
    CHECK(st_find(&f, "absent") == NULL, "absent tensor");
    // header: length multiple of 8, padded with spaces; data contiguous in insertion order
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | f.map[i];
    CHECK(hlen % 8 == 0, "header length %llu not a multiple of 8", (unsigned long long)hlen);
    struct {
        const char *name;
        StDtype dt;
        int nd;
        int64_t s0;
        const void *data;
        size_t nb;
    } want[] = {
        {"a.f32", ST_F32, 2, 2, f32, sizeof f32}, {"b.bf16", ST_BF16, 1, 4, bf16, sizeof bf16},
        {"c.f16", ST_F16, 1, 3, f16, sizeof f16}, {"d.i32", ST_I32, 1, 2, i32, sizeof i32},
        {"e.i64", ST_I64, 1, 3, i64, sizeof i64}, {"f.u8", ST_U8, 1, 5, u8, sizeof u8},
        {"g.f64", ST_F64, 1, 2, f64, sizeof f64}, {"h.scalar", ST_F32, 0, 0, f32, 4},
        {"i.empty", ST_F32, 2, 0, NULL, 0},       {"j.\"quoted\"", ST_U8, 3, 2, u8, 4},
    };
    const uint8_t *expect_at = f.map + 8 + hlen;
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        const StTensor *t = st_find(&f, want[i].name);
        CHECK(t != NULL, "tensor %s missing", want[i].name);
        if (!t) continue;
        CHECK(t == &f.tensors[i], "%s not in insertion order", want[i].name);
        CHECK(t->dtype == want[i].dt, "%s dtype %s", want[i].name, st_dtype_name(t->dtype));
        CHECK(t->ndim == want[i].nd, "%s ndim %d", want[i].name, t->ndim);
        if (want[i].nd) CHECK(t->shape[0] == want[i].s0, "%s shape[0] %lld", want[i].name, (long long)t->shape[0]);
        CHECK(t->nbytes == want[i].nb, "%s nbytes %llu", want[i].name, (unsigned long long)t->nbytes);
        CHECK(t->numel * st_dtype_size(t->dtype) == t->nbytes, "%s numel", want[i].name);
        CHECK(t->data == expect_at, "%s data not contiguous", want[i].name);
        if (want[i].nb) CHECK(!memcmp(t->data, want[i].data, want[i].nb), "%s bytes differ", want[i].name);
        expect_at += want[i].nb;
    }
    CHECK(expect_at == f.map + f.map_size, "data area size");
    // st_to_f32 on the float dtypes, refused on the others with the tensor named
    float out[8];
    CHECK(st_to_f32(st_find(&f, "b.bf16"), out, err, sizeof err) == 0 && out[0] == 1.f && out[1] == -1.f &&
              isinf(out[2]) && out[3] == bf16_to_f32(1),
          "bf16 -> f32");
    CHECK(st_to_f32(st_find(&f, "c.f16"), out, err, sizeof err) == 0 && out[0] == 1.f && isinf(out[1]) && out[1] < 0 &&
              out[2] == ldexpf(1.f, -24),
          "f16 -> f32 (incl. smallest subnormal)");
    CHECK(st_to_f32(st_find(&f, "a.f32"), out, err, sizeof err) == 0 && !memcmp(out, f32, sizeof f32), "f32 -> f32");
    CHECK(st_to_f32(st_find(&f, "d.i32"), out, err, sizeof err) == -1 && strstr(err, "d.i32") && strstr(err, "I32"),
          "i32 refused with name: %s", err);
    st_close(&f);

    // writer misuse is reported at save, and nothing is left at the path
    char p2[512];
    path_in(p2, sizeof p2, "dup.safetensors");
    w = st_writer_new();
    st_writer_add(w, "x", ST_F32, 1, s2, f32);
    st_writer_add(w, "x", ST_F32, 1, s2, f32);
    CHECK(st_writer_save(w, p2, err, sizeof err) == -1 && strstr(err, "'x'") && !file_exists(p2), "duplicate add: %s",
          err);
    st_writer_free(w);
    w = st_writer_new();
    st_writer_add_f32_as(w, "y", ST_I32, 1, s2, f32);
    CHECK(st_writer_save(w, p2, err, sizeof err) == -1 && strstr(err, "'y'") && !file_exists(p2), "f32 as I32: %s",
          err);
    st_writer_free(w);
}

// ---- 3. f32 -> bf16/f16 rounding -----------------------------------------------------------------
static int write_conversion_file(void) {
    enum { N = 4096 };
    static float src[N];
    int n = 0;
    // hand-picked: bf16 ties (round to even both ways), just above/below ties, overflow to inf,
    // largest finite, subnormals, signed zeros, f16 overflow/subnormal boundaries
    float picks[] = {1.0f + 0x1p-8f,
                     1.0f + 3 * 0x1p-8f,
                     1.0f + 0x1p-8f + 0x1p-23f,
                     1.0f + 0x1p-8f - 0x1p-23f,
                     -1.0f - 0x1p-8f,
                     3.3895314e38f,
                     3.4028235e38f,
                     -3.4028235e38f,
                     1e-45f,
                     1.1754942e-38f,
                     0.f,
                     -0.f,
                     INFINITY,
                     -INFINITY,
                     65504.f,
                     65519.f,
                     65520.f,
                     6.1035156e-05f,
                     5.9604645e-08f,
                     2.9802322e-08f,
                     2.9802326e-08f,
                     8.940697e-08f,
                     0.1f,
                     1.f / 3.f};
    for (size_t i = 0; i < sizeof picks / sizeof *picks; i++) src[n++] = picks[i];
    while (n < N / 2) { // random bit patterns (finite only; NaN payloads are checked in C below)
        union {
            uint32_t u;
            float f;
        } v = {(uint32_t)next_u64()};
        if (isnan(v.f)) continue;
        src[n++] = v.f;
    }
    while (n < N) { // random values in the f16 range, with low mantissa bits set so many round
        union {
            uint32_t u;
            float f;
        } v = {(uint32_t)next_u64()};
        v.u = (v.u & 0x807fffffu) | ((uint32_t)(100 + next_u64() % 45) << 23);
        src[n++] = v.f;
    }
    char p[512], err[ERR_LEN];
    path_in(p, sizeof p, "src.f32");
    if (write_file_atomic(p, src, sizeof src, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    int64_t shape[2] = {N / 64, 64};
    StWriter *w = st_writer_new();
    st_writer_meta(w, "k", "v");
    st_writer_add_f32_as(w, "as_f32", ST_F32, 2, shape, src);
    st_writer_add_f32_as(w, "as_bf16", ST_BF16, 2, shape, src);
    st_writer_add_f32_as(w, "as_f16", ST_F16, 2, shape, src);
    path_in(p, sizeof p, "c_conv.safetensors");
    int rc = st_writer_save(w, p, err, sizeof err);
    CHECK(rc == 0, "save conversions: %s", err);
    st_writer_free(w);

    // NaN stays NaN (quiet) in bf16
    union {
        uint32_t u;
        float f;
    } snan = {0x7f800001u}, qnan = {0xffc00000u};
    CHECK((f32_to_bf16(snan.f) & 0x7f80) == 0x7f80 && (f32_to_bf16(snan.f) & 0x7f), "signalling NaN -> bf16 NaN");
    CHECK(f32_to_bf16(qnan.f) == 0xffc0, "quiet NaN -> bf16 %04x", f32_to_bf16(qnan.f));
    return rc;
}

// ---- 2. Python-written file ----------------------------------------------------------------------
static int read_f64(const char *name, double *out, size_t n) {
    char p[512], err[ERR_LEN];
    path_in(p, sizeof p, name);
    size_t len;
    char *b = read_file(p, &len, err, sizeof err);
    if (!b) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    int ok = len == n * 8;
    if (ok) memcpy(out, b, len);
    free(b);
    return ok ? 0 : -1;
}

static void test_python_file(void) {
    char p[512], err[ERR_LEN];
    path_in(p, sizeof p, "py.safetensors");
    StFile f;
    CHECK(st_open(&f, p, err, sizeof err) == 0, "open python file: %s", err);
    if (!f.map) return;
    CHECK(f.ntensors == 9, "python ntensors %d", f.ntensors);
    CHECK(st_meta(&f, "who") && !strcmp(st_meta(&f, "who"), "python"), "python meta");
    CHECK(st_meta(&f, "quote") && !strcmp(st_meta(&f, "quote"), "a \"b\" \\ c"), "python meta escapes");
    const struct {
        const char *name;
        StDtype dt;
        int nd;
        int64_t shape[4];
    } want[] = {
        {"f32", ST_F32, 3, {3, 5, 7}}, {"bf16", ST_BF16, 2, {4, 9}}, {"f16", ST_F16, 4, {2, 3, 4, 5}},
        {"i32", ST_I32, 1, {6}},       {"i64", ST_I64, 2, {2, 2}},   {"u8", ST_U8, 1, {11}},
        {"f64", ST_F64, 1, {5}},       {"scalar", ST_F32, 0, {0}},   {"empty", ST_F32, 2, {0, 4}},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        const StTensor *t = st_find(&f, want[i].name);
        CHECK(t != NULL, "python tensor %s missing", want[i].name);
        if (!t) continue;
        CHECK(t->dtype == want[i].dt && t->ndim == want[i].nd, "python %s dtype/ndim %s/%d", want[i].name,
              st_dtype_name(t->dtype), t->ndim);
        for (int k = 0; k < want[i].nd && k < t->ndim; k++)
            CHECK(t->shape[k] == want[i].shape[k], "python %s shape[%d]", want[i].name, k);
        uint64_t n = t->numel;
        if (t->dtype == ST_I64) { // compared against the decimal text Python wrote
            char tp[512];
            path_in(tp, sizeof tp, "i64.txt");
            char *txt = read_file(tp, NULL, err, sizeof err), *s = txt;
            CHECK(txt != NULL, "%s", err);
            for (uint64_t j = 0; txt && j < n; j++) {
                long long v = strtoll(s, &s, 10), got;
                memcpy(&got, t->data + 8 * j, 8);
                CHECK(v == got, "python i64[%llu] %lld vs %lld", (unsigned long long)j, got, v);
            }
            free(txt);
            continue;
        }
        char fname[64];
        snprintf(fname, sizeof fname, "%s.f64", want[i].name);
        double *ref = xmalloc((n ? n : 1) * sizeof(double));
        CHECK(read_f64(fname, ref, n) == 0, "read %s", fname);
        int mism = 0;
        float *conv = xmalloc((n ? n : 1) * sizeof(float));
        int is_float = t->dtype == ST_F32 || t->dtype == ST_BF16 || t->dtype == ST_F16;
        if (is_float) CHECK(st_to_f32(t, conv, err, sizeof err) == 0, "%s", err);
        for (uint64_t j = 0; j < n; j++) {
            double got;
            const uint8_t *d = t->data;
            switch (t->dtype) {
            case ST_I32: {
                int32_t v;
                memcpy(&v, d + 4 * j, 4);
                got = v;
                break;
            }
            case ST_U8: got = d[j]; break;
            case ST_F64: memcpy(&got, d + 8 * j, 8); break;
            default: got = conv[j]; break;
            }
            // exact equality, incl. the sign of zero
            if (!(got == ref[j] && signbit(got) == signbit(ref[j])) && !(isinf(got) && got == ref[j])) mism++;
        }
        CHECK(mism == 0, "python %s: %d of %llu values differ", want[i].name, mism, (unsigned long long)n);
        free(ref);
        free(conv);
    }
    st_close(&f);
}

// ---- 4. corrupt files ----------------------------------------------------------------------------
static void write_raw(const char *p, const char *header, size_t hlen_field, const void *data, size_t nd) {
    char err[ERR_LEN];
    Buf b = {0};
    uint8_t l[8];
    for (int i = 0; i < 8; i++) l[i] = (uint8_t)((uint64_t)hlen_field >> (8 * i));
    buf_put(&b, l, 8);
    buf_puts(&b, header);
    if (nd) buf_put(&b, data, nd);
    if (write_file_atomic(p, b.p, b.n, err, sizeof err)) die("%s", err);
    buf_free(&b);
}

// Expects st_open to fail with an error containing `needle`.
static void expect_bad(const char *what, const char *header, long hlen_delta, size_t ndata, const char *needle) {
    char p[512], err[ERR_LEN] = "";
    path_in(p, sizeof p, "bad.safetensors");
    static const uint8_t zeros[256];
    write_raw(p, header, strlen(header) + (size_t)hlen_delta, zeros, ndata);
    StFile f;
    int rc = st_open(&f, p, err, sizeof err);
    CHECK(rc == -1, "%s: accepted", what);
    if (rc == 0) {
        st_close(&f);
        return;
    }
    CHECK(strstr(err, needle) != NULL, "%s: error '%s' lacks '%s'", what, err, needle);
    CHECK(strstr(err, "bad.safetensors") != NULL, "%s: error '%s' does not name the file", what, err);
    printf("  %-28s -> %s\n", what, err);
}

static void test_corrupt(void) {
    const char *ok1 = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    expect_bad("header length > file", ok1, +100, 8, "exceeds the file size");
    expect_bad("data truncated", ok1, 0, 4, "outside the data area");
    expect_bad("trailing data bytes", ok1, 0, 12, "trailing bytes");
    expect_bad("not JSON", "{\"a\":{\"dtype\":\"F32\",", 0, 8, "not valid JSON");
    expect_bad("not an object", "[1,2,3]", 0, 0, "does not start with '{'");
    expect_bad("garbage after JSON", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}} x", 0, 8,
               "trailing bytes");
    expect_bad("bad dtype", "{\"a\":{\"dtype\":\"Q7\",\"shape\":[2],\"data_offsets\":[0,8]}}", 0, 8,
               "unsupported dtype 'Q7'");
    expect_bad("dtype not a string", "{\"a\":{\"dtype\":4,\"shape\":[2],\"data_offsets\":[0,8]}}", 0, 8, "'a'");
    expect_bad("span != shape x dtype", "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 0, 8,
               "needs 12");
    expect_bad("negative dim", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 0, 8, "shape[0]");
    expect_bad("fractional dim", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 0, 8,
               "shape[0]");
    expect_bad("huge dims overflow",
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,8]}}", 0, 8,
               "overflow");
    expect_bad("9 dims", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 0, 1,
               "dimensions");
    expect_bad("offsets reversed", "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[8,0]}}", 0, 8, "outside");
    expect_bad("offsets missing", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1]}}", 0, 1, "data_offsets");
    expect_bad("overlap",
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
               0, 12, "overlaps");
    expect_bad("gap",
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
               0, 12, "gap");
    expect_bad("duplicate name",
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
               0, 8, "appears twice");
    expect_bad("metadata not strings", "{\"__metadata__\":{\"k\":1}}", 0, 0, "'k'");
    expect_bad("huge header length", ok1, (long)(200u << 20), 8, "exceeds");
    // the header-length field alone can be wrong in both directions
    expect_bad("header length too small", ok1, -10, 8, "JSON");

    char p[512], err[ERR_LEN];
    StFile f;
    path_in(p, sizeof p, "short.safetensors");
    CHECK(write_file_atomic(p, "\x08\0\0\0\0", 5, err, sizeof err) == 0, "%s", err);
    CHECK(st_open(&f, p, err, sizeof err) == -1 && strstr(err, "too short"), "5-byte file: %s", err);
    // a header length over the 100 MB cap in a file that is big enough (sparse, so it costs nothing)
    path_in(p, sizeof p, "hugeheader.safetensors");
    FILE *fp = fopen(p, "wb");
    CHECK(fp != NULL, "create %s", p);
    if (fp) {
        uint64_t big = 101ull << 20;
        uint8_t l[9];
        for (int i = 0; i < 8; i++) l[i] = (uint8_t)(big >> (8 * i));
        l[8] = '{';
        fwrite(l, 1, 9, fp);
        CHECK(ftruncate(fileno(fp), (off_t)(big + 8)) == 0, "ftruncate");
        fclose(fp);
        CHECK(st_open(&f, p, err, sizeof err) == -1 && strstr(err, "100 MB"), "101 MB header: %s", err);
        printf("  %-28s -> %s\n", "header over 100 MB", err);
        unlink(p);
    }

    // an empty but valid file: "{}" padded, no data
    path_in(p, sizeof p, "empty.safetensors");
    write_raw(p, "{}      ", 8, NULL, 0);
    CHECK(st_open(&f, p, err, sizeof err) == 0 && f.ntensors == 0, "empty file: %s", err);
    if (f.map) st_close(&f);
    path_in(p, sizeof p, "does-not-exist.safetensors");
    CHECK(st_open(&f, p, err, sizeof err) == -1 && strstr(err, "does-not-exist"), "missing file: %s", err);
}

// Random byte mutations of a valid file: must never crash (run under ASan by t_convert_st_asan.sh).
static void fuzz(int iters) {
    char p[512], q[512], err[ERR_LEN];
    path_in(p, sizeof p, "rt.safetensors");
    int memfd = memfd_create("fuzz.safetensors", 0); // in memory: thousands of file rewrites on disk are slow
    if (memfd < 0) die("memfd_create failed");
    snprintf(q, sizeof q, "/proc/self/fd/%d", memfd);
    size_t len;
    char *orig = read_file(p, &len, err, sizeof err);
    if (!orig) {
        CHECK(0, "%s", err);
        return;
    }
    int accepted = 0;
    for (int it = 0; it < iters; it++) {
        char *m = xmalloc(len);
        memcpy(m, orig, len);
        size_t n = len;
        int kind = (int)(next_u64() % 4);
        if (kind == 0) n = (size_t)(next_u64() % len); // truncate
        int flips = 1 + (int)(next_u64() % 4);
        for (int k = 0; k < flips; k++) {
            size_t at = kind == 1 ? next_u64() % 8 : next_u64() % (n ? n : 1); // length field or anywhere
            if (at < n) m[at] = (char)(kind == 3 ? "{}[]\",:0-9e \\"[next_u64() % 14] : (char)next_u64());
        }
        if (ftruncate(memfd, 0) || ftruncate(memfd, (off_t)n) || pwrite(memfd, m, n, 0) != (ssize_t)n)
            die("memfd write failed");
        free(m);
        StFile f;
        if (st_open(&f, q, err, sizeof err) == 0) {
            accepted++;
            for (int i = 0; i < f.ntensors; i++) { // touch every byte the reader hands out
                volatile uint8_t s = 0;
                for (uint64_t j = 0; j < f.tensors[i].nbytes; j++) s ^= f.tensors[i].data[j];
                (void)s;
            }
            st_close(&f);
        } else {
            CHECK(err[0] != 0, "fuzz: failure without a message");
        }
    }
    free(orig);
    close(memfd);
    printf("fuzz: %d mutations, %d still valid, none crashed\n", iters, accepted);
}

int main(int argc, char **argv) {
    int python = 1, fuzz_iters = 300;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--no-python"))
            python = 0;
        else if (!strcmp(argv[i], "--fuzz") && i + 1 < argc)
            fuzz_iters = atoi(argv[++i]);
    }
    snprintf(dir, sizeof dir, "/tmp/gdn_test_st_XXXXXX");
    if (!mkdtemp(dir)) die("mkdtemp failed");
    printf("round trip of every dtype + metadata\n");
    test_round_trip();
    printf("f32 -> BF16/F16 conversion file\n");
    int conv_ok = write_conversion_file() == 0;
    if (python) {
        const char *py = getenv("PYTHON") ? getenv("PYTHON") : "/usr/bin/python3";
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "%s tests/convert/st_interop.py write %s", py, dir);
        printf("python-written file: %s\n", cmd);
        fflush(stdout);
        CHECK(system(cmd) == 0, "python writer failed");
        test_python_file();
        if (conv_ok) {
            snprintf(cmd, sizeof cmd, "%s tests/convert/st_interop.py check %s", py, dir);
            printf("rounding vs torch: %s\n", cmd);
            fflush(stdout);
            CHECK(system(cmd) == 0, "C writer's BF16/F16 rounding differs from torch's");
        }
    }
    printf("corrupt files\n");
    test_corrupt();
    fuzz(fuzz_iters);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (!failures && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
