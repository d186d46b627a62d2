// conv.cu: causal depthwise conv (width K, no bias) + SiLU per channel (spec model.md §2.3 step 2):
// y[t,c] = silu(sum_{j<K} w[c*K+j] * x[t-K+1+j, c]), x[t<0] from state_in (or 0).
//
// Generic kernels: one thread per (sequence b, TT consecutive steps, channel c): neighbouring threads take
// neighbouring channels, so loads are coalesced. The 4-tap backward of every GDN config moves 16-byte channel
// vectors instead (conv_bwd_vec_kernel). The taps are right-aligned into a compile-time width KM >= K
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

// The forward over 16-byte channel vectors (K <= 4; layout as conv_bwd_vec_kernel below: a warp's lanes along
// the channels, CONV_RUNS warps on runs of CONV_RUN tokens): each thread walks its run with the last 3 inputs
// in registers, CONV_FWD_LOADS steps' loads issued before any is used. Same terms in the same order as
// conv_fwd_kernel, so y is the same.
enum { CONV_RUN = 32, CONV_RUNS = 4, CONV_FWD_LOADS = 8 };
static_assert(CONV_RUN % CONV_FWD_LOADS == 0, "the walk is whole load groups");

template <typename T, bool DOCS>
__global__ void __launch_bounds__(32 * CONV_RUNS)
    conv_fwd_vec_kernel(T *__restrict__ y, int ldy, const T *__restrict__ x, int ldx, const float *__restrict__ w,
                        const float *__restrict__ state_in, int T_, int D, int K, const int32_t *__restrict__ ds) {
    constexpr int V = Vec16<T>::n, KM = 4, H = KM - 1;
    const int c = (blockIdx.x * 32 + threadIdx.x) * V, b = blockIdx.z, H1 = K - 1;
    const int t0 = (blockIdx.y * CONV_RUNS + threadIdx.y) * CONV_RUN;
    if (c >= D || t0 >= T_) return;
    float wp[V][KM], xw[V][H]; // xw: x at t-3, t-2, t-1
#pragma unroll
    for (int v = 0; v < V; v++) {
        conv_taps<KM>(wp[v], w, c + v, K);
#pragma unroll
        for (int i = 0; i < H; i++) {
            const int t = t0 - H + i;
            xw[v][i] = 0.0f;
            if (t < 0 && t >= -H1 && state_in) xw[v][i] = state_in[((size_t)b * D + c + v) * H1 + H1 + t];
        }
    }
#pragma unroll
    for (int i = 0; i < H; i++) {
        const int t = t0 - H + i;
        if (t >= 0) {
            float xv[V];
            load_vec<T, V>(xv, x + ((size_t)b * T_ + t) * ldx + c);
#pragma unroll
            for (int v = 0; v < V; v++) xw[v][i] = xv[v];
        }
    }
    for (int s0 = 0; s0 < CONV_RUN && t0 + s0 < T_; s0 += CONV_FWD_LOADS) {
        uint4 xr[CONV_FWD_LOADS];
        int lr[CONV_FWD_LOADS];
#pragma unroll
        for (int r = 0; r < CONV_FWD_LOADS; r++) {
            const int t = t0 + s0 + r;
            xr[r] = make_uint4(0, 0, 0, 0);
            lr[r] = 0;
            if (t < T_) {
                xr[r] = *reinterpret_cast<const uint4 *>(x + ((size_t)b * T_ + t) * ldx + c);
                lr[r] = DOCS ? ds[(size_t)b * T_ + t] : 0;
            }
        }
#pragma unroll
        for (int r = 0; r < CONV_FWD_LOADS; r++) {
            const int t = t0 + s0 + r, lo = lr[r];
            float xf[V], o[V];
            unpack_vec<T, V>(xf, xr[r]);
#pragma unroll
            for (int v = 0; v < V; v++) {
                const float xv = xf[v];
                float acc = 0.0f;
#pragma unroll
                for (int jj = 0; jj < KM; jj++)
                    acc += wp[v][jj] * (!DOCS || conv_tap_ok(lo, t - H + jj) ? (jj < H ? xw[v][jj] : xv) : 0.0f);
                o[v] = acc * sigmoid_f(acc);
#pragma unroll
                for (int i = 0; i < H; i++) xw[v][i] = i + 1 < H ? xw[v][i + 1] : xv;
            }
            if (t < T_) store_vec<T, V>(y + ((size_t)b * T_ + t) * ldy + c, o);
        }
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

// The 4-tap backward over 16-byte channel vectors (every GDN config): V = 16 / sizeof(T) channels per thread
// (8 bf16, 4 fp32), a warp's lanes side by side along the channels (512 contiguous bytes of a row), the
// block's CONV_RUNS warps on consecutive runs of CONV_RUN tokens. Each thread walks its run forward in time
// with the last 3 inputs and pre-activation gradients in registers: step t forms dpre[t] from x[t-3..t] and
// dy[t], adds dpre[t] x[t-3+j] to its dw taps (t inside the run) and emits dx[t-3] from dpre[t-3..t]; the
// walk reads the 3 inputs before the run and goes 3 steps past it (the neighbour's tokens, no dw there).
// Each group of CONV_LOADS steps issues its 16-byte loads before using any (bytes in flight). Same terms
// in the same order as conv_bwd_kernel, so dx is the same (DOCS = false drops the masks: w * x is w * (ok ? x
// : 0) when every tap is ok); dw: each block sums its warps' taps in warp
// order in shared memory and writes one partial per (b, block row) for cu_add_partials.
enum { CONV_LOADS = 5 }; // CONV_RUN + 3 steps = 7 groups of CONV_LOADS
static_assert((CONV_RUN + 3) % CONV_LOADS == 0, "the walk is whole load groups");

template <typename T, bool DOCS>
__global__ void __launch_bounds__(32 * CONV_RUNS)
    conv_bwd_vec_kernel(T *__restrict__ dx, int lddx, float *__restrict__ part, const T *__restrict__ dy, int lddy,
                        const T *__restrict__ x, int ldx, const float *__restrict__ w, int T_, int D, int K,
                        const int32_t *__restrict__ ds) {
    constexpr int V = Vec16<T>::n, KM = 4, H = KM - 1;
    const int lane = threadIdx.x, run = threadIdx.y, b = blockIdx.z;
    const int c = (blockIdx.x * 32 + lane) * V, t0 = (blockIdx.y * CONV_RUNS + run) * CONV_RUN;
    const bool active = c < D && t0 < T_; // no early return: the block sums dw together below
    float wp[V][KM], dwa[V][KM], xw[V][H], dpw[V][H]; // xw, dpw: x and dpre at t-3, t-2, t-1
    int low[H];                                         // their doc_start
#pragma unroll
    for (int v = 0; v < V; v++) {
#pragma unroll
        for (int jj = 0; jj < KM; jj++) wp[v][jj] = dwa[v][jj] = 0.0f;
        if (c < D) conv_taps<KM>(wp[v], w, c + v, K);
#pragma unroll
        for (int i = 0; i < H; i++) xw[v][i] = dpw[v][i] = 0.0f;
    }
#pragma unroll
    for (int i = 0; i < H; i++) {
        low[i] = 0;
        const int t = t0 - H + i;
        if (active && t >= 0) {
            float v8[V];
            load_vec<T, V>(v8, x + ((size_t)b * T_ + t) * ldx + c);
#pragma unroll
            for (int v = 0; v < V; v++) xw[v][i] = v8[v];
        }
    }
    for (int s0 = 0; active && s0 < CONV_RUN + H; s0 += CONV_LOADS) {
        uint4 xr[CONV_LOADS], gr[CONV_LOADS];
        int lr[CONV_LOADS];
#pragma unroll
        for (int r = 0; r < CONV_LOADS; r++) { // past the end: x = dy = 0, so dpre = 0
            const int t = t0 + s0 + r;
            xr[r] = gr[r] = make_uint4(0, 0, 0, 0);
            lr[r] = 0;
            if (t < T_) {
                const size_t n = (size_t)b * T_ + t;
                xr[r] = *reinterpret_cast<const uint4 *>(x + n * ldx + c);
                gr[r] = *reinterpret_cast<const uint4 *>(dy + n * lddy + c);
                lr[r] = DOCS ? ds[n] : 0;
            }
        }
#pragma unroll
        for (int r = 0; r < CONV_LOADS; r++) {
            const int s = s0 + r, t = t0 + s, lo = lr[r];
            float xv[V], gv[V], dp[V];
            unpack_vec<T, V>(xv, xr[r]);
            unpack_vec<T, V>(gv, gr[r]);
#pragma unroll
            for (int v = 0; v < V; v++) {
                float u = 0.0f;
#pragma unroll
                for (int jj = 0; jj < KM; jj++)
                    u += wp[v][jj] * (!DOCS || conv_tap_ok(lo, t - H + jj) ? (jj < H ? xw[v][jj] : xv[v]) : 0.0f);
                const float sg = sigmoid_f(u);
                dp[v] = gv[v] * sg * (1.0f + u * (1.0f - sg));
                if (s < CONV_RUN) { // dpre is 0 past the end of the sequence
#pragma unroll
                    for (int jj = 0; jj < KM; jj++)
                        dwa[v][jj] += dp[v] * (!DOCS || conv_tap_ok(lo, t - H + jj) ? (jj < H ? xw[v][jj] : xv[v]) : 0.0f);
                }
            }
            const int te = t - H; // dx[te] reads dpre[te + 3 - jj] = dpre[t - jj]
            if (s >= H && te < T_) {
                float g[V];
#pragma unroll
                for (int v = 0; v < V; v++) {
                    g[v] = 0.0f;
#pragma unroll
                    for (int jj = 0; jj < KM; jj++)
                        g[v] += wp[v][jj] * (!DOCS || conv_tap_ok(jj ? low[H - jj] : lo, te) ? (jj ? dpw[v][H - jj] : dp[v]) : 0.0f);
                }
                store_vec<T, V>(dx + ((size_t)b * T_ + te) * lddx + c, g);
            }
#pragma unroll
            for (int i = 0; i < H; i++) {
                low[i] = i + 1 < H ? low[i + 1] : lo;
#pragma unroll
                for (int v = 0; v < V; v++) {
                    xw[v][i] = i + 1 < H ? xw[v][i + 1] : xv[v];
                    dpw[v][i] = i + 1 < H ? dpw[v][i + 1] : dp[v];
                }
            }
        }
    }
    // dw: red[run][lane][v*KM + jj] (row padded against bank conflicts), summed over the runs in order
    constexpr int E = V * KM;
    __shared__ float red[CONV_RUNS][32][E + 1];
#pragma unroll
    for (int v = 0; v < V; v++)
#pragma unroll
        for (int jj = 0; jj < KM; jj++) red[run][lane][v * KM + jj] = dwa[v][jj];
    __syncthreads();
    float *pr = part + ((size_t)b * gridDim.y + blockIdx.y) * D * K;
    for (int e = run * 32 + lane; e < 32 * E; e += 32 * CONV_RUNS) { // e = (channel in block) * KM + tap
        const int ln = e / E, k = e % E, ch = blockIdx.x * 32 * V + e / KM, jj = e % KM;
        float sum = red[0][ln][k];
#pragma unroll
        for (int r = 1; r < CONV_RUNS; r++) sum += red[r][ln][k];
        if (ch < D && jj >= KM - K) pr[(size_t)ch * K + jj - (KM - K)] = sum;
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
    constexpr int V = Vec16<T>::n;
    if (T_ > 0 && K <= 4 && D % V == 0 && ldx % V == 0 && ldy % V == 0 && cu_aligned16(y) && cu_aligned16(x)) {
        dim3 grid(cu_blocks(D / V, 32), cu_blocks(T_, CONV_RUN * CONV_RUNS), B);
        CU_REQUIRE(grid.y <= 65535, "conv_silu_fwd", "T=%d exceeds the kernel's grid", T_);
        cu_launch("conv_silu_fwd", doc_start ? conv_fwd_vec_kernel<T, true> : conv_fwd_vec_kernel<T, false>, grid,
                  dim3(32, CONV_RUNS), 0, (T *)y, ldy, (const T *)x, ldx, w, state_in, T_, D, K, doc_start);
    } else if (T_ > 0) {
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
    constexpr int V = Vec16<T>::n;
    if (K <= 4 && D % V == 0 && ldx % V == 0 && lddx % V == 0 && lddy % V == 0 && cu_aligned16(dx) &&
        cu_aligned16(dy) && cu_aligned16(x)) { // the 16-byte-vector 4-tap kernel (every GDN config)
        dim3 grid(cu_blocks(D / V, 32), cu_blocks(T_, CONV_RUN * CONV_RUNS), B);
        CU_REQUIRE(grid.y <= 65535, "conv_silu_bwd", "T=%d exceeds the kernel's grid", T_);
        const int P = (int)(grid.y * grid.z);
        float *part = (float *)cu_scratch((size_t)P * D * K * sizeof(float), "conv_silu_bwd");
        cu_launch("conv_silu_bwd", doc_start ? conv_bwd_vec_kernel<T, true> : conv_bwd_vec_kernel<T, false>, grid,
                  dim3(32, CONV_RUNS), 0, (T *)dx, lddx, part, (const T *)dy, lddy, (const T *)x, ldx, w, T_, D, K,
                  doc_start);
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
