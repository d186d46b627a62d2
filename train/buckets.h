// buckets.h: gradient reduction in fixed buckets (ddp_bucket_size), optionally started during the backward
// as each bucket's gradients become final (overlap_grad_reduce; spec train.md §6.1-§6.2). The buckets
// follow the backward: the final norm and the blocks from the last to the first, a bucket closed once it
// holds >= ddp_bucket_size elements; the tied embedding/lm-head gradient (final only after the last op of
// the backward) is a bucket of its own, reduced last. Every bucket is one all-reduce, issued in the same
// order on every rank, so overlap on or off gives the same bits, and a run is reproducible per world size.
// Device backends overlap on their communication stream; host memory on a communication thread.
#pragma once
#include <pthread.h>
#include <stddef.h>

#include "../model/gdn.h"
#include "dist.h"

typedef struct {
    size_t lo, hi, got; // the bucket's range of the flat gradients; elements final so far
    int issued;
} Bucket;

typedef struct {
    Dist *d;
    Model *m;
    Bucket *b;
    int n, overlap;
    // host memory: the communication thread and its queue (bucket indices, in issue order)
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int *queue, queued, done, stop, has_thread;
} Buckets;

// bucket_size: elements per bucket (0 with overlap: Megatron's max(40M, 1M x world)).
void buckets_init(Buckets *bk, Model *m, Dist *d, long bucket_size, int overlap);
// Before the last micro-batch's backward: listen to the model's grad_ready (overlap only).
void buckets_arm(Buckets *bk);
// After the backward: issues what is left, in order, and waits for every bucket.
void buckets_finish(Buckets *bk);
void buckets_free(Buckets *bk);
