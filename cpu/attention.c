// attention.c: the softmax-attention blocks of a hybrid model (spec hybrid.md §2), fp32, readable: the
// reference the CUDA kernels are tested against. RoPE of q and k (rotate-half, fp32 tables as FLA builds
// them), then causal GQA attention with an optional sliding window, computed row by row with the
// max-subtracted softmax; the backward recomputes P from the saved logsumexp (FlashAttention's recipe).
// Determinism: the backward runs one task per (sequence, KV head), which owns that head's dK/dV rows and
// its query heads' dQ rows, and visits query heads and tokens in order.
// Packed documents (doc_start, backend.h): as FLA's varlen path (fla/layers/attn.py passes cu_seqlens both to
// its RotaryEmbedding, whose kernel (fla/modules/rotary.py) indexes cos/sin by the offset inside the sequence,
// and to flash_attn_varlen_func): RoPE positions restart at each document and attention stays inside it.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_ops.h"

// FLA RotaryEmbedding: inv_freq = 1 / theta^(arange(0, d, 2) / d) in fp32; angle = fp32(p) * inv_freq.
void cpu_rope_cs(float *c, float *s, int p, int d, float theta) {
    for (int i = 0; i < d / 2; i++) {
        float inv = 1.0f / powf(theta, (float)(2 * i) / (float)d);
        float ang = (float)p * inv;
        c[i] = cosf(ang);
        s[i] = sinf(ang);
    }
}

// y = rotate(x) by (c, s), or its transpose when inverse (the backward of the rotation)
static void rope_head(float *y, const float *x, const float *c, const float *s, int d, int inverse) {
    int h = d / 2;
    for (int i = 0; i < h; i++) {
        float x1 = x[i], x2 = x[i + h], sn = inverse ? -s[i] : s[i];
        y[i] = x1 * c[i] - x2 * sn;
        y[i + h] = x1 * sn + x2 * c[i];
    }
}

static void check_heads(const char *op, int Ha, int Hkv, int d) {
    CPU_REQUIRE(Ha > 0 && Hkv > 0 && Ha % Hkv == 0, "attention", "%s: Ha %d must be a positive multiple of Hkv %d", op,
                Ha, Hkv);
    CPU_REQUIRE(d > 0 && d % 2 == 0 && d <= 1024, "attention", "%s: head dim %d must be even, <= 1024", op, d);
}

void cpu_attn_qkv_fwd(void *Q_, void *K_, void *V_, int kv_bstride, const void *P_, int ldp, const float *bias,
                      const int32_t *pos, int B, int T, int Ha, int Hkv, int d, float theta, const int32_t *doc_start) {
    check_heads("attn_qkv_fwd", Ha, Hkv, d);
    CPU_REQUIRE(!(doc_start && pos), "attn_qkv_fwd", "doc_start with a KV-cache position (decoding has no documents)");
    int p0 = pos ? pos[0] : 0, Dq = Ha * d, Dkv = Hkv * d;
    CPU_REQUIRE(p0 >= 0 && T <= kv_bstride, "attn_qkv_fwd", "%d tokens exceed the %d key rows per sequence", T,
                kv_bstride);
    float *Q = Q_, *K = K_, *V = V_;
    const float *P = P_;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < B * T; n++) {
        int b = n / T, t = n % T;
        float c[512], s[512], x[1024];
        cpu_rope_cs(c, s, doc_start ? t - doc_start[n] : p0 + t, d, theta);
        const float *pr = P + (size_t)n * ldp;
        size_t kr = ((size_t)b * kv_bstride + (p0 + t) % kv_bstride) * Dkv; // a ring when the window allows
        for (int j = 0; j < Ha + Hkv; j++) { // q heads, then k heads: bias, then rotate
            const float *src = pr + (size_t)j * d;
            for (int e = 0; e < d; e++) x[e] = src[e] + (bias ? bias[j * d + e] : 0.0f);
            float *dst = j < Ha ? Q + (size_t)n * Dq + (size_t)j * d : K + kr + (size_t)(j - Ha) * d;
            rope_head(dst, x, c, s, d, 0);
        }
        for (int e = 0; e < Dkv; e++) V[kr + e] = pr[Dq + Dkv + e] + (bias ? bias[Dq + Dkv + e] : 0.0f);
    }
}

void cpu_attn_qkv_bwd(void *dP_, int lddp, float *dbias, const void *dQ_, const void *dK_, const void *dV_, int B,
                      int T, int Ha, int Hkv, int d, float theta, const int32_t *doc_start) {
    check_heads("attn_qkv_bwd", Ha, Hkv, d);
    int Dq = Ha * d, Dkv = Hkv * d, N = B * T;
    float *dP = dP_;
    const float *dQ = dQ_, *dK = dK_, *dV = dV_;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float c[512], s[512];
        cpu_rope_cs(c, s, n % T - (doc_start ? doc_start[n] : 0), d, theta);
        float *pr = dP + (size_t)n * lddp;
        for (int j = 0; j < Ha; j++) rope_head(pr + (size_t)j * d, dQ + (size_t)n * Dq + (size_t)j * d, c, s, d, 1);
        for (int j = 0; j < Hkv; j++)
            rope_head(pr + Dq + (size_t)j * d, dK + (size_t)n * Dkv + (size_t)j * d, c, s, d, 1);
        memcpy(pr + Dq + Dkv, dV + (size_t)n * Dkv, (size_t)Dkv * sizeof(float));
    }
    if (!dbias) return;
#pragma omp parallel for schedule(static)
    for (int col = 0; col < Dq + 2 * Dkv; col++) { // the bias gradient is the column sum of dP, in token order
        float acc = 0;
        for (int n = 0; n < N; n++) acc += dP[(size_t)n * lddp + col];
        dbias[col] += acc;
    }
}

static inline float dotf(const float *a, const float *b, int d) {
    float s = 0;
    for (int e = 0; e < d; e++) s += a[e] * b[e];
    return s;
}

// Keys [lo, hi] that query t (position p0+t) sees; ds: where its document starts (0 without documents).
static inline void key_range(int p0, int t, int window, int ds, int *lo, int *hi) {
    *hi = p0 + t;
    *lo = window > 0 && *hi - window + 1 > 0 ? *hi - window + 1 : 0;
    if (ds > *lo) *lo = ds;
}

void cpu_attn_fwd(void *O_, float *lse, const void *Q_, const void *K_, const void *V_, int kv_bstride,
                  const int32_t *pos, int B, int T, int Ha, int Hkv, int d, int window, float scale,
                  const int32_t *doc_start) {
    check_heads("attn_fwd", Ha, Hkv, d);
    CPU_REQUIRE(!(doc_start && pos), "attn_fwd", "doc_start with a KV-cache position (decoding has no documents)");
    int p0 = pos ? pos[0] : 0, g = Ha / Hkv, Dq = Ha * d, Dkv = Hkv * d;
    // the rows hold every key seen, or (a ring) the last kv_bstride, enough for the window
    CPU_REQUIRE(p0 >= 0 && (p0 + T <= kv_bstride || (window > 0 && T + window - 1 <= kv_bstride)), "attn_fwd",
                "keys %d (window %d) exceed the %d rows per sequence", p0 + T, window, kv_bstride);
    float *O = O_;
    const float *Q = Q_, *K = K_, *V = V_;
#pragma omp parallel for schedule(static)
    for (int bj = 0; bj < B * Ha; bj++) {
        int b = bj / Ha, j = bj % Ha, c = j / g;
        float *sc = xmalloc((size_t)(p0 + T) * sizeof(float));
        for (int t = 0; t < T; t++) {
            const float *q = Q + ((size_t)b * T + t) * Dq + (size_t)j * d;
            float *o = O + ((size_t)b * T + t) * Dq + (size_t)j * d;
            int lo, hi;
            key_range(p0, t, window, doc_start ? doc_start[(size_t)b * T + t] : 0, &lo, &hi);
            float mx = -INFINITY;
            for (int tau = lo; tau <= hi; tau++) {
                sc[tau] = scale * dotf(q, K + ((size_t)b * kv_bstride + tau % kv_bstride) * Dkv + (size_t)c * d, d);
                if (sc[tau] > mx) mx = sc[tau];
            }
            float l = 0;
            for (int e = 0; e < d; e++) o[e] = 0;
            for (int tau = lo; tau <= hi; tau++) {
                float p = expf(sc[tau] - mx);
                const float *v = V + ((size_t)b * kv_bstride + tau % kv_bstride) * Dkv + (size_t)c * d;
                l += p;
                for (int e = 0; e < d; e++) o[e] += p * v[e];
            }
            for (int e = 0; e < d; e++) o[e] /= l;
            if (lse) lse[((size_t)b * Ha + j) * T + t] = mx + logf(l);
        }
        free(sc);
    }
}

void cpu_attn_bwd(void *dQ_, void *dK_, void *dV_, const void *dO_, const void *Q_, const void *K_, const void *V_,
                  const void *O_, const float *lse, int B, int T, int Ha, int Hkv, int d, int window, float scale,
                  const int32_t *doc_start) {
    check_heads("attn_bwd", Ha, Hkv, d);
    int g = Ha / Hkv, Dq = Ha * d, Dkv = Hkv * d;
    float *dQ = dQ_, *dK = dK_, *dV = dV_;
    const float *dO = dO_, *Q = Q_, *K = K_, *V = V_, *O = O_;
#pragma omp parallel for schedule(static)
    for (int bc = 0; bc < B * Hkv; bc++) {
        int b = bc / Hkv, c = bc % Hkv;
        for (int t = 0; t < T; t++) {
            memset(dK + ((size_t)b * T + t) * Dkv + (size_t)c * d, 0, (size_t)d * sizeof(float));
            memset(dV + ((size_t)b * T + t) * Dkv + (size_t)c * d, 0, (size_t)d * sizeof(float));
        }
        for (int j = c * g; j < (c + 1) * g; j++)
            for (int t = 0; t < T; t++) {
                size_t qr = ((size_t)b * T + t) * Dq + (size_t)j * d;
                const float *q = Q + qr, *dout = dO + qr;
                float *dq = dQ + qr, L = lse[((size_t)b * Ha + j) * T + t], D = dotf(dout, O + qr, d);
                int lo, hi;
                key_range(0, t, window, doc_start ? doc_start[(size_t)b * T + t] : 0, &lo, &hi);
                for (int e = 0; e < d; e++) dq[e] = 0;
                for (int tau = lo; tau <= hi; tau++) {
                    size_t kr = ((size_t)b * T + tau) * Dkv + (size_t)c * d;
                    float p = expf(scale * dotf(q, K + kr, d) - L);
                    float ds = p * (dotf(dout, V + kr, d) - D) * scale; // dS, with the score scale folded in
                    for (int e = 0; e < d; e++) {
                        dq[e] += ds * K[kr + e];
                        dK[kr + e] += ds * q[e];
                        dV[kr + e] += p * dout[e];
                    }
                }
            }
    }
}

void cpu_pos_advance(int32_t *pos, int n) { pos[0] += n; }
