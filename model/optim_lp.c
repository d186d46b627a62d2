// optim_lp.c: Megatron's precision-aware optimizer (use_precision_aware_optimizer) for the model's own AdamW:
// exp_avg_dtype / exp_avg_sq_dtype bf16 keep a moment rounded to bf16 after every update (2 bytes instead of 4 on
// bf16 backends), and store_param_remainders (bf16 backends) keeps each fp32 master as the bf16 weight the GEMMs
// read plus its low 16 bits, TransformerEngine FusedAdam's split (util/common.h f32_split_remainder): the master
// is exact, 2 bytes instead of 4, and the weight is the master rounded half up instead of to nearest even (they
// differ at exact ties only). The tensors the forward reads in fp32 (norms, conv, gates, biases) keep whole fp32
// masters in small (model/fp32_params.c), which the update writes directly.
// The update is adamw_multi's math (torch's AdamW) on the fp32 values; checkpoints hold fp32 masters and moments
// as always (the conversions here are exact one way: bf16 moments and split masters widen losslessly).
// Bytes per parameter on a bf16 backend: weights 2, gradients 4, moments 8 (4 with both bf16), masters 4 (2 as
// remainders): 18 by default, 12 with everything on.
#include "optim_lp.h"

#include <stdlib.h>
#include <string.h>

#include "../util/common.h"

enum { CONV_CHUNK = 1 << 22 }; // host conversions go through buffers of this many elements

static int dtype_bf16(const char *s) { return !strcmp(s, "bf16"); }
static void keep_remainders(Model *m, int keep_values);
static void moment_get(const Model *m, float *dst, int bf, const void *src);

void model_lp_alloc_state(Model *m) {
    const Backend *be = m->be;
    const Config *c = &m->cfg;
    const size_t n = m->lay.total;
    m->adam_pa = c->use_precision_aware_optimizer;
    m->adam_lp = (dtype_bf16(c->exp_avg_dtype) ? ADAMW_M_BF16 : 0) |
                 (dtype_bf16(c->exp_avg_sq_dtype) ? ADAMW_V_BF16 : 0);
    if (m->adam_pa && !be->adamw_multi_lp)
        die("use_precision_aware_optimizer: the %s backend has no adamw_multi_lp", be->name);
    const size_t ab = (size_t)be->act_bytes;
    m->adam_m = be->alloc(n * (m->adam_lp & ADAMW_M_BF16 ? ab : sizeof(float)));
    m->adam_v = be->alloc(n * (m->adam_lp & ADAMW_V_BF16 ? ab : sizeof(float)));
    // TransformerEngine: "works only when param type is BF16 and master weight type is FP32, no effect otherwise"
    if (m->adam_pa && c->store_param_remainders && be->act_bytes == 2) keep_remainders(m, 0); // no weights set yet
}

static void keep_remainders(Model *m, int keep_values) {
    if (m->adam_rem) return;
    if (!m->adam_pa) die("model_keep_remainders: needs use_precision_aware_optimizer");
    const size_t n = m->lay.total;
    float *host = NULL;
    if (keep_values) { // the current masters survive the change of storage
        host = xmalloc(n * sizeof(float));
        model_get_params(m, host);
    }
    model_drop_masters(m); // small: the fp32-read tensors; params freed
    m->adam_rem = m->be->alloc(n * sizeof(uint16_t));
    if (host) model_lp_set_params(m, host);
    free(host);
}
void model_keep_remainders(Model *m) { keep_remainders(m, 1); }

double model_state_bytes_per_param(const Model *m) {
    const double ab = m->be->act_bytes;
    double b = m->wact == (void *)m->params ? 0 : ab; // the act copy (fp32 backends: the masters themselves)
    b += m->adam_rem ? 2 : m->params ? 4 : 0;         // masters (ZeRO-1 shards them: 0 here)
    if (m->grads) {
        b += 4;
        b += m->adam_m ? (m->adam_lp & ADAMW_M_BF16 ? ab : 4) : 0;
        b += m->adam_v ? (m->adam_lp & ADAMW_V_BF16 ? ab : 4) : 0;
    }
    return b;
}

// ---- masters as act + remainders

// Elements [i0, i0 + k) of the act copy as bf16 bits (fp32 act copies hold bf16-valued floats here)
static void act_bits_get(const Model *m, uint16_t *hi, size_t i0, size_t k, void *tmp) {
    const Backend *be = m->be;
    if (be->act_bytes == 2) {
        be->memcpy_d2h(hi, (char *)m->wact + i0 * 2, k * 2);
        return;
    }
    float *f = tmp;
    be->memcpy_d2h(f, (float *)m->wact + i0, k * sizeof(float));
    for (size_t i = 0; i < k; i++) {
        uint32_t u;
        memcpy(&u, &f[i], 4);
        hi[i] = (uint16_t)(u >> 16);
    }
}
static void act_bits_set(const Model *m, const uint16_t *hi, size_t i0, size_t k, void *tmp) {
    const Backend *be = m->be;
    if (be->act_bytes == 2) {
        be->memcpy_h2d((char *)m->wact + i0 * 2, hi, k * 2);
        return;
    }
    float *f = tmp;
    for (size_t i = 0; i < k; i++) f[i] = bf16_to_f32(hi[i]);
    be->memcpy_h2d((float *)m->wact + i0, f, k * sizeof(float));
}

// The masters between host fp32 and wact + remainders (split on the way in, joined on the way out; exact), the
// fp32-read tensors' whole in small
static void masters_move(Model *m, float *host, int to_device, uint16_t *rem_dev) {
    const Backend *be = m->be;
    const size_t n = m->lay.total;
    uint16_t *hi = xmalloc(CONV_CHUNK * sizeof(uint16_t)), *rem = xmalloc(CONV_CHUNK * sizeof(uint16_t));
    float *tmp = xmalloc(CONV_CHUNK * sizeof(float));
    for (size_t i0 = 0; i0 < n; i0 += CONV_CHUNK) {
        const size_t k = n - i0 < CONV_CHUNK ? n - i0 : CONV_CHUNK;
        if (to_device) {
            for (size_t i = 0; i < k; i++) hi[i] = f32_split_remainder(host[i0 + i], &rem[i]);
            act_bits_set(m, hi, i0, k, tmp);
            be->memcpy_h2d(rem_dev + i0, rem, k * sizeof(uint16_t));
        } else {
            act_bits_get(m, hi, i0, k, tmp);
            be->memcpy_d2h(rem, rem_dev + i0, k * sizeof(uint16_t));
            for (size_t i = 0; i < k; i++) host[i0 + i] = f32_join_remainder(hi[i], rem[i]);
        }
    }
    for (int r = 0; r < m->nsmall; r++) {
        const size_t bytes = (m->small_hi[r] - m->small_lo[r]) * sizeof(float);
        if (to_device) be->memcpy_h2d(m->small + m->small_at[r], host + m->small_lo[r], bytes);
        else be->memcpy_d2h(host + m->small_lo[r], m->small + m->small_at[r], bytes);
    }
    free(hi), free(rem), free(tmp);
}
void model_lp_set_params(Model *m, const float *host) { masters_move(m, (float *)host, 1, m->adam_rem); }
void model_lp_get_params(Model *m, float *host) { masters_move(m, host, 0, m->adam_rem); }
void model_lp_masters_to_host(Model *m, const uint16_t *rem_dev, float *host) {
    masters_move(m, host, 0, (uint16_t *)rem_dev);
}

// ---- moments

// One moment between host fp32 and its storage: fp32, or act dtype at bf16 precision (on fp32 backends
// bf16-valued floats). Host -> device rounds to nearest even; device -> host is exact.
static void moment_set(const Model *m, void *dst, int bf, const float *src) {
    const Backend *be = m->be;
    const size_t n = m->lay.total;
    if (!bf) { be->memcpy_h2d(dst, src, n * sizeof(float)); return; }
    void *buf = xmalloc(CONV_CHUNK * sizeof(float));
    for (size_t i0 = 0; i0 < n; i0 += CONV_CHUNK) {
        const size_t k = n - i0 < CONV_CHUNK ? n - i0 : CONV_CHUNK;
        if (be->act_bytes == 2) {
            uint16_t *h = buf;
            for (size_t i = 0; i < k; i++) h[i] = f32_to_bf16(src[i0 + i]);
            be->memcpy_h2d((uint16_t *)dst + i0, h, k * 2);
        } else {
            float *f = buf;
            for (size_t i = 0; i < k; i++) f[i] = bf16_to_f32(f32_to_bf16(src[i0 + i]));
            be->memcpy_h2d((float *)dst + i0, f, k * sizeof(float));
        }
    }
    free(buf);
}
size_t model_lp_moment_bytes(const Model *m, int bf) { return bf ? (size_t)m->be->act_bytes : sizeof(float); }
void model_lp_moment_to_host(const Model *m, float *host, int bf, const void *src_dev) {
    moment_get(m, host, bf, src_dev);
}
static void moment_get(const Model *m, float *dst, int bf, const void *src) {
    const Backend *be = m->be;
    const size_t n = m->lay.total;
    if (!bf || be->act_bytes == 4) { be->memcpy_d2h(dst, src, n * sizeof(float)); return; }
    uint16_t *h = xmalloc(CONV_CHUNK * sizeof(uint16_t));
    for (size_t i0 = 0; i0 < n; i0 += CONV_CHUNK) {
        const size_t k = n - i0 < CONV_CHUNK ? n - i0 : CONV_CHUNK;
        be->memcpy_d2h(h, (const uint16_t *)src + i0, k * 2);
        for (size_t i = 0; i < k; i++) dst[i0 + i] = bf16_to_f32(h[i]);
    }
    free(h);
}

void model_lp_set_optim(Model *m, const float *hm, const float *hv) {
    moment_set(m, m->adam_m, m->adam_lp & ADAMW_M_BF16, hm);
    moment_set(m, m->adam_v, m->adam_lp & ADAMW_V_BF16, hv);
}
void model_lp_get_optim(Model *m, float *hm, float *hv) {
    moment_get(m, hm, m->adam_lp & ADAMW_M_BF16, m->adam_m);
    moment_get(m, hv, m->adam_lp & ADAMW_V_BF16, m->adam_v);
}

// ---- the update

// model_adamw's chunk table with remainders (not uploaded): each tensor its own run; the fp32-read tensors' masters
// are in small (p at their small offset), every other tensor's in wact + adam_rem.
void model_lp_plan(Model *m) {
    for (int i = 0; i < m->lay.ntensors; i++) {
        const TensorInfo *t = &m->lay.tensors[i];
        if (!t->numel) continue;
        const int whole = model_tensor_fp32_read(t);
        const size_t poff = whole ? (size_t)(model_small_param(m, t->off) - m->small) : 0;
        const int first = m->adam_plan.n;
        adamw_plan_add(&m->adam_plan, t->off, t->off, poff, t->numel, t->decay);
        for (int c = first; c < m->adam_plan.n; c++) m->adam_plan.host[c].rem = (uint16_t)!whole;
    }
}
