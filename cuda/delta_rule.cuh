// delta_rule.cuh: what the chunked gated delta rule's forward (delta_rule_fwd.cu) and backward
// (delta_rule_bwd.cu) share: the argument block, the scratch layouts, the 64-row block product and the
// tile loader, and the forward launchers the backward reuses for its recomputation.
//
// Algorithm: spec model.md §3 (chunk C = 64), the same decomposition as the CPU twin
// (cpu/delta_rule_chunk.c). Work is per (chunk n, v head j, sequence b) except the two serial kernels
// (state forward, dh backward), which are per (dv tile, v head, sequence) and walk the chunks in order.
// All products are fp32 on CUDA cores (tensor cores are left for the speed issue): operands are staged
// in shared memory as fp32 with an odd row stride (no bank conflicts for row or column access), and
// 256 threads form a 16 x 16 grid, thread (tx, ty) owning output rows ty + 16 r and columns tx + 16 c.
// Head dims are padded to DKP, DVP in {64, 128} with zeros, so dk, dv <= 128 and a multiple of 16.
// Values are rounded to the act dtype where FLA stores bf16 (spec §2.7): Tm, W, U, V_new, h, the gated
// Q K^T block, dV_local, dh, dV_new, dw (rnd<T> is the identity in the fp32 mode).
//
// Scratch tensors are head-major: row (b, j, t) of a per-v-head tensor is ((b*HV + j)*T + t); states
// are [B, HV, NT, dk, dv] (K-first, as h_save in model/backend.h).
#pragma once
#include "cuda/common.cuh"

enum { DR_C = 64, DR_THREADS = 256 };

struct DrArgs {
    int B, T, H, HV, G, dk, dv, NT; // G = HV / H (v heads per q/k head)
    float scale;
    const void *q, *k, *v; // act inputs [N, H*dk] (ldqk), [N, HV*dv] (ldv)
    int ldqk, ldv;
    const float *beta, *gamma; // [N, HV]
    // scratch / saved
    float *Gc;   // within-chunk cumsum of gamma, fp32 [B,HV,T]
    void *W, *U; // act [B,HV,T,dk], [B,HV,T,dv]
    void *Tm;    // act [B,HV,T,64] (backward only)
    void *vnew;  // act [B,HV,T,dv]
    void *h;     // act [B,HV,NT,dk,dv] chunk-start states
    // forward
    void *o; // act [N, HV*dv] (ldo)
    int ldo;
    float *state; // fp32 [B,HV,dk,dv] in/out, may be NULL
    // backward
    const void *dO; // act [N, HV*dv] (lddo)
    int lddo;
    void *dvloc, *dh, *dvnew, *dw; // act: [B,HV,T,dv], [B,HV,NT,dk,dv], [B,HV,T,dv], [B,HV,T,dk]
    float *dq_v, *dk_v, *dg;       // fp32: [B,HV,T,dk] x2 (per v head), [B,HV,T]
    void *dq, *dk_out, *dv_out;    // act outputs
    int lddqk, lddv;
    float *dbeta, *dgamma; // fp32 [N, HV]
};

// Head-major row index of (b, j, t).
__device__ __forceinline__ size_t dr_hrow(const DrArgs &a, int b, int j, int t) {
    return ((size_t)b * a.HV + j) * a.T + t;
}
// Start of the [dk, dv] state of chunk n.
__device__ __forceinline__ size_t dr_state_off(const DrArgs &a, int b, int j, int n) {
    return (((size_t)b * a.HV + j) * a.NT + n) * (size_t)a.dk * a.dv;
}

// acc[r][c] += sum_{kk < K} A(i, kk) * B(kk, jj) for i = ty + 16 r, jj = tx + 16 c, where
// A(i, kk) = A[i*sai + kk*sak] and B(kk, jj) = B[kk*sbk + jj*sbj] (strides make transposes free).
// 256 threads; the kk order is fixed, so results are deterministic.
template <int MR, int NR>
__device__ __forceinline__ void mm_acc(float (&acc)[MR][NR], const float *A, int sai, int sak, const float *B, int sbk,
                                       int sbj, int K) {
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const float *Ap = A + ty * sai, *Bp = B + tx * sbj;
    for (int kk = 0; kk < K; kk++) {
        float av[MR], bv[NR];
#pragma unroll
        for (int r = 0; r < MR; r++) av[r] = Ap[16 * r * sai + kk * sak];
#pragma unroll
        for (int c = 0; c < NR; c++) bv[c] = Bp[kk * sbk + 16 * c * sbj];
#pragma unroll
        for (int r = 0; r < MR; r++)
#pragma unroll
            for (int c = 0; c < NR; c++) acc[r][c] = fmaf(av[r], bv[c], acc[r][c]);
    }
}
template <int MR, int NR> __device__ __forceinline__ void zero_acc(float (&acc)[MR][NR]) {
#pragma unroll
    for (int r = 0; r < MR; r++)
#pragma unroll
        for (int c = 0; c < NR; c++) acc[r][c] = 0.0f;
}

// dst[r*lds + c] = src[r*ld + c] for r < rows_valid, c < cols_valid; zero elsewhere in rows x cols.
template <typename S>
__device__ __forceinline__ void load_tile(float *dst, int lds, const S *src, size_t ld, int rows_valid, int cols_valid,
                                          int rows, int cols) {
    for (int idx = threadIdx.x; idx < rows * cols; idx += blockDim.x) {
        int r = idx / cols, c = idx - r * cols;
        dst[r * lds + c] = r < rows_valid && c < cols_valid ? to_f(src[(size_t)r * ld + c]) : 0.0f;
    }
}

// Gs[r] = Gc at row r of the chunk, rows past Lc padded with G_last (so every exp of a difference of two
// entries stays finite; padded rows are masked anyway). Threads < 64 write.
__device__ __forceinline__ void load_G(float *Gs, const DrArgs &a, size_t hr0, int Lc) {
    if (threadIdx.x < DR_C) Gs[threadIdx.x] = a.Gc[hr0 + min((int)threadIdx.x, Lc - 1)];
}

// Forward launchers (delta_rule_fwd.cu), also used by the backward to recompute what it needs.
// intra: Gc, W, U (and Tm when a.Tm != NULL) for every chunk.
template <typename T> void dr_run_intra(const DrArgs &a);
// state: serial over chunks; writes a.h (chunk-start states), a.vnew, and the final a.state if set.
template <typename T> void dr_run_state(const DrArgs &a);
void dr_check_dims(const char *op, int B, int T, int H, int HV, int dk, int dv);
