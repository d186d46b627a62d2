// pq_format.c: schema elements, page headers and the names of the format's enums (see pq_format.h).
#include "data/pq_format.h"

#include <string.h>

const char *pq_type_name(int t) {
    static const char *names[] = {"BOOLEAN", "INT32", "INT64", "INT96", "FLOAT", "DOUBLE", "BYTE_ARRAY",
                                  "FIXED_LEN_BYTE_ARRAY"};
    return t >= 0 && t <= PT_FIXED_LEN_BYTE_ARRAY ? names[t] : "unknown";
}

const char *pq_encoding_name(int e) {
    static const char *names[] = {"PLAIN", "GROUP_VAR_INT", "PLAIN_DICTIONARY", "RLE", "BIT_PACKED",
                                  "DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY",
                                  "RLE_DICTIONARY", "BYTE_STREAM_SPLIT"};
    return e >= 0 && e <= ENC_BYTE_STREAM_SPLIT ? names[e] : "unknown";
}

const char *pq_converted_type_name(int c) {
    static const char *names[] = {"UTF8", "MAP", "MAP_KEY_VALUE", "LIST", "ENUM", "DECIMAL", "DATE",
                                  "TIME_MILLIS", "TIME_MICROS", "TIMESTAMP_MILLIS", "TIMESTAMP_MICROS", "UINT_8",
                                  "UINT_16", "UINT_32", "UINT_64", "INT_8", "INT_16", "INT_32", "INT_64", "JSON",
                                  "BSON", "INTERVAL"};
    return c >= 0 && c <= CT_INTERVAL ? names[c] : "unknown";
}

const char *pq_logical_type_name(int l) {
    static const char *names[] = {"unknown", "STRING", "MAP", "LIST", "ENUM", "DECIMAL", "DATE", "TIME",
                                  "TIMESTAMP", "unknown", "INTEGER", "UNKNOWN (null)", "JSON", "BSON", "UUID",
                                  "FLOAT16", "VARIANT", "GEOMETRY", "GEOGRAPHY"};
    return l >= 1 && l <= LT_GEOGRAPHY ? names[l] : "unknown";
}

// LogicalType union: one field set; INTEGER carries IntType {1: i8 bitWidth, 2: bool isSigned}.
static void parse_logical_type(ThriftReader *t, PqSchemaElem *e) {
    int16_t last = 0, id;
    int ty;
    while (thrift_field(t, &last, &id, &ty)) {
        if (ty != TC_STRUCT) { thrift_skip(t, ty); continue; }
        e->logical_type = id;
        if (id != LT_INTEGER) { thrift_skip(t, ty); continue; }
        int16_t l2 = 0, f;
        int t2;
        while (thrift_field(t, &l2, &f, &t2)) {
            if (f == 1 && t2 == TC_BYTE) e->int_bits = thrift_byte(t);
            else if (f == 2 && (t2 == TC_TRUE || t2 == TC_FALSE)) e->int_signed = thrift_bool(t, t2);
            else thrift_skip(t, t2);
        }
    }
}

int pq_parse_schema_elem(ThriftReader *t, PqSchemaElem *e) {
    memset(e, 0, sizeof *e);
    e->type = e->repetition = e->num_children = e->type_length = e->converted_type = e->logical_type = -1;
    int16_t last = 0, id;
    int ty;
    while (thrift_field(t, &last, &id, &ty)) {
        if (id == 1 && ty == TC_I32) e->type = thrift_i32(t);
        else if (id == 2 && ty == TC_I32) e->type_length = thrift_i32(t);
        else if (id == 3 && ty == TC_I32) e->repetition = thrift_i32(t);
        else if (id == 4 && ty == TC_BINARY) e->name = thrift_binary(t, &e->name_len);
        else if (id == 5 && ty == TC_I32) e->num_children = thrift_i32(t);
        else if (id == 6 && ty == TC_I32) e->converted_type = thrift_i32(t);
        else if (id == 10 && ty == TC_STRUCT) parse_logical_type(t, e);
        else thrift_skip(t, ty);
    }
    if (!t->status && e->num_children < -1) thrift_fail(t, TC_CORRUPT, "negative num_children in schema");
    return t->status ? -1 : 0;
}

void pq_parse_page_header(ThriftReader *t, PqPageHeader *h) {
    memset(h, 0, sizeof *h);
    h->type = h->uncompressed_size = h->compressed_size = -1;
    h->is_compressed = 1;
    int16_t last = 0, id;
    int ty;
    while (thrift_field(t, &last, &id, &ty)) {
        if (id == 1 && ty == TC_I32) h->type = thrift_i32(t);
        else if (id == 2 && ty == TC_I32) h->uncompressed_size = thrift_i32(t);
        else if (id == 3 && ty == TC_I32) h->compressed_size = thrift_i32(t);
        else if ((id == 5 || id == 7 || id == 8) && ty == TC_STRUCT) {
            int16_t l2 = 0, f;
            int t2;
            if (id == 5) h->has_v1 = 1;
            if (id == 7) h->has_dict = 1;
            if (id == 8) h->has_v2 = 1;
            while (thrift_field(t, &l2, &f, &t2)) {
                if (f == 1 && t2 == TC_I32) h->num_values = thrift_i32(t);
                else if (id == 5 && f == 2 && t2 == TC_I32) h->encoding = thrift_i32(t);
                else if (id == 5 && f == 3 && t2 == TC_I32) h->def_encoding = thrift_i32(t);
                else if (id == 5 && f == 4 && t2 == TC_I32) h->rep_encoding = thrift_i32(t);
                else if (id == 7 && f == 2 && t2 == TC_I32) h->encoding = thrift_i32(t);
                else if (id == 8 && f == 2 && t2 == TC_I32) h->num_nulls = thrift_i32(t);
                else if (id == 8 && f == 3 && t2 == TC_I32) h->num_rows = thrift_i32(t);
                else if (id == 8 && f == 4 && t2 == TC_I32) h->encoding = thrift_i32(t);
                else if (id == 8 && f == 5 && t2 == TC_I32) h->def_len = thrift_i32(t);
                else if (id == 8 && f == 6 && t2 == TC_I32) h->rep_len = thrift_i32(t);
                else if (id == 8 && f == 7 && (t2 == TC_TRUE || t2 == TC_FALSE)) h->is_compressed = thrift_bool(t, t2);
                else thrift_skip(t, t2);
            }
        } else thrift_skip(t, ty);
    }
}
