// delta_rule_tc_bwd.cu: the chunked gated delta rule backward on tensor cores (bf16 mode, dk, dv <= 64),
// spec model.md §3.2, zero initial state. Three kernels after the forward's intra kernel in its backward
// form (delta_rule_tc_fwd.cu: Gc, Tm, W, V_new from h_n, dV_local):
//   dh   (serial, last chunk first, per 16-wide dv tile): dh_n := dS_end;
//        dV_new = dV_loc + e^{G_last - G} . (K dS_end);  dS_start = e^{G_last} dS_end + (s e^G Q)^T dO - W^T dV_new
//   grad (per chunk and q/k head, looping over the head's GVA group in head order, dq/dk summed in fp32
//        registers, so neither per-v-head scratch nor a group pass exists):
//        P = s (dO V_new^T) . Gamma . M;  dQ = s e^G (dO h^T) + P K;  dK = e^{G_last - G} (V_new dS^T) + P^T Q;
//        dW = -dV_new h^T;  X = Tm^T dW, Y = Tm^T dV_new, dV = beta Y;  dT = dW (beta e^G K)^T + dV_new (beta V)^T;
//        dA = -Tm^T (dT Tm^T) (strictly lower);  dM = dA . Gamma;  dK += beta e^G X + beta (dM K) + dM^T (beta K);
//        dbeta, dG, and dgamma = reverse cumsum of dG within the chunk.
// bf16 rounding where FLA stores bf16 or feeds a bf16 product: P, dW, dT, Z = dT Tm^T, dM, beta K (spec §2.7).
#include "cuda/delta_rule.cuh"

namespace {
constexpr size_t TILE_B = (size_t)TC_TILE * sizeof(bf16);
} // namespace

// ---------------------------------------------------------------------------------------------------
// dh recurrence: grid (dv / BV, HV, B), 128 threads. Warp w holds dS rows d = 16w.. (fp32 accumulators).
// Chunk n-1's tiles are fetched while chunk n is computed. BV as for the forward state kernel.

namespace {
template <int BV> struct TcDh {
    static constexpr int LDB = BV + 8;
    static constexpr size_t STRIP_B = (size_t)DR_C * LDB * sizeof(bf16); // [64][BV+8]
    static constexpr size_t buf = 3 * TILE_B + 2 * STRIP_B; // K, Q (scaled in place), W, dO strip, dV_local strip
    static constexpr size_t off_ds = 2 * buf;               // bf16 [64][BV+8] dS_end (this tile)
    static constexpr size_t off_dvn = off_ds + STRIP_B;     // bf16 [64][BV+8] dV_new
    static constexpr size_t smem = off_dvn + STRIP_B;
};
} // namespace

template <int BV> __global__ void __launch_bounds__(TC_THREADS) dr_tc_dh_kernel(DrArgs a) {
    using L = TcDh<BV>;
    constexpr int LDB = L::LDB, NT = BV / 8, NP = BV / 16;
    CU_DYN_SMEM(unsigned char, sm);
    bf16 *dSs = reinterpret_cast<bf16 *>(sm + L::off_ds), *dVn = reinterpret_cast<bf16 *>(sm + L::off_dvn);
    const int e0 = blockIdx.x * BV, j = blockIdx.y, b = blockIdx.z, i = j / a.G;
    const int warp = threadIdx.x >> 5, R0 = 16 * warp, qrow = threadIdx.x >> 1;
    const int ksk = a.dk / 16;
    const size_t bj = (size_t)b * a.HV + j;

    auto tiles = [&](int n, int buf) {
        bf16 *K = reinterpret_cast<bf16 *>(sm + buf * L::buf), *Q = K + TC_TILE, *W = Q + TC_TILE, *dO = W + TC_TILE,
             *dl = dO + DR_C * LDB;
        const int t0 = n * DR_C, Lc = min(DR_C, a.T - t0);
        const size_t tok0 = (size_t)b * a.T + t0, hr0 = bj * a.T + t0;
        tile_load<DR_C, DR_C, TC_LD>(K, (const bf16 *)a.k + tok0 * a.ldqk + (size_t)i * a.dk, a.ldqk, Lc, a.dk);
        tile_load<DR_C, DR_C, TC_LD>(Q, (const bf16 *)a.q + tok0 * a.ldqk + (size_t)i * a.dk, a.ldqk, Lc, a.dk);
        tile_load<DR_C, DR_C, TC_LD>(W, (const bf16 *)a.W + hr0 * a.dk, a.dk, Lc, a.dk);
        tile_load<DR_C, BV, LDB>(dO, (const bf16 *)a.dO + tok0 * a.lddo + (size_t)j * a.dv + e0, a.lddo, Lc, BV);
        tile_load<DR_C, BV, LDB>(dl, (const bf16 *)a.dvloc + hr0 * a.dv + e0, a.dv, Lc, BV);
        cp_async_commit();
    };
    // G of this thread's two accumulator rows, of the Q row it scales, and of the chunk's last row
    auto gload = [&](int n, float (&g)[4]) {
        const int t0 = n * DR_C, Lc = min(DR_C, a.T - t0);
        const float *G = a.Gc + bj * a.T + t0;
        g[0] = G[min(R0 + acc_row(0), Lc - 1)];
        g[1] = G[min(R0 + acc_row(2), Lc - 1)];
        g[2] = G[min(qrow, Lc - 1)];
        g[3] = G[Lc - 1];
    };

    float dS[NT][4]; // dL/d(state at the end of the current chunk): rows R0 + acc_row, columns e0 + acc_col
    zero_tc(dS);
    float gn[4];
    tiles(a.NT - 1, (a.NT - 1) & 1);
    gload(a.NT - 1, gn);
    const bool pairs_dv = tc_pairs_ok(a.dvnew, a.dv);
    for (int n = a.NT - 1; n >= 0; n--) {
        const int buf = n & 1, t0 = n * DR_C, Lc = min(DR_C, a.T - t0);
        const size_t hr0 = bj * a.T + t0;
        bf16 *K = reinterpret_cast<bf16 *>(sm + buf * L::buf), *Q = K + TC_TILE, *W = Q + TC_TILE, *dO = W + TC_TILE,
             *dl = dO + DR_C * LDB;
        const float G0 = gn[0], G1 = gn[1], GQ = gn[2], GL = gn[3];
        if (n > 0) {
            tiles(n - 1, buf ^ 1);
            gload(n - 1, gn);
        }
        bf16 *dh = reinterpret_cast<bf16 *>(a.dh) + dr_state_off(a, b, j, n);
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                const int d = R0 + acc_row(2 * hh), e = acc_col(nt, 0);
                const uint32_t v = pack_bf16(dS[nt][2 * hh], dS[nt][2 * hh + 1]);
                *reinterpret_cast<uint32_t *>(dSs + d * LDB + e) = v;
                if (d < a.dk) *reinterpret_cast<uint32_t *>(dh + (size_t)d * a.dv + e0 + e) = v;
            }
                cp_async_wait_current(n > 0);
        __syncthreads();
        const int dl_ = dr_ds(a, b, t0, Lc, Lc - 1); // packed documents (delta_rule.cuh)
        if (qrow < Lc) { // Q <- bf16(s e^G q): thread pair per row, 32 columns each, in 16-byte words (rows are 144 B)
            const float f = a.scale * (dr_carried_ds(dr_ds(a, b, t0, Lc, qrow), t0) ? dr_exp2(GQ) : 0.0f);
            bf16 *qr = Q + qrow * TC_LD + (threadIdx.x & 1) * 32;
            float x[4][8];
#pragma unroll
            for (int w = 0; w < 4; w++) load_vec<bf16, 8>(x[w], qr + 8 * w);
#pragma unroll
            for (int w = 0; w < 4; w++) {
#pragma unroll
                for (int c = 0; c < 8; c++) x[w][c] *= f;
                store_vec<bf16, 8>(qr + 8 * w, x[w]);
            }
        }
        { // dV_new = dV_local + e^{G_last - G} (K dS_end), rows R0..
            float acc[NT][4];
            zero_tc(acc);
#pragma unroll
            for (int s = 0; s < 4; s++) {
                if (s >= ksk) continue;
                uint32_t ka[4];
                lda_rk(ka, K, TC_LD, R0, 16 * s);
                mma_row<B_KN>(acc, ka, dSs, LDB, 16 * s, 0, NP);
            }
            const float dec0 = dr_ds(a, b, t0, Lc, R0 + acc_row(0)) == dl_ ? dr_exp2(GL - G0) : 0.0f;
            const float dec1 = dr_ds(a, b, t0, Lc, R0 + acc_row(2)) == dl_ ? dr_exp2(GL - G1) : 0.0f;
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int hh = 0; hh < 2; hh++) {
                    const int r = R0 + acc_row(2 * hh), e = acc_col(nt, 0);
                    uint32_t packed = 0;
                    if (r < Lc) {
                        const uint32_t l2 = *reinterpret_cast<const uint32_t *>(dl + r * LDB + e);
                        const float dec = hh ? dec1 : dec0;
                        const float v0 = bf16_lo(l2) + dec * acc[nt][2 * hh], v1 = bf16_hi(l2) + dec * acc[nt][2 * hh + 1];
                        packed = pack_bf16(v0, v1);
                        bf16 *o = reinterpret_cast<bf16 *>(a.dvnew) + (hr0 + r) * a.dv + e0 + e;
                        if (pairs_dv) {
                            *reinterpret_cast<uint32_t *>(o) = packed;
                        } else {
                            o[0] = __float2bfloat16_rn(v0);
                            o[1] = __float2bfloat16_rn(v1);
                        }
                    }
                    *reinterpret_cast<uint32_t *>(dVn + r * LDB + e) = packed;
                }
        }
        __syncthreads(); // scaled Q and dV_new complete
        { // dS_start = e^{G_last} dS_end + Qg^T dO - W^T dV_new (A operands read transposed from the tiles)
            const float eL = dr_carried_ds(dl_, t0) ? dr_exp2(GL) : 0.0f;
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int x = 0; x < 4; x++) dS[nt][x] *= eL;
            float wdv[NT][4];
            zero_tc(wdv);
            if (R0 < a.dk) {
#pragma unroll
                for (int s = 0; s < 4; s++) {
                    if (16 * s >= Lc) continue;
                    uint32_t qt[4], wt[4];
                    lda_kr(qt, Q, TC_LD, R0, 16 * s);
                    mma_row<B_KN>(dS, qt, dO, LDB, 16 * s, 0, NP);
                    lda_kr(wt, W, TC_LD, R0, 16 * s);
                    mma_row<B_KN>(wdv, wt, dVn, LDB, 16 * s, 0, NP);
                }
            }
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int x = 0; x < 4; x++) dS[nt][x] -= wdv[nt][x];
        }
        __syncthreads(); // dSs, dVn and this buffer are rewritten next
    }
}

// ---------------------------------------------------------------------------------------------------
// gradients: grid (NT, H, B), 128 threads; v heads j = i G .. i G + G - 1 in order

namespace {
struct TcGrad {
    // bf16 tiles. Z (dT Tm^T) reuses V_new's, dM reuses dO's, beta K reuses P's (all dead by then).
    enum { QS, KS, VN, DO, HS, DH, DVN, TM, VS, PS, DW, NTILES };
    // fp32 [64] each: G, beta, e^G, beta e^G, dG rows, dbeta rows; then colsum [4][64]
    static constexpr size_t off_f = NTILES * TILE_B;
    static constexpr size_t smem = off_f + sizeof(float) * 10 * DR_C;
};
// Sized for 2 blocks per SM of 228 KB (1 KB reserved per block); with 255 registers that is the limit.
static_assert(2 * (TcGrad::smem + 1024) <= 233472, "grad no longer fits 2 blocks per SM");
} // namespace

__global__ void __launch_bounds__(TC_THREADS, 2) dr_tc_grad_kernel(DrArgs a) {
    using L = TcGrad;
    CU_DYN_SMEM(unsigned char, sm);
    bf16 *tile[L::NTILES];
#pragma unroll
    for (int x = 0; x < L::NTILES; x++) tile[x] = reinterpret_cast<bf16 *>(sm) + x * TC_TILE;
    bf16 *Qs = tile[L::QS], *Ks = tile[L::KS], *Vn = tile[L::VN], *dOs = tile[L::DO], *Hs = tile[L::HS],
         *dHs = tile[L::DH], *dVn = tile[L::DVN], *Tms = tile[L::TM], *Vs = tile[L::VS], *Ps = tile[L::PS],
         *dWs = tile[L::DW];
    bf16 *Zs = Vn, *dMs = dOs, *bKs = Ps;
    float *Gs = reinterpret_cast<float *>(sm + L::off_f), *bs = Gs + DR_C, *eGs = bs + DR_C, *kbs = eGs + DR_C,
          *dgs = kbs + DR_C, *dbs = dgs + DR_C, *colp = dbs + DR_C;

    const int n = blockIdx.x, i = blockIdx.y, b = blockIdx.z;
    const int t0 = n * DR_C, Lc = min(DR_C, a.T - t0);
    const int warp = threadIdx.x >> 5, lane = tc_lane(), R0 = 16 * warp;
    const int ksk = a.dk / 16, pv = a.dv / 16;
    const size_t tok0 = (size_t)b * a.T + t0;
    __shared__ int Ds[DR_C]; // doc_start per row (load_D); published by the first head's barrier
    load_D(Ds, a, b, t0, Lc);

    tile_load<DR_C, DR_C, TC_LD>(Qs, (const bf16 *)a.q + tok0 * a.ldqk + (size_t)i * a.dk, a.ldqk, Lc, a.dk);
    tile_load<DR_C, DR_C, TC_LD>(Ks, (const bf16 *)a.k + tok0 * a.ldqk + (size_t)i * a.dk, a.ldqk, Lc, a.dk);

    float DQ[8][4], DK[8][4]; // the group's dq, dk rows R0.., fp32
    zero_tc(DQ);
    zero_tc(DK);
    // Head g's per-head tiles. Head g + 1's are fetched into each tile as soon as head g is done with it (after the
    // barriers marked "prefetch"), so only dO waits at the top of the next head; tile_load's zero padding and unaligned
    // fallback are plain stores, safe at those points for the same reason (every reader of the tile is past the barrier).
    auto load_tiles = [&](int g, unsigned mask) {
        const int j = i * a.G + g;
        const size_t hr0 = dr_hrow(a, b, j, t0), so = dr_state_off(a, b, j, n);
        if (mask & (1u << L::VN)) tile_load<DR_C, DR_C, TC_LD>(Vn, (const bf16 *)a.vnew + hr0 * a.dv, a.dv, Lc, a.dv);
        if (mask & (1u << L::DO))
            tile_load<DR_C, DR_C, TC_LD>(dOs, (const bf16 *)a.dO + tok0 * a.lddo + (size_t)j * a.dv, a.lddo, Lc, a.dv);
        if (mask & (1u << L::HS)) tile_load<DR_C, DR_C, TC_LD>(Hs, (const bf16 *)a.h + so, a.dv, a.dk, a.dv);
        if (mask & (1u << L::DH)) tile_load<DR_C, DR_C, TC_LD>(dHs, (const bf16 *)a.dh + so, a.dv, a.dk, a.dv);
        if (mask & (1u << L::DVN)) tile_load<DR_C, DR_C, TC_LD>(dVn, (const bf16 *)a.dvnew + hr0 * a.dv, a.dv, Lc, a.dv);
        if (mask & (1u << L::TM)) tile_load<DR_C, DR_C, TC_LD>(Tms, (const bf16 *)a.Tm + hr0 * DR_C, DR_C, Lc, DR_C);
        if (mask & (1u << L::VS))
            tile_load<DR_C, DR_C, TC_LD>(Vs, (const bf16 *)a.v + tok0 * a.ldv + (size_t)j * a.dv, a.ldv, Lc, a.dv);
        cp_async_commit();
    };
    constexpr unsigned ALL = 1u << L::VN | 1u << L::DO | 1u << L::HS | 1u << L::DH | 1u << L::DVN | 1u << L::TM | 1u << L::VS;
    for (int g = 0; g < a.G; g++) {
        const int j = i * a.G + g;
        const size_t hr0 = dr_hrow(a, b, j, t0);
        const bool next = g + 1 < a.G;
        if (g > 0) __syncthreads(); // the previous head is done with every per-head tile and array
        load_tiles(g, g == 0 ? ALL : 1u << L::DO);
        if (threadIdx.x < DR_C) {
            const int r = threadIdx.x;
            const float G = a.Gc[hr0 + min(r, Lc - 1)], be = r < Lc ? a.beta[(tok0 + r) * a.HV + j] : 0.0f;
            Gs[r] = G;
            bs[r] = be;
            eGs[r] = dr_carried_ds(dr_ds(a, b, t0, Lc, r), t0) ? dr_exp2(G) : 0.0f;
            kbs[r] = be * eGs[r];
        }
        cp_async_wait<0>();
        __syncthreads();
        const float GL = Gs[Lc - 1];
        // Row sums of this thread's columns, for rows R0 + acc_row(0) ([0]) and R0 + acc_row(2) ([1]).
        float sq[2] = {0, 0}, sk[2] = {0, 0}, xk[2] = {0, 0}, yv[2] = {0, 0}, rsE[2] = {0, 0}, bk[2] = {0, 0};
        float kint = 0.0f, hd = 0.0f;

        // ---- P = s (dO V_new^T) . Gamma . M (bf16);  dQ = s e^G (dO h^T) + P K
        uint32_t pa[4][4];
        {
            uint32_t doa[4][4];
#pragma unroll
            for (int s = 0; s < 4; s++) lda_rk(doa[s], dOs, TC_LD, R0, 16 * s);
            float acc[8][4];
            zero_tc(acc);
#pragma unroll
            for (int s = 0; s < 4; s++)
                if (s < pv) mma_row<B_NK>(acc, doa[s], Vn, TC_LD, 16 * s, 0, warp + 1);
#pragma unroll
            for (int nt = 0; nt < 8; nt++)
#pragma unroll
                for (int x = 0; x < 4; x++) {
                    const int r = R0 + acc_row(x), c = acc_col(nt, x);
                    acc[nt][x] = c <= r && r < Lc && Ds[r] == Ds[c]
                                     ? rnd_bf16(a.scale * acc[nt][x] * dr_exp2(Gs[r] - Gs[c]))
                                     : 0.0f;
                }
            acc_to_a(pa, acc);
            store_acc(Ps, TC_LD, acc, R0, DR_C, DR_C, true);
            float q1[8][4], q2[8][4];
            zero_tc(q1);
            zero_tc(q2);
#pragma unroll
            for (int s = 0; s < 4; s++) {
                if (s < pv) mma_row<B_NK>(q1, doa[s], Hs, TC_LD, 16 * s, 0, ksk);
                if (s <= warp) mma_row<B_KN>(q2, pa[s], Ks, TC_LD, 16 * s, 0, ksk);
            }
            uint32_t qa[4][4];
#pragma unroll
            for (int s = 0; s < 4; s++) lda_rk(qa[s], Qs, TC_LD, R0, 16 * s);
#pragma unroll
            for (int nt = 0; nt < 8; nt++)
#pragma unroll
                for (int x = 0; x < 4; x++) {
                    const float dq = a.scale * eGs[R0 + acc_row(x)] * q1[nt][x] + q2[nt][x];
                    DQ[nt][x] += dq;
                    sq[x >> 1] += dq * a_at(qa, nt, x);
                }
        }
        __syncthreads(); // P complete in Ps
        uint32_t kfa[4][4]; // K rows R0..
#pragma unroll
        for (int s = 0; s < 4; s++) lda_rk(kfa[s], Ks, TC_LD, R0, 16 * s);
        { // dK = e^{G_last - G} (V_new dS_end^T) + P^T Q
            const int r0 = R0 + acc_row(0), r1 = R0 + acc_row(2);
            const float dec0 = r0 < Lc && Ds[r0] == Ds[Lc - 1] ? dr_exp2(GL - Gs[r0]) : 0.0f;
            const float dec1 = r1 < Lc && Ds[r1] == Ds[Lc - 1] ? dr_exp2(GL - Gs[r1]) : 0.0f;
            float k1[8][4], k2[8][4];
            zero_tc(k1);
            zero_tc(k2);
#pragma unroll
            for (int s = 0; s < 4; s++) {
                if (s < pv) {
                    uint32_t va[4];
                    lda_rk(va, Vn, TC_LD, R0, 16 * s);
                    mma_row<B_NK>(k1, va, dHs, TC_LD, 16 * s, 0, ksk);
                }
                if (s >= warp) {
                    uint32_t pt[4];
                    lda_kr(pt, Ps, TC_LD, R0, 16 * s);
                    mma_row<B_KN>(k2, pt, Qs, TC_LD, 16 * s, 0, ksk);
                }
            }
#pragma unroll
            for (int nt = 0; nt < 8; nt++)
#pragma unroll
                for (int x = 0; x < 4; x++) {
                    const float dec = x < 2 ? dec0 : dec1, kv = a_at(kfa, nt, x);
                    const float xi = dec * k1[nt][x], dk = xi + k2[nt][x];
                    kint += xi * kv;
                    DK[nt][x] += dk;
                    sk[x >> 1] += dk * kv;
                }
        }
        uint32_t dwa[4][4]; // dW = -dV_new h^T, bf16
        {
            float acc[8][4];
            zero_tc(acc);
#pragma unroll
            for (int s = 0; s < 4; s++) {
                if (s >= pv) continue;
                uint32_t va[4];
                lda_rk(va, dVn, TC_LD, R0, 16 * s);
                mma_row<B_NK>(acc, va, Hs, TC_LD, 16 * s, 0, ksk);
            }
#pragma unroll
            for (int nt = 0; nt < 8; nt++)
#pragma unroll
                for (int x = 0; x < 4; x++) acc[nt][x] = rnd_bf16(-acc[nt][x]);
            acc_to_a(dwa, acc);
            store_acc(dWs, TC_LD, acc, R0, DR_C, DR_C, true);
        }
        for (int idx = threadIdx.x; idx < DR_C * DR_C; idx += TC_THREADS) { // <h_n, dS_end>
            const int d = idx >> 6, e = idx & 63;
            hd += __bfloat162float(Hs[d * TC_LD + e]) * __bfloat162float(dHs[d * TC_LD + e]);
        }
        __syncthreads(); // dW complete; V_new, dO and P are dead
        if (next) load_tiles(g + 1, 1u << L::HS | 1u << L::DH); // prefetch: h and dh are dead

        uint32_t tma[4][4]; // Tm^T rows R0.. (A(r, m) = Tm[m][r], nonzero for m >= r)
#pragma unroll
        for (int s = 0; s < 4; s++) lda_kr(tma[s], Tms, TC_LD, R0, 16 * s);
        { // X = Tm^T dW: dK += beta e^G X; dbeta, dG get e^G (X . K) terms
            float X[8][4];
            zero_tc(X);
#pragma unroll
            for (int s = 0; s < 4; s++)
                if (s >= warp) mma_row<B_KN>(X, tma[s], dWs, TC_LD, 16 * s, 0, ksk);
#pragma unroll
            for (int nt = 0; nt < 8; nt++)
#pragma unroll
                for (int x = 0; x < 4; x++) {
                    DK[nt][x] += kbs[R0 + acc_row(x)] * X[nt][x];
                    xk[x >> 1] += X[nt][x] * a_at(kfa, nt, x);
                }
        }
        { // Y = Tm^T dV_new: dV = beta Y; dbeta += Y . V
            float Y[8][4];
            zero_tc(Y);
#pragma unroll
            for (int s = 0; s < 4; s++)
                if (s >= warp) mma_row<B_KN>(Y, tma[s], dVn, TC_LD, 16 * s, 0, pv);
            uint32_t vsa[4][4];
#pragma unroll
            for (int s = 0; s < 4; s++) lda_rk(vsa[s], Vs, TC_LD, R0, 16 * s);
#pragma unroll
            for (int nt = 0; nt < 8; nt++)
#pragma unroll
                for (int x = 0; x < 4; x++) {
                    yv[x >> 1] += Y[nt][x] * a_at(vsa, nt, x);
                    Y[nt][x] *= bs[R0 + acc_row(x)];
                }
            bf16 *dv = reinterpret_cast<bf16 *>(a.dv_out) + tok0 * a.lddv + (size_t)j * a.dv;
            store_acc(dv, a.lddv, Y, R0, Lc, a.dv, tc_pairs_ok(dv, a.lddv));
        }
        { // dT = (dW K^T) (beta e^G)_col + (dV_new V^T) beta_col, strictly lower, bf16; Z = dT Tm^T -> Zs
            float t1[8][4], t2[8][4];
            zero_tc(t1);
            zero_tc(t2);
#pragma unroll
            for (int s = 0; s < 4; s++) {
                if (s < ksk) mma_row<B_NK>(t1, dwa[s], Ks, TC_LD, 16 * s, 0, warp + 1);
                if (s < pv) {
                    uint32_t va[4];
                    lda_rk(va, dVn, TC_LD, R0, 16 * s);
                    mma_row<B_NK>(t2, va, Vs, TC_LD, 16 * s, 0, warp + 1);
                }
            }
#pragma unroll
            for (int nt = 0; nt < 8; nt++)
#pragma unroll
                for (int x = 0; x < 4; x++) {
                    const int r = R0 + acc_row(x), c = acc_col(nt, x);
                    t1[nt][x] = c < r ? t1[nt][x] * kbs[c] + t2[nt][x] * bs[c] : 0.0f;
                }
            uint32_t dta[4][4];
            acc_to_a(dta, t1);
            float z[8][4];
            zero_tc(z);
#pragma unroll
            for (int s = 0; s < 4; s++)
                if (s <= warp) mma_row<B_NK>(z, dta[s], Tms, TC_LD, 16 * s, 0, 4);
            store_acc(Zs, TC_LD, z, R0, DR_C, DR_C, true);
        }
        __syncthreads(); // Z complete
        if (next) load_tiles(g + 1, 1u << L::DVN | 1u << L::TM | 1u << L::VS); // prefetch: dV_new, Tm, V, dW are dead
        uint32_t dma[4][4]; // dM = dA . Gamma, bf16
        { // dA = -Tm^T Z (strictly lower); with A = beta_r (K K^T) Gamma: E = dA . A, dM; dbeta += rowsum(dM . KK)
            float da[8][4], kk[8][4];
            zero_tc(da);
            zero_tc(kk);
#pragma unroll
            for (int s = 0; s < 4; s++) {
                if (s >= warp) mma_row<B_KN>(da, tma[s], Zs, TC_LD, 16 * s, 0, warp + 1);
                if (s < ksk) mma_row<B_NK>(kk, kfa[s], Ks, TC_LD, 16 * s, 0, warp + 1);
            }
            float cs[8][2]; // this lane's part of the column sums of E (rows acc_row(0), acc_row(2))
#pragma unroll
            for (int nt = 0; nt < 8; nt++) {
                cs[nt][0] = cs[nt][1] = 0.0f;
#pragma unroll
                for (int x = 0; x < 4; x++) {
                    const int r = R0 + acc_row(x), c = acc_col(nt, x);
                    float e = 0.0f, dm = 0.0f;
                    if (c < r && Ds[r] == Ds[c]) {
                        const float gam = dr_exp2(Gs[r] - Gs[c]), dA = -da[nt][x];
                        e = dA * (bs[r] * kk[nt][x] * gam);
                        dm = dA * gam;
                        bk[x >> 1] += dm * kk[nt][x];
                    }
                    rsE[x >> 1] += e;
                    cs[nt][x & 1] += e;
                    da[nt][x] = dm;
                    kk[nt][x] = bs[r] * a_at(kfa, nt, x); // beta_r K[r][d], for dM^T (beta K)
                }
            }
            acc_to_a(dma, da);
            store_acc(dMs, TC_LD, da, R0, DR_C, DR_C, true);
            store_acc(bKs, TC_LD, kk, R0, DR_C, DR_C, true);
#pragma unroll
            for (int nt = 0; nt < 8; nt++)
#pragma unroll
                for (int y = 0; y < 2; y++) { // sum over the 8 row groups g (lane bits 2..4), fixed order
                    float v = cs[nt][y];
                    v += __shfl_xor_sync(0xffffffffu, v, 4);
                    v += __shfl_xor_sync(0xffffffffu, v, 8);
                    v += __shfl_xor_sync(0xffffffffu, v, 16);
                    if (lane < 4) colp[warp * DR_C + acc_col(nt, y)] = v;
                }
        }
        { // dK += beta . (dM K)
            float acc[8][4];
            zero_tc(acc);
#pragma unroll
            for (int s = 0; s < 4; s++)
                if (s <= warp) mma_row<B_KN>(acc, dma[s], Ks, TC_LD, 16 * s, 0, ksk);
#pragma unroll
            for (int nt = 0; nt < 8; nt++)
#pragma unroll
                for (int x = 0; x < 4; x++) DK[nt][x] += bs[R0 + acc_row(x)] * acc[nt][x];
        }
        __syncthreads(); // dM, beta K and the column sums complete
        if (next) load_tiles(g + 1, 1u << L::VN); // prefetch: Z (in V_new's tile) is dead
        { // dK += dM^T (beta K)
            float acc[8][4];
            zero_tc(acc);
#pragma unroll
            for (int s = 0; s < 4; s++) {
                if (s < warp) continue;
                uint32_t mt[4];
                lda_kr(mt, dMs, TC_LD, R0, 16 * s);
                mma_row<B_KN>(acc, mt, bKs, TC_LD, 16 * s, 0, ksk);
            }
#pragma unroll
            for (int nt = 0; nt < 8; nt++)
#pragma unroll
                for (int x = 0; x < 4; x++) DK[nt][x] += acc[nt][x];
        }
        // ---- per-row dG and dbeta, then dgamma = reverse cumsum of dG within the chunk
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            const float q = quad_sum(sq[hh]), k = quad_sum(sk[hh]), xs = quad_sum(xk[hh]), ys = quad_sum(yv[hh]);
            const float es = quad_sum(rsE[hh]), bks = quad_sum(bk[hh]);
            const int r = R0 + acc_row(2 * hh);
            if ((lane & 3) == 0) {
                dgs[r] = (q - k) + kbs[r] * xs + es;
                dbs[r] = eGs[r] * xs + ys + bks;
            }
        }
        const float kint_all = block_sum(kint), hd_all = block_sum(hd); // (their barriers publish dgs, dbs)
        if (threadIdx.x == 0) {
            float run = 0.0f;
            for (int r = Lc - 1; r >= 0; r--) {
                float d = dgs[r] - (colp[r] + colp[DR_C + r] + colp[2 * DR_C + r] + colp[3 * DR_C + r]);
                if (r == Lc - 1) d += kint_all + (dr_carried(Ds, t0, Lc - 1) ? dr_exp2(GL) : 0.0f) * hd_all;
                run += d;
                a.dgamma[(tok0 + r) * a.HV + j] = run;
                if (Ds[r] == t0 + r) run = 0.0f; // G restarts where a document starts
            }
        }
        if ((int)threadIdx.x < Lc) a.dbeta[(tok0 + threadIdx.x) * a.HV + j] = dbs[threadIdx.x];
    }
    bf16 *dq = reinterpret_cast<bf16 *>(a.dq) + tok0 * a.lddqk + (size_t)i * a.dk;
    bf16 *dk = reinterpret_cast<bf16 *>(a.dk_out) + tok0 * a.lddqk + (size_t)i * a.dk;
    const bool pairs = tc_pairs_ok(dq, a.lddqk) && tc_pairs_ok(dk, a.lddqk);
    store_acc(dq, a.lddqk, DQ, R0, Lc, a.dk, pairs);
    store_acc(dk, a.lddqk, DK, R0, Lc, a.dk, pairs);
}

// ---------------------------------------------------------------------------------------------------
// launcher: a.h holds the chunk-start states; a.Gc, a.Tm, a.W, a.vnew, a.dvloc, a.dh, a.dvnew are scratch

void dr_tc_bwd(const DrArgs &a) {
    dr_tc_bwd_intra(a);
    if (dr_wg_dh(a)) {
        cu_launch("delta_rule_bwd tc grad", dr_tc_grad_kernel, dim3(a.NT, a.H, a.B), dim3(TC_THREADS), TcGrad::smem, a);
        return;
    }
    const int bv = dr_tc_pick_bv(a, (const void *)dr_tc_dh_kernel<16>, TcDh<16>::smem, (const void *)dr_tc_dh_kernel<32>,
                                 TcDh<32>::smem);
    if (bv == 32)
        cu_launch("delta_rule_bwd tc dh (32-wide dv tiles)", dr_tc_dh_kernel<32>, dim3(a.dv / 32, a.HV, a.B),
                  dim3(TC_THREADS), TcDh<32>::smem, a);
    else
        cu_launch("delta_rule_bwd tc dh", dr_tc_dh_kernel<16>, dim3(a.dv / 16, a.HV, a.B), dim3(TC_THREADS),
                  TcDh<16>::smem, a);
    cu_launch("delta_rule_bwd tc grad", dr_tc_grad_kernel, dim3(a.NT, a.H, a.B), dim3(TC_THREADS), TcGrad::smem, a);
}
