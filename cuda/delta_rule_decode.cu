// delta_rule_decode.cu: the gated delta rule token by token on the GPU, for decoding (T = 1) and other
// short calls that keep no per-chunk states (T <= DR_DECODE_MAX_T, h_save NULL). The chunked kernels
// would spend a whole 64-row chunk of work and scratch on one token; here a token costs two column dot
// products over the state. Same recurrence as the CPU twin (cpu/delta_rule_recurrent.c):
//   S' = exp(g) S;  u = beta (v - S'^T k);  S = S' + k u^T;  o = S^T (scale q)
// Every column e of a head's state [dk, dv] evolves on its own (k, q, beta, g are shared), so a block
// owns 32 columns of one (sequence, v head) and keeps them in registers for all T tokens: thread (x, y)
// holds rows d = y, y + 8, .. of column e = 32 blockIdx.x + x. The state stays fp32 (FLA's
// fused_recurrent path keeps it in fp32 too); q, k, v are read in act dtype and o written in it.
#include "cuda/delta_rule.cuh"

enum { DEC_COLS = 32, DEC_ROWS = 8, DEC_MAX_R = 128 / DEC_ROWS };

template <typename T> __global__ void __launch_bounds__(DEC_COLS *DEC_ROWS) dr_decode_kernel(DrArgs a) {
    const int x = threadIdx.x, y = threadIdx.y, tid = y * DEC_COLS + x;
    const int e = blockIdx.x * DEC_COLS + x, j = blockIdx.y, b = blockIdx.z, i = j / a.G;
    const bool col = e < a.dv;
    __shared__ float qs[128], ks[128], red[DEC_ROWS][DEC_COLS];
    float s[DEC_MAX_R];
    float *st = a.state ? a.state + ((size_t)b * a.HV + j) * a.dk * a.dv : nullptr;
#pragma unroll
    for (int r = 0; r < DEC_MAX_R; r++) {
        const int d = y + DEC_ROWS * r;
        s[r] = (st && col && d < a.dk) ? st[(size_t)d * a.dv + e] : 0.0f;
    }
    const T *q = (const T *)a.q, *k = (const T *)a.k, *v = (const T *)a.v;
    T *o = (T *)a.o;
    for (int t = 0; t < a.T; t++) {
        const size_t n = (size_t)b * a.T + t;
        __syncthreads(); // the previous token's readers are done with qs, ks and red
        if (tid < a.dk) {
            qs[tid] = to_f(q[n * a.ldqk + (size_t)i * a.dk + tid]) * a.scale;
            ks[tid] = to_f(k[n * a.ldqk + (size_t)i * a.dk + tid]);
        }
        __syncthreads();
        const float alpha = expf(a.gamma[n * a.HV + j]), bt = a.beta[n * a.HV + j];
        float part = 0.0f;
#pragma unroll
        for (int r = 0; r < DEC_MAX_R; r++) {
            const int d = y + DEC_ROWS * r;
            if (d < a.dk) {
                s[r] *= alpha;
                part += s[r] * ks[d];
            }
        }
        red[y][x] = part;
        __syncthreads();
        float kS = 0.0f;
#pragma unroll
        for (int w = 0; w < DEC_ROWS; w++) kS += red[w][x]; // the same order in every row lane
        const float u = bt * ((col ? to_f(v[n * a.ldv + (size_t)j * a.dv + e]) : 0.0f) - kS);
        part = 0.0f;
#pragma unroll
        for (int r = 0; r < DEC_MAX_R; r++) {
            const int d = y + DEC_ROWS * r;
            if (d < a.dk) {
                s[r] += ks[d] * u;
                part += s[r] * qs[d];
            }
        }
        __syncthreads(); // every lane has read red
        red[y][x] = part;
        __syncthreads();
        if (y == 0 && col) {
            float acc = 0.0f;
#pragma unroll
            for (int w = 0; w < DEC_ROWS; w++) acc += red[w][x];
            o[n * a.ldo + (size_t)j * a.dv + e] = from_f<T>(acc);
        }
    }
    if (st && col) {
#pragma unroll
        for (int r = 0; r < DEC_MAX_R; r++) {
            const int d = y + DEC_ROWS * r;
            if (d < a.dk) st[(size_t)d * a.dv + e] = s[r];
        }
    }
}

template <typename T> void dr_decode_fwd(const DrArgs &a) {
    dim3 grid((unsigned)((a.dv + DEC_COLS - 1) / DEC_COLS), (unsigned)a.HV, (unsigned)a.B);
    cu_launch("delta_rule_fwd decode", dr_decode_kernel<T>, grid, dim3(DEC_COLS, DEC_ROWS), 0, a);
}
template void dr_decode_fwd<float>(const DrArgs &);
template void dr_decode_fwd<bf16>(const DrArgs &);
