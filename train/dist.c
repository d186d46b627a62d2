// dist.c: the data-parallel launcher and collectives (see dist.h).
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
#include "dist_cuda.h"

enum { MAX_WORLD = 64, HOST_SCALARS = 16 };
static const size_t SLOT_BYTES = (size_t)16 << 20; // per-rank staging for CPU all-reduces, in chunks

struct DistShm {
    pthread_barrier_t bar;
    unsigned char nccl_id[512];
    int nccl_id_len;
    uint64_t check[MAX_WORLD];
    double scal[MAX_WORLD][HOST_SCALARS];
    _Alignas(64) unsigned char slots[]; // world x SLOT_BYTES
};

void dist_launch(Dist *d, int world) {
    memset(d, 0, sizeof *d);
    d->world = 1;
    if (world <= 1) return;
    if (world > MAX_WORLD) die("nproc_per_node %d: at most %d ranks", world, MAX_WORLD);
    size_t bytes = sizeof(DistShm) + (size_t)world * SLOT_BYTES;
    DistShm *shm = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shm == MAP_FAILED) die("data parallel: cannot map %zu bytes of shared memory: %s", bytes, strerror(errno));
    pthread_barrierattr_t ba;
    pthread_barrierattr_init(&ba);
    pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
    if (pthread_barrier_init(&shm->bar, &ba, (unsigned)world)) die("data parallel: cannot create a process-shared barrier");
    fflush(stdout);
    fflush(stderr);
    pid_t pids[MAX_WORLD], launcher = getpid();
    for (int r = 0; r < world; r++) {
        pid_t p = fork();
        if (p < 0) die("data parallel: fork failed: %s", strerror(errno));
        if (p == 0) { // a rank
            prctl(PR_SET_PDEATHSIG, SIGTERM); // the launcher killed: do not run on alone
            if (getppid() != launcher) _exit(1); // (it died before the line above)
            d->rank = r, d->world = world, d->shm = shm;
            char v[16], prefix[32];
            snprintf(v, sizeof v, "%d", r);
            setenv("GDN_CUDA_DEVICE", v, 1);
            setenv("NCCL_NVLS_ENABLE", "0", 0); // NVLink multicast off unless asked for
            snprintf(prefix, sizeof prefix, "gdn [rank %d]: ", r);
            die_set_prefix(prefix);
#ifdef _OPENMP
            int threads = omp_get_num_procs() / world; // CPU ranks share the cores
            omp_set_num_threads(threads > 0 ? threads : 1);
#endif
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
                if (pids[r] != p) kill(pids[r], SIGTERM);
        }
    }
    exit(failed ? (status ? status : 1) : 0);
}

void dist_barrier(Dist *d) {
    if (d->world > 1) pthread_barrier_wait(&d->shm->bar);
}

void dist_init_backend(Dist *d, const Backend *be) {
    if (d->world <= 1) return;
    // every rank must have the same backend (with --device auto, a rank without a GPU would take the CPU)
    char what[160];
    snprintf(what, sizeof what, "the backend (this rank: %s; nproc_per_node more than the GPUs visible?)", be->name);
    dist_check_same(d, hash_bytes(be->name, strlen(be->name)) ^ (uint64_t)be->act_bytes, what);
    if (strcmp(be->name, "cuda")) return;
    char err[ERR_LEN];
    int n = cuda_nccl_id_size();
    if (n > (int)sizeof d->shm->nccl_id) die("data parallel: NCCL id of %d bytes does not fit", n);
    if (d->rank == 0) {
        d->shm->nccl_id_len = cuda_nccl_unique_id(d->shm->nccl_id, err, sizeof err) ? -1 : n;
        if (d->shm->nccl_id_len < 0) fprintf(stderr, "gdn [rank 0]: %s\n", err);
    }
    dist_barrier(d);
    if (d->shm->nccl_id_len != n) die("data parallel: rank 0 could not create the NCCL id");
    if (cuda_nccl_init(d->shm->nccl_id, d->rank, d->world, err, sizeof err)) die("data parallel: %s", err);
    d->nccl = 1;
}

void dist_allreduce_sum(Dist *d, float *buf, size_t n) {
    if (d->world <= 1 || !n) return;
    if (d->nccl) {
        cuda_nccl_allreduce_sum(buf, n);
        return;
    }
    // host memory (CPU backend): chunk by chunk through the shared slots, summed in rank order
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

void dist_allreduce_host(Dist *d, double *x, int n) {
    if (d->world <= 1) return;
    if (n > HOST_SCALARS) die("dist_allreduce_host: %d values (at most %d)", n, HOST_SCALARS);
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
    d->shm->check[d->rank] = value;
    dist_barrier(d);
    int differ = -1;
    for (int r = 1; r < d->world && differ < 0; r++)
        if (d->shm->check[r] != d->shm->check[0]) differ = r;
    dist_barrier(d);
    if (differ >= 0)
        die("data parallel: ranks 0 and %d disagree on %s (%016llx vs %016llx): the replicas diverged", differ, what,
            (unsigned long long)d->shm->check[0], (unsigned long long)d->shm->check[differ]);
}

void dist_finish(Dist *d) {
    if (d->world <= 1) return;
    dist_barrier(d);
    if (d->nccl) cuda_nccl_free();
}
