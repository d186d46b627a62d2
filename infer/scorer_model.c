// scorer_model.c: the Scorer (eval/scorer.h) for a loaded GDN model. Requests are run in batches padded on
// the right to the longest (a causal model's earlier positions do not see the padding); only the
// continuation rows' logits are computed.
#include <stdlib.h>
#include <string.h>

#include "../eval/scorer.h"
#include "../model/gdn.h"
#include "../io/model_load.h"
#include "../util/common.h"

typedef struct {
    Model *m;
    int batch;
} ModelScorer;

// Each batch: one forward, then the continuation rows' log-probabilities and argmaxes computed on the
// backend (model_score_rows): only two floats/ints per scored token come back.
static int score_batch(void *ctx, const LLRequest *reqs, int nreq, double *ll, int *greedy) {
    ModelScorer *ms = ctx;
    Model *m = ms->m;
    for (int r0 = 0; r0 < nreq; r0 += ms->batch) {
        int nb = nreq - r0 < ms->batch ? nreq - r0 : ms->batch, T = 1, rows = 0;
        for (int i = 0; i < nb; i++) {
            const LLRequest *q = &reqs[r0 + i];
            if (q->n < 2 || q->cont_len < 1 || q->cont_len >= q->n)
                die("scorer: request %d has %d tokens and %d to score (need 1 <= scored < tokens)", r0 + i, q->n, q->cont_len);
            if (q->n - 1 > T) T = q->n - 1;
            rows += q->cont_len;
        }
        int32_t *in = xcalloc((size_t)nb * T, sizeof(int32_t)); // padding with id 0: never read back
        int32_t *row = xmalloc((size_t)rows * sizeof(int32_t)), *tgt = xmalloc((size_t)rows * sizeof(int32_t));
        int32_t *best = xmalloc((size_t)rows * sizeof(int32_t));
        float *lp = xmalloc((size_t)rows * sizeof(float));
        int k = 0;
        for (int i = 0; i < nb; i++) {
            const LLRequest *q = &reqs[r0 + i];
            memcpy(in + (size_t)i * T, q->tokens, (size_t)(q->n - 1) * 4);
            int first = q->n - 1 - q->cont_len; // row predicting the first continuation token
            for (int j = 0; j < q->cont_len; j++, k++) {
                row[k] = i * T + first + j;
                tgt[k] = q->tokens[first + 1 + j];
            }
        }
        model_forward(m, in, nb, T);
        model_score_rows(m, row, tgt, rows, lp, best);
        k = 0;
        for (int i = 0; i < nb; i++) {
            double sum = 0;
            int all = 1;
            for (int j = 0; j < reqs[r0 + i].cont_len; j++, k++) {
                sum += lp[k];
                all &= best[k] == tgt[k];
            }
            ll[r0 + i] = sum;
            greedy[r0 + i] = all;
        }
        free(in); free(row); free(tgt); free(best); free(lp);
    }
    return 0;
}

int eval_open_scorer(const char *load, const char *device, Scorer *out, char *err, size_t errlen) {
    Model *m = model_open(load, device, NULL, err, errlen);
    if (!m) return -1;
    ModelScorer *ms = xcalloc(1, sizeof *ms);
    ms->m = m;
    ms->batch = m->be->eval_batch; // GPU: the whole call (--batch-size) in one forward
    out->ctx = ms;
    out->max_length = 2048; // FLA GatedDeltaNetConfig max_position_embeddings, which lm-eval uses
    out->score = score_batch;
    return 0;
}
