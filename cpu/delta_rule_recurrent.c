// delta_rule_recurrent.c: the gated delta rule token by token, exactly as spec model.md §2.4 writes it
// (the readable reference the chunked form in delta_rule_chunk.c is tested against), and its backward
// by reverse-mode differentiation through the recurrence. Per (sequence b, v head j) with q/k head
// i = j / (HV/H) and state S [dk, dv]:
//   S' = exp(g_t) S;  e = v_t - S'^T k_t;  u = beta_t e;  S = S' + k_t u^T;  o_t = S^T (scale q_t)
// Work is parallel over (b, v head). The backward keeps one state per 64 tokens and recomputes the
// states inside a segment from it, so memory is (T/64 + 65) states per task.
// The state and every sum are kept in double (inputs and outputs fp32): this form is the reference the
// chunked form and the CUDA kernels are held to, and with fp32 states the rounding carried along T reached
// the 1e-5 bound of the model test in the gate gradients (dA_log, dt_bias), whose sums over tokens cancel.
// Packed documents (doc_start, backend.h): a token t > 0 with doc_start[t] == t starts a new document; its
// decay is taken as exactly 0 (S' = 0 S), which is a zero state in the forward and, in reverse mode, stops
// every gradient through the state at the boundary (dS_{t-1} = 0 dS', dg = <dS', 0> = 0).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_ops.h"

enum { SEG = GDN_CHUNK }; // checkpoint spacing = the chunk size: h_save's layout (the backward reads its first entry)

// The decay exp(gamma) of token t of a row, 0 where t starts a packed document.
static inline double step_alpha(const int32_t *ds, int t, float gamma) {
    return ds && t > 0 && ds[t] == t ? 0.0 : exp((double)gamma);
}

// Shape rules shared by both delta-rule forms.
void cpu_delta_check_dims(const char *op, int B, int T, int H, int HV, int dk, int dv) {
    if (B < 0 || T < 0 || H <= 0 || HV <= 0 || dk <= 0 || dv <= 0)
        die("cpu backend, %s: bad shape B=%d T=%d H=%d HV=%d dk=%d dv=%d", op, B, T, H, HV, dk, dv);
    if (HV % H) die("cpu backend, %s: v heads HV=%d must be a multiple of q/k heads H=%d", op, HV, H);
}

// One token of the recurrence on S [dk, dv]: decays S in place, writes the rank-1 update and o.
static void recurrent_step(double *S, float *o, const float *q, const float *k, const float *v, float beta,
                           double alpha, int dk, int dv, float scale) {
    for (int i = 0; i < dk * dv; i++) S[i] *= alpha;
    double u[dv];
    for (int e = 0; e < dv; e++) u[e] = v[e];
    for (int d = 0; d < dk; d++)
        for (int e = 0; e < dv; e++) u[e] -= S[d * dv + e] * k[d];
    for (int e = 0; e < dv; e++) u[e] *= beta;
    for (int d = 0; d < dk; d++)
        for (int e = 0; e < dv; e++) S[d * dv + e] += k[d] * u[e];
    if (o) {
        double acc[dv];
        for (int e = 0; e < dv; e++) acc[e] = 0;
        for (int d = 0; d < dk; d++) {
            double sq = (double)scale * q[d];
            for (int e = 0; e < dv; e++) acc[e] += S[d * dv + e] * sq;
        }
        for (int e = 0; e < dv; e++) o[e] = (float)acc[e];
    }
}

static void to_double(double *d, const float *f, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = f[i];
}
static void to_float(float *f, const double *d, size_t n) {
    for (size_t i = 0; i < n; i++) f[i] = (float)d[i];
}

void cpu_delta_rule_recurrent_fwd(const DeltaRuleArgs *a, void *o_, int ldo, float *state) {
    const void *q_ = a->q, *k_ = a->k, *v_ = a->v;
    void *h_save_ = a->h_save;
    const float *beta = a->beta, *gamma = a->gamma;
    int ldqk = a->ldqk, ldv = a->ldv, B = a->B, T = a->T, H = a->H, HV = a->HV, dk = a->dk, dv = a->dv;
    float scale = a->scale;
    const int32_t *doc_start = a->doc_start;
    CPU_REQUIRE(o_ && q_ && k_ && v_ && beta && gamma, "delta_rule_recurrent_fwd",
                "NULL pointer (o, q, k, v, beta, gamma)");
    cpu_delta_check_dims("delta_rule_recurrent_fwd", B, T, H, HV, dk, dv);
    float *o = o_, *h_save = h_save_;
    const float *q = q_, *k = k_, *v = v_;
    int G = HV / H, NT = (T + SEG - 1) / SEG;
    size_t SS = (size_t)dk * dv;
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int b = 0; b < B; b++)
        for (int j = 0; j < HV; j++) {
            int i = j / G;
            const int32_t *ds = doc_start ? doc_start + (size_t)b * T : NULL;
            double *S = xcalloc(SS, sizeof(double));
            float *st = state ? state + ((size_t)b * HV + j) * SS : NULL;
            if (st) to_double(S, st, SS);
            for (int t = 0; t < T; t++) {
                if (h_save && t % SEG == 0) to_float(h_save + (((size_t)b * HV + j) * NT + t / SEG) * SS, S, SS);
                size_t n = (size_t)b * T + t;
                recurrent_step(S, o + n * ldo + (size_t)j * dv, q + n * ldqk + (size_t)i * dk,
                               k + n * ldqk + (size_t)i * dk, v + n * ldv + (size_t)j * dv, beta[n * HV + j],
                               step_alpha(ds, t, gamma[n * HV + j]), dk, dv, scale);
            }
            if (st) to_float(st, S, SS);
            free(S);
        }
}

// Reverse mode for one token, given S_prev = S_{t-1}, S_cur = S_t and dS = dL/dS_t (in: from later
// tokens; out: dL/dS_{t-1}). With S' = a S_prev (a = exp(g)), e = v - S'^T k, u = beta e:
//   dS += scale q do^T;  dq = scale S_t do
//   dk = dS u - S' de;  du = dS^T k;  dbeta = du . e;  de = beta du;  dv = de
//   dS' = dS - k de^T;  dg = <dS', S'>;  dS_{t-1} = a dS'
static void recurrent_step_bwd(double *dS, float *dq, float *dk_, float *dv_, float *dbeta, float *dgamma,
                               const double *S_prev, const double *S_cur, const float *q, const float *k,
                               const float *v, const float *do_, float beta, double alpha, int dk, int dv,
                               float scale) {
    double e[dv], u[dv], du[dv], de[dv];
    // Recompute e and u from S' = alpha S_prev (as the forward).
    for (int x = 0; x < dv; x++) e[x] = v[x];
    for (int d = 0; d < dk; d++)
        for (int x = 0; x < dv; x++) e[x] -= (S_prev[d * dv + x] * alpha) * k[d];
    for (int x = 0; x < dv; x++) u[x] = e[x] * beta;
    // o_t = S_t^T (scale q)
    for (int d = 0; d < dk; d++) {
        double acc = 0;
        for (int x = 0; x < dv; x++) acc += S_cur[d * dv + x] * do_[x];
        dq[d] = (float)(scale * acc);
        double sq = (double)scale * q[d];
        for (int x = 0; x < dv; x++) dS[d * dv + x] += sq * do_[x];
    }
    // S_t = S' + k u^T
    for (int x = 0; x < dv; x++) du[x] = 0;
    double dkd[dk];
    for (int d = 0; d < dk; d++) {
        double acc = 0;
        for (int x = 0; x < dv; x++) {
            acc += dS[d * dv + x] * u[x];
            du[x] += dS[d * dv + x] * k[d];
        }
        dkd[d] = acc;
    }
    double db = 0;
    for (int x = 0; x < dv; x++) {
        db += du[x] * e[x];
        de[x] = beta * du[x];
        dv_[x] = (float)de[x];
    }
    *dbeta = (float)db;
    // e = v - S'^T k: dk -= S' de; dS' = dS - k de^T; then S' = alpha S_prev
    double dg = 0;
    for (int d = 0; d < dk; d++) {
        double acc = 0;
        for (int x = 0; x < dv; x++) {
            double Sp = S_prev[d * dv + x] * alpha;
            acc += Sp * de[x];
            double dSp = dS[d * dv + x] - k[d] * de[x];
            dg += dSp * Sp;
            dS[d * dv + x] = alpha * dSp;
        }
        dk_[d] = (float)(dkd[d] - acc);
    }
    *dgamma = (float)dg;
}

void cpu_delta_rule_recurrent_bwd(const DeltaRuleArgs *a, const void *do__, int lddo, const DeltaRuleGrads *g) {
    void *dq_ = g->dq, *dk_ = g->dk, *dv_ = g->dv;
    float *dbeta = g->dbeta, *dgamma = g->dgamma;
    int lddqk = g->lddqk, lddv = g->lddv;
    const void *q_ = a->q, *k_ = a->k, *v_ = a->v, *h_save_ = a->h_save;
    const float *beta = a->beta, *gamma = a->gamma;
    int ldqk = a->ldqk, ldv = a->ldv, B = a->B, T = a->T, H = a->H, HV = a->HV, dk = a->dk, dv = a->dv;
    float scale = a->scale;
    const int32_t *doc_start = a->doc_start;
    CPU_REQUIRE(dq_ && dk_ && dv_ && dbeta && dgamma && do__ && q_ && k_ && v_ && beta && gamma,
                "delta_rule_recurrent_bwd", "NULL pointer (dq, dk, dv, dbeta, dgamma, do, q, k, v, beta, gamma)");
    cpu_delta_check_dims("delta_rule_recurrent_bwd", B, T, H, HV, dk, dv);
    float *dq = dq_, *dK = dk_, *dV = dv_;
    const float *dO = do__, *h_save = h_save_, *q = q_, *k = k_, *v = v_;
    int G = HV / H, NT = (T + SEG - 1) / SEG;
    size_t SS = (size_t)dk * dv;
    // dq/dk of one v head go to a private [B, HV, T, dk] buffer when a q/k head serves several v heads;
    // the group is summed afterwards in head order (deterministic).
    float *dqs = NULL, *dks = NULL;
    if (G > 1) {
        dqs = xmalloc((size_t)B * HV * T * dk * sizeof(float));
        dks = xmalloc((size_t)B * HV * T * dk * sizeof(float));
    }
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int b = 0; b < B; b++)
        for (int j = 0; j < HV; j++) {
            int i = j / G;
            const int32_t *ds = doc_start ? doc_start + (size_t)b * T : NULL;
            double *ckpt = xmalloc(((size_t)NT + SEG + 2) * SS * sizeof(double));
            double *seg = ckpt + (size_t)NT * SS; // S_{t0-1}, S_t0, ..., S_{t0+63}
            double *dS = seg + (size_t)(SEG + 1) * SS;
            // Checkpoints: the state at the start of every segment, recomputed in double from the first one
            // (the forward's initial state, h_save's first entry when given; else zero).
            memset(dS, 0, SS * sizeof(double)); // dS doubles as the running state here
            if (h_save) to_double(dS, h_save + ((size_t)b * HV + j) * NT * SS, SS);
            for (int t = 0; t < T; t++) {
                if (t % SEG == 0) memcpy(ckpt + (size_t)(t / SEG) * SS, dS, SS * sizeof(double));
                size_t n = (size_t)b * T + t;
                recurrent_step(dS, NULL, NULL, k + n * ldqk + (size_t)i * dk, v + n * ldv + (size_t)j * dv,
                               beta[n * HV + j], step_alpha(ds, t, gamma[n * HV + j]), dk, dv, scale);
            }
            memset(dS, 0, SS * sizeof(double));
            for (int sgi = NT - 1; sgi >= 0; sgi--) {
                int t0 = sgi * SEG, t1 = t0 + SEG < T ? t0 + SEG : T;
                memcpy(seg, ckpt + (size_t)sgi * SS, SS * sizeof(double));
                for (int t = t0; t < t1; t++) {
                    size_t n = (size_t)b * T + t;
                    double *S = seg + (size_t)(t - t0 + 1) * SS;
                    memcpy(S, S - SS, SS * sizeof(double));
                    recurrent_step(S, NULL, NULL, k + n * ldqk + (size_t)i * dk, v + n * ldv + (size_t)j * dv,
                                   beta[n * HV + j], step_alpha(ds, t, gamma[n * HV + j]), dk, dv, scale);
                }
                for (int t = t1 - 1; t >= t0; t--) {
                    size_t n = (size_t)b * T + t;
                    double *S = seg + (size_t)(t - t0 + 1) * SS;
                    float *dqr = G > 1 ? dqs + (((size_t)b * HV + j) * T + t) * dk : dq + n * lddqk + (size_t)i * dk;
                    float *dkr = G > 1 ? dks + (((size_t)b * HV + j) * T + t) * dk : dK + n * lddqk + (size_t)i * dk;
                    recurrent_step_bwd(dS, dqr, dkr, dV + n * lddv + (size_t)j * dv, dbeta + n * HV + j,
                                       dgamma + n * HV + j, S - SS, S, q + n * ldqk + (size_t)i * dk,
                                       k + n * ldqk + (size_t)i * dk, v + n * ldv + (size_t)j * dv,
                                       dO + n * lddo + (size_t)j * dv, beta[n * HV + j],
                                       step_alpha(ds, t, gamma[n * HV + j]), dk, dv, scale);
                }
            }
            free(ckpt);
        }
    if (G > 1) {
        cpu_sum_gva_groups(dq, dK, lddqk, dqs, dks, B, T, H, HV, dk);
        free(dqs);
        free(dks);
    }
}

// dq/dk of a q/k head shared by G = HV/H v heads: per-v-head rows dqs/dks [B, HV, T, dk] summed over the
// group in head order (deterministic), written to dq/dK rows of stride lddqk.
void cpu_sum_gva_groups(float *dq, float *dK, int lddqk, const float *dqs, const float *dks, int B, int T, int H,
                        int HV, int dk) {
    int G = HV / H;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            size_t n = (size_t)b * T + t;
            for (int i = 0; i < H; i++)
                for (int d = 0; d < dk; d++) {
                    float sq = 0, sk = 0;
                    for (int r = 0; r < G; r++) {
                        size_t src = (((size_t)b * HV + i * G + r) * T + t) * dk + d;
                        sq += dqs[src];
                        sk += dks[src];
                    }
                    dq[n * lddqk + (size_t)i * dk + d] = sq;
                    dK[n * lddqk + (size_t)i * dk + d] = sk;
                }
        }
}
