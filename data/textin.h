// textin.h: streaming readers for the raw text `gdn prepare` tokenizes. One reader per input file, records
// in file order with bounded memory (a record = the bytes of one document, plus where it came from):
//   .jsonl .json .ndjson  JSON Lines: each line a JSON object (document = the string under `key`) or a bare
//                         JSON string. Blank lines are skipped; a UTF-8 BOM at the start of the file too.
//                         A file whose first line starts with '[' (one JSON array) is refused with a hint.
//   .txt .text            plain text; TEXT_MODE_LINE: one document per line (the Megatron convention; the
//                         line's "\n" / "\r\n" is not part of it); TEXT_MODE_PARAGRAPH: documents separated
//                         by blank lines (inner newlines kept); TEXT_MODE_FILE: the whole file is one document.
//   .parquet              the BYTE_ARRAY column named `key` (data/parquet.h); a null value is a bad record.
// The JSON and text formats may be compressed: NAME.jsonl.gz / .zst, NAME.txt.gz / .zst (zlib, libzstd);
// a truncated or corrupt stream is an error naming the file.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "util/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TEXTIN_JSONL, TEXTIN_TEXT, TEXTIN_PARQUET } TextInFormat;
typedef enum { TEXTIN_PLAIN, TEXTIN_GZIP, TEXTIN_ZSTD } TextInCodec;
typedef enum { TEXT_MODE_LINE, TEXT_MODE_PARAGRAPH, TEXT_MODE_FILE } TextMode;

typedef struct {
    const char *key;    // JSON key / Parquet column holding the document ("text")
    TextMode text_mode; // how .txt files split into documents
} TextInOptions;

// One record. For JSONL, p/len is the raw JSON line (extract the text with textin_json_text); for the
// other formats it is the document text itself. Valid until the next textin_next call.
typedef struct {
    const char *p;
    size_t len;
    int is_json;     // p is a JSON line, not text
    int is_null;     // Parquet null value (len 0)
    uint64_t line;   // 1-based line of the record's start (JSONL / text), 1-based row (Parquet)
    uint64_t offset; // byte offset of p in the decompressed stream (= file offset for a plain file)
} TextRecord;

typedef struct TextInput TextInput;

// Format and codec from the file name. -1 + err naming the extensions understood.
int textin_detect(const char *path, TextInFormat *fmt, TextInCodec *codec, char *err, size_t errlen);
TextInput *textin_open(const char *path, const TextInOptions *opt, char *err, size_t errlen);
// 1: *rec filled; 0: end of input; -1: read error, err = "path: what is wrong" (truncated stream, ...).
int textin_next(TextInput *in, TextRecord *rec, char *err, size_t errlen);
TextInFormat textin_format(const TextInput *in);
uint64_t textin_file_size(const TextInput *in);
// On-disk bytes consumed so far (compressed bytes for .gz/.zst; row fraction x size for Parquet): progress.
uint64_t textin_bytes_read(const TextInput *in);
// 1 if every record is the byte range [offset, offset+len) of the file itself, so it can be read back
// later with pread (uncompressed JSONL and text).
int textin_random_access(const TextInput *in);
void textin_close(TextInput *in);

// Document text of one JSON line: the value of `key` in a JSON object, or the line's bare JSON string.
// The whole line is validated (RFC 8259; a later duplicate key wins, as in Python's json). Appends the
// decoded bytes to out (escapes decoded; raw non-ASCII bytes passed through unchanged; a lone surrogate
// escape becomes U+FFFD and counts in *bad_escapes). 0 ok; -1 with err = "column N: what is wrong" or
// "no key \"text\"" (out is then left as it was).
int textin_json_text(const char *line, size_t len, const char *key, Buf *out, size_t *bad_escapes, char *err,
                     size_t errlen);

// Number of maximal invalid UTF-8 subsequences in p[0..n) (each becomes one U+FFFD under the tokenizer's
// policy, spec data.md §1.7); *first_bad gets the byte offset of the first one when non-zero.
size_t textin_utf8_invalid(const char *p, size_t n, size_t *first_bad);

#ifdef __cplusplus
}
#endif
