// buckets.c: bucketed, optionally overlapped gradient all-reduce (see buckets.h).
#include "buckets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/common.h"

static void *comm_thread(void *arg) {
    Buckets *bk = arg;
    pthread_mutex_lock(&bk->mu);
    for (;;) {
        while (bk->done == bk->queued && !bk->stop) pthread_cond_wait(&bk->cv, &bk->mu);
        if (bk->done == bk->queued && bk->stop) break;
        Bucket *b = &bk->b[bk->queue[bk->done]];
        pthread_mutex_unlock(&bk->mu);
        dist_allreduce_sum(bk->d, bk->m->grads + b->lo, b->hi - b->lo); // only this thread talks meanwhile
        pthread_mutex_lock(&bk->mu);
        bk->done++;
        pthread_cond_broadcast(&bk->cv);
    }
    pthread_mutex_unlock(&bk->mu);
    return NULL;
}

static void issue(Buckets *bk, int i) {
    Bucket *b = &bk->b[i];
    b->issued = 1;
    const Backend *be = bk->d->be;
    if (bk->d->nccl && bk->overlap) be->comm_allreduce_sum_async(bk->m->grads + b->lo, b->hi - b->lo);
    else if (bk->has_thread) {
        pthread_mutex_lock(&bk->mu);
        bk->queue[bk->queued++] = i;
        pthread_cond_broadcast(&bk->cv);
        pthread_mutex_unlock(&bk->mu);
    } else dist_allreduce_sum(bk->d, bk->m->grads + b->lo, b->hi - b->lo);
}

// The model's backward hook: gradients [off, off+n) are final (ranges arrive in backward order).
static void on_ready(Model *m, size_t off, size_t n) {
    Buckets *bk = m->grad_ready_ctx;
    for (int i = 0; i < bk->n; i++) {
        Bucket *b = &bk->b[i];
        if (off < b->lo || off >= b->hi) continue;
        if (off + n > b->hi) die("buckets: gradient range [%zu, %zu) crosses bucket %d [%zu, %zu)", off, off + n, i, b->lo, b->hi);
        b->got += n;
        // in order: a bucket waits for the ones before it (the same issue order on every rank)
        for (int j = 0; j < bk->n && bk->b[j].got == bk->b[j].hi - bk->b[j].lo; j++)
            if (!bk->b[j].issued) issue(bk, j);
        return;
    }
    die("buckets: gradient range [%zu, %zu) is in no bucket", off, off + n);
}

void buckets_init(Buckets *bk, Model *m, Dist *d, long bucket_size, int overlap) {
    memset(bk, 0, sizeof *bk);
    bk->d = d, bk->m = m, bk->overlap = overlap;
    size_t P = m->lay.total, E = (size_t)m->d.V * m->d.h, cap = overlap && bucket_size <= 0 ? 0 : (size_t)bucket_size;
    if (!cap) cap = (size_t)(d->world * 1000000L > 40000000L ? d->world * 1000000L : 40000000L);
    if (m->lay.embeddings != 0 || m->lay.norm + (size_t)m->d.h != P)
        die("buckets: expected the embedding first and the final norm last in the parameter layout");
    // backward order: the final norm and block L-1, ..., block 0 (contiguous, ending at P); each bucket a run
    // of whole blocks, so every grad_ready range falls inside one
    bk->b = xmalloc(((size_t)m->d.L + 1) * sizeof(Bucket));
    size_t hi = P;
    for (int l = m->d.L - 1; l >= 0; l--) {
        size_t lo = hi;
        for (int i = 0; i < m->lay.ntensors; i++)
            if (m->lay.tensors[i].layer == l) { lo = m->lay.tensors[i].off; break; } // block l's first tensor
        if (hi - lo >= cap || l == 0) {
            bk->b[bk->n++] = (Bucket){lo, hi, 0, 0};
            hi = lo;
        }
    }
    if (hi != E) die("buckets: the blocks' ranges do not meet the embedding (%zu vs %zu)", hi, E);
    bk->b[bk->n++] = (Bucket){0, E, 0, 0}; // the tied embedding: its own, last
    bk->queue = xmalloc((size_t)bk->n * sizeof(int));
    if (overlap && !d->nccl && d->world > 1) {
        pthread_mutex_init(&bk->mu, NULL);
        pthread_cond_init(&bk->cv, NULL);
        if (pthread_create(&bk->thread, NULL, comm_thread, bk)) die("buckets: cannot start the communication thread");
        bk->has_thread = 1;
    }
    if (d->rank == 0) {
        printf("gdn train: gradients reduced in %d buckets (%s), the embedding's (%zu elements) last\n", bk->n,
               overlap ? "overlapped with the backward" : "after the backward", E);
        fflush(stdout);
    }
}

void buckets_arm(Buckets *bk) {
    for (int i = 0; i < bk->n; i++) bk->b[i].got = 0, bk->b[i].issued = 0;
    if (!bk->overlap || bk->d->world <= 1) return;
    pthread_mutex_lock(&bk->mu);
    bk->queued = bk->done = 0;
    pthread_mutex_unlock(&bk->mu);
    bk->m->grad_ready = on_ready;
    bk->m->grad_ready_ctx = bk;
}

void buckets_finish(Buckets *bk) {
    bk->m->grad_ready = NULL;
    if (bk->d->world <= 1) return;
    for (int i = 0; i < bk->n; i++)
        if (!bk->b[i].issued) issue(bk, i);
    if (bk->d->nccl && bk->overlap) bk->d->be->comm_wait();
    if (bk->has_thread) {
        pthread_mutex_lock(&bk->mu);
        while (bk->done < bk->queued) pthread_cond_wait(&bk->cv, &bk->mu);
        pthread_mutex_unlock(&bk->mu);
    }
}

void buckets_free(Buckets *bk) {
    if (bk->has_thread) {
        pthread_mutex_lock(&bk->mu);
        bk->stop = 1;
        pthread_cond_broadcast(&bk->cv);
        pthread_mutex_unlock(&bk->mu);
        pthread_join(bk->thread, NULL);
    }
    free(bk->b);
    free(bk->queue);
}
