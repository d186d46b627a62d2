// pickle_vm.c: pickle values and the pickle virtual machine (protocols 0-5, the opcodes torch.save emits),
// with torch's tensor rebuild and persistent storages (torch_pickle.h). Every argument is bounds-checked.
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

char *tp_mem_dup(const void *p, size_t n) {
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
const char *tp_dtype_storage(TorchDtype t) { return (unsigned)t <= TD_BOOL ? dtype_info[t].storage : "?"; }

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
    return tp_mem_dup(s, (size_t)(nl - s));
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
    v->s = tp_mem_dup(p, n);
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

