// dist.c: the data-parallel launcher and collectives (see dist.h): the fork shortcut with its shared-memory
// channel, launcher ranks through Gloo (comm_gloo.cc), and the backend's device collectives.
#define _GNU_SOURCE
#include "dist.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../util/common.h"
#include "comm_gloo.h"
#include "shm_barrier.h"

enum { MAX_WORLD = 4096, MAX_FORK = SHM_BARRIER_MAX, HOST_SCALARS = 16, ID_BYTES = 512 };
static const size_t SLOT_BYTES = (size_t)16 << 20; // per-rank staging for CPU all-reduces, in chunks

struct DistShm {
    ShmBarrier bar; // with the timeout: a hung rank stops the others
    unsigned char nccl_id[ID_BYTES];
    int nccl_id_len;
    uint64_t check[MAX_FORK];
    double scal[MAX_FORK][HOST_SCALARS];
    _Alignas(64) unsigned char slots[]; // world x SLOT_BYTES
};

static void set_threads(int local_world) {
#ifdef _OPENMP
    if (getenv("OMP_NUM_THREADS")) return; // the user's (or the launcher's) choice
    int threads = omp_get_num_procs() / local_world; // CPU ranks of one machine share its cores
    omp_set_num_threads(threads > 0 ? threads : 1);
#else
    (void)local_world;
#endif
}

static void rank_env(const Dist *d) {
    char v[16], prefix[32];
    snprintf(v, sizeof v, "%d", d->local_rank);
    setenv("GDN_CUDA_DEVICE", v, 0);    // one GPU per rank on each machine, unless the user picked one
    setenv("NCCL_NVLS_ENABLE", "0", 0); // NVLink multicast off unless asked for
    snprintf(prefix, sizeof prefix, "gdn [rank %d]: ", d->rank);
    die_set_prefix(prefix);
}

// The ranks of missing[] died or hung: one line naming them, and this rank stops.
static void die_missing(const Dist *d, const int *missing, int n, const char *what) {
    char list[256] = "";
    size_t k = 0;
    for (int r = 0, shown = 0; r < d->world && k < sizeof list - 16; r++)
        if (missing[r]) k += (size_t)snprintf(list + k, sizeof list - k, "%s%d", shown++ ? ", " : "", r);
    if (!list[0]) snprintf(list, sizeof list, "(one holding the shared-memory lock)");
    die("rank%s %s died or hung (no answer within %.0f s, distributed_timeout_minutes) during %s; stopping", n > 1 ? "s" : "",
        list, d->timeout_s, what);
}

// A CPU collective failed: find out which rank is gone (the roll call of comm_gloo.cc) and stop this one.
static void comm_failed(Dist *d, const char *what, const char *err) {
    int *missing = xmalloc((size_t)d->world * sizeof(int));
    // the survivors fail at once (their pairs close) or time out together: a short roll call finds them all
    double grace = d->timeout_s / 4 < 2 ? 2 : d->timeout_s / 4 > 10 ? 10 : d->timeout_s / 4;
    int n = gloo_comm_who_failed(d->gloo, grace, missing);
    if (n < 0) die("%s failed: rank 0 (it serves the rendezvous store) died or hung; stopping (%s)", what, err);
    if (n == 0) die("%s failed on this rank; stopping (%s)", what, err);
    die_missing(d, missing, n, what);
}
#define GLOO(what, call)                                                                                      \
    do {                                                                                                      \
        char err_[ERR_LEN];                                                                                   \
        if (call) comm_failed(d, what, err_);                                                                 \
    } while (0)
#define ERRS err_, sizeof err_

static void fork_ranks(Dist *d, int world) {
    if (world > MAX_FORK) die("nproc_per_node %d: at most %d ranks", world, MAX_FORK);
    size_t bytes = sizeof(DistShm) + (size_t)world * SLOT_BYTES;
    DistShm *shm = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shm == MAP_FAILED) die("data parallel: cannot map %zu bytes of shared memory: %s", bytes, strerror(errno));
    if (shm_barrier_init(&shm->bar, world)) die("data parallel: cannot create a process-shared barrier");
    fflush(stdout);
    fflush(stderr);
    pid_t pids[MAX_FORK], launcher = getpid();
    for (int r = 0; r < world; r++) {
        pid_t p = fork();
        if (p < 0) die("data parallel: fork failed: %s", strerror(errno));
        if (p == 0) { // a rank
            prctl(PR_SET_PDEATHSIG, SIGTERM); // the launcher killed: do not run on alone
            if (getppid() != launcher) _exit(1); // (it died before the line above)
            d->rank = d->local_rank = r, d->world = d->local_world = world, d->shm = shm;
            rank_env(d);
            set_threads(world);
            return;
        }
        pids[r] = p;
    }
    // the launcher: wait; the first rank to fail stops the others (they would wait for it forever)
    int status = 0, failed = 0, left = world;
    while (left > 0) {
        int st;
        pid_t p = wait(&st);
        if (p < 0) {
            if (errno == EINTR) continue;
            break;
        }
        left--;
        int bad = !WIFEXITED(st) || WEXITSTATUS(st) != 0;
        if (bad && !failed) {
            failed = 1;
            status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            int rank = -1;
            for (int r = 0; r < world; r++)
                if (pids[r] == p) rank = r;
            fprintf(stderr, "gdn: rank %d %s %d; stopping the other ranks\n", rank,
                    WIFEXITED(st) ? "exited with status" : "was killed by signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            for (int r = 0; r < world; r++)
                if (pids[r] != p) kill(pids[r], SIGTERM), kill(pids[r], SIGCONT); // a stopped rank too
        }
    }
    exit(failed ? (status ? status : 1) : 0);
}

void dist_launch(Dist *d, int nproc_per_node, double timeout_minutes) {
    memset(d, 0, sizeof *d);
    d->world = d->local_world = 1;
    d->launcher = "none";
    d->timeout_s = timeout_minutes * 60;
    if (dist_env_layout(d) && d->world > 1) {
        if (nproc_per_node > 1)
            die("%s started %d ranks and nproc_per_node is %d: use one or the other (the launcher's ranks, or "
                "--nproc_per_node on one machine without a launcher)", d->launcher, d->world, nproc_per_node);
        if (d->world > MAX_WORLD) die("%s: world size %d, at most %d ranks", d->launcher, d->world, MAX_WORLD);
        rank_env(d);
        set_threads(d->local_world);
        char err[ERR_LEN];
        const char *gen = getenv("TORCHELASTIC_RESTART_COUNT"); // torchrun's attempt: a restart rendezvous anew
        d->gloo = gloo_comm_init(d->rank, d->world, d->master_addr, d->store_port, gen ? gen : "0", d->timeout_s, err,
                                 sizeof err);
        if (!d->gloo) die("%s", err);
        if (d->rank == 0)
            printf("gdn train: %d ranks from %s (%d per machine here, %d machine%s), rendezvous %s:%d (Gloo store; "
                   "MASTER_PORT %d is the launcher's), CPU collectives through Gloo, timeout %.0f s\n",
                   d->world, d->launcher, d->local_world, (d->world + d->local_world - 1) / d->local_world,
                   d->world > d->local_world ? "s" : "", d->master_addr, d->store_port, d->master_port, d->timeout_s);
        fflush(stdout);
        return;
    }
    d->rank = d->local_rank = 0, d->world = d->local_world = 1, d->launcher = "none";
    if (nproc_per_node <= 1) return;
    d->launcher = "fork";
    fork_ranks(d, nproc_per_node);
}

void dist_barrier(Dist *d) {
    if (d->world <= 1) return;
    if (d->gloo) GLOO("a barrier", gloo_barrier(d->gloo, ERRS));
    else {
        int missing[MAX_FORK];
        int n = shm_barrier_wait(&d->shm->bar, d->rank, d->timeout_s, missing);
        if (n) die_missing(d, missing, n, "a collective (shared memory)");
    }
}

// The bootstrap id from rank 0 to every rank over the CPU channel (NCCL's own rendezvous then connects them;
// any NCCL version, whether NCCL_COMM_ID is set or not).
static void share_id(Dist *d, unsigned char *id, int n) {
    char err[ERR_LEN] = "";
    int ok = 1;
    if (d->rank == 0) ok = !d->be->comm_unique_id(id, err, sizeof err);
    if (d->gloo) {
        double okd = ok;
        dist_allreduce_host(d, &okd, 1); // everyone learns whether rank 0 made it
        if (okd != d->world) die("data parallel: rank 0 could not create the communicator id%s%s", err[0] ? ": " : "", err);
        GLOO("the communicator id broadcast", gloo_broadcast(d->gloo, id, (size_t)n, 0, ERRS));
        return;
    }
    if (d->rank == 0) {
        d->shm->nccl_id_len = ok ? n : -1;
        memcpy(d->shm->nccl_id, id, (size_t)n);
        if (!ok) fprintf(stderr, "gdn [rank 0]: %s\n", err);
    }
    dist_barrier(d);
    if (d->shm->nccl_id_len != n) die("data parallel: rank 0 could not create the communicator id");
    memcpy(id, d->shm->nccl_id, (size_t)n);
}

void dist_init_backend(Dist *d, const Backend *be) {
    d->be = be;
    if (d->world <= 1) return;
    // every rank must have the same backend (with --device auto, a rank without a GPU would take the CPU)
    char what[160];
    snprintf(what, sizeof what, "the backend (this rank: %s; more ranks per machine than the GPUs visible?)", be->name);
    dist_check_same(d, hash_bytes(be->name, strlen(be->name)) ^ (uint64_t)be->act_bytes, what);
    if (!be->comm_init) return; // host memory: reduced here
    unsigned char id[ID_BYTES] = {0};
    int n = be->comm_id_size();
    if (n > ID_BYTES) die("data parallel: a communicator id of %d bytes does not fit", n);
    share_id(d, id, n);
    char err[ERR_LEN];
    if (be->comm_init(id, d->rank, d->world, err, sizeof err)) die("data parallel: %s", err);
    d->nccl = 1;
}

// shared memory: buf = the sum in rank order, chunk by chunk through the slots
static void shm_allreduce(Dist *d, float *buf, size_t n) {
    size_t chunk = SLOT_BYTES / sizeof(float);
    float *mine = (float *)(d->shm->slots + (size_t)d->rank * SLOT_BYTES);
    for (size_t o = 0; o < n; o += chunk) {
        size_t c = n - o < chunk ? n - o : chunk;
        memcpy(mine, buf + o, c * sizeof(float));
        dist_barrier(d);
        for (size_t i = 0; i < c; i++) {
            float s = ((const float *)d->shm->slots)[i];
            for (int r = 1; r < d->world; r++) s += ((const float *)(d->shm->slots + (size_t)r * SLOT_BYTES))[i];
            buf[o + i] = s;
        }
        dist_barrier(d); // everyone has read the slots before the next chunk overwrites them
    }
}

void dist_allreduce_sum(Dist *d, float *buf, size_t n) {
    if (d->world <= 1 || !n) return;
    if (d->nccl) d->be->comm_allreduce_sum(buf, n);
    else if (d->gloo) GLOO("the gradient all-reduce", gloo_allreduce_sum(d->gloo, buf, n, ERRS));
    else shm_allreduce(d, buf, n);
}

void dist_reduce_scatter_sum(Dist *d, float *buf, const size_t *offs) {
    if (d->world <= 1) return;
    if (d->nccl) d->be->comm_reduce_scatter_sum(buf, offs);
    else if (d->gloo) { // one reduce per owner, in rank order (each a fixed-order ring for this world size)
        for (int r = 0; r < d->world; r++)
            if (offs[r + 1] > offs[r]) GLOO("the gradient reduce-scatter", gloo_reduce_sum(d->gloo, buf + offs[r], offs[r + 1] - offs[r], r, ERRS));
    } else shm_allreduce(d, buf + offs[0], offs[d->world] - offs[0]); // sums everything: a superset
}

void dist_allgather(Dist *d, float *buf, const size_t *offs) {
    if (d->world <= 1) return;
    if (d->nccl) d->be->comm_allgather(buf, offs);
    else if (d->gloo) {
        for (int r = 0; r < d->world; r++)
            if (offs[r + 1] > offs[r]) GLOO("the parameter all-gather", gloo_broadcast(d->gloo, buf + offs[r], (offs[r + 1] - offs[r]) * sizeof(float), r, ERRS));
    } else { // zeros outside the owned range, then a sum: x + 0 = x, exact
        size_t n = offs[d->world] - offs[0];
        float *b = buf + offs[0];
        memset(b, 0, (offs[d->rank] - offs[0]) * sizeof(float));
        memset(buf + offs[d->rank + 1], 0, (offs[d->world] - offs[d->rank + 1]) * sizeof(float));
        shm_allreduce(d, b, n);
    }
}

void dist_allgather_bytes(Dist *d, void *buf, const size_t *offs, size_t elem_bytes) {
    if (d->world <= 1) return;
    char *b = buf;
    if (d->nccl) d->be->comm_allgather_bytes(buf, offs, elem_bytes);
    else if (d->gloo) {
        for (int r = 0; r < d->world; r++)
            if (offs[r + 1] > offs[r]) GLOO("the parameter all-gather", gloo_broadcast(d->gloo, b + offs[r] * elem_bytes, (offs[r + 1] - offs[r]) * elem_bytes, r, ERRS));
    } else die("dist_allgather_bytes: not through shared memory (its all-gather adds fp32 zeros)");
}

void dist_allreduce_host(Dist *d, double *x, int n) {
    if (d->world <= 1) return;
    if (n > HOST_SCALARS) die("dist_allreduce_host: %d values (at most %d)", n, HOST_SCALARS);
    if (d->gloo) { // gathered, then added in rank order on every rank
        double *all = xmalloc((size_t)d->world * (size_t)n * sizeof(double));
        GLOO("the loss all-reduce", gloo_allgather(d->gloo, x, all, (size_t)n * sizeof(double), ERRS));
        for (int i = 0; i < n; i++) {
            double s = 0;
            for (int r = 0; r < d->world; r++) s += all[(size_t)r * n + i];
            x[i] = s;
        }
        free(all);
        return;
    }
    memcpy(d->shm->scal[d->rank], x, (size_t)n * sizeof(double));
    dist_barrier(d);
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int r = 0; r < d->world; r++) s += d->shm->scal[r][i];
        x[i] = s;
    }
    dist_barrier(d);
}

void dist_check_same(Dist *d, uint64_t value, const char *what) {
    if (d->world <= 1) return;
    uint64_t *all;
    if (d->gloo) {
        all = xmalloc((size_t)d->world * sizeof(uint64_t));
        GLOO("a replica check", gloo_allgather(d->gloo, &value, all, sizeof value, ERRS));
    } else {
        d->shm->check[d->rank] = value;
        dist_barrier(d);
        all = xmalloc((size_t)d->world * sizeof(uint64_t));
        memcpy(all, d->shm->check, (size_t)d->world * sizeof(uint64_t));
        dist_barrier(d);
    }
    int differ = -1;
    for (int r = 1; r < d->world && differ < 0; r++)
        if (all[r] != all[0]) differ = r;
    uint64_t a = all[0], b = differ >= 0 ? all[differ] : 0;
    free(all);
    if (differ >= 0)
        die("data parallel: ranks 0 and %d disagree on %s (%016llx vs %016llx): the replicas diverged", differ, what,
            (unsigned long long)a, (unsigned long long)b);
}

void dist_finish(Dist *d) {
    if (d->world <= 1) return;
    dist_barrier(d);
    if (d->nccl) d->be->comm_free();
    if (d->gloo) gloo_comm_free(d->gloo);
    d->gloo = NULL;
}
