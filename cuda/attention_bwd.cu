// attention_bwd.cu: FlashAttention-2 backward (spec hybrid.md §4.2) on bf16 tensor cores, head dim 64 and 128,
// deterministic with no atomics (FLA parallel_attn's split, §4.3): P is recomputed from the saved lse in
// both kernels, so each output has a single writer and a fixed summation order.
//   D kernel:   D_t = rowsum(dO_t * O_t), fp32 [B, Ha, T] (one warp per row)
//   dQ kernel:  grid (query block, Ha, B); per key tile: S = Q K^T, P = exp(S scale - lse), dP = dO V^T,
//               dS = P (dP - D) -> bf16, dQ += dS K; dQ scaled at the end
//   dKV kernel: grid (key block, Hkv, B); per query head of the GQA group and query tile that sees the keys:
//               S^T = K Q^T, P^T, dV += bf16(P^T) dO, dP^T = V dO^T, dS^T = P^T (dP^T - D) -> bf16,
//               dK += dS^T Q; so dK/dV sum the group's heads in a fixed order (no expanded buffers)
// Each block owns 64 rows (4 warps of 16 rows); the other operand streams in tiles of BS rows, double-buffered
// by cp.async (cuda/delta_rule.cuh primitives). d = 64: BS = 64, the owned tiles' A fragments kept in registers.
// d = 128: BS = 32 and the A fragments re-read from shared memory per tile, so the dK/dV (or dQ) accumulators,
// 128 fp32 registers a lane for dK + dV, fit beside the score tiles without spilling.
// Packed documents (a.ds, backend.h doc_start): tiles wholly outside the owned rows' documents are skipped (key
// tiles before the query block's first document start; query tiles past the end of the last key's document),
// and inside a tile a key before the query's document start is masked.
#include "cuda/attention.cuh"
#include "cuda/delta_rule.cuh"

namespace {
constexpr float LOG2E = 1.4426950408889634f;

template <int HD> struct FaBwd {
    static constexpr int BB = 64;               // rows a block owns (query rows: dQ kernel; key rows: dKV)
    static constexpr int BS = HD == 64 ? 64 : 32; // rows of a streamed tile
    static constexpr int LDS = HD + 8;          // bf16 row stride (16-byte pad: conflict-free ldmatrix)
    static constexpr int TB = BB * LDS, TS = BS * LDS;
    static constexpr bool KEEP_A = HD == 64;    // the owned tiles' A fragments stay in registers
    // two owned tiles, two double-buffered streamed tiles, then (dKV) lse, D and doc starts of a streamed tile x2
    static constexpr size_t SMEM = (size_t)(2 * TB + 4 * TS) * sizeof(bf16) + 2 * BS * (2 * sizeof(float) + sizeof(int));
};

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

// The A fragment of k-step s of an owned tile: from the registers (KEEP_A) or re-read from shared memory.
template <bool KEEP, int KS>
__device__ __forceinline__ void owned_a(uint32_t (&f)[4], const uint32_t (&kept)[KEEP ? KS : 1][4], const bf16 *tile,
                                        int ld, int r0, int s) {
    if (KEEP) {
#pragma unroll
        for (int x = 0; x < 4; x++) f[x] = kept[KEEP ? s : 0][x];
    } else {
        lda_rk(f, tile, ld, r0, 16 * s);
    }
}

// grid (ceil(T/64), Ha, B)
template <int HD> __global__ void __launch_bounds__(TC_THREADS) fa_bwd_dq_kernel(AttnArgs a) {
    using L = FaBwd<HD>;
    constexpr int BB = L::BB, BS = L::BS, LDS = L::LDS, KS = HD / 16, NO = HD / 8, NS = BS / 8;
    CU_DYN_SMEM(unsigned char, sm);
    bf16 *Qs = reinterpret_cast<bf16 *>(sm), *dOs = Qs + L::TB, *Ks = dOs + L::TB, *Vs = Ks + 2 * L::TS;
    const int qb = blockIdx.x, j = blockIdx.y, b = blockIdx.z, c = j / (a.Ha / a.Hkv);
    const int warp = threadIdx.x >> 5, lane = tc_lane(), R0 = 16 * warp;
    const int Dq = a.Ha * HD, Dkv = a.Hkv * HD, t0 = qb * BB, rows = min(BB, a.T - t0);
    // key tiles [jb0, jb1): up to the last row; from the first row's window start and document start (doc_start
    // never decreases along a row, so the first row's is the block's earliest)
    const int ds0 = a.ds ? a.ds[(size_t)b * a.T + t0] : 0;
    const int jb1 = (t0 + rows + BS - 1) / BS;
    const int jb0 = max(a.window > 0 ? max(0, t0 - a.window + 1) / BS : 0, ds0 / BS);
    const size_t qoff = ((size_t)b * a.T + t0) * Dq + (size_t)j * HD;
    const bf16 *Kg = (const bf16 *)a.K + (size_t)b * a.T * Dkv + (size_t)c * HD;
    const bf16 *Vg = (const bf16 *)a.V + (size_t)b * a.T * Dkv + (size_t)c * HD;
    tile_load<BB, HD, LDS>(Qs, (const bf16 *)a.Q + qoff, Dq, rows, HD);
    tile_load<BB, HD, LDS>(dOs, (const bf16 *)a.dO + qoff, Dq, rows, HD);
    cp_async_commit();
    auto load_kv = [&](int jb, int buf) {
        const int k0 = jb * BS, kr = min(BS, a.T - k0);
        tile_load<BS, HD, LDS>(Ks + buf * L::TS, Kg + (size_t)k0 * Dkv, Dkv, kr, HD);
        tile_load<BS, HD, LDS>(Vs + buf * L::TS, Vg + (size_t)k0 * Dkv, Dkv, kr, HD);
        cp_async_commit();
    };
    load_kv(jb0, 0);
    // this lane's two rows: query positions, lse (log2 units), D and document starts
    const int tq[2] = {t0 + R0 + (lane >> 2), t0 + R0 + (lane >> 2) + 8};
    float L2[2], Dr[2];
    int dsq[2];
    for (int h = 0; h < 2; h++) {
        const size_t sr = ((size_t)b * a.Ha + j) * a.T + min(tq[h], a.T - 1);
        L2[h] = a.lse[sr] * LOG2E;
        Dr[h] = a.D[sr];
        dsq[h] = a.ds ? a.ds[(size_t)b * a.T + min(tq[h], a.T - 1)] : 0;
    }
    const float sl2 = a.scale * LOG2E;
    uint32_t qa[L::KEEP_A ? KS : 1][4], da[L::KEEP_A ? KS : 1][4];
    float dq[NO][4];
    zero_tc(dq);
    for (int jb = jb0; jb < jb1; jb++) {
        const int buf = (jb - jb0) & 1;
        if (jb + 1 < jb1) load_kv(jb + 1, buf ^ 1);
        cp_async_wait_current(jb + 1 < jb1);
        __syncthreads();
        if (L::KEEP_A && jb == jb0)
#pragma unroll
            for (int s = 0; s < (L::KEEP_A ? KS : 1); s++)
                lda_rk(qa[s], Qs, LDS, R0, 16 * s), lda_rk(da[s], dOs, LDS, R0, 16 * s);
        const bf16 *Kb = Ks + buf * L::TS, *Vb = Vs + buf * L::TS;
        float sc[NS][4], dp[NS][4];
        zero_tc(sc);
        zero_tc(dp);
#pragma unroll
        for (int s = 0; s < KS; s++) {
            uint32_t qf[4], df[4];
            owned_a<L::KEEP_A, KS>(qf, qa, Qs, LDS, R0, s);
            owned_a<L::KEEP_A, KS>(df, da, dOs, LDS, R0, s);
            mma_row<B_NK>(sc, qf, Kb, LDS, 16 * s, 0, NS / 2);
            mma_row<B_NK>(dp, df, Vb, LDS, 16 * s, 0, NS / 2);
        }
#pragma unroll
        for (int nt = 0; nt < NS; nt++)
#pragma unroll
            for (int x = 0; x < 4; x++) {
                const int tau = jb * BS + acc_col(nt, x), h = x >> 1;
                const bool ok = visible(tau, tq[h], a.T, a.window) && tau >= dsq[h];
                const float p = ok ? exp2f(sc[nt][x] * sl2 - L2[h]) : 0.0f;
                sc[nt][x] = p * (dp[nt][x] - Dr[h]); // dS
            }
        uint32_t sa[NS / 2][4];
        acc_to_a(sa, sc); // bf16(dS), as FA rounds it
#pragma unroll
        for (int s = 0; s < NS / 2; s++) mma_row<B_KN>(dq, sa[s], Kb, LDS, 16 * s, 0, NO / 2);
        __syncthreads();
    }
#pragma unroll
    for (int nt = 0; nt < NO; nt++)
#pragma unroll
        for (int x = 0; x < 4; x++) dq[nt][x] *= a.scale;
    bf16 *dQg = (bf16 *)a.dQ + qoff;
    store_acc<NO>(dQg, Dq, dq, R0, rows, HD, tc_pairs_ok(dQg, Dq));
}

// The end (exclusive) of the document holding key kmax of row ds (nondecreasing): the first t > kmax whose
// document starts after kmax, or T. Queries from there on cannot see the key.
__device__ __forceinline__ int doc_end(const int32_t *ds, int kmax, int T) {
    int lo = kmax + 1, hi = T;
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (ds[mid] > kmax) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

// grid (ceil(T/64), Hkv, B)
template <int HD> __global__ void __launch_bounds__(TC_THREADS) fa_bwd_dkv_kernel(AttnArgs a) {
    using L = FaBwd<HD>;
    constexpr int BB = L::BB, BS = L::BS, LDS = L::LDS, KS = HD / 16, NO = HD / 8, NS = BS / 8;
    CU_DYN_SMEM(unsigned char, sm);
    bf16 *Ks = reinterpret_cast<bf16 *>(sm), *Vs = Ks + L::TB, *Qs = Vs + L::TB, *dOs = Qs + 2 * L::TS;
    float *Ls = reinterpret_cast<float *>(dOs + 2 * L::TS), *Ds = Ls + 2 * BS; // [2][BS] each
    int *Ss = reinterpret_cast<int *>(Ds + 2 * BS);                           // [2][BS] document starts
    const int kb = blockIdx.x, c = blockIdx.y, b = blockIdx.z, g = a.Ha / a.Hkv;
    const int warp = threadIdx.x >> 5, lane = tc_lane(), R0 = 16 * warp;
    const int Dq = a.Ha * HD, Dkv = a.Hkv * HD, k0 = kb * BB, krows = min(BB, a.T - k0);
    // query tiles that see these keys: from the keys' own to the last row within the window and the last key's
    // document
    int qend = a.window > 0 ? min(a.T, k0 + krows - 1 + a.window) : a.T;
    if (a.ds) qend = min(qend, doc_end(a.ds + (size_t)b * a.T, k0 + krows - 1, a.T));
    const int ib0 = k0 / BS, ib1 = (qend + BS - 1) / BS;
    const int nib = ib1 - ib0, nit = g * nib;
    const size_t koff = ((size_t)b * a.T + k0) * Dkv + (size_t)c * HD;
    tile_load<BB, HD, LDS>(Ks, (const bf16 *)a.K + koff, Dkv, krows, HD);
    tile_load<BB, HD, LDS>(Vs, (const bf16 *)a.V + koff, Dkv, krows, HD);
    cp_async_commit();
    // iteration it: query head c*g + it / nib, query tile ib0 + it % nib
    auto load_q = [&](int it, int buf) {
        const int jq = c * g + it / nib, q0 = (ib0 + it % nib) * BS, qr = min(BS, a.T - q0);
        const size_t qoff = ((size_t)b * a.T + q0) * Dq + (size_t)jq * HD;
        tile_load<BS, HD, LDS>(Qs + buf * L::TS, (const bf16 *)a.Q + qoff, Dq, qr, HD);
        tile_load<BS, HD, LDS>(dOs + buf * L::TS, (const bf16 *)a.dO + qoff, Dq, qr, HD);
        if (threadIdx.x < BS) {
            const int t = min(q0 + (int)threadIdx.x, a.T - 1);
            const size_t sr = ((size_t)b * a.Ha + jq) * a.T + t;
            Ls[buf * BS + threadIdx.x] = a.lse[sr] * LOG2E;
            Ds[buf * BS + threadIdx.x] = a.D[sr];
            Ss[buf * BS + threadIdx.x] = a.ds ? a.ds[(size_t)b * a.T + t] : 0;
        }
        cp_async_commit();
    };
    load_q(0, 0);
    const float sl2 = a.scale * LOG2E;
    const int tk[2] = {k0 + R0 + (lane >> 2), k0 + R0 + (lane >> 2) + 8}; // this lane's two key positions
    uint32_t ka[L::KEEP_A ? KS : 1][4], va[L::KEEP_A ? KS : 1][4];
    float dk[NO][4], dv[NO][4];
    zero_tc(dk);
    zero_tc(dv);
    for (int it = 0; it < nit; it++) {
        const int buf = it & 1, q0 = (ib0 + it % nib) * BS;
        if (it + 1 < nit) load_q(it + 1, buf ^ 1);
        cp_async_wait_current(it + 1 < nit);
        __syncthreads();
        if (L::KEEP_A && it == 0)
#pragma unroll
            for (int s = 0; s < (L::KEEP_A ? KS : 1); s++)
                lda_rk(ka[s], Ks, LDS, R0, 16 * s), lda_rk(va[s], Vs, LDS, R0, 16 * s);
        const bf16 *Qb = Qs + buf * L::TS, *dOb = dOs + buf * L::TS;
        const float *Lb = Ls + buf * BS, *Db = Ds + buf * BS;
        const int *Sb = Ss + buf * BS;
        float st[NS][4], dpt[NS][4];
        zero_tc(st);
        zero_tc(dpt);
#pragma unroll
        for (int s = 0; s < KS; s++) {
            uint32_t kf[4], vf[4];
            owned_a<L::KEEP_A, KS>(kf, ka, Ks, LDS, R0, s);
            owned_a<L::KEEP_A, KS>(vf, va, Vs, LDS, R0, s);
            mma_row<B_NK>(st, kf, Qb, LDS, 16 * s, 0, NS / 2);  // S^T = K Q^T
            mma_row<B_NK>(dpt, vf, dOb, LDS, 16 * s, 0, NS / 2); // dP^T = V dO^T
        }
#pragma unroll
        for (int nt = 0; nt < NS; nt++)
#pragma unroll
            for (int x = 0; x < 4; x++) {
                const int qc = acc_col(nt, x), t = q0 + qc, tau = tk[x >> 1];
                const bool ok = tau < a.T && visible(tau, t, a.T, a.window) && Sb[qc] <= tau;
                const float p = ok ? exp2f(st[nt][x] * sl2 - Lb[qc]) : 0.0f;
                st[nt][x] = p;
                dpt[nt][x] = p * (dpt[nt][x] - Db[qc]); // dS^T
            }
        uint32_t pa[NS / 2][4], sa[NS / 2][4];
        acc_to_a(pa, st);  // bf16(P^T)
        acc_to_a(sa, dpt); // bf16(dS^T)
#pragma unroll
        for (int s = 0; s < NS / 2; s++) {
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

template <int HD> void launch_bwd(const AttnArgs &a, const char *dq_name, const char *dkv_name) {
    using L = FaBwd<HD>;
    cu_launch(dq_name, fa_bwd_dq_kernel<HD>, dim3(cu_blocks(a.T, L::BB), a.Ha, a.B), dim3(TC_THREADS), L::SMEM, a);
    cu_launch(dkv_name, fa_bwd_dkv_kernel<HD>, dim3(cu_blocks(a.T, L::BB), a.Hkv, a.B), dim3(TC_THREADS), L::SMEM, a);
}
} // namespace

bool attn_fa_bwd_supported(int d) { return d == 64 || d == 128; }

void attn_fa_bwd(const AttnArgs &a) {
    cu_launch("attn_bwd fa D", fa_bwd_D_kernel, dim3(cu_blocks((size_t)a.B * a.Ha * a.T, 4)), dim3(128), 0, a);
    if (a.d == 64) launch_bwd<64>(a, "attn_bwd fa dq d64", "attn_bwd fa dkv d64");
    else launch_bwd<128>(a, "attn_bwd fa dq d128", "attn_bwd fa dkv d128");
}
