// signals.c: the handler only sets a flag (async-signal-safe); the training loop turns it into a
// checkpoint and an exit at the end of the iteration, as Megatron's DistributedSignalHandler does.
#include "train/signals.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "util/common.h"

static volatile sig_atomic_t got_signal;
static double t_start;

// A caught signal must never leave a rank running for good (e.g. the launcher's SIGTERM after another rank
// failed, while this one waits for it in a collective): the default SIGALRM ends it after a grace period.
enum { STOP_GRACE_S = 120 };

static void on_signal(int sig) {
    if (!got_signal) {
        got_signal = sig;
        alarm(STOP_GRACE_S);
    }
}

void stop_prepare(const Config *c) {
    t_start = now_sec();
    if (!c->exit_signal_handler || c->nproc_per_node <= 1) return;
    // the launcher of data-parallel ranks keeps waiting for them: the ranks take the signal, save and exit
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
}

void stop_install(const Config *c) {
    if (!c->exit_signal_handler) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART; // reads and writes in flight (a checkpoint) carry on
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
}

int stop_signal(void) { return got_signal; }
double stop_minutes(void) { return (now_sec() - t_start) / 60.0; }

// The one collective of this file: any rank's flag stops all (Megatron all-gathers the flags; a sum of
// 0/1 flags is the same test). Re-point here if the rank layout changes.
static void stop_agree(Dist *d, double flags[2]) { dist_allreduce_host(d, flags, 2); }

int stop_check(Dist *d, const Config *c) {
    if (!c->exit_signal_handler && !(c->exit_duration_in_mins > 0)) return STOP_NONE; // no collective, as before
    double flags[2] = {got_signal != 0, c->exit_duration_in_mins > 0 && stop_minutes() > c->exit_duration_in_mins};
    stop_agree(d, flags);
    if (flags[0] > 0) return STOP_SIGNAL;
    if (flags[1] > 0) return STOP_DURATION;
    return STOP_NONE;
}
