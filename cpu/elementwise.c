// elementwise.c: embedding lookup and its scatter-add backward, SwiGLU, and the deterministic sums used
// by the optimizer (grad norm). Spec model.md §2.1 (embedding), §2.5 (SwiGLU).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_ops.h"

// x[n,:] = E[ids[n],:]
void cpu_embedding_fwd(void *x_, const int32_t *ids, const void *E_, int N, int h) {
    CPU_REQUIRE(x_ && ids && E_, "embedding_fwd", "NULL pointer (x, ids, E)");
    float *x = x_;
    const float *E = E_;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) memcpy(x + (size_t)n * h, E + (size_t)ids[n] * h, (size_t)h * sizeof(float));
}

// dE[ids[n],:] += dx[n,:]. Threads split the h columns; each walks the tokens in order, so every element
// of dE receives its additions in token order whatever the thread count.
void cpu_embedding_bwd(float *dE, const void *dx_, const int32_t *ids, int N, int h, int V) {
    CPU_REQUIRE(dE && dx_ && ids, "embedding_bwd", "NULL pointer (dE, dx, ids)");
    const float *dx = dx_;
    for (int n = 0; n < N; n++)
        if (ids[n] < 0 || ids[n] >= V)
            die("cpu backend, embedding_bwd: token id %d at row %d is outside the vocabulary [0, %d)", ids[n], n, V);
    enum { COLS = 64 };
    int ncb = (h + COLS - 1) / COLS;
#pragma omp parallel for schedule(static)
    for (int cb = 0; cb < ncb; cb++) {
        int c0 = cb * COLS, c1 = c0 + COLS < h ? c0 + COLS : h;
        for (int n = 0; n < N; n++) {
            float *dst = dE + (size_t)ids[n] * h;
            const float *src = dx + (size_t)n * h;
            for (int c = c0; c < c1; c++) dst[c] += src[c];
        }
    }
}

static inline float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }

// gu [N, 2F] = [gate | up]; y[N,F] = silu(gate) * up
void cpu_swiglu_fwd(void *y_, const void *gu_, int N, int F) {
    CPU_REQUIRE(y_ && gu_, "swiglu_fwd", "NULL pointer (y, gu)");
    float *y = y_;
    const float *gu = gu_;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * F, *u = g + F;
        float *yr = y + (size_t)n * F;
        for (int f = 0; f < F; f++) yr[f] = g[f] * sigmoidf_(g[f]) * u[f];
    }
}

// dgate = dy * up * silu'(gate), silu'(x) = s (1 + x (1 - s)); dup = dy * silu(gate); y (if asked) =
// silu(gate) * up as cpu_swiglu_fwd forms it
void cpu_swiglu_bwd(void *dgu_, void *y_, const void *dy_, const void *gu_, int N, int F) {
    CPU_REQUIRE(dgu_ && dy_ && gu_, "swiglu_bwd", "NULL pointer (dgu, dy, gu)");
    float *dgu = dgu_, *y = y_;
    const float *dy = dy_, *gu = gu_;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * F, *u = g + F, *d = dy + (size_t)n * F;
        float *dg = dgu + (size_t)n * 2 * F, *du = dg + F, *yr = y ? y + (size_t)n * F : NULL;
        for (int f = 0; f < F; f++) {
            float s = sigmoidf_(g[f]);
            float dyf = d[f], uf = u[f], gf = g[f]; // read all before writing: dgu may alias gu, y dy
            dg[f] = dyf * uf * s * (1.0f + gf * (1.0f - s));
            du[f] = dyf * gf * s;
            if (yr) yr[f] = gf * s * uf;
        }
    }
}

// Deterministic sum: fixed blocks summed in double, then the block sums in block order. The blocking
// depends on n only, never on the thread count.
enum { SUM_BLOCK = 4096 };
static void sum_blocks(float *out, const float *x, size_t n, int squares) {
    size_t nb = (n + SUM_BLOCK - 1) / SUM_BLOCK;
    double *part = xmalloc((nb ? nb : 1) * sizeof(double));
#pragma omp parallel for schedule(static)
    for (size_t b = 0; b < nb; b++) {
        size_t i0 = b * SUM_BLOCK, i1 = i0 + SUM_BLOCK < n ? i0 + SUM_BLOCK : n;
        double acc = 0;
        if (squares)
            for (size_t i = i0; i < i1; i++) acc += (double)x[i] * x[i];
        else
            for (size_t i = i0; i < i1; i++) acc += x[i];
        part[b] = acc;
    }
    double total = 0;
    for (size_t b = 0; b < nb; b++) total += part[b];
    free(part);
    out[0] = (float)total;
}

void cpu_sum(float *out, const float *x, size_t n) {
    CPU_REQUIRE(out && (x || !n), "sum", "NULL pointer (out, x)");
    sum_blocks(out, x, n, 0);
}
void cpu_sumsq(float *out, const float *x, size_t n) {
    CPU_REQUIRE(out && (x || !n), "sumsq", "NULL pointer (out, x)");
    sum_blocks(out, x, n, 1);
}
