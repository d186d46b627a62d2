// gdn_decode_block.cu: a GDN block's whole decode step at batch 1 as one kernel (backend.h gdn_decode_block_fwd):
// the input norm + in_proj GEMV, the token mixer, the o_proj GEMV, the MLP's norm + gate|up GEMV with SwiGLU and the
// down GEMV, the five kernels that gemv.cu and gdn_decode.cu launch one after another.
//
// Why: at batch 1 a decode step is ~60 small dependent kernels (12 blocks x 5, the lm head) whose weights stream in
// ~0.13 ms on an H200, while the step takes ~0.45 ms: each kernel boundary costs the drain of the kernel before and
// the ramp of the next (~4-5 us under programmatic launch, notes/PERF.md), and the work between two boundaries is
// ~1-3 us. Here the five parts are phases of one kernel whose blocks are all resident (grid = the occupancy's
// blocks per multiprocessor x the multiprocessors), separated by a barrier across the grid (an atomic and a poll in
// L2). The phases run the standalone kernels' bodies (gemv_run, gd_run) with the same K slices, staging and mixer
// split, so the results are those of the five ops in sequence, bit for bit (test_cuda_ops' check_decode_block_bits
// holds the kernel to the table's own five ops on the same device). Shapes or batches the bodies do not take run the
// five ops, and so does everything unless GDN_DECODE_BLOCK=1.
// Measured (session 19, H100, the 300M at batch 1): correct on the GPU (bits == the five ops, decode parity) but
// slower: 0.589 ms a step against 0.464 for the five kernels. Block 0's phases (GDN_CUDA_GDB_TRACE): in_proj 8.1 us,
// mixer 12.1, o_proj 4.4, gate|up 10.1, down 3.6, against ~31 us a block for the five kernels, whose mixer alone
// takes ~12.4 (ncu, session 10): the GEMV phases lose more than the four boundaries cost, since a standalone GEMV's
// blocks load their weights while the kernel before drains (programmatic launch) and a phase's start only after the
// barrier's slowest block. So it stays opt-in, kept for those measurements and as a base (notes/PERF.md).
#include "cuda/gdn_decode.cuh"
#include "cuda/gemv.cuh"

enum { GDB_THREADS = GEMV_WARPS * 32 }; // = GD_COLS x GD_ROWS, the mixer's block
static_assert(GDB_THREADS == GD_COLS * GD_ROWS, "the GEMV and mixer bodies share the block");

#ifdef GDN_EMU
static unsigned g_gdb_bar[2];
#else
static __device__ unsigned g_gdb_bar[2]; // the grid barrier's arrivals and exits (cu_grid_sync), zero between launches
#endif

// GDN_CUDA_GDB_TRACE=n (a diagnostic, GPU only): block 0 stamps the global timer at its start, after the wait for
// the kernel before, after each of the four barriers and at its end, for the last GDB_TRACE_N launches; at the n-th
// launch outside graph capture (GDN_NO_GRAPH=1 for gdn generate) the host prints each phase's median duration.
enum { GDB_TRACE_N = 1024, GDB_STAMPS = 16 };
#ifndef GDN_EMU
static __device__ unsigned long long g_gdb_trace[GDB_TRACE_N][GDB_STAMPS];
static __device__ unsigned g_gdb_trace_n;
#endif

struct GdbArgs {
    GemvArgs in, o, gu, down;
    GdArgs mix;
    int s_in, s_o, s_gu, s_down; // each GEMV's K slices: gemv_slices', as its standalone launch takes them
    int mix_blocks;              // the mixer's blocks (H x parts at B = 1)
    int prefetch;                // 0 (default): none; 1: each phase's weights before it; 2: every block its shares of
                                 // all four first (GDN_CUDA_GDB_PREFETCH; measured 0.589 / 0.620 / 0.680 ms a step)
    int trace;                   // GDN_CUDA_GDB_TRACE set: the kernel with block 0's stamps (g_gdb_trace) runs
};

// block 0's stamp i of this launch (slot: its launch's row), when tracing
template <bool TR> __device__ __forceinline__ void gdb_stamp(unsigned slot, int i) {
#ifndef GDN_EMU
    if (TR && blockIdx.x == 0 && threadIdx.x == 0) {
        unsigned long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        g_gdb_trace[slot][i] = t;
    }
#else
    (void)slot, (void)i;
#endif
}

template <typename T, bool SWO, typename Wait>
__device__ __forceinline__ void gdb_gemv(const GemvArgs &a, int S, float *xs, Wait wait) {
    if (S == 4) gemv_run<T, 1, true, 4, false, SWO>(a, xs, 0, wait);
    else if (S == 2) gemv_run<T, 1, true, 2, false, SWO>(a, xs, 0, wait);
    else gemv_run<T, 1, true, 1, false, SWO>(a, xs, 0, wait);
}
template <typename T, bool SWO> __device__ __forceinline__ void gdb_prefetch(const GemvArgs &a, int S) {
    if (S == 4) gemv_prefetch<T, SWO, 4>(a);
    else if (S == 2) gemv_prefetch<T, SWO, 2>(a);
    else gemv_prefetch<T, SWO, 1>(a);
}

// grid: at most every block resident (gdb_grid); the GEMV phases stride their rows over the grid as the
// standalone kernels do, the mixer's blocks are blocks 0 .. mix_blocks - 1 (a block takes several only in a grid
// smaller than that, the emulator's). Each phase's first weight loads are issued before its barrier.
// MINB: blocks per multiprocessor the registers are held to (2: the mixer's 128 registers, no spills; 4: 64
// registers, the mixer spilling, twice the GEMV phases' warps in flight; GDN_CUDA_GDB_PER_SM=4, an A/B)
template <typename T, bool TR, int MINB>
__global__ void __launch_bounds__(GDB_THREADS, MINB) gdn_decode_block_kernel(GdbArgs a) {
    CU_DYN_SMEM(float, xs);
    unsigned passed = 0, slot = 0;
#ifndef GDN_EMU
    if (TR && blockIdx.x == 0 && threadIdx.x == 0) slot = atomicAdd(&g_gdb_trace_n, 1u) % GDB_TRACE_N;
#endif
    gdb_stamp<TR>(slot, 0);
    auto sync = [&] {
        cu_grid_sync(g_gdb_bar, passed);
        gdb_stamp<TR>(slot, 1 + (int)passed);
    };
    cu_pdl_trigger();
    if (a.prefetch) gdb_prefetch<T, false>(a.in, a.s_in);
    if (a.prefetch == 2) {
        gdb_prefetch<T, false>(a.o, a.s_o);
        gdb_prefetch<T, true>(a.gu, a.s_gu);
        gdb_prefetch<T, false>(a.down, a.s_down);
    }
    // P = RMSNorm(x + resid) . W_in^T, after the kernel before (the previous block's MLP) has finished
    gdb_gemv<T, false>(a.in, a.s_in, xs, [&] {
        cu_pdl_wait();
        gdb_stamp<TR>(slot, 1);
    });
    // the token mixer: on = mixer(P), the conv state and S updated
    bool waited = false;
    auto sync_once = [&] {
        if (!waited) sync();
        waited = true;
    };
    for (unsigned vb = blockIdx.x; vb < (unsigned)a.mix_blocks; vb += gridDim.x) {
        // block 0's mixer stages into stamps 8..12 when tracing (the last part's RMSNorm: 13, below)
        gd_run<T, 1>(a.mix, vb, 0u, (int)threadIdx.x % GD_COLS, (int)threadIdx.x / GD_COLS, sync_once,
                     [&](int st) { gdb_stamp<TR>(slot, 8 + st); });
        __syncthreads(); // the next part (emulator's small grids) reuses the body's shared memory
    }
    sync_once();
    // out = on . W_o^T
    if (a.prefetch == 1) gdb_prefetch<T, false>(a.o, a.s_o);
    gdb_gemv<T, false>(a.o, a.s_o, xs, sync);
    // h = swiglu(RMSNorm(out + s_attn) . [gate; up]^T)
    if (a.prefetch == 1) gdb_prefetch<T, true>(a.gu, a.s_gu);
    gdb_gemv<T, true>(a.gu, a.s_gu, xs, sync);
    // out = h . W_down^T
    if (a.prefetch == 1) gdb_prefetch<T, false>(a.down, a.s_down);
    gdb_gemv<T, false>(a.down, a.s_down, xs, sync);
    gdb_stamp<TR>(slot, 6);
    cu_grid_exit(g_gdb_bar);
}

static const Backend *g_gdb_table[2]; // the tables this op is registered in (their other ops: the five-op form)

// blocks of the kernel that can be resident at once (GDN_CUDA_GDB_GRID caps it: the emulator's checks run small grids)
template <typename T, int MINB> static unsigned gdb_grid(size_t smem) {
    int per_sm = 0;
    const void *k = reinterpret_cast<const void *>(gdn_decode_block_kernel<T, false, MINB>);
    CU_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    CU_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, GDB_THREADS, smem));
    unsigned g = (unsigned)(per_sm > MINB ? MINB : per_sm) * (unsigned)(g_cu.sm_count > 0 ? g_cu.sm_count : 1);
    const char *e = getenv("GDN_CUDA_GDB_GRID");
#ifdef GDN_EMU
    if (!e) e = "5"; // every block's threads live at once in the emulator: a few blocks, each taking several parts
#endif
    if (e && atoi(e) > 0 && (unsigned)atoi(e) < g) g = (unsigned)atoi(e);
    return g;
}

// GDN_CUDA_GDB_TRACE's report, once, at the n-th launch (not under graph capture): per phase, the median over the
// launches recorded of block 0's time in it (us), and the median gap from one launch's end to the next one's start
static void gdb_trace_report(int n, unsigned grid) {
#ifndef GDN_EMU
    static int launches = 0;
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    CU_CHECK(cudaStreamIsCapturing(g_cu.stream, &cs));
    if (cs != cudaStreamCaptureStatusNone || ++launches != n) return;
    CU_CHECK(cudaStreamSynchronize(g_cu.stream));
    static unsigned long long tr[GDB_TRACE_N][GDB_STAMPS];
    unsigned cnt = 0;
    CU_CHECK(cudaMemcpyFromSymbol(tr, g_gdb_trace, sizeof tr));
    CU_CHECK(cudaMemcpyFromSymbol(&cnt, g_gdb_trace_n, sizeof cnt));
    const int m = cnt < GDB_TRACE_N ? (int)cnt : GDB_TRACE_N;
    // (from stamp, to stamp, name); -1: the next launch's stamp 0. The mixer's stages (8..12) are block 0's, part 0
    // of group 0, which may not be the part that finishes the group's RMSNorm: "mixer: rest" then is its barrier wait.
    static const struct { int from, to; const char *name; } ph[] = {
        {0, 1, "start->wait"}, {1, 2, "in_proj"}, {2, 3, "mixer"},  {3, 4, "o_proj"},
        {4, 5, "gate|up"},     {5, 6, "down"},    {6, -1, "gap to next"},
        {2, 8, "mixer: conv"}, {8, 9, "gates"},   {9, 10, "l2 norms"}, {10, 11, "state and o"},
        {11, 12, "arrival"},   {12, 3, "rest"}};
    fprintf(stderr, "gdn_decode_block trace: %u launches, last %d, grid %u; block 0's median us:", cnt, m, grid);
    static double d[GDB_TRACE_N];
    for (const auto &q : ph) {
        int k = 0;
        for (int i = 0; i < m; i++) {
            const unsigned long long *t = tr[(cnt - m + i) % GDB_TRACE_N];
            if (q.to >= 0) d[k++] = ((double)t[q.to] - (double)t[q.from]) / 1e3;
            else if (i + 1 < m) d[k++] = ((double)tr[(cnt - m + i + 1) % GDB_TRACE_N][0] - (double)t[q.from]) / 1e3;
        }
        for (int i = 1; i < k; i++) // insertion sort: k <= 1024, once
            for (int j = i; j > 0 && d[j - 1] > d[j]; j--) {
                const double x = d[j];
                d[j] = d[j - 1], d[j - 1] = x;
            }
        fprintf(stderr, " %s %.2f", q.name, k ? d[k / 2] : 0.0);
    }
    fprintf(stderr, "\n");
#else
    (void)n, (void)grid;
#endif
}

template <typename T> static void cu_gdn_decode_block_fwd(const GdnDecodeBlockArgs *p) {
    CU_REQUIRE(p, "gdn_decode_block_fwd", "NULL arguments");
    const GdnDecodeBlockArgs &A = *p;
    CU_REQUIRE(A.x && A.attn_norm && A.W_in && A.P && A.conv_w && A.A_log && A.dt_bias && A.o_norm && A.conv_state &&
                   A.S && A.on && A.W_o && A.out && A.mlp_resid && A.mlp_norm && A.W_gu && A.hbuf && A.W_down,
               "gdn_decode_block_fwd", "NULL pointer");
    CU_REQUIRE(A.B >= 0 && A.h > 0 && A.H > 0 && A.HV > 0 && A.HV % A.H == 0 && A.dk > 0 && A.dv > 0 && A.F > 0 &&
                   A.ldp >= 2 * A.H * A.dk + 2 * A.HV * A.dv + 2 * A.HV,
               "gdn_decode_block_fwd", "bad shape B=%d h=%d H=%d HV=%d dk=%d dv=%d F=%d ldp=%d", A.B, A.h, A.H, A.HV,
               A.dk, A.dv, A.F, A.ldp);
    CU_REQUIRE(!A.s_attn || (A.s_attn != A.x && A.s_attn != A.resid), "gdn_decode_block_fwd",
               "s_attn may not alias x or resid (other blocks still read them)");
    CU_REQUIRE(!A.s_mlp || (A.s_mlp != A.out && A.s_mlp != A.mlp_resid), "gdn_decode_block_fwd",
               "s_mlp may not alias out or mlp_resid (other blocks still read them)");
    if (A.B == 0) return;
    const Backend *be = g_gdb_table[sizeof(T) == sizeof(bf16)];
    // GDN_DECODE_BLOCK=1 runs the kernel; otherwise the five ops (faster on an H100: the file's head). Read at each
    // call: test_cuda_ops holds both forms to the same bits.
    const bool on = getenv("GDN_DECODE_BLOCK") && !strcmp(getenv("GDN_DECODE_BLOCK"), "1");
    const int Vd = A.HV * A.dv, V = 16 / (int)sizeof(T);
    int parts = 1, W = 0;
    if (A.B == 1) gd_plan(A.B, A.H, A.HV, A.dv, 0, &parts, &W);
    // what the bodies take: one row, every K staged in shared memory, 16-byte weight rows, the mixer split in parts
    const bool fits = on && A.B == 1 && gemv_fits(1, A.h) && gemv_fits(1, Vd) && gemv_fits(1, A.F) && A.h % V == 0 &&
                      Vd % V == 0 && A.F % V == 0 && cu_aligned16(A.W_in) && cu_aligned16(A.W_o) &&
                      cu_aligned16(A.W_gu) && cu_aligned16(A.W_down) &&
                      gd_fits(A.B, A.H, A.HV, A.dk, A.dv, A.K) && parts > 1;
    if (!fits) {
        gdn_decode_block_ops(be, p);
        return;
    }
    GdbArgs a = {};
    // each GEMV's arguments as its op fills them (cuda/gemv.cu)
    a.in = gemv_args(A.P, A.ldp, A.x, A.h, A.W_in, 1, A.ldp, A.h, GV_RMSNORM);
    a.in.s_out = A.s_attn, a.in.resid = A.resid, a.in.nw = A.attn_norm, a.in.eps = A.eps;
    a.o = gemv_args(A.out, A.h, A.on, Vd, A.W_o, 1, A.h, Vd, GV_PLAIN);
    a.gu = gemv_args(A.hbuf, A.F, A.out, A.h, A.W_gu, 1, 2 * A.F, A.h, GV_RMSNORM);
    a.gu.s_out = A.s_mlp, a.gu.resid = A.mlp_resid, a.gu.nw = A.mlp_norm, a.gu.eps = A.eps, a.gu.swiglu_out = 1;
    a.down = gemv_args(A.out, A.h, A.hbuf, A.F, A.W_down, 1, A.h, A.F, GV_PLAIN);
    gemv_prepare<T>(a.in), gemv_prepare<T>(a.o), gemv_prepare<T>(a.gu), gemv_prepare<T>(a.down);
    a.s_in = gemv_slices(a.in.N, a.in.K, V, 1), a.s_o = gemv_slices(a.o.N, a.o.K, V, 1);
    a.s_gu = gemv_slices(a.gu.N, a.gu.K, V, 1), a.s_down = gemv_slices(a.down.N, a.down.K, V, 1);
    a.mix = {A.on, A.P, A.conv_w, A.A_log, A.dt_bias, A.o_norm, A.conv_state, A.S, A.ids, A.eod, Vd, A.ldp, A.H, A.HV,
             A.dk, A.dv, A.K, parts, W, A.eps, 1.0f / sqrtf((float)A.dk)};
    a.mix_blocks = A.H * parts;
    // ~29 MB at the 300M (in_proj 3.2, o_proj 1, gate|up 16.8, down 8.4): within an H100's or H200's 50 MB of L2
    const size_t wbytes = ((size_t)A.ldp * A.h + (size_t)A.h * Vd + (size_t)3 * A.F * A.h) * sizeof(T);
    // No L2 prefetch by default: on an H100 (session 19) the step took 0.589 ms without it, 0.620 with each phase's
    // before the phase and 0.680 with all four first (its 29 MB, queued ahead of in_proj's own loads, made the first
    // phases wait: in_proj 8.1 -> 10.7 us, the mixer 12.1 -> 15.1). 2 only where the weights fit in L2.
    a.prefetch = 0;
    const char *pf = getenv("GDN_CUDA_GDB_PREFETCH");
    if (pf && *pf >= '0' && *pf <= '2' && !pf[1]) a.prefetch = *pf - '0';
    if (a.prefetch == 2 && wbytes > (size_t)32 << 20) a.prefetch = 1;
    const char *tr = getenv("GDN_CUDA_GDB_TRACE");
    a.trace = tr && atoi(tr) > 0;
    const int kmax = A.h > Vd ? (A.h > A.F ? A.h : A.F) : (Vd > A.F ? Vd : A.F);
    const size_t smem = (size_t)kmax * sizeof(float);
    const char *ps = getenv("GDN_CUDA_GDB_PER_SM");
    const int minb = ps && !strcmp(ps, "4") ? 4 : 2;
    static size_t grid_smem = 0; // the grid for the shared memory and form it was computed for
    static unsigned grid = 0;
    static int grid_minb = 0;
    if (!grid || grid_smem != smem || grid_minb != minb)
        grid = minb == 4 ? gdb_grid<T, 4>(smem) : gdb_grid<T, 2>(smem), grid_smem = smem, grid_minb = minb;
    // TR: the same kernel with block 0's stamps (a template argument: they cost the untraced one registers)
    if (minb == 4)
        cu_launch_coop("gdn_decode_block", a.trace ? gdn_decode_block_kernel<T, true, 4> : gdn_decode_block_kernel<T, false, 4>,
                       dim3(grid), dim3(GDB_THREADS), smem, a);
    else
        cu_launch_coop("gdn_decode_block", a.trace ? gdn_decode_block_kernel<T, true, 2> : gdn_decode_block_kernel<T, false, 2>,
                       dim3(grid), dim3(GDB_THREADS), smem, a);
    if (a.trace) gdb_trace_report(atoi(tr), grid);
}

void cu_register_gdn_decode_block(Backend *b, int use_bf16) {
    b->gdn_decode_block_fwd = use_bf16 ? cu_gdn_decode_block_fwd<bf16> : cu_gdn_decode_block_fwd<float>;
    g_gdb_table[use_bf16 ? 1 : 0] = b;
}
