// pq_footer.c: the Parquet footer, parsed once for both readers (see pq_footer.h).
//
// Layout (Parquet format spec): "PAR1" | column chunks ... | FileMetaData (Thrift compact) | u32 footer length |
// "PAR1". FileMetaData holds the schema (field 2, a depth-first flattened tree), num_rows (3) and the row groups
// (4), each a list of one ColumnChunk per leaf with its ColumnMetaData: codec, value count and byte range.
#include "data/pq_footer.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "data/pq_encoding.h"
#include "data/pq_thrift.h"
#include "util/common.h"

int pq_footer_locate(const char *path, int64_t file_size, const uint8_t head[4], const uint8_t tail[8], uint32_t max_len,
                     const char *reader, int64_t *off, uint32_t *len, char *err, size_t errlen) {
    if (file_size < 12)
        return set_err(err, errlen, "%s: not a Parquet file (%lld bytes; a Parquet file has at least 12)", path,
                       (long long)file_size);
    if (memcmp(head, "PAR1", 4)) return set_err(err, errlen, "%s: not a Parquet file (no PAR1 magic at offset 0)", path);
    if (!memcmp(tail + 4, "PARE", 4)) return set_err(err, errlen, "%s: encrypted Parquet footers are not supported", path);
    if (memcmp(tail + 4, "PAR1", 4))
        return set_err(err, errlen, "%s: no PAR1 magic at the end (offset %lld): file truncated or not Parquet", path,
                       (long long)file_size - 4);
    uint32_t n = pq_load_u32le(tail);
    if (n > (uint64_t)file_size - 12)
        return set_err(err, errlen, "%s: footer length %u (at offset %lld) does not fit in the %lld-byte file", path, n,
                       (long long)file_size - 8, (long long)file_size);
    if (n > max_len)
        return set_err(err, errlen, "%s: footer of %u bytes: more than %s handles (%u)", path, n, reader, max_len);
    *off = file_size - 8 - n;
    *len = n;
    return 0;
}

// "<path>: footer (FileMetaData, N bytes at offset O): <what>": where a Thrift read failed, and why.
static int thrift_error(const PqFooter *f, const ThriftReader *t, const char *part, char *err, size_t errlen) {
    char at[48] = "";
    if (t->status != TC_TRUNCATED) snprintf(at, sizeof at, " at offset %lld", (long long)(f->off + (int64_t)t->err_pos));
    return set_err(err, errlen, "%s: footer (FileMetaData, %u bytes at offset %lld): %s%s%s", f->path, f->len,
                   (long long)f->off, part, t->what, at);
}

static char *printable(const uint8_t *p, size_t n) { // control bytes would break a one-line message
    if (n > 200) n = 200;
    char *s = xmalloc(n + 1);
    for (size_t i = 0; i < n; i++) s[i] = p[i] < 32 || p[i] == 127 ? '?' : (char)p[i];
    s[n] = 0;
    return s;
}

// Builds nodes[i] and its subtree; returns the index after it, or -1 (err set).
static int64_t build_node(PqFooter *f, int64_t i, int parent, int depth, char *err, size_t errlen) {
    if (i >= f->nschema)
        return set_err(err, errlen, "%s: footer: schema tree is inconsistent: group '%s' has more children than schema "
                                    "elements", f->path, f->nodes[parent].path);
    if (depth > PQ_MAX_DEPTH) return set_err(err, errlen, "%s: footer: schema nests deeper than %d levels", f->path, PQ_MAX_DEPTH);
    PqNode *n = &f->nodes[i];
    const PqSchemaElem *e = &f->schema[i];
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
        buf_printf(&b, "%s.%s", f->nodes[parent].path, pname);
        buf_put(&b, "", 1);
        n->path = b.p;
        free(pname);
    }
    if (parent >= 0) { // the repetition is checked once the tree is known to be whole (pq_footer_parse)
        n->def = f->nodes[parent].def + (e->repetition != REP_REQUIRED);
        n->rep = f->nodes[parent].rep + (e->repetition == REP_REPEATED);
    }
    if (e->num_children < 0) {
        if (parent < 0) return set_err(err, errlen, "%s: footer: schema root is not a group (it has no children)", f->path);
        if (e->type < 0) return set_err(err, errlen, "%s: footer: schema: leaf field '%s' has no physical type", f->path, n->path);
        n->leaf_lo = f->nleaves;
        n->leaf_hi = ++f->nleaves;
        return i + 1;
    }
    n->leaf_lo = f->nleaves;
    int64_t j = i + 1;
    int prev = -1;
    for (int32_t k = 0; k < e->num_children; k++) {
        int child = (int)j;
        if ((j = build_node(f, j, (int)i, depth + 1, err, errlen)) < 0) return -1;
        if (prev < 0) n->first_child = child;
        else f->nodes[prev].next_sibling = child;
        prev = child;
        n->n_children++;
    }
    n->leaf_hi = f->nleaves;
    return j;
}

int pq_footer_parse(PqFooter *f, const char *path, int64_t file_size, const uint8_t *meta, uint32_t len, int64_t off,
                    char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    f->path = path;
    f->file_size = file_size;
    f->meta = meta;
    f->len = len;
    f->off = off;
    f->nrows = -1;
    f->row_groups_at = SIZE_MAX; // the row-group list is parsed once the caller knows which leaves it reads
    ThriftReader t;
    thrift_init(&t, meta, len);
    int16_t last = 0, id;
    int ty;
    while (thrift_field(&t, &last, &id, &ty)) {
        if (id == 2 && ty == TC_LIST) {
            int et;
            if (!thrift_list(&t, &et, &f->nschema)) break;
            if (et != TC_STRUCT) { thrift_fail(&t, TC_CORRUPT, "schema is not a list of structs"); break; }
            if (f->nschema > PQ_MAX_FIELDS)
                return set_err(err, errlen, "%s: footer: schema of %lld elements: more than the reader handles (%d)", path,
                               (long long)f->nschema, PQ_MAX_FIELDS);
            free(f->schema);
            f->schema = xcalloc((size_t)f->nschema + 1, sizeof *f->schema);
            for (int64_t i = 0; i < f->nschema; i++)
                if (pq_parse_schema_elem(&t, &f->schema[i])) break;
        } else if (id == 3 && ty == TC_I64) {
            f->nrows = thrift_i64(&t);
        } else if (id == 4 && ty == TC_LIST) {
            f->row_groups_at = thrift_pos(&t);
            thrift_skip(&t, ty);
        } else {
            thrift_skip(&t, ty);
        }
    }
    if (t.status) return thrift_error(f, &t, "", err, errlen);
    if (!f->schema || f->nschema < 1 || f->nrows < 0 || f->row_groups_at == SIZE_MAX)
        return set_err(err, errlen, "%s: footer (FileMetaData at offset %lld) lacks its %s", path, (long long)off,
                       !f->schema || f->nschema < 1 ? "schema" : f->nrows < 0 ? "num_rows" : "row groups");
    f->nodes = xcalloc((size_t)f->nschema, sizeof *f->nodes);
    int64_t end = build_node(f, 0, -1, 0, err, errlen);
    if (end < 0) return -1;
    if (end != f->nschema)
        return set_err(err, errlen, "%s: footer: schema tree is inconsistent (the root's children end at element %lld of %lld)",
                       path, (long long)end, (long long)f->nschema);
    for (int64_t i = 1; i < f->nschema; i++)
        if (f->schema[i].repetition < REP_REQUIRED || f->schema[i].repetition > REP_REPEATED)
            return set_err(err, errlen, "%s: footer: schema: field '%s' has no valid repetition (%d)", path, f->nodes[i].path,
                           f->schema[i].repetition);
    f->leaf_node = xcalloc((size_t)f->nleaves + 1, sizeof *f->leaf_node);
    for (int64_t i = 0; i < f->nschema; i++)
        if (f->schema[i].num_children < 0) f->leaf_node[f->nodes[i].leaf_lo] = (int)i;
    return 0;
}

int pq_footer_find_column(const PqFooter *f, const char *name, char *err, size_t errlen) {
    const PqNode *root = &f->nodes[0];
    for (int k = root->first_child; k >= 0; k = f->nodes[k].next_sibling)
        if (!strcmp(f->nodes[k].name, name)) return k;
    Buf names = {0};
    for (int k = root->first_child; k >= 0; k = f->nodes[k].next_sibling) {
        if (names.n > 400) { buf_puts(&names, ", ..."); break; }
        buf_printf(&names, "%s%s", names.n ? ", " : "", f->nodes[k].path);
    }
    buf_put(&names, "", 1);
    set_err(err, errlen, "%s: no column '%s' (top-level columns: %s)", f->path, name, names.p);
    buf_free(&names);
    return -1;
}

// ColumnMetaData of leaf `leaf`: path_in_schema must be the names from the root's child down to the leaf.
static void parse_column_meta(const PqFooter *f, ThriftReader *t, PqChunkMeta *m, int leaf) {
    int16_t last = 0, id;
    int ty;
    while (thrift_field(t, &last, &id, &ty)) {
        if (id == 1 && ty == TC_I32) m->type = thrift_i32(t);
        else if (id == 3 && ty == TC_LIST) {
            int et;
            int64_t n;
            if (!thrift_list(t, &et, &n)) break;
            int node = f->leaf_node[leaf], depth = 0;
            for (int k = node; k > 0; k = f->nodes[k].parent) depth++;
            m->path_ok = et == TC_BINARY && n == depth;
            for (int64_t s = 0; s < n; s++) {
                if (et != TC_BINARY) { thrift_skip(t, et); continue; }
                size_t len;
                const uint8_t *p = thrift_binary(t, &len);
                if (!m->path_ok || !p) continue;
                int up = node; // the node at position s on the path: depth - 1 - s steps above the leaf
                for (int64_t u = 0; u < depth - 1 - s; u++) up = f->nodes[up].parent;
                if (f->schema[up].name_len != len || (len && memcmp(f->schema[up].name, p, len))) m->path_ok = 0;
            }
        } else if (id == 4 && ty == TC_I32) m->codec = thrift_i32(t);
        else if (id == 5 && ty == TC_I64) m->num_values = thrift_i64(t);
        else if (id == 7 && ty == TC_I64) m->total_compressed = thrift_i64(t);
        else if (id == 9 && ty == TC_I64) m->data_off = thrift_i64(t);
        else if (id == 11 && ty == TC_I64) m->dict_off = thrift_i64(t);
        else thrift_skip(t, ty);
    }
}

static void parse_column_chunk(const PqFooter *f, ThriftReader *t, PqChunkMeta *m, int leaf) {
    memset(m, 0, sizeof *m);
    m->type = m->codec = -1;
    m->path_ok = 1;
    int16_t last = 0, id;
    int ty;
    while (thrift_field(t, &last, &id, &ty)) {
        if (id == 1 && ty == TC_BINARY) m->file_path = thrift_binary(t, &m->file_path_len);
        else if (id == 3 && ty == TC_STRUCT) {
            m->has_meta = 1;
            parse_column_meta(f, t, m, leaf);
        } else thrift_skip(t, ty);
    }
}

int pq_footer_row_groups(PqFooter *f, const unsigned char *keep, char *err, size_t errlen) {
    ThriftReader t;
    thrift_init(&t, f->meta, f->len);
    t.p += f->row_groups_at;
    int et;
    if (thrift_list(&t, &et, &f->nrg) && et != TC_STRUCT) thrift_fail(&t, TC_CORRUPT, "row groups are not a list of structs");
    if (t.status) return thrift_error(f, &t, "row groups: ", err, errlen);
    f->slot = xcalloc((size_t)f->nleaves + 1, sizeof *f->slot);
    for (int k = 0; k < f->nleaves; k++) f->slot[k] = !keep || keep[k] ? f->nkept++ : -1;
    if (f->nrg * (f->nkept ? f->nkept : 1) > PQ_MAX_CHUNKS) // nrg is at most the footer's length
        return set_err(err, errlen, "%s: footer: %lld row groups of %d columns read: more column chunks than the reader "
                                    "handles (%lld)", f->path, (long long)f->nrg, f->nkept, (long long)PQ_MAX_CHUNKS);
    f->rg_rows = xcalloc((size_t)f->nrg + 1, sizeof *f->rg_rows);
    f->chunks = xcalloc((size_t)(f->nrg * f->nkept) + 1, sizeof *f->chunks);
    int64_t sum = 0;
    for (int64_t g = 0; g < f->nrg; g++) {
        int16_t last = 0, id;
        int ty, have_columns = 0;
        f->rg_rows[g] = -1;
        while (thrift_field(&t, &last, &id, &ty)) {
            if (id == 1 && ty == TC_LIST) {
                int ct;
                int64_t nc;
                if (!thrift_list(&t, &ct, &nc)) break;
                if (ct != TC_STRUCT) { thrift_fail(&t, TC_CORRUPT, "row group columns are not structs"); break; }
                if (nc != f->nleaves)
                    return set_err(err, errlen, "%s: footer: row group %lld has %lld column chunks, the schema has %d leaf "
                                                "columns", f->path, (long long)g, (long long)nc, f->nleaves);
                for (int64_t k = 0; k < nc; k++) {
                    if (f->slot[k] < 0) thrift_skip(&t, TC_STRUCT);
                    else parse_column_chunk(f, &t, &f->chunks[g * f->nkept + f->slot[k]], (int)k);
                }
                have_columns = 1;
            } else if (id == 3 && ty == TC_I64) f->rg_rows[g] = thrift_i64(&t);
            else thrift_skip(&t, ty);
        }
        if (t.status) return thrift_error(f, &t, "row groups: ", err, errlen);
        if (!have_columns || f->rg_rows[g] < 0)
            return set_err(err, errlen, "%s: footer: row group %lld lacks its %s", f->path, (long long)g,
                           have_columns ? "num_rows" : "column list");
        if (f->rg_rows[g] > INT64_MAX - sum)
            return set_err(err, errlen, "%s: footer: row group %lld: row counts overflow", f->path, (long long)g);
        sum += f->rg_rows[g];
    }
    if (sum != f->nrows)
        return set_err(err, errlen, "%s: footer: row groups hold %lld rows, the file says %lld", f->path, (long long)sum,
                       (long long)f->nrows);
    return 0;
}

const PqChunkMeta *pq_footer_chunk(const PqFooter *f, int64_t g, int leaf) {
    return f->slot[leaf] < 0 ? NULL : &f->chunks[g * f->nkept + f->slot[leaf]];
}

int pq_chunk_range(const PqFooter *f, int64_t g, int leaf, int64_t *start, int64_t *end, char *msg, size_t msglen) {
    const PqChunkMeta *m = pq_footer_chunk(f, g, leaf);
    int type = f->schema[f->leaf_node[leaf]].type;
    if (!m) return set_err(msg, msglen, "internal: the chunk's metadata was not kept");
    if (m->file_path)
        return set_err(msg, msglen, "chunk is stored in another file ('%.*s'), which is not supported",
                       (int)(m->file_path_len > 200 ? 200 : m->file_path_len), (const char *)m->file_path);
    if (!m->has_meta) return set_err(msg, msglen, "column chunk has no metadata (encrypted file?)");
    if (m->type != type)
        return set_err(msg, msglen, "chunk has physical type %s, the schema says %s", pq_type_name(m->type), pq_type_name(type));
    if (!m->path_ok) return set_err(msg, msglen, "chunk's path_in_schema does not name the column");
    if (!pq_codec_supported(m->codec))
        return set_err(msg, msglen, "codec %s (%d) is not supported (supported: UNCOMPRESSED, SNAPPY, GZIP, ZSTD)",
                       pq_codec_name(m->codec), m->codec);
    if (m->num_values < 0 || m->total_compressed < 0) return set_err(msg, msglen, "negative num_values or total_compressed_size");
    // A chunk starts at its dictionary page when it has one. Some writers store dictionary_page_offset 0 for
    // "none", so only an offset inside the file and before the first data page counts.
    int64_t s = m->data_off;
    if (m->dict_off >= 4 && m->dict_off < m->data_off) s = m->dict_off;
    if (s < 4 || s > f->off || m->total_compressed > f->off - s)
        return set_err(msg, msglen, "pages at [%lld, %llu) lie outside the data area [4, %lld) of the %lld-byte file",
                       (long long)s, (unsigned long long)s + (unsigned long long)m->total_compressed, (long long)f->off,
                       (long long)f->file_size);
    *start = s;
    *end = s + m->total_compressed;
    return 0;
}

void pq_footer_free(PqFooter *f) {
    if (f->nodes)
        for (int64_t i = 0; i < f->nschema; i++) {
            free(f->nodes[i].path);
            free(f->nodes[i].name);
        }
    free(f->nodes);
    free(f->schema);
    free(f->leaf_node);
    free(f->rg_rows);
    free(f->slot);
    free(f->chunks);
    memset(f, 0, sizeof *f);
}
