// common.h: the few helpers every part of gdn.c uses.
// Errors: die() prints one line "gdn: <message>" and exits 1. Library-style code that may fail on
// user input reports through a char err[ERR_LEN] buffer and returns -1/NULL instead, so the caller
// can add context (file, key, iteration) before dying.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define ERR_LEN 512

#ifdef __cplusplus
extern "C" {
#endif

__attribute__((noreturn, format(printf, 1, 2))) void die(const char *fmt, ...);
void die_set_prefix(const char *prefix);
// A 64-bit hash of n bytes (a fingerprint for comparing copies, not cryptographic).
uint64_t hash_bytes(const void *p, size_t n); // default "gdn: "; data-parallel ranks name themselves
__attribute__((format(printf, 3, 4))) int set_err(char *err, size_t n, const char *fmt, ...); // returns -1

void *xmalloc(size_t n);            // dies with the size on failure
void *xcalloc(size_t n, size_t sz);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
FILE *xfopen(const char *path, const char *mode); // dies naming the path and errno text

// Maps a whole regular file read-only (private); a zero-length file maps to NULL with *size 0. Returns -1
// and fills err (open, stat, not a regular file, mmap) on failure. Release with munmap(map, size).
int map_file_ro(const char *path, const uint8_t **map, size_t *size, char *err, size_t errlen);
// Reads a whole file; returns NULL and fills err on failure. *len gets the size (a NUL is appended).
char *read_file(const char *path, size_t *len, char *err, size_t errlen);

// Atomic file writing: write to "<path>.tmp.<pid>", fsync, rename over path, fsync the directory.
typedef struct {
    FILE *f;
    char *path, *tmp;
} AtomicFile;
int atomic_open(AtomicFile *af, const char *path, char *err, size_t errlen);
int atomic_write(AtomicFile *af, const void *p, size_t n); // 0 ok, -1 on I/O error
int atomic_commit(AtomicFile *af, char *err, size_t errlen); // fsync + rename; frees af
void atomic_abort(AtomicFile *af);                          // removes the temp file; frees af
int write_file_atomic(const char *path, const void *p, size_t n, char *err, size_t errlen);
int mkdir_p(const char *path); // 0 ok
int file_exists(const char *path);

double now_sec(void); // monotonic clock in seconds

// Growable byte buffer; b.p is NUL-terminated after any put (the NUL is not counted in n).
typedef struct {
    char *p;
    size_t n, cap;
} Buf;
void buf_put(Buf *b, const void *p, size_t n);
void buf_puts(Buf *b, const char *s);
__attribute__((format(printf, 2, 3))) void buf_printf(Buf *b, const char *fmt, ...);
void buf_free(Buf *b);

// Command-line helpers shared by the subcommands.
int arg_is_help(int argc, char **argv); // any of -h / --help
// Finds "--name value" or "--name=value"; returns the value or NULL. Used for simple subcommands.
const char *arg_get(int argc, char **argv, const char *name);
int arg_flag(int argc, char **argv, const char *name); // "--name" present

// Bit-exact float <-> bf16 (round to nearest even, NaN kept quiet).
static inline uint16_t f32_to_bf16(float f) {
    union { float f; uint32_t u; } v = {f};
    if ((v.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((v.u >> 16) | 0x40);
    return (uint16_t)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);
}
static inline float bf16_to_f32(uint16_t h) {
    union { uint32_t u; float f; } v = {(uint32_t)h << 16};
    return v.f;
}
// TransformerEngine's store_param_remainders split of an fp32 master (its FusedAdam): the bf16 weight is the high
// 16 bits, plus one when the low half's top bit is set (rounded half up in magnitude; round-to-nearest-even differs
// only at exact ties); the low 16 bits are the remainder. f32_join_remainder undoes the split exactly.
static inline uint16_t f32_split_remainder(float f, uint16_t *rem) {
    union { float f; uint32_t u; } v = {f};
    *rem = (uint16_t)(v.u & 0xffffu);
    return (uint16_t)((v.u >> 16) + ((v.u >> 15) & 1u));
}
static inline float f32_join_remainder(uint16_t hi, uint16_t rem) {
    union { uint32_t u; float f; } v = {((uint32_t)(uint16_t)(hi - (rem >> 15)) << 16) | rem};
    return v.f;
}
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

#ifdef __cplusplus
}
#endif
