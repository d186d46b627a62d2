// parquet.c: streaming reader for one top-level string (BYTE_ARRAY) column of a Parquet file.
//
// Layout (Parquet format spec): "PAR1" | column chunks ... | FileMetaData (Thrift compact) | u32 footer
// length | "PAR1". The footer lists the schema (a depth-first flattened tree) and, per row group, one column
// chunk per leaf with its codec, value count and byte range. A chunk is a run of pages, each a Thrift
// PageHeader followed by its (compressed) body: an optional dictionary page, then data pages (v1: levels and
// values compressed together; v2: levels stored uncompressed in front of the compressed values).
//
// Memory is bounded by one page (plus the chunk's dictionary): page headers and bodies are read with pread
// as they are needed. Every length and offset read from the file is checked against the bytes that remain,
// and errors name the file, the place (row group, page offset) and what was wrong.
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
#include "data/pq_format.h"
#include "data/pq_thrift.h"
#include "util/common.h"

// A footer bigger than this is certainly corrupt: it holds per-row-group metadata, not data.
#define MAX_FOOTER_BYTES (256u << 20)
// A page header is read through a window that starts at this size and grows while the header is truncated
// (statistics may make headers large).
#define PAGE_HEADER_WINDOW 1024

typedef struct {
    int64_t start, end;  // file byte range holding the chunk's pages
    int64_t num_values;  // values in the chunk, nulls included (= rows for a flat column)
    int64_t num_rows;    // rows of the row group
    int codec;
} Chunk;

typedef struct {
    uint32_t off, len; // a dictionary entry, within the dictionary buffer
} DictEntry;

struct ParquetReader {
    char *path;
    int fd;
    int64_t file_size, num_rows;
    int max_def;               // 0: REQUIRED column, 1: OPTIONAL (a definition level per value)
    Chunk *chunks;             // one per row group
    int64_t n_chunks;

    // Position: the row group being read and the next page header in its column chunk.
    int64_t rg;                // -1 before the first row group; n_chunks at the end
    int64_t pos;
    int64_t chunk_values;      // values (nulls included) in the chunk's data pages read so far

    // Dictionary of the current chunk (PLAIN-encoded values, decompressed).
    uint8_t *dict;
    size_t dict_cap;
    DictEntry *dict_entries;
    int64_t dict_n, dict_entries_cap;
    int has_dict;

    // The current data page.
    uint8_t *hdr, *raw, *page; // header window, page body as stored, decompressed values
    size_t hdr_cap, raw_cap, page_cap;
    int64_t page_off;          // file offset of the page header (for messages)
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

// ---------------------------------------------------------------------------------------------------------
// Small helpers

static int grow(uint8_t **p, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap : 4096;
    while (n < need) n = n > SIZE_MAX / 2 ? need : n * 2;
    void *q = realloc(*p, n);
    if (!q) return -1;
    *p = q;
    *cap = n;
    return 0;
}

// Reads exactly n bytes at off. 0 ok; -1 with errno-style text in err.
static int pread_full(int fd, void *buf, size_t n, int64_t off, char *err, size_t errlen) {
    uint8_t *b = buf;
    while (n > 0) {
        ssize_t got = pread(fd, b, n, (off_t)off);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return set_err(err, errlen, "read error at offset %lld: %s", (long long)off, strerror(errno));
        if (got == 0) return set_err(err, errlen, "file ends at offset %lld (it shrank while being read?)", (long long)off);
        b += got;
        off += got;
        n -= (size_t)got;
    }
    return 0;
}

// Reports an error while streaming: "<path>: row group R, page at offset O: <message>", kept for later calls.
__attribute__((format(printf, 4, 5)))
static int stream_fail(ParquetReader *r, char *err, size_t errlen, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(r->last_err, sizeof r->last_err, "%.200s: row group %lld, page at offset %lld: %s", r->path,
             (long long)r->rg, (long long)r->page_off, msg);
    r->failed = 1;
    return set_err(err, errlen, "%s", r->last_err);
}

// Describes a Thrift failure for messages: "truncated" or "<what> at offset N".
static void thrift_describe(const ThriftReader *t, int64_t base, char *out, size_t n) {
    if (t->status == TC_TRUNCATED) snprintf(out, n, "%s", t->what);
    else snprintf(out, n, "%s at offset %lld", t->what, (long long)(base + (int64_t)t->err_pos));
}

// ---------------------------------------------------------------------------------------------------------
// Footer: schema and row groups

// Index just past the subtree rooted at element i of the flattened schema; counts its leaves. -1 if the
// children run past the end of the list or nest absurdly deep.
static int64_t subtree_end(const PqSchemaElem *e, int64_t n, int64_t i, int depth, int64_t *leaves) {
    if (i >= n || depth > 64) return -1;
    if (e[i].num_children < 0) {
        (*leaves)++;
        return i + 1;
    }
    int64_t j = i + 1;
    for (int32_t c = 0; c < e[i].num_children; c++)
        if ((j = subtree_end(e, n, j, depth + 1, leaves)) < 0) return -1;
    return j;
}

// Column chunk metadata of the selected column in one row group.
typedef struct {
    int has_meta, type, codec;
    int64_t num_values, total_compressed, data_off, dict_off;
    const uint8_t *file_path;
    size_t file_path_len;
    int path_ok; // path_in_schema is exactly [column] (or absent)
} ChunkMeta;

static void parse_column_meta(ThriftReader *t, ChunkMeta *m, const char *column) {
    int16_t last = 0, id;
    int ty;
    size_t col_len = strlen(column);
    while (thrift_field(t, &last, &id, &ty)) {
        if (id == 1 && ty == TC_I32) m->type = thrift_i32(t);
        else if (id == 3 && ty == TC_LIST) {
            int et;
            int64_t n;
            if (!thrift_list(t, &et, &n)) break;
            m->path_ok = n == 1 && et == TC_BINARY;
            for (int64_t i = 0; i < n; i++) {
                if (et != TC_BINARY) { thrift_skip(t, et); continue; }
                size_t len;
                const uint8_t *s = thrift_binary(t, &len);
                if (s && (len != col_len || memcmp(s, column, len))) m->path_ok = 0;
            }
        } else if (id == 4 && ty == TC_I32) m->codec = thrift_i32(t);
        else if (id == 5 && ty == TC_I64) m->num_values = thrift_i64(t);
        else if (id == 7 && ty == TC_I64) m->total_compressed = thrift_i64(t);
        else if (id == 9 && ty == TC_I64) m->data_off = thrift_i64(t);
        else if (id == 11 && ty == TC_I64) m->dict_off = thrift_i64(t);
        else thrift_skip(t, ty);
    }
}

static void parse_column_chunk(ThriftReader *t, ChunkMeta *m, const char *column) {
    memset(m, 0, sizeof *m);
    m->type = m->codec = -1;
    m->path_ok = 1;
    int16_t last = 0, id;
    int ty;
    while (thrift_field(t, &last, &id, &ty)) {
        if (id == 1 && ty == TC_BINARY) m->file_path = thrift_binary(t, &m->file_path_len);
        else if (id == 3 && ty == TC_STRUCT) {
            m->has_meta = 1;
            parse_column_meta(t, m, column);
        } else thrift_skip(t, ty);
    }
}

// Opens the footer list of row groups and fills r->chunks with the selected column's chunk in each.
static int parse_row_groups(ParquetReader *r, ThriftReader *t, int64_t leaf, int64_t n_leaves, const char *column,
                            int64_t footer_off, int64_t data_end, char *err, size_t errlen) {
    int et;
    int64_t n;
    char where[160];
    if (thrift_list(t, &et, &n) && et != TC_STRUCT) thrift_fail(t, TC_CORRUPT, "row groups are not a list of structs");
    if (t->status) goto thrift_error;
    r->chunks = xcalloc((size_t)(n ? n : 1), sizeof *r->chunks);
    r->n_chunks = n;
    for (int64_t g = 0; g < n; g++) {
        int16_t last = 0, id;
        int ty, have_columns = 0;
        ChunkMeta m = {0};
        int64_t rows = -1;
        while (thrift_field(t, &last, &id, &ty)) {
            if (id == 1 && ty == TC_LIST) {
                int ct;
                int64_t nc;
                if (!thrift_list(t, &ct, &nc)) break;
                if (ct != TC_STRUCT) { thrift_fail(t, TC_CORRUPT, "row group columns are not structs"); break; }
                if (nc != n_leaves)
                    return set_err(err, errlen, "%s: footer: row group %lld has %lld column chunks, the schema has %lld columns",
                                   r->path, (long long)g, (long long)nc, (long long)n_leaves);
                for (int64_t c = 0; c < nc; c++) {
                    if (c == leaf) parse_column_chunk(t, &m, column);
                    else thrift_skip(t, TC_STRUCT);
                }
                have_columns = 1;
            } else if (id == 3 && ty == TC_I64) rows = thrift_i64(t);
            else thrift_skip(t, ty);
        }
        if (t->status) goto thrift_error;
        snprintf(where, sizeof where, "%s: footer: row group %lld, column '%s'", r->path, (long long)g, column);
        if (!have_columns || rows < 0)
            return set_err(err, errlen, "%s: row group lacks its %s", where, have_columns ? "num_rows" : "column list");
        if (m.file_path)
            return set_err(err, errlen, "%s: chunk is stored in another file ('%.*s'), which is not supported", where,
                           (int)(m.file_path_len > 200 ? 200 : m.file_path_len), (const char *)m.file_path);
        if (!m.has_meta) return set_err(err, errlen, "%s: column chunk has no metadata (encrypted file?)", where);
        if (m.type != PT_BYTE_ARRAY)
            return set_err(err, errlen, "%s: chunk has physical type %s, expected BYTE_ARRAY", where, pq_type_name(m.type));
        if (!m.path_ok) return set_err(err, errlen, "%s: chunk's path_in_schema does not name the column", where);
        if (!pq_codec_supported(m.codec))
            return set_err(err, errlen, "%s: codec %s (%d) is not supported (supported: UNCOMPRESSED, SNAPPY, GZIP, ZSTD)",
                           where, pq_codec_name(m.codec), m.codec);
        if (m.num_values < 0 || m.total_compressed < 0)
            return set_err(err, errlen, "%s: negative num_values or total_compressed_size", where);
        // A chunk starts at its dictionary page when it has one. Some writers store dictionary_page_offset 0
        // for "none", so only an offset inside the file and before the first data page counts.
        int64_t start = m.data_off;
        if (m.dict_off >= 4 && m.dict_off < m.data_off) start = m.dict_off;
        if (start < 4 || start > data_end || m.total_compressed > data_end - start)
            return set_err(err, errlen, "%s: pages at [%lld, %lld) lie outside the data area [4, %lld) of the file",
                           where, (long long)start, (long long)(start + m.total_compressed), (long long)data_end);
        if (m.num_values != rows)
            return set_err(err, errlen, "%s: chunk holds %lld values but the row group has %lld rows", where,
                           (long long)m.num_values, (long long)rows);
        r->chunks[g] = (Chunk){start, start + m.total_compressed, m.num_values, rows, m.codec};
    }
    return 0;
thrift_error:;
    char what[160];
    thrift_describe(t, footer_off, what, sizeof what);
    return set_err(err, errlen, "%s: footer (FileMetaData at offset %lld): row groups: %s", r->path, (long long)footer_off, what);
}

// Parses FileMetaData: finds `column` in the schema, then reads its chunk in every row group.
static int parse_footer(ParquetReader *r, const uint8_t *buf, size_t n, int64_t footer_off, const char *column,
                        char *err, size_t errlen) {
    ThriftReader t;
    thrift_init(&t, buf, n);
    PqSchemaElem *schema = NULL;
    int64_t n_schema = 0, rows = -1;
    size_t row_groups_at = SIZE_MAX; // offset of the row-group list: parsed once the schema is known
    int16_t last = 0, id;
    int ty, rc = -1;
    while (thrift_field(&t, &last, &id, &ty)) {
        if (id == 2 && ty == TC_LIST) {
            int et;
            if (!thrift_list(&t, &et, &n_schema)) break;
            if (et != TC_STRUCT) { thrift_fail(&t, TC_CORRUPT, "schema is not a list of structs"); break; }
            free(schema);
            schema = xcalloc((size_t)(n_schema ? n_schema : 1), sizeof *schema);
            for (int64_t i = 0; i < n_schema; i++)
                if (pq_parse_schema_elem(&t, &schema[i])) break;
        } else if (id == 3 && ty == TC_I64) {
            rows = thrift_i64(&t);
        } else if (id == 4 && ty == TC_LIST) {
            row_groups_at = thrift_pos(&t);
            thrift_skip(&t, ty);
        } else {
            thrift_skip(&t, ty);
        }
    }
    if (t.status) {
        char what[160];
        thrift_describe(&t, footer_off, what, sizeof what);
        set_err(err, errlen, "%s: footer (FileMetaData, %zu bytes at offset %lld): %s", r->path, n, (long long)footer_off, what);
        goto done;
    }
    if (!schema || n_schema < 1 || rows < 0 || row_groups_at == SIZE_MAX) {
        set_err(err, errlen, "%s: footer (FileMetaData at offset %lld) lacks its %s", r->path, (long long)footer_off,
                !schema || n_schema < 1 ? "schema" : rows < 0 ? "num_rows" : "row groups");
        goto done;
    }
    r->num_rows = rows;

    // The schema is the tree flattened depth first; element 0 is the root. Find the top-level field named
    // `column` and its leaf index (the position of its chunk in each row group).
    if (schema[0].num_children < 0) {
        set_err(err, errlen, "%s: footer: schema root has no children", r->path);
        goto done;
    }
    int64_t i = 1, leaves = 0, found = -1, found_leaf = -1;
    Buf names = {0};
    int32_t c;
    for (c = 0; c < schema[0].num_children && i < n_schema; c++) {
        const PqSchemaElem *e = &schema[i];
        if (e->name && e->name_len == strlen(column) && !memcmp(e->name, column, e->name_len)) {
            found = i;
            found_leaf = leaves;
        }
        if (names.n < 400) { // printable bytes only: the message must stay one line whatever the file holds
            if (names.n) buf_puts(&names, ", ");
            for (size_t k = 0; k < e->name_len && k < 60; k++) {
                char ch = (char)e->name[k];
                buf_put(&names, (unsigned char)ch < 32 || ch == 127 ? "?" : &ch, 1);
            }
        } else if (names.n < 404) buf_puts(&names, ", ...");
        if ((i = subtree_end(schema, n_schema, i, 0, &leaves)) < 0) break;
    }
    buf_put(&names, "", 1);
    if (i < 0 || c != schema[0].num_children || i != n_schema) {
        set_err(err, errlen, "%s: footer: schema tree is inconsistent (num_children do not match the %lld elements)",
                r->path, (long long)n_schema);
    } else if (found < 0) {
        set_err(err, errlen, "%s: no column '%s' (top-level columns: %s)", r->path, column, names.p);
    } else if (schema[found].num_children >= 0) {
        set_err(err, errlen, "%s: column '%s' is a nested group, not a string column", r->path, column);
    } else if (schema[found].repetition == REP_REPEATED) {
        set_err(err, errlen, "%s: column '%s' is repeated (a list), not a single string per row", r->path, column);
    } else if (schema[found].type != PT_BYTE_ARRAY) {
        set_err(err, errlen, "%s: column '%s' has physical type %s, expected BYTE_ARRAY (a string column)", r->path,
                column, pq_type_name(schema[found].type));
    } else {
        r->max_def = schema[found].repetition == REP_OPTIONAL ? 1 : 0;
        ThriftReader rg;
        thrift_init(&rg, buf, n);
        rg.p += row_groups_at;
        int64_t data_end = footer_off;
        rc = parse_row_groups(r, &rg, found_leaf, leaves, column, footer_off, data_end, err, errlen);
        if (rc == 0) {
            int64_t sum = 0;
            for (int64_t g = 0; g < r->n_chunks; g++) sum += r->chunks[g].num_rows;
            if (sum != rows)
                rc = set_err(err, errlen, "%s: footer: row groups hold %lld rows, the file says %lld", r->path,
                             (long long)sum, (long long)rows);
        }
    }
    buf_free(&names);
done:
    free(schema);
    return rc;
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
    struct stat st;
    if (fstat(fd, &st) != 0) { set_err(err, errlen, "cannot stat %s: %s", path, strerror(errno)); goto fail; }
    if (!S_ISREG(st.st_mode)) { set_err(err, errlen, "%s: not a regular file", path); goto fail; }
    r->file_size = st.st_size;
    if (r->file_size < 12) {
        set_err(err, errlen, "%s: not a Parquet file (%lld bytes; a Parquet file has at least 12)", path, (long long)r->file_size);
        goto fail;
    }
    uint8_t head[4], tail[8];
    if (pread_full(fd, head, 4, 0, err, errlen) || pread_full(fd, tail, 8, r->file_size - 8, err, errlen)) {
        char e2[ERR_LEN];
        snprintf(e2, sizeof e2, "%s: %s", path, err);
        set_err(err, errlen, "%s", e2);
        goto fail;
    }
    if (memcmp(head, "PAR1", 4)) { set_err(err, errlen, "%s: not a Parquet file (no PAR1 magic at offset 0)", path); goto fail; }
    if (!memcmp(tail + 4, "PARE", 4)) { set_err(err, errlen, "%s: encrypted Parquet footers are not supported", path); goto fail; }
    if (memcmp(tail + 4, "PAR1", 4)) {
        set_err(err, errlen, "%s: no PAR1 magic at the end (offset %lld): file truncated or not Parquet", path,
                (long long)r->file_size - 4);
        goto fail;
    }
    uint32_t footer_len = pq_load_u32le(tail);
    if (footer_len > (uint64_t)r->file_size - 12 || footer_len > MAX_FOOTER_BYTES) {
        set_err(err, errlen, "%s: footer length %u (at offset %lld) does not fit in the %lld-byte file", path, footer_len,
                (long long)r->file_size - 8, (long long)r->file_size);
        goto fail;
    }
    int64_t footer_off = r->file_size - 8 - footer_len;
    footer = xmalloc(footer_len ? footer_len : 1);
    if (pread_full(fd, footer, footer_len, footer_off, err, errlen)) {
        char e2[ERR_LEN];
        snprintf(e2, sizeof e2, "%s: %s", path, err);
        set_err(err, errlen, "%s", e2);
        goto fail;
    }
    if (parse_footer(r, footer, footer_len, footer_off, column, err, errlen)) goto fail;
    free(footer);
#ifdef POSIX_FADV_SEQUENTIAL
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
    return r;
fail:
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
    free(r->dict);
    free(r->dict_entries);
    free(r->hdr);
    free(r->raw);
    free(r->page);
    buf_free(&r->value);
    free(r);
}

// ---------------------------------------------------------------------------------------------------------
// Pages

// Reads the page header at r->pos. Returns its length in bytes, or -1.
static int64_t read_page_header(ParquetReader *r, PqPageHeader *h, int64_t chunk_end, char *err, size_t errlen) {
    int64_t avail = chunk_end - r->pos;
    size_t win = avail < PAGE_HEADER_WINDOW ? (size_t)avail : PAGE_HEADER_WINDOW;
    char e[ERR_LEN];
    for (;;) {
        if (grow(&r->hdr, &r->hdr_cap, win)) return stream_fail(r, err, errlen, "page header: out of memory");
        if (pread_full(r->fd, r->hdr, win, r->pos, e, sizeof e)) return stream_fail(r, err, errlen, "page header: %s", e);
        ThriftReader t;
        thrift_init(&t, r->hdr, win);
        pq_parse_page_header(&t, h);
        if (!t.status) {
            int64_t len = (int64_t)thrift_pos(&t);
            if (h->type < 0 || h->uncompressed_size < 0 || h->compressed_size < 0)
                return stream_fail(r, err, errlen, "page header: missing or negative type/page sizes");
            if (h->compressed_size > avail - len)
                return stream_fail(r, err, errlen, "page of %d bytes runs past the end of the column chunk (%lld bytes left)",
                                   h->compressed_size, (long long)(avail - len));
            return len;
        }
        if (t.status == TC_TRUNCATED && (int64_t)win < avail) {
            win = (int64_t)win * 16 < avail ? win * 16 : (size_t)avail;
            continue;
        }
        thrift_describe(&t, r->pos, e, sizeof e);
        if (t.status == TC_TRUNCATED)
            return stream_fail(r, err, errlen, "page header: truncated (the column chunk ends at offset %lld)", (long long)chunk_end);
        return stream_fail(r, err, errlen, "page header: %s", e);
    }
}

// Reads the body of the page at r->pos (header of hdr_len bytes) into r->raw.
static int read_page_body(ParquetReader *r, const PqPageHeader *h, int64_t hdr_len, char *err, size_t errlen) {
    char e[ERR_LEN];
    if (grow(&r->raw, &r->raw_cap, (size_t)h->compressed_size))
        return stream_fail(r, err, errlen, "out of memory for a %d-byte page", h->compressed_size);
    if (pread_full(r->fd, r->raw, (size_t)h->compressed_size, r->pos + hdr_len, e, sizeof e))
        return stream_fail(r, err, errlen, "%s", e);
    return 0;
}

// Decompresses n bytes at src into *dst (grown as needed) holding exactly dst_len bytes.
static int decompress_into(ParquetReader *r, int codec, const uint8_t *src, size_t n, uint8_t **dst, size_t *cap,
                           size_t dst_len, char *err, size_t errlen) {
    char e[ERR_LEN];
    if (pq_check_decompressed_size(codec, src, n, dst_len, e, sizeof e)) return stream_fail(r, err, errlen, "%s", e);
    if (grow(dst, cap, dst_len ? dst_len : 1)) return stream_fail(r, err, errlen, "out of memory for a %zu-byte page", dst_len);
    if (pq_decompress(codec, src, n, *dst, dst_len, e, sizeof e)) return stream_fail(r, err, errlen, "%s", e);
    return 0;
}

static int load_dictionary(ParquetReader *r, const PqPageHeader *h, int codec, char *err, size_t errlen) {
    if (r->has_dict) return stream_fail(r, err, errlen, "second dictionary page in one column chunk");
    if (r->chunk_values > 0) return stream_fail(r, err, errlen, "dictionary page after data pages");
    if (h->encoding != ENC_PLAIN && h->encoding != ENC_PLAIN_DICTIONARY)
        return stream_fail(r, err, errlen, "dictionary page with encoding %s, expected PLAIN", pq_encoding_name(h->encoding));
    size_t n = (size_t)h->uncompressed_size;
    if (decompress_into(r, codec, r->raw, (size_t)h->compressed_size, &r->dict, &r->dict_cap, n, err, errlen)) return -1;
    if (h->num_values < 0 || (size_t)h->num_values > n / 4)
        return stream_fail(r, err, errlen, "dictionary page claims %d entries in %zu bytes", h->num_values, n);
    if (h->num_values > r->dict_entries_cap) {
        free(r->dict_entries);
        r->dict_entries = xmalloc((size_t)h->num_values * sizeof *r->dict_entries);
        r->dict_entries_cap = h->num_values;
    }
    size_t off = 0;
    for (int32_t i = 0; i < h->num_values; i++) {
        if (n - off < 4) return stream_fail(r, err, errlen, "dictionary entry %d: length truncated", i);
        uint32_t len = pq_load_u32le(r->dict + off);
        off += 4;
        if (len > n - off)
            return stream_fail(r, err, errlen, "dictionary entry %d: %u bytes, only %zu left in the page", i, len, n - off);
        r->dict_entries[i] = (DictEntry){(uint32_t)off, len};
        off += len;
    }
    r->dict_n = h->num_values;
    r->has_dict = 1;
    return 0;
}

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
        if (!r->has_dict) return stream_fail(r, err, errlen, "%s page but the column chunk has no dictionary page", pq_encoding_name(encoding));
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

static int start_data_page_v1(ParquetReader *r, const PqPageHeader *h, int codec, char *err, size_t errlen) {
    if (!h->has_v1) return stream_fail(r, err, errlen, "DATA_PAGE without its data_page_header");
    const uint8_t *p;
    size_t n = (size_t)h->uncompressed_size;
    if (codec == PQ_UNCOMPRESSED) {
        if ((size_t)h->compressed_size != n)
            return stream_fail(r, err, errlen, "uncompressed page holds %d bytes, its header says %zu", h->compressed_size, n);
        p = r->raw;
    } else {
        if (decompress_into(r, codec, r->raw, (size_t)h->compressed_size, &r->page, &r->page_cap, n, err, errlen)) return -1;
        p = r->page;
    }
    r->has_defs = 0;
    if (r->max_def > 0) {
        if (h->def_encoding == ENC_RLE) {
            // v1 RLE levels are prefixed with their byte length (u32 little endian).
            if (n < 4) return stream_fail(r, err, errlen, "definition levels truncated");
            uint32_t len = pq_load_u32le(p);
            if (len > n - 4)
                return stream_fail(r, err, errlen, "definition levels of %u bytes, only %zu in the page", len, n - 4);
            pq_hybrid_init(&r->defs, p + 4, len, 1);
            p += 4 + len;
            n -= 4 + (size_t)len;
        } else if (h->def_encoding == ENC_BIT_PACKED) {
            size_t len = ((size_t)h->num_values + 7) / 8;
            if (len > n) return stream_fail(r, err, errlen, "bit-packed definition levels truncated");
            pq_bitpacked_msb_init(&r->defs, p, len, 1);
            p += len;
            n -= len;
        } else {
            return stream_fail(r, err, errlen, "definition level encoding %s is not supported", pq_encoding_name(h->def_encoding));
        }
        r->has_defs = 1;
    }
    r->nulls_expected = -1;
    return start_values(r, h->encoding, h->num_values, p, n, err, errlen);
}

static int start_data_page_v2(ParquetReader *r, const PqPageHeader *h, int codec, char *err, size_t errlen) {
    if (!h->has_v2) return stream_fail(r, err, errlen, "DATA_PAGE_V2 without its data_page_header_v2");
    if (h->def_len < 0 || h->rep_len < 0 || (int64_t)h->def_len + h->rep_len > h->compressed_size ||
        (int64_t)h->def_len + h->rep_len > h->uncompressed_size)
        return stream_fail(r, err, errlen, "level lengths (%d + %d bytes) do not fit in the page", h->rep_len, h->def_len);
    if (h->num_nulls < 0 || h->num_nulls > h->num_values)
        return stream_fail(r, err, errlen, "num_nulls %d out of range (page has %d values)", h->num_nulls, h->num_values);
    // v2 levels are stored uncompressed and without a length prefix, in front of the values.
    size_t levels = (size_t)h->rep_len + (size_t)h->def_len;
    r->has_defs = 0;
    if (r->max_def > 0) {
        pq_hybrid_init(&r->defs, r->raw + h->rep_len, (size_t)h->def_len, 1);
        r->has_defs = 1;
    } else if (h->num_nulls > 0) {
        return stream_fail(r, err, errlen, "%d nulls in a REQUIRED column", h->num_nulls);
    }
    const uint8_t *src = r->raw + levels, *vals;
    size_t src_n = (size_t)h->compressed_size - levels, n = (size_t)h->uncompressed_size - levels;
    if (codec == PQ_UNCOMPRESSED || !h->is_compressed) {
        if (src_n != n)
            return stream_fail(r, err, errlen, "uncompressed values hold %zu bytes, the page header says %zu", src_n, n);
        vals = src;
    } else {
        if (decompress_into(r, codec, src, src_n, &r->page, &r->page_cap, n, err, errlen)) return -1;
        vals = r->page;
    }
    r->nulls_expected = h->num_nulls;
    return start_values(r, h->encoding, h->num_values - h->num_nulls, vals, n, err, errlen);
}

// Moves to the next data page that has values. 1 ok, 0 at the end of the file, -1 on error.
static int next_data_page(ParquetReader *r, char *err, size_t errlen) {
    for (;;) {
        if (r->rg >= r->n_chunks) return 0;
        const Chunk *c = r->rg >= 0 ? &r->chunks[r->rg] : NULL;
        if (!c || r->chunk_values == c->num_values) {
            if (r->rg + 1 >= r->n_chunks) {
                r->rg = r->n_chunks;
                return 0;
            }
            r->rg++;
            r->pos = r->page_off = r->chunks[r->rg].start;
            r->chunk_values = 0;
            r->has_dict = 0;
            r->dict_n = 0;
            continue;
        }
        r->page_off = r->pos;
        if (r->pos >= c->end)
            return stream_fail(r, err, errlen, "column chunk ends after %lld values, its metadata says %lld",
                               (long long)r->chunk_values, (long long)c->num_values);
        PqPageHeader h;
        int64_t hdr_len = read_page_header(r, &h, c->end, err, errlen);
        if (hdr_len < 0) return -1;
        int64_t next = r->pos + hdr_len + h.compressed_size;
        if (h.type == PAGE_DICTIONARY) {
            if (!h.has_dict) return stream_fail(r, err, errlen, "DICTIONARY_PAGE without its dictionary_page_header");
            if (read_page_body(r, &h, hdr_len, err, errlen) || load_dictionary(r, &h, c->codec, err, errlen)) return -1;
            r->pos = next;
            continue;
        }
        if (h.type != PAGE_DATA && h.type != PAGE_DATA_V2) { // index pages and future page types: skip
            r->pos = next;
            continue;
        }
        int32_t nv = h.type == PAGE_DATA ? (h.has_v1 ? h.num_values : 0) : (h.has_v2 ? h.num_values : 0);
        if (nv < 0 || nv > c->num_values - r->chunk_values)
            return stream_fail(r, err, errlen, "page holds %d values, only %lld of the column chunk's %lld remain", nv,
                               (long long)(c->num_values - r->chunk_values), (long long)c->num_values);
        if (read_page_body(r, &h, hdr_len, err, errlen)) return -1;
        int rc = h.type == PAGE_DATA ? start_data_page_v1(r, &h, c->codec, err, errlen)
                                     : start_data_page_v2(r, &h, c->codec, err, errlen);
        if (rc) return -1;
        r->pos = next;
        r->chunk_values += nv;
        r->left = nv;
        r->nulls_seen = 0;
        if (nv > 0) return 1;
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
        if (i >= r->dict_n)
            return stream_fail(r, err, errlen, "dictionary index %u out of range (dictionary has %lld entries)", i,
                               (long long)r->dict_n);
        *p = (const char *)r->dict + r->dict_entries[i].off;
        *len = r->dict_entries[i].len;
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
