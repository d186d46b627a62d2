// collective.cu: NCCL for data-parallel training (train/dist.c). One communicator per process, one GPU per
// rank; collectives run on the backend's stream, so they order with the ops around them and the host does
// not wait for them.
#include "cuda/common.cuh"
#include "train/dist_cuda.h"

#ifdef GDN_EMU // the emulator is one process: no communicator
int cuda_nccl_id_size(void) { return 128; }
int cuda_nccl_unique_id(void *, char *err, size_t errlen) { return set_err(err, errlen, "NCCL is not emulated"); }
int cuda_nccl_init(const void *, int, int, char *err, size_t errlen) { return set_err(err, errlen, "NCCL is not emulated"); }
void cuda_nccl_allreduce_sum(float *, size_t) {}
void cuda_nccl_free(void) {}
#else
#include <nccl.h>

static ncclComm_t g_comm;

static int nccl_err(char *err, size_t errlen, const char *call, ncclResult_t r) {
    return set_err(err, errlen, "%s failed: %s%s", call, ncclGetErrorString(r),
                   r == ncclSystemError || r == ncclUnhandledCudaError ? " (NCCL_DEBUG=WARN says more)" : "");
}

int cuda_nccl_id_size(void) { return (int)sizeof(ncclUniqueId); }

int cuda_nccl_unique_id(void *out, char *err, size_t errlen) {
    ncclResult_t r = ncclGetUniqueId((ncclUniqueId *)out);
    return r == ncclSuccess ? 0 : nccl_err(err, errlen, "ncclGetUniqueId", r);
}

int cuda_nccl_init(const void *id, int rank, int world, char *err, size_t errlen) {
    ncclUniqueId uid;
    memcpy(&uid, id, sizeof uid);
    ncclResult_t r = ncclCommInitRank(&g_comm, world, uid, rank);
    return r == ncclSuccess ? 0 : nccl_err(err, errlen, "ncclCommInitRank", r);
}

void cuda_nccl_allreduce_sum(float *buf, size_t n) {
    if (!n) return;
    ncclResult_t r = ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, g_comm, g_cu.stream);
    if (r != ncclSuccess) die("ncclAllReduce of %zu floats failed: %s", n, ncclGetErrorString(r));
    cu_after_launch("ncclAllReduce");
}

void cuda_nccl_free(void) {
    if (g_comm) ncclCommDestroy(g_comm);
    g_comm = NULL;
}
#endif
