// shm_barrier.h: the fork shortcut's barrier (train/dist.c), process-shared, with a deadline: a rank that
// died or hangs (SIGSTOP, a deadlock) makes the others give up after distributed_timeout_minutes and name
// the ranks that did not arrive, as the Gloo path does for launcher ranks.
// Lock-free (an arrival counter, a generation word and a futex on it): no rank ever waits for a lock another rank
// holds, so a rank stopped anywhere inside the barrier cannot keep the others past their deadline (a process-shared
// mutex and condition variable could: pthread_cond_timedwait re-takes the mutex after its timeout without one).
#pragma once

enum { SHM_BARRIER_MAX = 64 };

typedef struct {
    int world;
    unsigned count;                    // ranks arrived at the current generation
    unsigned gen;                      // barriers completed so far (the futex word)
    unsigned arrived[SHM_BARRIER_MAX]; // per rank: 1 + the generation it last arrived at
} ShmBarrier;

// In shared memory, before the ranks fork. Returns 0, or -1 for a world outside 1..SHM_BARRIER_MAX.
int shm_barrier_init(ShmBarrier *b, int world);
// Waits for every rank. 0; or, when timeout_s passes first, the number of ranks missing (missing[r] = 1 for
// each rank not at this barrier). After a timeout the barrier is not reusable (the run stops).
int shm_barrier_wait(ShmBarrier *b, int rank, double timeout_s, int *missing);
