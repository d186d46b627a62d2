// delta_rule_tc_fwd.cu: the chunked gated delta rule forward on tensor cores (bf16 mode, dk, dv <= 64),
// spec model.md §3.1, in three kernels (FLA's split):
//   intra (per chunk):  G = cumsum(gamma); A = beta_i (K K^T)_ij e^{G_i - G_j} (i > j, mma);
//                       Tm = (I + A)^-1 in fp32 (16x16 diagonal blocks by substitution, then merged);
//                       W = Tm (beta e^G K), U = Tm (beta V) (mma, bf16 Tm and inputs as FLA rounds them)
//   state (serial over chunks, per 16-wide dv tile): h_n saved; V_new = U - W h_n;
//                       h_{n+1} = e^{G_last} h_n + K^T (e^{G_last - G} V_new), h fp32 in registers
//   out (per chunk):    O = s e^G (Q h_n) + s ((Q K^T . Gamma . M) V_new)
// The intra kernel also serves the backward (BWD = true): it then keeps Tm, computes V_new from the saved
// h_n and dV_local = (s Q K^T . Gamma . M)^T dO, so the backward needs no separate passes for them.
// Conventions (warp w owns rows 16w.., fragment layouts, padded shared tiles): delta_rule.cuh.
#include "cuda/delta_rule.cuh"

// ---------------------------------------------------------------------------------------------------
// intra-chunk: grid (NT, HV, B), 128 threads

namespace {
constexpr int AF_LD = DR_C + 1; // fp32 [64][65]: A and T rows (odd stride: fewer bank conflicts)
constexpr int RW_LD = 17;       // fp32 [16][17]: one merge warp's R block
constexpr int MERGE_WARPS = 3;  // the merge's first phase has three blocks to compute
constexpr size_t TILE_B = (size_t)TC_TILE * sizeof(bf16);

// x ~ hi + lo with hi = bf16(x), lo = bf16(x - hi) (|x - hi - lo| <= 2^-17 |x|), packed in pairs as the
// fragment registers hold them.
__device__ __forceinline__ void split_pack(float x0, float x1, uint32_t &hi, uint32_t &lo) {
    hi = pack_bf16(x0, x1);
    lo = pack_bf16(x0 - bf16_lo(hi), x1 - bf16_hi(hi));
}
// acc (16 x 16, two n-tiles) += A B for the 16x16 fp32 blocks A at (ra, ka) of a row-major [row][k] array
// and B at (kb, nb) of a row-major [k][n] array, as three bf16 products lo*hi + hi*lo + hi*hi: close to
// an fp32 product (FLA uses TF32 here) on the bf16 mma, fragments built by plain loads.
__device__ __forceinline__ void mma_split16(float (&acc)[2][4], const float *A, int lda, int ra, int ka,
                                            const float *B, int ldb, int kb, int nb) {
    const int g = tc_lane() >> 2, t = tc_lane() & 3;
    uint32_t ah[4], al[4];
#pragma unroll
    for (int x = 0; x < 4; x++) { // a[x] = (row g + 8 (x & 1), columns 2t, 2t+1 + 8 (x >> 1))
        const float *p = A + (ra + g + 8 * (x & 1)) * lda + ka + 2 * t + 8 * (x >> 1);
        split_pack(p[0], p[1], ah[x], al[x]);
    }
#pragma unroll
    for (int nt = 0; nt < 2; nt++) {
        uint32_t bh[2], bl[2];
#pragma unroll
        for (int x = 0; x < 2; x++) { // b[x] = (k 2t, 2t+1 + 8x, column g)
            const float *p = B + (kb + 2 * t + 8 * x) * ldb + nb + 8 * nt + g;
            split_pack(p[0], p[ldb], bh[x], bl[x]);
        }
        mma16816(acc[nt], al, bh[0], bh[1]);
        mma16816(acc[nt], ah, bl[0], bl[1]);
        mma16816(acc[nt], ah, bh[0], bh[1]);
    }
}

template <bool BWD> struct TcIntra {
    // bf16 tiles: K (then beta e^G K), V (then beta V); BWD: h_n
    static constexpr int NTILES = BWD ? 3 : 2;
    static constexpr size_t off_A = NTILES * TILE_B;                      // fp32 A [64][65], then bf16 Tm tile
    static constexpr size_t off_X = off_A + sizeof(float) * DR_C * AF_LD; // union, see the kernel
    static constexpr size_t solve_bytes = sizeof(float) * (DR_C * AF_LD + MERGE_WARPS * 16 * RW_LD);
    static constexpr size_t x_bytes = BWD && 2 * TILE_B > solve_bytes ? 2 * TILE_B : solve_bytes;
    static constexpr size_t off_G = off_X + x_bytes; // fp32 G[64], beta[64], beta e^G [64]
    static constexpr size_t smem = off_G + sizeof(float) * 3 * DR_C;
    static_assert(TILE_B <= sizeof(float) * DR_C * AF_LD, "the Tm tile lives in A's space after the solve");
};
// Sized for 4 (forward) and 3 (backward) blocks per SM of 228 KB (1 KB reserved per block).
static_assert(4 * (TcIntra<false>::smem + 1024) <= 233472, "fwd intra no longer fits 4 blocks per SM");
static_assert(3 * (TcIntra<true>::smem + 1024) <= 233472, "bwd intra no longer fits 3 blocks per SM");
} // namespace

template <bool BWD> __global__ void __launch_bounds__(TC_THREADS) dr_tc_intra_kernel(DrArgs a) {
    using L = TcIntra<BWD>;
    CU_DYN_SMEM(unsigned char, sm);
    bf16 *Ks = reinterpret_cast<bf16 *>(sm), *Vs = Ks + TC_TILE, *Hs = Vs + TC_TILE;
    float *Af = reinterpret_cast<float *>(sm + L::off_A);
    bf16 *Ts = reinterpret_cast<bf16 *>(sm + L::off_A); // once A is dead
    // The X region holds Q and dO (BWD, until dV_local is done), then T in fp32 and the merge's R blocks.
    bf16 *Qs = reinterpret_cast<bf16 *>(sm + L::off_X), *dOs = Qs + TC_TILE;
    float *Tf = reinterpret_cast<float *>(sm + L::off_X), *Rf = Tf + DR_C * AF_LD;
    float *Gs = reinterpret_cast<float *>(sm + L::off_G), *bs = Gs + DR_C, *kbs = bs + DR_C;

    const int n = blockIdx.x, j = blockIdx.y, b = blockIdx.z, i = j / a.G;
    const int t0 = n * DR_C, Lc = min(DR_C, a.T - t0);
    const int warp = threadIdx.x >> 5, lane = tc_lane(), R0 = 16 * warp;
    const int ksk = a.dk / 16; // k-steps over dk (the padded columns are zero)
    const size_t tok0 = (size_t)b * a.T + t0, hr0 = dr_hrow(a, b, j, t0);

    tile_load<DR_C, DR_C, TC_LD>(Ks, (const bf16 *)a.k + tok0 * a.ldqk + (size_t)i * a.dk, a.ldqk, Lc, a.dk);
    tile_load<DR_C, DR_C, TC_LD>(Vs, (const bf16 *)a.v + tok0 * a.ldv + (size_t)j * a.dv, a.ldv, Lc, a.dv);
    if (BWD) {
        tile_load<DR_C, DR_C, TC_LD>(Qs, (const bf16 *)a.q + tok0 * a.ldqk + (size_t)i * a.dk, a.ldqk, Lc, a.dk);
        tile_load<DR_C, DR_C, TC_LD>(dOs, (const bf16 *)a.dO + tok0 * a.lddo + (size_t)j * a.dv, a.lddo, Lc, a.dv);
        tile_load<DR_C, DR_C, TC_LD>(Hs, (const bf16 *)a.h + dr_state_off(a, b, j, n), a.dv, a.dk, a.dv);
    }
    cp_async_commit();
    __shared__ int Ds[DR_C]; // doc_start per row (load_D)
    if (threadIdx.x < DR_C) {
        const int r = threadIdx.x;
        bs[r] = r < Lc ? a.beta[(tok0 + r) * a.HV + j] : 0.0f;
        Gs[r] = r < Lc ? a.gamma[(tok0 + r) * a.HV + j] : 0.0f;
    }
    load_D(Ds, a, b, t0, Lc);
    __syncthreads();
    if (threadIdx.x == 0) { // sequential cumsum in place (the CPU twin's order), restarting at document starts;
        float g = 0.0f;    // rows past Lc keep G_last
#pragma unroll 8
        for (int r = 0; r < DR_C; r++) {
            if (Ds[r] == t0 + r) g = 0.0f;
            g += Gs[r];
            Gs[r] = g * DR_LOG2E; // log2 scale: every e^{...} of G below is one ex2 (dr_exp2)
        }
    }
    cp_async_wait<0>();
    __syncthreads();
    if (threadIdx.x < DR_C) {
        const int r = threadIdx.x;
        if (r < Lc) a.Gc[hr0 + r] = Gs[r];
        kbs[r] = bs[r] * (dr_carried(Ds, t0, r) ? dr_exp2(Gs[r]) : 0.0f);
    }

    uint32_t ka[4][4]; // this warp's K rows as A fragments (k-steps over dk)
#pragma unroll
    for (int s = 0; s < 4; s++) lda_rk(ka[s], Ks, TC_LD, R0, 16 * s);
    { // A = beta_i (K K^T)_ij e^{G_i - G_j}, strictly lower: column tiles up to the diagonal only
        float acc[8][4];
        zero_tc(acc);
#pragma unroll
        for (int s = 0; s < 4; s++)
            if (s < ksk) mma_row<B_NK>(acc, ka[s], Ks, TC_LD, 16 * s, 0, warp + 1);
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int x = 0; x < 4; x++) {
                const int r = R0 + acc_row(x), c = acc_col(nt, x);
                Af[r * AF_LD + c] = r > c && Ds[r] == Ds[c] ? bs[r] * acc[nt][x] * dr_exp2(Gs[r] - Gs[c]) : 0.0f;
            }
    }
    if (BWD) { // dV_local = St dO with St[r][i] = s (k_r . q_i) e^{G_i - G_r} for r <= i < Lc (St = Sm^T)
        float acc[8][4];
        zero_tc(acc);
#pragma unroll
        for (int s = 0; s < 4; s++)
            if (s < ksk) mma_row<B_NK>(acc, ka[s], Qs, TC_LD, 16 * s, warp, 4);
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int x = 0; x < 4; x++) {
                const int r = R0 + acc_row(x), q = acc_col(nt, x);
                acc[nt][x] = q >= r && q < Lc && Ds[q] == Ds[r] ? rnd_bf16(a.scale * acc[nt][x] * dr_exp2(Gs[q] - Gs[r]))
                                                                 : 0.0f;
            }
        uint32_t sa[4][4];
        acc_to_a(sa, acc);
        float dv[8][4];
        zero_tc(dv);
#pragma unroll
        for (int s = 0; s < 4; s++)
            if (s >= warp) mma_row<B_KN>(dv, sa[s], dOs, TC_LD, 16 * s, 0, a.dv / 16);
        store_acc(reinterpret_cast<bf16 *>(a.dvloc) + hr0 * a.dv, a.dv, dv, R0, Lc, a.dv, true);
    }
    __syncthreads(); // A complete; Q and dO (X region) are dead from here on

    // ---- Tm = (I + A)^-1, fp32. Diagonal 16x16 blocks by forward substitution (warp w, lane = column),
    // then T_IJ = -T_II sum_{M=J}^{I-1} A_IM T_MJ for J < I, diagonal by diagonal (I - J = 1, 2, 3: the
    // blocks of one diagonal are independent, one warp each), products as mma_split16.
    if (lane < 16) {
        const int c = lane;
        const float *Ab = Af + R0 * AF_LD + R0;
        float x[16];
#pragma unroll
        for (int r = 0; r < 16; r++) {
            float s = r == c ? 1.0f : 0.0f;
#pragma unroll
            for (int m = 0; m < r; m++) s = fmaf(-Ab[r * AF_LD + m], x[m], s);
            x[r] = s;
        }
#pragma unroll
        for (int r = 0; r < 16; r++) Tf[(R0 + r) * AF_LD + R0 + c] = x[r];
    }
    __syncthreads();
    for (int dist = 1; dist < 4; dist++) {
        if (warp < 4 - dist) {
            const int J = warp, I = warp + dist, g = lane >> 2, t = lane & 3;
            float *Rw = Rf + warp * 16 * RW_LD;
            float r[2][4], tij[2][4];
            zero_tc(r);
            zero_tc(tij);
            for (int M = J; M < I; M++) mma_split16(r, Af, AF_LD, 16 * I, 16 * M, Tf, AF_LD, 16 * M, 16 * J);
#pragma unroll
            for (int nt = 0; nt < 2; nt++)
#pragma unroll
                for (int x = 0; x < 4; x++) Rw[(g + 8 * (x >> 1)) * RW_LD + 8 * nt + 2 * t + (x & 1)] = r[nt][x];
            cu_syncwarp();
            mma_split16(tij, Tf, AF_LD, 16 * I, 16 * I, Rw, RW_LD, 0, 0);
#pragma unroll
            for (int nt = 0; nt < 2; nt++)
#pragma unroll
                for (int x = 0; x < 4; x++)
                    Tf[(16 * I + g + 8 * (x >> 1)) * AF_LD + 16 * J + 8 * nt + 2 * t + (x & 1)] = -tij[nt][x];
        }
        __syncthreads();
    }
    // Tm in bf16 (FLA stores it so and feeds it to W, U in bf16); K <- beta e^G K, V <- beta V, rounded.
    // 8 columns (16 bytes of bf16) per step.
    bf16 *Tm = BWD ? reinterpret_cast<bf16 *>(a.Tm) + hr0 * DR_C : NULL;
    for (int idx = threadIdx.x; idx < DR_C * DR_C / 8; idx += TC_THREADS) {
        const int r = idx >> 3, c0 = (idx & 7) * 8;
        uint4 tv, kv = *reinterpret_cast<const uint4 *>(Ks + r * TC_LD + c0),
                  vv = *reinterpret_cast<const uint4 *>(Vs + r * TC_LD + c0);
        uint32_t *t32 = &tv.x, *k32 = &kv.x, *v32 = &vv.x;
        const float kb = kbs[r], vb = bs[r];
#pragma unroll
        for (int x = 0; x < 4; x++) {
            const int c = c0 + 2 * x;
            t32[x] = pack_bf16(c <= r ? Tf[r * AF_LD + c] : 0.0f, c + 1 <= r ? Tf[r * AF_LD + c + 1] : 0.0f);
            k32[x] = pack_bf16(kb * bf16_lo(k32[x]), kb * bf16_hi(k32[x]));
            v32[x] = pack_bf16(vb * bf16_lo(v32[x]), vb * bf16_hi(v32[x]));
        }
        *reinterpret_cast<uint4 *>(Ts + r * TC_LD + c0) = tv;
        *reinterpret_cast<uint4 *>(Ks + r * TC_LD + c0) = kv;
        *reinterpret_cast<uint4 *>(Vs + r * TC_LD + c0) = vv;
        if (BWD && r < Lc) *reinterpret_cast<uint4 *>(Tm + r * DR_C + c0) = tv;
    }
    __syncthreads();

    uint32_t ta[4][4]; // Tm rows of this warp; lower triangular, so k-steps beyond the diagonal are zero
#pragma unroll
    for (int s = 0; s < 4; s++) lda_rk(ta[s], Ts, TC_LD, R0, 16 * s);
    const bool pairs_w = tc_pairs_ok(a.W, a.dk);
    uint32_t wa[4][4]; // BWD: W (bf16) as A fragments for V_new = U - W h
    {
        float acc[8][4];
        zero_tc(acc);
#pragma unroll
        for (int s = 0; s < 4; s++)
            if (s <= warp) mma_row<B_KN>(acc, ta[s], Ks, TC_LD, 16 * s, 0, a.dk / 16);
        store_acc(reinterpret_cast<bf16 *>(a.W) + hr0 * a.dk, a.dk, acc, R0, Lc, a.dk, pairs_w);
        acc_to_a(wa, acc);
    }
    {
        float acc[8][4];
        zero_tc(acc);
#pragma unroll
        for (int s = 0; s < 4; s++)
            if (s <= warp) mma_row<B_KN>(acc, ta[s], Vs, TC_LD, 16 * s, 0, a.dv / 16);
        if (!BWD) {
            store_acc(reinterpret_cast<bf16 *>(a.U) + hr0 * a.dv, a.dv, acc, R0, Lc, a.dv, true);
        } else { // V_new = bf16(U) - W h_n (FLA reads U back in bf16)
            float wh[8][4];
            zero_tc(wh);
#pragma unroll
            for (int s = 0; s < 4; s++)
                if (s < ksk) mma_row<B_KN>(wh, wa[s], Hs, TC_LD, 16 * s, 0, a.dv / 16);
#pragma unroll
            for (int nt = 0; nt < 8; nt++)
#pragma unroll
                for (int x = 0; x < 4; x++) acc[nt][x] = rnd_bf16(acc[nt][x]) - wh[nt][x];
            store_acc(reinterpret_cast<bf16 *>(a.vnew) + hr0 * a.dv, a.dv, acc, R0, Lc, a.dv, true);
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// state recurrence: grid (dv / BV, HV, B), 128 threads, serial over chunks. Warp w holds state rows
// d = 16w.. (16 x BV, fp32 accumulators). Chunk n+1's W, K, U tiles are fetched (cp.async) while chunk
// n is computed. BV (16 or 32) is chosen per call so that the grid fits in one wave (dr_tc_pick_bv).

namespace {
template <int BV> struct TcState {
    static constexpr int LDB = BV + 8;
    static constexpr size_t U_B = (size_t)DR_C * LDB * sizeof(bf16);
    static constexpr size_t buf = 2 * TILE_B + U_B; // W, K, U (BV columns) of one chunk
    static constexpr size_t off_h = 2 * buf;        // bf16 [64][BV+8] h_n (this tile)
    static constexpr size_t off_vd = off_h + U_B;   // bf16 [64][BV+8] e^{G_last - G} V_new
    static constexpr size_t smem = off_vd + U_B;
};
} // namespace

template <int BV> __global__ void __launch_bounds__(TC_THREADS) dr_tc_state_kernel(DrArgs a) {
    using L = TcState<BV>;
    constexpr int LDB = L::LDB, NT = BV / 8, NP = BV / 16;
    CU_DYN_SMEM(unsigned char, sm);
    bf16 *hs = reinterpret_cast<bf16 *>(sm + L::off_h), *Vd = reinterpret_cast<bf16 *>(sm + L::off_vd);
    const int e0 = blockIdx.x * BV, j = blockIdx.y, b = blockIdx.z, i = j / a.G;
    const int warp = threadIdx.x >> 5, R0 = 16 * warp;
    const int ksk = a.dk / 16;
    const size_t bj = (size_t)b * a.HV + j;
    const bf16 *Wg = (const bf16 *)a.W, *Ug = (const bf16 *)a.U, *kg = (const bf16 *)a.k;

    auto tiles = [&](int n, int buf) {
        bf16 *W = reinterpret_cast<bf16 *>(sm + buf * L::buf), *K = W + TC_TILE, *U = K + TC_TILE;
        const int t0 = n * DR_C, Lc = min(DR_C, a.T - t0);
        const size_t tok0 = (size_t)b * a.T + t0, hr0 = bj * a.T + t0;
        tile_load<DR_C, DR_C, TC_LD>(W, Wg + hr0 * a.dk, a.dk, Lc, a.dk);
        tile_load<DR_C, DR_C, TC_LD>(K, kg + tok0 * a.ldqk + (size_t)i * a.dk, a.ldqk, Lc, a.dk);
        tile_load<DR_C, BV, LDB>(U, Ug + hr0 * a.dv + e0, a.dv, Lc, BV);
        cp_async_commit();
    };
    // G of this thread's two chunk rows and of the chunk's last row (fetched a chunk ahead)
    auto gload = [&](int n, float &g0, float &g1, float &gl) {
        const int t0 = n * DR_C, Lc = min(DR_C, a.T - t0);
        const float *G = a.Gc + bj * a.T + t0;
        g0 = G[min(R0 + acc_row(0), Lc - 1)];
        g1 = G[min(R0 + acc_row(2), Lc - 1)];
        gl = G[Lc - 1];
    };

    float h[NT][4]; // h rows R0 + acc_row, columns e0 + acc_col
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int x = 0; x < 4; x++) {
            const int d = R0 + acc_row(x), e = e0 + acc_col(nt, x);
            h[nt][x] = a.state && d < a.dk ? a.state[(bj * a.dk + d) * a.dv + e] : 0.0f;
        }
    float g0, g1, gl;
    tiles(0, 0);
    gload(0, g0, g1, gl);
    const bool pairs_v = a.vnew && tc_pairs_ok(a.vnew, a.dv);
    for (int n = 0; n < a.NT; n++) {
        const int buf = n & 1, t0 = n * DR_C, Lc = min(DR_C, a.T - t0);
        const size_t hr0 = bj * a.T + t0;
        const bf16 *W = reinterpret_cast<const bf16 *>(sm + buf * L::buf), *K = W + TC_TILE, *U = K + TC_TILE;
        const float G0 = g0, G1 = g1, GL = gl;
        if (n + 1 < a.NT) {
            tiles(n + 1, buf ^ 1);
            gload(n + 1, g0, g1, gl);
        }
        // h_n: saved (act) and staged as the B operand of W h
        bf16 *hsave = a.h ? reinterpret_cast<bf16 *>(a.h) + dr_state_off(a, b, j, n) : NULL;
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                const int d = R0 + acc_row(2 * hh), e = acc_col(nt, 0);
                const uint32_t v = pack_bf16(h[nt][2 * hh], h[nt][2 * hh + 1]);
                *reinterpret_cast<uint32_t *>(hs + d * LDB + e) = v;
                if (hsave && d < a.dk) *reinterpret_cast<uint32_t *>(hsave + (size_t)d * a.dv + e0 + e) = v;
            }
                cp_async_wait_current(n + 1 < a.NT);
        __syncthreads();
        { // V_new = U - W h_n (rows R0..), then Vd = bf16(e^{G_last - G} V_new), zero past Lc
            float acc[NT][4];
            zero_tc(acc);
#pragma unroll
            for (int s = 0; s < 4; s++) {
                if (s >= ksk) continue;
                uint32_t wa[4];
                lda_rk(wa, W, TC_LD, R0, 16 * s);
                mma_row<B_KN>(acc, wa, hs, LDB, 16 * s, 0, NP);
            }
            const int dl = dr_ds(a, b, t0, Lc, Lc - 1);
            const float dec0 = dr_ds(a, b, t0, Lc, R0 + acc_row(0)) == dl ? dr_exp2(GL - G0) : 0.0f;
            const float dec1 = dr_ds(a, b, t0, Lc, R0 + acc_row(2)) == dl ? dr_exp2(GL - G1) : 0.0f;
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int hh = 0; hh < 2; hh++) {
                    const int r = R0 + acc_row(2 * hh), e = acc_col(nt, 0);
                    const uint32_t u = *reinterpret_cast<const uint32_t *>(U + r * LDB + e);
                    const float v0 = bf16_lo(u) - acc[nt][2 * hh], v1 = bf16_hi(u) - acc[nt][2 * hh + 1];
                    uint32_t vd = 0;
                    if (r < Lc) {
                        bf16 *vn = a.vnew ? reinterpret_cast<bf16 *>(a.vnew) + (hr0 + r) * a.dv + e0 + e : NULL;
                        if (vn && pairs_v) {
                            *reinterpret_cast<uint32_t *>(vn) = pack_bf16(v0, v1);
                        } else if (vn) {
                            vn[0] = __float2bfloat16_rn(v0);
                            vn[1] = __float2bfloat16_rn(v1);
                        }
                        const float dec = hh ? dec1 : dec0;
                        vd = pack_bf16(dec * v0, dec * v1);
                    }
                    *reinterpret_cast<uint32_t *>(Vd + r * LDB + e) = vd;
                }
        }
        __syncthreads();
        { // h <- e^{G_last} h + K^T Vd (rows d = R0..: A = K^T, read transposed from the K tile)
            const float eL = dr_carried_ds(dr_ds(a, b, t0, Lc, Lc - 1), t0) ? dr_exp2(GL) : 0.0f;
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int x = 0; x < 4; x++) h[nt][x] *= eL;
            if (R0 < a.dk) {
#pragma unroll
                for (int s = 0; s < 4; s++) {
                    if (16 * s >= Lc) continue;
                    uint32_t kt[4];
                    lda_kr(kt, K, TC_LD, R0, 16 * s);
                    mma_row<B_KN>(h, kt, Vd, LDB, 16 * s, 0, NP);
                }
            }
        }
        __syncthreads(); // hs, Vd and this buffer are rewritten next
    }
    if (a.state) {
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int x = 0; x < 4; x++) {
                const int d = R0 + acc_row(x), e = e0 + acc_col(nt, x);
                if (d < a.dk) a.state[(bj * a.dk + d) * a.dv + e] = h[nt][x];
            }
    }
}

// ---------------------------------------------------------------------------------------------------
// output: grid (NT, HV, B), 128 threads

namespace {
struct TcOut {
    static constexpr size_t off_G = 4 * TILE_B; // Q, K, V_new, h_n tiles
    static constexpr size_t smem = off_G + sizeof(float) * DR_C;
};
static_assert(4 * (TcOut::smem + 1024) <= 233472, "out no longer fits 4 blocks per SM");
} // namespace

__global__ void __launch_bounds__(TC_THREADS) dr_tc_out_kernel(DrArgs a) {
    CU_DYN_SMEM(unsigned char, sm);
    bf16 *Qs = reinterpret_cast<bf16 *>(sm), *Ks = Qs + TC_TILE, *Vn = Ks + TC_TILE, *Hs = Vn + TC_TILE;
    float *Gs = reinterpret_cast<float *>(sm + TcOut::off_G);
    const int n = blockIdx.x, j = blockIdx.y, b = blockIdx.z, i = j / a.G;
    const int t0 = n * DR_C, Lc = min(DR_C, a.T - t0);
    const int warp = threadIdx.x >> 5, R0 = 16 * warp;
    const int ksk = a.dk / 16, pv = a.dv / 16;
    const size_t tok0 = (size_t)b * a.T + t0, hr0 = dr_hrow(a, b, j, t0);

    tile_load<DR_C, DR_C, TC_LD>(Qs, (const bf16 *)a.q + tok0 * a.ldqk + (size_t)i * a.dk, a.ldqk, Lc, a.dk);
    tile_load<DR_C, DR_C, TC_LD>(Ks, (const bf16 *)a.k + tok0 * a.ldqk + (size_t)i * a.dk, a.ldqk, Lc, a.dk);
    tile_load<DR_C, DR_C, TC_LD>(Vn, (const bf16 *)a.vnew + hr0 * a.dv, a.dv, Lc, a.dv);
    tile_load<DR_C, DR_C, TC_LD>(Hs, (const bf16 *)a.h + dr_state_off(a, b, j, n), a.dv, a.dk, a.dv);
    cp_async_commit();
    load_G(Gs, a, hr0, Lc);
    __shared__ int Ds[DR_C];
    load_D(Ds, a, b, t0, Lc);
    cp_async_wait<0>();
    __syncthreads();

    uint32_t qa[4][4];
#pragma unroll
    for (int s = 0; s < 4; s++) lda_rk(qa[s], Qs, TC_LD, R0, 16 * s);
    uint32_t sa[4][4]; // S = (Q K^T . Gamma . M), bf16, as A fragments
    {
        float acc[8][4];
        zero_tc(acc);
#pragma unroll
        for (int s = 0; s < 4; s++)
            if (s < ksk) mma_row<B_NK>(acc, qa[s], Ks, TC_LD, 16 * s, 0, warp + 1);
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int x = 0; x < 4; x++) {
                const int r = R0 + acc_row(x), c = acc_col(nt, x);
                acc[nt][x] = c <= r && r < Lc && Ds[r] == Ds[c] ? rnd_bf16(acc[nt][x] * dr_exp2(Gs[r] - Gs[c])) : 0.0f;
            }
        acc_to_a(sa, acc);
    }
    float o1[8][4], o2[8][4]; // S V_new, Q h_n
    zero_tc(o1);
    zero_tc(o2);
#pragma unroll
    for (int s = 0; s < 4; s++) {
        if (s <= warp) mma_row<B_KN>(o1, sa[s], Vn, TC_LD, 16 * s, 0, pv);
        if (s < ksk) mma_row<B_KN>(o2, qa[s], Hs, TC_LD, 16 * s, 0, pv);
    }
    const float eg0 = dr_carried(Ds, t0, R0 + acc_row(0)) ? dr_exp2(Gs[R0 + acc_row(0)]) : 0.0f;
    const float eg1 = dr_carried(Ds, t0, R0 + acc_row(2)) ? dr_exp2(Gs[R0 + acc_row(2)]) : 0.0f;
#pragma unroll
    for (int nt = 0; nt < 8; nt++)
#pragma unroll
        for (int x = 0; x < 4; x++) o1[nt][x] = a.scale * ((x < 2 ? eg0 : eg1) * o2[nt][x] + o1[nt][x]);
    bf16 *o = reinterpret_cast<bf16 *>(a.o) + tok0 * a.ldo + (size_t)j * a.dv;
    store_acc(o, a.ldo, o1, R0, Lc, a.dv, tc_pairs_ok(o, a.ldo));
}

// ---------------------------------------------------------------------------------------------------
// launchers

bool dr_tc_supported(int dk, int dv) { return dk <= 64 && dv <= 64 && dk % 16 == 0 && dv % 16 == 0; }
bool dr_use_tc(bool act_bf16, int dk, int dv) {
    static int forced_fma = -1;
    if (forced_fma < 0) {
        const char *e = getenv("GDN_CUDA_DELTA");
        forced_fma = e && !strcmp(e, "fma");
    }
    return act_bf16 && !forced_fma && dr_tc_supported(dk, dv);
}

static dim3 tc_chunk_grid(const DrArgs &a) { return dim3(a.NT, a.HV, a.B); }

void dr_tc_fwd_intra(const DrArgs &a) {
    cu_launch("delta_rule tc intra", dr_tc_intra_kernel<false>, tc_chunk_grid(a), dim3(TC_THREADS),
              TcIntra<false>::smem, a);
}
void dr_tc_bwd_intra(const DrArgs &a) {
    cu_launch("delta_rule_bwd tc intra", dr_tc_intra_kernel<true>, tc_chunk_grid(a), dim3(TC_THREADS),
              TcIntra<true>::smem, a);
}
// dv tile width of a serial kernel: 16 unless 32-wide tiles need fewer waves (their grid is half as
// large, each block does twice the work per chunk at about the same latency). GDN_CUDA_DR_BV=16|32
// forces it (tests). 64-wide tiles (one block per head, the chunk's W and K read once instead of dv / BV times) were
// measured in session 13: state +0.34 ms a step at the 300M, dh no better (notes/PERF.md); the kernels are
// latency-bound, not bound by those reads.
int dr_tc_pick_bv(const DrArgs &a, const void *k16, size_t smem16, const void *k32, size_t smem32) {
    const char *forced = getenv("GDN_CUDA_DR_BV");
    if (forced && atoi(forced) == 32 && a.dv % 32 == 0) return 32;
    if (forced && atoi(forced) == 16) return 16;
    if (a.dv % 32) return 16;
    // blocks per SM of each kernel: constant, asked once per kernel pair
    static const void *seen[4];
    static int occ_seen[4][2];
    int slot = 0;
    while (slot < 4 && seen[slot] && seen[slot] != k16) slot++;
    if (slot == 4) slot = 0; // (only two pairs exist)
    if (seen[slot] != k16) {
        CU_CHECK(cudaFuncSetAttribute(k16, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem16));
        CU_CHECK(cudaFuncSetAttribute(k32, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem32));
        CU_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ_seen[slot][0], k16, TC_THREADS, smem16));
        CU_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ_seen[slot][1], k32, TC_THREADS, smem32));
        seen[slot] = k16;
    }
    const int occ16 = occ_seen[slot][0], occ32 = occ_seen[slot][1];
    const long slots16 = (long)(occ16 > 0 ? occ16 : 1) * g_cu.sm_count, slots32 = (long)(occ32 > 0 ? occ32 : 1) * g_cu.sm_count;
    const long blocks16 = (long)(a.dv / 16) * a.HV * a.B, blocks32 = blocks16 / 2;
    const long waves16 = (blocks16 + slots16 - 1) / slots16, waves32 = (blocks32 + slots32 - 1) / slots32;
    return waves32 < waves16 ? 32 : 16;
}

void dr_tc_fwd_state(const DrArgs &a) {
    if (dr_wg_state(a)) return;
    const int bv = dr_tc_pick_bv(a, (const void *)dr_tc_state_kernel<16>, TcState<16>::smem,
                                 (const void *)dr_tc_state_kernel<32>, TcState<32>::smem);
    if (bv == 32)
        cu_launch("delta_rule tc state (32-wide dv tiles)", dr_tc_state_kernel<32>, dim3(a.dv / 32, a.HV, a.B),
                  dim3(TC_THREADS), TcState<32>::smem, a);
    else
        cu_launch("delta_rule tc state", dr_tc_state_kernel<16>, dim3(a.dv / 16, a.HV, a.B), dim3(TC_THREADS),
                  TcState<16>::smem, a);
}
void dr_tc_fwd(const DrArgs &a) {
    dr_tc_fwd_intra(a);
    dr_tc_fwd_state(a);
    cu_launch("delta_rule tc out", dr_tc_out_kernel, tc_chunk_grid(a), dim3(TC_THREADS), TcOut::smem, a);
}
