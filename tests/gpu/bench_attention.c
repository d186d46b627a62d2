// bench_attention.c: TFLOP/s of the hybrid blocks' attention on the CUDA backend (bf16), forward and
// forward + backward, causal, at T = 2048 and 8192 and head dim 64 and 128 with B*T = 16k tokens and
// Ha*d = 2048 (the setup of spec hybrid.md §4.5's H200 table), FLOPs counted as FlashAttention's
// benchmarks do (§4.4): fwd = 4 B T^2 Ha d / 2, fwd+bwd = 3.5 x fwd. Prints one JSON line per shape.
//   bench_attention [--reps N] [--hkv-ratio G] [--d D] [--doc-len L]
//     GQA: Hkv = Ha / G (default 1); --d: only head dim D (64 or 128); --doc-len: rows packed with documents of L
//     tokens (reset_state_at_eod's mask; FLOPs still counted as one causal row, so the rate shows the skipping).
//     GDN_CUDA_ATTN=simple times the CUDA-core kernels instead.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/backend.h"
#include "util/common.h"

typedef struct {
    const Backend *be;
    void *Q, *K, *V, *O, *dO, *dQ, *dK, *dV;
    float *lse;
    int32_t *ds; // packed documents (--doc-len), else NULL
    int B, T, Ha, Hkv, d;
} Ctx;

static void run_fwd(void *p) {
    Ctx *c = p;
    c->be->attn_fwd(c->O, c->lse, c->Q, c->K, c->V, c->T, NULL, c->B, c->T, c->Ha, c->Hkv, c->d, 0,
                    1.0f / sqrtf((float)c->d), c->ds);
}
static void run_fwd_bwd(void *p) {
    Ctx *c = p;
    run_fwd(p);
    c->be->attn_bwd(c->dQ, c->dK, c->dV, c->dO, c->Q, c->K, c->V, c->O, c->lse, c->B, c->T, c->Ha, c->Hkv, c->d, 0,
                    1.0f / sqrtf((float)c->d), c->ds);
}

int main(int argc, char **argv) {
    if (arg_is_help(argc, argv)) {
        printf("usage: bench_attention [--reps N] [--hkv-ratio G] [--d 64|128] [--doc-len L]\n");
        return 0;
    }
    const char *r = arg_get(argc, argv, "--reps"), *g = arg_get(argc, argv, "--hkv-ratio");
    const char *dsel = arg_get(argc, argv, "--d"), *dl = arg_get(argc, argv, "--doc-len");
    int reps = r ? atoi(r) : 10, G = g ? atoi(g) : 1, only_d = dsel ? atoi(dsel) : 0, doc_len = dl ? atoi(dl) : 0;
    if (only_d && only_d != 64 && only_d != 128) die("bench_attention: --d %d: expected 64 or 128", only_d);
    if (doc_len < 0) die("bench_attention: --doc-len %d: expected a positive length", doc_len);
    char err[256];
    const Backend *be = backend_cuda(1, err, sizeof err);
    if (!be) die("no CUDA backend: %s", err);
    const int Ts[2] = {2048, 8192}, ds[2] = {64, 128};
    for (int ti = 0; ti < 2; ti++)
        for (int di = 0; di < 2; di++) {
            if (only_d && ds[di] != only_d) continue;
            Ctx c;
            memset(&c, 0, sizeof c);
            c.be = be;
            c.T = Ts[ti], c.d = ds[di], c.B = 16384 / c.T, c.Ha = 2048 / c.d, c.Hkv = c.Ha / G;
            size_t N = (size_t)c.B * c.T, nq = N * c.Ha * c.d, nk = N * c.Hkv * c.d;
            float *h = xmalloc(nq * sizeof(float));
            uint64_t s = 7;
            for (size_t i = 0; i < nq; i++) {
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                h[i] = (float)((s >> 40) * 0x1p-24 - 0.5);
            }
            float *hd = be->alloc(nq * sizeof(float)); // to_act converts from backend memory
            be->memcpy_h2d(hd, h, nq * sizeof(float));
            void **bufs[] = {&c.Q, &c.O, &c.dO, &c.dQ, &c.K, &c.V, &c.dK, &c.dV};
            for (int i = 0; i < 8; i++) {
                size_t n = i < 4 ? nq : nk;
                *bufs[i] = be->alloc(n * 2);
                be->to_act(*bufs[i], hd, n);
            }
            be->free(hd);
            free(h);
            c.lse = be->alloc((size_t)c.B * c.Ha * c.T * sizeof(float));
            if (doc_len) { // doc_start[t] = t rounded down to a multiple of doc_len, in every row
                int32_t *dsh = xmalloc(N * sizeof(int32_t));
                for (size_t n = 0; n < N; n++) dsh[n] = (int32_t)((n % c.T) / doc_len * doc_len);
                c.ds = be->alloc(N * sizeof(int32_t));
                be->memcpy_h2d(c.ds, dsh, N * sizeof(int32_t));
                free(dsh);
            }
            double fwd_flop = 4.0 * c.B * (double)c.T * c.T * c.Ha * c.d / 2;
            be->time_ms(run_fwd_bwd, &c, 1); // warm-up (smem opt-in, first launches)
            double ms_f = be->time_ms(run_fwd, &c, reps), ms_fb = be->time_ms(run_fwd_bwd, &c, reps);
            printf("{\"T\": %d, \"d\": %d, \"B\": %d, \"Ha\": %d, \"Hkv\": %d, \"doc_len\": %d, \"fwd_ms\": %.3f, "
                   "\"fwd_tflops\": %.1f, \"fwd_bwd_ms\": %.3f, \"fwd_bwd_tflops\": %.1f}\n",
                   c.T, c.d, c.B, c.Ha, c.Hkv, doc_len, ms_f, fwd_flop / ms_f / 1e9, ms_fb, 3.5 * fwd_flop / ms_fb / 1e9);
            fflush(stdout);
            for (int i = 0; i < 8; i++) be->free(*bufs[i]);
            be->free(c.lse);
            if (c.ds) be->free(c.ds);
        }
    return 0;
}
