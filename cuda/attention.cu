// attention.cu: the softmax-attention ops of a hybrid's attention blocks (spec hybrid.md §2) on CUDA
// cores, for both act dtypes: the RoPE'd q|k|v split (fwd/bwd), causal GQA attention with a window
// (fwd/bwd) and the KV-cache position counter. Twins of cpu/attention.c.
//
// Attention (fp32 mode, decode steps, other head dims; bf16 prefill/training use the FlashAttention
// kernels of attention_fwd.cu and attention_bwd.cu, d 64 and 128): one warp per query row (b, head j, token t); lane l holds head elements l, l+32, .. (d <= 128),
// keys visited in order with the online softmax (fp32 m, l, o). Decoding reads the cache length from
// device memory (pos), so a recorded graph replays correctly as the cache grows.
// Backward, deterministic with no atomics (FLA parallel_attn's split, spec §4.3): the dQ kernel (one warp
// per query row, also writes D = rowsum(dO * O)), then the dK/dV kernel (one warp per key row and KV head,
// visiting the group's query heads and the rows that see the key in order).
// bf16 mode: inputs bf16, all arithmetic fp32, outputs rounded once; RoPE tables rounded to bf16 as FLA's.
// Packed documents (doc_start, backend.h): RoPE positions t - doc_start[t]; query t sees keys from doc_start[t]
// on (FLA's varlen path: cpu/attention.c says where FLA does it).
#include "cuda/attention.cuh"

namespace {
enum { AT_WARPS = 4, AT_MAX_D = 128 };

template <typename T> __device__ __forceinline__ void rope_cs(float &c, float &s, int p, int i, int d, float theta) {
    const float inv = 1.0f / powf(theta, (float)(2 * i) / (float)d);
    const float ang = (float)p * inv;
    c = rnd<T>(cosf(ang)); // FLA caches cos/sin in the activation dtype
    s = rnd<T>(sinf(ang));
}

// grid (N), block 128: Q and K rows rotated, the V row copied (+ bias); K/V rows at the cache position.
template <typename T>
__global__ void qkv_fwd_kernel(T *Q, T *K, T *V, int kvs, const T *P, int ldp, const float *bias, const int32_t *pos,
                               int Tn, int Ha, int Hkv, int d, float theta, const int32_t *ds) {
    const int n = blockIdx.x, b = n / Tn, t = n % Tn, h = d / 2, Dq = Ha * d, Dkv = Hkv * d;
    const int p = ds ? t - ds[n] : (pos ? pos[0] : 0) + t, row = ((pos ? pos[0] : 0) + t) % kvs; // RoPE pos; ring row
    const T *pr = P + (size_t)n * ldp;
    const size_t kr = ((size_t)b * kvs + row) * Dkv;
    for (int idx = threadIdx.x; idx < (Ha + Hkv) * h; idx += blockDim.x) {
        const int j = idx / h, i = idx % h, c0 = j * d + i;
        const float x1 = to_f(pr[c0]) + (bias ? bias[c0] : 0.0f), x2 = to_f(pr[c0 + h]) + (bias ? bias[c0 + h] : 0.0f);
        float c, s;
        rope_cs<T>(c, s, p, i, d, theta);
        T *dst = j < Ha ? Q + (size_t)n * Dq + (size_t)j * d : K + kr + (size_t)(j - Ha) * d;
        dst[i] = from_f<T>(x1 * c - x2 * s);
        dst[i + h] = from_f<T>(x1 * s + x2 * c);
    }
    for (int e = threadIdx.x; e < Dkv; e += blockDim.x)
        V[kr + e] = from_f<T>(to_f(pr[Dq + Dkv + e]) + (bias ? bias[Dq + Dkv + e] : 0.0f));
}

// grid (N), block 128: the transposed rotation of dQ, dK into dP; dV copied.
template <typename T>
__global__ void qkv_bwd_kernel(T *dP, int lddp, const T *dQ, const T *dK, const T *dV, int Tn, int Ha, int Hkv, int d,
                               float theta, const int32_t *ds) {
    const int n = blockIdx.x, t = n % Tn - (ds ? ds[n] : 0), h = d / 2, Dq = Ha * d, Dkv = Hkv * d; // t: RoPE position
    T *pr = dP + (size_t)n * lddp;
    for (int idx = threadIdx.x; idx < (Ha + Hkv) * h; idx += blockDim.x) {
        const int j = idx / h, i = idx % h;
        const T *src = j < Ha ? dQ + (size_t)n * Dq + (size_t)j * d : dK + (size_t)n * Dkv + (size_t)(j - Ha) * d;
        const float y1 = to_f(src[i]), y2 = to_f(src[i + h]);
        float c, s;
        rope_cs<T>(c, s, t, i, d, theta);
        pr[j * d + i] = from_f<T>(y1 * c + y2 * s);
        pr[j * d + i + h] = from_f<T>(-y1 * s + y2 * c);
    }
    for (int e = threadIdx.x; e < Dkv; e += blockDim.x) pr[Dq + Dkv + e] = dV[(size_t)n * Dkv + e];
}

// dbias[col] += sum_n dP[n, col], rows in order (one thread per column: a single writer).
template <typename T> __global__ void dbias_kernel(float *dbias, const T *dP, int lddp, int N, int W) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= W) return;
    float acc = 0.0f;
    for (int n = 0; n < N; n++) acc += to_f(dP[(size_t)n * lddp + col]);
    dbias[col] += acc;
}

template <int R> __device__ __forceinline__ float warp_dot(const float (&a)[R], const float (&b)[R]) {
    float s = 0.0f;
#pragma unroll
    for (int r = 0; r < R; r++) s += a[r] * b[r];
    return warp_sum(s);
}
// lane's elements l + 32 r (< d) of a head vector; zero past d
template <typename T, int R> __device__ __forceinline__ void load_row(float (&x)[R], const T *p, int d) {
    const int l = threadIdx.x & 31;
#pragma unroll
    for (int r = 0; r < R; r++) x[r] = l + 32 * r < d ? to_f(p[l + 32 * r]) : 0.0f;
}


// grid (ceil(T / 4), Ha, B), 4 warps: warp = query row.
template <typename T, int R> __global__ void attn_fwd_kernel(AttnArgs a) {
    const int t = blockIdx.x * AT_WARPS + (threadIdx.x >> 5), j = blockIdx.y, b = blockIdx.z;
    if (t >= a.T) return;
    const int g = a.Ha / a.Hkv, c = j / g, Dq = a.Ha * a.d, Dkv = a.Hkv * a.d, l = threadIdx.x & 31;
    const int hi = (a.pos ? a.pos[0] : 0) + t;
    const int lo = max(a.window > 0 && hi - a.window + 1 > 0 ? hi - a.window + 1 : 0, a.ds ? a.ds[b * a.T + t] : 0);
    const size_t qr = ((size_t)b * a.T + t) * Dq + (size_t)j * a.d;
    float q[R], o[R], m = -INFINITY, sum = 0.0f;
    load_row<T, R>(q, (const T *)a.Q + qr, a.d);
#pragma unroll
    for (int r = 0; r < R; r++) o[r] = 0.0f;
    for (int tau = lo; tau <= hi; tau++) {
        const size_t kr = ((size_t)b * a.kvs + tau % a.kvs) * Dkv + (size_t)c * a.d; // a ring with a window
        float k[R], v[R];
        load_row<T, R>(k, (const T *)a.K + kr, a.d);
        load_row<T, R>(v, (const T *)a.V + kr, a.d);
        const float s = a.scale * warp_dot<R>(q, k), mn = fmaxf(m, s), corr = expf(m - mn), p = expf(s - mn);
        sum = sum * corr + p;
#pragma unroll
        for (int r = 0; r < R; r++) o[r] = o[r] * corr + p * v[r];
        m = mn;
    }
    T *out = (T *)a.Oout + qr;
#pragma unroll
    for (int r = 0; r < R; r++)
        if (l + 32 * r < a.d) out[l + 32 * r] = from_f<T>(o[r] / sum);
    if (a.lse_out && l == 0) a.lse_out[((size_t)b * a.Ha + j) * a.T + t] = m + logf(sum);
}

// grid (ceil(T / 4), Ha, B): dQ of one query row, and D = dO . O (kept for the dK/dV kernel).
template <typename T, int R> __global__ void attn_bwd_dq_kernel(AttnArgs a) {
    const int t = blockIdx.x * AT_WARPS + (threadIdx.x >> 5), j = blockIdx.y, b = blockIdx.z;
    if (t >= a.T) return;
    const int g = a.Ha / a.Hkv, c = j / g, Dq = a.Ha * a.d, Dkv = a.Hkv * a.d, l = threadIdx.x & 31;
    const int lo = max(a.window > 0 && t - a.window + 1 > 0 ? t - a.window + 1 : 0, a.ds ? a.ds[b * a.T + t] : 0);
    const size_t qr = ((size_t)b * a.T + t) * Dq + (size_t)j * a.d, sr = ((size_t)b * a.Ha + j) * a.T + t;
    float q[R], dout[R], ov[R], dq[R];
    load_row<T, R>(q, (const T *)a.Q + qr, a.d);
    load_row<T, R>(dout, (const T *)a.dO + qr, a.d);
    load_row<T, R>(ov, (const T *)a.O + qr, a.d);
    const float D = warp_dot<R>(dout, ov), L = a.lse[sr];
    if (l == 0) a.D[sr] = D;
#pragma unroll
    for (int r = 0; r < R; r++) dq[r] = 0.0f;
    for (int tau = lo; tau <= t; tau++) {
        const size_t kr = ((size_t)b * a.T + tau) * Dkv + (size_t)c * a.d;
        float k[R], v[R];
        load_row<T, R>(k, (const T *)a.K + kr, a.d);
        load_row<T, R>(v, (const T *)a.V + kr, a.d);
        const float p = expf(a.scale * warp_dot<R>(q, k) - L), ds = p * (warp_dot<R>(dout, v) - D) * a.scale;
#pragma unroll
        for (int r = 0; r < R; r++) dq[r] += ds * k[r];
    }
    T *out = (T *)a.dQ + qr;
#pragma unroll
    for (int r = 0; r < R; r++)
        if (l + 32 * r < a.d) out[l + 32 * r] = from_f<T>(dq[r]);
}

// grid (ceil(T / 4), Hkv, B): dK, dV of one key row of KV head c, summed over the group's query heads.
template <typename T, int R> __global__ void attn_bwd_dkv_kernel(AttnArgs a) {
    const int tau = blockIdx.x * AT_WARPS + (threadIdx.x >> 5), c = blockIdx.y, b = blockIdx.z;
    if (tau >= a.T) return;
    const int g = a.Ha / a.Hkv, Dq = a.Ha * a.d, Dkv = a.Hkv * a.d, l = threadIdx.x & 31;
    const int t_end = a.window > 0 && tau + a.window - 1 < a.T - 1 ? tau + a.window - 1 : a.T - 1;
    const size_t kr = ((size_t)b * a.T + tau) * Dkv + (size_t)c * a.d;
    float k[R], v[R], dk[R], dv[R];
    load_row<T, R>(k, (const T *)a.K + kr, a.d);
    load_row<T, R>(v, (const T *)a.V + kr, a.d);
#pragma unroll
    for (int r = 0; r < R; r++) dk[r] = dv[r] = 0.0f;
    for (int j = c * g; j < (c + 1) * g; j++)
        for (int t = tau; t <= t_end; t++) {
            if (a.ds && a.ds[b * a.T + t] > tau) break; // doc_start is nondecreasing: the key's document ended
            const size_t qr = ((size_t)b * a.T + t) * Dq + (size_t)j * a.d, sr = ((size_t)b * a.Ha + j) * a.T + t;
            float q[R], dout[R];
            load_row<T, R>(q, (const T *)a.Q + qr, a.d);
            load_row<T, R>(dout, (const T *)a.dO + qr, a.d);
            const float p = expf(a.scale * warp_dot<R>(q, k) - a.lse[sr]);
            const float ds = p * (warp_dot<R>(dout, v) - a.D[sr]) * a.scale;
#pragma unroll
            for (int r = 0; r < R; r++) {
                dk[r] += ds * q[r];
                dv[r] += p * dout[r];
            }
        }
    T *ok = (T *)a.dK + kr, *ov = (T *)a.dV + kr;
#pragma unroll
    for (int r = 0; r < R; r++)
        if (l + 32 * r < a.d) ok[l + 32 * r] = from_f<T>(dk[r]), ov[l + 32 * r] = from_f<T>(dv[r]);
}

__global__ void pos_advance_kernel(int32_t *pos, int n) { pos[0] += n; }

template <typename T> using AttnKernel = void (*)(AttnArgs);
template <typename T> struct AttnKernels {
    AttnKernel<T> fwd, dq, dkv;
};
template <typename T> AttnKernels<T> pick(int d) {
    if (d <= 32) return {attn_fwd_kernel<T, 1>, attn_bwd_dq_kernel<T, 1>, attn_bwd_dkv_kernel<T, 1>};
    if (d <= 64) return {attn_fwd_kernel<T, 2>, attn_bwd_dq_kernel<T, 2>, attn_bwd_dkv_kernel<T, 2>};
    return {attn_fwd_kernel<T, 4>, attn_bwd_dq_kernel<T, 4>, attn_bwd_dkv_kernel<T, 4>};
}

void check_heads(const char *op, int B, int T, int Ha, int Hkv, int d) {
    CU_REQUIRE(B > 0 && T > 0 && Ha > 0 && Hkv > 0 && Ha % Hkv == 0, "attention", "%s: B=%d T=%d, Ha %d must be a "
               "positive multiple of Hkv %d", op, B, T, Ha, Hkv);
    CU_REQUIRE(d > 0 && d % 2 == 0 && d <= AT_MAX_D, "attention", "%s: head dim %d must be even and <= %d", op, d,
               AT_MAX_D);
}
} // namespace

template <typename T>
static void cu_attn_qkv_fwd(void *Q, void *K, void *V, int kvs, const void *P, int ldp, const float *bias,
                            const int32_t *pos, int B, int T_, int Ha, int Hkv, int d, float theta,
                            const int32_t *doc_start) {
    check_heads("attn_qkv_fwd", B, T_, Ha, Hkv, d);
    CU_REQUIRE(!(doc_start && pos), "attn_qkv_fwd", "doc_start with a KV-cache position (decoding has no documents)");
    CU_REQUIRE(Q && K && V && P && ldp >= (Ha + 2 * Hkv) * d && kvs >= T_, "attn_qkv_fwd",
               "NULL pointer or bad stride (ldp %d, kv rows %d, T %d)", ldp, kvs, T_);
    cu_launch("attn_qkv_fwd", qkv_fwd_kernel<T>, dim3(B * T_), dim3(128), 0, (T *)Q, (T *)K, (T *)V, kvs, (const T *)P,
              ldp, bias, pos, T_, Ha, Hkv, d, theta, doc_start);
}

template <typename T>
static void cu_attn_qkv_bwd(void *dP, int lddp, float *dbias, const void *dQ, const void *dK, const void *dV, int B,
                            int T_, int Ha, int Hkv, int d, float theta, const int32_t *doc_start) {
    check_heads("attn_qkv_bwd", B, T_, Ha, Hkv, d);
    const int W = (Ha + 2 * Hkv) * d;
    CU_REQUIRE(dP && dQ && dK && dV && lddp >= W, "attn_qkv_bwd", "NULL pointer or ldp %d < %d", lddp, W);
    cu_launch("attn_qkv_bwd", qkv_bwd_kernel<T>, dim3(B * T_), dim3(128), 0, (T *)dP, lddp, (const T *)dQ,
              (const T *)dK, (const T *)dV, T_, Ha, Hkv, d, theta, doc_start);
    if (dbias)
        cu_launch("attn_qkv_bwd dbias", dbias_kernel<T>, dim3(cu_blocks(W, 128)), dim3(128), 0, dbias, (const T *)dP,
                  lddp, B * T_, W);
}

template <typename T>
static void cu_attn_fwd(void *O, float *lse, const void *Q, const void *K, const void *V, int kvs, const int32_t *pos,
                        int B, int T_, int Ha, int Hkv, int d, int window, float scale, const int32_t *doc_start) {
    check_heads("attn_fwd", B, T_, Ha, Hkv, d);
    CU_REQUIRE(!(doc_start && pos), "attn_fwd", "doc_start with a KV-cache position (decoding has no documents)");
    CU_REQUIRE(O && Q && K && V && kvs >= T_ && window >= 0, "attn_fwd", "NULL pointer, kv rows %d < T %d or window %d",
               kvs, T_, window);
    AttnArgs a = {};
    a.Q = Q, a.K = K, a.V = V, a.Oout = O, a.lse_out = lse, a.pos = pos, a.ds = doc_start;
    a.kvs = kvs, a.B = B, a.T = T_, a.Ha = Ha, a.Hkv = Hkv, a.d = d, a.window = window, a.scale = scale;
    // tensor cores for bf16 prefill/training; decode steps (a few rows) and fp32 take the warp-per-row kernel
    static const char *force = getenv("GDN_CUDA_ATTN"); // "simple": always the CUDA-core kernels (comparisons)
    if (sizeof(T) == sizeof(bf16) && attn_fa_supported(d) && T_ > 16 && !(force && !strcmp(force, "simple"))) {
        attn_fa_fwd(a);
        return;
    }
    cu_launch("attn_fwd", pick<T>(d).fwd, dim3(cu_blocks(T_, AT_WARPS), Ha, B), dim3(32 * AT_WARPS), 0, a);
}

template <typename T>
static void cu_attn_bwd(void *dQ, void *dK, void *dV, const void *dO, const void *Q, const void *K, const void *V,
                        const void *O, const float *lse, int B, int T_, int Ha, int Hkv, int d, int window,
                        float scale, const int32_t *doc_start) {
    check_heads("attn_bwd", B, T_, Ha, Hkv, d);
    CU_REQUIRE(dQ && dK && dV && dO && Q && K && V && O && lse && window >= 0, "attn_bwd", "NULL pointer or window %d",
               window);
    AttnArgs a = {};
    a.Q = Q, a.K = K, a.V = V, a.O = O, a.dO = dO, a.lse = lse, a.dQ = dQ, a.dK = dK, a.dV = dV, a.ds = doc_start;
    a.kvs = T_, a.B = B, a.T = T_, a.Ha = Ha, a.Hkv = Hkv, a.d = d, a.window = window, a.scale = scale;
    a.D = (float *)cu_scratch((size_t)B * Ha * T_ * sizeof(float), "attn_bwd");
    static const char *force = getenv("GDN_CUDA_ATTN");
    if (sizeof(T) == sizeof(bf16) && attn_fa_bwd_supported(d) && !(force && !strcmp(force, "simple"))) {
        attn_fa_bwd(a);
        cu_scratch_free(a.D);
        return;
    }
    AttnKernels<T> k = pick<T>(d);
    cu_launch("attn_bwd dq", k.dq, dim3(cu_blocks(T_, AT_WARPS), Ha, B), dim3(32 * AT_WARPS), 0, a);
    cu_launch("attn_bwd dkv", k.dkv, dim3(cu_blocks(T_, AT_WARPS), Hkv, B), dim3(32 * AT_WARPS), 0, a);
    cu_scratch_free(a.D);
}

static void cu_pos_advance(int32_t *pos, int n) {
    CU_REQUIRE(pos, "pos_advance", "NULL pointer");
    cu_launch("pos_advance", pos_advance_kernel, dim3(1), dim3(1), 0, pos, n);
}

void cu_register_attention(Backend *b, int use_bf16) {
    b->attn_qkv_fwd = use_bf16 ? cu_attn_qkv_fwd<bf16> : cu_attn_qkv_fwd<float>;
    b->attn_qkv_bwd = use_bf16 ? cu_attn_qkv_bwd<bf16> : cu_attn_qkv_bwd<float>;
    b->attn_fwd = use_bf16 ? cu_attn_fwd<bf16> : cu_attn_fwd<float>;
    b->attn_bwd = use_bf16 ? cu_attn_bwd<bf16> : cu_attn_bwd<float>;
    b->pos_advance = cu_pos_advance;
}
