// tok_pretok.h: the pre-tokenizer regexes of the byte-level BPE family, hand-written as state machines
// (spec data.md §1.3). Each returns where the piece that starts at p ends; applied from p = 0 the pieces
// tile the text exactly, as the leftmost-first regex match loop of HF's Split(Isolated) does.
// Character classes come from Unicode 16.0 tables (data/tok_unicode_table.h), the version the reference
// (Oniguruma inside HF tokenizers) uses.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    // Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
    //          \s*[\r\n]+|\s+(?!\S)|\s+
    TOK_SPLIT_LLAMA3 = 1,
    // GPT-2 (HF ByteLevel's own regex): 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
    TOK_SPLIT_GPT2 = 2,
} TokSplitKind;

// The exact pattern strings (as in tokenizer.json after JSON unescaping), for recognizing Split pre-tokenizers.
extern const char *const TOK_PATTERN_LLAMA3;
extern const char *const TOK_PATTERN_GPT2;

// Code point classes. \s is White_Space; CR and LF are kept apart because the Llama-3 regex treats them apart.
enum { TOK_CLS_OTHER = 0, TOK_CLS_LETTER = 1, TOK_CLS_NUMBER = 2, TOK_CLS_SPACE = 3, TOK_CLS_CRLF = 4 };

void tok_unicode_init(void);       // builds the class table once (thread-safe); tok_load calls it
int tok_cp_class(uint32_t cp);     // needs tok_unicode_init(); cp < 0x110000

// End (> p) of the piece that starts at p < n. s[0..n) must be valid UTF-8 (the tokenizer repairs input first).
size_t tok_pretok_next(TokSplitKind kind, const uint8_t *s, size_t n, size_t p);

#ifdef __cplusplus
}
#endif
