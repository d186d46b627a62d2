// validate.h: validation during training (spec train.md §2): eval_iters global batches of the valid (or
// test) split, forward only, token-weighted mean loss over every rank's tokens.
#pragma once
#include <stdint.h>
#include <stdio.h>

#include "../data/blend.h"
#include "../model/gdn.h"
#include "dist.h"
#include "runlog.h"

typedef struct {
    double loss, ppl;       // ppl = exp(min(20, loss)), as Megatron prints it
    double tokens;          // target tokens evaluated, all ranks
    uint64_t first, count;  // the split's items [first, first + count)
    double seconds;
} EvalResult;

// Evaluates eval_iters global batches of `split` from item *consumed on (each rank its share, as in
// training); *consumed advances by eval_iters * gbs unless eval_same_samples.
void validate_run(Model *m, Dist *dist, const Config *c, Datasets *d, int split, uint64_t *consumed, EvalResult *r);
// The hooks of the training loop. After iteration `it`: validates when eval_interval divides it and there is a
// valid set; returns the seconds spent. At the end of training (not after a stop): the valid, then the test set.
// rl: the lead rank's run log (NULL elsewhere: its metrics JSONL, TensorBoard tags, summary); lead prints.
double validate_interval(Model *m, Dist *dist, const Config *c, Datasets *d, long it, uint64_t *consumed, RunLog *rl,
                         int lead);
void validate_at_end(Model *m, Dist *dist, const Config *c, Datasets *d, uint64_t *consumed, RunLog *rl, int lead);
// Megatron's lines (lead rank) and one metrics row: {"iteration": N, "eval": "valid"|"test", "<set>_loss": L,
// "<set>_ppl": P, "<set>_tokens": n, "<set>_first_sample": a, "<set>_samples": k, "eval_seconds": s, "final": b}.
void validate_report(const char *prefix, int split, long it, int final, const EvalResult *r, FILE *metrics);
// The token-weighted loss of items [first, first+count) of a split, micro-batches of mbs rows, one rank:
// what `gdn score --set` prints (the same sum, in the same order, as one rank's validation).
void validate_items(Model *m, const Config *c, Datasets *d, int split, uint64_t first, uint64_t count, int mbs,
                    double *sum, double *tokens);
