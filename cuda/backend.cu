// backend.cu: the CUDA backend's device context (one stream, cuBLASLt via matmul.cu, a device-side
// record of bad token ids), its memory functions, act <-> fp32 conversion, and backend_cuda(), which
// fills one Backend table per activation dtype (fp32 debug mode, bf16 mixed precision) from the op
// families' files.
#include <stdlib.h>

#include "cuda/common.cuh"

CudaCtx g_cu;

// ---------------------------------------------------------------------------------------------------
// errors

void cu_die_api(const char *call, cudaError_t e, const char *file, int line) {
    die("cuda backend: %s failed: %s (%s:%d)%s", call, cudaGetErrorString(e), file, line,
        g_cu.debug ? "" : "; an asynchronous error may come from an earlier op: rerun with GDN_CUDA_DEBUG=1");
}

void cu_check_device_errors(const char *where) {
    if (!g_cu.err_dev) return;
    CuDevError e;
    CU_CHECK(cudaMemcpyAsync(&e, g_cu.err_dev, sizeof e, cudaMemcpyDeviceToHost, g_cu.stream));
    CU_CHECK(cudaStreamSynchronize(g_cu.stream));
    if (!e.code) return;
    const char *what = e.code == CU_ERR_EMBED_ID       ? "embedding_fwd: token id"
                       : e.code == CU_ERR_EMBED_BWD_ID ? "embedding_bwd: token id"
                       : e.code == CU_ERR_TARGET_ID    ? "lmhead_ce: target id"
                                                       : "unknown error";
    die("cuda backend, %s %d at row %d is outside the vocabulary [0, %d) (found at %s)", what, e.value, e.row, e.limit,
        where);
}

void cu_check_launch(const char *kernel, dim3 grid, dim3 block, size_t smem) {
    unsigned threads = block.x * block.y * block.z;
    if (grid.y > 65535 || grid.z > 65535 || threads == 0 || threads > 1024 || smem > g_cu.smem_optin)
        die("cuda backend: bad launch of %s: grid (%u,%u,%u), block (%u,%u,%u), %zu bytes of shared memory "
            "(limit %zu): the shapes are too large for this kernel",
            kernel, grid.x, grid.y, grid.z, block.x, block.y, block.z, smem, g_cu.smem_optin);
}

void cu_after_launch(const char *kernel) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) die("cuda backend: launching %s failed: %s", kernel, cudaGetErrorString(e));
    if (g_cu.debug) {
        e = cudaStreamSynchronize(g_cu.stream);
        if (e != cudaSuccess)
            die("cuda backend: kernel %s failed: %s (GDN_CUDA_DEBUG=1 synchronised right after it)", kernel,
                cudaGetErrorString(e));
        cu_check_device_errors(kernel);
    }
}

// ---------------------------------------------------------------------------------------------------
// memory

static void cu_die_oom(size_t bytes, const char *what) {
    size_t free_b = 0, total_b = 0;
    cudaGetLastError();
    cudaMemGetInfo(&free_b, &total_b);
    die("cuda backend: out of GPU memory allocating %zu bytes (%.2f GiB) for %s; %.2f GiB free of %.2f GiB. "
        "Lower micro_batch_size or seq_length",
        bytes, bytes / 1073741824.0, what, free_b / 1073741824.0, total_b / 1073741824.0);
}

// Returns cached scratch to the device so a cudaMalloc can use it (the pool keeps freed blocks).
static void cu_trim_pool(void) {
    cudaMemPool_t pool;
    cudaGetLastError();
    if (cudaDeviceGetDefaultMemPool(&pool, g_cu.device) == cudaSuccess) {
        cudaStreamSynchronize(g_cu.stream);
        cudaMemPoolTrimTo(pool, 0);
    }
    cudaGetLastError();
}

// mem_stats: the bytes of the live buffers and scratch, each pointer's size in an open-addressing table (linear
// probing, backward-shift deletion; one host thread allocates), and the most they have been.
struct LiveBuf {
    void *p;
    size_t n;
};
static LiveBuf *g_live;
static size_t g_live_cap, g_live_count, g_bytes_now, g_bytes_peak;
static size_t live_slot(const void *p) { return ((uintptr_t)p >> 8) * 0x9E3779B97F4A7C15ull >> 20 & (g_live_cap - 1); }
static void live_put(void *p, size_t n) { // into the first free slot of p's probe run (the table has room)
    size_t i = live_slot(p);
    while (g_live[i].p) i = (i + 1) & (g_live_cap - 1);
    g_live[i].p = p, g_live[i].n = n;
}
static void live_add(void *p, size_t n) {
    if (2 * (g_live_count + 1) > g_live_cap) { // grow (rehash) at half full
        LiveBuf *old = g_live;
        const size_t old_cap = g_live_cap;
        g_live_cap = old_cap ? 2 * old_cap : 256;
        g_live = (LiveBuf *)xcalloc(g_live_cap, sizeof *g_live);
        for (size_t i = 0; i < old_cap; i++)
            if (old[i].p) live_put(old[i].p, old[i].n);
        free(old);
    }
    live_put(p, n);
    g_live_count++;
    g_bytes_now += n;
    if (g_bytes_now > g_bytes_peak) g_bytes_peak = g_bytes_now;
}
static void live_remove(void *p) {
    if (!g_live_cap) return;
    size_t i = live_slot(p);
    while (g_live[i].p && g_live[i].p != p) i = (i + 1) & (g_live_cap - 1);
    if (!g_live[i].p) return; // not ours (e.g. freed twice): nothing to count
    g_bytes_now -= g_live[i].n;
    g_live_count--;
    // backward shift: move later entries of the probe run into the hole where their home slot allows
    size_t hole = i;
    for (size_t j = (i + 1) & (g_live_cap - 1); g_live[j].p; j = (j + 1) & (g_live_cap - 1)) {
        const size_t home = live_slot(g_live[j].p);
        if (((j - home) & (g_live_cap - 1)) >= ((j - hole) & (g_live_cap - 1))) {
            g_live[hole] = g_live[j];
            hole = j;
        }
    }
    g_live[hole].p = NULL, g_live[hole].n = 0;
}

static void *cu_alloc(size_t bytes) {
    size_t n = bytes ? bytes : 1;
    void *p = NULL;
    if (cudaMalloc(&p, n) != cudaSuccess) {
        cu_trim_pool();
        if (cudaMalloc(&p, n) != cudaSuccess) cu_die_oom(bytes, "a backend buffer");
    }
    CU_CHECK(cudaMemsetAsync(p, 0, n, g_cu.stream));
    live_add(p, n);
    return p;
}

static void cu_free(void *p) {
    if (!p) return;
    CU_CHECK(cudaStreamSynchronize(g_cu.stream)); // the stream may still use p
    live_remove(p);
    CU_CHECK(cudaFree(p));
}

void *cu_scratch(size_t bytes, const char *op) {
    size_t n = bytes ? bytes : 16;
    void *p = NULL;
    if (cudaMallocAsync(&p, n, g_cu.stream) != cudaSuccess) {
        cu_trim_pool();
        if (cudaMallocAsync(&p, n, g_cu.stream) != cudaSuccess) cu_die_oom(bytes, op);
    }
    live_add(p, n);
    return p;
}

void cu_scratch_free(void *p) {
    if (!p) return;
    live_remove(p);
    CU_CHECK(cudaFreeAsync(p, g_cu.stream));
}

// The host buffer may be reused as soon as this returns, so the copy is waited for.
static void cu_memcpy_h2d(void *dst, const void *src, size_t bytes) {
    if (!bytes) return;
    CU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, g_cu.stream));
    CU_CHECK(cudaStreamSynchronize(g_cu.stream));
}

static void cu_sync(void) {
    CU_CHECK(cudaStreamSynchronize(g_cu.stream));
    cu_check_device_errors("a sync");
}

static void cu_memcpy_d2h(void *dst, const void *src, size_t bytes) {
    if (!bytes) return;
    CU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, g_cu.stream));
    CU_CHECK(cudaStreamSynchronize(g_cu.stream));
    cu_check_device_errors("a device-to-host copy");
}

static void cu_memcpy_d2d(void *dst, const void *src, size_t bytes) {
    if (bytes && dst != src) CU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, g_cu.stream));
}

static void cu_memset0(void *p, size_t bytes) {
    if (bytes) CU_CHECK(cudaMemsetAsync(p, 0, bytes, g_cu.stream));
}

// ---------------------------------------------------------------------------------------------------
// act <-> fp32

template <typename D, typename S> __global__ void convert_kernel(D *dst, const S *src, size_t n) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) dst[i] = from_f<D>(to_f(src[i]));
}

template <typename D, typename S> static void convert(D *dst, const S *src, size_t n, const char *name) {
    if (!n) return;
    CU_REQUIRE(dst && src, "to_act/from_act", "NULL pointer (dst, src)");
    if ((const void *)dst == (const void *)src && sizeof(D) == sizeof(S)) return; // fp32 mode in place
    unsigned blocks = (unsigned)(n / 256 + 1 < 4096 ? n / 256 + 1 : 4096);
    cu_launch(name, convert_kernel<D, S>, dim3(blocks), dim3(256), 0, dst, src, n);
}

template <typename T> static void cu_to_act(void *dst, const float *src, size_t n) {
    if (sizeof(T) == 4) {
        cu_memcpy_d2d(dst, src, n * 4);
        return;
    }
    convert((T *)dst, src, n, "to_act");
}
template <typename T> static void cu_from_act(float *dst, const void *src, size_t n) {
    if (sizeof(T) == 4) {
        cu_memcpy_d2d(dst, src, n * 4);
        return;
    }
    convert(dst, (const T *)src, n, "from_act");
}

// ---------------------------------------------------------------------------------------------------
// graphs: a decode step is ~160 small kernels; replaying them as one graph removes the per-launch host
// cost that otherwise bounds batch-1 decoding.

#ifdef GDN_EMU // the emulator runs kernels at launch: nothing to record
static int cu_capture_begin(void) { return -1; }
static void *cu_capture_end(void) { return NULL; }
static void cu_graph_launch(void *) {}
static void cu_graph_free(void *) {}
#else
static int cu_capture_begin(void) {
    if (g_cu.debug) return -1; // debug mode synchronises after every launch, which a capture forbids
    return cudaStreamBeginCapture(g_cu.stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess ? 0 : -1;
}
static void *cu_capture_end(void) {
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    cudaError_t e = cudaStreamEndCapture(g_cu.stream, &graph);
    if (e == cudaSuccess) e = cudaGraphInstantiate(&exec, graph, 0);
    if (graph) cudaGraphDestroy(graph);
    if (e != cudaSuccess) {
        cudaGetLastError(); // a failed capture leaves its error behind; the caller runs the ops directly
        return NULL;
    }
    // The graph's scratch (cu_scratch inside the capture) lives in the graph's own memory; what the same ops
    // left cached in the stream pool when they ran directly is not needed by the replays: give it back.
    cudaMemPool_t pool;
    if (cudaDeviceGetDefaultMemPool(&pool, g_cu.device) == cudaSuccess && cudaStreamSynchronize(g_cu.stream) == cudaSuccess)
        cudaMemPoolTrimTo(pool, 0);
    cudaGetLastError();
    return exec;
}
static void cu_graph_launch(void *g) { CU_CHECK(cudaGraphLaunch((cudaGraphExec_t)g, g_cu.stream)); }
static void cu_graph_free(void *g) {
    if (!g) return;
    CU_CHECK(cudaStreamSynchronize(g_cu.stream));
    CU_CHECK(cudaGraphExecDestroy((cudaGraphExec_t)g));
}
#endif

// ---------------------------------------------------------------------------------------------------
// device and tables

static int cu_init(char *err, size_t errlen) {
    if (g_cu.ready) return 0;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) return set_err(err, errlen, "no usable CUDA device: %s", cudaGetErrorString(e));
    if (count == 0) return set_err(err, errlen, "no CUDA device found");
    int dev = 0;
    const char *pick = getenv("GDN_CUDA_DEVICE"); // set per rank by the data-parallel launcher (train/dist.c)
    if (pick && *pick) {
        int want = atoi(pick);
        if (want < 0 || want >= count) return set_err(err, errlen, "GDN_CUDA_DEVICE=%s but %d CUDA devices are visible", pick, count);
        if ((e = cudaSetDevice(want)) != cudaSuccess)
            return set_err(err, errlen, "cudaSetDevice(%d) failed: %s", want, cudaGetErrorString(e));
    }
    if ((e = cudaGetDevice(&dev)) != cudaSuccess)
        return set_err(err, errlen, "cudaGetDevice failed: %s", cudaGetErrorString(e));
    cudaDeviceProp prop;
    if ((e = cudaGetDeviceProperties(&prop, dev)) != cudaSuccess)
        return set_err(err, errlen, "cudaGetDeviceProperties failed: %s", cudaGetErrorString(e));
    if (prop.major < 9)
        return set_err(err, errlen, "needs sm_90 (Hopper); found sm_%d%d (%s)", prop.major, prop.minor, prop.name);
    g_cu.device = dev;
    g_cu.sm_count = prop.multiProcessorCount;
    g_cu.smem_optin = prop.sharedMemPerBlockOptin;
    const char *dbg = getenv("GDN_CUDA_DEBUG");
    g_cu.debug = dbg && *dbg && strcmp(dbg, "0") != 0;
    const char *pdl = getenv("GDN_CUDA_PDL"); // on unless "0" (A/B runs); off in debug mode, which syncs per launch
    g_cu.pdl = !g_cu.debug && !(pdl && !strcmp(pdl, "0"));
    if ((e = cudaStreamCreateWithFlags(&g_cu.stream, cudaStreamNonBlocking)) != cudaSuccess)
        return set_err(err, errlen, "cudaStreamCreate failed: %s", cudaGetErrorString(e));
    // Keep freed scratch in the pool: ops allocate and free it on every call.
    cudaMemPool_t pool;
    uint64_t keep = UINT64_MAX;
    if ((e = cudaDeviceGetDefaultMemPool(&pool, dev)) != cudaSuccess ||
        (e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep)) != cudaSuccess)
        return set_err(err, errlen, "setting up the CUDA memory pool failed: %s", cudaGetErrorString(e));
    // The record bad token ids are reported in (device memory: atomics on mapped host memory are not
    // available on every platform). Read back at sync points.
    if ((e = cudaMalloc((void **)&g_cu.err_dev, sizeof(CuDevError))) != cudaSuccess ||
        (e = cudaMemset(g_cu.err_dev, 0, sizeof(CuDevError))) != cudaSuccess)
        return set_err(err, errlen, "allocating the device error record failed: %s", cudaGetErrorString(e));
    if (cu_matmul_init(err, errlen)) return -1;
    g_cu.ready = 1;
    return 0;
}

// time_ms: fn(ctx) reps times between two CUDA events on the backend's stream, milliseconds per call.
static double cu_time_ms(void (*fn)(void *), void *ctx, int reps) {
#ifdef GDN_EMU
    for (int i = 0; i < reps; i++) fn(ctx);
    return -1.0;
#else
    cudaEvent_t e0, e1;
    CU_CHECK(cudaEventCreate(&e0));
    CU_CHECK(cudaEventCreate(&e1));
    CU_CHECK(cudaEventRecord(e0, g_cu.stream));
    for (int i = 0; i < reps; i++) fn(ctx);
    CU_CHECK(cudaEventRecord(e1, g_cu.stream));
    CU_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CU_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cu_check_device_errors("a timed op");
    return ms / reps;
#endif
}

// Profiling timestamps (backend.h mark): events recorded on the stream, a pool grown as the indices need (event
// creation never synchronises). The emulator runs each kernel at its launch: no device clock to read.
#ifdef GDN_EMU
static void cu_mark(int) {}
static double cu_mark_ms(int, int) { return -1.0; }
#else
static cudaEvent_t *g_marks;
static int g_nmarks;
static void cu_mark(int i) {
    if (i < 0) die("mark: negative timestamp index %d", i);
    if (i >= g_nmarks) {
        int n = g_nmarks ? g_nmarks : 1024;
        while (n <= i) n *= 2;
        g_marks = (cudaEvent_t *)xrealloc(g_marks, (size_t)n * sizeof(cudaEvent_t));
        for (int k = g_nmarks; k < n; k++) CU_CHECK(cudaEventCreate(&g_marks[k]));
        g_nmarks = n;
    }
    CU_CHECK(cudaEventRecord(g_marks[i], g_cu.stream));
}
static double cu_mark_ms(int a, int b) {
    if (a < 0 || b < 0 || a >= g_nmarks || b >= g_nmarks) die("mark_ms: timestamp %d or %d was never taken", a, b);
    float ms = 0;
    CU_CHECK(cudaEventElapsedTime(&ms, g_marks[a], g_marks[b]));
    return ms;
}
#endif

// reserved: device memory in use now (allocations, the stream-ordered pool and the context); the rest counted above
static void cu_mem_stats(BackendMemStats *s) {
    size_t free_b = 0, total_b = 0;
    s->reserved = cudaMemGetInfo(&free_b, &total_b) == cudaSuccess ? total_b - free_b : 0;
    s->allocated = g_bytes_now, s->peak = g_bytes_peak, s->count = g_live_count;
}

static Backend g_tables[2];

static void fill_table(Backend *b, int use_bf16) {
    b->name = "cuda";
    b->act_bytes = use_bf16 ? 2 : 4;
    b->eval_batch = 1 << 30; // a scoring call's sequences in one forward: the GPU wants the rows
    b->alloc = cu_alloc;
    b->free = cu_free;
    b->memcpy_h2d = cu_memcpy_h2d;
    b->memcpy_d2h = cu_memcpy_d2h;
    b->memcpy_d2d = cu_memcpy_d2d;
    b->memset0 = cu_memset0;
    b->sync = cu_sync;
    b->mem_stats = cu_mem_stats;
    b->time_ms = cu_time_ms;
    b->mark = cu_mark;
    b->mark_ms = cu_mark_ms;
    b->capture_begin = cu_capture_begin;
    b->capture_end = cu_capture_end;
    b->graph_launch = cu_graph_launch;
    b->graph_free = cu_graph_free;
    b->to_act = use_bf16 ? cu_to_act<bf16> : cu_to_act<float>;
    b->from_act = use_bf16 ? cu_from_act<bf16> : cu_from_act<float>;
    cu_register_elementwise(b, use_bf16);
    cu_register_norms(b, use_bf16);
    cu_register_matmul(b, use_bf16);
    cu_register_conv(b, use_bf16);
    cu_register_doc_starts(b);
    cu_register_gate(b, use_bf16);
    cu_register_delta_rule_fwd(b, use_bf16);
    cu_register_delta_rule_bwd(b, use_bf16);
    cu_register_lmhead(b, use_bf16);
    cu_register_adamw(b, use_bf16);
    cu_register_attention(b, use_bf16);
    cu_register_gdn_decode(b, use_bf16);
    cu_register_gemv(b, use_bf16); // after matmul: matmul_fwd sends small M to the GEMV
    cu_register_gemm_wg(b, use_bf16); // after gemv and elementwise: its fallback is their matmul_fwd + swiglu_fwd
    cu_register_gdn_decode_block(b, use_bf16); // its five-op form calls the table's ops
    cu_register_collectives(b);
}

extern "C" const Backend *backend_cuda(int precision_bf16, char *err, size_t errlen) {
    if (cu_init(err, errlen)) return NULL;
    Backend *b = &g_tables[precision_bf16 ? 1 : 0];
    if (!b->name) fill_table(b, precision_bf16 ? 1 : 0);
    // Every entry must be set: a missing op would otherwise be a NULL call deep inside training.
    void (*const *fn)(void) = (void (*const *)(void)) & b->alloc;
    size_t nfn = (sizeof(Backend) - offsetof(Backend, alloc)) / sizeof(void (*)(void));
    for (size_t i = 0; i < nfn; i++)
        if (!fn[i]) {
            set_err(err, errlen, "internal error: CUDA backend table entry %zu is not set", i);
            return NULL;
        }
    return b;
}
