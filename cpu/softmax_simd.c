// softmax_simd.c: the exp loops of the CPU lm head (cpu/lmhead_ce.c), vectorised. This file alone is built
// with -ffast-math (Makefile): glibc then offers its vector expf (libmvec, <= 4 ulp) to `omp simd` loops,
// ~10x faster than one libm call per logit, which made the softmax a third of a small model's CPU step.
// Sums run in float over fixed blocks of 1024 logits and the block sums add up in double, in order: the
// result depends on the machine's vector width, not on threads. Inputs are finite logits from a GEMM
// (no masking); a NaN logit still makes the row's sum NaN.
#include <math.h>

#include "cpu/cpu_ops.h"

enum { SUM_BLOCK = 1024 };

double cpu_sum_exp(const float *l, int V, float mx) {
    double se = 0;
    for (int c0 = 0; c0 < V; c0 += SUM_BLOCK) {
        const int c1 = V - c0 < SUM_BLOCK ? V : c0 + SUM_BLOCK;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int c = c0; c < c1; c++) s += expf(l[c] - mx);
        se += s;
    }
    return se;
}

void cpu_exp_scale(float *l, int V, float mx, float scale) {
#pragma omp simd
    for (int c = 0; c < V; c++) l[c] = expf(l[c] - mx) * scale;
}
