// shm_barrier.h: the fork shortcut's barrier (train/dist.c), process-shared, with a deadline: a rank that
// died or hangs (SIGSTOP, a deadlock) makes the others give up after distributed_timeout_minutes and name
// the ranks that did not arrive, as the Gloo path does for launcher ranks.
#pragma once
#include <pthread.h>

enum { SHM_BARRIER_MAX = 64 };

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int world, waiting;
    unsigned gen;                     // barriers completed so far
    unsigned arrived[SHM_BARRIER_MAX]; // per rank: 1 + the generation it last arrived at
} ShmBarrier;

// In shared memory, before the ranks fork. Returns 0, or -1 if the process-shared objects cannot be made.
int shm_barrier_init(ShmBarrier *b, int world);
// Waits for every rank. 0; or, when timeout_s passes first, the number of ranks missing (missing[r] = 1 for
// each: not at this barrier, or holding its lock).
int shm_barrier_wait(ShmBarrier *b, int rank, double timeout_s, int *missing);
