// torch_pickle.c: torch.save files on top of the zip reader (zip_read.c) and the pickle machine
// (pickle_vm.c): loading tensors as fp32, and the writer (pickle + 64-byte aligned stored zip entries).
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
#include "torch_pickle_internal.h"

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
    tf->prefix = tp_mem_dup(pkl->name, strlen(pkl->name) - strlen("data.pkl"));
    const uint8_t *d;
    int owned;
    if (zip_data(&tf->zip, pkl, &d, &owned, err, errlen)) {
        torch_close(tf);
        return -1;
    }
    char e2[ERR_LEN];
    tf->root = pickle_loads(d, (size_t)pkl->usize, &tf->arena, e2, sizeof e2);
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
                    pk_global(&pk, "torch", tp_dtype_storage(t->dtype));
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
