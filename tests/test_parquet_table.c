// test_parquet_table.c: tests for the Parquet table reader (parquet_read_table in data/parquet.h).
//   test_parquet_table                              unit tests on files built here byte by byte: the legacy
//                                                   2-level LIST forms ("array", "<name>_tuple", repeated groups
//                                                   of several fields), bare REPEATED fields, lists of lists,
//                                                   nulls at every nesting level, every scalar type and integer
//                                                   annotation, column selection, accessors, and the errors
//                                                   (unsupported types, malformed LISTs, inconsistent levels)
//   test_parquet_table --check FILE SIDECAR [COLS]  every row equals the sidecar's (JSON Lines, one object per
//                                                   row); COLS: comma-separated columns to read (default all)
//   test_parquet_table --expect-error FILE TEXT [COLS]  reading fails, with a message naming FILE and holding TEXT
//   test_parquet_table --mutate FILE N SEED         N corrupted copies (byte flips, truncations, cut-out ranges):
//                                                   never a crash (run it under ASan), errors name the file,
//                                                   every truncated copy fails
// Exits non-zero on any failure.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/parquet.h"
#include "data/pq_format.h"
#include "data/pq_thrift.h"
#include "util/common.h"

#include "check.h"

static char *temp_file(const void *p, size_t n) {
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    size_t n_path = strlen(dir) + 40;
    char *path = xmalloc(n_path);
    snprintf(path, n_path, "%s/test_parquet_table.XXXXXX", dir);
    int fd = mkstemp(path);
    if (fd < 0) die("mkstemp %s: %s", path, strerror(errno));
    if (write(fd, p, n) != (ssize_t)n) die("write %s: %s", path, strerror(errno));
    close(fd);
    return path;
}

// ---------------------------------------------------------------------------------------------------------
// JSON comparison: exact (numbers with ==, keys in order), reporting where the first difference is.

static void show_json(const cJSON *v, char *out, size_t n) {
    char *s = v ? cJSON_PrintUnformatted(v) : NULL;
    snprintf(out, n, "%.150s", s ? s : "(nothing)");
    free(s);
}

static int json_same(const cJSON *a, const cJSON *b, char *where, size_t n) {
    char x[200], y[200];
    int ok = 1;
    if (!a || !b || (a->type & 0xff) != (b->type & 0xff)) ok = 0;
    else if (cJSON_IsNumber(a)) ok = a->valuedouble == b->valuedouble || (isnan(a->valuedouble) && isnan(b->valuedouble));
    else if (cJSON_IsString(a)) ok = !strcmp(a->valuestring, b->valuestring);
    else if (cJSON_IsArray(a) || cJSON_IsObject(a)) {
        if (cJSON_GetArraySize(a) != cJSON_GetArraySize(b)) ok = 0;
        const cJSON *p = a->child, *q = b->child;
        for (int i = 0; ok && p && q; i++, p = p->next, q = q->next) {
            size_t len = strlen(where);
            if (cJSON_IsObject(a)) {
                if (strcmp(p->string, q->string)) {
                    snprintf(where + len, n - len, ": key %d is '%s', want '%s'", i, q->string, p->string);
                    return 0;
                }
                snprintf(where + len, n - len, ".%s", p->string);
            } else {
                snprintf(where + len, n - len, "[%d]", i);
            }
            if (!json_same(p, q, where, n)) return 0;
            where[len] = 0;
        }
    }
    if (!ok) {
        size_t len = strlen(where);
        show_json(a, x, sizeof x);
        show_json(b, y, sizeof y);
        snprintf(where + len, n - len, ": want %s, got %s", x, y);
    }
    return ok;
}

// ---------------------------------------------------------------------------------------------------------
// A minimal Parquet writer: one row group, one uncompressed v1 data page per leaf, PLAIN values, levels as
// RLE/bit-packed hybrid runs. The schema, levels and values are written out by hand in each test.

typedef struct {
    Buf b;
    int16_t last[16];
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
static void tw_list(TW *w, int id, int elem, int n) {
    tw_field(w, id, TC_LIST);
    if (n < 15) tw_byte(w, (uint8_t)(n << 4 | elem));
    else { tw_byte(w, (uint8_t)(0xf0 | elem)); tw_varint(w, (uint64_t)n); }
}
static void tw_begin(TW *w, int id) { // id 0: a struct that is a list element (no field header)
    if (id) tw_field(w, id, TC_STRUCT);
    w->last[++w->depth] = 0;
}
static void tw_end(TW *w) { tw_byte(w, 0); w->depth--; }

typedef struct {
    const char *name;
    int type;         // physical type; -1 for a group
    int repetition;   // -1 for the root
    int children;     // groups
    int converted;    // CT_*, -1 none
    int logical;      // LT_*, -1 none (LT_INTEGER uses bits/is_signed)
    int bits, is_signed;
} TElem;
#define GROUP(name, rep, n, conv) {name, -1, rep, n, conv, -1, 0, 0}
#define LEAF(name, type, rep, conv) {name, type, rep, 0, conv, -1, 0, 0}

typedef struct {
    int n, max_rep, max_def;
    const uint8_t *rep, *def; // n levels each (unused when the max is 0)
    Buf vals;                 // PLAIN values of the defined entries
    int split, vsplit;        // > 0: a second row group starts at entry `split`, value byte `vsplit`
} TCol;

static void v_str(TCol *c, const char *s, size_t n) {
    uint8_t le[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
    buf_put(&c->vals, le, 4);
    buf_put(&c->vals, s, n);
}
static void v_s(TCol *c, const char *s) { v_str(c, s, strlen(s)); }
static void v_i32(TCol *c, int32_t v) { buf_put(&c->vals, &v, 4); } // little-endian host
static void v_i64(TCol *c, int64_t v) { buf_put(&c->vals, &v, 8); }
static void v_f32(TCol *c, float v) { buf_put(&c->vals, &v, 4); }
static void v_f64(TCol *c, double v) { buf_put(&c->vals, &v, 8); }

static int bits_for(int max) {
    int b = 0;
    while (max >> b) b++;
    return b;
}

// Levels as one bit-packed run of the hybrid encoding, with the v1 u32 length prefix.
static void put_levels(Buf *out, const uint8_t *lv, int n, int max) {
    int w = bits_for(max), groups = (n + 7) / 8;
    TW h = {0};
    tw_varint(&h, (uint64_t)groups << 1 | 1);
    size_t nbytes = (size_t)groups * (size_t)w;
    uint8_t *packed = xcalloc(nbytes + 1, 1);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < w; k++)
            if (lv[i] >> k & 1) packed[(i * w + k) / 8] |= (uint8_t)(1u << ((i * w + k) % 8));
    uint32_t len = (uint32_t)(h.b.n + nbytes);
    uint8_t le[4] = {(uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16), (uint8_t)(len >> 24)};
    buf_put(out, le, 4);
    buf_put(out, h.b.p, h.b.n);
    buf_put(out, packed, nbytes);
    buf_free(&h.b);
    free(packed);
}

static void write_elem(TW *w, const TElem *e) {
    tw_begin(w, 0);
    if (e->type >= 0) tw_i32(w, 1, e->type);
    if (e->repetition >= 0) tw_i32(w, 3, e->repetition);
    tw_bin(w, 4, e->name);
    if (e->type < 0) tw_i32(w, 5, e->children);
    if (e->converted >= 0) tw_i32(w, 6, e->converted);
    if (e->logical >= 0) { // LogicalType union: field <logical> holding an empty struct (or IntType)
        tw_begin(w, 10);
        tw_begin(w, e->logical);
        if (e->logical == LT_INTEGER) {
            tw_field(w, 1, TC_BYTE);
            tw_byte(w, (uint8_t)e->bits);
            tw_field(w, 2, e->is_signed ? TC_TRUE : TC_FALSE);
        }
        tw_end(w);
        tw_end(w);
    }
    tw_end(w);
}

// Builds the file: schema[0] is the root; cols[] in leaf order; rg_rows < 0: the row groups hold `rows` (one
// row group, or two when the columns have a split).
static char *build(const TElem *schema, int nschema, TCol *cols, int ncols, int64_t rows, int64_t rg_rows) {
    Buf f = {0};
    buf_put(&f, "PAR1", 4);
    // The leaves' paths: a stack of open groups with their children left.
    const char *path[16][16];
    int plen[16], ntype[16];
    int depth = 0, left[16] = {0}, leaf = 0;
    const char *stack[16];
    for (int i = 1; i < nschema && leaf < 16; i++) {
        while (depth > 0 && left[depth - 1] == 0) depth--;
        if (depth > 0) left[depth - 1]--;
        if (schema[i].type < 0) {
            stack[depth] = schema[i].name;
            left[depth++] = schema[i].children;
        } else {
            for (int k = 0; k < depth; k++) path[leaf][k] = stack[k];
            path[leaf][depth] = schema[i].name;
            plen[leaf] = depth + 1;
            ntype[leaf] = schema[i].type;
            leaf++;
        }
    }
    if (leaf != ncols) die("test bug: %d leaves in the schema, %d columns given", leaf, ncols);
    int nrg = ncols > 0 && cols[0].split > 0 ? 2 : 1;
    int64_t offs[2][16], sizes[2][16], counts[2][16], group_rows[2] = {rows, 0};
    for (int g = 0; g < nrg; g++)
        for (int c = 0; c < ncols; c++) {
            TCol *col = &cols[c];
            int lo = g ? col->split : 0, hi = nrg == 2 && !g ? col->split : col->n;
            size_t vlo = g ? (size_t)col->vsplit : 0, vhi = nrg == 2 && !g ? (size_t)col->vsplit : col->vals.n;
            Buf body = {0};
            if (col->max_rep) put_levels(&body, col->rep + lo, hi - lo, col->max_rep);
            if (col->max_def) put_levels(&body, col->def + lo, hi - lo, col->max_def);
            buf_put(&body, col->vals.p + vlo, vhi - vlo);
            if (nrg == 2 && c == 0) { // rows: entries that start one (repetition level 0)
                group_rows[g] = 0;
                for (int k = lo; k < hi; k++) group_rows[g] += !col->max_rep || col->rep[k] == 0;
            }
            TW h = {0};
            tw_i32(&h, 1, PAGE_DATA);
            tw_i32(&h, 2, (int64_t)body.n);
            tw_i32(&h, 3, (int64_t)body.n);
            tw_begin(&h, 5);
            tw_i32(&h, 1, hi - lo);
            tw_i32(&h, 2, ENC_PLAIN);
            tw_i32(&h, 3, ENC_RLE);
            tw_i32(&h, 4, ENC_RLE);
            tw_end(&h);
            tw_byte(&h, 0);
            offs[g][c] = (int64_t)f.n;
            counts[g][c] = hi - lo;
            buf_put(&f, h.b.p, h.b.n);
            buf_put(&f, body.p, body.n);
            sizes[g][c] = (int64_t)f.n - offs[g][c];
            buf_free(&h.b);
            buf_free(&body);
        }
    for (int c = 0; c < ncols; c++) buf_free(&cols[c].vals);
    TW w = {0};
    tw_i32(&w, 1, 1);
    tw_list(&w, 2, TC_STRUCT, nschema);
    for (int i = 0; i < nschema; i++) write_elem(&w, &schema[i]);
    tw_i64(&w, 3, rows);
    tw_list(&w, 4, TC_STRUCT, nrg);
    for (int g = 0; g < nrg; g++) {
        tw_begin(&w, 0);
        tw_list(&w, 1, TC_STRUCT, ncols);
        for (int c = 0; c < ncols; c++) {
            tw_begin(&w, 0);
            tw_i64(&w, 2, offs[g][c]);
            tw_begin(&w, 3);
            tw_i32(&w, 1, ntype[c]);
            tw_list(&w, 2, TC_I32, 2); tw_zz(&w, ENC_PLAIN); tw_zz(&w, ENC_RLE);
            tw_list(&w, 3, TC_BINARY, plen[c]);
            for (int k = 0; k < plen[c]; k++) tw_str(&w, path[c][k]);
            tw_i32(&w, 4, 0);
            tw_i64(&w, 5, counts[g][c]);
            tw_i64(&w, 6, sizes[g][c]);
            tw_i64(&w, 7, sizes[g][c]);
            tw_i64(&w, 9, offs[g][c]);
            tw_end(&w);
            tw_end(&w);
        }
        tw_i64(&w, 2, (int64_t)f.n - 4);
        tw_i64(&w, 3, rg_rows >= 0 ? rg_rows : group_rows[g]);
        tw_end(&w);
    }
    tw_byte(&w, 0);
    uint32_t len = (uint32_t)w.b.n;
    buf_put(&f, w.b.p, w.b.n);
    uint8_t le[4] = {(uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16), (uint8_t)(len >> 24)};
    buf_put(&f, le, 4);
    buf_put(&f, "PAR1", 4);
    buf_free(&w.b);
    char *p = temp_file(f.p, f.n);
    buf_free(&f);
    return p;
}

// Reads the file (columns: NULL = all) and compares the rows with `want`, a JSON array of row objects.
static void expect_rows(const char *what, char *path, const char *const *columns, int ncolumns, const char *want) {
    char err[ERR_LEN] = "";
    cJSON *w = cJSON_Parse(want);
    if (!w) die("test bug: %s: expected rows are not JSON", what);
    ParquetTable *t = parquet_read_table(path, columns, ncolumns, err, sizeof err);
    CHECK(t, "%s: %s", what, err);
    if (t) {
        CHECK(parquet_table_num_rows(t) == cJSON_GetArraySize(w), "%s: %lld rows, want %d", what,
              (long long)parquet_table_num_rows(t), cJSON_GetArraySize(w));
        int i = 0;
        for (const cJSON *row = w->child; row && i < parquet_table_num_rows(t); row = row->next, i++) {
            char where[600];
            snprintf(where, sizeof where, "row %d", i);
            CHECK(json_same(row, parquet_table_row(t, i), where, sizeof where), "%s: %s", what, where);
        }
        parquet_table_free(t);
    }
    cJSON_Delete(w);
    unlink(path);
    free(path);
}

static void expect_error(const char *what, char *path, const char *const *columns, int ncolumns, const char *want) {
    char err[ERR_LEN] = "";
    ParquetTable *t = parquet_read_table(path, columns, ncolumns, err, sizeof err);
    CHECK(!t && !strncmp(err, path, strlen(path)) && strstr(err, want), "%s: want an error naming the file with '%s', got '%s'",
          what, want, t ? "(read)" : err);
    if (getenv("TEST_PARQUET_VERBOSE")) printf("  %s: %s\n", what, err);
    parquet_table_free(t);
    unlink(path);
    free(path);
}

// ---------------------------------------------------------------------------------------------------------
// Unit tests

static void test_two_level_lists(void) {
    // optional group tags (LIST) { repeated binary array (UTF8) }: the repeated primitive is the element.
    // Levels: tags defined = 1, an element = 2; a new element repeats at 1.
    // Rows ["a","b"], [], null, ["c"], [""].
    TElem s[] = {GROUP("schema", -1, 1, -1), GROUP("tags", REP_OPTIONAL, 1, CT_LIST),
                 LEAF("array", PT_BYTE_ARRAY, REP_REPEATED, CT_UTF8)};
    static const uint8_t rep[] = {0, 1, 0, 0, 0, 0}, def[] = {2, 2, 1, 0, 2, 2};
    TCol c[1] = {{6, 1, 2, rep, def, {0}}};
    v_s(&c[0], "a"), v_s(&c[0], "b"), v_s(&c[0], "c"), v_s(&c[0], "");
    expect_rows("2-level list of strings", build(s, 3, c, 1, 5, -1), NULL, 0,
                "[{\"tags\":[\"a\",\"b\"]},{\"tags\":[]},{\"tags\":null},{\"tags\":[\"c\"]},{\"tags\":[\"\"]}]");

    // A repeated group named "<list>_tuple", and one named "array", are the elements (structs of one field).
    //   optional group pairs (LIST) { repeated group pairs_tuple { required binary k } }: k max_def 2
    //   required group arr (LIST) { repeated group array { optional int32 v } }:          v max_def 2
    // Rows: pairs [{k:x},{k:y}] arr [{v:1},{v:null}]; pairs [] arr []; pairs null arr [{v:7}].
    TElem s2[] = {GROUP("schema", -1, 2, -1), GROUP("pairs", REP_OPTIONAL, 1, CT_LIST),
                  GROUP("pairs_tuple", REP_REPEATED, 1, -1), LEAF("k", PT_BYTE_ARRAY, REP_REQUIRED, CT_UTF8),
                  GROUP("arr", REP_REQUIRED, 1, CT_LIST), GROUP("array", REP_REPEATED, 1, -1),
                  LEAF("v", PT_INT32, REP_OPTIONAL, -1)};
    static const uint8_t krep[] = {0, 1, 0, 0}, kdef[] = {2, 2, 1, 0};
    static const uint8_t vrep[] = {0, 1, 0, 0}, vdef[] = {2, 1, 0, 2};
    TCol c2[2] = {{4, 1, 2, krep, kdef, {0}}, {4, 1, 2, vrep, vdef, {0}}};
    v_s(&c2[0], "x"), v_s(&c2[0], "y");
    v_i32(&c2[1], 1), v_i32(&c2[1], 7);
    expect_rows("_tuple and array groups", build(s2, 7, c2, 2, 3, -1), NULL, 0,
                "[{\"pairs\":[{\"k\":\"x\"},{\"k\":\"y\"}],\"arr\":[{\"v\":1},{\"v\":null}]},"
                "{\"pairs\":[],\"arr\":[]},{\"pairs\":null,\"arr\":[{\"v\":7}]}]");
}

static void test_repeated_forms(void) {
    //   required group pts (LIST) { repeated group point { required int32 x; optional int64 y } }  (a group of
    //     several fields is the element); x: max_def 1, y: max_def 2
    //   repeated int64 nums                    (a bare repeated field, no LIST annotation): max_def 1
    //   required group l (LIST) { repeated group list { required binary element } }  (3-level): max_def 1
    // Rows: pts [{x:1,y:2},{x:3,y:null}] nums [10,-20,30] l [p,q]; all empty; pts [{x:-5,y:null}] nums [4] l [r].
    TElem s[] = {GROUP("schema", -1, 3, -1),
                 GROUP("pts", REP_REQUIRED, 1, CT_LIST), GROUP("point", REP_REPEATED, 2, -1),
                 LEAF("x", PT_INT32, REP_REQUIRED, -1), LEAF("y", PT_INT64, REP_OPTIONAL, -1),
                 LEAF("nums", PT_INT64, REP_REPEATED, -1),
                 GROUP("l", REP_REQUIRED, 1, CT_LIST), GROUP("list", REP_REPEATED, 1, -1),
                 LEAF("element", PT_BYTE_ARRAY, REP_REQUIRED, CT_UTF8)};
    static const uint8_t xrep[] = {0, 1, 0, 0}, xdef[] = {1, 1, 0, 1};
    static const uint8_t yrep[] = {0, 1, 0, 0}, ydef[] = {2, 1, 0, 1};
    static const uint8_t nrep[] = {0, 1, 1, 0, 0}, ndef[] = {1, 1, 1, 0, 1};
    static const uint8_t lrep[] = {0, 1, 0, 0}, ldef[] = {1, 1, 0, 1};
    TCol c[4] = {{4, 1, 1, xrep, xdef, {0}}, {4, 1, 2, yrep, ydef, {0}}, {5, 1, 1, nrep, ndef, {0}},
                 {4, 1, 1, lrep, ldef, {0}}};
    v_i32(&c[0], 1), v_i32(&c[0], 3), v_i32(&c[0], -5);
    v_i64(&c[1], 2);
    v_i64(&c[2], 10), v_i64(&c[2], -20), v_i64(&c[2], 30), v_i64(&c[2], 4);
    v_s(&c[3], "p"), v_s(&c[3], "q"), v_s(&c[3], "r");
    expect_rows("repeated groups, bare repeated, 3-level", build(s, 9, c, 4, 3, -1), NULL, 0,
                "[{\"pts\":[{\"x\":1,\"y\":2},{\"x\":3,\"y\":null}],\"nums\":[10,-20,30],\"l\":[\"p\",\"q\"]},"
                "{\"pts\":[],\"nums\":[],\"l\":[]},"
                "{\"pts\":[{\"x\":-5,\"y\":null}],\"nums\":[4],\"l\":[\"r\"]}]");
}

static void test_list_of_lists(void) {
    // optional group m (LogicalType LIST) { repeated group list { optional group element (LIST) {
    //   repeated group list { optional int32 element } } } }
    // Definition levels: m 1, outer list 2, outer element 3, inner list 4, inner element 5; repetition: 1, 2.
    // Rows [[1,null],[],null,[2]], null, [], [[]]:
    //   (r0 d5 1) (r2 d4) (r1 d3) (r1 d2) (r1 d5 2) | (r0 d0) | (r0 d1) | (r0 d3)
    TElem s[] = {GROUP("schema", -1, 1, -1),
                 {"m", -1, REP_OPTIONAL, 1, -1, LT_LIST, 0, 0},
                 GROUP("list", REP_REPEATED, 1, -1),
                 GROUP("element", REP_OPTIONAL, 1, CT_LIST),
                 GROUP("list", REP_REPEATED, 1, -1),
                 LEAF("element", PT_INT32, REP_OPTIONAL, -1)};
    static const uint8_t rep[] = {0, 2, 1, 1, 1, 0, 0, 0}, def[] = {5, 4, 3, 2, 5, 0, 1, 3};
    TCol c[1] = {{8, 2, 5, rep, def, {0}}};
    v_i32(&c[0], 1), v_i32(&c[0], 2);
    expect_rows("list of lists", build(s, 6, c, 1, 4, -1), NULL, 0,
                "[{\"m\":[[1,null],[],null,[2]]},{\"m\":null},{\"m\":[]},{\"m\":[[]]}]");
    // The same rows in two row groups: rows 0-1 (entries 0-5, value bytes 0-8), then rows 2-3.
    TCol c2[1] = {{8, 2, 5, rep, def, {0}, 6, 8}};
    v_i32(&c2[0], 1), v_i32(&c2[0], 2);
    expect_rows("list of lists, 2 row groups", build(s, 6, c2, 1, 4, -1), NULL, 0,
                "[{\"m\":[[1,null],[],null,[2]]},{\"m\":null},{\"m\":[]},{\"m\":[[]]}]");
    // A second row group that starts inside row 0's list (at its 3rd entry, repetition level 1).
    TCol c3[1] = {{8, 2, 5, rep, def, {0}, 2, 4}};
    v_i32(&c3[0], 1), v_i32(&c3[0], 2);
    expect_error("row group starting inside a list", build(s, 6, c3, 1, 4, -1), NULL, 0,
                 "column 'm.list.element.list.element', row group 1, page at offset 40: the column chunk's first value "
                 "has repetition level 1");
}

// The scalar types and struct nesting of test_scalars_and_structs, shared with the selection/error tests.
static const TElem scalar_schema[] = {
    GROUP("schema", -1, 8, -1),
    LEAF("b", PT_BOOLEAN, REP_OPTIONAL, -1),
    LEAF("f", PT_FLOAT, REP_REQUIRED, -1),
    LEAF("d", PT_DOUBLE, REP_OPTIONAL, -1),
    LEAF("u32", PT_INT32, REP_REQUIRED, CT_UINT_32),
    {"u64", PT_INT64, REP_REQUIRED, 0, -1, LT_INTEGER, 64, 0},
    LEAF("i8", PT_INT32, REP_REQUIRED, CT_INT_8),
    GROUP("s", REP_OPTIONAL, 2, -1), GROUP("t", REP_REQUIRED, 1, -1),
    {"u", PT_BYTE_ARRAY, REP_OPTIONAL, 0, -1, LT_STRING, 0, 0},
    LEAF("v", PT_INT32, REP_OPTIONAL, -1),
    LEAF("raw", PT_BYTE_ARRAY, REP_REQUIRED, -1),
};
static char *scalar_file(void) {
    // s.t.u: s 1, t required, u 2; s.v: s 1, v 2.  Rows: s {t:{u:q},v:1}; s null; s {t:{u:null},v:null}.
    static const uint8_t d1[] = {1, 0, 1}, u_def[] = {2, 0, 1}, v_def[] = {2, 0, 1};
    TCol c[9] = {{3, 0, 1, NULL, d1, {0}}, {3, 0, 0, NULL, NULL, {0}}, {3, 0, 1, NULL, d1, {0}},
                 {3, 0, 0, NULL, NULL, {0}}, {3, 0, 0, NULL, NULL, {0}}, {3, 0, 0, NULL, NULL, {0}},
                 {3, 0, 2, NULL, u_def, {0}}, {3, 0, 2, NULL, v_def, {0}}, {3, 0, 0, NULL, NULL, {0}}};
    buf_put(&c[0].vals, "\x01", 1); // PLAIN booleans, bit-packed LSB first: true, false
    v_f32(&c[1], 1.5f), v_f32(&c[1], -2.25f), v_f32(&c[1], 3.0f);
    v_f64(&c[2], 0.1), v_f64(&c[2], -1e300);
    v_i32(&c[3], (int32_t)4000000000u), v_i32(&c[3], 0), v_i32(&c[3], 1);
    v_i64(&c[4], -1), v_i64(&c[4], 5), v_i64(&c[4], 9007199254740993LL);
    v_i32(&c[5], -7), v_i32(&c[5], 127), v_i32(&c[5], 0);
    v_s(&c[6], "q");
    v_i32(&c[7], 1);
    v_str(&c[8], "nul\0byte", 8), v_s(&c[8], ""), v_s(&c[8], "pl\xc3\xa4in");
    return build(scalar_schema, 12, c, 9, 3, -1);
}

static void test_scalars_and_structs(void) {
    // Unsigned integers come back unsigned (UINT_32 converted type; INTEGER(64, unsigned) logical type); a
    // string stops at a NUL byte, as cJSON stops "\u0000" in a JSON Lines file.
    expect_rows("scalars and structs", scalar_file(), NULL, 0,
                "[{\"b\":true,\"f\":1.5,\"d\":0.1,\"u32\":4000000000,\"u64\":18446744073709551615,\"i8\":-7,"
                "\"s\":{\"t\":{\"u\":\"q\"},\"v\":1},\"raw\":\"nul\"},"
                "{\"b\":null,\"f\":-2.25,\"d\":null,\"u32\":0,\"u64\":5,\"i8\":127,\"s\":null,\"raw\":\"\"},"
                "{\"b\":false,\"f\":3,\"d\":-1e300,\"u32\":1,\"u64\":9007199254740993,\"i8\":0,"
                "\"s\":{\"t\":{\"u\":null},\"v\":null},\"raw\":\"pl\xc3\xa4in\"}]");
    // Only the columns asked for, in the order asked.
    const char *cols[] = {"s", "b"};
    expect_rows("selected columns", scalar_file(), cols, 2,
                "[{\"s\":{\"t\":{\"u\":\"q\"},\"v\":1},\"b\":true},{\"s\":null,\"b\":null},"
                "{\"s\":{\"t\":{\"u\":null},\"v\":null},\"b\":false}]");
    const char *none[] = {"s", "zzz"};
    expect_error("missing column", scalar_file(), none, 2, "no column 'zzz' (top-level columns: b, f, d, u32, u64, i8, s, raw)");
    const char *twice[] = {"f", "s", "f"};
    expect_error("column twice", scalar_file(), twice, 3, "column 'f' is asked for twice");
    // Accessors.
    char err[ERR_LEN] = "", *path = scalar_file();
    ParquetTable *t = parquet_read_table(path, NULL, 0, err, sizeof err);
    CHECK(t, "%s", err);
    if (t) {
        CHECK(parquet_table_num_columns(t) == 8 && !strcmp(parquet_table_column_name(t, 6), "s") &&
              !parquet_table_column_name(t, 8), "column names");
        const cJSON *f = parquet_table_get(t, 1, "f");
        CHECK(cJSON_IsNumber(f) && f->valuedouble == -2.25, "get(1, f)");
        CHECK(!parquet_table_get(t, 1, "nope") && !parquet_table_get(t, 3, "f") && !parquet_table_row(t, -1), "absent cells");
        cJSON *row = parquet_table_take_row(t, 2);
        CHECK(row && cJSON_IsFalse(cJSON_GetObjectItem(row, "b")) && !parquet_table_row(t, 2) &&
              !parquet_table_get(t, 2, "b"), "take_row");
        cJSON_Delete(row);
        parquet_table_free(t);
    }
    unlink(path);
    free(path);
}

static void test_unsupported(void) {
    // Each unsupported shape is refused with the column named; other columns are still readable.
    static const uint8_t d0[] = {0};
    struct {
        const char *what;
        TElem e[4];
        int n;
        const char *want;
    } cases[] = {
        {"INT96", {LEAF("ts", PT_INT96, REP_OPTIONAL, -1)}, 1, "column 'ts' has physical type INT96"},
        {"FIXED_LEN", {LEAF("fx", PT_FIXED_LEN_BYTE_ARRAY, REP_OPTIONAL, -1)}, 1,
         "column 'fx' has physical type FIXED_LEN_BYTE_ARRAY, which is not supported"},
        {"DATE", {LEAF("day", PT_INT32, REP_OPTIONAL, CT_DATE)}, 1, "column 'day' has converted type DATE"},
        {"TIMESTAMP", {{"when", PT_INT64, REP_OPTIONAL, 0, -1, LT_TIMESTAMP, 0, 0}}, 1,
         "column 'when' has logical type TIMESTAMP"},
        {"DECIMAL", {LEAF("price", PT_BYTE_ARRAY, REP_OPTIONAL, CT_DECIMAL)}, 1, "column 'price' has converted type DECIMAL"},
        {"annotated double", {LEAF("dd", PT_DOUBLE, REP_OPTIONAL, CT_UINT_8)}, 1, "column 'dd' has DOUBLE annotated UINT_8"},
        {"MAP", {GROUP("m", REP_OPTIONAL, 1, CT_MAP), GROUP("key_value", REP_REPEATED, 1, -1),
                 LEAF("key", PT_BYTE_ARRAY, REP_REQUIRED, CT_UTF8)}, 3, "column 'm' is a MAP, which is not supported"},
        {"LIST of an optional field", {GROUP("l", REP_OPTIONAL, 1, CT_LIST), LEAF("e", PT_INT32, REP_OPTIONAL, -1)}, 2,
         "column 'l' is annotated LIST but does not hold exactly one REPEATED field"},
        {"LIST of two fields", {GROUP("l2", REP_OPTIONAL, 2, CT_LIST), LEAF("a", PT_INT32, REP_REPEATED, -1),
                                LEAF("b", PT_INT32, REP_REPEATED, -1)}, 3,
         "column 'l2' is annotated LIST but does not hold exactly one REPEATED field"},
        {"LIST of an empty group", {GROUP("l3", REP_OPTIONAL, 1, CT_LIST), GROUP("list", REP_REPEATED, 0, -1)}, 2,
         "column 'l3.list' is a group without fields"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        // root { ok: required int32; <the case's subtree> }, no rows
        TElem s[6] = {GROUP("schema", -1, 2, -1), LEAF("ok", PT_INT32, REP_REQUIRED, -1)};
        for (int i = 0; i < cases[k].n; i++) s[2 + i] = cases[k].e[i];
        int leaves = 0;
        for (int i = 1; i < 2 + cases[k].n; i++) leaves += s[i].type >= 0;
        TCol c[4] = {{0}};
        for (int i = 0; i < leaves; i++) c[i] = (TCol){0, 1, 1, d0, d0, {0}};
        c[0] = (TCol){0, 0, 0, NULL, NULL, {0}};
        expect_error(cases[k].what, build(s, 2 + cases[k].n, c, leaves, 0, -1), NULL, 0, cases[k].want);
        const char *ok[] = {"ok"};
        for (int i = 0; i < leaves; i++) c[i] = (TCol){0, 1, 1, d0, d0, {0}};
        c[0] = (TCol){0, 0, 0, NULL, NULL, {0}};
        expect_rows(cases[k].what, build(s, 2 + cases[k].n, c, leaves, 0, -1), ok, 1, "[]");
    }
    // A group without fields.
    TElem e[] = {GROUP("schema", -1, 1, -1), GROUP("empty", REP_OPTIONAL, 0, -1)};
    expect_error("empty group", build(e, 2, NULL, 0, 0, -1), NULL, 0, "column 'empty' is a group without fields");
}

static void test_bad_levels(void) {
    // optional group s { optional int32 a; optional int32 b }: a says s is null (0) where b says b is set (2).
    TElem s[] = {GROUP("schema", -1, 1, -1), GROUP("s", REP_OPTIONAL, 2, -1), LEAF("a", PT_INT32, REP_OPTIONAL, -1),
                 LEAF("b", PT_INT32, REP_OPTIONAL, -1)};
    static const uint8_t a_def[] = {2, 0}, b_def[] = {2, 2};
    TCol c[2] = {{2, 0, 2, NULL, a_def, {0}}, {2, 0, 2, NULL, b_def, {0}}};
    v_i32(&c[0], 1), v_i32(&c[1], 2), v_i32(&c[1], 3);
    expect_error("struct fields disagree", build(s, 4, c, 2, 2, -1), NULL, 0,
                 "column 's.b', row 1: levels disagree between the fields of a struct or list");
    // The leaves of a list's element group disagree on where the element ends.
    TElem s2[] = {GROUP("schema", -1, 1, -1), GROUP("pts", REP_REQUIRED, 1, CT_LIST), GROUP("point", REP_REPEATED, 2, -1),
                  LEAF("x", PT_INT32, REP_REQUIRED, -1), LEAF("y", PT_INT32, REP_REQUIRED, -1)};
    // x holds rows [1, 2], [3]; y holds [4], [5, 6]: both 2 rows, but the first row's elements differ.
    static const uint8_t xr[] = {0, 1, 0}, yr[] = {0, 0, 1}, one[] = {1, 1, 1};
    TCol c2[2] = {{3, 1, 1, xr, one, {0}}, {3, 1, 1, yr, one, {0}}};
    v_i32(&c2[0], 1), v_i32(&c2[0], 2), v_i32(&c2[0], 3), v_i32(&c2[1], 4), v_i32(&c2[1], 5), v_i32(&c2[1], 6);
    expect_error("list element fields disagree", build(s2, 5, c2, 2, 2, -1), NULL, 0,
                 "column 'pts.point.y', row 0: repetition levels disagree between the fields of a list element");
    // A column chunk whose first entry continues a list (repetition level 1).
    TElem s3[] = {GROUP("schema", -1, 1, -1), LEAF("nums", PT_INT32, REP_REPEATED, -1)};
    static const uint8_t r1[] = {1, 0};
    TCol c3[1] = {{2, 1, 1, r1, one, {0}}};
    v_i32(&c3[0], 1), v_i32(&c3[0], 2);
    expect_error("first repetition level", build(s3, 2, c3, 1, 1, -1), NULL, 0,
                 "column 'nums', row group 0, page at offset 4: the column chunk's first value has repetition level 1, not 0");
    // A definition level above the column's maximum: optional group o { optional int32 v } has maximum 2,
    // stored at 2 bits, which can hold a 3.
    TElem s4[] = {GROUP("schema", -1, 1, -1), GROUP("o", REP_OPTIONAL, 1, -1), LEAF("v", PT_INT32, REP_OPTIONAL, -1)};
    static const uint8_t d3[] = {2, 3};
    TCol c4[1] = {{2, 0, 2, NULL, d3, {0}}};
    v_i32(&c4[0], 1), v_i32(&c4[0], 2);
    expect_error("level above maximum", build(s4, 3, c4, 1, 2, -1), NULL, 0,
                 "column 'o.v', row group 0, page at offset 4: definition level 3 > the column's maximum 2");
    // More rows in the row group than the column holds.
    TElem s5[] = {GROUP("schema", -1, 1, -1), LEAF("v", PT_INT32, REP_REQUIRED, -1)};
    TCol c5[1] = {{2, 0, 0, NULL, NULL, {0}}};
    v_i32(&c5[0], 1), v_i32(&c5[0], 2);
    expect_error("rows", build(s5, 2, c5, 1, 3, 3), NULL, 0, "column chunk holds 2 rows, the row group 3");
    // Values that end before the defined entries do.
    TCol c6[1] = {{2, 0, 0, NULL, NULL, {0}}};
    v_i32(&c6[0], 1);
    expect_error("values short", build(s5, 2, c6, 1, 2, -1), NULL, 0,
                 "PLAIN INT32 values truncated (2 values need 8 bytes, the page has 4)");
}

static void test_file_errors(void) {
    char err[ERR_LEN] = "";
    ParquetTable *t = parquet_read_table("/nonexistent/x.parquet", NULL, 0, err, sizeof err);
    CHECK(!t && strstr(err, "cannot open /nonexistent/x.parquet: No such file"), "%s", err);
    expect_error("tiny", temp_file("PAR1PAR1", 8), NULL, 0, "not a Parquet file (8 bytes");
    expect_error("tail magic", temp_file("PAR1\0\0\0\0\0\0\0\0PARX", 16), NULL, 0, "no PAR1 magic at the end");
    expect_error("footer length", temp_file("PAR1\0\0\0\0\xff\0\0\0PAR1", 16), NULL, 0, "footer length 255");
    expect_error("empty footer", temp_file("PAR1\x00\x01\0\0\0PAR1", 13), NULL, 0, "lacks its schema");
    // A sparse file just over the limit is refused before anything is read.
    char *big = temp_file("PAR1", 4);
    CHECK(truncate(big, PARQUET_TABLE_MAX_BYTES + 1) == 0, "truncate: %s", strerror(errno));
    expect_error("too large", big, NULL, 0, "1073741825 bytes: too large for the in-memory table reader");
    // No rows at all; a schema whose root has no fields.
    TElem e[] = {GROUP("schema", -1, 0, -1)};
    expect_rows("no fields", build(e, 1, NULL, 0, 0, -1), NULL, 0, "[]");
}

// ---------------------------------------------------------------------------------------------------------
// Files written by real writers (tests/t_parquet_table.sh)

static int split_cols(char *spec, const char **cols, int max) {
    int n = 0;
    for (char *save = NULL, *p = strtok_r(spec, ",", &save); p && n < max; p = strtok_r(NULL, ",", &save)) cols[n++] = p;
    return n;
}

static int cmd_check(const char *file, const char *sidecar, char *colspec) {
    const char *cols[64];
    int ncols = colspec ? split_cols(colspec, cols, 64) : 0;
    char err[ERR_LEN];
    size_t len;
    char *text = read_file(sidecar, &len, err, sizeof err);
    if (!text) { fprintf(stderr, "FAIL %s\n", err); return 1; }
    ParquetTable *t = parquet_read_table(file, colspec ? cols : NULL, ncols, err, sizeof err);
    if (!t) { fprintf(stderr, "FAIL %s\n", err); free(text); return 1; }
    int64_t row = 0, bad = 0;
    for (char *line = text, *next; *line && !bad; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        else next = line + strlen(line);
        if (!*line) continue;
        cJSON *want = cJSON_Parse(line);
        if (!want) { fprintf(stderr, "FAIL %s: line %lld is not JSON\n", sidecar, (long long)row + 1); bad = 1; break; }
        char where[800];
        snprintf(where, sizeof where, "row %lld", (long long)row);
        if (row >= parquet_table_num_rows(t)) {
            fprintf(stderr, "FAIL %s: %lld rows, the sidecar has more\n", file, (long long)parquet_table_num_rows(t));
            bad = 1;
        } else if (!json_same(want, parquet_table_row(t, row), where, sizeof where)) {
            fprintf(stderr, "FAIL %s: %s\n", file, where);
            bad = 1;
        }
        cJSON_Delete(want);
        row++;
    }
    if (!bad && row != parquet_table_num_rows(t)) {
        fprintf(stderr, "FAIL %s: %lld rows, the sidecar %lld\n", file, (long long)parquet_table_num_rows(t), (long long)row);
        bad = 1;
    }
    if (!bad) printf("ok %s: %lld rows x %d columns equal %s\n", file, (long long)row, parquet_table_num_columns(t), sidecar);
    parquet_table_free(t);
    free(text);
    return bad != 0;
}

static int cmd_expect_error(const char *file, const char *want, char *colspec) {
    const char *cols[64];
    int ncols = colspec ? split_cols(colspec, cols, 64) : 0;
    char err[ERR_LEN] = "";
    ParquetTable *t = parquet_read_table(file, colspec ? cols : NULL, ncols, err, sizeof err);
    int ok = !t && strstr(err, file) && strstr(err, want);
    if (ok) printf("ok %s: error: %s\n", file, err);
    else fprintf(stderr, "FAIL %s: want an error with '%s', got '%s'\n", file, want, t ? "(read)" : err);
    parquet_table_free(t);
    return !ok;
}

static uint64_t rng_state;
static uint64_t rnd(void) { // splitmix64
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int cmd_mutate(const char *file, int n, uint64_t seed) {
    char err[ERR_LEN];
    size_t len;
    uint8_t *orig = (uint8_t *)read_file(file, &len, err, sizeof err);
    if (!orig) { fprintf(stderr, "%s\n", err); return 1; }
    if (len < 64) { fprintf(stderr, "%s: too small to mutate\n", file); free(orig); return 1; }
    uint32_t footer_len = pq_load_u32le(orig + len - 8);
    size_t footer_start = footer_len + 8 < len ? len - 8 - footer_len : 0;
    rng_state = seed;
    uint8_t *m = xmalloc(len);
    int bad = 0, read_ok = 0, errors = 0;
    for (int i = 0; i < n && !bad; i++) {
        memcpy(m, orig, len);
        size_t mlen = len;
        int kind = i % 4;
        if (kind == 0) { // flip bytes in the footer
            int k = 1 + (int)(rnd() % 4);
            for (int j = 0; j < k; j++) m[footer_start + rnd() % (len - footer_start)] ^= (uint8_t)(1 + rnd() % 255);
        } else if (kind == 1) { // flip bytes anywhere (pages: levels, values, headers)
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
        ParquetTable *t = parquet_read_table(path, NULL, 0, err, sizeof err);
        if (t) {
            read_ok++;
            for (int64_t r = 0; r < parquet_table_num_rows(t); r++) // every row is a whole object
                if (!cJSON_IsObject(parquet_table_row(t, r))) { fprintf(stderr, "FAIL mutation %d: row %lld\n", i, (long long)r); bad = 1; }
        } else {
            errors++;
            if (getenv("TEST_PARQUET_VERBOSE")) printf("  mutation %d (kind %d): %s\n", i, kind, err);
            if (strncmp(err, path, strlen(path))) {
                fprintf(stderr, "FAIL mutation %d (kind %d): error does not start with the file name: %s\n", i, kind, err);
                bad = 1;
            }
        }
        if (kind == 2 && t) { fprintf(stderr, "FAIL truncation to %zu of %zu bytes was read without error\n", mlen, len); bad = 1; }
        parquet_table_free(t);
        unlink(path);
        free(path);
    }
    printf("%s %s: %d mutations: %d read to the end, %d errors; no crash\n", bad ? "FAIL" : "ok", file, n, read_ok, errors);
    free(m);
    free(orig);
    return bad;
}

int main(int argc, char **argv) {
    if ((argc == 4 || argc == 5) && !strcmp(argv[1], "--check")) return cmd_check(argv[2], argv[3], argc == 5 ? argv[4] : NULL);
    if ((argc == 4 || argc == 5) && !strcmp(argv[1], "--expect-error"))
        return cmd_expect_error(argv[2], argv[3], argc == 5 ? argv[4] : NULL);
    if (argc == 5 && !strcmp(argv[1], "--mutate")) return cmd_mutate(argv[2], atoi(argv[3]), strtoull(argv[4], NULL, 10));
    if (argc != 1) {
        fprintf(stderr, "usage: test_parquet_table [--check FILE SIDECAR [COLS] | --expect-error FILE TEXT [COLS] |\n"
                        "                           --mutate FILE N SEED]\n");
        return 2;
    }
    test_two_level_lists();
    test_repeated_forms();
    test_list_of_lists();
    test_scalars_and_structs();
    test_unsupported();
    test_bad_levels();
    test_file_errors();
    printf("test_parquet_table: %d checks, %d failed\n", checks, failures);
    return failures != 0;
}
