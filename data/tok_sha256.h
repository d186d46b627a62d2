// tok_sha256.h: SHA-256 (FIPS 180-4), for the tokenizer's identity hash (tok_sha256) that datasets and
// checkpoints record so that data, model and tokenizer cannot be mixed up.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Writes the 64 lowercase hex digits and a NUL to hex.
void tok_sha256_hex(const void *data, size_t n, char hex[65]);

#ifdef __cplusplus
}
#endif
