// zero.c: ZeRO-1 over the flat parameter vector (see zero.h).
#include "zero.h"

#include <math.h>
#include <stdlib.h>

#include "../util/common.h"

void zero_init(Zero *z, Model *m, const Dist *d) {
    const Backend *be = m->be;
    size_t P = m->lay.total, W = (size_t)d->world;
    z->offs = xmalloc((W + 1) * sizeof(size_t));
    for (size_t r = 0; r <= W; r++) z->offs[r] = r == W ? P : P * r / W / 64 * 64; // aligned starts for SIMD
    z->lo = z->offs[d->rank], z->hi = z->offs[d->rank + 1];
    size_t n = z->hi - z->lo;
    z->m = be->alloc((n ? n : 1) * sizeof(float));
    z->v = be->alloc((n ? n : 1) * sizeof(float));
    be->memcpy_d2d(z->m, m->adam_m + z->lo, n * sizeof(float));
    be->memcpy_d2d(z->v, m->adam_v + z->lo, n * sizeof(float));
    be->free(m->adam_m);
    be->free(m->adam_v);
    m->adam_m = m->adam_v = NULL; // the model's own optimizer calls are not used under ZeRO-1
}

double zero_reduce_grads(Zero *z, Model *m, Dist *d) {
    dist_reduce_scatter_sum(d, m->grads, z->offs);
    // each element counted once: the squares of every shard, added in rank order
    double ss = 0;
    if (z->hi > z->lo) {
        float h;
        m->be->sumsq(m->scalars + 32, m->grads + z->lo, z->hi - z->lo);
        m->be->memcpy_d2h(&h, m->scalars + 32, sizeof h);
        ss = h;
    }
    dist_allreduce_host(d, &ss, 1);
    return sqrt(ss);
}

void zero_step(Zero *z, Model *m, Dist *d, float lr, int step, float gscale) {
    const Config *c = &m->cfg;
    const Backend *be = m->be;
    int bf = m->wact != (void *)m->params;
    // runs of adjacent tensors with the same weight decay (as model_adamw), cut to this rank's shard
    for (int i = 0; i < m->lay.ntensors;) {
        const TensorInfo *t = &m->lay.tensors[i];
        size_t a = t->off, b = t->off + t->numel;
        int j = i + 1;
        while (j < m->lay.ntensors && m->lay.tensors[j].decay == t->decay && m->lay.tensors[j].off == b)
            b += m->lay.tensors[j++].numel;
        i = j;
        if (a < z->lo) a = z->lo;
        if (b > z->hi) b = z->hi;
        if (a >= b) continue;
        void *pa = bf ? (char *)m->wact + a * (size_t)be->act_bytes : NULL;
        be->adamw(m->params + a, pa, m->grads + a, z->m + (a - z->lo), z->v + (a - z->lo), b - a, lr, c->adam_beta1,
                  c->adam_beta2, c->adam_eps, t->decay ? c->weight_decay : 0.0f, step, gscale);
    }
    dist_allgather(d, m->params, z->offs);
    if (bf) be->to_act(m->wact, m->params, m->lay.total); // the gathered shards' compute copy (same rounding)
}

void zero_get_optim(Zero *z, Model *m, Dist *d, float *hm, float *hv) {
    const Backend *be = m->be;
    size_t P = m->lay.total, n = z->hi - z->lo;
    float *part[2] = {z->m, z->v}, *out[2] = {hm, hv};
    for (int k = 0; k < 2; k++) {
        be->memcpy_d2d(m->grads + z->lo, part[k], n * sizeof(float));
        dist_allgather(d, m->grads, z->offs);
        be->memcpy_d2h(out[k], m->grads, P * sizeof(float));
    }
    be->memset0(m->grads, P * sizeof(float)); // scratch no more
}

void zero_free(Zero *z, Model *m) {
    m->be->free(z->m);
    m->be->free(z->v);
    free(z->offs);
}
