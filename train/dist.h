// dist.h: data-parallel training: `world` processes, one per GPU (or CPU ranks), each with the whole model;
// every rank reads its share of each global batch (sampler_position), the gradients are summed across ranks
// before the clip and the AdamW step, so the weights stay identical (plain DDP), or, with ZeRO-1
// (train/zero.c), each rank updates its shard and the shards are gathered.
// Ranks come from a launcher (torchrun, srun, mpirun: dist_env.c reads their variables) or from the fork
// shortcut `--nproc_per_node N` on one machine.
// Channels: backend memory goes through the backend's collectives when it has them (CUDA: NCCL); otherwise
// (host memory) and for host scalars, through shared memory (fork shortcut) or Gloo (launcher ranks, any
// number of machines). Every reduction has a fixed order for a given world size and leaves the same bits on
// every rank.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "../model/backend.h"

typedef struct DistShm DistShm;
typedef struct GlooComm GlooComm;

typedef struct {
    int rank, world;             // world 1: every call is a no-op
    int local_rank, local_world; // on this machine
    const char *launcher;        // "none", "fork", "torchrun", "slurm", "openmpi"
    char master_addr[256];
    int master_port, store_port; // the launcher's port (never bound here) and the Gloo store's (+1)
    double timeout_s;            // distributed_timeout_minutes: rendezvous and every CPU collective
    const Backend *be;           // device collectives when be->comm_init is set
    int nccl;
    DistShm *shm;                // fork shortcut
    GlooComm *gloo;              // launcher ranks
} Dist;

// Launcher ranks (dist_env.c found RANK/WORLD_SIZE, OMPI_COMM_WORLD_*, SLURM_PROCID...): joins the others
// through Gloo. Else nproc_per_node > 1: forks that many ranks of this process and returns in each (the
// launching process waits and exits with the first failure, stopping the others). Else world 1.
// Rank 0 prints the resolved layout once. Call before anything starts a backend or threads.
void dist_launch(Dist *d, int nproc_per_node, double timeout_minutes);
// Fills d's rank fields from the launcher's environment; returns 0 when no launcher set them (dist_env.c).
int dist_env_layout(Dist *d);
// In each rank once the backend is chosen: checks every rank has the same one; the device communicator.
void dist_init_backend(Dist *d, const Backend *be);
// buf (backend memory, n floats) = its sum over the ranks, identical on every rank.
void dist_allreduce_sum(Dist *d, float *buf, size_t n);
// Shards: rank r owns buf[offs[r], offs[r+1]) (offs[world] = n). Reduce-scatter: the owned range = its sum
// over the ranks (the rest of buf is left undefined); all-gather: every rank gets every owned range.
void dist_reduce_scatter_sum(Dist *d, float *buf, const size_t *offs);
void dist_allgather(Dist *d, float *buf, const size_t *offs);
// The same for elements of elem_bytes (device collectives and Gloo only: ZeRO-1's bf16 weights).
void dist_allgather_bytes(Dist *d, void *buf, const size_t *offs, size_t elem_bytes);
// x[0..n) (host, n <= 16) = its sum over the ranks, added in rank order.
void dist_allreduce_host(Dist *d, double *x, int n);
// Dies on every rank if the ranks' values of `what` differ (e.g. a hash of the weights).
void dist_check_same(Dist *d, uint64_t value, const char *what);
void dist_barrier(Dist *d);
void dist_finish(Dist *d);
