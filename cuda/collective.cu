// collective.cu: NCCL for data-parallel training, the backend's comm_* entries (model/backend.h). One
// communicator per process, one GPU per rank; collectives run on the backend's stream, so they order with
// the ops around them and the host does not wait for them. The bootstrap id comes from rank 0 over the CPU
// channel (train/dist.c), which works with every NCCL version, NCCL_COMM_ID set or not.
#include "cuda/common.cuh"

#ifdef GDN_EMU // the emulator is one process: no communicator (entries set, as every CUDA entry is, but refusing)
static int emu_id_size(void) { return 128; }
static int emu_refuse(void *, char *err, size_t errlen) { return set_err(err, errlen, "NCCL is not emulated"); }
static int emu_refuse_init(const void *, int, int, char *err, size_t errlen) { return set_err(err, errlen, "NCCL is not emulated"); }
static void emu_die_n(float *, size_t) { die("NCCL is not emulated"); }
static void emu_die_offs(float *, const size_t *) { die("NCCL is not emulated"); }
static void emu_die_bytes(void *, const size_t *, size_t) { die("NCCL is not emulated"); }
static void emu_nop(void) {}
void cu_register_collectives(Backend *b) {
    b->comm_id_size = emu_id_size;
    b->comm_unique_id = emu_refuse;
    b->comm_init = emu_refuse_init;
    b->comm_allreduce_sum = b->comm_allreduce_sum_async = emu_die_n;
    b->comm_reduce_scatter_sum = b->comm_allgather = b->comm_reduce_scatter_sum_async = emu_die_offs;
    b->comm_allgather_bytes = emu_die_bytes;
    b->comm_wait = b->comm_free = emu_nop;
}
#else
#include <nccl.h>

static ncclComm_t g_comm;
static int g_world;
static cudaStream_t g_comm_stream; // bucketed all-reduces overlapped with the backward
static cudaEvent_t g_ev_ready, g_ev_done;

static int nccl_err(char *err, size_t errlen, const char *call, ncclResult_t r) {
    return set_err(err, errlen, "%s failed: %s%s", call, ncclGetErrorString(r),
                   r == ncclSystemError || r == ncclUnhandledCudaError ? " (NCCL_DEBUG=WARN says more)" : "");
}
static void nccl_check(ncclResult_t r, const char *call, size_t n) {
    if (r != ncclSuccess) die("%s of %zu floats failed: %s (NCCL_DEBUG=WARN says more)", call, n, ncclGetErrorString(r));
}

static int cu_comm_id_size(void) { return (int)sizeof(ncclUniqueId); }

static int cu_comm_unique_id(void *out, char *err, size_t errlen) {
    ncclResult_t r = ncclGetUniqueId((ncclUniqueId *)out);
    return r == ncclSuccess ? 0 : nccl_err(err, errlen, "ncclGetUniqueId", r);
}

static int cu_comm_init(const void *id, int rank, int world, char *err, size_t errlen) {
    ncclUniqueId uid;
    memcpy(&uid, id, sizeof uid);
    ncclResult_t r = ncclCommInitRank(&g_comm, world, uid, rank);
    g_world = world;
    if (r != ncclSuccess) return nccl_err(err, errlen, "ncclCommInitRank", r);
    cudaError_t e = cudaStreamCreateWithFlags(&g_comm_stream, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&g_ev_ready, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&g_ev_done, cudaEventDisableTiming);
    return e == cudaSuccess ? 0 : set_err(err, errlen, "the communication stream: %s", cudaGetErrorString(e));
}

static void cu_comm_allreduce_sum(float *buf, size_t n) {
    if (!n) return;
    nccl_check(ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, g_comm, g_cu.stream), "ncclAllReduce", n);
    cu_after_launch("ncclAllReduce");
}

// Shards of any size (ncclReduceScatter wants equal ones): one reduce per owner, grouped into one launch.
static void reduce_scatter_on(float *buf, const size_t *offs, cudaStream_t s) {
    nccl_check(ncclGroupStart(), "ncclGroupStart", 0);
    for (int r = 0; r < g_world; r++) {
        size_t n = offs[r + 1] - offs[r];
        if (n) nccl_check(ncclReduce(buf + offs[r], buf + offs[r], n, ncclFloat32, ncclSum, r, g_comm, s), "ncclReduce", n);
    }
    nccl_check(ncclGroupEnd(), "ncclGroupEnd (reduce-scatter)", offs[g_world]);
}

static void cu_comm_reduce_scatter_sum(float *buf, const size_t *offs) {
    reduce_scatter_on(buf, offs, g_cu.stream);
    cu_after_launch("ncclReduce (reduce-scatter)");
}

static void cu_comm_allgather(float *buf, const size_t *offs) {
    nccl_check(ncclGroupStart(), "ncclGroupStart", 0);
    for (int r = 0; r < g_world; r++) {
        size_t n = offs[r + 1] - offs[r];
        if (n) nccl_check(ncclBroadcast(buf + offs[r], buf + offs[r], n, ncclFloat32, r, g_comm, g_cu.stream), "ncclBroadcast", n);
    }
    nccl_check(ncclGroupEnd(), "ncclGroupEnd (all-gather)", offs[g_world]);
    cu_after_launch("ncclBroadcast (all-gather)");
}

static void cu_comm_allgather_bytes(void *buf, const size_t *offs, size_t elem_bytes) {
    char *b = (char *)buf;
    nccl_check(ncclGroupStart(), "ncclGroupStart", 0);
    for (int r = 0; r < g_world; r++) {
        size_t n = (offs[r + 1] - offs[r]) * elem_bytes;
        if (n) nccl_check(ncclBroadcast(b + offs[r] * elem_bytes, b + offs[r] * elem_bytes, n, ncclUint8, r, g_comm, g_cu.stream), "ncclBroadcast", n);
    }
    nccl_check(ncclGroupEnd(), "ncclGroupEnd (all-gather)", offs[g_world]);
    cu_after_launch("ncclBroadcast (all-gather of act weights)");
}

// The gradients of buf are final once the compute stream reaches here; the reduce then runs beside it.
static void cu_comm_allreduce_sum_async(float *buf, size_t n) {
    if (!n) return;
    CU_CHECK(cudaEventRecord(g_ev_ready, g_cu.stream));
    CU_CHECK(cudaStreamWaitEvent(g_comm_stream, g_ev_ready, 0));
    nccl_check(ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, g_comm, g_comm_stream), "ncclAllReduce (bucket)", n);
}

// ZeRO-1's bucket: as above, a reduce-scatter (its shards: offs) beside the backward.
static void cu_comm_reduce_scatter_sum_async(float *buf, const size_t *offs) {
    CU_CHECK(cudaEventRecord(g_ev_ready, g_cu.stream));
    CU_CHECK(cudaStreamWaitEvent(g_comm_stream, g_ev_ready, 0));
    reduce_scatter_on(buf, offs, g_comm_stream);
}

static void cu_comm_wait(void) {
    CU_CHECK(cudaEventRecord(g_ev_done, g_comm_stream));
    CU_CHECK(cudaStreamWaitEvent(g_cu.stream, g_ev_done, 0));
}

static void cu_comm_free(void) {
    if (g_comm) ncclCommDestroy(g_comm);
    if (g_comm_stream) cudaStreamDestroy(g_comm_stream), cudaEventDestroy(g_ev_ready), cudaEventDestroy(g_ev_done);
    g_comm = NULL;
    g_comm_stream = NULL;
}

void cu_register_collectives(Backend *b) {
    b->comm_id_size = cu_comm_id_size;
    b->comm_unique_id = cu_comm_unique_id;
    b->comm_init = cu_comm_init;
    b->comm_allreduce_sum = cu_comm_allreduce_sum;
    b->comm_reduce_scatter_sum = cu_comm_reduce_scatter_sum;
    b->comm_allgather = cu_comm_allgather;
    b->comm_allgather_bytes = cu_comm_allgather_bytes;
    b->comm_allreduce_sum_async = cu_comm_allreduce_sum_async;
    b->comm_reduce_scatter_sum_async = cu_comm_reduce_scatter_sum_async;
    b->comm_wait = cu_comm_wait;
    b->comm_free = cu_comm_free;
}
#endif
