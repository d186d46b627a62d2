// test_cuda_ops.c: every op of the CUDA backend against its CPU twin (backend_cpu()), in the fp32 debug
// mode and in bf16 mode, on random inputs from each op's real domain.
//
// For each case and mode: the inputs are uploaded through the Backend API (act tensors via to_act),
// each output buffer is prefilled (NaN for overwritten outputs, the initial values for += outputs) and
// framed by 256 guard bytes on each side; after the op the guards, the untouched gap columns of strided
// outputs and the unchanged inputs are checked, NaN/Inf are reported by index, and
//     error = max |cuda - cpu| / max |cpu|
// over each output is compared with the tolerance table below (each bound states its reason). In bf16
// mode the CPU reference runs on the same bf16-rounded act inputs, so the error measures the op's own
// roundings only. Every case is run twice on the GPU and compared bit for bit (determinism).
// One line per (case, mode); exit status 1 on any failure, 2 when no usable GPU is found.
//
//   test_cuda_ops            all cases (small shapes plus a few at the 300M model's sizes)
//   test_cuda_ops --quick    small shapes only (the CPU emulator, tests/gpu/emu_check.sh, uses this)
//   test_cuda_ops --only OP  cases whose op name contains OP
//   test_cuda_ops --bench    time each op at the 300M shapes (bf16) and print time, rate and floor
//   test_cuda_ops --bench-small   the same code at tiny shapes (checks its arguments, e.g. in the emulator)
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/backend.h"
#include "util/common.h"

// ===================================================================================================
// tolerances: relative to max |reference| of the output

typedef struct {
    float tol;
    const char *why;
} Tol;

// fp32 mode
static const Tol F32_EXACT = {0.0f, "exact: the same fp32 operations in the same order as the CPU twin"};
static const Tol F32_ORDER = {1e-5f, "fp32 with a different summation order (trees, tiles vs sequential loops)"};
static const Tol F32_GEMM = {1e-5f, "fp32 GEMM (no TF32): summation order differs, ~sqrt(K) ulps of the row norm"};
static const Tol F32_CHAIN = {2e-5f, "fp32, 64-term block products chained across chunks in a different order"};
static const Tol F32_SUM = {1e-6f, "double sums in a different order, rounded to fp32 (<= 1 ulp)"};
// bf16 mode (inputs identical to the reference's; only the op's own roundings count)
static const Tol B16_EXACT = {0.0f, "exact: bf16 values copied, or fp32 additions in the CPU's order"};
static const Tol B16_STORE = {5e-3f, "one bf16 rounding of the output: <= 2^-8 (3.9e-3) of the element, so of "
                                     "max |ref|, plus fp32-order noise"};
static const Tol B16_FP32 = {1e-5f, "fp32 output computed in fp32 from the same inputs: as the fp32 mode"};
static const Tol B16_GEMM32 = {1e-4f, "fp32 output of a bf16 tensor-core GEMM: fp32 accumulation, order and "
                                      "internal alignment differ from a sequential sum"};
static const Tol B16_DA_SUM = {1e-2f, "sum of bf16-rounded terms (as FLA sums its bf16 da): <= 2^-8 per term"};
static const Tol B16_DELTA = {3e-2f, "passes through 3-6 stored bf16 intermediates (Tm, W, U, V_new, h, gated "
                                     "QK^T, dh, dV_new, dw; spec §2.7), <= 2^-8 each, through the products"};
static const Tol B16_DELTA_F32 = {3e-2f, "fp32 output (dbeta, dgamma, final state) computed from the bf16 "
                                         "intermediates above"};
static const Tol F32_ROPE = {2e-5f, "fp32 RoPE: the device's powf/cosf/sinf vs glibc's, a few ulps of angles up to "
                                    "~300 rad"};
static const Tol B16_ROPE = {1e-2f, "bf16 cos/sin tables (as FLA caches them) vs the CPU's fp32 ones, <= 2^-9 each, "
                                    "plus one bf16 rounding of the output"};
static const Tol B16_FLASH = {1e-2f, "FlashAttention-2's bf16 roundings of P (for P V, P^T dO) and dS (for dQ, dK), "
                                     "<= 2^-9 each, plus one bf16 rounding of the output"};
static const Tol B16_CE = {1e-2f, "bf16 logits (as FLA's lm_head gives) and bf16 dlogits feed the GEMMs"};

// ===================================================================================================
// random numbers (splitmix64)

typedef struct {
    uint64_t s;
} Rng;
static uint64_t rng_u64(Rng *g) {
    uint64_t z = (g->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float rng_uniform(Rng *g, float lo, float hi) { return lo + (hi - lo) * (float)((rng_u64(g) >> 40) * 0x1p-24); }
static float rng_normal(Rng *g) {
    double u1 = ((rng_u64(g) >> 11) + 1) * 0x1p-53, u2 = (rng_u64(g) >> 11) * 0x1p-53;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

// ===================================================================================================
// cases

enum { GUARD = 256, MAXT = 16 };
typedef enum { K_ACT, K_F32, K_I32 } Kind;
typedef enum { R_IN, R_OUT, R_ACC } Role; // input; overwritten output; += / in-out

typedef struct {
    const char *name;
    Kind kind;
    Role role;
    size_t rows, cols, ld; // logical rows x cols, row stride ld (elements); storage rows * ld
    float *init;           // IN/ACC initial values [rows*ld] (K_F32, K_ACT)
    int32_t *init_i;       // K_I32 values
    int is_null;           // pass NULL
    int round_ref;         // bf16 mode: compare with the reference rounded to bf16 (exact copies of fp32 results)
    Tol t32, t16;
} Tensor;

struct Case;
typedef void (*RunFn)(const Backend *be, void **p, const struct Case *c);
typedef struct Case {
    char name[160];
    const char *op;
    RunFn run;
    int nt;
    Tensor t[MAXT];
    int i[16];
    float f[8];
    int determinism; // run twice, compare bitwise (every case; kept per case for experiments)
    int big;         // 300M-sized: skipped by --quick
    int alias[MAXT]; // alias[x] = y: tensor x is the same buffer as tensor y (x > y)
} Case;

static Case *g_cases;
static int g_ncases, g_capcases;

static Case *new_case(const char *op, RunFn run, const char *fmt, ...) {
    if (g_ncases == g_capcases) {
        g_capcases = g_capcases ? 2 * g_capcases : 64;
        g_cases = xrealloc(g_cases, (size_t)g_capcases * sizeof *g_cases);
    }
    Case *c = &g_cases[g_ncases++];
    memset(c, 0, sizeof *c);
    for (int x = 0; x < MAXT; x++) c->alias[x] = -1;
    c->determinism = 1;
    c->op = op;
    c->run = run;
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(c->name, sizeof c->name, "%s ", op);
    vsnprintf(c->name + n, sizeof c->name - n, fmt, ap);
    va_end(ap);
    return c;
}

static Tensor *add_t(Case *c, const char *name, Kind kind, Role role, size_t rows, size_t cols, size_t ld, Tol t32,
                     Tol t16) {
    if (c->nt == MAXT) die("test: too many tensors in case %s", c->name);
    Tensor *t = &c->t[c->nt++];
    memset(t, 0, sizeof *t);
    t->name = name, t->kind = kind, t->role = role, t->rows = rows, t->cols = cols, t->ld = ld ? ld : cols;
    t->t32 = t32, t->t16 = t16;
    if (role != R_OUT) {
        if (kind == K_I32)
            t->init_i = xcalloc(rows * t->ld + 1, sizeof(int32_t));
        else
            t->init = xcalloc(rows * t->ld + 1, sizeof(float));
    }
    return t;
}
static Tensor *add_in(Case *c, const char *name, Kind kind, size_t rows, size_t cols, size_t ld) {
    return add_t(c, name, kind, R_IN, rows, cols, ld, F32_EXACT, B16_EXACT);
}
static size_t tsize(const Tensor *t) { return t->rows * t->ld; }

static void fill_normal(Tensor *t, Rng *g, float mean, float std) {
    for (size_t x = 0; x < tsize(t); x++) t->init[x] = mean + std * rng_normal(g);
}
static void fill_uniform(Tensor *t, Rng *g, float lo, float hi) {
    for (size_t x = 0; x < tsize(t); x++) t->init[x] = rng_uniform(g, lo, hi);
}
// Unit L2 norm per head vector of d elements (columns [i*d, (i+1)*d) of each row).
static void normalise_heads(Tensor *t, int heads, int d) {
    for (size_t r = 0; r < t->rows; r++)
        for (int i = 0; i < heads; i++) {
            float *v = t->init + r * t->ld + (size_t)i * d;
            double ss = 0;
            for (int e = 0; e < d; e++) ss += (double)v[e] * v[e];
            float inv = (float)(1.0 / sqrt(ss + 1e-6));
            for (int e = 0; e < d; e++) v[e] *= inv;
        }
}
static float round_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }

// ===================================================================================================
// running a case on one backend

typedef struct {
    char *base;
    void *p;
    size_t bytes;
} DBuf;

typedef struct {
    float *val[MAXT]; // converted to fp32, [rows*ld]
    unsigned char *raw[MAXT];
    size_t raw_bytes[MAXT];
    char err[512]; // harness-detected problem (guards, gaps, changed inputs)
} Result;

static size_t elem_bytes(const Backend *be, Kind k) { return k == K_ACT ? (size_t)be->act_bytes : 4; }

static DBuf dbuf_alloc(const Backend *be, size_t bytes) {
    DBuf d;
    d.bytes = bytes;
    d.base = be->alloc(bytes + 2 * GUARD);
    d.p = d.base + GUARD;
    unsigned char pat[GUARD];
    memset(pat, 0xa5, GUARD);
    be->memcpy_h2d(d.base, pat, GUARD);
    be->memcpy_h2d(d.base + GUARD + bytes, pat, GUARD);
    return d;
}
static int dbuf_guards_ok(const Backend *be, const DBuf *d) {
    unsigned char a[GUARD], b[GUARD];
    be->memcpy_d2h(a, d->base, GUARD);
    be->memcpy_d2h(b, d->base + GUARD + d->bytes, GUARD);
    for (int x = 0; x < GUARD; x++)
        if (a[x] != 0xa5 || b[x] != 0xa5) return 0;
    return 1;
}
// fp32 host values -> act buffer (through to_act) or fp32 buffer
static void upload(const Backend *be, void *dst, Kind kind, const float *host_f, const int32_t *host_i, size_t n) {
    if (kind == K_I32) {
        be->memcpy_h2d(dst, host_i, n * 4);
    } else if (kind == K_F32) {
        be->memcpy_h2d(dst, host_f, n * 4);
    } else {
        float *tmp = be->alloc(n * 4);
        be->memcpy_h2d(tmp, host_f, n * 4);
        be->to_act(dst, tmp, n);
        be->sync();
        be->free(tmp);
    }
}
static void download(const Backend *be, float *host, const void *src, Kind kind, size_t n) {
    if (kind != K_ACT) {
        be->memcpy_d2h(host, src, n * 4);
        return;
    }
    float *tmp = be->alloc(n * 4);
    be->from_act(tmp, src, n);
    be->memcpy_d2h(host, tmp, n * 4);
    be->free(tmp);
}

static void result_free(Result *r) {
    for (int x = 0; x < MAXT; x++) free(r->val[x]), free(r->raw[x]);
    memset(r, 0, sizeof *r);
}

// Runs c on be. round_act: the act inputs are bf16-rounded first (the reference for the bf16 mode).
static void run_case(const Backend *be, const Case *c, int round_act, Result *res) {
    memset(res, 0, sizeof *res);
    DBuf buf[MAXT];
    void *ptr[MAXT];
    float *sent[MAXT]; // the values uploaded (after rounding)
    memset(buf, 0, sizeof buf);
    for (int x = 0; x < c->nt; x++) {
        const Tensor *t = &c->t[x];
        sent[x] = NULL;
        ptr[x] = NULL;
        if (t->is_null) continue;
        if (c->alias[x] >= 0) {
            ptr[x] = ptr[c->alias[x]];
            continue;
        }
        size_t n = tsize(t);
        buf[x] = dbuf_alloc(be, n * elem_bytes(be, t->kind));
        ptr[x] = buf[x].p;
        if (t->role == R_OUT) {
            unsigned char *ff = xmalloc(buf[x].bytes);
            memset(ff, 0xff, buf[x].bytes); // NaN in fp32 and bf16
            be->memcpy_h2d(buf[x].p, ff, buf[x].bytes);
            free(ff);
        } else if (t->kind == K_I32) {
            upload(be, buf[x].p, K_I32, NULL, t->init_i, n);
        } else {
            sent[x] = xmalloc(n * sizeof(float));
            // act values as they will be stored: bf16-rounded for the reference of the bf16 mode and on a
            // bf16 backend (to_act rounds them)
            int rnd = t->kind == K_ACT && (round_act || be->act_bytes == 2);
            for (size_t e = 0; e < n; e++) sent[x][e] = rnd ? round_bf16(t->init[e]) : t->init[e];
            upload(be, buf[x].p, t->kind, sent[x], NULL, n);
        }
    }
    c->run(be, ptr, c);
    be->sync();
    for (int x = 0; x < c->nt; x++) {
        const Tensor *t = &c->t[x];
        if (t->is_null || c->alias[x] >= 0) continue;
        size_t n = tsize(t);
        if (!dbuf_guards_ok(be, &buf[x]) && !res->err[0])
            snprintf(res->err, sizeof res->err, "%s: guard bytes around the buffer were overwritten", t->name);
        res->raw_bytes[x] = buf[x].bytes;
        res->raw[x] = xmalloc(buf[x].bytes);
        be->memcpy_d2h(res->raw[x], buf[x].p, buf[x].bytes);
        if (t->kind == K_I32) continue;
        res->val[x] = xmalloc(n * sizeof(float));
        download(be, res->val[x], buf[x].p, t->kind, n);
        // inputs unchanged (unless another tensor aliases them)
        int aliased = 0;
        for (int y = 0; y < c->nt; y++) aliased |= c->alias[y] == x;
        if (t->role == R_IN && !aliased && !res->err[0])
            for (size_t e = 0; e < n; e++)
                if (memcmp(&res->val[x][e], &sent[x][e], 4) && !(isnan(res->val[x][e]) && isnan(sent[x][e]))) {
                    snprintf(res->err, sizeof res->err, "input %s changed at element %zu (%g -> %g)", t->name, e,
                             sent[x][e], res->val[x][e]);
                    break;
                }
        // gap columns of strided outputs untouched
        if (t->role != R_IN && t->ld > t->cols && !res->err[0])
            for (size_t r = 0; r < t->rows && !res->err[0]; r++)
                for (size_t col = t->cols; col < t->ld; col++) {
                    float got = res->val[x][r * t->ld + col];
                    int ok = t->role == R_OUT ? isnan(got) : !memcmp(&got, &sent[x][r * t->ld + col], 4);
                    if (!ok) {
                        snprintf(res->err, sizeof res->err,
                                 "%s: gap column %zu of row %zu (outside the op's %zu "
                                 "columns) was written",
                                 t->name, col, r, t->cols);
                        break;
                    }
                }
    }
    for (int x = 0; x < c->nt; x++) {
        if (buf[x].base) be->free(buf[x].base);
        free(sent[x]);
    }
}

// Max |got - ref| / max |ref| over the rows x cols elements; NaN/Inf reported by index.
static double compare(const Tensor *t, const float *ref, const float *got, char *detail, size_t dlen) {
    double maxref = 0, maxdiff = 0;
    size_t worst = 0;
    for (size_t r = 0; r < t->rows; r++)
        for (size_t col = 0; col < t->cols; col++) {
            size_t e = r * t->ld + col;
            if (!isfinite(ref[e])) {
                snprintf(detail, dlen, "%s: the CPU reference is %g at row %zu col %zu", t->name, ref[e], r, col);
                return INFINITY;
            }
            if (!isfinite(got[e])) {
                snprintf(detail, dlen, "%s: %g at row %zu col %zu (reference %g)", t->name, got[e], r, col, ref[e]);
                return INFINITY;
            }
            if (fabs(ref[e]) > maxref) maxref = fabs(ref[e]);
            double d = fabs((double)got[e] - ref[e]);
            if (d > maxdiff) maxdiff = d, worst = e;
        }
    double err = maxdiff / (maxref > 0 ? maxref : 1.0);
    snprintf(detail, dlen, "%s: worst at row %zu col %zu: %.8g vs reference %.8g (max |ref| %.4g)", t->name,
             worst / t->ld, worst % t->ld, got[worst], ref[worst], maxref);
    return err;
}

static int g_failures, g_checks;
static char g_running[200]; // the case being run: named if the backend dies during it
static void report_abort(void) {
    if (g_running[0])
        fprintf(stderr,
                "test_cuda_ops: ABORTED during %s; the cases after it did not run (rerun with --only to "
                "skip ahead, GDN_CUDA_DEBUG=1 to name the failing kernel)\n",
                g_running);
}

static void check_case(const Case *c, const Backend *cpu, const Backend *gpu, int bf16) {
    Result ref, got, again;
    snprintf(g_running, sizeof g_running, "%s [%s]", c->name, bf16 ? "bf16" : "fp32");
    run_case(cpu, c, bf16, &ref);
    run_case(gpu, c, 0, &got);
    const char *mode = bf16 ? "bf16" : "fp32";
    char worst_detail[512] = "", detail[512];
    double worst_ratio = -1, worst_err = 0, worst_tol = 0;
    const char *worst_name = "-";
    int fail = 0;
    char why[600] = "";
    if (ref.err[0]) {
        fail = 1;
        snprintf(why, sizeof why, "CPU reference run: %s", ref.err);
    }
    if (got.err[0]) {
        fail = 1;
        snprintf(why, sizeof why, "%s", got.err);
    }
    for (int x = 0; x < c->nt && !fail; x++) {
        const Tensor *t = &c->t[x];
        if (t->role == R_IN || t->is_null || t->kind == K_I32 || c->alias[x] >= 0) continue;
        Tol tol = bf16 ? t->t16 : t->t32;
        if (bf16 && t->round_ref)
            for (size_t e = 0; e < tsize(t); e++) ref.val[x][e] = round_bf16(ref.val[x][e]);
        double err = compare(t, ref.val[x], got.val[x], detail, sizeof detail);
        double ratio = tol.tol > 0 ? err / tol.tol : (err > 0 ? INFINITY : 0);
        if (ratio > worst_ratio || !isfinite(err)) {
            worst_ratio = ratio, worst_err = err, worst_tol = tol.tol, worst_name = t->name;
            snprintf(worst_detail, sizeof worst_detail, "%s", detail);
        }
        if (!(err <= tol.tol)) {
            fail = 1;
            snprintf(why, sizeof why, "%s (tolerance %.1e: %s)", detail, tol.tol, tol.why);
        }
    }
    for (int x = 0; x < c->nt && !fail; x++) { // integer outputs (indices) must match exactly
        const Tensor *t = &c->t[x];
        if (t->role == R_IN || t->is_null || t->kind != K_I32 || c->alias[x] >= 0) continue;
        const int32_t *a = (const int32_t *)ref.raw[x], *b = (const int32_t *)got.raw[x];
        for (size_t e = 0; e < tsize(t); e++)
            if (a[e] != b[e]) {
                fail = 1;
                snprintf(why, sizeof why, "%s[%zu] = %d, the CPU twin gives %d (integers must match exactly)", t->name, e,
                         b[e], a[e]);
                break;
            }
    }
    if (!fail && c->determinism) {
        run_case(gpu, c, 0, &again);
        for (int x = 0; x < c->nt && !fail; x++)
            if (got.raw[x] && c->t[x].role != R_IN && memcmp(got.raw[x], again.raw[x], got.raw_bytes[x])) {
                fail = 1;
                snprintf(why, sizeof why, "%s differs between two identical runs (not deterministic)", c->t[x].name);
            }
        result_free(&again);
    }
    g_checks++;
    if (fail) g_failures++;
    printf("%s %-62s %s  max err %.2e (%s) tol %.1e%s\n", fail ? "FAIL" : "PASS", c->name, mode, worst_err, worst_name,
           worst_tol, c->determinism && !fail ? "  deterministic" : "");
    if (fail)
        printf("     %s\n", why);
    else if (getenv("VERBOSE"))
        printf("     %s\n", worst_detail);
    fflush(stdout);
    result_free(&ref);
    result_free(&got);
    g_running[0] = 0;
}

// ===================================================================================================
// op wrappers: p[] holds the tensors in the order they were added

#define ACT(x) ((char *)(x))

static void run_embedding_fwd(const Backend *be, void **p, const Case *c) {
    be->embedding_fwd(p[2], p[0], p[1], c->i[0], c->i[1]);
}
static void run_embedding_bwd(const Backend *be, void **p, const Case *c) {
    be->embedding_bwd(p[2], p[1], p[0], c->i[0], c->i[1], c->i[2]);
}
static void run_rmsnorm_fwd(const Backend *be, void **p, const Case *c) {
    // x, resid, w, y, rstd, s_out
    be->rmsnorm_fwd(p[3], p[4], p[5], p[0], p[1], p[2], c->i[0], c->i[1], c->f[0]);
}
static void run_rmsnorm_bwd(const Backend *be, void **p, const Case *c) {
    // dy, s, rstd, w, dres, ds, dw
    be->rmsnorm_bwd(p[5], p[6], p[0], p[1], p[2], p[3], p[4], c->i[0], c->i[1]);
}
static void run_matmul_fwd(const Backend *be, void **p, const Case *c) {
    // x, W, y;  i: M N K ldx ldy acc
    be->matmul_fwd(p[2], c->i[4], p[0], c->i[3], p[1], c->i[0], c->i[1], c->i[2], c->i[5]);
}
static void run_matmul_bias_fwd(const Backend *be, void **p, const Case *c) {
    // x, W, bias, y;  i: M N K ldx ldy
    be->matmul_bias_fwd(p[3], c->i[4], p[0], c->i[3], p[1], p[2], c->i[0], c->i[1], c->i[2]);
}
static void run_matmul_bwd(const Backend *be, void **p, const Case *c) {
    // dy, x, W, dx, dW;  i: M N K lddx lddy ldx acc
    be->matmul_bwd(p[3], c->i[3], p[4], p[0], c->i[4], p[1], c->i[5], p[2], c->i[0], c->i[1], c->i[2], c->i[6]);
}
static void run_conv_fwd(const Backend *be, void **p, const Case *c) {
    // x, w, state_in, y, state_out, doc_start;  i: B T D K ldx ldy
    be->conv_silu_fwd(p[3], c->i[5], p[0], c->i[4], p[1], p[2], p[4], c->i[0], c->i[1], c->i[2], c->i[3], p[5]);
}
static void run_conv_bwd(const Backend *be, void **p, const Case *c) {
    // dy, x, w, dx, dw, doc_start;  i: B T D K lddx lddy ldx
    be->conv_silu_bwd(p[3], c->i[4], p[4], p[0], c->i[5], p[1], c->i[6], p[2], c->i[0], c->i[1], c->i[2], c->i[3],
                      p[5]);
}
static void run_doc_starts(const Backend *be, void **p, const Case *c) {
    // ids, doc_start;  i: B T eod
    be->doc_starts(p[1], p[0], c->i[0], c->i[1], c->i[2]);
}
static void run_l2norm_fwd(const Backend *be, void **p, const Case *c) {
    // x, y, rstd;  i: N heads d ldx ldy
    be->l2norm_fwd(p[1], c->i[4], p[2], p[0], c->i[3], c->i[0], c->i[1], c->i[2]);
}
static void run_l2norm_bwd(const Backend *be, void **p, const Case *c) {
    // dy, y, rstd, dx;  i: N heads d lddy ldy lddx
    be->l2norm_bwd(p[3], c->i[5], p[0], c->i[3], p[1], c->i[4], p[2], c->i[0], c->i[1], c->i[2]);
}
static void run_gate_fwd(const Backend *be, void **p, const Case *c) {
    // ba (b at column 0, a at column HV, row stride ld), A_log, dt_bias, beta, gamma;  i: N HV ld
    int HV = c->i[1];
    be->gate_fwd(p[3], p[4], p[0], ACT(p[0]) + (size_t)HV * be->act_bytes, c->i[2], p[1], p[2], c->i[0], HV);
}
static void run_gate_bwd(const Backend *be, void **p, const Case *c) {
    // ba, A_log, dt_bias, dbeta, dgamma, dba (db at column 0, da at column HV), dA_log, ddt_bias
    int HV = c->i[1];
    size_t off = (size_t)HV * be->act_bytes;
    be->gate_bwd(p[5], ACT(p[5]) + off, c->i[2], p[6], p[7], p[3], p[4], p[0], ACT(p[0]) + off, p[1], p[2], c->i[0],
                 HV);
}
static void run_gated_fwd(const Backend *be, void **p, const Case *c) {
    // o, z, w, y, rstd;  i: N HV dv ldo ldz ldy
    be->gated_rmsnorm_fwd(p[3], c->i[5], p[4], p[0], c->i[3], p[1], c->i[4], p[2], c->i[0], c->i[1], c->i[2], c->f[0]);
}
static void run_gated_bwd(const Backend *be, void **p, const Case *c) {
    // dy, o, z, rstd, w, do, dz, dw;  i: N HV dv lddy ldo ldz lddo lddz
    be->gated_rmsnorm_bwd(p[5], c->i[6], p[6], c->i[7], p[7], p[0], c->i[3], p[1], c->i[4], p[2], c->i[5], p[3], p[4],
                          c->i[0], c->i[1], c->i[2]);
}
static void run_swiglu_fwd(const Backend *be, void **p, const Case *c) { be->swiglu_fwd(p[1], p[0], c->i[0], c->i[1]); }
static void run_swiglu_bwd(const Backend *be, void **p, const Case *c) {
    // dy, gu, dgu (dgu may alias gu via c->alias)
    be->swiglu_bwd(p[2], p[0], p[1], c->i[0], c->i[1]);
}
// p: q, k, v, beta, gamma first (both directions);  i: B T H HV dk dv ldqk ldv;  ds: doc_start or NULL
static DeltaRuleArgs delta_args(void **p, void *h_save, const Case *c, const void *ds) {
    const int *I = c->i;
    return (DeltaRuleArgs){.q = p[0], .k = p[1], .ldqk = I[6], .v = p[2], .ldv = I[7], .beta = p[3], .gamma = p[4],
                           .h_save = h_save, .B = I[0], .T = I[1], .H = I[2], .HV = I[3], .dk = I[4], .dv = I[5],
                           .scale = c->f[0], .doc_start = ds};
}
static void run_delta_fwd(const Backend *be, void **p, const Case *c) {
    // q, k, v, beta, gamma, o, h_save, state, doc_start;  i: ... ldo
    DeltaRuleArgs a = delta_args(p, p[6], c, p[8]);
    be->delta_rule_fwd(&a, p[5], c->i[8], p[7]);
}
static void run_delta_bwd(const Backend *be, void **p, const Case *c) {
    // q, k, v, beta, gamma, dO, h_save, dq, dk, dv, dbeta, dgamma, doc_start;  i: ... lddo lddqk lddv
    DeltaRuleArgs a = delta_args(p, p[6], c, p[12]);
    DeltaRuleGrads g = {.dq = p[7], .dk = p[8], .lddqk = c->i[9], .dv = p[9], .lddv = c->i[10], .dbeta = p[10],
                        .dgamma = p[11]};
    be->delta_rule_bwd(&a, p[5], c->i[8], &g);
}
static void run_attn_qkv_fwd(const Backend *be, void **p, const Case *c) {
    // P, bias, pos, Q, K, V, doc_start;  i: B T Ha Hkv d ldp kvs;  f: theta
    be->attn_qkv_fwd(p[3], p[4], p[5], c->i[6], p[0], c->i[5], p[1], p[2], c->i[0], c->i[1], c->i[2], c->i[3],
                     c->i[4], c->f[0], p[6]);
}
static void run_attn_qkv_bwd(const Backend *be, void **p, const Case *c) {
    // dQ, dK, dV, dP, dbias, doc_start;  i: B T Ha Hkv d lddp
    be->attn_qkv_bwd(p[3], c->i[5], p[4], p[0], p[1], p[2], c->i[0], c->i[1], c->i[2], c->i[3], c->i[4], c->f[0],
                     p[5]);
}
static void run_attn_fwd(const Backend *be, void **p, const Case *c) {
    // Q, K, V, pos, O, lse, doc_start;  i: B T Ha Hkv d window kvs;  f: scale
    be->attn_fwd(p[4], p[5], p[0], p[1], p[2], c->i[6], p[3], c->i[0], c->i[1], c->i[2], c->i[3], c->i[4], c->i[5],
                 c->f[0], p[6]);
}
static void run_attn_bwd(const Backend *be, void **p, const Case *c) {
    // Q, K, V, O, dO, lse, dQ, dK, dV, doc_start;  i: B T Ha Hkv d window;  f: scale
    be->attn_bwd(p[6], p[7], p[8], p[4], p[0], p[1], p[2], p[3], p[5], c->i[0], c->i[1], c->i[2], c->i[3], c->i[4],
                 c->i[5], c->f[0], p[9]);
}
static void run_lmhead_ce(const Backend *be, void **p, const Case *c) {
    // y, E, targets, losses, dy, dE;  i: N h V;  f: loss_scale
    be->lmhead_ce(p[3], p[4], p[5], p[0], p[1], p[2], c->i[0], c->i[1], c->i[2], c->f[0]);
}
static void run_lmhead_logits(const Backend *be, void **p, const Case *c) {
    be->lmhead_logits(p[2], p[0], p[1], c->i[0], c->i[1], c->i[2]);
}
static void run_logits_stats(const Backend *be, void **p, const Case *c) {
    // logits, targets, argmax, logprob;  i: rows V
    be->logits_stats(p[2], p[3], p[0], p[1], c->i[0], c->i[1]);
}
static void run_adamw(const Backend *be, void **p, const Case *c) {
    // p, g, m, v, p_act. In fp32 mode p is the compute copy (the CPU twin requires p_act NULL or p), so the
    // test copies p into p_act afterwards; in bf16 mode the op writes p_act itself.
    void *pact = be->act_bytes == 2 ? p[4] : NULL;
    be->adamw(p[0], pact, p[1], p[2], p[3], (size_t)c->i[0], c->f[0], c->f[1], c->f[2], c->f[3], c->f[4], c->i[1],
              c->f[5]);
    if (!pact) be->memcpy_d2d(p[4], p[0], (size_t)c->i[0] * 4);
}
static void run_sum(const Backend *be, void **p, const Case *c) {
    be->sum(p[1], p[0], (size_t)c->i[0]);
    be->sumsq((float *)p[1] + 1, p[0], (size_t)c->i[0]);
}

// ===================================================================================================
// the case list

static void cases_embedding(Rng *g, int N, int h, int V) {
    Case *c = new_case("embedding_fwd", run_embedding_fwd, "N=%d h=%d V=%d", N, h, V);
    c->i[0] = N, c->i[1] = h;
    Tensor *ids = add_in(c, "ids", K_I32, N, 1, 1);
    for (int n = 0; n < N; n++) ids->init_i[n] = n % 3 == 0 ? 3 : (int)(rng_u64(g) % V); // repeats
    fill_normal(add_in(c, "E", K_ACT, V, h, 0), g, 0, 0.02f);
    add_t(c, "x", K_ACT, R_OUT, N, h, 0, F32_EXACT, B16_EXACT);

    c = new_case("embedding_bwd", run_embedding_bwd, "N=%d h=%d V=%d", N, h, V);
    c->i[0] = N, c->i[1] = h, c->i[2] = V;
    ids = add_in(c, "ids", K_I32, N, 1, 1);
    for (int n = 0; n < N; n++) ids->init_i[n] = n % 3 == 0 ? 3 : (int)(rng_u64(g) % V);
    fill_normal(add_in(c, "dx", K_ACT, N, h, 0), g, 0, 1);
    fill_normal(add_t(c, "dE", K_F32, R_ACC, V, h, 0, F32_EXACT, B16_EXACT), g, 0, 0.1f);
}

static void cases_rmsnorm(Rng *g, int N, int h, int resid, int alias_s, int big) {
    Case *c = new_case("rmsnorm_fwd", run_rmsnorm_fwd, "N=%d h=%d%s", N, h,
                       !resid    ? " no-resid"
                       : alias_s ? " s_out=resid"
                                 : "");
    c->i[0] = N, c->i[1] = h, c->f[0] = 1e-6f, c->big = big;
    fill_normal(add_in(c, "x", K_ACT, N, h, 0), g, 0, 1);
    Tensor *r = add_in(c, "resid", K_ACT, N, h, 0);
    if (resid)
        fill_normal(r, g, 0.5f, 1);
    else
        r->is_null = 1;
    fill_normal(add_in(c, "w", K_F32, 1, h, 0), g, 1, 0.1f);
    add_t(c, "y", K_ACT, R_OUT, N, h, 0, F32_ORDER, B16_STORE);
    add_t(c, "rstd", K_F32, R_OUT, N, 1, 0, F32_ORDER, B16_FP32);
    Tensor *s = add_t(c, "s_out", K_ACT, R_OUT, N, h, 0, F32_EXACT, B16_STORE);
    if (!resid) s->is_null = 1;
    if (resid && alias_s) { // s_out written over resid: resid becomes an in-out tensor
        c->t[1].role = R_ACC, c->t[1].t32 = F32_EXACT, c->t[1].t16 = B16_STORE;
        c->alias[5] = 1;
    }

    c = new_case("rmsnorm_bwd", run_rmsnorm_bwd, "N=%d h=%d%s", N, h, resid ? " dres" : "");
    c->i[0] = N, c->i[1] = h, c->big = big;
    fill_normal(add_in(c, "dy", K_ACT, N, h, 0), g, 0, 1);
    fill_normal(add_in(c, "s", K_ACT, N, h, 0), g, 0, 1);
    fill_uniform(add_in(c, "rstd", K_F32, N, 1, 0), g, 0.5f, 2.0f);
    fill_normal(add_in(c, "w", K_F32, 1, h, 0), g, 1, 0.1f);
    r = add_in(c, "dres", K_ACT, N, h, 0);
    if (resid)
        fill_normal(r, g, 0, 1);
    else
        r->is_null = 1;
    add_t(c, "ds", K_ACT, R_OUT, N, h, 0, F32_ORDER, B16_STORE);
    fill_normal(add_t(c, "dw", K_F32, R_ACC, 1, h, 0, F32_ORDER, B16_FP32), g, 0, 1);
}

static void cases_matmul(Rng *g, int M, int N, int K, int pad, int acc, int big) {
    int ldx = K + pad, ldy = N + pad;
    Case *c = new_case("matmul_fwd", run_matmul_fwd, "M=%d N=%d K=%d ld+%d%s", M, N, K, pad, acc ? " accumulate" : "");
    c->i[0] = M, c->i[1] = N, c->i[2] = K, c->i[3] = ldx, c->i[4] = ldy, c->i[5] = acc, c->big = big;
    fill_normal(add_in(c, "x", K_ACT, M, K, ldx), g, 0, 1);
    fill_normal(add_in(c, "W", K_ACT, N, K, 0), g, 0, 0.05f);
    Tensor *y = add_t(c, "y", K_ACT, acc ? R_ACC : R_OUT, M, N, ldy, F32_GEMM, B16_STORE);
    if (acc) fill_normal(y, g, 0, 1);

    c = new_case("matmul_bwd", run_matmul_bwd, "M=%d N=%d K=%d ld+%d%s", M, N, K, pad, acc ? " accumulate" : "");
    c->i[0] = M, c->i[1] = N, c->i[2] = K, c->i[3] = ldx, c->i[4] = ldy, c->i[5] = ldx, c->i[6] = acc, c->big = big;
    fill_normal(add_in(c, "dy", K_ACT, M, N, ldy), g, 0, 1);
    fill_normal(add_in(c, "x", K_ACT, M, K, ldx), g, 0, 1);
    fill_normal(add_in(c, "W", K_ACT, N, K, 0), g, 0, 0.05f);
    Tensor *dx = add_t(c, "dx", K_ACT, acc ? R_ACC : R_OUT, M, K, ldx, F32_GEMM, B16_STORE);
    if (acc) fill_normal(dx, g, 0, 1);
    fill_normal(add_t(c, "dW", K_F32, R_ACC, N, K, 0, F32_GEMM, B16_GEMM32), g, 0, 1);
}

// Packed-document layouts (backend.h doc_start) for the ops that take one: the token ids of B rows of T with EOD
// (id 1) before every document start, and the doc_start they give. docs 0: none (the NULL path); 1: fixed starts
// (documents of length 1, starts inside chunks and on the chunk edges 64 and 128); 2: hundreds of documents of
// 1..4 tokens, then random lengths.
static void doc_layout(Rng *g, int32_t *ids, int32_t *ds, int B, int T, int docs) {
    static const int fixed[] = {1, 2, 37, 38, 63, 64, 65, 100, 127, 128, 129, 191, 250};
    for (int b = 0; b < B; b++) {
        int32_t *id = ids + (size_t)b * T, *d = ds + (size_t)b * T;
        for (int t = 0; t < T; t++) id[t] = 2 + (int)(rng_u64(g) % 50);
        if (docs == 1)
            for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
                if (fixed[i] < T) id[fixed[i] - 1] = 1;
        if (docs == 2)
            for (int t = 1 + (int)(rng_u64(g) % 4); t < T; t += t < 400 ? 1 + (int)(rng_u64(g) % 4) : 1 + (int)(rng_u64(g) % 150))
                id[t - 1] = 1;
        for (int t = 0, cur = 0; t < T; t++) d[t] = cur = t > 0 && id[t - 1] == 1 ? t : cur;
    }
}
// The bench's layout: documents of 1..1024 tokens (uniform), as EOD-separated pretraining rows.
static void doc_layout_random(Rng *g, int32_t *ids, int32_t *ds, int B, int T) {
    for (int b = 0; b < B; b++)
        for (int t = 0, cur = 0, next = 1 + (int)(rng_u64(g) % 1024); t < T; t++) {
            if (t == next) cur = t, next = t + 1 + (int)(rng_u64(g) % 1024);
            ids[(size_t)b * T + t] = t + 1 == next ? 1 : 2;
            ds[(size_t)b * T + t] = cur;
        }
}
static void add_doc_start(Case *c, Rng *g, int B, int T, int docs) {
    Tensor *ds = add_in(c, "doc_start", K_I32, (size_t)B * T, 1, 1);
    int32_t *ids = xmalloc((size_t)B * T * 4 + 4);
    if (docs) doc_layout(g, ids, ds->init_i, B, T, docs);
    else ds->is_null = 1;
    free(ids);
}
static void cases_doc_starts(Rng *g, int B, int T, int docs) {
    Case *c = new_case("doc_starts", run_doc_starts, "B=%d T=%d layout %d", B, T, docs);
    c->i[0] = B, c->i[1] = T, c->i[2] = 1;
    Tensor *ids = add_in(c, "ids", K_I32, (size_t)B * T, 1, 1);
    int32_t *ds = xmalloc((size_t)B * T * 4 + 4);
    doc_layout(g, ids->init_i, ds, B, T, docs);
    free(ds);
    add_t(c, "doc_start", K_I32, R_OUT, (size_t)B * T, 1, 1, F32_EXACT, B16_EXACT);
}

static void cases_conv(Rng *g, int B, int T, int D, int K, int pad, int state, int alias_state, int docs) {
    int ldx = D + pad, ldy = D + 2 * pad;
    static const char *layout[] = {"", " docs fixed", " docs many"};
    Case *c = new_case("conv_silu_fwd", run_conv_fwd, "B=%d T=%d D=%d K=%d ld+%d%s%s", B, T, D, K, pad,
                       alias_state ? " state in=out"
                       : state     ? " state"
                                   : "",
                       layout[docs]);
    c->i[0] = B, c->i[1] = T, c->i[2] = D, c->i[3] = K, c->i[4] = ldx, c->i[5] = ldy;
    fill_normal(add_in(c, "x", K_ACT, (size_t)B * T, D, ldx), g, 0, 1);
    fill_normal(add_in(c, "w", K_F32, D, K, 0), g, 0, 0.4f);
    Tensor *si = add_in(c, "state_in", K_F32, (size_t)B * D, K - 1 > 0 ? K - 1 : 1, 0);
    if (state)
        fill_normal(si, g, 0, 1);
    else
        si->is_null = 1;
    add_t(c, "y", K_ACT, R_OUT, (size_t)B * T, D, ldy, F32_ORDER, B16_STORE);
    Tensor *so = add_t(c, "state_out", K_F32, R_OUT, (size_t)B * D, K - 1 > 0 ? K - 1 : 1, 0, F32_EXACT, B16_EXACT);
    if (!state || K == 1) so->is_null = 1;
    if (alias_state) { // decode: the state is read and rewritten in place
        si->role = R_ACC, si->t32 = F32_EXACT, si->t16 = B16_EXACT;
        c->alias[4] = 2;
    }
    add_doc_start(c, g, B, T, docs);

    if (alias_state) return; // the backward has no state
    c = new_case("conv_silu_bwd", run_conv_bwd, "B=%d T=%d D=%d K=%d ld+%d%s", B, T, D, K, pad, layout[docs]);
    c->i[0] = B, c->i[1] = T, c->i[2] = D, c->i[3] = K, c->i[4] = ldy, c->i[5] = ldy, c->i[6] = ldx;
    fill_normal(add_in(c, "dy", K_ACT, (size_t)B * T, D, ldy), g, 0, 1);
    fill_normal(add_in(c, "x", K_ACT, (size_t)B * T, D, ldx), g, 0, 1);
    fill_normal(add_in(c, "w", K_F32, D, K, 0), g, 0, 0.4f);
    add_t(c, "dx", K_ACT, R_OUT, (size_t)B * T, D, ldy, F32_ORDER, B16_STORE);
    fill_normal(add_t(c, "dw", K_F32, R_ACC, D, K, 0, F32_ORDER, B16_FP32), g, 0, 1);
    add_doc_start(c, g, B, T, docs);
}

// step: how far apart the tensors' row strides are (odd: the scalar kernels; even with even ld and d: the
// kernels that move element pairs)
static void cases_l2norm(Rng *g, int N, int heads, int d, int pad, int step) {
    int ld = heads * d + pad;
    Case *c = new_case("l2norm_fwd", run_l2norm_fwd, "N=%d heads=%d d=%d ld+%d,+%d", N, heads, d, pad, step);
    c->i[0] = N, c->i[1] = heads, c->i[2] = d, c->i[3] = ld, c->i[4] = ld + step;
    fill_normal(add_in(c, "x", K_ACT, N, heads * d, ld), g, 0, 1);
    add_t(c, "y", K_ACT, R_OUT, N, heads * d, ld + step, F32_ORDER, B16_STORE);
    add_t(c, "rstd", K_F32, R_OUT, N, heads, 0, F32_ORDER, B16_FP32);

    c = new_case("l2norm_bwd", run_l2norm_bwd, "N=%d heads=%d d=%d ld+%d,+%d", N, heads, d, pad, step);
    c->i[0] = N, c->i[1] = heads, c->i[2] = d, c->i[3] = ld, c->i[4] = ld + step, c->i[5] = ld + 2 * step;
    fill_normal(add_in(c, "dy", K_ACT, N, heads * d, ld), g, 0, 1);
    Tensor *y = add_in(c, "y", K_ACT, N, heads * d, ld + step);
    fill_normal(y, g, 0, 1);
    normalise_heads(y, heads, d);
    fill_uniform(add_in(c, "rstd", K_F32, N, heads, 0), g, 0.1f, 2.0f);
    add_t(c, "dx", K_ACT, R_OUT, N, heads * d, ld + 2 * step, F32_ORDER, B16_STORE);
}

static void cases_gate(Rng *g, int N, int HV, int pad) {
    int ld = 2 * HV + pad;
    Case *c = new_case("gate_fwd", run_gate_fwd, "N=%d HV=%d ld=%d", N, HV, ld);
    c->i[0] = N, c->i[1] = HV, c->i[2] = ld;
    fill_normal(add_in(c, "b|a", K_ACT, N, ld, 0), g, 0, 2);
    Tensor *Al = add_in(c, "A_log", K_F32, 1, HV, 0), *dt = add_in(c, "dt_bias", K_F32, 1, HV, 0);
    for (int j = 0; j < HV; j++) Al->init[j] = logf(rng_uniform(g, 1, 16)), dt->init[j] = rng_uniform(g, -6.9f, -2.25f);
    dt->init[0] = 21.0f; // a + dt_bias > 20 for most rows: softplus's linear branch
    add_t(c, "beta", K_F32, R_OUT, N, HV, 0, F32_ORDER, B16_FP32);
    add_t(c, "gamma", K_F32, R_OUT, N, HV, 0, F32_ORDER, B16_FP32);

    c = new_case("gate_bwd", run_gate_bwd, "N=%d HV=%d ld=%d", N, HV, ld);
    c->i[0] = N, c->i[1] = HV, c->i[2] = ld;
    fill_normal(add_in(c, "b|a", K_ACT, N, ld, 0), g, 0, 2);
    Al = add_in(c, "A_log", K_F32, 1, HV, 0), dt = add_in(c, "dt_bias", K_F32, 1, HV, 0);
    for (int j = 0; j < HV; j++) Al->init[j] = logf(rng_uniform(g, 1, 16)), dt->init[j] = rng_uniform(g, -6.9f, -2.25f);
    fill_normal(add_in(c, "dbeta", K_F32, N, HV, 0), g, 0, 1);
    fill_normal(add_in(c, "dgamma", K_F32, N, HV, 0), g, 0, 1);
    add_t(c, "db|da", K_ACT, R_OUT, N, 2 * HV, ld, F32_ORDER, B16_STORE);
    fill_normal(add_t(c, "dA_log", K_F32, R_ACC, 1, HV, 0, F32_ORDER, B16_FP32), g, 0, 1);
    fill_normal(add_t(c, "ddt_bias", K_F32, R_ACC, 1, HV, 0, F32_ORDER, B16_DA_SUM), g, 0, 1);
}

static void cases_gated(Rng *g, int N, int HV, int dv, int pad) {
    int w = HV * dv;
    Case *c = new_case("gated_rmsnorm_fwd", run_gated_fwd, "N=%d HV=%d dv=%d ld+%d", N, HV, dv, pad);
    c->i[0] = N, c->i[1] = HV, c->i[2] = dv, c->i[3] = w + pad, c->i[4] = w + 2 * pad, c->i[5] = w + pad;
    c->f[0] = 1e-6f;
    fill_normal(add_in(c, "o", K_ACT, N, w, w + pad), g, 0, 1);
    fill_normal(add_in(c, "z", K_ACT, N, w, w + 2 * pad), g, 0, 2);
    fill_normal(add_in(c, "w", K_F32, 1, dv, 0), g, 1, 0.1f);
    add_t(c, "y", K_ACT, R_OUT, N, w, w + pad, F32_ORDER, B16_STORE);
    add_t(c, "rstd", K_F32, R_OUT, N, HV, 0, F32_ORDER, B16_FP32);

    c = new_case("gated_rmsnorm_bwd", run_gated_bwd, "N=%d HV=%d dv=%d ld+%d", N, HV, dv, pad);
    c->i[0] = N, c->i[1] = HV, c->i[2] = dv;
    c->i[3] = w + pad, c->i[4] = w + 2 * pad, c->i[5] = w, c->i[6] = w + pad, c->i[7] = w + 3 * pad;
    fill_normal(add_in(c, "dy", K_ACT, N, w, w + pad), g, 0, 1);
    fill_normal(add_in(c, "o", K_ACT, N, w, w + 2 * pad), g, 0, 1);
    fill_normal(add_in(c, "z", K_ACT, N, w, 0), g, 0, 2);
    fill_uniform(add_in(c, "rstd", K_F32, N, HV, 0), g, 0.5f, 2.0f);
    fill_normal(add_in(c, "w", K_F32, 1, dv, 0), g, 1, 0.1f);
    add_t(c, "do", K_ACT, R_OUT, N, w, w + pad, F32_ORDER, B16_STORE);
    add_t(c, "dz", K_ACT, R_OUT, N, w, w + 3 * pad, F32_ORDER, B16_STORE);
    fill_normal(add_t(c, "dw", K_F32, R_ACC, 1, dv, 0, F32_ORDER, B16_FP32), g, 0, 1);
}

static void cases_swiglu(Rng *g, int N, int F, int alias, int big) {
    Case *c = new_case("swiglu_fwd", run_swiglu_fwd, "N=%d F=%d", N, F);
    c->i[0] = N, c->i[1] = F, c->big = big;
    fill_normal(add_in(c, "gu", K_ACT, N, 2 * F, 0), g, 0, 2);
    add_t(c, "y", K_ACT, R_OUT, N, F, 0, F32_ORDER, B16_STORE);

    c = new_case("swiglu_bwd", run_swiglu_bwd, "N=%d F=%d%s", N, F, alias ? " dgu=gu" : "");
    c->i[0] = N, c->i[1] = F, c->big = big;
    fill_normal(add_in(c, "dy", K_ACT, N, F, 0), g, 0, 1);
    Tensor *gu = add_in(c, "gu", K_ACT, N, 2 * F, 0);
    fill_normal(gu, g, 0, 2);
    add_t(c, "dgu", K_ACT, R_OUT, N, 2 * F, 0, F32_ORDER, B16_STORE);
    if (alias) { // the gradient overwrites gu in place
        gu->role = R_ACC, gu->t32 = F32_ORDER, gu->t16 = B16_STORE;
        c->alias[2] = 1;
    }
}

typedef struct {
    int B, T, H, HV, dk, dv, pad, state, h_save;
    int weak; // weak decays: e^{G_i - G_j} stays O(1) across a whole chunk, so every block of every product
              // matters (with the default decays it falls below 1e-5 within 16 rows)
    int bv;   // > 0: force this dv tile width on the serial tensor-core kernels (GDN_CUDA_DR_BV)
    int docs; // packed-document layout (doc_layout): 0 none, 1 fixed starts, 2 hundreds of short documents
} DeltaShape;

static void fill_delta_inputs(Case *c, Rng *g, DeltaShape s, int ldqk, int ldv) {
    int N = s.B * s.T;
    Tensor *q = add_in(c, "q", K_ACT, N, s.H * s.dk, ldqk), *k = add_in(c, "k", K_ACT, N, s.H * s.dk, ldqk);
    fill_normal(q, g, 0, 1), normalise_heads(q, s.H, s.dk);
    fill_normal(k, g, 0, 1), normalise_heads(k, s.H, s.dk);
    fill_normal(add_in(c, "v", K_ACT, N, s.HV * s.dv, ldv), g, 0, 1);
    fill_uniform(add_in(c, "beta", K_F32, N, s.HV, 0), g, 0.05f, 0.95f);
    Tensor *gm = add_in(c, "gamma", K_F32, N, s.HV, 0);
    fill_uniform(gm, g, s.weak ? -0.03f : -1.6f, 0.0f); // the init range; a few strong decays that underflow e^{G}
    for (size_t x = 0; x < tsize(gm); x += s.weak ? 211 : 37) gm->init[x] = -12.0f;
}

static void cases_delta(Rng *g, DeltaShape s, int big) {
    int ldqk = s.H * s.dk + s.pad, ldv = s.HV * s.dv + s.pad, ldo = s.HV * s.dv + 2 * s.pad;
    int N = s.B * s.T, NT = (s.T + 63) / 64, BH = s.B * s.HV;
    char shape[128];
    char bv[16] = "";
    if (s.bv) snprintf(bv, sizeof bv, " bv=%d", s.bv);
    static const char *layout[] = {"", " docs fixed", " docs many"};
    snprintf(shape, sizeof shape, "B=%d T=%d H=%d HV=%d dk=%d dv=%d%s%s%s%s%s%s", s.B, s.T, s.H, s.HV, s.dk, s.dv,
             s.pad ? " ld+" : "", s.state ? " state" : "", s.h_save ? " h_save" : "", s.weak ? " weak" : "", bv,
             layout[s.docs]);
    Case *c = new_case("delta_rule_fwd", run_delta_fwd, "%s", shape);
    c->big = big;
    int *I = c->i;
    I[0] = s.B, I[1] = s.T, I[2] = s.H, I[3] = s.HV, I[4] = s.dk, I[5] = s.dv, I[6] = ldqk, I[7] = ldv, I[8] = ldo;
    I[12] = s.bv;
    c->f[0] = 1.0f / sqrtf((float)s.dk);
    fill_delta_inputs(c, g, s, ldqk, ldv);
    add_t(c, "o", K_ACT, R_OUT, N, s.HV * s.dv, ldo, F32_CHAIN, B16_DELTA);
    Tensor *hs = add_t(c, "h_save", K_ACT, R_OUT, (size_t)BH * NT, (size_t)s.dk * s.dv, 0, F32_CHAIN, B16_DELTA);
    if (!s.h_save) hs->is_null = 1;
    Tensor *st = add_t(c, "state", K_F32, R_ACC, BH, (size_t)s.dk * s.dv, 0, F32_CHAIN, B16_DELTA_F32);
    if (s.state)
        fill_normal(st, g, 0, 0.3f);
    else
        st->is_null = 1;
    add_doc_start(c, g, s.B, s.T, s.docs);
    const int32_t *ds_fwd = c->t[c->nt - 1].is_null ? NULL : c->t[c->nt - 1].init_i;

    // Backward: h_save (when given) comes from the CPU forward on the same inputs.
    c = new_case("delta_rule_bwd", run_delta_bwd, "%s", shape);
    c->big = big;
    int lddqk = s.H * s.dk + 3 * s.pad, lddv = s.HV * s.dv + s.pad, lddo = s.HV * s.dv + s.pad;
    I = c->i;
    I[0] = s.B, I[1] = s.T, I[2] = s.H, I[3] = s.HV, I[4] = s.dk, I[5] = s.dv, I[6] = ldqk, I[7] = ldv;
    I[8] = lddo, I[9] = lddqk, I[10] = lddv, I[12] = s.bv;
    c->f[0] = 1.0f / sqrtf((float)s.dk);
    fill_delta_inputs(c, g, s, ldqk, ldv);
    fill_normal(add_in(c, "dO", K_ACT, N, s.HV * s.dv, lddo), g, 0, 1);
    hs = add_in(c, "h_save", K_ACT, (size_t)BH * NT, (size_t)s.dk * s.dv, 0);
    if (s.h_save) {
        const Backend *cpu = backend_cpu();
        float *o = xmalloc((size_t)N * ldo * sizeof(float));
        void *in[5] = {c->t[0].init, c->t[1].init, c->t[2].init, c->t[3].init, c->t[4].init};
        DeltaRuleArgs a = delta_args(in, hs->init, c, ds_fwd);
        cpu->delta_rule_fwd(&a, o, ldo, NULL);
        free(o);
    } else {
        hs->is_null = 1;
    }
    add_t(c, "dq", K_ACT, R_OUT, N, s.H * s.dk, lddqk, F32_CHAIN, B16_DELTA);
    add_t(c, "dk", K_ACT, R_OUT, N, s.H * s.dk, lddqk, F32_CHAIN, B16_DELTA);
    add_t(c, "dv", K_ACT, R_OUT, N, s.HV * s.dv, lddv, F32_CHAIN, B16_DELTA);
    add_t(c, "dbeta", K_F32, R_OUT, N, s.HV, 0, F32_CHAIN, B16_DELTA_F32);
    add_t(c, "dgamma", K_F32, R_OUT, N, s.HV, 0, F32_CHAIN, B16_DELTA_F32);
    Tensor *dsb = add_in(c, "doc_start", K_I32, (size_t)N, 1, 1); // the forward's layout
    if (ds_fwd) memcpy(dsb->init_i, ds_fwd, (size_t)N * 4);
    else dsb->is_null = 1;
}

// Hybrid attention blocks (cpu/attention.c twins). pos > 0 with kvs > T: a decode/prefill call writing into
// a KV cache (K, V are in-out: rows outside [pos, pos+T) must stay as they were). docs: packed documents
// (doc_layout's layouts; 3: doc_layout_random's), training layout only (pos 0, kv rows = T, pos passed as NULL).
typedef struct { int B, T, Ha, Hkv, d, window, pos, kvs, bias, pad, big, docs; } AttnShape;
static void add_attn_doc_start(Case *c, Rng *g, AttnShape s, const int32_t *copy) {
    if (!copy && s.docs == 3) {
        Tensor *ds = add_in(c, "doc_start", K_I32, (size_t)s.B * s.T, 1, 1);
        int32_t *ids = xmalloc((size_t)s.B * s.T * 4 + 4);
        doc_layout_random(g, ids, ds->init_i, s.B, s.T);
        free(ids);
    } else if (!copy) {
        add_doc_start(c, g, s.B, s.T, s.docs);
    } else {
        memcpy(add_in(c, "doc_start", K_I32, (size_t)s.B * s.T, 1, 1)->init_i, copy, (size_t)s.B * s.T * 4);
    }
}
static void cases_attention(Rng *g, AttnShape s) {
    int N = s.B * s.T, Dq = s.Ha * s.d, Dkv = s.Hkv * s.d, W = Dq + 2 * Dkv, ldp = W + s.pad;
    int kvs = s.kvs ? s.kvs : s.T;
    char shape[128];
    static const char *layout[] = {"", " docs fixed", " docs many", " docs random"};
    snprintf(shape, sizeof shape, "B=%d T=%d Ha=%d Hkv=%d d=%d window=%d pos=%d kv_rows=%d%s%s%s", s.B, s.T, s.Ha,
             s.Hkv, s.d, s.window, s.pos, kvs, s.bias ? " bias" : "", s.pad ? " ld+" : "", layout[s.docs]);
    Case *c = new_case("attn_qkv_fwd", run_attn_qkv_fwd, "%s", shape);
    c->big = s.big;
    c->i[0] = s.B, c->i[1] = s.T, c->i[2] = s.Ha, c->i[3] = s.Hkv, c->i[4] = s.d, c->i[5] = ldp, c->i[6] = kvs;
    c->f[0] = 10000.0f;
    fill_normal(add_in(c, "P", K_ACT, N, W, ldp), g, 0, 1);
    Tensor *bias = add_in(c, "bias", K_F32, 1, W, 0);
    if (s.bias) fill_normal(bias, g, 0, 0.5f);
    else bias->is_null = 1;
    add_in(c, "pos", K_I32, 1, 1, 0)->init_i[0] = s.pos;
    if (s.docs) c->t[c->nt - 1].is_null = 1; // documents only in the training layout
    add_t(c, "Q", K_ACT, R_OUT, N, Dq, 0, F32_ROPE, B16_ROPE);
    fill_normal(add_t(c, "K", K_ACT, R_ACC, (size_t)s.B * kvs, Dkv, 0, F32_ROPE, B16_ROPE), g, 0, 1);
    fill_normal(add_t(c, "V", K_ACT, R_ACC, (size_t)s.B * kvs, Dkv, 0, F32_EXACT, B16_STORE), g, 0, 1);
    add_attn_doc_start(c, g, s, NULL);
    const int32_t *ds = c->t[c->nt - 1].is_null ? NULL : c->t[c->nt - 1].init_i; // one layout for all four ops

    c = new_case("attn_fwd", run_attn_fwd, "%s", shape);
    c->big = s.big;
    c->i[0] = s.B, c->i[1] = s.T, c->i[2] = s.Ha, c->i[3] = s.Hkv, c->i[4] = s.d, c->i[5] = s.window, c->i[6] = kvs;
    c->f[0] = 1.0f / sqrtf((float)s.d);
    fill_normal(add_in(c, "Q", K_ACT, N, Dq, 0), g, 0, 1);
    fill_normal(add_in(c, "K", K_ACT, (size_t)s.B * kvs, Dkv, 0), g, 0, 1);
    fill_normal(add_in(c, "V", K_ACT, (size_t)s.B * kvs, Dkv, 0), g, 0, 1);
    add_in(c, "pos", K_I32, 1, 1, 0)->init_i[0] = s.pos;
    if (s.docs) c->t[c->nt - 1].is_null = 1;
    add_t(c, "O", K_ACT, R_OUT, N, Dq, 0, F32_ORDER, B16_FLASH);
    Tensor *lse = add_t(c, "lse", K_F32, R_OUT, (size_t)s.B * s.Ha, s.T, 0, F32_ORDER, B16_FP32);
    if (s.pos) lse->is_null = 1; // inference calls keep no statistics
    if (ds) add_attn_doc_start(c, g, s, ds);
    else add_in(c, "doc_start", K_I32, 1, 1, 1)->is_null = 1;

    if (s.pos || s.kvs) return; // the backward is training-only: pos 0, kv rows = T
    c = new_case("attn_qkv_bwd", run_attn_qkv_bwd, "%s", shape);
    c->big = s.big;
    c->i[0] = s.B, c->i[1] = s.T, c->i[2] = s.Ha, c->i[3] = s.Hkv, c->i[4] = s.d, c->i[5] = ldp;
    c->f[0] = 10000.0f;
    fill_normal(add_in(c, "dQ", K_ACT, N, Dq, 0), g, 0, 1);
    fill_normal(add_in(c, "dK", K_ACT, N, Dkv, 0), g, 0, 1);
    fill_normal(add_in(c, "dV", K_ACT, N, Dkv, 0), g, 0, 1);
    add_t(c, "dP", K_ACT, R_OUT, N, W, ldp, F32_ROPE, B16_ROPE);
    Tensor *db = add_t(c, "dbias", K_F32, R_ACC, 1, W, 0, F32_ORDER, B16_DA_SUM); // sums the bf16 dP, as FLA
    if (s.bias) fill_normal(db, g, 0, 1);
    else db->is_null = 1;
    if (ds) add_attn_doc_start(c, g, s, ds);
    else add_in(c, "doc_start", K_I32, 1, 1, 1)->is_null = 1;

    // O and lse from the CPU forward on the same inputs, so P recomputed from lse is a softmax
    c = new_case("attn_bwd", run_attn_bwd, "%s", shape);
    c->big = s.big;
    c->i[0] = s.B, c->i[1] = s.T, c->i[2] = s.Ha, c->i[3] = s.Hkv, c->i[4] = s.d, c->i[5] = s.window;
    c->f[0] = 1.0f / sqrtf((float)s.d);
    Tensor *Q = add_in(c, "Q", K_ACT, N, Dq, 0), *K = add_in(c, "K", K_ACT, N, Dkv, 0), *V = add_in(c, "V", K_ACT, N, Dkv, 0);
    fill_normal(Q, g, 0, 1), fill_normal(K, g, 0, 1), fill_normal(V, g, 0, 1);
    for (size_t e = 0; e < tsize(Q); e++) Q->init[e] = round_bf16(Q->init[e]);
    for (size_t e = 0; e < tsize(K); e++) K->init[e] = round_bf16(K->init[e]), V->init[e] = round_bf16(V->init[e]);
    Tensor *O = add_in(c, "O", K_ACT, N, Dq, 0);
    fill_normal(add_in(c, "dO", K_ACT, N, Dq, 0), g, 0, 1);
    Tensor *L = add_in(c, "lse", K_F32, (size_t)s.B * s.Ha, s.T, 0);
    backend_cpu()->attn_fwd(O->init, L->init, Q->init, K->init, V->init, s.T, NULL, s.B, s.T, s.Ha, s.Hkv, s.d,
                            s.window, c->f[0], ds);
    add_t(c, "dQ", K_ACT, R_OUT, N, Dq, 0, F32_ORDER, B16_FLASH);
    add_t(c, "dK", K_ACT, R_OUT, N, Dkv, 0, F32_ORDER, B16_FLASH);
    add_t(c, "dV", K_ACT, R_OUT, N, Dkv, 0, F32_ORDER, B16_FLASH);
    if (ds) add_attn_doc_start(c, g, s, ds);
    else add_in(c, "doc_start", K_I32, 1, 1, 1)->is_null = 1;
}

// The q|k|v projection with its bias (issue 21): y = x W^T + b with the bias added before y's one rounding, as
// torch's Linear. exact: small integers (x) and multiples of 1/16 (W, bias) make every product and sum exact in
// fp32, so the bf16 result must be exactly the CPU's fp32 result rounded once (round_ref); adding the bias after a
// first rounding of x W^T (the old order) misses it by an ulp wherever x W^T has more than 8 significant bits.
static void cases_matmul_bias(Rng *g, int M, int N, int K, int pad, int exact) {
    int ldx = K + pad, ldy = N + pad;
    Case *c = new_case("matmul_bias_fwd", run_matmul_bias_fwd, "M=%d N=%d K=%d ld+%d%s", M, N, K, pad,
                       exact ? " exact sums" : "");
    c->i[0] = M, c->i[1] = N, c->i[2] = K, c->i[3] = ldx, c->i[4] = ldy;
    Tensor *x = add_in(c, "x", K_ACT, M, K, ldx), *W = add_in(c, "W", K_ACT, N, K, 0), *b = add_in(c, "bias", K_ACT, 1, N, 0);
    if (exact) {
        for (size_t e = 0; e < tsize(x); e++) x->init[e] = (float)((int)(rng_u64(g) % 17) - 8);
        for (size_t e = 0; e < tsize(W); e++) W->init[e] = (float)((int)(rng_u64(g) % 17) - 8) / 16.0f;
        for (size_t e = 0; e < tsize(b); e++) b->init[e] = (float)((int)(rng_u64(g) % 33) - 16) / 16.0f;
        add_t(c, "y", K_ACT, R_OUT, M, N, ldy, F32_EXACT, B16_EXACT)->round_ref = 1;
    } else {
        fill_normal(x, g, 0, 1), fill_normal(W, g, 0, 0.05f), fill_normal(b, g, 0, 0.5f);
        add_t(c, "y", K_ACT, R_OUT, M, N, ldy, F32_GEMM, B16_STORE);
    }
}

// Attention cases of issues 14/21 (packed documents; the d = 128 tensor-core backward; the biased q|k|v GEMM; the
// ring KV cache), kept
// apart with their own random stream so the cases before and after them draw what they drew before.
static void cases_attention_packed_and_d128(void) {
    Rng g = {20261202};
    cases_matmul_bias(&g, 37, 48, 40, 3, 0);
    cases_matmul_bias(&g, 70, 96, 24, 0, 1);
    //                            B    T  Ha Hkv   d  win pos kvs bias pad big docs
    cases_attention(&g, (AttnShape){1, 160, 2, 1, 32, 0, 0, 0, 1, 3, 0, 1});   // CUDA-core kernels, fixed starts
    cases_attention(&g, (AttnShape){1, 600, 2, 1, 64, 0, 0, 0, 0, 0, 0, 2});   // tensor cores, ~200 documents
    cases_attention(&g, (AttnShape){1, 300, 2, 1, 64, 40, 0, 0, 1, 0, 0, 1});  // documents and a window
    cases_attention(&g, (AttnShape){1, 200, 2, 1, 128, 0, 0, 0, 0, 0, 0, 1});  // d = 128, fixed starts
    cases_attention(&g, (AttnShape){1, 400, 2, 1, 128, 0, 0, 0, 0, 0, 0, 2});  // d = 128, many documents
    cases_attention(&g, (AttnShape){1, 150, 4, 2, 128, 0, 0, 0, 1, 0, 0, 0});  // d = 128 backward: GQA 2, partial tile
    cases_attention(&g, (AttnShape){1, 200, 2, 1, 128, 50, 0, 0, 0, 0, 0, 0}); // d = 128 backward: window skips
    // a windowed KV cache is a ring (row = position mod kv rows): a decode step past the capacity, and a prefill
    // chunk whose rows wrap (tensor cores: 64-row tiles of a 128-row ring)
    cases_attention(&g, (AttnShape){2, 1, 4, 2, 32, 20, 300, 256, 0, 0, 0, 0});
    cases_attention(&g, (AttnShape){1, 40, 2, 1, 64, 30, 500, 128, 1, 0, 0, 0});
}

static void cases_lmhead(Rng *g, int N, int h, int V, int with_grad, int chunk_rows, int big) {
    Case *c = new_case("lmhead_ce", run_lmhead_ce, "N=%d h=%d V=%d%s%s", N, h, V, with_grad ? " grad" : " loss-only",
                       chunk_rows ? " chunked" : "");
    c->i[0] = N, c->i[1] = h, c->i[2] = V, c->i[3] = chunk_rows, c->f[0] = 1.0f / N, c->big = big;
    fill_normal(add_in(c, "y", K_ACT, N, h, 0), g, 0, 1);
    fill_normal(add_in(c, "E", K_ACT, V, h, 0), g, 0, 0.3f);
    Tensor *tg = add_in(c, "targets", K_I32, N, 1, 1);
    for (int n = 0; n < N; n++) tg->init_i[n] = n % 7 == 3 ? -1 : (int)(rng_u64(g) % V);
    add_t(c, "losses", K_F32, R_OUT, N, 1, 0, F32_ORDER, B16_CE);
    Tensor *dy = add_t(c, "dy", K_ACT, R_OUT, N, h, 0, F32_GEMM, B16_CE);
    Tensor *dE = add_t(c, "dE", K_F32, R_ACC, V, h, 0, F32_GEMM, B16_CE);
    if (with_grad)
        fill_normal(dE, g, 0, 0.01f);
    else
        dy->is_null = 1, dE->is_null = 1;

    if (with_grad) return;
    c = new_case("lmhead_logits", run_lmhead_logits, "N=%d h=%d V=%d", N, h, V);
    c->i[0] = N, c->i[1] = h, c->i[2] = V, c->big = big;
    fill_normal(add_in(c, "y", K_ACT, N, h, 0), g, 0, 1);
    fill_normal(add_in(c, "E", K_ACT, V, h, 0), g, 0, 0.3f);
    add_t(c, "logits", K_F32, R_OUT, N, V, 0, F32_GEMM, B16_GEMM32);
}

// Rows of logits with the cases greedy decoding and scoring meet: a tie for the maximum (the lowest index
// must win), -inf entries (masked vocabulary), the maximum at the last index; logprob NULL (decode) or not.
static void cases_logits_stats(Rng *g, int rows, int V, int with_logprob, int big) {
    Case *c = new_case("logits_stats", run_logits_stats, "rows=%d V=%d%s", rows, V, with_logprob ? "" : " argmax only");
    c->i[0] = rows, c->i[1] = V, c->big = big;
    Tensor *l = add_in(c, "logits", K_F32, rows, V, 0);
    fill_normal(l, g, 0, 3);
    if (rows > 0) l->init[(size_t)0 * V + 7] = l->init[(size_t)0 * V + V / 2] = 40.0f;  // tie: 7 wins
    if (rows > 1)
        for (int v = 0; v < V; v += 3) l->init[(size_t)1 * V + v] = -INFINITY;         // masked entries
    if (rows > 2) l->init[(size_t)2 * V + V - 1] = 50.0f;                              // last index
    Tensor *tg = add_in(c, "targets", K_I32, rows, 1, 1);
    for (int r = 0; r < rows; r++) {
        int t = (int)(rng_u64(g) % V);
        if (r == 1) t = t / 3 * 3 + 1; // not a masked entry
        tg->init_i[r] = r == 2 ? V - 1 : t;
    }
    add_t(c, "argmax", K_I32, R_OUT, rows, 1, 1, F32_EXACT, B16_EXACT);
    Tensor *lp = add_t(c, "logprob", K_F32, R_OUT, rows, 1, 0, F32_ORDER, B16_FP32);
    if (!with_logprob) lp->is_null = 1;
}

static void cases_adamw(Rng *g, int n, int step) {
    Case *c = new_case("adamw", run_adamw, "n=%d step=%d", n, step);
    c->i[0] = n, c->i[1] = step;
    c->f[0] = 3e-4f, c->f[1] = 0.9f, c->f[2] = 0.95f, c->f[3] = 1e-8f, c->f[4] = 0.1f, c->f[5] = 0.5f;
    fill_normal(add_t(c, "p", K_F32, R_ACC, 1, n, 0, F32_EXACT, B16_EXACT), g, 0, 0.05f);
    fill_normal(add_in(c, "g", K_F32, 1, n, 0), g, 0, 1);
    fill_normal(add_t(c, "m", K_F32, R_ACC, 1, n, 0, F32_EXACT, B16_EXACT), g, 0, 0.1f);
    fill_uniform(add_t(c, "v", K_F32, R_ACC, 1, n, 0, F32_EXACT, B16_EXACT), g, 0, 0.01f);
    // p_act: the bf16 compute copy, compared with the CPU's p rounded to bf16
    add_t(c, "p_act", K_ACT, R_OUT, 1, n, 0, F32_EXACT, B16_EXACT)->round_ref = 1;
}

static void cases_sum(Rng *g, int n) {
    Case *c = new_case("sum/sumsq", run_sum, "n=%d", n);
    c->i[0] = n;
    fill_normal(add_in(c, "x", K_F32, 1, n > 0 ? n : 1, 0), g, 0.1f, 1);
    add_t(c, "sum|sumsq", K_F32, R_OUT, 1, 2, 0, F32_SUM, F32_SUM);
}

static void build_cases(int quick) {
    Rng g = {20240601};
    cases_embedding(&g, 37, 24, 50);
    cases_embedding(&g, 50, 20, 41); // h not a multiple of 8: bf16 scalar path
    cases_embedding(&g, 600, 24, 50); // a run of 200 equal ids: longer than a block's window, 8-row batches
    cases_rmsnorm(&g, 33, 64, 1, 0, 0);
    cases_rmsnorm(&g, 7, 1000, 1, 1, 0); // scalar path (1000 % 8 != 0) and s_out aliasing resid
    cases_rmsnorm(&g, 20, 256, 0, 0, 0);
    cases_rmsnorm(&g, 2048, 1024, 1, 0, 1);
    cases_rmsnorm(&g, 9, 3072, 1, 0, 0);  // two vectors per thread in the backward's registers
    cases_rmsnorm(&g, 5, 8000, 1, 0, 0);  // four, the last partial
    cases_rmsnorm(&g, 3, 12000, 0, 0, 0); // more than four: the kernel that reads twice
    cases_matmul(&g, 37, 48, 40, 8, 0, 0);
    cases_matmul(&g, 33, 24, 72, 5, 1, 0); // odd strides: unaligned rows for cuBLASLt
    cases_matmul(&g, 64, 96, 128, 0, 1, 0);
    cases_matmul(&g, 2048, 4096, 1024, 0, 0, 1);
    cases_conv(&g, 2, 70, 40, 4, 3, 1, 0, 0);
    cases_conv(&g, 3, 2, 24, 4, 0, 1, 0, 0);   // T < K-1: the state mixes state_in and x
    cases_conv(&g, 2, 1, 36, 4, 0, 1, 1, 0);   // decode: T=1, state in place
    cases_conv(&g, 1, 33, 20, 6, 2, 1, 0, 0);  // K=6: the 8-tap kernel
    cases_conv(&g, 1, 40, 17, 12, 0, 0, 0, 0); // K=12: the 16-tap kernel, no state
    cases_conv(&g, 2, 130, 1024, 4, 0, 0, 0, 0);
    // packed documents: fixed starts / hundreds of short documents; the state only for the first document
    cases_conv(&g, 2, 300, 40, 4, 0, 1, 0, 1);  // even D: the pair backward
    cases_conv(&g, 2, 600, 24, 4, 0, 1, 0, 2);
    cases_conv(&g, 1, 200, 17, 4, 3, 1, 0, 1);  // odd D, padded rows: the scalar backward
    cases_conv(&g, 1, 140, 20, 6, 0, 0, 0, 2);  // K=6: the 8-tap kernels
    cases_doc_starts(&g, 3, 300, 1);
    cases_doc_starts(&g, 2, 2048, 2);           // longer than the kernel's 256 threads: spans of 8
    cases_l2norm(&g, 50, 3, 32, 5, 1);  // odd strides: scalar kernels
    cases_l2norm(&g, 40, 4, 64, 0, 1);
    cases_l2norm(&g, 40, 8, 64, 0, 2);  // the 300M's q|k: one pair per lane
    cases_l2norm(&g, 30, 2, 100, 4, 2); // two pairs per lane, the second partial
    cases_l2norm(&g, 9, 1, 256, 2, 6);  // four pairs per lane
    cases_gate(&g, 70, 6, 3);
    cases_gate(&g, 600, 8, 0); // more than one 256-row partial block
    cases_gated(&g, 40, 3, 48, 4);  // pairs, lanes 24-31 idle
    cases_gated(&g, 66, 8, 64, 0);  // the 300M's heads
    cases_gated(&g, 35, 2, 40, 3);  // odd strides: scalar kernels
    cases_gated(&g, 21, 2, 176, 2); // three pairs per lane -> the four-pair kernel
    cases_gated(&g, 8, 1, 300, 0);  // dv > 256: scalar kernels
    cases_swiglu(&g, 30, 40, 0, 0);
    cases_swiglu(&g, 9, 36, 1, 0); // F % 8 != 0 (bf16 scalar path), dgu = gu in place
    cases_swiglu(&g, 2048, 4096, 0, 1);
    cases_delta(&g, (DeltaShape){1, 64, 1, 1, 16, 16, 0, 0, 1}, 0);   // one full chunk, smallest heads
    cases_delta(&g, (DeltaShape){2, 100, 2, 4, 32, 32, 8, 1, 1}, 0);  // B>1, GVA 2, strides, state, partial chunk
    cases_delta(&g, (DeltaShape){1, 40, 2, 2, 64, 64, 0, 0, 0}, 0);   // T < 64, real head size, no h_save
    cases_delta(&g, (DeltaShape){2, 130, 1, 2, 64, 48, 0, 1, 1}, 0);  // dv % 32 != 0: 16-wide dv tiles
    cases_delta(&g, (DeltaShape){1, 70, 1, 1, 128, 128, 0, 1, 1}, 0); // the largest heads (128-wide tiles)
    cases_delta(&g, (DeltaShape){1, 65, 2, 4, 80, 16, 4, 0, 0}, 0);   // dk padded to 128, dv to 64
    // weak decays: the long-range terms of every block product count (bf16: the tensor-core kernels)
    cases_delta(&g, (DeltaShape){2, 150, 2, 4, 64, 64, 0, 1, 1, 1}, 0); // 300M heads, 3 chunks, partial last
    cases_delta(&g, (DeltaShape){1, 192, 1, 4, 48, 32, 3, 0, 0, 1}, 0); // GVA 4, odd strides (scalar loads and
                                                                        // stores), T = 3 x 64, no h_save
    cases_delta(&g, (DeltaShape){2, 140, 1, 2, 32, 64, 0, 1, 1, 1, 32}, 0); // 32-wide dv tiles (serial kernels)
    cases_delta(&g, (DeltaShape){1, 100, 1, 1, 128, 64, 0, 1, 1, 1}, 0); // dk = 128 (CUDA-core kernels in bf16)
    cases_delta(&g, (DeltaShape){2, 256, 4, 8, 64, 64, 0, 0, 1}, 1);  // 300M heads
    // decode (T <= 16, no h_save: the token-by-token kernel), state carried in and out
    cases_delta(&g, (DeltaShape){2, 1, 4, 8, 64, 64, 0, 1, 0}, 0);    // one decode step of the 300M heads
    cases_delta(&g, (DeltaShape){1, 5, 2, 4, 32, 48, 3, 1, 0}, 0);    // GVA 2, dv not a multiple of 32, strides
    cases_delta(&g, (DeltaShape){1, 16, 1, 1, 128, 128, 0, 1, 0}, 0); // the largest heads, T at the limit
    cases_delta(&g, (DeltaShape){3, 2, 1, 2, 16, 16, 0, 0, 0}, 0);    // no state: starts from zero
    // packed documents (CUDA-core kernels in both modes): fixed starts (length 1, inside chunks, on the edges 64
    // and 128), hundreds of short documents; state and h_save given or not, GVA, strides, weak decays
    cases_delta(&g, (DeltaShape){2, 300, 2, 4, 32, 32, 8, 1, 1, 0, 0, 1}, 0);
    cases_delta(&g, (DeltaShape){1, 600, 1, 2, 64, 64, 0, 0, 0, 1, 0, 2}, 0);
    cases_delta(&g, (DeltaShape){2, 200, 2, 4, 64, 48, 3, 1, 0, 1, 0, 1}, 0);
    cases_delta(&g, (DeltaShape){1, 10, 1, 1, 16, 16, 0, 1, 0, 0, 0, 1}, 0); // T <= 16 without h_save: not decode
    //                          B   T  Ha Hkv   d  win pos kvs bias pad big
    cases_attention(&g, (AttnShape){2, 70, 4, 2, 16, 0, 0, 0, 1, 3, 0});    // GQA 2, biases, strided P
    cases_attention(&g, (AttnShape){1, 45, 2, 2, 64, 9, 0, 0, 0, 0, 0});    // MHA, window 9, d = 64
    cases_attention(&g, (AttnShape){1, 33, 4, 1, 128, 0, 0, 0, 0, 0, 0});   // GQA 4, d = 128
    cases_attention(&g, (AttnShape){2, 1, 4, 2, 32, 0, 40, 64, 0, 0, 0});   // a decode step into a KV cache
    cases_attention(&g, (AttnShape){1, 5, 2, 1, 64, 7, 20, 32, 1, 0, 0});   // a 5-token chunk, window 7
    cases_attention(&g, (AttnShape){1, 200, 2, 1, 64, 70, 0, 0, 0, 0, 0}); // bf16: tensor cores, window skips blocks
    cases_attention(&g, (AttnShape){1, 40, 2, 2, 128, 0, 90, 160, 0, 0, 0}); // a prefill chunk after 90 cached
    cases_attention(&g, (AttnShape){2, 2048, 16, 4, 64, 0, 0, 0, 0, 0, 1}); // the hybrid 300M's attention
    cases_attention_packed_and_d128();
    cases_lmhead(&g, 70, 64, 1000, 1, 0, 0);
    cases_lmhead(&g, 50, 40, 517, 1, 16, 0); // forced 16-row chunks: the chunk loop
    cases_lmhead(&g, 33, 40, 300, 0, 0, 0);
    cases_lmhead(&g, 6, 32, 8200, 1, 0, 0); // rows longer than 4 x 512 float4s
    cases_lmhead(&g, 64, 1024, 128256, 1, 0, 1);
    cases_logits_stats(&g, 5, 1000, 1, 0);
    cases_logits_stats(&g, 3, 37, 0, 0); // fewer columns than threads
    cases_logits_stats(&g, 16, 128256, 1, 1);
    cases_adamw(&g, 1000, 1);
    cases_adamw(&g, 777, 7);
    cases_sum(&g, 100003);
    cases_sum(&g, 5);
    // bf16 logits with the gradient written over them (V % 8 == 0), over forced 16-row chunks, and loss only
    // (appended here so the cases above keep their random inputs)
    cases_lmhead(&g, 50, 40, 520, 1, 16, 0);
    cases_lmhead(&g, 33, 40, 304, 0, 0, 0);
    if (quick) {
        int w = 0;
        for (int x = 0; x < g_ncases; x++)
            if (!g_cases[x].big) g_cases[w++] = g_cases[x];
        g_ncases = w;
    }
}

// ===================================================================================================
// special checks

// to_act / from_act against util/common.h's f32_to_bf16 on edge values.
static void check_conversion(const Backend *be) {
    float vals[] = {0.0f,      -0.0f,  1.0f,    1.00390625f,    1.0078125f,    1.01171875f, 3.14159265f,
                    -2.5e-40f, 1e-38f, 3.0e38f, 3.4e38f,        INFINITY,      -INFINITY,   NAN,
                    65504.0f,  -1.5f,  0.1f,    1.0f + 0x1p-8f, 1.0f + 0x1p-9f};
    int n = (int)(sizeof vals / sizeof vals[0]);
    float *dv = be->alloc(sizeof vals);
    void *act = be->alloc(sizeof vals);
    float *back = be->alloc(sizeof vals);
    be->memcpy_h2d(dv, vals, sizeof vals);
    be->to_act(act, dv, n);
    be->from_act(back, act, n);
    uint16_t raw[32];
    float out[32];
    be->memcpy_d2h(raw, act, n * 2);
    be->memcpy_d2h(out, back, sizeof vals);
    int bad = 0;
    for (int x = 0; x < n; x++) {
        uint16_t want = f32_to_bf16(vals[x]);
        int nan_ok = isnan(vals[x]) && (raw[x] & 0x7fff) > 0x7f80;
        if ((raw[x] != want && !nan_ok) || (memcmp(&out[x], &(float){bf16_to_f32(raw[x])}, 4) && !isnan(out[x]))) {
            printf("     to_act(%g) = 0x%04x, want 0x%04x\n", vals[x], raw[x], want);
            bad = 1;
        }
    }
    be->free(dv), be->free(act), be->free(back);
    g_checks++;
    if (bad) g_failures++;
    printf("%s %-62s bf16  round-to-nearest-even as util/common.h\n", bad ? "FAIL" : "PASS", "to_act/from_act");
}

// Bad ids must stop the run with a message naming the op, row and id. Each check runs in a fresh
// process (this binary re-executed with --bad-id-child N), which must die with exit status 1.
static int bad_id_child(int which) {
    char err[ERR_LEN];
    const Backend *be = backend_cuda(1, err, sizeof err);
    if (!be) {
        fprintf(stderr, "no usable GPU: %s\n", err);
        return 10;
    }
    int32_t ids[4] = {1, 2, 77, 3};
    int32_t *d_ids = be->alloc(sizeof ids);
    be->memcpy_h2d(d_ids, ids, sizeof ids);
    void *x = be->alloc(4 * 16 * 2);
    float *f = be->alloc(64 * 16 * 4);
    if (which == 0)
        be->embedding_bwd(f, x, d_ids, 4, 16, 50);
    else
        be->lmhead_ce(f, NULL, NULL, x, x, d_ids, 4, 16, 4, 1.0f); // V = 4: id 77 is out of range
    be->sync();
    return 0; // not reached when the bad id is reported
}

static void check_bad_ids(void) {
    for (int which = 0; which < 2; which++) {
        int fds[2];
        if (pipe(fds)) die("test: pipe failed");
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            dup2(fds[1], 2);
            char arg[4];
            snprintf(arg, sizeof arg, "%d", which);
            execl("/proc/self/exe", "test_cuda_ops", "--bad-id-child", arg, (char *)NULL);
            _exit(11);
        }
        close(fds[1]);
        char msg[2048] = "";
        size_t len = 0;
        ssize_t r;
        while ((r = read(fds[0], msg + len, sizeof msg - 1 - len)) > 0) len += (size_t)r;
        msg[len] = 0;
        close(fds[0]);
        int status = 0;
        waitpid(pid, &status, 0);
        const char *want = which == 0 ? "embedding_bwd: token id 77 at row 2" : "lmhead_ce: target id 77 at row 2";
        int ok = WIFEXITED(status) && WEXITSTATUS(status) == 1 && strstr(msg, want);
        g_checks++;
        if (!ok) g_failures++;
        printf("%s %-62s id out of range is reported and stops the run\n", ok ? "PASS" : "FAIL",
               which == 0 ? "embedding_bwd bad id" : "lmhead_ce bad target");
        if (!ok) printf("     exit status %d, stderr: %s\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1, msg);
    }
}

// ===================================================================================================
// benchmark at the 300M shapes (bf16)

typedef struct {
    const Backend *be;
    void *p[12];
    const int32_t *ds; // doc_start for the conv and delta-rule entries (NULL: one document per row)
    int i[8];
    int which;
} BenchCtx;

enum {
    BE_EMB_F,
    BE_EMB_B,
    BE_RMS_F,
    BE_RMS_B,
    BE_MM_F,
    BE_MM_BX,
    BE_MM_BW,
    BE_CONV_F,
    BE_CONV_B,
    BE_L2_F,
    BE_L2_B,
    BE_GATE_F,
    BE_GATE_B,
    BE_DR_F,
    BE_DR_B,
    BE_GRMS_F,
    BE_GRMS_B,
    BE_SWI_F,
    BE_SWI_B,
    BE_CE,
    BE_ADAMW,
    BE_SUMSQ
};

static void bench_call(void *vctx) {
    BenchCtx *x = vctx;
    const Backend *be = x->be;
    void **p = x->p;
    int *I = x->i;
    switch (x->which) {
    case BE_EMB_F:
        be->embedding_fwd(p[0], p[1], p[2], I[0], I[1]);
        break;
    case BE_EMB_B:
        be->embedding_bwd(p[0], p[1], p[2], I[0], I[1], I[2]);
        break;
    case BE_RMS_F:
        be->rmsnorm_fwd(p[0], p[1], p[2], p[3], p[4], p[5], I[0], I[1], 1e-6f);
        break;
    case BE_RMS_B:
        be->rmsnorm_bwd(p[0], p[1], p[2], p[3], p[4], p[5], p[6], I[0], I[1]);
        break;
    case BE_MM_F:
        be->matmul_fwd(p[0], I[1], p[1], I[2], p[2], I[0], I[1], I[2], 0);
        break;
    case BE_MM_BX:
        be->matmul_bwd(p[0], I[2], NULL, p[1], I[1], NULL, I[2], p[2], I[0], I[1], I[2], 0);
        break;
    case BE_MM_BW:
        be->matmul_bwd(NULL, I[2], p[3], p[1], I[1], p[0], I[2], NULL, I[0], I[1], I[2], 0);
        break;
    case BE_CONV_F:
        be->conv_silu_fwd(p[0], I[2], p[1], I[2], p[2], NULL, NULL, I[0], I[1], I[2], 4, x->ds);
        break;
    case BE_CONV_B:
        be->conv_silu_bwd(p[0], I[2], p[3], p[4], I[2], p[1], I[2], p[2], I[0], I[1], I[2], 4, x->ds);
        break;
    case BE_L2_F:
        be->l2norm_fwd(p[0], I[3], p[1], p[2], I[3], I[0], I[1], I[2]);
        break;
    case BE_L2_B:
        be->l2norm_bwd(p[3], I[3], p[2], I[3], p[0], I[3], p[1], I[0], I[1], I[2]);
        break;
    case BE_GATE_F:
        be->gate_fwd(p[0], p[1], p[2], (char *)p[2] + 16, I[2], p[3], p[4], I[0], I[1]);
        break;
    case BE_GATE_B:
        be->gate_bwd(p[5], (char *)p[5] + 16, I[2], p[6], p[7], p[0], p[1], p[2], (char *)p[2] + 16, p[3], p[4], I[0],
                     I[1]);
        break;
    case BE_DR_F:
    case BE_DR_B: { // H=4 HV=8 dk=dv=64: q|k interleaved with row stride 256, v and o 512
        DeltaRuleArgs a = {.q = p[2], .k = p[3], .ldqk = 256, .v = p[4], .ldv = 512, .beta = p[5], .gamma = p[6],
                           .h_save = p[1], .B = I[0], .T = I[1], .H = 4, .HV = 8, .dk = 64, .dv = 64, .scale = 0.125f,
                           .doc_start = x->ds};
        if (x->which == BE_DR_F) {
            be->delta_rule_fwd(&a, p[0], 512, NULL);
        } else {
            DeltaRuleGrads g = {.dq = p[7], .dk = p[8], .lddqk = 256, .dv = p[9], .lddv = 512, .dbeta = p[10],
                                .dgamma = p[11]};
            be->delta_rule_bwd(&a, p[0], 512, &g);
        }
        break;
    }
    case BE_GRMS_F:
        be->gated_rmsnorm_fwd(p[0], 512, p[1], p[2], 512, p[3], 512, p[4], I[0], 8, 64, 1e-6f);
        break;
    case BE_GRMS_B:
        be->gated_rmsnorm_bwd(p[5], 512, p[6], 512, p[7], p[0], 512, p[2], 512, p[3], 512, p[1], p[4], I[0], 8, 64);
        break;
    case BE_SWI_F:
        be->swiglu_fwd(p[0], p[1], I[0], I[1]);
        break;
    case BE_SWI_B:
        be->swiglu_bwd(p[2], p[0], p[1], I[0], I[1]);
        break;
    case BE_CE:
        be->lmhead_ce(p[0], p[1], p[2], p[3], p[4], p[5], I[0], I[1], I[2], 1.0f / I[0]);
        break;
    case BE_ADAMW:
        be->adamw(p[0], p[1], p[2], p[3], p[4], (size_t)I[0], 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 10, 1.0f);
        break;
    case BE_SUMSQ:
        be->sumsq(p[1], p[0], (size_t)I[0]);
        break;
    }
}

// A device buffer of n act (or fp32) values, filled from a repeating random host pattern.
static void *bench_buf(const Backend *be, size_t n, int act, float mean, float std, Rng *g) {
    enum { PAT = 1 << 20 };
    static float *pat;
    if (!pat) {
        pat = xmalloc(PAT * sizeof(float));
        for (int x = 0; x < PAT; x++) pat[x] = rng_normal(g);
    }
    float *tmp = be->alloc(n * 4);
    float *chunk = xmalloc(PAT * sizeof(float));
    for (size_t off = 0; off < n; off += PAT) {
        size_t len = n - off < PAT ? n - off : PAT;
        for (size_t x = 0; x < len; x++) chunk[x] = mean + std * pat[(x + off / PAT * 7919) % PAT];
        be->memcpy_h2d(tmp + off, chunk, len * 4);
    }
    free(chunk);
    if (!act) return tmp;
    void *a = be->alloc(n * be->act_bytes);
    be->to_act(a, tmp, n);
    be->sync();
    be->free(tmp);
    return a;
}

static void bench_report(BenchCtx *x, const char *name, double bytes, double flops) {
    x->be->time_ms(bench_call, x, 1); // warm-up (plans, pool, lazy loading)
    double ms = x->be->time_ms(bench_call, x, 5);
    if (ms < 0) { // the CPU emulator has no timing
        printf("%-34s ran (no timing in the emulator)\n", name);
        return;
    }
    double floor_ms = flops > 0 ? flops / 790e12 * 1e3 : bytes / 4.3e12 * 1e3;
    if (flops > 0)
        printf("%-34s %9.3f ms  %8.1f TFLOP/s  floor %8.3f ms (%.0f%% of peak)\n", name, ms, flops / ms / 1e9, floor_ms,
               100 * floor_ms / ms);
    else
        printf("%-34s %9.3f ms  %8.1f GB/s     floor %8.3f ms (%.0f%% of peak)\n", name, ms, bytes / ms / 1e6, floor_ms,
               100 * floor_ms / ms);
    fflush(stdout);
}

static int run_bench(int small) {
    char err[ERR_LEN];
    const Backend *be = backend_cuda(1, err, sizeof err);
    if (!be) {
        fprintf(stderr, "test_cuda_ops: no usable GPU: %s\n", err);
        return 2;
    }
    Rng g = {7};
    // --bench-small: the same code at tiny B, T, V and parameter count (a smoke run, e.g. in the emulator)
    const int B = small ? 1 : 16, T = small ? 128 : 2048, N = B * T, h = 1024, F = 4096, V = small ? 1000 : 128256;
    const int HV = 8, Kd = 256, Vd = 512;
    const double ab = 2; // bf16
    printf("bench: bf16, B=%d T=%d (N=%d) h=%d H=4 HV=%d dk=dv=64 F=%d V=%d; floors: bytes / 4.3 TB/s or FLOPs / "
           "790 TFLOP/s\n",
           B, T, N, h, HV, F, V);
    BenchCtx x;
    memset(&x, 0, sizeof x);
    x.be = be;
    int32_t *ids = xmalloc((size_t)N * 4);
    for (int n = 0; n < N; n++) ids[n] = (int)(rng_u64(&g) % V);

    { // embedding
        void *E = bench_buf(be, (size_t)V * h, 1, 0, 0.02f, &g), *xx = bench_buf(be, (size_t)N * h, 1, 0, 1, &g);
        int32_t *d_ids = be->alloc((size_t)N * 4);
        be->memcpy_h2d(d_ids, ids, (size_t)N * 4);
        float *dE = be->alloc((size_t)V * h * 4);
        x.which = BE_EMB_F, x.p[0] = xx, x.p[1] = d_ids, x.p[2] = E, x.i[0] = N, x.i[1] = h;
        bench_report(&x, "embedding_fwd", 2.0 * N * h * ab, 0);
        x.which = BE_EMB_B, x.p[0] = dE, x.p[1] = xx, x.p[2] = d_ids, x.i[2] = V;
        bench_report(&x, "embedding_bwd", N * h * (ab + 8.0), 0);
        be->free(E), be->free(xx), be->free(d_ids), be->free(dE);
    }
    { // rmsnorm
        void *xx = bench_buf(be, (size_t)N * h, 1, 0, 1, &g), *r = bench_buf(be, (size_t)N * h, 1, 0, 1, &g);
        void *y = bench_buf(be, (size_t)N * h, 1, 0, 1, &g), *s = bench_buf(be, (size_t)N * h, 1, 0, 1, &g);
        float *rstd = bench_buf(be, N, 0, 1, 0.1f, &g), *w = bench_buf(be, h, 0, 1, 0.1f, &g), *dw = be->alloc(h * 4);
        x.which = BE_RMS_F, x.p[0] = y, x.p[1] = rstd, x.p[2] = s, x.p[3] = xx, x.p[4] = r, x.p[5] = w;
        x.i[0] = N, x.i[1] = h;
        bench_report(&x, "rmsnorm_fwd (+resid)", 4.0 * N * h * ab, 0);
        x.which = BE_RMS_B, x.p[0] = xx, x.p[1] = dw, x.p[2] = y, x.p[3] = s, x.p[4] = rstd, x.p[5] = w, x.p[6] = r;
        bench_report(&x, "rmsnorm_bwd (+dres)", 4.0 * N * h * ab, 0);
        be->free(xx), be->free(r), be->free(y), be->free(s), be->free(rstd), be->free(w), be->free(dw);
    }
    { // GEMMs of one layer: fused q|k|v|g|b|a projection, o_proj, gate|up, down; and their backward; and the
      // three GEMMs of one 4096-row chunk of the lm head (x8 per step; its logits GEMM writes fp32 there)
        const int shapes[5][2] = {{2 * Kd + 2 * Vd + 2 * HV, h}, {h, Vd}, {2 * F, h}, {h, F}, {V, h}};
        const char *names[5] = {"in_proj [1552 x 1024]", "o_proj [1024 x 512]", "gate|up [8192 x 1024]",
                                "down [1024 x 4096]", "lm head chunk [128256 x 1024] M=4096"};
        for (int s = 0; s < 5; s++) {
            int No = shapes[s][0], K = shapes[s][1], M = s == 4 && N > 4096 ? 4096 : N;
            void *xx = bench_buf(be, (size_t)M * K, 1, 0, 1, &g), *W = bench_buf(be, (size_t)No * K, 1, 0, 0.02f, &g);
            void *y = bench_buf(be, (size_t)M * No, 1, 0, 1, &g);
            float *dW = be->alloc((size_t)No * K * 4);
            double fl = 2.0 * M * No * K;
            char nm[80];
            x.which = BE_MM_F, x.p[0] = y, x.p[1] = xx, x.p[2] = W, x.i[0] = M, x.i[1] = No, x.i[2] = K;
            snprintf(nm, sizeof nm, "matmul_fwd %s", names[s]);
            bench_report(&x, nm, 0, fl);
            x.which = BE_MM_BX, x.p[0] = xx, x.p[1] = y, x.p[2] = W;
            snprintf(nm, sizeof nm, "matmul_bwd dx %s", names[s]);
            bench_report(&x, nm, 0, fl);
            x.which = BE_MM_BW, x.p[0] = xx, x.p[1] = y, x.p[3] = dW;
            snprintf(nm, sizeof nm, "matmul_bwd dW %s", names[s]);
            bench_report(&x, nm, 0, fl);
            be->free(xx), be->free(W), be->free(y), be->free(dW);
        }
    }
    { // conv (q|k|v: D = 1024), l2norm (q: 4 heads of 64 inside the 1024-wide conv output)
        const int D = 2 * Kd + Vd;
        void *xx = bench_buf(be, (size_t)N * D, 1, 0, 1, &g), *y = bench_buf(be, (size_t)N * D, 1, 0, 1, &g);
        void *dx = bench_buf(be, (size_t)N * D, 1, 0, 1, &g);
        float *w = bench_buf(be, (size_t)D * 4, 0, 0, 0.3f, &g), *dw = be->alloc((size_t)D * 4 * 4);
        float *rstd = be->alloc((size_t)N * 4 * 4);
        x.which = BE_CONV_F, x.p[0] = y, x.p[1] = xx, x.p[2] = w, x.i[0] = B, x.i[1] = T, x.i[2] = D;
        bench_report(&x, "conv_silu_fwd D=1024", 2.0 * N * D * ab, 0);
        x.which = BE_CONV_B, x.p[0] = dx, x.p[1] = xx, x.p[2] = w, x.p[3] = dw, x.p[4] = y;
        bench_report(&x, "conv_silu_bwd D=1024", 3.0 * N * D * ab, 0);
        { // the same with packed documents
            int32_t *dsh = xmalloc((size_t)N * 4), *eids = xmalloc((size_t)N * 4);
            doc_layout_random(&g, eids, dsh, B, T);
            int32_t *ds = be->alloc((size_t)N * 4);
            be->memcpy_h2d(ds, dsh, (size_t)N * 4);
            x.ds = ds;
            x.which = BE_CONV_F, x.p[0] = y;
            bench_report(&x, "conv_silu_fwd D=1024 (packed documents)", 2.0 * N * D * ab, 0);
            x.which = BE_CONV_B, x.p[0] = dx;
            bench_report(&x, "conv_silu_bwd D=1024 (packed documents)", 3.0 * N * D * ab, 0);
            x.ds = NULL;
            be->free(ds), free(dsh), free(eids);
        }
        x.which = BE_L2_F, x.p[0] = y, x.p[1] = rstd, x.p[2] = xx, x.i[0] = N, x.i[1] = 4, x.i[2] = 64, x.i[3] = D;
        bench_report(&x, "l2norm_fwd (q, 4 x 64)", 2.0 * N * Kd * ab, 0);
        x.which = BE_L2_B, x.p[0] = y, x.p[1] = rstd, x.p[2] = xx, x.p[3] = dx;
        bench_report(&x, "l2norm_bwd (q, 4 x 64)", 3.0 * N * Kd * ab, 0);
        be->free(xx), be->free(y), be->free(dx), be->free(w), be->free(dw), be->free(rstd);
    }
    { // gate: b|a columns of a 16-wide buffer
        void *ba = bench_buf(be, (size_t)N * 16, 1, 0, 1, &g), *dba = bench_buf(be, (size_t)N * 16, 1, 0, 1, &g);
        float *beta = be->alloc((size_t)N * HV * 4), *gam = be->alloc((size_t)N * HV * 4);
        float *Al = bench_buf(be, HV, 0, 1, 0.5f, &g), *dt = bench_buf(be, HV, 0, -4, 1, &g);
        float *dAl = be->alloc(HV * 4), *ddt = be->alloc(HV * 4);
        x.which = BE_GATE_F, x.p[0] = beta, x.p[1] = gam, x.p[2] = ba, x.p[3] = Al, x.p[4] = dt;
        x.i[0] = N, x.i[1] = HV, x.i[2] = 16;
        bench_report(&x, "gate_fwd", N * 16 * ab + 2.0 * N * HV * 4, 0);
        x.which = BE_GATE_B, x.p[0] = beta, x.p[1] = gam, x.p[5] = dba, x.p[6] = dAl, x.p[7] = ddt;
        bench_report(&x, "gate_bwd", 2.0 * N * 16 * ab + 2.0 * N * HV * 4, 0);
        be->free(ba), be->free(dba), be->free(beta), be->free(gam), be->free(Al), be->free(dt), be->free(dAl),
            be->free(ddt);
    }
    { // delta rule: q|k as a 256-wide pair of buffers, v/o 512 wide
        size_t NT = (T + 63) / 64, hs_n = (size_t)B * HV * NT * 64 * 64;
        void *o = bench_buf(be, (size_t)N * Vd, 1, 0, 1, &g), *hsv = be->alloc(hs_n * 2);
        void *q = bench_buf(be, (size_t)N * Kd, 1, 0, 0.125f, &g), *k = bench_buf(be, (size_t)N * Kd, 1, 0, 0.125f, &g);
        void *v = bench_buf(be, (size_t)N * Vd, 1, 0, 1, &g);
        float *beta = bench_buf(be, (size_t)N * HV, 0, 0.5f, 0.1f, &g),
              *gam = bench_buf(be, (size_t)N * HV, 0, -0.5f, 0.1f, &g);
        void *dq = be->alloc((size_t)N * Kd * 2), *dk = be->alloc((size_t)N * Kd * 2),
             *dv = be->alloc((size_t)N * Vd * 2);
        float *db = be->alloc((size_t)N * HV * 4), *dg = be->alloc((size_t)N * HV * 4);
        x.which = BE_DR_F, x.p[0] = o, x.p[1] = hsv, x.p[2] = q, x.p[3] = k, x.p[4] = v, x.p[5] = beta, x.p[6] = gam;
        x.i[0] = B, x.i[1] = T;
        // useful FLOPs per (b, v head, chunk): KK^T, solve, W, U, W h, K^T V, Q K^T, Q h, S V: ~9 x 2*64^3
        double dr_fl = (double)B * HV * NT * 9 * 2 * 64.0 * 64 * 64;
        bench_report(&x, "delta_rule_fwd", 0, dr_fl);
        x.which = BE_DR_B, x.p[0] = o, x.p[1] = hsv, x.p[7] = dq, x.p[8] = dk, x.p[9] = dv, x.p[10] = db, x.p[11] = dg;
        bench_report(&x, "delta_rule_bwd", 0, 2.5 * dr_fl);
        // packed documents: EOD-separated rows (documents of 1..1024 tokens, ~500 on average), the same work
        int32_t *dsh = xmalloc((size_t)N * 4), *eids = xmalloc((size_t)N * 4);
        doc_layout_random(&g, eids, dsh, B, T);
        int32_t *ds = be->alloc((size_t)N * 4);
        be->memcpy_h2d(ds, dsh, (size_t)N * 4);
        x.ds = ds;
        x.which = BE_DR_F, x.p[0] = o;
        bench_report(&x, "delta_rule_fwd (packed documents)", 0, dr_fl);
        x.which = BE_DR_B;
        bench_report(&x, "delta_rule_bwd (packed documents)", 0, 2.5 * dr_fl);
        x.ds = NULL;
        be->free(ds), free(dsh), free(eids);
        be->free(o), be->free(hsv), be->free(q), be->free(k), be->free(v), be->free(beta), be->free(gam);
        be->free(dq), be->free(dk), be->free(dv), be->free(db), be->free(dg);
    }
    { // gated rmsnorm, swiglu
        void *o = bench_buf(be, (size_t)N * Vd, 1, 0, 1, &g), *z = bench_buf(be, (size_t)N * Vd, 1, 0, 1, &g);
        void *y = bench_buf(be, (size_t)N * Vd, 1, 0, 1, &g), *dz = bench_buf(be, (size_t)N * Vd, 1, 0, 1, &g);
        float *rstd = bench_buf(be, (size_t)N * HV, 0, 1, 0.1f, &g), *w = bench_buf(be, 64, 0, 1, 0.1f, &g);
        float *dw = be->alloc(64 * 4);
        x.which = BE_GRMS_F, x.p[0] = y, x.p[1] = rstd, x.p[2] = o, x.p[3] = z, x.p[4] = w, x.i[0] = N;
        bench_report(&x, "gated_rmsnorm_fwd", 3.0 * N * Vd * ab, 0);
        x.which = BE_GRMS_B, x.p[0] = y, x.p[5] = dz, x.p[6] = dz, x.p[7] = dw;
        x.p[5] = bench_buf(be, (size_t)N * Vd, 1, 0, 1, &g);
        bench_report(&x, "gated_rmsnorm_bwd", 5.0 * N * Vd * ab, 0);
        be->free(x.p[5]), be->free(o), be->free(z), be->free(y), be->free(dz), be->free(rstd), be->free(w),
            be->free(dw);
        void *gu = bench_buf(be, (size_t)N * 2 * F, 1, 0, 1, &g), *sy = bench_buf(be, (size_t)N * F, 1, 0, 1, &g);
        void *dgu = be->alloc((size_t)N * 2 * F * 2);
        x.which = BE_SWI_F, x.p[0] = sy, x.p[1] = gu, x.i[0] = N, x.i[1] = F;
        bench_report(&x, "swiglu_fwd F=4096", 3.0 * N * F * ab, 0);
        x.which = BE_SWI_B, x.p[0] = sy, x.p[1] = gu, x.p[2] = dgu;
        bench_report(&x, "swiglu_bwd F=4096", 5.0 * N * F * ab, 0);
        be->free(gu), be->free(sy), be->free(dgu);
    }
    { // lm head + CE
        void *y = bench_buf(be, (size_t)N * h, 1, 0, 1, &g), *E = bench_buf(be, (size_t)V * h, 1, 0, 0.02f, &g);
        void *dy = be->alloc((size_t)N * h * 2);
        float *dE = be->alloc((size_t)V * h * 4), *losses = be->alloc((size_t)N * 4);
        int32_t *d_t = be->alloc((size_t)N * 4);
        be->memcpy_h2d(d_t, ids, (size_t)N * 4);
        x.which = BE_CE, x.p[0] = losses, x.p[1] = dy, x.p[2] = dE, x.p[3] = y, x.p[4] = E, x.p[5] = d_t;
        x.i[0] = N, x.i[1] = h, x.i[2] = V;
        bench_report(&x, "lmhead_ce (fwd+bwd, 3 GEMMs)", 0, 3 * 2.0 * N * (double)V * h);
        be->free(y), be->free(E), be->free(dy), be->free(dE), be->free(losses), be->free(d_t);
    }
    { // optimizer over the 300M parameters
        size_t n = small ? 1000003 : 307767232;
        float *p = bench_buf(be, n, 0, 0, 0.02f, &g), *gg = bench_buf(be, n, 0, 0, 1, &g);
        float *m = be->alloc(n * 4), *v = be->alloc(n * 4), *out = be->alloc(16);
        void *pact = be->alloc(n * 2);
        x.which = BE_ADAMW, x.p[0] = p, x.p[1] = pact, x.p[2] = gg, x.p[3] = m, x.p[4] = v;
        x.i[0] = (int)n;
        bench_report(&x, "adamw (all parameters)", n * (4.0 * 4 + 3 * 4 + 2), 0);
        x.which = BE_SUMSQ, x.p[0] = gg, x.p[1] = out;
        bench_report(&x, "sumsq (all parameters)", n * 4.0, 0);
        be->free(p), be->free(gg), be->free(m), be->free(v), be->free(out), be->free(pact);
    }
    free(ids);
    return 0;
}

// ===================================================================================================

int main(int argc, char **argv) {
    if (arg_is_help(argc, argv)) {
        printf("usage: test_cuda_ops [--quick] [--only OP] [--bench]\n"
               "  compares every CUDA backend op with the CPU twin in fp32 and bf16 mode (see the file's header)\n"
               "  --quick    small shapes only      --only OP  cases whose name contains OP\n"
               "  --bench    time each op at the 300M model's shapes (bf16)\n"
               "  --bench-small  the benchmark's code at tiny shapes (a smoke run)\n"
               "  env: GDN_CUDA_DEBUG=1 synchronises after every kernel; VERBOSE=1 prints worst elements\n");
        return 0;
    }
    if (arg_flag(argc, argv, "--bench") || arg_flag(argc, argv, "--bench-small"))
        return run_bench(arg_flag(argc, argv, "--bench-small"));
    const char *child = arg_get(argc, argv, "--bad-id-child");
    if (child) return bad_id_child(atoi(child));
    const int quick = arg_flag(argc, argv, "--quick");
    const char *only = arg_get(argc, argv, "--only");
    char err[ERR_LEN];
    const Backend *cpu = backend_cpu();
    const Backend *g32 = backend_cuda(0, err, sizeof err);
    const Backend *g16 = g32 ? backend_cuda(1, err, sizeof err) : NULL;
    if (!g32 || !g16) {
        fprintf(stderr, "test_cuda_ops: no usable GPU: %s\n", err);
        return 2;
    }
    atexit(report_abort);
    build_cases(quick);
    check_conversion(g16);
    if (!only) check_bad_ids();
    for (int x = 0; x < g_ncases; x++) {
        Case *c = &g_cases[x];
        if (only && !strstr(c->op, only)) continue;
        char forced[16] = "", bv[16] = "";
        if (!strcmp(c->op, "lmhead_ce") && c->i[3] > 0) snprintf(forced, sizeof forced, "%d", c->i[3]);
        if (forced[0]) setenv("GDN_CUDA_CE_ROWS", forced, 1);
        if (!strncmp(c->op, "delta_rule", 10) && c->i[12] > 0) snprintf(bv, sizeof bv, "%d", c->i[12]);
        if (bv[0]) setenv("GDN_CUDA_DR_BV", bv, 1);
        check_case(c, cpu, g32, 0);
        check_case(c, cpu, g16, 1);
        if (forced[0]) unsetenv("GDN_CUDA_CE_ROWS");
        if (bv[0]) unsetenv("GDN_CUDA_DR_BV");
    }
    printf("%d checks, %d failed\n", g_checks, g_failures);
    return g_failures ? 1 : 0;
}
