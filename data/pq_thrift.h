// pq_thrift.h: a reader for the Thrift compact protocol, just enough for Parquet's footer and page headers.
// Written from the protocol description: field headers carry a 4-bit id delta and a 4-bit type, integers are
// zigzag varints, binaries and lists are length-prefixed. Every read is bounded by the bytes left: the first
// failure sets `status` and a message, and every later read returns zero without moving, so a caller may parse
// a whole struct and check the status once at the end.
#pragma once
#include <stddef.h>
#include <stdint.h>

// Compact-protocol type codes (the low nibble of a field header; the element type of a list).
enum {
    TC_STOP = 0, TC_TRUE = 1, TC_FALSE = 2, TC_BYTE = 3, TC_I16 = 4, TC_I32 = 5, TC_I64 = 6,
    TC_DOUBLE = 7, TC_BINARY = 8, TC_LIST = 9, TC_SET = 10, TC_MAP = 11, TC_STRUCT = 12,
};
enum { TC_OK = 0, TC_TRUNCATED = 1, TC_CORRUPT = 2 };

typedef struct {
    const uint8_t *start, *p, *end;
    int status;     // TC_OK, or why the first failing read failed
    size_t err_pos; // offset (from start) where it failed
    char what[96];  // e.g. "varint longer than 10 bytes"
} ThriftReader;

void thrift_init(ThriftReader *t, const void *p, size_t n);
static inline size_t thrift_pos(const ThriftReader *t) { return (size_t)(t->p - t->start); }
static inline size_t thrift_left(const ThriftReader *t) { return (size_t)(t->end - t->p); }

// Next field of the struct being read. *last_id is the previous field id of this struct (start at 0).
// Returns 1 with *id/*type set, 0 at the struct's end (stop byte) or on error.
int thrift_field(ThriftReader *t, int16_t *last_id, int16_t *id, int *type);
// Field values. A boolean field's value is its type code (TC_TRUE/TC_FALSE); thrift_bool takes that type.
int thrift_bool(ThriftReader *t, int type);
int64_t thrift_i64(ThriftReader *t);   // zigzag varint (i16, i32 and i64 share the encoding)
int32_t thrift_i32(ThriftReader *t);   // as thrift_i64, checked to fit 32 bits
int8_t thrift_byte(ThriftReader *t);   // a byte is stored raw, not as a varint
const uint8_t *thrift_binary(ThriftReader *t, size_t *len); // points into the buffer
// List/set header: element type and count; the count is checked against the bytes left (each element
// takes at least one byte), so callers may allocate `count` entries safely.
int thrift_list(ThriftReader *t, int *elem_type, int64_t *count);
// Skips one value of the given type, nested structs/lists/maps included (nesting depth is bounded).
void thrift_skip(ThriftReader *t, int type);
// Marks the reader failed with a message (for callers that find a field of the wrong type, say).
void thrift_fail(ThriftReader *t, int status, const char *what);
const char *thrift_type_name(int type);
