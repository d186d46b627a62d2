// pq_format.h: the parts of the Parquet format (parquet.thrift) that both readers use: the enums, the
// schema element and the page header as read from the Thrift compact encoding. Written from the spec;
// shared by the streaming string-column reader (parquet.c) and the in-memory table reader (pq_table.c).
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "data/pq_thrift.h"

// Physical types, repetition, page types and encodings, as numbered in parquet.thrift.
enum { PT_BOOLEAN, PT_INT32, PT_INT64, PT_INT96, PT_FLOAT, PT_DOUBLE, PT_BYTE_ARRAY, PT_FIXED_LEN_BYTE_ARRAY };
enum { REP_REQUIRED = 0, REP_OPTIONAL = 1, REP_REPEATED = 2 };
enum { PAGE_DATA = 0, PAGE_INDEX = 1, PAGE_DICTIONARY = 2, PAGE_DATA_V2 = 3 };
enum {
    ENC_PLAIN = 0, ENC_PLAIN_DICTIONARY = 2, ENC_RLE = 3, ENC_BIT_PACKED = 4, ENC_DELTA_BINARY_PACKED = 5,
    ENC_DELTA_LENGTH_BYTE_ARRAY = 6, ENC_DELTA_BYTE_ARRAY = 7, ENC_RLE_DICTIONARY = 8, ENC_BYTE_STREAM_SPLIT = 9,
};
// ConvertedType (the legacy annotation; -1 when absent).
enum {
    CT_UTF8 = 0, CT_MAP = 1, CT_MAP_KEY_VALUE = 2, CT_LIST = 3, CT_ENUM = 4, CT_DECIMAL = 5, CT_DATE = 6,
    CT_TIME_MILLIS = 7, CT_TIME_MICROS = 8, CT_TIMESTAMP_MILLIS = 9, CT_TIMESTAMP_MICROS = 10, CT_UINT_8 = 11,
    CT_UINT_16 = 12, CT_UINT_32 = 13, CT_UINT_64 = 14, CT_INT_8 = 15, CT_INT_16 = 16, CT_INT_32 = 17,
    CT_INT_64 = 18, CT_JSON = 19, CT_BSON = 20, CT_INTERVAL = 21,
};
// LogicalType is a Thrift union: the id of the field that is set (-1 when absent).
enum {
    LT_STRING = 1, LT_MAP = 2, LT_LIST = 3, LT_ENUM = 4, LT_DECIMAL = 5, LT_DATE = 6, LT_TIME = 7,
    LT_TIMESTAMP = 8, LT_INTEGER = 10, LT_UNKNOWN = 11, LT_JSON = 12, LT_BSON = 13, LT_UUID = 14,
    LT_FLOAT16 = 15, LT_VARIANT = 16, LT_GEOMETRY = 17, LT_GEOGRAPHY = 18,
};

const char *pq_type_name(int type);
const char *pq_encoding_name(int encoding);
const char *pq_converted_type_name(int converted_type);
const char *pq_logical_type_name(int logical_type);

static inline uint32_t pq_load_u32le(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t pq_load_u64le(const uint8_t *p) {
    return (uint64_t)pq_load_u32le(p) | (uint64_t)pq_load_u32le(p + 4) << 32;
}

// One element of the footer's schema list (the tree flattened depth first). Strings point into the footer.
typedef struct {
    const uint8_t *name;
    size_t name_len;
    int type, repetition;     // -1 when absent (groups have no type; the root has no repetition)
    int32_t type_length;      // FIXED_LEN_BYTE_ARRAY width, -1 when absent
    int32_t num_children;     // -1 when absent (a leaf)
    int converted_type;       // CT_*, -1 when absent
    int logical_type;         // LT_*, -1 when absent
    int int_bits, int_signed; // LogicalType INTEGER's bitWidth and isSigned (0 when not INTEGER)
} PqSchemaElem;
// Parses one SchemaElement struct. 0 ok, -1 when the reader failed (t->status says why).
int pq_parse_schema_elem(ThriftReader *t, PqSchemaElem *e);

// A PageHeader with its data / dictionary / v2 sub-header flattened.
typedef struct {
    int type;
    int32_t uncompressed_size, compressed_size;
    int has_v1, has_v2, has_dict;
    int32_t num_values, num_nulls, num_rows, encoding, def_encoding, rep_encoding, def_len, rep_len;
    int is_compressed;        // v2 only: values compressed (default true)
} PqPageHeader;
// Parses one PageHeader struct (missing sizes/type are left -1 for the caller to report).
void pq_parse_page_header(ThriftReader *t, PqPageHeader *h);
