// pq_thrift.c: Thrift compact protocol reader (see pq_thrift.h).
#include "data/pq_thrift.h"

#include <stdio.h>
#include <string.h>

// Deeper nesting than this is never produced by Parquet writers; it bounds the recursion in thrift_skip.
#define THRIFT_MAX_DEPTH 32

void thrift_init(ThriftReader *t, const void *p, size_t n) {
    memset(t, 0, sizeof *t);
    t->start = t->p = p;
    t->end = t->p + n;
}

void thrift_fail(ThriftReader *t, int status, const char *what) {
    if (t->status) return; // keep the first failure: it is the cause
    t->status = status;
    t->err_pos = thrift_pos(t);
    snprintf(t->what, sizeof t->what, "%s", what);
}

const char *thrift_type_name(int type) {
    static const char *names[] = {"stop", "bool", "bool", "byte", "i16", "i32", "i64",
                                  "double", "binary", "list", "set", "map", "struct"};
    return type >= 0 && type <= TC_STRUCT ? names[type] : "unknown";
}

static int read_byte(ThriftReader *t, uint8_t *b) {
    if (t->status) return 0;
    if (t->p >= t->end) { thrift_fail(t, TC_TRUNCATED, "truncated"); return 0; }
    *b = *t->p++;
    return 1;
}

static uint64_t read_varint(ThriftReader *t) {
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        uint8_t b;
        if (!read_byte(t, &b)) return 0;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    thrift_fail(t, TC_CORRUPT, "varint longer than 10 bytes");
    return 0;
}

int64_t thrift_i64(ThriftReader *t) {
    uint64_t u = read_varint(t);
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

int32_t thrift_i32(ThriftReader *t) {
    int64_t v = thrift_i64(t);
    if (v < INT32_MIN || v > INT32_MAX) { thrift_fail(t, TC_CORRUPT, "i32 value out of range"); return 0; }
    return (int32_t)v;
}

int8_t thrift_byte(ThriftReader *t) {
    uint8_t b = 0;
    read_byte(t, &b);
    return (int8_t)b;
}

int thrift_bool(ThriftReader *t, int type) {
    if (type != TC_TRUE && type != TC_FALSE) thrift_fail(t, TC_CORRUPT, "expected a bool field");
    return type == TC_TRUE;
}

const uint8_t *thrift_binary(ThriftReader *t, size_t *len) {
    uint64_t n = read_varint(t);
    *len = 0;
    if (t->status) return NULL;
    if (n > thrift_left(t)) { thrift_fail(t, TC_TRUNCATED, "truncated (binary longer than the bytes left)"); return NULL; }
    const uint8_t *p = t->p;
    t->p += n;
    *len = (size_t)n;
    return p;
}

int thrift_field(ThriftReader *t, int16_t *last_id, int16_t *id, int *type) {
    uint8_t b;
    if (!read_byte(t, &b)) return 0;
    if (b == TC_STOP) return 0;
    int ty = b & 0x0f, delta = b >> 4;
    if (ty > TC_STRUCT) {
        t->p--; // report the offset of the field header itself
        thrift_fail(t, TC_CORRUPT, "unknown field type code");
        return 0;
    }
    int64_t fid = delta ? *last_id + delta : thrift_i64(t);
    if (t->status) return 0;
    if (fid < INT16_MIN || fid > INT16_MAX) { thrift_fail(t, TC_CORRUPT, "field id out of range"); return 0; }
    *last_id = *id = (int16_t)fid;
    *type = ty;
    return 1;
}

int thrift_list(ThriftReader *t, int *elem_type, int64_t *count) {
    uint8_t b;
    *elem_type = 0;
    *count = 0;
    if (!read_byte(t, &b)) return 0;
    uint64_t n = b >> 4;
    if (n == 15) n = read_varint(t);
    if (t->status) return 0;
    int ty = b & 0x0f;
    if (ty == TC_STOP || ty > TC_STRUCT) { thrift_fail(t, TC_CORRUPT, "unknown list element type"); return 0; }
    if (n > thrift_left(t)) { thrift_fail(t, TC_TRUNCATED, "truncated (list longer than the bytes left)"); return 0; }
    *elem_type = ty;
    *count = (int64_t)n;
    return 1;
}

// in_container: list/set/map elements encode booleans as one byte, struct fields in the type nibble.
static void skip_value(ThriftReader *t, int type, int depth, int in_container) {
    if (t->status) return;
    if (depth > THRIFT_MAX_DEPTH) { thrift_fail(t, TC_CORRUPT, "nesting deeper than 32 levels"); return; }
    uint8_t b;
    switch (type) {
    case TC_TRUE: case TC_FALSE:
        if (in_container) read_byte(t, &b);
        return;
    case TC_BYTE: read_byte(t, &b); return;
    case TC_I16: case TC_I32: case TC_I64: read_varint(t); return;
    case TC_DOUBLE:
        if (thrift_left(t) < 8) thrift_fail(t, TC_TRUNCATED, "truncated");
        else t->p += 8;
        return;
    case TC_BINARY: { size_t n; thrift_binary(t, &n); return; }
    case TC_LIST: case TC_SET: {
        int et; int64_t n;
        if (!thrift_list(t, &et, &n)) return;
        for (int64_t i = 0; i < n && !t->status; i++) skip_value(t, et, depth + 1, 1);
        return;
    }
    case TC_MAP: {
        uint64_t n = read_varint(t);
        if (t->status || n == 0) return;
        if (n > thrift_left(t) / 2) { thrift_fail(t, TC_TRUNCATED, "truncated (map longer than the bytes left)"); return; }
        if (!read_byte(t, &b)) return;
        int kt = b >> 4, vt = b & 0x0f;
        if (kt == TC_STOP || kt > TC_STRUCT || vt == TC_STOP || vt > TC_STRUCT) {
            thrift_fail(t, TC_CORRUPT, "unknown map key/value type");
            return;
        }
        for (uint64_t i = 0; i < n && !t->status; i++) {
            skip_value(t, kt, depth + 1, 1);
            skip_value(t, vt, depth + 1, 1);
        }
        return;
    }
    case TC_STRUCT: {
        int16_t last = 0, id;
        int ft;
        while (thrift_field(t, &last, &id, &ft)) skip_value(t, ft, depth + 1, 0);
        return;
    }
    default: thrift_fail(t, TC_CORRUPT, "unknown type code"); return;
    }
}

void thrift_skip(ThriftReader *t, int type) { skip_value(t, type, 0, 0); }
