// indexed.h: Megatron MMIDIDX indexed datasets (<prefix>.bin + <prefix>.idx), spec data.md §2.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// ---- reader (mmap)
typedef struct {
    int dtype_code;             // 4 = int32, 8 = uint16, ... (spec data.md §2)
    int itemsize;
    uint64_t num_seqs;          // S
    uint64_t num_docs_entries;  // Dc
    const int32_t *seq_lengths; // [S] (pointers into the mmapped .idx may be unaligned: use the accessors)
    const uint8_t *idx_map, *bin_map;
    size_t idx_size, bin_size;
    uint64_t total_tokens;
} IndexedDataset;

int indexed_open(IndexedDataset *ds, const char *prefix, char *err, size_t errlen);
void indexed_close(IndexedDataset *ds);
uint32_t indexed_seq_len(const IndexedDataset *ds, uint64_t i);
uint64_t indexed_seq_offset(const IndexedDataset *ds, uint64_t i); // in tokens from the start of .bin
int64_t indexed_doc_index(const IndexedDataset *ds, uint64_t i);   // document_indices[i]
// Copies tokens [off, off+n) of the concatenated token stream (as int32) into out.
void indexed_read_tokens(const IndexedDataset *ds, uint64_t off, uint64_t n, int32_t *out);

// ---- writer: sequences appended in order, then finish() writes the .idx; both files are written to
// temporaries and renamed on finish, so a failed run leaves nothing that looks complete.
typedef struct IndexedWriter IndexedWriter;
IndexedWriter *indexed_writer_open(const char *prefix, int dtype_code, char *err, size_t errlen);
int indexed_writer_add_seq(IndexedWriter *w, const int32_t *ids, size_t n); // one sequence
int indexed_writer_end_doc(IndexedWriter *w);                               // document boundary after last seq
int indexed_writer_finish(IndexedWriter *w, char *err, size_t errlen);      // frees w
void indexed_writer_abort(IndexedWriter *w);                                // removes temporaries, frees w

#ifdef __cplusplus
}
#endif
