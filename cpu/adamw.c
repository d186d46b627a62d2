// adamw.c: AdamW as torch.optim.AdamW computes it on the CPU (single-tensor path):
//   g *= gscale;  p *= 1 - lr*wd;  m = m*b1 + (1-b1)*g;  v = v*b2 + (1-b2)*g*g
//   p += (-lr/bc1) * m / (sqrt(v)/sqrt(bc2) + eps),  bc1 = 1 - b1^step, bc2 = 1 - b2^step
// The scalars (1 - lr*wd, 1-b1, lr/bc1, sqrt(bc2)) are formed in double as torch's Python code forms
// them, then used as fp32, and each tensor op rounds where torch's vectorised CPU kernels round: add_
// with alpha and addcmul_ are fused multiply-adds there, everything else rounds per operation. This
// is bit-identical to torch 1.13's AdamW on an AVX2 CPU (checked on 4096 elements over 3 steps).
// torch >= 2.0 forms m with lerp_ (m + (1-b1)(g - m)), which can differ from this in m's last bit.
// Automatic contraction is off in this file so that only the fmaf calls below fuse.
#pragma GCC optimize("fp-contract=off")
#include <math.h>

#include "cpu/cpu_ops.h"

void cpu_adamw(float *p, void *p_act, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
               float eps, float wd, int step, float gscale) {
    CPU_REQUIRE(p && g && m && v, "adamw", "NULL pointer (p, g, m, v)");
    CPU_REQUIRE(!p_act || p_act == p, "adamw", "p_act must be NULL or p on the CPU (fp32 activations)");
    CPU_REQUIRE(step >= 1, "adamw", "step is 1-based, got %d", step);
    float decay = (float)(1.0 - (double)lr * (double)wd);
    float c1 = (float)(1.0 - (double)b1), c2 = (float)(1.0 - (double)b2);
    double bc1 = 1.0 - pow((double)b1, step), bc2 = 1.0 - pow((double)b2, step);
    float neg_step_size = (float)(-(double)lr / bc1);
    float bc2_sqrt = (float)sqrt(bc2);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * gscale;
        float pi = p[i] * decay;                   // param.mul_(1 - lr * weight_decay)
        float mi = fmaf(gi, c1, m[i] * b1);        // exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
        float vi = fmaf(c2 * gi, gi, v[i] * b2);   // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        float denom = sqrtf(vi) / bc2_sqrt + eps;  // (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
        p[i] = pi + neg_step_size * mi / denom;    // param.addcdiv_(exp_avg, denom, value=-step_size)
        m[i] = mi;
        v[i] = vi;
    }
}

void cpu_adamw_multi(const AdamwChunk *chunks, int nchunks, float *p, void *p_act, const float *g, float *m, float *v,
                     float lr, float b1, float b2, float eps, float wd, int step, const float *gscale) {
    CPU_REQUIRE(chunks || !nchunks, "adamw_multi", "NULL chunk table");
    CPU_REQUIRE(gscale, "adamw_multi", "NULL gscale");
    // Chunks that continue the previous one in g, state and p with the same decay go into one cpu_adamw call (the
    // plan cuts runs for CUDA blocks): one OpenMP region per run, not per 64K chunk. Elementwise: same bits.
    for (int c = 0; c < nchunks;) {
        const AdamwChunk *k = &chunks[c];
        size_t n = k->n;
        int e = c + 1;
        while (e < nchunks && chunks[e].decay == k->decay && chunks[e].goff == k->goff + n &&
               chunks[e].soff == k->soff + n && chunks[e].poff == k->poff + n)
            n += chunks[e++].n;
        float *pc = p + k->poff;
        CPU_REQUIRE(!p_act || (float *)p_act + k->goff == pc, "adamw_multi",
                    "p_act must be NULL or p at the same offset on the CPU (fp32 activations)");
        cpu_adamw(pc, p_act ? pc : NULL, g + k->goff, m + k->soff, v + k->soff, n, lr, b1, b2, eps,
                  k->decay ? wd : 0.0f, step, *gscale);
        c = e;
    }
}

void cpu_clip_scale(float *scale, const float *sumsq, float max_norm) {
    CPU_REQUIRE(scale && sumsq, "clip_scale", "NULL pointer (scale, sumsq)");
    double coeff = (double)max_norm / (sqrt((double)sumsq[0]) + 1e-6); // Megatron's clip_coeff
    scale[0] = max_norm > 0 && coeff < 1.0 ? (float)coeff : 1.0f;
}
