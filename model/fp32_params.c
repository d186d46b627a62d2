// fp32_params.c: the model without its whole fp32 master (ZeRO-1 on a bf16 backend: train/zero.c keeps the
// masters sharded with the AdamW moments). The forward reads GEMM weights from the act copy (wact); the
// tensors it reads in fp32 (every tensor that is not a 2-D GEMM weight: norms, conv, A_log, dt_bias,
// biases) stay whole in `small`, runs of adjacent ones back to back, found by PF through this table.
#include <stdlib.h>

#include "../util/common.h"
#include "layer.h"

#include "optim_lp.h"

int model_tensor_fp32_read(const TensorInfo *t) { return t->ndim != 2 && t->numel > 0; }

void model_drop_masters(Model *m) {
    const Backend *be = m->be;
    if (m->wact == (void *)m->params) die("model_drop_masters: an fp32 backend's forward reads the masters themselves");
    if (!m->params) return;
    m->nsmall = 0;
    m->small_lo = xmalloc((size_t)m->lay.ntensors * sizeof(size_t));
    m->small_hi = xmalloc((size_t)m->lay.ntensors * sizeof(size_t));
    m->small_at = xmalloc((size_t)m->lay.ntensors * sizeof(size_t));
    size_t S = 0;
    for (int i = 0; i < m->lay.ntensors; i++) {
        const TensorInfo *t = &m->lay.tensors[i];
        if (!model_tensor_fp32_read(t)) continue;
        if (m->nsmall && m->small_hi[m->nsmall - 1] == t->off) m->small_hi[m->nsmall - 1] += t->numel; // adjacent: one run
        else m->small_lo[m->nsmall] = t->off, m->small_hi[m->nsmall] = t->off + t->numel, m->small_at[m->nsmall++] = S;
        S += t->numel;
    }
    m->nsmall_elems = S;
    m->small = be->alloc((S ? S : 1) * sizeof(float));
    for (int k = 0; k < m->nsmall; k++)
        be->memcpy_d2d(m->small + m->small_at[k], m->params + m->small_lo[k], (m->small_hi[k] - m->small_lo[k]) * sizeof(float));
    be->free(m->params);
    m->params = NULL;
}

float *model_small_param(const Model *m, size_t off) {
    int lo = 0, hi = m->nsmall - 1; // runs in flat order: the last one starting at or before off
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (m->small_lo[mid] <= off) lo = mid;
        else hi = mid - 1;
    }
    if (m->nsmall == 0 || off < m->small_lo[lo] || off >= m->small_hi[lo])
        die("model: fp32 parameter at offset %zu is not kept without the masters (not a norm/conv/gate/bias tensor)", off);
    return m->small + m->small_at[lo] + (off - m->small_lo[lo]);
}

void model_free_small(Model *m) {
    if (!m->small) return;
    m->be->free(m->small);
    free(m->small_lo);
    free(m->small_hi);
    free(m->small_at);
    m->small = NULL;
}
