// zero.h: ZeRO-1 (use_distributed_optimizer; spec train.md §6): every bucket of train/buckets.c (one bucket
// of all the parameters unless ddp_bucket_size or overlap_grad_reduce cut them) is split into one
// contiguous shard per rank, as Megatron's distributed optimizer splits each bucket; the gradients are
// reduce-scattered per bucket, each rank runs AdamW on its shards with its shards of the moments, and the
// updated weights are all-gathered per bucket. Optimizer state per rank, for its shards only: the fp32
// masters and the AdamW moments on bf16 backends (12 bytes per parameter / world size; the forward reads the
// bf16 copy, all-gathered as the owners rounded it, and the few fp32 tensors of model/fp32_params.c); on
// fp32 backends the masters are the weights the forward reads, whole on every rank (refreshed by the
// all-gather), so only the moments are sharded (8 bytes / world size). With use_precision_aware_optimizer the
// shards keep the model's storage (model/optim_lp.c): bf16 moments, and with store_param_remainders 16-bit
// remainders instead of fp32 masters (6 bytes per parameter / world size at the least). Checkpoints hold the whole state in
// model order (gathered at save), so any world size, with or without ZeRO-1, resumes from them.
#pragma once
#include <stddef.h>

#include "../model/gdn.h"
#include "buckets.h"
#include "dist.h"

typedef struct {
    Buckets *bk;        // the buckets it shards (zero_init sets their offs)
    int npieces;        // this rank's shard of each bucket, in bucket order (some may be empty)
    size_t *lo, *hi;    // [npieces] its ranges of the flat parameter vector
    size_t *at;         // [npieces] where each starts in the moments below
    size_t n;           // elements owned
    void *m, *v;        // AdamW moments of the owned elements (backend memory), the pieces back to back: fp32, or
                        //   in act dtype at bf16 precision (use_precision_aware_optimizer: the model's adam_lp)
    size_t esz_m, esz_v; // their element bytes
    float *master;      // bf16 backends: the fp32 masters of the owned elements, likewise (NULL on fp32 ones)
    uint16_t *rem;      // instead, with store_param_remainders: their low 16 bits (the high half is the act copy;
                        //   the fp32-read tensors' masters are the model's small, updated in place by the owner)
    float *small_tmp;   // with rem: refresh_small's staging [model nsmall_elems]
    AdamwPlan plan;     // zero_step's multi-tensor AdamW over the owned runs, built on its first call
} Zero;

// Shards each bucket of bk (64-aligned starts), takes this rank's share of the model's moments (set from a
// checkpoint or zero) and frees the full ones.
void zero_init(Zero *z, Model *m, Buckets *bk, const Dist *d);
// After buckets_finish (the reduce-scatter): the global grad norm (for the clip and the NaN check, before
// any update): each element's square counted once, by its owner; the owners' sums added in rank order.
double zero_grad_norm(Zero *z, Model *m, Dist *d);
// AdamW on the owned elements (one multi-tensor call; gscale from the host, uploaded to the backend), then the
// all-gather of the weights (buckets_gather: maybe still in flight on return, the next forward waits for it).
void zero_step(Zero *z, Model *m, Dist *d, float lr, int step, float gscale);
// The whole fp32 weights into host [P] on every rank (a collective when the masters are sharded; then it
// uses the gradient buffer as scratch; no all-gather may be in flight).
void zero_get_params(Zero *z, Model *m, Dist *d, float *host);
// The whole moments into host hm, hv [P] on every rank (a collective; uses the gradient buffer as scratch;
// no all-gather may be in flight: buckets_gather_wait first).
void zero_get_optim(Zero *z, Model *m, Dist *d, float *hm, float *hv);
void zero_free(Zero *z, Model *m);
