// test_tokenizer.c: unit tests of the Llama-3 tokenizer (data/tokenizer.h and its helpers).
// Checks: the spec's expected ids (data.md §1.8, produced by HF), decoding rules (§1.6), the invalid UTF-8
// policy (§1.7) against hand-written expectations, SHA-256 against the FIPS 180-2 examples, the two BPE
// merge strategies against a plain reference loop, encoding on many threads at once, and load errors.
// The bulk comparison with HF on >1 MB of text is tests/t_tokenizer.sh.
// Extra modes for that script: test_tokenizer --dump-classes OUT  (pre-tokenizer class of every code point);
// test_tokenizer --pieces llama3|gpt2 < texts.jsonl  (pre-tokenizer pieces of each text).
#include <cjson/cJSON.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/tok_bpe.h"
#include "data/tok_pretok.h"
#include "data/tok_sha256.h"
#include "data/tok_utf8.h"
#include "data/tokenizer.h"
#include "util/common.h"

#include "check.h"

// Section result: PASS unless a CHECK failed since the section started (f0).
#define RESULT (failures == f0 ? "PASS" : "FAIL")

static const char *TOK_PATH = ".assets/llama3/tokenizer.json";

// ---- spec §1.8 (ids from HF's Rust core) ------------------------------------------------------------------
typedef struct {
    const char *text;
    int n;
    int32_t ids[24];
} Golden;
static const Golden goldens[] = {
    {"Hello world", 3, {128000, 9906, 1917}},
    {"The capital of France is", 6, {128000, 791, 6864, 315, 9822, 374}},
    {"a  b   c    d", 8, {128000, 64, 220, 293, 256, 272, 262, 294}},
    {"   leading spaces", 4, {128000, 256, 6522, 12908}},
    {"trailing spaces   ", 5, {128000, 376, 14612, 12908, 262}},
    {"line1\nline2\n\nline3\r\nend", 11, {128000, 1074, 16, 198, 1074, 17, 271, 1074, 18, 319, 408}},
    {" \n \n  x", 4, {128000, 33006, 220, 865}},
    {"\tindent\t\tx", 5, {128000, 197, 33940, 197, 10436}},
    {"1234567 12 1,000,000 3.14159", 17, {128000, 4513, 10961, 22, 220, 717, 220, 16, 11, 931, 11, 931, 220, 18, 13, 9335, 2946}},
    {"I'm you're He'LL we'VE don't It'S they'd", 17,
     {128000, 40, 2846, 499, 2351, 1283, 6, 4178, 584, 6, 4592, 1541, 956, 1102, 13575, 814, 4265}},
    {"IT'STHE", 4, {128000, 964, 13575, 17673}},
    {"T\xc3\xb4i l\xc3\xa0m vi\xe1\xbb\x87" "c \xe1\xbb\x9f Vi\xe1\xbb\x87t Nam", 7, {128000, 127806, 100724, 100769, 100788, 101798, 31074}},
    {"\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c\xef\xbc\x8c\xe8\xbf\x99\xe6\x98\xaf\xe4\xb8\x80\xe4\xb8\xaa\xe6\xb5\x8b"
     "\xe8\xaf\x95\xe3\x80\x82", 8, {128000, 57668, 53901, 102616, 103138, 122503, 82805, 1811}},
    {"\xe0\xa4\xa8\xe0\xa4\xae\xe0\xa4\xb8\xe0\xa5\x8d\xe0\xa4\xa4\xe0\xa5\x87 \xe0\xa4\xa6\xe0\xa5\x81\xe0\xa4\xa8\xe0\xa4\xbf"
     "\xe0\xa4\xaf\xe0\xa4\xbe", 10, {128000, 61196, 88344, 79468, 100365, 35470, 100291, 101391, 100322, 24810}},
    {"I \xe2\x9d\xa4\xef\xb8\x8f \xf0\x9f\xa6\x99", 7, {128000, 40, 71570, 31643, 11410, 99, 247}},
    {"def f(x):\n    return x**2  # comment\n", 14, {128000, 755, 282, 2120, 997, 262, 471, 865, 334, 17, 220, 674, 4068, 198}},
    {"<|begin_of_text|>hi<|end_of_text|> <|eot_id|>", 6, {128000, 128000, 6151, 128001, 220, 128009}},
    {"x \xc2\xa0 y", 4, {128000, 87, 17529, 379}},
    {"\xef\xbb\xbfHello", 3, {128000, 3305, 9906}},
    {"", 1, {128000}},
    {"Photosynthesis is the process by which green plants convert light energy into chemical energy.", 17,
     {128000, 32872, 74767, 374, 279, 1920, 555, 902, 6307, 11012, 5625, 3177, 4907, 1139, 11742, 4907, 13}},
};
#define N_GOLDENS (int)(sizeof goldens / sizeof goldens[0])

static int ids_equal(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    return na == nb && (na == 0 || !memcmp(a, b, na * sizeof *a));
}

static void print_ids(const char *label, const int32_t *ids, size_t n) {
    fprintf(stderr, "  %s:", label);
    for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", (int)ids[i]);
    fprintf(stderr, "\n");
}

static void test_goldens(const Tokenizer *t) {
    int32_t *ids = NULL;
    size_t cap = 0;
    int ok = 0;
    for (int i = 0; i < N_GOLDENS; i++) {
        const Golden *g = &goldens[i];
        size_t n = tok_encode(t, g->text, strlen(g->text), 1, &ids, &cap);
        int same = ids_equal(ids, n, g->ids, (size_t)g->n);
        CHECK(same, "golden %d (\"%.40s\") with BOS differs", i, g->text);
        if (!same) print_ids("want", g->ids, (size_t)g->n), print_ids("got ", ids, n);
        n = tok_encode(t, g->text, strlen(g->text), 0, &ids, &cap);
        CHECK(ids_equal(ids, n, g->ids + 1, (size_t)g->n - 1), "golden %d without BOS differs", i);
        // §1.6: decode(encode(s)) == s without BOS; with BOS the BOS string comes first.
        size_t len;
        char *back = tok_decode(t, ids, n, 0, &len);
        CHECK(len == strlen(g->text) && !memcmp(back, g->text, len), "golden %d does not round-trip", i);
        free(back);
        back = tok_decode(t, g->ids, (size_t)g->n, 0, &len);
        CHECK(!strncmp(back, "<|begin_of_text|>", 17) && !strcmp(back + 17, g->text), "golden %d: decode with BOS", i);
        free(back);
        ok += same;
    }
    free(ids);
    printf("%s goldens: %d/%d spec §1.8 texts give HF's ids (with and without BOS) and round-trip\n", ok == N_GOLDENS ? "PASS" : "FAIL", ok, N_GOLDENS);
}

static void test_metadata(const Tokenizer *t) {
    const int f0 = failures;
    CHECK(tok_vocab_size(t) == 128256, "vocab size %d, want 128256", tok_vocab_size(t));
    CHECK(tok_bos_id(t) == 128000, "bos %d", tok_bos_id(t));
    CHECK(tok_eos_id(t) == 128001, "eos %d", tok_eos_id(t));
    CHECK(tok_adds_bos(t) == 1, "adds_bos");
    CHECK(strlen(tok_sha256(t)) == 64, "sha256 length");
    size_t len;
    const char *s = tok_token_bytes(t, 9906, &len);
    CHECK(s && len == 5 && !memcmp(s, "Hello", 5), "token 9906 is \"Hello\"");
    s = tok_token_bytes(t, 220, &len);
    CHECK(s && len == 1 && s[0] == ' ', "token 220 is a space (byte-level U+0120 decoded)");
    s = tok_token_bytes(t, 198, &len);
    CHECK(s && len == 1 && s[0] == '\n', "token 198 is a newline");
    s = tok_token_bytes(t, 128009, &len);
    CHECK(s && len == 10 && !memcmp(s, "<|eot_id|>", 10), "token 128009 is <|eot_id|>");
    s = tok_token_bytes(t, 128255, &len);
    CHECK(s && !strcmp(s, "<|reserved_special_token_247|>"), "token 128255 is reserved_247");
    CHECK(!tok_token_bytes(t, 128256, NULL) && !tok_token_bytes(t, -1, NULL), "ids outside the vocabulary give NULL");
    printf("%s metadata: vocab 128256, BOS 128000, EOS 128001, token bytes\n", RESULT);
}

static void test_decode(const Tokenizer *t) {
    const int f0 = failures;
    size_t len;
    int32_t a[] = {129};
    char *s = tok_decode(t, a, 1, 0, &len);
    CHECK(len == 3 && !memcmp(s, "\xef\xbf\xbd", 3), "[129] -> U+FFFD (spec §1.6)");
    free(s);
    int32_t b[] = {129, 123};
    s = tok_decode(t, b, 2, 0, &len);
    CHECK(len == 2 && !memcmp(s, "\xc5\xbf", 2), "[129, 123] -> U+017F (spec §1.6)");
    free(s);
    int32_t c[] = {128000, 9906, 128009, 1917};
    s = tok_decode(t, c, 4, 1, &len);
    CHECK(!strcmp(s, "Hello world"), "skip_special drops BOS and <|eot_id|>: got \"%s\"", s);
    free(s);
    s = tok_decode(t, c, 4, 0, &len);
    CHECK(!strcmp(s, "<|begin_of_text|>Hello<|eot_id|> world"), "specials kept: got \"%s\"", s);
    free(s);
    // A truncated sequence, then ASCII: one U+FFFD for E4 B8 (lossy maximal-subpart rule), then "x".
    int32_t d[] = {160, 116, 87}; // byte tokens: 160 -> 0xE4 ('ä' key), 116 -> 0xB8 ('¸'), then "x"
    s = tok_decode(t, d, 3, 0, &len);
    CHECK(len == 4 && !memcmp(s, "\xef\xbf\xbdx", 4), "E4 B8 'x' -> U+FFFD x");
    free(s);
    int32_t e[] = {-5, 9906, 999999};
    s = tok_decode(t, e, 3, 0, &len);
    CHECK(!strcmp(s, "Hello"), "unknown ids are dropped as HF does");
    free(s);
    printf("%s decode: lossy UTF-8, skip_special, unknown ids\n", RESULT);
}

// §1.7: invalid sequences are replaced by U+FFFD before tokenizing. Expectations written out by hand.
static void test_invalid_utf8(const Tokenizer *t) {
    const int f0 = failures;
    static const struct {
        const char *bad, *repaired;
        int n_invalid;
    } cases[] = {
        {"a\xff" "b", "a\xef\xbf\xbd" "b", 1},
        {"\xe4\xb8", "\xef\xbf\xbd", 1},                                       // truncated 3-byte sequence
        {"\xe4\xb8x", "\xef\xbf\xbdx", 1},
        {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", 3},          // UTF-8 of a surrogate
        {"\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd", 2},                          // overlong '/'
        {"\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", 4}, // above U+10FFFF
        {"\xf0\x9f\x98 ok", "\xef\xbf\xbd ok", 1},                            // truncated emoji
        {"\x80\x80 x", "\xef\xbf\xbd\xef\xbf\xbd x", 2},                      // lone continuation bytes
        {"\xe0\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", 3},          // overlong 3-byte
        {"Hello \xfe world<|eot_id|>\xc3", "Hello \xef\xbf\xbd world<|eot_id|>\xef\xbf\xbd", 2},
        {"caf\xc3\xa9", "caf\xc3\xa9", 0},                                    // valid stays as is
    };
    int32_t *got = NULL, *want = NULL;
    size_t cap_got = 0, cap_want = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t nb = strlen(cases[i].bad), nr = strlen(cases[i].repaired);
        CHECK(tok_utf8_invalid_count(cases[i].bad, nb) == (size_t)cases[i].n_invalid, "case %zu: invalid count %zu, want %d",
              i, tok_utf8_invalid_count(cases[i].bad, nb), cases[i].n_invalid);
        uint8_t out[64];
        size_t bad_count;
        size_t n = tok_utf8_lossy((const uint8_t *)cases[i].bad, nb, out, &bad_count);
        CHECK(n == nr && !memcmp(out, cases[i].repaired, nr), "case %zu: lossy repair differs", i);
        size_t a = tok_encode(t, cases[i].bad, nb, 1, &got, &cap_got);
        size_t b = tok_encode(t, cases[i].repaired, nr, 1, &want, &cap_want);
        CHECK(ids_equal(got, a, want, b), "case %zu: encoding invalid input != encoding its repaired form", i);
    }
    // Text with a NUL byte is valid UTF-8 and is tokenized, not cut.
    size_t n = tok_encode(t, "a\0b", 3, 0, &got, &cap_got);
    CHECK(n == 3, "\"a\\0b\" gives 3 tokens, got %zu", n);
    free(got);
    free(want);
    printf("%s invalid UTF-8: %zu cases repaired per §1.7 and encoded as their repaired text\n", RESULT,
           sizeof cases / sizeof cases[0]);
}

static void test_sha256(void) {
    const int f0 = failures;
    // FIPS 180-2 appendix B examples.
    char hex[65];
    tok_sha256_hex("abc", 3, hex);
    CHECK(!strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"), "sha256(abc) = %s", hex);
    tok_sha256_hex("", 0, hex);
    CHECK(!strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"), "sha256('') = %s", hex);
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    tok_sha256_hex(m, strlen(m), hex);
    CHECK(!strcmp(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"), "sha256(448-bit) = %s", hex);
    char *a = xmalloc(1000000);
    memset(a, 'a', 1000000);
    tok_sha256_hex(a, 1000000, hex);
    CHECK(!strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"), "sha256(1M a) = %s", hex);
    free(a);
    printf("%s sha256: FIPS 180-2 examples\n", RESULT);
}

// Plain reference for the merge loop: scan every pair each step, take the first smallest rank.
static size_t bpe_reference(const TokPairMap *m, int32_t *ids, size_t n) {
    for (;;) {
        size_t best = n;
        uint32_t best_rank = UINT32_MAX, r;
        int32_t best_id = -1, id;
        for (size_t i = 0; i + 1 < n; i++)
            if (tok_pairmap_get(m, ids[i], ids[i + 1], &r, &id) && r < best_rank) best_rank = r, best = i, best_id = id;
        if (best == n) return n;
        ids[best] = best_id;
        memmove(ids + best + 1, ids + best + 2, (n - best - 2) * sizeof *ids);
        n--;
    }
}

static void test_bpe_strategies(void) {
    const int f0 = failures;
    // A random merge table over a 4-symbol alphabet: merge k joins two existing ids into id 4 + k.
    uint64_t state = 12345;
#define NEXT_RAND() (state = state * 6364136223846793005ull + 1442695040888963407ull, (uint32_t)(state >> 33))
    TokPairMap m;
    tok_pairmap_init(&m, 64);
    int n_ids = 4;
    for (int k = 0; k < 60; k++) {
        int32_t a = (int32_t)(NEXT_RAND() % (uint32_t)n_ids), b = (int32_t)(NEXT_RAND() % (uint32_t)n_ids), r, id;
        uint32_t rank;
        if (tok_pairmap_get(&m, a, b, &rank, &id)) continue;
        r = (int32_t)(NEXT_RAND() % 1000); // ranks out of creation order, as real tables can be
        tok_pairmap_put(&m, a, b, (uint32_t)r * 64 + (uint32_t)k, n_ids++);
    }
    TokBpeScratch sc = {0};
    int agree = 0, trials = 3000;
    for (int trial = 0; trial < trials; trial++) {
        size_t n = 1 + NEXT_RAND() % 64;
        int32_t w[64], a[64], b[64], c[64];
        for (size_t i = 0; i < n; i++) w[i] = (int32_t)(NEXT_RAND() % 4);
        memcpy(a, w, sizeof w), memcpy(b, w, sizeof w), memcpy(c, w, sizeof w);
        size_t na = bpe_reference(&m, a, n), nb = tok_bpe_merge_rescan(&m, b, n), nc = tok_bpe_merge_heap(&m, c, n, &sc);
        int ok = ids_equal(a, na, b, nb) && ids_equal(a, na, c, nc);
        CHECK(ok, "trial %d (n=%zu): reference %zu symbols, rescan %zu, heap %zu", trial, n, na, nb, nc);
        agree += ok;
    }
    tok_bpe_scratch_free(&sc);
    tok_pairmap_free(&m);
    printf("%s bpe: rescan and heap merge loops equal a plain reference on %d/%d random words\n", RESULT, agree, trials);
#undef NEXT_RAND
}

// Many threads encoding at once must give the single-threaded ids.
static void test_threads(const Tokenizer *t) {
    const int f0 = failures;
    enum { N_TEXTS = 400 };
    char *texts[N_TEXTS];
    size_t lens[N_TEXTS], nref[N_TEXTS];
    int32_t *ref[N_TEXTS];
    for (int i = 0; i < N_TEXTS; i++) {
        Buf b = {0};
        for (int k = 0; k < 3 + i % 7; k++) {
            const Golden *g = &goldens[(i * 7 + k * 3) % N_GOLDENS];
            buf_puts(&b, g->text);
            // Long words take the heap path of BPE; vary them per text.
            if ((i + k) % 5 == 0)
                for (int j = 0; j < 70 + i; j++) buf_put(&b, &"qzxjvkwy"[(i * j + k) % 8], 1);
        }
        texts[i] = b.p ? b.p : xstrdup("");
        lens[i] = b.n;
        ref[i] = NULL;
        size_t cap = 0;
        nref[i] = tok_encode(t, texts[i], lens[i], 1, &ref[i], &cap);
    }
    int mismatches = 0;
#pragma omp parallel num_threads(4) reduction(+ : mismatches)
    {
        int32_t *ids = NULL;
        size_t cap = 0;
        for (int rep = 0; rep < 5; rep++)
#pragma omp for schedule(dynamic, 1)
            for (int i = 0; i < N_TEXTS; i++) {
                size_t n = tok_encode(t, texts[i], lens[i], 1, &ids, &cap);
                mismatches += !ids_equal(ids, n, ref[i], nref[i]);
            }
        free(ids);
    }
    CHECK(mismatches == 0, "%d concurrent encodings differ from serial ones", mismatches);
    for (int i = 0; i < N_TEXTS; i++) free(texts[i]), free(ref[i]);
    printf("%s threads: 4 threads x %d texts x 5 rounds equal the serial ids\n", RESULT, N_TEXTS);
}

// Load errors name the file and the key.
static void expect_load_error(const char *json, const char *want_substring, const char *what) {
    char path[] = "/tmp/gdn_tok_test_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) die("mkstemp failed");
    size_t n = strlen(json);
    if (write(fd, json, n) != (ssize_t)n) die("write failed");
    close(fd);
    char err[ERR_LEN] = "";
    Tokenizer *t = tok_load(path, err, sizeof err);
    CHECK(!t, "%s: loaded although it should fail", what);
    CHECK(strstr(err, want_substring) && strstr(err, path), "%s: error \"%s\" lacks \"%s\" or the path", what, err, want_substring);
    tok_free(t);
    unlink(path);
}

static void test_load_errors(void) {
    const int f0 = failures;
#define PRE "{\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false},"
#define DEC "\"decoder\":{\"type\":\"ByteLevel\"},"
#define MODEL "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\"]}}"
    expect_load_error("{\n  \"model\": {\n    \"vocab\": {,}\n", "line 3, column", "malformed JSON");
    expect_load_error("{\"model\": {}} x", "malformed JSON at line 1, column 15", "text after the JSON value");
    expect_load_error("{\"normalizer\":{\"type\":\"NFC\"}," "\"pre_tokenizer\":null," DEC MODEL, "normalizer: type NFC", "NFC normalizer");
    expect_load_error(PRE DEC "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a b\",\"b\"]}}",
                      "model.merges[0]", "merged token missing");
    expect_load_error(PRE DEC "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\",\"ab\"]}}",
                      "model.merges[1]: expected \"A B\"", "merge without space");
    expect_load_error(PRE DEC "\"model\":{\"type\":\"Unigram\",\"vocab\":[]}}", "model.type: Unigram", "Unigram model");
    expect_load_error("{\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":"
                      "\"\\\\s+\"},\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\"}]}," DEC MODEL,
                      "pre_tokenizer.pretokenizers[0].pattern.Regex: unsupported regex", "unknown regex");
    expect_load_error(PRE "\"decoder\":{\"type\":\"WordPiece\"}," MODEL, "decoder: expected type ByteLevel", "decoder");
    expect_load_error(PRE DEC "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-3},\"merges\":[]}}", "model.vocab[\"a\"]", "negative id");
    expect_load_error(PRE DEC "\"model\":{\"type\":\"BPE\",\"dropout\":0.1,\"vocab\":{\"a\":0},\"merges\":[]}}", "model.dropout", "dropout");
    char err[ERR_LEN] = "";
    CHECK(!tok_load("/nonexistent/tokenizer.json", err, sizeof err) && strstr(err, "/nonexistent/tokenizer.json"),
          "missing file: error \"%s\" names the path", err);
    printf("%s load errors: malformed JSON (line/column), unsupported parts and bad entries are named\n", RESULT);
#undef PRE
#undef DEC
#undef MODEL
}

static int dump_classes(const char *out) {
    tok_unicode_init();
    uint8_t *cls = xmalloc(0x110000);
    for (uint32_t c = 0; c < 0x110000; c++) cls[c] = (c >= 0xD800 && c <= 0xDFFF) ? 255 : (uint8_t)tok_cp_class(c);
    char err[ERR_LEN];
    if (write_file_atomic(out, cls, 0x110000, err, sizeof err)) die("%s", err);
    free(cls);
    return 0;
}

// Pre-tokenizer pieces of each line of stdin (a JSON string) as a JSON array of strings, for comparison with
// the reference pre-tokenizer (HF's preTokenizeString) in tests/t_tokenizer.sh.
static int dump_pieces(TokSplitKind kind) {
    tok_unicode_init();
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int line_no = 0;
    while ((n = getline(&line, &cap, stdin)) > 0) {
        line_no++;
        cJSON *j = cJSON_ParseWithLength(line, (size_t)n);
        if (!cJSON_IsString(j)) die("--pieces: stdin line %d: expected a JSON string", line_no);
        const uint8_t *s = (const uint8_t *)j->valuestring;
        size_t len = strlen(j->valuestring);
        cJSON *out = cJSON_CreateArray();
        for (size_t p = 0; p < len;) {
            size_t q = tok_pretok_next(kind, s, len, p);
            char *piece = xmalloc(q - p + 1);
            memcpy(piece, s + p, q - p);
            piece[q - p] = 0;
            cJSON_AddItemToArray(out, cJSON_CreateString(piece));
            free(piece);
            p = q;
        }
        char *text = cJSON_PrintUnformatted(out);
        printf("%s\n", text);
        free(text);
        cJSON_Delete(out);
        cJSON_Delete(j);
    }
    free(line);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--dump-classes")) return dump_classes(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "--pieces")) return dump_pieces(!strcmp(argv[2], "gpt2") ? TOK_SPLIT_GPT2 : TOK_SPLIT_LLAMA3);
    if (!file_exists(TOK_PATH) && system("bash scripts/fetch_assets.sh >&2") != 0) die("scripts/fetch_assets.sh failed");
    char err[ERR_LEN];
    double t0 = now_sec();
    Tokenizer *t = tok_load(TOK_PATH, err, sizeof err);
    if (!t) die("%s", err);
    printf("loaded %s in %.2f s\n", TOK_PATH, now_sec() - t0);
    test_goldens(t);
    test_metadata(t);
    test_decode(t);
    test_invalid_utf8(t);
    test_sha256();
    test_bpe_strategies();
    test_threads(t);
    test_load_errors();
    tok_free(t);
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
