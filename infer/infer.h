// infer.h: what generate and verify share: opening a model + tokenizer, prefill/decode, sampling.
#pragma once
#include <stdint.h>

#include "../data/tokenizer.h"
#include "../model/gdn.h"
#include "../util/args.h"

typedef struct {
    Model *m;
    Tokenizer *tok;
} InferModel;

// The options infer_open reads, for a command's ArgSpec list (util/args.h).
#define INFER_ARGS {"--load", ARG_STR, 0, 0}, {"--tokenizer", ARG_STR, 0, 0}, {"--device", ARG_STR, 0, 0}, \
                   {"--precision", ARG_STR, 0, 0}

// --load MODEL, --tokenizer PATH (default: MODEL/tokenizer.json, else .assets/llama3/tokenizer.json),
// --device, --precision. Dies with a clear message on failure.
void infer_open(InferModel *im, int argc, char **argv);
void infer_close(InferModel *im);

typedef struct {
    float temperature, top_p, repetition_penalty;
    int top_k, greedy;
    uint64_t rng;
} SamplerCfg;

// Picks the next token from logits[V] (modified in place). seen: ids to penalise (n of them).
int32_t sample_next(float *logits, int V, const SamplerCfg *sc, const int32_t *seen, int nseen, uint64_t *rng);
// Index of the largest logit; ties go to the lowest id (as torch.argmax).
int32_t argmax_logit(const float *logits, int V);
