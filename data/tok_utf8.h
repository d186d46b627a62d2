// tok_utf8.h: the UTF-8 rules the tokenizer needs (spec data.md §1.6, §1.7).
// "Maximal invalid subsequence" is Unicode's "maximal subpart" rule, which Rust's String::from_utf8_lossy and
// HF decode follow: a lead byte plus the continuation bytes that are still valid for it form one bad unit
// (one U+FFFD); any other bad byte is a unit alone. Overlong forms, surrogates (ED A0..BF) and > U+10FFFF
// are invalid.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Length of the valid UTF-8 prefix of s[0..n).
size_t tok_utf8_valid_prefix(const uint8_t *s, size_t n);
// Number of maximal invalid subsequences in s (0 for valid UTF-8). The tokenizer replaces each one by U+FFFD
// before encoding; callers that want to report bad input (expected 0) count them with this.
size_t tok_utf8_invalid_count(const char *s, size_t n);
// Writes the lossy version of s (each maximal invalid subsequence -> EF BF BD) to out, which needs room for
// 3 * n bytes. Returns the bytes written; *n_invalid (if non-NULL) gets the number of replacements.
size_t tok_utf8_lossy(const uint8_t *s, size_t n, uint8_t *out, size_t *n_invalid);
// Appends the UTF-8 encoding of a code point (< 0x110000, not a surrogate) to out; returns 1..4.
int tok_utf8_put(uint32_t cp, uint8_t *out);

#ifdef __cplusplus
}
#endif
