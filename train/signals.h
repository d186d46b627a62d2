// signals.h: graceful stops (spec train.md §4.1): exit_signal_handler (SIGTERM/SIGINT set a flag that the
// loop reads once per iteration) and exit_duration_in_mins, agreed on by every rank each iteration.
#pragma once
#include "../model/config.h"
#include "dist.h"

enum { STOP_NONE, STOP_SIGNAL, STOP_DURATION };

// Once, before dist_launch: the start time (the ranks inherit it); with data-parallel ranks the launcher
// ignores SIGTERM/SIGINT so that it waits for the ranks, which handle them (signal the process group).
void stop_prepare(const Config *c);
// In every rank after dist_launch: SIGTERM/SIGINT set the flag (and arm a 120 s SIGALRM as a backstop).
void stop_install(const Config *c);
// Every rank, once per iteration: the same answer on all ranks (a collective when a trigger is enabled).
int stop_check(Dist *d, const Config *c);
// The signal that set the flag (0 if none), for the exit line.
int stop_signal(void);
double stop_minutes(void); // since stop_install
