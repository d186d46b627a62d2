// lmhead_ce.c: the tied lm head (logits = y . E^T) fused with cross-entropy (spec model.md §2.1
// steps 4-5), in blocks of rows so the [N, V] logits never exist whole (V = 128256 would need N*0.5 MB).
// Per block: logits = y_blk E^T (sgemm); per row max / log-sum-exp (sum in double); loss; then
// dlogits = (softmax - onehot) * loss_scale in place; dy_blk = dlogits E; dE += dlogits^T y_blk.
// dE is a reduction over tokens: blocks are fixed by N alone and added in block order, and cpu_gemm's
// results do not depend on the thread count, so it is deterministic.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_ops.h"

// Rows per block: as many as fit an 8 MB logits buffer, 64 to 1024 (64 for V >= 32768, so 32 MB at
// V = 128256). The blocking depends on V alone, so the order of the dE sum depends on nothing else.
static int ce_rows(int V) {
    int r = (int)((2u << 20) / (unsigned)V);
    return r < 64 ? 64 : r > 1024 ? 1024 : r;
}

void cpu_lmhead_ce(float *losses, void *dy_, float *dE, const void *y_, const void *E_, const int32_t *targets, int N,
                   int h, int V, const float *loss_scale_, void *scratch, size_t scratch_bytes) {
    (void)scratch, (void)scratch_bytes;
    CPU_REQUIRE(losses && y_ && E_ && targets, "lmhead_ce", "NULL pointer (losses, y, E, targets)");
    CPU_REQUIRE(!dy_ || loss_scale_, "lmhead_ce", "a gradient asked for without loss_scale");
    const float loss_scale = dy_ ? *loss_scale_ : 0.0f;
    CPU_REQUIRE(h > 0 && V > 0, "lmhead_ce", "bad shape h=%d V=%d", h, V);
    for (int n = 0; n < N; n++)
        if (targets[n] >= V)
            die("cpu backend, lmhead_ce: target id %d at row %d is outside the vocabulary [0, %d)", targets[n], n, V);
    float *dy = dy_;
    const float *y = y_, *E = E_;
    int blk = ce_rows(V);
    float *logits = xmalloc((size_t)(N < blk ? (N > 0 ? N : 1) : blk) * V * sizeof(float));
    for (int n0 = 0; n0 < N; n0 += blk) {
        int rows = N - n0 < blk ? N - n0 : blk;
        int any = 0;
        for (int r = 0; r < rows; r++) any |= targets[n0 + r] >= 0;
        if (!any) { // every target ignored: no loss, no gradient
            for (int r = 0; r < rows; r++) losses[n0 + r] = 0;
            if (dy) memset(dy + (size_t)n0 * h, 0, (size_t)rows * h * sizeof(float));
            continue;
        }
        const float *yb = y + (size_t)n0 * h;
        cpu_gemm(0, 1, rows, V, h, 1.0f, yb, h, E, h, 0.0f, logits, V);
#pragma omp parallel for schedule(static)
        for (int r = 0; r < rows; r++) {
            float *l = logits + (size_t)r * V;
            int tgt = targets[n0 + r];
            if (tgt < 0) {
                losses[n0 + r] = 0;
                if (dy) memset(l, 0, (size_t)V * sizeof(float));
                continue;
            }
            float mx = l[0];
            for (int c = 1; c < V; c++) mx = l[c] > mx ? l[c] : mx;
            double se = cpu_sum_exp(l, V, mx);
            double lse = mx + log(se);
            losses[n0 + r] = (float)(lse - l[tgt]);
            if (dy) {
                cpu_exp_scale(l, V, mx, (float)(1.0 / se) * loss_scale);
                l[tgt] -= loss_scale;
            }
        }
        if (dy) {
            cpu_gemm(0, 0, rows, h, V, 1.0f, logits, V, E, h, 0.0f, dy + (size_t)n0 * h, h);
            if (dE) cpu_gemm(1, 0, V, h, rows, 1.0f, logits, V, yb, h, 1.0f, dE, h);
        }
    }
    free(logits);
}

void cpu_lmhead_logits(float *logits, const void *y, const void *E, int N, int h, int V) {
    CPU_REQUIRE(logits && y && E, "lmhead_logits", "NULL pointer (logits, y, E)");
    if (N <= 0 || V <= 0) return;
    cpu_gemm(0, 1, N, V, h, 1.0f, y, h, E, h, 0.0f, logits, V);
}

// Max and log-sum-exp in double (the reference the CUDA kernel's fp32 tree is checked against).
void cpu_logits_stats(int32_t *argmax, float *logprob, const float *logits, const int32_t *targets, int rows, int V) {
    CPU_REQUIRE(argmax && logits && (!logprob || targets), "logits_stats", "NULL pointer (argmax, logits, targets)");
    CPU_REQUIRE(rows >= 0 && V > 0, "logits_stats", "bad shape rows=%d V=%d", rows, V);
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        const float *l = logits + (size_t)r * V;
        int32_t best = 0;
        for (int v = 1; v < V; v++)
            if (l[v] > l[best]) best = v;
        argmax[r] = best;
        if (!logprob) continue;
        int32_t t = targets[r];
        if (t < 0 || t >= V) die("cpu backend, logits_stats: target id %d at row %d is outside the vocabulary [0, %d)", t, r, V);
        double mx = l[best], z = 0;
        for (int v = 0; v < V; v++) z += exp((double)l[v] - mx);
        logprob[r] = (float)((double)l[t] - mx - log(z));
    }
}

void cpu_token_ring_push(int32_t *ring, int32_t *count, const int32_t *tok, int B, int K) {
    CPU_REQUIRE(ring && count && tok, "token_ring_push", "NULL pointer (ring, count, tok)");
    CPU_REQUIRE(B > 0 && K > 0 && count[0] >= 0, "token_ring_push", "bad shape B=%d K=%d or count %d", B, K, count[0]);
    memcpy(ring + (size_t)(count[0] % K) * B, tok, (size_t)B * sizeof(int32_t));
    count[0]++;
}
