// parquet.h: a streaming reader for one string column of a Parquet file (FineWeb-Edu "text"), written
// here from the Parquet format spec: Thrift compact footer, PLAIN and dictionary encodings, data pages
// v1 and v2, SNAPPY / ZSTD / GZIP / uncompressed. Every length is bounded by the bytes left.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ParquetReader ParquetReader;

// Opens path and selects the BYTE_ARRAY column named `column`. NULL + err (file, what is wrong) on failure.
ParquetReader *parquet_open(const char *path, const char *column, char *err, size_t errlen);
int64_t parquet_num_rows(const ParquetReader *r);
// Next value in row order: returns 1 and sets *p/*len (valid until the next call), 0 at end, -1 on error
// (err filled). A null value is returned as len 0 with *is_null = 1 (is_null may be NULL).
int parquet_next(ParquetReader *r, const char **p, size_t *len, int *is_null, char *err, size_t errlen);
void parquet_close(ParquetReader *r);

#ifdef __cplusplus
}
#endif
