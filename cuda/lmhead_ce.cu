// lmhead_ce.cu: the tied lm head fused with cross-entropy (spec model.md §2.1 steps 4-5), in chunks of
// rows so the [N, V] logits never exist whole. Per chunk of R rows:
//   logits[R, V] = y_chunk . E^T               (cuBLASLt, fp32 accumulation, stored in the act dtype: fp32, or
//                                               bf16 as FLA's lm_head gives them under autocast, which halves
//                                               the bytes of the memory-bound softmax pass)
//   per row: max, sum exp, loss = lse - logit[target]; dlogits = (softmax - onehot) * loss_scale,
//            written in act dtype over the logits, in place, for the backward GEMMs (a block per row; for
//            bf16 logits a grid of a few blocks per multiprocessor walks the rows)
//   dy_chunk = dlogits . E;  dE += dlogits^T . y_chunk (fp32, beta = 1)
// loss_scale is read from device memory when the kernels run, so a recorded training step (model_fwd_bwd's
// graph) replays with the scale of the step it runs for.
// Ignored targets (< 0) give loss 0 and a zero dlogits row. Targets >= V are reported (device error
// record, checked at the next sync) and treated as ignored.
#include <stdlib.h>

#include "cuda/common.cuh"
#include "cuda/gemm_wg.cuh"

enum { CE_THREADS = 512, CE_BLOCKS_PER_SM = 1 };
static const size_t CE_CHUNK_BYTES = (size_t)2 << 30; // fp32 logits chunk budget (4096 rows at V = 128256)

// A row's target: one >= V is reported; it and negative ones mean an ignored row, which gets loss 0 and a
// zero gradient row here. Returns -1 for an ignored row (nothing left to do), else the target.
template <typename T>
__device__ __forceinline__ int ce_row_target(T *dl, int V, const int32_t *targets, float *losses, int want_grad,
                                             int row0, CuDevError *err, int r = blockIdx.x) {
    int tgt = targets[r];
    if (tgt >= V) {
        if (threadIdx.x == 0) dev_report(err, CU_ERR_TARGET_ID, row0 + r, tgt, V);
        tgt = -1;
    }
    if (tgt < 0) {
        if (threadIdx.x == 0) losses[r] = 0.0f;
        if (want_grad)
            for (int c = threadIdx.x; c < V; c += blockDim.x) dl[c] = from_f<T>(0.0f);
    }
    return tgt;
}

// logits fp32 [rows, V] in; dlogits (act dtype, may alias the logits when act is fp32) out.
template <typename T>
__global__ void ce_rows_kernel(const float *logits, T *dlogits, int V, const int32_t *targets, float *losses,
                               int want_grad, const float *loss_scale_p, int row0, CuDevError *err) {
    const float loss_scale = want_grad ? *loss_scale_p : 0.0f;
    const int r = blockIdx.x;
    const float *l = logits + (size_t)r * V;
    T *dl = dlogits + (size_t)r * V;
    const int tgt = ce_row_target(dl, V, targets, losses, want_grad, row0, err);
    if (tgt < 0) return;
    // Online max / sum of exp per thread, then combined across the block in a fixed order.
    float mx = -INFINITY, se = 0.0f;
    for (int c = threadIdx.x; c < V; c += blockDim.x) {
        float x = l[c];
        if (x > mx) {
            se = se * expf(mx - x) + 1.0f;
            mx = x;
        } else if (x != -INFINITY) { // a masked (-inf) entry adds nothing (and -inf - -inf would be NaN)
            se += expf(x - mx);
        }
    }
    const float M = block_max(mx);
    const float S = block_sum(mx == -INFINITY ? 0.0f : se * expf(mx - M));
    const float lt = l[tgt]; // read before the gradient may overwrite the row (fp32 mode aliases)
    if (threadIdx.x == 0) losses[r] = (M + logf(S)) - lt;
    if (!want_grad) return;
    __syncthreads(); // every thread has read l[tgt]
    const float inv = 1.0f / S;
    for (int c = threadIdx.x; c < V; c += blockDim.x) {
        float p = expf(l[c] - M) * inv * loss_scale;
        if (c == tgt) p -= loss_scale;
        dl[c] = from_f<T>(p);
    }
}

// The same over float4 columns (V % 4 == 0): 16-byte loads, 4 (bf16: 8-byte) stores, and in the first pass
// one max update per 4 logits. Summation order differs from the scalar kernel (per-thread groups of 4).
template <typename T> struct alignas(4 * sizeof(T)) Quad {
    T v[4];
};
template <typename T>
__global__ void ce_rows_vec_kernel(const float *logits, T *dlogits, int V, const int32_t *targets, float *losses,
                                   int want_grad, const float *loss_scale_p, int row0, CuDevError *err) {
    const float loss_scale = want_grad ? *loss_scale_p : 0.0f;
    const int r = blockIdx.x, V4 = V / 4;
    const float4 *l4 = reinterpret_cast<const float4 *>(logits + (size_t)r * V);
    Quad<T> *d4 = reinterpret_cast<Quad<T> *>(dlogits + (size_t)r * V);
    const int tgt = ce_row_target(dlogits + (size_t)r * V, V, targets, losses, want_grad, row0, err);
    if (tgt < 0) return;
    float mx = -INFINITY, se = 0.0f;
    for (int i = threadIdx.x; i < V4; i += blockDim.x) {
        const float4 q = l4[i];
        const float lm = fmaxf(fmaxf(q.x, q.y), fmaxf(q.z, q.w));
        if (lm > mx) {
            se *= expf(mx - lm); // 0 while mx is -inf (se is 0 then too)
            mx = lm;
        }
        if (mx != -INFINITY) // all masked so far: nothing to add (and -inf - -inf would be NaN)
            se += (expf(q.x - mx) + expf(q.y - mx)) + (expf(q.z - mx) + expf(q.w - mx));
    }
    const float M = block_max(mx);
    const float S = block_sum(mx == -INFINITY ? 0.0f : se * expf(mx - M));
    const float lt = logits[(size_t)r * V + tgt]; // read before the gradient may overwrite the row (fp32 mode)
    if (threadIdx.x == 0) losses[r] = (M + logf(S)) - lt;
    if (!want_grad) return;
    __syncthreads(); // every thread has read the target's logit
    const float inv = 1.0f / S;
    for (int i = threadIdx.x; i < V4; i += blockDim.x) {
        const float4 q = l4[i];
        const float x[4] = {q.x, q.y, q.z, q.w};
        Quad<T> o;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            float p = expf(x[k] - M) * inv * loss_scale;
            if (4 * i + k == tgt) p -= loss_scale;
            o.v[k] = from_f<T>(p);
        }
        d4[i] = o;
    }
}

// bf16 logits in, bf16 dlogits out over them (in place: each thread rewrites only the 8 values it read),
// 16-byte loads of 8 logits (V % 8 == 0); the statistics in fp32 as in the kernels above.
__device__ __forceinline__ void unpack8(const uint4 &q, float x[8]) {
    const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&q);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const float2 f = __bfloat1622float2(h[k]);
        x[2 * k] = f.x, x[2 * k + 1] = f.y;
    }
}
// Rows are walked by a grid of a few blocks per multiprocessor (block b takes rows b, b + gridDim.x, ...),
// so the rows in flight (~132 x 256 KB at V = 128256) stay in L2 between the two passes: the second read
// comes from L2, not DRAM. Loads are issued CE_UNROLL at a time; each thread still takes its values in the
// order i = t, t + blockDim.x, ..., so the sums are those of one block per row.
// EXP2: exp(x - m) as exp2(x log2e - m log2e), one FMA and one MUFU.EX2 a logit (as FLA's Triton kernels, whose
// tl.exp is ex2.approx of a log2e product), where expf's range reduction costs ~8 instructions: the pass issues
// ~24 instructions per logit otherwise (measured: -0.3 ms a step on an H100; the pass is bound by its bytes). Not
// the CPU twin's bits (within 2 ulp a probability; FLA's 20-step loss parity holds, notes/PERF.md session 13).
enum { CE_UNROLL = 4 };
static const float CE_LOG2E = 1.4426950408889634f;
// e^{x - m} given m_l2 = m log2 e
__device__ __forceinline__ float ce_exp_diff(float x, float m_l2) { return exp2f(fmaf(x, CE_LOG2E, -m_l2)); }
__global__ void ce_rows_bf16_kernel(bf16 *logits, int V, const int32_t *targets, float *losses, int want_grad,
                                    const float *loss_scale_p, int rows, int row0, CuDevError *err) {
    const float loss_scale = want_grad ? *loss_scale_p : 0.0f;
    const int V8 = V / 8, step = blockDim.x;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        bf16 *row = logits + (size_t)r * V;
        uint4 *r8 = reinterpret_cast<uint4 *>(row);
        const int tgt = ce_row_target(row, V, targets, losses, want_grad, row0, err, r);
        if (tgt < 0) continue;
        const float lt = to_f(row[tgt]); // read before the barriers in block_max/block_sum: no thread has written yet
        float mx = -INFINITY, mx_l2 = -INFINITY, se = 0.0f;
        for (int i0 = threadIdx.x; i0 < V8; i0 += CE_UNROLL * step) {
            uint4 q[CE_UNROLL];
#pragma unroll
            for (int u = 0; u < CE_UNROLL; u++)
                if (i0 + u * step < V8) q[u] = r8[i0 + u * step];
#pragma unroll
            for (int u = 0; u < CE_UNROLL; u++) {
                if (i0 + u * step >= V8) break;
                float x[8];
                unpack8(q[u], x);
                const float lm =
                    fmaxf(fmaxf(fmaxf(x[0], x[1]), fmaxf(x[2], x[3])), fmaxf(fmaxf(x[4], x[5]), fmaxf(x[6], x[7])));
                if (lm > mx) {
                    const float lm_l2 = lm * CE_LOG2E;
                    se *= ce_exp_diff(mx, lm_l2); // 0 while mx is -inf (se is 0 then too)
                    mx = lm, mx_l2 = lm_l2;
                }
                if (mx != -INFINITY)
                    se += ((ce_exp_diff(x[0], mx_l2) + ce_exp_diff(x[1], mx_l2)) +
                           (ce_exp_diff(x[2], mx_l2) + ce_exp_diff(x[3], mx_l2))) +
                          ((ce_exp_diff(x[4], mx_l2) + ce_exp_diff(x[5], mx_l2)) +
                           (ce_exp_diff(x[6], mx_l2) + ce_exp_diff(x[7], mx_l2)));
            }
        }
        const float M = block_max(mx), M_l2 = M * CE_LOG2E;
        const float S = block_sum(mx == -INFINITY ? 0.0f : se * ce_exp_diff(mx, M_l2));
        if (threadIdx.x == 0) losses[r] = (M + logf(S)) - lt;
        if (!want_grad) continue;
        const float inv = 1.0f / S, scale = inv * loss_scale;
        for (int i0 = threadIdx.x; i0 < V8; i0 += CE_UNROLL * step) {
            uint4 q[CE_UNROLL];
#pragma unroll
            for (int u = 0; u < CE_UNROLL; u++)
                if (i0 + u * step < V8) q[u] = r8[i0 + u * step];
#pragma unroll
            for (int u = 0; u < CE_UNROLL; u++) {
                const int i = i0 + u * step;
                if (i >= V8) break;
                float x[8];
                unpack8(q[u], x);
                uint4 o;
                __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&o);
                const int kt = tgt - 8 * i; // the target's place in these 8 (compared with constants: a register
                                            // array indexed by a variable would live in local memory)
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    float p0 = ce_exp_diff(x[2 * k], M_l2) * scale, p1 = ce_exp_diff(x[2 * k + 1], M_l2) * scale;
                    if (2 * k == kt) p0 -= loss_scale;
                    if (2 * k + 1 == kt) p1 -= loss_scale;
                    h[k] = __floats2bfloat162_rn(p0, p1);
                }
                r8[i] = o;
            }
        }
    }
}

// Rows per chunk when the caller's scratch holds fit rows, fewer than the R planned but at least half as many:
// balanced chunks (a multiple of 128 rows, or of 8 for small ones) that fit it, so the logits need no memory of
// their own (the 300M at micro-batch 16: 8 chunks of 4096 rows in the arena's 1,155 MiB of backward-only buffers
// instead of 4 of 8192 in 2 GiB of their own). R otherwise.
static int ce_fit_rows(int N, int R, size_t fit) {
    if (fit >= (size_t)R || fit < (size_t)R / 2 || fit < 8) return R;
    const size_t q = fit >= 1024 ? 128 : 8;
    for (size_t c = (N + fit - 1) / fit; c <= (size_t)N; c++) {
        const size_t r = ((N + c - 1) / c + q - 1) / q * q;
        if (r <= fit) return (int)r;
    }
    return R;
}

// Blocks for the bf16 pass: CE_BLOCKS_PER_SM x multiprocessors (GDN_CUDA_CE_BLOCKS_PER_SM to tune; 0 = one
// block per row); GDN_CUDA_CE_GRID forces a grid size (tests: rows > grid covers the row loop).
static unsigned ce_bf16_grid(int rows) {
    const char *grid = getenv("GDN_CUDA_CE_GRID"), *per = getenv("GDN_CUDA_CE_BLOCKS_PER_SM");
    long g = rows;
    if (grid && atoi(grid) > 0) g = atoi(grid);
    else {
        const int per_sm = per && *per ? atoi(per) : CE_BLOCKS_PER_SM;
        if (per_sm > 0 && g_cu.sm_count > 0) g = (long)per_sm * g_cu.sm_count;
    }
    return (unsigned)(g < rows ? g : rows);
}

template <typename T>
static void cu_lmhead_ce(float *losses, void *dy, float *dE, const void *y, const void *E, const int32_t *targets,
                         int N, int h, int V, const float *loss_scale, void *scratch, size_t scratch_bytes) {
    CU_REQUIRE(losses && y && E && targets, "lmhead_ce", "NULL pointer (losses, y, E, targets)");
    CU_REQUIRE(!dy || loss_scale, "lmhead_ce", "a gradient asked for without loss_scale");
    CU_REQUIRE(N >= 0 && h > 0 && V > 0, "lmhead_ce", "bad shape N=%d h=%d V=%d", N, h, V);
    if (N == 0) return;
    // bf16 with V % 8 == 0: bf16 logits, the gradient in place (one buffer); else fp32 logits and, for bf16 act,
    // a separate gradient buffer
    const bool bf16_logits = sizeof(T) == sizeof(bf16) && V % 8 == 0;
    const size_t logit_bytes = bf16_logits ? sizeof(bf16) : sizeof(float);
    size_t rows_budget = CE_CHUNK_BYTES / ((size_t)V * logit_bytes);
    const size_t max_rows = bf16_logits ? 8192 : 4096; // 2 GiB of logits either way
    int R = (int)(rows_budget < 1 ? 1 : rows_budget > max_rows ? max_rows : rows_budget);
    const char *force = getenv("GDN_CUDA_CE_ROWS"); // tests: force small chunks to cover the chunk loop
    const bool forced = force && atoi(force) > 0;
    if (forced) R = atoi(force);
    if (R > N) R = N;
    const bool in_place = bf16_logits || sizeof(T) == sizeof(float);
    const bool scratch_ok = scratch && in_place && cu_aligned16(scratch); // 16-byte rows
    const char *fit_env = getenv("GDN_CUDA_CE_FIT"); // 0: keep R-row chunks in memory of their own (A/B)
    if (!forced && !(fit_env && !strcmp(fit_env, "0")) && scratch_ok)
        R = ce_fit_rows(N, R, scratch_bytes / ((size_t)V * logit_bytes));
    // The caller's scratch where a whole chunk fits (then the same chunks as without it: the same results), or where
    // it holds at least half of one, in smaller chunks that fit (ce_fit_rows; dE's fp32 sum then adds the chunks in
    // other groups, a reordering within fp32 rounding); else the logits get memory of their own (2 GiB at 8192 rows;
    // the arena's backward-only buffers hold a whole chunk from micro-batch ~32 of the 300M, and at 16 for the 1B)
    const size_t chunk_bytes = (size_t)R * V * logit_bytes;
    const bool own = !(scratch_ok && scratch_bytes >= chunk_bytes);
    void *logits = own ? cu_scratch(chunk_bytes, "lmhead_ce logits") : scratch;
    T *dlogits = in_place ? (T *)logits : (T *)cu_scratch((size_t)R * V * sizeof(T), "lmhead_ce dlogits");
    const T *ya = (const T *)y;
    // GDN_CUDA_CE_THREADS: the bf16 pass's block size (a multiple of 32 up to 1024; tuning: the sums' order follows it)
    const char *ce_thr = getenv("GDN_CUDA_CE_THREADS");
    int ce_bf16_threads = ce_thr && atoi(ce_thr) > 0 ? atoi(ce_thr) : CE_THREADS;
    CU_REQUIRE(ce_bf16_threads % 32 == 0 && ce_bf16_threads <= 1024, "lmhead_ce",
               "GDN_CUDA_CE_THREADS=%d: a multiple of 32 up to 1024 expected", ce_bf16_threads);
    for (int n0 = 0; n0 < N; n0 += R) {
        int rows = N - n0 < R ? N - n0 : R;
        if (bf16_logits && sizeof(T) == 2 &&
            cu_gemm_wg_takes(WG_USE_LM_LOGITS, rows, logits, V, ya + (size_t)n0 * h, h, E, h))
            cu_gemm_wg("lmhead_ce logits", (bf16 *)logits, V, (const bf16 *)(ya + (size_t)n0 * h), h, (const bf16 *)E,
                       h, rows, V, h, 0);
        else
            cu_gemm("lmhead_ce logits", true, false, V, rows, h, E, h, ya + (size_t)n0 * h, h, logits, V,
                    cu_dtype<T>(), bf16_logits ? CUDA_R_16BF : CUDA_R_32F, 0.0f);
        if (bf16_logits)
            cu_launch("lmhead_ce softmax", ce_rows_bf16_kernel,
                      dim3(ce_bf16_grid(rows)), dim3(ce_bf16_threads), 0, (bf16 *)logits, V, targets + n0,
                      losses + n0, dy ? 1 : 0, loss_scale, rows, n0, g_cu.err_dev);
        else if (V % 4 == 0) // rows stay 16-byte aligned (the scratch is)
            cu_launch("lmhead_ce softmax", ce_rows_vec_kernel<T>, dim3(rows), dim3(CE_THREADS), 0,
                      (const float *)logits, dlogits, V, targets + n0, losses + n0, dy ? 1 : 0, loss_scale, n0,
                      g_cu.err_dev);
        else
            cu_launch("lmhead_ce softmax", ce_rows_kernel<T>, dim3(rows), dim3(CE_THREADS), 0, (const float *)logits,
                      dlogits, V, targets + n0, losses + n0, dy ? 1 : 0, loss_scale, n0, g_cu.err_dev);
        if (dy) { // dy = dlogits E and dE += dlogits^T y: gemm_wg's DX and DW forms under GDN_CUDA_GEMM=wg
            T *dyc = (T *)dy + (size_t)n0 * h;
            const T *yc = ya + (size_t)n0 * h;
            const bool wg = bf16_logits && sizeof(T) == 2;
            if (wg && cu_gemm_wg_takes(WG_USE_LM_DY, rows, dyc, h, dlogits, V, E, h))
                cu_gemm_wg_dx("lmhead_ce dy", (bf16 *)dyc, h, (const bf16 *)dlogits, V, (const bf16 *)E, rows, V, h, 0);
            else
                cu_gemm("lmhead_ce dy", false, false, h, rows, V, E, h, dlogits, V, dyc, h, cu_dtype<T>(),
                        cu_dtype<T>(), 0.0f);
            if (dE && wg && cu_gemm_wg_dw_takes(WG_USE_LM_DE, rows, V, h, dE, dlogits, V, yc, h))
                cu_gemm_wg_dw("lmhead_ce dE", dE, (const bf16 *)dlogits, V, (const bf16 *)yc, h, rows, V, h);
            else if (dE)
                cu_gemm("lmhead_ce dE", false, true, h, V, rows, yc, h, dlogits, V, dE, h, cu_dtype<T>(), CUDA_R_32F,
                        1.0f);
        }
    }
    if ((void *)dlogits != logits) cu_scratch_free(dlogits);
    if (own) cu_scratch_free(logits);
}

template <typename T> static void cu_lmhead_logits(float *logits, const void *y, const void *E, int N, int h, int V) {
    CU_REQUIRE(logits && y && E, "lmhead_logits", "NULL pointer (logits, y, E)");
    CU_REQUIRE(N >= 0 && h > 0 && V > 0, "lmhead_logits", "bad shape N=%d h=%d V=%d", N, h, V);
    // Row chunks keep each GEMM's output below 2^31 elements.
    int R = (int)(((size_t)1 << 30) / (size_t)V);
    if (R < 1) R = 1;
    for (int n0 = 0; n0 < N; n0 += R) {
        int rows = N - n0 < R ? N - n0 : R;
        cu_gemm("lmhead_logits", true, false, V, rows, h, E, h, (const T *)y + (size_t)n0 * h, h,
                logits + (size_t)n0 * V, V, cu_dtype<T>(), CUDA_R_32F, 0.0f);
    }
}

// One block per row: per thread an online max (first index on ties) and sum of exp, then fixed-order block
// reductions: max, the lowest index holding it, the rescaled sum.
enum { STATS_THREADS = 1024 };
// One logit into a thread's running (max, first index holding it, sum of exp relative to the max; the sum only
// when wanted). A masked (-inf) entry adds nothing (and -inf - -inf would be NaN).
__device__ __forceinline__ void stats_add(float x, int c, float &mx, float &se, int &best, bool want_sum) {
    if (x > mx) {
        if (want_sum) se = se * expf(mx - x) + 1.0f;
        mx = x;
        best = c;
    } else if (want_sum && x != -INFINITY) {
        se += expf(x - mx);
    }
}
// The block's (max M, lowest index holding it or V, rescaled sum S or 0), fixed-order reductions; thread 0's b is
// the block's (the others return theirs). At most 32 warps.
__device__ __forceinline__ int stats_block(float mx, float se, int best, int V, bool want_sum, float &M, float &S) {
    __shared__ int idx[32];
    M = block_max(mx);
    int cand = mx == M ? best : V;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) cand = min(cand, __shfl_xor_sync(0xffffffffu, cand, o));
    if ((threadIdx.x & 31) == 0) idx[threadIdx.x >> 5] = cand;
    S = want_sum ? block_sum(mx == -INFINITY ? 0.0f : se * expf(mx - M)) : 0.0f;
    __syncthreads();
    int b = idx[0];
    if (threadIdx.x == 0)
        for (int w = 1; w < (int)(blockDim.x >> 5); w++) b = min(b, idx[w]);
    return b;
}
__global__ void logits_stats_kernel(int32_t *argmax, float *logprob, const float *logits, const int32_t *targets,
                                    int V, CuDevError *err) {
    const int r = blockIdx.x;
    const float *l = logits + (size_t)r * V;
    float mx = -INFINITY, se = 0.0f;
    int best = V;
    for (int c = threadIdx.x; c < V; c += blockDim.x) stats_add(l[c], c, mx, se, best, logprob != NULL);
    float M, S;
    const int b = stats_block(mx, se, best, V, logprob != NULL, M, S);
    if (threadIdx.x != 0) return;
    argmax[r] = b < V ? b : 0; // all NaN or -inf: 0, as the CPU twin
    if (!logprob) return;
    int t = targets[r];
    if (t < 0 || t >= V) {
        dev_report(err, CU_ERR_TARGET_ID, r, t, V);
        logprob[r] = NAN;
        return;
    }
    logprob[r] = l[t] - (M + logf(S));
}

// Few rows (decoding: B rows of 128k logits): a row over one block reads its 128k values ~125 at a time per
// thread and took 52 us at B = 1 on the H200. Split: block (s, r) takes the columns [V s / S, V (s+1) / S) of
// row r with the same per-thread update, loads issued STATS_UNROLL at a time, and writes its (max, first index
// of the max, sum of exp relative to its max); logits_stats_finish combines the S partials of a row in slice
// order. The argmax is the same as the one-block kernel's (max and lowest index do not depend on the order);
// the log-probability's sum is taken in another order. Without logprob no exp is computed.
enum { STATS_SPLIT_THREADS = 256, STATS_UNROLL = 4, STATS_MIN_COLS = 2048 };
__global__ void logits_stats_part_kernel(float *pmax, int32_t *pidx, float *psum, const float *logits, int V,
                                         int want_sum) {
    // launched with programmatic dependent launch: nothing is read before the lm head's GEMM has completed
    cu_pdl_trigger();
    cu_pdl_wait();
    const int s = blockIdx.x, S = gridDim.x, r = blockIdx.y, step = blockDim.x;
    const int c0 = (int)((long)V * s / S), c1 = (int)((long)V * (s + 1) / S);
    const float *l = logits + (size_t)r * V;
    float mx = -INFINITY, se = 0.0f;
    int best = V;
    for (int c = c0 + threadIdx.x; c < c1; c += STATS_UNROLL * step) {
        float x[STATS_UNROLL];
#pragma unroll
        for (int u = 0; u < STATS_UNROLL; u++) x[u] = c + u * step < c1 ? l[c + u * step] : -INFINITY;
#pragma unroll
        for (int u = 0; u < STATS_UNROLL; u++) {
            if (c + u * step >= c1) break;
            stats_add(x[u], c + u * step, mx, se, best, want_sum);
        }
    }
    float M, Ssum;
    const int b = stats_block(mx, se, best, V, want_sum, M, Ssum);
    if (threadIdx.x != 0) return;
    const size_t o = (size_t)r * S + s;
    pmax[o] = M, pidx[o] = b, psum[o] = Ssum;
}
__global__ void logits_stats_finish_kernel(int32_t *argmax, float *logprob, const float *pmax, const int32_t *pidx,
                                           const float *psum, int S, const float *logits, const int32_t *targets,
                                           int rows, int V, CuDevError *err) {
    cu_pdl_wait(); // programmatic dependent launch: the slices' partials are complete after this
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float *pm = pmax + (size_t)r * S, *ps = psum + (size_t)r * S;
    const int32_t *pi = pidx + (size_t)r * S;
    float M = -INFINITY;
    for (int s = 0; s < S; s++) M = fmaxf(M, pm[s]);
    int b = V;
    for (int s = 0; s < S; s++)
        if (pm[s] == M) b = min(b, pi[s]);
    argmax[r] = b < V ? b : 0; // all NaN or -inf: 0, as the CPU twin
    if (!logprob) return;
    float Ssum = 0.0f;
    for (int s = 0; s < S; s++) Ssum += pm[s] == -INFINITY ? 0.0f : ps[s] * expf(pm[s] - M);
    const int t = targets[r];
    if (t < 0 || t >= V) {
        dev_report(err, CU_ERR_TARGET_ID, r, t, V);
        logprob[r] = NAN;
        return;
    }
    logprob[r] = logits[(size_t)r * V + t] - (M + logf(Ssum));
}

static void cu_logits_stats(int32_t *argmax, float *logprob, const float *logits, const int32_t *targets, int rows,
                            int V) {
    CU_REQUIRE(argmax && logits && (!logprob || targets), "logits_stats", "NULL pointer (argmax, logits, targets)");
    CU_REQUIRE(rows >= 0 && V > 0, "logits_stats", "bad shape rows=%d V=%d", rows, V);
    if (rows == 0) return;
    // slices per row: enough blocks for ~2 per multiprocessor, each at least STATS_MIN_COLS columns
    const int sms = g_cu.sm_count > 0 ? g_cu.sm_count : 1;
    int S = rows < sms ? (2 * sms + rows - 1) / rows : 1;
    if (S > V / STATS_MIN_COLS) S = V / STATS_MIN_COLS;
    if (S <= 1) {
        cu_launch("logits_stats", logits_stats_kernel, dim3((unsigned)rows), dim3(STATS_THREADS), 0, argmax, logprob,
                  logits, targets, V, g_cu.err_dev);
        return;
    }
    const size_t np = (size_t)rows * S;
    float *pmax = (float *)cu_scratch(np * (2 * sizeof(float) + sizeof(int32_t)), "logits_stats");
    float *psum = pmax + np;
    int32_t *pidx = (int32_t *)(psum + np);
    cu_launch_pdl("logits_stats slices", logits_stats_part_kernel, dim3((unsigned)S, (unsigned)rows),
                  dim3(STATS_SPLIT_THREADS), 0, pmax, pidx, psum, logits, V, logprob ? 1 : 0);
    cu_launch_pdl("logits_stats finish", logits_stats_finish_kernel, dim3(cu_blocks(rows, 64)), dim3(64), 0, argmax,
                  logprob, pmax, pidx, psum, S, logits, targets, rows, V, g_cu.err_dev);
    cu_scratch_free(pmax);
}

// one block: the slot is read from count before any thread advances it (count is this op's alone)
__global__ void token_ring_push_kernel(int32_t *ring, int32_t *count, const int32_t *tok, int B, int K) {
    cu_pdl_wait(); // tok is the step's argmax, written by the kernel before
    const int slot = count[0] % K;
    for (int b = threadIdx.x; b < B; b += blockDim.x) ring[(size_t)slot * B + b] = tok[b];
    __syncthreads(); // every thread has read count
    if (threadIdx.x == 0) count[0] = count[0] + 1;
}

static void cu_token_ring_push(int32_t *ring, int32_t *count, const int32_t *tok, int B, int K) {
    CU_REQUIRE(ring && count && tok, "token_ring_push", "NULL pointer (ring, count, tok)");
    CU_REQUIRE(B > 0 && K > 0, "token_ring_push", "bad shape B=%d K=%d", B, K);
    const unsigned threads = B < 256 ? 32 * ((B + 31) / 32) : 256;
    cu_launch_pdl("token_ring_push", token_ring_push_kernel, dim3(1), dim3(threads), 0, ring, count, tok, B, K);
}

void cu_register_lmhead(Backend *b, int use_bf16) {
    b->logits_stats = cu_logits_stats;
    b->token_ring_push = cu_token_ring_push;
    b->lmhead_ce = use_bf16 ? cu_lmhead_ce<bf16> : cu_lmhead_ce<float>;
    b->lmhead_logits = use_bf16 ? cu_lmhead_logits<bf16> : cu_lmhead_logits<float>;
}
