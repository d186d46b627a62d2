// pq_pages.c: the pages of one column chunk (see pq_pages.h).
#define _GNU_SOURCE
#include "data/pq_pages.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/pq_thrift.h"
#include "util/common.h"

// A page header is read (from a file descriptor) through a window that starts at this size and grows while the
// header is truncated (statistics may make headers large).
#define PAGE_HEADER_WINDOW 1024

int pq_pread_full(int fd, void *buf, size_t n, int64_t off, char *err, size_t errlen) {
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

int pq_level_bits(int max) {
    int b = 0;
    while (max >> b) b++;
    return b;
}

static int grow(uint8_t **p, size_t *cap, size_t need) {
    if (need == 0) need = 1; // a buffer always exists, so an empty page still has a non-NULL start
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap : 4096;
    while (n < need) n = n > SIZE_MAX / 2 ? need : n * 2;
    void *q = realloc(*p, n);
    if (!q) return -1;
    *p = q;
    *cap = n;
    return 0;
}

void pq_pages_start(PqPages *pg, const uint8_t *file, int fd, int codec, int type, int max_rep, int max_def,
                    int64_t start, int64_t end, int64_t num_values) {
    pg->file = file;
    pg->fd = fd;
    pg->codec = codec;
    pg->type = type;
    pg->max_rep = max_rep;
    pg->max_def = max_def;
    pg->start = start;
    pg->end = end;
    pg->num_values = num_values;
    pg->pos = pg->page_off = start;
    pg->seen = 0;
    pg->has_dict = 0;
    pg->dict_n = 0;
}

void pq_pages_free(PqPages *pg) {
    free(pg->dict);
    free(pg->hdr);
    free(pg->raw);
    free(pg->dict_buf);
    free(pg->page);
    memset(pg, 0, sizeof *pg);
}

// Reads the page header at pg->pos. Returns its length in bytes, or -1 + msg.
static int64_t read_header(PqPages *pg, PqPageHeader *h, char *msg, size_t len) {
    int64_t avail = pg->end - pg->pos;
    size_t win = pg->file || avail < PAGE_HEADER_WINDOW ? (size_t)avail : PAGE_HEADER_WINDOW;
    char e[ERR_LEN];
    for (;;) {
        const uint8_t *p = pg->file ? pg->file + pg->pos : NULL;
        if (!pg->file) {
            if (grow(&pg->hdr, &pg->hdr_cap, win)) return set_err(msg, len, "page header: out of memory");
            if (pq_pread_full(pg->fd, pg->hdr, win, pg->pos, e, sizeof e)) return set_err(msg, len, "page header: %s", e);
            p = pg->hdr;
        }
        ThriftReader t;
        thrift_init(&t, p, win);
        pq_parse_page_header(&t, h);
        if (!t.status) {
            int64_t n = (int64_t)thrift_pos(&t);
            if (h->type < 0 || h->uncompressed_size < 0 || h->compressed_size < 0)
                return set_err(msg, len, "page header: missing or negative type/page sizes");
            if (h->compressed_size > avail - n)
                return set_err(msg, len, "page of %d bytes runs past the end of the column chunk (%lld bytes left)",
                               h->compressed_size, (long long)(avail - n));
            return n;
        }
        if (t.status == TC_TRUNCATED && (int64_t)win < avail) {
            win = (int64_t)win * 16 < avail ? win * 16 : (size_t)avail;
            continue;
        }
        if (t.status == TC_TRUNCATED)
            return set_err(msg, len, "page header: truncated (the column chunk ends at offset %lld)", (long long)pg->end);
        return set_err(msg, len, "page header: %s at offset %lld", t.what, (long long)(pg->pos + (int64_t)t.err_pos));
    }
}

// The body of the page whose header (hlen bytes) is at pg->pos: in the file in memory, or read into pg->raw.
static int read_body(PqPages *pg, const PqPageHeader *h, int64_t hlen, const uint8_t **body, char *msg, size_t len) {
    if (pg->file) {
        *body = pg->file + pg->pos + hlen;
        return 0;
    }
    char e[ERR_LEN];
    if (grow(&pg->raw, &pg->raw_cap, (size_t)h->compressed_size))
        return set_err(msg, len, "out of memory for a %d-byte page", h->compressed_size);
    if (pq_pread_full(pg->fd, pg->raw, (size_t)h->compressed_size, pg->pos + hlen, e, sizeof e))
        return set_err(msg, len, "%s", e);
    *body = pg->raw;
    return 0;
}

// Decompresses n bytes at src into exactly dst_len bytes: into *buf (grown as needed), or with pg->keep set
// into a new block handed to the caller.
static int inflate_page(PqPages *pg, const uint8_t *src, size_t n, size_t dst_len, uint8_t **buf, size_t *cap,
                        const uint8_t **out, char *msg, size_t len) {
    char e[ERR_LEN];
    if (pq_check_decompressed_size(pg->codec, src, n, dst_len, e, sizeof e)) return set_err(msg, len, "%s", e);
    if (pg->decoded) {
        if ((int64_t)dst_len > pg->max_decoded - *pg->decoded)
            return set_err(msg, len, "pages decompress to more than %lld bytes: too large for the in-memory table reader",
                           (long long)pg->max_decoded);
        *pg->decoded += (int64_t)dst_len;
    }
    uint8_t *dst;
    if (pg->keep) {
        dst = xmalloc(dst_len ? dst_len : 1);
        pg->keep(pg->keep_ctx, dst);
    } else {
        if (grow(buf, cap, dst_len)) return set_err(msg, len, "out of memory for a %zu-byte page", dst_len);
        dst = *buf;
    }
    if (pq_decompress(pg->codec, src, n, dst, dst_len, e, sizeof e)) return set_err(msg, len, "%s", e);
    *out = dst;
    return 0;
}

// A dictionary page: PLAIN values of the column's type, which the data pages' indices refer to.
static int load_dictionary(PqPages *pg, const PqPageHeader *h, const uint8_t *body, char *msg, size_t len) {
    size_t n = (size_t)h->uncompressed_size;
    const uint8_t *p = body;
    if (pg->codec == PQ_UNCOMPRESSED && pg->file) { // in memory already: the values point into the file
        if ((size_t)h->compressed_size != n)
            return set_err(msg, len, "uncompressed page holds %d bytes, its header says %zu", h->compressed_size, n);
    } else if (inflate_page(pg, body, (size_t)h->compressed_size, n, &pg->dict_buf, &pg->dict_buf_cap, &p, msg, len)) {
        return -1;
    }
    // Each entry takes at least a bit (booleans), 4 bytes (strings: the length) or its width.
    uint64_t min_bits = pg->type == PT_BOOLEAN ? 1 : pg->type == PT_BYTE_ARRAY ? 32 : 8u * (uint64_t)pq_value_width(pg->type);
    if (h->num_values < 0 || (uint64_t)h->num_values * min_bits > (uint64_t)n * 8)
        return set_err(msg, len, "dictionary page claims %d entries in %zu bytes", h->num_values, n);
    if (h->num_values >= pg->dict_cap) {
        free(pg->dict);
        pg->dict_cap = (int64_t)h->num_values + 1;
        pg->dict = xmalloc((size_t)pg->dict_cap * sizeof *pg->dict);
    }
    char e[ERR_LEN];
    if (pq_plain_decode(pg->type, p, n, h->num_values, pg->dict, e, sizeof e) < 0)
        return set_err(msg, len, "dictionary page: %s", e);
    pg->dict_n = h->num_values;
    pg->has_dict = 1;
    return 0;
}

// One level stream of a v1 page: RLE with a u32 byte length in front, or the deprecated BIT_PACKED.
static int level_section(const char *what, int encoding, const uint8_t *p, size_t avail, int bits, int64_t n, PqHybrid *h,
                         size_t *used, char *msg, size_t len) {
    if (encoding == ENC_RLE) {
        if (avail < 4) return set_err(msg, len, "%s levels truncated", what);
        uint32_t k = pq_load_u32le(p);
        if (k > avail - 4) return set_err(msg, len, "%s levels of %u bytes, only %zu in the page", what, k, avail - 4);
        pq_hybrid_init(h, p + 4, k, bits);
        *used = 4 + (size_t)k;
        return 0;
    }
    if (encoding == ENC_BIT_PACKED) {
        uint64_t k = ((uint64_t)n * (uint64_t)bits + 7) / 8;
        if (k > avail) return set_err(msg, len, "bit-packed %s levels truncated", what);
        pq_bitpacked_msb_init(h, p, (size_t)k, bits);
        *used = (size_t)k;
        return 0;
    }
    return set_err(msg, len, "%s level encoding %s is not supported", what, pq_encoding_name(encoding));
}

// Splits a data page into its level streams and (decompressed) values.
static int data_page(PqPages *pg, const PqPageHeader *h, const uint8_t *body, PqDataPage *p, char *msg, size_t len) {
    memset(p, 0, sizeof *p);
    p->h = *h;
    p->v2 = h->type == PAGE_DATA_V2;
    p->num_values = h->num_values;
    int rbits = pq_level_bits(pg->max_rep), dbits = pq_level_bits(pg->max_def);
    if (!p->v2) { // levels and values compressed together
        size_t n = (size_t)h->uncompressed_size, off = 0, used;
        const uint8_t *d = body;
        if (pg->codec != PQ_UNCOMPRESSED) {
            if (inflate_page(pg, body, (size_t)h->compressed_size, n, &pg->page, &pg->page_cap, &d, msg, len)) return -1;
        } else if ((size_t)h->compressed_size != n) {
            return set_err(msg, len, "uncompressed page holds %d bytes, its header says %zu", h->compressed_size, n);
        }
        if (pg->max_rep) {
            if (level_section("repetition", h->rep_encoding, d, n, rbits, h->num_values, &p->rep, &used, msg, len)) return -1;
            off += used;
        }
        if (pg->max_def) {
            if (level_section("definition", h->def_encoding, d + off, n - off, dbits, h->num_values, &p->def, &used, msg, len))
                return -1;
            off += used;
        }
        p->values = d + off;
        p->values_len = n - off;
        return 0;
    }
    // v2: repetition then definition levels, uncompressed and without length prefixes, then the values
    if (h->def_len < 0 || h->rep_len < 0 || (int64_t)h->def_len + h->rep_len > h->compressed_size ||
        (int64_t)h->def_len + h->rep_len > h->uncompressed_size)
        return set_err(msg, len, "level lengths (%d + %d bytes) do not fit in the page", h->rep_len, h->def_len);
    if (h->num_nulls < 0 || h->num_nulls > h->num_values)
        return set_err(msg, len, "num_nulls %d out of range (page has %d values)", h->num_nulls, h->num_values);
    if (!pg->max_def && h->num_nulls > 0) return set_err(msg, len, "%d nulls in a REQUIRED column", h->num_nulls);
    if (pg->max_rep) pq_hybrid_init(&p->rep, body, (size_t)h->rep_len, rbits);
    if (pg->max_def) pq_hybrid_init(&p->def, body + h->rep_len, (size_t)h->def_len, dbits);
    size_t levels = (size_t)h->rep_len + (size_t)h->def_len;
    const uint8_t *src = body + levels;
    size_t src_n = (size_t)h->compressed_size - levels;
    p->values_len = (size_t)h->uncompressed_size - levels;
    if (pg->codec == PQ_UNCOMPRESSED || !h->is_compressed) {
        if (src_n != p->values_len)
            return set_err(msg, len, "uncompressed values hold %zu bytes, the page header says %zu", src_n, p->values_len);
        p->values = src;
        return 0;
    }
    return inflate_page(pg, src, src_n, p->values_len, &pg->page, &pg->page_cap, &p->values, msg, len);
}

int pq_pages_next(PqPages *pg, PqDataPage *p, char *msg, size_t len) {
    for (;;) {
        if (pg->seen == pg->num_values) return 0;
        pg->page_off = pg->pos;
        if (pg->pos >= pg->end)
            return set_err(msg, len, "column chunk ends after %lld values, its metadata says %lld", (long long)pg->seen,
                           (long long)pg->num_values);
        PqPageHeader h;
        int64_t hlen = read_header(pg, &h, msg, len);
        if (hlen < 0) return -1;
        int64_t next = pg->pos + hlen + h.compressed_size;
        const uint8_t *body;
        if (h.type == PAGE_DICTIONARY) {
            if (!h.has_dict) return set_err(msg, len, "DICTIONARY_PAGE without its dictionary_page_header");
            if (pg->has_dict) return set_err(msg, len, "second dictionary page in one column chunk");
            if (pg->seen > 0) return set_err(msg, len, "dictionary page after data pages");
            if (h.encoding != ENC_PLAIN && h.encoding != ENC_PLAIN_DICTIONARY)
                return set_err(msg, len, "dictionary page with encoding %s, expected PLAIN", pq_encoding_name(h.encoding));
            if (read_body(pg, &h, hlen, &body, msg, len) || load_dictionary(pg, &h, body, msg, len)) return -1;
            pg->pos = next;
            continue;
        }
        if (h.type != PAGE_DATA && h.type != PAGE_DATA_V2) { // index pages and future page types: skipped
            pg->pos = next;
            continue;
        }
        if (h.type == PAGE_DATA && !h.has_v1) return set_err(msg, len, "DATA_PAGE without its data_page_header");
        if (h.type == PAGE_DATA_V2 && !h.has_v2) return set_err(msg, len, "DATA_PAGE_V2 without its data_page_header_v2");
        if (h.num_values < 0 || h.num_values > pg->num_values - pg->seen)
            return set_err(msg, len, "page holds %d values, only %lld of the column chunk's %lld remain", h.num_values,
                           (long long)(pg->num_values - pg->seen), (long long)pg->num_values);
        if (read_body(pg, &h, hlen, &body, msg, len) || data_page(pg, &h, body, p, msg, len)) return -1;
        p->chunk_first = pg->seen == 0;
        pg->pos = next;
        pg->seen += h.num_values;
        return 1;
    }
}
