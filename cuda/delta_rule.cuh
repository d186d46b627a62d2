// delta_rule.cuh: what the chunked gated delta rule's kernels share: the argument block, the scratch
// layouts, the CUDA-core block product and tile loader (delta_rule_fwd.cu, delta_rule_bwd.cu), and the
// tensor-core primitives (delta_rule_tc_fwd.cu, delta_rule_tc_bwd.cu; second half of this file).
//
// Algorithm: spec model.md §3 (chunk C = 64), the same decomposition as the CPU twin
// (cpu/delta_rule_chunk.c). Work is per (chunk n, v head j, sequence b) except the two serial kernels
// (state forward, dh backward), which are per (dv tile, v head, sequence) and walk the chunks in order.
// Two implementations: bf16 mode with dk, dv <= 64 uses the tensor-core kernels (notes/cuda.md, "Speed");
// the fp32 mode and larger heads use the CUDA-core kernels described here: fp32 products with operands
// staged in shared memory as fp32 with an odd row stride (no bank conflicts for row or column access),
// 256 threads forming a 16 x 16 grid, thread (tx, ty) owning output rows ty + 16 r and columns tx + 16 c.
// Head dims are padded to DKP, DVP in {64, 128} with zeros, so dk, dv <= 128 and a multiple of 16.
// Values are rounded to the act dtype where FLA stores bf16 (spec §2.7): Tm, W, U, V_new, h, the gated
// Q K^T block, dV_local, dh, dV_new, dw (rnd<T> is the identity in the fp32 mode).
//
// Scratch tensors are head-major: row (b, j, t) of a per-v-head tensor is ((b*HV + j)*T + t); states
// are [B, HV, NT, dk, dv] (K-first, as h_save in model/backend.h).
#pragma once
#include "cuda/common.cuh"

enum { DR_C = GDN_CHUNK, DR_THREADS = 256 };

struct DrArgs {
    int B, T, H, HV, G, dk, dv, NT; // G = HV / H (v heads per q/k head)
    float scale;
    const void *q, *k, *v; // act inputs [N, H*dk] (ldqk), [N, HV*dv] (ldv)
    int ldqk, ldv;
    const float *beta, *gamma; // [N, HV]
    const int32_t *ds;         // packed documents: doc_start [N] (backend.h), or NULL
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

// The tensor-core kernels keep the chunk's cumulative gates G in log2 scale (G log2 e, as FLA's chunk_local_cumsum
// with scale = 1/ln 2), so e^{G_i - G_j} = 2^{G2_i - G2_j}: one ex2.approx instead of expf's ~8 instructions (range
// reduction and fix-ups), the form FLA's Triton kernels take (exp2). Within ~2 ulp of expf; the CUDA-core kernels
// (fp32 mode) keep natural-scale G and expf.
static constexpr float DR_LOG2E = 1.4426950408889634f;
__device__ __forceinline__ float dr_exp2(float g2) { return exp2f(g2); }
// Gs[r] = Gc at row r of the chunk, rows past Lc padded with G_last (so every exp of a difference of two
// entries stays finite; padded rows are masked anyway). Threads < 64 write.
__device__ __forceinline__ void load_G(float *Gs, const DrArgs &a, size_t hr0, int Lc) {
    if (threadIdx.x < DR_C) Gs[threadIdx.x] = a.Gc[hr0 + min((int)threadIdx.x, Lc - 1)];
}
// Packed documents (a.ds), as the CPU twin (cpu/delta_rule_chunk.c): fixed chunks with masks. Ds[r] = doc_start of
// row r of the chunk at t0 (rows past Lc: the last row's; all 0 without a.ds, which turns every mask off). Gc
// restarts at each document start; e^{G_i - G_j} needs Ds[i] == Ds[j], e^{G_i} a carried row, e^{G_last - G_i}
// Ds[i] == Ds[last]. The masks select values, never change the arithmetic of the unmasked ones.
__device__ __forceinline__ int dr_ds(const DrArgs &a, int b, int t0, int Lc, int r) {
    return a.ds ? a.ds[(size_t)b * a.T + t0 + min(r, Lc - 1)] : 0;
}
__device__ __forceinline__ void load_D(int *Ds, const DrArgs &a, int b, int t0, int Lc) {
    if (threadIdx.x < DR_C) Ds[threadIdx.x] = dr_ds(a, b, t0, Lc, (int)threadIdx.x);
}
// A row with doc_start ds reads the carried state h_n: its document began before the chunk at t0, or it is the
// row's first document.
__device__ __forceinline__ bool dr_carried_ds(int ds, int t0) { return ds < t0 || ds == 0; }
__device__ __forceinline__ bool dr_carried(const int *Ds, int t0, int r) { return dr_carried_ds(Ds[r], t0); }

// A call's temporaries: all carved from the caller's scratch (DeltaRuleArgs.scratch, 256-byte steps) when they fit
// there, else each from cu_scratch. Returns whether they were carved (then dr_temps_free frees nothing).
inline bool dr_temps(void **out, const size_t *sz, int n, void *scratch, size_t scratch_bytes, const char *op) {
    auto step = [](size_t b) { return (b + 255) / 256 * 256; };
    size_t need = 0;
    for (int x = 0; x < n; x++) need += step(sz[x]);
    const bool carve = scratch && scratch_bytes >= need && cu_aligned16(scratch);
    char *at = (char *)scratch;
    for (int x = 0; x < n; x++) {
        out[x] = carve ? (void *)at : cu_scratch(sz[x], op);
        if (carve) at += step(sz[x]);
    }
    return carve;
}
inline void dr_temps_free(void **p, int n, bool carved) {
    if (!carved)
        for (int x = 0; x < n; x++) cu_scratch_free(p[x]);
}

// Forward launchers (delta_rule_fwd.cu), also used by the backward to recompute what it needs.
// intra: Gc, W, U (and Tm when a.Tm != NULL) for every chunk.
template <typename T> void dr_run_intra(const DrArgs &a);
// state: serial over chunks; writes a.h (chunk-start states), a.vnew, and the final a.state if set.
template <typename T> void dr_run_state(const DrArgs &a);
void dr_check_dims(const char *op, int B, int T, int H, int HV, int dk, int dv);

// =====================================================================================================
// Tensor-core path (bf16 mode, dk and dv <= 64; delta_rule_tc_fwd.cu, delta_rule_tc_bwd.cu)
//
// bf16 mma.sync m16n8k16 with fp32 accumulation, operands from shared memory through ldmatrix, tiles
// brought in by cp.async. 128 threads = 4 warps; in every per-chunk product warp w owns the 16 rows
// 16w..16w+15 of the 64-row chunk (or of the dk rows of a state). Fragment layouts (PTX ISA, "Matrix
// fragments for mma.m16n8k16"), lane = 4 g + t:
//   A 16x16  a[0] = (g, 2t..2t+1)   a[1] = (g+8, 2t..2t+1)   a[2] = (g, 8+2t..)   a[3] = (g+8, 8+2t..)
//   B 16x8   b[0] = (k 2t..2t+1, n g)                          b[1] = (k 8+2t.., n g)
//   C 16x8   c[0], c[1] = (g, 2t), (g, 2t+1)                  c[2], c[3] = (g+8, 2t), (g+8, 2t+1)
// so the accumulators of n-tiles 2s and 2s+1, rounded to bf16, are exactly the A fragment of k-step s
// (acc_to_a): a chained product (S = Q K^T, then S V) never leaves registers, and row sums are sums over
// the 4 lanes of a quad. Shared tiles are bf16 [rows][cols + 8]: the 16-byte pad puts the 8 rows of
// each ldmatrix 8x8 matrix in 8 distinct bank groups.

enum { TC_THREADS = 128, TC_LD = DR_C + 8, TC_TILE = DR_C * TC_LD };
static_assert(TC_THREADS == 128, "the tensor-core kernels assume 4 warps of 16 rows each");

__device__ __forceinline__ int tc_lane() { return (int)(threadIdx.x & 31); }

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    return (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(lo)) |
           ((uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(hi)) << 16);
}
__device__ __forceinline__ float bf16_lo(uint32_t v) { return __bfloat162float(__ushort_as_bfloat16((unsigned short)(v & 0xffffu))); }
__device__ __forceinline__ float bf16_hi(uint32_t v) { return __bfloat162float(__ushort_as_bfloat16((unsigned short)(v >> 16))); }
__device__ __forceinline__ float rnd_bf16(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }


// d += A B for one 16x8 tile (bf16 inputs, fp32 accumulators).
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#ifdef GDN_EMU
    emu::mma_bf16_16816(d, a, b0, b1);
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// ldmatrix .x4: lane l gives the address of row l % 8 of 8x8 matrix l / 8; r[m] gets this lane's pair of
// matrix m (row g, columns 2t, 2t+1; with .trans row 2t, 2t+1 of column g, i.e. of the transpose).
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const bf16 *row_addr) {
#ifdef GDN_EMU
    emu::ldmatrix(r, 4, false, row_addr);
#else
    const unsigned s = (unsigned)__cvta_generic_to_shared(row_addr);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
#endif
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], const bf16 *row_addr) {
#ifdef GDN_EMU
    emu::ldmatrix(r, 4, true, row_addr);
#else
    const unsigned s = (unsigned)__cvta_generic_to_shared(row_addr);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
#endif
}

// A fragment of rows r0..r0+15, k = k0..k0+15 of a matrix stored row-major [row][k] (ld elements).
__device__ __forceinline__ void lda_rk(uint32_t (&a)[4], const bf16 *s, int ld, int r0, int k0) {
    const int l = tc_lane();
    ldsm_x4(a, s + (r0 + (l & 15)) * ld + k0 + ((l >> 4) << 3));
}
// The same A fragment when the matrix is stored transposed, [k][row] (A = S^T for a stored S).
__device__ __forceinline__ void lda_kr(uint32_t (&a)[4], const bf16 *s, int ld, int r0, int k0) {
    const int l = tc_lane();
    ldsm_x4_t(a, s + (k0 + (l & 7) + ((l >> 4) << 3)) * ld + r0 + (((l >> 3) & 1) << 3));
}
// B fragments of two n-tiles (columns n0..n0+7 -> b[0], n0+8..n0+15 -> b[1]), k = k0..k0+15, for B stored
// as [n][k] (B = S^T for a stored S, e.g. K^T from K) ...
__device__ __forceinline__ void ldb_nk(uint32_t (&b)[2][2], const bf16 *s, int ld, int n0, int k0) {
    const int l = tc_lane();
    uint32_t r[4];
    ldsm_x4(r, s + (n0 + (l & 7) + ((l >> 4) << 3)) * ld + k0 + (((l >> 3) & 1) << 3));
    b[0][0] = r[0], b[0][1] = r[1], b[1][0] = r[2], b[1][1] = r[3];
}
// ... and for B stored row-major, [k][n].
__device__ __forceinline__ void ldb_kn(uint32_t (&b)[2][2], const bf16 *s, int ld, int k0, int n0) {
    const int l = tc_lane();
    uint32_t r[4];
    ldsm_x4_t(r, s + (k0 + (l & 7) + (((l >> 3) & 1) << 3)) * ld + n0 + ((l >> 4) << 3));
    b[0][0] = r[0], b[0][1] = r[1], b[1][0] = r[2], b[1][1] = r[3];
}

// One k-step of a warp's 16 x 8NT product: acc[2p], acc[2p+1] += a * B(k0.., 16p..16p+15) for the pairs
// p in [p_lo, p_hi) (a run-time range: causal masks skip whole tiles; register indices stay static).
enum { B_NK, B_KN };
// All of the step's B fragments are loaded before its first mma, so the ldmatrix latencies overlap (the
// asm statements are volatile: the compiler does not reorder them itself).
template <int BL, int NT>
__device__ __forceinline__ void mma_row(float (&acc)[NT][4], const uint32_t (&a)[4], const bf16 *Bs, int ldb, int k0,
                                        int p_lo, int p_hi) {
    uint32_t b[NT / 2][2][2];
#pragma unroll
    for (int p = 0; p < NT / 2; p++) {
        if (p < p_lo || p >= p_hi) continue;
        if (BL == B_NK)
            ldb_nk(b[p], Bs, ldb, 16 * p, k0);
        else
            ldb_kn(b[p], Bs, ldb, k0, 16 * p);
    }
#pragma unroll
    for (int p = 0; p < NT / 2; p++) {
        if (p < p_lo || p >= p_hi) continue;
        mma16816(acc[2 * p], a, b[p][0][0], b[p][0][1]);
        mma16816(acc[2 * p + 1], a, b[p][1][0], b[p][1][1]);
    }
}

template <int NT> __device__ __forceinline__ void zero_tc(float (&acc)[NT][4]) {
#pragma unroll
    for (int x = 0; x < NT; x++) acc[x][0] = acc[x][1] = acc[x][2] = acc[x][3] = 0.0f;
}
// A fragments (bf16) of the 16 x 16KS block held in accumulators acc[2 KS][4].
template <int KS> __device__ __forceinline__ void acc_to_a(uint32_t (&a)[KS][4], const float (&acc)[2 * KS][4]) {
#pragma unroll
    for (int s = 0; s < KS; s++) {
        a[s][0] = pack_bf16(acc[2 * s][0], acc[2 * s][1]);
        a[s][1] = pack_bf16(acc[2 * s][2], acc[2 * s][3]);
        a[s][2] = pack_bf16(acc[2 * s + 1][0], acc[2 * s + 1][1]);
        a[s][3] = pack_bf16(acc[2 * s + 1][2], acc[2 * s + 1][3]);
    }
}
// The bf16 value an A fragment holds at accumulator position (n-tile nt, element x) of the same rows:
// the elementwise partner of acc[nt][x] (acc_to_a's inverse).
template <int KS> __device__ __forceinline__ float a_at(const uint32_t (&a)[KS][4], int nt, int x) {
    const uint32_t v = a[nt >> 1][((nt & 1) << 1) + (x >> 1)];
    return (x & 1) ? bf16_hi(v) : bf16_lo(v);
}
// Row and column of accumulator element x of n-tile nt, relative to the warp's first row.
__device__ __forceinline__ int acc_row(int x) { return (tc_lane() >> 2) + ((x >> 1) << 3); }
__device__ __forceinline__ int acc_col(int nt, int x) { return 8 * nt + 2 * (tc_lane() & 3) + (x & 1); }

// Sum over the 4 lanes of a quad (the lanes that share accumulator rows): every lane gets the sum.
__device__ __forceinline__ float quad_sum(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    v += __shfl_xor_sync(0xffffffffu, v, 2);
    return v;
}

// cp.async: 16 bytes global -> shared, grouped by commit, retired by wait_group<N> (all but the newest N
// groups complete). A barrier must follow the wait before other threads read the data.
__device__ __forceinline__ void cp_async16(void *dst, const void *src) {
#ifdef GDN_EMU
    emu::cp_async(dst, src, 16);
#else
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src));
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#ifdef GDN_EMU
    emu::cp_async_commit();
#else
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N> __device__ __forceinline__ void cp_async_wait() {
#ifdef GDN_EMU
    emu::cp_async_wait(N);
#else
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}
// Double buffering: waits for the current tile's copies; when the next tile's group is already in flight
// (committed after it), that one may stay pending.
__device__ __forceinline__ void cp_async_wait_current(bool next_in_flight) {
    if (next_in_flight) cp_async_wait<1>();
    else cp_async_wait<0>();
}

// Shared tile [ROWS][COLS] (row stride LDS) <- rows < rows_valid, columns < cols_valid (a multiple of 8) of
// a bf16 matrix with row stride ld; zero elsewhere. 16-byte cp.async when the source rows are 16-byte
// aligned, else plain loads (then the data is there at once). The caller commits, waits and syncs.
template <int ROWS, int COLS, int LDS>
__device__ __forceinline__ void tile_load(bf16 *dst, const bf16 *src, size_t ld, int rows_valid, int cols_valid) {
    static_assert(COLS % 8 == 0 && LDS % 8 == 0, "16-byte segments");
    constexpr int SEGS = COLS / 8;
    const bool vec = (((uintptr_t)src & 15) == 0) && (ld % 8 == 0);
    for (int idx = threadIdx.x; idx < ROWS * SEGS; idx += blockDim.x) {
        const int r = idx / SEGS, c = (idx % SEGS) * 8;
        bf16 *d = dst + r * LDS + c;
        if (r < rows_valid && c < cols_valid) {
            const bf16 *p = src + (size_t)r * ld + c;
            if (vec) {
                cp_async16(d, p);
            } else {
#pragma unroll
                for (int x = 0; x < 8; x++) d[x] = p[x];
            }
        } else {
            *reinterpret_cast<uint4 *>(d) = make_uint4(0, 0, 0, 0);
        }
    }
}

// Stores a warp's accumulators acc[NT][4] (rows r0 + acc_row, columns acc_col) as bf16 into dst (row
// stride ld) where row < rows and column < cols (cols even). `pairs`: dst and ld allow 4-byte stores.
template <int NT>
__device__ __forceinline__ void store_acc(bf16 *dst, size_t ld, const float (&acc)[NT][4], int r0, int rows, int cols,
                                          bool pairs) {
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
        const int c = acc_col(nt, 0);
        if (c >= cols) continue;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = r0 + acc_row(2 * h);
            if (r >= rows) continue;
            bf16 *p = dst + (size_t)r * ld + c;
            if (pairs) {
                *reinterpret_cast<uint32_t *>(p) = pack_bf16(acc[nt][2 * h], acc[nt][2 * h + 1]);
            } else {
                p[0] = __float2bfloat16_rn(acc[nt][2 * h]);
                p[1] = __float2bfloat16_rn(acc[nt][2 * h + 1]);
            }
        }
    }
}
__host__ __device__ inline bool tc_pairs_ok(const void *p, size_t ld) { return ((uintptr_t)p & 3) == 0 && ld % 2 == 0; }

// Tensor-core launchers (bf16 only; dk, dv <= 64).
bool dr_tc_supported(int dk, int dv);
// Forward: Gc, W, U, then the state (h, V_new, final state), then o.
void dr_tc_fwd(const DrArgs &a);
// The backward's per-chunk recomputation: Gc, Tm, W, V_new = U - W h (from a.h) and dV_local.
void dr_tc_bwd_intra(const DrArgs &a);
// Backward: the recomputation above, then dh/dV_new (serial) and all gradients. a.h must hold h_n.
void dr_tc_bwd(const DrArgs &a);
// Whether this call takes the tensor-core path: bf16 mode, dk and dv <= 64, and GDN_CUDA_DELTA is not
// "fma" (which forces the CUDA-core kernels, for comparisons).
bool dr_use_tc(bool act_bf16, int dk, int dv);
// dv tile width (16 or 32) for a serial kernel with these two instantiations: the one needing fewer waves.
int dr_tc_pick_bv(const DrArgs &a, const void *k16, size_t smem16, const void *k32, size_t smem32);
// Token-by-token forward for decoding (delta_rule_decode.cu): calls with T <= DR_DECODE_MAX_T and no h_save.
enum { DR_DECODE_MAX_T = 16 };
template <typename T> void dr_decode_fwd(const DrArgs &a);
// Forward pieces reused by the backward when h_save is NULL (to rebuild h).
void dr_tc_fwd_intra(const DrArgs &a);
void dr_tc_fwd_state(const DrArgs &a);
// The state recurrence on wgmma (cuda/delta_rule_wg_state.cu) when the call fits it (dk = dv = 64, sm_90) and
// GDN_CUDA_DR_BV forces no mma.sync tile width (16, 32); returns whether it ran.
bool dr_wg_state(const DrArgs &a);
// The backward dh recurrence likewise (same file, the same conditions).
bool dr_wg_dh(const DrArgs &a);
