// adamw.cu: the optimizer step and the deterministic sums used for the gradient norm.
//
// AdamW mirrors the CPU twin (cpu/adamw.c), which reproduces torch.optim.AdamW's single-tensor CPU path:
//   g *= gscale;  p *= 1 - lr*wd;  m = fma(g, 1-b1, m*b1);  v = fma((1-b2)*g, g, v*b2)
//   p += (-lr/bc1) * m / (sqrt(v)/sqrt(bc2) + eps),  bc1 = 1 - b1^step, bc2 = 1 - b2^step
// with the scalars formed in double on the host. Every other multiply/add/divide is an explicitly
// rounded intrinsic (no contraction) and sqrt/div are IEEE, so the fp32 results match the CPU twin bit
// for bit (the test holds them to that; a change in cpu/adamw.c must be mirrored here).
//
// sum/sumsq: a fixed grid of SUM_BLOCKS x SUM_THREADS threads, each summing a fixed strided subset in
// double, block totals in a fixed tree, then one block adds the block totals in order. The layout
// depends on n only, so the result is the same on every run.
#include "cuda/common.cuh"

enum { SUM_BLOCKS = 1024, SUM_THREADS = 256 };

template <typename T>
__global__ void adamw_kernel(float *p, T *p_act, const float *g, float *m, float *v, size_t n, float gscale,
                             float decay, float b1, float c1, float b2, float c2, float neg_step, float bc2_sqrt,
                             float eps) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float gi = __fmul_rn(g[i], gscale);
        float pi = __fmul_rn(p[i], decay);                                // param.mul_(1 - lr*wd)
        float mi = __fmaf_rn(gi, c1, __fmul_rn(m[i], b1));                // exp_avg.mul_(b1).add_(g, alpha=1-b1)
        float vi = __fmaf_rn(__fmul_rn(c2, gi), gi, __fmul_rn(v[i], b2)); // exp_avg_sq ... addcmul_
        float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), bc2_sqrt), eps);
        float pn = __fadd_rn(pi, __fdiv_rn(__fmul_rn(neg_step, mi), denom));
        p[i] = pn;
        m[i] = mi;
        v[i] = vi;
        if (p_act) p_act[i] = from_f<T>(pn);
    }
}

template <typename T>
static void cu_adamw(float *p, void *p_act, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
                     float eps, float wd, int step, float gscale) {
    CU_REQUIRE(p && g && m && v, "adamw", "NULL pointer (p, g, m, v)");
    CU_REQUIRE(step >= 1, "adamw", "step is 1-based, got %d", step);
    CU_REQUIRE(!p_act || sizeof(T) != 4 || p_act == p, "adamw",
               "p_act must be NULL or p in the fp32 mode (the master copy is the compute copy)");
    if (!n) return;
    float decay = (float)(1.0 - (double)lr * (double)wd);
    float c1 = (float)(1.0 - (double)b1), c2 = (float)(1.0 - (double)b2);
    double bc1 = 1.0 - pow((double)b1, step), bc2 = 1.0 - pow((double)b2, step);
    float neg_step = (float)(-(double)lr / bc1);
    float bc2_sqrt = (float)sqrt(bc2);
    T *act = sizeof(T) == 4 ? NULL : (T *)p_act; // fp32: p is already the compute copy
    unsigned blocks = (unsigned)(n / 256 + 1 < 8192 ? n / 256 + 1 : 8192);
    cu_launch("adamw", adamw_kernel<T>, dim3(blocks), dim3(256), 0, p, act, g, m, v, n, gscale, decay, b1, c1, b2, c2,
              neg_step, bc2_sqrt, eps);
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
    b->sum = cu_sum;
    b->sumsq = cu_sumsq;
}
