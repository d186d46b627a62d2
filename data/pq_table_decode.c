// pq_table_decode.c: the table reader's pages: each selected leaf's column chunks decoded into arrays of
// repetition / definition levels and values (pq_table.c rebuilds the rows from them). The pages themselves
// (headers, dictionary, decompression, level streams) come from pq_pages.c; this file checks the levels and
// decodes the values of every encoding a task file may use.
#include <stdlib.h>
#include <string.h>

#include "data/pq_table_decode.h"
#include "util/common.h"

void table_keep_block(TableCtx *c, void *p) {
    if (c->nblocks == c->blocks_cap) {
        c->blocks_cap = c->blocks_cap ? c->blocks_cap * 2 : 64;
        c->blocks = xrealloc(c->blocks, (size_t)c->blocks_cap * sizeof *c->blocks);
    }
    c->blocks[c->nblocks++] = p;
}

static void keep_page(void *ctx, void *block) { table_keep_block(ctx, block); }

static int grow_leaf(TableCtx *c, TableLeaf *l, int64_t entries, int64_t values) {
    if (entries > MAX_ENTRIES - c->entries)
        return table_fail(c, "more than %lld values in the selected columns: too many for the in-memory table reader",
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

// Reads n levels of at most max from the page's level decoder h into out.
static int read_levels(TableCtx *c, const char *what, PqHybrid *h, int max, int64_t n, uint8_t *out) {
    for (int64_t i = 0; i < n; i++) {
        uint32_t v;
        if (!pq_hybrid_next(h, &v)) return table_fail(c, "%s levels end after %lld of %lld values", what, (long long)i, (long long)n);
        if (v > (uint32_t)max) return table_fail(c, "%s level %u > the column's maximum %d", what, v, max);
        out[i] = (uint8_t)v;
    }
    return 0;
}

// Decodes nn values (the defined entries of the page) encoded with `enc` from vals[0..len).
static int decode_values(TableCtx *c, TableLeaf *l, const PqPages *pg, int enc, const uint8_t *p, size_t len, int64_t nn) {
    PqValue *out = l->vals + l->nvals;
    char e[ERR_LEN];
    int type = l->type;
    switch (enc) {
    case ENC_PLAIN:
        if (pq_plain_decode(type, p, len, nn, out, e, sizeof e) < 0) return table_fail(c, "%s", e);
        break;
    case ENC_PLAIN_DICTIONARY:
    case ENC_RLE_DICTIONARY: {
        if (!pg->has_dict) return table_fail(c, "%s page but the column chunk has no dictionary page", pq_encoding_name(enc));
        if (nn == 0) break;
        if (len < 1) return table_fail(c, "dictionary indices missing");
        if (p[0] > 32) return table_fail(c, "dictionary index bit width %d > 32", p[0]);
        PqHybrid h;
        pq_hybrid_init(&h, p + 1, len - 1, p[0]);
        for (int64_t i = 0; i < nn; i++) {
            uint32_t k;
            if (!pq_hybrid_next(&h, &k)) return table_fail(c, "dictionary indices end after %lld of %lld values", (long long)i, (long long)nn);
            if (k >= pg->dict_n)
                return table_fail(c, "dictionary index %u out of range (dictionary has %lld entries)", k, (long long)pg->dict_n);
            out[i] = pg->dict[k];
        }
        break;
    }
    case ENC_RLE: { // booleans: a u32 byte length, then the hybrid encoding at bit width 1
        if (type != PT_BOOLEAN) return table_fail(c, "RLE values in a %s column (only booleans use it)", pq_type_name(type));
        if (len < 4) return table_fail(c, "RLE booleans: length truncated");
        uint32_t n = pq_load_u32le(p);
        if (n > len - 4) return table_fail(c, "RLE booleans of %u bytes, only %zu in the page", n, len - 4);
        PqHybrid h;
        pq_hybrid_init(&h, p + 4, n, 1);
        for (int64_t i = 0; i < nn; i++) {
            uint32_t v;
            if (!pq_hybrid_next(&h, &v)) return table_fail(c, "RLE booleans end after %lld of %lld values", (long long)i, (long long)nn);
            out[i].i = v;
        }
        break;
    }
    case ENC_DELTA_BINARY_PACKED: {
        if (type != PT_INT32 && type != PT_INT64)
            return table_fail(c, "DELTA_BINARY_PACKED values in a %s column", pq_type_name(type));
        PqDelta dd;
        if (pq_delta_init(&dd, p, len, nn, e, sizeof e) < 0) return table_fail(c, "%s", e);
        for (int64_t i = 0; i < nn; i++) {
            int64_t v;
            if (!pq_delta_next(&dd, &v)) return table_fail(c, "DELTA_BINARY_PACKED holds %lld values, the page %lld", (long long)i, (long long)nn);
            out[i].i = type == PT_INT32 ? (int64_t)(int32_t)(uint32_t)v : v; // INT32 deltas wrap modulo 2^32
        }
        break;
    }
    case ENC_DELTA_LENGTH_BYTE_ARRAY: {
        if (type != PT_BYTE_ARRAY) return table_fail(c, "DELTA_LENGTH_BYTE_ARRAY values in a %s column", pq_type_name(type));
        PqDelta lens;
        int64_t used = pq_delta_init(&lens, p, len, nn, e, sizeof e);
        if (used < 0) return table_fail(c, "value lengths: %s", e);
        size_t off = (size_t)used;
        for (int64_t i = 0; i < nn; i++) {
            int64_t k;
            if (!pq_delta_next(&lens, &k)) return table_fail(c, "%lld value lengths for %lld values", (long long)i, (long long)nn);
            if (k < 0 || (uint64_t)k > len - off || k > UINT32_MAX)
                return table_fail(c, "value length %lld out of range (%zu bytes left)", (long long)k, len - off);
            out[i].s.p = p + off;
            out[i].s.n = (uint32_t)k;
            off += (size_t)k;
        }
        break;
    }
    case ENC_DELTA_BYTE_ARRAY: { // prefix lengths, suffix lengths, suffixes; each value extends the previous one
        if (type != PT_BYTE_ARRAY) return table_fail(c, "DELTA_BYTE_ARRAY values in a %s column", pq_type_name(type));
        PqDelta pre, suf;
        int64_t u1 = pq_delta_init(&pre, p, len, nn, e, sizeof e);
        if (u1 < 0) return table_fail(c, "prefix lengths: %s", e);
        int64_t u2 = pq_delta_init(&suf, p + u1, len - (size_t)u1, nn, e, sizeof e);
        if (u2 < 0) return table_fail(c, "suffix lengths: %s", e);
        size_t off = (size_t)(u1 + u2), total = 0, cap = len + 64, prev_off = 0, prev_n = 0;
        uint8_t *buf = xmalloc(cap); // the rebuilt values, back to back; pointers are set once it stops moving
        for (int64_t i = 0; i < nn; i++) {
            int64_t a, b;
            if (!pq_delta_next(&pre, &a) || !pq_delta_next(&suf, &b)) {
                free(buf);
                return table_fail(c, "DELTA_BYTE_ARRAY lengths for %lld of %lld values", (long long)i, (long long)nn);
            }
            if (a < 0 || (uint64_t)a > prev_n || b < 0 || (uint64_t)b > len - off || (uint64_t)(a + b) > UINT32_MAX) {
                free(buf);
                return table_fail(c, "value %lld: prefix %lld / suffix %lld bytes out of range (previous value %zu bytes, %zu left)",
                            (long long)i, (long long)a, (long long)b, prev_n, len - off);
            }
            if ((int64_t)(a + b) > MAX_DECODED - c->decoded) {
                free(buf);
                return table_fail(c, "DELTA_BYTE_ARRAY values rebuild to more than %lld bytes", (long long)MAX_DECODED);
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
        table_keep_block(c, buf);
        for (int64_t i = 0, at = 0; i < nn; at += out[i].s.n, i++) out[i].s.p = buf + at;
        break;
    }
    case ENC_BYTE_STREAM_SPLIT: { // byte k of value i is at k * count + i
        int w = pq_value_width(type);
        if (!w) return table_fail(c, "BYTE_STREAM_SPLIT values in a %s column", pq_type_name(type));
        if (len % (size_t)w) return table_fail(c, "BYTE_STREAM_SPLIT data of %zu bytes is not a multiple of %d", len, w);
        size_t count = len / (size_t)w;
        if ((uint64_t)nn > count) return table_fail(c, "BYTE_STREAM_SPLIT holds %zu values, the page %lld", count, (long long)nn);
        for (int64_t i = 0; i < nn; i++) {
            uint8_t b[8];
            for (int k = 0; k < w; k++) b[k] = p[(size_t)k * count + (size_t)i];
            out[i] = pq_fixed_value(type, b);
        }
        break;
    }
    default:
        return table_fail(c, "value encoding %s (%d) is not supported", pq_encoding_name(enc), enc);
    }
    l->nvals += nn;
    return 0;
}

// One data page of leaf l: its levels appended to l->rep / l->def, its defined values to l->vals.
static int data_page(TableCtx *c, TableLeaf *l, const PqPages *pg, PqDataPage *p) {
    int64_t nv = p->num_values;
    if (grow_leaf(c, l, nv, 0)) return -1;
    uint8_t *rep = l->max_rep ? l->rep + l->n : NULL, *def = l->max_def ? l->def + l->n : NULL;
    if (rep && read_levels(c, "repetition", &p->rep, l->max_rep, nv, rep)) return -1;
    if (def && read_levels(c, "definition", &p->def, l->max_def, nv, def)) return -1;
    int64_t nn = 0, rows = 0;
    for (int64_t i = 0; i < nv; i++) {
        nn += !def || def[i] == l->max_def;
        rows += !rep || rep[i] == 0;
    }
    // A row group starts a row, and so does every v2 page (the spec has v2 pages break at row boundaries).
    if ((p->chunk_first || p->v2) && nv > 0 && rep && rep[0] != 0)
        return table_fail(c, "the %s first value has repetition level %d, not 0 (it must start a row)",
                          p->chunk_first ? "column chunk's" : "page's", rep[0]);
    if (p->v2 && p->h.num_nulls != nv - nn)
        return table_fail(c, "page has %lld nulls, its header says %d", (long long)(nv - nn), p->h.num_nulls);
    if (p->v2 && p->h.num_rows != rows)
        return table_fail(c, "page starts %lld rows, its header says %d", (long long)rows, p->h.num_rows);
    if (grow_leaf(c, l, 0, nn) || decode_values(c, l, pg, p->h.encoding, p->values, p->values_len, nn)) return -1;
    l->n += nv;
    return 0;
}

int table_decode_chunk(TableCtx *c, int k, int64_t g) {
    TableLeaf *l = &c->leaves[k];
    const PqNode *n = &c->f.nodes[l->node];
    char msg[ERR_LEN];
    int64_t start, end, first_entry = l->n;
    snprintf(c->where, sizeof c->where, "column '%s', row group %lld", n->path, (long long)g);
    if (pq_chunk_range(&c->f, g, k, &start, &end, msg, sizeof msg)) return table_fail(c, "%s", msg);
    const PqChunkMeta *m = pq_footer_chunk(&c->f, g, k);
    PqPages *pg = &c->pages;
    pq_pages_start(pg, c->file, -1, m->codec, l->type, l->max_rep, l->max_def, start, end, m->num_values);
    pg->keep = l->type == PT_BYTE_ARRAY ? keep_page : NULL; // string values point into their page
    pg->keep_ctx = c;
    pg->decoded = &c->decoded;
    pg->max_decoded = MAX_DECODED;
    for (;;) {
        PqDataPage p;
        int rc = pq_pages_next(pg, &p, msg, sizeof msg);
        snprintf(c->where, sizeof c->where, "column '%s', row group %lld, page at offset %lld", n->path, (long long)g,
                 (long long)pg->page_off);
        if (rc < 0) return table_fail(c, "%s", msg);
        if (rc == 0) break;
        if (data_page(c, l, pg, &p)) return -1;
    }
    snprintf(c->where, sizeof c->where, "column '%s', row group %lld", n->path, (long long)g);
    int64_t rows = 0;
    for (int64_t i = first_entry; i < l->n; i++) rows += !l->rep || l->rep[i] == 0;
    if (rows != c->f.rg_rows[g])
        return table_fail(c, "column chunk holds %lld rows, the row group %lld", (long long)rows, (long long)c->f.rg_rows[g]);
    return 0;
}
