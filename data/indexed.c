// indexed.c: Megatron MMIDIDX indexed datasets (<prefix>.idx + <prefix>.bin), spec data.md §2.
// The reader maps both files and checks every field against the file sizes before anything is read
// through it, so a truncated or foreign file gives one clear error rather than a crash. The writer
// streams tokens to the .bin and keeps only the lengths (4 bytes a sequence) and the document
// boundaries (8 bytes a document) until finish() writes the .idx.
#define _GNU_SOURCE
#include "data/indexed.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/common.h"

static const uint8_t MMIDIDX_MAGIC[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
enum { HDR_SIZE = 34 }; // magic 9 + version 8 + dtype 1 + S 8 + Dc 8

// dtype code -> item size; 0 = unknown code. Codes per Megatron's DType enum.
static int dtype_itemsize(int code) {
    switch (code) {
    case 1: case 2: return 1; // uint8, int8
    case 3: case 8: return 2; // int16, uint16
    case 4: case 7: return 4; // int32, float32
    case 5: case 6: return 8; // int64, float64
    default: return 0;
    }
}

static const char *dtype_name(int code) {
    static const char *names[] = {"?", "uint8", "int8", "int16", "int32", "int64", "float64", "float32", "uint16"};
    return code >= 1 && code <= 8 ? names[code] : "?";
}

static int dtype_is_integer(int code) { return dtype_itemsize(code) && code != 6 && code != 7; }

static uint64_t rd_u64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
static int64_t rd_i64(const uint8_t *p) {
    int64_t v;
    memcpy(&v, p, 8);
    return v;
}
static int32_t rd_i32(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

// ---- reader

static int validate_idx(IndexedDataset *ds, const char *idx_path, const char *bin_path, char *err, size_t errlen) {
    const uint8_t *m = ds->idx_map;
    size_t size = ds->idx_size;
    if (size < HDR_SIZE)
        return set_err(err, errlen, "%s: file is %zu bytes, shorter than the %d-byte MMIDIDX header", idx_path, size,
                       HDR_SIZE);
    if (memcmp(m, MMIDIDX_MAGIC, 9) != 0)
        return set_err(err, errlen, "%s: bad magic at offset 0 (expected \"MMIDIDX\\0\\0\"): not a Megatron .idx file",
                       idx_path);
    uint64_t version = rd_u64(m + 9);
    if (version != 1)
        return set_err(err, errlen, "%s: version at offset 9 is %llu, expected 1", idx_path, (unsigned long long)version);
    ds->dtype_code = m[17];
    ds->itemsize = dtype_itemsize(ds->dtype_code);
    if (!ds->itemsize)
        return set_err(err, errlen, "%s: dtype code at offset 17 is %d, expected 1..8 (4 = int32, 8 = uint16)", idx_path,
                       ds->dtype_code);
    if (!dtype_is_integer(ds->dtype_code))
        return set_err(err, errlen, "%s: dtype code %d (%s) at offset 17 is not an integer token type", idx_path,
                       ds->dtype_code, dtype_name(ds->dtype_code));
    uint64_t S = rd_u64(m + 18), Dc = rd_u64(m + 26);
    // Bound the counts by the file size before any multiplication can overflow.
    uint64_t room = size - HDR_SIZE;
    if (S > room / 12)
        return set_err(err, errlen,
                       "%s: sequence_count at offset 18 is %llu, but the file (%zu bytes) has room for at most %llu",
                       idx_path, (unsigned long long)S, size, (unsigned long long)(room / 12));
    if (Dc > (room - 12 * S) / 8)
        return set_err(err, errlen,
                       "%s: document_count at offset 26 is %llu, but the file (%zu bytes) has room for at most %llu "
                       "after %llu sequences",
                       idx_path, (unsigned long long)Dc, size, (unsigned long long)((room - 12 * S) / 8),
                       (unsigned long long)S);
    uint64_t expect = HDR_SIZE + 12 * S + 8 * Dc;
    // Multimodal datasets append one sequence_modes byte per sequence; GPT data has none.
    if (size != expect && size != expect + S)
        return set_err(err, errlen, "%s: file is %zu bytes, expected %llu for %llu sequences and %llu document entries",
                       idx_path, size, (unsigned long long)expect, (unsigned long long)S, (unsigned long long)Dc);
    ds->num_seqs = S;
    ds->num_docs_entries = Dc;
    ds->seq_lengths = (const int32_t *)(m + HDR_SIZE);

    // Lengths non-negative, pointers = running byte offsets (as Megatron's writer lays them out).
    const uint8_t *len_p = m + HDR_SIZE, *ptr_p = m + HDR_SIZE + 4 * S, *doc_p = m + HDR_SIZE + 12 * S;
    uint64_t total = 0;
    for (uint64_t i = 0; i < S; i++) {
        int32_t len = rd_i32(len_p + 4 * i);
        if (len < 0)
            return set_err(err, errlen, "%s: sequence_lengths[%llu] = %d is negative", idx_path, (unsigned long long)i,
                           len);
        int64_t ptr = rd_i64(ptr_p + 8 * i);
        if ((uint64_t)ptr != total * (uint64_t)ds->itemsize)
            return set_err(err, errlen,
                           "%s: sequence_pointers[%llu] = %lld, expected %llu (sum of the preceding lengths x %d bytes)",
                           idx_path, (unsigned long long)i, (long long)ptr,
                           (unsigned long long)(total * (uint64_t)ds->itemsize), ds->itemsize);
        total += (uint64_t)len;
    }
    ds->total_tokens = total;
    // Document boundaries: non-decreasing, within [0, S], ending at S. The first entry is normally 0, but
    // convert_fla_to_megatron.py writes [1..N] without it and Megatron accepts that, so we do too.
    if (Dc == 0 && S > 0)
        return set_err(err, errlen, "%s: document_count is 0 but there are %llu sequences", idx_path,
                       (unsigned long long)S);
    int64_t prev = 0;
    for (uint64_t d = 0; d < Dc; d++) {
        int64_t v = rd_i64(doc_p + 8 * d);
        if (v < prev || (uint64_t)v > S)
            return set_err(err, errlen,
                           "%s: document_indices[%llu] = %lld, expected a value in [%lld, %llu] (non-decreasing, at "
                           "most sequence_count)",
                           idx_path, (unsigned long long)d, (long long)v, (long long)prev, (unsigned long long)S);
        prev = v;
    }
    if (Dc > 0 && (uint64_t)prev != S)
        return set_err(err, errlen, "%s: the last document_indices entry is %lld, expected sequence_count %llu", idx_path,
                       (long long)prev, (unsigned long long)S);
    uint64_t bin_expect = total * (uint64_t)ds->itemsize;
    if (ds->bin_size != bin_expect)
        return set_err(err, errlen, "%s: file is %zu bytes, but %s lists %llu tokens x %d bytes = %llu bytes", bin_path,
                       ds->bin_size, idx_path, (unsigned long long)total, ds->itemsize, (unsigned long long)bin_expect);
    return 0;
}

int indexed_open(IndexedDataset *ds, const char *prefix, char *err, size_t errlen) {
    memset(ds, 0, sizeof *ds);
    size_t n = strlen(prefix) + 8;
    char *idx_path = xmalloc(n), *bin_path = xmalloc(n);
    snprintf(idx_path, n, "%s.idx", prefix);
    snprintf(bin_path, n, "%s.bin", prefix);
    int rc = map_file_ro(idx_path, &ds->idx_map, &ds->idx_size, err, errlen);
    if (rc == 0) rc = map_file_ro(bin_path, &ds->bin_map, &ds->bin_size, err, errlen);
    if (rc == 0) rc = validate_idx(ds, idx_path, bin_path, err, errlen);
    if (rc != 0) indexed_close(ds);
    free(idx_path);
    free(bin_path);
    return rc;
}

void indexed_close(IndexedDataset *ds) {
    if (ds->idx_map) munmap((void *)ds->idx_map, ds->idx_size);
    if (ds->bin_map) munmap((void *)ds->bin_map, ds->bin_size);
    memset(ds, 0, sizeof *ds);
}

uint32_t indexed_seq_len(const IndexedDataset *ds, uint64_t i) {
    return (uint32_t)rd_i32(ds->idx_map + HDR_SIZE + 4 * i);
}

uint64_t indexed_seq_offset(const IndexedDataset *ds, uint64_t i) {
    return (uint64_t)rd_i64(ds->idx_map + HDR_SIZE + 4 * ds->num_seqs + 8 * i) / (uint64_t)ds->itemsize;
}

int64_t indexed_doc_index(const IndexedDataset *ds, uint64_t i) {
    return rd_i64(ds->idx_map + HDR_SIZE + 12 * ds->num_seqs + 8 * i);
}

void indexed_read_tokens(const IndexedDataset *ds, uint64_t off, uint64_t n, int32_t *out) {
    if (off > ds->total_tokens || n > ds->total_tokens - off)
        die("indexed_read_tokens: tokens [%llu, %llu) are past the end of the dataset (%llu tokens)",
            (unsigned long long)off, (unsigned long long)(off + n), (unsigned long long)ds->total_tokens);
    if (n == 0) return;
    const uint8_t *p = ds->bin_map + off * (uint64_t)ds->itemsize;
    switch (ds->dtype_code) {
    case 4: memcpy(out, p, n * 4); break;
    case 8: for (uint64_t k = 0; k < n; k++) { uint16_t v; memcpy(&v, p + 2 * k, 2); out[k] = v; } break;
    case 1: for (uint64_t k = 0; k < n; k++) out[k] = p[k]; break;
    case 2: for (uint64_t k = 0; k < n; k++) out[k] = (int8_t)p[k]; break;
    case 3: for (uint64_t k = 0; k < n; k++) { int16_t v; memcpy(&v, p + 2 * k, 2); out[k] = v; } break;
    case 5: for (uint64_t k = 0; k < n; k++) out[k] = (int32_t)rd_i64(p + 8 * k); break;
    default: die("indexed_read_tokens: dtype code %d is not a token type", ds->dtype_code);
    }
}

// ---- writer

struct IndexedWriter {
    AtomicFile bin;
    char *prefix;
    int dtype_code, itemsize;
    int32_t *lengths; // one per sequence
    uint64_t num_seqs, cap_seqs;
    int64_t *doc_indices; // starts with 0; end_doc appends the sequence count
    uint64_t num_docs_entries, cap_docs;
    uint64_t total_tokens;
    uint8_t *conv; // conversion buffer for the .bin element type
    size_t conv_cap;
    char failed[ERR_LEN]; // first add/end error, reported again by finish() (add_seq has no err argument)
};

IndexedWriter *indexed_writer_open(const char *prefix, int dtype_code, char *err, size_t errlen) {
    if (!dtype_is_integer(dtype_code)) {
        set_err(err, errlen, "%s: cannot write dtype code %d (%s): expected an integer code (4 = int32, 8 = uint16)",
                prefix, dtype_code, dtype_name(dtype_code));
        return NULL;
    }
    IndexedWriter *w = xcalloc(1, sizeof *w);
    w->prefix = xstrdup(prefix);
    w->dtype_code = dtype_code;
    w->itemsize = dtype_itemsize(dtype_code);
    size_t n = strlen(prefix) + 8;
    char *bin_path = xmalloc(n);
    snprintf(bin_path, n, "%s.bin", prefix);
    int rc = atomic_open(&w->bin, bin_path, err, errlen);
    free(bin_path);
    if (rc != 0) {
        free(w->prefix);
        free(w);
        return NULL;
    }
    w->cap_docs = 1024;
    w->doc_indices = xmalloc(w->cap_docs * sizeof *w->doc_indices);
    w->doc_indices[w->num_docs_entries++] = 0;
    return w;
}

static int id_fits(int code, int32_t id) {
    switch (code) {
    case 1: return id >= 0 && id <= 255;
    case 2: return id >= -128 && id <= 127;
    case 3: return id >= -32768 && id <= 32767;
    case 8: return id >= 0 && id <= 65535;
    default: return 1; // int32, int64
    }
}

int indexed_writer_add_seq(IndexedWriter *w, const int32_t *ids, size_t n) {
    if (w->failed[0]) return -1;
    if (n > INT32_MAX) {
        set_err(w->failed, sizeof w->failed, "%s: sequence %llu has %zu tokens, more than an int32 length can hold",
                w->prefix, (unsigned long long)w->num_seqs, n);
        return -1;
    }
    size_t bytes = n * (size_t)w->itemsize;
    if (w->conv_cap < bytes) {
        w->conv_cap = bytes > 2 * w->conv_cap ? bytes : 2 * w->conv_cap;
        w->conv = xrealloc(w->conv, w->conv_cap);
    }
    for (size_t k = 0; k < n; k++) {
        int32_t id = ids[k];
        if (!id_fits(w->dtype_code, id)) {
            set_err(w->failed, sizeof w->failed, "%s: token id %d (sequence %llu, position %zu) does not fit dtype %s",
                    w->prefix, id, (unsigned long long)w->num_seqs, k, dtype_name(w->dtype_code));
            return -1;
        }
        uint8_t *dst = w->conv + k * (size_t)w->itemsize;
        switch (w->itemsize) {
        case 1: dst[0] = (uint8_t)id; break;
        case 2: { uint16_t v = (uint16_t)id; memcpy(dst, &v, 2); } break;
        case 4: memcpy(dst, &id, 4); break;
        default: { int64_t v = id; memcpy(dst, &v, 8); } break;
        }
    }
    if (bytes > 0 && atomic_write(&w->bin, w->conv, bytes) != 0) {
        set_err(w->failed, sizeof w->failed, "error writing %s: %s", w->bin.tmp, strerror(errno));
        return -1;
    }
    if (w->num_seqs == w->cap_seqs) {
        w->cap_seqs = w->cap_seqs ? 2 * w->cap_seqs : 4096;
        w->lengths = xrealloc(w->lengths, w->cap_seqs * sizeof *w->lengths);
    }
    w->lengths[w->num_seqs++] = (int32_t)n;
    w->total_tokens += n;
    return 0;
}

int indexed_writer_end_doc(IndexedWriter *w) {
    if (w->failed[0]) return -1;
    if (w->num_docs_entries == w->cap_docs) {
        w->cap_docs *= 2;
        w->doc_indices = xrealloc(w->doc_indices, w->cap_docs * sizeof *w->doc_indices);
    }
    // Like Megatron's builder, an empty document still adds an entry.
    w->doc_indices[w->num_docs_entries++] = (int64_t)w->num_seqs;
    return 0;
}

static void writer_free(IndexedWriter *w) {
    free(w->lengths);
    free(w->doc_indices);
    free(w->conv);
    free(w->prefix);
    free(w);
}

static int write_idx(IndexedWriter *w, AtomicFile *af) {
    uint8_t hdr[HDR_SIZE];
    memcpy(hdr, MMIDIDX_MAGIC, 9);
    uint64_t version = 1, S = w->num_seqs, Dc = w->num_docs_entries;
    memcpy(hdr + 9, &version, 8);
    hdr[17] = (uint8_t)w->dtype_code;
    memcpy(hdr + 18, &S, 8);
    memcpy(hdr + 26, &Dc, 8);
    if (atomic_write(af, hdr, HDR_SIZE) || (S > 0 && atomic_write(af, w->lengths, 4 * S))) return -1;
    // Pointers are computed on the fly in blocks rather than kept for the whole run.
    int64_t block[4096];
    int64_t pos = 0;
    for (uint64_t i = 0; i < S;) {
        size_t k = 0;
        for (; k < 4096 && i < S; k++, i++) {
            block[k] = pos;
            pos += (int64_t)w->lengths[i] * w->itemsize;
        }
        if (atomic_write(af, block, k * sizeof *block)) return -1;
    }
    return atomic_write(af, w->doc_indices, 8 * Dc);
}

int indexed_writer_finish(IndexedWriter *w, char *err, size_t errlen) {
    if (w->failed[0]) {
        set_err(err, errlen, "%s", w->failed);
        indexed_writer_abort(w);
        return -1;
    }
    // Sequences after the last end_doc form a final document, so document_indices always ends at S.
    if ((uint64_t)w->doc_indices[w->num_docs_entries - 1] != w->num_seqs) indexed_writer_end_doc(w);
    size_t n = strlen(w->prefix) + 8;
    char *idx_path = xmalloc(n);
    snprintf(idx_path, n, "%s.idx", w->prefix);
    AtomicFile idx;
    if (atomic_open(&idx, idx_path, err, errlen) != 0) {
        free(idx_path);
        indexed_writer_abort(w);
        return -1;
    }
    if (write_idx(w, &idx) != 0) {
        set_err(err, errlen, "error writing %s: %s", idx.tmp, strerror(errno));
        atomic_abort(&idx);
        free(idx_path);
        indexed_writer_abort(w);
        return -1;
    }
    // .bin first, .idx last: the .idx is what makes the pair look complete.
    char *bin_path = xstrdup(w->bin.path);
    int rc = atomic_commit(&w->bin, err, errlen);
    if (rc == 0) {
        rc = atomic_commit(&idx, err, errlen);
        if (rc != 0) unlink(bin_path); // never leave a new .bin beside no (or an old) .idx
    } else {
        atomic_abort(&idx);
    }
    free(bin_path);
    free(idx_path);
    writer_free(w);
    return rc;
}

void indexed_writer_abort(IndexedWriter *w) {
    atomic_abort(&w->bin);
    writer_free(w);
}
