// adamw.cu: the optimizer step and the deterministic sums used for the gradient norm.
//
// AdamW mirrors the CPU twin (cpu/adamw.c), which reproduces torch.optim.AdamW's single-tensor CPU path:
//   g *= gscale;  p *= 1 - lr*wd;  m = fma(g, 1-b1, m*b1);  v = fma((1-b2)*g, g, v*b2)
//   p += (-lr/bc1) * m / (sqrt(v)/sqrt(bc2) + eps),  bc1 = 1 - b1^step, bc2 = 1 - b2^step
// with the scalars formed in double on the host. Every other multiply/add/divide is an explicitly
// rounded intrinsic (no contraction) and sqrt/div are IEEE, so the fp32 results match the CPU twin bit
// for bit (the test holds them to that; a change in cpu/adamw.c must be mirrored here).
//
// adamw_multi: the same element update over a chunk table (one block per chunk), the clip scale read from device
// memory (clip_scale writes it from the gradients' sum of squares), so the step has no host round trip.
//
// sum/sumsq: a fixed grid of SUM_BLOCKS x SUM_THREADS threads, each summing a fixed strided subset in
// double, block totals in a fixed tree, then one block adds the block totals in order. The layout
// depends on n only, so the result is the same on every run.
#include "cuda/common.cuh"

enum { SUM_BLOCKS = 1024, SUM_THREADS = 256 };

// The step's scalars, formed in double on the host (as torch does) once for both launch paths.
struct AdamwScalars {
    float decay, b1, c1, b2, c2, neg_step, bc2_sqrt, eps;
};
static AdamwScalars adamw_scalars(float lr, float b1, float b2, float eps, float wd, int step) {
    const double bc1 = 1.0 - pow((double)b1, step), bc2 = 1.0 - pow((double)b2, step);
    return AdamwScalars{(float)(1.0 - (double)lr * (double)wd), b1, (float)(1.0 - (double)b1), b2,
                        (float)(1.0 - (double)b2), (float)(-(double)lr / bc1), (float)sqrt(bc2), eps};
}

// The element math of every AdamW kernel here (so they are the same math bit for bit); p, m, v in and out.
// decay: k.decay, or 1 for a tensor without weight decay (adamw_multi).
__device__ __forceinline__ void adamw_math(float &p, float &m, float &v, float g, float gscale, float decay,
                                           const AdamwScalars &k) {
    float gi = __fmul_rn(g, gscale);
    float pi = __fmul_rn(p, decay);                                       // param.mul_(1 - lr*wd)
    float mi = __fmaf_rn(gi, k.c1, __fmul_rn(m, k.b1));                   // exp_avg.mul_(b1).add_(g, alpha=1-b1)
    float vi = __fmaf_rn(__fmul_rn(k.c2, gi), gi, __fmul_rn(v, k.b2));    // exp_avg_sq ... addcmul_
    float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), k.bc2_sqrt), k.eps);
    p = __fadd_rn(pi, __fdiv_rn(__fmul_rn(k.neg_step, mi), denom));
    m = mi;
    v = vi;
}

// One element's update in place (adamw_kernel, adamw_multi_kernel)
template <typename T>
__device__ __forceinline__ void adamw_elem(float *p, T *p_act, const float *g, float *m, float *v, size_t i,
                                           float gscale, float decay, const AdamwScalars &k) {
    float pn = p[i], mi = m[i], vi = v[i];
    adamw_math(pn, mi, vi, g[i], gscale, decay, k);
    p[i] = pn;
    m[i] = mi;
    v[i] = vi;
    if (p_act) p_act[i] = from_f<T>(pn);
}

template <typename T>
__global__ void adamw_kernel(float *p, T *p_act, const float *g, float *m, float *v, size_t n, float gscale,
                             AdamwScalars k) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        adamw_elem(p, p_act, g, m, v, i, gscale, k.decay, k);
}

// Multi-tensor AdamW: block b updates chunk b (<= ADAMW_CHUNK elements); the clip scale is read from device memory,
// so no host round trip sits between the gradient norm and the update. k.decay = 1 - lr*wd; chunks without decay
// use 1 (what 1 - lr*0 rounds to), as adamw with wd = 0 does.
// Where the chunk's four fp32 arrays (and its compute copy) start on 16-byte boundaries (the plan's tensors are laid
// out in 4-element multiples for the 300M), its elements go four at a time: one 16-byte load per array instead of
// four 4-byte ones, the same adamw_elem per element, so the same bits.
template <typename T>
__global__ void adamw_multi_kernel(const AdamwChunk *chunks, float *p, T *p_act, const float *g, float *m, float *v,
                                   const float *gscale, AdamwScalars k) {
    AdamwChunk c = chunks[blockIdx.x];
    float gs = *gscale, decay = c.decay ? k.decay : 1.0f;
    T *act = p_act ? p_act + c.goff : NULL;
    float *pc = p + c.poff, *mc = m + c.soff, *vc = v + c.soff;
    const float *gc = g + c.goff;
    const uintptr_t mis = ((uintptr_t)pc | (uintptr_t)mc | (uintptr_t)vc | (uintptr_t)gc) & 15u;
    const bool vec = mis == 0 && (!act || ((uintptr_t)act & (4 * sizeof(T) - 1)) == 0);
    uint32_t done = 0;
    if (vec) {
        const uint32_t n4 = c.n / 4;
        for (uint32_t i = threadIdx.x; i < n4; i += blockDim.x) {
            float4 p4 = reinterpret_cast<const float4 *>(pc)[i], g4 = reinterpret_cast<const float4 *>(gc)[i];
            float4 m4 = reinterpret_cast<const float4 *>(mc)[i], v4 = reinterpret_cast<const float4 *>(vc)[i];
            float pv[4] = {p4.x, p4.y, p4.z, p4.w}, gv[4] = {g4.x, g4.y, g4.z, g4.w};
            float mv[4] = {m4.x, m4.y, m4.z, m4.w}, vv[4] = {v4.x, v4.y, v4.z, v4.w};
#pragma unroll
            for (int e = 0; e < 4; e++) adamw_elem<T>(pv, NULL, gv, mv, vv, e, gs, decay, k);
            reinterpret_cast<float4 *>(pc)[i] = make_float4(pv[0], pv[1], pv[2], pv[3]);
            reinterpret_cast<float4 *>(mc)[i] = make_float4(mv[0], mv[1], mv[2], mv[3]);
            reinterpret_cast<float4 *>(vc)[i] = make_float4(vv[0], vv[1], vv[2], vv[3]);
            if (act) store4<T>(act + 4 * (size_t)i, pv); // the compute copy: adamw_elem's from_f of the new p
        }
        done = n4 * 4;
    }
    for (uint32_t i = done + threadIdx.x; i < c.n; i += blockDim.x) adamw_elem(pc, act, gc, mc, vc, i, gs, decay, k);
}

// ---- adamw_multi_lp (Megatron's precision-aware optimizer: model/optim_lp.c)
// The high half of an act value as bf16 bits (fp32 act: a bf16-valued float) and back
__device__ __forceinline__ uint16_t act_hi(bf16 a) { return __bfloat16_as_ushort(a); }
__device__ __forceinline__ uint16_t act_hi(float a) { return (uint16_t)(__float_as_uint(a) >> 16); }
template <typename T> __device__ __forceinline__ T act_from_hi(uint16_t h);
template <> __device__ __forceinline__ bf16 act_from_hi<bf16>(uint16_t h) { return __ushort_as_bfloat16(h); }
template <> __device__ __forceinline__ float act_from_hi<float>(uint16_t h) {
    return __uint_as_float((uint32_t)h << 16);
}

// TransformerEngine's remainder split and its inverse (util/common.h f32_split_remainder, f32_join_remainder)
__device__ __forceinline__ float join_remainder(uint16_t hi, uint16_t rem) {
    return __uint_as_float(((uint32_t)(uint16_t)(hi - (rem >> 15)) << 16) | rem);
}
__device__ __forceinline__ uint16_t split_remainder(float x, uint16_t &rem) {
    const uint32_t u = __float_as_uint(x);
    rem = (uint16_t)(u & 0xffffu);
    return (uint16_t)((u >> 16) + ((u >> 15) & 1u));
}

// A moment kept at bf16 precision: stored in act dtype (bf16; on fp32 backends a bf16-valued float), else fp32
template <typename S> __device__ __forceinline__ S lp_store(float x, bool bf);
template <> __device__ __forceinline__ bf16 lp_store<bf16>(float x, bool) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ float lp_store<float>(float x, bool bf) { return bf ? rnd<bf16>(x) : x; }

// Block b updates chunk b. MT / VT: the moments' storage (T where LP keeps them at bf16 precision, else float).
// Each thread takes 4 elements per pass, blockDim apart (coalesced 2- and 4-byte accesses, 4 loads in flight).
template <typename T, int LP>
__global__ void adamw_multi_lp_kernel(const AdamwChunk *chunks, float *p, uint16_t *rem, T *act, const float *g,
                                      void *m_, void *v_, const float *gscale, AdamwScalars k) {
    using MT = typename std::conditional<(LP & ADAMW_M_BF16) != 0, T, float>::type;
    using VT = typename std::conditional<(LP & ADAMW_V_BF16) != 0, T, float>::type;
    const AdamwChunk c = chunks[blockIdx.x];
    const float gs = *gscale, decay = c.decay ? k.decay : 1.0f;
    MT *mc = (MT *)m_ + c.soff;
    VT *vc = (VT *)v_ + c.soff;
    const float *gc = g + c.goff;
    T *ac = act ? act + c.goff : nullptr;
    float *pc = c.rem ? nullptr : p + c.poff;
    uint16_t *rc = c.rem ? rem + c.soff : nullptr;
    for (uint32_t i0 = threadIdx.x; i0 < c.n; i0 += 4 * blockDim.x) {
        float pv[4], mv[4], vv[4], gv[4];
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const uint32_t i = i0 + e * blockDim.x;
            if (i >= c.n) continue;
            gv[e] = gc[i];
            mv[e] = to_f(mc[i]);
            vv[e] = to_f(vc[i]);
            pv[e] = rc ? join_remainder(act_hi(ac[i]), rc[i]) : pc[i];
        }
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const uint32_t i = i0 + e * blockDim.x;
            if (i >= c.n) continue;
            adamw_math(pv[e], mv[e], vv[e], gv[e], gs, decay, k);
            mc[i] = lp_store<MT>(mv[e], (LP & ADAMW_M_BF16) != 0);
            vc[i] = lp_store<VT>(vv[e], (LP & ADAMW_V_BF16) != 0);
            if (rc) {
                uint16_t r;
                const uint16_t hi = split_remainder(pv[e], r);
                rc[i] = r;
                ac[i] = act_from_hi<T>(hi);
            } else {
                pc[i] = pv[e];
                if (ac) ac[i] = from_f<T>(pv[e]);
            }
        }
    }
}

__global__ void clip_scale_kernel(float *scale, const float *sumsq, float max_norm) {
    double coeff = (double)max_norm / (sqrt((double)sumsq[0]) + 1e-6); // Megatron's clip_coeff, as on the CPU
    scale[0] = max_norm > 0 && coeff < 1.0 ? (float)coeff : 1.0f;
}

template <typename T>
static void cu_adamw(float *p, void *p_act, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
                     float eps, float wd, int step, float gscale) {
    CU_REQUIRE(p && g && m && v, "adamw", "NULL pointer (p, g, m, v)");
    CU_REQUIRE(step >= 1, "adamw", "step is 1-based, got %d", step);
    CU_REQUIRE(!p_act || sizeof(T) != 4 || p_act == p, "adamw",
               "p_act must be NULL or p in the fp32 mode (the master copy is the compute copy)");
    if (!n) return;
    T *act = sizeof(T) == 4 ? NULL : (T *)p_act; // fp32: p is already the compute copy
    unsigned blocks = (unsigned)(n / 256 + 1 < 8192 ? n / 256 + 1 : 8192);
    cu_launch("adamw", adamw_kernel<T>, dim3(blocks), dim3(256), 0, p, act, g, m, v, n, gscale,
              adamw_scalars(lr, b1, b2, eps, wd, step));
}

template <typename T>
static void cu_adamw_multi(const AdamwChunk *chunks, int nchunks, float *p, void *p_act, const float *g, float *m,
                           float *v, float lr, float b1, float b2, float eps, float wd, int step, const float *gscale) {
    CU_REQUIRE(p && g && m && v && gscale && (chunks || !nchunks), "adamw_multi",
               "NULL pointer (chunks, p, g, m, v, gscale)");
    CU_REQUIRE(step >= 1, "adamw_multi", "step is 1-based, got %d", step);
    CU_REQUIRE(!p_act || sizeof(T) != 4 || p_act == p, "adamw_multi",
               "p_act must be NULL or p in the fp32 mode (the master copy is the compute copy)");
    if (!nchunks) return;
    T *act = sizeof(T) == 4 ? NULL : (T *)p_act;
    cu_launch("adamw_multi", adamw_multi_kernel<T>, dim3((unsigned)nchunks), dim3(256), 0, chunks, p, act, g, m, v,
              gscale, adamw_scalars(lr, b1, b2, eps, wd, step));
}

template <typename T>
static void cu_adamw_multi_lp(const AdamwChunk *chunks, int nchunks, float *p, uint16_t *rem, void *p_act,
                              const float *g, void *m, void *v, int lp, float lr, float b1, float b2, float eps,
                              float wd, int step, const float *gscale) {
    CU_REQUIRE(g && m && v && gscale && (chunks || !nchunks), "adamw_multi_lp",
               "NULL pointer (chunks, g, m, v, gscale)");
    CU_REQUIRE(step >= 1, "adamw_multi_lp", "step is 1-based, got %d", step);
    CU_REQUIRE(!(lp & ~(ADAMW_M_BF16 | ADAMW_V_BF16)), "adamw_multi_lp", "unknown state flags %d", lp);
    CU_REQUIRE(!rem || p_act, "adamw_multi_lp", "remainders need the act copy (p_act) that holds the high halves");
    if (!nchunks) return;
    // (the chunks are not checked on the host: a remainder chunk needs rem, another p). p_act == p: the masters are
    // the compute copy (fp32 backends), nothing more to write
    T *act = p_act == (void *)p ? NULL : (T *)p_act;
    const AdamwScalars k = adamw_scalars(lr, b1, b2, eps, wd, step);
#define LP_LAUNCH(F)                                                                                                  \
    cu_launch("adamw_multi_lp", adamw_multi_lp_kernel<T, F>, dim3((unsigned)nchunks), dim3(256), 0, chunks, p, rem, \
              act, g, m, v, gscale, k)
    switch (lp) {
    case 0: LP_LAUNCH(0); break;
    case ADAMW_M_BF16: LP_LAUNCH(ADAMW_M_BF16); break;
    case ADAMW_V_BF16: LP_LAUNCH(ADAMW_V_BF16); break;
    default: LP_LAUNCH(ADAMW_M_BF16 | ADAMW_V_BF16); break;
    }
#undef LP_LAUNCH
}

static void cu_clip_scale(float *scale, const float *sumsq, float max_norm) {
    CU_REQUIRE(scale && sumsq, "clip_scale", "NULL pointer (scale, sumsq)");
    cu_launch("clip_scale", clip_scale_kernel, dim3(1), dim3(1), 0, scale, sumsq, max_norm);
}

template <bool SQUARES> __global__ void sum_partials_kernel(double *part, const float *x, size_t n) {
    double acc = 0.0;
    for (size_t i = (size_t)blockIdx.x * SUM_THREADS + threadIdx.x; i < n; i += (size_t)SUM_BLOCKS * SUM_THREADS) {
        double xi = x[i];
        acc += SQUARES ? xi * xi : xi;
    }
    acc = block_sum(acc);
    if (threadIdx.x == 0) part[blockIdx.x] = acc;
}

__global__ void sum_finish_kernel(float *out, const double *part) {
    double acc = 0.0;
    for (int i = threadIdx.x; i < SUM_BLOCKS; i += SUM_THREADS) acc += part[i];
    acc = block_sum(acc);
    if (threadIdx.x == 0) out[0] = (float)acc;
}

template <bool SQUARES> static void cu_sum_impl(float *out, const float *x, size_t n, const char *name) {
    CU_REQUIRE(out && (x || !n), "sum/sumsq", "NULL pointer (out, x)");
    double *part = (double *)cu_scratch(SUM_BLOCKS * sizeof(double), name);
    cu_launch(name, sum_partials_kernel<SQUARES>, dim3(SUM_BLOCKS), dim3(SUM_THREADS), 0, part, x, n);
    cu_launch(name, sum_finish_kernel, dim3(1), dim3(SUM_THREADS), 0, out, (const double *)part);
    cu_scratch_free(part);
}
static void cu_sum(float *out, const float *x, size_t n) { cu_sum_impl<false>(out, x, n, "sum"); }
static void cu_sumsq(float *out, const float *x, size_t n) { cu_sum_impl<true>(out, x, n, "sumsq"); }

void cu_register_adamw(Backend *b, int use_bf16) {
    b->adamw = use_bf16 ? cu_adamw<bf16> : cu_adamw<float>;
    b->adamw_multi = use_bf16 ? cu_adamw_multi<bf16> : cu_adamw_multi<float>;
    b->adamw_multi_lp = use_bf16 ? cu_adamw_multi_lp<bf16> : cu_adamw_multi_lp<float>;
    b->clip_scale = cu_clip_scale;
    b->sum = cu_sum;
    b->sumsq = cu_sumsq;
}
