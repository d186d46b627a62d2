// common.c: error reporting, checked allocation and file helpers, atomic writes.
#define _GNU_SOURCE
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char g_die_prefix[64] = "gdn: ";
void die_set_prefix(const char *prefix) { snprintf(g_die_prefix, sizeof g_die_prefix, "%s", prefix); }

void die(const char *fmt, ...) {
    va_list ap;
    fflush(stdout);
    fputs(g_die_prefix, stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

int set_err(char *err, size_t n, const char *fmt, ...) {
    if (err && n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) die("out of memory allocating %zu bytes", n);
    return p;
}
void *xcalloc(size_t n, size_t sz) {
    void *p = calloc(n ? n : 1, sz ? sz : 1);
    if (!p) die("out of memory allocating %zu x %zu bytes", n, sz);
    return p;
}
void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) die("out of memory reallocating to %zu bytes", n);
    return q;
}
char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    return memcpy(xmalloc(n), s, n);
}
FILE *xfopen(const char *path, const char *mode) {
    FILE *f = fopen(path, mode);
    if (!f) die("cannot open %s: %s", path, strerror(errno));
    return f;
}

int map_file_ro(const char *path, const uint8_t **map, size_t *size, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return set_err(err, errlen, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        set_err(err, errlen, "cannot stat %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        set_err(err, errlen, "%s is not a regular file", path);
        close(fd);
        return -1;
    }
    *size = (size_t)st.st_size;
    *map = NULL;
    if (*size > 0) {
        void *p = mmap(NULL, *size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            set_err(err, errlen, "cannot mmap %s (%zu bytes): %s", path, *size, strerror(errno));
            close(fd);
            return -1;
        }
        *map = p;
    }
    close(fd);
    return 0;
}

char *read_file(const char *path, size_t *len, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) { set_err(err, errlen, "cannot open %s: %s", path, strerror(errno)); return NULL; }
    Buf b = {0};
    char tmp[1 << 16];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0) buf_put(&b, tmp, n);
    int bad = ferror(f);
    fclose(f);
    if (bad) { free(b.p); set_err(err, errlen, "error reading %s", path); return NULL; }
    buf_put(&b, "", 1);
    if (len) *len = b.n - 1;
    return b.p;
}

int atomic_open(AtomicFile *af, const char *path, char *err, size_t errlen) {
    af->path = xstrdup(path);
    size_t n = strlen(path) + 32;
    af->tmp = xmalloc(n);
    snprintf(af->tmp, n, "%s.tmp.%d", path, (int)getpid());
    af->f = fopen(af->tmp, "wb");
    if (!af->f) {
        set_err(err, errlen, "cannot create %s: %s", af->tmp, strerror(errno));
        free(af->path); free(af->tmp);
        return -1;
    }
    return 0;
}
int atomic_write(AtomicFile *af, const void *p, size_t n) {
    return fwrite(p, 1, n, af->f) == n ? 0 : -1;
}
static void fsync_dir_of(const char *path) {
    char *d = xstrdup(path);
    int fd = open(dirname(d), O_RDONLY);
    if (fd >= 0) { fsync(fd); close(fd); }
    free(d);
}
int atomic_commit(AtomicFile *af, char *err, size_t errlen) {
    int rc = 0;
    if (fflush(af->f) != 0 || fsync(fileno(af->f)) != 0 || ferror(af->f)) {
        rc = set_err(err, errlen, "error writing %s: %s", af->tmp, strerror(errno));
    }
    if (fclose(af->f) != 0 && rc == 0) rc = set_err(err, errlen, "error closing %s: %s", af->tmp, strerror(errno));
    if (rc == 0 && rename(af->tmp, af->path) != 0)
        rc = set_err(err, errlen, "cannot rename %s to %s: %s", af->tmp, af->path, strerror(errno));
    if (rc != 0) unlink(af->tmp);
    else fsync_dir_of(af->path);
    free(af->path); free(af->tmp);
    return rc;
}
void atomic_abort(AtomicFile *af) {
    fclose(af->f);
    unlink(af->tmp);
    free(af->path); free(af->tmp);
}
int write_file_atomic(const char *path, const void *p, size_t n, char *err, size_t errlen) {
    AtomicFile af;
    if (atomic_open(&af, path, err, errlen)) return -1;
    if (atomic_write(&af, p, n)) {
        set_err(err, errlen, "error writing %s: %s", af.tmp, strerror(errno));
        atomic_abort(&af);
        return -1;
    }
    return atomic_commit(&af, err, errlen);
}

int mkdir_p(const char *path) {
    char *p = xstrdup(path);
    for (char *s = p + 1; *s; s++) {
        if (*s == '/') {
            *s = 0;
            if (mkdir(p, 0755) != 0 && errno != EEXIST) { free(p); return -1; }
            *s = '/';
        }
    }
    int rc = (mkdir(p, 0755) != 0 && errno != EEXIST) ? -1 : 0;
    free(p);
    return rc;
}
int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

double now_sec(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// The contents are always followed by a NUL (not counted in n), so b.p is a C string for text.
void buf_put(Buf *b, const void *p, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->n + n + 1) c *= 2;
        b->p = xrealloc(b->p, c);
        b->cap = c;
    }
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = 0;
}
void buf_puts(Buf *b, const char *s) { buf_put(b, s, strlen(s)); }
void buf_printf(Buf *b, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *tmp = xmalloc((size_t)n + 1);
    vsnprintf(tmp, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    buf_put(b, tmp, (size_t)n);
    free(tmp);
}
void buf_free(Buf *b) { free(b->p); b->p = NULL; b->n = b->cap = 0; }

int arg_is_help(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return 1;
    return 0;
}
const char *arg_get(int argc, char **argv, const char *name) {
    size_t n = strlen(name);
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], name, n) != 0) continue;
        if (argv[i][n] == '=') return argv[i] + n + 1;
        if (argv[i][n] == 0) {
            if (i + 1 >= argc) die("%s needs a value", name);
            return argv[i + 1];
        }
    }
    return NULL;
}
int arg_flag(int argc, char **argv, const char *name) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], name)) return 1;
    return 0;
}

float f16_to_f32(uint16_t h) {
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023, u;
    if (e == 0) {
        if (m == 0) u = s;
        else { // subnormal: normalise
            e = 113;
            while (!(m & 1024)) { m <<= 1; e--; }
            m &= 1023;
            u = s | (e << 23) | (m << 13);
        }
    } else if (e == 31) u = s | 0x7f800000u | (m << 13);
    else u = s | ((e + 112) << 23) | (m << 13);
    union { uint32_t u; float f; } v = {u};
    return v.f;
}
uint16_t f32_to_f16(float f) {
    union { float f; uint32_t u; } v = {f};
    uint32_t u = v.u, s = (u >> 16) & 0x8000u;
    int32_t e = (int32_t)((u >> 23) & 255) - 127 + 15;
    uint32_t m = u & 0x7fffffu;
    if (((u >> 23) & 255) == 255) return (uint16_t)(s | 0x7c00u | (m ? 0x200u : 0));
    if (e >= 31) return (uint16_t)(s | 0x7c00u);
    if (e <= 0) {
        if (e < -10) return (uint16_t)s;
        m |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e), r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(s | r);
    }
    uint32_t r = (uint32_t)(e << 10) | (m >> 13), rem = m & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1))) r++;
    return (uint16_t)(s | r);
}

uint64_t hash_bytes(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n, w;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    for (; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}
