// pq_table.c: the in-memory table reader of parquet.h: whole rows of a small Parquet file (lm-eval task files),
// nested columns included, as cJSON objects.
//
// Nested data in Parquet (the Dremel encoding): only leaves are stored, one column chunk per leaf and row
// group. Each stored entry carries a repetition level (at which repeated ancestor a new element starts; 0 = a
// new row) and a definition level (how many of its OPTIONAL/REPEATED ancestors, itself included, are present);
// a value is stored only when the entry is defined all the way down. A null struct or an empty list is one entry
// in every leaf below it, with the definition level of the deepest ancestor that is present.
//
// The reader: (1) reads the file and its footer (pq_footer.c: the schema tree, the row groups) and classifies
// each selected node (primitive, struct, list in its 3-level or legacy 2-level form); (2) decodes every page of
// every selected leaf into arrays of levels and values (pq_table_decode.c); (3) walks the leaves' level streams
// in step to rebuild each row. Every length and offset read from the file is checked against the bytes that
// remain; the levels are checked for consistency between the leaves of one column, so a corrupt file gives an
// error, never a wrong row silently.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/parquet.h"
#include "data/pq_table_decode.h"
#include "util/common.h"

// Footer bound (task files: a few KB of footer, tens of fields, a few row groups).
#define MAX_FOOTER_BYTES (64u << 20)

int table_fail(TableCtx *c, const char *fmt, ...) {
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->where[0]) return set_err(c->err, c->errlen, "%s: %s: %s", c->path, c->where, msg);
    return set_err(c->err, c->errlen, "%s: %s", c->path, msg);
}

// ---------------------------------------------------------------------------------------------------------
// The file and its footer

static int read_whole_file(TableCtx *c) {
    int fd = open(c->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return set_err(c->err, c->errlen, "cannot open %s: %s", c->path, strerror(errno));
    struct stat st;
    char e[ERR_LEN];
    int rc = -1;
    if (fstat(fd, &st) != 0) { set_err(c->err, c->errlen, "cannot stat %s: %s", c->path, strerror(errno)); goto done; }
    if (!S_ISREG(st.st_mode)) { table_fail(c, "not a regular file"); goto done; }
    c->size = st.st_size;
    if (c->size > PARQUET_TABLE_MAX_BYTES) {
        table_fail(c, "%lld bytes: too large for the in-memory table reader (at most %lld bytes; task files hold a few MB)",
                   (long long)c->size, (long long)PARQUET_TABLE_MAX_BYTES);
        goto done;
    }
    c->file = xmalloc(c->size ? (size_t)c->size : 1);
    if (pq_pread_full(fd, c->file, (size_t)c->size, 0, e, sizeof e)) { table_fail(c, "%s", e); goto done; }
    rc = 0;
done:
    close(fd);
    return rc;
}

static int read_footer(TableCtx *c) {
    int64_t off;
    uint32_t len;
    const uint8_t *tail = c->size >= 12 ? c->file + c->size - 8 : c->file;
    if (pq_footer_locate(c->path, c->size, c->file, tail, MAX_FOOTER_BYTES, "the table reader (task files have a few KB)",
                         &off, &len, c->err, c->errlen) ||
        pq_footer_parse(&c->f, c->path, c->size, c->file + off, len, off, c->err, c->errlen) ||
        pq_footer_row_groups(&c->f, NULL, c->err, c->errlen))
        return -1;
    if (c->f.nrows > MAX_ENTRIES)
        return table_fail(c, "footer: more than %lld rows: too many for the in-memory table reader", (long long)MAX_ENTRIES);
    c->leaves = xcalloc((size_t)c->f.nleaves + 1, sizeof *c->leaves);
    for (int k = 0; k < c->f.nleaves; k++) {
        TableLeaf *l = &c->leaves[k];
        int i = c->f.leaf_node[k];
        l->node = i;
        l->type = c->f.schema[i].type;
        l->max_def = c->f.nodes[i].def;
        l->max_rep = c->f.nodes[i].rep;
    }
    return 0;
}

// ---------------------------------------------------------------------------------------------------------
// The shapes this reader renders (checked on the selected columns before anything is decoded)

static int is_list_group(const PqSchemaElem *e) { return e->converted_type == CT_LIST || e->logical_type == LT_LIST; }

static int check_leaf(TableCtx *c, PqNode *n) {
    const PqSchemaElem *e = n->e;
    TableLeaf *l = &c->leaves[n->leaf_lo];
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
        return table_fail(c, "column '%s' has %s, which is not supported (supported: strings, integers, booleans, floats, "
                       "and lists and structs of them)", n->path, what);
    l->selected = 1;
    n->kind = K_LEAF;
    return 0;
}

static int check_node(TableCtx *c, int i) {
    PqNode *n = &c->f.nodes[i];
    const PqSchemaElem *e = n->e;
    if (e->num_children < 0) return check_leaf(c, n);
    if (e->converted_type == CT_MAP || e->converted_type == CT_MAP_KEY_VALUE || e->logical_type == LT_MAP)
        return table_fail(c, "column '%s' is a MAP, which is not supported", n->path);
    if (n->n_children == 0) return table_fail(c, "column '%s' is a group without fields, which is not supported", n->path);
    if (!is_list_group(e)) {
        n->kind = K_STRUCT;
        for (int k = n->first_child; k >= 0; k = c->f.nodes[k].next_sibling)
            if (check_node(c, k)) return -1;
        return 0;
    }
    // LIST: one REPEATED child. Which node is the element follows the spec's backward-compatibility rules:
    // a repeated primitive, a repeated group of several fields, or a repeated group named "array" or
    // "<list>_tuple" is itself the element (2-level lists); otherwise its only field is (the 3-level form).
    PqNode *r = n->n_children == 1 ? &c->f.nodes[n->first_child] : NULL;
    if (!r || r->e->repetition != REP_REPEATED)
        return table_fail(c, "column '%s' is annotated LIST but does not hold exactly one REPEATED field", n->path);
    if (r->e->num_children >= 0 && r->n_children == 0)
        return table_fail(c, "column '%s' is a group without fields, which is not supported", r->path);
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
// Rows: the leaves' level streams walked in step (each node reads exactly the entries of its subtree)

typedef struct {
    TableCtx *c;
    Buf scratch;
    int64_t row;
} Asm;

static int at_end(const TableLeaf *l) { return l->pos >= l->n; }
static int rep_at(const TableLeaf *l) { return l->rep ? l->rep[l->pos] : 0; }
static int def_at(const TableLeaf *l) { return l->def ? l->def[l->pos] : l->max_def; }

static cJSON *asm_fail(Asm *a, int node, const char *what) {
    TableCtx *c = a->c;
    snprintf(c->where, sizeof c->where, "column '%s', row %lld", c->f.nodes[node].path, (long long)a->row);
    table_fail(c, "%s", what);
    return NULL;
}

// A null (absent OPTIONAL node) or an empty list: one entry in every leaf below, defined to exactly `def`.
static int consume_absent(Asm *a, int node, int def) {
    const PqNode *n = &a->c->f.nodes[node];
    for (int k = n->leaf_lo; k < n->leaf_hi; k++) {
        TableLeaf *l = &a->c->leaves[k];
        if (at_end(l) || def_at(l) != def) {
            asm_fail(a, l->node, at_end(l) ? "values end early" : "levels disagree between the fields of a struct or list");
            return -1;
        }
        l->pos++;
    }
    return 0;
}

static cJSON *leaf_json(Asm *a, TableLeaf *l, PqValue v) {
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
    TableCtx *c = a->c;
    const PqNode *r = &c->f.nodes[rnode];
    TableLeaf *first = &c->leaves[r->leaf_lo];
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
            const TableLeaf *l = &c->leaves[k];
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
    TableCtx *c = a->c;
    const PqNode *n = &c->f.nodes[i];
    if (n->e->repetition == REP_REPEATED && !as_element) return read_repeated(a, i, i);
    TableLeaf *first = &c->leaves[n->leaf_lo];
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
        for (int k = n->first_child; k >= 0; k = c->f.nodes[k].next_sibling) {
            cJSON *v = read_node(a, k, 0);
            if (!v) { cJSON_Delete(o); return NULL; }
            cJSON_AddItemToObject(o, c->f.nodes[k].name, v);
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

static void ctx_free(TableCtx *c) {
    for (int k = 0; c->leaves && k < c->f.nleaves; k++) {
        free(c->leaves[k].rep);
        free(c->leaves[k].def);
        free(c->leaves[k].vals);
    }
    free(c->leaves);
    pq_footer_free(&c->f);
    pq_pages_free(&c->pages);
    free(c->file);
    for (int b = 0; b < c->nblocks; b++) free(c->blocks[b]);
    free(c->blocks);
}

ParquetTable *parquet_read_table(const char *path, const char *const *columns, int ncolumns, char *err,
                                 size_t errlen) {
    TableCtx c = {.path = path, .err = err, .errlen = errlen};
    ParquetTable *t = NULL;
    int *sel = NULL, nsel = 0;
    Asm a = {.c = &c};
    if (read_whole_file(&c) || read_footer(&c)) goto fail;

    // The selected top-level fields, in the order asked (file order when all).
    const PqNode *root = &c.f.nodes[0];
    sel = xcalloc((size_t)(columns ? ncolumns : root->n_children) + 1, sizeof *sel);
    if (!columns) {
        for (int k = root->first_child; k >= 0; k = c.f.nodes[k].next_sibling) sel[nsel++] = k;
    } else {
        for (int q = 0; q < ncolumns; q++) {
            int found = pq_footer_find_column(&c.f, columns[q], err, errlen);
            if (found < 0) goto fail;
            for (int k = 0; k < nsel; k++)
                if (sel[k] == found) {
                    table_fail(&c, "column '%s' is asked for twice", columns[q]);
                    goto fail;
                }
            sel[nsel++] = found;
        }
    }
    for (int s = 0; s < nsel; s++)
        if (check_node(&c, sel[s])) goto fail;

    for (int k = 0; k < c.f.nleaves; k++)
        if (c.leaves[k].selected)
            for (int64_t g = 0; g < c.f.nrg; g++)
                if (table_decode_chunk(&c, k, g)) goto fail;
    c.where[0] = 0;

    t = xcalloc(1, sizeof *t);
    t->path = xstrdup(path);
    t->nrows = c.f.nrows;
    t->ncols = nsel;
    t->names = xcalloc((size_t)nsel + 1, sizeof *t->names);
    for (int s = 0; s < nsel; s++) t->names[s] = xstrdup(c.f.nodes[sel[s]].name);
    t->rows = xcalloc((size_t)c.f.nrows + 1, sizeof *t->rows);
    for (a.row = 0; a.row < c.f.nrows; a.row++) {
        cJSON *o = cJSON_CreateObject();
        t->rows[a.row] = o;
        for (int s = 0; s < nsel; s++) {
            const PqNode *n = &c.f.nodes[sel[s]];
            for (int k = n->leaf_lo; k < n->leaf_hi; k++) { // every leaf stands at the start of this row
                const TableLeaf *l = &c.leaves[k];
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
    for (int k = 0; k < c.f.nleaves; k++) {
        const TableLeaf *l = &c.leaves[k];
        if (l->selected && (l->pos != l->n || l->vpos != l->nvals)) {
            snprintf(c.where, sizeof c.where, "column '%s'", c.f.nodes[l->node].path);
            table_fail(&c, "%lld level entries and %lld values left over after the file's %lld rows",
                 (long long)(l->n - l->pos), (long long)(l->nvals - l->vpos), (long long)c.f.nrows);
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
