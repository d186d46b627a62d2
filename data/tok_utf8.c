// tok_utf8.c: UTF-8 validation and lossy repair for the tokenizer (see tok_utf8.h for the rule).
#include "data/tok_utf8.h"

#include <string.h>

// Looks at the sequence starting at s[0] (n >= 1 bytes left). Returns its length; *ok = 1 when it is a valid
// code point, else 0 and the length is that of the maximal invalid subpart (>= 1).
static size_t utf8_unit(const uint8_t *s, size_t n, int *ok) {
    uint8_t b = s[0];
    *ok = 0;
    if (b < 0x80) return *ok = 1, 1;
    size_t need;
    uint8_t lo = 0x80, hi = 0xBF; // allowed range of the second byte
    if (b >= 0xC2 && b <= 0xDF) need = 1;
    else if (b == 0xE0) need = 2, lo = 0xA0;
    else if (b >= 0xE1 && b <= 0xEC) need = 2;
    else if (b == 0xED) need = 2, hi = 0x9F; // excludes the surrogates D800..DFFF
    else if (b >= 0xEE && b <= 0xEF) need = 2;
    else if (b == 0xF0) need = 3, lo = 0x90;
    else if (b >= 0xF1 && b <= 0xF3) need = 3;
    else if (b == 0xF4) need = 3, hi = 0x8F;
    else return 1; // 80..C1 (continuation or overlong lead) and F5..FF can never start a sequence
    if (n < 2 || s[1] < lo || s[1] > hi) return 1;
    for (size_t i = 2; i <= need; i++)
        if (i >= n || (s[i] & 0xC0) != 0x80) return i;
    *ok = 1;
    return need + 1;
}

size_t tok_utf8_valid_prefix(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        // ASCII fast path, 8 bytes at a time.
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= n) break;
        if (s[i] < 0x80) { i++; continue; }
        int ok;
        size_t len = utf8_unit(s + i, n - i, &ok);
        if (!ok) return i;
        i += len;
    }
    return n;
}

size_t tok_utf8_invalid_count(const char *text, size_t n) {
    const uint8_t *s = (const uint8_t *)text;
    size_t bad = 0, i = tok_utf8_valid_prefix(s, n);
    while (i < n) {
        int ok;
        size_t len = utf8_unit(s + i, n - i, &ok);
        bad += !ok;
        i += len;
    }
    return bad;
}

size_t tok_utf8_lossy(const uint8_t *s, size_t n, uint8_t *out, size_t *n_invalid) {
    size_t o = 0, bad = 0, i = 0;
    while (i < n) {
        size_t good = tok_utf8_valid_prefix(s + i, n - i);
        memcpy(out + o, s + i, good);
        o += good, i += good;
        if (i >= n) break;
        int ok;
        size_t len = utf8_unit(s + i, n - i, &ok); // ok == 0 here
        out[o++] = 0xEF, out[o++] = 0xBF, out[o++] = 0xBD;
        bad++;
        i += len;
    }
    if (n_invalid) *n_invalid = bad;
    return o;
}

int tok_utf8_put(uint32_t cp, uint8_t *out) {
    if (cp < 0x80) return out[0] = (uint8_t)cp, 1;
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6)), out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12)), out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18)), out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F)), out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}
