// norms.cu: RMSNorm with the fused residual add (spec model.md §2.2), the per-head L2 norm of q/k
// (§2.3 step 4) and the gated output norm FusedRMSNormGated (§2.3 step 8), forward and backward.
// Row statistics in fp32 (block or warp reductions in a fixed order). Weight gradients are reduced over
// rows deterministically: the backward row kernels also add each row's dw terms into a per-block partial
// (fixed row blocks, each column owned by one thread or warp, rows in order), then cu_add_partials. A
// row's dy is read for its dw term before that row's ds/do (which may alias dy) is written.
#include "cuda/common.cuh"

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
    float ss = 0.0f;
    for (int c = threadIdx.x * V; c < h; c += blockDim.x * V) {
        float s[V];
        load_vec<T, V>(s, x + base + c);
        if (resid) {
            float r[V];
            load_vec<T, V>(r, resid + base + c);
#pragma unroll
            for (int i = 0; i < V; i++) s[i] += r[i];
        }
#pragma unroll
        for (int i = 0; i < V; i++) {
            srow[c + i] = s[i];
            ss += s[i] * s[i];
        }
        if (s_out) store_vec<T, V>(s_out + base + c, s);
    }
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
    if (vec)
        cu_launch("rmsnorm_bwd", rmsnorm_bwd_kernel<T, V>, dim3(P), dim3(norm_threads(h, V)), (size_t)h * 4, (T *)ds,
                  part, (const T *)dy, (const T *)s, rstd, w, (const T *)dres, N, h, (int)RMS_BWD_ROWS);
    else
        cu_launch("rmsnorm_bwd", rmsnorm_bwd_kernel<T, 1>, dim3(P), dim3(norm_threads(h, 1)), (size_t)h * 4, (T *)ds,
                  part, (const T *)dy, (const T *)s, rstd, w, (const T *)dres, N, h, (int)RMS_BWD_ROWS);
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

template <typename T>
static void cu_l2norm_fwd(void *y, int ldy, float *rstd, const void *x, int ldx, int N, int heads, int d) {
    CU_REQUIRE(y && rstd && x, "l2norm_fwd", "NULL pointer (y, rstd, x)");
    CU_REQUIRE(N >= 0 && heads > 0 && d > 0, "l2norm_fwd", "bad shape N=%d heads=%d d=%d", N, heads, d);
    CU_REQUIRE(ldx >= heads * d && ldy >= heads * d, "l2norm_fwd", "row strides ldx=%d ldy=%d below heads*d=%d", ldx,
               ldy, heads * d);
    if (N == 0) return;
    cu_launch("l2norm_fwd", l2norm_fwd_kernel<T>, dim3(cu_blocks((size_t)N * heads, 4)), dim3(128), 0, (T *)y, ldy,
              rstd, (const T *)x, ldx, N, heads, d);
}

template <typename T>
static void cu_l2norm_bwd(void *dx, int lddx, const void *dy, int lddy, const void *y, int ldy, const float *rstd,
                          int N, int heads, int d) {
    CU_REQUIRE(dx && dy && y && rstd, "l2norm_bwd", "NULL pointer (dx, dy, y, rstd)");
    CU_REQUIRE(N >= 0 && heads > 0 && d > 0, "l2norm_bwd", "bad shape N=%d heads=%d d=%d", N, heads, d);
    CU_REQUIRE(lddx >= heads * d && lddy >= heads * d && ldy >= heads * d, "l2norm_bwd",
               "row strides lddx=%d lddy=%d ldy=%d below heads*d=%d", lddx, lddy, ldy, heads * d);
    if (N == 0) return;
    cu_launch("l2norm_bwd", l2norm_bwd_kernel<T>, dim3(cu_blocks((size_t)N * heads, 4)), dim3(128), 0, (T *)dx, lddx,
              (const T *)dy, lddy, (const T *)y, ldy, rstd, N, heads, d);
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

template <typename T>
static void cu_gated_rmsnorm_fwd(void *y, int ldy, float *rstd, const void *o, int ldo, const void *z, int ldz,
                                 const float *w, int N, int HV, int dv, float eps) {
    CU_REQUIRE(y && rstd && o && z && w, "gated_rmsnorm_fwd", "NULL pointer (y, rstd, o, z, w)");
    CU_REQUIRE(N >= 0 && HV > 0 && dv > 0, "gated_rmsnorm_fwd", "bad shape N=%d HV=%d dv=%d", N, HV, dv);
    CU_REQUIRE(ldy >= HV * dv && ldo >= HV * dv && ldz >= HV * dv, "gated_rmsnorm_fwd",
               "row strides ldy=%d ldo=%d ldz=%d below HV*dv=%d", ldy, ldo, ldz, HV * dv);
    if (N == 0) return;
    cu_launch("gated_rmsnorm_fwd", gated_rmsnorm_fwd_kernel<T>, dim3(cu_blocks((size_t)N * HV, 4)), dim3(128), 0,
              (T *)y, ldy, rstd, (const T *)o, ldo, (const T *)z, ldz, w, N, HV, dv, eps);
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
    const long rows = (long)N * HV, per_block = (long)GATED_BWD_WARPS * GATED_BWD_ROWS_PER_WARP;
    const long P = (rows + per_block - 1) / per_block;
    CU_REQUIRE(P <= 0x7fffffffL, "gated_rmsnorm_bwd", "N*HV=%ld rows is more than this kernel's grid allows", rows);
    float *part = (float *)cu_scratch((size_t)P * dv * sizeof(float), "gated_rmsnorm_bwd");
    cu_launch("gated_rmsnorm_bwd", gated_rmsnorm_bwd_kernel<T>, dim3((unsigned)P), dim3(32 * GATED_BWD_WARPS), smem,
              (T *)do_, lddo, (T *)dz, lddz, part, (const T *)dy, lddy, (const T *)o, ldo, (const T *)z, ldz, rstd, w,
              N, HV, dv);
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
