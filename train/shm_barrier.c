// shm_barrier.c: a process-shared barrier with a deadline (see shm_barrier.h).
#include "shm_barrier.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int shm_barrier_init(ShmBarrier *b, int world) {
    memset(b, 0, sizeof *b);
    if (world < 1 || world > SHM_BARRIER_MAX) return -1;
    b->world = world;
    return 0;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int shm_barrier_wait(ShmBarrier *b, int rank, double timeout_s, int *missing) {
    const unsigned gen = __atomic_load_n(&b->gen, __ATOMIC_ACQUIRE);
    __atomic_store_n(&b->arrived[rank], gen + 1, __ATOMIC_RELAXED);
    if (__atomic_add_fetch(&b->count, 1, __ATOMIC_ACQ_REL) == (unsigned)b->world) {
        // the last to arrive: the count is reset before the generation moves on, so a rank that sees the new
        // generation and enters the next barrier counts from zero
        __atomic_store_n(&b->count, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&b->gen, gen + 1, __ATOMIC_RELEASE);
        syscall(SYS_futex, &b->gen, FUTEX_WAKE, INT_MAX, NULL, NULL, 0); // shared (not FUTEX_PRIVATE): other processes
        return 0;
    }
    const double deadline = now_s() + timeout_s;
    while (__atomic_load_n(&b->gen, __ATOMIC_ACQUIRE) == gen) {
        const double left = deadline - now_s();
        if (left <= 0) {
            int n = 0;
            for (int r = 0; r < b->world; r++)
                n += missing[r] = __atomic_load_n(&b->arrived[r], __ATOMIC_RELAXED) != gen + 1;
            // every rank arrived but the generation did not move: the last one stopped between the two stores
            return n ? n : 1;
        }
        struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
        // sleeps while gen is unchanged (EAGAIN if it already moved, EINTR on a signal: the loop re-checks)
        syscall(SYS_futex, &b->gen, FUTEX_WAIT, gen, &ts, NULL, 0);
    }
    return 0;
}
