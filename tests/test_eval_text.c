// test_eval_text: Python string semantics used by the eval task templates (eval/text.c), on hand-written
// cases derived from the spec's rules (spec eval.md §1.2, §2.4, §2.7, §2.10) and Python's documented
// behaviour. With `--oracle IN OUT` it instead applies the functions to the JSON Lines cases in IN
// ({"fn": ..., "in": ...}) and writes {"out": ...} lines to OUT, for tests/t_eval_oracle.sh to compare
// against CPython itself.
#include <math.h>

#include "tests/eval/toy.h"
#include "util/common.h"

static void check_fn(const char *name, char *got, const char *want) {
    CHECK(got && !strcmp(got, want), "%s: got \"%s\", want \"%s\"", name, got ? got : "(null)", want);
    free(got);
}

static void test_whitespace(void) {
    CHECK(py_isspace(0x1C) && py_isspace(0x85) && py_isspace(0xA0) && py_isspace(0x3000) && py_isspace('\v'),
          "str.isspace() set");
    CHECK(!py_isspace(0x200B) && !py_isspace(0xFEFF) && !py_isspace(0x180E) && !py_isspace('a'),
          "not whitespace in Python");
    const char *s = "Answer: \xC2\xA0\n";
    CHECK(py_rstrip_len(s, strlen(s)) == 7, "rstrip of 'Answer: \\u00a0\\n' keeps 7 bytes, got %zu",
          py_rstrip_len(s, strlen(s)));
    const char *t = "caf\xC3\xA9 \xE3\x80\x80";
    CHECK(py_rstrip_len(t, strlen(t)) == 5, "rstrip keeps 'café' (5 bytes), got %zu", py_rstrip_len(t, strlen(t)));
    check_fn("strip", py_strip("\xE3\x80\x80 hi there \t\n"), "hi there");
    check_fn("strip all-space", py_strip(" \t "), "");
    CHECK(utf8_codepoints("h\xC3\xA9llo", 6) == 5, "len('héllo') == 5");
    check_fn("replace non-overlapping", py_replace("aaa", "aa", "b"), "ba");
}

static void test_capitalize(void) {
    check_fn("capitalize", py_capitalize("hello World"), "Hello world");
    check_fn("capitalize empty", py_capitalize(""), "");
    check_fn("capitalize leading space", py_capitalize(" then HE said"), " then he said");
    check_fn("capitalize sharp s", py_capitalize("\xC3\x9F" "a"), "Ssa");
    check_fn("capitalize titlecase digraph", py_capitalize("\xC7\x86" "EMAL"), "\xC7\x85" "emal"); // ǆ -> ǅ
    check_fn("capitalize dotted I", py_capitalize("a\xC4\xB0"), "Ai\xCC\x87");                      // İ -> i̇
    check_fn("capitalize final sigma", py_capitalize("\xCE\xA3\xCE\x91\xCE\xA3"), "\xCE\xA3\xCE\xB1\xCF\x82");
    check_fn("capitalize medial sigma", py_capitalize("\xCE\xA3\xCE\xA3\xCE\x91"), "\xCE\xA3\xCF\x83\xCE\xB1");
}

static void test_hellaswag(void) {
    check_fn("hellaswag clean",
             hellaswag_clean("  Removing ice from car: [header] How to remove ice [title] Get a scraper.  [step] Use it.  "),
             "Removing ice from car: How to remove ice. Get a scraper.  Use it.");
    check_fn("hellaswag bracket across newline kept", hellaswag_clean("[a\nb] x"), "[a\nb] x");
    check_fn("hellaswag lazy bracket", hellaswag_clean("x [a [b] c] y"), "x c] y");
    check_fn("hellaswag three spaces", hellaswag_clean("a   b"), "a  b");
    check_fn("hellaswag leading space after bracket", hellaswag_clean("[step] then go"), " then go");
}

static void test_wikitext(void) {
    check_fn("number separators", wikitext_detokenize("a @-@ b @,@ c @.@ d"), "a-b,c.d");
    check_fn("punctuation", wikitext_detokenize("x : y ; z . w ! v ? u , t"), "x: y; z. w! v? u, t");
    check_fn("brackets", wikitext_detokenize("( a b ) [ x ] { y } \" q \""), "(a b) [x] {y} \"q\"");
    check_fn("single quotes after s-apostrophe", wikitext_detokenize("' s '"), "'s'");
    check_fn("headings", wikitext_detokenize(" = = = Title = = = \n"), " === Title ===\n");
    check_fn("degree", wikitext_detokenize("5 \xC2\xB0 C"), "5\xC2\xB0" "C");
    check_fn("newline spaces", wikitext_detokenize("line one \n line two"), "line one\nline two");
    check_fn("N and 's", wikitext_detokenize("the N value of John 's players ' ball"),
             "the 1 value of John's players' ball");
    check_fn("literal regex text", wikitext_detokenize("a/' 3/b"), "a/'[0-9]/b");
    check_fn("unclosed bracket", wikitext_detokenize("( a"), "( a");
    check_fn("two spans", wikitext_detokenize("( a ) ( b )"), "(a) (b)");
    check_fn("span with newline", wikitext_detokenize("(\n a \n)"), "(a)");
    CHECK(wikitext_word_count("a b  c") == 3, "words('a b  c') == 3");
    CHECK(wikitext_word_count(" a ") == 3, "words(' a ') == 3 (empty ends count)");
    CHECK(wikitext_word_count("") == 1, "words('') == 1");
    CHECK(wikitext_word_count("a\xC2\xA0" "b\xE3\x80\x80" "c\n\nd") == 4, "unicode whitespace separates words");
}

static void test_pylit(void) {
    char err[ERR_LEN];
    const char *src = "[{'question': 'It\\'s  _  .', 'options': [\"a'b\", 'c\\nd', 'e\\x41', '\\u00e9', 'o\\101'], "
                      "'answer': 'A'}, {'question': \"Why?\", 'options': ('x', 'y'), 'answer': 'B',}]";
    cJSON *v = pylit_parse(src, strlen(src), err, sizeof err);
    CHECK(v && cJSON_IsArray(v) && cJSON_GetArraySize(v) == 2, "parse a RACE problems literal: %s", v ? "" : err);
    if (v) {
        cJSON *p0 = cJSON_GetArrayItem(v, 0), *p1 = cJSON_GetArrayItem(v, 1);
        CHECK_STR(cJSON_GetObjectItem(p0, "question")->valuestring, "It's  _  .");
        cJSON *o = cJSON_GetObjectItem(p0, "options");
        CHECK_STR(cJSON_GetArrayItem(o, 0)->valuestring, "a'b");
        CHECK_STR(cJSON_GetArrayItem(o, 1)->valuestring, "c\nd");
        CHECK_STR(cJSON_GetArrayItem(o, 2)->valuestring, "eA");
        CHECK_STR(cJSON_GetArrayItem(o, 3)->valuestring, "\xC3\xA9");
        CHECK_STR(cJSON_GetArrayItem(o, 4)->valuestring, "oA");
        CHECK_STR(cJSON_GetObjectItem(p1, "answer")->valuestring, "B");
        CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(p1, "options")) == 2, "tuple becomes a list");
        cJSON_Delete(v);
    }
    v = pylit_parse("'ab' \"cd\"", 9, err, sizeof err);
    CHECK(v && !strcmp(v->valuestring, "abcd"), "adjacent literals concatenate");
    cJSON_Delete(v);
    v = pylit_parse("r'\\n'", 5, err, sizeof err);
    CHECK(v && !strcmp(v->valuestring, "\\n"), "raw string keeps the backslash");
    cJSON_Delete(v);
    v = pylit_parse("[1, -2.5, True, None]", 21, err, sizeof err);
    CHECK(v && cJSON_GetArrayItem(v, 1)->valuedouble == -2.5 && cJSON_IsTrue(cJSON_GetArrayItem(v, 2)) &&
              cJSON_IsNull(cJSON_GetArrayItem(v, 3)),
          "numbers and constants");
    cJSON_Delete(v);
    v = pylit_parse("[1, 2", 5, err, sizeof err);
    CHECK(!v && strstr(err, "offset 5"), "unterminated list reports its offset: %s", err);
    v = pylit_parse("['a' 'b' c]", 11, err, sizeof err);
    CHECK(!v && strstr(err, "offset"), "garbage is an error: %s", err);
    v = pylit_parse("'abc", 4, err, sizeof err);
    CHECK(!v && strstr(err, "unterminated"), "unterminated string: %s", err);
}

// ---- oracle mode ----

static int oracle(const char *in, const char *out) {
    char err[ERR_LEN];
    size_t len;
    char *text = read_file(in, &len, err, sizeof err);
    if (!text) die("%s", err);
    FILE *f = xfopen(out, "w");
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *c = cJSON_Parse(line);
        const char *fn = cJSON_GetObjectItem(c, "fn")->valuestring, *s = cJSON_GetObjectItem(c, "in")->valuestring;
        cJSON *o = cJSON_CreateObject();
        char *r = NULL;
        if (!strcmp(fn, "rstrip")) {
            size_t k = py_rstrip_len(s, strlen(s));
            r = xmalloc(k + 1);
            memcpy(r, s, k);
            r[k] = 0;
        } else if (!strcmp(fn, "strip")) r = py_strip(s);
        else if (!strcmp(fn, "capitalize")) r = py_capitalize(s);
        else if (!strcmp(fn, "hellaswag")) r = hellaswag_clean(s);
        else if (!strcmp(fn, "wikitext")) r = wikitext_detokenize(s);
        if (r) cJSON_AddStringToObject(o, "out", r);
        else if (!strcmp(fn, "words")) cJSON_AddNumberToObject(o, "out", (double)wikitext_word_count(s));
        else if (!strcmp(fn, "len")) cJSON_AddNumberToObject(o, "out", (double)utf8_codepoints(s, strlen(s)));
        else if (!strcmp(fn, "pylit")) {
            cJSON *v = pylit_parse(s, strlen(s), err, sizeof err);
            if (v) cJSON_AddItemToObject(o, "out", v);
            else cJSON_AddStringToObject(o, "error", err);
        } else die("oracle: unknown fn %s", fn);
        free(r);
        char *p = cJSON_PrintUnformatted(o);
        fprintf(f, "%s\n", p);
        free(p);
        cJSON_Delete(o);
        cJSON_Delete(c);
    }
    fclose(f);
    free(text);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--oracle")) return oracle(argv[2], argv[3]);
    test_whitespace();
    test_capitalize();
    test_hellaswag();
    test_wikitext();
    test_pylit();
    if (toy_failures) {
        fprintf(stderr, "test_eval_text: %d checks FAILED\n", toy_failures);
        return 1;
    }
    printf("PASS test_eval_text: whitespace/strip, capitalize (titlecase, İ, final sigma), hellaswag clean, "
           "wikitext detokenizer + word count, Python literal parser\n");
    return 0;
}
