// pq_table_decode.h: the parts of the in-memory table reader (parquet.h's parquet_read_table) shared by its two
// files: pq_table.c (the file and its shapes, rows rebuilt from the leaves, the table) and pq_table_decode.c (the
// pages of each selected leaf decoded into arrays of levels and values). Not for use outside them.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "data/pq_encoding.h"
#include "data/pq_footer.h"
#include "data/pq_pages.h"

#define MAX_ENTRIES ((int64_t)1 << 26) // level entries over the selected leaves: far above any task file
#define MAX_DECODED ((int64_t)4 << 30) // decompressed page bytes

enum { K_LEAF, K_STRUCT, K_LIST }; // PqNode.kind: how a selected node is rendered

typedef struct {
    int node, type, is_unsigned, max_def, max_rep;
    uint8_t *rep, *def;    // [n] levels; NULL when the maximum is 0 (every entry is then 0 / max_def)
    int64_t n, cap;
    PqValue *vals;         // [nvals] the defined values, in order
    int64_t nvals, vcap;
    int64_t pos, vpos;     // assembly cursor
    int selected;
} TableLeaf;

typedef struct {
    const char *path;
    uint8_t *file;         // the whole file
    int64_t size;
    PqFooter f;            // schema tree, row groups, chunk metadata
    TableLeaf *leaves;     // [f.nleaves]
    PqPages pages;         // the chunk being decoded
    void **blocks;         // decompressed pages / rebuilt strings the values point into
    int nblocks, blocks_cap;
    int64_t entries, decoded;
    char where[320];       // "column 'a.b', row group 0, page at offset 123" while decoding
    char *err;
    size_t errlen;
} TableCtx;

// Sets the error "<path>: <where>: <message>" (just "<path>: <message>" when where is empty); returns -1.
__attribute__((format(printf, 2, 3))) int table_fail(TableCtx *c, const char *fmt, ...);
// Keeps p (freed with the context) while values point into it.
void table_keep_block(TableCtx *c, void *p);
// Decodes leaf k's column chunk in row group g into c->leaves[k]. 0, or -1 (err set).
int table_decode_chunk(TableCtx *c, int k, int64_t g);
