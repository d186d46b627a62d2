// pq_footer.h: a Parquet file's footer as both readers (parquet.c, pq_table*.c) see it, parsed once here:
//  - the trailer: "PAR1" at both ends, the FileMetaData length before the last magic;
//  - FileMetaData: the schema (a tree flattened depth first) rebuilt as a tree of nodes with dotted paths and
//    definition / repetition levels, its leaves numbered in file order (a leaf's number is the position of its
//    column chunk in every row group), the row count and the row groups;
//  - per row group and kept leaf, the column chunk's metadata, and the checks a chunk must pass before its
//    pages are read (pq_chunk_range).
// Every count and offset read from the footer is bounded before it is used; messages start with the file's
// path and say where in the footer the problem is.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "data/pq_format.h"

#define PQ_MAX_DEPTH 64                  // schema nesting (FineWeb and task files nest at most 3 deep)
#define PQ_MAX_FIELDS (1 << 20)          // schema elements
#define PQ_MAX_CHUNKS ((int64_t)1 << 20) // row groups x kept leaf columns

typedef struct { // one column chunk's ColumnMetaData (and the file_path of its ColumnChunk)
    int has_meta, type, codec, path_ok; // path_ok: path_in_schema names the leaf (or is absent)
    int64_t num_values, total_compressed, data_off, dict_off;
    const uint8_t *file_path;           // set when the chunk lives in another file (not supported)
    size_t file_path_len;
} PqChunkMeta;

typedef struct { // one schema element as a tree node
    const PqSchemaElem *e;
    char *path;           // dotted path from the root's child down, printable (for messages)
    char *name;           // the field name as stored (a JSON key for the table reader)
    int parent, first_child, next_sibling, n_children; // -1 when none; the root's parent is -1
    int def, rep;         // definition / repetition level of this node (0 for the root)
    int leaf_lo, leaf_hi; // its leaves, in file order: [leaf_lo, leaf_hi)
    int kind, rchild, elem; // the table reader's rendering of the node (pq_table.c); unused by the stream
} PqNode;

typedef struct {
    const char *path;      // the file (for messages; not owned)
    int64_t file_size;
    int64_t off;           // FileMetaData's offset in the file: the data area is [4, off)
    uint32_t len;          // its length
    const uint8_t *meta;   // [len] its bytes (owned by the caller; schema names and file paths point into them)
    PqSchemaElem *schema;  // [nschema]
    int64_t nschema;
    PqNode *nodes;         // [nschema]; nodes[0] is the root
    int *leaf_node;        // [nleaves] the schema index of each leaf
    int nleaves;
    int64_t nrows;         // FileMetaData.num_rows
    size_t row_groups_at;  // offset of the row-group list in meta
    int64_t nrg;           // row groups (after pq_footer_row_groups)
    int64_t *rg_rows;      // [nrg] rows of each
    int *slot;             // [nleaves] a kept leaf's column in chunks, -1 when not kept
    int nkept;
    PqChunkMeta *chunks;   // [nrg * nkept]
} PqFooter;

// Checks the magic at both ends and the footer length of a file_size-byte file whose first 4 and last 8
// bytes are head and tail; sets *off and *len. max_len bounds the footer (reader: "the table reader", ...).
int pq_footer_locate(const char *path, int64_t file_size, const uint8_t head[4], const uint8_t tail[8], uint32_t max_len,
                     const char *reader, int64_t *off, uint32_t *len, char *err, size_t errlen);
// Parses FileMetaData (meta[0..len), at file offset off): schema tree, leaves and row count. The row groups
// are parsed by pq_footer_row_groups once the caller knows which leaves it reads. 0, or -1 + err.
int pq_footer_parse(PqFooter *f, const char *path, int64_t file_size, const uint8_t *meta, uint32_t len, int64_t off,
                    char *err, size_t errlen);
// Parses the row groups, keeping the chunk metadata of the leaves with keep[leaf] set (all when keep is NULL);
// checks that every row group lists one chunk per leaf and that the row counts add up. 0, or -1 + err.
int pq_footer_row_groups(PqFooter *f, const unsigned char *keep, char *err, size_t errlen);
// The top-level field named `name`, or -1 with err "<path>: no column '<name>' (top-level columns: ...)".
int pq_footer_find_column(const PqFooter *f, const char *name, char *err, size_t errlen);
const PqChunkMeta *pq_footer_chunk(const PqFooter *f, int64_t g, int leaf); // NULL when the leaf is not kept
// Checks the chunk of leaf in row group g (stored in this file, has metadata, the schema's physical type, the
// leaf's path, a supported codec, pages inside the data area) and sets its page range [*start, *end). 0, or -1
// with the problem in msg (without the file or the place: the caller names them).
int pq_chunk_range(const PqFooter *f, int64_t g, int leaf, int64_t *start, int64_t *end, char *msg, size_t msglen);
void pq_footer_free(PqFooter *f);
