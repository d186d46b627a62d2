// norms.c: RMSNorm with the fused residual add (spec model.md §2.2), the per-head L2 norm of q/k
// (§2.3 step 4) and the gated output norm FusedRMSNormGated (§2.3 step 8), forward and backward.
// Row statistics are accumulated in double (cheap here, and the exact fp32 rounding of FLA's
// reductions is not reproducible anyway). Weight gradients are reduced over tokens in fixed row blocks
// whose partial sums are added in block order, so they do not depend on the thread count.
// Every pass reads a row element before writing the same index, so outputs may alias inputs of the
// same shape (e.g. s_out == resid, ds == dres).
#include <math.h>
#include <stdlib.h>

#include "cpu/cpu_ops.h"

enum { ROW_BLOCK = 32 }; // rows per partial sum of a weight gradient

static inline float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }

// Adds the row-block partial sums part[nblk][width] (double) to dw in block order.
static void add_partials(float *dw, const double *part, int nblk, int width) {
#pragma omp parallel for schedule(static)
    for (int c = 0; c < width; c++) {
        double acc = 0;
        for (int b = 0; b < nblk; b++) acc += part[(size_t)b * width + c];
        dw[c] += (float)acc;
    }
}

// ---- RMSNorm: s = x + resid; y = s * rstd * w
void cpu_rmsnorm_fwd(void *y_, float *rstd, void *s_out_, const void *x_, const void *resid_, const float *w,
                     int N, int h, float eps) {
    CPU_REQUIRE(y_ && rstd && x_ && w, "rmsnorm_fwd", "NULL pointer (y, rstd, x, w)");
    CPU_REQUIRE(!resid_ || s_out_, "rmsnorm_fwd", "s_out is required when resid is given (the backward reads s)");
    float *y = y_, *s_out = s_out_;
    const float *x = x_, *resid = resid_;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        size_t o = (size_t)n * h;
        double ss = 0;
        for (int c = 0; c < h; c++) {
            float s = resid ? x[o + c] + resid[o + c] : x[o + c];
            if (s_out) s_out[o + c] = s;
            ss += (double)s * s;
        }
        float rs = (float)(1.0 / sqrt(ss / h + (double)eps));
        rstd[n] = rs;
        const float *s = s_out ? s_out + o : x + o; // x may have been overwritten when s_out aliases it
        for (int c = 0; c < h; c++) y[o + c] = s[c] * rs * w[c];
    }
}

// xhat = s*rstd, g = dy*w: ds = rstd * (g - xhat * mean(g . xhat)) (+ dres); dw += sum_n dy * xhat
void cpu_rmsnorm_bwd(void *ds_, float *dw, const void *dy_, const void *s_, const float *rstd, const float *w,
                     const void *dres_, int N, int h) {
    CPU_REQUIRE(ds_ && dw && dy_ && s_ && rstd && w, "rmsnorm_bwd", "NULL pointer (ds, dw, dy, s, rstd, w)");
    float *ds = ds_;
    const float *dy = dy_, *s = s_, *dres = dres_;
    int nblk = (N + ROW_BLOCK - 1) / ROW_BLOCK;
    double *part = xcalloc((size_t)(nblk ? nblk : 1) * h, sizeof(double));
#pragma omp parallel for schedule(static)
    for (int b = 0; b < nblk; b++) {
        double *pw = part + (size_t)b * h;
        int n1 = (b + 1) * ROW_BLOCK < N ? (b + 1) * ROW_BLOCK : N;
        for (int n = b * ROW_BLOCK; n < n1; n++) {
            size_t o = (size_t)n * h;
            float rs = rstd[n];
            double dot = 0;
            for (int c = 0; c < h; c++) {
                float xhat = s[o + c] * rs;
                dot += (double)(dy[o + c] * w[c]) * xhat;
                pw[c] += (double)dy[o + c] * xhat;
            }
            float mean = (float)(dot / h);
            for (int c = 0; c < h; c++) {
                float xhat = s[o + c] * rs;
                float g = (dy[o + c] * w[c] - xhat * mean) * rs;
                ds[o + c] = dres ? g + dres[o + c] : g;
            }
        }
    }
    add_partials(dw, part, nblk, h);
    free(part);
}

// ---- L2 norm per head vector: y = x / sqrt(sum x^2 + 1e-6)
void cpu_l2norm_fwd(void *y_, int ldy, float *rstd, const void *x_, int ldx, int N, int heads, int d) {
    CPU_REQUIRE(y_ && rstd && x_, "l2norm_fwd", "NULL pointer (y, rstd, x)");
    float *y = y_;
    const float *x = x_;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        for (int i = 0; i < heads; i++) {
            const float *xr = x + (size_t)n * ldx + (size_t)i * d;
            float *yr = y + (size_t)n * ldy + (size_t)i * d;
            double ss = 0;
            for (int e = 0; e < d; e++) ss += (double)xr[e] * xr[e];
            float rs = (float)(1.0 / sqrt(ss + 1e-6));
            rstd[(size_t)n * heads + i] = rs;
            for (int e = 0; e < d; e++) yr[e] = xr[e] * rs;
        }
}

// dx = rstd * (dy - (dy . y) y)
void cpu_l2norm_bwd(void *dx_, int lddx, const void *dy_, int lddy, const void *y_, int ldy, const float *rstd,
                    int N, int heads, int d) {
    CPU_REQUIRE(dx_ && dy_ && y_ && rstd, "l2norm_bwd", "NULL pointer (dx, dy, y, rstd)");
    float *dx = dx_;
    const float *dy = dy_, *y = y_;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        for (int i = 0; i < heads; i++) {
            const float *dyr = dy + (size_t)n * lddy + (size_t)i * d, *yr = y + (size_t)n * ldy + (size_t)i * d;
            float *dxr = dx + (size_t)n * lddx + (size_t)i * d;
            double dot = 0;
            for (int e = 0; e < d; e++) dot += (double)dyr[e] * yr[e];
            float rs = rstd[(size_t)n * heads + i], fd = (float)dot;
            for (int e = 0; e < d; e++) dxr[e] = rs * (dyr[e] - fd * yr[e]);
        }
}

// ---- FusedRMSNormGated (swish): per (n, v head j): y = o * rstd * w * silu(z), stats over dv
void cpu_gated_rmsnorm_fwd(void *y_, int ldy, float *rstd, const void *o_, int ldo, const void *z_, int ldz,
                           const float *w, int N, int HV, int dv, float eps) {
    CPU_REQUIRE(y_ && rstd && o_ && z_ && w, "gated_rmsnorm_fwd", "NULL pointer (y, rstd, o, z, w)");
    float *y = y_;
    const float *o = o_, *z = z_;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        for (int j = 0; j < HV; j++) {
            const float *orow = o + (size_t)n * ldo + (size_t)j * dv, *zr = z + (size_t)n * ldz + (size_t)j * dv;
            float *yr = y + (size_t)n * ldy + (size_t)j * dv;
            double ss = 0;
            for (int e = 0; e < dv; e++) ss += (double)orow[e] * orow[e];
            float rs = (float)(1.0 / sqrt(ss / dv + (double)eps));
            rstd[(size_t)n * HV + j] = rs;
            for (int e = 0; e < dv; e++) {
                float ze = zr[e];
                yr[e] = orow[e] * rs * w[e] * (ze * sigmoidf_(ze));
            }
        }
}

// With xhat = o*rstd, g = silu(z): dz = dy * xhat * w * silu'(z); u = dy*g*w;
// do = rstd * (u - xhat * mean(u . xhat)); dw += sum over (n, j) of dy * g * xhat.
void cpu_gated_rmsnorm_bwd(void *do_, int lddo, void *dz_, int lddz, float *dw, const void *dy_, int lddy,
                           const void *o_, int ldo, const void *z_, int ldz, const float *rstd, const float *w, int N,
                           int HV, int dv) {
    CPU_REQUIRE(do_ && dz_ && dw && dy_ && o_ && z_ && rstd && w, "gated_rmsnorm_bwd",
                "NULL pointer (do, dz, dw, dy, o, z, rstd, w)");
    float *dO = do_, *dz = dz_;
    const float *dy = dy_, *o = o_, *z = z_;
    int nblk = (N + ROW_BLOCK - 1) / ROW_BLOCK;
    double *part = xcalloc((size_t)(nblk ? nblk : 1) * dv, sizeof(double));
#pragma omp parallel for schedule(static)
    for (int b = 0; b < nblk; b++) {
        double *pw = part + (size_t)b * dv;
        int n1 = (b + 1) * ROW_BLOCK < N ? (b + 1) * ROW_BLOCK : N;
        for (int n = b * ROW_BLOCK; n < n1; n++)
            for (int j = 0; j < HV; j++) {
                const float *dyr = dy + (size_t)n * lddy + (size_t)j * dv;
                const float *orow = o + (size_t)n * ldo + (size_t)j * dv, *zr = z + (size_t)n * ldz + (size_t)j * dv;
                float *dor = dO + (size_t)n * lddo + (size_t)j * dv, *dzr = dz + (size_t)n * lddz + (size_t)j * dv;
                float rs = rstd[(size_t)n * HV + j];
                double dot = 0;
                for (int e = 0; e < dv; e++) {
                    float ze = zr[e], g = ze * sigmoidf_(ze), xhat = orow[e] * rs;
                    dot += (double)(dyr[e] * g * w[e]) * xhat;
                    pw[e] += (double)(dyr[e] * g) * xhat;
                }
                float mean = (float)(dot / dv);
                for (int e = 0; e < dv; e++) {
                    float ze = zr[e], sg = sigmoidf_(ze), g = ze * sg, xhat = orow[e] * rs, dye = dyr[e];
                    float u = dye * g * w[e];
                    dor[e] = (u - xhat * mean) * rs;
                    dzr[e] = dye * xhat * w[e] * sg * (1.0f + ze * (1.0f - sg));
                }
            }
    }
    add_partials(dw, part, nblk, dv);
    free(part);
}
