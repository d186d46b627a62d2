// tok_pretok.c: Llama-3 and GPT-2 pre-tokenizer regexes as state machines (spec data.md §1.3).
// Each alternative of the regex becomes one test at the current position, tried in the regex's order; what a
// backtracking engine would do inside an alternative is worked out by hand in the comments (A1..A7 are the
// spec's names for the Llama-3 alternatives). Input is valid UTF-8, so decoding needs no checks.
#include "data/tok_pretok.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "data/tok_unicode_table.h"
#include "util/common.h"

const char *const TOK_PATTERN_LLAMA3 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char *const TOK_PATTERN_GPT2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

// Two-level class table: stage1[cp >> 8] picks a 256-entry block; identical blocks are stored once.
#define N_STAGE1 (0x110000 >> 8)
static uint16_t cls_stage1[N_STAGE1];
static uint8_t *cls_blocks;
static pthread_once_t cls_once = PTHREAD_ONCE_INIT;

static void fill_ranges(uint8_t *cls, const uint32_t (*r)[2], size_t nr, uint8_t value) {
    for (size_t i = 0; i < nr; i++)
        memset(cls + r[i][0], value, r[i][1] - r[i][0] + 1);
}

static void build_class_table(void) {
    uint8_t *cls = xcalloc(0x110000, 1); // TOK_CLS_OTHER = 0
    fill_ranges(cls, tok_space_ranges, sizeof tok_space_ranges / sizeof tok_space_ranges[0], TOK_CLS_SPACE);
    fill_ranges(cls, tok_letter_ranges, sizeof tok_letter_ranges / sizeof tok_letter_ranges[0], TOK_CLS_LETTER);
    fill_ranges(cls, tok_number_ranges, sizeof tok_number_ranges / sizeof tok_number_ranges[0], TOK_CLS_NUMBER);
    cls['\r'] = cls['\n'] = TOK_CLS_CRLF;
    uint8_t *blocks = xmalloc((size_t)N_STAGE1 * 256);
    uint64_t *block_hash = xmalloc(N_STAGE1 * sizeof(uint64_t));
    size_t nblocks = 0;
    for (size_t b = 0; b < N_STAGE1; b++) {
        const uint8_t *blk = cls + (b << 8);
        uint64_t h = 1469598103934665603ull;
        for (int i = 0; i < 256; i++) h = (h ^ blk[i]) * 1099511628211ull;
        size_t found = nblocks;
        for (size_t k = 0; k < nblocks; k++)
            if (block_hash[k] == h && !memcmp(blocks + (k << 8), blk, 256)) { found = k; break; }
        if (found == nblocks) {
            memcpy(blocks + (nblocks << 8), blk, 256);
            block_hash[nblocks++] = h;
        }
        cls_stage1[b] = (uint16_t)found;
    }
    cls_blocks = xrealloc(blocks, nblocks << 8);
    free(block_hash);
    free(cls);
}

void tok_unicode_init(void) { pthread_once(&cls_once, build_class_table); }

static inline int cls_of(uint32_t cp) { return cls_blocks[((size_t)cls_stage1[cp >> 8] << 8) | (cp & 0xFF)]; }

int tok_cp_class(uint32_t cp) { return cp < 0x110000 ? cls_of(cp) : TOK_CLS_OTHER; }

// Class of the code point at s[p]; *len gets its byte length and *cp the code point.
static inline int cls_at(const uint8_t *s, size_t p, uint32_t *cp, size_t *len) {
    uint8_t b = s[p];
    uint32_t c;
    if (b < 0x80) c = b, *len = 1;
    else if (b < 0xE0) c = ((uint32_t)(b & 0x1F) << 6) | (s[p + 1] & 0x3F), *len = 2;
    else if (b < 0xF0) c = ((uint32_t)(b & 0x0F) << 12) | ((uint32_t)(s[p + 1] & 0x3F) << 6) | (s[p + 2] & 0x3F), *len = 3;
    else
        c = ((uint32_t)(b & 0x07) << 18) | ((uint32_t)(s[p + 1] & 0x3F) << 12) | ((uint32_t)(s[p + 2] & 0x3F) << 6) |
            (s[p + 3] & 0x3F),
        *len = 4;
    *cp = c;
    return cls_of(c);
}

// End of the maximal run of class k starting at p.
static inline size_t run_end(const uint8_t *s, size_t n, size_t p, int k) {
    while (p < n) {
        uint32_t c;
        size_t l;
        if (cls_at(s, p, &c, &l) != k) break;
        p += l;
    }
    return p;
}

// 's|'t|'re|'ve|'m|'ll|'d after the apostrophe (q is just past it). fold: Llama-3's (?i:...), ASCII case
// folding plus U+017F LATIN SMALL LETTER LONG S, which Oniguruma folds to 's' (verified with the reference:
// "x'ſtx" -> "x", "'ſ", "tx"; no other code point folds onto s, t, r, e, v, m, l or d). Returns 0 if none.
static inline size_t contraction_end(const uint8_t *s, size_t n, size_t q, int fold) {
    uint8_t a = s[q];
    if (fold && a >= 'A' && a <= 'Z') a += 32;
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return q + 1;
    if (fold && a == 0xC5 && q + 1 < n && s[q + 1] == 0xBF) return q + 2;
    if (q + 1 < n) {
        uint8_t b = s[q + 1];
        if (fold && b >= 'A' && b <= 'Z') b += 32;
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return q + 2;
    }
    return 0;
}

// \s*[\r\n]+ | \s+(?!\S) | \s+ at a position whose code point is white space (SPACE or CRLF). crlf_apart:
// Llama-3 tries \s*[\r\n]+ first; GPT-2 has no such alternative.
static inline size_t space_run_piece(const uint8_t *s, size_t n, size_t p, int crlf_apart) {
    size_t w = p, last_start = p, after_last_crlf = 0, count = 0;
    while (w < n) {
        uint32_t c;
        size_t l;
        int k = cls_at(s, w, &c, &l);
        if (k != TOK_CLS_SPACE && k != TOK_CLS_CRLF) break;
        if (k == TOK_CLS_CRLF) after_last_crlf = w + l;
        last_start = w, w += l, count++;
    }
    if (crlf_apart && after_last_crlf) return after_last_crlf; // A5: up to and with the last CR/LF of the run
    if (w == n) return n;                                       // A6 at end of text: the whole run
    if (count >= 2) return last_start; // A6: the last space is left to join the next piece (via A2/A4)
    return w;                          // A7: a single space before a non-space that A2/A4 did not take
}

static size_t llama3_next(const uint8_t *s, size_t n, size_t p) {
    uint32_t c0, c1 = 0;
    size_t l0, l1 = 0, q;
    int k0 = cls_at(s, p, &c0, &l0), k1 = -1;
    q = p + l0;
    if (q < n) k1 = cls_at(s, q, &c1, &l1);
    // A1: contractions, before A2 so that "'llama" -> "'ll", "ama".
    if (c0 == '\'' && q < n) {
        size_t e = contraction_end(s, n, q, 1);
        if (e) return e;
    }
    // A2: [^\r\n\p{L}\p{N}]?\p{L}+ -- a letter run, or one non-CR/LF non-letter non-number code point then one.
    if (k0 == TOK_CLS_LETTER) return run_end(s, n, q, TOK_CLS_LETTER);
    if (k0 != TOK_CLS_NUMBER && k0 != TOK_CLS_CRLF && k1 == TOK_CLS_LETTER) return run_end(s, n, q + l1, TOK_CLS_LETTER);
    // A3: \p{N}{1,3}
    if (k0 == TOK_CLS_NUMBER) {
        for (int i = 1; i < 3 && q < n; i++) {
            uint32_t c;
            size_t l;
            if (cls_at(s, q, &c, &l) != TOK_CLS_NUMBER) break;
            q += l;
        }
        return q;
    }
    // A4: ` ?[^\s\p{L}\p{N}]+[\r\n]*` -- the optional space only counts when "other" follows it.
    size_t r = 0;
    if (k0 == TOK_CLS_OTHER) r = run_end(s, n, q, TOK_CLS_OTHER);
    else if (c0 == ' ' && k1 == TOK_CLS_OTHER) r = run_end(s, n, q + l1, TOK_CLS_OTHER);
    if (r) {
        while (r < n && (s[r] == '\r' || s[r] == '\n')) r++;
        return r;
    }
    // A5..A7: what is left starts with white space.
    return space_run_piece(s, n, p, 1);
}

static size_t gpt2_next(const uint8_t *s, size_t n, size_t p) {
    uint32_t c0, c1 = 0;
    size_t l0, l1 = 0, q;
    int k0 = cls_at(s, p, &c0, &l0);
    q = p + l0;
    if (c0 == '\'' && q < n) {
        size_t e = contraction_end(s, n, q, 0);
        if (e) return e;
    }
    // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+` -- here CR/LF are plain \s, not "other".
    if (c0 == ' ' && q < n) {
        int k1 = cls_at(s, q, &c1, &l1);
        if (k1 == TOK_CLS_LETTER || k1 == TOK_CLS_NUMBER || k1 == TOK_CLS_OTHER) return run_end(s, n, q + l1, k1);
    }
    if (k0 == TOK_CLS_LETTER || k0 == TOK_CLS_NUMBER || k0 == TOK_CLS_OTHER) return run_end(s, n, q, k0);
    return space_run_piece(s, n, p, 0);
}

size_t tok_pretok_next(TokSplitKind kind, const uint8_t *s, size_t n, size_t p) {
    return kind == TOK_SPLIT_LLAMA3 ? llama3_next(s, n, p) : gpt2_next(s, n, p);
}
