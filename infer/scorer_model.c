// scorer_model.c: the Scorer (eval/scorer.h) for a loaded GDN model. Requests are run in batches padded on
// the right to the longest (a causal model's earlier positions do not see the padding); only the
// continuation rows' logits are computed.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../eval/scorer.h"
#include "../model/gdn.h"
#include "../model/model_load.h"
#include "../util/common.h"

typedef struct {
    Model *m;
    int batch;
    float *logits; // [max continuation, V]
    int cap_rows;
} ModelScorer;

static int score_batch(void *ctx, const LLRequest *reqs, int nreq, double *ll, int *greedy) {
    ModelScorer *ms = ctx;
    Model *m = ms->m;
    int V = m->d.V;
    for (int r0 = 0; r0 < nreq; r0 += ms->batch) {
        int nb = nreq - r0 < ms->batch ? nreq - r0 : ms->batch, T = 1;
        for (int i = 0; i < nb; i++) {
            const LLRequest *q = &reqs[r0 + i];
            if (q->n < 2 || q->cont_len < 1 || q->cont_len >= q->n)
                die("scorer: request %d has %d tokens and %d to score (need 1 <= scored < tokens)", r0 + i, q->n, q->cont_len);
            if (q->n - 1 > T) T = q->n - 1;
        }
        int32_t *in = xcalloc((size_t)nb * T, sizeof(int32_t)); // padding with id 0: never read back
        for (int i = 0; i < nb; i++) memcpy(in + (size_t)i * T, reqs[r0 + i].tokens, (size_t)(reqs[r0 + i].n - 1) * 4);
        model_forward(m, in, nb, T);
        for (int i = 0; i < nb; i++) {
            const LLRequest *q = &reqs[r0 + i];
            int first = q->n - 1 - q->cont_len; // row predicting the first continuation token
            if (q->cont_len > ms->cap_rows) {
                ms->cap_rows = q->cont_len;
                ms->logits = xrealloc(ms->logits, (size_t)ms->cap_rows * V * sizeof(float));
            }
            model_logits(m, i * T + first, q->cont_len, ms->logits);
            double sum = 0;
            int all = 1;
            for (int j = 0; j < q->cont_len; j++) {
                const float *row = ms->logits + (size_t)j * V;
                int32_t target = q->tokens[first + 1 + j], best = 0;
                double mx = row[0];
                for (int v = 1; v < V; v++)
                    if (row[v] > row[best]) best = v;
                mx = row[best];
                double z = 0;
                for (int v = 0; v < V; v++) z += exp((double)row[v] - mx);
                sum += (double)row[target] - mx - log(z);
                all &= best == target;
            }
            ll[r0 + i] = sum;
            greedy[r0 + i] = all;
        }
        free(in);
    }
    return 0;
}

int eval_open_scorer(const char *load, const char *device, Scorer *out, char *err, size_t errlen) {
    Config c;
    float *params;
    if (model_load_any(load, &c, &params, err, errlen)) return -1;
    ModelScorer *ms = xcalloc(1, sizeof *ms);
    const Backend *be = backend_select(device ? device : "auto", c.precision[0] ? c.precision : "bf16");
    ms->m = model_create(&c, be, 0);
    model_set_params(ms->m, params);
    free(params);
    ms->batch = strcmp(be->name, "cpu") ? 16 : 4;
    out->ctx = ms;
    out->max_length = 2048; // FLA GatedDeltaNetConfig max_position_embeddings, which lm-eval uses
    out->score = score_batch;
    return 0;
}
