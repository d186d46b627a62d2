// pq_encoding.c: Parquet level/value encodings and page codecs (see pq_encoding.h).
#include "data/pq_encoding.h"

#include <limits.h>
#include <snappy-c.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "data/pq_format.h"
#include "util/common.h"

const char *pq_codec_name(int codec) {
    static const char *names[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW"};
    return codec >= 0 && codec <= PQ_LZ4_RAW ? names[codec] : "unknown";
}

int pq_codec_supported(int codec) {
    return codec == PQ_UNCOMPRESSED || codec == PQ_SNAPPY || codec == PQ_GZIP || codec == PQ_ZSTD;
}

static int inflate_gzip(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_len, char *err, size_t errlen) {
    z_stream z;
    memset(&z, 0, sizeof z);
    // 15 + 32: accept a gzip or a zlib header (detected from the first bytes).
    if (inflateInit2(&z, 15 + 32) != Z_OK) return set_err(err, errlen, "GZIP: cannot initialise zlib");
    size_t in_done = 0, out_done = 0;
    uint8_t dummy; // zlib wants a non-NULL output pointer even for an empty page
    int rc;
    for (;;) {
        // zlib counts in uInt: feed at most 1 GiB at a time.
        size_t in_chunk = src_len - in_done, out_chunk = dst_len - out_done;
        if (in_chunk > (1u << 30)) in_chunk = 1u << 30;
        if (out_chunk > (1u << 30)) out_chunk = 1u << 30;
        z.next_in = (Bytef *)(src + in_done);
        z.avail_in = (uInt)in_chunk;
        z.next_out = out_chunk ? dst + out_done : &dummy;
        z.avail_out = (uInt)out_chunk;
        rc = inflate(&z, Z_NO_FLUSH);
        size_t used = in_chunk - z.avail_in, made = out_chunk - z.avail_out;
        in_done += used;
        out_done += made;
        if (rc == Z_STREAM_END) {
            if (in_done == src_len || out_done == dst_len) break;
            inflateReset(&z); // a gzip stream may hold several members back to back
            continue;
        }
        if (rc == Z_BUF_ERROR || (rc == Z_OK && used == 0 && made == 0)) {
            inflateEnd(&z);
            if (out_done == dst_len)
                return set_err(err, errlen, "GZIP: page decompresses to more than the %zu bytes its header says", dst_len);
            return set_err(err, errlen, "GZIP: data ends early (%zu of %zu bytes decompressed)", out_done, dst_len);
        }
        if (rc != Z_OK) {
            set_err(err, errlen, "GZIP: corrupt data (%s)", z.msg ? z.msg : "zlib error");
            inflateEnd(&z);
            return -1;
        }
    }
    inflateEnd(&z);
    if (out_done != dst_len)
        return set_err(err, errlen, "GZIP: page decompressed to %zu bytes, its header says %zu", out_done, dst_len);
    return 0;
}

int pq_check_decompressed_size(int codec, const uint8_t *src, size_t src_len, size_t dst_len, char *err, size_t errlen) {
    switch (codec) {
    case PQ_UNCOMPRESSED:
        if (src_len != dst_len)
            return set_err(err, errlen, "uncompressed page holds %zu bytes, its header says %zu", src_len, dst_len);
        return 0;
    case PQ_SNAPPY: {
        size_t n;
        if (snappy_uncompressed_length((const char *)src, src_len, &n) != SNAPPY_OK)
            return set_err(err, errlen, "SNAPPY: corrupt block header");
        if (n != dst_len) return set_err(err, errlen, "SNAPPY: block holds %zu bytes, the page header says %zu", n, dst_len);
        return 0;
    }
    case PQ_GZIP:
        // Deflate expands at most 1032:1 (plus a few header bytes per member).
        if (dst_len / 1032 > src_len + 64)
            return set_err(err, errlen, "GZIP: %zu compressed bytes cannot hold the %zu bytes the page header says", src_len, dst_len);
        return 0;
    case PQ_ZSTD: {
        unsigned long long n = ZSTD_getFrameContentSize(src, src_len);
        if (n == ZSTD_CONTENTSIZE_ERROR) return set_err(err, errlen, "ZSTD: corrupt frame header");
        if (n != ZSTD_CONTENTSIZE_UNKNOWN && n > dst_len)
            return set_err(err, errlen, "ZSTD: frame holds %llu bytes, the page header says %zu", n, dst_len);
        return 0;
    }
    default:
        return set_err(err, errlen, "codec %s (%d) is not supported (supported: UNCOMPRESSED, SNAPPY, GZIP, ZSTD)",
                       pq_codec_name(codec), codec);
    }
}

int pq_decompress(int codec, const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_len, char *err, size_t errlen) {
    // The sizes a codec states up front (and an unsupported codec) are checked once, there.
    if (pq_check_decompressed_size(codec, src, src_len, dst_len, err, errlen)) return -1;
    switch (codec) {
    case PQ_UNCOMPRESSED: memcpy(dst, src, src_len); return 0;
    case PQ_SNAPPY: {
        size_t n = dst_len;
        if (snappy_uncompress((const char *)src, src_len, (char *)dst, &n) != SNAPPY_OK || n != dst_len)
            return set_err(err, errlen, "SNAPPY: corrupt data");
        return 0;
    }
    case PQ_GZIP: return inflate_gzip(src, src_len, dst, dst_len, err, errlen);
    default: { // PQ_ZSTD
        size_t n = ZSTD_decompress(dst, dst_len, src, src_len);
        if (ZSTD_isError(n)) return set_err(err, errlen, "ZSTD: %s", ZSTD_getErrorName(n));
        if (n != dst_len) return set_err(err, errlen, "ZSTD: page decompressed to %zu bytes, its header says %zu", n, dst_len);
        return 0;
    }
    }
}

// Reads w (0..64) bits starting at bit `pos`, least significant bit first. The caller guarantees that
// pos + w bits lie inside the buffer.
static uint64_t bits_lsb(const uint8_t *buf, uint64_t pos, int w) {
    if (w == 0) return 0;
    const uint8_t *b = buf + (pos >> 3);
    int shift = (int)(pos & 7);
    uint64_t v = (uint64_t)(*b++ >> shift);
    int got = 8 - shift;
    while (got < w) {
        v |= (uint64_t)*b++ << got;
        got += 8;
    }
    return w < 64 ? v & ((UINT64_C(1) << w) - 1) : v;
}

static uint64_t bits_msb(const uint8_t *buf, uint64_t pos, int w) {
    uint64_t v = 0;
    for (int k = 0; k < w; k++, pos++) v = v << 1 | ((buf[pos >> 3] >> (7 - (pos & 7))) & 1u);
    return v;
}

// Unsigned LEB128 varint, at most 10 bytes. Returns 0 when truncated or too long.
static int read_uvarint(const uint8_t **pp, const uint8_t *end, uint64_t *out) {
    const uint8_t *p = *pp;
    uint64_t v = 0;
    for (int shift = 0; shift < 70 && p < end; shift += 7) {
        uint8_t b = *p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *pp = p;
            *out = v;
            return 1;
        }
    }
    return 0;
}

void pq_hybrid_init(PqHybrid *h, const uint8_t *p, size_t n, int bit_width) {
    memset(h, 0, sizeof *h);
    h->p = p;
    h->end = p + n;
    h->bit_width = bit_width;
}

void pq_bitpacked_msb_init(PqHybrid *h, const uint8_t *p, size_t n, int bit_width) {
    pq_hybrid_init(h, p, n, bit_width);
    h->msb_bit_packed = 1;
    h->packed = 1;
    h->bits = p;
    h->bit_len = (uint64_t)n * 8;
    h->run_left = bit_width ? (int64_t)(h->bit_len / (uint64_t)bit_width) : INT64_MAX;
    h->p = h->end;
}

int pq_hybrid_next(PqHybrid *h, uint32_t *v) {
    while (h->run_left == 0) {
        if (h->msb_bit_packed || h->p >= h->end) return 0;
        uint64_t hdr;
        if (!read_uvarint(&h->p, h->end, &hdr) || hdr > UINT32_MAX) return 0;
        size_t avail = (size_t)(h->end - h->p);
        if (hdr & 1) {
            uint64_t groups = hdr >> 1, bytes = groups * (uint64_t)h->bit_width;
            // The last run of a stream may stop short of its group count: take the values that are there.
            if (bytes > avail) bytes = avail;
            h->packed = 1;
            h->bits = h->p;
            h->bit_pos = 0;
            h->bit_len = bytes * 8;
            h->run_left = h->bit_width ? (int64_t)(h->bit_len / (uint64_t)h->bit_width) : (int64_t)(groups * 8);
            if (h->run_left > (int64_t)(groups * 8)) h->run_left = (int64_t)(groups * 8);
            h->p += bytes;
        } else {
            size_t nb = (size_t)(h->bit_width + 7) / 8;
            if (nb > avail) return 0;
            uint32_t val = 0;
            for (size_t i = 0; i < nb; i++) val |= (uint32_t)h->p[i] << (8 * i);
            h->p += nb;
            h->packed = 0;
            h->rle_value = val;
            h->run_left = (int64_t)(hdr >> 1);
        }
    }
    h->run_left--;
    if (!h->packed) {
        *v = h->rle_value;
    } else {
        *v = (uint32_t)(h->msb_bit_packed ? bits_msb(h->bits, h->bit_pos, h->bit_width)
                                          : bits_lsb(h->bits, h->bit_pos, h->bit_width));
        h->bit_pos += (uint64_t)h->bit_width;
    }
    return 1;
}

int64_t pq_delta_init(PqDelta *d, const uint8_t *p, size_t n, int64_t max_count, char *err, size_t errlen) {
    const uint8_t *start = p, *end = p + n;
    uint64_t block_size, mb_per_block, total, zz_first;
    memset(d, 0, sizeof *d);
    if (!read_uvarint(&p, end, &block_size) || !read_uvarint(&p, end, &mb_per_block) ||
        !read_uvarint(&p, end, &total) || !read_uvarint(&p, end, &zz_first))
        return set_err(err, errlen, "DELTA_BINARY_PACKED: header truncated");
    if (block_size == 0 || block_size % 128 || block_size > (1u << 20) || mb_per_block == 0 ||
        block_size % mb_per_block || (block_size / mb_per_block) % 32)
        return set_err(err, errlen, "DELTA_BINARY_PACKED: invalid block size %llu with %llu miniblocks",
                       (unsigned long long)block_size, (unsigned long long)mb_per_block);
    if (total > (uint64_t)max_count)
        return set_err(err, errlen, "DELTA_BINARY_PACKED: header says %llu values, the page has at most %lld",
                       (unsigned long long)total, (long long)max_count);
    d->per_mb = block_size / mb_per_block;
    d->mb_per_block = mb_per_block;
    d->total = (int64_t)total;
    d->prev = (zz_first >> 1) ^ -(zz_first & 1);
    d->p = p;
    d->end = end;
    d->mb = mb_per_block; // no block read yet
    // Walk the blocks once to find where the stream ends and to check every miniblock is there, so that
    // pq_delta_next need not. The first value lives in the header; blocks hold the deltas of the others.
    uint64_t remaining = total ? total - 1 : 0;
    while (remaining > 0) {
        uint64_t zz_min;
        if (!read_uvarint(&p, end, &zz_min)) return set_err(err, errlen, "DELTA_BINARY_PACKED: block header truncated");
        if ((uint64_t)(end - p) < mb_per_block) return set_err(err, errlen, "DELTA_BINARY_PACKED: miniblock widths truncated");
        const uint8_t *widths = p;
        p += mb_per_block;
        // Only the miniblocks that hold values are stored; the widths of the others are still there.
        for (uint64_t m = 0; m < mb_per_block && remaining > 0; m++) {
            if (widths[m] > 64) return set_err(err, errlen, "DELTA_BINARY_PACKED: miniblock bit width %d > 64", widths[m]);
            uint64_t bytes = d->per_mb * widths[m] / 8;
            if ((uint64_t)(end - p) < bytes) return set_err(err, errlen, "DELTA_BINARY_PACKED: miniblock truncated");
            p += bytes;
            remaining -= remaining < d->per_mb ? remaining : d->per_mb;
        }
    }
    return (int64_t)(p - start);
}

int pq_delta_next(PqDelta *d, int64_t *v) {
    if (d->done >= d->total) return 0;
    if (d->done++ == 0) {
        *v = (int64_t)d->prev;
        return 1;
    }
    while (d->mb_left == 0) {
        if (d->mb == d->mb_per_block) { // next block (checked by pq_delta_init; the checks here are belts)
            uint64_t zz_min;
            if (!read_uvarint(&d->p, d->end, &zz_min) || (uint64_t)(d->end - d->p) < d->mb_per_block) return 0;
            d->min_delta = (zz_min >> 1) ^ -(zz_min & 1);
            d->widths = d->p;
            d->p += d->mb_per_block;
            d->mb = 0;
        }
        d->width = d->widths[d->mb++];
        uint64_t bytes = d->per_mb * (uint64_t)d->width / 8;
        if (d->width > 64 || (uint64_t)(d->end - d->p) < bytes) return 0;
        d->bits = d->p;
        d->p += bytes;
        d->j = 0;
        d->mb_left = d->per_mb;
    }
    d->prev += d->min_delta + bits_lsb(d->bits, d->j * (uint64_t)d->width, d->width); // wraps modulo 2^64, as the spec intends
    d->j++;
    d->mb_left--;
    *v = (int64_t)d->prev;
    return 1;
}

// ---------------------------------------------------------------------------------------------------------
// PLAIN values

int pq_value_width(int type) {
    return type == PT_INT32 || type == PT_FLOAT ? 4 : type == PT_INT64 || type == PT_DOUBLE ? 8 : 0;
}

PqValue pq_fixed_value(int type, const uint8_t *p) {
    PqValue v;
    switch (type) {
    case PT_INT32: v.i = (int32_t)pq_load_u32le(p); break;
    case PT_INT64: v.i = (int64_t)pq_load_u64le(p); break;
    case PT_FLOAT: {
        uint32_t u = pq_load_u32le(p);
        float f;
        memcpy(&f, &u, 4);
        v.d = f;
        break;
    }
    default: { // PT_DOUBLE
        uint64_t u = pq_load_u64le(p);
        memcpy(&v.d, &u, 8);
        break;
    }
    }
    return v;
}

int64_t pq_plain_decode(int type, const uint8_t *p, size_t len, int64_t n, PqValue *out, char *err, size_t errlen) {
    if (type == PT_BOOLEAN) { // bit-packed, LSB first
        if ((uint64_t)(n + 7) / 8 > len)
            return set_err(err, errlen, "PLAIN booleans truncated (%lld values in %zu bytes)", (long long)n, len);
        for (int64_t i = 0; i < n; i++) out[i].i = (p[i >> 3] >> (i & 7)) & 1;
        return (n + 7) / 8;
    }
    if (type == PT_BYTE_ARRAY) {
        size_t off = 0;
        for (int64_t i = 0; i < n; i++) {
            if (len - off < 4) return set_err(err, errlen, "PLAIN value %lld: length truncated", (long long)i);
            uint32_t k = pq_load_u32le(p + off);
            off += 4;
            if (k > len - off)
                return set_err(err, errlen, "PLAIN value %lld of %u bytes, only %zu left in the page", (long long)i, k, len - off);
            out[i].s.p = p + off;
            out[i].s.n = k;
            off += k;
        }
        return (int64_t)off;
    }
    int w = pq_value_width(type);
    if (!w) return set_err(err, errlen, "PLAIN values of physical type %s are not supported", pq_type_name(type));
    if ((uint64_t)n > len / (uint64_t)w)
        return set_err(err, errlen, "PLAIN %s values truncated (%lld values need %lld bytes, the page has %zu)",
                       pq_type_name(type), (long long)n, (long long)n * w, len);
    for (int64_t i = 0; i < n; i++) out[i] = pq_fixed_value(type, p + i * w);
    return n * w;
}
