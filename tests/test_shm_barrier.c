// test_shm_barrier.c: train/shm_barrier.c, the fork ranks' barrier with a deadline. Four processes run barriers in a
// tight loop; a fifth (this one) stops one of them (SIGSTOP) at a random moment, often inside the barrier itself.
// Every other rank must give up within its deadline, naming the stopped rank or counting it as missing. A barrier
// that held a lock across processes (the process-shared mutex and condition variable it had before) hangs here:
// a rank stopped while holding the lock keeps the others in pthread_cond_timedwait's re-lock forever.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "train/shm_barrier.h"

enum { WORLD = 4, TRIALS = 60 };

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// A rank: barriers until one times out; exit code 10 + the number missing, or 2 if a wrong rank was named.
static void rank_main(ShmBarrier *b, int rank, int victim) {
    int missing[SHM_BARRIER_MAX];
    for (;;) {
        int n = shm_barrier_wait(b, rank, 0.25, missing);
        if (n) _exit(missing[rank] ? 2 : 10 + n);
    }
}

int main(void) {
    int failures = 0;
    srand(12345);
    for (int trial = 0; trial < TRIALS; trial++) {
        ShmBarrier *b = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (b == MAP_FAILED || shm_barrier_init(b, WORLD)) {
            printf("FAIL: cannot make the barrier\n");
            return 1;
        }
        const int victim = 1 + trial % (WORLD - 1);
        pid_t pid[WORLD];
        for (int r = 0; r < WORLD; r++)
            if ((pid[r] = fork()) == 0) rank_main(b, r, victim);
        usleep(2000 + rand() % 20000); // thousands of barriers in, then stopped wherever it is
        kill(pid[victim], SIGSTOP);
        const double t0 = now_s();
        int done = 0, ok = 1;
        while (done < WORLD - 1 && now_s() - t0 < 5.0) {
            for (int r = 0; r < WORLD; r++) {
                int st;
                if (r == victim || pid[r] == 0 || waitpid(pid[r], &st, WNOHANG) != pid[r]) continue;
                const int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
                if (code < 11 || code > 10 + WORLD) {
                    printf("FAIL trial %d: rank %d ended with code %d (expected 10 + ranks missing)\n", trial, r, code);
                    ok = 0;
                }
                pid[r] = 0, done++;
            }
            usleep(1000);
        }
        const double took = now_s() - t0;
        if (done < WORLD - 1) {
            printf("FAIL trial %d: %d of %d ranks still waiting %.1f s after rank %d stopped (deadline 0.25 s)\n", trial,
                   WORLD - 1 - done, WORLD - 1, took, victim);
            ok = 0;
        }
        for (int r = 0; r < WORLD; r++)
            if (pid[r]) kill(pid[r], SIGKILL), waitpid(pid[r], NULL, 0);
        munmap(b, sizeof *b);
        failures += !ok;
    }
    printf("%s: %d trials, a rank stopped at a random moment, the others gave up within the deadline in %d\n",
           failures ? "FAIL" : "PASS", TRIALS, TRIALS - failures);
    return failures != 0;
}
