// test_parquet.c: tests for the Parquet reader (data/parquet.h) and its pieces (data/pq_thrift.h,
// data/pq_encoding.h).
//   test_parquet                                   unit tests: Thrift compact decoding, RLE/bit-packed hybrid,
//                                                  BIT_PACKED, DELTA_BINARY_PACKED (the spec's examples), codecs
//                                                  (round trips through the libraries' own compressors), and
//                                                  parquet_open on small broken files
//   test_parquet --check FILE COLUMN SIDECAR       every value equals the sidecar's (JSONL: a string or null per row)
//   test_parquet --expect-error FILE COLUMN TEXT   reading fails, with a message naming FILE and containing TEXT
//   test_parquet --mutate FILE COLUMN N SEED       N corrupted copies (byte flips, truncations, cut-out ranges):
//                                                  never a crash (run it under ASan), errors name the file,
//                                                  every truncated copy fails
//   test_parquet --bench FILE COLUMN               MB/s of text values read
// Exits non-zero on any failure.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <snappy-c.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "data/parquet.h"
#include "data/pq_encoding.h"
#include "data/pq_thrift.h"
#include "util/common.h"

#include "check.h"

// ---------------------------------------------------------------------------------------------------------
// Unit tests

static void test_thrift(void) {
    // A struct written by hand from the compact-protocol rules:
    //  field 1 i32 = -3       0x15 (delta 1, type 5)  zigzag(-3) = 5
    //  field 4 binary "hi"    0x38 (delta 3, type 8)  len 2, 'h' 'i'
    //  field 5 bool true      0x11 (delta 1, type 1: true)
    //  field 20 i64 = 300     0x06 (long form, type 6), zigzag(20) = 40, zigzag(300) = 600 = 0xd8 0x04
    //  field 21 struct        0x1c, holding field 1 double (0x17 + 8 bytes), field 2 list<i32> of 3
    //                         (0x19, 0x35, then 2 4 6), field 3 map<binary,i32> of 1 (0x1b, 0x01, 0x85, "k", 2),
    //                         field 4 list<bool> of 2 (0x19, 0x21, 1 0), stop
    //  field 22 i16 = 7       0x14, 0x0e
    //  stop
    static const uint8_t buf[] = {
        0x15, 0x05, 0x38, 0x02, 'h', 'i', 0x11, 0x06, 0x28, 0xd8, 0x04,
        0x1c, 0x17, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0x19, 0x35, 0x02, 0x04, 0x06,
        0x1b, 0x01, 0x85, 0x01, 'k', 0x02, 0x19, 0x21, 0x01, 0x00, 0x00,
        0x14, 0x0e, 0x00};
    ThriftReader t;
    thrift_init(&t, buf, sizeof buf);
    int16_t last = 0, id;
    int ty, seen = 0;
    while (thrift_field(&t, &last, &id, &ty)) {
        if (id == 1) { CHECK(ty == TC_I32, "type %d", ty); CHECK(thrift_i32(&t) == -3, "i32"); seen |= 1; }
        else if (id == 4) {
            size_t n;
            const uint8_t *s = thrift_binary(&t, &n);
            CHECK(ty == TC_BINARY && n == 2 && s && !memcmp(s, "hi", 2), "binary");
            seen |= 2;
        } else if (id == 5) { CHECK(thrift_bool(&t, ty) == 1, "bool"); seen |= 4; }
        else if (id == 20) { CHECK(ty == TC_I64 && thrift_i64(&t) == 300, "long-form field id / i64"); seen |= 8; }
        else if (id == 22) { CHECK(ty == TC_I16 && thrift_i64(&t) == 7, "field after a skipped struct"); seen |= 16; }
        else thrift_skip(&t, ty);
    }
    CHECK(t.status == TC_OK && thrift_left(&t) == 0 && seen == 31, "status %d (%s) left %zu seen %d", t.status, t.what,
          thrift_left(&t), seen);

    // Every proper prefix is truncated: the reader must say so, never read past the end.
    for (size_t n = 0; n < sizeof buf; n++) {
        uint8_t *copy = xmalloc(n ? n : 1); // exactly n bytes, so ASan catches any overread
        memcpy(copy, buf, n);
        thrift_init(&t, copy, n);
        last = 0;
        while (thrift_field(&t, &last, &id, &ty)) thrift_skip(&t, ty);
        CHECK(t.status == TC_TRUNCATED, "prefix of %zu bytes: status %d", n, t.status);
        free(copy);
    }
    // A varint that never ends, an unknown type code, a list longer than its bytes, runaway nesting.
    static const uint8_t long_varint[] = {0x15, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
    thrift_init(&t, long_varint, sizeof long_varint);
    last = 0;
    while (thrift_field(&t, &last, &id, &ty)) thrift_skip(&t, ty);
    CHECK(t.status == TC_CORRUPT && strstr(t.what, "varint"), "long varint: %d %s", t.status, t.what);
    static const uint8_t bad_type[] = {0x1d, 0x00};
    thrift_init(&t, bad_type, sizeof bad_type);
    last = 0;
    while (thrift_field(&t, &last, &id, &ty)) thrift_skip(&t, ty);
    CHECK(t.status == TC_CORRUPT && t.err_pos == 0, "type code 13: %d at %zu", t.status, t.err_pos);
    static const uint8_t big_list[] = {0x19, 0xf5, 0xff, 0xff, 0xff, 0x0f, 0x02};
    thrift_init(&t, big_list, sizeof big_list);
    last = 0;
    while (thrift_field(&t, &last, &id, &ty)) thrift_skip(&t, ty);
    CHECK(t.status == TC_TRUNCATED, "list of 2^32-1 in 7 bytes: %d", t.status);
    uint8_t deep[200];
    for (int i = 0; i < 200; i++) deep[i] = 0x1c; // field 1 struct { field 1 struct { ...
    thrift_init(&t, deep, sizeof deep);
    last = 0;
    while (thrift_field(&t, &last, &id, &ty)) thrift_skip(&t, ty);
    CHECK(t.status == TC_CORRUPT && strstr(t.what, "nesting"), "deep nesting: %d %s", t.status, t.what);
}

static void test_hybrid(void) {
    // Spec example: 0..7 at bit width 3 bit-packed = 10001000 11000110 11111010; run header (1 group << 1) | 1.
    static const uint8_t packed[] = {0x03, 0x88, 0xc6, 0xfa};
    PqHybrid h;
    uint32_t v;
    pq_hybrid_init(&h, packed, sizeof packed, 3);
    int ok = 1;
    for (uint32_t i = 0; i < 8; i++) ok &= pq_hybrid_next(&h, &v) && v == i;
    CHECK(ok && !pq_hybrid_next(&h, &v), "bit-packed 0..7 at width 3");
    // RLE runs: 5 x 3 (header 5<<1, one value byte), then 300 x 1 at width 9 (header 600 = 0xd8 0x04, 2 bytes LE),
    // then a bit-packed group at width 9 (1 group: 9 bytes) holding 1,0,0,0,0,0,0,256.
    static const uint8_t runs[] = {0x0a, 0x03};
    pq_hybrid_init(&h, runs, sizeof runs, 3);
    ok = 1;
    for (int i = 0; i < 5; i++) ok &= pq_hybrid_next(&h, &v) && v == 3;
    CHECK(ok && !pq_hybrid_next(&h, &v), "RLE run of 5 x 3");
    static const uint8_t wide[] = {0xd8, 0x04, 0x01, 0x00, 0x03, 0x01, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x00};
    pq_hybrid_init(&h, wide, sizeof wide, 9);
    ok = 1;
    for (int i = 0; i < 300; i++) ok &= pq_hybrid_next(&h, &v) && v == 1;
    CHECK(ok, "RLE run of 300 x 1 at width 9");
    uint32_t want[8] = {1, 0, 0, 0, 0, 0, 0, 256}, got[8] = {0};
    for (int i = 0; i < 8; i++) pq_hybrid_next(&h, &got[i]);
    CHECK(!memcmp(want, got, sizeof want) && !pq_hybrid_next(&h, &v), "bit-packed at width 9: %u %u", got[0], got[7]);
    // A last bit-packed run that stops short: values up to the end, then nothing (no overread under ASan).
    static const uint8_t short_run[] = {0x05, 0xff}; // 2 groups (16 values) at width 1, only 8 present
    uint8_t *copy = xmalloc(sizeof short_run);
    memcpy(copy, short_run, sizeof short_run);
    pq_hybrid_init(&h, copy, sizeof short_run, 1);
    int n = 0;
    while (pq_hybrid_next(&h, &v)) n += v == 1;
    CHECK(n == 8, "short last run gave %d values", n);
    free(copy);
    // Truncated RLE value bytes.
    static const uint8_t trunc_rle[] = {0x0a};
    pq_hybrid_init(&h, trunc_rle, sizeof trunc_rle, 3);
    CHECK(!pq_hybrid_next(&h, &v), "RLE run without its value");
    // Spec example of the deprecated BIT_PACKED encoding: 0..7 at width 3 = 00000101 00111001 01110111.
    static const uint8_t msb[] = {0x05, 0x39, 0x77};
    pq_bitpacked_msb_init(&h, msb, sizeof msb, 3);
    ok = 1;
    for (uint32_t i = 0; i < 8; i++) ok &= pq_hybrid_next(&h, &v) && v == i;
    CHECK(ok && !pq_hybrid_next(&h, &v), "BIT_PACKED 0..7 at width 3");
}

// Decodes a whole DELTA_BINARY_PACKED stream into v (up to cap values); returns the count, or -1.
static int64_t delta_all(const uint8_t *p, size_t n, int64_t max_count, int64_t *used, int64_t *v, int cap, char *err) {
    PqDelta d;
    *used = pq_delta_init(&d, p, n, max_count, err, ERR_LEN);
    if (*used < 0) return -1;
    int64_t k = 0, x;
    while (pq_delta_next(&d, &x)) {
        if (k < cap) v[k] = x;
        k++;
    }
    return k;
}

static void test_delta(void) {
    char err[ERR_LEN];
    int64_t v[16], used, n;
    // Spec example 1: 1 2 3 4 5. Header: block 128 (0x80 0x01), 4 miniblocks, 5 values, first zigzag(1) = 2;
    // block: min delta zigzag(1) = 2, widths 0 0 0 0, no miniblock bytes.
    static const uint8_t ex1[] = {0x80, 0x01, 0x04, 0x05, 0x02, 0x02, 0, 0, 0, 0, 0xee};
    n = delta_all(ex1, sizeof ex1, 100, &used, v, 16, err);
    CHECK(used == 10 && n == 5 && v[0] == 1 && v[1] == 2 && v[4] == 5, "example 1: used %lld n %lld (%s)", (long long)used,
          (long long)n, used < 0 ? err : "");
    // Spec example 2: 7 5 3 1 2 3 4 5. Deltas -2 -2 -2 1 1 1 1, min delta -2 (zigzag 3), relative 0 0 0 3 3 3 3 at
    // width 2 in a 32-value miniblock (8 bytes: 0xc0 0x3f then zeros); the other miniblocks have width 0.
    static const uint8_t ex2[] = {0x80, 0x01, 0x04, 0x08, 0x0e, 0x03, 2, 0, 0, 0, 0xc0, 0x3f, 0, 0, 0, 0, 0, 0};
    int64_t want2[] = {7, 5, 3, 1, 2, 3, 4, 5};
    n = delta_all(ex2, sizeof ex2, 100, &used, v, 16, err);
    CHECK(used == 18 && n == 8 && !memcmp(v, want2, sizeof want2), "example 2: used %lld n %lld", (long long)used, (long long)n);
    // One value: header only (zigzag 7 = -4). More values than allowed; every truncation.
    static const uint8_t one[] = {0x80, 0x01, 0x04, 0x01, 0x07};
    n = delta_all(one, sizeof one, 1, &used, v, 16, err);
    CHECK(used == 5 && n == 1 && v[0] == -4, "single value");
    n = delta_all(ex2, sizeof ex2, 7, &used, v, 16, err);
    CHECK(n < 0 && strstr(err, "8 values"), "count above max: %s", err);
    for (size_t cut = 0; cut < sizeof ex2; cut++) {
        uint8_t *copy = xmalloc(cut ? cut : 1);
        memcpy(copy, ex2, cut);
        n = delta_all(copy, cut, 100, &used, v, 16, err);
        CHECK(n < 0, "prefix of %zu bytes accepted", cut);
        free(copy);
    }
    // Two blocks of 128 (4 x 32) with a negative min delta and a 64-bit width miniblock: values wrap mod 2^64.
    // 130 values: first 0, then 128 deltas in block 1 (min delta 0, widths 1 0 0 0 -> only miniblock 0 has bits,
    // pattern 0xff x 4 = 32 ones -> 32 increments of 1, then 96 zeros), then block 2: 1 delta, min delta -1,
    // width 64 holding 2^64-1 -> prev + (-1) + (2^64 - 1) = prev - 2 (mod 2^64).
    uint8_t two[64], *q = two;
    *q++ = 0x80; *q++ = 0x01; *q++ = 0x04; *q++ = 0x82; *q++ = 0x01; *q++ = 0x00;  // 130 values, first 0
    *q++ = 0x00; *q++ = 1; *q++ = 0; *q++ = 0; *q++ = 0;                            // block 1
    for (int i = 0; i < 4; i++) *q++ = 0xff;                                       // miniblock 0: 32 x 1 bit
    *q++ = 0x01; *q++ = 64; *q++ = 0; *q++ = 0; *q++ = 0;                           // block 2: min delta -1, width 64
    size_t head = (size_t)(q - two);                                                // 20 bytes, then 32 x 8 bytes
    while (q < two + sizeof two) *q++ = 0xff;                                       // only 44 of the 256 bytes
    n = delta_all(two, sizeof two, 200, &used, v, 16, err);
    CHECK(n < 0 && strstr(err, "miniblock truncated"), "64-bit miniblock cut short: %s", n < 0 ? err : "accepted");
    size_t big_n = head + 32 * 8;
    uint8_t *big = xcalloc(big_n, 1);
    memcpy(big, two, head);
    memset(big + head, 0xff, 32 * 8); // the whole 64-bit miniblock: every delta = 2^64 - 1
    PqDelta d;
    used = pq_delta_init(&d, big, big_n, 200, err, sizeof err);
    int64_t x = 0, k = 0, last = 0, at32 = -1;
    while (pq_delta_next(&d, &x)) { if (k == 32) at32 = x; last = x; k++; }
    CHECK(used == (int64_t)big_n && k == 130 && at32 == 32 && last == 30, "two blocks: used %lld k %lld at32 %lld last %lld",
          (long long)used, (long long)k, (long long)at32, (long long)last);
    free(big);
}

static void test_codecs(void) {
    char err[ERR_LEN];
    size_t n = 100000;
    uint8_t *plain = xmalloc(n), *out = xmalloc(n + 1);
    for (size_t i = 0; i < n; i++) plain[i] = (uint8_t)("Parquet pages of text "[i % 22] + (i / 5000));
    // SNAPPY (raw block format)
    size_t cap = snappy_max_compressed_length(n), cn = cap;
    char *c = xmalloc(cap);
    CHECK(snappy_compress((const char *)plain, n, c, &cn) == SNAPPY_OK, "snappy_compress");
    CHECK(pq_check_decompressed_size(PQ_SNAPPY, (uint8_t *)c, cn, n, err, sizeof err) == 0, "%s", err);
    CHECK(pq_decompress(PQ_SNAPPY, (uint8_t *)c, cn, out, n, err, sizeof err) == 0 && !memcmp(out, plain, n), "snappy round trip");
    CHECK(pq_check_decompressed_size(PQ_SNAPPY, (uint8_t *)c, cn, n + 1, err, sizeof err) < 0 && strstr(err, "SNAPPY"),
          "snappy size mismatch: %s", err);
    CHECK(pq_decompress(PQ_SNAPPY, (uint8_t *)c, cn / 2, out, n, err, sizeof err) < 0, "snappy truncated");
    free(c);
    // ZSTD
    cap = ZSTD_compressBound(n);
    c = xmalloc(cap);
    cn = ZSTD_compress(c, cap, plain, n, 3);
    CHECK(!ZSTD_isError(cn), "ZSTD_compress");
    CHECK(pq_decompress(PQ_ZSTD, (uint8_t *)c, cn, out, n, err, sizeof err) == 0 && !memcmp(out, plain, n), "zstd round trip");
    CHECK(pq_decompress(PQ_ZSTD, (uint8_t *)c, cn, out, n - 1, err, sizeof err) < 0 && strstr(err, "ZSTD"), "zstd too small: %s", err);
    CHECK(pq_decompress(PQ_ZSTD, (uint8_t *)c, cn - 3, out, n, err, sizeof err) < 0, "zstd truncated");
    free(c);
    // GZIP: two gzip members back to back (a valid gzip stream), then corrupt and truncated variants.
    cap = compressBound(n) + 64;
    c = xmalloc(2 * cap);
    cn = 0;
    for (int m = 0; m < 2; m++) {
        z_stream z = {0};
        CHECK(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK, "deflateInit2");
        z.next_in = plain + m * (n / 2);
        z.avail_in = (uInt)(n / 2);
        z.next_out = (Bytef *)c + cn;
        z.avail_out = (uInt)cap;
        CHECK(deflate(&z, Z_FINISH) == Z_STREAM_END, "deflate");
        cn += z.total_out;
        deflateEnd(&z);
    }
    CHECK(pq_check_decompressed_size(PQ_GZIP, (uint8_t *)c, cn, n, err, sizeof err) == 0, "%s", err);
    CHECK(pq_decompress(PQ_GZIP, (uint8_t *)c, cn, out, n, err, sizeof err) == 0 && !memcmp(out, plain, n),
          "gzip two members: %s", err);
    CHECK(pq_decompress(PQ_GZIP, (uint8_t *)c, cn, out, n - 10, err, sizeof err) < 0 && strstr(err, "more than"),
          "gzip bigger than header: %s", err);
    CHECK(pq_decompress(PQ_GZIP, (uint8_t *)c, cn, out, n + 1, err, sizeof err) < 0, "gzip smaller than header");
    CHECK(pq_decompress(PQ_GZIP, (uint8_t *)c, cn / 3, out, n, err, sizeof err) < 0 && strstr(err, "GZIP"), "gzip truncated: %s", err);
    c[20] ^= 0x55;
    c[21] ^= 0x55;
    CHECK(pq_decompress(PQ_GZIP, (uint8_t *)c, cn, out, n, err, sizeof err) < 0, "gzip corrupt");
    CHECK(pq_check_decompressed_size(PQ_GZIP, (uint8_t *)c, 10, 1u << 30, err, sizeof err) < 0, "gzip absurd ratio");
    free(c);
    // Unsupported codecs are named.
    CHECK(pq_decompress(PQ_LZ4_RAW, plain, 10, out, 10, err, sizeof err) < 0 && strstr(err, "LZ4_RAW"), "%s", err);
    CHECK(pq_decompress(PQ_BROTLI, plain, 10, out, 10, err, sizeof err) < 0 && strstr(err, "BROTLI"), "%s", err);
    CHECK(pq_decompress(PQ_UNCOMPRESSED, plain, 10, out, 11, err, sizeof err) < 0, "uncompressed size mismatch");
    free(plain);
    free(out);
}

// Writes bytes to a fresh temp file; returns its malloc'd path.
static char *temp_file(const void *p, size_t n) {
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    size_t n_path = strlen(dir) + 32;
    char *path = xmalloc(n_path);
    snprintf(path, n_path, "%s/test_parquet.XXXXXX", dir);
    int fd = mkstemp(path);
    if (fd < 0) die("mkstemp %s: %s", path, strerror(errno));
    if (write(fd, p, n) != (ssize_t)n) die("write %s: %s", path, strerror(errno));
    close(fd);
    return path;
}

static void expect_open_error(const void *bytes, size_t n, const char *want) {
    char err[ERR_LEN] = "";
    char *path = temp_file(bytes, n);
    ParquetReader *r = parquet_open(path, "text", err, sizeof err);
    CHECK(!r && strstr(err, path) && strstr(err, want), "want error with '%s', got '%s'", want, r ? "(opened)" : err);
    parquet_close(r);
    unlink(path);
    free(path);
}

static void test_open_errors(void) {
    char err[ERR_LEN] = "";
    ParquetReader *r = parquet_open("/nonexistent/x.parquet", "text", err, sizeof err);
    CHECK(!r && strstr(err, "/nonexistent/x.parquet") && strstr(err, "No such file"), "%s", err);
    expect_open_error("PAR1PAR1", 8, "at least 12");
    expect_open_error("PAR1\0\0\0\0\0\0\0\0PARX", 16, "no PAR1 magic at the end");
    expect_open_error("XAR1\0\0\0\0\0\0\0\0PAR1", 16, "no PAR1 magic at offset 0");
    expect_open_error("PAR1\0\0\0\0\0\0\0\0PARE", 16, "encrypted");
    expect_open_error("PAR1\0\0\0\0\xff\0\0\0PAR1", 16, "footer length 255");
    // Footer of 4 bytes: field 1 i32 (0x15) whose varint never ends.
    expect_open_error("PAR1\x15\x80\x80\x80\x04\0\0\0PAR1", 16, "footer (FileMetaData, 4 bytes at offset 4): truncated");
    // Footer that is a complete but empty struct: no schema.
    expect_open_error("PAR1\x00\x01\0\0\0PAR1", 13, "lacks its schema");
    // Schema root claims 3 children but only one element follows.
    static const uint8_t tree[] = {'P', 'A', 'R', '1',
        0x29, 0x2c,                          // field 2: list of 2 structs
        0x48, 0x01, 'r', 0x15, 0x06, 0x00,   //   {name "r", num_children 3}
        0x15, 0x0c, 0x38, 0x01, 't', 0x00,   //   {type BYTE_ARRAY(6), name "t"}
        0x16, 0x00,                          // field 3 num_rows 0
        0x19, 0x0c,                          // field 4: empty list of structs
        0x00, 19, 0, 0, 0, 'P', 'A', 'R', '1'};
    expect_open_error(tree, sizeof tree, "schema tree is inconsistent");
}

// ---------------------------------------------------------------------------------------------------------
// Hand-built files: a minimal Thrift compact writer assembles a one-column file page by page, so each stream
// error (bad dictionary index, levels that end early, truncated page header, ...) can be produced exactly.

typedef struct {
    Buf b;
    int16_t last[8]; // last field id of each open struct
    int depth;
} TW;
static void tw_byte(TW *w, uint8_t c) { buf_put(&w->b, &c, 1); }
static void tw_varint(TW *w, uint64_t v) {
    for (; v >= 0x80; v >>= 7) tw_byte(w, (uint8_t)(v | 0x80));
    tw_byte(w, (uint8_t)v);
}
static void tw_zz(TW *w, int64_t v) { tw_varint(w, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63)); }
static void tw_field(TW *w, int id, int type) {
    int d = id - w->last[w->depth];
    if (d > 0 && d <= 15) tw_byte(w, (uint8_t)(d << 4 | type));
    else { tw_byte(w, (uint8_t)type); tw_zz(w, id); }
    w->last[w->depth] = (int16_t)id;
}
static void tw_i32(TW *w, int id, int64_t v) { tw_field(w, id, TC_I32); tw_zz(w, v); }
static void tw_i64(TW *w, int id, int64_t v) { tw_field(w, id, TC_I64); tw_zz(w, v); }
static void tw_str(TW *w, const char *s) { tw_varint(w, strlen(s)); buf_puts(&w->b, s); }
static void tw_bin(TW *w, int id, const char *s) { tw_field(w, id, TC_BINARY); tw_str(w, s); }
static void tw_list(TW *w, int id, int elem, int n) { tw_field(w, id, TC_LIST); tw_byte(w, (uint8_t)(n << 4 | elem)); } // n < 15
static void tw_begin(TW *w, int id) { // id 0: a struct that is a list element (no field header)
    if (id) tw_field(w, id, TC_STRUCT);
    w->last[++w->depth] = 0;
}
static void tw_end(TW *w) { tw_byte(w, 0); w->depth--; }

typedef struct {
    int type; // 0 DATA_PAGE, 2 DICTIONARY_PAGE, 3 DATA_PAGE_V2
    const char *body;
    size_t n;
    int num_values, encoding, num_nulls, def_len;
    int stats_len; // > 0: a v1 page header with Statistics whose min/max strings are this long
} TPage;

// "PAR1" | pages | footer (schema: root + OPTIONAL BYTE_ARRAY "text"; one row group) | len | "PAR1".
// keep_last >= 0 ends the column chunk (total_compressed_size) that many bytes into the last page.
static char *build_file(const TPage *pages, int n_pages, int64_t rows, int64_t keep_last) {
    Buf f = {0};
    buf_put(&f, "PAR1", 4);
    int64_t dict_off = -1, data_off = -1, last_off = 4;
    for (int i = 0; i < n_pages; i++) {
        const TPage *pg = &pages[i];
        last_off = (int64_t)f.n;
        if (pg->type == 2 && dict_off < 0) dict_off = (int64_t)f.n;
        if (pg->type != 2 && data_off < 0) data_off = (int64_t)f.n;
        TW w = {0};
        tw_i32(&w, 1, pg->type);
        tw_i32(&w, 2, (int64_t)pg->n);
        tw_i32(&w, 3, (int64_t)pg->n);
        if (pg->type == 0) {
            tw_begin(&w, 5);
            tw_i32(&w, 1, pg->num_values); tw_i32(&w, 2, pg->encoding); tw_i32(&w, 3, 3); tw_i32(&w, 4, 3);
            if (pg->stats_len > 0) { // Statistics {max, min, null_count, max_value, min_value}: skipped by the reader
                char *big = xmalloc((size_t)pg->stats_len + 1);
                memset(big, 'z', (size_t)pg->stats_len);
                big[pg->stats_len] = 0;
                tw_begin(&w, 5);
                tw_bin(&w, 1, big); tw_bin(&w, 2, big); tw_i64(&w, 3, 1); tw_bin(&w, 5, big); tw_bin(&w, 6, big);
                tw_end(&w);
                free(big);
            }
            tw_end(&w);
        } else if (pg->type == 2) {
            tw_begin(&w, 7);
            tw_i32(&w, 1, pg->num_values); tw_i32(&w, 2, 0);
            tw_end(&w);
        } else {
            tw_begin(&w, 8);
            tw_i32(&w, 1, pg->num_values); tw_i32(&w, 2, pg->num_nulls); tw_i32(&w, 3, pg->num_values);
            tw_i32(&w, 4, pg->encoding); tw_i32(&w, 5, pg->def_len); tw_i32(&w, 6, 0);
            tw_end(&w);
        }
        tw_byte(&w, 0);
        buf_put(&f, w.b.p, w.b.n);
        buf_put(&f, pg->body, pg->n);
        buf_free(&w.b);
    }
    int64_t chunk = keep_last >= 0 ? last_off + keep_last - 4 : (int64_t)f.n - 4;
    TW w = {0};
    tw_i32(&w, 1, 1);
    tw_list(&w, 2, TC_STRUCT, 2);
    tw_begin(&w, 0); tw_bin(&w, 4, "schema"); tw_i32(&w, 5, 1); tw_end(&w);
    tw_begin(&w, 0); tw_i32(&w, 1, 6); tw_i32(&w, 3, 1); tw_bin(&w, 4, "text"); tw_end(&w);
    tw_i64(&w, 3, rows);
    tw_list(&w, 4, TC_STRUCT, 1);
    tw_begin(&w, 0);
    tw_list(&w, 1, TC_STRUCT, 1);
    tw_begin(&w, 0);
    tw_i64(&w, 2, 4);
    tw_begin(&w, 3);
    tw_i32(&w, 1, 6);
    tw_list(&w, 2, TC_I32, 1); tw_zz(&w, 0);
    tw_list(&w, 3, TC_BINARY, 1); tw_str(&w, "text");
    tw_i32(&w, 4, 0);
    tw_i64(&w, 5, rows);
    tw_i64(&w, 6, chunk);
    tw_i64(&w, 7, chunk);
    tw_i64(&w, 9, data_off);
    if (dict_off >= 0) tw_i64(&w, 11, dict_off);
    tw_end(&w);
    tw_end(&w);
    tw_i64(&w, 2, chunk);
    tw_i64(&w, 3, rows);
    tw_end(&w);
    tw_byte(&w, 0);
    uint32_t len = (uint32_t)w.b.n;
    buf_put(&f, w.b.p, w.b.n);
    uint8_t le[4] = {(uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16), (uint8_t)(len >> 24)};
    buf_put(&f, le, 4);
    buf_put(&f, "PAR1", 4);
    buf_free(&w.b);
    char *path = temp_file(f.p, f.n);
    buf_free(&f);
    return path;
}

// Reads the hand-built file: want_error NULL means every value must match `want` ("\1" = null).
static void expect_file(const char *what, const TPage *pages, int n_pages, int64_t rows, int64_t keep_last,
                        const char *const *want, int n_want, const char *want_error) {
    char err[ERR_LEN] = "";
    char *path = build_file(pages, n_pages, rows, keep_last);
    ParquetReader *r = parquet_open(path, "text", err, sizeof err);
    int k = 0, rc = -1, ok = 1;
    if (r) {
        const char *p;
        size_t len;
        int is_null;
        while ((rc = parquet_next(r, &p, &len, &is_null, err, sizeof err)) == 1) {
            if (k < n_want) {
                int want_null = want[k][0] == 1;
                if (want_null != is_null || (!want_null && (len != strlen(want[k]) || memcmp(p, want[k], len)))) ok = 0;
            }
            k++;
        }
    }
    if (getenv("TEST_PARQUET_VERBOSE")) printf("  %s: %s\n", what, rc < 0 ? err : "ok");
    if (want_error) CHECK(rc < 0 && strstr(err, path) && strstr(err, want_error), "%s: want '%s', got '%s'", what, want_error,
                          rc < 0 ? err : "no error");
    else CHECK(rc == 0 && ok && k == n_want, "%s: rc %d, %d values, match %d: %s", what, rc, k, ok, rc < 0 ? err : "");
    parquet_close(r);
    unlink(path);
    free(path);
}

static void test_built_files(void) {
    // Dictionary ["a", "bc"] (PLAIN: u32 length + bytes).
    static const char dict[] = "\1\0\0\0a\2\0\0\0bc";
    // v1 data page, 4 values [a, null, bc, a]: definition levels 1 0 1 1 as RLE/bit-packed hybrid with a u32 length
    // (2 bytes: header 0x03 = one bit-packed group, then 0b00001101), then dictionary indices 0 1 0 at bit width 1
    // (0x01, header 0x03, 0b010).
    static const char dpage[] = "\2\0\0\0\x03\x0d" "\x01\x03\x02";
    const char *want[] = {"a", "\1", "bc", "a"};
    TPage ok[] = {{2, dict, sizeof dict - 1, 2, 0, 0, 0}, {0, dpage, sizeof dpage - 1, 4, 8, 0, 0}};
    expect_file("dictionary + v1 page", ok, 2, 4, -1, want, 4, NULL);
    // The same page, PLAIN_DICTIONARY (the v1 name of the encoding).
    TPage ok2[] = {{2, dict, sizeof dict - 1, 2, 0, 0, 0}, {0, dpage, sizeof dpage - 1, 4, 2, 0, 0}};
    expect_file("PLAIN_DICTIONARY", ok2, 2, 4, -1, want, 4, NULL);
    // Indices 0 1 2 at bit width 2 (0b10_01_00 = 0x24): 2 is past the 2-entry dictionary. The dictionary page
    // takes bytes 4..27 (13-byte header + 11-byte body), so the data page starts at offset 28.
    static const char bad_index[] = "\2\0\0\0\x03\x0d" "\x02\x03\x24";
    TPage bi[] = {{2, dict, sizeof dict - 1, 2, 0, 0, 0}, {0, bad_index, sizeof bad_index - 1, 4, 8, 0, 0}};
    expect_file("bad index", bi, 2, 4, -1, want, 4, "page at offset 28: dictionary index 2 out of range (dictionary has 2 entries)");
    // A dictionary-encoded page in a chunk without a dictionary page.
    TPage nd[] = {{0, dpage, sizeof dpage - 1, 4, 8, 0, 0}};
    expect_file("no dictionary", nd, 1, 4, -1, want, 4, "RLE_DICTIONARY page but the column chunk has no dictionary page");
    // Definition levels that run out: an RLE run of 3 (header 3 << 1 = 0x06, value 1) for a 4-value page.
    static const char short_defs[] = "\2\0\0\0\x06\x01" "\x01\x03\x02";
    TPage sd[] = {{2, dict, sizeof dict - 1, 2, 0, 0, 0}, {0, short_defs, sizeof short_defs - 1, 4, 8, 0, 0}};
    expect_file("short levels", sd, 2, 4, -1, want, 4, "definition levels end early");
    // PLAIN values: the last one claims 200 bytes.
    static const char plain[] = "\2\0\0\0\x03\x0d" "\1\0\0\0a" "\2\0\0\0bc" "\xc8\0\0\0a";
    TPage pl[] = {{0, plain, sizeof plain - 1, 4, 0, 0, 0}};
    expect_file("PLAIN overrun", pl, 1, 4, -1, want, 4, "page at offset 4: PLAIN value of 200 bytes, only 1 left in the page");
    // A value encoding the reader does not do.
    TPage bss[] = {{0, plain, sizeof plain - 1, 4, 9, 0, 0}};
    expect_file("BYTE_STREAM_SPLIT", bss, 1, 4, -1, want, 4, "value encoding BYTE_STREAM_SPLIT (9) is not supported");
    // v2 page: levels without a length prefix, then PLAIN values. Correct null count, then a wrong one.
    static const char v2[] = "\x03\x0d" "\1\0\0\0a" "\2\0\0\0bc" "\1\0\0\0a";
    TPage v2ok[] = {{3, v2, sizeof v2 - 1, 4, 0, 1, 2}};
    expect_file("v2 page", v2ok, 1, 4, -1, want, 4, NULL);
    TPage v2bad[] = {{3, v2, sizeof v2 - 1, 4, 0, 2, 2}};
    expect_file("v2 null count", v2bad, 1, 4, -1, want, 4, "page has 1 nulls, its header says 2");
    // Two v1 pages of 2 values; then the chunk's byte range ends 3 bytes into the second page's header.
    static const char p1[] = "\2\0\0\0\x03\x01" "\1\0\0\0a";         // [a, null]
    static const char p2[] = "\2\0\0\0\x03\x03" "\2\0\0\0bc\1\0\0\0a"; // [bc, a]
    TPage two[] = {{0, p1, sizeof p1 - 1, 2, 0, 0, 0}, {0, p2, sizeof p2 - 1, 2, 0, 0, 0}};
    expect_file("two pages", two, 2, 4, -1, want, 4, NULL);
    expect_file("page header cut by the chunk end", two, 2, 4, 3, want, 4, "page header: truncated");
    // Page headers larger than the reader's first read of a header (statistics with long min/max strings).
    TPage stats1[] = {{0, p1, sizeof p1 - 1, 2, 0, 0, 0, 500}, {0, p2, sizeof p2 - 1, 2, 0, 0, 0, 5000}};
    expect_file("2 KB and 20 KB page headers", stats1, 2, 4, -1, want, 4, NULL);
    TPage stats2[] = {{0, p1, sizeof p1 - 1, 2, 0, 0, 0, 30000}, {0, p2, sizeof p2 - 1, 2, 0, 0, 0, 0}};
    expect_file("120 KB page header", stats2, 2, 4, -1, want, 4, NULL);
    expect_file("120 KB page header cut by the chunk end", stats2, 1, 2, 100000, want, 2, "page header: truncated");
    // More rows than the pages hold.
    expect_file("missing values", two, 2, 5, -1, want, 4, "column chunk ends after 4 values, its metadata says 5");
}

// ---------------------------------------------------------------------------------------------------------
// Sidecar: one JSON value per line, a string or null. Strings are decoded here (cJSON stops at \u0000).

static int hexval(int c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}
static int read_u4(const char *s, uint32_t *u) {
    *u = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval((unsigned char)s[i]);
        if (h < 0) return -1;
        *u = *u << 4 | (uint32_t)h;
    }
    return 0;
}
static void put_utf8(Buf *b, uint32_t c) {
    char o[4];
    size_t n;
    if (c < 0x80) { o[0] = (char)c; n = 1; }
    else if (c < 0x800) { o[0] = (char)(0xc0 | c >> 6); o[1] = (char)(0x80 | (c & 63)); n = 2; }
    else if (c < 0x10000) { o[0] = (char)(0xe0 | c >> 12); o[1] = (char)(0x80 | (c >> 6 & 63)); o[2] = (char)(0x80 | (c & 63)); n = 3; }
    else { o[0] = (char)(0xf0 | c >> 18); o[1] = (char)(0x80 | (c >> 12 & 63)); o[2] = (char)(0x80 | (c >> 6 & 63)); o[3] = (char)(0x80 | (c & 63)); n = 4; }
    buf_put(b, o, n);
}
// Parses one line into out; returns 1 for a string, 0 for null, -1 if malformed.
static int parse_json_line(const char *s, size_t n, Buf *out) {
    out->n = 0;
    if (n == 4 && !memcmp(s, "null", 4)) return 0;
    if (n < 2 || s[0] != '"' || s[n - 1] != '"') return -1;
    for (size_t i = 1; i + 1 < n; i++) {
        char c = s[i];
        if (c != '\\') { buf_put(out, &c, 1); continue; }
        if (++i + 1 >= n) return -1;
        switch (s[i]) {
        case '"': case '\\': case '/': buf_put(out, &s[i], 1); break;
        case 'b': buf_put(out, "\b", 1); break;
        case 'f': buf_put(out, "\f", 1); break;
        case 'n': buf_put(out, "\n", 1); break;
        case 'r': buf_put(out, "\r", 1); break;
        case 't': buf_put(out, "\t", 1); break;
        case 'u': {
            uint32_t u, lo;
            if (i + 5 > n - 1 || read_u4(s + i + 1, &u)) return -1;
            i += 4;
            if (u >= 0xd800 && u < 0xdc00) { // surrogate pair
                if (i + 7 > n - 1 || s[i + 1] != '\\' || s[i + 2] != 'u' || read_u4(s + i + 3, &lo) || lo < 0xdc00 || lo > 0xdfff)
                    return -1;
                u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
                i += 6;
            }
            put_utf8(out, u);
            break;
        }
        default: return -1;
        }
    }
    return 1;
}

static void show(const char *label, const char *p, size_t n) {
    fprintf(stderr, "  %s (%zu bytes): \"", label, n);
    for (size_t i = 0; i < n && i < 80; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c >= 32 && c < 127 && c != '"') fputc(c, stderr);
        else fprintf(stderr, "\\x%02x", c);
    }
    fprintf(stderr, "%s\"\n", n > 80 ? "..." : "");
}

static int cmd_check(const char *file, const char *column, const char *sidecar) {
    char err[ERR_LEN];
    size_t side_len;
    char *side = read_file(sidecar, &side_len, err, sizeof err);
    if (!side) { fprintf(stderr, "%s\n", err); return 1; }
    ParquetReader *r = parquet_open(file, column, err, sizeof err);
    if (!r) { fprintf(stderr, "FAIL %s\n", err); free(side); return 1; }
    Buf want = {0};
    int64_t row = 0, nulls = 0, empties = 0, longs = 0, non_ascii = 0, bytes = 0;
    const char *line = side, *end = side + side_len;
    int bad = 0;
    for (;;) {
        const char *p;
        size_t len;
        int is_null = -1;
        int rc = parquet_next(r, &p, &len, &is_null, err, sizeof err);
        if (rc < 0) { fprintf(stderr, "FAIL row %lld: %s\n", (long long)row, err); bad = 1; break; }
        if (line >= end) {
            if (rc == 1) { fprintf(stderr, "FAIL %s: more rows than the sidecar's %lld\n", file, (long long)row); bad = 1; }
            break;
        }
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        size_t ll = nl ? (size_t)(nl - line) : (size_t)(end - line);
        int kind = parse_json_line(line, ll, &want);
        if (kind < 0) { fprintf(stderr, "FAIL %s line %lld: not a JSON string or null\n", sidecar, (long long)row + 1); bad = 1; break; }
        line += ll + 1;
        if (rc == 0) { fprintf(stderr, "FAIL %s: ends after %lld rows, the sidecar has more\n", file, (long long)row); bad = 1; break; }
        if (kind == 0) {
            nulls++;
            if (!is_null || len != 0) { fprintf(stderr, "FAIL %s row %lld: expected null, got a value\n", file, (long long)row); show("got", p, len); bad = 1; break; }
        } else {
            if (is_null || len != want.n || memcmp(p, want.p ? want.p : "", len)) {
                size_t d = 0;
                while (d < len && d < want.n && p[d] == want.p[d]) d++;
                fprintf(stderr, "FAIL %s row %lld: value differs%s (first difference at byte %zu)\n", file, (long long)row,
                        is_null ? " (got null)" : "", d);
                show("expected", want.p ? want.p : "", want.n);
                show("got", p, len);
                bad = 1;
                break;
            }
            empties += len == 0;
            longs += len > 65536;
            bytes += (int64_t)len;
            for (size_t i = 0; i < len; i++)
                if ((unsigned char)p[i] >= 0x80) { non_ascii++; break; }
        }
        row++;
    }
    if (!bad) {
        // At the end, further calls keep saying "end"; the row count matches the footer's.
        const char *p;
        size_t len;
        int rc = parquet_next(r, &p, &len, NULL, err, sizeof err);
        if (rc != 0) { fprintf(stderr, "FAIL %s: parquet_next after the end returned %d\n", file, rc); bad = 1; }
        if (parquet_num_rows(r) != row) {
            fprintf(stderr, "FAIL %s: parquet_num_rows %lld, read %lld\n", file, (long long)parquet_num_rows(r), (long long)row);
            bad = 1;
        }
    }
    if (!bad)
        printf("ok %s [%s]: %lld rows = sidecar (%lld null, %lld empty, %lld > 64 KiB, %lld non-ASCII, %.2f MB)\n", file,
               column, (long long)row, (long long)nulls, (long long)empties, (long long)longs, (long long)non_ascii, bytes / 1e6);
    parquet_close(r);
    buf_free(&want);
    free(side);
    return bad;
}

// Opens and reads every value; returns 0 if all went well, -1 with err otherwise.
static int read_all(const char *file, const char *column, int64_t *values, char *err, size_t errlen) {
    ParquetReader *r = parquet_open(file, column, err, errlen);
    if (!r) return -1;
    const char *p;
    size_t len;
    int is_null, rc;
    *values = 0;
    while ((rc = parquet_next(r, &p, &len, &is_null, err, errlen)) == 1) {
        (*values)++;
        if (is_null && len != 0) { parquet_close(r); return set_err(err, errlen, "null value with length %zu", len); }
    }
    if (rc < 0) {
        // The error is sticky: asking again gives the same message.
        char again[ERR_LEN];
        if (parquet_next(r, &p, &len, NULL, again, sizeof again) != -1 || strcmp(again, err)) {
            parquet_close(r);
            return set_err(err, errlen, "STICKY: error not repeated");
        }
    }
    parquet_close(r);
    return rc < 0 ? -1 : 0;
}

static int cmd_expect_error(const char *file, const char *column, const char *want) {
    char err[ERR_LEN] = "";
    int64_t n;
    if (read_all(file, column, &n, err, sizeof err) == 0) {
        fprintf(stderr, "FAIL %s [%s]: read %lld values, expected an error containing '%s'\n", file, column, (long long)n, want);
        return 1;
    }
    if (strncmp(err, file, strlen(file)) && !strstr(err, file)) {
        fprintf(stderr, "FAIL %s [%s]: error does not name the file: %s\n", file, column, err);
        return 1;
    }
    if (!strstr(err, want)) {
        fprintf(stderr, "FAIL %s [%s]: error lacks '%s': %s\n", file, column, want, err);
        return 1;
    }
    printf("ok error: %s\n", err);
    return 0;
}

static uint64_t rng_state;
static uint64_t rnd(void) { // splitmix64
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int cmd_mutate(const char *file, const char *column, int n, uint64_t seed) {
    char err[ERR_LEN];
    size_t len;
    uint8_t *orig = (uint8_t *)read_file(file, &len, err, sizeof err);
    if (!orig) { fprintf(stderr, "%s\n", err); return 1; }
    if (len < 64) { fprintf(stderr, "%s: too small to mutate\n", file); free(orig); return 1; }
    uint32_t footer_len = (uint32_t)orig[len - 8] | (uint32_t)orig[len - 7] << 8 | (uint32_t)orig[len - 6] << 16 |
                          (uint32_t)orig[len - 5] << 24;
    size_t footer_start = footer_len + 8 < len ? len - 8 - footer_len : 0;
    rng_state = seed;
    uint8_t *m = xmalloc(len);
    int bad = 0, read_ok = 0, errors = 0, truncations = 0;
    for (int i = 0; i < n && !bad; i++) {
        memcpy(m, orig, len);
        size_t mlen = len;
        int kind = i % 4;
        if (kind == 0) { // flip bytes in the footer
            int k = 1 + (int)(rnd() % 4);
            for (int j = 0; j < k; j++) m[footer_start + rnd() % (len - footer_start)] ^= (uint8_t)(1 + rnd() % 255);
        } else if (kind == 1) { // flip bytes anywhere
            int k = 1 + (int)(rnd() % 8);
            for (int j = 0; j < k; j++) m[rnd() % len] ^= (uint8_t)(1 + rnd() % 255);
        } else if (kind == 2) { // truncate
            mlen = rnd() % len;
        } else { // cut a range out of the page data: every offset after it shifts
            size_t a = 4 + rnd() % (footer_start > 8 ? footer_start - 4 : 1), b = a + 1 + rnd() % 64;
            if (b > len) b = len;
            memmove(m + a, m + b, len - b);
            mlen = len - (b - a);
        }
        char *path = temp_file(m, mlen);
        int64_t values;
        int rc = read_all(path, column, &values, err, sizeof err);
        if (rc == 0) read_ok++;
        else {
            errors++;
            if (getenv("TEST_PARQUET_VERBOSE")) printf("  mutation %d (kind %d): %s\n", i, kind, err);
            if (strncmp(err, path, strlen(path)) && strncmp(err, "cannot open", 11)) {
                fprintf(stderr, "FAIL mutation %d (kind %d): error does not start with the file name: %s\n", i, kind, err);
                bad = 1;
            }
            if (strstr(err, "STICKY")) { fprintf(stderr, "FAIL mutation %d: %s\n", i, err); bad = 1; }
        }
        if (kind == 2) {
            truncations++;
            if (rc == 0) { fprintf(stderr, "FAIL truncation to %zu of %zu bytes was read without error\n", mlen, len); bad = 1; }
        }
        unlink(path);
        free(path);
    }
    printf("%s %s: %d mutations: %d read to the end, %d errors (all %d truncations failed); no crash\n",
           bad ? "FAIL" : "ok", file, n, read_ok, errors, truncations);
    free(m);
    free(orig);
    return bad;
}

static int cmd_bench(const char *file, const char *column) {
    char err[ERR_LEN];
    double best = 1e30;
    int64_t bytes = 0, rows = 0;
    for (int pass = 0; pass < 3; pass++) {
        double t0 = now_sec();
        ParquetReader *r = parquet_open(file, column, err, sizeof err);
        if (!r) { fprintf(stderr, "%s\n", err); return 1; }
        const char *p;
        size_t len;
        int rc;
        bytes = rows = 0;
        while ((rc = parquet_next(r, &p, &len, NULL, err, sizeof err)) == 1) {
            bytes += (int64_t)len;
            rows++;
        }
        parquet_close(r);
        if (rc < 0) { fprintf(stderr, "%s\n", err); return 1; }
        double dt = now_sec() - t0;
        if (dt < best) best = dt;
    }
    printf("bench %s: %lld rows, %.1f MB of text in %.3f s = %.0f MB/s (best of 3)\n", file, (long long)rows, bytes / 1e6,
           best, bytes / 1e6 / best);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "--check")) return cmd_check(argv[2], argv[3], argv[4]);
    if (argc == 5 && !strcmp(argv[1], "--expect-error")) return cmd_expect_error(argv[2], argv[3], argv[4]);
    if (argc == 6 && !strcmp(argv[1], "--mutate"))
        return cmd_mutate(argv[2], argv[3], atoi(argv[4]), strtoull(argv[5], NULL, 10));
    if (argc == 4 && !strcmp(argv[1], "--bench")) return cmd_bench(argv[2], argv[3]);
    if (argc != 1) {
        fprintf(stderr, "usage: test_parquet [--check FILE COLUMN SIDECAR | --expect-error FILE COLUMN TEXT |\n"
                        "                     --mutate FILE COLUMN N SEED | --bench FILE COLUMN]\n");
        return 2;
    }
    test_thrift();
    test_hybrid();
    test_delta();
    test_codecs();
    test_open_errors();
    test_built_files();
    printf("test_parquet: %d checks, %d failed\n", checks, failures);
    return failures != 0;
}
