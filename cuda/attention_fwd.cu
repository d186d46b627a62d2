// attention_fwd.cu: FlashAttention-2 forward (spec hybrid.md §4.1) on bf16 tensor cores for the hybrid's
// attention blocks: mma.sync m16n8k16 with fp32 accumulators, operands through ldmatrix, K/V tiles double
// buffered by cp.async (the primitives of cuda/delta_rule.cuh).
//
// Grid (ceil(T/64), Ha, B), 4 warps; the block owns 64 query rows of one head, warp w rows 16w..16w+15.
// It walks the key blocks of 64 that its rows can see (causal and window block skipping), in order:
//   S = Q K_j^T (fp32), masked (causal, window, end of keys) to -inf; scores scaled by scale*log2(e)
//   m_new = max(m, rowmax S); alpha = 2^(m - m_new); P = 2^(S - m_new); l = alpha l + rowsum P (fp32 P)
//   O = alpha O + bf16(P) V_j
// then O / l is stored bf16 and LSE = (m ln 2) + ln l (natural log, fp32) for the backward.
// The row statistics live in the 4 lanes of a quad (each holds 2 rows x 16 columns of S): row max by two
// shuffles per block; l stays per lane and is summed over the quad at the end, as FA does.
// KV-cache calls (pos > 0): keys of sequence b are rows b*kvs + tau, tau < pos + T (bottom-right causal).
// Packed documents (a.ds): key blocks wholly before the block's earliest document start (its first row's, as
// doc_start never decreases along a row) are skipped; inside, keys before a row's document start are masked.
#include "cuda/attention.cuh"
#include "cuda/delta_rule.cuh"

namespace {
constexpr int FA_BR = 64, FA_BC = 64;
constexpr float LOG2E = 1.4426950408889634f, LN2 = 0.6931471805599453f;

template <int D> struct FaFwd {
    static constexpr int LDS = D + 8; // bf16 row stride of the tiles (16-byte pad: conflict-free ldmatrix)
    static constexpr int TILE = FA_BR * LDS;
    static constexpr size_t smem = (size_t)5 * TILE * sizeof(bf16); // Q, K x2, V x2
};

template <int D> __global__ void __launch_bounds__(TC_THREADS) fa_fwd_kernel(AttnArgs a) {
    using L = FaFwd<D>;
    constexpr int KS = D / 16, NO = D / 8; // k-steps over d; n-tiles of O
    CU_DYN_SMEM(unsigned char, sm);
    bf16 *Qs = reinterpret_cast<bf16 *>(sm), *Ks = Qs + L::TILE, *Vs = Ks + 2 * L::TILE;
    const int qb = blockIdx.x, j = blockIdx.y, b = blockIdx.z, c = j / (a.Ha / a.Hkv);
    const int warp = threadIdx.x >> 5, lane = tc_lane(), R0 = 16 * warp;
    const int Dq = a.Ha * D, Dkv = a.Hkv * D, p0 = a.pos ? a.pos[0] : 0, Tk = p0 + a.T;
    const int t0 = qb * FA_BR, rows = min(FA_BR, a.T - t0);
    // key blocks [jb0, jb1): the last row sees keys up to p0 + t0 + rows - 1; the first row's window starts
    // at p0 + t0 - w + 1
    const int jb1 = (min(Tk, p0 + t0 + rows) + FA_BC - 1) / FA_BC;
    const int ds0 = a.ds ? a.ds[(size_t)b * a.T + t0] : 0;
    const int jb0 = max(a.window > 0 ? max(0, p0 + t0 - a.window + 1) / FA_BC : 0, ds0 / FA_BC);
    const bf16 *Kg = (const bf16 *)a.K + (size_t)b * a.kvs * Dkv + (size_t)c * D;
    const bf16 *Vg = (const bf16 *)a.V + (size_t)b * a.kvs * Dkv + (size_t)c * D;

    tile_load<FA_BR, D, L::LDS>(Qs, (const bf16 *)a.Q + ((size_t)b * a.T + t0) * Dq + (size_t)j * D, Dq, rows, D);
    cp_async_commit();
    auto load_kv = [&](int jb, int buf) {
        // a ring cache (window) has a multiple of 64 rows, so a tile never wraps: it starts at row k0 mod kvs
        const int k0 = jb * FA_BC, kr = min(FA_BC, Tk - k0), r0 = k0 % a.kvs;
        tile_load<FA_BC, D, L::LDS>(Ks + buf * L::TILE, Kg + (size_t)r0 * Dkv, Dkv, kr, D);
        tile_load<FA_BC, D, L::LDS>(Vs + buf * L::TILE, Vg + (size_t)r0 * Dkv, Dkv, kr, D);
        cp_async_commit();
    };
    load_kv(jb0, 0);

    const float sl2 = a.scale * LOG2E;
    float o[NO][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    zero_tc(o);
    uint32_t qa[KS][4];
    // this lane's two query positions (rows g and g + 8 of the warp's 16)
    const int tq[2] = {p0 + t0 + R0 + (lane >> 2), p0 + t0 + R0 + (lane >> 2) + 8};
    int dsq[2] = {0, 0}; // and where their documents start (rows past T: clamped, masked at the store)
    if (a.ds)
        for (int h = 0; h < 2; h++) dsq[h] = a.ds[(size_t)b * a.T + min(t0 + R0 + (lane >> 2) + 8 * h, a.T - 1)];
    for (int jb = jb0; jb < jb1; jb++) {
        const int buf = (jb - jb0) & 1;
        if (jb + 1 < jb1) load_kv(jb + 1, buf ^ 1);
        cp_async_wait_current(jb + 1 < jb1);
        __syncthreads();
        if (jb == jb0)
#pragma unroll
            for (int s = 0; s < KS; s++) lda_rk(qa[s], Qs, L::LDS, R0, 16 * s);
        const bf16 *Kb = Ks + buf * L::TILE, *Vb = Vs + buf * L::TILE;
        float sc[8][4];
        zero_tc(sc);
#pragma unroll
        for (int s = 0; s < KS; s++) mma_row<B_NK>(sc, qa[s], Kb, L::LDS, 16 * s, 0, 4);
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int x = 0; x < 4; x++) {
                const int tau = jb * FA_BC + acc_col(nt, x), h = x >> 1, t = tq[h];
                const bool ok = tau <= t && tau < Tk && (a.window <= 0 || tau > t - a.window) && tau >= dsq[h];
                sc[nt][x] = ok ? sc[nt][x] * sl2 : -INFINITY;
                mx[h] = fmaxf(mx[h], sc[nt][x]);
            }
        float alpha[2], mb[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
            const float mn = fmaxf(m[h], mx[h]);
            mb[h] = mn == -INFINITY ? 0.0f : mn; // a row with nothing visible yet (FA's Check_inf)
            alpha[h] = exp2f(m[h] - mb[h]);
            m[h] = mn;
            l[h] *= alpha[h];
        }
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int x = 0; x < 4; x++) {
                const float p = exp2f(sc[nt][x] - mb[x >> 1]);
                sc[nt][x] = p;
                l[x >> 1] += p;
            }
#pragma unroll
        for (int nt = 0; nt < NO; nt++) {
            o[nt][0] *= alpha[0], o[nt][1] *= alpha[0];
            o[nt][2] *= alpha[1], o[nt][3] *= alpha[1];
        }
        uint32_t pa[4][4];
        acc_to_a(pa, sc); // bf16(P) as the A operand of P V
#pragma unroll
        for (int s = 0; s < 4; s++) mma_row<B_KN>(o, pa[s], Vb, L::LDS, 16 * s, 0, NO / 2);
        __syncthreads(); // the next iteration's prefetch overwrites this buffer
    }
    float inv[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        l[h] = quad_sum(l[h]);
        inv[h] = l[h] > 0.0f ? 1.0f / l[h] : 0.0f;
    }
#pragma unroll
    for (int nt = 0; nt < NO; nt++) {
        o[nt][0] *= inv[0], o[nt][1] *= inv[0];
        o[nt][2] *= inv[1], o[nt][3] *= inv[1];
    }
    bf16 *Og = (bf16 *)a.Oout + ((size_t)b * a.T + t0) * Dq + (size_t)j * D;
    store_acc<NO>(Og, Dq, o, R0, rows, D, tc_pairs_ok(Og, Dq));
    if (a.lse_out && (lane & 3) == 0)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = R0 + (lane >> 2) + 8 * h;
            if (r < rows)
                a.lse_out[((size_t)b * a.Ha + j) * a.T + t0 + r] = l[h] > 0.0f ? m[h] * LN2 + logf(l[h]) : INFINITY;
        }
}
} // namespace

bool attn_fa_supported(int d) { return d == 64 || d == 128; }

void attn_fa_fwd(const AttnArgs &a) {
    const dim3 grid(cu_blocks(a.T, FA_BR), a.Ha, a.B);
    if (a.d == 64)
        cu_launch("attn_fwd fa d64", fa_fwd_kernel<64>, grid, dim3(TC_THREADS), FaFwd<64>::smem, a);
    else
        cu_launch("attn_fwd fa d128", fa_fwd_kernel<128>, grid, dim3(TC_THREADS), FaFwd<128>::smem, a);
}
