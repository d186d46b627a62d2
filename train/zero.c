// zero.c: ZeRO-1 over the buckets of the flat parameter vector (see zero.h).
#include "zero.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "../model/optim_lp.h"
#include "../util/common.h"

void zero_init(Zero *z, Model *m, Buckets *bk, const Dist *d) {
    const Backend *be = m->be;
    size_t W = (size_t)d->world, R = (size_t)d->rank;
    z->bk = bk;
    z->plan = (AdamwPlan){0};
    z->npieces = bk->n;
    z->lo = xmalloc((size_t)bk->n * sizeof(size_t));
    z->hi = xmalloc((size_t)bk->n * sizeof(size_t));
    z->at = xmalloc((size_t)bk->n * sizeof(size_t));
    z->n = 0;
    for (int i = 0; i < bk->n; i++) {
        Bucket *b = &bk->b[i];
        size_t n = b->hi - b->lo;
        b->offs = xmalloc((W + 1) * sizeof(size_t)); // freed by buckets_free
        for (size_t r = 0; r <= W; r++) b->offs[r] = r == W ? b->hi : b->lo + n * r / W / 64 * 64; // aligned for SIMD
        z->lo[i] = b->offs[R], z->hi[i] = b->offs[R + 1], z->at[i] = z->n;
        z->n += z->hi[i] - z->lo[i];
    }
    // the moments' shards in the model's storage (fp32, or act dtype at bf16 precision)
    z->esz_m = model_lp_moment_bytes(m, m->adam_lp & ADAMW_M_BF16);
    z->esz_v = model_lp_moment_bytes(m, m->adam_lp & ADAMW_V_BF16);
    z->m = be->alloc((z->n ? z->n : 1) * z->esz_m);
    z->v = be->alloc((z->n ? z->n : 1) * z->esz_v);
    for (int i = 0; i < z->npieces; i++) {
        be->memcpy_d2d((char *)z->m + z->at[i] * z->esz_m, (char *)m->adam_m + z->lo[i] * z->esz_m,
                       (z->hi[i] - z->lo[i]) * z->esz_m);
        be->memcpy_d2d((char *)z->v + z->at[i] * z->esz_v, (char *)m->adam_v + z->lo[i] * z->esz_v,
                       (z->hi[i] - z->lo[i]) * z->esz_v);
    }
    be->free(m->adam_m);
    be->free(m->adam_v);
    m->adam_m = m->adam_v = NULL; // the model's own optimizer calls are not used under ZeRO-1
    // bf16 backends: the fp32 masters sharded too (the forward reads the act copy and a few fp32 tensors), or their
    // remainders (the model dropped its masters already); fp32 backends: the masters are what the forward reads,
    // whole on every rank
    z->master = NULL, z->rem = NULL, z->small_tmp = NULL;
    if (m->adam_rem) {
        z->rem = be->alloc((z->n ? z->n : 1) * sizeof(uint16_t));
        for (int i = 0; i < z->npieces; i++)
            be->memcpy_d2d(z->rem + z->at[i], m->adam_rem + z->lo[i], (z->hi[i] - z->lo[i]) * sizeof(uint16_t));
        be->free(m->adam_rem);
        m->adam_rem = NULL; // the model's masters are sharded now: model_get_params refuses, zero_get_params serves
        z->small_tmp = be->alloc((m->nsmall_elems ? m->nsmall_elems : 1) * sizeof(float));
    } else if (m->wact != (void *)m->params) {
        z->master = be->alloc((z->n ? z->n : 1) * sizeof(float));
        for (int i = 0; i < z->npieces; i++)
            be->memcpy_d2d(z->master + z->at[i], m->params + z->lo[i], (z->hi[i] - z->lo[i]) * sizeof(float));
        model_drop_masters(m);
    }
    if (d->rank == 0) { // what sharding saves: the whole state would be masters (bf16 backends) + moments of all P
        size_t P = m->lay.total, per = (z->master ? 4 : z->rem ? 2 : 0) + z->esz_m + z->esz_v;
        printf("gdn train: ZeRO-1 optimizer state on rank 0: %.2f MiB (%s AdamW moments of %zu of %zu parameters; "
               "unsharded %.2f MiB)\n", (double)z->n * per / 1048576.0,
               z->master ? "fp32 masters and" : z->rem ? "master remainders and" : "the", z->n, P,
               (double)P * per / 1048576.0);
        fflush(stdout);
    }
}

// Sharded masters: the kept fp32 tensors (model->small) from their owners' updated masters (z->master, or with
// remainders small itself, where each owner updated its own elements). Every element has one owner, the others
// add zeros: the sum is the owner's value, exact.
static void refresh_small(Zero *z, Model *m, Dist *d) {
    const Backend *be = m->be;
    float *dst = z->rem ? z->small_tmp : m->small;
    be->memset0(dst, m->nsmall_elems * sizeof(float));
    for (int k = 0; k < m->nsmall; k++)
        for (int i = 0; i < z->npieces; i++) {
            size_t a = m->small_lo[k] > z->lo[i] ? m->small_lo[k] : z->lo[i];
            size_t b = m->small_hi[k] < z->hi[i] ? m->small_hi[k] : z->hi[i];
            if (a >= b) continue;
            const size_t at = m->small_at[k] + (a - m->small_lo[k]);
            be->memcpy_d2d(dst + at, z->rem ? m->small + at : z->master + z->at[i] + (a - z->lo[i]),
                           (b - a) * sizeof(float));
        }
    if (z->rem) be->memcpy_d2d(m->small, dst, m->nsmall_elems * sizeof(float));
    dist_allreduce_sum(d, m->small, m->nsmall_elems);
}

double zero_grad_norm(Zero *z, Model *m, Dist *d) {
    double ss = 0;
    for (int i = 0; i < z->npieces; i++) {
        if (z->hi[i] <= z->lo[i]) continue;
        float h;
        m->be->sumsq(m->scalars + MODEL_SLOT_SUMSQ, m->grads + z->lo[i], z->hi[i] - z->lo[i]);
        m->be->memcpy_d2h(&h, m->scalars + MODEL_SLOT_SUMSQ, sizeof h);
        ss += h;
    }
    dist_allreduce_host(d, &ss, 1);
    return sqrt(ss);
}

// The tensor holding flat offset x (tensors are laid out back to back in flat order)
static const TensorInfo *tensor_at(const Model *m, size_t x) {
    int lo = 0, hi = m->lay.ntensors - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (m->lay.tensors[mid].off <= x) lo = mid;
        else hi = mid - 1;
    }
    while (lo > 0 && m->lay.tensors[lo].off + m->lay.tensors[lo].numel <= x) lo--; // empty tensors at x
    return &m->lay.tensors[lo];
}

// The chunk table of this rank's AdamW (once: the shards and the layout are fixed): runs of adjacent tensors with
// the same weight decay (as model_adamw), cut to each piece; p is indexed as the masters are kept (sharded on bf16
// backends: at the state offset; whole on fp32 ones: at the flat offset).
static void build_plan(Zero *z, Model *m) {
    int bf = z->master != NULL;
    for (int k = 0; k < z->npieces; k++)
        for (int i = 0; i < m->lay.ntensors;) {
            const TensorInfo *t = &m->lay.tensors[i];
            size_t a = t->off, b = t->off + t->numel;
            int j = i + 1;
            while (j < m->lay.ntensors && m->lay.tensors[j].decay == t->decay && m->lay.tensors[j].off == b)
                b += m->lay.tensors[j++].numel;
            i = j;
            if (a < z->lo[k]) a = z->lo[k];
            if (b > z->hi[k]) b = z->hi[k];
            if (a >= b) continue;
            size_t s = z->at[k] + (a - z->lo[k]);
            if (!z->rem) {
                adamw_plan_add(&z->plan, a, s, bf ? s : a, b - a, t->decay);
                continue;
            }
            // remainders: the fp32-read tensors' masters are small's (runs of whole tensors, split at the tensor
            // boundaries that the same-decay runs merged), every other's the act copy + rem at the state offset
            for (size_t x = a; x < b;) {
                const TensorInfo *u = tensor_at(m, x);
                const size_t y = u->off + u->numel < b ? u->off + u->numel : b;
                const int whole = model_tensor_fp32_read(u);
                const int c0 = z->plan.n;
                adamw_plan_add(&z->plan, x, s + (x - a), whole ? (size_t)(model_small_param(m, x) - m->small) : 0,
                               y - x, t->decay);
                for (int c = c0; c < z->plan.n; c++) z->plan.host[c].rem = (uint16_t)!whole;
                x = y;
            }
        }
    adamw_plan_upload(&z->plan, m->be);
}

void zero_step(Zero *z, Model *m, Dist *d, float lr, int step, float gscale) {
    const Config *c = &m->cfg;
    int bf = z->master != NULL || z->rem != NULL;
    if (!z->plan.dev) build_plan(z, m);
    model_set_grad_scale(m, gscale); // the norm was reduced across ranks on the host
    // bf16: the owner rounds its shard into the act copy (laid out as the gradients)
    float *p = z->rem ? m->small : z->master ? z->master : m->params;
    if (m->adam_pa)
        m->be->adamw_multi_lp(z->plan.dev, z->plan.n, p, z->rem, bf ? m->wact : NULL, m->grads, z->m, z->v, m->adam_lp,
                              lr, c->adam_beta1, c->adam_beta2, c->adam_eps, c->weight_decay, step,
                              m->scalars + MODEL_SLOT_GSCALE);
    else
        m->be->adamw_multi(z->plan.dev, z->plan.n, p, bf ? m->wact : NULL, m->grads, z->m, z->v, lr, c->adam_beta1,
                           c->adam_beta2, c->adam_eps, c->weight_decay, step, m->scalars + MODEL_SLOT_GSCALE);
    if (bf) refresh_small(z, m, d);
    buckets_gather(z->bk); // sharded masters: the act copy's shards, as rounded by their owners
}

void zero_get_params(Zero *z, Model *m, Dist *d, float *host) {
    const Backend *be = m->be;
    if (z->rem) { // the remainders' shards gathered in the gradient buffer's first bytes, then joined on the host
        uint16_t *all = (uint16_t *)m->grads;
        for (int i = 0; i < z->npieces; i++)
            be->memcpy_d2d(all + z->lo[i], z->rem + z->at[i], (z->hi[i] - z->lo[i]) * sizeof(uint16_t));
        for (int i = 0; i < z->bk->n; i++) dist_allgather_bytes(d, all, z->bk->b[i].offs, sizeof(uint16_t));
        model_lp_masters_to_host(m, all, host);
        be->memset0(m->grads, m->lay.total * sizeof(float)); // scratch no more
        return;
    }
    if (!z->master) {
        model_get_params(m, host);
        return;
    }
    for (int i = 0; i < z->npieces; i++)
        be->memcpy_d2d(m->grads + z->lo[i], z->master + z->at[i], (z->hi[i] - z->lo[i]) * sizeof(float));
    for (int i = 0; i < z->bk->n; i++) dist_allgather(d, m->grads, z->bk->b[i].offs);
    be->memcpy_d2h(host, m->grads, m->lay.total * sizeof(float));
    be->memset0(m->grads, m->lay.total * sizeof(float)); // scratch no more
}

void zero_get_optim(Zero *z, Model *m, Dist *d, float *hm, float *hv) {
    const Backend *be = m->be;
    void *part[2] = {z->m, z->v};
    float *out[2] = {hm, hv};
    const size_t esz[2] = {z->esz_m, z->esz_v};
    const int bf[2] = {m->adam_lp & ADAMW_M_BF16, m->adam_lp & ADAMW_V_BF16};
    for (int k = 0; k < 2; k++) { // gathered in the gradient buffer in their storage, widened on the host
        char *all = (char *)m->grads;
        for (int i = 0; i < z->npieces; i++)
            be->memcpy_d2d(all + z->lo[i] * esz[k], (char *)part[k] + z->at[i] * esz[k], (z->hi[i] - z->lo[i]) * esz[k]);
        for (int i = 0; i < z->bk->n; i++) // (2-byte moments exist on bf16 backends only: NCCL)
            if (esz[k] == sizeof(float)) dist_allgather(d, (float *)all, z->bk->b[i].offs);
            else dist_allgather_bytes(d, all, z->bk->b[i].offs, esz[k]);
        model_lp_moment_to_host(m, out[k], bf[k], all);
    }
    be->memset0(m->grads, m->lay.total * sizeof(float)); // scratch no more
}

void zero_free(Zero *z, Model *m) {
    adamw_plan_free(&z->plan, m->be);
    if (z->master) m->be->free(z->master);
    if (z->rem) m->be->free(z->rem);
    if (z->small_tmp) m->be->free(z->small_tmp);
    m->be->free(z->m);
    m->be->free(z->v);
    free(z->lo);
    free(z->hi);
    free(z->at);
}
