// tokenize_cmd.c: `gdn tokenize`, text on stdin -> token ids on stdout (or ids -> text with --decode).
// Plain mode treats all of stdin as one text; --jsonl works line by line (a JSON string or an object with a
// "text" string per line; JSON arrays of ids when decoding) and spreads lines over threads, keeping order.
// JSON lines are read by a small scanner here rather than cJSON, because cJSON cuts strings at "\u0000".
#include <errno.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "data/tok_utf8.h"
#include "data/tokenizer.h"
#include "util/args.h"
#include "util/common.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: gdn tokenize --tokenizer PATH [--no-bos] [--jsonl] [--decode] [--skip-special] [--threads N] [--stats]\n"
            "\n"
            "Reads stdin, writes stdout.\n"
            "  (default)        all of stdin is one text -> one line of space-separated token ids\n"
            "  --jsonl          each line is a JSON string or an object with a \"text\" string -> a JSON array of ids\n"
            "                   per line (lines are processed in parallel; output keeps input order)\n"
            "  --decode         ids -> text: whitespace-separated ids -> the text as is (no newline added);\n"
            "                   with --jsonl, a JSON array of ids per line -> a JSON string per line\n"
            "  --tokenizer PATH HF tokenizer.json (byte-level BPE: Llama 3, GPT-2 style)\n"
            "  --no-bos         leave out the BOS token that the tokenizer's post-processor adds\n"
            "  --skip-special   with --decode: drop special tokens (<|begin_of_text|>, ...)\n"
            "  --threads N      threads for --jsonl (default: all cores)\n"
            "  --stats          print texts, bytes, tokens and throughput to stderr at the end\n"
            "Invalid UTF-8 in the input is replaced by U+FFFD (one per maximal invalid sequence) and counted on stderr.\n");
}

typedef struct {
    const Tokenizer *tok;
    int add_bos, decode, skip_special;
} Opts;

// ---- a JSON scanner for one line --------------------------------------------------------------------------
typedef struct {
    const char *s, *end;
    const char *err; // first error message
} Scan;

static void skip_ws(Scan *sc) {
    while (sc->s < sc->end && (*sc->s == ' ' || *sc->s == '\t' || *sc->s == '\r' || *sc->s == '\n')) sc->s++;
}

static int hex4(const char *p, const char *end, uint32_t *v) {
    if (end - p < 4) return -1;
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        *v = *v << 4 | (uint32_t)d;
    }
    return 0;
}

// Parses a JSON string at sc->s (on the opening quote); appends its UTF-8 to out if non-NULL. A lone
// surrogate escape becomes U+FFFD (it has no UTF-8 form; Python would refuse it at tokenization).
static int scan_string(Scan *sc, Buf *out) {
    if (sc->s >= sc->end || *sc->s != '"') return sc->err = "expected a string", -1;
    const char *p = sc->s + 1;
    for (;;) {
        const char *run = p;
        while (p < sc->end && *p != '"' && *p != '\\' && (unsigned char)*p >= 0x20) p++;
        if (out) buf_put(out, run, (size_t)(p - run));
        if (p >= sc->end) return sc->err = "unterminated string", -1;
        if (*p == '"') break;
        if ((unsigned char)*p < 0x20) return sc->err = "control character inside a string", -1;
        if (++p >= sc->end) return sc->err = "unterminated string", -1;
        char e = *p++;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (simple && e) {
            static const char repl[] = "\"\\/\b\f\n\r\t";
            if (out) buf_put(out, &repl[simple - "\"\\/bfnrt"], 1);
            continue;
        }
        uint32_t cp;
        if (e != 'u' || hex4(p, sc->end, &cp)) return sc->err = "bad escape in a string", -1;
        p += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF && sc->end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
            uint32_t lo;
            if (!hex4(p + 2, sc->end, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                p += 6;
            }
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
        uint8_t u[4];
        int n = tok_utf8_put(cp, u);
        if (out) buf_put(out, u, (size_t)n);
    }
    sc->s = p + 1;
    return 0;
}

static int scan_value(Scan *sc, int depth);

static int scan_number(Scan *sc) {
    const char *p = sc->s;
    if (p < sc->end && *p == '-') p++;
    const char *digits = p;
    while (p < sc->end && ((*p >= '0' && *p <= '9') || *p == '.' || *p == 'e' || *p == 'E' || *p == '+' || *p == '-')) p++;
    if (p == digits) return sc->err = "unexpected character", -1;
    sc->s = p;
    return 0;
}

// Skips any JSON value (validating its shape).
static int scan_value(Scan *sc, int depth) {
    skip_ws(sc);
    if (sc->s >= sc->end) return sc->err = "unexpected end of line", -1;
    if (depth > 64) return sc->err = "nesting too deep", -1;
    char c = *sc->s;
    if (c == '"') return scan_string(sc, NULL);
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        sc->s++;
        skip_ws(sc);
        if (sc->s < sc->end && *sc->s == close) return sc->s++, 0;
        for (;;) {
            if (c == '{') {
                skip_ws(sc);
                if (scan_string(sc, NULL)) return -1;
                skip_ws(sc);
                if (sc->s >= sc->end || *sc->s != ':') return sc->err = "expected ':' after a key", -1;
                sc->s++;
            }
            if (scan_value(sc, depth + 1)) return -1;
            skip_ws(sc);
            if (sc->s < sc->end && *sc->s == ',') { sc->s++; continue; }
            if (sc->s < sc->end && *sc->s == close) return sc->s++, 0;
            return sc->err = c == '{' ? "expected ',' or '}'" : "expected ',' or ']'", -1;
        }
    }
    static const char *const words[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(words[i]);
        if ((size_t)(sc->end - sc->s) >= n && !memcmp(sc->s, words[i], n)) return sc->s += n, 0;
    }
    return scan_number(sc);
}

// A line of --jsonl input: a JSON string, or an object whose "text" member is a string. Fills out.
static int parse_text_line(const char *line, size_t n, Buf *out, const char **err) {
    Scan sc = {line, line + n, NULL};
    skip_ws(&sc);
    int found = 0;
    if (sc.s < sc.end && *sc.s == '"') {
        if (scan_string(&sc, out)) return *err = sc.err, -1;
        found = 1;
    } else if (sc.s < sc.end && *sc.s == '{') {
        sc.s++;
        skip_ws(&sc);
        if (sc.s < sc.end && *sc.s == '}') sc.s++;
        else
            for (;;) {
                skip_ws(&sc);
                Buf key = {0};
                int rc = scan_string(&sc, &key);
                int is_text = !rc && key.n == 4 && !memcmp(key.p, "text", 4);
                buf_free(&key);
                if (rc) return *err = sc.err, -1;
                skip_ws(&sc);
                if (sc.s >= sc.end || *sc.s != ':') return *err = "expected ':' after a key", -1;
                sc.s++;
                skip_ws(&sc);
                if (is_text) {
                    if (found) return *err = "\"text\" appears twice", -1;
                    if (sc.s >= sc.end || *sc.s != '"') return *err = "\"text\" is not a string", -1;
                    if (scan_string(&sc, out)) return *err = sc.err, -1;
                    found = 1;
                } else if (scan_value(&sc, 1)) {
                    return *err = sc.err, -1;
                }
                skip_ws(&sc);
                if (sc.s < sc.end && *sc.s == ',') { sc.s++; continue; }
                if (sc.s < sc.end && *sc.s == '}') { sc.s++; break; }
                return *err = "expected ',' or '}'", -1;
            }
        if (!found) return *err = "the object has no \"text\" member", -1;
    } else {
        return *err = "expected a JSON string or an object with a \"text\" string", -1;
    }
    skip_ws(&sc);
    if (sc.s != sc.end) return *err = "unexpected characters after the JSON value", -1;
    return 0;
}

// ---- ids in text form -------------------------------------------------------------------------------------
// Parses one id at *p (digits); -1 + err if not an id of the vocabulary.
static int parse_id(const char **p, const char *end, const Tokenizer *tok, int32_t *id, char *err, size_t errlen) {
    const char *s = *p;
    long long v = 0;
    const char *q = s;
    while (q < end && *q >= '0' && *q <= '9' && v <= 0x7fffffff) v = v * 10 + (*q++ - '0');
    if (q == s || (q < end && !(*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n' || *q == ',' || *q == ']'))) {
        const char *w = s;
        while (w < end && w - s < 24 && !(*w == ' ' || *w == '\t' || *w == '\n' || *w == ',' || *w == ']')) w++;
        return set_err(err, errlen, "expected a token id, found \"%.*s\"", (int)(w - s), s);
    }
    if (v >= tok_vocab_size(tok) || !tok_token_bytes(tok, (int32_t)v, NULL))
        return set_err(err, errlen, "token id %lld is not in the vocabulary (size %d)", v, tok_vocab_size(tok));
    *id = (int32_t)v;
    *p = q;
    return 0;
}

static int parse_id_array(const char *line, size_t n, const Tokenizer *tok, int32_t **ids, size_t *cap, size_t *count,
                          char *err, size_t errlen) {
    const char *p = line, *end = line + n;
    Scan sc = {p, end, NULL};
    skip_ws(&sc);
    if (sc.s >= end || *sc.s != '[') return set_err(err, errlen, "expected a JSON array of token ids");
    sc.s++;
    *count = 0;
    skip_ws(&sc);
    if (sc.s < end && *sc.s == ']') sc.s++;
    else
        for (;;) {
            skip_ws(&sc);
            int32_t id;
            if (parse_id(&sc.s, end, tok, &id, err, errlen)) return -1;
            if (*count == *cap) *ids = xrealloc(*ids, (*cap = *cap ? *cap * 2 : 256) * sizeof **ids);
            (*ids)[(*count)++] = id;
            skip_ws(&sc);
            if (sc.s < end && *sc.s == ',') { sc.s++; continue; }
            if (sc.s < end && *sc.s == ']') { sc.s++; break; }
            return set_err(err, errlen, "expected ',' or ']' in the array of ids");
        }
    skip_ws(&sc);
    if (sc.s != end) return set_err(err, errlen, "unexpected characters after the array");
    return 0;
}

static void put_json_string(Buf *b, const char *s, size_t n) {
    buf_put(b, "\"", 1);
    for (size_t i = 0; i < n;) {
        size_t run = i;
        while (i < n && (unsigned char)s[i] >= 0x20 && s[i] != '"' && s[i] != '\\') i++;
        buf_put(b, s + run, i - run);
        if (i >= n) break;
        unsigned char c = (unsigned char)s[i++];
        if (c == '"') buf_puts(b, "\\\"");
        else if (c == '\\') buf_puts(b, "\\\\");
        else if (c == '\n') buf_puts(b, "\\n");
        else if (c == '\r') buf_puts(b, "\\r");
        else if (c == '\t') buf_puts(b, "\\t");
        else buf_printf(b, "\\u%04x", c);
    }
    buf_put(b, "\"", 1);
}

static void put_ids(Buf *b, const int32_t *ids, size_t n, int json) {
    if (json) buf_put(b, "[", 1);
    for (size_t i = 0; i < n; i++) { // ids are non-negative: plain digit loop (snprintf per id dominated)
        char num[16], *end = num + sizeof num, *p = end;
        uint32_t v = (uint32_t)ids[i];
        do *--p = (char)('0' + v % 10);
        while (v /= 10);
        if (i) json ? (*--p = ' ', *--p = ',') : (*--p = ' ');
        buf_put(b, p, (size_t)(end - p));
    }
    if (json) buf_put(b, "]", 1);
    buf_put(b, "\n", 1);
}

// ---- modes ------------------------------------------------------------------------------------------------
typedef struct {
    size_t texts, bytes, tokens, invalid_utf8;
} Stats;

static Buf read_all_stdin(void) {
    Buf b = {0};
    char chunk[1 << 16];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0) buf_put(&b, chunk, n);
    if (ferror(stdin)) die("tokenize: reading stdin: %s", strerror(errno));
    return b;
}

static void write_out(const void *p, size_t n) {
    if (n && fwrite(p, 1, n, stdout) != n) die("tokenize: writing stdout: %s", strerror(errno));
}

static void run_plain(const Opts *o, Stats *st) {
    Buf in = read_all_stdin();
    Buf out = {0};
    if (!o->decode) {
        int32_t *ids = NULL;
        size_t cap = 0;
        st->invalid_utf8 = tok_utf8_invalid_count(in.p ? in.p : "", in.n);
        size_t n = tok_encode(o->tok, in.p ? in.p : "", in.n, o->add_bos, &ids, &cap);
        put_ids(&out, ids, n, 0);
        st->texts = 1, st->bytes = in.n, st->tokens = n;
        free(ids);
    } else {
        int32_t *ids = NULL;
        size_t cap = 0, n = 0;
        const char *p = in.p, *end = in.p + in.n;
        int line = 1;
        char err[ERR_LEN];
        while (p < end) {
            if (*p == '\n') { line++, p++; continue; }
            if (*p == ' ' || *p == '\t' || *p == '\r') { p++; continue; }
            int32_t id;
            if (parse_id(&p, end, o->tok, &id, err, sizeof err)) die("tokenize --decode: stdin line %d: %s", line, err);
            if (n == cap) ids = xrealloc(ids, (cap = cap ? cap * 2 : 1024) * sizeof *ids);
            ids[n++] = id;
        }
        size_t len;
        char *text = tok_decode(o->tok, ids, n, o->skip_special, &len);
        buf_put(&out, text, len);
        st->texts = 1, st->bytes = len, st->tokens = n;
        free(text);
        free(ids);
    }
    write_out(out.p, out.n);
    buf_free(&out);
    buf_free(&in);
}

// One batch of --jsonl lines: converted in parallel, each into its own output buffer.
typedef struct {
    char **line;
    size_t *len;
    Buf *out;
    char (*err)[ERR_LEN];
    size_t *tokens, *bytes, *invalid;
    size_t n, cap;
} Batch;

static void run_batch(const Opts *o, Batch *b, long first_line, Stats *st, int threads) {
#pragma omp parallel num_threads(threads)
    {
        int32_t *ids = NULL;
        size_t cap = 0;
        Buf text = {0};
#pragma omp for schedule(dynamic, 8)
        for (size_t i = 0; i < b->n; i++) {
            const char *msg = NULL;
            b->out[i].n = 0;
            b->err[i][0] = 0;
            b->tokens[i] = b->bytes[i] = b->invalid[i] = 0;
            if (!o->decode) {
                text.n = 0;
                if (parse_text_line(b->line[i], b->len[i], &text, &msg)) {
                    snprintf(b->err[i], ERR_LEN, "%s", msg);
                    continue;
                }
                const char *s = text.p ? text.p : "";
                b->invalid[i] = tok_utf8_invalid_count(s, text.n);
                size_t n = tok_encode(o->tok, s, text.n, o->add_bos, &ids, &cap);
                put_ids(&b->out[i], ids, n, 1);
                b->tokens[i] = n, b->bytes[i] = text.n;
            } else {
                size_t n = 0;
                if (parse_id_array(b->line[i], b->len[i], o->tok, &ids, &cap, &n, b->err[i], ERR_LEN)) continue;
                size_t len;
                char *s = tok_decode(o->tok, ids, n, o->skip_special, &len);
                put_json_string(&b->out[i], s, len);
                buf_put(&b->out[i], "\n", 1);
                free(s);
                b->tokens[i] = n, b->bytes[i] = len;
            }
        }
        free(ids);
        buf_free(&text);
    }
    for (size_t i = 0; i < b->n; i++) {
        if (b->err[i][0]) {
            fflush(stdout); // everything before the bad line is out
            die("tokenize%s: stdin line %ld: %s", o->decode ? " --decode" : "", first_line + (long)i, b->err[i]);
        }
        write_out(b->out[i].p, b->out[i].n);
        st->texts++, st->tokens += b->tokens[i], st->bytes += b->bytes[i], st->invalid_utf8 += b->invalid[i];
    }
}

static void run_jsonl(const Opts *o, Stats *st, int threads, double t0) {
    Batch b = {0};
    const size_t max_lines = 4096, max_bytes = 8u << 20; // a batch: enough work to share, bounded memory
    char *line = NULL;
    size_t line_cap = 0;
    long line_no = 0, batch_first = 1;
    size_t batch_bytes = 0;
    double last_progress = t0;
    for (;;) {
        ssize_t n = getline(&line, &line_cap, stdin);
        if (n < 0 && ferror(stdin)) die("tokenize: reading stdin: %s", strerror(errno));
        if (n >= 0) {
            line_no++;
            size_t len = (size_t)n;
            if (len && line[len - 1] == '\n') len--;
            if (b.n == b.cap) {
                b.cap = b.cap ? b.cap * 2 : 256;
                b.line = xrealloc(b.line, b.cap * sizeof *b.line);
                b.len = xrealloc(b.len, b.cap * sizeof *b.len);
                b.out = xrealloc(b.out, b.cap * sizeof *b.out);
                b.err = xrealloc(b.err, b.cap * sizeof *b.err);
                b.tokens = xrealloc(b.tokens, b.cap * sizeof *b.tokens);
                b.bytes = xrealloc(b.bytes, b.cap * sizeof *b.bytes);
                b.invalid = xrealloc(b.invalid, b.cap * sizeof *b.invalid);
                for (size_t i = b.n; i < b.cap; i++) b.out[i] = (Buf){0};
            }
            b.line[b.n] = xmalloc(len + 1);
            memcpy(b.line[b.n], line, len);
            b.len[b.n++] = len;
            batch_bytes += len;
        }
        if (b.n && (n < 0 || b.n >= max_lines || batch_bytes >= max_bytes)) {
            run_batch(o, &b, batch_first, st, threads);
            for (size_t i = 0; i < b.n; i++) free(b.line[i]);
            batch_first += (long)b.n;
            b.n = 0, batch_bytes = 0;
            double now = now_sec();
            if (now - last_progress >= 10) {
                fprintf(stderr, "tokenize: %zu lines, %.1f MB, %zu tokens, %.1f MB/s\n", st->texts, st->bytes / 1e6,
                        st->tokens, st->bytes / 1e6 / (now - t0));
                last_progress = now;
            }
        }
        if (n < 0) break;
    }
    free(line);
    for (size_t i = 0; i < b.cap; i++) buf_free(&b.out[i]);
    free(b.line), free(b.len), free(b.out), free(b.err), free(b.tokens), free(b.bytes), free(b.invalid);
}

int cmd_tokenize(int argc, char **argv) {
    if (arg_is_help(argc, argv)) return usage(stdout), 0;
    const char *path = NULL;
    int jsonl = 0, stats = 0, threads = omp_get_num_procs();
    Opts o = {.add_bos = 1};
    static const ArgSpec spec[] = {
        {"--tokenizer", ARG_STR, 0, 0}, {"--no-bos", ARG_FLAG, 0, 0}, {"--jsonl", ARG_FLAG, 0, 0},
        {"--decode", ARG_FLAG, 0, 0},   {"--skip-special", ARG_FLAG, 0, 0}, {"--stats", ARG_FLAG, 0, 0},
        {"--threads", ARG_INT, 1, 1024},
    };
    Args a;
    args_parse(&a, "tokenize", argc, argv, spec, sizeof spec / sizeof spec[0], 0);
    path = args_str(&a, "--tokenizer", NULL);
    o.add_bos = !args_flag(&a, "--no-bos");
    jsonl = args_flag(&a, "--jsonl"), stats = args_flag(&a, "--stats");
    o.decode = args_flag(&a, "--decode"), o.skip_special = args_flag(&a, "--skip-special");
    threads = (int)args_int(&a, "--threads", threads);
    if (!path) {
        fprintf(stderr, "gdn tokenize: --tokenizer PATH is required\n");
        usage(stderr);
        return 2;
    }
    if (o.skip_special && !o.decode) die("tokenize: --skip-special only applies with --decode");
    char err[ERR_LEN];
    Tokenizer *tok = tok_load(path, err, sizeof err);
    if (!tok) die("tokenize: %s", err);
    o.tok = tok;
    Stats st = {0};
    double t0 = now_sec();
    if (jsonl) run_jsonl(&o, &st, threads, t0);
    else run_plain(&o, &st);
    if (fflush(stdout)) die("tokenize: writing stdout: %s", strerror(errno));
    double dt = now_sec() - t0;
    if (st.invalid_utf8)
        fprintf(stderr, "tokenize: warning: %zu invalid UTF-8 sequence(s) in the input were replaced by U+FFFD\n",
                st.invalid_utf8);
    if (stats)
        fprintf(stderr, "tokenize: %zu text(s), %zu bytes, %zu tokens, %.3f s, %.2f MB/s, %.0f tokens/s (%d thread(s))\n",
                st.texts, st.bytes, st.tokens, dt, dt > 0 ? st.bytes / 1e6 / dt : 0.0, dt > 0 ? st.tokens / dt : 0.0,
                jsonl ? threads : 1);
    tok_free(tok);
    return 0;
}
