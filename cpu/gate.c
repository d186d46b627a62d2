// gate.c: beta = sigmoid(b) and the log-decay gamma = -exp(A_log) * softplus(a + dt_bias)
// (spec model.md §2.3 steps 5-6), and their backward (§3.2 step 7). softplus(x) = x for x > 20, as in
// FLA. dA_log and ddt_bias are sums over tokens: each v head's sum runs over tokens in order.
#include <math.h>

#include "cpu/cpu_ops.h"

static inline float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }
static inline float softplusf_(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

void cpu_gate_fwd(float *beta, float *gamma, const void *b_, const void *a_, int ld, const float *A_log,
                  const float *dt_bias, int N, int HV) {
    CPU_REQUIRE(beta && gamma && b_ && a_ && A_log && dt_bias, "gate_fwd",
                "NULL pointer (beta, gamma, b, a, A_log, dt_bias)");
    const float *b = b_, *a = a_;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        for (int j = 0; j < HV; j++) {
            size_t i = (size_t)n * ld + j, o = (size_t)n * HV + j;
            beta[o] = sigmoidf_(b[i]);
            gamma[o] = -expf(A_log[j]) * softplusf_(a[i] + dt_bias[j]);
        }
}

// db = dbeta * beta (1 - beta); da = dgamma * (-exp(A_log)) * sigmoid(a + dt_bias);
// dA_log += sum_n dgamma * gamma (d gamma / d A_log = gamma); ddt_bias += sum_n da.
void cpu_gate_bwd(void *db_, void *da_, int ld, float *dA_log, float *ddt_bias, const float *dbeta,
                  const float *dgamma, const void *b_, const void *a_, const float *A_log, const float *dt_bias, int N,
                  int HV) {
    CPU_REQUIRE(db_ && da_ && dA_log && ddt_bias && dbeta && dgamma && b_ && a_ && A_log && dt_bias, "gate_bwd",
                "NULL pointer (db, da, dA_log, ddt_bias, dbeta, dgamma, b, a, A_log, dt_bias)");
    float *db = db_, *da = da_;
    const float *b = b_, *a = a_;
    // The reductions read a before the elementwise pass may overwrite it (da may alias a).
#pragma omp parallel for schedule(static)
    for (int j = 0; j < HV; j++) {
        float A = expf(A_log[j]);
        double sA = 0, sdt = 0;
        for (int n = 0; n < N; n++) {
            float x = a[(size_t)n * ld + j] + dt_bias[j], dg = dgamma[(size_t)n * HV + j];
            float g = -A * softplusf_(x);
            sA += (double)dg * g;
            sdt += (double)(dg * -A * sigmoidf_(x));
        }
        dA_log[j] += (float)sA;
        ddt_bias[j] += (float)sdt;
    }
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        for (int j = 0; j < HV; j++) {
            size_t i = (size_t)n * ld + j, o = (size_t)n * HV + j;
            float s = sigmoidf_(b[i]);
            float x = a[i] + dt_bias[j];
            db[i] = dbeta[o] * s * (1.0f - s);
            da[i] = dgamma[o] * -expf(A_log[j]) * sigmoidf_(x);
        }
}
