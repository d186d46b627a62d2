// scorer.h: what evaluation needs from a model: log-likelihoods of continuations.
#pragma once
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const int32_t *tokens; // context followed by continuation, already truncated to the model's max length
    int n;                 // tokens in `tokens`
    int cont_len;          // the last cont_len tokens are scored (1 <= cont_len < n, or == n with a prefix)
} LLRequest;

// Scores nreq requests (any batch size the scorer likes): ll[i] = sum of log p(token | previous tokens)
// over the continuation, greedy[i] = 1 if every continuation token is the argmax (ties: lowest id).
typedef struct Scorer {
    void *ctx;
    int max_length;
    int (*score)(void *ctx, const LLRequest *reqs, int nreq, double *ll, int *greedy);
} Scorer;

#ifdef __cplusplus
}
#endif
