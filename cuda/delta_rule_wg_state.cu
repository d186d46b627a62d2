// delta_rule_wg_state.cu: the chunked delta rule's serial recurrences, the forward's state (delta_rule_tc_fwd.cu's
// state kernel) and the backward's dh (delta_rule_tc_bwd.cu's), on warpgroup MMAs, one block per (batch, v head)
// holding the whole 64 x 64 state: FLA's chunk_gated_delta_rule_fwd_h / bwd_dhu form (one program per head and
// 64-wide dv block, its tl.dot a wgmma on Hopper).
//
// Why: the mma.sync kernel at 16-wide dv tiles re-reads each chunk's W and K tiles for every tile (~350 MB a layer
// at the 300M, ~126 us), and at 64-wide tiles its per-warp mma chains made it latency-bound (session 13: slower). A
// wgmma takes the chunk's whole [64 x 64] x [64 x 64] product from shared memory in four asynchronous k16 steps, so
// one warpgroup a head covers the bytes' floor (~40 KB a chunk and head in and out: ~164 MB a layer, ~49 us on an
// H100; FLA's kernel ~59; dh the same with Q and dO: FLA's dhu ~88 us). Measured (session 20, H100, ncu): state 153
// us a layer against the mma.sync kernel's 150, dh 161 against 186, issue-bound with one warpgroup an SM (~1,400 and
// ~1,700 instructions a warp a chunk). So (session 21) the state's 64 columns are split among the block's
// warpgroups (32 each by default: two warpgroups on the same W and K tiles, twice the warps to issue from) and the
// tiles come by TMA (no copy instructions): state 84 us a layer, dh 101 (ncu, H100; notes/PERF.md). The products'
// bits are the mma.sync kernels' in every form (the same k16 steps in the same order: the step's loss and FLA's
// 20-step parity are unchanged to the last digit). The default at dk = dv = 64 on sm_90; GDN_CUDA_DR_BV=16|32 forces
// the mma.sync kernels, GDN_CUDA_DR_WG_NC=64|32|16 the columns a warpgroup, GDN_CUDA_DR_WG_TMA=0 cp.async.
//
// Per chunk n (rows t0 .. t0 + Lc - 1), h the fp32 state in the accumulators' layout (hopper.cuh):
//   h_n saved (bf16) and written as the B operand of W h (MN-major: a warpgroup's [dk][NC] slice, hopper.cuh's
//   narrow swizzle);
//   D = W h_n (A = the W tile, K-major);  V_new = U - D (saved);  Vd = bf16(e^{G_last - G} V_new), 0 past Lc;
//   h = e^{G_last} h + K^T Vd (A = the K tile read MN-major, B = Vd MN-major).
// The same roundings as the mma.sync kernel (h and Vd in bf16 as operands, V_new stored in bf16); the sums run in
// wgmma's order, so bits may differ from it within fp32 rounding. Tiles come one chunk ahead.
#include "cuda/delta_rule.cuh"
#include "cuda/hopper.cuh"

// The state's 64 columns (dv) split among 64 / NC warpgroups of a block, NC each (32 by default; GDN_CUDA_DR_WG_NC):
// each warpgroup's products read the block's shared W, K (Q) tiles and its own [64][NC] column slices of the state
// and V_new (m64nNCk16), so a block holds 2 or 4 warpgroups on the same bytes, and an SM more warps to issue from.
namespace {
// The kernels' arguments: the call's and, with TMA (the default; GDN_CUDA_DR_WG_TMA=0: cp.async), the tensor maps of
// the tiles they load (state: W, K, U; dh: K, Q, W, dO, dV_local), each a 64 x 64 box with the 128-byte swizzle.
struct WgArgs {
    CUtensorMap tm[5];
    DrArgs a;
};

// Shared memory (offsets from a 1024-byte aligned base): per stage the W, K and U tiles (swizzled, 8 KB each); then
// the warpgroups' h slices and Vd slices ([64][NC] each, swizzled: hopper.cuh's narrow tiles); the stages' mbarriers.
template <int NC> struct WgState {
    static constexpr int NWG = 64 / NC;
    static constexpr size_t TILE = 64 * 128, SLICE = 64 * 2 * NC; // 8192; a warpgroup's [64][NC]
    static constexpr size_t stage = 3 * TILE;                      // 24 x 1024
    static constexpr size_t off_h = 2 * stage, off_vd = off_h + NWG * SLICE, off_bar = off_vd + NWG * SLICE;
    static constexpr size_t smem = off_bar + 2 * sizeof(uint64_t) + 1024; // + the base's alignment
};
} // namespace

// A [64][64] bf16 tile (rows < rows_valid of a matrix with row stride ld, 16-byte aligned rows) into 64 / NC swizzled
// [64][NC] column slices SLICE bytes apart (NC = 64: one 128-byte swizzled tile) by cp.async; zeros elsewhere. The
// caller commits, waits, fences the async proxy and syncs.
template <int NC>
__device__ __forceinline__ void tile_load_slices(unsigned char *dst, const bf16 *src, size_t ld, int rows_valid) {
    constexpr int UNITS = NC / 8; // 16-byte units of a slice's row
    for (int idx = threadIdx.x; idx < 64 * 8; idx += blockDim.x) {
        const int r = idx >> 3, c = idx & 7;
        unsigned char *d = dst + (c / UNITS) * (64 * 2 * NC) + sw_off<NC>(r, 8 * (c % UNITS));
        if (r < rows_valid) cp_async16(d, src + (size_t)r * ld + 8 * c);
        else *reinterpret_cast<uint4 *>(d) = make_uint4(0, 0, 0, 0);
    }
}

// A warp's rows of its warpgroup's [64][NC] state slice in accumulators (st[4 nt + x]: row R0 + acc_row(x), column
// C0 + acc_col(nt, x)) as bf16 into the slice's swizzled operand tile and, unless save is NULL, into the saved
// [64][64] copy: h_n of the forward, dS_end of the backward.
template <int NC>
__device__ __forceinline__ void wg_state_out(const float (&st)[NC / 2], unsigned char *slice, bf16 *save, int R0,
                                             int C0) {
#pragma unroll
    for (int nt = 0; nt < NC / 8; nt++)
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            const int d = R0 + acc_row(2 * hh), e = acc_col(nt, 0);
            const uint32_t v = pack_bf16(st[4 * nt + 2 * hh], st[4 * nt + 2 * hh + 1]);
            *reinterpret_cast<uint32_t *>(slice + sw_off<NC>(d, e)) = v;
            if (save) *reinterpret_cast<uint32_t *>(save + (size_t)d * 64 + C0 + e) = v;
        }
}

// TMA: the tiles come by tensor map on an mbarrier a stage (thread 0 issues them); their rows past a partial chunk
// hold the next rows of the tensor instead of zeros, which no product uses (V_new and Vd are masked there, and K's
// rows meet Vd's zeros). Else by cp.async, zeros past the chunk.
template <int NC, bool TMA>
__global__ void __launch_bounds__(128 * (64 / NC)) dr_wg_state_kernel(const __grid_constant__ WgArgs p) {
    using L = WgState<NC>;
    const DrArgs &a = p.a;
    CU_DYN_SMEM(unsigned char, raw);
    unsigned char *sm = raw + ((1024 - (smem_u32(raw) & 1023)) & 1023);
    uint64_t *bar = reinterpret_cast<uint64_t *>(sm + L::off_bar);
    const int wg = threadIdx.x >> 7, C0 = NC * wg; // this warpgroup's columns C0 .. C0 + NC - 1
    unsigned char *hs = sm + L::off_h + wg * L::SLICE, *Vd = sm + L::off_vd + wg * L::SLICE;
    const int j = blockIdx.y, b = blockIdx.z, i = j / a.G;
    const int warp = (threadIdx.x >> 5) & 3, R0 = 16 * warp;
    const size_t bj = (size_t)b * a.HV + j;
    const bf16 *Wg = (const bf16 *)a.W, *Ug = (const bf16 *)a.U, *kg = (const bf16 *)a.k;

    auto tiles = [&](int n, int buf) {
        unsigned char *W = sm + buf * L::stage, *K = W + L::TILE, *U = K + L::TILE;
        const int t0 = n * DR_C, Lc = min(DR_C, a.T - t0);
        const size_t tok0 = (size_t)b * a.T + t0, hr0 = bj * a.T + t0;
        if constexpr (TMA) {
            if (threadIdx.x == 0) {
                mbar_arrive_expect_tx(&bar[buf], 3 * L::TILE);
                tma_load_2d(W, &p.tm[0], 0, (int)hr0, &bar[buf]);
                tma_load_2d(K, &p.tm[1], 64 * i, (int)tok0, &bar[buf]);
                tma_load_2d(U, &p.tm[2], 0, (int)hr0, &bar[buf]);
            }
        } else {
            tile_load_slices<64>(W, Wg + hr0 * 64, 64, Lc);
            tile_load_slices<64>(K, kg + tok0 * a.ldqk + (size_t)i * 64, a.ldqk, Lc);
            tile_load_slices<64>(U, Ug + hr0 * 64, 64, Lc);
            cp_async_commit();
        }
    };
    auto gload = [&](int n, float &g0, float &g1, float &gl) { // G of this thread's two rows and of the last
        const int t0 = n * DR_C, Lc = min(DR_C, a.T - t0);
        const float *G = a.Gc + bj * a.T + t0;
        g0 = G[min(R0 + acc_row(0), Lc - 1)];
        g1 = G[min(R0 + acc_row(2), Lc - 1)];
        gl = G[Lc - 1];
    };

    float h[NC / 2]; // h[4 nt + x]: state row R0 + acc_row(x), column C0 + acc_col(nt, x) (the accumulator layout)
#pragma unroll
    for (int nt = 0; nt < NC / 8; nt++)
#pragma unroll
        for (int x = 0; x < 4; x++) {
            const int d = R0 + acc_row(x), e = C0 + acc_col(nt, x);
            h[4 * nt + x] = a.state ? a.state[(bj * 64 + d) * 64 + e] : 0.0f;
        }
    float g0, g1, gl;
    if (TMA && threadIdx.x == 0) {
        mbar_init(&bar[0], 1);
        mbar_init(&bar[1], 1);
        mbar_fence_init();
    }
    __syncthreads();
    tiles(0, 0);
    gload(0, g0, g1, gl);
    const bool pairs_v = a.vnew && tc_pairs_ok(a.vnew, 64);
    const uint32_t hs_a = smem_u32(hs), vd_a = smem_u32(Vd);
    for (int n = 0; n < a.NT; n++) {
        const int buf = n & 1, t0 = n * DR_C, Lc = min(DR_C, a.T - t0);
        const size_t hr0 = bj * a.T + t0;
        const unsigned char *W = sm + buf * L::stage, *K = W + L::TILE, *U = K + L::TILE;
        const float G0 = g0, G1 = g1, GL = gl;
        if (n + 1 < a.NT) {
            tiles(n + 1, buf ^ 1);
            gload(n + 1, g0, g1, gl);
        }
        // h_n: saved (act) and written as the B operand of W h
        wg_state_out<NC>(h, hs, a.h ? reinterpret_cast<bf16 *>(a.h) + dr_state_off(a, b, j, n) : NULL, R0, C0);
        if constexpr (TMA) mbar_wait(&bar[buf], (n >> 1) & 1); // the stage's (n >> 1)-th load
        else cp_async_wait_current(n + 1 < a.NT);
        wg_fence_proxy_smem(); // this thread's shared stores and copies, before the MMAs read them
        __syncthreads();
        float D[NC / 2];
        { // D = W h_n (this warpgroup's columns)
            const uint32_t w_a = smem_u32(W);
            wg_fence();
#pragma unroll
            for (int s = 0; s < 4; s++)
                wgmma_m64nk16<NC, 0, 1>(D, wg_desc_sw128(w_a + 32 * s), wg_desc_mn_sw<NC>(hs_a + 32 * NC * s), s);
            wg_commit();
            wg_wait<0>();
            wg_fence_regs(D);
        }
        { // V_new = U - D (rows R0..), then Vd = bf16(e^{G_last - G} V_new), zero past Lc
            const int dl = dr_ds(a, b, t0, Lc, Lc - 1);
            const float dec0 = dr_ds(a, b, t0, Lc, R0 + acc_row(0)) == dl ? dr_exp2(GL - G0) : 0.0f;
            const float dec1 = dr_ds(a, b, t0, Lc, R0 + acc_row(2)) == dl ? dr_exp2(GL - G1) : 0.0f;
#pragma unroll
            for (int nt = 0; nt < NC / 8; nt++)
#pragma unroll
                for (int hh = 0; hh < 2; hh++) {
                    const int r = R0 + acc_row(2 * hh), e = acc_col(nt, 0);
                    const uint32_t u = *reinterpret_cast<const uint32_t *>(U + sw_off<64>(r, C0 + e));
                    const float v0 = bf16_lo(u) - D[4 * nt + 2 * hh], v1 = bf16_hi(u) - D[4 * nt + 2 * hh + 1];
                    uint32_t vd = 0;
                    if (r < Lc) {
                        bf16 *vn = a.vnew ? reinterpret_cast<bf16 *>(a.vnew) + (hr0 + r) * 64 + C0 + e : NULL;
                        if (vn && pairs_v) {
                            *reinterpret_cast<uint32_t *>(vn) = pack_bf16(v0, v1);
                        } else if (vn) {
                            vn[0] = __float2bfloat16_rn(v0);
                            vn[1] = __float2bfloat16_rn(v1);
                        }
                        const float dec = hh ? dec1 : dec0;
                        vd = pack_bf16(dec * v0, dec * v1);
                    }
                    *reinterpret_cast<uint32_t *>(Vd + sw_off<NC>(r, e)) = vd;
                }
        }
        wg_fence_proxy_smem();
        __syncthreads();
        { // h <- e^{G_last} h + K^T Vd
            const float eL = dr_carried_ds(dr_ds(a, b, t0, Lc, Lc - 1), t0) ? dr_exp2(GL) : 0.0f;
#pragma unroll
            for (int x = 0; x < NC / 2; x++) h[x] *= eL;
            const uint32_t k_a = smem_u32(K);
            wg_fence();
#pragma unroll
            for (int s = 0; s < 4; s++) // (Vd's and K's rows past Lc are zero: a partial chunk's steps add zeros)
                wgmma_m64nk16<NC, 1, 1>(h, wg_desc_mn_sw128(k_a + 2048 * s, 8192),
                                        wg_desc_mn_sw<NC>(vd_a + 32 * NC * s), 1);
            wg_commit();
            wg_wait<0>();
            wg_fence_regs(h);
        }
        __syncthreads(); // hs, Vd and this stage are rewritten next
    }
    if (a.state) {
#pragma unroll
        for (int nt = 0; nt < NC / 8; nt++)
#pragma unroll
            for (int x = 0; x < 4; x++) {
                const int d = R0 + acc_row(x), e = C0 + acc_col(nt, x);
                a.state[(bj * 64 + d) * 64 + e] = h[4 * nt + x];
            }
    }
}

// ---------------------------------------------------------------------------------------------------
// The backward's dh recurrence (delta_rule_tc_bwd.cu's dh kernel) the same way, last chunk first, dS (dL/d of the
// state at the chunk's end) in the accumulators, its columns split among the warpgroups as the forward's:
//   dS_end saved (bf16) and written as the B operand of K dS (MN-major);  Q <- bf16(s e^G q) in its tile;
//   D = K dS_end (A = the K tile, K-major);  dV_new = dV_local + e^{G_last - G} D (saved; its tile, 0 past Lc);
//   dS <- e^{G_last} dS + Qg^T dO - W^T dV_new (A = the Q and W tiles read MN-major, B = dO and dV_new MN-major),
// the W^T dV_new product summed apart and subtracted, as the mma.sync kernel does.
namespace {
template <int NC> struct WgDh {
    static constexpr int NWG = 64 / NC;
    static constexpr size_t TILE = 64 * 128, SLICE = 64 * 2 * NC;
    static constexpr size_t stage = 5 * TILE; // K, Q, W, dO's slices, dV_local (swizzled): 40 x 1024
    static constexpr size_t off_ds = 2 * stage, off_dvn = off_ds + NWG * SLICE, off_bar = off_dvn + NWG * SLICE;
    static constexpr size_t smem = off_bar + 2 * sizeof(uint64_t) + 1024;
};
} // namespace

// TMA as the state's: K, Q, W, dV_local (and dO at NC = 64: its box is the one slice) by tensor map; the rows past a
// partial chunk are not zeros then, so Q's scaling writes zeros there (Qg^T dO then adds nothing from them, and
// dV_new's tile is zero there).
template <int NC, bool TMA>
__global__ void __launch_bounds__(128 * (64 / NC)) dr_wg_dh_kernel(const __grid_constant__ WgArgs p) {
    using L = WgDh<NC>;
    constexpr bool TMA_DO = TMA && NC == 64;
    const DrArgs &a = p.a;
    constexpr int TPR = 2 * L::NWG, UPT = 8 / TPR; // Q's scaling: threads a row, 16-byte units a thread
    CU_DYN_SMEM(unsigned char, raw);
    unsigned char *sm = raw + ((1024 - (smem_u32(raw) & 1023)) & 1023);
    uint64_t *bar = reinterpret_cast<uint64_t *>(sm + L::off_bar);
    const int wg = threadIdx.x >> 7, C0 = NC * wg;
    unsigned char *dSs = sm + L::off_ds + wg * L::SLICE, *dVn = sm + L::off_dvn + wg * L::SLICE;
    const int j = blockIdx.y, b = blockIdx.z, i = j / a.G;
    const int warp = (threadIdx.x >> 5) & 3, R0 = 16 * warp, qrow = threadIdx.x / TPR;
    const size_t bj = (size_t)b * a.HV + j;

    auto tiles = [&](int n, int buf) {
        unsigned char *K = sm + buf * L::stage, *Q = K + L::TILE, *W = Q + L::TILE, *dO = W + L::TILE;
        unsigned char *dl = dO + L::TILE;
        const int t0 = n * DR_C, Lc = min(DR_C, a.T - t0);
        const size_t tok0 = (size_t)b * a.T + t0, hr0 = bj * a.T + t0;
        if constexpr (TMA) {
            if (threadIdx.x == 0) {
                mbar_arrive_expect_tx(&bar[buf], (TMA_DO ? 5 : 4) * L::TILE);
                tma_load_2d(K, &p.tm[0], 64 * i, (int)tok0, &bar[buf]);
                tma_load_2d(Q, &p.tm[1], 64 * i, (int)tok0, &bar[buf]);
                tma_load_2d(W, &p.tm[2], 0, (int)hr0, &bar[buf]);
                if (TMA_DO) tma_load_2d(dO, &p.tm[3], 64 * j, (int)tok0, &bar[buf]);
                tma_load_2d(dl, &p.tm[4], 0, (int)hr0, &bar[buf]);
            }
        } else {
            tile_load_slices<64>(K, (const bf16 *)a.k + tok0 * a.ldqk + (size_t)i * 64, a.ldqk, Lc);
            tile_load_slices<64>(Q, (const bf16 *)a.q + tok0 * a.ldqk + (size_t)i * 64, a.ldqk, Lc);
            tile_load_slices<64>(W, (const bf16 *)a.W + hr0 * 64, 64, Lc);
            tile_load_slices<64>(dl, (const bf16 *)a.dvloc + hr0 * 64, 64, Lc);
        }
        if constexpr (!TMA_DO) {
            tile_load_slices<NC>(dO, (const bf16 *)a.dO + tok0 * a.lddo + (size_t)j * 64, a.lddo, Lc);
            cp_async_commit();
        }
    };
    auto gload = [&](int n, float (&g)[4]) { // G of the two accumulator rows, of the Q row scaled, of the last
        const int t0 = n * DR_C, Lc = min(DR_C, a.T - t0);
        const float *G = a.Gc + bj * a.T + t0;
        g[0] = G[min(R0 + acc_row(0), Lc - 1)];
        g[1] = G[min(R0 + acc_row(2), Lc - 1)];
        g[2] = G[min(qrow, Lc - 1)];
        g[3] = G[Lc - 1];
    };

    float dS[NC / 2]; // dS[4 nt + x]: row R0 + acc_row(x), column C0 + acc_col(nt, x)
#pragma unroll
    for (int x = 0; x < NC / 2; x++) dS[x] = 0.0f;
    float gn[4];
    if (TMA && threadIdx.x == 0) {
        mbar_init(&bar[0], 1);
        mbar_init(&bar[1], 1);
        mbar_fence_init();
    }
    __syncthreads();
    tiles(a.NT - 1, (a.NT - 1) & 1);
    gload(a.NT - 1, gn);
    const bool pairs_dv = tc_pairs_ok(a.dvnew, 64);
    const uint32_t ds_a = smem_u32(dSs), dvn_a = smem_u32(dVn);
    for (int n = a.NT - 1; n >= 0; n--) {
        const int buf = n & 1, t0 = n * DR_C, Lc = min(DR_C, a.T - t0);
        const size_t hr0 = bj * a.T + t0;
        unsigned char *K = sm + buf * L::stage, *Q = K + L::TILE, *W = Q + L::TILE, *dO = W + L::TILE;
        const unsigned char *dl = dO + L::TILE;
        const float G0 = gn[0], G1 = gn[1], GQ = gn[2], GL = gn[3];
        if (n > 0) {
            tiles(n - 1, buf ^ 1);
            gload(n - 1, gn);
        }
        wg_state_out<NC>(dS, dSs, reinterpret_cast<bf16 *>(a.dh) + dr_state_off(a, b, j, n), R0, C0); // dh_n = dS_end
        if constexpr (TMA) mbar_wait(&bar[buf], ((a.NT - 1 - n) >> 1) & 1); // the stage's ((NT-1-n) >> 1)-th load
        if constexpr (!TMA_DO) cp_async_wait_current(n > 0);
        __syncthreads();
        const int dl_ = dr_ds(a, b, t0, Lc, Lc - 1); // packed documents (delta_rule.cuh)
        if (qrow < Lc) { // Q <- bf16(s e^G q): TPR threads a row, UPT 16-byte units each
            const float f = a.scale * (dr_carried_ds(dr_ds(a, b, t0, Lc, qrow), t0) ? dr_exp2(GQ) : 0.0f);
#pragma unroll
            for (int w = 0; w < UPT; w++) {
                bf16 *qu = reinterpret_cast<bf16 *>(Q + sw_off<64>(qrow, 8 * (UPT * (threadIdx.x % TPR) + w)));
                float x[8];
                load_vec<bf16, 8>(x, qu);
#pragma unroll
                for (int c = 0; c < 8; c++) x[c] *= f;
                store_vec<bf16, 8>(qu, x);
            }
        } else if (TMA) { // rows past the chunk: zeros (TMA brought the next rows of q)
#pragma unroll
            for (int w = 0; w < UPT; w++)
                *reinterpret_cast<uint4 *>(Q + sw_off<64>(qrow, 8 * (UPT * (threadIdx.x % TPR) + w))) =
                    make_uint4(0, 0, 0, 0);
        }
        wg_fence_proxy_smem(); // dS_end's tile, this thread's copies and Q's scaling, before the MMAs read them
        __syncthreads();
        { // dV_new = dV_local + e^{G_last - G} (K dS_end), rows R0.., this warpgroup's columns
            float D[NC / 2];
            wg_fence();
#pragma unroll
            for (int s = 0; s < 4; s++)
                wgmma_m64nk16<NC, 0, 1>(D, wg_desc_sw128(smem_u32(K) + 32 * s), wg_desc_mn_sw<NC>(ds_a + 32 * NC * s),
                                        s);
            wg_commit();
            wg_wait<0>();
            wg_fence_regs(D);
            const float dec0 = dr_ds(a, b, t0, Lc, R0 + acc_row(0)) == dl_ ? dr_exp2(GL - G0) : 0.0f;
            const float dec1 = dr_ds(a, b, t0, Lc, R0 + acc_row(2)) == dl_ ? dr_exp2(GL - G1) : 0.0f;
#pragma unroll
            for (int nt = 0; nt < NC / 8; nt++)
#pragma unroll
                for (int hh = 0; hh < 2; hh++) {
                    const int r = R0 + acc_row(2 * hh), e = acc_col(nt, 0);
                    uint32_t packed = 0;
                    if (r < Lc) {
                        const uint32_t l2 = *reinterpret_cast<const uint32_t *>(dl + sw_off<64>(r, C0 + e));
                        const float dec = hh ? dec1 : dec0;
                        const float v0 = bf16_lo(l2) + dec * D[4 * nt + 2 * hh];
                        const float v1 = bf16_hi(l2) + dec * D[4 * nt + 2 * hh + 1];
                        packed = pack_bf16(v0, v1);
                        bf16 *o = reinterpret_cast<bf16 *>(a.dvnew) + (hr0 + r) * 64 + C0 + e;
                        if (pairs_dv) {
                            *reinterpret_cast<uint32_t *>(o) = packed;
                        } else {
                            o[0] = __float2bfloat16_rn(v0);
                            o[1] = __float2bfloat16_rn(v1);
                        }
                    }
                    *reinterpret_cast<uint32_t *>(dVn + sw_off<NC>(r, e)) = packed;
                }
        }
        wg_fence_proxy_smem();
        __syncthreads(); // dV_new's tile complete
        { // dS_start = e^{G_last} dS_end + Qg^T dO - W^T dV_new
            const float eL = dr_carried_ds(dl_, t0) ? dr_exp2(GL) : 0.0f;
#pragma unroll
            for (int x = 0; x < NC / 2; x++) dS[x] *= eL;
            float wdv[NC / 2];
            const uint32_t do_a = smem_u32(dO) + wg * L::SLICE;
            wg_fence();
#pragma unroll
            for (int s = 0; s < 4; s++) {
                wgmma_m64nk16<NC, 1, 1>(dS, wg_desc_mn_sw128(smem_u32(Q) + 2048 * s, 8192),
                                        wg_desc_mn_sw<NC>(do_a + 32 * NC * s), 1);
                wgmma_m64nk16<NC, 1, 1>(wdv, wg_desc_mn_sw128(smem_u32(W) + 2048 * s, 8192),
                                        wg_desc_mn_sw<NC>(dvn_a + 32 * NC * s), s);
            }
            wg_commit();
            wg_wait<0>();
            wg_fence_regs(dS);
            wg_fence_regs(wdv);
#pragma unroll
            for (int x = 0; x < NC / 2; x++) dS[x] -= wdv[x];
        }
        __syncthreads(); // dSs, dVn and this stage are rewritten next
    }
}

// What both wgmma recurrences need: dk = dv = 64, an sm_90 device, 16-byte aligned k rows (cp.async), and no
// mma.sync tile width forced (GDN_CUDA_DR_BV=16 or 32: A/B runs, tests); each adds the rows it reads besides.
static bool wg_takes(const DrArgs &a) {
    const char *forced = getenv("GDN_CUDA_DR_BV");
    const bool mma_sync = forced && (atoi(forced) == 16 || atoi(forced) == 32);
    return !mma_sync && a.dk == 64 && a.dv == 64 && cu_sm90() && !((uintptr_t)a.k & 15) && a.ldqk % 8 == 0;
}

// Columns a warpgroup (NC): GDN_CUDA_DR_WG_NC = 64, 32 or 16 (A/B runs, tests); 32 by default (session 21, H100,
// ncu a layer: state 158 / 113 / 127 us at 64 / 32 / 16 with cp.async, dh 167 / 123 / 129).
static int wg_columns() {
    const char *forced = getenv("GDN_CUDA_DR_WG_NC");
    if (!forced) return 32;
    const int nc = atoi(forced);
    if (nc != 64 && nc != 32 && nc != 16)
        die("GDN_CUDA_DR_WG_NC=%s: expected 64, 32 or 16 (columns a warpgroup)", forced);
    return nc;
}
// Tiles by TMA by default (session 21, H100, at NC = 32: state 84 us a layer against 113 by cp.async, dh 101 against
// 123); GDN_CUDA_DR_WG_TMA=0 takes cp.async (A/B runs, tests).
static bool wg_tma() {
    const char *forced = getenv("GDN_CUDA_DR_WG_TMA");
    if (!forced) return true;
    if (strcmp(forced, "0") && strcmp(forced, "1")) die("GDN_CUDA_DR_WG_TMA=%s: expected 0 or 1", forced);
    return forced[0] == '1';
}

// A [rows][64] head-major act tensor's map (W, U, dV_local), and the 64-wide column block map of a token-major one.
static void map_heads(CUtensorMap *m, const void *base, const DrArgs &a, const char *op) {
    cu_tmap_2d_bf16(m, base, 64, (uint64_t)a.B * a.HV * a.T, 128, 64, 64, op);
}
static void map_tokens(CUtensorMap *m, const void *base, int ld, const DrArgs &a, const char *op) {
    cu_tmap_2d_bf16(m, base, (uint64_t)ld, (uint64_t)a.B * a.T, (uint64_t)ld * 2, 64, 64, op);
}

template <int NC, bool TMA> static void launch_dh(const DrArgs &a) {
    WgArgs p;
    memset(&p, 0, sizeof p);
    p.a = a;
    if (TMA) {
        map_tokens(&p.tm[0], a.k, a.ldqk, a, "delta_rule_wg_dh");
        map_tokens(&p.tm[1], a.q, a.ldqk, a, "delta_rule_wg_dh");
        map_heads(&p.tm[2], a.W, a, "delta_rule_wg_dh"), map_heads(&p.tm[4], a.dvloc, a, "delta_rule_wg_dh");
        if (NC == 64) map_tokens(&p.tm[3], a.dO, a.lddo, a, "delta_rule_wg_dh");
    }
    cu_launch("delta_rule_wg_dh", dr_wg_dh_kernel<NC, TMA>, dim3(1, a.HV, a.B), dim3(128 * (64 / NC)), WgDh<NC>::smem,
              p);
}
template <int NC, bool TMA> static void launch_state(const DrArgs &a) {
    WgArgs p;
    memset(&p, 0, sizeof p);
    p.a = a;
    if (TMA) {
        map_heads(&p.tm[0], a.W, a, "delta_rule_wg_state"), map_tokens(&p.tm[1], a.k, a.ldqk, a, "delta_rule_wg_state");
        map_heads(&p.tm[2], a.U, a, "delta_rule_wg_state");
    }
    cu_launch("delta_rule_wg_state", dr_wg_state_kernel<NC, TMA>, dim3(1, a.HV, a.B), dim3(128 * (64 / NC)),
              WgState<NC>::smem, p);
}
template <bool TMA> static void dispatch(const DrArgs &a, bool dh) {
    const int nc = wg_columns();
    if (nc == 64) dh ? launch_dh<64, TMA>(a) : launch_state<64, TMA>(a);
    else if (nc == 32) dh ? launch_dh<32, TMA>(a) : launch_state<32, TMA>(a);
    else dh ? launch_dh<16, TMA>(a) : launch_state<16, TMA>(a);
}

// The dh recurrence on wgmma under the same conditions as the state's (wg_takes), with 16-byte aligned q and dO rows.
// Returns whether it ran.
bool dr_wg_dh(const DrArgs &a) {
    if (!wg_takes(a) || ((uintptr_t)a.q & 15) || ((uintptr_t)a.dO & 15) || a.lddo % 8) return false;
    if (wg_tma()) dispatch<true>(a, true);
    else dispatch<false>(a, true);
    return true;
}

// Runs the kernel when it takes the call (wg_takes). Returns whether it ran.
bool dr_wg_state(const DrArgs &a) {
    if (!wg_takes(a)) return false;
    if (wg_tma()) dispatch<true>(a, false);
    else dispatch<false>(a, false);
    return true;
}
