// zero.h: ZeRO-1 (use_distributed_optimizer; spec train.md §6): the flat parameter vector is cut into one
// contiguous shard per rank; the gradients are reduce-scattered, each rank runs AdamW on its shard with its
// shard of the moments (the only state held per shard: 8 of the 16 bytes per fp32 parameter), and the updated
// weights are all-gathered. Checkpoints hold the whole state in model order, so any world size, with or
// without ZeRO-1, resumes from them.
#pragma once
#include <stddef.h>

#include "../model/gdn.h"
#include "dist.h"

typedef struct {
    size_t *offs;  // [world+1]: rank r owns [offs[r], offs[r+1]) of the parameters (64-aligned starts)
    size_t lo, hi; // this rank's
    float *m, *v;  // AdamW moments of the shard (backend memory)
} Zero;

// Takes the shard of the model's moments (set from a checkpoint or zero) and frees the full ones.
void zero_init(Zero *z, Model *m, const Dist *d);
// One optimizer step after the backward: reduce-scatter, the global grad norm (returned, for the clip and
// the NaN check, before any update), then zero_step applies AdamW to the shard and gathers the weights.
double zero_reduce_grads(Zero *z, Model *m, Dist *d);
void zero_step(Zero *z, Model *m, Dist *d, float lr, int step, float gscale);
// The whole moments into host hm, hv [P] on every rank (a collective; uses the gradient buffer as scratch).
void zero_get_optim(Zero *z, Model *m, Dist *d, float *hm, float *hv);
void zero_free(Zero *z, Model *m);
