// norms.cu: RMSNorm with the fused residual add (spec model.md §2.2), the per-head L2 norm of q/k
// (§2.3 step 4) and the gated output norm FusedRMSNormGated (§2.3 step 8), forward and backward.
// Row statistics in fp32 (block or warp reductions in a fixed order). Weight gradients are reduced over
// rows deterministically: the backward row kernels also add each row's dw terms into a per-block partial
// (fixed row blocks, each column owned by one thread or warp, rows in order), then cu_add_partials. A
// row's dy is read for its dw term before that row's ds/do (which may alias dy) is written.
#include "cuda/common.cuh"

#include <initializer_list>

enum { RMS_BWD_ROWS = 16, GATED_BWD_WARPS = 4, GATED_BWD_ROWS_PER_WARP = 4 }; // rows per dw partial

// ---------------------------------------------------------------------------------------------------
// RMSNorm: s = x + resid; y = s * rstd * w, rstd = (mean s^2 + eps)^-1/2 from the fp32 s.
// One block per row; the fp32 row s is kept in shared memory, so y uses the unrounded sum (as FLA's fused
// kernel does) and s_out may alias x or resid (every element is read before it is written).

template <typename T, int V>
__global__ void rmsnorm_fwd_kernel(T *y, float *rstd, T *s_out, const T *x, const T *resid, const float *w, int h,
                                   float eps) {
    CU_DYN_SMEM(float, srow);
    const size_t base = (size_t)blockIdx.x * h;
    const float ss =
        rmsnorm_load_row<T, V>(srow, x + base, resid ? resid + base : nullptr, s_out ? s_out + base : nullptr, h);
    const float rs = 1.0f / sqrtf(block_sum(ss) / (float)h + eps);
    if (threadIdx.x == 0) rstd[blockIdx.x] = rs;
    for (int c = threadIdx.x * V; c < h; c += blockDim.x * V) {
        float o[V];
#pragma unroll
        for (int i = 0; i < V; i++) o[i] = srow[c + i] * rs * w[c + i];
        store_vec<T, V>(y + base + c, o);
    }
}

// xhat = s*rstd, g = dy*w: ds = rstd * (g - xhat * mean(g . xhat)) (+ dres). ds may alias dy or dres.
// A block does rows [R b, R b + R) in order and writes its dw partial part[b][c] = sum_n dy * (s * rstd);
// column c's partial lives in shared memory, touched only by the thread that owns c.
template <typename T, int V>
__global__ void rmsnorm_bwd_kernel(T *ds, float *part, const T *dy, const T *s, const float *rstd, const float *w,
                                   const T *dres, int N, int h, int R) {
    CU_DYN_SMEM(float, dwp);
    const int n0 = blockIdx.x * R, n1 = min(N, n0 + R);
    for (int c = threadIdx.x * V; c < h; c += blockDim.x * V)
#pragma unroll
        for (int i = 0; i < V; i++) dwp[c + i] = 0.0f;
    for (int n = n0; n < n1; n++) {
        const size_t base = (size_t)n * h;
        const float rs = rstd[n];
        float dot = 0.0f;
        for (int c = threadIdx.x * V; c < h; c += blockDim.x * V) {
            float d[V], sv[V];
            load_vec<T, V>(d, dy + base + c);
            load_vec<T, V>(sv, s + base + c);
#pragma unroll
            for (int i = 0; i < V; i++) {
                dot += (d[i] * w[c + i]) * (sv[i] * rs);
                dwp[c + i] += d[i] * (sv[i] * rs);
            }
        }
        const float mean = block_sum(dot) / (float)h; // (its barriers also order the reads above before writes)
        for (int c = threadIdx.x * V; c < h; c += blockDim.x * V) {
            float d[V], sv[V], r[V], o[V];
            load_vec<T, V>(d, dy + base + c);
            load_vec<T, V>(sv, s + base + c);
            if (dres) load_vec<T, V>(r, dres + base + c);
#pragma unroll
            for (int i = 0; i < V; i++) {
                o[i] = (d[i] * w[c + i] - sv[i] * rs * mean) * rs;
                if (dres) o[i] += r[i];
            }
            store_vec<T, V>(ds + base + c, o);
        }
    }
    for (int c = threadIdx.x * V; c < h; c += blockDim.x * V)
#pragma unroll
        for (int i = 0; i < V; i++) part[(size_t)blockIdx.x * h + c + i] = dwp[c + i];
}

// The same with each thread's NV vectors of dy, s and dres kept in registers from the dot product to the
// output (one read of each instead of two): h <= NV * V * blockDim.x. The next row's vectors are loaded
// before this row's reduction where the registers allow (two rows in flight: the block's rows run one after
// another, each waiting on its block_sum), and the dw partial stays in registers (each column has one owner thread either way).
template <typename T, int V, int NV>
__global__ void rmsnorm_bwd_reg_kernel(T *ds, float *part, const T *dy, const T *s, const float *rstd, const float *w,
                                       const T *dres, int N, int h, int R) {
    const int n0 = blockIdx.x * R, n1 = min(N, n0 + R);
    float wv[NV][V], dwv[NV][V], d[NV][V], sv[NV][V], r[NV][V];
    auto load_row = [&](int n) { // row n's dy, s and dres into d, sv, r
        const size_t base = (size_t)n * h;
#pragma unroll
        for (int k = 0; k < NV; k++) {
            const int c = (threadIdx.x + k * blockDim.x) * V;
            if (c >= h) continue;
            load_vec<T, V>(d[k], dy + base + c);
            load_vec<T, V>(sv[k], s + base + c);
            if (dres) load_vec<T, V>(r[k], dres + base + c);
        }
    };
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const int c = (threadIdx.x + k * blockDim.x) * V;
#pragma unroll
        for (int i = 0; i < V; i++) {
            wv[k][i] = c < h ? w[c + i] : 0.0f;
            dwv[k][i] = d[k][i] = sv[k][i] = r[k][i] = 0.0f;
        }
    }
    constexpr bool PREFETCH = NV == 1; // registers for two rows (h <= 2048 in bf16: the 300M and the 1B)
    if (PREFETCH && n0 < n1) load_row(n0);
    for (int n = n0; n < n1; n++) {
        const size_t base = (size_t)n * h;
        const float rs = rstd[n];
        float cd[NV][V], csv[NV][V], cr[NV][V], dot = 0.0f;
        if (!PREFETCH) load_row(n);
#pragma unroll
        for (int k = 0; k < NV; k++)
#pragma unroll
            for (int i = 0; i < V; i++) cd[k][i] = d[k][i], csv[k][i] = sv[k][i], cr[k][i] = r[k][i];
        if (PREFETCH && n + 1 < n1) load_row(n + 1); // rows n+1 and n are different rows: no alias between ds and dy/dres
#pragma unroll
        for (int k = 0; k < NV; k++) {
            const int c = (threadIdx.x + k * blockDim.x) * V;
            if (c >= h) continue;
#pragma unroll
            for (int i = 0; i < V; i++) {
                dot += (cd[k][i] * wv[k][i]) * (csv[k][i] * rs);
                dwv[k][i] += cd[k][i] * (csv[k][i] * rs);
            }
        }
        const float mean = block_sum(dot) / (float)h; // (its barriers also order the reads above before writes)
#pragma unroll
        for (int k = 0; k < NV; k++) {
            const int c = (threadIdx.x + k * blockDim.x) * V;
            if (c >= h) continue;
            float o[V];
#pragma unroll
            for (int i = 0; i < V; i++) {
                o[i] = (cd[k][i] * wv[k][i] - csv[k][i] * rs * mean) * rs;
                if (dres) o[i] += cr[k][i];
            }
            store_vec<T, V>(ds + base + c, o);
        }
    }
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const int c = (threadIdx.x + k * blockDim.x) * V;
        if (c < h)
#pragma unroll
            for (int i = 0; i < V; i++) part[(size_t)blockIdx.x * h + c + i] = dwv[k][i];
    }
}

static int norm_threads(int h, int V) { // one vector per thread where possible, 32..1024 threads
    int t = (h / V + 31) / 32 * 32;
    return t < 32 ? 32 : t > 256 ? 256 : t;
}

template <typename T>
static void cu_rmsnorm_fwd(void *y, float *rstd, void *s_out, const void *x, const void *resid, const float *w, int N,
                           int h, float eps) {
    CU_REQUIRE(y && rstd && x && w, "rmsnorm_fwd", "NULL pointer (y, rstd, x, w)");
    CU_REQUIRE(!resid || s_out, "rmsnorm_fwd", "s_out is required when resid is given (the backward reads s)");
    CU_REQUIRE(N >= 0 && h > 0, "rmsnorm_fwd", "bad shape N=%d h=%d", N, h);
    CU_REQUIRE((size_t)h * 4 <= g_cu.smem_optin, "rmsnorm_fwd", "h=%d too wide for a row in shared memory", h);
    if (N == 0) return;
    constexpr int V = Vec16<T>::n;
    bool vec = h % V == 0 && cu_aligned16(y) && cu_aligned16(x) && (!resid || cu_aligned16(resid)) &&
               (!s_out || cu_aligned16(s_out));
    if (vec)
        cu_launch("rmsnorm_fwd", rmsnorm_fwd_kernel<T, V>, dim3(N), dim3(norm_threads(h, V)), (size_t)h * 4, (T *)y,
                  rstd, (T *)s_out, (const T *)x, (const T *)resid, w, h, eps);
    else
        cu_launch("rmsnorm_fwd", rmsnorm_fwd_kernel<T, 1>, dim3(N), dim3(norm_threads(h, 1)), (size_t)h * 4, (T *)y,
                  rstd, (T *)s_out, (const T *)x, (const T *)resid, w, h, eps);
}

template <typename T>
static void cu_rmsnorm_bwd(void *ds, float *dw, const void *dy, const void *s, const float *rstd, const float *w,
                           const void *dres, int N, int h) {
    CU_REQUIRE(ds && dw && dy && s && rstd && w, "rmsnorm_bwd", "NULL pointer (ds, dw, dy, s, rstd, w)");
    CU_REQUIRE(N >= 0 && h > 0, "rmsnorm_bwd", "bad shape N=%d h=%d", N, h);
    if (N == 0) return;
    CU_REQUIRE((size_t)h * 4 <= g_cu.smem_optin, "rmsnorm_bwd", "h=%d too wide for a dw row in shared memory", h);
    const int P = (N + RMS_BWD_ROWS - 1) / RMS_BWD_ROWS;
    float *part = (float *)cu_scratch((size_t)P * h * sizeof(float), "rmsnorm_bwd");
    constexpr int V = Vec16<T>::n;
    bool vec = h % V == 0 && cu_aligned16(ds) && cu_aligned16(dy) && cu_aligned16(s) && (!dres || cu_aligned16(dres));
    const int threads = norm_threads(h, V), nv = (h / V + threads - 1) / threads; // vectors per thread
#define RB_ARGS (T *)ds, part, (const T *)dy, (const T *)s, rstd, w, (const T *)dres, N, h, (int)RMS_BWD_ROWS
    if (vec && nv == 1)
        cu_launch("rmsnorm_bwd", rmsnorm_bwd_reg_kernel<T, V, 1>, dim3(P), dim3(threads), 0, RB_ARGS);
    else if (vec && nv == 2)
        cu_launch("rmsnorm_bwd", rmsnorm_bwd_reg_kernel<T, V, 2>, dim3(P), dim3(threads), 0, RB_ARGS);
    else if (vec && nv <= 4)
        cu_launch("rmsnorm_bwd", rmsnorm_bwd_reg_kernel<T, V, 4>, dim3(P), dim3(threads), 0, RB_ARGS);
    else if (vec)
        cu_launch("rmsnorm_bwd", rmsnorm_bwd_kernel<T, V>, dim3(P), dim3(threads), (size_t)h * 4, RB_ARGS);
    else
        cu_launch("rmsnorm_bwd", rmsnorm_bwd_kernel<T, 1>, dim3(P), dim3(norm_threads(h, 1)), (size_t)h * 4, RB_ARGS);
#undef RB_ARGS
    cu_add_partials(dw, part, P, h, "rmsnorm_bwd dw sum");
    cu_scratch_free(part);
}

// ---------------------------------------------------------------------------------------------------
// L2 norm per head vector (one warp per vector): y = x / sqrt(sum x^2 + 1e-6). y may alias x.

template <typename T>
__global__ void l2norm_fwd_kernel(T *y, int ldy, float *rstd, const T *x, int ldx, int N, int heads, int d) {
    const size_t v = (size_t)blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
    if (v >= (size_t)N * heads) return; // whole warps leave together
    const int lane = threadIdx.x & 31;
    const size_t n = v / heads;
    const int i = (int)(v % heads);
    const T *xr = x + n * ldx + (size_t)i * d;
    T *yr = y + n * ldy + (size_t)i * d;
    float ss = 0.0f;
    for (int e = lane; e < d; e += 32) {
        float a = to_f(xr[e]);
        ss += a * a;
    }
    const float rs = 1.0f / sqrtf(warp_sum(ss) + 1e-6f);
    if (lane == 0) rstd[v] = rs;
    for (int e = lane; e < d; e += 32) yr[e] = from_f<T>(to_f(xr[e]) * rs);
}

// dx = rstd * (dy - (dy . y) y). dx may alias dy.
template <typename T>
__global__ void l2norm_bwd_kernel(T *dx, int lddx, const T *dy, int lddy, const T *y, int ldy, const float *rstd, int N,
                                  int heads, int d) {
    const size_t v = (size_t)blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
    if (v >= (size_t)N * heads) return;
    const int lane = threadIdx.x & 31;
    const size_t n = v / heads;
    const int i = (int)(v % heads);
    const T *dyr = dy + n * lddy + (size_t)i * d, *yr = y + n * ldy + (size_t)i * d;
    T *dxr = dx + n * lddx + (size_t)i * d;
    float dot = 0.0f;
    for (int e = lane; e < d; e += 32) dot += to_f(dyr[e]) * to_f(yr[e]);
    dot = warp_sum(dot);
    const float rs = rstd[v];
    for (int e = lane; e < d; e += 32) dxr[e] = from_f<T>(rs * (to_f(dyr[e]) - dot * to_f(yr[e])));
}

// The same with each lane holding pairs of elements (2*lane + 64k) in registers between the two passes:
// one 4-byte (bf16) load per pair instead of two 2-byte loads, and no second read. d even, rows aligned.
template <typename T, int NP>
__global__ void l2norm_fwd_pair_kernel(T *y, int ldy, float *rstd, const T *x, int ldx, int N, int heads, int d) {
    const size_t v = (size_t)blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
    if (v >= (size_t)N * heads) return;
    const int lane = threadIdx.x & 31;
    const size_t n = v / heads;
    const int i = (int)(v % heads);
    const T *xr = x + n * ldx + (size_t)i * d;
    T *yr = y + n * ldy + (size_t)i * d;
    float a[NP][2], ss = 0.0f;
#pragma unroll
    for (int k = 0; k < NP; k++) {
        const int e = 2 * (lane + 32 * k);
        a[k][0] = a[k][1] = 0.0f;
        if (e < d) load2(a[k][0], a[k][1], xr + e);
        ss += a[k][0] * a[k][0] + a[k][1] * a[k][1];
    }
    const float rs = 1.0f / sqrtf(warp_sum(ss) + 1e-6f);
    if (lane == 0) rstd[v] = rs;
#pragma unroll
    for (int k = 0; k < NP; k++) {
        const int e = 2 * (lane + 32 * k);
        if (e < d) store2(yr + e, a[k][0] * rs, a[k][1] * rs);
    }
}

template <typename T, int NP>
__global__ void l2norm_bwd_pair_kernel(T *dx, int lddx, const T *dy, int lddy, const T *y, int ldy, const float *rstd,
                                       int N, int heads, int d) {
    const size_t v = (size_t)blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
    if (v >= (size_t)N * heads) return;
    const int lane = threadIdx.x & 31;
    const size_t n = v / heads;
    const int i = (int)(v % heads);
    const T *dyr = dy + n * lddy + (size_t)i * d, *yr = y + n * ldy + (size_t)i * d;
    T *dxr = dx + n * lddx + (size_t)i * d;
    float g[NP][2], yv[NP][2], dot = 0.0f;
#pragma unroll
    for (int k = 0; k < NP; k++) {
        const int e = 2 * (lane + 32 * k);
        g[k][0] = g[k][1] = yv[k][0] = yv[k][1] = 0.0f;
        if (e < d) {
            load2(g[k][0], g[k][1], dyr + e);
            load2(yv[k][0], yv[k][1], yr + e);
        }
        dot += g[k][0] * yv[k][0] + g[k][1] * yv[k][1];
    }
    dot = warp_sum(dot);
    const float rs = rstd[v];
#pragma unroll
    for (int k = 0; k < NP; k++) {
        const int e = 2 * (lane + 32 * k);
        if (e < d) store2(dxr + e, rs * (g[k][0] - dot * yv[k][0]), rs * (g[k][1] - dot * yv[k][1]));
    }
}

// Pairs per lane for the pair kernels (d <= 64 NP), or 0 when d, a stride or a pointer rules them out.
template <typename T> static int pair_lanes(int d, std::initializer_list<int> lds, std::initializer_list<const void *> ps) {
    if (d % 2 || d > 256) return 0;
    for (int ld : lds)
        if (ld % 2) return 0;
    for (const void *p : ps)
        if (!cu_aligned(p, 2 * sizeof(T))) return 0;
    return d <= 64 ? 1 : d <= 128 ? 2 : 4;
}

// Lanes per row L for the 16-byte-vector kernels (d = L * V, L a power of two from 4 to 32), 0: not applicable.
template <typename T> static int vec_lanes(int d, std::initializer_list<int> lds, std::initializer_list<const void *> ps) {
    constexpr int V = Vec16<T>::n;
    if (d % V) return 0;
    const int L = d / V;
    if (L != 4 && L != 8 && L != 16 && L != 32) return 0;
    for (int ld : lds)
        if (ld % V) return 0;
    for (const void *p : ps)
        if (!cu_aligned16(p)) return 0;
    return L;
}

// 16-byte vectors: L = d / V lanes per head vector (V = 8 bf16 / 4 fp32), G = 32 / L vectors side by side in
// a warp, L2_VEC_GROUPS groups of G consecutive vectors per warp, all loaded before any is reduced. The same
// per-element arithmetic as the pair kernels; the sums run in another order (V values per lane, then an
// L-lane butterfly). y may alias x and dx may alias dy: a lane writes only elements it has read.
enum { L2_VEC_GROUPS = 2 };
template <typename T, int L>
__global__ void __launch_bounds__(128) l2norm_fwd_vec_kernel(T *y, int ldy, float *rstd, const T *x, int ldx, int N,
                                                             int heads, int d) {
    constexpr int V = Vec16<T>::n, G = 32 / L;
    const int lane = threadIdx.x & 31, e = (lane % L) * V;
    const size_t rows = (size_t)N * heads,
                 v0 = ((size_t)blockIdx.x * 4 + (threadIdx.x >> 5)) * L2_VEC_GROUPS * G + lane / L;
    float a[L2_VEC_GROUPS][V];
#pragma unroll
    for (int k = 0; k < L2_VEC_GROUPS; k++) {
        const size_t v = v0 + (size_t)k * G;
        if (v < rows)
            load_vec<T, V>(a[k], x + (v / heads) * ldx + (v % heads) * d + e);
        else
#pragma unroll
            for (int i = 0; i < V; i++) a[k][i] = 0.0f;
    }
#pragma unroll
    for (int k = 0; k < L2_VEC_GROUPS; k++) {
        const size_t v = v0 + (size_t)k * G;
        float ss = 0.0f;
#pragma unroll
        for (int i = 0; i < V; i++) ss += a[k][i] * a[k][i];
        const float rs = 1.0f / sqrtf(lane_group_sum<L>(ss) + 1e-6f);
        if (v < rows) {
            if (lane % L == 0) rstd[v] = rs;
            float o[V];
#pragma unroll
            for (int i = 0; i < V; i++) o[i] = a[k][i] * rs;
            store_vec<T, V>(y + (v / heads) * ldy + (v % heads) * d + e, o);
        }
    }
}

template <typename T, int L>
__global__ void __launch_bounds__(128) l2norm_bwd_vec_kernel(T *dx, int lddx, const T *dy, int lddy, const T *y, int ldy,
                                                             const float *rstd, int N, int heads, int d) {
    constexpr int V = Vec16<T>::n, G = 32 / L;
    const int lane = threadIdx.x & 31, e = (lane % L) * V;
    const size_t rows = (size_t)N * heads,
                 v0 = ((size_t)blockIdx.x * 4 + (threadIdx.x >> 5)) * L2_VEC_GROUPS * G + lane / L;
    float g[L2_VEC_GROUPS][V], yv[L2_VEC_GROUPS][V], rs[L2_VEC_GROUPS];
#pragma unroll
    for (int k = 0; k < L2_VEC_GROUPS; k++) {
        const size_t v = v0 + (size_t)k * G;
        rs[k] = 0.0f;
        if (v < rows) {
            const size_t n = v / heads, col = (v % heads) * d + e;
            load_vec<T, V>(g[k], dy + n * lddy + col);
            load_vec<T, V>(yv[k], y + n * ldy + col);
            rs[k] = rstd[v];
        } else {
#pragma unroll
            for (int i = 0; i < V; i++) g[k][i] = yv[k][i] = 0.0f;
        }
    }
#pragma unroll
    for (int k = 0; k < L2_VEC_GROUPS; k++) {
        const size_t v = v0 + (size_t)k * G;
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < V; i++) dot += g[k][i] * yv[k][i];
        dot = lane_group_sum<L>(dot);
        if (v < rows) {
            float o[V];
#pragma unroll
            for (int i = 0; i < V; i++) o[i] = rs[k] * (g[k][i] - dot * yv[k][i]);
            store_vec<T, V>(dx + (v / heads) * lddx + (v % heads) * d + e, o);
        }
    }
}

template <typename T>
static void cu_l2norm_fwd(void *y, int ldy, float *rstd, const void *x, int ldx, int N, int heads, int d) {
    CU_REQUIRE(y && rstd && x, "l2norm_fwd", "NULL pointer (y, rstd, x)");
    CU_REQUIRE(N >= 0 && heads > 0 && d > 0, "l2norm_fwd", "bad shape N=%d heads=%d d=%d", N, heads, d);
    CU_REQUIRE(ldx >= heads * d && ldy >= heads * d, "l2norm_fwd", "row strides ldx=%d ldy=%d below heads*d=%d", ldx,
               ldy, heads * d);
    if (N == 0) return;
    const int L = vec_lanes<T>(d, {ldx, ldy}, {x, y});
    if (L) {
        const dim3 vgrid(cu_blocks((size_t)N * heads, 4 * L2_VEC_GROUPS * (32 / L)));
#define L2F_ARGS (T *)y, ldy, rstd, (const T *)x, ldx, N, heads, d
        switch (L) {
        case 4: cu_launch("l2norm_fwd", l2norm_fwd_vec_kernel<T, 4>, vgrid, dim3(128), 0, L2F_ARGS); break;
        case 8: cu_launch("l2norm_fwd", l2norm_fwd_vec_kernel<T, 8>, vgrid, dim3(128), 0, L2F_ARGS); break;
        case 16: cu_launch("l2norm_fwd", l2norm_fwd_vec_kernel<T, 16>, vgrid, dim3(128), 0, L2F_ARGS); break;
        default: cu_launch("l2norm_fwd", l2norm_fwd_vec_kernel<T, 32>, vgrid, dim3(128), 0, L2F_ARGS);
        }
#undef L2F_ARGS
        return;
    }
    const dim3 grid(cu_blocks((size_t)N * heads, 4));
    switch (pair_lanes<T>(d, {ldx, ldy}, {x, y})) {
    case 1: cu_launch("l2norm_fwd", l2norm_fwd_pair_kernel<T, 1>, grid, dim3(128), 0, (T *)y, ldy, rstd, (const T *)x, ldx, N, heads, d); break;
    case 2: cu_launch("l2norm_fwd", l2norm_fwd_pair_kernel<T, 2>, grid, dim3(128), 0, (T *)y, ldy, rstd, (const T *)x, ldx, N, heads, d); break;
    case 4: cu_launch("l2norm_fwd", l2norm_fwd_pair_kernel<T, 4>, grid, dim3(128), 0, (T *)y, ldy, rstd, (const T *)x, ldx, N, heads, d); break;
    default:
        cu_launch("l2norm_fwd", l2norm_fwd_kernel<T>, grid, dim3(128), 0, (T *)y, ldy, rstd, (const T *)x, ldx, N, heads, d);
    }
}

template <typename T>
static void cu_l2norm_bwd(void *dx, int lddx, const void *dy, int lddy, const void *y, int ldy, const float *rstd,
                          int N, int heads, int d) {
    CU_REQUIRE(dx && dy && y && rstd, "l2norm_bwd", "NULL pointer (dx, dy, y, rstd)");
    CU_REQUIRE(N >= 0 && heads > 0 && d > 0, "l2norm_bwd", "bad shape N=%d heads=%d d=%d", N, heads, d);
    CU_REQUIRE(lddx >= heads * d && lddy >= heads * d && ldy >= heads * d, "l2norm_bwd",
               "row strides lddx=%d lddy=%d ldy=%d below heads*d=%d", lddx, lddy, ldy, heads * d);
    if (N == 0) return;
#define L2B_ARGS (T *)dx, lddx, (const T *)dy, lddy, (const T *)y, ldy, rstd, N, heads, d
    const int L = vec_lanes<T>(d, {lddx, lddy, ldy}, {dx, dy, y});
    if (L) {
        const dim3 vgrid(cu_blocks((size_t)N * heads, 4 * L2_VEC_GROUPS * (32 / L)));
        switch (L) {
        case 4: cu_launch("l2norm_bwd", l2norm_bwd_vec_kernel<T, 4>, vgrid, dim3(128), 0, L2B_ARGS); break;
        case 8: cu_launch("l2norm_bwd", l2norm_bwd_vec_kernel<T, 8>, vgrid, dim3(128), 0, L2B_ARGS); break;
        case 16: cu_launch("l2norm_bwd", l2norm_bwd_vec_kernel<T, 16>, vgrid, dim3(128), 0, L2B_ARGS); break;
        default: cu_launch("l2norm_bwd", l2norm_bwd_vec_kernel<T, 32>, vgrid, dim3(128), 0, L2B_ARGS);
        }
        return;
    }
    const dim3 grid(cu_blocks((size_t)N * heads, 4));
    switch (pair_lanes<T>(d, {lddx, lddy, ldy}, {dx, dy, y})) {
    case 1: cu_launch("l2norm_bwd", l2norm_bwd_pair_kernel<T, 1>, grid, dim3(128), 0, L2B_ARGS); break;
    case 2: cu_launch("l2norm_bwd", l2norm_bwd_pair_kernel<T, 2>, grid, dim3(128), 0, L2B_ARGS); break;
    case 4: cu_launch("l2norm_bwd", l2norm_bwd_pair_kernel<T, 4>, grid, dim3(128), 0, L2B_ARGS); break;
    default: cu_launch("l2norm_bwd", l2norm_bwd_kernel<T>, grid, dim3(128), 0, L2B_ARGS);
    }
#undef L2B_ARGS
}

// ---------------------------------------------------------------------------------------------------
// FusedRMSNormGated (swish), one warp per (token n, v head j) over dv:
// y = o * rstd * w[e] * silu(z), rstd = (mean o^2 + eps)^-1/2.

template <typename T>
__global__ void gated_rmsnorm_fwd_kernel(T *y, int ldy, float *rstd, const T *o, int ldo, const T *z, int ldz,
                                         const float *w, int N, int HV, int dv, float eps) {
    const size_t v = (size_t)blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
    if (v >= (size_t)N * HV) return;
    const int lane = threadIdx.x & 31;
    const size_t n = v / HV;
    const int j = (int)(v % HV);
    const T *orow = o + n * ldo + (size_t)j * dv, *zr = z + n * ldz + (size_t)j * dv;
    T *yr = y + n * ldy + (size_t)j * dv;
    float ss = 0.0f;
    for (int e = lane; e < dv; e += 32) {
        float a = to_f(orow[e]);
        ss += a * a;
    }
    const float rs = 1.0f / sqrtf(warp_sum(ss) / (float)dv + eps);
    if (lane == 0) rstd[v] = rs;
    for (int e = lane; e < dv; e += 32) {
        float ze = to_f(zr[e]);
        yr[e] = from_f<T>(to_f(orow[e]) * rs * w[e] * (ze * sigmoid_f(ze)));
    }
}

// xhat = o*rstd, g = silu(z), u = dy*g*w: do = rstd * (u - xhat * mean(u . xhat));
// dz = dy * xhat * w * silu'(z). do/dz may alias dy/o/z of the same shape.
// One warp per row r = n*HV + j, GATED_BWD_ROWS_PER_WARP consecutive rows per warp in order; the warp
// adds each row's dw terms dy * silu(z) * (o * rstd) into its own shared [dv] row, and the block writes
// part[b][e] = the sum of its warps' rows, in warp order.
template <typename T>
__global__ void gated_rmsnorm_bwd_kernel(T *dO, int lddo, T *dz, int lddz, float *part, const T *dy, int lddy,
                                         const T *o, int ldo, const T *z, int ldz, const float *rstd, const float *w,
                                         int N, int HV, int dv) {
    CU_DYN_SMEM(float, dwp); // [warps][dv]
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwarps = blockDim.x >> 5;
    float *mine = dwp + (size_t)warp * dv;
    for (int e = lane; e < dv; e += 32) mine[e] = 0.0f;
    const size_t rows = (size_t)N * HV, r0 = ((size_t)blockIdx.x * nwarps + warp) * GATED_BWD_ROWS_PER_WARP;
    for (size_t v = r0; v < r0 + GATED_BWD_ROWS_PER_WARP && v < rows; v++) {
        const size_t n = v / HV, col = (v % HV) * dv;
        const T *dyr = dy + n * lddy + col, *orow = o + n * ldo + col, *zr = z + n * ldz + col;
        T *dor = dO + n * lddo + col, *dzr = dz + n * lddz + col;
        const float rs = rstd[v];
        float dot = 0.0f;
        for (int e = lane; e < dv; e += 32) {
            float ze = to_f(zr[e]), g = ze * sigmoid_f(ze), xhat = to_f(orow[e]) * rs, dye = to_f(dyr[e]);
            dot += (dye * g * w[e]) * xhat;
            mine[e] += (dye * g) * xhat;
        }
        const float mean = warp_sum(dot) / (float)dv; // every lane's reads are done before any write below
        for (int e = lane; e < dv; e += 32) {
            float ze = to_f(zr[e]), sg = sigmoid_f(ze), g = ze * sg, xhat = to_f(orow[e]) * rs, dye = to_f(dyr[e]);
            float u = dye * g * w[e];
            dor[e] = from_f<T>((u - xhat * mean) * rs);
            dzr[e] = from_f<T>(dye * xhat * w[e] * sg * (1.0f + ze * (1.0f - sg)));
        }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < dv; e += blockDim.x) {
        float t = dwp[e];
        for (int x = 1; x < nwarps; x++) t += dwp[(size_t)x * dv + e];
        part[(size_t)blockIdx.x * dv + e] = t;
    }
}

// Pair versions (see the L2 norm's): values stay in registers between the statistics and the outputs.
template <typename T, int NP>
__global__ void gated_rmsnorm_fwd_pair_kernel(T *y, int ldy, float *rstd, const T *o, int ldo, const T *z, int ldz,
                                              const float *w, int N, int HV, int dv, float eps) {
    const size_t v = (size_t)blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
    if (v >= (size_t)N * HV) return;
    const int lane = threadIdx.x & 31;
    const size_t n = v / HV;
    const int j = (int)(v % HV);
    const T *orow = o + n * ldo + (size_t)j * dv, *zr = z + n * ldz + (size_t)j * dv;
    T *yr = y + n * ldy + (size_t)j * dv;
    float a[NP][2], zz[NP][2], ss = 0.0f;
#pragma unroll
    for (int k = 0; k < NP; k++) {
        const int e = 2 * (lane + 32 * k);
        a[k][0] = a[k][1] = zz[k][0] = zz[k][1] = 0.0f;
        if (e < dv) {
            load2(a[k][0], a[k][1], orow + e);
            load2(zz[k][0], zz[k][1], zr + e);
        }
        ss += a[k][0] * a[k][0] + a[k][1] * a[k][1];
    }
    const float rs = 1.0f / sqrtf(warp_sum(ss) / (float)dv + eps);
    if (lane == 0) rstd[v] = rs;
#pragma unroll
    for (int k = 0; k < NP; k++) {
        const int e = 2 * (lane + 32 * k);
        if (e < dv)
            store2(yr + e, a[k][0] * rs * w[e] * (zz[k][0] * sigmoid_f(zz[k][0])),
                   a[k][1] * rs * w[e + 1] * (zz[k][1] * sigmoid_f(zz[k][1])));
    }
}

template <typename T, int NP>
__global__ void gated_rmsnorm_bwd_pair_kernel(T *dO, int lddo, T *dz, int lddz, float *part, const T *dy, int lddy,
                                              const T *o, int ldo, const T *z, int ldz, const float *rstd,
                                              const float *w, int N, int HV, int dv) {
    CU_DYN_SMEM(float, dwp); // [warps][dv]
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwarps = blockDim.x >> 5;
    float *mine = dwp + (size_t)warp * dv;
    for (int e = lane; e < dv; e += 32) mine[e] = 0.0f;
    cu_syncwarp(); // the zeroing above and the pair updates below touch different lanes' columns
    const size_t rows = (size_t)N * HV, r0 = ((size_t)blockIdx.x * nwarps + warp) * GATED_BWD_ROWS_PER_WARP;
    for (size_t v = r0; v < r0 + GATED_BWD_ROWS_PER_WARP && v < rows; v++) {
        const size_t n = v / HV, col = (v % HV) * dv;
        const T *dyr = dy + n * lddy + col, *orow = o + n * ldo + col, *zr = z + n * ldz + col;
        T *dor = dO + n * lddo + col, *dzr = dz + n * lddz + col;
        const float rs = rstd[v];
        float g[NP][2], xh[NP][2], zz[NP][2], dot = 0.0f;
#pragma unroll
        for (int k = 0; k < NP; k++) {
            const int e = 2 * (lane + 32 * k);
            g[k][0] = g[k][1] = xh[k][0] = xh[k][1] = zz[k][0] = zz[k][1] = 0.0f;
            if (e < dv) {
                load2(g[k][0], g[k][1], dyr + e);
                load2(xh[k][0], xh[k][1], orow + e);
                load2(zz[k][0], zz[k][1], zr + e);
#pragma unroll
                for (int q = 0; q < 2; q++) {
                    const float ze = zz[k][q], sw = ze * sigmoid_f(ze);
                    xh[k][q] *= rs;
                    dot += (g[k][q] * sw * w[e + q]) * xh[k][q];
                    mine[e + q] += (g[k][q] * sw) * xh[k][q];
                }
            }
        }
        const float mean = warp_sum(dot) / (float)dv; // every lane's reads are done before any write below
#pragma unroll
        for (int k = 0; k < NP; k++) {
            const int e = 2 * (lane + 32 * k);
            if (e >= dv) continue;
            float od[2], zd[2];
#pragma unroll
            for (int q = 0; q < 2; q++) {
                const float ze = zz[k][q], sg = sigmoid_f(ze), u = g[k][q] * (ze * sg) * w[e + q];
                od[q] = (u - xh[k][q] * mean) * rs;
                zd[q] = g[k][q] * xh[k][q] * w[e + q] * sg * (1.0f + ze * (1.0f - sg));
            }
            store2(dor + e, od[0], od[1]);
            store2(dzr + e, zd[0], zd[1]);
        }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < dv; e += blockDim.x) {
        float t = dwp[e];
        for (int x = 1; x < nwarps; x++) t += dwp[(size_t)x * dv + e];
        part[(size_t)blockIdx.x * dv + e] = t;
    }
}

// 16-byte vectors: L = dv / V lanes per row (V = 8 bf16 / 4 fp32 values each), G = 32 / L rows side by side
// in a warp, GATED_VEC_STEPS groups of G consecutive rows per warp, the next group's dy, o, z and rstd loaded
// before this group's row sums (L-lane butterflies). Each element's terms are the pair kernel's; the row sum
// runs in another order (V values per lane, then L lanes). dw: per lane over its rows in order, then a
// butterfly over the G rows of the warp, then the block's warps in order, one partial per block.
enum { GATED_VEC_STEPS = 4 };
template <typename T, int L>
__global__ void __launch_bounds__(32 * GATED_BWD_WARPS)
    gated_rmsnorm_bwd_vec_kernel(T *dO, int lddo, T *dz, int lddz, float *part, const T *dy, int lddy, const T *o,
                                 int ldo, const T *z, int ldz, const float *rstd, const float *w, int N, int HV,
                                 int dv) {
    constexpr int V = Vec16<T>::n, G = 32 / L;
    __shared__ float red[GATED_BWD_WARPS][L * V];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, e = (lane % L) * V;
    const size_t rows = (size_t)N * HV, r0 = ((size_t)blockIdx.x * GATED_BWD_WARPS + warp) * GATED_VEC_STEPS * G;
    float wv[V], dwa[V], g[V], xo[V], zz[V], rs = 0.0f;
#pragma unroll
    for (int i = 0; i < V; i++) wv[i] = w[e + i], dwa[i] = 0.0f;
    auto load_group = [&](int step) { // this lane's row of group `step`: dy, o, z, rstd (zeros past the end)
        const size_t v = r0 + (size_t)step * G + lane / L;
        if (v < rows) {
            const size_t n = v / HV, col = (v % HV) * dv + e;
            load_vec<T, V>(g, dy + n * lddy + col);
            load_vec<T, V>(xo, o + n * ldo + col);
            load_vec<T, V>(zz, z + n * ldz + col);
            rs = rstd[v];
        } else {
#pragma unroll
            for (int i = 0; i < V; i++) g[i] = xo[i] = zz[i] = 0.0f;
            rs = 0.0f;
        }
    };
    load_group(0);
#pragma unroll 1
    for (int step = 0; step < GATED_VEC_STEPS; step++) {
        const size_t v = r0 + (size_t)step * G + lane / L;
        float cg[V], xh[V], cz[V], dot = 0.0f;
        const float crs = rs;
#pragma unroll
        for (int i = 0; i < V; i++) cg[i] = g[i], xh[i] = xo[i] * crs, cz[i] = zz[i];
        if (step + 1 < GATED_VEC_STEPS) load_group(step + 1); // other rows: do/dz never alias what is loaded
#pragma unroll
        for (int i = 0; i < V; i++) {
            const float ze = cz[i], sw = ze * sigmoid_f(ze);
            dot += (cg[i] * sw * wv[i]) * xh[i];
            dwa[i] += (cg[i] * sw) * xh[i];
        }
        dot = lane_group_sum<L>(dot);
        const float mean = dot / (float)dv;
        if (v < rows) {
            float od[V], zd[V];
#pragma unroll
            for (int i = 0; i < V; i++) {
                const float ze = cz[i], sg = sigmoid_f(ze), u = cg[i] * (ze * sg) * wv[i];
                od[i] = (u - xh[i] * mean) * crs;
                zd[i] = cg[i] * xh[i] * wv[i] * sg * (1.0f + ze * (1.0f - sg));
            }
            const size_t n = v / HV, col = (v % HV) * dv + e;
            store_vec<T, V>(dO + n * lddo + col, od);
            store_vec<T, V>(dz + n * lddz + col, zd);
        }
    }
#pragma unroll
    for (int i = 0; i < V; i++)
#pragma unroll
        for (int off = L; off < 32; off <<= 1) dwa[i] += __shfl_xor_sync(0xffffffffu, dwa[i], off);
    if (lane < L)
#pragma unroll
        for (int i = 0; i < V; i++) red[warp][e + i] = dwa[i];
    __syncthreads();
    for (int c = threadIdx.x; c < dv; c += blockDim.x) {
        float t = red[0][c];
        for (int x = 1; x < GATED_BWD_WARPS; x++) t += red[x][c];
        part[(size_t)blockIdx.x * dv + c] = t;
    }
}

template <typename T>
static void cu_gated_rmsnorm_fwd(void *y, int ldy, float *rstd, const void *o, int ldo, const void *z, int ldz,
                                 const float *w, int N, int HV, int dv, float eps) {
    CU_REQUIRE(y && rstd && o && z && w, "gated_rmsnorm_fwd", "NULL pointer (y, rstd, o, z, w)");
    CU_REQUIRE(N >= 0 && HV > 0 && dv > 0, "gated_rmsnorm_fwd", "bad shape N=%d HV=%d dv=%d", N, HV, dv);
    CU_REQUIRE(ldy >= HV * dv && ldo >= HV * dv && ldz >= HV * dv, "gated_rmsnorm_fwd",
               "row strides ldy=%d ldo=%d ldz=%d below HV*dv=%d", ldy, ldo, ldz, HV * dv);
    if (N == 0) return;
    const dim3 grid(cu_blocks((size_t)N * HV, 4));
#define GF_ARGS (T *)y, ldy, rstd, (const T *)o, ldo, (const T *)z, ldz, w, N, HV, dv, eps
    switch (pair_lanes<T>(dv, {ldy, ldo, ldz}, {y, o, z})) {
    case 1: cu_launch("gated_rmsnorm_fwd", gated_rmsnorm_fwd_pair_kernel<T, 1>, grid, dim3(128), 0, GF_ARGS); break;
    case 2: cu_launch("gated_rmsnorm_fwd", gated_rmsnorm_fwd_pair_kernel<T, 2>, grid, dim3(128), 0, GF_ARGS); break;
    case 4: cu_launch("gated_rmsnorm_fwd", gated_rmsnorm_fwd_pair_kernel<T, 4>, grid, dim3(128), 0, GF_ARGS); break;
    default: cu_launch("gated_rmsnorm_fwd", gated_rmsnorm_fwd_kernel<T>, grid, dim3(128), 0, GF_ARGS);
    }
#undef GF_ARGS
}

template <typename T>
static void cu_gated_rmsnorm_bwd(void *do_, int lddo, void *dz, int lddz, float *dw, const void *dy, int lddy,
                                 const void *o, int ldo, const void *z, int ldz, const float *rstd, const float *w,
                                 int N, int HV, int dv) {
    CU_REQUIRE(do_ && dz && dw && dy && o && z && rstd && w, "gated_rmsnorm_bwd",
               "NULL pointer (do, dz, dw, dy, o, z, rstd, w)");
    CU_REQUIRE(N >= 0 && HV > 0 && dv > 0, "gated_rmsnorm_bwd", "bad shape N=%d HV=%d dv=%d", N, HV, dv);
    CU_REQUIRE(lddo >= HV * dv && lddz >= HV * dv && lddy >= HV * dv && ldo >= HV * dv && ldz >= HV * dv,
               "gated_rmsnorm_bwd", "row strides lddo=%d lddz=%d lddy=%d ldo=%d ldz=%d below HV*dv=%d", lddo, lddz,
               lddy, ldo, ldz, HV * dv);
    if (N == 0) return;
    const size_t smem = (size_t)GATED_BWD_WARPS * dv * sizeof(float);
    CU_REQUIRE(smem <= g_cu.smem_optin, "gated_rmsnorm_bwd", "dv=%d too wide for the dw rows in shared memory", dv);
    const int L = vec_lanes<T>(dv, {lddo, lddz, lddy, ldo, ldz}, {do_, dz, dy, o, z});
    const long rows = (long)N * HV,
               per_block = L ? (long)GATED_BWD_WARPS * GATED_VEC_STEPS * (32 / L)
                             : (long)GATED_BWD_WARPS * GATED_BWD_ROWS_PER_WARP;
    const long P = (rows + per_block - 1) / per_block;
    CU_REQUIRE(P <= 0x7fffffffL, "gated_rmsnorm_bwd", "N*HV=%ld rows is more than this kernel's grid allows", rows);
    float *part = (float *)cu_scratch((size_t)P * dv * sizeof(float), "gated_rmsnorm_bwd");
#define GB_ARGS (T *)do_, lddo, (T *)dz, lddz, part, (const T *)dy, lddy, (const T *)o, ldo, (const T *)z, ldz, rstd, w, N, HV, dv
    const dim3 grid((unsigned)P), block(32 * GATED_BWD_WARPS);
    if (L) {
        switch (L) {
        case 4: cu_launch("gated_rmsnorm_bwd", gated_rmsnorm_bwd_vec_kernel<T, 4>, grid, block, 0, GB_ARGS); break;
        case 8: cu_launch("gated_rmsnorm_bwd", gated_rmsnorm_bwd_vec_kernel<T, 8>, grid, block, 0, GB_ARGS); break;
        case 16: cu_launch("gated_rmsnorm_bwd", gated_rmsnorm_bwd_vec_kernel<T, 16>, grid, block, 0, GB_ARGS); break;
        default: cu_launch("gated_rmsnorm_bwd", gated_rmsnorm_bwd_vec_kernel<T, 32>, grid, block, 0, GB_ARGS);
        }
    } else switch (pair_lanes<T>(dv, {lddo, lddz, lddy, ldo, ldz}, {do_, dz, dy, o, z})) {
    case 1: cu_launch("gated_rmsnorm_bwd", gated_rmsnorm_bwd_pair_kernel<T, 1>, grid, block, smem, GB_ARGS); break;
    case 2: cu_launch("gated_rmsnorm_bwd", gated_rmsnorm_bwd_pair_kernel<T, 2>, grid, block, smem, GB_ARGS); break;
    case 4: cu_launch("gated_rmsnorm_bwd", gated_rmsnorm_bwd_pair_kernel<T, 4>, grid, block, smem, GB_ARGS); break;
    default: cu_launch("gated_rmsnorm_bwd", gated_rmsnorm_bwd_kernel<T>, grid, block, smem, GB_ARGS);
    }
#undef GB_ARGS
    cu_add_partials(dw, part, (int)P, dv, "gated_rmsnorm_bwd dw sum");
    cu_scratch_free(part);
}

void cu_register_norms(Backend *b, int use_bf16) {
    b->rmsnorm_fwd = use_bf16 ? cu_rmsnorm_fwd<bf16> : cu_rmsnorm_fwd<float>;
    b->rmsnorm_bwd = use_bf16 ? cu_rmsnorm_bwd<bf16> : cu_rmsnorm_bwd<float>;
    b->l2norm_fwd = use_bf16 ? cu_l2norm_fwd<bf16> : cu_l2norm_fwd<float>;
    b->l2norm_bwd = use_bf16 ? cu_l2norm_bwd<bf16> : cu_l2norm_bwd<float>;
    b->gated_rmsnorm_fwd = use_bf16 ? cu_gated_rmsnorm_fwd<bf16> : cu_gated_rmsnorm_fwd<float>;
    b->gated_rmsnorm_bwd = use_bf16 ? cu_gated_rmsnorm_bwd<bf16> : cu_gated_rmsnorm_bwd<float>;
}
