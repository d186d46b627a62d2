// scorer_model.h: the model side of `gdn eval`, implemented outside eval/ (the model / inference part).
// eval/eval.c calls it to turn --load/--device into a Scorer (eval/scorer.h). Declared weak so that `gdn`
// links without it; cmd_eval then stops with "model loading not built into this binary".
// Contract (spec eval.md §1.4-1.6): score() returns 0 on success; for each request it runs the model on
// tokens[0 .. n-1) (n <= max_length + 1, right-padding a batch is fine) and fills ll[i] = sum over the last
// cont_len positions of log_softmax(logits)[next token] over the full output vocab, greedy[i] = every such
// token is the argmax (ties: lowest id). To match lm-eval on a bf16 model: per-token log-probs rounded to
// bf16, summed in fp32, the sum rounded to bf16. max_length = the checkpoint's max_position_embeddings
// (FLA default 2048).
#pragma once
#include <stddef.h>

#include "eval/scorer.h"

#ifdef __cplusplus
extern "C" {
#endif

// Loads checkpoint `load` on `device` ("cpu" or "cuda") into *out. -1 + err (file, what is wrong).
__attribute__((weak)) int eval_open_scorer(const char *load, const char *device, Scorer *out, char *err,
                                           size_t errlen);

#ifdef __cplusplus
}
#endif
