// test_prepare_textin: the input readers of `gdn prepare` (data/textin.c): the JSON line scanner (values,
// escapes, errors with columns), UTF-8 invalid-sequence counting (Unicode's own example), and the readers
// for JSONL / text (line, paragraph, file) / gzip / zstd, including records larger than the read window,
// byte offsets that read back with pread, and truncated or mislabelled compressed files.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "data/textin.h"

#include "check.h"

static char tmpdir[256];

// ---- JSON

static void json_ok(const char *line, const char *key, const char *want, size_t want_len, size_t want_bad) {
    Buf b = {0};
    char err[ERR_LEN] = "";
    size_t bad = 99;
    int rc = textin_json_text(line, strlen(line), key, &b, &bad, err, sizeof err);
    CHECK(rc == 0, "json %s: expected success, got error: %s", line, err);
    if (rc == 0) {
        CHECK(b.n == want_len && !memcmp(b.p ? b.p : "", want, want_len), "json %s: decoded %zu bytes '%.*s', want '%s'",
              line, b.n, (int)b.n, b.p ? b.p : "", want);
        CHECK(bad == want_bad, "json %s: %zu bad escapes, want %zu", line, bad, want_bad);
    }
    buf_free(&b);
}

static void json_err(const char *line, const char *key, const char *want_substr) {
    Buf b = {0};
    buf_puts(&b, "keep");
    char err[ERR_LEN] = "";
    int rc = textin_json_text(line, strlen(line), key, &b, NULL, err, sizeof err);
    CHECK(rc == -1, "json %s: expected an error", line);
    CHECK(strstr(err, want_substr) != NULL, "json %s: error '%s' lacks '%s'", line, err, want_substr);
    CHECK(b.n == 4, "json %s: output buffer changed on error", line);
    buf_free(&b);
}

static void test_json(void) {
    json_ok("{\"text\": \"Hello world\"}", "text", "Hello world", 11, 0);
    json_ok("  \"bare string line\"  ", "text", "bare string line", 16, 0);
    json_ok("{\"id\": 3, \"meta\": {\"text\": \"nested, not ours\", \"a\": [1, -2.5e3, true, null, {}]}, \"text\": \"top\"}",
            "text", "top", 3, 0);
    json_ok("{\"text\": \"first\", \"text\": \"second\"}", "text", "second", 6, 0); // Python: last duplicate wins
    json_ok("{\"t\\u0065xt\": \"escaped key\"}", "text", "escaped key", 11, 0);
    json_ok("{\"content\": \"other key\", \"text\": 1}", "content", "other key", 9, 0);
    json_ok("{\"text\": \"\"}", "text", "", 0, 0);
    json_ok("{\"text\": \"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\te\"}", "text", "a\"b\\c/d\b\f\n\r\te", 13, 0);
    json_ok("{\"text\": \"\\u00e9\\u4e16\\ud83e\\udd99\"}", "text", "\xC3\xA9\xE4\xB8\x96\xF0\x9F\xA6\x99", 9, 0);
    json_ok("{\"text\": \"x\\ud800y\"}", "text", "x\xEF\xBF\xBDy", 5, 1);        // lone high surrogate
    json_ok("{\"text\": \"\\udc00\\ud800\"}", "text", "\xEF\xBF\xBD\xEF\xBF\xBD", 6, 2); // reversed pair
    json_ok("{\"text\": \"nul\\u0000byte\"}", "text", "nul\0byte", 8, 0);
    json_ok("{\"text\": \"caf\xC3\xA9 raw \xFF" " bytes\"}", "text", "caf\xC3\xA9 raw \xFF" " bytes", 17, 0); // passed through
    json_ok("\t{ \"text\" :\"spaced\" }\r", "text", "spaced", 6, 0);

    json_err("{\"text\": \"unterminated}", "text", "column 10: unterminated string");
    json_err("{\"text\" \"x\"}", "text", "column 9: expected ':' after an object key");
    json_err("{\"text\": \"x\",}", "text", "column 14: expected an object key");
    json_err("{\"text\": \"x\" \"y\": 1}", "text", "column 14: expected ',' or '}'");
    json_err("{\"a\": 1}", "text", "no key \"text\"");
    json_err("{\"text\": 42}", "text", "key \"text\" is a number, expected a string");
    json_err("{\"text\": null}", "text", "key \"text\" is null");
    json_err("{\"text\": [\"a\"]}", "text", "is an array");
    json_err("{\"text\": {\"x\": \"y\"}}", "text", "is an object");
    json_err("{\"text\": \"x\"} trailing", "text", "column 15: unexpected data after the JSON value");
    json_err("[\"a\", \"b\"]", "text", "JSON arrays are not read");
    json_err("[", "text", "JSON arrays are not read");
    json_err("hello", "text", "found 'h'");
    json_err("{\"text\": \"tab\tinside\"}", "text", "unescaped control character 0x09");
    json_err("{\"text\": \"\\x\"}", "text", "invalid escape '\\x'");
    json_err("{\"text\": \"\\u12G4\"}", "text", "4 hex digits");
    json_err("{\"text\": \"ok\", \"n\": 01}", "text", "expected ',' or '}'");
    json_err("{\"text\": \"ok\", \"n\": 1.}", "text", "invalid number");
    json_err("{\"text\": \"ok\", \"n\": tru}", "text", "expected a value");
    json_err("{\"text\": \"ok\", \"n\": NaN}", "text", "expected a value");
    json_err("{\"text\": \"ok\"", "text", "expected ',' or '}'");
    json_err("", "text", "found end of line");
    // Deep nesting is refused, not a stack overflow.
    Buf deep = {0};
    buf_puts(&deep, "{\"x\": ");
    for (int i = 0; i < 100000; i++) buf_puts(&deep, "[");
    buf_put(&deep, "", 1);
    json_err(deep.p, "text", "nested deeper than");
    buf_free(&deep);
}

// ---- UTF-8

static void test_utf8(void) {
    size_t first = 77;
    const char *valid = "plain ascii \xC3\xA9 \xE4\xB8\x96 \xF0\x9F\xA6\x99";
    CHECK(textin_utf8_invalid(valid, strlen(valid), &first) == 0, "valid text");
    CHECK(first == 77, "first_bad untouched on valid text");
    // Unicode 15 §3.9, Table 3-8 example: 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64 -> a, 3 x U+FFFD, b, U+FFFD,
    // c, 2 x U+FFFD, d.
    const char ex[] = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
    CHECK(textin_utf8_invalid(ex, sizeof ex - 1, &first) == 6, "Unicode table 3-8 example: 6 replacements");
    CHECK(first == 1, "first invalid byte at 1, got %zu", first);
    CHECK(textin_utf8_invalid("\xC0\xAF", 2, NULL) == 2, "overlong C0 AF: two");
    CHECK(textin_utf8_invalid("\xED\xA0\x80", 3, NULL) == 3, "encoded surrogate ED A0 80: three");
    CHECK(textin_utf8_invalid("\xF4\x90\x80\x80", 4, NULL) == 4, "above U+10FFFF: four");
    CHECK(textin_utf8_invalid("\xE2\x82", 2, NULL) == 1, "truncated at end: one");
    CHECK(textin_utf8_invalid("\xFF\xFE", 2, NULL) == 2, "FF FE: two");
}

// ---- readers

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f)) die("cannot write %s", path);
}

static char *tpath(const char *name) {
    static char paths[16][512];
    static int k;
    char *p = paths[k++ % 16];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

typedef struct {
    int n;
    char *text[64];
    size_t len[64];
    uint64_t line[64], offset[64];
    int is_json[64], is_null[64];
} Got;

// Reads all records; returns 0, or -1 with err (records read so far are kept).
static int read_all(const char *path, TextMode mode, Got *g, char *err, size_t errlen) {
    memset(g, 0, sizeof *g);
    TextInOptions opt = {"text", mode};
    TextInput *in = textin_open(path, &opt, err, errlen);
    if (!in) return -1;
    TextRecord r;
    int rc;
    while ((rc = textin_next(in, &r, err, errlen)) == 1) {
        if (g->n < 64) {
            g->text[g->n] = xmalloc(r.len + 1);
            memcpy(g->text[g->n], r.p, r.len);
            g->text[g->n][r.len] = 0;
            g->len[g->n] = r.len, g->line[g->n] = r.line, g->offset[g->n] = r.offset;
            g->is_json[g->n] = r.is_json, g->is_null[g->n] = r.is_null;
        }
        g->n++;
    }
    CHECK(textin_bytes_read(in) <= textin_file_size(in), "%s: bytes_read beyond the file size", path);
    if (rc == 0) CHECK(textin_bytes_read(in) == textin_file_size(in), "%s: bytes_read at the end = %llu, size %llu", path,
                       (unsigned long long)textin_bytes_read(in), (unsigned long long)textin_file_size(in));
    textin_close(in);
    return rc;
}

static void got_free(Got *g) {
    for (int i = 0; i < g->n && i < 64; i++) free(g->text[i]);
}

// Every record of an uncompressed file must be the file's bytes at [offset, offset+len).
static void check_offsets(const char *path, const Got *g) {
    int fd = open(path, O_RDONLY);
    for (int i = 0; i < g->n && i < 64; i++) {
        char *b = xmalloc(g->len[i] + 1);
        ssize_t r = pread(fd, b, g->len[i], (off_t)g->offset[i]);
        CHECK(r == (ssize_t)g->len[i] && !memcmp(b, g->text[i], g->len[i]), "%s: record %d does not read back at offset %llu",
              path, i, (unsigned long long)g->offset[i]);
        free(b);
    }
    close(fd);
}

static void expect_records(const char *what, const Got *g, int n, const char **texts, const uint64_t *lines) {
    CHECK(g->n == n, "%s: %d records, want %d", what, g->n, n);
    for (int i = 0; i < n && i < g->n; i++) {
        CHECK(!strcmp(g->text[i], texts[i]), "%s: record %d = '%s', want '%s'", what, i, g->text[i], texts[i]);
        if (lines) CHECK(g->line[i] == lines[i], "%s: record %d line %llu, want %llu", what, i, (unsigned long long)g->line[i],
                         (unsigned long long)lines[i]);
    }
}

static void test_jsonl_reader(void) {
    const char *p = tpath("a.jsonl");
    const char data[] = "\xEF\xBB\xBF{\"text\": \"one\"}\n\n   \n{\"text\": \"two\"}\r\n\"three\"\n{\"text\": \"four\"}";
    write_bytes(p, data, sizeof data - 1);
    Got g;
    char err[ERR_LEN];
    CHECK(read_all(p, TEXT_MODE_LINE, &g, err, sizeof err) == 0, "a.jsonl: %s", err);
    const char *want[] = {"{\"text\": \"one\"}", "{\"text\": \"two\"}\r", "\"three\"", "{\"text\": \"four\"}"};
    uint64_t lines[] = {1, 4, 5, 6};
    expect_records("a.jsonl", &g, 4, want, lines);
    CHECK(g.is_json[0] && g.is_json[3], "jsonl records are flagged JSON");
    check_offsets(p, &g);
    got_free(&g);

    // A JSON array file (like nlp-corpus' builds/doc-N.json) is refused at once, not read as 1000 bad lines.
    const char *arr = tpath("arr.json");
    write_bytes(arr, "\n[\n  \"a\",\n  \"b\"\n]\n", 17);
    CHECK(read_all(arr, TEXT_MODE_LINE, &g, err, sizeof err) == -1 && strstr(err, "arr.json:2: starts with '[': a JSON array"),
          "JSON array file: '%s'", err);
    got_free(&g);
}

static void test_text_reader(void) {
    const char *p = tpath("t.txt");
    const char data[] = "first line\r\n\nthird line\n  \npara two a\npara two b\r\n\n\n last";
    write_bytes(p, data, sizeof data - 1);
    Got g;
    char err[ERR_LEN];
    CHECK(read_all(p, TEXT_MODE_LINE, &g, err, sizeof err) == 0, "t.txt line: %s", err);
    const char *lines_want[] = {"first line", "", "third line", "  ", "para two a", "para two b", "", "", " last"};
    uint64_t lines[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    expect_records("text line mode", &g, 9, lines_want, lines);
    CHECK(!g.is_json[0], "text records are not JSON");
    check_offsets(p, &g);
    got_free(&g);

    CHECK(read_all(p, TEXT_MODE_PARAGRAPH, &g, err, sizeof err) == 0, "t.txt paragraph: %s", err);
    const char *para_want[] = {"first line", "third line", "para two a\npara two b", " last"};
    uint64_t para_lines[] = {1, 3, 5, 9};
    expect_records("text paragraph mode", &g, 4, para_want, para_lines);
    check_offsets(p, &g);
    got_free(&g);

    CHECK(read_all(p, TEXT_MODE_FILE, &g, err, sizeof err) == 0, "t.txt file: %s", err);
    CHECK(g.n == 1 && g.len[0] == sizeof data - 1 && !memcmp(g.text[0], data, sizeof data - 1), "file mode: whole file");
    got_free(&g);

    const char *e = tpath("empty.txt");
    write_bytes(e, "", 0);
    CHECK(read_all(e, TEXT_MODE_LINE, &g, err, sizeof err) == 0 && g.n == 0, "empty file: no lines");
    CHECK(read_all(e, TEXT_MODE_FILE, &g, err, sizeof err) == 0 && g.n == 1 && g.len[0] == 0, "empty file: one empty document");
    got_free(&g);
}

// Records far larger than the 1 MiB read window, so the window grows and shifts mid-record.
static void test_large_records(void) {
    size_t big = 3u << 20;
    Buf b = {0};
    buf_puts(&b, "{\"text\": \"small\"}\n{\"text\": \"");
    size_t big_at = strlen("{\"text\": \"small\"}\n");
    for (size_t i = 0; i < big; i++) buf_put(&b, &"abcdefghij"[i % 10], 1);
    buf_puts(&b, "\"}\n{\"text\": \"after\"}\n");
    const char *p = tpath("big.jsonl");
    write_bytes(p, b.p, b.n);
    Got g;
    char err[ERR_LEN];
    CHECK(read_all(p, TEXT_MODE_LINE, &g, err, sizeof err) == 0, "big.jsonl: %s", err);
    CHECK(g.n == 3, "big.jsonl: %d records", g.n);
    if (g.n == 3) {
        CHECK(g.len[1] == big + 12 && g.offset[1] == big_at, "big record length %zu offset %llu", g.len[1],
              (unsigned long long)g.offset[1]);
        CHECK(!strcmp(g.text[2], "{\"text\": \"after\"}") && g.line[2] == 3, "record after the big one");
        Buf t = {0};
        CHECK(textin_json_text(g.text[1], g.len[1], "text", &t, NULL, err, sizeof err) == 0 && t.n == big, "big text decodes");
        buf_free(&t);
    }
    check_offsets(p, &g);
    got_free(&g);

    // Paragraphs of many lines spanning several window refills.
    Buf tb = {0};
    for (int para = 0; para < 3; para++) {
        for (int l = 0; l < 60000; l++) buf_printf(&tb, "paragraph %d line %05d\n", para, l);
        buf_puts(&tb, "\n");
    }
    const char *tp = tpath("paras.txt");
    write_bytes(tp, tb.p, tb.n);
    CHECK(read_all(tp, TEXT_MODE_PARAGRAPH, &g, err, sizeof err) == 0, "paras.txt: %s", err);
    CHECK(g.n == 3, "paras.txt: %d paragraphs", g.n);
    for (int i = 0; i < g.n && i < 3; i++) {
        char head[64];
        snprintf(head, sizeof head, "paragraph %d line 00000\n", i);
        CHECK(!strncmp(g.text[i], head, strlen(head)) && g.len[i] == 60000 * 23 - 1,
              "paragraph %d: len %zu, starts '%.30s'", i, g.len[i], g.text[i]);
        CHECK(g.line[i] == (uint64_t)i * 60001 + 1, "paragraph %d first line %llu", i, (unsigned long long)g.line[i]);
    }
    check_offsets(tp, &g);
    got_free(&g);
    buf_free(&b), buf_free(&tb);
}

static void test_compressed(void) {
    // The same JSONL content as plain, gzip (two members) and zstd (two frames): identical records.
    const char content[] = "{\"text\": \"alpha\"}\n{\"text\": \"beta\"}\n\n\"gamma\"\n";
    size_t n = sizeof content - 1, half = 18;
    const char *plain = tpath("c.jsonl"), *gz = tpath("c.jsonl.gz"), *zs = tpath("c.jsonl.zst");
    write_bytes(plain, content, n);
    gzFile g1 = gzopen(gz, "wb");
    gzwrite(g1, content, (unsigned)half);
    gzclose(g1);
    g1 = gzopen(gz, "ab"); // a second gzip member, as `cat a.gz b.gz` makes
    gzwrite(g1, content + half, (unsigned)(n - half));
    gzclose(g1);
    size_t zcap = ZSTD_compressBound(n) * 2;
    char *z = xmalloc(zcap);
    size_t z1 = ZSTD_compress(z, zcap, content, half, 3);
    size_t z2 = ZSTD_compress(z + z1, zcap - z1, content + half, n - half, 3);
    write_bytes(zs, z, z1 + z2);

    Got a, b;
    char err[ERR_LEN];
    CHECK(read_all(plain, TEXT_MODE_LINE, &a, err, sizeof err) == 0 && a.n == 3, "plain c.jsonl");
    const char *paths[] = {gz, zs};
    for (int k = 0; k < 2; k++) {
        CHECK(read_all(paths[k], TEXT_MODE_LINE, &b, err, sizeof err) == 0, "%s: %s", paths[k], err);
        CHECK(b.n == a.n, "%s: %d records, plain has %d", paths[k], b.n, a.n);
        for (int i = 0; i < a.n && i < b.n; i++)
            CHECK(!strcmp(a.text[i], b.text[i]) && a.line[i] == b.line[i] && a.offset[i] == b.offset[i],
                  "%s: record %d differs", paths[k], i);
        got_free(&b);
    }
    got_free(&a);

    // Truncated: cut the last bytes (gzip trailer / zstd block) off.
    FILE *f = fopen(gz, "rb");
    char gzb[4096];
    size_t gzn = fread(gzb, 1, sizeof gzb, f);
    fclose(f);
    const char *gzt = tpath("trunc.jsonl.gz"), *zst = tpath("trunc.jsonl.zst");
    write_bytes(gzt, gzb, gzn - 12);
    write_bytes(zst, z, z1 + z2 - 5);
    CHECK(read_all(gzt, TEXT_MODE_LINE, &b, err, sizeof err) == -1 && strstr(err, "truncated gzip") && strstr(err, "trunc.jsonl.gz"),
          "truncated gzip: got '%s'", err);
    got_free(&b);
    CHECK(read_all(zst, TEXT_MODE_LINE, &b, err, sizeof err) == -1 && strstr(err, "truncated zstd") && strstr(err, "trunc.jsonl.zst"),
          "truncated zstd: got '%s'", err);
    got_free(&b);

    // Not compressed at all, or empty.
    const char *fake_gz = tpath("fake.jsonl.gz"), *fake_zst = tpath("fake.txt.zst"), *empty_gz = tpath("empty.jsonl.gz");
    write_bytes(fake_gz, content, n);
    write_bytes(fake_zst, content, n);
    write_bytes(empty_gz, "", 0);
    CHECK(read_all(fake_gz, TEXT_MODE_LINE, &b, err, sizeof err) == -1 && strstr(err, "not gzip data"), "plain text as .gz: '%s'", err);
    got_free(&b);
    CHECK(read_all(fake_zst, TEXT_MODE_LINE, &b, err, sizeof err) == -1 && strstr(err, "corrupt zstd"), "plain text as .zst: '%s'", err);
    got_free(&b);
    CHECK(read_all(empty_gz, TEXT_MODE_LINE, &b, err, sizeof err) == -1 && strstr(err, "empty file"), "empty .gz: '%s'", err);
    got_free(&b);
    free(z);
}

static void test_detect(void) {
    TextInFormat f;
    TextInCodec c;
    char err[ERR_LEN];
    CHECK(textin_detect("x/a.jsonl.zst", &f, &c, err, sizeof err) == 0 && f == TEXTIN_JSONL && c == TEXTIN_ZSTD, "a.jsonl.zst");
    CHECK(textin_detect("a.txt.gz", &f, &c, err, sizeof err) == 0 && f == TEXTIN_TEXT && c == TEXTIN_GZIP, "a.txt.gz");
    CHECK(textin_detect("d/b.parquet", &f, &c, err, sizeof err) == 0 && f == TEXTIN_PARQUET, "b.parquet");
    CHECK(textin_detect("b.parquet.gz", &f, &c, err, sizeof err) == -1 && strstr(err, "Parquet"), "b.parquet.gz refused");
    CHECK(textin_detect("notes.md", &f, &c, err, sizeof err) == -1 && strstr(err, "notes.md: unknown input type"), "notes.md: %s", err);
    CHECK(textin_detect("dir.jsonl/", &f, &c, err, sizeof err) == -1, "a directory name");
    TextInOptions opt = {"text", TEXT_MODE_LINE};
    CHECK(textin_open(tpath("missing.jsonl"), &opt, err, sizeof err) == NULL && strstr(err, "cannot open") &&
              strstr(err, "missing.jsonl"), "missing file: %s", err);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/test_prepare_textin.XXXXXX");
    if (!mkdtemp(tmpdir)) die("mkdtemp failed");
    test_json();
    test_utf8();
    test_detect();
    test_jsonl_reader();
    test_text_reader();
    test_large_records();
    test_compressed();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd)) fprintf(stderr, "warning: could not remove %s\n", tmpdir);
    printf("test_prepare_textin: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
