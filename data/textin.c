// textin.c: the input readers of `gdn prepare` (see textin.h): a byte source (plain / gzip / zstd), a
// line splitter over a growable window of the decompressed stream, the record rules of each format,
// and a small validating JSON scanner that decodes one string value without building a tree.
#define _GNU_SOURCE
#include "textin.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "data/parquet.h"

#define MAX_RECORD ((size_t)1 << 30) // one document must fit in memory; past this the input is surely wrong
#define READ_CHUNK ((size_t)1 << 20)

// ---------------------------------------------------------------------------------------------------------
// Byte source: the decompressed stream of one file.

typedef struct {
    TextInCodec codec;
    const char *path;
    int fd;
    gzFile gz;
    int gz_checked; // gzdirect() is known only after the first read
    ZSTD_DCtx *zd;
    ZSTD_inBuffer zin;
    void *zin_buf;
    size_t zin_cap, zlast; // zlast: last ZSTD_decompressStream return (0 = at a frame end)
    int zeof, zpending;    // zpending: the last call filled the output, more may be buffered inside
    uint64_t raw_read;     // bytes read from fd (plain, zstd)
} ByteSrc;

static int src_open(ByteSrc *s, const char *path, TextInCodec codec, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    s->codec = codec;
    s->path = path;
    s->fd = open(path, O_RDONLY);
    if (s->fd < 0) return set_err(err, errlen, "cannot open %s: %s", path, strerror(errno));
    if (codec == TEXTIN_GZIP) {
        s->gz = gzdopen(s->fd, "rb");
        if (!s->gz) {
            close(s->fd), s->fd = -1;
            return set_err(err, errlen, "%s: cannot start gzip reader", path);
        }
        gzbuffer(s->gz, 1 << 18);
    } else if (codec == TEXTIN_ZSTD) {
        s->zd = ZSTD_createDCtx();
        s->zin_cap = ZSTD_DStreamInSize();
        s->zin_buf = xmalloc(s->zin_cap);
        s->zin = (ZSTD_inBuffer){s->zin_buf, 0, 0};
        s->zlast = 1; // no complete frame seen yet: an empty file is a truncated one
    }
    return 0;
}

static void src_close(ByteSrc *s) {
    if (s->gz) gzclose(s->gz); // closes fd too
    else if (s->fd >= 0) close(s->fd);
    if (s->zd) ZSTD_freeDCtx(s->zd);
    free(s->zin_buf);
    s->gz = NULL, s->fd = -1, s->zd = NULL, s->zin_buf = NULL;
}

// A read interrupted by a signal (EINTR: a handler was installed without SA_RESTART) ends with an error, so
// the caller can act on the signal even while waiting on a pipe.
static long read_fd(ByteSrc *s, void *buf, size_t n, char *err, size_t errlen) {
    ssize_t r = read(s->fd, buf, n);
    if (r < 0) return set_err(err, errlen, "error reading %s: %s", s->path, strerror(errno));
    s->raw_read += (uint64_t)r;
    return (long)r;
}

// >0 bytes, 0 at the end of the stream, -1 on error (err says which file and what).
static long src_read(ByteSrc *s, void *buf, size_t n, char *err, size_t errlen) {
    if (s->codec == TEXTIN_PLAIN) return read_fd(s, buf, n, err, errlen);
    if (s->codec == TEXTIN_GZIP) {
        int r = gzread(s->gz, buf, (unsigned)(n > (1u << 30) ? (1u << 30) : n));
        if (!s->gz_checked) {
            s->gz_checked = 1;
            if (r > 0 && gzdirect(s->gz)) return set_err(err, errlen, "%s: not gzip data (bad magic bytes)", s->path);
        }
        int code;
        const char *msg = gzerror(s->gz, &code);
        if (r < 0 || (code != Z_OK && code != Z_STREAM_END)) {
            if (code == Z_BUF_ERROR)
                return set_err(err, errlen, "%s: truncated gzip stream (unexpected end of file)", s->path);
            return set_err(err, errlen, "%s: corrupt gzip stream: %s", s->path, msg ? msg : "read error");
        }
        return r;
    }
    for (;;) { // zstd
        if (s->zin.pos == s->zin.size && !s->zeof && !s->zpending) {
            long r = read_fd(s, s->zin_buf, s->zin_cap, err, errlen);
            if (r < 0) return -1;
            s->zin.size = (size_t)r, s->zin.pos = 0;
            if (r == 0) s->zeof = 1;
        }
        if (s->zin.pos == s->zin.size && s->zeof && !s->zpending) {
            if (s->zlast != 0)
                return set_err(err, errlen, "%s: truncated zstd stream (input ends inside a frame)", s->path);
            return 0;
        }
        ZSTD_outBuffer out = {buf, n, 0};
        size_t ret = ZSTD_decompressStream(s->zd, &out, &s->zin);
        if (ZSTD_isError(ret))
            return set_err(err, errlen, "%s: corrupt zstd stream: %s", s->path, ZSTD_getErrorName(ret));
        s->zlast = ret;
        s->zpending = out.pos == out.size;
        if (out.pos) return (long)out.pos;
    }
}

// Compressed bytes consumed so far (an estimate for gzip: includes zlib's read-ahead).
static uint64_t src_consumed(const ByteSrc *s) {
    if (s->codec == TEXTIN_GZIP) {
        z_off_t o = gzoffset(s->gz);
        return o > 0 ? (uint64_t)o : 0;
    }
    if (s->codec == TEXTIN_ZSTD) return s->raw_read - (s->zin.size - s->zin.pos);
    return s->raw_read;
}

// ---------------------------------------------------------------------------------------------------------
// Reader.

struct TextInput {
    char *path, *key;
    TextInFormat fmt;
    TextInCodec codec;
    TextMode mode;
    uint64_t size;
    ByteSrc src;
    char *buf;               // window of the decompressed stream: buf[0..end) = stream[buf_off..buf_off+end)
    size_t cap, end, pos;    // pos: next unread byte
    size_t keep;             // bytes before keep may be dropped when refilling
    uint64_t buf_off, line;  // line: lines consumed so far
    int eof, started, done;
    int regular; // a regular file (not a pipe): records can be read back by offset
    ParquetReader *pq;
    int64_t pq_rows, pq_row;
};

int textin_detect(const char *path, TextInFormat *fmt, TextInCodec *codec, char *err, size_t errlen) {
    size_t n = strlen(path);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    *codec = TEXTIN_PLAIN;
    if (n > 3 && !strcmp(path + n - 3, ".gz")) *codec = TEXTIN_GZIP, n -= 3;
    else if (n > 4 && !strcmp(path + n - 4, ".zst")) *codec = TEXTIN_ZSTD, n -= 4;
    static const struct { const char *ext; TextInFormat fmt; } exts[] = {
        {".jsonl", TEXTIN_JSONL}, {".json", TEXTIN_JSONL}, {".ndjson", TEXTIN_JSONL},
        {".txt", TEXTIN_TEXT},    {".text", TEXTIN_TEXT},  {".parquet", TEXTIN_PARQUET},
    };
    for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++) {
        size_t e = strlen(exts[i].ext);
        if (n > e && n - e > (size_t)(base - path) && !strncmp(path + n - e, exts[i].ext, e)) {
            *fmt = exts[i].fmt;
            if (*fmt == TEXTIN_PARQUET && *codec != TEXTIN_PLAIN)
                return set_err(err, errlen, "%s: a Parquet file compresses its own pages; pass it uncompressed", path);
            return 0;
        }
    }
    return set_err(err, errlen,
                   "%s: unknown input type (expected .jsonl/.json/.ndjson or .txt/.text, optionally .gz/.zst, "
                   "or .parquet)", path);
}

TextInput *textin_open(const char *path, const TextInOptions *opt, char *err, size_t errlen) {
    TextInFormat fmt;
    TextInCodec codec;
    if (textin_detect(path, &fmt, &codec, err, errlen)) return NULL;
    struct stat st;
    if (stat(path, &st) != 0) { set_err(err, errlen, "cannot open %s: %s", path, strerror(errno)); return NULL; }
    if (S_ISDIR(st.st_mode)) { set_err(err, errlen, "%s: is a directory", path); return NULL; }
    if (codec != TEXTIN_PLAIN && st.st_size == 0) {
        set_err(err, errlen, "%s: empty file, not %s data", path, codec == TEXTIN_GZIP ? "gzip" : "zstd");
        return NULL;
    }
    TextInput *in = xcalloc(1, sizeof *in);
    in->path = xstrdup(path);
    in->key = xstrdup(opt->key ? opt->key : "text");
    in->fmt = fmt, in->codec = codec, in->mode = opt->text_mode, in->size = (uint64_t)st.st_size;
    in->regular = S_ISREG(st.st_mode);
    in->src.fd = -1;
    if (fmt == TEXTIN_PARQUET) {
        in->pq = parquet_open(path, in->key, err, errlen);
        if (!in->pq) { textin_close(in); return NULL; }
        in->pq_rows = parquet_num_rows(in->pq);
        return in;
    }
    if (src_open(&in->src, in->path, codec, err, errlen)) { textin_close(in); return NULL; }
    in->cap = READ_CHUNK;
    in->buf = xmalloc(in->cap);
    return in;
}

void textin_close(TextInput *in) {
    if (!in) return;
    if (in->pq) parquet_close(in->pq);
    src_close(&in->src);
    free(in->buf), free(in->path), free(in->key), free(in);
}

TextInFormat textin_format(const TextInput *in) { return in->fmt; }
uint64_t textin_file_size(const TextInput *in) { return in->size; }
int textin_random_access(const TextInput *in) {
    return in->regular && in->fmt != TEXTIN_PARQUET && in->codec == TEXTIN_PLAIN;
}

uint64_t textin_bytes_read(const TextInput *in) {
    if (in->pq) return in->pq_rows > 0 ? (uint64_t)((double)in->size * in->pq_row / in->pq_rows) : in->size;
    uint64_t c = src_consumed(&in->src);
    return c < in->size ? c : in->size;
}

// Reads more of the stream into the window, dropping bytes before `keep`. 1 read, 0 at end, -1 error.
static int refill(TextInput *in, size_t *scan, char *err, size_t errlen) {
    if (in->eof) return 0;
    if (in->keep) {
        memmove(in->buf, in->buf + in->keep, in->end - in->keep);
        in->end -= in->keep, in->pos -= in->keep, *scan -= in->keep, in->buf_off += in->keep;
        in->keep = 0;
    }
    if (in->cap - in->end < READ_CHUNK / 2) {
        if (in->end >= MAX_RECORD) {
            if (in->fmt == TEXTIN_TEXT && in->mode == TEXT_MODE_FILE)
                return set_err(err, errlen, "%s: larger than %zu MiB, too large to be one document (--text-mode file)",
                               in->path, MAX_RECORD >> 20);
            return set_err(err, errlen, "%s:%llu: record longer than %zu MiB (is this really %s?)", in->path,
                           (unsigned long long)in->line + 1, MAX_RECORD >> 20,
                           in->fmt == TEXTIN_JSONL ? "JSON Lines" : "line-oriented text");
        }
        in->cap *= 2;
        in->buf = xrealloc(in->buf, in->cap);
    }
    long r = src_read(&in->src, in->buf + in->end, in->cap - in->end, err, errlen);
    if (r < 0) return -1;
    if (r == 0) { in->eof = 1; return 0; }
    in->end += (size_t)r;
    return 1;
}

// Next line of the window: [*start, *start + *len) without its '\n'. 1 ok, 0 at end, -1 error.
// The caller sets in->keep before calling; indices shift when the window moves, so read them after.
static int next_line(TextInput *in, size_t *start, size_t *len, char *err, size_t errlen) {
    size_t scan = in->pos;
    for (;;) {
        char *nl = memchr(in->buf + scan, '\n', in->end - scan);
        if (nl) {
            *start = in->pos, *len = (size_t)(nl - in->buf) - in->pos;
            in->pos = (size_t)(nl - in->buf) + 1, in->line++;
            return 1;
        }
        scan = in->end;
        int r = refill(in, &scan, err, errlen);
        if (r < 0) return -1;
        if (r == 0) {
            if (in->pos == in->end) return 0;
            *start = in->pos, *len = in->end - in->pos;
            in->pos = in->end, in->line++;
            return 1;
        }
    }
}

static int is_blank(const char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r') return 0;
    return 1;
}

int textin_next(TextInput *in, TextRecord *rec, char *err, size_t errlen) {
    memset(rec, 0, sizeof *rec);
    if (in->pq) {
        const char *p;
        size_t len;
        int is_null = 0;
        int r = parquet_next(in->pq, &p, &len, &is_null, err, errlen);
        if (r <= 0) return r;
        in->pq_row++;
        rec->p = p, rec->len = len, rec->is_null = is_null, rec->line = (uint64_t)in->pq_row;
        rec->offset = 0;
        return 1;
    }
    size_t s, n;
    if (in->fmt == TEXTIN_TEXT && in->mode == TEXT_MODE_FILE) {
        if (in->done) return 0;
        size_t scan = 0;
        for (int r; (r = refill(in, &scan, err, errlen)) != 0;)
            if (r < 0) return -1;
        in->done = 1;
        rec->p = in->buf, rec->len = in->end, rec->line = 1, rec->offset = 0;
        return 1;
    }
    if (in->fmt == TEXTIN_JSONL) {
        for (;;) {
            in->keep = in->pos;
            int r = next_line(in, &s, &n, err, errlen);
            if (r <= 0) return r;
            if (in->line == 1 && n >= 3 && !memcmp(in->buf + s, "\xEF\xBB\xBF", 3)) s += 3, n -= 3; // a BOM
            if (is_blank(in->buf + s, n)) continue;
            if (!in->started) { // one array holding every document would make each line a bad record
                in->started = 1;
                size_t k = 0;
                while (k < n && (in->buf[s + k] == ' ' || in->buf[s + k] == '\t')) k++;
                if (k < n && in->buf[s + k] == '[')
                    return set_err(err, errlen,
                                   "%s:%llu: starts with '[': a JSON array, not JSON Lines (one object or string per "
                                   "line); convert it, e.g. jq -c '.[]' %s",
                                   in->path, (unsigned long long)in->line, in->path);
            }
            rec->p = in->buf + s, rec->len = n, rec->is_json = 1;
            rec->line = in->line, rec->offset = in->buf_off + s;
            return 1;
        }
    }
    if (in->mode == TEXT_MODE_LINE) {
        in->keep = in->pos;
        int r = next_line(in, &s, &n, err, errlen);
        if (r <= 0) return r;
        if (n && in->buf[s + n - 1] == '\r') n--;
        rec->p = in->buf + s, rec->len = n, rec->line = in->line, rec->offset = in->buf_off + s;
        return 1;
    }
    // TEXT_MODE_PARAGRAPH: skip blank lines, then take lines up to the next blank line or the end.
    uint64_t first_line = 0;
    size_t para_end = 0; // relative to the paragraph start (in->keep)
    for (;;) {
        if (!first_line) in->keep = in->pos;
        int r = next_line(in, &s, &n, err, errlen);
        if (r < 0) return -1;
        int blank = r == 0 || is_blank(in->buf + s, n);
        if (blank && !first_line) {
            if (r == 0) return 0;
            continue;
        }
        if (blank) break;
        if (!first_line) first_line = in->line, in->keep = s;
        if (n && in->buf[s + n - 1] == '\r') n--;
        para_end = s + n - in->keep;
    }
    rec->p = in->buf + in->keep, rec->len = para_end, rec->line = first_line, rec->offset = in->buf_off + in->keep;
    return 1;
}

// ---------------------------------------------------------------------------------------------------------
// JSON: a validating scanner (RFC 8259) that decodes only the string it is asked for.

typedef struct {
    const char *p, *end, *start;
    char *err;
    size_t errlen;
    size_t bad_escapes;
} Js;

#define JS_MAX_DEPTH 512

__attribute__((format(printf, 3, 4))) static int js_fail(Js *j, const char *at, const char *fmt, ...) {
    char msg[ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return set_err(j->err, j->errlen, "malformed JSON at column %zu: %s", (size_t)(at - j->start) + 1, msg);
}

static void js_ws(Js *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\r' || *j->p == '\n')) j->p++;
}

// What stands at j->p, for messages: "end of line", "'x'" or "byte 0xNN".
static const char *js_describe(Js *j, char *tmp) {
    if (j->p >= j->end) return "end of line";
    unsigned char c = (unsigned char)*j->p;
    if (c >= 0x20 && c < 0x7f) sprintf(tmp, "'%c'", c);
    else sprintf(tmp, "byte 0x%02X", c);
    return tmp;
}

static void put_utf8(Buf *b, uint32_t c) {
    char u[4];
    size_t n;
    if (c < 0x80) u[0] = (char)c, n = 1;
    else if (c < 0x800) u[0] = (char)(0xC0 | c >> 6), u[1] = (char)(0x80 | (c & 63)), n = 2;
    else if (c < 0x10000)
        u[0] = (char)(0xE0 | c >> 12), u[1] = (char)(0x80 | (c >> 6 & 63)), u[2] = (char)(0x80 | (c & 63)), n = 3;
    else
        u[0] = (char)(0xF0 | c >> 18), u[1] = (char)(0x80 | (c >> 12 & 63)), u[2] = (char)(0x80 | (c >> 6 & 63)),
        u[3] = (char)(0x80 | (c & 63)), n = 4;
    buf_put(b, u, n);
}

static int hex4(const char *p, const char *end, uint32_t *v) {
    if (end - p < 4) return -1;
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return -1;
        *v = *v << 4 | (uint32_t)d;
    }
    return 0;
}

// A string at j->p (the opening quote). Decodes into out when out != NULL. *raw/*rawlen: the bytes between
// the quotes; *escaped: whether they hold a backslash (so the raw bytes are not the value).
static int js_string(Js *j, Buf *out, const char **raw, size_t *rawlen, int *escaped) {
    const char *open = j->p, *q = ++j->p, *run = q;
    int esc = 0;
    for (;;) {
        if (q >= j->end) return js_fail(j, open, "unterminated string");
        unsigned char c = (unsigned char)*q;
        if (c == '"') break;
        if (c < 0x20) return js_fail(j, q, "unescaped control character 0x%02X in a string", c);
        if (c != '\\') { q++; continue; }
        esc = 1;
        if (out) buf_put(out, run, (size_t)(q - run));
        const char *e = q++;
        if (q >= j->end) return js_fail(j, open, "unterminated string");
        char k = *q++;
        const char *simple = strchr("\"\\/bfnrt", k);
        if (k && simple) {
            static const char dec[] = "\"\\/\b\f\n\r\t";
            if (out) buf_put(out, &dec[simple - "\"\\/bfnrt"], 1);
        } else if (k == 'u') {
            uint32_t v, lo;
            if (hex4(q, j->end, &v)) return js_fail(j, e, "\\u must be followed by 4 hex digits");
            q += 4;
            if (v >= 0xD800 && v <= 0xDBFF && j->end - q >= 6 && q[0] == '\\' && q[1] == 'u' &&
                !hex4(q + 2, j->end, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
                v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
                q += 6;
            } else if (v >= 0xD800 && v <= 0xDFFF) { // lone surrogate: no UTF-8 form
                v = 0xFFFD;
                j->bad_escapes++;
            }
            if (out) put_utf8(out, v);
        } else {
            return js_fail(j, e, "invalid escape '\\%c'", k >= 0x20 && k < 0x7f ? k : '?');
        }
        run = q;
    }
    if (out) buf_put(out, run, (size_t)(q - run));
    if (raw) *raw = j->p, *rawlen = (size_t)(q - j->p);
    if (escaped) *escaped = esc;
    j->p = q + 1;
    return 0;
}

static int js_number(Js *j) {
    const char *q = j->p, *s = q;
    if (q < j->end && *q == '-') q++;
    if (q < j->end && *q == '0') q++;
    else if (q < j->end && *q >= '1' && *q <= '9')
        while (q < j->end && *q >= '0' && *q <= '9') q++;
    else return js_fail(j, s, "invalid number");
    if (q < j->end && *q == '.') {
        if (++q >= j->end || *q < '0' || *q > '9') return js_fail(j, s, "invalid number");
        while (q < j->end && *q >= '0' && *q <= '9') q++;
    }
    if (q < j->end && (*q == 'e' || *q == 'E')) {
        q++;
        if (q < j->end && (*q == '+' || *q == '-')) q++;
        if (q >= j->end || *q < '0' || *q > '9') return js_fail(j, s, "invalid number");
        while (q < j->end && *q >= '0' && *q <= '9') q++;
    }
    j->p = q;
    return 0;
}

typedef enum { JV_NONE, JV_STRING, JV_NUMBER, JV_OBJECT, JV_ARRAY, JV_BOOL, JV_NULL } JsType;
static const char *js_type_name[] = {"nothing", "a string", "a number", "an object", "an array", "a boolean", "null"};

static int js_value(Js *j, int depth, const char *key, size_t keylen, Buf *out, size_t out0, JsType *found);

static int js_object(Js *j, int depth, const char *key, size_t keylen, Buf *out, size_t out0, JsType *found) {
    j->p++; // '{'
    js_ws(j);
    if (j->p < j->end && *j->p == '}') { j->p++; return 0; }
    for (;;) {
        js_ws(j);
        if (j->p >= j->end || *j->p != '"')
            return js_fail(j, j->p, "expected an object key, found %s", js_describe(j, (char[16]){0}));
        const char *raw;
        size_t rawlen;
        int escaped, match = 0;
        if (key) {
            if (js_string(j, NULL, &raw, &rawlen, &escaped)) return -1;
            if (!escaped) match = rawlen == keylen && !memcmp(raw, key, keylen);
            else { // rare: compare the decoded key
                Buf k = {0};
                Js sub = *j;
                sub.p = raw - 1;
                js_string(&sub, &k, NULL, NULL, NULL);
                match = k.n == keylen && !memcmp(k.p, key, keylen);
                buf_free(&k);
            }
        } else if (js_string(j, NULL, NULL, NULL, NULL)) {
            return -1;
        }
        js_ws(j);
        if (j->p >= j->end || *j->p != ':')
            return js_fail(j, j->p, "expected ':' after an object key, found %s", js_describe(j, (char[16]){0}));
        j->p++;
        js_ws(j);
        if (match) { // top-level member with our key: decode it (a later duplicate replaces it)
            if (j->p < j->end && *j->p == '"') {
                out->n = out0;
                if (js_string(j, out, NULL, NULL, NULL)) return -1;
                *found = JV_STRING;
            } else {
                JsType t = JV_NONE;
                if (js_value(j, depth + 1, NULL, 0, NULL, 0, &t)) return -1;
                *found = t;
            }
        } else if (js_value(j, depth + 1, NULL, 0, NULL, 0, NULL)) {
            return -1;
        }
        js_ws(j);
        if (j->p < j->end && *j->p == ',') { j->p++; continue; }
        if (j->p < j->end && *j->p == '}') { j->p++; return 0; }
        return js_fail(j, j->p, "expected ',' or '}' in an object, found %s", js_describe(j, (char[16]){0}));
    }
}

// Skips (validates) one value. For an object at depth 0, key/out/found select the member to decode;
// otherwise *found (if given) receives the value's type.
static int js_value(Js *j, int depth, const char *key, size_t keylen, Buf *out, size_t out0, JsType *found) {
    if (depth > JS_MAX_DEPTH) return js_fail(j, j->p, "nested deeper than %d levels", JS_MAX_DEPTH);
    js_ws(j);
    if (j->p >= j->end) return js_fail(j, j->p, "expected a value, found end of line");
    char tmp[16];
    char c = *j->p;
    JsType t;
    if (c == '{') {
        if (depth == 0) return js_object(j, 0, key, keylen, out, out0, found); // *found: the member's type
        t = JV_OBJECT;
        if (js_object(j, depth, NULL, 0, NULL, 0, NULL)) return -1;
    } else if (c == '[') {
        t = JV_ARRAY;
        j->p++;
        js_ws(j);
        if (j->p < j->end && *j->p == ']') j->p++;
        else
            for (;;) {
                if (js_value(j, depth + 1, NULL, 0, NULL, 0, NULL)) return -1;
                js_ws(j);
                if (j->p < j->end && *j->p == ',') { j->p++; continue; }
                if (j->p < j->end && *j->p == ']') { j->p++; break; }
                return js_fail(j, j->p, "expected ',' or ']' in an array, found %s", js_describe(j, (char[16]){0}));
            }
    } else if (c == '"') {
        t = JV_STRING;
        if (js_string(j, NULL, NULL, NULL, NULL)) return -1;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        t = JV_NUMBER;
        if (js_number(j)) return -1;
    } else {
        static const struct {
            const char *lit;
            JsType t;
        } lits[] = {{"true", JV_BOOL}, {"false", JV_BOOL}, {"null", JV_NULL}};
        size_t i;
        for (i = 0; i < 3; i++) {
            size_t n = strlen(lits[i].lit);
            if ((size_t)(j->end - j->p) >= n && !memcmp(j->p, lits[i].lit, n)) break;
        }
        if (i == 3) return js_fail(j, j->p, "expected a value, found %s", js_describe(j, tmp));
        t = lits[i].t;
        j->p += strlen(lits[i].lit);
    }
    if (found) *found = t;
    return 0;
}

int textin_json_text(const char *line, size_t len, const char *key, Buf *out, size_t *bad_escapes, char *err,
                     size_t errlen) {
    Js j = {line, line + len, line, err, errlen, 0};
    size_t out0 = out->n;
    js_ws(&j);
    JsType found = JV_NONE;
    int rc;
    if (j.p < j.end && *j.p == '"') {
        rc = js_string(&j, out, NULL, NULL, NULL);
        found = JV_STRING;
    } else if (j.p < j.end && *j.p == '{') {
        rc = js_value(&j, 0, key, strlen(key), out, out0, &found);
    } else if (j.p < j.end && *j.p == '[') {
        rc = js_fail(&j, j.p, "expected a JSON object or string per line, found '[' (JSON arrays are not read: "
                              "write JSON Lines, one document per line)");
    } else {
        rc = js_fail(&j, j.p, "expected a JSON object or string per line, found %s", js_describe(&j, (char[16]){0}));
    }
    if (rc == 0) {
        js_ws(&j);
        if (j.p < j.end) rc = js_fail(&j, j.p, "unexpected data after the JSON value");
    }
    if (rc == 0 && found != JV_STRING) {
        if (found == JV_NONE) rc = set_err(err, errlen, "no key \"%s\" in the JSON object", key);
        else rc = set_err(err, errlen, "key \"%s\" is %s, expected a string", key, js_type_name[found]);
    }
    if (rc) { out->n = out0; return -1; }
    if (bad_escapes) *bad_escapes = j.bad_escapes;
    return 0;
}

// ---------------------------------------------------------------------------------------------------------
// UTF-8: maximal invalid subsequences, counted the way Rust's from_utf8_lossy replaces them.

size_t textin_utf8_invalid(const char *s, size_t n, size_t *first_bad) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, bad = 0;
    while (i < n) {
        unsigned c = p[i];
        if (c < 0x80) { i++; continue; }
        size_t need;
        unsigned lo = 0x80, hi = 0xBF; // allowed range of the second byte
        if (c >= 0xC2 && c <= 0xDF) need = 2;
        else if (c >= 0xE0 && c <= 0xEF) need = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        else if (c >= 0xF0 && c <= 0xF4) need = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        else need = 0;
        size_t k = 1;
        if (need)
            for (; k < need; k++) {
                if (i + k >= n) break;
                unsigned b = p[i + k];
                if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) break;
            }
        if (need && k == need) { i += need; continue; }
        if (!bad && first_bad) *first_bad = i;
        bad++;
        i += k; // the valid prefix of the sequence is one maximal subpart
    }
    return bad;
}
