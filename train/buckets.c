// buckets.c: bucketed, optionally overlapped gradient reduction and ZeRO-1 parameter all-gather (see buckets.h).
#include "buckets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/common.h"

enum { JOB_REDUCE, JOB_GATHER };

// One bucket's collective, on whichever thread runs it (only one thread talks to the other ranks at a time).
static void run_job(Buckets *bk, int i, int kind) {
    Bucket *b = &bk->b[i];
    if (kind == JOB_GATHER && bk->m->params) dist_allgather(bk->d, bk->m->params, b->offs);
    else if (kind == JOB_GATHER) dist_allgather_bytes(bk->d, bk->m->wact, b->offs, (size_t)bk->m->be->act_bytes); // masters sharded
    else if (b->offs) dist_reduce_scatter_sum(bk->d, bk->m->grads, b->offs);
    else dist_allreduce_sum(bk->d, bk->m->grads + b->lo, b->hi - b->lo);
}

static void *comm_thread(void *arg) {
    Buckets *bk = arg;
    pthread_mutex_lock(&bk->mu);
    for (;;) {
        while (bk->done == bk->queued && !bk->stop) pthread_cond_wait(&bk->cv, &bk->mu);
        if (bk->done == bk->queued && bk->stop) break;
        int job = bk->queue[bk->done % (2 * bk->n)];
        pthread_mutex_unlock(&bk->mu);
        run_job(bk, job / 2, job % 2); // only this thread talks meanwhile
        pthread_mutex_lock(&bk->mu);
        bk->done++;
        pthread_cond_broadcast(&bk->cv);
    }
    pthread_mutex_unlock(&bk->mu);
    return NULL;
}

// Queued on the thread (returns its job number), or -1 when run here and now.
static long submit(Buckets *bk, int i, int kind) {
    if (!bk->has_thread) {
        run_job(bk, i, kind);
        return -1;
    }
    pthread_mutex_lock(&bk->mu);
    if (bk->queued - bk->done >= 2 * bk->n) die("buckets: more than %d collectives queued", 2 * bk->n);
    long job = bk->queued++;
    bk->queue[job % (2 * bk->n)] = i * 2 + kind;
    pthread_cond_broadcast(&bk->cv);
    pthread_mutex_unlock(&bk->mu);
    return job;
}

static void wait_job(Buckets *bk, long job) {
    pthread_mutex_lock(&bk->mu);
    while (bk->done <= job) pthread_cond_wait(&bk->cv, &bk->mu);
    pthread_mutex_unlock(&bk->mu);
}

static void issue(Buckets *bk, int i) {
    Bucket *b = &bk->b[i];
    b->issued = 1;
    const Backend *be = bk->d->be;
    if (bk->d->nccl && bk->overlap) {
        if (b->offs) be->comm_reduce_scatter_sum_async(bk->m->grads, b->offs);
        else be->comm_allreduce_sum_async(bk->m->grads + b->lo, b->hi - b->lo);
    } else submit(bk, i, JOB_REDUCE);
}

static int bucket_of(const Buckets *bk, size_t off) {
    for (int i = 0; i < bk->n; i++)
        if (off >= bk->b[i].lo && off < bk->b[i].hi) return i;
    return -1;
}

// The model's backward hook: gradients [off, off+n) are final (ranges arrive in backward order).
static void on_ready(Model *m, size_t off, size_t n) {
    Buckets *bk = m->grad_ready_ctx;
    int i = bucket_of(bk, off);
    if (i < 0) die("buckets: gradient range [%zu, %zu) is in no bucket", off, off + n);
    Bucket *b = &bk->b[i];
    if (off + n > b->hi) die("buckets: gradient range [%zu, %zu) crosses bucket %d [%zu, %zu)", off, off + n, i, b->lo, b->hi);
    b->got += n;
    // in order: a bucket waits for the ones before it (the same issue order on every rank)
    for (int j = 0; j < bk->n && bk->b[j].got == bk->b[j].hi - bk->b[j].lo; j++)
        if (!bk->b[j].issued) issue(bk, j);
}

// The model's forward hook (overlap_param_gather): parameters [off, off+n) are about to be read.
static void on_params_needed(Model *m, size_t off, size_t n) {
    Buckets *bk = m->params_needed_ctx;
    int i = bucket_of(bk, off);
    if (i < 0 || off + n > bk->b[i].hi) die("buckets: parameter range [%zu, %zu) is not inside one bucket", off, off + n);
    Bucket *b = &bk->b[i];
    if (b->gather_job < 0) return;
    double t0 = now_sec();
    wait_job(bk, b->gather_job);
    bk->wait_s += now_sec() - t0;
    b->gather_job = -1;
    if (--bk->gathers_pending == 0) m->params_needed = NULL; // the step's weights are all here
}

void buckets_init(Buckets *bk, Model *m, Dist *d, long bucket_size, int overlap, int overlap_param) {
    memset(bk, 0, sizeof *bk);
    bk->d = d, bk->m = m, bk->overlap = overlap, bk->overlap_param = overlap_param;
    size_t P = m->lay.total, E = (size_t)m->d.V * m->d.h, cap = overlap && bucket_size <= 0 ? 0 : (size_t)bucket_size;
    if (!cap && overlap) cap = (size_t)(d->world * 1000000L > 40000000L ? d->world * 1000000L : 40000000L);
    bk->b = xmalloc(((size_t)m->d.L + 1) * sizeof(Bucket));
    if (!cap) { // ZeRO-1 without buckets: one of everything (its shards: contiguous runs of the flat vector)
        bk->b[bk->n++] = (Bucket){0, P, 0, 0, NULL, -1};
    } else {
        if (m->lay.embeddings != 0 || m->lay.norm + (size_t)m->d.h != P)
            die("buckets: expected the embedding first and the final norm last in the parameter layout");
        // backward order: the final norm and block L-1, ..., block 0 (contiguous, ending at P); each bucket a
        // run of whole blocks, so every grad_ready range falls inside one
        size_t hi = P;
        for (int l = m->d.L - 1; l >= 0; l--) {
            size_t lo = hi;
            for (int i = 0; i < m->lay.ntensors; i++)
                if (m->lay.tensors[i].layer == l) { lo = m->lay.tensors[i].off; break; } // block l's first tensor
            if (hi - lo >= cap || l == 0) {
                bk->b[bk->n++] = (Bucket){lo, hi, 0, 0, NULL, -1};
                hi = lo;
            }
        }
        if (hi != E) die("buckets: the blocks' ranges do not meet the embedding (%zu vs %zu)", hi, E);
        bk->b[bk->n++] = (Bucket){0, E, 0, 0, NULL, -1}; // the tied embedding: its own, last
    }
    bk->queue = xmalloc(2 * (size_t)bk->n * sizeof(int));
    if ((overlap || overlap_param) && !d->nccl && d->world > 1) {
        pthread_mutex_init(&bk->mu, NULL);
        pthread_cond_init(&bk->cv, NULL);
        if (pthread_create(&bk->thread, NULL, comm_thread, bk)) die("buckets: cannot start the communication thread");
        bk->has_thread = 1;
    }
}

void buckets_arm(Buckets *bk) {
    for (int i = 0; i < bk->n; i++) bk->b[i].got = 0, bk->b[i].issued = 0;
    if (!bk->overlap || bk->d->world <= 1) return;
    bk->m->grad_ready = on_ready;
    bk->m->grad_ready_ctx = bk;
}

void buckets_finish(Buckets *bk) {
    bk->m->grad_ready = NULL;
    if (bk->d->world <= 1) return;
    for (int i = 0; i < bk->n; i++)
        if (!bk->b[i].issued) issue(bk, i);
    if (bk->d->nccl && bk->overlap) bk->d->be->comm_wait();
    if (bk->has_thread) wait_job(bk, bk->queued - 1);
}

void buckets_gather(Buckets *bk) {
    if (bk->d->world <= 1) return;
    double t0 = now_sec();
    for (int i = bk->n - 1; i >= 0; i--) { // forward order: the embedding first, then block 0's bucket, ...
        Bucket *b = &bk->b[i];
        b->gather_job = bk->overlap_param ? submit(bk, i, JOB_GATHER) : (run_job(bk, i, JOB_GATHER), -1);
        bk->gathers_pending += b->gather_job >= 0;
    }
    if (!bk->overlap_param || !bk->has_thread) bk->wait_s += now_sec() - t0;
    if (bk->gathers_pending) {
        bk->m->params_needed = on_params_needed;
        bk->m->params_needed_ctx = bk;
    }
}

void buckets_gather_wait(Buckets *bk) {
    for (int i = 0; i < bk->n && bk->gathers_pending; i++)
        if (bk->b[i].gather_job >= 0) on_params_needed(bk->m, bk->b[i].lo, 0);
}

void buckets_free(Buckets *bk) {
    buckets_gather_wait(bk);
    if (bk->has_thread) {
        pthread_mutex_lock(&bk->mu);
        bk->stop = 1;
        pthread_cond_broadcast(&bk->cv);
        pthread_mutex_unlock(&bk->mu);
        pthread_join(bk->thread, NULL);
    }
    for (int i = 0; i < bk->n; i++) free(bk->b[i].offs);
    free(bk->b);
    free(bk->queue);
}

double buckets_take_wait_ms(Buckets *bk) {
    double ms = bk->wait_s * 1e3;
    bk->wait_s = 0;
    return ms;
}

void buckets_describe(const Buckets *bk) {
    if (bk->d->rank != 0) return;
    const Bucket *e = &bk->b[bk->n - 1];
    if (!bk->b[0].offs)
        printf("gdn train: gradients reduced in %d buckets (%s), the embedding's (%zu elements) last\n", bk->n,
               bk->overlap ? "overlapped with the backward" : "after the backward", e->hi - e->lo);
    else
        printf("gdn train: ZeRO-1 over %d bucket%s, each sharded across the ranks: gradients reduce-scattered %s, "
               "parameters all-gathered %s\n", bk->n, bk->n > 1 ? "s" : "",
               bk->overlap ? "during the backward" : "after the backward",
               bk->overlap_param ? "during the next forward" : "after the step");
    fflush(stdout);
}
