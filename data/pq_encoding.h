// pq_encoding.h: Parquet's low-level encodings and page codecs, written from the format spec.
//  - the RLE / bit-packed hybrid (definition levels, dictionary indices),
//  - the old BIT_PACKED level encoding (MSB first, no runs),
//  - DELTA_BINARY_PACKED (the lengths inside DELTA_LENGTH_BYTE_ARRAY and DELTA_BYTE_ARRAY),
//  - PLAIN values of every physical type the readers support,
//  - page decompression: UNCOMPRESSED, SNAPPY, GZIP, ZSTD.
// Every decoder is bounded by the bytes it was given and reports corruption instead of reading past them.
#pragma once
#include <stddef.h>
#include <stdint.h>

// One value of a column as the readers hold it.
typedef union {
    int64_t i; // INT32 (sign-extended), INT64, BOOLEAN (0/1)
    double d;  // FLOAT, DOUBLE
    struct {
        const uint8_t *p;
        uint32_t n;
    } s;       // BYTE_ARRAY: points into the page (or dictionary) it was decoded from
} PqValue;

// Bytes per value of a fixed-width physical type (INT32, INT64, FLOAT, DOUBLE); 0 for the others.
int pq_value_width(int type);
// A little-endian value of fixed-width type `type` at p.
PqValue pq_fixed_value(int type, const uint8_t *p);
// PLAIN: n values of physical type `type` (BOOLEAN, INT32, INT64, FLOAT, DOUBLE, BYTE_ARRAY) from p[0..len)
// into out. Returns the bytes used, or -1 + err.
int64_t pq_plain_decode(int type, const uint8_t *p, size_t len, int64_t n, PqValue *out, char *err, size_t errlen);

// Parquet CompressionCodec values (parquet.thrift).
enum { PQ_UNCOMPRESSED = 0, PQ_SNAPPY = 1, PQ_GZIP = 2, PQ_LZO = 3, PQ_BROTLI = 4, PQ_LZ4 = 5, PQ_ZSTD = 6, PQ_LZ4_RAW = 7 };
const char *pq_codec_name(int codec);
int pq_codec_supported(int codec);
// Decompresses src into exactly dst_len bytes (the page header's uncompressed size). -1 + err when the
// data is corrupt or does not decompress to exactly dst_len bytes.
// A cheap check, before allocating dst_len bytes, that the compressed data can plausibly decompress to
// that size (a corrupt header must not make us allocate gigabytes). 0 ok, -1 + err.
int pq_check_decompressed_size(int codec, const uint8_t *src, size_t src_len, size_t dst_len, char *err, size_t errlen);
int pq_decompress(int codec, const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_len, char *err, size_t errlen);

// RLE / bit-packed hybrid decoder. Runs: varint header h; h&1 ? (h>>1) groups of 8 bit-packed values
// (LSB first) : (h>>1) repeats of one value stored in ceil(bit_width/8) little-endian bytes.
// msb_bit_packed selects the deprecated BIT_PACKED level encoding instead: one run, MSB first.
typedef struct {
    const uint8_t *p, *end;
    int bit_width;          // 0..32
    int msb_bit_packed;
    int64_t run_left;       // values left in the current run
    int packed;             // current run is bit-packed
    uint32_t rle_value;
    const uint8_t *bits;    // start of the current bit-packed run
    uint64_t bit_pos, bit_len; // position and length of the run in bits
} PqHybrid;
void pq_hybrid_init(PqHybrid *h, const uint8_t *p, size_t n, int bit_width);
void pq_bitpacked_msb_init(PqHybrid *h, const uint8_t *p, size_t n, int bit_width);
// Next value: 1 ok, 0 when the data ran out or a run header is invalid.
int pq_hybrid_next(PqHybrid *h, uint32_t *v);

// DELTA_BINARY_PACKED, decoded as a stream (no allocation, so a header claiming billions of values costs no
// memory). Layout: header <block size> <miniblocks per block> <total count> <zigzag first value>, then blocks of
// <zigzag min delta> <one bit width per miniblock> <miniblocks, bit-packed LSB first>.
typedef struct {
    const uint8_t *p, *end;     // next block header or miniblock
    uint64_t per_mb, mb_per_block;
    int64_t total, done;        // values in the stream; values returned so far
    uint64_t prev, min_delta;   // last value; current block's min delta (arithmetic wraps modulo 2^64)
    const uint8_t *widths;      // current block's bit widths
    uint64_t mb;                // next miniblock of the current block
    const uint8_t *bits;        // current miniblock
    int width;
    uint64_t j, mb_left;        // position in the current miniblock; values left in it
} PqDelta;
// Reads the header and walks the block structure to check it lies within n bytes. max_count bounds the
// header's value count (a page never holds more values than its header says). Returns the number of bytes the
// stream occupies (where the data after it starts), or -1 + err.
int64_t pq_delta_init(PqDelta *d, const uint8_t *p, size_t n, int64_t max_count, char *err, size_t errlen);
int pq_delta_next(PqDelta *d, int64_t *v); // 1 ok, 0 after the last value
