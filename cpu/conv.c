// conv.c: the short causal depthwise convolution + SiLU applied to q/k/v (spec model.md §2.3 step 2):
// y[t,c] = silu(sum_{j<K} w[c*K+j] * x[t-K+1+j, c]); w[c*K+K-1] multiplies the current token.
// History before t=0 comes from state_in (decode) or is zero (training; the backward assumes zero).
// Packed documents (doc_start != NULL, [B*T], backend.h): y[t] reads only x[p] with p >= doc_start[t], so every
// document starts from a zero history, and state_in feeds only the row's first document (doc_start == 0).
// Threads own blocks of channels and walk batch and time in order, so dw is deterministic.
// y must not alias x (later outputs read earlier inputs); dx must not alias dy or x.
#include <math.h>
#include <stdlib.h>

#include "cpu/cpu_ops.h"

enum { CONV_CBLK = 16, CONV_KMAX = 16 };

static inline float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }

void cpu_conv_silu_fwd(void *y_, int ldy, const void *x_, int ldx, const float *w, const float *state_in,
                       float *state_out, int B, int T, int D, int K, const int32_t *doc_start) {
    CPU_REQUIRE(y_ && x_ && w, "conv_silu_fwd", "NULL pointer (y, x, w)");
    CPU_REQUIRE(K >= 1 && K <= CONV_KMAX, "conv_silu_fwd", "kernel width K=%d outside [1, %d]", K, CONV_KMAX);
    float *y = y_;
    const float *x = x_;
    int H1 = K - 1, ncb = (D + CONV_CBLK - 1) / CONV_CBLK;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int cb = 0; cb < ncb; cb++) {
            int c0 = cb * CONV_CBLK, nc = c0 + CONV_CBLK < D ? CONV_CBLK : D - c0;
            // hist[i][c]: input at t = i - (K-1), i < K-1. Copied first: state_out may alias state_in.
            float hist[CONV_KMAX][CONV_CBLK] = {{0}};
            if (state_in)
                for (int c = 0; c < nc; c++)
                    for (int i = 0; i < H1; i++) hist[i][c] = state_in[((size_t)b * D + c0 + c) * H1 + i];
            const float *xb = x + (size_t)b * T * ldx + c0;
            float *yb = y + (size_t)b * T * ldy + c0;
            const int32_t *ds = doc_start ? doc_start + (size_t)b * T : NULL;
            for (int t = 0; t < T; t++) {
                int lo = ds ? ds[t] : 0; // positions p < lo belong to an earlier document: read as 0
                for (int c = 0; c < nc; c++) {
                    float acc = 0;
                    for (int j = 0; j < K; j++) {
                        int p = t - H1 + j;
                        float xv = p >= 0 ? xb[(size_t)p * ldx + c] : hist[H1 + p][c];
                        if (ds && p < lo && (p >= 0 || lo > 0)) xv = 0;
                        acc += w[(size_t)(c0 + c) * K + j] * xv;
                    }
                    yb[(size_t)t * ldy + c] = acc * sigmoidf_(acc);
                }
            }
            if (state_out) {
                int lo = ds && T > 0 ? ds[T - 1] : 0; // the window of the row's last document only
                for (int c = 0; c < nc; c++)
                    for (int i = 0; i < H1; i++) {
                        int p = T - H1 + i;
                        float xv = p >= 0 ? xb[(size_t)p * ldx + c] : hist[H1 + p][c];
                        if (ds && p < lo && (p >= 0 || lo > 0)) xv = 0;
                        state_out[((size_t)b * D + c0 + c) * H1 + i] = xv;
                    }
            }
        }
}

// u = the pre-activation; du = dy * silu'(u); dx[t] = sum_j w[j] du[t+K-1-j]; dw[j] += du[t] x[t-K+1+j].
// Time runs backwards so a ring of the last K values of du serves dx. With doc_start, the pair (t, p) exists
// only for p >= doc_start[t], in dw and in dx alike.
void cpu_conv_silu_bwd(void *dx_, int lddx, float *dw, const void *dy_, int lddy, const void *x_, int ldx,
                       const float *w, int B, int T, int D, int K, const int32_t *doc_start) {
    CPU_REQUIRE(dx_ && dw && dy_ && x_ && w, "conv_silu_bwd", "NULL pointer (dx, dw, dy, x, w)");
    CPU_REQUIRE(K >= 1 && K <= CONV_KMAX, "conv_silu_bwd", "kernel width K=%d outside [1, %d]", K, CONV_KMAX);
    float *dx = dx_;
    const float *dy = dy_, *x = x_;
    int H1 = K - 1, ncb = (D + CONV_CBLK - 1) / CONV_CBLK;
#pragma omp parallel for schedule(static)
    for (int cb = 0; cb < ncb; cb++) {
        int c0 = cb * CONV_CBLK, nc = c0 + CONV_CBLK < D ? CONV_CBLK : D - c0;
        double dwacc[CONV_CBLK][CONV_KMAX] = {{0}};
        for (int b = 0; b < B; b++) {
            const float *xb = x + (size_t)b * T * ldx + c0, *dyb = dy + (size_t)b * T * lddy + c0;
            float *dxb = dx + (size_t)b * T * lddx + c0;
            float ring[CONV_KMAX][CONV_CBLK] = {{0}}; // du at t' (slot t' % K); zero for t' >= T
            const int32_t *ds = doc_start ? doc_start + (size_t)b * T : NULL;
            for (int t = T - 1; t >= 0; t--) {
                int lo = ds ? ds[t] : 0;
                for (int c = 0; c < nc; c++) {
                    const float *wc = w + (size_t)(c0 + c) * K;
                    float u = 0;
                    for (int j = 0; j < K; j++) {
                        int p = t - H1 + j;
                        if (p >= lo) u += wc[j] * xb[(size_t)p * ldx + c];
                    }
                    float s = sigmoidf_(u);
                    float du = dyb[(size_t)t * lddy + c] * s * (1.0f + u * (1.0f - s));
                    ring[t % K][c] = du;
                    for (int j = 0; j < K; j++) {
                        int p = t - H1 + j;
                        if (p >= lo) dwacc[c][j] += (double)du * xb[(size_t)p * ldx + c];
                    }
                    float g = 0;
                    for (int j = 0; j < K; j++) {
                        int tp = t + H1 - j; // the output that reads x[t] through w[j]
                        if (ds && tp < T && ds[tp] > t) continue;
                        g += wc[j] * ring[tp % K][c];
                    }
                    dxb[(size_t)t * lddx + c] = g;
                }
            }
        }
        for (int c = 0; c < nc; c++)
            for (int j = 0; j < K; j++) dw[(size_t)(c0 + c) * K + j] += (float)dwacc[c][j];
    }
}
