// common.cuh: what every cuda/*.cu file shares: the device context, error checks, the launch helper,
// act-dtype conversions, deterministic warp/block reductions and 16-byte vector loads.
//
// Layering (as in ggml-cuda): each op file has kernels first, then launchers, then the tier-3 entry
// points that check every shape/stride/alignment assumption and die with the op's name. Entry points
// are templates on the activation type T (float for the fp32 debug mode, bf16 for mixed precision);
// each file's cu_register_*() puts the two instantiations into the two Backend tables.
//
// Rules kept everywhere: one stream (g_cu.stream), no host synchronisation inside ops, every kernel
// launch checked (cu_launch), GDN_CUDA_DEBUG=1 synchronises after every launch and names the kernel,
// no float atomics (reductions go through fixed-layout partials summed in a fixed order).
//
// Built with nvcc, or with g++ and -DGDN_EMU (cuda/emu.cuh): then kernels run on the CPU, one block at
// a time with one fiber per thread, to check index math and barriers without a GPU.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef GDN_EMU
#include "cuda/emu.cuh"
#else
#include <cuda_runtime.h>
#endif
#include <cuda_bf16.h>

#include "model/backend.h"
#include "util/common.h"

typedef __nv_bfloat16 bf16;

// ---- device-side input errors (bad token ids): first one wins, read by the host at sync points.
enum { CU_ERR_NONE = 0, CU_ERR_EMBED_ID = 1, CU_ERR_EMBED_BWD_ID = 2, CU_ERR_TARGET_ID = 3 };
struct CuDevError {
    int code;  // CU_ERR_*
    int row;   // token row
    int value; // the offending id
    int limit; // the vocabulary size
};

struct CudaCtx {
    int ready;
    int device;
    int sm_count;
    size_t smem_optin; // max dynamic shared memory per block after opt-in
    int debug;         // GDN_CUDA_DEBUG=1: synchronise and check after every launch
    int pdl;           // cu_launch_pdl launches with Programmatic Dependent Launch (GDN_CUDA_PDL=0: off)
    cudaStream_t stream;
    CuDevError *err_dev; // device memory; copied to the host and checked at sync points
};
extern CudaCtx g_cu;

// ---- host-side checks
[[noreturn]] void cu_die_api(const char *call, cudaError_t e, const char *file, int line);
#define CU_CHECK(call)                                                                                                 \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) cu_die_api(#call, e_, __FILE__, __LINE__);                                              \
    } while (0)
// Shape/pointer checks at every op entry (always on): "cuda backend, <op>: <message>".
#define CU_REQUIRE(cond, op, ...)                                                                                      \
    do {                                                                                                               \
        if (!(cond)) die("cuda backend, " op ": " __VA_ARGS__);                                                        \
    } while (0)

void cu_after_launch(const char *kernel); // cudaGetLastError; with GDN_CUDA_DEBUG also sync + checks
void cu_check_launch(const char *kernel, dim3 grid, dim3 block, size_t smem);
void cu_check_device_errors(const char *where); // reads the CuDevError record (waits for the stream); dies if set

// Stream-ordered scratch memory (cudaMallocAsync from the device pool, kept cached by the pool).
void *cu_scratch(size_t bytes, const char *op);
void cu_scratch_free(void *p);

static inline bool cu_aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }
static inline unsigned cu_blocks(size_t n, unsigned per) { return (unsigned)((n + per - 1) / per); }

// Checks a launch's configuration and opts the kernel in to more than 48 KB of dynamic shared memory when asked
// (remembered per kernel). False: nothing to launch (an empty grid).
template <typename... KArgs>
static inline bool cu_launch_prepare(const char *name, void (*kern)(KArgs...), dim3 grid, dim3 block, size_t smem) {
    if (grid.x == 0 || grid.y == 0 || grid.z == 0) return false; // nothing to do (empty shapes)
    cu_check_launch(name, grid, block, smem);
    if (smem > 0) {
        // Opt in to this much dynamic shared memory (remembered per kernel): by default a kernel gets at most 48 KB
        // less its static shared memory, so static + dynamic past 48 KB needs it even when smem alone does not
        static const void *seen[256];
        static size_t seen_bytes[256];
        const void *key = (const void *)kern;
        int slot = -1;
        for (int i = 0; i < 256; i++)
            if (seen[i] == key || !seen[i]) {
                slot = i;
                break;
            }
        if (slot < 0 || seen[slot] != key || seen_bytes[slot] < smem) {
            CU_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void *>(kern),
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
            if (slot >= 0) seen[slot] = key, seen_bytes[slot] = smem;
        }
    }
    return true;
}

// Launches kern<<<grid, block, smem, g_cu.stream>>>(args...) after checking the configuration, then
// checks the launch. `name` is what errors and GDN_CUDA_DEBUG report.
template <typename... KArgs, typename... Args>
static inline void cu_launch(const char *name, void (*kern)(KArgs...), dim3 grid, dim3 block, size_t smem,
                             Args... args) {
    if (!cu_launch_prepare(name, kern, grid, block, smem)) return;
#ifdef GDN_EMU
    emu::launch(name, grid, block, smem, [&] { kern(args...); });
#else
    kern<<<grid, block, smem, g_cu.stream>>>(args...);
#endif
    cu_after_launch(name);
}

// ---- Programmatic Dependent Launch (the decode step's chain of small kernels). A kernel launched by cu_launch_pdl
// may start while the kernel before it in the stream is still finishing: its blocks can issue the loads that do not
// depend on that kernel (weights; states no kernel of the step has written yet) during the other's tail, instead of
// after a full drain and launch. Such a kernel must call cu_pdl_wait() before it reads what an earlier kernel of the
// stream wrote, and before any store (the wait returns once the kernels before it have completed and their memory
// is visible); cu_pdl_trigger() lets the next kernel start launching (else it may once this one's blocks exit).
__device__ __forceinline__ void cu_pdl_wait() {
#if !defined(GDN_EMU) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void cu_pdl_trigger() {
#if !defined(GDN_EMU) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// A device function kept out of line (its caller's code is then compiled as if it were not there).
#ifdef GDN_EMU
#define CU_NOINLINE __attribute__((noinline))
#else
#define CU_NOINLINE __noinline__
#endif
// Brings the 128-byte line holding p into L2 (no register result: nothing waits for it).
__device__ __forceinline__ void cu_prefetch_l2(const void *p) {
#if !defined(GDN_EMU) && defined(__CUDA_ARCH__)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#else
    (void)p;
#endif
}

// cu_launch with the Programmatic Dependent Launch attribute (when g_cu.pdl; the kernel follows the rules above).
template <typename... KArgs, typename... Args>
static inline void cu_launch_pdl(const char *name, void (*kern)(KArgs...), dim3 grid, dim3 block, size_t smem,
                                 Args... args) {
#ifdef GDN_EMU
    cu_launch(name, kern, grid, block, smem, args...);
#else
    if (!g_cu.pdl) {
        cu_launch(name, kern, grid, block, smem, args...);
        return;
    }
    if (!cu_launch_prepare(name, kern, grid, block, smem)) return;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = g_cu.stream;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at, cfg.numAttrs = 1;
    cudaError_t e = cudaLaunchKernelEx(&cfg, kern, (KArgs)args...);
    if (e != cudaSuccess) die("cuda backend: launching %s (programmatic dependent launch) failed: %s", name, cudaGetErrorString(e));
    cu_after_launch(name);
#endif
}

// ---- Kernels whose blocks wait for each other (cuda/gdn_decode_block.cu). Such a kernel needs all its blocks
// resident at once: its grid is at most the occupancy's blocks per multiprocessor times the multiprocessors (the
// caller sees to it: gdn_decode_block.cu's gdb_grid). It is launched as cu_launch_pdl launches (no cooperative attribute: with the
// grid within one wave, the blocks not yet resident start as the kernel before drains, which does not wait on them;
// the next kernel starts only after every block of this one has run cu_pdl_trigger), and in the emulator with every
// block live (emu::launch_coop). bar: two zeroed counters of the kernel's own; cu_grid_exit zeroes them again.
template <typename... KArgs, typename... Args>
static inline void cu_launch_coop(const char *name, void (*kern)(KArgs...), dim3 grid, dim3 block, size_t smem,
                                  Args... args) {
#ifdef GDN_EMU
    if (!cu_launch_prepare(name, kern, grid, block, smem)) return;
    emu::launch_coop(name, grid, block, smem, [&] { kern(args...); });
    cu_after_launch(name);
#else
    cu_launch_pdl(name, kern, grid, block, smem, args...);
#endif
}
// The barrier: every block's threads wait until all blocks of the grid have arrived; memory written before it by
// any block is visible after it (the fence and acquire of cooperative groups' grid sync). passed: the barriers this
// block has passed (block-uniform), which sets the arrival count to wait for. A wait past 2 s traps: if the blocks
// were ever not all resident (the grid past what the device holds at once), the kernel fails with a launch error at
// the next synchronisation instead of hanging the process.
__device__ __forceinline__ void cu_grid_sync(unsigned *bar, unsigned &passed) {
    passed++;
#ifdef GDN_EMU
    (void)bar;
    emu::grid_sync();
#else
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
        const unsigned target = passed * gridDim.x * gridDim.y * gridDim.z;
        __threadfence();
        atomicAdd(bar, 1u);
        unsigned v;
        unsigned long long t0, t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
        for (;;) {
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(bar) : "memory");
            if (v >= target) break;
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
            if (t - t0 > 2000000000ull) __trap();
        }
        __threadfence();
    }
    __syncthreads();
#endif
}
// At the kernel's end: the last block out zeroes the counters for the next launch (every block has passed every
// barrier by then).
__device__ __forceinline__ void cu_grid_exit(unsigned *bar) {
#ifdef GDN_EMU
    (void)bar;
#else
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
        __threadfence();
        if (atomicAdd(bar + 1, 1u) == gridDim.x * gridDim.y * gridDim.z - 1) {
            bar[0] = 0;
            bar[1] = 0;
            __threadfence();
        }
    }
#endif
}

// Whether the device is an sm_90 (Hopper) one: the kernels built on hopper.cuh (wgmma, TMA) run only there
// (cuda/gemm_wg.cu; the emulator says yes).
bool cu_sm90();

// ---- GEMM (cuda/matmul.cu), column-major cuBLASLt semantics:
// C[m,n] = op(A) op(B) + beta C, op(A) = A^T if ta (A stored k x m, lda >= k) else A (m x k, lda >= m);
// op(B) = B^T if tb (B stored n x k) else B (k x n). A and B have type ab (act), C has type c.
// fp32 accumulation always; fp32 inputs use CUBLAS_COMPUTE_32F (no TF32).
void cu_gemm(const char *op, bool ta, bool tb, int m, int n, int k, const void *A, long lda, const void *B, long ldb,
             void *C, long ldc, cudaDataType_t ab, cudaDataType_t c, float beta);
template <typename T> static inline cudaDataType_t cu_dtype();
template <> inline cudaDataType_t cu_dtype<float>() { return CUDA_R_32F; }
template <> inline cudaDataType_t cu_dtype<bf16>() { return CUDA_R_16BF; }

// dst[c] += sum_{p < P} part[p * W + c] (p in order), c < W. The second pass of every deterministic
// reduction over tokens (cuda/elementwise.cu).
void cu_add_partials(float *dst, const float *part, int P, int W, const char *op);

// ---- per-family registration into a Backend table (bf16: act type is bf16, else fp32)
void cu_register_matmul(Backend *b, int use_bf16);
void cu_register_norms(Backend *b, int use_bf16);
void cu_register_conv(Backend *b, int use_bf16);
void cu_register_doc_starts(Backend *b);
void cu_register_gate(Backend *b, int use_bf16);
void cu_register_delta_rule_fwd(Backend *b, int use_bf16);
void cu_register_delta_rule_bwd(Backend *b, int use_bf16);
void cu_register_lmhead(Backend *b, int use_bf16);
void cu_register_elementwise(Backend *b, int use_bf16);
void cu_register_adamw(Backend *b, int use_bf16);
void cu_register_attention(Backend *b, int use_bf16); // hybrid attention blocks (cuda/attention*.cu)
void cu_register_gdn_decode(Backend *b, int use_bf16); // gdn_decode.cu: the fused decode token mixer
void cu_register_gemv(Backend *b, int use_bf16);       // gemv.cu: small-M GEMMs with the norm / SwiGLU fused
void cu_register_gdn_decode_block(Backend *b, int use_bf16); // gdn_decode_block.cu: a GDN block's decode step
void cu_register_gemm_wg(Backend *b, int use_bf16);    // gemm_wg.cu: matmul_swiglu_fwd (after gemv)
void cu_register_collectives(Backend *b); // collective.cu: NCCL (refusing stubs in the emulator)
int cu_matmul_init(char *err, size_t errlen);

// =====================================================================================================
// Device helpers

// act <-> fp32. bf16 conversion is round-to-nearest-even, like f32_to_bf16 in util/common.h.
__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(bf16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ bf16 from_f<bf16>(float x) { return __float2bfloat16_rn(x); }
// The value an fp32 result takes once stored in act dtype (identity for fp32): FLA's bf16 storage points.
template <typename T> __device__ __forceinline__ float rnd(float x) { return to_f(from_f<T>(x)); }

__device__ __forceinline__ float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }
// silu(g) * u given s = sigmoid(g): one expression for swiglu_fwd, the backward's recomputation and the fused GEMM
// epilogue (gemm_wg.cu), so all give the same bits
__device__ __forceinline__ float swiglu_f(float g, float s, float u) { return g * s * u; }
// its gradients given d = dL/dy and s = sigmoid(g): one expression for swiglu_bwd and the fused down-projection dx GEMM
__device__ __forceinline__ float swiglu_dg(float d, float g, float s, float u) { return d * u * s * (1.0f + g * (1.0f - s)); }
__device__ __forceinline__ float swiglu_du(float d, float g, float s) { return d * g * s; }

// Orders the shared-memory accesses of a warp's lanes (the emulator schedules lanes as fibers).
__device__ __forceinline__ void cu_syncwarp() {
#ifdef GDN_EMU
    emu::syncwarp();
#else
    __syncwarp();
#endif
}

// Sum over the 32 lanes; the xor butterfly gives every lane the same bits (fp add is commutative).
template <typename F> __device__ __forceinline__ F warp_sum(F v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
// Sum over each aligned group of L lanes (L a power of two <= 32): lanes l and l^(L/2), ..., l^1, so every
// lane of a group gets the same bits.
template <int L> __device__ __forceinline__ float lane_group_sum(float v) {
#pragma unroll
    for (int o = L / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
// Sum over the 16 lanes of a half warp (lanes l and l^8, l^4, l^2, l^1).
__device__ __forceinline__ float half_warp_sum(float v) { return lane_group_sum<16>(v); }

// Block-wide sum (blockDim.x a multiple of 32, all threads call it). Deterministic: warp butterflies,
// then every thread adds the warp totals in warp order. Returns the total to every thread.
template <typename F> __device__ __forceinline__ F block_sum(F v) {
    __shared__ F cu_red_sum[32];
    v = warp_sum(v);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads(); // a previous call's readers are done with cu_red_sum
    if (lane == 0) cu_red_sum[warp] = v;
    __syncthreads();
    F t = 0;
    for (int i = 0; i < nw; i++) t += cu_red_sum[i];
    return t;
}
__device__ __forceinline__ float block_max(float v) {
    __shared__ float cu_red_max[32];
    v = warp_max(v);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads();
    if (lane == 0) cu_red_max[warp] = v;
    __syncthreads();
    float t = cu_red_max[0];
    for (int i = 1; i < nw; i++) t = fmaxf(t, cu_red_max[i]);
    return t;
}

// V consecutive act values <-> fp32. V*sizeof(T) == 16 uses one 16-byte access (caller checks
// alignment on the host); V == 1 is the scalar fallback.
// The V = 16 / sizeof(T) act values of one 16-byte word already loaded (loads issued ahead of their use).
// (raw by value: a reference to global memory would let the compiler read the values one by one.)
template <typename T, int V> __device__ __forceinline__ void unpack_vec(float (&out)[V], const uint4 raw) {
    static_assert(V * sizeof(T) == 16, "16-byte vectors only");
    const T *t = reinterpret_cast<const T *>(&raw);
#pragma unroll
    for (int i = 0; i < V; i++) out[i] = to_f(t[i]);
}
template <typename T, int V> __device__ __forceinline__ void load_vec(float (&out)[V], const T *p) {
    if constexpr (V == 1) out[0] = to_f(p[0]);
    else {
        const uint4 raw = *reinterpret_cast<const uint4 *>(p); // one 16-byte load
        unpack_vec<T, V>(out, raw);
    }
}
template <typename T, int V> __device__ __forceinline__ void store_vec(T *p, const float (&in)[V]) {
    if constexpr (V == 1) {
        p[0] = from_f<T>(in[0]);
    } else {
        static_assert(V * sizeof(T) == 16, "16-byte vectors only");
        uint4 raw;
        T *t = reinterpret_cast<T *>(&raw);
#pragma unroll
        for (int i = 0; i < V; i++) t[i] = from_f<T>(in[i]);
        *reinterpret_cast<uint4 *>(p) = raw;
    }
}
// RMSNorm's first pass over one row of K values, V per access (16-byte vectors, or V = 1): s = x (+ resid) into the
// fp32 row (shared memory), s in act dtype to s_out when it is not NULL. Returns this thread's sum of s^2: thread t
// takes the runs of V from t V on, stride blockDim.x V, the order rmsnorm_fwd and the GEMV's staging share.
template <typename T, int V>
__device__ __forceinline__ float rmsnorm_load_row(float *row, const T *x, const T *resid, T *s_out, int K) {
    float ss = 0.0f;
    for (int c = threadIdx.x * V; c < K; c += blockDim.x * V) {
        float s[V];
        load_vec<T, V>(s, x + c);
        if (resid) {
            float r[V];
            load_vec<T, V>(r, resid + c);
#pragma unroll
            for (int i = 0; i < V; i++) s[i] += r[i];
        }
#pragma unroll
        for (int i = 0; i < V; i++) {
            row[c + i] = s[i];
            ss += s[i] * s[i];
        }
        if (s_out) store_vec<T, V>(s_out + c, s);
    }
    return ss;
}
// Two consecutive act values (4 bytes in bf16, 8 in fp32); the caller checks 2*sizeof(T) alignment.
template <typename T> struct alignas(2 * sizeof(T)) Pair2 {
    T a, b;
};
template <typename T> __device__ __forceinline__ void load2(float &x0, float &x1, const T *p) {
    const Pair2<T> v = *reinterpret_cast<const Pair2<T> *>(p);
    x0 = to_f(v.a);
    x1 = to_f(v.b);
}
template <typename T> __device__ __forceinline__ void store2(T *p, float x0, float x1) {
    Pair2<T> v;
    v.a = from_f<T>(x0);
    v.b = from_f<T>(x1);
    *reinterpret_cast<Pair2<T> *>(p) = v;
}
// Four consecutive act values in one store (8 bytes in bf16, 16 in fp32); the caller checks 4*sizeof(T) alignment.
template <typename T> struct alignas(4 * sizeof(T)) Quad4 {
    T v[4];
};
template <typename T> __device__ __forceinline__ void store4(T *p, const float (&x)[4]) {
    Quad4<T> q;
#pragma unroll
    for (int i = 0; i < 4; i++) q.v[i] = from_f<T>(x[i]);
    *reinterpret_cast<Quad4<T> *>(p) = q;
}
static inline bool cu_aligned(const void *p, size_t bytes) { return ((uintptr_t)p % bytes) == 0; }

template <typename T> struct Vec16 {
    static constexpr int n = 16 / (int)sizeof(T); // 4 floats or 8 bf16
};

// Records the first device-side input error (host reads it after the next sync).
__device__ __forceinline__ void dev_report(CuDevError *e, int code, int row, int value, int limit) {
    if (atomicCAS(&e->code, 0, code) == 0) {
        e->row = row;
        e->value = value;
        e->limit = limit;
    }
}

// Dynamic shared memory as an array of `type` named `name`.
#ifdef GDN_EMU
#define CU_DYN_SMEM(type, name) type *name = reinterpret_cast<type *>(emu::dyn_smem())
#else
#define CU_DYN_SMEM(type, name)                                                                                        \
    extern __shared__ __align__(16) unsigned char cu_dyn_smem_raw[];                                                   \
    type *name = reinterpret_cast<type *>(cu_dyn_smem_raw)
#endif
