// adamw_plan.h: the chunk table of a multi-tensor AdamW (backend.h adamw_multi), built once on the host from
// runs of the flat parameter vector and kept in backend memory.
#pragma once
#include <stddef.h>

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    AdamwChunk *host; // [n] while building
    int n, cap;
    AdamwChunk *dev;  // [n] backend memory after adamw_plan_upload
} AdamwPlan;

// A run of len elements at gradient offset goff, state offset soff, master offset poff, cut into chunks of at
// most ADAMW_CHUNK. Runs are updated in the order added (each element once: the runs must not overlap).
void adamw_plan_add(AdamwPlan *p, size_t goff, size_t soff, size_t poff, size_t len, int decay);
void adamw_plan_upload(AdamwPlan *p, const Backend *be);
void adamw_plan_free(AdamwPlan *p, const Backend *be);

#ifdef __cplusplus
}
#endif
