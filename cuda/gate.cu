// gate.cu: beta = sigmoid(b) and the log-decay gamma = -exp(A_log) * softplus(a + dt_bias)
// (spec model.md §2.3 steps 5-6; softplus(x) = x for x > 20 as in FLA) and their backward (§3.2 step 7).
// Accurate expf/log1pf, not FLA's approximate ex2/lg2, so the fp32 mode matches the CPU twin.
// dA_log / ddt_bias are reduced over tokens deterministically: per (row block, head) partials, then
// cu_add_partials. ddt_bias sums the act-rounded da, as FLA sums its bf16 da.
#include "cuda/common.cuh"

enum { GATE_ROWS = 32 }; // rows per partial sum (small: one thread walks them, and P x HV threads run)

__device__ __forceinline__ float softplus_f(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

template <typename T>
__global__ void gate_fwd_kernel(float *beta, float *gamma, const T *b, const T *a, int ld, const float *A_log,
                                const float *dt_bias, int N, int HV) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)N * HV) return;
    size_t n = idx / HV;
    int j = (int)(idx % HV);
    beta[idx] = sigmoid_f(to_f(b[n * ld + j]));
    gamma[idx] = -expf(A_log[j]) * softplus_f(to_f(a[n * ld + j]) + dt_bias[j]);
}

// part[p][j] = sum_n dgamma * gamma, part[p][HV + j] = sum_n act(da), rows n of block p in order.
template <typename T>
__global__ void gate_partials_kernel(float *part, const float *dgamma, const T *a, int ld, const float *A_log,
                                     const float *dt_bias, int N, int HV, int P) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= P * HV) return;
    int p = idx / HV, j = idx % HV, n1 = min(N, (p + 1) * GATE_ROWS);
    float A = expf(A_log[j]), sA = 0.0f, sdt = 0.0f;
    for (int n = p * GATE_ROWS; n < n1; n++) {
        float x = to_f(a[(size_t)n * ld + j]) + dt_bias[j], dg = dgamma[(size_t)n * HV + j];
        sA += dg * (-A * softplus_f(x));
        sdt += rnd<T>(dg * -A * sigmoid_f(x));
    }
    part[(size_t)p * 2 * HV + j] = sA;
    part[(size_t)p * 2 * HV + HV + j] = sdt;
}

// db = dbeta * beta (1 - beta); da = dgamma * (-exp(A_log)) * sigmoid(a + dt_bias). db/da may alias b/a.
template <typename T>
__global__ void gate_bwd_kernel(T *db, T *da, int ld, const float *dbeta, const float *dgamma, const T *b, const T *a,
                                const float *A_log, const float *dt_bias, int N, int HV) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)N * HV) return;
    size_t n = idx / HV;
    int j = (int)(idx % HV);
    float s = sigmoid_f(to_f(b[n * ld + j]));
    float x = to_f(a[n * ld + j]) + dt_bias[j];
    db[n * ld + j] = from_f<T>(dbeta[idx] * s * (1.0f - s));
    da[n * ld + j] = from_f<T>(dgamma[idx] * -expf(A_log[j]) * sigmoid_f(x));
}

template <typename T>
static void cu_gate_fwd(float *beta, float *gamma, const void *b, const void *a, int ld, const float *A_log,
                        const float *dt_bias, int N, int HV) {
    CU_REQUIRE(beta && gamma && b && a && A_log && dt_bias, "gate_fwd",
               "NULL pointer (beta, gamma, b, a, A_log, dt_bias)");
    CU_REQUIRE(N >= 0 && HV > 0 && ld >= HV, "gate_fwd", "bad shape N=%d HV=%d ld=%d", N, HV, ld);
    if (N == 0) return;
    cu_launch("gate_fwd", gate_fwd_kernel<T>, dim3(cu_blocks((size_t)N * HV, 256)), dim3(256), 0, beta, gamma,
              (const T *)b, (const T *)a, ld, A_log, dt_bias, N, HV);
}

template <typename T>
static void cu_gate_bwd(void *db, void *da, int ld, float *dA_log, float *ddt_bias, const float *dbeta,
                        const float *dgamma, const void *b, const void *a, const float *A_log, const float *dt_bias,
                        int N, int HV) {
    CU_REQUIRE(db && da && dA_log && ddt_bias && dbeta && dgamma && b && a && A_log && dt_bias, "gate_bwd",
               "NULL pointer (db, da, dA_log, ddt_bias, dbeta, dgamma, b, a, A_log, dt_bias)");
    CU_REQUIRE(N >= 0 && HV > 0 && ld >= HV, "gate_bwd", "bad shape N=%d HV=%d ld=%d", N, HV, ld);
    if (N == 0) return;
    // The reductions read a before the elementwise pass may overwrite it (da may alias a).
    const int P = (N + GATE_ROWS - 1) / GATE_ROWS;
    float *part = (float *)cu_scratch((size_t)P * 2 * HV * sizeof(float), "gate_bwd");
    cu_launch("gate_bwd partials", gate_partials_kernel<T>, dim3(cu_blocks((size_t)P * HV, 128)), dim3(128), 0, part,
              dgamma, (const T *)a, ld, A_log, dt_bias, N, HV, P);
    // dA_log and ddt_bias are separate arrays: finish each half of the partial rows.
    float *tmp = (float *)cu_scratch((size_t)2 * HV * sizeof(float), "gate_bwd");
    CU_CHECK(cudaMemsetAsync(tmp, 0, (size_t)2 * HV * sizeof(float), g_cu.stream));
    cu_add_partials(tmp, part, P, 2 * HV, "gate_bwd sums");
    cu_add_partials(dA_log, tmp, 1, HV, "gate_bwd dA_log");
    cu_add_partials(ddt_bias, tmp + HV, 1, HV, "gate_bwd ddt_bias");
    cu_scratch_free(tmp);
    cu_scratch_free(part);
    cu_launch("gate_bwd", gate_bwd_kernel<T>, dim3(cu_blocks((size_t)N * HV, 256)), dim3(256), 0, (T *)db, (T *)da, ld,
              dbeta, dgamma, (const T *)b, (const T *)a, A_log, dt_bias, N, HV);
}

void cu_register_gate(Backend *b, int use_bf16) {
    b->gate_fwd = use_bf16 ? cu_gate_fwd<bf16> : cu_gate_fwd<float>;
    b->gate_bwd = use_bf16 ? cu_gate_bwd<bf16> : cu_gate_bwd<float>;
}
