// backend_profile.h: per-op timing of a real step (`gdn bench --profile`), as a wrapper around a backend's
// op table (backend_profile.c): the model runs on the returned table and is none the wiser.
#pragma once
#include <stdio.h>

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

// The table of be with every compute and copy entry timed (one per process). Records nothing until
// backend_profile_record(1).
const Backend *backend_profiled(const Backend *be);
// Starts (1) or stops (0) recording; stopping reads the timestamps taken so far (synchronises).
void backend_profile_record(int on);
// The table: per (op, GEMM shape) row, calls and ms per step over `steps` recorded steps, % of step_ms (the wall
// time per step), sorted by time; then the rows' sum, the step, and the gap between them.
void backend_profile_report(FILE *out, int steps, double step_ms);

#ifdef __cplusplus
}
#endif
