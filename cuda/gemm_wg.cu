// gemm_wg.cu: y[M, N] = x[M, K] W[N, K]^T (bf16 inputs, fp32 accumulation, bf16 y) on sm_90's warpgroup MMAs,
// the first of our own GEMMs (notes/PERF.md, "the road to 1.25x": the lm head's statistics, SwiGLU and RMSNorm
// need GEMMs whose prologue and epilogue are ours; cuBLASLt has none of those epilogues).
//
// Structure (as CUTLASS's sm90 "warp-specialized cooperative" kernels): a persistent grid, one block per SM of
// 3 warpgroups. Warpgroup 0 is the producer: one thread loads each 64-wide K slice of the block's x tile
// [128 x 64] and W tile [256 x 64] by TMA into a ring of 4 stages (mbarrier full[s] counts the bytes), after the
// consumers have released the stage (empty[s]). Warpgroups 1 and 2 are the consumers: each owns 64 rows of the
// 128 x 256 tile and runs 4 wgmma m64n256k16 per stage (accumulators: 128 fp32 a thread), keeping one stage's
// MMAs in flight while it waits for the next. The epilogue rounds to bf16 and goes through a per-warp shared
// buffer so y is written in 16-byte row segments; meanwhile the producer already fills the ring for the block's
// next tile. Tiles are visited in groups of GROUP_M row tiles, column tiles within a group, so the blocks
// running at once share their x and W tiles in L2.
//
// Numerics: each y element is one fp32 sum of K bf16 products (the tensor core's order), rounded once to bf16;
// with `accumulate`, y_old is added to the fp32 sum before that rounding. Not bit-identical to cuBLASLt's
// (another summation order), within the op cases' GEMM tolerance of the CPU twin.
#include "cuda/gemm_wg.cuh"
#include "cuda/hopper.cuh"

#include <stdlib.h>

#ifndef GDN_EMU
#include <cudaTypedefs.h> // PFN_cuTensorMapEncodeTiled
#endif

enum {
    WG_BM = 128,                    // rows of x (and y) per tile: 64 per consumer warpgroup
    WG_BN = 256,                    // rows of W (columns of y) per tile
    WG_BK = 64,                     // K per stage: 128 bytes of bf16, the 128-byte swizzle's row
    WG_STAGES = 4,                  // ring depth
    WG_THREADS = 384,               // producer + 2 consumer warpgroups
    WG_A_BYTES = WG_BM * WG_BK * 2, // 16 KB
    WG_B_BYTES = WG_BN * WG_BK * 2, // 32 KB
    WG_STAGE_BYTES = WG_A_BYTES + WG_B_BYTES,
    WG_EPI_BYTES = 16 * WG_BN / 2 * 2, // per consumer warp: 16 rows x 128 columns of bf16 (half the tile's width)
    WG_GROUP_M = 8,
    // ring (1024-aligned) + 8 epilogue buffers + 2 x STAGES mbarriers, + 1023 for aligning the ring
    WG_SMEM = 1023 + WG_STAGES * WG_STAGE_BYTES + 8 * WG_EPI_BYTES + 2 * WG_STAGES * 8,
};

struct WgGemmArgs {
    CUtensorMap tm_x, tm_w; // x [M][K] and W [N][K], boxes of 64 x 128 and 64 x 256
    bf16 *y;
    int ldy, M, N, K, accumulate;
};

// tile t -> (row tile, column tile): groups of GROUP_M row tiles, column-major inside a group
__device__ __forceinline__ void wg_tile_coords(int t, int tiles_m, int tiles_n, int &tm, int &tn) {
    const int per_group = WG_GROUP_M * tiles_n, g = t / per_group, first = g * WG_GROUP_M;
    const int rows = min(tiles_m - first, (int)WG_GROUP_M), r = t % per_group;
    tm = first + r % rows;
    tn = r / rows;
}

// The consumer warp's 16 x 128 half-tile (columns 128 h .. 128 h + 127 of its rows) from the accumulators into
// its shared buffer (16-byte units swizzled by row: conflict-free fragment writes and row reads), then out to y.
__device__ __forceinline__ void wg_store_half(const WgGemmArgs &a, const float (&acc)[128], int h, bf16 *buf,
                                             int row0, int col0) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int jj = 0; jj < 16; jj++) { // n8 tiles of this half: unit jj of the row (8 columns = 16 bytes)
        const int j = 16 * h + jj;
#pragma unroll
        for (int half = 0; half < 2; half++) { // rows g and g + 8
            const int r = g + 8 * half;
            bf16 *d = buf + r * 128 + ((jj ^ (r & 7)) * 8) + 2 * t;
            d[0] = __float2bfloat16_rn(acc[4 * j + 2 * half]);
            d[1] = __float2bfloat16_rn(acc[4 * j + 2 * half + 1]);
        }
    }
    cu_syncwarp();
    // 16 rows x 16 units: lane reads unit (lane % 16) of rows 2 i + lane / 16
    const int u = lane & 15;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const int r = 2 * i + (lane >> 4), row = row0 + r, col = col0 + 128 * h + 8 * u;
        const uint4 v = *reinterpret_cast<const uint4 *>(buf + r * 128 + ((u ^ (r & 7)) * 8));
        if (row >= a.M || col >= a.N) continue;
        bf16 *yp = a.y + (size_t)row * a.ldy + col;
        if (col + 8 <= a.N && !a.accumulate) {
            *reinterpret_cast<uint4 *>(yp) = v;
            continue;
        }
        const bf16 *vb = reinterpret_cast<const bf16 *>(&v);
        for (int e = 0; e < 8 && col + e < a.N; e++) yp[e] = vb[e];
    }
    cu_syncwarp(); // the buffer is rewritten by the next half
}

// accumulate: y_old + acc in fp32, one rounding (the half-tile is written from fp32 values, not the staged bf16)
__device__ __forceinline__ void wg_store_acc(const WgGemmArgs &a, const float (&acc)[128], int row0, int col0) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int j = 0; j < 32; j++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int row = row0 + g + 8 * (i >> 1), col = col0 + 8 * j + 2 * t + (i & 1);
            if (row < a.M && col < a.N) {
                bf16 *yp = a.y + (size_t)row * a.ldy + col;
                *yp = __float2bfloat16_rn(acc[4 * j + i] + __bfloat162float(*yp));
            }
        }
}

__global__ void __launch_bounds__(WG_THREADS, 1) gemm_wg_kernel(const __grid_constant__ WgGemmArgs a) {
    CU_DYN_SMEM(unsigned char, raw);
    unsigned char *ring = raw + ((1024u - (smem_u32(raw) & 1023u)) & 1023u);
    bf16 *epi = reinterpret_cast<bf16 *>(ring + WG_STAGES * WG_STAGE_BYTES);
    uint64_t *full = reinterpret_cast<uint64_t *>(ring + WG_STAGES * WG_STAGE_BYTES + 8 * WG_EPI_BYTES);
    uint64_t *empty = full + WG_STAGES;
    const int wg = threadIdx.x / 128;
    const int tiles_m = (a.M + WG_BM - 1) / WG_BM, tiles_n = (a.N + WG_BN - 1) / WG_BN, tiles = tiles_m * tiles_n;
    const int kt_n = (a.K + WG_BK - 1) / WG_BK;
    if (threadIdx.x == 0) {
        for (int s = 0; s < WG_STAGES; s++) {
            mbar_init(&full[s], 1);  // the producer's arrival (+ the TMA bytes)
            mbar_init(&empty[s], 2); // one arrival per consumer warpgroup
        }
        mbar_fence_init();
    }
    __syncthreads();

    if (wg == 0) { // producer
        wg_reg_dealloc<40>();
        if (threadIdx.x == 0) {
            tma_prefetch_map(&a.tm_x), tma_prefetch_map(&a.tm_w);
            int it = 0; // stage uses so far: stage it % STAGES, its round it / STAGES
            for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
                int tm, tn;
                wg_tile_coords(t, tiles_m, tiles_n, tm, tn);
                for (int kt = 0; kt < kt_n; kt++, it++) {
                    const int s = it % WG_STAGES;
                    mbar_wait(&empty[s], ((it / WG_STAGES) & 1) ^ 1); // a fresh barrier passes parity 1
                    unsigned char *st = ring + s * WG_STAGE_BYTES;
                    mbar_arrive_expect_tx(&full[s], WG_STAGE_BYTES);
                    tma_load_2d(st, &a.tm_x, kt * WG_BK, tm * WG_BM, &full[s]);
                    tma_load_2d(st + WG_A_BYTES, &a.tm_w, kt * WG_BK, tn * WG_BN, &full[s]);
                }
            }
        }
        return;
    }
    wg_reg_alloc<232>();
    const int c = wg - 1, warp = (threadIdx.x >> 5) & 3;
    bf16 *buf = epi + (size_t)(4 * c + warp) * (WG_EPI_BYTES / 2);
    float acc[128];
    int it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int tm, tn;
        wg_tile_coords(t, tiles_m, tiles_n, tm, tn);
        for (int kt = 0; kt < kt_n; kt++, it++) {
            const int s = it % WG_STAGES;
            mbar_wait(&full[s], (it / WG_STAGES) & 1);
            const uint32_t xa = smem_u32(ring + s * WG_STAGE_BYTES + c * (WG_A_BYTES / 2));
            const uint32_t wa = smem_u32(ring + s * WG_STAGE_BYTES + WG_A_BYTES);
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < WG_BK / 16; kk++)
                wgmma_m64n256k16(acc, wg_desc_sw128(xa + 32 * kk), wg_desc_sw128(wa + 32 * kk), kt > 0 || kk > 0);
            wg_commit();
            // the previous stage's MMAs are done once at most this one's group is pending: release that stage
            wg_wait<1>();
            wg_fence_regs(acc);
            if (kt > 0 && (threadIdx.x & 127) == 0) mbar_arrive(&empty[(it - 1) % WG_STAGES]);
        }
        wg_wait<0>();
        wg_fence_regs(acc);
        if ((threadIdx.x & 127) == 0) mbar_arrive(&empty[(it - 1) % WG_STAGES]);
        const int row0 = tm * WG_BM + 64 * c + 16 * warp, col0 = tn * WG_BN;
        if (a.accumulate) {
            wg_store_acc(a, acc, row0, col0);
        } else {
            wg_store_half(a, acc, 0, buf, row0, col0);
            wg_store_half(a, acc, 1, buf, row0, col0);
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// host side

void cu_tmap_2d_bf16(CUtensorMap *map, const void *base, uint64_t inner, uint64_t outer, uint64_t row_bytes,
                     uint32_t box_inner, uint32_t box_outer, const char *op) {
    CU_REQUIRE(((uintptr_t)base & 15u) == 0 && row_bytes % 16 == 0 && box_inner * 2 == 128 && box_outer <= 256,
               "tensor map", "%s: base %p (16-byte aligned?), row stride %llu bytes (a multiple of 16?), box %u x %u "
               "(64 wide, at most 256 rows?)",
               op, base, (unsigned long long)row_bytes, box_inner, box_outer);
#ifdef GDN_EMU
    emu::tmap_encode_2d(map, base, inner, outer, row_bytes, box_inner, box_outer);
#else
    static PFN_cuTensorMapEncodeTiled_v12000 encode = NULL;
    if (!encode) {
        void *fn = NULL;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        CU_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
        if (q != cudaDriverEntryPointSuccess || !fn)
            die("cuda backend, %s: the driver has no cuTensorMapEncodeTiled (query result %d)", op, (int)q);
        encode = (PFN_cuTensorMapEncodeTiled_v12000)fn;
    }
    const cuuint64_t dims[2] = {inner, outer}, strides[1] = {row_bytes};
    const cuuint32_t box[2] = {box_inner, box_outer}, elem_strides[2] = {1, 1};
    const CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void *>(base), dims, strides, box,
                              elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        die("cuda backend, %s: cuTensorMapEncodeTiled failed (CUresult %d) for a [%llu x %llu] bf16 tensor at %p, "
            "row stride %llu bytes, box %u x %u",
            op, (int)r, (unsigned long long)outer, (unsigned long long)inner, base, (unsigned long long)row_bytes,
            box_inner, box_outer);
#endif
}

// Whether this GEMM can run here: sm_90, 16-byte aligned x, W, y and row strides (TMA and the 16-byte stores).
bool cu_gemm_wg_fits(const void *y, int ldy, const void *x, int ldx, const void *W, int ldw) {
    static int sm90 = -1;
    if (sm90 < 0) {
#ifdef GDN_EMU
        sm90 = 1;
#else
        int major = 0;
        CU_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, g_cu.device));
        sm90 = major == 9;
#endif
    }
    return sm90 && cu_aligned16(y) && cu_aligned16(x) && cu_aligned16(W) && ldy % 8 == 0 && ldx % 8 == 0 &&
           ldw % 8 == 0;
}

// y[M, N] (row stride ldy) = x[M, K] (ldx) W[N, K]^T (ldw) (+ y with accumulate); see the top of the file.
void cu_gemm_wg(const char *op, bf16 *y, int ldy, const bf16 *x, int ldx, const bf16 *W, int ldw, int M, int N, int K,
                int accumulate) {
    CU_REQUIRE(M > 0 && N > 0 && K > 0, "gemm_wg", "%s: empty GEMM M=%d N=%d K=%d", op, M, N, K);
    CU_REQUIRE(cu_gemm_wg_fits(y, ldy, x, ldx, W, ldw), "gemm_wg",
               "%s: needs sm_90 and 16-byte aligned y, x, W with row strides multiple of 8 (ldy=%d ldx=%d ldw=%d)", op,
               ldy, ldx, ldw);
    WgGemmArgs a;
    memset(&a, 0, sizeof a);
    cu_tmap_2d_bf16(&a.tm_x, x, (uint64_t)K, (uint64_t)M, (uint64_t)ldx * 2, WG_BK, WG_BM, op);
    cu_tmap_2d_bf16(&a.tm_w, W, (uint64_t)K, (uint64_t)N, (uint64_t)ldw * 2, WG_BK, WG_BN, op);
    a.y = y, a.ldy = ldy, a.M = M, a.N = N, a.K = K, a.accumulate = accumulate;
    const int tiles = ((M + WG_BM - 1) / WG_BM) * ((N + WG_BN - 1) / WG_BN);
    const int sms = g_cu.sm_count > 0 ? g_cu.sm_count : 1;
    cu_launch("gemm_wg", gemm_wg_kernel, dim3((unsigned)(tiles < sms ? tiles : sms)), dim3(WG_THREADS), (size_t)WG_SMEM, a);
}
