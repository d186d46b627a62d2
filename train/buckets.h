// buckets.h: gradient reduction in fixed buckets (ddp_bucket_size), optionally started during the backward
// as each bucket's gradients become final (overlap_grad_reduce; spec train.md §6.1-§6.2). The buckets
// follow the backward: the final norm and the blocks from the last to the first, a bucket closed once it
// holds >= ddp_bucket_size elements; the tied embedding/lm-head gradient (final only after the last op of
// the backward) is a bucket of its own, reduced last. Every bucket is one collective, issued in the same
// order on every rank, so overlap on or off gives the same bits, and a run is reproducible per world size.
// ZeRO-1 (train/zero.c) shards every bucket across the ranks as Megatron's distributed optimizer does
// (spec §6): a bucket is then reduce-scattered (its offs), and after the optimizer step its updated shards
// are all-gathered, in forward order (the embedding's first), overlapped with the next forward where
// overlap_param_gather asks (the forward waits for a bucket before the first layer that reads it).
// Device backends overlap on their communication stream; host memory on a communication thread.
#pragma once
#include <pthread.h>
#include <stddef.h>

#include "../model/gdn.h"
#include "dist.h"

typedef struct {
    size_t lo, hi, got; // the bucket's range of the flat gradients; elements final so far
    int issued;
    size_t *offs;       // ZeRO-1: [world+1] its shards (rank r owns [offs[r], offs[r+1])); NULL: all-reduced
    long gather_job;    // its pending parameter all-gather's job number on the thread (-1: none pending)
} Bucket;

typedef struct {
    Dist *d;
    Model *m;
    Bucket *b;
    int n, overlap, overlap_param;
    // host memory: the communication thread and its queue of jobs (bucket index x 2 + kind, in issue order;
    // jobs are numbered from 0 for the whole run: done and queued only grow)
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int *queue;
    long queued, done;
    int stop, has_thread, gathers_pending;
    double wait_s; // all-gather time the training loop waited for (synchronous, or blocked in the forward)
} Buckets;

// bucket_size: elements per bucket (0 with overlap: Megatron's max(40M, 1M x world); 0 without overlap: one
// bucket of all the parameters, ZeRO-1's default layout). overlap_param: ZeRO-1's overlap_param_gather.
void buckets_init(Buckets *bk, Model *m, Dist *d, long bucket_size, int overlap, int overlap_param);
// Before the last micro-batch's backward: listen to the model's grad_ready (overlap only).
void buckets_arm(Buckets *bk);
// After the backward: issues what is left, in order, and waits for every bucket.
void buckets_finish(Buckets *bk);
// ZeRO-1 after the optimizer step: every bucket's shards of m->params (of the act copy m->wact when the
// masters are sharded: model_drop_masters) to every rank, in forward order;
// with overlap_param it returns at once and the next forward (the model's params_needed) waits per bucket.
void buckets_gather(Buckets *bk);
// Waits for every pending all-gather (before anything else reads the weights or talks to the other ranks).
void buckets_gather_wait(Buckets *bk);
// The all-gather time waited for since the last call, in ms (the exposed part of it when overlapped).
double buckets_take_wait_ms(Buckets *bk);
// Rank 0: one line with the layout.
void buckets_describe(const Buckets *bk);
void buckets_free(Buckets *bk);
