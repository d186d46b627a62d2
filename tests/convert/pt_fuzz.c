// pt_fuzz.c: random mutations of a torch.save file must give errors, never crashes or out-of-bounds reads
// (built with AddressSanitizer by tests/t_convert_st_asan.sh).
//   - the pickle program alone (data.pkl bytes mutated, truncated, spliced) through pickle_loads
//   - the whole file (zip headers, central directory, data) through torch_load + torch_tensor_to_f32
//   - a hand-made pickle whose tensor view overflows 64-bit index arithmetic
// Usage: pt_fuzz FILE.pt ITERATIONS
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "io/torch_pickle.h"
#include "util/common.h"

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint64_t next_u64(void) {
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Touches every tensor reachable from v (bounded depth: memo references can make cycles).
static int walk(TorchFile *tf, const PyVal *v, int depth, int *ntensors) {
    if (depth > 8 || !v) return 0;
    if (v->kind == PY_TENSOR) {
        uint64_t n = torch_tensor_numel(v);
        if (n > (1u << 24)) return 0; // a mutated shape may claim terabytes; the bounds check is the point
        float *out = xmalloc((size_t)(n ? n : 1) * sizeof(float));
        char err[ERR_LEN];
        if (torch_tensor_to_f32(tf, v, out, err, sizeof err) == 0) ++*ntensors;
        free(out);
        return 0;
    }
    for (int i = 0; i < v->n; i++) walk(tf, v->items[i], depth + 1, ntensors);
    if (v->kind == PY_OBJ) {
        walk(tf, v->args, depth + 1, ntensors);
        walk(tf, v->state, depth + 1, ntensors);
    }
    return 0;
}

static const uint8_t opcodes[] =
    "(.0123NJKMX}]tlduseabcqrhjRQG)\x80\x85\x86\x87\x88\x89\x8a\x8b\x8c\x8f\x90\x93\x94\x95";

// A view whose extent overflows 64 bits ((5-1) x 2^62 twice wraps to 0) must be refused, not read.
static void overflow_view(void) {
    static const char head[] = "\x80\x02"
                               "ctorch._utils\n_rebuild_tensor_v2\n(" // PROTO 2, GLOBAL, MARK
                               "(X\x07\0\0\0storage"
                               "ctorch\nFloatStorage\n" // persistent id tuple
                               "X\x01\0\0\0"
                               "0"
                               "X\x03\0\0\0cpu"
                               "K\x04"
                               "tQ" // key '0', 'cpu', 4 elements
                               "K\x00"
                               "(K\x05K\x05t"; // offset 0, size (5, 5)
    static const char tail[] = "\x89"
                               "ccollections\nOrderedDict\n)R"
                               "tR."; // False, hooks, REDUCE, STOP
    const uint8_t big[10] = {0x8a, 8, 0, 0, 0, 0, 0, 0, 0, 0x40}; // LONG1 2^62
    Buf b = {0};
    buf_put(&b, head, sizeof head - 1);
    buf_put(&b, "(", 1);
    buf_put(&b, big, 10);
    buf_put(&b, big, 10);
    buf_put(&b, "t", 1); // stride (2^62, 2^62)
    buf_put(&b, tail, sizeof tail - 1);
    char err[ERR_LEN] = "";
    PyArena *a = NULL;
    PyVal *t = pickle_loads((const uint8_t *)b.p, b.n, &a, err, sizeof err);
    if (!t || t->kind != PY_TENSOR) die("overflow case: crafted pickle did not give a tensor: %s", err);
    TorchFile tf;
    memset(&tf, 0, sizeof tf);
    float out[4];
    if (torch_tensor_to_f32(&tf, t, out, err, sizeof err) == 0 || !strstr(err, "past its 4-element storage"))
        die("overflow case: 64-bit wrapping view accepted (%s)", err);
    printf("wrapping view refused: %s\n", err);
    py_arena_free(a);
    buf_free(&b);
}

int main(int argc, char **argv) {
    if (argc != 3) die("usage: pt_fuzz FILE.pt ITERATIONS");
    int iters = atoi(argv[2]);
    overflow_view();
    char err[ERR_LEN], mut[600];
    int memfd = memfd_create("mut.pt", 0); // in memory: thousands of file rewrites on disk are slow
    if (memfd < 0) die("memfd_create failed");
    snprintf(mut, sizeof mut, "/proc/self/fd/%d", memfd);
    size_t len;
    uint8_t *orig = (uint8_t *)read_file(argv[1], &len, err, sizeof err);
    if (!orig) die("%s", err);
    TorchFile tf;
    if (torch_load(&tf, argv[1], err, sizeof err)) die("valid input refused: %s", err);
    int base_tensors = 0;
    walk(&tf, tf.root, 0, &base_tensors);
    char pkl_name[300];
    snprintf(pkl_name, sizeof pkl_name, "%sdata.pkl", tf.prefix);
    const ZipEntry *pe = zip_find(&tf.zip, pkl_name);
    const uint8_t *pkl0;
    int owned;
    if (!pe || zip_data(&tf.zip, pe, &pkl0, &owned, err, sizeof err)) die("no data.pkl: %s", err);
    size_t plen = (size_t)pe->usize;
    uint8_t *pkl = xmalloc(plen);
    memcpy(pkl, pkl0, plen);
    torch_close(&tf);
    printf("%s: %d tensors, data.pkl %zu bytes; %d mutations of each kind\n", argv[1], base_tensors, plen, iters);

    int ok_pickle = 0, ok_file = 0;
    for (int it = 0; it < iters; it++) {
        // 1. the pickle program
        uint8_t *m = xmalloc(plen);
        memcpy(m, pkl, plen);
        size_t n = plen;
        int kind = (int)(next_u64() % 3);
        if (kind == 0) n = (size_t)(next_u64() % plen);
        for (int k = 0, flips = 1 + (int)(next_u64() % 3); k < flips; k++) {
            size_t at = n ? (size_t)(next_u64() % n) : 0;
            if (at < n) m[at] = kind == 2 ? opcodes[next_u64() % (sizeof opcodes - 1)] : (uint8_t)next_u64();
        }
        PyArena *a = NULL;
        PyVal *v = pickle_loads(m, n, &a, err, sizeof err);
        if (v)
            ok_pickle++;
        else if (!err[0])
            die("pickle failure without a message");
        py_arena_free(a);
        free(m);
        // 2. the whole file: headers and directory are where the offsets live
        m = xmalloc(len);
        memcpy(m, orig, len);
        n = len;
        kind = (int)(next_u64() % 3);
        if (kind == 0) n = (size_t)(next_u64() % len);
        for (int k = 0, flips = 1 + (int)(next_u64() % 4); k < flips; k++) {
            size_t at =
                kind == 1 ? len - 1 - (size_t)(next_u64() % (len < 2048 ? len : 2048)) : (size_t)(next_u64() % len);
            if (at < n) m[at] = (uint8_t)next_u64();
        }
        if (ftruncate(memfd, 0) || ftruncate(memfd, (off_t)n) || pwrite(memfd, m, n, 0) != (ssize_t)n)
            die("memfd write failed");
        free(m);
        if (torch_load(&tf, mut, err, sizeof err) == 0) {
            int nt = 0;
            walk(&tf, tf.root, 0, &nt);
            ok_file++;
            torch_close(&tf);
        } else if (!err[0])
            die("torch_load failure without a message");
    }
    free(pkl);
    if (owned) free((void *)pkl0);
    free(orig);
    close(memfd);
    printf("pickle mutations still parsing: %d/%d; file mutations still loading: %d/%d; no crash\n", ok_pickle, iters,
           ok_file, iters);
    return 0;
}
