// safetensors.h: reader and writer for the safetensors format (8-byte little-endian header length, JSON
// header {name: {dtype, shape, data_offsets}, "__metadata__": {str: str}}, then the data). The reader
// bounds every length and offset by the file size and rejects overlaps, duplicates and unknown dtypes.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { ST_F32, ST_BF16, ST_F16, ST_I32, ST_I64, ST_U8, ST_F64 } StDtype;

typedef struct {
    char *name;
    StDtype dtype;
    int ndim;
    int64_t shape[8];
    uint64_t numel;
    const uint8_t *data; // into the mapped file
    uint64_t nbytes;
} StTensor;

typedef struct {
    int ntensors;
    StTensor *tensors;
    int nmeta;
    char **meta_keys, **meta_vals;
    uint8_t *map;
    size_t map_size;
} StFile;

int st_open(StFile *f, const char *path, char *err, size_t errlen); // mmap; 0 ok
void st_close(StFile *f);
const StTensor *st_find(const StFile *f, const char *name);
const char *st_meta(const StFile *f, const char *key); // NULL if absent
const char *st_dtype_name(StDtype t);                  // "F32", "BF16", ...
size_t st_dtype_size(StDtype t);
// Converts a tensor of F32/BF16/F16 to fp32 (n = numel elements). -1 + err for other dtypes.
int st_to_f32(const StTensor *t, float *out, char *err, size_t errlen);

// Writer: tensors are written in the order added; data is copied at save time from the given pointers,
// which must stay valid until st_writer_save returns. Saved atomically (temp file, fsync, rename).
typedef struct StWriter StWriter;
StWriter *st_writer_new(void);
void st_writer_add(StWriter *w, const char *name, StDtype dtype, int ndim, const int64_t *shape, const void *data);
// Adds an fp32 host tensor stored as `dtype` (F32 or BF16 with round-to-nearest-even, or F16).
void st_writer_add_f32_as(StWriter *w, const char *name, StDtype dtype, int ndim, const int64_t *shape,
                          const float *data);
void st_writer_meta(StWriter *w, const char *key, const char *value);
int st_writer_save(StWriter *w, const char *path, char *err, size_t errlen); // 0 ok
void st_writer_free(StWriter *w);

#ifdef __cplusplus
}
#endif
