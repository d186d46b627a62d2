// pq_table.c: the in-memory table reader of parquet.h: whole rows of a small Parquet file (lm-eval task files),
// nested columns included, as cJSON objects.
//
// Nested data in Parquet (the Dremel encoding): only leaves are stored, one column chunk per leaf and row
// group. Each stored entry carries a repetition level (at which repeated ancestor a new element starts; 0 = a
// new row) and a definition level (how many of its OPTIONAL/REPEATED ancestors, itself included, are present);
// a value is stored only when the entry is defined all the way down. A null struct or an empty list is one entry
// in every leaf below it, with the definition level of the deepest ancestor that is present.
//
// The reader: (1) reads the file and its footer, builds the schema tree and classifies each selected node
// (primitive, struct, list in its 3-level or legacy 2-level form); (2) decodes every page of every selected
// leaf into arrays of levels and values; (3) walks the leaves' level streams in step to rebuild each row. Every
// length and offset read from the file is checked against the bytes that remain; the levels are checked for
// consistency between the leaves of one column, so a corrupt file gives an error, never a wrong row silently.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/parquet.h"
#include "data/pq_encoding.h"
#include "data/pq_format.h"
#include "data/pq_thrift.h"
#include "util/common.h"

#define MAX_DEPTH 32                   // schema nesting; task files nest 3 deep (struct > list > element)
#define MAX_ENTRIES ((int64_t)1 << 26) // level entries over the selected leaves: far above any task file
#define MAX_DECODED ((int64_t)4 << 30) // decompressed page bytes
// Footer bounds, checked before allocating from the counts a footer declares (task files: a few KB of
// footer, tens of fields, a few row groups).
#define MAX_FOOTER_BYTES (64u << 20)
#define MAX_FIELDS (1 << 20)           // schema elements
#define MAX_CHUNKS ((int64_t)1 << 20)  // row groups x leaf columns

typedef union {
    int64_t i; // INT32 (sign-extended), INT64, BOOLEAN (0/1)
    double d;  // FLOAT, DOUBLE
    struct {
        const uint8_t *p;
        uint32_t n;
    } s;       // BYTE_ARRAY: points into the file or a decompressed page
} Val;

enum { K_LEAF, K_STRUCT, K_LIST };

typedef struct {
    const PqSchemaElem *e;
    char *path;            // dotted path from the root, printable (for messages)
    char *name;            // the field name as stored (JSON key)
    int parent, first_child, next_sibling, n_children;
    int def, rep;          // definition / repetition level of this node (0 for the root)
    int leaf_lo, leaf_hi;  // its leaves: leaves[leaf_lo .. leaf_hi)
    int kind;              // K_*; set for the selected subtrees only
    int rchild, elem;      // K_LIST: the repeated child, and the element node (== rchild in the 2-level forms)
} Node;

typedef struct {
    int node, type, is_unsigned, max_def, max_rep;
    uint8_t *rep, *def;    // [n] levels; NULL when the maximum is 0 (every entry is then 0 / max_def)
    int64_t n, cap;
    Val *vals;             // [nvals] the defined values, in order
    int64_t nvals, vcap;
    int64_t pos, vpos;     // assembly cursor
    int selected;
} Leaf;

typedef struct {           // one column chunk of the footer
    int has_meta, type, codec, path_ok;
    int64_t num_values, total_compressed, data_off, dict_off;
    const uint8_t *file_path;
    size_t file_path_len;
} ChunkMeta;

typedef struct {
    const char *path;
    uint8_t *file;
    int64_t size, footer_off;
    PqSchemaElem *schema;
    int64_t nschema, nrows, nrg;
    int64_t *rg_rows;      // [nrg]
    ChunkMeta *chunks;     // [nrg * nleaves]
    Node *nodes;
    Leaf *leaves;
    int nleaves;
    void **blocks;         // decompressed pages / rebuilt strings the values point into
    int nblocks, blocks_cap;
    int64_t entries, decoded;
    char where[320];       // "column 'a.b', row group 0, page at offset 123" while decoding
    char *err;
    size_t errlen;
} Ctx;

__attribute__((format(printf, 2, 3))) static int fail(Ctx *c, const char *fmt, ...) {
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->where[0]) return set_err(c->err, c->errlen, "%s: %s: %s", c->path, c->where, msg);
    return set_err(c->err, c->errlen, "%s: %s", c->path, msg);
}

static char *printable(const uint8_t *p, size_t n) { // control bytes would break a one-line message
    if (n > 200) n = 200;
    char *s = xmalloc(n + 1);
    for (size_t i = 0; i < n; i++) s[i] = p[i] < 32 || p[i] == 127 ? '?' : (char)p[i];
    s[n] = 0;
    return s;
}

static void keep_block(Ctx *c, void *p) {
    if (c->nblocks == c->blocks_cap) {
        c->blocks_cap = c->blocks_cap ? c->blocks_cap * 2 : 64;
        c->blocks = xrealloc(c->blocks, (size_t)c->blocks_cap * sizeof *c->blocks);
    }
    c->blocks[c->nblocks++] = p;
}

static int level_bits(int max) { // bit width of levels 0..max
    int b = 0;
    while (max >> b) b++;
    return b;
}

// ---------------------------------------------------------------------------------------------------------
// The file and its footer

static int read_whole_file(Ctx *c) {
    int fd = open(c->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return set_err(c->err, c->errlen, "cannot open %s: %s", c->path, strerror(errno));
    struct stat st;
    int rc = -1;
    if (fstat(fd, &st) != 0) { set_err(c->err, c->errlen, "cannot stat %s: %s", c->path, strerror(errno)); goto done; }
    if (!S_ISREG(st.st_mode)) { fail(c, "not a regular file"); goto done; }
    c->size = st.st_size;
    if (c->size > PARQUET_TABLE_MAX_BYTES) {
        fail(c, "%lld bytes: too large for the in-memory table reader (at most %lld bytes; task files hold a few MB)",
             (long long)c->size, (long long)PARQUET_TABLE_MAX_BYTES);
        goto done;
    }
    if (c->size < 12) { fail(c, "not a Parquet file (%lld bytes; a Parquet file has at least 12)", (long long)c->size); goto done; }
    c->file = xmalloc((size_t)c->size);
    for (int64_t off = 0; off < c->size;) {
        ssize_t got = pread(fd, c->file + off, (size_t)(c->size - off), (off_t)off);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) { fail(c, "read error at offset %lld: %s", (long long)off, strerror(errno)); goto done; }
        if (got == 0) { fail(c, "file ends at offset %lld (it shrank while being read?)", (long long)off); goto done; }
        off += got;
    }
    rc = 0;
done:
    close(fd);
    return rc;
}

static int thrift_error(Ctx *c, const ThriftReader *t, const char *what) {
    if (t->status == TC_TRUNCATED) return fail(c, "footer: %s: %s", what, t->what);
    return fail(c, "footer: %s: %s at offset %lld", what, t->what, (long long)(c->footer_off + (int64_t)t->err_pos));
}

// Builds nodes[i] and its subtree; returns the index after it, or -1 (err set).
static int64_t build_node(Ctx *c, int64_t i, int parent, int depth) {
    if (i >= c->nschema) return fail(c, "footer: schema: group '%s' has more children than schema elements",
                                      c->nodes[parent].path);
    if (depth > MAX_DEPTH) return fail(c, "footer: schema nests deeper than %d levels", MAX_DEPTH);
    Node *n = &c->nodes[i];
    const PqSchemaElem *e = &c->schema[i];
    n->e = e;
    n->parent = parent;
    n->first_child = n->next_sibling = -1;
    n->rchild = n->elem = -1;
    n->name = xmalloc(e->name_len + 1);
    if (e->name_len) memcpy(n->name, e->name, e->name_len);
    n->name[e->name_len] = 0;
    char *pname = printable(e->name ? e->name : (const uint8_t *)"", e->name_len);
    if (parent <= 0) {
        n->path = pname;
    } else {
        Buf b = {0};
        buf_printf(&b, "%s.%s", c->nodes[parent].path, pname);
        buf_put(&b, "", 1);
        n->path = b.p;
        free(pname);
    }
    if (parent >= 0) {
        if (e->repetition < REP_REQUIRED || e->repetition > REP_REPEATED)
            return fail(c, "footer: schema: field '%s' has no valid repetition (%d)", n->path, e->repetition);
        n->def = c->nodes[parent].def + (e->repetition != REP_REQUIRED);
        n->rep = c->nodes[parent].rep + (e->repetition == REP_REPEATED);
    }
    if (e->num_children < 0) {
        if (parent < 0) return fail(c, "footer: schema root is not a group");
        if (e->type < 0) return fail(c, "footer: schema: leaf field '%s' has no physical type", n->path);
        n->leaf_lo = c->nleaves;
        n->leaf_hi = ++c->nleaves;
        return i + 1;
    }
    n->leaf_lo = c->nleaves;
    int64_t j = i + 1;
    int prev = -1;
    for (int32_t k = 0; k < e->num_children; k++) {
        int child = (int)j;
        if ((j = build_node(c, j, (int)i, depth + 1)) < 0) return -1;
        if (prev < 0) n->first_child = child;
        else c->nodes[prev].next_sibling = child;
        prev = child;
        n->n_children++;
    }
    n->leaf_hi = c->nleaves;
    return j;
}

static void parse_column_meta(Ctx *c, ThriftReader *t, ChunkMeta *m, int leaf) {
    int16_t last = 0, id;
    int ty;
    while (thrift_field(t, &last, &id, &ty)) {
        if (id == 1 && ty == TC_I32) m->type = thrift_i32(t);
        else if (id == 3 && ty == TC_LIST) { // path_in_schema: the names from the root's child down to the leaf
            int et;
            int64_t n;
            if (!thrift_list(t, &et, &n)) break;
            int depth = 0;
            for (int k = c->leaves[leaf].node; k > 0; k = c->nodes[k].parent) depth++;
            m->path_ok = et == TC_BINARY && n == depth;
            int k = c->leaves[leaf].node;
            for (int64_t s = 0; s < n; s++) {
                if (et != TC_BINARY) { thrift_skip(t, et); continue; }
                size_t len;
                const uint8_t *p = thrift_binary(t, &len);
                if (!m->path_ok || !p) continue;
                int up = k; // the node at position s on the path: depth - 1 - s steps above the leaf
                for (int64_t u = 0; u < depth - 1 - s; u++) up = c->nodes[up].parent;
                if (c->schema[up].name_len != len || (len && memcmp(c->schema[up].name, p, len))) m->path_ok = 0;
            }
        } else if (id == 4 && ty == TC_I32) m->codec = thrift_i32(t);
        else if (id == 5 && ty == TC_I64) m->num_values = thrift_i64(t);
        else if (id == 7 && ty == TC_I64) m->total_compressed = thrift_i64(t);
        else if (id == 9 && ty == TC_I64) m->data_off = thrift_i64(t);
        else if (id == 11 && ty == TC_I64) m->dict_off = thrift_i64(t);
        else thrift_skip(t, ty);
    }
}

static int parse_row_groups(Ctx *c, ThriftReader *t) {
    int et;
    if (thrift_list(t, &et, &c->nrg) && et != TC_STRUCT) thrift_fail(t, TC_CORRUPT, "row groups are not a list of structs");
    if (t->status) return thrift_error(c, t, "row groups");
    if (c->nrg * (c->nleaves ? c->nleaves : 1) > MAX_CHUNKS) // nrg is at most the footer's length
        return fail(c, "footer: %lld row groups of %d leaf columns: more column chunks than the table reader handles "
                       "(%lld)", (long long)c->nrg, c->nleaves, (long long)MAX_CHUNKS);
    c->rg_rows = xcalloc((size_t)c->nrg + 1, sizeof *c->rg_rows);
    c->chunks = xcalloc((size_t)(c->nrg * c->nleaves) + 1, sizeof *c->chunks);
    int64_t sum = 0;
    for (int64_t g = 0; g < c->nrg; g++) {
        int16_t last = 0, id;
        int ty, have_columns = 0;
        c->rg_rows[g] = -1;
        while (thrift_field(t, &last, &id, &ty)) {
            if (id == 1 && ty == TC_LIST) {
                int ct;
                int64_t nc;
                if (!thrift_list(t, &ct, &nc)) break;
                if (ct != TC_STRUCT) { thrift_fail(t, TC_CORRUPT, "row group columns are not structs"); break; }
                if (nc != c->nleaves)
                    return fail(c, "footer: row group %lld has %lld column chunks, the schema has %d leaf columns",
                                (long long)g, (long long)nc, c->nleaves);
                for (int64_t k = 0; k < nc; k++) {
                    ChunkMeta *m = &c->chunks[g * c->nleaves + k];
                    m->type = m->codec = -1;
                    m->path_ok = 1;
                    int16_t l2 = 0, f;
                    int t2;
                    while (thrift_field(t, &l2, &f, &t2)) {
                        if (f == 1 && t2 == TC_BINARY) m->file_path = thrift_binary(t, &m->file_path_len);
                        else if (f == 3 && t2 == TC_STRUCT) {
                            m->has_meta = 1;
                            parse_column_meta(c, t, m, (int)k);
                        } else thrift_skip(t, t2);
                    }
                }
                have_columns = 1;
            } else if (id == 3 && ty == TC_I64) c->rg_rows[g] = thrift_i64(t);
            else thrift_skip(t, ty);
        }
        if (t->status) return thrift_error(c, t, "row groups");
        if (!have_columns || c->rg_rows[g] < 0)
            return fail(c, "footer: row group %lld lacks its %s", (long long)g, have_columns ? "num_rows" : "column list");
        sum += c->rg_rows[g];
        if (sum > MAX_ENTRIES) return fail(c, "footer: more than %lld rows: too many for the in-memory table reader", (long long)MAX_ENTRIES);
    }
    if (sum != c->nrows)
        return fail(c, "footer: row groups hold %lld rows, the file says %lld", (long long)sum, (long long)c->nrows);
    return 0;
}

static int parse_footer(Ctx *c) {
    const uint8_t *tail = c->file + c->size - 8;
    if (memcmp(c->file, "PAR1", 4)) return fail(c, "not a Parquet file (no PAR1 magic at offset 0)");
    if (!memcmp(tail + 4, "PARE", 4)) return fail(c, "encrypted Parquet footers are not supported");
    if (memcmp(tail + 4, "PAR1", 4))
        return fail(c, "no PAR1 magic at the end (offset %lld): file truncated or not Parquet", (long long)c->size - 4);
    uint32_t len = pq_load_u32le(tail);
    if (len > (uint64_t)c->size - 12)
        return fail(c, "footer length %u (at offset %lld) does not fit in the %lld-byte file", len,
                    (long long)c->size - 8, (long long)c->size);
    if (len > MAX_FOOTER_BYTES)
        return fail(c, "footer of %u bytes: more than the table reader handles (%u; task files have a few KB)", len,
                    MAX_FOOTER_BYTES);
    c->footer_off = c->size - 8 - len;
    ThriftReader t;
    thrift_init(&t, c->file + c->footer_off, len);
    int16_t last = 0, id;
    int ty;
    size_t row_groups_at = SIZE_MAX;
    c->nrows = -1;
    while (thrift_field(&t, &last, &id, &ty)) {
        if (id == 2 && ty == TC_LIST) {
            int et;
            if (!thrift_list(&t, &et, &c->nschema)) break;
            if (et != TC_STRUCT) { thrift_fail(&t, TC_CORRUPT, "schema is not a list of structs"); break; }
            if (c->nschema > MAX_FIELDS)
                return fail(c, "footer: schema of %lld elements: more than the table reader handles (%d)",
                            (long long)c->nschema, MAX_FIELDS);
            free(c->schema);
            c->schema = xcalloc((size_t)c->nschema + 1, sizeof *c->schema);
            for (int64_t i = 0; i < c->nschema; i++)
                if (pq_parse_schema_elem(&t, &c->schema[i])) break;
        } else if (id == 3 && ty == TC_I64) {
            c->nrows = thrift_i64(&t);
        } else if (id == 4 && ty == TC_LIST) {
            row_groups_at = thrift_pos(&t);
            thrift_skip(&t, ty);
        } else {
            thrift_skip(&t, ty);
        }
    }
    if (t.status) return thrift_error(c, &t, "FileMetaData");
    if (!c->schema || c->nschema < 1 || c->nrows < 0 || row_groups_at == SIZE_MAX)
        return fail(c, "footer (FileMetaData at offset %lld) lacks its %s", (long long)c->footer_off,
                    !c->schema || c->nschema < 1 ? "schema" : c->nrows < 0 ? "num_rows" : "row groups");
    c->nodes = xcalloc((size_t)c->nschema, sizeof *c->nodes);
    int64_t end = build_node(c, 0, -1, 0);
    if (end < 0) return -1;
    if (end != c->nschema)
        return fail(c, "footer: schema tree is inconsistent (the root's children end at element %lld of %lld)",
                    (long long)end, (long long)c->nschema);
    c->leaves = xcalloc((size_t)c->nleaves + 1, sizeof *c->leaves);
    for (int64_t i = 0; i < c->nschema; i++)
        if (c->schema[i].num_children < 0) {
            Leaf *l = &c->leaves[c->nodes[i].leaf_lo];
            l->node = (int)i;
            l->type = c->schema[i].type;
            l->max_def = c->nodes[i].def;
            l->max_rep = c->nodes[i].rep;
        }
    ThriftReader rg;
    thrift_init(&rg, c->file + c->footer_off, len);
    rg.p += row_groups_at;
    return parse_row_groups(c, &rg);
}

// ---------------------------------------------------------------------------------------------------------
// The shapes this reader renders (checked on the selected columns before anything is decoded)

static int is_list_group(const PqSchemaElem *e) { return e->converted_type == CT_LIST || e->logical_type == LT_LIST; }

static int check_leaf(Ctx *c, Node *n) {
    const PqSchemaElem *e = n->e;
    Leaf *l = &c->leaves[n->leaf_lo];
    const char *what = NULL;
    char buf[96];
    if (e->type == PT_INT96) what = "physical type INT96 (legacy timestamps)";
    else if (e->type == PT_FIXED_LEN_BYTE_ARRAY) what = "physical type FIXED_LEN_BYTE_ARRAY";
    else if (e->type < 0 || e->type > PT_FIXED_LEN_BYTE_ARRAY) {
        snprintf(buf, sizeof buf, "unknown physical type %d", e->type);
        what = buf;
    }
    int ct = e->converted_type, lt = e->logical_type;
    if (!what && e->type == PT_BYTE_ARRAY) {
        int ok_ct = ct < 0 || ct == CT_UTF8 || ct == CT_ENUM || ct == CT_JSON;
        int ok_lt = lt < 0 || lt == LT_STRING || lt == LT_ENUM || lt == LT_JSON || lt == LT_UNKNOWN;
        if (!ok_lt) snprintf(buf, sizeof buf, "logical type %s", pq_logical_type_name(lt)), what = buf;
        else if (!ok_ct) snprintf(buf, sizeof buf, "converted type %s", pq_converted_type_name(ct)), what = buf;
    } else if (!what && (e->type == PT_INT32 || e->type == PT_INT64)) {
        int ok_ct = ct < 0 || (ct >= CT_UINT_8 && ct <= CT_INT_64);
        int ok_lt = lt < 0 || lt == LT_INTEGER || lt == LT_UNKNOWN;
        if (!ok_lt) snprintf(buf, sizeof buf, "logical type %s", pq_logical_type_name(lt)), what = buf;
        else if (!ok_ct) snprintf(buf, sizeof buf, "converted type %s", pq_converted_type_name(ct)), what = buf;
        l->is_unsigned = (ct >= CT_UINT_8 && ct <= CT_UINT_64) || (lt == LT_INTEGER && !e->int_signed);
    } else if (!what && (ct >= 0 || (lt >= 0 && lt != LT_UNKNOWN))) {
        snprintf(buf, sizeof buf, "%s annotated %s", pq_type_name(e->type),
                 lt >= 0 ? pq_logical_type_name(lt) : pq_converted_type_name(ct));
        what = buf;
    }
    if (what)
        return fail(c, "column '%s' has %s, which is not supported (supported: strings, integers, booleans, floats, "
                       "and lists and structs of them)", n->path, what);
    l->selected = 1;
    n->kind = K_LEAF;
    return 0;
}

static int check_node(Ctx *c, int i) {
    Node *n = &c->nodes[i];
    const PqSchemaElem *e = n->e;
    if (e->num_children < 0) return check_leaf(c, n);
    if (e->converted_type == CT_MAP || e->converted_type == CT_MAP_KEY_VALUE || e->logical_type == LT_MAP)
        return fail(c, "column '%s' is a MAP, which is not supported", n->path);
    if (n->n_children == 0) return fail(c, "column '%s' is a group without fields, which is not supported", n->path);
    if (!is_list_group(e)) {
        n->kind = K_STRUCT;
        for (int k = n->first_child; k >= 0; k = c->nodes[k].next_sibling)
            if (check_node(c, k)) return -1;
        return 0;
    }
    // LIST: one REPEATED child. Which node is the element follows the spec's backward-compatibility rules:
    // a repeated primitive, a repeated group of several fields, or a repeated group named "array" or
    // "<list>_tuple" is itself the element (2-level lists); otherwise its only field is (the 3-level form).
    Node *r = n->n_children == 1 ? &c->nodes[n->first_child] : NULL;
    if (!r || r->e->repetition != REP_REPEATED)
        return fail(c, "column '%s' is annotated LIST but does not hold exactly one REPEATED field", n->path);
    if (r->e->num_children >= 0 && r->n_children == 0)
        return fail(c, "column '%s' is a group without fields, which is not supported", r->path);
    n->kind = K_LIST;
    n->rchild = n->first_child;
    size_t nl = strlen(n->name);
    int r_is_elem = r->e->num_children < 0 || r->n_children > 1 || !strcmp(r->name, "array") ||
                    (strlen(r->name) == nl + 6 && !strncmp(r->name, n->name, nl) && !strcmp(r->name + nl, "_tuple"));
    if (r_is_elem) {
        n->elem = n->rchild;
        return check_node(c, n->rchild);
    }
    r->kind = K_STRUCT; // never rendered: the element is read in its place
    n->elem = r->first_child;
    return check_node(c, n->elem);
}

// ---------------------------------------------------------------------------------------------------------
// Pages

static void *take_block(Ctx *c, size_t n, int keep) {
    void *p = xmalloc(n ? n : 1);
    if (keep) keep_block(c, p);
    return p;
}

static int grow_leaf(Ctx *c, Leaf *l, int64_t entries, int64_t values) {
    if (entries > MAX_ENTRIES - c->entries)
        return fail(c, "more than %lld values in the selected columns: too many for the in-memory table reader",
                    (long long)MAX_ENTRIES);
    c->entries += entries;
    if (l->cap == 0 || l->n + entries > l->cap) { // allocated on the first page, even an empty one
        int64_t cap = l->cap ? l->cap : 1024;
        while (cap < l->n + entries) cap *= 2;
        if (l->max_rep) l->rep = xrealloc(l->rep, (size_t)cap);
        if (l->max_def) l->def = xrealloc(l->def, (size_t)cap);
        l->cap = cap;
    }
    if (l->vcap == 0 || l->nvals + values > l->vcap) {
        int64_t cap = l->vcap ? l->vcap : 1024;
        while (cap < l->nvals + values) cap *= 2;
        l->vals = xrealloc(l->vals, (size_t)cap * sizeof *l->vals);
        l->vcap = cap;
    }
    return 0;
}

// Reads n levels (bit width from max) into out; RLE (hybrid) or the deprecated BIT_PACKED. v1 RLE levels carry
// a u32 byte length; v2 levels do not (len_known: the byte length from the header). Returns bytes used or -1.
static int64_t read_levels(Ctx *c, const char *what, int encoding, const uint8_t *p, size_t avail, int64_t len_known,
                           int max, int64_t n, uint8_t *out) {
    int bits = level_bits(max);
    PqHybrid h;
    size_t used;
    if (len_known >= 0) {
        pq_hybrid_init(&h, p, (size_t)len_known, bits);
        used = (size_t)len_known;
    } else if (encoding == ENC_RLE) {
        if (avail < 4) return fail(c, "%s levels truncated", what);
        uint32_t len = pq_load_u32le(p);
        if (len > avail - 4) return fail(c, "%s levels of %u bytes, only %zu in the page", what, len, avail - 4);
        pq_hybrid_init(&h, p + 4, len, bits);
        used = 4 + (size_t)len;
    } else if (encoding == ENC_BIT_PACKED) {
        uint64_t len = ((uint64_t)n * (uint64_t)bits + 7) / 8;
        if (len > avail) return fail(c, "bit-packed %s levels truncated", what);
        pq_bitpacked_msb_init(&h, p, (size_t)len, bits);
        used = (size_t)len;
    } else {
        return fail(c, "%s level encoding %s is not supported", what, pq_encoding_name(encoding));
    }
    for (int64_t i = 0; i < n; i++) {
        uint32_t v;
        if (!pq_hybrid_next(&h, &v)) return fail(c, "%s levels end after %lld of %lld values", what, (long long)i, (long long)n);
        if (v > (uint32_t)max) return fail(c, "%s level %u > the column's maximum %d", what, v, max);
        out[i] = (uint8_t)v;
    }
    return (int64_t)used;
}

static int value_width(int type) {
    return type == PT_INT32 || type == PT_FLOAT ? 4 : type == PT_INT64 || type == PT_DOUBLE ? 8 : 0;
}

static Val fixed_value(int type, const uint8_t *p) {
    Val v;
    switch (type) {
    case PT_INT32: v.i = (int32_t)pq_load_u32le(p); break;
    case PT_INT64: v.i = (int64_t)pq_load_u64le(p); break;
    case PT_FLOAT: {
        uint32_t u = pq_load_u32le(p);
        float f;
        memcpy(&f, &u, 4);
        v.d = f;
        break;
    }
    default: { // PT_DOUBLE
        uint64_t u = pq_load_u64le(p);
        memcpy(&v.d, &u, 8);
        break;
    }
    }
    return v;
}

// PLAIN: n values of the leaf's type from p[0..len) into out. Returns bytes used, -1 on error.
static int64_t decode_plain(Ctx *c, int type, const uint8_t *p, size_t len, int64_t n, Val *out) {
    if (type == PT_BOOLEAN) { // bit-packed, LSB first
        if ((uint64_t)(n + 7) / 8 > len) return fail(c, "PLAIN booleans truncated (%lld values in %zu bytes)", (long long)n, len);
        for (int64_t i = 0; i < n; i++) out[i].i = (p[i >> 3] >> (i & 7)) & 1;
        return (n + 7) / 8;
    }
    if (type == PT_BYTE_ARRAY) {
        size_t off = 0;
        for (int64_t i = 0; i < n; i++) {
            if (len - off < 4) return fail(c, "PLAIN value %lld: length truncated", (long long)i);
            uint32_t k = pq_load_u32le(p + off);
            off += 4;
            if (k > len - off) return fail(c, "PLAIN value %lld of %u bytes, only %zu left in the page", (long long)i, k, len - off);
            out[i].s.p = p + off;
            out[i].s.n = k;
            off += k;
        }
        return (int64_t)off;
    }
    int w = value_width(type);
    if ((uint64_t)n > len / (uint64_t)w)
        return fail(c, "PLAIN %s values truncated (%lld values need %lld bytes, the page has %zu)", pq_type_name(type),
                    (long long)n, (long long)n * w, len);
    for (int64_t i = 0; i < n; i++) out[i] = fixed_value(type, p + i * w);
    return n * w;
}

typedef struct {
    Val *v;
    int64_t n;
    int loaded;
} Dict;

static int load_dictionary(Ctx *c, Leaf *l, Dict *d, const PqPageHeader *h, const uint8_t *body, size_t n) {
    if (d->loaded) return fail(c, "second dictionary page in one column chunk");
    if (h->encoding != ENC_PLAIN && h->encoding != ENC_PLAIN_DICTIONARY)
        return fail(c, "dictionary page with encoding %s, expected PLAIN", pq_encoding_name(h->encoding));
    // Each entry takes at least a bit (booleans), 4 bytes (strings: the length) or its width.
    uint64_t min_bits = l->type == PT_BOOLEAN ? 1 : l->type == PT_BYTE_ARRAY ? 32 : 8u * (uint64_t)value_width(l->type);
    if (h->num_values < 0 || (uint64_t)h->num_values * min_bits > (uint64_t)n * 8)
        return fail(c, "dictionary page claims %d entries in %zu bytes", h->num_values, n);
    d->v = xmalloc(((size_t)h->num_values + 1) * sizeof *d->v);
    d->n = h->num_values;
    d->loaded = 1;
    return decode_plain(c, l->type, body, n, d->n, d->v) < 0 ? -1 : 0;
}

// Decodes nn values (the defined entries of the page) encoded with `enc` from vals[0..len).
static int decode_values(Ctx *c, Leaf *l, const Dict *d, int enc, const uint8_t *p, size_t len, int64_t nn) {
    Val *out = l->vals + l->nvals;
    char e[ERR_LEN];
    int type = l->type;
    switch (enc) {
    case ENC_PLAIN:
        if (decode_plain(c, type, p, len, nn, out) < 0) return -1;
        break;
    case ENC_PLAIN_DICTIONARY:
    case ENC_RLE_DICTIONARY: {
        if (!d->loaded) return fail(c, "%s page but the column chunk has no dictionary page", pq_encoding_name(enc));
        if (nn == 0) break;
        if (len < 1) return fail(c, "dictionary indices missing");
        if (p[0] > 32) return fail(c, "dictionary index bit width %d > 32", p[0]);
        PqHybrid h;
        pq_hybrid_init(&h, p + 1, len - 1, p[0]);
        for (int64_t i = 0; i < nn; i++) {
            uint32_t k;
            if (!pq_hybrid_next(&h, &k)) return fail(c, "dictionary indices end after %lld of %lld values", (long long)i, (long long)nn);
            if (k >= d->n) return fail(c, "dictionary index %u out of range (dictionary has %lld entries)", k, (long long)d->n);
            out[i] = d->v[k];
        }
        break;
    }
    case ENC_RLE: { // booleans: a u32 byte length, then the hybrid encoding at bit width 1
        if (type != PT_BOOLEAN) return fail(c, "RLE values in a %s column (only booleans use it)", pq_type_name(type));
        if (len < 4) return fail(c, "RLE booleans: length truncated");
        uint32_t n = pq_load_u32le(p);
        if (n > len - 4) return fail(c, "RLE booleans of %u bytes, only %zu in the page", n, len - 4);
        PqHybrid h;
        pq_hybrid_init(&h, p + 4, n, 1);
        for (int64_t i = 0; i < nn; i++) {
            uint32_t v;
            if (!pq_hybrid_next(&h, &v)) return fail(c, "RLE booleans end after %lld of %lld values", (long long)i, (long long)nn);
            out[i].i = v;
        }
        break;
    }
    case ENC_DELTA_BINARY_PACKED: {
        if (type != PT_INT32 && type != PT_INT64)
            return fail(c, "DELTA_BINARY_PACKED values in a %s column", pq_type_name(type));
        PqDelta dd;
        if (pq_delta_init(&dd, p, len, nn, e, sizeof e) < 0) return fail(c, "%s", e);
        for (int64_t i = 0; i < nn; i++) {
            int64_t v;
            if (!pq_delta_next(&dd, &v)) return fail(c, "DELTA_BINARY_PACKED holds %lld values, the page %lld", (long long)i, (long long)nn);
            out[i].i = type == PT_INT32 ? (int64_t)(int32_t)(uint32_t)v : v; // INT32 deltas wrap modulo 2^32
        }
        break;
    }
    case ENC_DELTA_LENGTH_BYTE_ARRAY: {
        if (type != PT_BYTE_ARRAY) return fail(c, "DELTA_LENGTH_BYTE_ARRAY values in a %s column", pq_type_name(type));
        PqDelta lens;
        int64_t used = pq_delta_init(&lens, p, len, nn, e, sizeof e);
        if (used < 0) return fail(c, "value lengths: %s", e);
        size_t off = (size_t)used;
        for (int64_t i = 0; i < nn; i++) {
            int64_t k;
            if (!pq_delta_next(&lens, &k)) return fail(c, "%lld value lengths for %lld values", (long long)i, (long long)nn);
            if (k < 0 || (uint64_t)k > len - off || k > UINT32_MAX)
                return fail(c, "value length %lld out of range (%zu bytes left)", (long long)k, len - off);
            out[i].s.p = p + off;
            out[i].s.n = (uint32_t)k;
            off += (size_t)k;
        }
        break;
    }
    case ENC_DELTA_BYTE_ARRAY: { // prefix lengths, suffix lengths, suffixes; each value extends the previous one
        if (type != PT_BYTE_ARRAY) return fail(c, "DELTA_BYTE_ARRAY values in a %s column", pq_type_name(type));
        PqDelta pre, suf;
        int64_t u1 = pq_delta_init(&pre, p, len, nn, e, sizeof e);
        if (u1 < 0) return fail(c, "prefix lengths: %s", e);
        int64_t u2 = pq_delta_init(&suf, p + u1, len - (size_t)u1, nn, e, sizeof e);
        if (u2 < 0) return fail(c, "suffix lengths: %s", e);
        size_t off = (size_t)(u1 + u2), total = 0, cap = len + 64, prev_off = 0, prev_n = 0;
        uint8_t *buf = xmalloc(cap); // the rebuilt values, back to back; pointers are set once it stops moving
        for (int64_t i = 0; i < nn; i++) {
            int64_t a, b;
            if (!pq_delta_next(&pre, &a) || !pq_delta_next(&suf, &b)) {
                free(buf);
                return fail(c, "DELTA_BYTE_ARRAY lengths for %lld of %lld values", (long long)i, (long long)nn);
            }
            if (a < 0 || (uint64_t)a > prev_n || b < 0 || (uint64_t)b > len - off || (uint64_t)(a + b) > UINT32_MAX) {
                free(buf);
                return fail(c, "value %lld: prefix %lld / suffix %lld bytes out of range (previous value %zu bytes, %zu left)",
                            (long long)i, (long long)a, (long long)b, prev_n, len - off);
            }
            if ((int64_t)(a + b) > MAX_DECODED - c->decoded) {
                free(buf);
                return fail(c, "DELTA_BYTE_ARRAY values rebuild to more than %lld bytes", (long long)MAX_DECODED);
            }
            c->decoded += a + b;
            if (total + (size_t)(a + b) > cap) {
                while (total + (size_t)(a + b) > cap) cap *= 2;
                buf = xrealloc(buf, cap);
            }
            memcpy(buf + total, buf + prev_off, (size_t)a); // the previous value lies wholly before `total`
            memcpy(buf + total + a, p + off, (size_t)b);
            off += (size_t)b;
            out[i].s.p = NULL;
            out[i].s.n = (uint32_t)(a + b);
            prev_off = total;
            prev_n = (size_t)(a + b);
            total += prev_n;
        }
        keep_block(c, buf);
        for (int64_t i = 0, at = 0; i < nn; at += out[i].s.n, i++) out[i].s.p = buf + at;
        break;
    }
    case ENC_BYTE_STREAM_SPLIT: { // byte k of value i is at k * count + i
        int w = value_width(type);
        if (!w) return fail(c, "BYTE_STREAM_SPLIT values in a %s column", pq_type_name(type));
        if (len % (size_t)w) return fail(c, "BYTE_STREAM_SPLIT data of %zu bytes is not a multiple of %d", len, w);
        size_t count = len / (size_t)w;
        if ((uint64_t)nn > count) return fail(c, "BYTE_STREAM_SPLIT holds %zu values, the page %lld", count, (long long)nn);
        for (int64_t i = 0; i < nn; i++) {
            uint8_t b[8];
            for (int k = 0; k < w; k++) b[k] = p[(size_t)k * count + (size_t)i];
            out[i] = fixed_value(type, b);
        }
        break;
    }
    default:
        return fail(c, "value encoding %s (%d) is not supported", pq_encoding_name(enc), enc);
    }
    l->nvals += nn;
    return 0;
}

// Decompresses src into a new buffer of exactly dst_len bytes (kept while values may point into it).
static uint8_t *decompress(Ctx *c, int codec, const uint8_t *src, size_t n, size_t dst_len, int keep) {
    char e[ERR_LEN];
    if (pq_check_decompressed_size(codec, src, n, dst_len, e, sizeof e)) { fail(c, "%s", e); return NULL; }
    if ((int64_t)dst_len > MAX_DECODED - c->decoded) {
        fail(c, "pages decompress to more than %lld bytes: too large for the in-memory table reader", (long long)MAX_DECODED);
        return NULL;
    }
    c->decoded += (int64_t)dst_len;
    uint8_t *dst = take_block(c, dst_len, keep);
    if (pq_decompress(codec, src, n, dst, dst_len, e, sizeof e)) {
        if (!keep) free(dst);
        fail(c, "%s", e);
        return NULL;
    }
    return dst;
}

// One data page of leaf l; chunk_start: it is the first data page of its column chunk.
static int data_page(Ctx *c, Leaf *l, const Dict *d, const PqPageHeader *h, int codec, const uint8_t *body,
                     int chunk_start) {
    int v2 = h->type == PAGE_DATA_V2;
    int keep = l->type == PT_BYTE_ARRAY; // string values point into the page
    int64_t nv = h->num_values;
    if (grow_leaf(c, l, nv, 0)) return -1;
    const uint8_t *p = body, *vals;
    size_t n, vals_len;
    uint8_t *tmp = NULL;
    uint8_t *rep = l->max_rep ? l->rep + l->n : NULL, *def = l->max_def ? l->def + l->n : NULL;
    if (!v2) { // levels and values compressed together; levels carry a u32 length (RLE) or are BIT_PACKED
        n = (size_t)h->uncompressed_size;
        if (codec != PQ_UNCOMPRESSED) {
            if (!(tmp = decompress(c, codec, body, (size_t)h->compressed_size, n, keep))) return -1;
            p = tmp;
        } else if ((size_t)h->compressed_size != n) {
            return fail(c, "uncompressed page holds %d bytes, its header says %zu", h->compressed_size, n);
        }
        size_t off = 0;
        if (rep) {
            int64_t u = read_levels(c, "repetition", h->rep_encoding, p, n, -1, l->max_rep, nv, rep);
            if (u < 0) goto fail;
            off += (size_t)u;
        }
        if (def) {
            int64_t u = read_levels(c, "definition", h->def_encoding, p + off, n - off, -1, l->max_def, nv, def);
            if (u < 0) goto fail;
            off += (size_t)u;
        }
        vals = p + off;
        vals_len = n - off;
    } else { // v2: repetition then definition levels, uncompressed and without length prefixes, then values
        if (h->def_len < 0 || h->rep_len < 0 || (int64_t)h->def_len + h->rep_len > h->compressed_size ||
            (int64_t)h->def_len + h->rep_len > h->uncompressed_size)
            return fail(c, "level lengths (%d + %d bytes) do not fit in the page", h->rep_len, h->def_len);
        if (rep && read_levels(c, "repetition", ENC_RLE, p, (size_t)h->rep_len, h->rep_len, l->max_rep, nv, rep) < 0)
            return -1;
        if (def && read_levels(c, "definition", ENC_RLE, p + h->rep_len, (size_t)h->def_len, h->def_len, l->max_def, nv, def) < 0)
            return -1;
        size_t levels = (size_t)h->rep_len + (size_t)h->def_len;
        const uint8_t *src = body + levels;
        size_t src_n = (size_t)h->compressed_size - levels;
        vals_len = (size_t)h->uncompressed_size - levels;
        if (codec == PQ_UNCOMPRESSED || !h->is_compressed) {
            if (src_n != vals_len)
                return fail(c, "uncompressed values hold %zu bytes, the page header says %zu", src_n, vals_len);
            vals = src;
        } else {
            if (!(tmp = decompress(c, codec, src, src_n, vals_len, keep))) return -1;
            vals = tmp;
        }
    }
    int64_t nn = 0, rows = 0;
    for (int64_t i = 0; i < nv; i++) {
        nn += !def || def[i] == l->max_def;
        rows += !rep || rep[i] == 0;
    }
    // A row group starts a row, and so does every v2 page (the spec has v2 pages break at row boundaries).
    if ((chunk_start || v2) && nv > 0 && rep && rep[0] != 0) {
        fail(c, "the %s first value has repetition level %d, not 0 (it must start a row)",
             chunk_start ? "column chunk's" : "page's", rep[0]);
        goto fail;
    }
    if (v2 && h->num_nulls != nv - nn) {
        fail(c, "page has %lld nulls, its header says %d", (long long)(nv - nn), h->num_nulls);
        goto fail;
    }
    if (v2 && h->num_rows != rows) {
        fail(c, "page starts %lld rows, its header says %d", (long long)rows, h->num_rows);
        goto fail;
    }
    if (grow_leaf(c, l, 0, nn) || decode_values(c, l, d, h->encoding, vals, vals_len, nn)) goto fail;
    l->n += nv;
    if (!keep) free(tmp);
    return 0;
fail:
    if (!keep) free(tmp);
    return -1;
}

// Decodes leaf k's column chunk in row group g.
static int decode_chunk(Ctx *c, int k, int64_t g) {
    Leaf *l = &c->leaves[k];
    const Node *n = &c->nodes[l->node];
    const ChunkMeta *m = &c->chunks[g * c->nleaves + k];
    snprintf(c->where, sizeof c->where, "column '%s', row group %lld", n->path, (long long)g);
    if (m->file_path)
        return fail(c, "chunk is stored in another file ('%.*s'), which is not supported",
                    (int)(m->file_path_len > 200 ? 200 : m->file_path_len), (const char *)m->file_path);
    if (!m->has_meta) return fail(c, "column chunk has no metadata (encrypted file?)");
    if (m->type != l->type)
        return fail(c, "chunk has physical type %s, the schema says %s", pq_type_name(m->type), pq_type_name(l->type));
    if (!m->path_ok) return fail(c, "chunk's path_in_schema does not name the column");
    if (!pq_codec_supported(m->codec))
        return fail(c, "codec %s (%d) is not supported (supported: UNCOMPRESSED, SNAPPY, GZIP, ZSTD)",
                    pq_codec_name(m->codec), m->codec);
    if (m->num_values < 0 || m->total_compressed < 0) return fail(c, "negative num_values or total_compressed_size");
    // A chunk starts at its dictionary page when it has one (some writers store dictionary_page_offset 0 for none).
    int64_t start = m->data_off;
    if (m->dict_off >= 4 && m->dict_off < m->data_off) start = m->dict_off;
    if (start < 4 || start > c->footer_off || m->total_compressed > c->footer_off - start)
        return fail(c, "column chunk (offset %lld, %lld bytes) lies outside the data of the %lld-byte file",
                    (long long)start, (long long)m->total_compressed, (long long)c->size);
    int64_t end = start + m->total_compressed, pos = start, seen = 0, first_entry = l->n;
    Dict d = {0};
    int rc = -1;
    while (seen < m->num_values) {
        snprintf(c->where, sizeof c->where, "column '%s', row group %lld, page at offset %lld", n->path, (long long)g,
                 (long long)pos);
        if (pos >= end) {
            fail(c, "column chunk ends after %lld values, its metadata says %lld", (long long)seen, (long long)m->num_values);
            goto done;
        }
        ThriftReader t;
        thrift_init(&t, c->file + pos, (size_t)(end - pos));
        PqPageHeader h;
        pq_parse_page_header(&t, &h);
        if (t.status) {
            if (t.status == TC_TRUNCATED) fail(c, "page header: truncated (the column chunk ends at offset %lld)", (long long)end);
            else fail(c, "page header: %s at offset %lld", t.what, (long long)(pos + (int64_t)t.err_pos));
            goto done;
        }
        int64_t hlen = (int64_t)thrift_pos(&t);
        if (h.type < 0 || h.uncompressed_size < 0 || h.compressed_size < 0) {
            fail(c, "page header: missing or negative type/page sizes");
            goto done;
        }
        if (h.compressed_size > end - pos - hlen) {
            fail(c, "page of %d bytes runs past the end of the column chunk (%lld bytes left)", h.compressed_size,
                 (long long)(end - pos - hlen));
            goto done;
        }
        const uint8_t *body = c->file + pos + hlen;
        if (h.type == PAGE_DICTIONARY) {
            if (!h.has_dict) { fail(c, "DICTIONARY_PAGE without its dictionary_page_header"); goto done; }
            if (seen > 0) { fail(c, "dictionary page after data pages"); goto done; }
            const uint8_t *p = body;
            size_t un = (size_t)h.uncompressed_size;
            if (m->codec != PQ_UNCOMPRESSED) {
                if (!(p = decompress(c, m->codec, body, (size_t)h.compressed_size, un, 1))) goto done;
            } else if ((size_t)h.compressed_size != un) {
                fail(c, "uncompressed page holds %d bytes, its header says %zu", h.compressed_size, un);
                goto done;
            }
            if (load_dictionary(c, l, &d, &h, p, un)) goto done;
        } else if (h.type == PAGE_DATA || h.type == PAGE_DATA_V2) {
            if (h.type == PAGE_DATA ? !h.has_v1 : !h.has_v2) {
                fail(c, "%s without its header", h.type == PAGE_DATA ? "DATA_PAGE" : "DATA_PAGE_V2");
                goto done;
            }
            if (h.num_values < 0 || h.num_values > m->num_values - seen) {
                fail(c, "page holds %d values, only %lld of the column chunk's %lld remain", h.num_values,
                     (long long)(m->num_values - seen), (long long)m->num_values);
                goto done;
            }
            if (data_page(c, l, &d, &h, m->codec, body, seen == 0)) goto done;
            seen += h.num_values;
        } // index pages and future page types: skipped
        pos += hlen + h.compressed_size;
    }
    snprintf(c->where, sizeof c->where, "column '%s', row group %lld", n->path, (long long)g);
    int64_t rows = 0;
    for (int64_t i = first_entry; i < l->n; i++) rows += !l->rep || l->rep[i] == 0;
    if (rows != c->rg_rows[g]) {
        fail(c, "column chunk holds %lld rows, the row group %lld", (long long)rows, (long long)c->rg_rows[g]);
        goto done;
    }
    rc = 0;
done:
    free(d.v);
    return rc;
}

// ---------------------------------------------------------------------------------------------------------
// Rows: the leaves' level streams walked in step (each node reads exactly the entries of its subtree)

typedef struct {
    Ctx *c;
    Buf scratch;
    int64_t row;
} Asm;

static int at_end(const Leaf *l) { return l->pos >= l->n; }
static int rep_at(const Leaf *l) { return l->rep ? l->rep[l->pos] : 0; }
static int def_at(const Leaf *l) { return l->def ? l->def[l->pos] : l->max_def; }

static cJSON *asm_fail(Asm *a, int node, const char *what) {
    Ctx *c = a->c;
    snprintf(c->where, sizeof c->where, "column '%s', row %lld", c->nodes[node].path, (long long)a->row);
    fail(c, "%s", what);
    return NULL;
}

// A null (absent OPTIONAL node) or an empty list: one entry in every leaf below, defined to exactly `def`.
static int consume_absent(Asm *a, int node, int def) {
    const Node *n = &a->c->nodes[node];
    for (int k = n->leaf_lo; k < n->leaf_hi; k++) {
        Leaf *l = &a->c->leaves[k];
        if (at_end(l) || def_at(l) != def) {
            asm_fail(a, l->node, at_end(l) ? "values end early" : "levels disagree between the fields of a struct or list");
            return -1;
        }
        l->pos++;
    }
    return 0;
}

static cJSON *leaf_json(Asm *a, Leaf *l, Val v) {
    switch (l->type) {
    case PT_BOOLEAN: return cJSON_CreateBool(v.i != 0);
    case PT_INT32: return cJSON_CreateNumber(l->is_unsigned ? (double)(uint32_t)v.i : (double)v.i);
    case PT_INT64: return cJSON_CreateNumber(l->is_unsigned ? (double)(uint64_t)v.i : (double)v.i);
    case PT_FLOAT:
    case PT_DOUBLE: return cJSON_CreateNumber(v.d);
    default: // strings: cJSON holds C strings, so a NUL byte ends one, as it ends "\u0000" in a JSON file
        a->scratch.n = 0;
        buf_put(&a->scratch, v.s.p, v.s.n);
        buf_put(&a->scratch, "", 1);
        return cJSON_CreateString(a->scratch.p);
    }
}

static cJSON *read_node(Asm *a, int node, int as_element);

// The elements of repeated node R (elem: the node read for each element; R itself in the 2-level forms).
static cJSON *read_repeated(Asm *a, int rnode, int elem) {
    Ctx *c = a->c;
    const Node *r = &c->nodes[rnode];
    Leaf *first = &c->leaves[r->leaf_lo];
    cJSON *arr = cJSON_CreateArray();
    if (at_end(first)) { cJSON_Delete(arr); return asm_fail(a, first->node, "values end early"); }
    if (def_at(first) < r->def) { // the list is present but empty
        if (consume_absent(a, rnode, r->def - 1)) { cJSON_Delete(arr); return NULL; }
        return arr;
    }
    for (;;) {
        cJSON *v = elem == rnode ? read_node(a, rnode, 1) : read_node(a, elem, 0);
        if (!v) { cJSON_Delete(arr); return NULL; }
        cJSON_AddItemToArray(arr, v);
        // Another element follows when every leaf's next entry repeats at R's level.
        int end = at_end(first), rep = end ? 0 : rep_at(first);
        for (int k = r->leaf_lo + 1; k < r->leaf_hi; k++) {
            const Leaf *l = &c->leaves[k];
            if (at_end(l) != end || (!end && rep_at(l) != rep)) {
                cJSON_Delete(arr);
                return asm_fail(a, l->node, "repetition levels disagree between the fields of a list element");
            }
        }
        if (end || rep < r->rep) return arr;
        if (rep > r->rep) { cJSON_Delete(arr); return asm_fail(a, first->node, "repetition level deeper than the data"); }
    }
}

// One value of node i. as_element: read a REPEATED node's single element (not the list of them).
static cJSON *read_node(Asm *a, int i, int as_element) {
    Ctx *c = a->c;
    const Node *n = &c->nodes[i];
    if (n->e->repetition == REP_REPEATED && !as_element) return read_repeated(a, i, i);
    Leaf *first = &c->leaves[n->leaf_lo];
    if (at_end(first)) return asm_fail(a, first->node, "values end early");
    if (n->e->repetition == REP_OPTIONAL && def_at(first) < n->def)
        return consume_absent(a, i, n->def - 1) ? NULL : cJSON_CreateNull();
    switch (n->kind) {
    case K_LEAF: {
        if (def_at(first) != first->max_def) return asm_fail(a, i, "a required value is missing (levels disagree)");
        if (first->vpos >= first->nvals) return asm_fail(a, i, "more defined entries than values");
        first->pos++;
        return leaf_json(a, first, first->vals[first->vpos++]);
    }
    case K_STRUCT: {
        cJSON *o = cJSON_CreateObject();
        for (int k = n->first_child; k >= 0; k = c->nodes[k].next_sibling) {
            cJSON *v = read_node(a, k, 0);
            if (!v) { cJSON_Delete(o); return NULL; }
            cJSON_AddItemToObject(o, c->nodes[k].name, v);
        }
        return o;
    }
    default: // K_LIST
        return read_repeated(a, n->rchild, n->elem);
    }
}

// ---------------------------------------------------------------------------------------------------------
// The table

struct ParquetTable {
    char *path;
    int64_t nrows;
    int ncols;
    char **names;
    cJSON **rows; // [nrows]
};

static void ctx_free(Ctx *c) {
    free(c->file);
    free(c->schema);
    free(c->rg_rows);
    free(c->chunks);
    if (c->nodes)
        for (int64_t i = 0; i < c->nschema; i++) {
            free(c->nodes[i].path);
            free(c->nodes[i].name);
        }
    free(c->nodes);
    for (int k = 0; c->leaves && k < c->nleaves; k++) {
        free(c->leaves[k].rep);
        free(c->leaves[k].def);
        free(c->leaves[k].vals);
    }
    free(c->leaves);
    for (int b = 0; b < c->nblocks; b++) free(c->blocks[b]);
    free(c->blocks);
}

ParquetTable *parquet_read_table(const char *path, const char *const *columns, int ncolumns, char *err,
                                 size_t errlen) {
    Ctx c = {.path = path, .err = err, .errlen = errlen};
    ParquetTable *t = NULL;
    int *sel = NULL, nsel = 0;
    Asm a = {.c = &c};
    if (read_whole_file(&c) || parse_footer(&c)) goto fail;

    // The selected top-level fields, in the order asked (file order when all).
    const Node *root = &c.nodes[0];
    sel = xcalloc((size_t)(columns ? ncolumns : root->n_children) + 1, sizeof *sel);
    if (!columns) {
        for (int k = root->first_child; k >= 0; k = c.nodes[k].next_sibling) sel[nsel++] = k;
    } else {
        for (int q = 0; q < ncolumns; q++) {
            int found = -1;
            for (int k = root->first_child; k >= 0 && found < 0; k = c.nodes[k].next_sibling)
                if (!strcmp(c.nodes[k].name, columns[q])) found = k;
            if (found < 0) {
                Buf names = {0};
                for (int k = root->first_child; k >= 0; k = c.nodes[k].next_sibling) {
                    if (names.n > 400) { buf_puts(&names, ", ..."); break; }
                    buf_printf(&names, "%s%s", names.n ? ", " : "", c.nodes[k].path);
                }
                buf_put(&names, "", 1);
                fail(&c, "no column '%s' (top-level columns: %s)", columns[q], names.p);
                buf_free(&names);
                goto fail;
            }
            for (int k = 0; k < nsel; k++)
                if (sel[k] == found) {
                    fail(&c, "column '%s' is asked for twice", columns[q]);
                    goto fail;
                }
            sel[nsel++] = found;
        }
    }
    for (int s = 0; s < nsel; s++)
        if (check_node(&c, sel[s])) goto fail;

    for (int k = 0; k < c.nleaves; k++)
        if (c.leaves[k].selected)
            for (int64_t g = 0; g < c.nrg; g++)
                if (decode_chunk(&c, k, g)) goto fail;
    c.where[0] = 0;

    t = xcalloc(1, sizeof *t);
    t->path = xstrdup(path);
    t->nrows = c.nrows;
    t->ncols = nsel;
    t->names = xcalloc((size_t)nsel + 1, sizeof *t->names);
    for (int s = 0; s < nsel; s++) t->names[s] = xstrdup(c.nodes[sel[s]].name);
    t->rows = xcalloc((size_t)c.nrows + 1, sizeof *t->rows);
    for (a.row = 0; a.row < c.nrows; a.row++) {
        cJSON *o = cJSON_CreateObject();
        t->rows[a.row] = o;
        for (int s = 0; s < nsel; s++) {
            const Node *n = &c.nodes[sel[s]];
            for (int k = n->leaf_lo; k < n->leaf_hi; k++) { // every leaf stands at the start of this row
                const Leaf *l = &c.leaves[k];
                if (at_end(l) || rep_at(l) != 0) {
                    asm_fail(&a, l->node, at_end(l) ? "values end early" : "row does not start at repetition level 0");
                    goto fail;
                }
            }
            cJSON *v = read_node(&a, sel[s], 0);
            if (!v) goto fail;
            cJSON_AddItemToObject(o, n->name, v);
        }
    }
    for (int k = 0; k < c.nleaves; k++) {
        const Leaf *l = &c.leaves[k];
        if (l->selected && (l->pos != l->n || l->vpos != l->nvals)) {
            snprintf(c.where, sizeof c.where, "column '%s'", c.nodes[l->node].path);
            fail(&c, "%lld level entries and %lld values left over after the file's %lld rows",
                 (long long)(l->n - l->pos), (long long)(l->nvals - l->vpos), (long long)c.nrows);
            goto fail;
        }
    }
    buf_free(&a.scratch);
    free(sel);
    ctx_free(&c);
    return t;
fail:
    buf_free(&a.scratch);
    free(sel);
    ctx_free(&c);
    parquet_table_free(t);
    return NULL;
}

int64_t parquet_table_num_rows(const ParquetTable *t) { return t->nrows; }
int parquet_table_num_columns(const ParquetTable *t) { return t->ncols; }
const char *parquet_table_column_name(const ParquetTable *t, int c) {
    return c >= 0 && c < t->ncols ? t->names[c] : NULL;
}

const cJSON *parquet_table_row(const ParquetTable *t, int64_t i) {
    return i >= 0 && i < t->nrows ? t->rows[i] : NULL;
}

const cJSON *parquet_table_get(const ParquetTable *t, int64_t i, const char *column) {
    const cJSON *row = parquet_table_row(t, i);
    return row ? cJSON_GetObjectItemCaseSensitive(row, column) : NULL;
}

cJSON *parquet_table_take_row(ParquetTable *t, int64_t i) {
    if (i < 0 || i >= t->nrows) return NULL;
    cJSON *row = t->rows[i];
    t->rows[i] = NULL;
    return row;
}

void parquet_table_free(ParquetTable *t) {
    if (!t) return;
    if (t->rows)
        for (int64_t i = 0; i < t->nrows; i++) cJSON_Delete(t->rows[i]);
    free(t->rows);
    for (int c = 0; c < t->ncols; c++) free(t->names[c]);
    free(t->names);
    free(t->path);
    free(t);
}
