// parquet.h: Parquet readers written here from the Parquet format spec (Thrift compact footer, PLAIN,
// dictionary, RLE and DELTA encodings, data pages v1 and v2, SNAPPY / ZSTD / GZIP / uncompressed). Every
// length read from a file is bounded by the bytes left. Two readers:
//  - a streaming reader for one top-level string column (FineWeb-Edu "text"): memory bounded by one page;
//  - a table reader for small files (lm-eval task files: thousands of rows, a few MB) that decodes whole
//    rows, nested columns included, into cJSON objects shaped as the JSON Lines export of the same data.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

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

// ---------------------------------------------------------------------------------------------------------
// Table reader: the whole file in memory (files over PARQUET_TABLE_MAX_BYTES are refused), every row
// rendered as a JSON object {column: value} the way `datasets`' to_json / pandas' to_json(orient="records")
// write it:
//   BYTE_ARRAY (STRING/UTF8/ENUM/JSON or unannotated)  -> string (cut at a NUL byte, as cJSON cuts "\u0000")
//   INT32 / INT64 (signed or unsigned, any bit width)   -> number;  BOOLEAN -> true/false
//   FLOAT / DOUBLE                                      -> number;  null (an OPTIONAL value absent) -> null
//   LIST (3-level as pyarrow / arrow-rs / DuckDB write it, the legacy 2-level forms, a bare REPEATED field)
//                                                       -> array (elements may be null; [] for an empty list)
//   group (struct)                                      -> object with one key per field
// Refused with a message naming the file and column: MAP, INT96, FIXED_LEN_BYTE_ARRAY, and the annotations
// whose JSON form is not the stored number (DECIMAL, DATE, TIME, TIMESTAMP, INTERVAL, FLOAT16, ...).
#define PARQUET_TABLE_MAX_BYTES ((int64_t)1 << 30)

typedef struct ParquetTable ParquetTable;

// Reads the top-level columns named in columns[0..ncolumns) (all of them, in file order, when columns is
// NULL) of every row. NULL + err ("<path>: <where>: <what>") on failure.
ParquetTable *parquet_read_table(const char *path, const char *const *columns, int ncolumns, char *err,
                                 size_t errlen);
int64_t parquet_table_num_rows(const ParquetTable *t);
int parquet_table_num_columns(const ParquetTable *t);
const char *parquet_table_column_name(const ParquetTable *t, int c);
// Row i as an object {column: value} (owned by the table; NULL once taken or when i is out of range).
const cJSON *parquet_table_row(const ParquetTable *t, int64_t i);
// The value of one cell (owned by the table); NULL when i is out of range or there is no such column.
const cJSON *parquet_table_get(const ParquetTable *t, int64_t i, const char *column);
// Hands row i to the caller (who frees it with cJSON_Delete); the table no longer holds it.
cJSON *parquet_table_take_row(ParquetTable *t, int64_t i);
void parquet_table_free(ParquetTable *t);

#ifdef __cplusplus
}
#endif
