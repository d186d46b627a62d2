// pq_pages.h: the pages of one column chunk, read once here for both readers (parquet.c streams one string
// column with pread; pq_table_decode.c decodes whole chunks of a file held in memory).
//
// A chunk is a run of pages, each a Thrift PageHeader followed by its (compressed) body: an optional
// dictionary page, then data pages (v1: levels and values compressed together, RLE levels prefixed with their
// length; v2: levels stored uncompressed in front of the compressed values). The cursor reads each header
// (through a window that grows while a large header is truncated), checks it against the chunk, loads the
// dictionary (PLAIN values of the column's type), decompresses data pages and hands back the level decoders and
// the value bytes. Every length is checked against the bytes that remain; messages (without the file or place:
// the caller prefixes "<file>: <column>, row group R, page at offset <page_off>") say what was wrong.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "data/pq_encoding.h"
#include "data/pq_format.h"

typedef struct {
    // Set by pq_pages_start ------------------------------------------------------------------------------
    const uint8_t *file;     // the whole file in memory, or NULL: pages are read from fd
    int fd;
    int codec, type;         // the chunk's codec; the column's physical type (of the dictionary's values)
    int max_rep, max_def;    // the column's maximum levels (0: that level stream is absent)
    int64_t start, end;      // the chunk's pages: file bytes [start, end)
    int64_t num_values;      // values in its data pages (nulls included), from the chunk metadata
    // Set by the caller once: keep: called with each buffer a page is decompressed into, which then belongs to the caller (values
    // may point into it for as long as the caller keeps it); NULL: buffers are reused from page to page.
    void (*keep)(void *ctx, void *block);
    void *keep_ctx;
    int64_t *decoded;        // non-NULL: running total of decompressed bytes, bounded by max_decoded
    int64_t max_decoded;
    // Position ------------------------------------------------------------------------------------------
    int64_t pos;             // the next page header
    int64_t page_off;        // the current page's header offset (for messages)
    int64_t seen;            // values in the data pages handed out so far
    // The dictionary (PLAIN values of `type`; strings point into a buffer kept here or handed to keep)
    PqValue *dict;
    int64_t dict_n, dict_cap;
    int has_dict;
    // Buffers (reused): header window and page body as stored (fd only), dictionary and page decompressed
    uint8_t *hdr, *raw, *dict_buf, *page;
    size_t hdr_cap, raw_cap, dict_buf_cap, page_cap;
} PqPages;

typedef struct {            // one data page
    PqPageHeader h;
    int v2;
    int chunk_first;        // the first data page of its chunk
    int32_t num_values;     // entries (levels) in the page; v1 nulls are among them
    PqHybrid rep, def;      // level decoders at the column's bit widths (valid when max_rep / max_def > 0)
    const uint8_t *values;  // the value bytes after the levels, decompressed: [values_len]
    size_t values_len;
} PqDataPage;

// Starts on a chunk (pg zeroed before the first; the buffers of a previous chunk are reused, keep / decoded
// stay as set).
void pq_pages_start(PqPages *pg, const uint8_t *file, int fd, int codec, int type, int max_rep, int max_def,
                    int64_t start, int64_t end, int64_t num_values);
// Moves to the chunk's next data page (loading a dictionary page on the way, skipping index pages): 1 with *p
// filled, 0 when the chunk's num_values have been handed out, -1 + msg.
int pq_pages_next(PqPages *pg, PqDataPage *p, char *msg, size_t msglen);
void pq_pages_free(PqPages *pg);
// Bit width of levels 0..max.
int pq_level_bits(int max);
// Reads exactly n bytes of fd at off. 0, or -1 + err ("read error at offset O: ...", "file ends at offset O").
int pq_pread_full(int fd, void *buf, size_t n, int64_t off, char *err, size_t errlen);
