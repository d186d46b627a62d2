// delta_rule_bwd.cu: the chunked gated delta rule backward (spec model.md §3.2), zero initial state.
// Kernels in order (see delta_rule.cuh for layout, padding and rounding conventions):
//   intra (forward kernel, with Tm saved): G, Tm, W, U recomputed
//   vnew  (per chunk):  V_new = U - W h_n from h_save   (without h_save: the forward state kernel
//                       recomputes h and V_new serially)
//   dvloc (per chunk):  dV_loc = (s (Q K^T . Gamma . M))^T dO
//   dh    (serial, last chunk first, per dv tile): dh_n := dS_end;
//                       dV_new = dV_loc + e^{G_last - G} . (K dS_end);
//                       dS_start = e^{G_last} dS_end + (s e^G Q)^T dO - W^T dV_new
//   dqkwg (per chunk):  P = s (dO V_new^T) . Gamma . M;  dQ = s e^G (dO h^T) + P K;
//                       dK = e^{G_last - G} . (V_new dS^T) + P^T Q;  dW = -dV_new h^T;
//                       dG = rowsum(dQ . Q) - rowsum(dK . K), last row + e^{G_last}<h, dS> + sum dK_int . K
//   wy    (per chunk):  X = Tm^T dW, Y = Tm^T dV_new, dT, dA = -Tm^T dT Tm^T, dK/dV/dbeta/dG terms, then
//                       dgamma = reverse cumsum of dG within the chunk
//   group (per token):  dq, dk = sum over each q/k head's v heads, in head order
// dq/dk of each v head go to fp32 scratch and are summed by the last kernel: no atomics anywhere.
// These are the CUDA-core kernels (fp32 mode, and bf16 with dk or dv > 64); bf16 with dk, dv <= 64 goes
// to delta_rule_tc_bwd.cu (the entry point below chooses).
#include "cuda/delta_rule.cuh"

// ---------------------------------------------------------------------------------------------------
// V_new = U - W h_n: grid (NT, HV, B)

template <typename T, int DKP, int DVP> struct VnewK {
    static constexpr int SK = DKP + 1, SV = DVP + 1;
    static constexpr size_t smem = sizeof(float) * ((size_t)DR_C * SK + DKP * SV);
};

template <typename T, int DKP, int DVP> __global__ void __launch_bounds__(DR_THREADS) dr_vnew_kernel(DrArgs a) {
    using L = VnewK<T, DKP, DVP>;
    constexpr int SK = L::SK, SV = L::SV;
    CU_DYN_SMEM(float, sm);
    float *Ws = sm;             // [64][SK]
    float *hs = Ws + DR_C * SK; // [DKP][SV]
    const int n = blockIdx.x, j = blockIdx.y, b = blockIdx.z;
    const int t0 = n * DR_C, Lc = min(DR_C, a.T - t0);
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const size_t hr0 = dr_hrow(a, b, j, t0);
    load_tile(Ws, SK, (const T *)a.W + hr0 * a.dk, a.dk, Lc, a.dk, DR_C, DKP);
    load_tile(hs, SV, (const T *)a.h + dr_state_off(a, b, j, n), a.dv, a.dk, a.dv, DKP, DVP);
    __syncthreads();
    float acc[4][DVP / 16];
    zero_acc(acc);
    mm_acc<4, DVP / 16>(acc, Ws, SK, 1, hs, SV, 1, a.dk);
    const T *U = (const T *)a.U;
    T *vn = (T *)a.vnew;
#pragma unroll
    for (int r = 0; r < 4; r++)
#pragma unroll
        for (int c = 0; c < DVP / 16; c++) {
            int row = ty + 16 * r, e = tx + 16 * c;
            if (row < Lc && e < a.dv) {
                size_t o = (hr0 + row) * a.dv + e;
                vn[o] = from_f<T>(to_f(U[o]) - acc[r][c]);
            }
        }
}

// ---------------------------------------------------------------------------------------------------
// dV_loc = Sm^T dO, Sm = s (Q K^T . Gamma . M): grid (NT, HV, B)

template <typename T, int DKP, int DVP> struct DvlocK {
    static constexpr int SK = DKP + 1, SV = DVP + 1, SC = DR_C + 1;
    static constexpr size_t smem = sizeof(float) * ((size_t)2 * DR_C * SK + DR_C * SC + DR_C * SV + DR_C);
};

template <typename T, int DKP, int DVP> __global__ void __launch_bounds__(DR_THREADS) dr_dvloc_kernel(DrArgs a) {
    using L = DvlocK<T, DKP, DVP>;
    constexpr int SK = L::SK, SV = L::SV, SC = L::SC;
    CU_DYN_SMEM(float, sm);
    float *Qs = sm;              // [64][SK]
    float *Ks = Qs + DR_C * SK;  // [64][SK]
    float *Sm = Ks + DR_C * SK;  // [64][SC]
    float *dOs = Sm + DR_C * SC; // [64][SV]
    float *Gs = dOs + DR_C * SV; // [64]
    __shared__ int Ds[DR_C];
    const int n = blockIdx.x, j = blockIdx.y, b = blockIdx.z, i = j / a.G;
    const int t0 = n * DR_C, Lc = min(DR_C, a.T - t0);
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const size_t tok0 = (size_t)b * a.T + t0, hr0 = dr_hrow(a, b, j, t0);
    load_tile(Qs, SK, (const T *)a.q + tok0 * a.ldqk + (size_t)i * a.dk, a.ldqk, Lc, a.dk, DR_C, DKP);
    load_tile(Ks, SK, (const T *)a.k + tok0 * a.ldqk + (size_t)i * a.dk, a.ldqk, Lc, a.dk, DR_C, DKP);
    load_tile(dOs, SV, (const T *)a.dO + tok0 * a.lddo + (size_t)j * a.dv, a.lddo, Lc, a.dv, DR_C, DVP);
    load_G(Gs, a, hr0, Lc);
    load_D(Ds, a, b, t0, Lc);
    __syncthreads();
    {
        float acc[4][4];
        zero_acc(acc);
        mm_acc<4, 4>(acc, Qs, SK, 1, Ks, 1, SK, a.dk);
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                int row = ty + 16 * r, col = tx + 16 * c;
                Sm[row * SC + col] = col <= row && row < Lc && Ds[row] == Ds[col]
                                         ? rnd<T>(a.scale * acc[r][c] * expf(Gs[row] - Gs[col]))
                                         : 0.0f;
            }
    }
    __syncthreads();
    float acc[4][DVP / 16];
    zero_acc(acc);
    mm_acc<4, DVP / 16>(acc, Sm, 1, SC, dOs, SV, 1, DR_C); // A(row, i) = Sm[i][row]
    T *dvl = (T *)a.dvloc;
#pragma unroll
    for (int r = 0; r < 4; r++)
#pragma unroll
        for (int c = 0; c < DVP / 16; c++) {
            int row = ty + 16 * r, e = tx + 16 * c;
            if (row < Lc && e < a.dv) dvl[(hr0 + row) * a.dv + e] = from_f<T>(acc[r][c]);
        }
}

// ---------------------------------------------------------------------------------------------------
// dh recurrence: grid (dv / BV, HV, B), serial from the last chunk to the first

template <typename T, int DKP, int BV> struct DhK {
    static constexpr int SK = DKP + 1, SB = BV + 1;
    static constexpr size_t smem = sizeof(float) * ((size_t)DKP * SB + 3 * DR_C * SK + 2 * DR_C * SB + DR_C);
};

template <typename T, int DKP, int BV> __global__ void __launch_bounds__(DR_THREADS) dr_dh_kernel(DrArgs a) {
    using L = DhK<T, DKP, BV>;
    constexpr int SK = L::SK, SB = L::SB, MR = DKP / 16, NR = BV / 16;
    CU_DYN_SMEM(float, sm);
    float *dSs = sm;              // [DKP][SB] act-rounded dS_end (this dv tile)
    float *Ks = dSs + DKP * SB;   // [64][SK]
    float *Qs = Ks + DR_C * SK;   // [64][SK] s e^G q, act-rounded
    float *Ws = Qs + DR_C * SK;   // [64][SK]
    float *dOs = Ws + DR_C * SK;  // [64][SB]
    float *dVn = dOs + DR_C * SB; // [64][SB] act-rounded dV_new
    float *Gs = dVn + DR_C * SB;  // [64]
    __shared__ int Ds[DR_C];
    const int e0 = blockIdx.x * BV, j = blockIdx.y, b = blockIdx.z, i = j / a.G;
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const size_t bj = (size_t)b * a.HV + j;
    const T *q = (const T *)a.q;

    float dS[MR][NR]; // dL/d(state at the end of the current chunk), fp32
    zero_acc(dS);
    for (int n = a.NT - 1; n >= 0; n--) {
        const int t0 = n * DR_C, Lc = min(DR_C, a.T - t0);
        const size_t tok0 = (size_t)b * a.T + t0, hr0 = bj * a.T + t0;
#pragma unroll
        for (int r = 0; r < MR; r++)
#pragma unroll
            for (int c = 0; c < NR; c++) {
                int d = ty + 16 * r, e = tx + 16 * c;
                dSs[d * SB + e] = rnd<T>(dS[r][c]);
                if (d < a.dk) ((T *)a.dh)[dr_state_off(a, b, j, n) + (size_t)d * a.dv + e0 + e] = from_f<T>(dS[r][c]);
            }
        load_tile(Ks, SK, (const T *)a.k + tok0 * a.ldqk + (size_t)i * a.dk, a.ldqk, Lc, a.dk, DR_C, DKP);
        load_tile(Ws, SK, (const T *)a.W + hr0 * a.dk, a.dk, Lc, a.dk, DR_C, DKP);
        load_tile(dOs, SB, (const T *)a.dO + tok0 * a.lddo + (size_t)j * a.dv + e0, a.lddo, Lc, BV, DR_C, BV);
        for (int idx = threadIdx.x; idx < DR_C * DKP; idx += blockDim.x) {
            int r = idx / DKP, d = idx % DKP;
            const int dsr = a.ds && r < Lc ? a.ds[tok0 + r] : 0; // Ds is not loaded yet in this phase
            const float eg = r < Lc && (dsr < t0 || dsr == 0) ? expf(a.Gc[hr0 + r]) : 0.0f;
            Qs[r * SK + d] =
                r < Lc && d < a.dk ? rnd<T>(a.scale * eg * to_f(q[(tok0 + r) * a.ldqk + (size_t)i * a.dk + d])) : 0.0f;
        }
        load_G(Gs, a, hr0, Lc);
        load_D(Ds, a, b, t0, Lc);
        __syncthreads();
        const float GL = Gs[Lc - 1];
        { // dV_new = dV_loc + e^{G_last - G} . (K dS_end)
            float acc[4][NR];
            zero_acc(acc);
            mm_acc<4, NR>(acc, Ks, SK, 1, dSs, SB, 1, a.dk);
#pragma unroll
            for (int r = 0; r < 4; r++)
#pragma unroll
                for (int c = 0; c < NR; c++) {
                    int row = ty + 16 * r, e = tx + 16 * c;
                    float val = 0.0f;
                    if (row < Lc) {
                        size_t o = (hr0 + row) * a.dv + e0 + e;
                        val = to_f(((const T *)a.dvloc)[o]) +
                              (Ds[row] == Ds[Lc - 1] ? expf(GL - Gs[row]) : 0.0f) * acc[r][c];
                        ((T *)a.dvnew)[o] = from_f<T>(val);
                        val = rnd<T>(val);
                    }
                    dVn[row * SB + e] = val;
                }
        }
        __syncthreads();
        { // dS_start = e^{G_last} dS_end + (s e^G Q)^T dO - W^T dV_new
            const float eL = dr_carried(Ds, t0, Lc - 1) ? expf(GL) : 0.0f;
#pragma unroll
            for (int r = 0; r < MR; r++)
#pragma unroll
                for (int c = 0; c < NR; c++) dS[r][c] *= eL;
            mm_acc<MR, NR>(dS, Qs, 1, SK, dOs, SB, 1, DR_C);
            float wdv[MR][NR];
            zero_acc(wdv);
            mm_acc<MR, NR>(wdv, Ws, 1, SK, dVn, SB, 1, DR_C);
#pragma unroll
            for (int r = 0; r < MR; r++)
#pragma unroll
                for (int c = 0; c < NR; c++) dS[r][c] -= wdv[r][c];
        }
        __syncthreads(); // shared tiles are rewritten by the next (earlier) chunk
    }
}

// ---------------------------------------------------------------------------------------------------
// dq, dk (per v head), dw, dG: grid (NT, HV, B)

template <typename T, int DKP, int DVP> struct DqkwgK {
    static constexpr int SK = DKP + 1, SV = DVP + 1, SC = DR_C + 1;
    static constexpr size_t smem =
        sizeof(float) * ((size_t)2 * DR_C * SK + DR_C * SC + 2 * DR_C * SV + DKP * SV + 2 * DR_C);
};

template <typename T, int DKP, int DVP> __global__ void __launch_bounds__(DR_THREADS) dr_dqkwg_kernel(DrArgs a) {
    using L = DqkwgK<T, DKP, DVP>;
    constexpr int SK = L::SK, SV = L::SV, SC = L::SC, NK = DKP / 16;
    CU_DYN_SMEM(float, sm);
    float *Qs = sm;             // [64][SK]
    float *Ks = Qs + DR_C * SK; // [64][SK]
    float *Ps = Ks + DR_C * SK; // [64][SC] P, act-rounded
    float *Rv = Ps + DR_C * SC; // [64][SV] V_new
    float *Rd = Rv + DR_C * SV; // [64][SV] dO, later dV_new
    float *Rh = Rd + DR_C * SV; // [DKP][SV] h_n, later dS_end
    float *Gs = Rh + DKP * SV;  // [64]
    float *dgq = Gs + DR_C;     // [64] rowsum(dQ . Q)
    __shared__ int Ds[DR_C];
    const int n = blockIdx.x, j = blockIdx.y, b = blockIdx.z, i = j / a.G;
    const int t0 = n * DR_C, Lc = min(DR_C, a.T - t0);
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const size_t tok0 = (size_t)b * a.T + t0, hr0 = dr_hrow(a, b, j, t0), so = dr_state_off(a, b, j, n);

    load_tile(Qs, SK, (const T *)a.q + tok0 * a.ldqk + (size_t)i * a.dk, a.ldqk, Lc, a.dk, DR_C, DKP);
    load_tile(Ks, SK, (const T *)a.k + tok0 * a.ldqk + (size_t)i * a.dk, a.ldqk, Lc, a.dk, DR_C, DKP);
    load_tile(Rv, SV, (const T *)a.vnew + hr0 * a.dv, a.dv, Lc, a.dv, DR_C, DVP);
    load_tile(Rd, SV, (const T *)a.dO + tok0 * a.lddo + (size_t)j * a.dv, a.lddo, Lc, a.dv, DR_C, DVP);
    load_tile(Rh, SV, (const T *)a.h + so, a.dv, a.dk, a.dv, DKP, DVP);
    load_G(Gs, a, hr0, Lc);
    load_D(Ds, a, b, t0, Lc);
    __syncthreads();
    const float GL = Gs[Lc - 1];
    { // P = s (dO V_new^T) . Gamma . M
        float acc[4][4];
        zero_acc(acc);
        mm_acc<4, 4>(acc, Rd, SV, 1, Rv, 1, SV, a.dv);
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                int row = ty + 16 * r, col = tx + 16 * c;
                Ps[row * SC + col] = col <= row && row < Lc && Ds[row] == Ds[col]
                                         ? rnd<T>(a.scale * acc[r][c] * expf(Gs[row] - Gs[col]))
                                         : 0.0f;
            }
    }
    __syncthreads();
    { // dQ = s e^G (dO h^T) + P K
        float acc1[4][NK], acc2[4][NK], part[4];
        zero_acc(acc1);
        zero_acc(acc2);
        mm_acc<4, NK>(acc1, Rd, SV, 1, Rh, 1, SV, a.dv);
        mm_acc<4, NK>(acc2, Ps, SC, 1, Ks, SK, 1, DR_C);
#pragma unroll
        for (int r = 0; r < 4; r++) {
            int row = ty + 16 * r;
            float eg = a.scale * (dr_carried(Ds, t0, row) ? expf(Gs[row]) : 0.0f);
            part[r] = 0.0f;
#pragma unroll
            for (int c = 0; c < NK; c++) {
                int d = tx + 16 * c;
                float dq = eg * acc1[r][c] + acc2[r][c];
                if (row < Lc && d < a.dk) a.dq_v[(hr0 + row) * a.dk + d] = dq;
                part[r] += dq * Qs[row * SK + d];
            }
        }
#pragma unroll
        for (int r = 0; r < 4; r++) {
            float s = half_warp_sum(part[r]);
            if (tx == 0) dgq[ty + 16 * r] = s;
        }
    }
    __syncthreads(); // dO reads done
    load_tile(Rd, SV, (const T *)a.dvnew + hr0 * a.dv, a.dv, Lc, a.dv, DR_C, DVP);
    __syncthreads();
    { // dW = -dV_new h^T
        float acc[4][NK];
        zero_acc(acc);
        mm_acc<4, NK>(acc, Rd, SV, 1, Rh, 1, SV, a.dv);
        T *dw = (T *)a.dw;
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int c = 0; c < NK; c++) {
                int row = ty + 16 * r, d = tx + 16 * c;
                if (row < Lc && d < a.dk) dw[(hr0 + row) * a.dk + d] = from_f<T>(-acc[r][c]);
            }
    }
    // <h_n, dS_end> with dS_end read from global (act), h from shared
    float hd = 0.0f;
    {
        const T *dh = (const T *)a.dh + so;
        for (int idx = threadIdx.x; idx < a.dk * a.dv; idx += blockDim.x)
            hd += Rh[(idx / a.dv) * SV + idx % a.dv] * to_f(dh[idx]);
    }
    hd = block_sum(hd); // (its barriers also end every use of h in Rh)
    load_tile(Rh, SV, (const T *)a.dh + so, a.dv, a.dk, a.dv, DKP, DVP);
    __syncthreads();
    { // dK = e^{G_last - G} . (V_new dS^T) + P^T Q; dG
        float acc[4][NK], acc3[4][NK], part[4];
        zero_acc(acc);
        zero_acc(acc3);
        mm_acc<4, NK>(acc, Rv, SV, 1, Rh, 1, SV, a.dv);
        mm_acc<4, NK>(acc3, Ps, 1, SC, Qs, SK, 1, DR_C); // A(row, m) = P[m][row]
        float kint = 0.0f;
#pragma unroll
        for (int r = 0; r < 4; r++) {
            int row = ty + 16 * r;
            float dec = row < Lc && Ds[row] == Ds[Lc - 1] ? expf(GL - Gs[row]) : 0.0f;
            part[r] = 0.0f;
#pragma unroll
            for (int c = 0; c < NK; c++) {
                int d = tx + 16 * c;
                float x = dec * acc[r][c];
                kint += x * Ks[row * SK + d];
                float dkv = x + acc3[r][c];
                if (row < Lc && d < a.dk) a.dk_v[(hr0 + row) * a.dk + d] = dkv;
                part[r] += dkv * Ks[row * SK + d];
            }
        }
        const float extra = block_sum(kint) + (dr_carried(Ds, t0, Lc - 1) ? expf(GL) : 0.0f) * hd;
#pragma unroll
        for (int r = 0; r < 4; r++) {
            int row = ty + 16 * r;
            float s = half_warp_sum(part[r]);
            if (tx == 0 && row < Lc) a.dg[hr0 + row] = dgq[row] - s + (row == Lc - 1 ? extra : 0.0f);
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// WY backward + reverse cumsum of dG: grid (NT, HV, B)

template <typename T, int DKP, int DVP> struct WyK {
    static constexpr int SK = DKP + 1, SV = DVP + 1, SC = DR_C + 1;
    static constexpr size_t smem = sizeof(float) * ((size_t)4 * DR_C * SC + 2 * DR_C * SK + 2 * DR_C * SV + 4 * DR_C);
};

template <typename T, int DKP, int DVP> __global__ void __launch_bounds__(DR_THREADS) dr_wy_kernel(DrArgs a) {
    using L = WyK<T, DKP, DVP>;
    constexpr int SK = L::SK, SV = L::SV, SC = L::SC, NK = DKP / 16, NV = DVP / 16;
    CU_DYN_SMEM(float, sm);
    float *Ts = sm;              // [64][SC] Tm
    float *dTs = Ts + DR_C * SC; // [64][SC] dT, later dM, later beta . dM (rows)
    float *Zs = dTs + DR_C * SC; // [64][SC] dT Tm^T
    float *Es = Zs + DR_C * SC;  // [64][SC] dA . A
    float *dWs = Es + DR_C * SC; // [64][SK]
    float *Ks = dWs + DR_C * SK; // [64][SK]
    float *dUs = Ks + DR_C * SK; // [64][SV]
    float *Vs = dUs + DR_C * SV; // [64][SV]
    float *Gs = Vs + DR_C * SV;  // [64]
    float *bs = Gs + DR_C;       // [64] beta (0 past Lc)
    float *dbs = bs + DR_C;      // [64] dbeta
    float *dgs = dbs + DR_C;     // [64] dG
    __shared__ int Ds[DR_C];
    const int n = blockIdx.x, j = blockIdx.y, b = blockIdx.z, i = j / a.G;
    const int t0 = n * DR_C, Lc = min(DR_C, a.T - t0);
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const size_t tok0 = (size_t)b * a.T + t0, hr0 = dr_hrow(a, b, j, t0);

    load_tile(Ts, SC, (const T *)a.Tm + hr0 * DR_C, DR_C, Lc, DR_C, DR_C, DR_C);
    load_tile(dWs, SK, (const T *)a.dw + hr0 * a.dk, a.dk, Lc, a.dk, DR_C, DKP);
    load_tile(Ks, SK, (const T *)a.k + tok0 * a.ldqk + (size_t)i * a.dk, a.ldqk, Lc, a.dk, DR_C, DKP);
    load_tile(dUs, SV, (const T *)a.dvnew + hr0 * a.dv, a.dv, Lc, a.dv, DR_C, DVP);
    load_tile(Vs, SV, (const T *)a.v + tok0 * a.ldv + (size_t)j * a.dv, a.ldv, Lc, a.dv, DR_C, DVP);
    load_G(Gs, a, hr0, Lc);
    load_D(Ds, a, b, t0, Lc);
    if (threadIdx.x < DR_C) {
        int r = threadIdx.x;
        bs[r] = r < Lc ? a.beta[(tok0 + r) * a.HV + j] : 0.0f;
        dbs[r] = 0.0f;
        dgs[r] = r < Lc ? a.dg[hr0 + r] : 0.0f;
    }
    __syncthreads();

    float dK[4][NK]; // this kernel's additions to dk_v
    zero_acc(dK);
    { // X = Tm^T dW: dK += beta e^G X; dbeta += e^G (X . K); dG += beta e^G (X . K)
        float acc[4][NK], part[4];
        zero_acc(acc);
        mm_acc<4, NK>(acc, Ts, 1, SC, dWs, SK, 1, DR_C);
#pragma unroll
        for (int r = 0; r < 4; r++) {
            int row = ty + 16 * r;
            float bg = bs[row] * (dr_carried(Ds, t0, row) ? expf(Gs[row]) : 0.0f);
            part[r] = 0.0f;
#pragma unroll
            for (int c = 0; c < NK; c++) {
                dK[r][c] += bg * acc[r][c];
                part[r] += acc[r][c] * Ks[row * SK + tx + 16 * c];
            }
        }
#pragma unroll
        for (int r = 0; r < 4; r++) {
            int row = ty + 16 * r;
            float xk = half_warp_sum(part[r]);
            if (tx == 0) {
                float eg = dr_carried(Ds, t0, row) ? expf(Gs[row]) : 0.0f;
                dbs[row] += eg * xk;
                dgs[row] += bs[row] * eg * xk;
            }
        }
    }
    { // Y = Tm^T dV_new: dV = beta Y (the op's output); dbeta += Y . V
        float acc[4][NV], part[4];
        zero_acc(acc);
        mm_acc<4, NV>(acc, Ts, 1, SC, dUs, SV, 1, DR_C);
        T *dv = (T *)a.dv_out;
#pragma unroll
        for (int r = 0; r < 4; r++) {
            int row = ty + 16 * r;
            part[r] = 0.0f;
#pragma unroll
            for (int c = 0; c < NV; c++) {
                int e = tx + 16 * c;
                if (row < Lc && e < a.dv)
                    dv[(tok0 + row) * a.lddv + (size_t)j * a.dv + e] = from_f<T>(bs[row] * acc[r][c]);
                part[r] += acc[r][c] * Vs[row * SV + e];
            }
        }
#pragma unroll
        for (int r = 0; r < 4; r++) {
            float yv = half_warp_sum(part[r]);
            if (tx == 0) dbs[ty + 16 * r] += yv;
        }
    }
    { // dT = dW (beta e^G K)^T + dV_new (beta V)^T, strictly lower
        float acc1[4][4], acc2[4][4];
        zero_acc(acc1);
        zero_acc(acc2);
        mm_acc<4, 4>(acc1, dWs, SK, 1, Ks, 1, SK, a.dk);
        mm_acc<4, 4>(acc2, dUs, SV, 1, Vs, 1, SV, a.dv);
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                int row = ty + 16 * r, col = tx + 16 * c;
                const float egc = dr_carried(Ds, t0, col) ? expf(Gs[col]) : 0.0f;
                dTs[row * SC + col] = col < row ? acc1[r][c] * (bs[col] * egc) + acc2[r][c] * bs[col] : 0.0f;
            }
    }
    __syncthreads();
    { // Z = dT Tm^T
        float acc[4][4];
        zero_acc(acc);
        mm_acc<4, 4>(acc, dTs, SC, 1, Ts, 1, SC, DR_C);
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int c = 0; c < 4; c++) Zs[(ty + 16 * r) * SC + tx + 16 * c] = acc[r][c];
    }
    __syncthreads();
    { // dA = -Tm^T Z (strictly lower); A = beta_i (K K^T) Gamma; dM = dA . Gamma; E = dA . A
        float acc[4][4], kk[4][4], part[4];
        zero_acc(acc);
        zero_acc(kk);
        mm_acc<4, 4>(acc, Ts, 1, SC, Zs, SC, 1, DR_C);
        mm_acc<4, 4>(kk, Ks, SK, 1, Ks, 1, SK, a.dk);
#pragma unroll
        for (int r = 0; r < 4; r++) {
            int row = ty + 16 * r;
            part[r] = 0.0f;
#pragma unroll
            for (int c = 0; c < 4; c++) {
                int col = tx + 16 * c;
                float e = 0.0f, dm = 0.0f;
                if (col < row && Ds[row] == Ds[col]) {
                    float gam = expf(Gs[row] - Gs[col]);
                    float dA = -acc[r][c];
                    e = dA * (bs[row] * kk[r][c] * gam);
                    dm = dA * gam;
                    part[r] += dm * kk[r][c];
                }
                Es[row * SC + col] = e;
                dTs[row * SC + col] = dm; // dT is no longer read (Z is done)
            }
        }
#pragma unroll
        for (int r = 0; r < 4; r++) {
            float bk = half_warp_sum(part[r]);
            if (tx == 0) dbs[ty + 16 * r] += bk;
        }
    }
    __syncthreads();
    if (threadIdx.x < DR_C) { // dG += rowsum(E) - colsum(E)
        const int r = threadIdx.x;
        float rs = 0.0f, cs = 0.0f;
        for (int m = 0; m < DR_C; m++) {
            rs += Es[r * SC + m];
            cs += Es[m * SC + r];
        }
        dgs[r] += rs - cs;
    }
    { // dK += beta . (dM K)
        float acc[4][NK];
        zero_acc(acc);
        mm_acc<4, NK>(acc, dTs, SC, 1, Ks, SK, 1, DR_C);
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int c = 0; c < NK; c++) dK[r][c] += bs[ty + 16 * r] * acc[r][c];
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < DR_C * DR_C; idx += blockDim.x) { // rows of dM scaled by beta
        int m = idx / DR_C, c = idx % DR_C;
        dTs[m * SC + c] *= bs[m];
    }
    __syncthreads();
    { // dK += dM^T (beta . K), then add into the per-v-head dk from dqkwg
        float acc[4][NK];
        zero_acc(acc);
        mm_acc<4, NK>(acc, dTs, 1, SC, Ks, SK, 1, DR_C); // A(row, m) = beta_m dM[m][row]
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int c = 0; c < NK; c++) {
                int row = ty + 16 * r, d = tx + 16 * c;
                if (row < Lc && d < a.dk) a.dk_v[(hr0 + row) * a.dk + d] += dK[r][c] + acc[r][c];
            }
    }
    __syncthreads();        // dbs, dgs complete
    if (threadIdx.x == 0) { // dgamma = reverse cumsum of dG within the chunk
        float acc = 0.0f;
        for (int r = Lc - 1; r >= 0; r--) {
            acc += dgs[r];
            a.dgamma[(tok0 + r) * a.HV + j] = acc;
            if (Ds[r] == t0 + r) acc = 0.0f; // G restarts where a document starts
        }
    }
    if ((int)threadIdx.x < Lc) a.dbeta[(tok0 + threadIdx.x) * a.HV + j] = dbs[threadIdx.x];
}

// ---------------------------------------------------------------------------------------------------
// dq, dk = sum over the GVA group, one thread per output element

template <typename T> __global__ void dr_group_kernel(DrArgs a) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t per_tok = (size_t)a.H * a.dk;
    if (idx >= (size_t)a.B * a.T * per_tok) return;
    const size_t tok = idx / per_tok;
    const int rem = (int)(idx % per_tok), i = rem / a.dk, d = rem % a.dk;
    const int b = (int)(tok / a.T), t = (int)(tok % a.T);
    float sq = 0.0f, sk = 0.0f;
    for (int g = 0; g < a.G; g++) {
        size_t o = dr_hrow(a, b, i * a.G + g, t) * a.dk + d;
        sq += a.dq_v[o];
        sk += a.dk_v[o];
    }
    ((T *)a.dq)[tok * a.lddqk + (size_t)i * a.dk + d] = from_f<T>(sq);
    ((T *)a.dk_out)[tok * a.lddqk + (size_t)i * a.dk + d] = from_f<T>(sk);
}

// ---------------------------------------------------------------------------------------------------
// launchers

static dim3 chunk_grid(const DrArgs &a) { return dim3(a.NT, a.HV, a.B); }

template <typename T, int DKP, int DVP> static void run_chunk_kernels(const DrArgs &a, bool have_h_save) {
    if (have_h_save)
        cu_launch("delta_rule_bwd vnew", dr_vnew_kernel<T, DKP, DVP>, chunk_grid(a), dim3(DR_THREADS),
                  VnewK<T, DKP, DVP>::smem, a);
    cu_launch("delta_rule_bwd dvloc", dr_dvloc_kernel<T, DKP, DVP>, chunk_grid(a), dim3(DR_THREADS),
              DvlocK<T, DKP, DVP>::smem, a);
}
template <typename T, int DKP, int DVP> static void run_grad_kernels(const DrArgs &a) {
    cu_launch("delta_rule_bwd dqkwg", dr_dqkwg_kernel<T, DKP, DVP>, chunk_grid(a), dim3(DR_THREADS),
              DqkwgK<T, DKP, DVP>::smem, a);
    cu_launch("delta_rule_bwd wy", dr_wy_kernel<T, DKP, DVP>, chunk_grid(a), dim3(DR_THREADS), WyK<T, DKP, DVP>::smem,
              a);
}
template <typename T, int DKP, int BV> static void run_dh(const DrArgs &a) {
    cu_launch("delta_rule_bwd dh", dr_dh_kernel<T, DKP, BV>, dim3(a.dv / BV, a.HV, a.B), dim3(DR_THREADS),
              DhK<T, DKP, BV>::smem, a);
}

template <typename T>
static void cu_delta_rule_bwd(const DeltaRuleArgs *in, const void *do_, int lddo, const DeltaRuleGrads *g) {
    void *dq = g->dq, *dk = g->dk, *dv = g->dv;
    float *dbeta = g->dbeta, *dgamma = g->dgamma;
    int lddqk = g->lddqk, lddv = g->lddv;
    const void *q = in->q, *k = in->k, *v = in->v, *h_save = in->h_save;
    const float *beta = in->beta, *gamma = in->gamma;
    int ldqk = in->ldqk, ldv = in->ldv, B = in->B, T_ = in->T, H = in->H, HV = in->HV, dk_ = in->dk, dv_ = in->dv;
    float scale = in->scale;
    const int32_t *doc_start = in->doc_start;
    CU_REQUIRE(dq && dk && dv && dbeta && dgamma && do_ && q && k && v && beta && gamma, "delta_rule_bwd",
               "NULL pointer (dq, dk, dv, dbeta, dgamma, do, q, k, v, beta, gamma)");
    dr_check_dims("delta_rule_bwd", B, T_, H, HV, dk_, dv_);
    CU_REQUIRE(ldqk >= H * dk_ && lddqk >= H * dk_ && ldv >= HV * dv_ && lddv >= HV * dv_ && lddo >= HV * dv_,
               "delta_rule_bwd", "row strides ldqk=%d lddqk=%d ldv=%d lddv=%d lddo=%d below H*dk=%d / HV*dv=%d", ldqk,
               lddqk, ldv, lddv, lddo, H * dk_, HV * dv_);
    if (B == 0 || T_ == 0) return;
    DrArgs a;
    memset(&a, 0, sizeof a);
    a.B = B, a.T = T_, a.H = H, a.HV = HV, a.G = HV / H, a.dk = dk_, a.dv = dv_, a.NT = (T_ + DR_C - 1) / DR_C;
    a.scale = scale;
    a.q = q, a.k = k, a.v = v, a.ldqk = ldqk, a.ldv = ldv, a.beta = beta, a.gamma = gamma, a.ds = doc_start;
    a.dO = do_, a.lddo = lddo, a.dq = dq, a.dk_out = dk, a.dv_out = dv, a.lddqk = lddqk, a.lddv = lddv;
    a.dbeta = dbeta, a.dgamma = dgamma;
    const char *op = "delta_rule_bwd";
    const size_t rows = (size_t)B * HV * T_, states = (size_t)B * HV * a.NT * dk_ * dv_;
    if (dr_use_tc(sizeof(T) == sizeof(bf16), dk_, dv_)) { // tensor cores (delta_rule_tc_bwd.cu)
        // temporaries in the caller's scratch when all seven fit (the model passes the MLP's gate|up gradient buffer,
        // dead during a GDN block's backward: ~0.19 GiB less at the step's peak for the 300M at 16 x 2048), else own
        const size_t sz[7] = {rows * sizeof(float), rows * dk_ * sizeof(T), rows * DR_C * sizeof(T), rows * dv_ * sizeof(T),
                              rows * dv_ * sizeof(T), states * sizeof(T), rows * dv_ * sizeof(T)};
        void *tmp[7];
        const bool carved = dr_temps(tmp, sz, 7, in->scratch, in->scratch_bytes, op);
        a.Gc = (float *)tmp[0], a.W = tmp[1], a.Tm = tmp[2], a.vnew = tmp[3], a.dvloc = tmp[4], a.dh = tmp[5];
        a.dvnew = tmp[6];
        a.h = (void *)h_save;
        if (!h_save) { // rebuild the chunk-start states with the forward's kernels (zero initial state)
            a.h = cu_scratch(states * sizeof(T), op);
            a.U = cu_scratch(rows * dv_ * sizeof(T), op);
            dr_tc_fwd_intra(a);
            dr_tc_fwd_state(a);
            cu_scratch_free(a.U);
            a.U = NULL;
        }
        dr_tc_bwd(a);
        dr_temps_free(tmp, 7, carved);
        if (!h_save) cu_scratch_free(a.h);
        return;
    }
    a.Gc = (float *)cu_scratch(rows * sizeof(float), op);
    a.W = cu_scratch(rows * dk_ * sizeof(T), op);
    a.U = cu_scratch(rows * dv_ * sizeof(T), op);
    a.Tm = cu_scratch(rows * DR_C * sizeof(T), op);
    a.vnew = cu_scratch(rows * dv_ * sizeof(T), op);
    a.h = h_save ? (void *)h_save : cu_scratch(states * sizeof(T), op);
    a.dvloc = cu_scratch(rows * dv_ * sizeof(T), op);
    a.dh = cu_scratch(states * sizeof(T), op);
    a.dvnew = cu_scratch(rows * dv_ * sizeof(T), op);
    a.dw = cu_scratch(rows * dk_ * sizeof(T), op);
    a.dq_v = (float *)cu_scratch(rows * dk_ * sizeof(float), op);
    a.dk_v = (float *)cu_scratch(rows * dk_ * sizeof(float), op);
    a.dg = (float *)cu_scratch(rows * sizeof(float), op);

    dr_run_intra<T>(a);
    if (!h_save) dr_run_state<T>(a); // zero initial state (a.state is NULL): h and V_new
    if (dk_ <= 64) {
        if (dv_ <= 64)
            run_chunk_kernels<T, 64, 64>(a, h_save != NULL);
        else
            run_chunk_kernels<T, 64, 128>(a, h_save != NULL);
    } else {
        if (dv_ <= 64)
            run_chunk_kernels<T, 128, 64>(a, h_save != NULL);
        else
            run_chunk_kernels<T, 128, 128>(a, h_save != NULL);
    }
    if (dk_ <= 64)
        dv_ % 32 == 0 ? run_dh<T, 64, 32>(a) : run_dh<T, 64, 16>(a);
    else
        dv_ % 32 == 0 ? run_dh<T, 128, 32>(a) : run_dh<T, 128, 16>(a);
    if (dk_ <= 64) {
        if (dv_ <= 64)
            run_grad_kernels<T, 64, 64>(a);
        else
            run_grad_kernels<T, 64, 128>(a);
    } else {
        if (dv_ <= 64)
            run_grad_kernels<T, 128, 64>(a);
        else
            run_grad_kernels<T, 128, 128>(a);
    }
    cu_launch("delta_rule_bwd group", dr_group_kernel<T>, dim3(cu_blocks((size_t)B * T_ * H * dk_, 256)), dim3(256), 0,
              a);

    void *bufs[] = {a.Gc,    a.W,  a.U,    a.Tm,   a.vnew, h_save ? NULL : a.h, a.dvloc, a.dh,
                    a.dvnew, a.dw, a.dq_v, a.dk_v, a.dg};
    for (size_t x = 0; x < sizeof bufs / sizeof bufs[0]; x++) cu_scratch_free(bufs[x]);
}

void cu_register_delta_rule_bwd(Backend *b, int use_bf16) {
    b->delta_rule_bwd = use_bf16 ? cu_delta_rule_bwd<bf16> : cu_delta_rule_bwd<float>;
}
