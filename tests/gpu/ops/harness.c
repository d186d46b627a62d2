// harness.c: test_cuda_ops' harness (see harness.h): cases, running them on a backend, comparing.
#include "tests/gpu/ops/harness.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// ===================================================================================================
// random numbers (splitmix64)

uint64_t rng_u64(Rng *g) {
    uint64_t z = (g->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
float rng_uniform(Rng *g, float lo, float hi) { return lo + (hi - lo) * (float)((rng_u64(g) >> 40) * 0x1p-24); }
float rng_normal(Rng *g) {
    double u1 = ((rng_u64(g) >> 11) + 1) * 0x1p-53, u2 = (rng_u64(g) >> 11) * 0x1p-53;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

Case *g_cases;
int g_ncases;
static int g_capcases;

Case *new_case(const char *op, RunFn run, const char *fmt, ...) {
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

Tensor *add_t(Case *c, const char *name, Kind kind, Role role, size_t rows, size_t cols, size_t ld, Tol t32,
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
Tensor *add_in(Case *c, const char *name, Kind kind, size_t rows, size_t cols, size_t ld) {
    return add_t(c, name, kind, R_IN, rows, cols, ld, F32_EXACT, B16_EXACT);
}
size_t tsize(const Tensor *t) { return t->rows * t->ld; }

void fill_normal(Tensor *t, Rng *g, float mean, float std) {
    for (size_t x = 0; x < tsize(t); x++) t->init[x] = mean + std * rng_normal(g);
}
void fill_uniform(Tensor *t, Rng *g, float lo, float hi) {
    for (size_t x = 0; x < tsize(t); x++) t->init[x] = rng_uniform(g, lo, hi);
}
// Unit L2 norm per head vector of d elements (columns [i*d, (i+1)*d) of each row).
void normalise_heads(Tensor *t, int heads, int d) {
    for (size_t r = 0; r < t->rows; r++)
        for (int i = 0; i < heads; i++) {
            float *v = t->init + r * t->ld + (size_t)i * d;
            double ss = 0;
            for (int e = 0; e < d; e++) ss += (double)v[e] * v[e];
            float inv = (float)(1.0 / sqrt(ss + 1e-6));
            for (int e = 0; e < d; e++) v[e] *= inv;
        }
}
float round_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }

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
        if (t->role == R_OUT || t->role == R_SCRATCH) {
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
        if (t->role != R_IN && t->role != R_SCRATCH && t->ld > t->cols && !res->err[0])
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

int g_failures, g_checks;
static char g_running[200]; // the case being run: named if the backend dies during it
void report_abort(void) {
    if (g_running[0])
        fprintf(stderr,
                "test_cuda_ops: ABORTED during %s; the cases after it did not run (rerun with --only to "
                "skip ahead, GDN_CUDA_DEBUG=1 to name the failing kernel)\n",
                g_running);
}

static double seconds_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

void check_case(const Case *c, const Backend *cpu, const Backend *gpu, int bf16) {
    Result ref, got, again;
    const double t0 = seconds_now();
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
        if (t->role == R_IN || t->role == R_SCRATCH || t->is_null || t->kind == K_I32 || c->alias[x] >= 0) continue;
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
            if (got.raw[x] && c->t[x].role != R_IN && c->t[x].role != R_SCRATCH && memcmp(got.raw[x], again.raw[x], got.raw_bytes[x])) {
                fail = 1;
                snprintf(why, sizeof why, "%s differs between two identical runs (not deterministic)", c->t[x].name);
            }
        result_free(&again);
    }
    g_checks++;
    if (fail) g_failures++;
    char took[32] = ""; // CASE_TIMES=1 (the emulator's run): where its minutes go
    if (getenv("CASE_TIMES")) snprintf(took, sizeof took, "  %.1f s", seconds_now() - t0);
    printf("%s %-62s %s  max err %.2e (%s) tol %.1e%s%s\n", fail ? "FAIL" : "PASS", c->name, mode, worst_err, worst_name,
           worst_tol, c->determinism && !fail ? "  deterministic" : "", took);
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

