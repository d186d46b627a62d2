// shm_barrier.c: a process-shared barrier with a deadline (see shm_barrier.h).
#include "shm_barrier.h"

#include <errno.h>
#include <string.h>
#include <time.h>

int shm_barrier_init(ShmBarrier *b, int world) {
    memset(b, 0, sizeof *b);
    b->world = world;
    pthread_mutexattr_t ma;
    pthread_condattr_t ca;
    if (pthread_mutexattr_init(&ma) || pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED) ||
        pthread_mutex_init(&b->mu, &ma))
        return -1;
    if (pthread_condattr_init(&ca) || pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED) ||
        pthread_cond_init(&b->cv, &ca))
        return -1;
    return 0;
}

static int who_is_missing(const ShmBarrier *b, unsigned gen, int *missing) {
    int n = 0;
    for (int r = 0; r < b->world; r++) n += missing[r] = __atomic_load_n(&b->arrived[r], __ATOMIC_RELAXED) != gen + 1;
    return n ? n : 1; // none seen behind: the lock's holder is (count it as one missing rank, unnamed)
}

int shm_barrier_wait(ShmBarrier *b, int rank, double timeout_s, int *missing) {
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl); // the clock of pthread_mutex_timedlock and of the condition (default)
    dl.tv_sec += (time_t)timeout_s;
    dl.tv_nsec += (long)((timeout_s - (double)(time_t)timeout_s) * 1e9);
    if (dl.tv_nsec >= 1000000000L) dl.tv_sec++, dl.tv_nsec -= 1000000000L;
    unsigned gen = __atomic_load_n(&b->gen, __ATOMIC_RELAXED);
    if (pthread_mutex_timedlock(&b->mu, &dl)) {
        for (int r = 0; r < b->world; r++) missing[r] = 0;
        return who_is_missing(b, gen, missing);
    }
    gen = b->gen;
    __atomic_store_n(&b->arrived[rank], gen + 1, __ATOMIC_RELAXED);
    if (++b->waiting == b->world) {
        b->waiting = 0;
        __atomic_store_n(&b->gen, gen + 1, __ATOMIC_RELAXED);
        pthread_cond_broadcast(&b->cv);
        pthread_mutex_unlock(&b->mu);
        return 0;
    }
    int rc = 0;
    while (b->gen == gen && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&b->cv, &b->mu, &dl);
    int n = b->gen == gen ? who_is_missing(b, gen, missing) : 0;
    pthread_mutex_unlock(&b->mu);
    return n;
}
