// text.c: the Python string semantics lm-eval's task templates depend on, over UTF-8 (spec eval.md §1.2,
// §2.4, §2.7, §2.10). Whitespace is Python's str.isspace() set, which is also what `re`'s \s, str.strip()
// and str.rstrip() use. Case mapping is utf8proc's simple mapping plus Python's full mappings where they differ
// (SpecialCasing.txt: İ lowercases to "i̇"; ß, ligatures and some Greek letters titlecase to several code
// points) and the Greek final-sigma rule, as CPython's str.capitalize() does.
// Invalid UTF-8 bytes are carried through unchanged, each counted as one non-space character.
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "eval/eval.h"
#include "util/common.h"

// Decodes the code point at s[*i] (n bytes total), advancing *i; an invalid byte decodes as itself + 0x110000
// so it never matches a real character class.
static uint32_t utf8_next(const char *s, size_t n, size_t *i) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + *i, (utf8proc_ssize_t)(n - *i), &cp);
    if (k <= 0) {
        uint32_t b = (unsigned char)s[*i];
        *i += 1;
        return 0x110000u + b;
    }
    *i += (size_t)k;
    return (uint32_t)cp;
}

static void put_cp(Buf *b, uint32_t cp) {
    if (cp >= 0x110000u) { // an invalid byte kept as is
        char c = (char)(cp - 0x110000u);
        buf_put(b, &c, 1);
        return;
    }
    utf8proc_uint8_t tmp[4];
    utf8proc_ssize_t k = utf8proc_encode_char((utf8proc_int32_t)cp, tmp);
    buf_put(b, tmp, (size_t)k);
}

static char *buf_take(Buf *b) {
    buf_put(b, "", 1); // NUL
    return b->p;
}

int py_isspace(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000;
}

// Length in bytes of the whitespace code point ending at s[end) (0 if the last character is not space).
static size_t trailing_space_len(const char *s, size_t end) {
    size_t start = end;
    // step back over continuation bytes to the lead byte (at most 3)
    while (start > 0 && end - start < 4) {
        start--;
        if (((unsigned char)s[start] & 0xC0) != 0x80) break;
    }
    size_t i = start;
    uint32_t cp = utf8_next(s, end, &i);
    if (i != end) return 0; // not a clean code point ending here
    return py_isspace(cp) ? end - start : 0;
}

size_t py_rstrip_len(const char *s, size_t n) {
    size_t k;
    while (n > 0 && (k = trailing_space_len(s, n)) > 0) n -= k;
    return n;
}

static char *strip_span(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        if (!py_isspace(utf8_next(s, n, &j))) break;
        i = j;
    }
    size_t e = py_rstrip_len(s + i, n - i);
    char *out = xmalloc(e + 1);
    memcpy(out, s + i, e);
    out[e] = 0;
    return out;
}

char *py_strip(const char *s) { return strip_span(s, strlen(s)); }

long utf8_codepoints(const char *s, size_t n) {
    long c = 0;
    for (size_t i = 0; i < n;) {
        utf8_next(s, n, &i);
        c++;
    }
    return c;
}

char *py_replace(const char *s, const char *from, const char *to) {
    Buf b = {0};
    size_t fl = strlen(from), tl = strlen(to);
    const char *p = s, *q;
    if (fl == 0) return xstrdup(s); // not used with an empty pattern
    while ((q = strstr(p, from))) {
        buf_put(&b, p, (size_t)(q - p));
        buf_put(&b, to, tl);
        p = q + fl;
    }
    buf_puts(&b, p);
    return buf_take(&b);
}

// ---- case mapping (CPython do_capitalize / lower_ucs4 semantics) ----

static int is_cased(uint32_t cp) {
    if (cp >= 0x110000u) return 0;
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    if (c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT) return 1;
    if (utf8proc_tolower((utf8proc_int32_t)cp) != (utf8proc_int32_t)cp ||
        utf8proc_toupper((utf8proc_int32_t)cp) != (utf8proc_int32_t)cp)
        return 1;
    // Other_Lowercase / Other_Uppercase without a case mapping (ª º ʰ ⁿ ⓐ ...): cased for Python too
    static const uint32_t other[][2] = {
        {0xAA, 0xAA},       {0xBA, 0xBA},       {0x2B0, 0x2B8},     {0x2C0, 0x2C1},     {0x2E0, 0x2E4},
        {0x37A, 0x37A},     {0x1D2C, 0x1D6A},   {0x1D78, 0x1D78},   {0x1D9B, 0x1DBF},   {0x2071, 0x2071},
        {0x207F, 0x207F},   {0x2090, 0x209C},   {0x2C7C, 0x2C7D},   {0xA69C, 0xA69D},   {0xA770, 0xA770},
        {0xA7F8, 0xA7F9},   {0xAB5C, 0xAB5F},   {0x10780, 0x10780}, {0x10783, 0x10785}, {0x10787, 0x107B0},
        {0x107B2, 0x107BA}, {0x1F130, 0x1F149}, {0x1F150, 0x1F169}, {0x1F170, 0x1F189},
    };
    for (size_t k = 0; k < sizeof other / sizeof other[0]; k++)
        if (cp >= other[k][0] && cp <= other[k][1]) return 1;
    return 0;
}

static int is_case_ignorable(uint32_t cp) {
    if (cp >= 0x110000u) return 0;
    switch (cp) { // Word_Break MidLetter / MidNumLet / Single_Quote
    case 0x27: case 0x2E: case 0x3A: case 0xB7: case 0x387: case 0x55F: case 0x5F4: case 0x2018: case 0x2019:
    case 0x2024: case 0x2027: case 0xFE13: case 0xFE52: case 0xFE55: case 0xFF07: case 0xFF0E: case 0xFF1A:
        return 1;
    }
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    return c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_ME || c == UTF8PROC_CATEGORY_CF ||
           c == UTF8PROC_CATEGORY_LM || c == UTF8PROC_CATEGORY_SK;
}

// Titlecase; the SpecialCasing.txt entries whose titlecase is several code points come first.
static void put_title(Buf *b, uint32_t cp) {
    static const struct { uint32_t cp; const char *s; } special[] = {
        {0xDF, "\x53\x73"}, {0x149, "\xCA\xBC\x4E"}, {0x1F0, "\x4A\xCC\x8C"}, {0x390, "\xCE\x99\xCC\x88\xCC\x81"},
        {0x3B0, "\xCE\xA5\xCC\x88\xCC\x81"}, {0x587, "\xD4\xB5\xD6\x82"}, {0x1E96, "\x48\xCC\xB1"},
        {0x1E97, "\x54\xCC\x88"}, {0x1E98, "\x57\xCC\x8A"}, {0x1E99, "\x59\xCC\x8A"}, {0x1E9A, "\x41\xCA\xBE"},
        {0x1F50, "\xCE\xA5\xCC\x93"}, {0x1F52, "\xCE\xA5\xCC\x93\xCC\x80"}, {0x1F54, "\xCE\xA5\xCC\x93\xCC\x81"},
        {0x1F56, "\xCE\xA5\xCC\x93\xCD\x82"}, {0x1FB2, "\xE1\xBE\xBA\xCD\x85"}, {0x1FB4, "\xCE\x86\xCD\x85"},
        {0x1FB6, "\xCE\x91\xCD\x82"}, {0x1FB7, "\xCE\x91\xCD\x82\xCD\x85"}, {0x1FC2, "\xE1\xBF\x8A\xCD\x85"},
        {0x1FC4, "\xCE\x89\xCD\x85"}, {0x1FC6, "\xCE\x97\xCD\x82"}, {0x1FC7, "\xCE\x97\xCD\x82\xCD\x85"},
        {0x1FD2, "\xCE\x99\xCC\x88\xCC\x80"}, {0x1FD3, "\xCE\x99\xCC\x88\xCC\x81"}, {0x1FD6, "\xCE\x99\xCD\x82"},
        {0x1FD7, "\xCE\x99\xCC\x88\xCD\x82"}, {0x1FE2, "\xCE\xA5\xCC\x88\xCC\x80"},
        {0x1FE3, "\xCE\xA5\xCC\x88\xCC\x81"}, {0x1FE4, "\xCE\xA1\xCC\x93"}, {0x1FE6, "\xCE\xA5\xCD\x82"},
        {0x1FE7, "\xCE\xA5\xCC\x88\xCD\x82"}, {0x1FF2, "\xE1\xBF\xBA\xCD\x85"}, {0x1FF4, "\xCE\x8F\xCD\x85"},
        {0x1FF6, "\xCE\xA9\xCD\x82"}, {0x1FF7, "\xCE\xA9\xCD\x82\xCD\x85"}, {0xFB00, "\x46\x66"},
        {0xFB01, "\x46\x69"}, {0xFB02, "\x46\x6C"}, {0xFB03, "\x46\x66\x69"}, {0xFB04, "\x46\x66\x6C"},
        {0xFB05, "\x53\x74"}, {0xFB06, "\x53\x74"}, {0xFB13, "\xD5\x84\xD5\xB6"}, {0xFB14, "\xD5\x84\xD5\xA5"},
        {0xFB15, "\xD5\x84\xD5\xAB"}, {0xFB16, "\xD5\x8E\xD5\xB6"}, {0xFB17, "\xD5\x84\xD5\xAD"},
    };
    for (size_t k = 0; k < sizeof special / sizeof special[0]; k++)
        if (special[k].cp == cp) {
            buf_puts(b, special[k].s);
            return;
        }
    put_cp(b, cp >= 0x110000u ? cp : (uint32_t)utf8proc_totitle((utf8proc_int32_t)cp));
}

char *py_capitalize(const char *s) {
    size_t n = strlen(s);
    // decode once: final sigma looks both ways
    uint32_t *cps = xmalloc((n + 1) * sizeof *cps);
    size_t m = 0;
    for (size_t i = 0; i < n;) cps[m++] = utf8_next(s, n, &i);
    Buf b = {0};
    for (size_t k = 0; k < m; k++) {
        uint32_t cp = cps[k];
        if (k == 0) {
            put_title(&b, cp);
        } else if (cp == 0x130) {
            buf_puts(&b, "i\xCC\x87"); // U+0069 U+0307
        } else if (cp == 0x3A3) {
            size_t j = k;
            while (j > 0 && is_case_ignorable(cps[j - 1])) j--;
            int final = j > 0 && is_cased(cps[j - 1]);
            if (final) {
                size_t e = k + 1;
                while (e < m && is_case_ignorable(cps[e])) e++;
                final = e == m || !is_cased(cps[e]);
            }
            put_cp(&b, final ? 0x3C2 : 0x3C3);
        } else {
            put_cp(&b, cp >= 0x110000u ? cp : (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp));
        }
    }
    free(cps);
    if (!b.p) return xstrdup("");
    return buf_take(&b);
}

// ---- hellaswag ----

char *hellaswag_clean(const char *s) {
    char *a = py_strip(s);
    char *t = py_replace(a, " [title]", ". ");
    free(a);
    // re.sub(r"\[.*?\]", "", t): '.' excludes only '\n', so a span ends at the first ']' on the same line
    Buf b = {0};
    for (const char *p = t; *p;) {
        if (*p == '[') {
            const char *q = p + 1;
            while (*q && *q != ']' && *q != '\n') q++;
            if (*q == ']') {
                p = q + 1;
                continue;
            }
        }
        buf_put(&b, p, 1);
        p++;
    }
    free(t);
    char *u = b.p ? buf_take(&b) : xstrdup("");
    char *out = py_replace(u, "  ", " ");
    free(u);
    return out;
}

// ---- wikitext ----

// re.sub(r"O\s*([^C]*?)\s*C", r"O\1C", s): each opener with a closer later becomes open + stripped + close.
static char *bracket_pass(char *s, char open, char close) {
    Buf b = {0};
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        if (s[i] == open) {
            const char *q = memchr(s + i + 1, close, n - i - 1);
            if (q) {
                size_t j = (size_t)(q - s);
                char *in = strip_span(s + i + 1, j - i - 1);
                buf_put(&b, &open, 1);
                buf_puts(&b, in);
                buf_put(&b, &close, 1);
                free(in);
                i = j + 1;
                continue;
            }
        }
        buf_put(&b, s + i, 1);
        i++;
    }
    free(s);
    return b.p ? buf_take(&b) : xstrdup("");
}

static char *replace_free(char *s, const char *from, const char *to) {
    char *r = py_replace(s, from, to);
    free(s);
    return r;
}

char *wikitext_detokenize(const char *page) {
    char *s = py_replace(page, "s '", "s'");
    { // re.sub(r"/' [0-9]/", r"/'[0-9]/", s): the literal text "/' <digit>/" becomes "/'[0-9]/"
        Buf b = {0};
        for (const char *p = s; *p;) {
            if (p[0] == '/' && p[1] == '\'' && p[2] == ' ' && p[3] >= '0' && p[3] <= '9' && p[4] == '/') {
                buf_puts(&b, "/'[0-9]/");
                p += 5;
            } else {
                buf_put(&b, p++, 1);
            }
        }
        free(s);
        s = b.p ? buf_take(&b) : xstrdup("");
    }
    static const char *const pairs[][2] = {
        {" @-@ ", "-"}, {" @,@ ", ","}, {" @.@ ", "."}, {" : ", ": "}, {" ; ", "; "},
        {" . ", ". "},  {" ! ", "! "},  {" ? ", "? "},  {" , ", ", "},
    };
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) s = replace_free(s, pairs[k][0], pairs[k][1]);
    s = bracket_pass(s, '(', ')');
    s = bracket_pass(s, '[', ']');
    s = bracket_pass(s, '{', '}');
    s = bracket_pass(s, '"', '"');
    s = bracket_pass(s, '\'', '\'');
    static const char *const tail[][2] = {
        {"= = = =", "===="}, {"= = =", "==="}, {"= =", "=="}, {" \xC2\xB0 ", "\xC2\xB0"},
        {" \n", "\n"},       {"\n ", "\n"},    {" N ", " 1 "}, {" 's", "'s"},
    };
    for (size_t k = 0; k < sizeof tail / sizeof tail[0]; k++) s = replace_free(s, tail[k][0], tail[k][1]);
    return s;
}

long wikitext_word_count(const char *page) {
    size_t n = strlen(page);
    long runs = 0;
    int in_space = 0;
    for (size_t i = 0; i < n;) {
        int sp = py_isspace(utf8_next(page, n, &i));
        if (sp && !in_space) runs++;
        in_space = sp;
    }
    return runs + 1;
}

// ---- Python literals (ast.literal_eval subset) ----

typedef struct {
    const char *s;
    size_t n, i;
    char *err;
    size_t errlen;
    int depth;
} Lit;

static cJSON *lit_value(Lit *L);

static void lit_ws(Lit *L) {
    while (L->i < L->n && (L->s[L->i] == ' ' || L->s[L->i] == '\t' || L->s[L->i] == '\n' || L->s[L->i] == '\r' ||
                           L->s[L->i] == '\f' || L->s[L->i] == '\v' ||
                           (L->s[L->i] == '\\' && L->i + 1 < L->n && L->s[L->i + 1] == '\n')))
        L->i += L->s[L->i] == '\\' ? 2 : 1;
}

static cJSON *lit_fail(Lit *L, const char *what) {
    set_err(L->err, L->errlen, "offset %zu: %s", L->i, what);
    return NULL;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// One quoted string (prefix letters already consumed), appended to b.
static int lit_string(Lit *L, Buf *b, int raw) {
    char q = L->s[L->i];
    int triple = L->i + 2 < L->n && L->s[L->i + 1] == q && L->s[L->i + 2] == q;
    L->i += triple ? 3 : 1;
    for (;;) {
        if (L->i >= L->n) return lit_fail(L, "unterminated string literal"), -1;
        char c = L->s[L->i];
        if (c == q && (!triple || (L->i + 2 < L->n && L->s[L->i + 1] == q && L->s[L->i + 2] == q))) {
            L->i += triple ? 3 : 1;
            return 0;
        }
        if (c == '\n' && !triple) return lit_fail(L, "newline inside a string literal"), -1;
        if (c != '\\') {
            buf_put(b, &c, 1);
            L->i++;
            continue;
        }
        if (L->i + 1 >= L->n) return lit_fail(L, "unterminated string literal"), -1;
        char e = L->s[L->i + 1];
        if (raw) { // raw strings keep the backslash; \<quote> does not end the string
            buf_put(b, L->s + L->i, 2);
            L->i += 2;
            continue;
        }
        L->i += 2;
        uint32_t cp;
        int nd = 0;
        switch (e) {
        case '\n': continue;
        case '\\': buf_puts(b, "\\"); continue;
        case '\'': buf_puts(b, "'"); continue;
        case '"': buf_puts(b, "\""); continue;
        case 'a': buf_puts(b, "\a"); continue;
        case 'b': buf_puts(b, "\b"); continue;
        case 'f': buf_puts(b, "\f"); continue;
        case 'n': buf_puts(b, "\n"); continue;
        case 'r': buf_puts(b, "\r"); continue;
        case 't': buf_puts(b, "\t"); continue;
        case 'v': buf_puts(b, "\v"); continue;
        case 'x': nd = 2; break;
        case 'u': nd = 4; break;
        case 'U': nd = 8; break;
        case 'N': return lit_fail(L, "\\N{...} escapes are not supported"), -1;
        default:
            if (e >= '0' && e <= '7') { // up to 3 octal digits
                cp = (uint32_t)(e - '0');
                for (int k = 0; k < 2 && L->i < L->n && L->s[L->i] >= '0' && L->s[L->i] <= '7'; k++)
                    cp = cp * 8 + (uint32_t)(L->s[L->i++] - '0');
                put_cp(b, cp);
                continue;
            }
            buf_put(b, L->s + L->i - 2, 2); // unknown escape: kept verbatim, as Python does
            continue;
        }
        cp = 0;
        for (int k = 0; k < nd; k++) {
            int h = L->i < L->n ? hexval(L->s[L->i]) : -1;
            if (h < 0) return lit_fail(L, "truncated \\x/\\u/\\U escape"), -1;
            cp = cp * 16 + (uint32_t)h;
            L->i++;
        }
        if (cp > 0x10FFFF) return lit_fail(L, "escape beyond U+10FFFF"), -1;
        put_cp(b, cp);
    }
}

static cJSON *lit_strings(Lit *L) {
    Buf b = {0};
    int any = 0;
    for (;;) { // adjacent literals concatenate: 'a' "b" == 'ab'
        size_t save = L->i;
        int raw = 0;
        while (L->i < L->n && L->s[L->i] && strchr("uUrRbB", L->s[L->i])) {
            if (L->s[L->i] == 'r' || L->s[L->i] == 'R') raw = 1;
            if (L->s[L->i] == 'b' || L->s[L->i] == 'B') {
                buf_free(&b);
                return lit_fail(L, "bytes literals are not supported");
            }
            L->i++;
        }
        if (L->i >= L->n || (L->s[L->i] != '\'' && L->s[L->i] != '"')) {
            L->i = save;
            break;
        }
        if (lit_string(L, &b, raw) < 0) {
            buf_free(&b);
            return NULL;
        }
        any = 1;
        lit_ws(L);
    }
    if (!any) return lit_fail(L, "expected a value");
    buf_put(&b, "", 1);
    cJSON *v = cJSON_CreateString(b.p);
    buf_free(&b);
    return v;
}

static cJSON *lit_container(Lit *L, char close, int is_dict) {
    L->i++;
    cJSON *c = is_dict ? cJSON_CreateObject() : cJSON_CreateArray();
    for (;;) {
        lit_ws(L);
        if (L->i < L->n && L->s[L->i] == close) {
            L->i++;
            return c;
        }
        cJSON *key = NULL;
        if (is_dict) {
            key = lit_value(L);
            if (!key) goto fail;
            if (!cJSON_IsString(key)) {
                cJSON_Delete(key);
                lit_fail(L, "dict keys must be strings here");
                goto fail;
            }
            lit_ws(L);
            if (L->i >= L->n || L->s[L->i] != ':') {
                cJSON_Delete(key);
                lit_fail(L, "expected ':'");
                goto fail;
            }
            L->i++;
        }
        cJSON *v = lit_value(L);
        if (!v) {
            cJSON_Delete(key);
            goto fail;
        }
        if (is_dict) {
            cJSON_DeleteItemFromObjectCaseSensitive(c, key->valuestring); // later keys win, as in Python
            cJSON_AddItemToObject(c, key->valuestring, v);
            cJSON_Delete(key);
        } else {
            cJSON_AddItemToArray(c, v);
        }
        lit_ws(L);
        if (L->i < L->n && L->s[L->i] == ',') {
            L->i++;
            continue;
        }
        if (L->i < L->n && L->s[L->i] == close) {
            L->i++;
            return c;
        }
        lit_fail(L, close == ']' ? "expected ',' or ']'" : close == ')' ? "expected ',' or ')'" : "expected ',' or '}'");
        goto fail;
    }
fail:
    cJSON_Delete(c);
    return NULL;
}

static cJSON *lit_value(Lit *L) {
    lit_ws(L);
    if (L->i >= L->n) return lit_fail(L, "unexpected end of literal");
    if (++L->depth > 64) return lit_fail(L, "nested too deeply");
    cJSON *v = NULL;
    char c = L->s[L->i];
    if (c == '[') v = lit_container(L, ']', 0);
    else if (c == '(') v = lit_container(L, ')', 0);
    else if (c == '{') v = lit_container(L, '}', 1);
    else if (c == '-' || c == '+' || isdigit((unsigned char)c) || c == '.') {
        size_t st = L->i;
        if (c == '-' || c == '+') L->i++;
        while (L->i < L->n && (isalnum((unsigned char)L->s[L->i]) || L->s[L->i] == '.' || L->s[L->i] == '_' ||
                               ((L->s[L->i] == '-' || L->s[L->i] == '+') && (L->s[L->i - 1] == 'e' || L->s[L->i - 1] == 'E'))))
            L->i++;
        char tmp[64];
        size_t len = L->i - st, w = 0;
        if (len >= sizeof tmp) return lit_fail(L, "number literal too long");
        for (size_t k = st; k < L->i; k++)
            if (L->s[k] != '_') tmp[w++] = L->s[k];
        tmp[w] = 0;
        char *end;
        double d = strtod(tmp, &end);
        if (*end || end == tmp) {
            L->i = st;
            return lit_fail(L, "malformed number");
        }
        v = cJSON_CreateNumber(d);
    } else if (!strncmp(L->s + L->i, "True", 4) && (L->i + 4 >= L->n || !isalnum((unsigned char)L->s[L->i + 4]))) {
        L->i += 4;
        v = cJSON_CreateTrue();
    } else if (!strncmp(L->s + L->i, "False", 5) && (L->i + 5 >= L->n || !isalnum((unsigned char)L->s[L->i + 5]))) {
        L->i += 5;
        v = cJSON_CreateFalse();
    } else if (!strncmp(L->s + L->i, "None", 4) && (L->i + 4 >= L->n || !isalnum((unsigned char)L->s[L->i + 4]))) {
        L->i += 4;
        v = cJSON_CreateNull();
    } else {
        v = lit_strings(L);
    }
    L->depth--;
    return v;
}

cJSON *pylit_parse(const char *s, size_t n, char *err, size_t errlen) {
    Lit L = {s, n, 0, err, errlen, 0};
    cJSON *v = lit_value(&L);
    if (!v) return NULL;
    lit_ws(&L);
    if (L.i != L.n) {
        cJSON_Delete(v);
        return lit_fail(&L, "unexpected text after the literal");
    }
    return v;
}
