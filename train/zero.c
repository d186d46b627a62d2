// zero.c: ZeRO-1 over the buckets of the flat parameter vector (see zero.h).
#include "zero.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

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
    if (m->adam_pa) die("use_precision_aware_optimizer with use_distributed_optimizer across %d ranks: not supported yet "
                        "(ZeRO-1 keeps fp32 state shards); drop one of the two", d->world);
    z->m = be->alloc((z->n ? z->n : 1) * sizeof(float));
    z->v = be->alloc((z->n ? z->n : 1) * sizeof(float));
    for (int i = 0; i < z->npieces; i++) {
        be->memcpy_d2d(z->m + z->at[i], (float *)m->adam_m + z->lo[i], (z->hi[i] - z->lo[i]) * sizeof(float));
        be->memcpy_d2d(z->v + z->at[i], (float *)m->adam_v + z->lo[i], (z->hi[i] - z->lo[i]) * sizeof(float));
    }
    be->free(m->adam_m);
    be->free(m->adam_v);
    m->adam_m = m->adam_v = NULL; // the model's own optimizer calls are not used under ZeRO-1
    // bf16 backends: the fp32 masters sharded too (the forward reads the act copy and a few fp32 tensors);
    // fp32 backends: the masters are what the forward reads, whole on every rank
    z->master = NULL;
    if (m->wact != (void *)m->params) {
        z->master = be->alloc((z->n ? z->n : 1) * sizeof(float));
        for (int i = 0; i < z->npieces; i++)
            be->memcpy_d2d(z->master + z->at[i], m->params + z->lo[i], (z->hi[i] - z->lo[i]) * sizeof(float));
        model_drop_masters(m);
    }
    if (d->rank == 0) { // what sharding saves: the whole state would be masters (bf16 backends) + moments of all P
        size_t P = m->lay.total, per = z->master ? 12 : 8;
        printf("gdn train: ZeRO-1 optimizer state on rank 0: %.2f MiB (%s AdamW moments of %zu of %zu parameters; "
               "unsharded %.2f MiB)\n", (double)z->n * per / 1048576.0, z->master ? "fp32 masters and" : "the",
               z->n, P, (double)P * per / 1048576.0);
        fflush(stdout);
    }
}

// Sharded masters: the kept fp32 tensors (model->small) from their owners' updated masters. Every element
// has one owner, the others add zeros: the sum is the owner's value, exact.
static void refresh_small(Zero *z, Model *m, Dist *d) {
    const Backend *be = m->be;
    be->memset0(m->small, m->nsmall_elems * sizeof(float));
    for (int k = 0; k < m->nsmall; k++)
        for (int i = 0; i < z->npieces; i++) {
            size_t a = m->small_lo[k] > z->lo[i] ? m->small_lo[k] : z->lo[i];
            size_t b = m->small_hi[k] < z->hi[i] ? m->small_hi[k] : z->hi[i];
            if (a < b)
                be->memcpy_d2d(m->small + m->small_at[k] + (a - m->small_lo[k]), z->master + z->at[i] + (a - z->lo[i]),
                               (b - a) * sizeof(float));
        }
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
            adamw_plan_add(&z->plan, a, s, bf ? s : a, b - a, t->decay);
        }
    adamw_plan_upload(&z->plan, m->be);
}

void zero_step(Zero *z, Model *m, Dist *d, float lr, int step, float gscale) {
    const Config *c = &m->cfg;
    int bf = z->master != NULL;
    if (!z->plan.dev) build_plan(z, m);
    model_set_grad_scale(m, gscale); // the norm was reduced across ranks on the host
    // bf16: the owner rounds its shard into the act copy (laid out as the gradients)
    m->be->adamw_multi(z->plan.dev, z->plan.n, bf ? z->master : m->params, bf ? m->wact : NULL, m->grads, z->m, z->v,
                       lr, c->adam_beta1, c->adam_beta2, c->adam_eps, c->weight_decay, step,
                       m->scalars + MODEL_SLOT_GSCALE);
    if (bf) refresh_small(z, m, d);
    buckets_gather(z->bk); // sharded masters: the act copy's shards, as rounded by their owners
}

void zero_get_params(Zero *z, Model *m, Dist *d, float *host) {
    if (!z->master) {
        model_get_params(m, host);
        return;
    }
    const Backend *be = m->be;
    for (int i = 0; i < z->npieces; i++)
        be->memcpy_d2d(m->grads + z->lo[i], z->master + z->at[i], (z->hi[i] - z->lo[i]) * sizeof(float));
    for (int i = 0; i < z->bk->n; i++) dist_allgather(d, m->grads, z->bk->b[i].offs);
    be->memcpy_d2h(host, m->grads, m->lay.total * sizeof(float));
    be->memset0(m->grads, m->lay.total * sizeof(float)); // scratch no more
}

void zero_get_optim(Zero *z, Model *m, Dist *d, float *hm, float *hv) {
    const Backend *be = m->be;
    float *part[2] = {z->m, z->v}, *out[2] = {hm, hv};
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < z->npieces; i++)
            be->memcpy_d2d(m->grads + z->lo[i], part[k] + z->at[i], (z->hi[i] - z->lo[i]) * sizeof(float));
        for (int i = 0; i < z->bk->n; i++) dist_allgather(d, m->grads, z->bk->b[i].offs);
        be->memcpy_d2h(out[k], m->grads, m->lay.total * sizeof(float));
    }
    be->memset0(m->grads, m->lay.total * sizeof(float)); // scratch no more
}

void zero_free(Zero *z, Model *m) {
    adamw_plan_free(&z->plan, m->be);
    if (z->master) m->be->free(z->master);
    m->be->free(z->m);
    m->be->free(z->v);
    free(z->lo);
    free(z->hi);
    free(z->at);
}
