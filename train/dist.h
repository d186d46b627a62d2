// dist.h: data-parallel training on one machine: `world` processes, one per GPU (or CPU ranks for tests),
// each with the whole model; every rank reads its share of each global batch (sampler_position), the
// gradients are summed across ranks before the clip and the AdamW step, which every rank then runs on
// identical gradients, so the weights stay identical without being sent.
// Gradients on CUDA go through NCCL (an all-reduce on the backend's stream); CPU ranks and the host-side
// scalars (loss sums, checks) go through a shared-memory region, summed in rank order on every rank.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "../model/backend.h"

typedef struct DistShm DistShm;

typedef struct {
    int rank, world; // world 1: every call is a no-op
    int nccl;        // device buffers are reduced with NCCL (CUDA backend)
    DistShm *shm;
} Dist;

// world == 1: d = {rank 0, world 1}, returns. world > 1: forks `world` ranks of this process and returns in
// each of them (rank set, GDN_CUDA_DEVICE=rank, log prefix "rank N"); the launching process waits for
// them and exits with the first failure, stopping the others. Call before anything starts a backend or
// threads.
void dist_launch(Dist *d, int world);
// In each rank once the backend is chosen: the NCCL communicator when the backend is CUDA.
void dist_init_backend(Dist *d, const Backend *be);
// buf (backend memory, n floats) = its sum over the ranks, identical on every rank.
void dist_allreduce_sum(Dist *d, float *buf, size_t n);
// x[0..n) (host, n <= 16) = its sum over the ranks, added in rank order.
void dist_allreduce_host(Dist *d, double *x, int n);
// Dies on every rank if the ranks' values of `what` differ (e.g. a hash of the weights).
void dist_check_same(Dist *d, uint64_t value, const char *what);
void dist_barrier(Dist *d);
void dist_finish(Dist *d);
