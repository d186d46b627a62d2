// torch_pickle.c: zip archive reader/writer and a pickle virtual machine, enough for torch.save files
// (see torch_pickle.h). Every length and offset read from the file is checked against the mapping.
#define _GNU_SOURCE
#include "torch_pickle.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "../util/common.h"

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

// =====================================================================================================
// zip reader

void zip_close(ZipFile *z) {
    if (!z) return;
    for (int i = 0; i < z->n; i++) free(z->e[i].name);
    free(z->e);
    free(z->path);
    if (z->map && z->size) munmap(z->map, z->size);
    memset(z, 0, sizeof *z);
}

// Reads the zip64 extended-information extra field for the fields the fixed header left at 0xFFFFFFFF.
static int zip64_extra(const uint8_t *x, size_t xlen, uint64_t *usize, uint64_t *csize, uint64_t *lho) {
    size_t i = 0;
    while (i + 4 <= xlen) {
        uint16_t id = rd16(x + i), len = rd16(x + i + 2);
        if (i + 4 + len > xlen) return -1;
        if (id == 0x0001) {
            const uint8_t *f = x + i + 4;
            size_t k = 0;
            uint64_t *want[3] = {usize, csize, lho};
            for (int j = 0; j < 3; j++) {
                if (*want[j] != 0xFFFFFFFFu) continue;
                if (k + 8 > len) return -1;
                *want[j] = rd64(f + k);
                k += 8;
            }
            return 0;
        }
        i += 4 + (size_t)len;
    }
    return (*usize == 0xFFFFFFFFu || *csize == 0xFFFFFFFFu || *lho == 0xFFFFFFFFu) ? -1 : 0;
}

int zip_open(ZipFile *z, const char *path, char *err, size_t errlen) {
    memset(z, 0, sizeof *z);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return set_err(err, errlen, "cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return set_err(err, errlen, "%s is not a regular file", path);
    }
    size_t size = (size_t)sb.st_size;
    if (size < 22) {
        close(fd);
        return set_err(err, errlen, "%s: %zu bytes is too short for a zip archive (truncated?)", path, size);
    }
    void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return set_err(err, errlen, "cannot map %s: %s", path, strerror(errno));
    z->map = m;
    z->size = size;
    z->path = xstrdup(path);
    const uint8_t *b = z->map;

    // End of central directory: the last 22 bytes unless there is an archive comment (up to 64 KB).
    size_t eocd = (size_t)-1;
    size_t lo = size > 22 + 65535 ? size - 22 - 65535 : 0;
    for (size_t i = size - 22 + 1; i-- > lo;)
        if (rd32(b + i) == 0x06054b50u && i + 22 + rd16(b + i + 20) == size) {
            eocd = i;
            break;
        }
    if (eocd == (size_t)-1) {
        if (size >= 2 && b[0] == 0x80 && b[1] <= 5)
            set_err(err, errlen,
                    "%s: a bare pickle (legacy torch.save format), not a zip archive; re-save with torch >= 1.6", path);
        else
            set_err(err, errlen, "%s: no zip end-of-central-directory record (not a torch.save file, or truncated)",
                    path);
        zip_close(z);
        return -1;
    }
    uint64_t count = rd16(b + eocd + 10), cd_size = rd32(b + eocd + 12), cd_off = rd32(b + eocd + 16);
    if (eocd >= 20 && rd32(b + eocd - 20) == 0x07064b50u) { // zip64 locator precedes the EOCD
        uint64_t z64 = rd64(b + eocd - 20 + 8);
        if (z64 > size - 56 || rd32(b + z64) != 0x06064b50u) {
            set_err(err, errlen, "%s: bad zip64 end-of-central-directory record", path);
            zip_close(z);
            return -1;
        }
        count = rd64(b + z64 + 32);
        cd_size = rd64(b + z64 + 40);
        cd_off = rd64(b + z64 + 48);
    }
    if (cd_off > size || cd_size > size - cd_off || count > cd_size / 46) {
        set_err(err, errlen,
                "%s: central directory (offset %llu, %llu bytes, %llu entries) outside the file (truncated?)", path,
                (unsigned long long)cd_off, (unsigned long long)cd_size, (unsigned long long)count);
        zip_close(z);
        return -1;
    }
    z->e = xcalloc(count ? (size_t)count : 1, sizeof(ZipEntry));
    size_t p = (size_t)cd_off, end = (size_t)(cd_off + cd_size);
    for (uint64_t k = 0; k < count; k++) {
        if (p + 46 > end || rd32(b + p) != 0x02014b50u) {
            set_err(err, errlen, "%s: corrupt central directory entry %llu at byte %zu", path, (unsigned long long)k,
                    p);
            zip_close(z);
            return -1;
        }
        uint16_t flags = rd16(b + p + 8), method = rd16(b + p + 10);
        uint32_t crc = rd32(b + p + 16);
        uint64_t csize = rd32(b + p + 20), usize = rd32(b + p + 24), lho = rd32(b + p + 42);
        size_t nlen = rd16(b + p + 28), xlen = rd16(b + p + 30), clen = rd16(b + p + 32);
        if (p + 46 + nlen + xlen + clen > end) {
            set_err(err, errlen, "%s: central directory entry %llu runs past the directory", path,
                    (unsigned long long)k);
            zip_close(z);
            return -1;
        }
        ZipEntry *e = &z->e[z->n++];
        e->name = xmalloc(nlen + 1);
        memcpy(e->name, b + p + 46, nlen);
        e->name[nlen] = 0;
        if (zip64_extra(b + p + 46 + nlen, xlen, &usize, &csize, &lho)) {
            set_err(err, errlen, "%s: entry '%s': bad zip64 extra field", path, e->name);
            zip_close(z);
            return -1;
        }
        if (flags & 1) {
            set_err(err, errlen, "%s: entry '%s' is encrypted", path, e->name);
            zip_close(z);
            return -1;
        }
        if (method != 0 && method != 8) {
            set_err(err, errlen, "%s: entry '%s' uses compression method %u (only stored and deflate are supported)",
                    path, e->name, method);
            zip_close(z);
            return -1;
        }
        if (lho > size - 30 || rd32(b + lho) != 0x04034b50u) {
            set_err(err, errlen, "%s: entry '%s': local header at byte %llu missing (truncated?)", path, e->name,
                    (unsigned long long)lho);
            zip_close(z);
            return -1;
        }
        uint64_t data = lho + 30 + rd16(b + lho + 26) + rd16(b + lho + 28);
        if (data > size || csize > size - data) {
            set_err(err, errlen,
                    "%s: entry '%s': %llu bytes at byte %llu run past the end of the file (%zu bytes; truncated?)",
                    path, e->name, (unsigned long long)csize, (unsigned long long)data, size);
            zip_close(z);
            return -1;
        }
        if (method == 0 && csize != usize) {
            set_err(err, errlen, "%s: stored entry '%s' has different compressed and uncompressed sizes", path,
                    e->name);
            zip_close(z);
            return -1;
        }
        e->data_off = data;
        e->csize = csize;
        e->usize = usize;
        e->crc = crc;
        e->method = method;
        p += 46 + nlen + xlen + clen;
    }
    return 0;
}

const ZipEntry *zip_find(const ZipFile *z, const char *name) {
    for (int i = 0; i < z->n; i++)
        if (!strcmp(z->e[i].name, name)) return &z->e[i];
    return NULL;
}

int zip_data(ZipFile *z, const ZipEntry *ce, const uint8_t **data, int *owned, char *err, size_t errlen) {
    ZipEntry *e = (ZipEntry *)ce;
    *owned = 0;
    *data = NULL;
    if (e->method == 0) {
        *data = z->map + e->data_off;
    } else {
        if (e->usize / 1032 > e->csize + 64) // deflate cannot expand more than ~1032:1
            return set_err(err, errlen, "%s: entry '%s' claims %llu bytes from %llu compressed (corrupt)", z->path,
                           e->name, (unsigned long long)e->usize, (unsigned long long)e->csize);
        uint8_t *out = xmalloc((size_t)e->usize);
        z_stream s;
        memset(&s, 0, sizeof s);
        if (inflateInit2(&s, -15) != Z_OK) {
            free(out);
            return set_err(err, errlen, "zlib init failed");
        }
        uint64_t in_left = e->csize, out_done = 0;
        const uint8_t *in = z->map + e->data_off;
        int zr = Z_OK;
        while (zr == Z_OK) { // chunked: z_stream counts are 32-bit
            if (!s.avail_in && in_left) {
                s.next_in = (uint8_t *)in;
                s.avail_in = (uInt)(in_left < (1u << 30) ? in_left : (1u << 30));
                in += s.avail_in;
                in_left -= s.avail_in;
            }
            if (!s.avail_out) {
                uint64_t left = e->usize - out_done;
                s.next_out = out + out_done;
                s.avail_out = (uInt)(left < (1u << 30) ? left : (1u << 30));
                out_done += s.avail_out;
                if (!s.avail_out) {
                    zr = Z_BUF_ERROR;
                    break;
                }
            }
            zr = inflate(&s, Z_NO_FLUSH);
        }
        uint64_t total = s.total_out;
        inflateEnd(&s);
        if (zr != Z_STREAM_END || total != e->usize) {
            free(out);
            return set_err(err, errlen, "%s: entry '%s': corrupt deflate data", z->path, e->name);
        }
        *data = out;
        *owned = 1;
    }
    if (!e->crc_checked) {
        uLong c = crc32(0L, Z_NULL, 0);
        for (uint64_t i = 0; i < e->usize; i += 1u << 30) {
            uint64_t m = e->usize - i < (1u << 30) ? e->usize - i : (1u << 30);
            c = crc32(c, *data + i, (uInt)m);
        }
        if ((uint32_t)c != e->crc) {
            if (*owned) free((void *)*data);
            *data = NULL;
            return set_err(err, errlen, "%s: entry '%s': CRC mismatch (file corrupt)", z->path, e->name);
        }
        e->crc_checked = 1;
    }
    return 0;
}

// =====================================================================================================
// pickle values

struct PyArena {
    PyVal **v;
    size_t n, cap;
};

static PyVal *pv_new(PyArena *a, PyKind k) {
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 1024;
        a->v = xrealloc(a->v, a->cap * sizeof *a->v);
    }
    PyVal *v = xcalloc(1, sizeof *v);
    v->kind = k;
    a->v[a->n++] = v;
    return v;
}

void py_arena_free(PyArena *a) {
    if (!a) return;
    for (size_t i = 0; i < a->n; i++) {
        PyVal *v = a->v[i];
        free(v->s);
        free(v->s2);
        free(v->key);
        free(v->items);
        free(v);
    }
    free(a->v);
    free(a);
}

static void pv_push_item(PyVal *c, PyVal *x) {
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 8;
        c->items = xrealloc(c->items, (size_t)c->cap * sizeof *c->items);
    }
    c->items[c->n++] = x;
}

static char *mem_dup(const void *p, size_t n) {
    char *s = xmalloc(n + 1);
    memcpy(s, p, n);
    s[n] = 0;
    return s;
}

const char *py_kind_name(PyKind k) {
    static const char *names[] = {"None", "bool", "int", "float",  "str",    "bytes",   "tuple",
                                  "list", "dict", "set", "global", "object", "storage", "tensor"};
    return (unsigned)k < sizeof names / sizeof *names ? names[k] : "?";
}

const PyVal *py_dict_get(const PyVal *d, const char *key) {
    if (!d || (d->kind != PY_DICT && d->kind != PY_OBJ)) return NULL;
    for (int i = (d->n & ~1) - 2; i >= 0; i -= 2)
        if (d->items[i]->kind == PY_STR && !strcmp(d->items[i]->s, key)) return d->items[i + 1];
    return NULL;
}
int py_dict_len(const PyVal *d) { return d && d->kind == PY_DICT ? d->n / 2 : 0; }

static const struct {
    const char *storage;
    const char *name;
    size_t size;
} dtype_info[] = {
    [TD_F32] = {"FloatStorage", "float32", 4}, [TD_F64] = {"DoubleStorage", "float64", 8},
    [TD_F16] = {"HalfStorage", "float16", 2},  [TD_BF16] = {"BFloat16Storage", "bfloat16", 2},
    [TD_I64] = {"LongStorage", "int64", 8},    [TD_I32] = {"IntStorage", "int32", 4},
    [TD_I16] = {"ShortStorage", "int16", 2},   [TD_I8] = {"CharStorage", "int8", 1},
    [TD_U8] = {"ByteStorage", "uint8", 1},     [TD_BOOL] = {"BoolStorage", "bool", 1},
};
const char *torch_dtype_name(TorchDtype t) { return (unsigned)t <= TD_BOOL ? dtype_info[t].name : "?"; }
size_t torch_dtype_size(TorchDtype t) { return (unsigned)t <= TD_BOOL ? dtype_info[t].size : 0; }

uint64_t torch_tensor_numel(const PyVal *t) { // saturates at UINT64_MAX (corrupt shapes)
    uint64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        if (__builtin_mul_overflow(n, (uint64_t)t->shape[i], &n)) return UINT64_MAX;
    return n;
}

// =====================================================================================================
// the pickle machine

typedef struct {
    const uint8_t *p;
    size_t n, pos, op_pos;
    PyArena *a;
    PyVal **st;
    size_t sp, scap;
    size_t *marks;
    size_t nmarks, mcap;
    PyVal **memo;
    size_t memo_cap, memo_count;
    char *err;
    size_t errlen;
} Vm;

#define VM_FAIL(vm, ...) (fail_at(vm, __VA_ARGS__), (PyVal *)NULL)
__attribute__((format(printf, 2, 3))) static int fail_at(Vm *vm, const char *fmt, ...) {
    char msg[ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return set_err(vm->err, vm->errlen, "pickle byte %zu (opcode 0x%02x): %s", vm->op_pos,
                   vm->op_pos < vm->n ? vm->p[vm->op_pos] : 0, msg);
}

static void vm_push(Vm *vm, PyVal *v) {
    if (vm->sp == vm->scap) {
        vm->scap = vm->scap ? 2 * vm->scap : 256;
        vm->st = xrealloc(vm->st, vm->scap * sizeof *vm->st);
    }
    vm->st[vm->sp++] = v;
}
static PyVal *vm_pop(Vm *vm) {
    size_t floor = vm->nmarks ? vm->marks[vm->nmarks - 1] : 0;
    if (vm->sp <= floor) return VM_FAIL(vm, "stack underflow");
    return vm->st[--vm->sp];
}
static PyVal *vm_top(Vm *vm) {
    size_t floor = vm->nmarks ? vm->marks[vm->nmarks - 1] : 0;
    if (vm->sp <= floor) return VM_FAIL(vm, "stack underflow");
    return vm->st[vm->sp - 1];
}
// Pops back to the last MARK; returns the index in the stack where the marked items start.
static int vm_pop_mark(Vm *vm, size_t *start) {
    if (!vm->nmarks) return fail_at(vm, "no MARK on the stack");
    *start = vm->marks[--vm->nmarks];
    return 0;
}
static const uint8_t *vm_take(Vm *vm, uint64_t n) {
    if (n > vm->n - vm->pos) {
        fail_at(vm, "truncated: needs %llu more bytes, %zu left", (unsigned long long)n, vm->n - vm->pos);
        return NULL;
    }
    const uint8_t *r = vm->p + vm->pos;
    vm->pos += (size_t)n;
    return r;
}
static char *vm_line(Vm *vm) { // text-protocol argument up to '\n'
    const uint8_t *s = vm->p + vm->pos, *nl = memchr(s, '\n', vm->n - vm->pos);
    if (!nl) {
        fail_at(vm, "unterminated text argument");
        return NULL;
    }
    vm->pos += (size_t)(nl - s) + 1;
    return mem_dup(s, (size_t)(nl - s));
}
static int memo_put(Vm *vm, uint64_t idx, PyVal *v) {
    if (!v) return -1;
    if (idx > vm->n)
        return fail_at(vm, "memo index %llu too large", (unsigned long long)idx); // > one per byte: corrupt
    if (idx >= vm->memo_cap) {
        size_t c = vm->memo_cap ? vm->memo_cap : 256;
        while (c <= idx) c *= 2;
        vm->memo = xrealloc(vm->memo, c * sizeof *vm->memo);
        memset(vm->memo + vm->memo_cap, 0, (c - vm->memo_cap) * sizeof *vm->memo);
        vm->memo_cap = c;
    }
    if (!vm->memo[idx]) vm->memo_count++;
    vm->memo[idx] = v;
    return 0;
}
static PyVal *memo_get(Vm *vm, uint64_t idx) {
    if (idx >= vm->memo_cap || !vm->memo[idx])
        return VM_FAIL(vm, "memo index %llu never stored", (unsigned long long)idx);
    return vm->memo[idx];
}

static PyVal *mk_int(Vm *vm, int64_t i) {
    PyVal *v = pv_new(vm->a, PY_INT);
    v->i = i;
    return v;
}
static PyVal *mk_str(Vm *vm, PyKind k, const void *p, size_t n) {
    PyVal *v = pv_new(vm->a, k);
    v->s = mem_dup(p, n);
    v->len = n;
    return v;
}
static PyVal *mk_seq(Vm *vm, PyKind k, size_t start) {
    PyVal *v = pv_new(vm->a, k);
    for (size_t i = start; i < vm->sp; i++) pv_push_item(v, vm->st[i]);
    vm->sp = start;
    return v;
}
// little-endian two's complement of n bytes (LONG1/LONG4)
static PyVal *mk_long(Vm *vm, const uint8_t *b, uint64_t n) {
    PyVal *v = pv_new(vm->a, PY_INT);
    uint64_t u = 0;
    for (uint64_t i = 0; i < n && i < 8; i++) u |= (uint64_t)b[i] << (8 * i);
    if (n && n < 8 && (b[n - 1] & 0x80)) u |= ~(uint64_t)0 << (8 * n);
    v->i = (int64_t)u;
    if (n > 8) { // fits in 64 bits only if the extra bytes are pure sign extension
        uint8_t ext = (b[7] & 0x80) ? 0xff : 0;
        for (uint64_t i = 8; i < n; i++) v->big |= b[i] != ext;
    }
    return v;
}

static int is_global(const PyVal *v, const char *mod, const char *name) {
    return v && v->kind == PY_GLOBAL && !strcmp(v->s, mod) && !strcmp(v->s2, name);
}
static int int_tuple(const PyVal *t, int64_t *out, int max, int *n) {
    if (!t || (t->kind != PY_TUPLE && t->kind != PY_LIST) || t->n > max) return -1;
    for (int i = 0; i < t->n; i++) {
        if (t->items[i]->kind != PY_INT || t->items[i]->big) return -1;
        out[i] = t->items[i]->i;
    }
    *n = t->n;
    return 0;
}

static PyVal *rebuild_tensor(Vm *vm, const PyVal *args) {
    if (!args || args->kind != PY_TUPLE || args->n < 4)
        return VM_FAIL(vm, "_rebuild_tensor_v2 with unexpected arguments");
    const PyVal *stor = args->items[0];
    if (stor->kind != PY_STORAGE)
        return VM_FAIL(vm, "_rebuild_tensor_v2: first argument is a %s, not a storage", py_kind_name(stor->kind));
    PyVal *t = pv_new(vm->a, PY_TENSOR);
    t->storage = (PyVal *)stor;
    t->dtype = stor->dtype;
    if (args->items[1]->kind != PY_INT || args->items[1]->i < 0)
        return VM_FAIL(vm, "_rebuild_tensor_v2: bad storage offset");
    t->offset = args->items[1]->i;
    int nd, ns;
    if (int_tuple(args->items[2], t->shape, 8, &nd) || int_tuple(args->items[3], t->stride, 8, &ns) || nd != ns)
        return VM_FAIL(vm, "_rebuild_tensor_v2: size/stride are not matching integer tuples of at most 8 dims");
    for (int i = 0; i < nd; i++)
        if (t->shape[i] < 0 || t->stride[i] < 0) return VM_FAIL(vm, "_rebuild_tensor_v2: negative size or stride");
    t->ndim = nd;
    return t;
}

static PyVal *do_call(Vm *vm, PyVal *fn, PyVal *args) {
    if (is_global(fn, "collections", "OrderedDict") || is_global(fn, "builtins", "dict") ||
        is_global(fn, "__builtin__", "dict")) {
        PyVal *d = pv_new(vm->a, PY_DICT);
        if (args && args->kind == PY_TUPLE && args->n == 1 &&
            args->items[0]->kind == PY_LIST) // OrderedDict([(k, v), ...])
            for (int i = 0; i < args->items[0]->n; i++) {
                PyVal *kv = args->items[0]->items[i];
                if ((kv->kind != PY_TUPLE && kv->kind != PY_LIST) || kv->n != 2)
                    return VM_FAIL(vm, "OrderedDict item is not a pair");
                pv_push_item(d, kv->items[0]);
                pv_push_item(d, kv->items[1]);
            }
        return d;
    }
    if (is_global(fn, "torch._utils", "_rebuild_tensor_v2") || is_global(fn, "torch._utils", "_rebuild_tensor"))
        return rebuild_tensor(vm, args);
    if (is_global(fn, "torch._utils", "_rebuild_parameter") ||
        is_global(fn, "torch._utils", "_rebuild_parameter_with_state")) {
        if (!args || args->kind != PY_TUPLE || args->n < 1) return VM_FAIL(vm, "_rebuild_parameter without arguments");
        return args->items[0];
    }
    if ((is_global(fn, "_codecs", "encode") || is_global(fn, "codecs", "encode")) && args && args->kind == PY_TUPLE &&
        args->n >= 1 && args->items[0]->kind == PY_STR) {
        // protocol 2 spells bytes b as _codecs.encode(b.decode('latin1'), 'latin1'): UTF-8 back to latin-1
        const PyVal *s = args->items[0];
        PyVal *b = pv_new(vm->a, PY_BYTES);
        b->s = xmalloc(s->len + 1);
        size_t k = 0;
        for (size_t i = 0; i < s->len; i++) {
            unsigned char c = (unsigned char)s->s[i];
            if (c < 0x80)
                b->s[k++] = (char)c;
            else if ((c & 0xe0) == 0xc0 && i + 1 < s->len) {
                b->s[k++] = (char)(((c & 0x1f) << 6) | (s->s[i + 1] & 0x3f));
                i++;
            } else
                b->s[k++] = '?'; // not latin-1: keep going, the content is informational only
        }
        b->s[k] = 0;
        b->len = k;
        return b;
    }
    if ((is_global(fn, "builtins", "bytes") || is_global(fn, "__builtin__", "bytes")) && args &&
        args->kind == PY_TUPLE && args->n == 0)
        return mk_str(vm, PY_BYTES, "", 0);
    if ((is_global(fn, "builtins", "set") || is_global(fn, "__builtin__", "set") ||
         is_global(fn, "builtins", "frozenset") || is_global(fn, "__builtin__", "frozenset")) &&
        args && args->kind == PY_TUPLE) {
        PyVal *s = pv_new(vm->a, PY_SET);
        if (args->n == 1 && (args->items[0]->kind == PY_LIST || args->items[0]->kind == PY_TUPLE))
            for (int i = 0; i < args->items[0]->n; i++) pv_push_item(s, args->items[0]->items[i]);
        return s;
    }
    PyVal *o = pv_new(vm->a, PY_OBJ);
    o->callable = fn;
    o->args = args;
    return o;
}

static PyVal *persistent_load(Vm *vm, PyVal *pid) {
    if (!pid || pid->kind != PY_TUPLE || pid->n < 5 || pid->items[0]->kind != PY_STR ||
        strcmp(pid->items[0]->s, "storage"))
        return VM_FAIL(vm, "persistent id is not ('storage', type, key, location, numel)");
    const PyVal *type = pid->items[1], *key = pid->items[2], *numel = pid->items[4];
    if (type->kind != PY_GLOBAL || key->kind != PY_STR || numel->kind != PY_INT || numel->i < 0 || numel->big)
        return VM_FAIL(vm, "malformed storage persistent id");
    PyVal *s = pv_new(vm->a, PY_STORAGE);
    int found = 0;
    for (int d = 0; d <= TD_BOOL; d++)
        if (!strcmp(type->s2, dtype_info[d].storage)) {
            s->dtype = (TorchDtype)d;
            found = 1;
        }
    if (!found && !strcmp(type->s2, "UntypedStorage")) {
        s->dtype = TD_U8;
        found = 1;
    }
    if (!found) return VM_FAIL(vm, "unsupported storage type %s.%s", type->s, type->s2);
    s->key = xstrdup(key->s);
    s->numel = (uint64_t)numel->i;
    return s;
}

static PyVal *vm_run(Vm *vm) {
    for (;;) {
        vm->op_pos = vm->pos;
        if (vm->pos >= vm->n) return VM_FAIL(vm, "ended without STOP (truncated)");
        uint8_t op = vm->p[vm->pos++];
        const uint8_t *b;
        PyVal *v, *x, *y;
        size_t start = 0;
        switch (op) {
        case 0x80:
            if (!vm_take(vm, 1)) return NULL;
            break; // PROTO
        case 0x95:
            if (!vm_take(vm, 8)) return NULL;
            break; // FRAME: framing is only a read-ahead hint
        case 0x98: break; // READONLY_BUFFER: no-op for our values
        case '.': // STOP
            v = vm_pop(vm);
            return v;
        case '(': // MARK
            if (vm->nmarks == vm->mcap) {
                vm->mcap = vm->mcap ? 2 * vm->mcap : 64;
                vm->marks = xrealloc(vm->marks, vm->mcap * sizeof *vm->marks);
            }
            vm->marks[vm->nmarks++] = vm->sp;
            break;
        case '0':
            if (!vm_pop(vm)) return NULL;
            break; // POP
        case '1':
            if (vm_pop_mark(vm, &start)) return NULL;
            vm->sp = start;
            break; // POP_MARK
        case '2':
            if (!(v = vm_top(vm))) return NULL;
            vm_push(vm, v);
            break; // DUP
        case 'N': vm_push(vm, pv_new(vm->a, PY_NONE)); break;
        case 0x88:
        case 0x89:
            v = pv_new(vm->a, PY_BOOL);
            v->i = op == 0x88;
            vm_push(vm, v);
            break;
        case 'J':
            if (!(b = vm_take(vm, 4))) return NULL;
            vm_push(vm, mk_int(vm, (int32_t)rd32(b)));
            break;
        case 'K':
            if (!(b = vm_take(vm, 1))) return NULL;
            vm_push(vm, mk_int(vm, b[0]));
            break;
        case 'M':
            if (!(b = vm_take(vm, 2))) return NULL;
            vm_push(vm, mk_int(vm, rd16(b)));
            break;
        case 0x8a: { // LONG1
            if (!(b = vm_take(vm, 1))) return NULL;
            uint64_t n = b[0];
            if (!(b = vm_take(vm, n))) return NULL;
            vm_push(vm, mk_long(vm, b, n));
            break;
        }
        case 0x8b: { // LONG4
            if (!(b = vm_take(vm, 4))) return NULL;
            uint64_t n = rd32(b);
            if (!(b = vm_take(vm, n))) return NULL;
            vm_push(vm, mk_long(vm, b, n));
            break;
        }
        case 'I':
        case 'L': { // text INT / LONG ("I01\n" is True in protocol 0)
            char *s = vm_line(vm), *e;
            if (!s) return NULL;
            if (op == 'I' && (!strcmp(s, "00") || !strcmp(s, "01"))) {
                v = pv_new(vm->a, PY_BOOL);
                v->i = s[1] == '1';
            } else {
                errno = 0;
                v = mk_int(vm, strtoll(s, &e, 10));
                if (errno || (*e && !(op == 'L' && *e == 'L' && !e[1]))) v->big = 1;
            }
            free(s);
            vm_push(vm, v);
            break;
        }
        case 'G': { // BINFLOAT: big-endian double
            if (!(b = vm_take(vm, 8))) return NULL;
            uint64_t u = 0;
            for (int i = 0; i < 8; i++) u = u << 8 | b[i];
            v = pv_new(vm->a, PY_FLOAT);
            memcpy(&v->f, &u, 8);
            vm_push(vm, v);
            break;
        }
        case 'F': {
            char *s = vm_line(vm);
            if (!s) return NULL;
            v = pv_new(vm->a, PY_FLOAT);
            v->f = strtod(s, NULL);
            free(s);
            vm_push(vm, v);
            break;
        }
        case 'X':
        case 0x8c:
        case 0x8d:
        case 'T':
        case 'U':
        case 'B':
        case 'C':
        case 0x8e:
        case 0x96: {
            int w = (op == 0x8c || op == 'U' || op == 'C') ? 1 : (op == 0x8d || op == 0x8e || op == 0x96) ? 8 : 4;
            if (!(b = vm_take(vm, (uint64_t)w))) return NULL;
            uint64_t n = w == 1 ? b[0] : w == 4 ? rd32(b) : rd64(b);
            if (!(b = vm_take(vm, n))) return NULL;
            int bytes = op == 'B' || op == 'C' || op == 0x8e || op == 0x96;
            vm_push(vm, mk_str(vm, bytes ? PY_BYTES : PY_STR, b, (size_t)n));
            break;
        }
        case 'S':
        case 'V': return VM_FAIL(vm, "protocol-0 string opcodes are not supported");
        case ')': vm_push(vm, pv_new(vm->a, PY_TUPLE)); break;
        case ']': vm_push(vm, pv_new(vm->a, PY_LIST)); break;
        case '}': vm_push(vm, pv_new(vm->a, PY_DICT)); break;
        case 0x8f: vm_push(vm, pv_new(vm->a, PY_SET)); break;
        case 't':
            if (vm_pop_mark(vm, &start)) return NULL;
            vm_push(vm, mk_seq(vm, PY_TUPLE, start));
            break;
        case 'l':
            if (vm_pop_mark(vm, &start)) return NULL;
            vm_push(vm, mk_seq(vm, PY_LIST, start));
            break;
        case 0x91:
            if (vm_pop_mark(vm, &start)) return NULL;
            vm_push(vm, mk_seq(vm, PY_SET, start));
            break;
        case 'd':
            if (vm_pop_mark(vm, &start)) return NULL;
            if ((vm->sp - start) % 2) return VM_FAIL(vm, "DICT with an odd number of items");
            vm_push(vm, mk_seq(vm, PY_DICT, start));
            break;
        case 0x85:
        case 0x86:
        case 0x87: { // TUPLE1..3
            int n = op - 0x84;
            size_t floor = vm->nmarks ? vm->marks[vm->nmarks - 1] : 0;
            if (vm->sp < floor + (size_t)n) return VM_FAIL(vm, "stack underflow");
            vm_push(vm, mk_seq(vm, PY_TUPLE, vm->sp - (size_t)n));
            break;
        }
        case 'a':
        case 'e':
        case 0x90: { // APPEND / APPENDS / ADDITEMS
            if (op == 'a') {
                start = vm->sp - 1;
                if (!vm_top(vm)) return NULL;
            } else if (vm_pop_mark(vm, &start))
                return NULL;
            if (start == 0 || (vm->nmarks && start <= vm->marks[vm->nmarks - 1]))
                return VM_FAIL(vm, "nothing to append to");
            PyVal *c = vm->st[start - 1];
            if (c->kind != PY_LIST && c->kind != PY_SET && c->kind != PY_OBJ)
                return VM_FAIL(vm, "append to a %s", py_kind_name(c->kind));
            for (size_t i = start; i < vm->sp; i++) pv_push_item(c, vm->st[i]);
            vm->sp = start;
            break;
        }
        case 's':
        case 'u': { // SETITEM / SETITEMS
            if (op == 's') {
                start = vm->sp - 2;
                size_t floor = vm->nmarks ? vm->marks[vm->nmarks - 1] : 0;
                if (vm->sp < floor + 3) return VM_FAIL(vm, "stack underflow");
            } else if (vm_pop_mark(vm, &start))
                return NULL;
            if (start == 0 || (vm->sp - start) % 2) return VM_FAIL(vm, "SETITEMS with an odd number of items");
            PyVal *d = vm->st[start - 1];
            if (d->kind != PY_DICT && d->kind != PY_OBJ) return VM_FAIL(vm, "setitem on a %s", py_kind_name(d->kind));
            // a repeated key is appended too: py_dict_get scans from the end, so the last one wins as in Python
            for (size_t i = start; i < vm->sp; i++) pv_push_item(d, vm->st[i]);
            vm->sp = start;
            break;
        }
        case 'c':
        case 'i': { // GLOBAL / INST: "module\nname\n"
            char *mod = vm_line(vm), *name = mod ? vm_line(vm) : NULL;
            if (!name) {
                free(mod);
                return NULL;
            }
            v = pv_new(vm->a, PY_GLOBAL);
            v->s = mod;
            v->s2 = name;
            if (op == 'i') {
                if (vm_pop_mark(vm, &start)) return NULL;
                x = mk_seq(vm, PY_TUPLE, start);
                v = do_call(vm, v, x);
                if (!v) return NULL;
            }
            vm_push(vm, v);
            break;
        }
        case 0x93: // STACK_GLOBAL
            if (!(y = vm_pop(vm)) || !(x = vm_pop(vm))) return NULL;
            if (x->kind != PY_STR || y->kind != PY_STR) return VM_FAIL(vm, "STACK_GLOBAL needs two strings");
            v = pv_new(vm->a, PY_GLOBAL);
            v->s = xstrdup(x->s);
            v->s2 = xstrdup(y->s);
            vm_push(vm, v);
            break;
        case 'R': // REDUCE
            if (!(y = vm_pop(vm)) || !(x = vm_pop(vm))) return NULL;
            if (!(v = do_call(vm, x, y))) return NULL;
            vm_push(vm, v);
            break;
        case 0x81: // NEWOBJ: cls.__new__(cls, *args)
            if (!(y = vm_pop(vm)) || !(x = vm_pop(vm))) return NULL;
            if (!(v = do_call(vm, x, y))) return NULL;
            vm_push(vm, v);
            break;
        case 0x92: // NEWOBJ_EX: cls, args, kwargs
            if (!vm_pop(vm) || !(y = vm_pop(vm)) || !(x = vm_pop(vm))) return NULL;
            if (!(v = do_call(vm, x, y))) return NULL;
            vm_push(vm, v);
            break;
        case 'o': // OBJ: MARK cls args... -> cls(*args)
            if (vm_pop_mark(vm, &start)) return NULL;
            if (vm->sp <= start) return VM_FAIL(vm, "OBJ without a class");
            x = vm->st[start];
            y = mk_seq(vm, PY_TUPLE, start + 1);
            vm->sp = start;
            if (!(v = do_call(vm, x, y))) return NULL;
            vm_push(vm, v);
            break;
        case 'b': // BUILD: obj.__setstate__(state)
            if (!(y = vm_pop(vm)) || !(x = vm_top(vm))) return NULL;
            if (x->kind == PY_OBJ) x->state = y;
            // tensors/dicts: the state holds Python attributes we have no use for
            break;
        case 'Q': // BINPERSID
            if (!(x = vm_pop(vm)) || !(v = persistent_load(vm, x))) return NULL;
            vm_push(vm, v);
            break;
        case 'P': return VM_FAIL(vm, "text persistent ids are not supported");
        case 'q':
            if (!(b = vm_take(vm, 1)) || memo_put(vm, b[0], vm_top(vm))) return NULL;
            break;
        case 'r':
            if (!(b = vm_take(vm, 4)) || memo_put(vm, rd32(b), vm_top(vm))) return NULL;
            break;
        case 0x94:
            if (memo_put(vm, vm->memo_count, vm_top(vm))) return NULL;
            break; // MEMOIZE
        case 'p': {
            char *s = vm_line(vm);
            if (!s) return NULL;
            uint64_t k = strtoull(s, NULL, 10);
            free(s);
            if (memo_put(vm, k, vm_top(vm))) return NULL;
            break;
        }
        case 'h':
            if (!(b = vm_take(vm, 1)) || !(v = memo_get(vm, b[0]))) return NULL;
            vm_push(vm, v);
            break;
        case 'j':
            if (!(b = vm_take(vm, 4)) || !(v = memo_get(vm, rd32(b)))) return NULL;
            vm_push(vm, v);
            break;
        case 'g': {
            char *s = vm_line(vm);
            if (!s) return NULL;
            uint64_t k = strtoull(s, NULL, 10);
            free(s);
            if (!(v = memo_get(vm, k))) return NULL;
            vm_push(vm, v);
            break;
        }
        case 0x82:
        case 0x83:
        case 0x84: return VM_FAIL(vm, "copyreg extension codes are not supported");
        case 0x97: return VM_FAIL(vm, "out-of-band buffers are not supported");
        default: return VM_FAIL(vm, "unknown opcode");
        }
    }
}

static PyVal *unpickle(const uint8_t *p, size_t n, PyArena **arena, char *err, size_t errlen) {
    if (!*arena) *arena = xcalloc(1, sizeof(PyArena));
    Vm vm = {.p = p, .n = n, .a = *arena, .err = err, .errlen = errlen};
    PyVal *r = vm_run(&vm);
    free(vm.st);
    free(vm.marks);
    free(vm.memo);
    return r;
}

PyVal *pickle_loads(const uint8_t *p, size_t n, PyArena **arena, char *err, size_t errlen) {
    return unpickle(p, n, arena, err, errlen);
}

// =====================================================================================================
// torch files

void torch_close(TorchFile *tf) {
    if (!tf) return;
    zip_close(&tf->zip);
    py_arena_free(tf->arena);
    free(tf->prefix);
    memset(tf, 0, sizeof *tf);
}

int torch_load(TorchFile *tf, const char *path, char *err, size_t errlen) {
    memset(tf, 0, sizeof *tf);
    if (zip_open(&tf->zip, path, err, errlen)) return -1;
    const ZipEntry *pkl = NULL;
    for (int i = 0; i < tf->zip.n; i++) {
        const char *nm = tf->zip.e[i].name, *slash = strchr(nm, '/');
        if (slash && !strcmp(slash + 1, "data.pkl")) {
            if (pkl) {
                torch_close(tf);
                return set_err(err, errlen, "%s: more than one data.pkl in the archive", path);
            }
            pkl = &tf->zip.e[i];
        }
    }
    if (!pkl) {
        torch_close(tf);
        return set_err(err, errlen, "%s: zip archive without <archive>/data.pkl (not a torch.save file)", path);
    }
    tf->prefix = mem_dup(pkl->name, strlen(pkl->name) - strlen("data.pkl"));
    const uint8_t *d;
    int owned;
    if (zip_data(&tf->zip, pkl, &d, &owned, err, errlen)) {
        torch_close(tf);
        return -1;
    }
    char e2[ERR_LEN];
    tf->root = unpickle(d, (size_t)pkl->usize, &tf->arena, e2, sizeof e2);
    if (owned) free((void *)d);
    if (!tf->root) {
        set_err(err, errlen, "%s: %s: %s", path, pkl->name, e2);
        torch_close(tf);
        return -1;
    }
    return 0;
}

int torch_tensor_to_f32(TorchFile *tf, const PyVal *t, float *out, char *err, size_t errlen) {
    if (t->kind != PY_TENSOR) return set_err(err, errlen, "a %s, not a tensor", py_kind_name(t->kind));
    TorchDtype dt = t->dtype;
    if (dt != TD_F32 && dt != TD_F64 && dt != TD_F16 && dt != TD_BF16)
        return set_err(err, errlen, "dtype %s; expected float32, bfloat16, float16 or float64", torch_dtype_name(dt));
    size_t es = torch_dtype_size(dt);
    uint64_t numel = torch_tensor_numel(t);
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] == 0) return 0;
    uint64_t last = (uint64_t)t->offset; // highest element index the view touches, overflow-checked
    int over = 0;
    for (int i = 0; i < t->ndim; i++) {
        uint64_t span;
        over |= __builtin_mul_overflow((uint64_t)(t->shape[i] - 1), (uint64_t)t->stride[i], &span);
        over |= __builtin_add_overflow(last, span, &last);
    }
    if (over || last >= t->storage->numel)
        return set_err(err, errlen, "view (offset %lld, shape and strides) reaches past its %llu-element storage",
                       (long long)t->offset, (unsigned long long)t->storage->numel);
    char name[600];
    snprintf(name, sizeof name, "%sdata/%s", tf->prefix, t->storage->key);
    const ZipEntry *e = zip_find(&tf->zip, name);
    if (!e) return set_err(err, errlen, "storage '%s' missing from %s", name, tf->zip.path);
    if (t->storage->numel > e->usize / es)
        return set_err(err, errlen, "storage '%s' has %llu bytes, the pickle says %llu x %zu", name,
                       (unsigned long long)e->usize, (unsigned long long)t->storage->numel, es);
    const uint8_t *base;
    int owned;
    if (zip_data(&tf->zip, e, &base, &owned, err, errlen)) return -1;
    // walk the view in row-major order
    int64_t idx[8] = {0};
    uint64_t pos = (uint64_t)t->offset;
    for (uint64_t k = 0; k < numel; k++) {
        const uint8_t *p = base + pos * es;
        switch (dt) {
        case TD_F32: memcpy(&out[k], p, 4); break;
        case TD_F64: {
            double x;
            memcpy(&x, p, 8);
            out[k] = (float)x;
            break;
        }
        case TD_F16: out[k] = f16_to_f32(rd16(p)); break;
        default: out[k] = bf16_to_f32(rd16(p)); break;
        }
        for (int d = t->ndim - 1; d >= 0; d--) { // odometer
            pos += (uint64_t)t->stride[d];
            if (++idx[d] < t->shape[d]) break;
            pos -= (uint64_t)t->stride[d] * (uint64_t)t->shape[d];
            idx[d] = 0;
        }
    }
    if (owned) free((void *)base);
    return 0;
}

// =====================================================================================================
// writer

typedef struct {
    char *key;
    int kind; // 0 int, 1 float, 2 str, 3 dict start
    int64_t i;
    double f;
    char *s;
} TwItem;
typedef struct {
    char *name;
    int dict; // index of the dict item it belongs to
    TorchDtype dtype;
    int ndim;
    int64_t shape[8];
    const float *data;
    uint64_t numel;
} TwTensor;
struct TorchWriter {
    TwItem *it;
    int nit;
    TwTensor *t;
    int nt;
};

TorchWriter *torch_writer_new(void) { return xcalloc(1, sizeof(TorchWriter)); }
static TwItem *tw_item(TorchWriter *w, const char *key, int kind) {
    w->it = xrealloc(w->it, (size_t)(w->nit + 1) * sizeof *w->it);
    TwItem *x = &w->it[w->nit++];
    memset(x, 0, sizeof *x);
    x->key = xstrdup(key);
    x->kind = kind;
    return x;
}
void torch_writer_int(TorchWriter *w, const char *key, int64_t v) { tw_item(w, key, 0)->i = v; }
void torch_writer_float(TorchWriter *w, const char *key, double v) { tw_item(w, key, 1)->f = v; }
void torch_writer_str(TorchWriter *w, const char *key, const char *v) { tw_item(w, key, 2)->s = xstrdup(v); }
void torch_writer_begin_dict(TorchWriter *w, const char *key) { tw_item(w, key, 3); }
void torch_writer_tensor(TorchWriter *w, const char *name, TorchDtype dtype, int ndim, const int64_t *shape,
                         const float *data) {
    if (!w->nit || w->it[w->nit - 1].kind != 3) die("torch_writer_tensor('%s') outside a dict", name);
    if (dtype != TD_F32 && dtype != TD_BF16 && dtype != TD_F16)
        die("torch_writer_tensor('%s'): dtype %s", name, torch_dtype_name(dtype));
    if (ndim > 8) die("torch_writer_tensor('%s'): %d dims", name, ndim);
    w->t = xrealloc(w->t, (size_t)(w->nt + 1) * sizeof *w->t);
    TwTensor *t = &w->t[w->nt++];
    memset(t, 0, sizeof *t);
    t->name = xstrdup(name);
    t->dict = w->nit - 1;
    t->dtype = dtype;
    t->ndim = ndim;
    t->numel = 1;
    for (int i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        t->numel *= (uint64_t)shape[i];
    }
    t->data = data;
}
void torch_writer_free(TorchWriter *w) {
    if (!w) return;
    for (int i = 0; i < w->nit; i++) {
        free(w->it[i].key);
        free(w->it[i].s);
    }
    for (int i = 0; i < w->nt; i++) free(w->t[i].name);
    free(w->it);
    free(w->t);
    free(w);
}

static void pk_u8(Buf *b, uint8_t x) { buf_put(b, &x, 1); }
static void pk_le(Buf *b, uint64_t x, int n) {
    for (int i = 0; i < n; i++) pk_u8(b, (uint8_t)(x >> (8 * i)));
}
static void pk_str(Buf *b, const char *s) { // BINUNICODE
    size_t n = strlen(s);
    pk_u8(b, 'X');
    pk_le(b, n, 4);
    buf_put(b, s, n);
}
static void pk_int(Buf *b, int64_t v) {
    if (v >= 0 && v < 256) {
        pk_u8(b, 'K');
        pk_u8(b, (uint8_t)v);
    } else if (v >= 0 && v < 65536) {
        pk_u8(b, 'M');
        pk_le(b, (uint64_t)v, 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        pk_u8(b, 'J');
        pk_le(b, (uint64_t)v, 4);
    } else {
        pk_u8(b, 0x8a);
        pk_u8(b, 8);
        pk_le(b, (uint64_t)v, 8);
    } // LONG1, 8 bytes two's complement
}
static void pk_global(Buf *b, const char *mod, const char *name) { buf_printf(b, "c%s\n%s\n", mod, name); }
static void pk_ordered_dict(Buf *b) {
    pk_global(b, "collections", "OrderedDict");
    pk_u8(b, ')');
    pk_u8(b, 'R');
}

// Zip writing: stored entries, data 64-byte aligned (as torch does, so torch.load(mmap=True) works).
typedef struct {
    char *name;
    uint64_t lho, size;
    uint32_t crc;
} ZwEntry;
typedef struct {
    AtomicFile af;
    uint64_t pos;
    ZwEntry *e;
    int n;
    int force64; // test hook: zip64 records even for small files
    int bad;
} ZipW;

static void zw_raw(ZipW *z, const void *p, size_t n) {
    if (!z->bad && atomic_write(&z->af, p, n)) z->bad = 1;
    z->pos += n;
}
static void zw_le(ZipW *z, uint64_t x, int n) {
    uint8_t b[8];
    for (int i = 0; i < n; i++) b[i] = (uint8_t)(x >> (8 * i));
    zw_raw(z, b, (size_t)n);
}
// Local header; sizes/CRC patched after the data when `size` is not known to be small.
static void zw_begin(ZipW *z, const char *name, uint64_t size) {
    z->e = xrealloc(z->e, (size_t)(z->n + 1) * sizeof *z->e);
    ZwEntry *e = &z->e[z->n++];
    e->name = xstrdup(name);
    e->lho = z->pos;
    e->size = size;
    int z64 = z->force64 || size >= 0xFFFFFFFFu;
    size_t nlen = strlen(name), xlen = z64 ? 20 : 0;
    size_t pad = (64 - (z->pos + 30 + nlen + xlen + 4) % 64) % 64; // "FB" padding field aligns the data
    zw_le(z, 0x04034b50u, 4);
    zw_le(z, z64 ? 45 : 20, 2); // version needed
    zw_le(z, 0, 2); // flags
    zw_le(z, 0, 2); // stored
    zw_le(z, 0, 2);
    zw_le(z, 0x21, 2); // time, date (1980-01-01)
    zw_le(z, 0, 4); // crc, patched later
    zw_le(z, z64 ? 0xFFFFFFFFu : size, 4);
    zw_le(z, z64 ? 0xFFFFFFFFu : size, 4);
    zw_le(z, nlen, 2);
    zw_le(z, xlen + 4 + pad, 2);
    zw_raw(z, name, nlen);
    if (z64) {
        zw_le(z, 1, 2);
        zw_le(z, 16, 2);
        zw_le(z, size, 8);
        zw_le(z, size, 8);
    }
    zw_le(z, 0x4246, 2);
    zw_le(z, pad, 2);
    static const uint8_t zeros[64];
    zw_raw(z, zeros, pad);
}
static void zw_end(ZipW *z, uint32_t crc) {
    ZwEntry *e = &z->e[z->n - 1];
    e->crc = crc;
    if (z->bad) return;
    // patch the CRC in the local header
    FILE *f = z->af.f;
    uint8_t c[4] = {(uint8_t)crc, (uint8_t)(crc >> 8), (uint8_t)(crc >> 16), (uint8_t)(crc >> 24)};
    if (fflush(f) || fseeko(f, (off_t)(e->lho + 14), SEEK_SET) || fwrite(c, 1, 4, f) != 4 || fseeko(f, 0, SEEK_END))
        z->bad = 1;
}
static void zw_bytes(ZipW *z, const char *name, const void *p, size_t n) {
    zw_begin(z, name, n);
    zw_raw(z, p, n);
    zw_end(z, (uint32_t)crc32(crc32(0L, Z_NULL, 0), p, (uInt)n));
}
static void zw_finish(ZipW *z) {
    uint64_t cd = z->pos;
    for (int i = 0; i < z->n; i++) {
        ZwEntry *e = &z->e[i];
        int z64 = z->force64 || e->size >= 0xFFFFFFFFu || e->lho >= 0xFFFFFFFFu;
        size_t nlen = strlen(e->name);
        zw_le(z, 0x02014b50u, 4);
        zw_le(z, z64 ? 45 : 20, 2);
        zw_le(z, z64 ? 45 : 20, 2);
        zw_le(z, 0, 2);
        zw_le(z, 0, 2);
        zw_le(z, 0, 2);
        zw_le(z, 0x21, 2);
        zw_le(z, e->crc, 4);
        zw_le(z, z64 ? 0xFFFFFFFFu : e->size, 4);
        zw_le(z, z64 ? 0xFFFFFFFFu : e->size, 4);
        zw_le(z, nlen, 2);
        zw_le(z, z64 ? 28 : 0, 2);
        zw_le(z, 0, 2);
        zw_le(z, 0, 2);
        zw_le(z, 0, 2);
        zw_le(z, 0, 4);
        zw_le(z, z64 ? 0xFFFFFFFFu : e->lho, 4);
        zw_raw(z, e->name, nlen);
        if (z64) {
            zw_le(z, 1, 2);
            zw_le(z, 24, 2);
            zw_le(z, e->size, 8);
            zw_le(z, e->size, 8);
            zw_le(z, e->lho, 8);
        }
    }
    uint64_t cd_size = z->pos - cd;
    int z64 = z->force64 || cd >= 0xFFFFFFFFu || z->n >= 0xFFFF;
    if (z64) {
        uint64_t rec = z->pos;
        zw_le(z, 0x06064b50u, 4);
        zw_le(z, 44, 8);
        zw_le(z, 45, 2);
        zw_le(z, 45, 2);
        zw_le(z, 0, 4);
        zw_le(z, 0, 4);
        zw_le(z, (uint64_t)z->n, 8);
        zw_le(z, (uint64_t)z->n, 8);
        zw_le(z, cd_size, 8);
        zw_le(z, cd, 8);
        zw_le(z, 0x07064b50u, 4);
        zw_le(z, 0, 4);
        zw_le(z, rec, 8);
        zw_le(z, 1, 4);
    }
    zw_le(z, 0x06054b50u, 4);
    zw_le(z, 0, 2);
    zw_le(z, 0, 2);
    zw_le(z, z64 ? 0xFFFF : (uint64_t)z->n, 2);
    zw_le(z, z64 ? 0xFFFF : (uint64_t)z->n, 2);
    zw_le(z, z64 ? 0xFFFFFFFFu : cd_size, 4);
    zw_le(z, z64 ? 0xFFFFFFFFu : cd, 4);
    zw_le(z, 0, 2);
}

static int tensor_data(ZipW *z, const char *name, const TwTensor *t) {
    size_t es = torch_dtype_size(t->dtype);
    zw_begin(z, name, t->numel * es);
    uLong crc = crc32(0L, Z_NULL, 0);
    enum { CHUNK = 1 << 16 };
    static uint8_t tmp[CHUNK * 4];
    for (uint64_t i = 0; i < t->numel; i += CHUNK) {
        uint64_t m = t->numel - i < CHUNK ? t->numel - i : CHUNK;
        if (t->dtype == TD_F32)
            memcpy(tmp, t->data + i, m * 4);
        else
            for (uint64_t j = 0; j < m; j++) {
                uint16_t h = t->dtype == TD_BF16 ? f32_to_bf16(t->data[i + j]) : f32_to_f16(t->data[i + j]);
                tmp[2 * j] = (uint8_t)h;
                tmp[2 * j + 1] = (uint8_t)(h >> 8);
            }
        crc = crc32(crc, tmp, (uInt)(m * es));
        zw_raw(z, tmp, m * es);
    }
    zw_end(z, (uint32_t)crc);
    return z->bad ? -1 : 0;
}

int torch_writer_save(TorchWriter *w, const char *path, char *err, size_t errlen) {
    // archive name: file name without directory and extension, as torch.save does
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    char arch[256];
    snprintf(arch, sizeof arch, "%s", base);
    char *dot = strrchr(arch, '.');
    if (dot && dot != arch) *dot = 0;

    Buf pk = {0};
    pk_u8(&pk, 0x80);
    pk_u8(&pk, 2); // PROTO 2, what torch.save uses
    pk_u8(&pk, '}');
    pk_u8(&pk, '(');
    for (int i = 0; i < w->nit; i++) {
        const TwItem *x = &w->it[i];
        pk_str(&pk, x->key);
        if (x->kind == 0)
            pk_int(&pk, x->i);
        else if (x->kind == 1) {
            uint64_t u;
            memcpy(&u, &x->f, 8);
            pk_u8(&pk, 'G');
            for (int k = 7; k >= 0; k--) pk_u8(&pk, (uint8_t)(u >> (8 * k)));
        } else if (x->kind == 2)
            pk_str(&pk, x->s);
        else {
            pk_ordered_dict(&pk);
            pk_u8(&pk, '(');
            for (int k = 0; k < w->nt; k++) {
                const TwTensor *t = &w->t[k];
                if (t->dict != i) continue;
                pk_str(&pk, t->name);
                pk_global(&pk, "torch._utils", "_rebuild_tensor_v2");
                pk_u8(&pk, '(');
                { // persistent id ('storage', torch.XStorage, key, 'cpu', numel)
                    char key[32];
                    snprintf(key, sizeof key, "%d", k);
                    pk_u8(&pk, '(');
                    pk_str(&pk, "storage");
                    pk_global(&pk, "torch", dtype_info[t->dtype].storage);
                    pk_str(&pk, key);
                    pk_str(&pk, "cpu");
                    pk_int(&pk, (int64_t)t->numel);
                    pk_u8(&pk, 't');
                    pk_u8(&pk, 'Q');
                }
                pk_int(&pk, 0); // storage offset
                pk_u8(&pk, '(');
                for (int d = 0; d < t->ndim; d++) pk_int(&pk, t->shape[d]);
                pk_u8(&pk, 't');
                pk_u8(&pk, '(');
                int64_t stride = 1, strides[8];
                for (int d = t->ndim - 1; d >= 0; d--) {
                    strides[d] = stride;
                    stride *= t->shape[d];
                }
                for (int d = 0; d < t->ndim; d++) pk_int(&pk, strides[d]);
                pk_u8(&pk, 't');
                pk_u8(&pk, 0x89); // requires_grad False
                pk_ordered_dict(&pk); // backward hooks
                pk_u8(&pk, 't');
                pk_u8(&pk, 'R');
            }
            pk_u8(&pk, 'u');
        }
    }
    pk_u8(&pk, 'u');
    pk_u8(&pk, '.');

    ZipW z = {0};
    z.force64 = getenv("GDN_TEST_FORCE_ZIP64") != NULL;
    if (atomic_open(&z.af, path, err, errlen)) {
        buf_free(&pk);
        return -1;
    }
    char name[512];
    snprintf(name, sizeof name, "%s/data.pkl", arch);
    zw_bytes(&z, name, pk.p, pk.n);
    buf_free(&pk);
    snprintf(name, sizeof name, "%s/byteorder", arch);
    zw_bytes(&z, name, "little", 6);
    for (int k = 0; k < w->nt && !z.bad; k++) {
        snprintf(name, sizeof name, "%s/data/%d", arch, k);
        tensor_data(&z, name, &w->t[k]);
    }
    snprintf(name, sizeof name, "%s/version", arch);
    zw_bytes(&z, name, "3\n", 2);
    zw_finish(&z);
    for (int i = 0; i < z.n; i++) free(z.e[i].name);
    free(z.e);
    if (z.bad) {
        set_err(err, errlen, "error writing %s: %s", z.af.tmp, strerror(errno));
        atomic_abort(&z.af);
        return -1;
    }
    return atomic_commit(&z.af, err, errlen);
}
