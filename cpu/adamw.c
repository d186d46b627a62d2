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
#include <string.h>

#include "cpu/cpu_ops.h"
#include "util/common.h"

// The step's scalars, formed in double as torch's Python code forms them
typedef struct {
    float decay, c1, c2, neg_step_size, bc2_sqrt;
} AdamwK;
static AdamwK adamw_k(float lr, float b1, float b2, float wd, int step) {
    double bc1 = 1.0 - pow((double)b1, step), bc2 = 1.0 - pow((double)b2, step);
    return (AdamwK){(float)(1.0 - (double)lr * (double)wd), (float)(1.0 - (double)b1), (float)(1.0 - (double)b2),
                    (float)(-(double)lr / bc1), (float)sqrt(bc2)};
}

// One element: p, m, v in and out (every AdamW path of this file runs this, so they agree bit for bit)
static inline void adamw_update(float *p, float *m, float *v, float g, float gscale, float b1, float b2, float eps,
                                const AdamwK *k) {
    float gi = g * gscale;
    float pi = *p * k->decay;                        // param.mul_(1 - lr * weight_decay)
    float mi = fmaf(gi, k->c1, *m * b1);             // exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
    float vi = fmaf(k->c2 * gi, gi, *v * b2);        // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    float denom = sqrtf(vi) / k->bc2_sqrt + eps;     // (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
    *p = pi + k->neg_step_size * mi / denom;         // param.addcdiv_(exp_avg, denom, value=-step_size)
    *m = mi;
    *v = vi;
}

void cpu_adamw(float *p, void *p_act, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
               float eps, float wd, int step, float gscale) {
    CPU_REQUIRE(p && g && m && v, "adamw", "NULL pointer (p, g, m, v)");
    CPU_REQUIRE(!p_act || p_act == p, "adamw", "p_act must be NULL or p on the CPU (fp32 activations)");
    CPU_REQUIRE(step >= 1, "adamw", "step is 1-based, got %d", step);
    const AdamwK k = adamw_k(lr, b1, b2, wd, step);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) adamw_update(&p[i], &m[i], &v[i], g[i], gscale, b1, b2, eps, &k);
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

static float bf16_round(float x) { return bf16_to_f32(f32_to_bf16(x)); }
static uint16_t bf16_bits_of(float x) { // a bf16-valued fp32 (the CPU's act dtype) as bf16 bits
    uint32_t u;
    memcpy(&u, &x, 4);
    return (uint16_t)(u >> 16);
}

void cpu_adamw_multi_lp(const AdamwChunk *chunks, int nchunks, float *p, uint16_t *rem, void *p_act, const float *g,
                        void *m_, void *v_, int lp, float lr, float b1, float b2, float eps, float wd, int step,
                        const float *gscale) {
    CPU_REQUIRE(chunks || !nchunks, "adamw_multi_lp", "NULL chunk table");
    CPU_REQUIRE(g && m_ && v_ && gscale, "adamw_multi_lp", "NULL pointer (g, m, v, gscale)");
    CPU_REQUIRE(step >= 1, "adamw_multi_lp", "step is 1-based, got %d", step);
    CPU_REQUIRE(!(lp & ~(ADAMW_M_BF16 | ADAMW_V_BF16)), "adamw_multi_lp", "unknown state flags %d", lp);
    float *m = m_, *v = v_, *act = p_act; // the CPU's act dtype is fp32: bf16 moments are bf16-valued fp32
    const float gs = *gscale;
    for (int c = 0; c < nchunks; c++) {
        const AdamwChunk *ch = &chunks[c];
        CPU_REQUIRE(ch->rem ? rem && act : p != NULL, "adamw_multi_lp",
                    "chunk %d: %s", c, ch->rem ? "rem and p_act are needed (remainder chunk)" : "p is NULL");
        const AdamwK k = adamw_k(lr, b1, b2, ch->decay ? wd : 0.0f, step);
        const size_t go = ch->goff, so = ch->soff, po = ch->poff;
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < ch->n; i++) {
            float pi = ch->rem ? f32_join_remainder(bf16_bits_of(act[go + i]), rem[so + i]) : p[po + i];
            float mi = m[so + i], vi = v[so + i];
            adamw_update(&pi, &mi, &vi, g[go + i], gs, b1, b2, eps, &k);
            m[so + i] = lp & ADAMW_M_BF16 ? bf16_round(mi) : mi;
            v[so + i] = lp & ADAMW_V_BF16 ? bf16_round(vi) : vi;
            if (ch->rem) {
                act[go + i] = bf16_to_f32(f32_split_remainder(pi, &rem[so + i]));
            } else {
                p[po + i] = pi;
                if (act && act != p) act[go + i] = pi; // fp32 act: the value itself (p_act == p: p is the copy)
            }
        }
    }
}

void cpu_clip_scale(float *scale, const float *sumsq, float max_norm) {
    CPU_REQUIRE(scale && sumsq, "clip_scale", "NULL pointer (scale, sumsq)");
    double coeff = (double)max_norm / (sqrt((double)sumsq[0]) + 1e-6); // Megatron's clip_coeff
    scale[0] = max_norm > 0 && coeff < 1.0 ? (float)coeff : 1.0f;
}
