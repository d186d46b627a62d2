// dist_env.c: the rank layout a launcher gives each process it starts (spec train.md §5.1), first found
// wins: torchrun (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), Open MPI's
// mpirun (OMPI_COMM_WORLD_*), Slurm's srun (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, ...).
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/common.h"
#include "dist.h"

// The integer in variable `name`, or `def` if unset; dies on anything but a whole non-negative number.
static int env_int(const char *name, int def, const char *launcher) {
    const char *s = getenv(name);
    if (!s) return def;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < 0 || v > 1 << 30)
        die("%s=\"%s\" (set by %s): expected a non-negative integer", name, s, launcher);
    return (int)v;
}

int dist_env_layout(Dist *d) {
    const char *who;
    int nnodes = 1;
    if (getenv("RANK") && getenv("WORLD_SIZE")) {
        who = "torchrun";
        d->rank = env_int("RANK", 0, who);
        d->world = env_int("WORLD_SIZE", 1, who);
        d->local_rank = env_int("LOCAL_RANK", 0, who);
        d->local_world = env_int("LOCAL_WORLD_SIZE", d->world, who);
    } else if (getenv("OMPI_COMM_WORLD_RANK")) {
        who = "mpirun";
        d->rank = env_int("OMPI_COMM_WORLD_RANK", 0, who);
        d->world = env_int("OMPI_COMM_WORLD_SIZE", 1, who);
        d->local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0, who);
        d->local_world = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", d->world, who);
    } else if (getenv("SLURM_PROCID") && getenv("SLURM_NTASKS") && (getenv("SLURM_STEP_ID") || getenv("SLURM_STEPID"))) { // srun
        // (a step id: srun's task, not the batch shell, which is no rank)
        who = "srun";
        d->rank = env_int("SLURM_PROCID", 0, who);
        d->world = env_int("SLURM_NTASKS", 1, who);
        d->local_rank = env_int("SLURM_LOCALID", 0, who);
        nnodes = env_int("SLURM_STEP_NUM_NODES", env_int("SLURM_NNODES", 1, who), who);
        d->local_world = env_int("SLURM_NTASKS_PER_NODE", nnodes > 0 ? d->world / nnodes : d->world, who);
    } else {
        return 0;
    }
    d->launcher = who;
    if (d->world < 1 || d->rank >= d->world)
        die("%s gave rank %d of world size %d: expected 0 <= rank < world", who, d->rank, d->world);
    if (d->local_world < 1 || d->local_rank >= d->local_world) d->local_world = d->local_rank + 1;
    const char *addr = getenv("MASTER_ADDR");
    // one machine needs no address; several do (the sbatch example exports the first host of the node list)
    if (!addr || !*addr) {
        if (d->world > d->local_world && d->world > 1)
            die("%s started %d ranks on several machines but MASTER_ADDR is not set (rank 0's host)", who, d->world);
        addr = "127.0.0.1";
    }
    snprintf(d->master_addr, sizeof d->master_addr, "%s", addr);
    d->master_port = env_int("MASTER_PORT", 29500, who);
    // torchrun's agent listens on MASTER_PORT itself (static rendezvous): the Gloo store takes the next one
    d->store_port = env_int("GDN_STORE_PORT", d->master_port + 1, who);
    if (d->store_port < 1 || d->store_port > 65535) die("rendezvous store port %d: expected 1..65535 (MASTER_PORT or GDN_STORE_PORT)", d->store_port);
    return 1;
}
