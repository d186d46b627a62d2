// safetensors.c: the safetensors container (see safetensors.h).
// File = u64 little-endian header length N, N bytes of JSON (padded with spaces to a multiple of 8 by
// writers), then the data area. Every tensor's data_offsets are relative to the data area; the reader
// demands what the reference implementation demands: offsets sorted without gaps or overlaps, covering
// the data area exactly, and byte spans equal to numel x dtype size.
#define _GNU_SOURCE
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/common.h"

#define ST_MAX_HEADER (100u << 20) // a header beyond 100 MB is corrupt, not a big model

static const char *const dtype_names[] = {"F32", "BF16", "F16", "I32", "I64", "U8", "F64"};
static const size_t dtype_sizes[] = {4, 2, 2, 4, 8, 1, 8};

const char *st_dtype_name(StDtype t) {
    return (unsigned)t < sizeof dtype_names / sizeof *dtype_names ? dtype_names[t] : "?";
}
size_t st_dtype_size(StDtype t) { return (unsigned)t < sizeof dtype_sizes / sizeof *dtype_sizes ? dtype_sizes[t] : 0; }
static int dtype_parse(const char *s, StDtype *out) {
    for (int i = 0; i < (int)(sizeof dtype_names / sizeof *dtype_names); i++)
        if (!strcmp(s, dtype_names[i])) {
            *out = (StDtype)i;
            return 0;
        }
    return -1;
}

// ---------------------------------------------------------------------------------------------
// reader

static void st_free_parsed(StFile *f) {
    for (int i = 0; i < f->ntensors; i++) free(f->tensors[i].name);
    for (int i = 0; i < f->nmeta; i++) {
        free(f->meta_keys[i]);
        free(f->meta_vals[i]);
    }
    free(f->tensors);
    free(f->meta_keys);
    free(f->meta_vals);
    f->tensors = NULL;
    f->meta_keys = f->meta_vals = NULL;
    f->ntensors = f->nmeta = 0;
}

void st_close(StFile *f) {
    if (!f) return;
    st_free_parsed(f);
    if (f->map && f->map_size) munmap(f->map, f->map_size);
    f->map = NULL;
    f->map_size = 0;
}

// A JSON number that is a non-negative integer exactly representable (all offsets and dims are).
static int json_u64(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (!(d >= 0) || d > 9007199254740992.0 || d != floor(d)) return -1;
    *out = (uint64_t)d;
    return 0;
}

static int cmp_by_offset(const void *a, const void *b) {
    const StTensor *x = *(const StTensor *const *)a, *y = *(const StTensor *const *)b;
    if (x->data != y->data) return x->data < y->data ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}
static int cmp_by_name(const void *a, const void *b) {
    return strcmp((*(const StTensor *const *)a)->name, (*(const StTensor *const *)b)->name);
}

// Parses the header JSON and fills f->tensors / f->meta_*; data pointers point into data area `base`.
static int parse_header(StFile *f, const char *path, const char *hdr, size_t hlen, const uint8_t *base,
                        uint64_t data_size, char *err, size_t errlen) {
    // cJSON ends a string at an escaped NUL, so "a\u0000b" would silently become the name "a" (other readers
    // keep the whole name): refuse it. A backslash only occurs inside strings in JSON, and "\\" is skipped.
    for (size_t i = 0; i + 1 < hlen; i++)
        if (hdr[i] == '\\') {
            if (hdr[i + 1] == 'u' && i + 5 < hlen && !memcmp(hdr + i + 2, "0000", 4))
                return set_err(err, errlen, "%s: header byte %zu: a name or value contains NUL (\\u0000)", path, i);
            i++; // the escaped character
        }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(hdr, hlen, &end, 0);
    if (!root) {
        size_t at = cJSON_GetErrorPtr() ? (size_t)(cJSON_GetErrorPtr() - hdr) : 0;
        if (at > hlen) at = 0;
        return set_err(err, errlen, "%s: header is not valid JSON (near header byte %zu)", path, at);
    }
    if (end && memchr(hdr, 0, (size_t)(end - hdr))) {
        cJSON_Delete(root);
        return set_err(err, errlen, "%s: a NUL byte inside the header JSON", path);
    }
    for (const char *p = end; p && p < hdr + hlen; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r' && *p != 0) {
            cJSON_Delete(root);
            return set_err(err, errlen, "%s: trailing bytes after the header JSON at header byte %zu", path,
                           (size_t)(p - hdr));
        }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return set_err(err, errlen, "%s: header JSON is not an object", path);
    }
    int n = cJSON_GetArraySize(root), nt = 0, rc = 0;
    f->tensors = xcalloc((size_t)n, sizeof(StTensor));
    for (cJSON *e = root->child; e; e = e->next) {
        const char *name = e->string;
        if (!strcmp(name, "__metadata__")) {
            if (f->meta_keys) {
                rc = set_err(err, errlen, "%s: duplicate __metadata__", path);
                break;
            }
            if (!cJSON_IsObject(e)) {
                rc = set_err(err, errlen, "%s: __metadata__ is not an object", path);
                break;
            }
            int nm = cJSON_GetArraySize(e);
            f->meta_keys = xcalloc((size_t)nm, sizeof(char *));
            f->meta_vals = xcalloc((size_t)nm, sizeof(char *));
            for (cJSON *m = e->child; m; m = m->next) {
                if (!cJSON_IsString(m)) {
                    rc = set_err(err, errlen, "%s: __metadata__ key '%s' is not a string (metadata is a string map)",
                                 path, m->string);
                    break;
                }
                f->meta_keys[f->nmeta] = xstrdup(m->string);
                f->meta_vals[f->nmeta++] = xstrdup(m->valuestring);
            }
            if (rc) break;
            continue;
        }
        StTensor *t = &f->tensors[nt];
        t->name = xstrdup(name);
        nt++;
        f->ntensors = nt;
        if (!cJSON_IsObject(e)) {
            rc = set_err(err, errlen, "%s: tensor '%s': entry is not an object", path, name);
            break;
        }
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
        const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
        if (!cJSON_IsString(dt)) {
            rc = set_err(err, errlen, "%s: tensor '%s': missing string \"dtype\"", path, name);
            break;
        }
        if (dtype_parse(dt->valuestring, &t->dtype)) {
            rc = set_err(err, errlen,
                         "%s: tensor '%s': unsupported dtype '%s' (expected F32, BF16, F16, I32, I64, U8 or F64)", path,
                         name, dt->valuestring);
            break;
        }
        if (!cJSON_IsArray(shape)) {
            rc = set_err(err, errlen, "%s: tensor '%s': missing array \"shape\"", path, name);
            break;
        }
        t->ndim = cJSON_GetArraySize(shape);
        if (t->ndim > 8) {
            rc = set_err(err, errlen, "%s: tensor '%s': %d dimensions (at most 8 supported)", path, name, t->ndim);
            break;
        }
        uint64_t numel = 1;
        int k = 0;
        for (const cJSON *d = shape->child; d; d = d->next, k++) {
            uint64_t v;
            if (json_u64(d, &v) || v > INT64_MAX) {
                rc = set_err(err, errlen, "%s: tensor '%s': shape[%d] is not a non-negative integer", path, name, k);
                break;
            }
            t->shape[k] = (int64_t)v;
            if (v && numel > UINT64_MAX / v) {
                rc = set_err(err, errlen, "%s: tensor '%s': shape overflows", path, name);
                break;
            }
            numel *= v;
        }
        if (rc) break;
        t->numel = numel;
        uint64_t b0, b1;
        if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || json_u64(offs->child, &b0) ||
            json_u64(offs->child->next, &b1)) {
            rc = set_err(err, errlen, "%s: tensor '%s': \"data_offsets\" must be [begin, end] non-negative integers",
                         path, name);
            break;
        }
        if (b1 < b0 || b1 > data_size) {
            rc = set_err(err, errlen,
                         "%s: tensor '%s': data_offsets [%llu, %llu] outside the data area of %llu bytes "
                         "(truncated file?)",
                         path, name, (unsigned long long)b0, (unsigned long long)b1, (unsigned long long)data_size);
            break;
        }
        uint64_t want = numel * st_dtype_size(t->dtype);
        if (numel && want / numel != st_dtype_size(t->dtype)) {
            rc = set_err(err, errlen, "%s: tensor '%s': byte size overflows", path, name);
            break;
        }
        if (b1 - b0 != want) {
            rc = set_err(err, errlen, "%s: tensor '%s': data_offsets span %llu bytes but %s shape needs %llu", path,
                         name, (unsigned long long)(b1 - b0), st_dtype_name(t->dtype), (unsigned long long)want);
            break;
        }
        t->data = base + b0;
        t->nbytes = want;
    }
    cJSON_Delete(root);
    if (rc) return rc;

    // Offsets sorted, no overlap, no gap, covering the data area; names unique.
    StTensor **order = xmalloc((size_t)(nt ? nt : 1) * sizeof *order);
    for (int i = 0; i < nt; i++) order[i] = &f->tensors[i];
    qsort(order, (size_t)nt, sizeof *order, cmp_by_name);
    for (int i = 1; i < nt; i++)
        if (!strcmp(order[i]->name, order[i - 1]->name)) {
            rc = set_err(err, errlen, "%s: tensor '%s' appears twice in the header", path, order[i]->name);
            break;
        }
    if (!rc) {
        qsort(order, (size_t)nt, sizeof *order, cmp_by_offset);
        const uint8_t *pos = base;
        for (int i = 0; i < nt && !rc; i++) {
            if (order[i]->data < pos)
                rc = set_err(err, errlen, "%s: tensor '%s' (data_offsets from %llu) overlaps tensor '%s'", path,
                             order[i]->name, (unsigned long long)(order[i]->data - base), order[i - 1]->name);
            else if (order[i]->data > pos)
                rc = set_err(err, errlen,
                             "%s: gap in the data area before tensor '%s' (bytes %llu..%llu belong to no tensor)", path,
                             order[i]->name, (unsigned long long)(pos - base),
                             (unsigned long long)(order[i]->data - base));
            pos = order[i]->data + order[i]->nbytes;
        }
        if (!rc && (uint64_t)(pos - base) != data_size)
            rc = set_err(err, errlen,
                         "%s: data area is %llu bytes but the tensors cover %llu (trailing bytes or wrong header)",
                         path, (unsigned long long)data_size, (unsigned long long)(pos - base));
    }
    free(order);
    return rc;
}

int st_open(StFile *f, const char *path, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    const uint8_t *m;
    size_t size;
    if (map_file_ro(path, &m, &size, err, errlen)) return -1;
    if (size < 8) {
        if (m) munmap((void *)m, size);
        return set_err(err, errlen, "%s: %zu bytes is too short for a safetensors file (truncated?)", path, size);
    }
    f->map = (uint8_t *)m;
    f->map_size = size;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | f->map[i];
    if (hlen > size - 8) {
        st_close(f);
        return set_err(err, errlen, "%s: header length %llu exceeds the file size %zu (truncated or not safetensors)",
                       path, (unsigned long long)hlen, size);
    }
    if (hlen > ST_MAX_HEADER) {
        st_close(f);
        return set_err(err, errlen, "%s: header length %llu is over the 100 MB limit (corrupt?)", path,
                       (unsigned long long)hlen);
    }
    if (hlen < 2 || f->map[8] != '{') {
        st_close(f);
        return set_err(err, errlen, "%s: header does not start with '{' (not a safetensors file)", path);
    }
    if (parse_header(f, path, (const char *)f->map + 8, (size_t)hlen, f->map + 8 + hlen, size - 8 - hlen, err,
                     errlen)) {
        st_close(f);
        return -1;
    }
    return 0;
}

const StTensor *st_find(const StFile *f, const char *name) {
    for (int i = 0; i < f->ntensors; i++)
        if (!strcmp(f->tensors[i].name, name)) return &f->tensors[i];
    return NULL;
}

const char *st_meta(const StFile *f, const char *key) {
    for (int i = 0; i < f->nmeta; i++)
        if (!strcmp(f->meta_keys[i], key)) return f->meta_vals[i];
    return NULL;
}

int st_to_f32(const StTensor *t, float *out, char *err, size_t errlen) {
    const uint8_t *p = t->data;
    switch (t->dtype) {
    case ST_F32: memcpy(out, p, t->numel * 4); return 0; // little-endian host assumed (x86/aarch64)
    case ST_BF16:
        for (uint64_t i = 0; i < t->numel; i++) out[i] = bf16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        return 0;
    case ST_F16:
        for (uint64_t i = 0; i < t->numel; i++) out[i] = f16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        return 0;
    default:
        return set_err(err, errlen, "tensor '%s' has dtype %s; expected F32, BF16 or F16", t->name,
                       st_dtype_name(t->dtype));
    }
}

// ---------------------------------------------------------------------------------------------
// writer

typedef struct {
    char *name;
    StDtype dtype;
    int ndim;
    int64_t shape[8];
    const void *data; // raw bytes in `dtype`, or
    const float *f32; // fp32 source converted to `dtype` at save time
    uint64_t numel;
} StEntry;

struct StWriter {
    StEntry *e;
    int n, cap;
    char **mk, **mv;
    int nm, mcap;
    char bad[ERR_LEN]; // first misuse seen by add(), reported by save()
};

StWriter *st_writer_new(void) { return xcalloc(1, sizeof(StWriter)); }

static StEntry *writer_push(StWriter *w, const char *name, StDtype dtype, int ndim, const int64_t *shape) {
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 64;
        w->e = xrealloc(w->e, (size_t)w->cap * sizeof *w->e);
    }
    StEntry *e = &w->e[w->n++];
    memset(e, 0, sizeof *e);
    e->name = xstrdup(name);
    e->dtype = dtype;
    if (ndim < 0 || ndim > 8) {
        if (!w->bad[0]) snprintf(w->bad, sizeof w->bad, "tensor '%s': %d dimensions (0..8 supported)", name, ndim);
        ndim = 0;
    }
    e->ndim = ndim;
    e->numel = 1;
    for (int i = 0; i < ndim; i++) {
        e->shape[i] = shape[i];
        if (shape[i] < 0 && !w->bad[0]) snprintf(w->bad, sizeof w->bad, "tensor '%s': negative dimension", name);
        e->numel *= (uint64_t)(shape[i] < 0 ? 0 : shape[i]);
    }
    if (!st_dtype_size(dtype) && !w->bad[0])
        snprintf(w->bad, sizeof w->bad, "tensor '%s': invalid dtype %d", name, (int)dtype);
    return e;
}

void st_writer_add(StWriter *w, const char *name, StDtype dtype, int ndim, const int64_t *shape, const void *data) {
    writer_push(w, name, dtype, ndim, shape)->data = data;
}

void st_writer_add_f32_as(StWriter *w, const char *name, StDtype dtype, int ndim, const int64_t *shape,
                          const float *data) {
    if (dtype != ST_F32 && dtype != ST_BF16 && dtype != ST_F16 && !w->bad[0])
        snprintf(w->bad, sizeof w->bad, "tensor '%s': fp32 data can be stored as F32, BF16 or F16, not %s", name,
                 st_dtype_name(dtype));
    writer_push(w, name, dtype, ndim, shape)->f32 = data;
}

void st_writer_meta(StWriter *w, const char *key, const char *value) {
    for (int i = 0; i < w->nm; i++)
        if (!strcmp(w->mk[i], key)) {
            free(w->mv[i]);
            w->mv[i] = xstrdup(value);
            return;
        }
    if (w->nm == w->mcap) {
        w->mcap = w->mcap ? 2 * w->mcap : 16;
        w->mk = xrealloc(w->mk, (size_t)w->mcap * sizeof(char *));
        w->mv = xrealloc(w->mv, (size_t)w->mcap * sizeof(char *));
    }
    w->mk[w->nm] = xstrdup(key);
    w->mv[w->nm++] = xstrdup(value);
}

void st_writer_free(StWriter *w) {
    if (!w) return;
    for (int i = 0; i < w->n; i++) free(w->e[i].name);
    for (int i = 0; i < w->nm; i++) {
        free(w->mk[i]);
        free(w->mv[i]);
    }
    free(w->e);
    free(w->mk);
    free(w->mv);
    free(w);
}

static void json_str(Buf *b, const char *s) {
    buf_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            buf_put(b, "\\", 1);
            buf_put(b, p, 1);
        } else if (*p == '\n')
            buf_puts(b, "\\n");
        else if (*p == '\t')
            buf_puts(b, "\\t");
        else if (*p == '\r')
            buf_puts(b, "\\r");
        else if (*p < 0x20)
            buf_printf(b, "\\u%04x", *p);
        else
            buf_put(b, p, 1);
    }
    buf_put(b, "\"", 1);
}

static int write_entry_data(AtomicFile *af, const StEntry *e) {
    size_t es = st_dtype_size(e->dtype);
    if (e->data || e->numel == 0) return e->numel ? atomic_write(af, e->data, e->numel * es) : 0;
    if (e->dtype == ST_F32) return atomic_write(af, e->f32, e->numel * 4);
    enum { CHUNK = 1 << 16 };
    uint8_t tmp[CHUNK * 2];
    for (uint64_t i = 0; i < e->numel; i += CHUNK) {
        uint64_t m = e->numel - i < CHUNK ? e->numel - i : CHUNK;
        for (uint64_t j = 0; j < m; j++) {
            uint16_t h = e->dtype == ST_BF16 ? f32_to_bf16(e->f32[i + j]) : f32_to_f16(e->f32[i + j]);
            tmp[2 * j] = (uint8_t)h;
            tmp[2 * j + 1] = (uint8_t)(h >> 8);
        }
        if (atomic_write(af, tmp, m * 2)) return -1;
    }
    return 0;
}

int st_writer_save(StWriter *w, const char *path, char *err, size_t errlen) {
    if (w->bad[0]) return set_err(err, errlen, "%s: %s", path, w->bad);
    for (int i = 0; i < w->n; i++) {
        if (!strcmp(w->e[i].name, "__metadata__")) return set_err(err, errlen, "%s: '__metadata__' is reserved", path);
        if (!w->e[i].data && !w->e[i].f32 && w->e[i].numel)
            return set_err(err, errlen, "%s: tensor '%s' has no data", path, w->e[i].name);
        for (int j = 0; j < i; j++)
            if (!strcmp(w->e[i].name, w->e[j].name))
                return set_err(err, errlen, "%s: tensor '%s' added twice", path, w->e[i].name);
    }
    Buf h = {0};
    buf_puts(&h, "{");
    int first = 1;
    if (w->nm) {
        buf_puts(&h, "\"__metadata__\":{");
        for (int i = 0; i < w->nm; i++) {
            if (i) buf_puts(&h, ",");
            json_str(&h, w->mk[i]);
            buf_puts(&h, ":");
            json_str(&h, w->mv[i]);
        }
        buf_puts(&h, "}");
        first = 0;
    }
    uint64_t off = 0;
    for (int i = 0; i < w->n; i++) {
        const StEntry *e = &w->e[i];
        if (!first) buf_puts(&h, ",");
        first = 0;
        json_str(&h, e->name);
        buf_printf(&h, ":{\"dtype\":\"%s\",\"shape\":[", st_dtype_name(e->dtype));
        for (int k = 0; k < e->ndim; k++) buf_printf(&h, k ? ",%lld" : "%lld", (long long)e->shape[k]);
        uint64_t nb = e->numel * st_dtype_size(e->dtype);
        buf_printf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off, (unsigned long long)(off + nb));
        off += nb;
    }
    buf_puts(&h, "}");
    while (h.n % 8) buf_put(&h, " ", 1); // the data area starts 8-byte aligned
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)h.n >> (8 * i));

    AtomicFile af;
    if (atomic_open(&af, path, err, errlen)) {
        buf_free(&h);
        return -1;
    }
    int bad = atomic_write(&af, len8, 8) || atomic_write(&af, h.p, h.n);
    for (int i = 0; i < w->n && !bad; i++) bad = write_entry_data(&af, &w->e[i]);
    buf_free(&h);
    if (bad) {
        set_err(err, errlen, "error writing %s: %s", af.tmp, strerror(errno));
        atomic_abort(&af);
        return -1;
    }
    return atomic_commit(&af, err, errlen);
}
