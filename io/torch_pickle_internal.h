// torch_pickle_internal.h: what the zip reader, the pickle machine and the torch-file layer share
// (little-endian reads and a byte copy); not part of the public interface (torch_pickle.h).
#pragma once
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "torch_pickle.h"

static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }
char *tp_mem_dup(const void *p, size_t n); // n bytes and a terminating 0, from xmalloc
const char *tp_dtype_storage(TorchDtype t); // torch.XStorage class name of a dtype, for the writer
