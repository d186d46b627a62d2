// conv.cu: causal depthwise conv (width K, no bias) + SiLU per channel (spec model.md §2.3 step 2):
// y[t,c] = silu(sum_{j<K} w[c*K+j] * x[t-K+1+j, c]), x[t<0] from state_in (or 0).
//
// One thread per (sequence b, TT consecutive steps, channel c): neighbouring threads take neighbouring
// channels, so loads are coalesced. The taps are right-aligned into a compile-time width KM >= K
// (wp[jj] = w[jj - (KM-K)], zero for jj < KM-K), which keeps every register-array index static.
// The backward's dw is reduced deterministically: per (b, tile) partials, then cu_add_partials.
// Packed documents (doc_start, backend.h; nullable): output t reads x at p only when lo = doc_start[t] is 0 or
// p >= lo. The mask is applied to the data operand (w * (ok ? x : 0)) so the fused multiply-adds, and the
// results without doc_start, stay exactly as before.
#include "cuda/common.cuh"

enum { CONV_TT = 32, CONV_THREADS = 128, CONV_KMAX = 16 };

template <int KM> __device__ __forceinline__ void conv_taps(float (&wp)[KM], const float *w, int c, int K) {
#pragma unroll
    for (int jj = 0; jj < KM; jj++) wp[jj] = jj >= KM - K ? w[(size_t)c * K + jj - (KM - K)] : 0.0f;
}

// Output with doc_start lo may read position p (p < 0: the state, which only the first document sees).
__device__ __forceinline__ bool conv_tap_ok(int lo, int p) { return lo == 0 || p >= lo; }

template <typename T, int KM>
__global__ void conv_fwd_kernel(T *y, int ldy, const T *x, int ldx, const float *w, const float *state_in, int T_,
                                int D, int K, const int32_t *ds) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= D) return;
    const int b = blockIdx.z, t0 = blockIdx.y * CONV_TT, H1 = K - 1;
    float wp[KM];
    conv_taps<KM>(wp, w, c, K);
    // xv[i] = input at t = t0 - (KM-1) + i
    float xv[CONV_TT + KM - 1];
#pragma unroll
    for (int i = 0; i < CONV_TT + KM - 1; i++) {
        int t = t0 - (KM - 1) + i;
        float v = 0.0f;
        if (t >= 0 && t < T_)
            v = to_f(x[((size_t)b * T_ + t) * ldx + c]);
        else if (t < 0 && t >= -H1 && state_in)
            v = state_in[((size_t)b * D + c) * H1 + H1 + t];
        xv[i] = v;
    }
#pragma unroll
    for (int p = 0; p < CONV_TT; p++) {
        int t = t0 + p;
        if (t >= T_) break;
        float acc = 0.0f;
        const int lo = ds ? ds[(size_t)b * T_ + t] : 0;
#pragma unroll
        for (int jj = 0; jj < KM; jj++) acc += wp[jj] * (conv_tap_ok(lo, t - (KM - 1) + jj) ? xv[p + jj] : 0.0f);
        y[((size_t)b * T_ + t) * ldy + c] = from_f<T>(acc * sigmoid_f(acc));
    }
}

// state_out[b, c, i] = input at t = T-K+1+i (oldest first), from x or, for t < 0, from state_in. Runs
// after conv_fwd_kernel (same stream), and each thread reads its K-1 values before writing any, so
// state_out may alias state_in.
template <typename T>
__global__ void conv_state_kernel(float *state_out, const T *x, int ldx, const float *state_in, int B, int T_, int D,
                                  int K, const int32_t *ds) {
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * D) return;
    const int b = idx / D, c = idx % D, H1 = K - 1;
    const int lo = ds && T_ > 0 ? ds[(size_t)b * T_ + T_ - 1] : 0; // the window of the row's last document
    float win[CONV_KMAX];
    for (int i = 0; i < H1; i++) {
        int t = T_ - H1 + i;
        win[i] = t >= 0 ? to_f(x[((size_t)b * T_ + t) * ldx + c])
                        : (state_in ? state_in[((size_t)b * D + c) * H1 + H1 + t] : 0.0f);
        if (lo > 0 && t < lo) win[i] = 0.0f;
    }
    for (int i = 0; i < H1; i++) state_out[((size_t)b * D + c) * H1 + i] = win[i];
}

// pre[t] = sum_jj wp[jj] x[t-KM+1+jj]; dpre = dy * silu'(pre); dx[t] = sum_jj wp[jj] dpre[t+KM-1-jj];
// dw part[(b, tile)][c*K + j] = sum over the tile's t of dpre[t] * x[t-K+1+j]. Zero initial state.
template <typename T, int KM>
__global__ void conv_bwd_kernel(T *dx, int lddx, float *part, const T *dy, int lddy, const T *x, int ldx,
                                const float *w, int T_, int D, int K, const int32_t *ds) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= D) return;
    const int b = blockIdx.z, tile = blockIdx.y, t0 = tile * CONV_TT;
    float wp[KM];
    conv_taps<KM>(wp, w, c, K);
    // xv[i] = x at t = t0 - (KM-1) + i, for t up to t0 + TT + KM - 2
    constexpr int NX = CONV_TT + 2 * KM - 2, NP = CONV_TT + KM - 1;
    float xv[NX];
#pragma unroll
    for (int i = 0; i < NX; i++) {
        int t = t0 - (KM - 1) + i;
        xv[i] = t >= 0 && t < T_ ? to_f(x[((size_t)b * T_ + t) * ldx + c]) : 0.0f;
    }
    // dp[p] = dpre at t = t0 + p (zero past the end of the sequence); lop[p] its doc_start
    float dp[NP];
    int lop[NP];
#pragma unroll
    for (int p = 0; p < NP; p++) {
        int t = t0 + p;
        float d = 0.0f;
        lop[p] = ds && t < T_ ? ds[(size_t)b * T_ + t] : 0;
        if (t < T_) {
            float u = 0.0f;
#pragma unroll
            for (int jj = 0; jj < KM; jj++) u += wp[jj] * (conv_tap_ok(lop[p], t - (KM - 1) + jj) ? xv[p + jj] : 0.0f);
            float s = sigmoid_f(u);
            d = to_f(dy[((size_t)b * T_ + t) * lddy + c]) * s * (1.0f + u * (1.0f - s));
        }
        dp[p] = d;
    }
#pragma unroll
    for (int p = 0; p < CONV_TT; p++) {
        int t = t0 + p;
        if (t >= T_) break;
        float g = 0.0f;
#pragma unroll
        for (int jj = 0; jj < KM; jj++)
            g += wp[jj] * (conv_tap_ok(lop[p + KM - 1 - jj], t) ? dp[p + KM - 1 - jj] : 0.0f);
        dx[((size_t)b * T_ + t) * lddx + c] = from_f<T>(g);
    }
    float *pr = part + ((size_t)b * gridDim.y + tile) * D * K + (size_t)c * K;
#pragma unroll
    for (int jj = 0; jj < KM; jj++) {
        if (jj < KM - K) continue; // padding taps
        float acc = 0.0f;
#pragma unroll
        for (int p = 0; p < CONV_TT; p++) // dp is 0 past the end
            acc += dp[p] * (conv_tap_ok(lop[p], t0 + p - (KM - 1) + jj) ? xv[p + jj] : 0.0f);
        pr[jj - (KM - K)] = acc;
    }
}

// The same for two neighbouring channels per thread (one 4-byte bf16 pair per load instead of two 2-byte
// loads) over CONV_TT2 steps (half the tile, so the registers stay the same): D, the strides and the
// pointers even / pair-aligned. Partials per (b, CONV_TT2 tile).
enum { CONV_TT2 = 16 };
template <typename T, int KM>
__global__ void conv_bwd_pair_kernel(T *dx, int lddx, float *part, const T *dy, int lddy, const T *x, int ldx,
                                     const float *w, int T_, int D, int K, const int32_t *ds) {
    const int c = 2 * (blockIdx.x * blockDim.x + threadIdx.x);
    if (c >= D) return;
    const int b = blockIdx.z, tile = blockIdx.y, t0 = tile * CONV_TT2;
    float wp[2][KM];
    conv_taps<KM>(wp[0], w, c, K);
    conv_taps<KM>(wp[1], w, c + 1, K);
    constexpr int NX = CONV_TT2 + 2 * KM - 2, NP = CONV_TT2 + KM - 1;
    float xv[2][NX];
#pragma unroll
    for (int i = 0; i < NX; i++) {
        int t = t0 - (KM - 1) + i;
        xv[0][i] = xv[1][i] = 0.0f;
        if (t >= 0 && t < T_) load2(xv[0][i], xv[1][i], x + ((size_t)b * T_ + t) * ldx + c);
    }
    float dp[2][NP];
    int lop[NP];
#pragma unroll
    for (int p = 0; p < NP; p++) {
        int t = t0 + p;
        float g0 = 0.0f, g1 = 0.0f;
        lop[p] = ds && t < T_ ? ds[(size_t)b * T_ + t] : 0;
        if (t < T_) load2(g0, g1, dy + ((size_t)b * T_ + t) * lddy + c);
#pragma unroll
        for (int q = 0; q < 2; q++) {
            float u = 0.0f;
#pragma unroll
            for (int jj = 0; jj < KM; jj++)
                u += wp[q][jj] * (conv_tap_ok(lop[p], t - (KM - 1) + jj) ? xv[q][p + jj] : 0.0f);
            float sg = sigmoid_f(u);
            dp[q][p] = (q ? g1 : g0) * sg * (1.0f + u * (1.0f - sg)); // 0 past the end (g = 0)
        }
    }
#pragma unroll
    for (int p = 0; p < CONV_TT2; p++) {
        int t = t0 + p;
        if (t >= T_) break;
        float g[2];
#pragma unroll
        for (int q = 0; q < 2; q++) {
            g[q] = 0.0f;
#pragma unroll
            for (int jj = 0; jj < KM; jj++)
                g[q] += wp[q][jj] * (conv_tap_ok(lop[p + KM - 1 - jj], t) ? dp[q][p + KM - 1 - jj] : 0.0f);
        }
        store2(dx + ((size_t)b * T_ + t) * lddx + c, g[0], g[1]);
    }
#pragma unroll
    for (int q = 0; q < 2; q++) {
        float *pr = part + ((size_t)b * gridDim.y + tile) * D * K + (size_t)(c + q) * K;
#pragma unroll
        for (int jj = 0; jj < KM; jj++) {
            if (jj < KM - K) continue; // padding taps
            float acc = 0.0f;
#pragma unroll
            for (int p = 0; p < CONV_TT2; p++)
                acc += dp[q][p] * (conv_tap_ok(lop[p], t0 + p - (KM - 1) + jj) ? xv[q][p + jj] : 0.0f);
            pr[jj - (KM - K)] = acc;
        }
    }
}

template <typename T>
static void cu_conv_silu_fwd(void *y, int ldy, const void *x, int ldx, const float *w, const float *state_in,
                             float *state_out, int B, int T_, int D, int K, const int32_t *doc_start) {
    CU_REQUIRE(y && x && w, "conv_silu_fwd", "NULL pointer (y, x, w)");
    CU_REQUIRE(K >= 1 && K <= CONV_KMAX, "conv_silu_fwd", "kernel width K=%d outside [1, %d]", K, CONV_KMAX);
    CU_REQUIRE(B >= 0 && T_ >= 0 && D > 0, "conv_silu_fwd", "bad shape B=%d T=%d D=%d", B, T_, D);
    CU_REQUIRE(ldx >= D && ldy >= D, "conv_silu_fwd", "row strides ldx=%d ldy=%d below D=%d", ldx, ldy, D);
    CU_REQUIRE(y != x, "conv_silu_fwd", "y must not alias x (later outputs read earlier inputs)");
    CU_REQUIRE(B <= 65535, "conv_silu_fwd", "B=%d sequences exceed the kernel's grid", B);
    if (B == 0) return;
    if (T_ > 0) {
        dim3 grid(cu_blocks(D, CONV_THREADS), cu_blocks(T_, CONV_TT), B);
        CU_REQUIRE(grid.y <= 65535, "conv_silu_fwd", "T=%d exceeds the kernel's grid", T_);
        if (K <= 4)
            cu_launch("conv_silu_fwd", conv_fwd_kernel<T, 4>, grid, dim3(CONV_THREADS), 0, (T *)y, ldy, (const T *)x,
                      ldx, w, state_in, T_, D, K, doc_start);
        else if (K <= 8)
            cu_launch("conv_silu_fwd", conv_fwd_kernel<T, 8>, grid, dim3(CONV_THREADS), 0, (T *)y, ldy, (const T *)x,
                      ldx, w, state_in, T_, D, K, doc_start);
        else
            cu_launch("conv_silu_fwd", conv_fwd_kernel<T, 16>, grid, dim3(CONV_THREADS), 0, (T *)y, ldy, (const T *)x,
                      ldx, w, state_in, T_, D, K, doc_start);
    }
    if (state_out && K > 1)
        cu_launch("conv_silu_fwd state", conv_state_kernel<T>, dim3(cu_blocks((size_t)B * D, 128)), dim3(128), 0,
                  state_out, (const T *)x, ldx, state_in, B, T_, D, K, doc_start);
}

template <typename T>
static void cu_conv_silu_bwd(void *dx, int lddx, float *dw, const void *dy, int lddy, const void *x, int ldx,
                             const float *w, int B, int T_, int D, int K, const int32_t *doc_start) {
    CU_REQUIRE(dx && dw && dy && x && w, "conv_silu_bwd", "NULL pointer (dx, dw, dy, x, w)");
    CU_REQUIRE(K >= 1 && K <= CONV_KMAX, "conv_silu_bwd", "kernel width K=%d outside [1, %d]", K, CONV_KMAX);
    CU_REQUIRE(B >= 0 && T_ >= 0 && D > 0, "conv_silu_bwd", "bad shape B=%d T=%d D=%d", B, T_, D);
    CU_REQUIRE(ldx >= D && lddx >= D && lddy >= D, "conv_silu_bwd", "row strides ldx=%d lddx=%d lddy=%d below D=%d",
               ldx, lddx, lddy, D);
    CU_REQUIRE(dx != x && dx != dy, "conv_silu_bwd", "dx must not alias dy or x (neighbouring steps read them)");
    CU_REQUIRE(B <= 65535, "conv_silu_bwd", "B=%d sequences exceed the kernel's grid", B);
    if (B == 0 || T_ == 0) return;
    const size_t pair_bytes = 2 * sizeof(T);
    if (K <= 4 && D % 2 == 0 && ldx % 2 == 0 && lddx % 2 == 0 && lddy % 2 == 0 && cu_aligned(dx, pair_bytes) &&
        cu_aligned(dy, pair_bytes) && cu_aligned(x, pair_bytes)) { // the 4-tap pair kernel (every GDN config)
        dim3 grid(cu_blocks(D / 2, CONV_THREADS), cu_blocks(T_, CONV_TT2), B);
        CU_REQUIRE(grid.y <= 65535, "conv_silu_bwd", "T=%d exceeds the kernel's grid", T_);
        const int P = (int)(grid.y * grid.z);
        float *part = (float *)cu_scratch((size_t)P * D * K * sizeof(float), "conv_silu_bwd");
        cu_launch("conv_silu_bwd", conv_bwd_pair_kernel<T, 4>, grid, dim3(CONV_THREADS), 0, (T *)dx, lddx, part,
                  (const T *)dy, lddy, (const T *)x, ldx, w, T_, D, K, doc_start);
        cu_add_partials(dw, part, P, D * K, "conv_silu_bwd dw sum");
        cu_scratch_free(part);
        return;
    }
    dim3 grid(cu_blocks(D, CONV_THREADS), cu_blocks(T_, CONV_TT), B);
    CU_REQUIRE(grid.y <= 65535, "conv_silu_bwd", "T=%d exceeds the kernel's grid", T_);
    const int P = (int)(grid.y * grid.z);
    float *part = (float *)cu_scratch((size_t)P * D * K * sizeof(float), "conv_silu_bwd");
    if (K <= 4)
        cu_launch("conv_silu_bwd", conv_bwd_kernel<T, 4>, grid, dim3(CONV_THREADS), 0, (T *)dx, lddx, part,
                  (const T *)dy, lddy, (const T *)x, ldx, w, T_, D, K, doc_start);
    else if (K <= 8)
        cu_launch("conv_silu_bwd", conv_bwd_kernel<T, 8>, grid, dim3(CONV_THREADS), 0, (T *)dx, lddx, part,
                  (const T *)dy, lddy, (const T *)x, ldx, w, T_, D, K, doc_start);
    else
        cu_launch("conv_silu_bwd", conv_bwd_kernel<T, 16>, grid, dim3(CONV_THREADS), 0, (T *)dx, lddx, part,
                  (const T *)dy, lddy, (const T *)x, ldx, w, T_, D, K, doc_start);
    cu_add_partials(dw, part, P, D * K, "conv_silu_bwd dw sum");
    cu_scratch_free(part);
}

void cu_register_conv(Backend *b, int use_bf16) {
    b->conv_silu_fwd = use_bf16 ? cu_conv_silu_fwd<bf16> : cu_conv_silu_fwd<float>;
    b->conv_silu_bwd = use_bf16 ? cu_conv_silu_bwd<bf16> : cu_conv_silu_bwd<float>;
}
