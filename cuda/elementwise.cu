// elementwise.cu: embedding lookup and its deterministic scatter-add backward, SwiGLU, and the
// partial-sum finisher shared by every reduction over tokens (spec model.md §2.1, §2.5).
#include "cuda/common.cuh"

#ifdef GDN_EMU
#include <algorithm>
#else
#include <cub/device/device_radix_sort.cuh>
#endif

// ---------------------------------------------------------------------------------------------------
// partial sums: dst[c] += sum_p part[p*W + c], in a fixed order (deterministic for given P, W and device).
// A block of 32 columns x 8 row lanes sums R consecutive partial rows: lane y takes rows y, y+8, .. in
// order, then the 8 lane sums are added in lane order. With more than R rows the block sums go to
// scratch and the same kernel reduces them again. (A single thread walking all P rows, as before, left
// the GPU nearly idle: 32 blocks of 1024 dependent loads for conv_silu_bwd's dw.)

enum { PSUM_COLS = 32, PSUM_LANES = 8 };

__global__ void __launch_bounds__(PSUM_COLS *PSUM_LANES)
    sum_partials_kernel(float *out, const float *part, int P, int W, int R, int accumulate) {
    __shared__ float red[PSUM_LANES][PSUM_COLS + 1];
    const int c = blockIdx.x * PSUM_COLS + threadIdx.x, q = blockIdx.y, y = threadIdx.y;
    const int p1 = min(P, (q + 1) * R);
    float s = 0.0f;
    if (c < W)
        for (int p = q * R + y; p < p1; p += PSUM_LANES) s += part[(size_t)p * W + c];
    red[y][threadIdx.x] = s;
    __syncthreads();
    if (y == 0 && c < W) {
        float t = red[0][threadIdx.x];
        for (int k = 1; k < PSUM_LANES; k++) t += red[k][threadIdx.x];
        if (accumulate)
            out[c] += t;
        else
            out[(size_t)q * W + c] = t;
    }
}

void cu_add_partials(float *dst, const float *part, int P, int W, const char *op) {
    if (P <= 0 || W <= 0) return;
    const unsigned col_blocks = cu_blocks(W, PSUM_COLS);
    // rows per block: enough blocks for ~2 per multiprocessor, at least 16 rows (2 per lane) each
    const long want = 2L * (g_cu.sm_count > 0 ? g_cu.sm_count : 1);
    long R = ((long)P * col_blocks + want - 1) / want;
    R = R < 16 ? 16 : (R + PSUM_LANES - 1) / PSUM_LANES * PSUM_LANES;
    const int Q = (int)((P + R - 1) / R);
    CU_REQUIRE(Q <= 65535, "partial sums", "%s: %d partial rows of %d columns exceed the grid", op, P, W);
    if (Q == 1) {
        cu_launch(op, sum_partials_kernel, dim3(col_blocks, 1), dim3(PSUM_COLS, PSUM_LANES), 0, dst, part, P, W, (int)R,
                  1);
        return;
    }
    float *mid = (float *)cu_scratch((size_t)Q * W * sizeof(float), op);
    cu_launch(op, sum_partials_kernel, dim3(col_blocks, Q), dim3(PSUM_COLS, PSUM_LANES), 0, mid, part, P, W, (int)R, 0);
    cu_add_partials(dst, mid, Q, W, op);
    cu_scratch_free(mid);
}

// ---------------------------------------------------------------------------------------------------
// embedding

// One block per token row; V-wide vectors when rows are 16-byte aligned.
template <typename T, int V>
__global__ void embedding_fwd_kernel(T *x, const int32_t *ids, const T *E, int h, int vocab, CuDevError *err) {
    const int n = blockIdx.x;
    int id = ids[n];
    T *xr = x + (size_t)n * h;
    if (id < 0 || id >= vocab) { // reported to the host; the row is zeroed so nothing reads garbage
        if (threadIdx.x == 0) dev_report(err, CU_ERR_EMBED_ID, n, id, vocab);
        for (int c = threadIdx.x; c < h; c += blockDim.x) xr[c] = from_f<T>(0.0f);
        return;
    }
    const T *er = E + (size_t)id * h;
    for (int c = threadIdx.x * V; c < h; c += blockDim.x * V) {
        float v[V];
        load_vec<T, V>(v, er + c);
        store_vec<T, V>(xr + c, v);
    }
}

template <typename T> static void cu_embedding_fwd(void *x, const int32_t *ids, const void *E, int N, int h) {
    CU_REQUIRE(x && ids && E, "embedding_fwd", "NULL pointer (x, ids, E)");
    CU_REQUIRE(N >= 0 && h > 0, "embedding_fwd", "bad shape N=%d h=%d", N, h);
    if (N == 0) return;
    constexpr int V = Vec16<T>::n;
    // The vocabulary size is not an argument; ids are range-checked by embedding_bwd / the data loader.
    // INT32_MAX here only rejects negative ids.
    if (h % V == 0 && cu_aligned16(x) && cu_aligned16(E))
        cu_launch("embedding_fwd", embedding_fwd_kernel<T, V>, dim3(N), dim3(128), 0, (T *)x, ids, (const T *)E, h,
                  INT32_MAX, g_cu.err_dev);
    else
        cu_launch("embedding_fwd", embedding_fwd_kernel<T, 1>, dim3(N), dim3(128), 0, (T *)x, ids, (const T *)E, h,
                  INT32_MAX, g_cu.err_dev);
}

// Backward: sort (id, token) keys, then one block per run of equal ids adds its rows to dE in token
// order, starting from dE's value: dE[id] = ((dE[id] + dx[n0]) + dx[n1]) + ..., n0 < n1 < ... (the CPU
// twin's order). Invalid ids get key id = V, sort last and are skipped (and reported).
__global__ void embedding_keys_kernel(uint64_t *keys, const int32_t *ids, int N, int vocab, CuDevError *err) {
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    int id = ids[n];
    if (id < 0 || id >= vocab) {
        dev_report(err, CU_ERR_EMBED_BWD_ID, n, id, vocab);
        id = vocab;
    }
    keys[n] = ((uint64_t)(uint32_t)id << 32) | (uint32_t)n;
}

// V fp32 values <-> dE (V a multiple of 4: 16-byte vectors; V = 1: scalar).
template <int V> __device__ __forceinline__ void load_f32(float (&v)[V], const float *p) {
    if constexpr (V == 1) {
        v[0] = p[0];
    } else {
#pragma unroll
        for (int q = 0; q < V / 4; q++) {
            const float4 f = reinterpret_cast<const float4 *>(p)[q];
            v[4 * q] = f.x, v[4 * q + 1] = f.y, v[4 * q + 2] = f.z, v[4 * q + 3] = f.w;
        }
    }
}
template <int V> __device__ __forceinline__ void store_f32(float *p, const float (&v)[V]) {
    if constexpr (V == 1) {
        p[0] = v[0];
    } else {
#pragma unroll
        for (int q = 0; q < V / 4; q++)
            reinterpret_cast<float4 *>(p)[q] = make_float4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
    }
}

// The block of a run's first key finds the run's end (ids equal to id form a prefix of sorted[i..]:
// counted a block-width window at a time), then each thread adds V columns of the run's rows, U rows
// loaded ahead of their additions; the additions stay in token order.
template <typename T, int V>
__global__ void embedding_bwd_kernel(float *dE, const T *dx, const uint64_t *sorted, int N, int h, int vocab) {
    constexpr int U = 8;
    const int i = blockIdx.x;
    const uint32_t id = (uint32_t)(sorted[i] >> 32);
    if (id >= (uint32_t)vocab) return;
    if (i > 0 && (uint32_t)(sorted[i - 1] >> 32) == id) return; // not the first of its run
    int end = i + 1;
    for (;;) {
        const int j = end + (int)threadIdx.x;
        const int cnt = block_sum((int)(j < N && (uint32_t)(sorted[j] >> 32) == id));
        end += cnt;
        if (cnt < (int)blockDim.x) break;
    }
    float *er = dE + (size_t)id * h;
    for (int c = threadIdx.x * V; c < h; c += blockDim.x * V) {
        float acc[V];
        load_f32<V>(acc, er + c);
        int j = i;
        for (; j + U <= end; j += U) {
            float v[U][V];
#pragma unroll
            for (int u = 0; u < U; u++) load_vec<T, V>(v[u], dx + (size_t)(uint32_t)sorted[j + u] * h + c);
#pragma unroll
            for (int u = 0; u < U; u++)
#pragma unroll
                for (int x = 0; x < V; x++) acc[x] += v[u][x];
        }
        for (; j < end; j++) {
            float v[V];
            load_vec<T, V>(v, dx + (size_t)(uint32_t)sorted[j] * h + c);
#pragma unroll
            for (int x = 0; x < V; x++) acc[x] += v[x];
        }
        store_f32<V>(er + c, acc);
    }
}

static void sort_keys(uint64_t *out, const uint64_t *in, int N, int end_bit) {
#ifdef GDN_EMU
    memcpy(out, in, (size_t)N * sizeof *out);
    std::sort(out, out + N);
    (void)end_bit;
#else
    size_t temp_bytes = 0;
    CU_CHECK(cub::DeviceRadixSort::SortKeys(nullptr, temp_bytes, in, out, N, 0, end_bit, g_cu.stream));
    void *temp = cu_scratch(temp_bytes, "embedding_bwd sort");
    CU_CHECK(cub::DeviceRadixSort::SortKeys(temp, temp_bytes, in, out, N, 0, end_bit, g_cu.stream));
    cu_after_launch("embedding_bwd sort");
    cu_scratch_free(temp);
#endif
}

template <typename T> static void cu_embedding_bwd(float *dE, const void *dx, const int32_t *ids, int N, int h, int V) {
    CU_REQUIRE(dE && dx && ids, "embedding_bwd", "NULL pointer (dE, dx, ids)");
    CU_REQUIRE(N >= 0 && h > 0 && V > 0 && V < INT32_MAX, "embedding_bwd", "bad shape N=%d h=%d V=%d", N, h, V);
    if (N == 0) return;
    uint64_t *keys = (uint64_t *)cu_scratch((size_t)2 * N * sizeof(uint64_t), "embedding_bwd");
    uint64_t *sorted = keys + N;
    cu_launch("embedding_bwd keys", embedding_keys_kernel, dim3(cu_blocks(N, 256)), dim3(256), 0, keys, ids, N, V,
              g_cu.err_dev);
    int id_bits = 1;
    while (id_bits < 32 && (1ll << id_bits) <= V) id_bits++; // ids in [0, V] fit
    sort_keys(sorted, keys, N, 32 + id_bits);
    constexpr int VV = Vec16<T>::n; // one 16-byte vector of dx; VV / 4 of dE's fp32
    if (h % VV == 0 && cu_aligned16(dE) && cu_aligned16(dx))
        cu_launch("embedding_bwd", embedding_bwd_kernel<T, VV>, dim3(N), dim3(128), 0, dE, (const T *)dx,
                  (const uint64_t *)sorted, N, h, V);
    else
        cu_launch("embedding_bwd", embedding_bwd_kernel<T, 1>, dim3(N), dim3(128), 0, dE, (const T *)dx,
                  (const uint64_t *)sorted, N, h, V);
    cu_scratch_free(keys);
}

// ---------------------------------------------------------------------------------------------------
// SwiGLU: gu [N, 2F] = [gate | up]; y = silu(gate) * up

template <typename T, int V> __global__ void swiglu_fwd_kernel(T *y, const T *gu, int N, int F) {
    const int per_row = F / V;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)N * per_row) return;
    size_t n = idx / per_row;
    int f = (int)(idx % per_row) * V;
    float g[V], u[V], o[V];
    load_vec<T, V>(g, gu + n * 2 * F + f);
    load_vec<T, V>(u, gu + n * 2 * F + F + f);
#pragma unroll
    for (int i = 0; i < V; i++) o[i] = swiglu_f(g[i], sigmoid_f(g[i]), u[i]);
    store_vec<T, V>(y + n * F + f, o);
}

// dgate = dy * up * silu'(gate), silu'(x) = s (1 + x (1 - s)); dup = dy * silu(gate); y (if asked) = the
// forward's silu(gate) * up. dgu may alias gu and y dy: each thread reads its values before writing them.
template <typename T, int V>
__global__ void swiglu_bwd_kernel(T *dgu, T *y, const T *dy, const T *gu, int N, int F) {
    const int per_row = F / V;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)N * per_row) return;
    size_t n = idx / per_row;
    int f = (int)(idx % per_row) * V;
    float g[V], u[V], d[V], dg[V], du[V], o[V];
    load_vec<T, V>(g, gu + n * 2 * F + f);
    load_vec<T, V>(u, gu + n * 2 * F + F + f);
    load_vec<T, V>(d, dy + n * F + f);
#pragma unroll
    for (int i = 0; i < V; i++) {
        float s = sigmoid_f(g[i]);
        dg[i] = swiglu_dg(d[i], g[i], s, u[i]);
        du[i] = swiglu_du(d[i], g[i], s);
        o[i] = swiglu_f(g[i], s, u[i]);
    }
    store_vec<T, V>(dgu + n * 2 * F + f, dg);
    store_vec<T, V>(dgu + n * 2 * F + F + f, du);
    if (y) store_vec<T, V>(y + n * F + f, o);
}

template <typename T> static bool swiglu_vec_ok(int F, const void *a, const void *b, const void *c) {
    return F % Vec16<T>::n == 0 && cu_aligned16(a) && cu_aligned16(b) && (!c || cu_aligned16(c));
}

template <typename T> static void cu_swiglu_fwd(void *y, const void *gu, int N, int F) {
    CU_REQUIRE(y && gu, "swiglu_fwd", "NULL pointer (y, gu)");
    CU_REQUIRE(N >= 0 && F > 0, "swiglu_fwd", "bad shape N=%d F=%d", N, F);
    if (N == 0) return;
    if (swiglu_vec_ok<T>(F, y, gu, NULL)) {
        constexpr int V = Vec16<T>::n;
        cu_launch("swiglu_fwd", swiglu_fwd_kernel<T, V>, dim3(cu_blocks((size_t)N * (F / V), 256)), dim3(256), 0,
                  (T *)y, (const T *)gu, N, F);
    } else {
        cu_launch("swiglu_fwd", swiglu_fwd_kernel<T, 1>, dim3(cu_blocks((size_t)N * F, 256)), dim3(256), 0, (T *)y,
                  (const T *)gu, N, F);
    }
}

template <typename T>
static void cu_swiglu_bwd(void *dgu, void *y, const void *dy, const void *gu, int N, int F) {
    CU_REQUIRE(dgu && dy && gu, "swiglu_bwd", "NULL pointer (dgu, dy, gu)");
    CU_REQUIRE(N >= 0 && F > 0, "swiglu_bwd", "bad shape N=%d F=%d", N, F);
    if (N == 0) return;
    if (swiglu_vec_ok<T>(F, dgu, dy, gu) && (!y || cu_aligned16(y))) {
        constexpr int V = Vec16<T>::n;
        cu_launch("swiglu_bwd", swiglu_bwd_kernel<T, V>, dim3(cu_blocks((size_t)N * (F / V), 256)), dim3(256), 0,
                  (T *)dgu, (T *)y, (const T *)dy, (const T *)gu, N, F);
    } else {
        cu_launch("swiglu_bwd", swiglu_bwd_kernel<T, 1>, dim3(cu_blocks((size_t)N * F, 256)), dim3(256), 0, (T *)dgu,
                  (T *)y, (const T *)dy, (const T *)gu, N, F);
    }
}

void cu_register_elementwise(Backend *b, int use_bf16) {
    b->embedding_fwd = use_bf16 ? cu_embedding_fwd<bf16> : cu_embedding_fwd<float>;
    b->embedding_bwd = use_bf16 ? cu_embedding_bwd<bf16> : cu_embedding_bwd<float>;
    b->swiglu_fwd = use_bf16 ? cu_swiglu_fwd<bf16> : cu_swiglu_fwd<float>;
    b->swiglu_bwd = use_bf16 ? cu_swiglu_bwd<bf16> : cu_swiglu_bwd<float>;
}
