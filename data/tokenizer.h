// tokenizer.h: HF tokenizer.json byte-level BPE (Llama-3 first, GPT-2 style too), matching HF tokenizers'
// ids exactly (spec data.md §1). Thread-safe after loading: encode/decode may run on many threads.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct Tokenizer Tokenizer;

// Loads tokenizer.json. NULL + err on failure (unsupported model type, malformed JSON, ...).
Tokenizer *tok_load(const char *path, char *err, size_t errlen);
void tok_free(Tokenizer *t);
int tok_vocab_size(const Tokenizer *t);   // regular + added tokens (128256 for Llama 3)
int tok_bos_id(const Tokenizer *t);       // -1 if none (128000 for Llama 3)
int tok_eos_id(const Tokenizer *t);       // <|end_of_text|> / EOD (128001), -1 if none
int tok_adds_bos(const Tokenizer *t);     // 1 if the post-processor prepends BOS
const char *tok_sha256(const Tokenizer *t); // hex SHA-256 of the tokenizer.json bytes

// Encodes len bytes of text (invalid UTF-8 handled as in spec data.md §1.7). Appends ids to *ids
// (growable: *cap elements, realloc'd as needed), returns the number appended. add_bos: prepend BOS
// when the tokenizer's post-processor would (0 = never).
size_t tok_encode(const Tokenizer *t, const char *text, size_t len, int add_bos, int32_t **ids, size_t *cap);
// Decodes ids to UTF-8 (lossy, U+FFFD for invalid sequences); special tokens printed unless skip_special.
// Returns a malloc'd NUL-terminated string; *out_len gets its length if non-NULL.
char *tok_decode(const Tokenizer *t, const int32_t *ids, size_t n, int skip_special, size_t *out_len);
// The token's text (byte-level decoded, may be a partial UTF-8 sequence); NULL for an invalid id.
const char *tok_token_bytes(const Tokenizer *t, int32_t id, size_t *len);

#ifdef __cplusplus
}
#endif
