// delta_rule_chunk.c: the gated delta rule in FLA's chunked WY/UT form, chunk C = 64, fp32 throughout
// (spec model.md §3.1 forward, §3.2 backward). This is the CPU twin of the CUDA kernels and the
// table's delta_rule_fwd/bwd; delta_rule_recurrent.c is the token-by-token reference it is tested
// against. Per (sequence b, v head j), q/k head i = j / (HV/H), chunk n of length Lc <= C:
//   G      = within-chunk inclusive cumsum of gamma;  Gam_ij = exp(G_i - G_j) (i >= j only)
//   A_ij   = beta_i (k_i . k_j) Gam_ij for i > j, else 0;  Tm = (I + A)^-1 (forward substitution)
//   W      = Tm diag(beta e^G) K;  U = Tm diag(beta) V
//   Vn     = U - W h_n                      (h_n: state at the chunk start, saved to h_save)
//   O      = s e^G (Q h_n) + s (Q K^T . Gam . M) Vn           (M: lower triangle incl. diagonal)
//   h_n+1  = e^{G_last} h_n + K^T (e^{G_last - G} . Vn)
// Only exponentials of non-positive differences are ever taken, and rows past Lc do not exist (all
// products run over Lc rows), so a partial last chunk needs no padding.
// Work is parallel over (b, v head); dq/dk of v heads that share a q/k head are summed in head order.
// Precision: storage and products are fp32, but G (the cumsum of gamma) and the terms of d gamma are
// kept in double. G reaches ~-300 inside a chunk, where fp32 leaves ~2e-5 relative error in every
// decay exp(G_i - G_j); and d gamma is a reverse cumsum of terms that mostly cancel. With both, the
// chunked form is as close to a double-precision evaluation as the recurrence (~3e-7 relative).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_ops.h"

enum { C = GDN_CHUNK };

// ---- small dense helpers (row-major, single thread; the caller is already parallel)

// Cm[M,N] (ldc) = (accumulate ? Cm : 0) + alpha * Am[M,K] (lda) . Bm[K,N] (ldb). Written as row axpys
// so the inner loop is contiguous.
static void gemm_nn(float *Cm, int ldc, const float *Am, int lda, const float *Bm, int ldb, int M, int N, int K,
                    float alpha, int accumulate) {
    for (int i = 0; i < M; i++) {
        float *c = Cm + (size_t)i * ldc;
        if (!accumulate)
            for (int j = 0; j < N; j++) c[j] = 0;
        for (int k = 0; k < K; k++) {
            float a = alpha * Am[(size_t)i * lda + k];
            if (a == 0) continue;
            const float *b = Bm + (size_t)k * ldb;
            for (int j = 0; j < N; j++) c[j] += a * b[j];
        }
    }
}

// dst[Cn, R] = src[R, Cn]^T
static void transpose(float *dst, int ldd, const float *src, int lds, int R, int Cn) {
    for (int r = 0; r < R; r++)
        for (int c = 0; c < Cn; c++) dst[(size_t)c * ldd + r] = src[(size_t)r * lds + c];
}

// Per-task scratch: one chunk's inputs and intermediates, each in its own buffer (a few hundred KB).
typedef struct {
    int dk, dv;
    float *Q, *K, *V;       // [C, dk], [C, dk], [C, dv]: the chunk's rows, gathered
    float *Kt;              // [dk, C]
    float *beta, *eG;       // [C]: beta, exp(G)
    double *G;              // [C]: cumsum of gamma, in double: exp(G_i - G_j) must not see its rounding
    float *dec;             // [C]: exp(G_last - G_i)
    float *Gam;             // [C, C]: exp(G_i - G_j) for i >= j, 0 above the diagonal
    float *KK, *A, *Tm;     // [C, C]: K K^T, the strictly lower A, (I + A)^-1
    float *Kb, *Vb;         // [C, dk] beta e^G K, [C, dv] beta V
    float *W, *U, *Vn;      // [C, dk], [C, dv], [C, dv]
    float *QK, *Sm;         // [C, C]: Q K^T; s (Q K^T) . Gam . M
    float *h;               // [dk, dv]: running state h_n
    // forward temporaries
    float *Og, *Qg, *Vd;    // [C, dv], [C, dk], [C, dv]
    // backward
    float *dS, *dSn;        // [dk, dv]: dL/d(state at chunk end), dL/dh_n
    float *dOc, *KdS, *Y;   // [C, dv]
    float *X, *bK, *dMK;    // [C, dk]
    float *hT, *dST;        // [dv, dk]
    float *VnT, *VbT;       // [dv, C]
    float *QgT, *WT, *KbT;  // [dk, C]
    float *SmT, *P, *PT, *TmT, *dT, *Z, *dA, *dM, *dMT; // [C, C]
    float *dQ, *dK, *dW;    // [C, dk]
    float *dQi, *dKi;       // [C, dk]: the intra-chunk parts P K and P^T Q of dQ and dK
    float *dV, *dVn;        // [C, dv]
    double *dG;             // [C]: d gamma, accumulated in double (see chunk_backward)
    float *dB;              // [C]
    float *mem;
} Work;

static void work_init(Work *w, int dk, int dv) {
    size_t cc = (size_t)C * C, ck = (size_t)C * dk, cv = (size_t)C * dv, kv = (size_t)dk * dv;
    size_t total = 8 * C + 15 * cc + 17 * ck + 13 * cv + 5 * kv;
    float *p = w->mem = xcalloc(total, sizeof(float));
    w->dk = dk, w->dv = dv;
#define TAKE(field, n) (w->field = p, p += (n))
    TAKE(beta, C), TAKE(eG, C), TAKE(dec, C), TAKE(dB, C);
    w->G = (double *)p, p += 2 * C; // doubles: 2 floats each (xcalloc's memory is 16-byte aligned)
    w->dG = (double *)p, p += 2 * C;
    TAKE(Gam, cc), TAKE(QK, cc), TAKE(KK, cc), TAKE(A, cc), TAKE(Tm, cc), TAKE(Sm, cc), TAKE(SmT, cc), TAKE(P, cc);
    TAKE(PT, cc), TAKE(TmT, cc), TAKE(dT, cc), TAKE(Z, cc), TAKE(dA, cc), TAKE(dM, cc), TAKE(dMT, cc);
    TAKE(Q, ck), TAKE(K, ck), TAKE(Kt, ck), TAKE(Kb, ck), TAKE(W, ck), TAKE(Qg, ck), TAKE(X, ck), TAKE(bK, ck);
    TAKE(dMK, ck), TAKE(QgT, ck), TAKE(WT, ck), TAKE(KbT, ck);
    TAKE(dQ, ck), TAKE(dK, ck), TAKE(dW, ck), TAKE(dQi, ck), TAKE(dKi, ck);
    TAKE(V, cv), TAKE(Vb, cv), TAKE(U, cv), TAKE(Vn, cv), TAKE(Og, cv), TAKE(Vd, cv), TAKE(dOc, cv);
    TAKE(KdS, cv), TAKE(Y, cv), TAKE(VnT, cv), TAKE(VbT, cv), TAKE(dV, cv), TAKE(dVn, cv);
    TAKE(h, kv), TAKE(dS, kv), TAKE(dSn, kv), TAKE(hT, kv), TAKE(dST, kv);
#undef TAKE
    CPU_REQUIRE((size_t)(p - w->mem) == total, "delta_rule", "scratch layout does not add up");
}

// Gathers chunk rows [t0, t0+Lc) of sequence b for v head j and builds G, Gam, A, Tm, W, U
// (everything that does not depend on the state).
static void chunk_prepare(Work *w, int Lc, const float *q, const float *k, int ldqk, const float *v, int ldv,
                          const float *beta, const float *gamma, size_t n0, int i, int j, int HV) {
    int dk = w->dk, dv = w->dv;
    // G in double: with gamma down to -5, |G| reaches ~300 within a chunk, where fp32 would leave
    // absolute errors of ~2e-5 in every G_i - G_j, i.e. relative errors of 2e-5 in the decays.
    double g = 0;
    for (int r = 0; r < Lc; r++) {
        size_t n = n0 + r;
        memcpy(w->Q + (size_t)r * dk, q + n * ldqk + (size_t)i * dk, dk * sizeof(float));
        memcpy(w->K + (size_t)r * dk, k + n * ldqk + (size_t)i * dk, dk * sizeof(float));
        memcpy(w->V + (size_t)r * dv, v + n * ldv + (size_t)j * dv, dv * sizeof(float));
        w->beta[r] = beta[n * HV + j];
        g += gamma[n * HV + j];
        w->G[r] = g;
        w->eG[r] = (float)exp(g);
    }
    for (int r = 0; r < Lc; r++) w->dec[r] = (float)exp(w->G[Lc - 1] - w->G[r]);
    transpose(w->Kt, C, w->K, dk, Lc, dk);
    gemm_nn(w->KK, C, w->K, dk, w->Kt, C, Lc, Lc, dk, 1.0f, 0);
    for (int r = 0; r < Lc; r++)
        for (int c = 0; c < Lc; c++) {
            float gam = c <= r ? (float)exp(w->G[r] - w->G[c]) : 0.0f;
            w->Gam[r * C + c] = gam;
            w->A[r * C + c] = c < r ? w->beta[r] * w->KK[r * C + c] * gam : 0.0f;
        }
    // (I + A) Tm = I, row by row: Tm_r = e_r - sum_{m<r} A_rm Tm_m (Tm is unit lower triangular).
    for (int r = 0; r < Lc; r++) {
        float *tr = w->Tm + (size_t)r * C;
        for (int c = 0; c < Lc; c++) tr[c] = c == r ? 1.0f : 0.0f;
        for (int m = 0; m < r; m++) {
            float a = w->A[r * C + m];
            const float *tm = w->Tm + (size_t)m * C;
            for (int c = 0; c <= m; c++) tr[c] -= a * tm[c];
        }
    }
    for (int r = 0; r < Lc; r++) {
        float kb = w->beta[r] * w->eG[r], vb = w->beta[r];
        for (int d = 0; d < dk; d++) w->Kb[(size_t)r * dk + d] = kb * w->K[(size_t)r * dk + d];
        for (int e = 0; e < dv; e++) w->Vb[(size_t)r * dv + e] = vb * w->V[(size_t)r * dv + e];
    }
    gemm_nn(w->W, dk, w->Tm, C, w->Kb, dk, Lc, dk, Lc, 1.0f, 0);
    gemm_nn(w->U, dv, w->Tm, C, w->Vb, dv, Lc, dv, Lc, 1.0f, 0);
}

// Vn = U - W h, then h <- e^{G_last} h + K^T (dec . Vn).
static void chunk_advance_state(Work *w, int Lc) {
    int dk = w->dk, dv = w->dv;
    memcpy(w->Vn, w->U, (size_t)Lc * dv * sizeof(float));
    gemm_nn(w->Vn, dv, w->W, dk, w->h, dv, Lc, dv, dk, -1.0f, 1);
    float eL = w->eG[Lc - 1];
    for (int x = 0; x < dk * dv; x++) w->h[x] *= eL;
    float *Vd = w->Vd;
    for (int r = 0; r < Lc; r++)
        for (int e = 0; e < dv; e++) Vd[(size_t)r * dv + e] = w->dec[r] * w->Vn[(size_t)r * dv + e];
    gemm_nn(w->h, dv, w->Kt, C, Vd, dv, dk, dv, Lc, 1.0f, 1);
}

// QK = Q K^T; Sm = s QK . Gam (zero above the diagonal).
static void chunk_scores(Work *w, int Lc, float scale) {
    gemm_nn(w->QK, C, w->Q, w->dk, w->Kt, C, Lc, Lc, w->dk, 1.0f, 0);
    for (int r = 0; r < Lc; r++)
        for (int c = 0; c < Lc; c++) w->Sm[r * C + c] = w->QK[r * C + c] * (scale * w->Gam[r * C + c]);
}

void cpu_delta_rule_fwd(const DeltaRuleArgs *a, void *o_, int ldo, float *state) {
    const void *q_ = a->q, *k_ = a->k, *v_ = a->v;
    void *h_save_ = a->h_save;
    const float *beta = a->beta, *gamma = a->gamma;
    int ldqk = a->ldqk, ldv = a->ldv, B = a->B, T = a->T, H = a->H, HV = a->HV, dk = a->dk, dv = a->dv;
    float scale = a->scale;
    CPU_REQUIRE(o_ && q_ && k_ && v_ && beta && gamma, "delta_rule_fwd", "NULL pointer (o, q, k, v, beta, gamma)");
    cpu_delta_check_dims("delta_rule_fwd", B, T, H, HV, dk, dv);
    float *o = o_, *h_save = h_save_;
    const float *q = q_, *k = k_, *v = v_;
    int G = HV / H, NT = (T + C - 1) / C;
    size_t SS = (size_t)dk * dv;
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int b = 0; b < B; b++)
        for (int j = 0; j < HV; j++) {
            Work w;
            work_init(&w, dk, dv);
            float *st = state ? state + ((size_t)b * HV + j) * SS : NULL;
            if (st) memcpy(w.h, st, SS * sizeof(float));
            for (int c = 0; c < NT; c++) {
                int Lc = T - c * C < C ? T - c * C : C;
                size_t n0 = (size_t)b * T + (size_t)c * C;
                chunk_prepare(&w, Lc, q, k, ldqk, v, ldv, beta, gamma, n0, j / G, j, HV);
                if (h_save) memcpy(h_save + (((size_t)b * HV + j) * NT + c) * SS, w.h, SS * sizeof(float));
                // The inter-chunk part of O reads h_n, so it is formed before the state advances.
                float *Og = w.Og, *Qg = w.Qg;
                for (int r = 0; r < Lc; r++)
                    for (int d = 0; d < dk; d++) Qg[(size_t)r * dk + d] = scale * w.eG[r] * w.Q[(size_t)r * dk + d];
                gemm_nn(Og, dv, Qg, dk, w.h, dv, Lc, dv, dk, 1.0f, 0);
                chunk_advance_state(&w, Lc);
                chunk_scores(&w, Lc, scale);
                gemm_nn(Og, dv, w.Sm, C, w.Vn, dv, Lc, dv, Lc, 1.0f, 1);
                for (int r = 0; r < Lc; r++)
                    memcpy(o + (n0 + r) * ldo + (size_t)j * dv, Og + (size_t)r * dv, dv * sizeof(float));
            }
            if (st) memcpy(st, w.h, SS * sizeof(float));
            free(w.mem);
        }
}

// Backward of one chunk (spec §3.2 steps 2-6). In: w->h = h_n, w->dS = dL/d(state at the chunk end),
// the chunk prepared, w->Vn computed. Out: w->dS = dL/dh_n and the chunk's dQ, dK, dV, dB (dbeta) and
// dG (d gamma, already reverse-cumsummed).
static void chunk_backward(Work *w, int Lc, const float *dO, int lddo, size_t n0, int j, float scale) {
    int dk = w->dk, dv = w->dv;
    float eL = w->eG[Lc - 1];
    for (int r = 0; r < Lc; r++)
        memcpy(w->dOc + (size_t)r * dv, dO + (n0 + r) * lddo + (size_t)j * dv, dv * sizeof(float));
    transpose(w->hT, dk, w->h, dv, dk, dv);

    // dVn = Sm^T dO + dec . (K dS)
    chunk_scores(w, Lc, scale);
    transpose(w->SmT, C, w->Sm, C, Lc, Lc);
    gemm_nn(w->dVn, dv, w->SmT, C, w->dOc, dv, Lc, dv, Lc, 1.0f, 0);
    gemm_nn(w->KdS, dv, w->K, dk, w->dS, dv, Lc, dv, dk, 1.0f, 0);
    for (int r = 0; r < Lc; r++)
        for (int e = 0; e < dv; e++) w->dVn[(size_t)r * dv + e] += w->dec[r] * w->KdS[(size_t)r * dv + e];

    // P = s (dO Vn^T) . Gam . M
    transpose(w->VnT, C, w->Vn, dv, Lc, dv);
    gemm_nn(w->P, C, w->dOc, dv, w->VnT, C, Lc, Lc, dv, 1.0f, 0);
    for (int r = 0; r < Lc; r++)
        for (int c = 0; c < Lc; c++) w->P[r * C + c] *= scale * w->Gam[r * C + c];

    // dQ = s e^G (dO h^T) + P K
    gemm_nn(w->dQ, dk, w->dOc, dv, w->hT, dk, Lc, dk, dv, 1.0f, 0);
    for (int r = 0; r < Lc; r++)
        for (int d = 0; d < dk; d++) w->dQ[(size_t)r * dk + d] *= scale * w->eG[r];
    gemm_nn(w->dQi, dk, w->P, C, w->K, dk, Lc, dk, Lc, 1.0f, 0);

    // dK_int = dec . (Vn dS^T);  dK = dK_int + P^T Q
    transpose(w->dST, dk, w->dS, dv, dk, dv);
    gemm_nn(w->dK, dk, w->Vn, dv, w->dST, dk, Lc, dk, dv, 1.0f, 0);
    for (int r = 0; r < Lc; r++)
        for (int d = 0; d < dk; d++) w->dK[(size_t)r * dk + d] *= w->dec[r];
    transpose(w->PT, C, w->P, C, Lc, Lc);
    gemm_nn(w->dKi, dk, w->PT, C, w->Q, dk, Lc, dk, Lc, 1.0f, 0);

    // dG_r = dQ_r . q_r - dK_r . k_r, and on the last row e^{G_last} <h_n, dS_end> + sum_r dK_int_r . k_r.
    // The reverse cumsum below cancels most of these terms (d gamma_t keeps the pairs (i >= t, j < t) of
    // the intra-chunk part and sum_{r<t} of the dK_int part), so each part is formed in double from
    // exact products of the fp32 values: what cancels then cancels exactly. The intra-chunk part is
    // q_r . (P K)_r - k_r . (P^T Q)_r = sum_j P_rj QK_rj - sum_i P_ir QK_ir.
    double dKint_k_total = 0;
    for (int r = 0; r < Lc; r++) {
        double qdq = 0, kdk = 0;
        for (int d = 0; d < dk; d++) {
            size_t x = (size_t)r * dk + d;
            qdq += (double)w->dQ[x] * w->Q[x];
            kdk += (double)w->dK[x] * w->K[x];
        }
        w->dG[r] = qdq - kdk;
        dKint_k_total += kdk;
    }
    for (int r = 0; r < Lc; r++)
        for (int c = 0; c <= r; c++) {
            double x = (double)w->P[r * C + c] * w->QK[r * C + c];
            w->dG[r] += x;
            w->dG[c] -= x;
        }
    {
        double hd = 0;
        for (int x = 0; x < dk * dv; x++) hd += (double)w->h[x] * w->dS[x];
        w->dG[Lc - 1] += eL * hd + dKint_k_total;
    }
    for (int x = 0; x < Lc * dk; x++) w->dQ[x] += w->dQi[x], w->dK[x] += w->dKi[x];

    // dW = -dVn h^T
    gemm_nn(w->dW, dk, w->dVn, dv, w->hT, dk, Lc, dk, dv, -1.0f, 0);

    // dS_start = e^{G_last} dS_end + (s e^G Q)^T dO - W^T dVn
    for (int x = 0; x < dk * dv; x++) w->dSn[x] = eL * w->dS[x];
    for (int d = 0; d < dk; d++)
        for (int r = 0; r < Lc; r++) w->QgT[(size_t)d * C + r] = scale * w->eG[r] * w->Q[(size_t)r * dk + d];
    gemm_nn(w->dSn, dv, w->QgT, C, w->dOc, dv, dk, dv, Lc, 1.0f, 1);
    transpose(w->WT, C, w->W, dk, Lc, dk);
    gemm_nn(w->dSn, dv, w->WT, C, w->dVn, dv, dk, dv, Lc, -1.0f, 1);
    memcpy(w->dS, w->dSn, (size_t)dk * dv * sizeof(float));

    // WY backward. X = Tm^T dW, Y = Tm^T dU (dU = dVn).
    transpose(w->TmT, C, w->Tm, C, Lc, Lc);
    gemm_nn(w->X, dk, w->TmT, C, w->dW, dk, Lc, dk, Lc, 1.0f, 0);
    gemm_nn(w->Y, dv, w->TmT, C, w->dVn, dv, Lc, dv, Lc, 1.0f, 0);
    for (int r = 0; r < Lc; r++) {
        float bg = w->beta[r] * w->eG[r];
        double xk = 0, yv = 0;
        for (int d = 0; d < dk; d++) {
            xk += (double)w->X[(size_t)r * dk + d] * w->K[(size_t)r * dk + d];
            w->dK[(size_t)r * dk + d] += bg * w->X[(size_t)r * dk + d];
        }
        for (int e = 0; e < dv; e++) {
            yv += (double)w->Y[(size_t)r * dv + e] * w->V[(size_t)r * dv + e];
            w->dV[(size_t)r * dv + e] = w->beta[r] * w->Y[(size_t)r * dv + e];
        }
        w->dB[r] = (float)(w->eG[r] * xk + yv);
        w->dG[r] += bg * xk;
    }
    // dT = dW Kb^T + dU Vb^T, strictly lower part only: Tm is unit lower triangular, so the strictly lower
    // part of Tm^T dT Tm^T depends on no other entry of dT.
    transpose(w->KbT, C, w->Kb, dk, Lc, dk);
    transpose(w->VbT, C, w->Vb, dv, Lc, dv);
    gemm_nn(w->dT, C, w->dW, dk, w->KbT, C, Lc, Lc, dk, 1.0f, 0);
    gemm_nn(w->dT, C, w->dVn, dv, w->VbT, C, Lc, Lc, dv, 1.0f, 1);
    for (int r = 0; r < Lc; r++)
        for (int c = r; c < Lc; c++) w->dT[r * C + c] = 0;
    // dA = -Tm^T dT Tm^T, strictly lower; dM = dA . Gam
    gemm_nn(w->Z, C, w->dT, C, w->TmT, C, Lc, Lc, Lc, 1.0f, 0);
    gemm_nn(w->dA, C, w->TmT, C, w->Z, C, Lc, Lc, Lc, -1.0f, 0);
    for (int r = 0; r < Lc; r++)
        for (int c = 0; c < Lc; c++) {
            if (c >= r) w->dA[r * C + c] = 0;
            w->dM[r * C + c] = w->dA[r * C + c] * w->Gam[r * C + c];
        }
    // dG += rowsum(dA . A) - colsum(dA . A);  dbeta += rowsum(dM . KK)
    for (int r = 0; r < Lc; r++) {
        double rs = 0, bk = 0;
        for (int c = 0; c < r; c++) {
            double x = (double)w->dA[r * C + c] * w->A[r * C + c];
            rs += x;
            w->dG[c] -= x;
            bk += (double)w->dM[r * C + c] * w->KK[r * C + c];
        }
        w->dG[r] += rs;
        w->dB[r] += (float)bk;
    }
    // dK += beta . (dM K) + dM^T (beta . K)
    for (int r = 0; r < Lc; r++)
        for (int d = 0; d < dk; d++) w->bK[(size_t)r * dk + d] = w->beta[r] * w->K[(size_t)r * dk + d];
    gemm_nn(w->dMK, dk, w->dM, C, w->K, dk, Lc, dk, Lc, 1.0f, 0);
    for (int r = 0; r < Lc; r++)
        for (int d = 0; d < dk; d++) w->dK[(size_t)r * dk + d] += w->beta[r] * w->dMK[(size_t)r * dk + d];
    transpose(w->dMT, C, w->dM, C, Lc, Lc);
    gemm_nn(w->dK, dk, w->dMT, C, w->bK, dk, Lc, dk, Lc, 1.0f, 1);

    // d gamma = reverse cumsum of dG within the chunk
    for (int r = Lc - 2; r >= 0; r--) w->dG[r] += w->dG[r + 1];
}

void cpu_delta_rule_bwd(const DeltaRuleArgs *a, const void *do__, int lddo, const DeltaRuleGrads *g) {
    void *dq_ = g->dq, *dk_ = g->dk, *dv_ = g->dv;
    float *dbeta = g->dbeta, *dgamma = g->dgamma;
    int lddqk = g->lddqk, lddv = g->lddv;
    const void *q_ = a->q, *k_ = a->k, *v_ = a->v, *h_save_ = a->h_save;
    const float *beta = a->beta, *gamma = a->gamma;
    int ldqk = a->ldqk, ldv = a->ldv, B = a->B, T = a->T, H = a->H, HV = a->HV, dk = a->dk, dv = a->dv;
    float scale = a->scale;
    CPU_REQUIRE(dq_ && dk_ && dv_ && dbeta && dgamma && do__ && q_ && k_ && v_ && beta && gamma, "delta_rule_bwd",
                "NULL pointer (dq, dk, dv, dbeta, dgamma, do, q, k, v, beta, gamma)");
    cpu_delta_check_dims("delta_rule_bwd", B, T, H, HV, dk, dv);
    float *dq = dq_, *dK = dk_, *dV = dv_;
    const float *dO = do__, *h_save = h_save_, *q = q_, *k = k_, *v = v_;
    int G = HV / H, NT = (T + C - 1) / C;
    size_t SS = (size_t)dk * dv;
    // With GVA, a v head's dq/dk go to a private [B, HV, T, dk] buffer, summed over the group afterwards.
    float *dqs = NULL, *dks = NULL;
    if (G > 1) {
        dqs = xmalloc((size_t)B * HV * T * dk * sizeof(float));
        dks = xmalloc((size_t)B * HV * T * dk * sizeof(float));
    }
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int b = 0; b < B; b++)
        for (int j = 0; j < HV; j++) {
            int i = j / G;
            Work w;
            work_init(&w, dk, dv);
            // Chunk-start states: from h_save, or recomputed by a forward sweep (zero initial state).
            float *hs = NULL;
            const float *hsrc = h_save ? h_save + ((size_t)b * HV + j) * NT * SS : NULL;
            if (!hsrc) {
                hs = xcalloc((size_t)NT * SS, sizeof(float));
                for (int c = 0; c < NT; c++) {
                    int Lc = T - c * C < C ? T - c * C : C;
                    memcpy(hs + (size_t)c * SS, w.h, SS * sizeof(float));
                    if (c == NT - 1) break; // the last chunk's end state is not needed
                    chunk_prepare(&w, Lc, q, k, ldqk, v, ldv, beta, gamma, (size_t)b * T + (size_t)c * C, i, j, HV);
                    chunk_advance_state(&w, Lc);
                }
                hsrc = hs;
            }
            memset(w.dS, 0, SS * sizeof(float));
            for (int c = NT - 1; c >= 0; c--) {
                int Lc = T - c * C < C ? T - c * C : C;
                size_t n0 = (size_t)b * T + (size_t)c * C;
                chunk_prepare(&w, Lc, q, k, ldqk, v, ldv, beta, gamma, n0, i, j, HV);
                memcpy(w.h, hsrc + (size_t)c * SS, SS * sizeof(float));
                memcpy(w.Vn, w.U, (size_t)Lc * dv * sizeof(float));
                gemm_nn(w.Vn, dv, w.W, dk, w.h, dv, Lc, dv, dk, -1.0f, 1);
                chunk_backward(&w, Lc, dO, lddo, n0, j, scale);
                for (int r = 0; r < Lc; r++) {
                    size_t n = n0 + r;
                    float *dqr = G > 1 ? dqs + (((size_t)b * HV + j) * T + (size_t)c * C + r) * dk
                                       : dq + n * lddqk + (size_t)i * dk;
                    float *dkr = G > 1 ? dks + (((size_t)b * HV + j) * T + (size_t)c * C + r) * dk
                                       : dK + n * lddqk + (size_t)i * dk;
                    memcpy(dqr, w.dQ + (size_t)r * dk, dk * sizeof(float));
                    memcpy(dkr, w.dK + (size_t)r * dk, dk * sizeof(float));
                    memcpy(dV + n * lddv + (size_t)j * dv, w.dV + (size_t)r * dv, dv * sizeof(float));
                    dbeta[n * HV + j] = w.dB[r];
                    dgamma[n * HV + j] = (float)w.dG[r];
                }
            }
            free(hs);
            free(w.mem);
        }
    if (G > 1) {
        cpu_sum_gva_groups(dq, dK, lddqk, dqs, dks, B, T, H, HV, dk);
        free(dqs);
        free(dks);
    }
}
