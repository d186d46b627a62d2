// backend_profile.c: `gdn bench --profile`: a copy of a backend's op table whose compute and copy entries
// time every call between two timestamps of the backend's clock (backend.h mark / mark_ms: CUDA events on its
// stream, the wall clock on the CPU), keyed by op name (GEMMs also by weight shape, which names their role).
// The model is unchanged: it is handed this table instead of the backend's. Off (the plain table) it costs
// nothing; on, every recorded call adds two timestamps and nothing else: no sync, so results are the same bits.
#include "backend_profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/common.h"

// Every timed entry: X(name, (parameters), (arguments), shape a, shape b). GEMM rows are split by the weight's
// [N, K] (shape a x b); other ops by name only (0, 0). Entries not listed are forwarded untouched (alloc, free,
// sync, graphs, collectives, the clock itself).
#define PROFILED_OPS(X)                                                                                             \
    X(memcpy_h2d, (void *dst, const void *src, size_t bytes), (dst, src, bytes), 0, 0)                              \
    X(memcpy_d2h, (void *dst, const void *src, size_t bytes), (dst, src, bytes), 0, 0)                              \
    X(memcpy_d2d, (void *dst, const void *src, size_t bytes), (dst, src, bytes), 0, 0)                              \
    X(memset0, (void *p, size_t bytes), (p, bytes), 0, 0)                                                           \
    X(to_act, (void *dst, const float *src, size_t n), (dst, src, n), 0, 0)                                         \
    X(from_act, (float *dst, const void *src, size_t n), (dst, src, n), 0, 0)                                       \
    X(embedding_fwd, (void *x, const int32_t *ids, const void *E, int N, int h), (x, ids, E, N, h), 0, 0)           \
    X(embedding_bwd, (float *dE, const void *dx, const int32_t *ids, int N, int h, int V), (dE, dx, ids, N, h, V),  \
      0, 0)                                                                                                         \
    X(rmsnorm_fwd,                                                                                                  \
      (void *y, float *rstd, void *s_out, const void *x, const void *resid, const float *w, int N, int h, float eps), \
      (y, rstd, s_out, x, resid, w, N, h, eps), 0, 0)                                                               \
    X(rmsnorm_bwd,                                                                                                  \
      (void *ds, float *dw, const void *dy, const void *s, const float *rstd, const float *w, const void *dres, int N, \
       int h),                                                                                                      \
      (ds, dw, dy, s, rstd, w, dres, N, h), 0, 0)                                                                   \
    X(matmul_fwd, (void *y, int ldy, const void *x, int ldx, const void *W, int M, int N, int K, int accumulate),    \
      (y, ldy, x, ldx, W, M, N, K, accumulate), N, K)                                                               \
    X(matmul_bwd,                                                                                                   \
      (void *dx, int lddx, float *dW, const void *dy, int lddy, const void *x, int ldx, const void *W, int M, int N,  \
       int K, int accumulate_dx),                                                                                   \
      (dx, lddx, dW, dy, lddy, x, ldx, W, M, N, K, accumulate_dx), N, K)                                            \
    X(matmul_bias_fwd,                                                                                              \
      (void *y, int ldy, const void *x, int ldx, const void *W, const void *bias, int M, int N, int K),             \
      (y, ldy, x, ldx, W, bias, M, N, K), N, K)                                                                     \
    X(conv_silu_fwd,                                                                                                \
      (void *y, int ldy, const void *x, int ldx, const float *w, const float *state_in, float *state_out, int B,     \
       int T, int D, int K, const int32_t *doc_start),                                                              \
      (y, ldy, x, ldx, w, state_in, state_out, B, T, D, K, doc_start), 0, 0)                                        \
    X(conv_silu_bwd,                                                                                                \
      (void *dx, int lddx, float *dw, const void *dy, int lddy, const void *x, int ldx, const float *w, int B, int T, \
       int D, int K, const int32_t *doc_start),                                                                     \
      (dx, lddx, dw, dy, lddy, x, ldx, w, B, T, D, K, doc_start), 0, 0)                                             \
    X(l2norm_fwd, (void *y, int ldy, float *rstd, const void *x, int ldx, int N, int heads, int d),                 \
      (y, ldy, rstd, x, ldx, N, heads, d), 0, 0)                                                                    \
    X(l2norm_bwd,                                                                                                   \
      (void *dx, int lddx, const void *dy, int lddy, const void *y, int ldy, const float *rstd, int N, int heads,    \
       int d),                                                                                                      \
      (dx, lddx, dy, lddy, y, ldy, rstd, N, heads, d), 0, 0)                                                        \
    X(gate_fwd,                                                                                                     \
      (float *beta, float *gamma, const void *b, const void *a, int ld, const float *A_log, const float *dt_bias,    \
       int N, int HV),                                                                                              \
      (beta, gamma, b, a, ld, A_log, dt_bias, N, HV), 0, 0)                                                         \
    X(gate_bwd,                                                                                                     \
      (void *db, void *da, int ld, float *dA_log, float *ddt_bias, const float *dbeta, const float *dgamma,          \
       const void *b, const void *a, const float *A_log, const float *dt_bias, int N, int HV),                      \
      (db, da, ld, dA_log, ddt_bias, dbeta, dgamma, b, a, A_log, dt_bias, N, HV), 0, 0)                             \
    X(delta_rule_fwd, (const DeltaRuleArgs *a, void *o, int ldo, float *state), (a, o, ldo, state), 0, 0)           \
    X(delta_rule_bwd, (const DeltaRuleArgs *a, const void *do_, int lddo, const DeltaRuleGrads *g),                 \
      (a, do_, lddo, g), 0, 0)                                                                                      \
    X(doc_starts, (int32_t *doc_start, const int32_t *ids, int B, int T, int32_t eod), (doc_start, ids, B, T, eod), \
      0, 0)                                                                                                         \
    X(gated_rmsnorm_fwd,                                                                                            \
      (void *y, int ldy, float *rstd, const void *o, int ldo, const void *z, int ldz, const float *w, int N, int HV,  \
       int dv, float eps),                                                                                          \
      (y, ldy, rstd, o, ldo, z, ldz, w, N, HV, dv, eps), 0, 0)                                                      \
    X(gated_rmsnorm_bwd,                                                                                            \
      (void *do_, int lddo, void *dz, int lddz, float *dw, const void *dy, int lddy, const void *o, int ldo,         \
       const void *z, int ldz, const float *rstd, const float *w, int N, int HV, int dv),                           \
      (do_, lddo, dz, lddz, dw, dy, lddy, o, ldo, z, ldz, rstd, w, N, HV, dv), 0, 0)                                \
    X(state_reset_at_eod, (float *state, size_t row, const int32_t *ids, int B, int T, int32_t eod),               \
      (state, row, ids, B, T, eod), 0, 0)                                                                           \
    X(gdn_decode_fwd,                                                                                               \
      (void *y, int ldy, const void *P, int ldp, const float *conv_w, float *conv_state, float *S,                   \
       const float *A_log, const float *dt_bias, const float *norm_w, const int32_t *ids, int32_t eod, int B, int H, \
       int HV, int dk, int dv, int K, float eps),                                                                   \
      (y, ldy, P, ldp, conv_w, conv_state, S, A_log, dt_bias, norm_w, ids, eod, B, H, HV, dk, dv, K, eps), 0, 0)    \
    X(rmsnorm_matmul_fwd,                                                                                           \
      (void *y, int ldy, void *s_out, const void *x, const void *resid, const float *nw, const void *W, int M,      \
       int N, int K, float eps),                                                                                    \
      (y, ldy, s_out, x, resid, nw, W, M, N, K, eps), N, K)                                                         \
    X(swiglu_matmul_fwd, (void *y, int ldy, const void *gu, const void *W, int M, int N, int K),                    \
      (y, ldy, gu, W, M, N, K), N, K)                                                                               \
    X(rmsnorm_matmul_swiglu_fwd,                                                                                    \
      (void *h, void *s_out, const void *x, const void *resid, const float *nw, const void *W, int M, int F, int K, \
       float eps),                                                                                                  \
      (h, s_out, x, resid, nw, W, M, F, K, eps), 2 * F, K)                                                          \
    X(gdn_decode_block_fwd, (const GdnDecodeBlockArgs *a), (a), 0, 0)                                                \
    X(matmul_swiglu_fwd, (void *gu, void *h, const void *x, int ldx, const void *W, int M, int F, int K),            \
      (gu, h, x, ldx, W, M, F, K), 2 * F, K)                                                                        \
    X(matmul_swiglu_bwd,                                                                                            \
      (void *dgu, void *y, void *dh, const void *dy, int lddy, const void *W, const void *gu, int M, int F, int K),  \
      (dgu, y, dh, dy, lddy, W, gu, M, F, K), K, F)                                                                 \
    X(attn_qkv_fwd,                                                                                                 \
      (void *Q, void *K, void *V, int kv_bstride, const void *P, int ldp, const float *bias, const int32_t *pos,     \
       int B, int T, int Ha, int Hkv, int d, float theta, const int32_t *doc_start),                                \
      (Q, K, V, kv_bstride, P, ldp, bias, pos, B, T, Ha, Hkv, d, theta, doc_start), 0, 0)                           \
    X(attn_qkv_bwd,                                                                                                 \
      (void *dP, int lddp, float *dbias, const void *dQ, const void *dK, const void *dV, int B, int T, int Ha,       \
       int Hkv, int d, float theta, const int32_t *doc_start),                                                      \
      (dP, lddp, dbias, dQ, dK, dV, B, T, Ha, Hkv, d, theta, doc_start), 0, 0)                                      \
    X(attn_fwd,                                                                                                     \
      (void *O, float *lse, const void *Q, const void *K, const void *V, int kv_bstride, const int32_t *pos, int B,  \
       int T, int Ha, int Hkv, int d, int window, float scale, const int32_t *doc_start),                           \
      (O, lse, Q, K, V, kv_bstride, pos, B, T, Ha, Hkv, d, window, scale, doc_start), 0, 0)                         \
    X(attn_bwd,                                                                                                     \
      (void *dQ, void *dK, void *dV, const void *dO, const void *Q, const void *K, const void *V, const void *O,     \
       const float *lse, int B, int T, int Ha, int Hkv, int d, int window, float scale, const int32_t *doc_start),  \
      (dQ, dK, dV, dO, Q, K, V, O, lse, B, T, Ha, Hkv, d, window, scale, doc_start), 0, 0)                          \
    X(pos_advance, (int32_t *pos, int n), (pos, n), 0, 0)                                                           \
    X(swiglu_fwd, (void *y, const void *gu, int N, int F), (y, gu, N, F), 0, 0)                                     \
    X(swiglu_bwd, (void *dgu, void *y, const void *dy, const void *gu, int N, int F), (dgu, y, dy, gu, N, F), 0, 0) \
    X(lmhead_ce,                                                                                                    \
      (float *losses, void *dy, float *dE, const void *y, const void *E, const int32_t *targets, int N, int h, int V, \
       const float *loss_scale, void *scratch, size_t scratch_bytes),                                               \
      (losses, dy, dE, y, E, targets, N, h, V, loss_scale, scratch, scratch_bytes), 0, 0)                           \
    X(lmhead_logits, (float *logits, const void *y, const void *E, int N, int h, int V), (logits, y, E, N, h, V), 0, \
      0)                                                                                                            \
    X(logits_stats,                                                                                                 \
      (int32_t *argmax, float *logprob, const float *logits, const int32_t *targets, int rows, int V),              \
      (argmax, logprob, logits, targets, rows, V), 0, 0)                                                            \
    X(lmhead_norm_argmax,                                                                                           \
      (int32_t *argmax, float *logits, void *y, float *rstd, void *s_out, const void *x, const void *resid,          \
       const float *nw, const void *E, int M, int h, int V, float eps, int32_t *ring, int32_t *ring_count,           \
       int ring_k),                                                                                                 \
      (argmax, logits, y, rstd, s_out, x, resid, nw, E, M, h, V, eps, ring, ring_count, ring_k), 0, 0)              \
    X(token_ring_push, (int32_t *ring, int32_t *count, const int32_t *tok, int B, int K), (ring, count, tok, B, K), 0, \
      0)                                                                                                            \
    X(sum, (float *out, const float *x, size_t n), (out, x, n), 0, 0)                                               \
    X(sumsq, (float *out, const float *x, size_t n), (out, x, n), 0, 0)                                             \
    X(adamw,                                                                                                        \
      (float *p, void *p_act, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2, float eps, \
       float wd, int step, float gscale),                                                                           \
      (p, p_act, g, m, v, n, lr, b1, b2, eps, wd, step, gscale), 0, 0)                                              \
    X(adamw_multi,                                                                                                  \
      (const AdamwChunk *chunks, int nchunks, float *p, void *p_act, const float *g, float *m, float *v, float lr,  \
       float b1, float b2, float eps, float wd, int step, const float *gscale),                                     \
      (chunks, nchunks, p, p_act, g, m, v, lr, b1, b2, eps, wd, step, gscale), 0, 0)                                \
    X(adamw_multi_lp,                                                                                               \
      (const AdamwChunk *chunks, int nchunks, float *p, uint16_t *rem, void *p_act, const float *g, void *m, void *v, \
       int lp, float lr, float b1, float b2, float eps, float wd, int step, const float *gscale),                    \
      (chunks, nchunks, p, rem, p_act, g, m, v, lp, lr, b1, b2, eps, wd, step, gscale), 0, 0)                       \
    X(clip_scale, (float *scale, const float *sumsq, float max_norm), (scale, sumsq, max_norm), 0, 0)

enum { MAX_ROWS = 512, FLUSH_MARKS = 1 << 16 }; // rows: op x shape; marks kept before a flush (sync + read)

typedef struct {
    const char *op;
    int a, b;            // GEMM weight shape [a, b] (0, 0: none)
    long calls;
    double ms;
} Row;

static struct {
    Backend inner, table; // the wrapped backend's entries; the table handed to the model
    int on, depth;        // recording; nesting depth of the call in progress (only the outermost is timed)
    int nmarks;           // timestamps taken since the last flush (pairs: 2k begin, 2k+1 end)
    int *pending;         // [FLUSH_MARKS / 2] the row of each pair
    Row rows[MAX_ROWS];
    int nrows;
    int no_clock;         // the backend's clock said < 0 (the emulator)
    int midrun_flushes;   // pool full while recording: each flush synchronised inside the timed steps
} g_prof;

static int row_of(const char *op, int a, int b) {
    for (int i = 0; i < g_prof.nrows; i++)
        if (g_prof.rows[i].op == op && g_prof.rows[i].a == a && g_prof.rows[i].b == b) return i;
    if (g_prof.nrows == MAX_ROWS) die("backend profile: more than %d (op, shape) rows", MAX_ROWS);
    g_prof.rows[g_prof.nrows] = (Row){op, a, b, 0, 0};
    return g_prof.nrows++;
}

// Reads the pairs taken so far into their rows (waits for the backend), and starts the pool over.
static void flush(void) {
    if (!g_prof.nmarks) return;
    g_prof.inner.sync();
    for (int k = 0; k < g_prof.nmarks / 2; k++) {
        double ms = g_prof.inner.mark_ms(2 * k, 2 * k + 1);
        if (ms < 0) g_prof.no_clock = 1;
        else g_prof.rows[g_prof.pending[k]].ms += ms;
    }
    g_prof.nmarks = 0;
}

static int begin(void) { // returns whether this call is timed (recording, and not nested in a timed one)
    if (!g_prof.on || g_prof.depth++) return 0;
    if (g_prof.nmarks + 2 > FLUSH_MARKS) flush(), g_prof.midrun_flushes++;
    g_prof.inner.mark(g_prof.nmarks);
    return 1;
}
static void end(int timed, const char *op, int a, int b) {
    if (!g_prof.on) return;
    g_prof.depth--;
    if (!timed) return;
    g_prof.inner.mark(g_prof.nmarks + 1); // first: the row lookup is host time, not the op's (the CPU's wall clock)
    int r = row_of(op, a, b);
    g_prof.rows[r].calls++;
    g_prof.pending[g_prof.nmarks / 2] = r;
    g_prof.nmarks += 2;
}

#define WRAP(name, params, args, sa, sb)                                                                            \
    static void prof_##name params {                                                                                \
        int timed_ = begin();                                                                                       \
        g_prof.inner.name args;                                                                                          \
        end(timed_, #name, timed_ ? (sa) : 0, timed_ ? (sb) : 0);                                                   \
    }
PROFILED_OPS(WRAP)
#undef WRAP

const Backend *backend_profiled(const Backend *be) {
    if (g_prof.table.name) die("backend_profiled: one profiled backend per process");
    if (!be->mark || !be->mark_ms) die("the %s backend has no clock for --profile", be->name);
    g_prof.inner = *be;
    g_prof.table = *be;
    g_prof.pending = xmalloc(FLUSH_MARKS / 2 * sizeof(int));
#define INSTALL(name, params, args, sa, sb) \
    if (be->name) g_prof.table.name = prof_##name;
    PROFILED_OPS(INSTALL)
#undef INSTALL
    // timestamps may not be taken inside a capture: the profiled model runs its ops one by one
    g_prof.table.capture_begin = NULL;
    return &g_prof.table;
}

void backend_profile_record(int on) {
    if (!on) flush();
    // the whole timestamp pool now (CUDA: FLUSH_MARKS events), so that no step pays for growing it
    else if (!g_prof.on) g_prof.inner.mark(FLUSH_MARKS - 1);
    g_prof.on = on;
}

static int by_time(const void *x, const void *y) {
    double a = ((const Row *)x)->ms, b = ((const Row *)y)->ms;
    return a < b ? 1 : a > b ? -1 : 0;
}

void backend_profile_report(FILE *out, int steps, double step_ms) {
    flush();
    if (g_prof.no_clock) {
        fprintf(out, "profile: the %s backend has no clock here (emulator): calls per step only\n", g_prof.inner.name);
    }
    qsort(g_prof.rows, (size_t)g_prof.nrows, sizeof(Row), by_time);
    double total = 0;
    for (int i = 0; i < g_prof.nrows; i++) total += g_prof.rows[i].ms;
    fprintf(out, "profile: %d timed steps, %s clock (%s), per step:\n", steps, g_prof.inner.name,
            strcmp(g_prof.inner.name, "cpu") ? "events on the stream" : "wall");
    fprintf(out, "  %-32s %10s %10s %7s\n", "op", "calls", "ms", "%step");
    for (int i = 0; i < g_prof.nrows; i++) {
        const Row *r = &g_prof.rows[i];
        char label[64];
        if (r->a) snprintf(label, sizeof label, "%s [%dx%d]", r->op, r->a, r->b);
        else snprintf(label, sizeof label, "%s", r->op);
        fprintf(out, "  %-32s %10.1f %10.3f %6.1f%%\n", label, (double)r->calls / steps, r->ms / steps,
                step_ms > 0 ? 100.0 * r->ms / steps / step_ms : 0.0);
    }
    fprintf(out, "  %-32s %10s %10.3f %6.1f%%\n", "sum of ops", "", total / steps,
            step_ms > 0 ? 100.0 * total / steps / step_ms : 0.0);
    fprintf(out, "  %-32s %10s %10.3f %6.1f%%\n", "step (wall)", "", step_ms, 100.0);
    fprintf(out, "  %-32s %10s %10.3f %6.1f%%\n", "gap (launch gaps, host time)", "", step_ms - total / steps,
            step_ms > 0 ? 100.0 * (step_ms - total / steps) / step_ms : 0.0);
    if (g_prof.midrun_flushes)
        fprintf(out, "profile: %d synchronisations inside the timed steps (more than %d calls): the gap includes them; "
                "fewer --steps avoid them\n", g_prof.midrun_flushes, FLUSH_MARKS / 2);
}
