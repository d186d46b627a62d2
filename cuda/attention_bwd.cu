// attention_bwd.cu: FlashAttention-2 backward (spec hybrid.md §4.2) on bf16 tensor cores, head dim 64,
// deterministic with no atomics (FLA parallel_attn's split, §4.3): P is recomputed from the saved lse in
// both kernels, so each output has a single writer and a fixed summation order.
//   D kernel:   D_t = rowsum(dO_t * O_t), fp32 [B, Ha, T] (one warp per row)
//   dQ kernel:  grid (query block, Ha, B); per key block: S = Q K^T, P = exp(S scale - lse), dP = dO V^T,
//               dS = P (dP - D) -> bf16, dQ += dS K; dQ scaled at the end
//   dKV kernel: grid (key block, Hkv, B); per query head of the GQA group and query block that sees the keys:
//               S^T = K Q^T, P^T, dV += bf16(P^T) dO, dP^T = V dO^T, dS^T = P^T (dP^T - D) -> bf16,
//               dK += dS^T Q; so dK/dV sum the group's heads in a fixed order (no expanded buffers)
// Blocks of 64 rows, 4 warps of 16 rows; tiles double-buffered by cp.async (cuda/delta_rule.cuh primitives).
#include "cuda/attention.cuh"
#include "cuda/delta_rule.cuh"

namespace {
constexpr int BB = 64, HD = 64, LDS = HD + 8, TILE = BB * LDS, KS = HD / 16, NO = HD / 8;
constexpr float LOG2E = 1.4426950408889634f;
constexpr size_t SMEM = (size_t)6 * TILE * sizeof(bf16) + 4 * BB * sizeof(float);

__global__ void fa_bwd_D_kernel(AttnArgs a) {
    const int row = blockIdx.x * 4 + (threadIdx.x >> 5), l = threadIdx.x & 31; // row = (b*Ha + j)*T + t
    if (row >= a.B * a.Ha * a.T) return;
    const int t = row % a.T, bj = row / a.T, j = bj % a.Ha, b = bj / a.Ha;
    const size_t off = ((size_t)b * a.T + t) * a.Ha * a.d + (size_t)j * a.d;
    float s = 0.0f;
    for (int e = l; e < a.d; e += 32) s += to_f(((const bf16 *)a.dO)[off + e]) * to_f(((const bf16 *)a.O)[off + e]);
    s = warp_sum(s);
    if (l == 0) a.D[row] = s;
}

__device__ __forceinline__ bool visible(int tau, int t, int T, int window) {
    return tau <= t && t < T && (window <= 0 || tau > t - window);
}

// grid (ceil(T/64), Ha, B)
__global__ void __launch_bounds__(TC_THREADS) fa_bwd_dq_kernel(AttnArgs a) {
    CU_DYN_SMEM(unsigned char, sm);
    bf16 *Qs = reinterpret_cast<bf16 *>(sm), *dOs = Qs + TILE, *Ks = dOs + TILE, *Vs = Ks + 2 * TILE;
    const int qb = blockIdx.x, j = blockIdx.y, b = blockIdx.z, c = j / (a.Ha / a.Hkv);
    const int warp = threadIdx.x >> 5, lane = tc_lane(), R0 = 16 * warp;
    const int Dq = a.Ha * HD, Dkv = a.Hkv * HD, t0 = qb * BB, rows = min(BB, a.T - t0);
    const int jb1 = (t0 + rows + BB - 1) / BB, jb0 = a.window > 0 ? max(0, t0 - a.window + 1) / BB : 0;
    const size_t qoff = ((size_t)b * a.T + t0) * Dq + (size_t)j * HD;
    const bf16 *Kg = (const bf16 *)a.K + (size_t)b * a.T * Dkv + (size_t)c * HD;
    const bf16 *Vg = (const bf16 *)a.V + (size_t)b * a.T * Dkv + (size_t)c * HD;
    tile_load<BB, HD, LDS>(Qs, (const bf16 *)a.Q + qoff, Dq, rows, HD);
    tile_load<BB, HD, LDS>(dOs, (const bf16 *)a.dO + qoff, Dq, rows, HD);
    cp_async_commit();
    auto load_kv = [&](int jb, int buf) {
        const int k0 = jb * BB, kr = min(BB, a.T - k0);
        tile_load<BB, HD, LDS>(Ks + buf * TILE, Kg + (size_t)k0 * Dkv, Dkv, kr, HD);
        tile_load<BB, HD, LDS>(Vs + buf * TILE, Vg + (size_t)k0 * Dkv, Dkv, kr, HD);
        cp_async_commit();
    };
    load_kv(jb0, 0);
    // this lane's two rows: query positions, lse (log2 units) and D
    const int tq[2] = {t0 + R0 + (lane >> 2), t0 + R0 + (lane >> 2) + 8};
    float L2[2], Dr[2];
    for (int h = 0; h < 2; h++) {
        const size_t sr = ((size_t)b * a.Ha + j) * a.T + min(tq[h], a.T - 1);
        L2[h] = a.lse[sr] * LOG2E;
        Dr[h] = a.D[sr];
    }
    const float sl2 = a.scale * LOG2E;
    uint32_t qa[KS][4], da[KS][4];
    float dq[NO][4];
    zero_tc(dq);
    for (int jb = jb0; jb < jb1; jb++) {
        const int buf = (jb - jb0) & 1;
        if (jb + 1 < jb1) load_kv(jb + 1, buf ^ 1);
        cp_async_wait_current(jb + 1 < jb1);
        __syncthreads();
        if (jb == jb0)
            for (int s = 0; s < KS; s++) lda_rk(qa[s], Qs, LDS, R0, 16 * s), lda_rk(da[s], dOs, LDS, R0, 16 * s);
        const bf16 *Kb = Ks + buf * TILE, *Vb = Vs + buf * TILE;
        float sc[8][4], dp[8][4];
        zero_tc(sc);
        zero_tc(dp);
#pragma unroll
        for (int s = 0; s < KS; s++) {
            mma_row<B_NK>(sc, qa[s], Kb, LDS, 16 * s, 0, 4);
            mma_row<B_NK>(dp, da[s], Vb, LDS, 16 * s, 0, 4);
        }
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int x = 0; x < 4; x++) {
                const int tau = jb * BB + acc_col(nt, x), h = x >> 1;
                const float p = visible(tau, tq[h], a.T, a.window) ? exp2f(sc[nt][x] * sl2 - L2[h]) : 0.0f;
                sc[nt][x] = p * (dp[nt][x] - Dr[h]); // dS
            }
        uint32_t sa[4][4];
        acc_to_a(sa, sc); // bf16(dS), as FA rounds it
#pragma unroll
        for (int s = 0; s < 4; s++) mma_row<B_KN>(dq, sa[s], Kb, LDS, 16 * s, 0, NO / 2);
        __syncthreads();
    }
#pragma unroll
    for (int nt = 0; nt < NO; nt++)
#pragma unroll
        for (int x = 0; x < 4; x++) dq[nt][x] *= a.scale;
    bf16 *dQg = (bf16 *)a.dQ + qoff;
    store_acc<NO>(dQg, Dq, dq, R0, rows, HD, tc_pairs_ok(dQg, Dq));
}

// grid (ceil(T/64), Hkv, B)
__global__ void __launch_bounds__(TC_THREADS) fa_bwd_dkv_kernel(AttnArgs a) {
    CU_DYN_SMEM(unsigned char, sm);
    bf16 *Ks = reinterpret_cast<bf16 *>(sm), *Vs = Ks + TILE, *Qs = Vs + TILE, *dOs = Qs + 2 * TILE;
    float *Ls = reinterpret_cast<float *>(dOs + 2 * TILE), *Ds = Ls + 2 * BB; // [2][64] each
    const int kb = blockIdx.x, c = blockIdx.y, b = blockIdx.z, g = a.Ha / a.Hkv;
    const int warp = threadIdx.x >> 5, lane = tc_lane(), R0 = 16 * warp;
    const int Dq = a.Ha * HD, Dkv = a.Hkv * HD, k0 = kb * BB, krows = min(BB, a.T - k0);
    // query blocks that see these keys: from the keys' own block to the last row within the window
    const int ib0 = kb, ib1 = a.window > 0 ? (min(a.T, k0 + krows - 1 + a.window) + BB - 1) / BB : (a.T + BB - 1) / BB;
    const int nib = ib1 - ib0, nit = g * nib;
    const size_t koff = ((size_t)b * a.T + k0) * Dkv + (size_t)c * HD;
    tile_load<BB, HD, LDS>(Ks, (const bf16 *)a.K + koff, Dkv, krows, HD);
    tile_load<BB, HD, LDS>(Vs, (const bf16 *)a.V + koff, Dkv, krows, HD);
    cp_async_commit();
    // iteration it: query head c*g + it / nib, query block ib0 + it % nib
    auto load_q = [&](int it, int buf) {
        const int jq = c * g + it / nib, q0 = (ib0 + it % nib) * BB, qr = min(BB, a.T - q0);
        const size_t qoff = ((size_t)b * a.T + q0) * Dq + (size_t)jq * HD;
        tile_load<BB, HD, LDS>(Qs + buf * TILE, (const bf16 *)a.Q + qoff, Dq, qr, HD);
        tile_load<BB, HD, LDS>(dOs + buf * TILE, (const bf16 *)a.dO + qoff, Dq, qr, HD);
        if (threadIdx.x < BB) {
            const size_t sr = ((size_t)b * a.Ha + jq) * a.T + min(q0 + (int)threadIdx.x, a.T - 1);
            Ls[buf * BB + threadIdx.x] = a.lse[sr] * LOG2E;
            Ds[buf * BB + threadIdx.x] = a.D[sr];
        }
        cp_async_commit();
    };
    load_q(0, 0);
    const float sl2 = a.scale * LOG2E;
    const int tk[2] = {k0 + R0 + (lane >> 2), k0 + R0 + (lane >> 2) + 8}; // this lane's two key positions
    uint32_t ka[KS][4], va[KS][4];
    float dk[NO][4], dv[NO][4];
    zero_tc(dk);
    zero_tc(dv);
    for (int it = 0; it < nit; it++) {
        const int buf = it & 1, q0 = (ib0 + it % nib) * BB;
        if (it + 1 < nit) load_q(it + 1, buf ^ 1);
        cp_async_wait_current(it + 1 < nit);
        __syncthreads();
        if (it == 0)
            for (int s = 0; s < KS; s++) lda_rk(ka[s], Ks, LDS, R0, 16 * s), lda_rk(va[s], Vs, LDS, R0, 16 * s);
        const bf16 *Qb = Qs + buf * TILE, *dOb = dOs + buf * TILE;
        const float *Lb = Ls + buf * BB, *Db = Ds + buf * BB;
        float st[8][4], dpt[8][4];
        zero_tc(st);
        zero_tc(dpt);
#pragma unroll
        for (int s = 0; s < KS; s++) {
            mma_row<B_NK>(st, ka[s], Qb, LDS, 16 * s, 0, 4);  // S^T = K Q^T
            mma_row<B_NK>(dpt, va[s], dOb, LDS, 16 * s, 0, 4); // dP^T = V dO^T
        }
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int x = 0; x < 4; x++) {
                const int qc = acc_col(nt, x), t = q0 + qc, tau = tk[x >> 1];
                const float p = tau < a.T && visible(tau, t, a.T, a.window) ? exp2f(st[nt][x] * sl2 - Lb[qc]) : 0.0f;
                st[nt][x] = p;
                dpt[nt][x] = p * (dpt[nt][x] - Db[qc]); // dS^T
            }
        uint32_t pa[4][4], sa[4][4];
        acc_to_a(pa, st);  // bf16(P^T)
        acc_to_a(sa, dpt); // bf16(dS^T)
#pragma unroll
        for (int s = 0; s < 4; s++) {
            mma_row<B_KN>(dv, pa[s], dOb, LDS, 16 * s, 0, NO / 2); // dV += P^T dO
            mma_row<B_KN>(dk, sa[s], Qb, LDS, 16 * s, 0, NO / 2);  // dK += dS^T Q
        }
        __syncthreads();
    }
#pragma unroll
    for (int nt = 0; nt < NO; nt++)
#pragma unroll
        for (int x = 0; x < 4; x++) dk[nt][x] *= a.scale;
    bf16 *dKg = (bf16 *)a.dK + koff, *dVg = (bf16 *)a.dV + koff;
    store_acc<NO>(dKg, Dkv, dk, R0, krows, HD, tc_pairs_ok(dKg, Dkv));
    store_acc<NO>(dVg, Dkv, dv, R0, krows, HD, tc_pairs_ok(dVg, Dkv));
}
} // namespace

bool attn_fa_bwd_supported(int d) { return d == HD; }

void attn_fa_bwd(const AttnArgs &a) {
    cu_launch("attn_bwd fa D", fa_bwd_D_kernel, dim3(cu_blocks((size_t)a.B * a.Ha * a.T, 4)), dim3(128), 0, a);
    cu_launch("attn_bwd fa dq", fa_bwd_dq_kernel, dim3(cu_blocks(a.T, BB), a.Ha, a.B), dim3(TC_THREADS), SMEM, a);
    cu_launch("attn_bwd fa dkv", fa_bwd_dkv_kernel, dim3(cu_blocks(a.T, BB), a.Hkv, a.B), dim3(TC_THREADS), SMEM, a);
}
