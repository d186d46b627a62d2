// parquet.c: streaming reader for one top-level string (BYTE_ARRAY) column of a Parquet file.
//
// The footer (pq_footer.c) gives the column's chunk in each row group; the chunk's pages (pq_pages.c) are read
// with pread as they are needed, so memory is bounded by one page (plus the chunk's dictionary). This file
// picks the column, then decodes its values one at a time (PLAIN, dictionary indices, DELTA_LENGTH_BYTE_ARRAY,
// DELTA_BYTE_ARRAY) with the definition levels that mark nulls. Errors name the file, the place (row group,
// page offset) and what was wrong.
#define _GNU_SOURCE
#include "data/parquet.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/pq_encoding.h"
#include "data/pq_footer.h"
#include "data/pq_format.h"
#include "data/pq_pages.h"
#include "util/common.h"

// A footer bigger than this is certainly corrupt: it holds per-row-group metadata, not data.
#define MAX_FOOTER_BYTES (256u << 20)

typedef struct {
    int64_t start, end;  // file byte range holding the chunk's pages
    int64_t num_values;  // values in the chunk, nulls included (= rows for a flat column)
    int codec;
} Chunk;

struct ParquetReader {
    char *path;
    int fd;
    int64_t num_rows;
    int max_def;               // 0: REQUIRED column, 1: OPTIONAL (a definition level per value)
    Chunk *chunks;             // one per row group
    int64_t n_chunks;
    int64_t rg;                // the row group being read: -1 before the first, n_chunks at the end
    PqPages pages;             // its column chunk's pages (and dictionary)

    // The current data page.
    int64_t left;              // values (nulls included) not returned yet
    int64_t nulls_seen, nulls_expected; // nulls_expected: v2 header's num_nulls, -1 for v1
    int encoding;
    int has_defs;
    PqHybrid defs, indices;
    const uint8_t *vp, *vend;  // PLAIN values / DELTA_* value bytes
    PqDelta lens, prefixes;    // DELTA_LENGTH_BYTE_ARRAY lengths; DELTA_BYTE_ARRAY suffix and prefix lengths
    Buf value;                 // DELTA_BYTE_ARRAY: the value being rebuilt from its predecessor

    int failed;                // sticky: once an error was reported, every later call reports it again
    char last_err[ERR_LEN];
};

// Reports an error while streaming: "<path>: row group R, page at offset O: <message>", kept for later calls.
__attribute__((format(printf, 4, 5)))
static int stream_fail(ParquetReader *r, char *err, size_t errlen, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(r->last_err, sizeof r->last_err, "%.200s: row group %lld, page at offset %lld: %s", r->path,
             (long long)r->rg, (long long)r->pages.page_off, msg);
    r->failed = 1;
    return set_err(err, errlen, "%s", r->last_err);
}

// ---------------------------------------------------------------------------------------------------------
// Opening: the footer, the column and its chunk in every row group

// Picks `column` in the parsed footer f and fills r->chunks with its chunk in each row group.
static int pick_column(ParquetReader *r, PqFooter *f, const char *column, char *err, size_t errlen) {
    int i = pq_footer_find_column(f, column, err, errlen);
    if (i < 0) return -1;
    const PqSchemaElem *e = f->nodes[i].e;
    if (e->num_children >= 0)
        return set_err(err, errlen, "%s: column '%s' is a nested group, not a string column", r->path, column);
    if (e->repetition == REP_REPEATED)
        return set_err(err, errlen, "%s: column '%s' is repeated (a list), not a single string per row", r->path, column);
    if (e->type != PT_BYTE_ARRAY)
        return set_err(err, errlen, "%s: column '%s' has physical type %s, expected BYTE_ARRAY (a string column)", r->path,
                       column, pq_type_name(e->type));
    r->max_def = e->repetition == REP_OPTIONAL ? 1 : 0;
    int leaf = f->nodes[i].leaf_lo;
    unsigned char *keep = xcalloc((size_t)f->nleaves, 1);
    keep[leaf] = 1;
    int rc = pq_footer_row_groups(f, keep, err, errlen);
    free(keep);
    if (rc) return -1;
    r->num_rows = f->nrows;
    r->chunks = xcalloc((size_t)(f->nrg ? f->nrg : 1), sizeof *r->chunks);
    r->n_chunks = f->nrg;
    for (int64_t g = 0; g < f->nrg; g++) {
        char msg[ERR_LEN];
        int64_t start, end;
        const PqChunkMeta *m = pq_footer_chunk(f, g, leaf);
        if (pq_chunk_range(f, g, leaf, &start, &end, msg, sizeof msg))
            return set_err(err, errlen, "%s: footer: row group %lld, column '%s': %s", r->path, (long long)g, column, msg);
        if (m->num_values != f->rg_rows[g])
            return set_err(err, errlen, "%s: footer: row group %lld, column '%s': chunk holds %lld values but the row group "
                                        "has %lld rows", r->path, (long long)g, column, (long long)m->num_values,
                           (long long)f->rg_rows[g]);
        r->chunks[g] = (Chunk){start, end, m->num_values, m->codec};
    }
    return 0;
}

ParquetReader *parquet_open(const char *path, const char *column, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { set_err(err, errlen, "cannot open %s: %s", path, strerror(errno)); return NULL; }
    ParquetReader *r = xcalloc(1, sizeof *r);
    r->path = xstrdup(path);
    r->fd = fd;
    r->rg = -1;
    r->nulls_expected = -1;
    uint8_t *footer = NULL;
    PqFooter f = {0};
    char e[ERR_LEN];
    struct stat st;
    if (fstat(fd, &st) != 0) { set_err(err, errlen, "cannot stat %s: %s", path, strerror(errno)); goto fail; }
    if (!S_ISREG(st.st_mode)) { set_err(err, errlen, "%s: not a regular file", path); goto fail; }
    int64_t size = st.st_size, footer_off = 0;
    uint32_t footer_len = 0;
    uint8_t head[4] = {0}, tail[8] = {0};
    if (size >= 12 && (pq_pread_full(fd, head, 4, 0, e, sizeof e) || pq_pread_full(fd, tail, 8, size - 8, e, sizeof e))) {
        set_err(err, errlen, "%s: %s", path, e);
        goto fail;
    }
    if (pq_footer_locate(path, size, head, tail, MAX_FOOTER_BYTES, "the streaming reader", &footer_off, &footer_len, err,
                         errlen))
        goto fail;
    footer = xmalloc(footer_len ? footer_len : 1);
    if (pq_pread_full(fd, footer, footer_len, footer_off, e, sizeof e)) {
        set_err(err, errlen, "%s: %s", path, e);
        goto fail;
    }
    if (pq_footer_parse(&f, path, size, footer, footer_len, footer_off, err, errlen) || pick_column(r, &f, column, err, errlen))
        goto fail;
    pq_footer_free(&f);
    free(footer);
#ifdef POSIX_FADV_SEQUENTIAL
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
    return r;
fail:
    pq_footer_free(&f);
    free(footer);
    parquet_close(r);
    return NULL;
}

int64_t parquet_num_rows(const ParquetReader *r) { return r->num_rows; }

void parquet_close(ParquetReader *r) {
    if (!r) return;
    if (r->fd >= 0) close(r->fd);
    free(r->path);
    free(r->chunks);
    pq_pages_free(&r->pages);
    buf_free(&r->value);
    free(r);
}

// ---------------------------------------------------------------------------------------------------------
// Values

// Prepares value decoding for a data page whose values (after the levels) are vals[0..n).
static int start_values(ParquetReader *r, int encoding, int32_t num_values, const uint8_t *vals, size_t n,
                        char *err, size_t errlen) {
    char e[ERR_LEN];
    r->encoding = encoding;
    r->vp = vals;
    r->vend = vals + n;
    switch (encoding) {
    case ENC_PLAIN: return 0;
    case ENC_PLAIN_DICTIONARY:
    case ENC_RLE_DICTIONARY:
        if (!r->pages.has_dict) return stream_fail(r, err, errlen, "%s page but the column chunk has no dictionary page", pq_encoding_name(encoding));
        if (n < 1) {
            if (num_values > 0 && !r->has_defs) return stream_fail(r, err, errlen, "dictionary indices missing");
            pq_hybrid_init(&r->indices, vals, 0, 0);
            return 0;
        }
        if (vals[0] > 32) return stream_fail(r, err, errlen, "dictionary index bit width %d > 32", vals[0]);
        pq_hybrid_init(&r->indices, vals + 1, n - 1, vals[0]);
        return 0;
    case ENC_DELTA_LENGTH_BYTE_ARRAY: { // lengths (DELTA_BINARY_PACKED), then the bytes of all values
        int64_t used = pq_delta_init(&r->lens, vals, n, num_values, e, sizeof e);
        if (used < 0) return stream_fail(r, err, errlen, "value lengths: %s", e);
        r->vp = vals + used;
        return 0;
    }
    case ENC_DELTA_BYTE_ARRAY: { // prefix lengths, suffix lengths, suffix bytes; each value extends the previous
        int64_t used = pq_delta_init(&r->prefixes, vals, n, num_values, e, sizeof e);
        if (used < 0) return stream_fail(r, err, errlen, "prefix lengths: %s", e);
        int64_t used2 = pq_delta_init(&r->lens, vals + used, n - (size_t)used, num_values, e, sizeof e);
        if (used2 < 0) return stream_fail(r, err, errlen, "suffix lengths: %s", e);
        if (r->lens.total != r->prefixes.total)
            return stream_fail(r, err, errlen, "%lld prefix lengths but %lld suffix lengths", (long long)r->prefixes.total,
                               (long long)r->lens.total);
        r->vp = vals + used + used2;
        r->value.n = 0;
        return 0;
    }
    default:
        return stream_fail(r, err, errlen, "value encoding %s (%d) is not supported for a string column",
                           pq_encoding_name(encoding), encoding);
    }
}


// Moves to the next data page that has values. 1 ok, 0 at the end of the file, -1 on error.
static int next_data_page(ParquetReader *r, char *err, size_t errlen) {
    char msg[ERR_LEN];
    for (;;) {
        if (r->rg >= r->n_chunks) return 0;
        PqDataPage p;
        int rc = r->rg < 0 ? 0 : pq_pages_next(&r->pages, &p, msg, sizeof msg);
        if (rc < 0) return stream_fail(r, err, errlen, "%s", msg);
        if (rc == 0) { // the chunk is done: on to the next row group's
            if (r->rg + 1 >= r->n_chunks) {
                r->rg = r->n_chunks;
                return 0;
            }
            const Chunk *c = &r->chunks[++r->rg];
            pq_pages_start(&r->pages, NULL, r->fd, c->codec, PT_BYTE_ARRAY, 0, r->max_def, c->start, c->end, c->num_values);
            continue;
        }
        r->has_defs = r->max_def > 0;
        r->defs = p.def;
        if (p.v2) {
            if (start_values(r, p.h.encoding, p.num_values - p.h.num_nulls, p.values, p.values_len, err, errlen)) return -1;
            r->nulls_expected = p.h.num_nulls;
        } else {
            r->nulls_expected = -1;
            if (start_values(r, p.h.encoding, p.num_values, p.values, p.values_len, err, errlen)) return -1;
        }
        r->left = p.num_values;
        r->nulls_seen = 0;
        if (p.num_values > 0) return 1;
    }
}

int parquet_next(ParquetReader *r, const char **p, size_t *len, int *is_null, char *err, size_t errlen) {
    if (r->failed) return set_err(err, errlen, "%s", r->last_err);
    while (r->left == 0) {
        if (r->nulls_expected >= 0 && r->nulls_seen != r->nulls_expected && r->rg >= 0 && r->rg < r->n_chunks)
            return stream_fail(r, err, errlen, "page has %lld nulls, its header says %lld", (long long)r->nulls_seen,
                               (long long)r->nulls_expected);
        r->nulls_expected = -1;
        int rc = next_data_page(r, err, errlen);
        if (rc <= 0) return rc;
    }
    r->left--;
    if (r->has_defs) {
        uint32_t d;
        if (!pq_hybrid_next(&r->defs, &d)) return stream_fail(r, err, errlen, "definition levels end early");
        if (d > (uint32_t)r->max_def) return stream_fail(r, err, errlen, "definition level %u > max %d", d, r->max_def);
        if (d < (uint32_t)r->max_def) {
            r->nulls_seen++;
            *p = "";
            *len = 0;
            if (is_null) *is_null = 1;
            return 1;
        }
    }
    if (is_null) *is_null = 0;
    size_t left = (size_t)(r->vend - r->vp);
    switch (r->encoding) {
    case ENC_PLAIN: {
        if (left < 4) return stream_fail(r, err, errlen, "PLAIN values end early (value length truncated)");
        uint32_t n = pq_load_u32le(r->vp);
        if (n > left - 4) return stream_fail(r, err, errlen, "PLAIN value of %u bytes, only %zu left in the page", n, left - 4);
        *p = (const char *)r->vp + 4;
        *len = n;
        r->vp += 4 + (size_t)n;
        return 1;
    }
    case ENC_PLAIN_DICTIONARY:
    case ENC_RLE_DICTIONARY: {
        uint32_t i;
        if (!pq_hybrid_next(&r->indices, &i)) return stream_fail(r, err, errlen, "dictionary indices end early");
        if (i >= r->pages.dict_n)
            return stream_fail(r, err, errlen, "dictionary index %u out of range (dictionary has %lld entries)", i,
                               (long long)r->pages.dict_n);
        *p = (const char *)r->pages.dict[i].s.p;
        *len = r->pages.dict[i].s.n;
        return 1;
    }
    case ENC_DELTA_LENGTH_BYTE_ARRAY: {
        int64_t n;
        if (!pq_delta_next(&r->lens, &n)) return stream_fail(r, err, errlen, "more values than DELTA_LENGTH_BYTE_ARRAY lengths");
        if (n < 0 || (uint64_t)n > left)
            return stream_fail(r, err, errlen, "value length %lld out of range (%zu bytes left)", (long long)n, left);
        *p = (const char *)r->vp;
        *len = (size_t)n;
        r->vp += n;
        return 1;
    }
    case ENC_DELTA_BYTE_ARRAY: {
        int64_t prefix, suffix;
        if (!pq_delta_next(&r->prefixes, &prefix) || !pq_delta_next(&r->lens, &suffix))
            return stream_fail(r, err, errlen, "more values than DELTA_BYTE_ARRAY lengths");
        if (prefix < 0 || (uint64_t)prefix > r->value.n)
            return stream_fail(r, err, errlen, "prefix length %lld longer than the previous value (%zu bytes)",
                               (long long)prefix, r->value.n);
        if (suffix < 0 || (uint64_t)suffix > left)
            return stream_fail(r, err, errlen, "suffix length %lld out of range (%zu bytes left)", (long long)suffix, left);
        r->value.n = (size_t)prefix;
        if (suffix > 0) buf_put(&r->value, r->vp, (size_t)suffix);
        r->vp += suffix;
        *p = r->value.p ? r->value.p : "";
        *len = r->value.n;
        return 1;
    }
    default: return stream_fail(r, err, errlen, "internal: no value decoder"); // start_values rejects the rest
    }
}
