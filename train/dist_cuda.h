// dist_cuda.h: the NCCL calls train/dist.c makes (cuda/collective.cu; stubs without CUDA).
#pragma once
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

int cuda_nccl_id_size(void);                                   // bytes of an ncclUniqueId
int cuda_nccl_unique_id(void *out, char *err, size_t errlen); // rank 0 makes it, the others receive it
int cuda_nccl_init(const void *id, int rank, int world, char *err, size_t errlen);
void cuda_nccl_allreduce_sum(float *device_buf, size_t n); // in place, on the backend's stream
void cuda_nccl_free(void);

#ifdef __cplusplus
}
#endif
