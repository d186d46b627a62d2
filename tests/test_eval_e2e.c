// test_eval_e2e: the whole `gdn eval` command (eval_main) on small task files of every family (all 57 MMLU
// subjects included), with the toy tokenizer and a toy scorer whose log-likelihoods are a hand-written table
// (tests/eval/toy.h). The results JSON is parsed back and checked field by field against values computed by
// hand in the comments (acc / acc_norm / stderrs, MMLU size-weighted groups with pooled stderr, lambada
// perplexity, wikitext word/byte perplexity and bits per byte, versions, n-samples, config, markers); the
// printed table is checked for its rows; then the BOS/RACE "old" mode, --limit, an explicit .json path, and
// the command's error messages (each run in a child process).
#include <math.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/eval/toy.h"
#include "util/common.h"

static char dir[256], data[300], model[300];

static const ToyScore table[] = {
    // arc_easy: doc0 acc 0 / norm 1; doc1 1 / 1; doc2 1 / 0; doc3 0 / 1 -> acc 0.5, acc_norm 0.75
    {" Oxygen", -3.0, 0, NULL}, {" Carbon dioxide", -4.2, 0, NULL}, {" Helium", -5.0, 0, NULL},
    {" Paris", -1.0, 0, NULL}, {" London", -2.0, 0, NULL},
    {" 4", -2.0, 0, NULL}, {" 22", -3.0, 0, NULL},
    {" x", -1.0, 0, NULL}, {" yy", -1.5, 0, NULL},
    // hellaswag: doc0 1 / 1 ("  gamma": the cleaned ending keeps a leading space); doc1 0 / 0 -> 0.5 / 0.5
    {" alpha beta.", -3.0, 0, NULL}, {"  gamma", -0.5, 0, NULL},
    {" one", -2.0, 0, NULL}, {" two", -1.0, 0, NULL},
    // openbookqa (1 doc): acc 1, acc_norm 1, stderr N/A
    {" red", -2.0, 0, NULL}, {" green", -3.0, 0, NULL}, {" blue", -1.0, 0, NULL}, {" cyan", -2.0, 0, NULL},
    // piqa: doc0 1 / 1; doc1 0 / 1 -> acc 0.5, acc_norm 1 (stderr 0)
    {" use a towel", -1.0, 0, NULL}, {" use a rock", -2.0, 0, NULL},
    {" jump", -1.5, 0, NULL}, {" run fast", -2.5, 0, NULL},
    // winogrande: the context decides (partial scoring); doc0 right, doc1 wrong -> 0.5
    {" was slippery.", -1.0, 0, "because the cup"}, {" was slippery.", -2.0, 0, "because Ann"},
    {" won.", -3.0, 0, "Bob"}, {" won.", -1.0, 0, "Sue"},
    // race (1 doc): " Mary" is gold -> acc 1
    {" Tom", -2.0, 0, NULL}, {" Mary", -1.0, 0, NULL}, {" Ann", -3.0, 0, NULL}, {" Bob", -4.0, 0, NULL},
    // mmlu: always predicts A
    {" A", -1.0, 0, NULL}, {" B", -2.0, 0, NULL}, {" C", -3.0, 0, NULL}, {" D", -4.0, 0, NULL},
    // lambada: ll -0.5 (greedy), -2.5 (not) -> perplexity exp(1.5), acc 0.5
    {" mat", -0.5, 1, NULL}, {" again", -2.5, 0, NULL},
};
static ToyScorer scorer = {table, (int)(sizeof table / sizeof table[0]), 64, .fail_at_call = 0};

static int open_toy_tokenizer(const char *path, EvalTokenizer *out, char *err, size_t errlen) {
    (void)path;
    (void)err;
    (void)errlen;
    *out = toy_tokenizer();
    return 0;
}
static int open_toy_scorer(const char *load, const char *device, Scorer *out, char *err, size_t errlen) {
    (void)load;
    (void)device;
    (void)err;
    (void)errlen;
    *out = toy_scorer(&scorer);
    return 0;
}
static const EvalHooks hooks = {open_toy_tokenizer, open_toy_scorer, NULL};

static void write_data(void) {
    toy_write(data, "allenai/ai2_arc/ARC-Easy/test-00000-of-00001.jsonl",
              "{\"question\":\"Which gas do plants absorb?\",\"choices\":{\"text\":[\"Oxygen\",\"Carbon dioxide\","
              "\"Helium\"],\"label\":[\"A\",\"B\",\"C\"]},\"answerKey\":\"B\"}\n"
              "{\"question\":\"Capital of France?\",\"choices\":{\"text\":[\"Paris\",\"London\"],\"label\":[\"A\","
              "\"B\"]},\"answerKey\":\"A\"}\n"
              "{\"question\":\"2+2?\",\"choices\":{\"text\":[\"4\",\"22\"],\"label\":[\"1\",\"2\"]},\"answerKey\":\"1\"}\n"
              "{\"question\":\"Pick\",\"choices\":{\"text\":[\"x\",\"yy\"],\"label\":[\"A\",\"B\"]},\"answerKey\":\"B\"}\n");
    toy_write(data, "Rowan/hellaswag/data/validation-00000-of-00001.jsonl",
              "{\"activity_label\":\"Skiing\",\"ctx_a\":\"A man skis.\",\"ctx_b\":\"then\",\"endings\":[\"alpha "
              "beta.\",\"[x] gamma\"],\"label\":\"1\"}\n"
              "{\"activity_label\":\"Cooking\",\"ctx_a\":\"A pan.\",\"ctx_b\":\"she\",\"endings\":[\"one\",\"two\"],"
              "\"label\":\"0\"}\n");
    toy_write(data, "allenai/openbookqa/main/test.jsonl",
              "{\"question_stem\":\"The sky is\",\"choices\":{\"text\":[\"red\",\"green\",\"blue\",\"cyan\"],"
              "\"label\":[\"A\",\"B\",\"C\",\"D\"]},\"answerKey\":\"C\"}\n");
    toy_write(data, "baber/piqa/data/validation-00000-of-00001.jsonl",
              "{\"goal\":\"Dry hands\",\"sol1\":\"use a towel\",\"sol2\":\"use a rock\",\"label\":0}\n"
              "{\"goal\":\"Go far\",\"sol1\":\"jump\",\"sol2\":\"run fast\",\"label\":1}\n");
    toy_write(data, "allenai/winogrande/winogrande_xl/validation-00000-of-00001.jsonl",
              "{\"sentence\":\"The cup fell because _ was slippery.\",\"option1\":\"Ann\",\"option2\":\"the cup\","
              "\"answer\":\"2\"}\n"
              "{\"sentence\":\"_ won.\",\"option1\":\"Bob\",\"option2\":\"Sue\",\"answer\":\"1\"}\n");
    toy_write(data, "EleutherAI/race/race_high_test.jsonl",
              "{\"article\":\"Tom has a dog.\",\"problems\":\"[{'answer': 'A', 'options': ['a dog', 'a cat', 'a bird', "
              "'a fish'], 'question': 'Tom has  _  .'}, {'answer': 'B', 'options': ['Tom', 'Mary', 'Ann', 'Bob'], "
              "'question': 'Who has a cat?'}]\"}\n");
    toy_write(data, "EleutherAI/lambada_openai/data/lambada_test.jsonl",
              "{\"text\":\"the cat sat on the mat\"}\n{\"text\":\"hello world again\"}\n");
    toy_write(data, "EleutherAI/wikitext_document_level/wikitext-2-raw-v1/test-00000-of-00001.jsonl",
              "{\"page\":\" = Title = \\n Hello world . \\n\"}\n");
    // MMLU: stem subjects 3 rows (answers 0, 1, 0 -> acc 2/3), the others 2 rows (0, 1 -> acc 1/2)
    for (int i = 0; i < eval_task_count(); i++) {
        const EvalTaskDef *d = eval_task_def(i);
        if (d->family != FAM_MMLU) continue;
        int stem = !strcmp(d->group, "mmlu_stem");
        char rel[300], text[1024];
        snprintf(rel, sizeof rel, "cais/mmlu/%s/test-00000-of-00001.jsonl", d->config);
        snprintf(text, sizeof text,
                 "{\"question\":\"Q1 %s\",\"subject\":\"%s\",\"choices\":[\"a\",\"b\",\"c\",\"d\"],\"answer\":0}\n"
                 "{\"question\":\"Q2\",\"subject\":\"%s\",\"choices\":[\"a\",\"b\",\"c\",\"d\"],\"answer\":1}\n%s",
                 d->config, d->config, d->config,
                 stem ? "{\"question\":\"Q3\",\"choices\":[\"a\",\"b\",\"c\",\"d\"],\"answer\":0}\n" : "");
        toy_write(data, rel, text);
    }
    toy_write(model, "tokenizer.json", "{}\n");
}

// Runs eval_main in a child; returns its exit status, with its stdout/stderr in out/err (malloc'd).
static int run_child(char **argv, int argc, const EvalHooks *h, char **out, char **errtext) {
    char of[400], ef[400];
    snprintf(of, sizeof of, "%s/stdout.txt", dir);
    snprintf(ef, sizeof ef, "%s/stderr.txt", dir);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(of, "w", stdout) || !freopen(ef, "w", stderr)) _exit(99);
        int rc = eval_main(argc, argv, h);
        fflush(stdout);
        fflush(stderr);
        _exit(rc);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    char e[ERR_LEN];
    size_t n;
    *out = read_file(of, &n, e, sizeof e);
    *errtext = read_file(ef, &n, e, sizeof e);
    if (!*out) *out = xstrdup("");
    if (!*errtext) *errtext = xstrdup("");
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static const cJSON *get(const cJSON *o, const char *path) { // "a/b/c"
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *save = NULL, *k = strtok_r(buf, "/", &save); k && o; k = strtok_r(NULL, "/", &save))
        o = cJSON_GetObjectItemCaseSensitive(o, k);
    return o;
}
#define NUM(j, path, want, tol)                                                                                  \
    do {                                                                                                         \
        const cJSON *v_ = get(j, path);                                                                          \
        CHECK(cJSON_IsNumber(v_) && fabs(v_->valuedouble - (double)(want)) <= (tol), "%s = %.17g, want %.17g",   \
              path, cJSON_IsNumber(v_) ? v_->valuedouble : NAN, (double)(want));                                 \
    } while (0)
#define STR(j, path, want)                                                                                       \
    do {                                                                                                         \
        const cJSON *v_ = get(j, path);                                                                          \
        CHECK(cJSON_IsString(v_) && !strcmp(v_->valuestring, want), "%s = \"%s\", want \"%s\"", path,            \
              cJSON_IsString(v_) ? v_->valuestring : "(not a string)", want);                                    \
    } while (0)

static cJSON *load_json(const char *path) {
    char e[ERR_LEN];
    size_t n;
    char *text = read_file(path, &n, e, sizeof e);
    if (!text) {
        CHECK(0, "results file: %s", e);
        return NULL;
    }
    cJSON *j = cJSON_Parse(text);
    free(text);
    CHECK(j, "results file %s parses as JSON", path);
    return j;
}

static char *find_results(const char *base) { // base/<sanitized model>/results_*.json
    char *san = eval_sanitize_model_name(model);
    char pat[1024];
    snprintf(pat, sizeof pat, "ls %s/%s/results_*.json 2>/dev/null", base, san);
    free(san);
    FILE *p = popen(pat, "r");
    char line[1024] = "";
    if (!p || !fgets(line, sizeof line, p)) line[0] = 0;
    if (p) pclose(p);
    line[strcspn(line, "\n")] = 0;
    return line[0] ? xstrdup(line) : NULL;
}

// Finds the table line whose first cell (trimmed) is `first`, moves `skip` lines down, splits it into 9
// trimmed cells. Returns 1 if found.
static int table_row(const char *out, const char *first, int skip, char cells[9][160]) {
    for (const char *line = out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (*line != '|') continue;
        const char *e = strchr(line + 1, '|');
        if (!e) continue;
        char cell[160];
        size_t n = (size_t)(e - line - 1) < sizeof cell - 1 ? (size_t)(e - line - 1) : sizeof cell - 1;
        memcpy(cell, line + 1, n);
        cell[n] = 0;
        char *t = py_strip(cell);
        int hit = !strcmp(t, first);
        free(t);
        if (!hit) continue;
        for (int k = 0; k < skip && line; k++) line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL;
        if (!line || *line != '|') return 0;
        const char *p = line + 1;
        for (int i = 0; i < 9; i++) {
            const char *q = strchr(p, '|');
            if (!q) return 0;
            size_t m = (size_t)(q - p) < 159 ? (size_t)(q - p) : 159;
            memcpy(cell, p, m);
            cell[m] = 0;
            char *u = py_strip(cell);
            snprintf(cells[i], 160, "%s", u);
            free(u);
            p = q + 1;
        }
        return 1;
    }
    return 0;
}

// All '|' lines of each table have the same width in code points.
static int table_aligned(const char *out) {
    long width = -1;
    for (const char *line = out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        const char *e = strchr(line, '\n');
        size_t n = e ? (size_t)(e - line) : strlen(line);
        if (*line != '|') {
            width = -1; // a new table starts after a non-table line
            continue;
        }
        long w = utf8_codepoints(line, n);
        if (width >= 0 && w != width) return 0;
        width = w;
    }
    return 1;
}

static void test_full_run(void) {
    char outdir[400];
    snprintf(outdir, sizeof outdir, "%s/out", dir);
    char *argv[] = {"eval", "--load", model, "--tasks",
                    "arc_easy,hellaswag,openbookqa,piqa,winogrande,race,lambada_openai,wikitext,mmlu", "--data-dir",
                    data, "--batch-size", "3", "--device", "cpu", "--output-path", outdir};
    char *out, *errt;
    int rc = run_child(argv, (int)(sizeof argv / sizeof argv[0]), &hooks, &out, &errt);
    CHECK(rc == 0, "full run exits 0, got %d; stderr:\n%s", rc, errt);
    char *path = find_results(outdir);
    CHECK(path != NULL, "results written to OUT/<model_name_sanitized>/results_<time>.json");
    cJSON *j = path ? load_json(path) : NULL;
    if (j) {
        STR(j, "results/arc_easy/name", "arc_easy");
        STR(j, "results/arc_easy/alias", "arc_easy");
        NUM(j, "results/arc_easy/sample_len", 4, 0);
        NUM(j, "results/arc_easy/acc,none", 0.5, 1e-12);
        NUM(j, "results/arc_easy/acc_stderr,none", sqrt(0.25 / 3), 1e-12);
        NUM(j, "results/arc_easy/acc_norm,none", 0.75, 1e-12);
        NUM(j, "results/arc_easy/acc_norm_stderr,none", 0.25, 1e-12);
        NUM(j, "results/hellaswag/acc,none", 0.5, 1e-12);
        NUM(j, "results/hellaswag/acc_norm,none", 0.5, 1e-12);
        NUM(j, "results/openbookqa/acc,none", 1, 0);
        STR(j, "results/openbookqa/acc_stderr,none", "N/A");
        NUM(j, "results/piqa/acc,none", 0.5, 1e-12);
        NUM(j, "results/piqa/acc_norm,none", 1.0, 1e-12);
        NUM(j, "results/piqa/acc_norm_stderr,none", 0.0, 0);
        NUM(j, "results/winogrande/acc,none", 0.5, 1e-12);
        CHECK(!get(j, "results/winogrande/acc_norm,none"), "winogrande has no acc_norm");
        NUM(j, "results/race/acc,none", 1, 0);
        CHECK(!get(j, "results/race/acc_norm,none"), "race has no acc_norm");
        NUM(j, "results/lambada_openai/perplexity,none", exp(1.5), 1e-9);
        const cJSON *pse = get(j, "results/lambada_openai/perplexity_stderr,none");
        CHECK(cJSON_IsNumber(pse) && pse->valuedouble > 0, "lambada perplexity has a bootstrap stderr");
        NUM(j, "results/lambada_openai/acc,none", 0.5, 1e-12);
        NUM(j, "results/lambada_openai/acc_stderr,none", 0.5, 1e-12);
        // wikitext, new BOS mode: BOS + 10 toy tokens = 11 predicted, 8 words, 28 bytes
        NUM(j, "results/wikitext/word_perplexity,none", exp(11.0 / 8), 1e-9);
        NUM(j, "results/wikitext/byte_perplexity,none", exp(11.0 / 28), 1e-12);
        NUM(j, "results/wikitext/bits_per_byte,none", 11.0 / 28 / log(2.0), 1e-12);
        STR(j, "results/wikitext/word_perplexity_stderr,none", "N/A");
        // MMLU: stem 19 x 3 rows (2/3 right), others 38 x 2 rows (1/2) -> 133 rows, 76 right
        NUM(j, "results/mmlu_abstract_algebra/acc,none", 2.0 / 3, 1e-12);
        STR(j, "results/mmlu_abstract_algebra/alias", "abstract_algebra");
        NUM(j, "results/mmlu_abstract_algebra/acc_stderr,none", 1.0 / 3, 1e-12);
        NUM(j, "results/mmlu_virology/acc_stderr,none", 0.5, 1e-12);
        NUM(j, "results/mmlu/acc,none", 76.0 / 133, 1e-12);
        NUM(j, "results/mmlu/acc_stderr,none", sqrt(95.0 / 228 / 133), 1e-12); // pooled over 57 leaves
        NUM(j, "results/mmlu/sample_len", 133, 0);
        NUM(j, "results/mmlu/sample_count/acc,none", 133, 0);
        STR(j, "results/mmlu/alias", "mmlu");
        NUM(j, "results/mmlu_stem/acc,none", 2.0 / 3, 1e-12);
        NUM(j, "results/mmlu_stem/acc_stderr,none", sqrt(1.0 / 171), 1e-12);
        STR(j, "results/mmlu_stem/alias", "stem");
        NUM(j, "results/mmlu_other/acc,none", 0.5, 1e-12);
        NUM(j, "results/mmlu_other/acc_stderr,none", sqrt(1.0 / 52), 1e-12);
        STR(j, "results/mmlu_social_sciences/alias", "social sciences");
        NUM(j, "results/mmlu_humanities/sample_len", 26, 0);
        NUM(j, "groups/mmlu/acc,none", 76.0 / 133, 1e-12);
        CHECK(cJSON_GetArraySize(get(j, "groups")) == 5, "groups holds mmlu and its 4 subgroups");
        CHECK(cJSON_GetArraySize(get(j, "group_subtasks/mmlu")) == 4, "mmlu has 4 subgroups");
        STR(cJSON_GetArrayItem(get(j, "group_subtasks/mmlu"), 0), "", "mmlu_stem");
        CHECK(cJSON_GetArraySize(get(j, "group_subtasks/mmlu_stem")) == 19, "mmlu_stem lists 19 leaves");
        NUM(j, "versions/arc_easy", 1.0, 0);
        NUM(j, "versions/wikitext", 2.0, 0);
        NUM(j, "versions/race", 3.0, 0);
        STR(j, "versions/mmlu", "2");
        NUM(j, "n-shot/mmlu_anatomy", 0, 0);
        NUM(j, "n-samples/arc_easy/original", 4, 0);
        NUM(j, "n-samples/arc_easy/effective", 4, 0);
        CHECK(cJSON_IsFalse(get(j, "higher_is_better/lambada_openai/perplexity")), "perplexity: lower is better");
        CHECK(cJSON_IsTrue(get(j, "higher_is_better/arc_easy/acc_norm")), "acc_norm: higher is better");
        STR(j, "configs/mmlu_anatomy/description",
            "The following are multiple choice questions (with answers) about anatomy.\n\n");
        STR(j, "configs/race/dataset_path", "EleutherAI/race");
        STR(j, "config/batch_size", "3");
        STR(j, "config/device", "cpu");
        CHECK(cJSON_IsNull(get(j, "config/limit")), "config.limit is null without --limit");
        NUM(j, "config/bootstrap_iters", 100000, 0);
        STR(j, "lm_eval_version", "0.4.12");
        STR(j, "gdn_eval/bos_mode", "new");
        NUM(j, "max_length", 64, 0);
        NUM(j, "eot_token_id", TOY_EOS, 0);
        STR(cJSON_GetArrayItem(get(j, "tokenizer_bos_token"), 0), "", "<s>");
        STR(cJSON_GetArrayItem(get(j, "tokenizer_bos_token"), 1), "", "1");
        STR(j, "model_name", model);
        char *san = eval_sanitize_model_name(model);
        STR(j, "model_name_sanitized", san);
        CHECK(!strchr(san, '/'), "sanitized name has no '/'");
        free(san);
        CHECK(cJSON_IsNumber(get(j, "date")) && get(j, "date")->valuedouble > 1.7e9, "date is a unix time");
        CHECK(cJSON_IsString(get(j, "total_evaluation_time_seconds")), "total time is a string, as lm-eval");
        cJSON_Delete(j);
    }
    free(path);
    // the printed tables: rows located by their first cell, cells compared trimmed
    char c[9][160];
    char want[64];
    CHECK(table_row(out, "Tasks", 0, c) && !strcmp(c[1], "Version") && !strcmp(c[4], "Metric") &&
              !strcmp(c[6], "Value") && !strcmp(c[8], "Stderr"),
          "table header as lm-eval's make_table; stdout:\n%s", out);
    snprintf(want, sizeof want, "%.4f", sqrt(0.25 / 3));
    CHECK(table_row(out, "arc_easy", 0, c) && !strcmp(c[1], "1") && !strcmp(c[2], "none") && !strcmp(c[3], "0") &&
              !strcmp(c[4], "acc") && !strcmp(c[5], "\xE2\x86\x91") && !strcmp(c[6], "0.5000") &&
              !strcmp(c[7], "\xC2\xB1") && !strcmp(c[8], want),
          "arc_easy acc row: %s|%s|%s|%s|%s|%s|%s|%s", c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8]);
    CHECK(table_row(out, "arc_easy", 1, c) && !c[0][0] && !c[1][0] && !strcmp(c[4], "acc_norm") &&
              !strcmp(c[6], "0.7500") && !strcmp(c[8], "0.2500"),
          "arc_easy acc_norm row follows with blank name and version");
    CHECK(table_row(out, "openbookqa", 0, c) && !strcmp(c[8], "N/A"), "N/A stderr printed");
    snprintf(want, sizeof want, "%.4f", 11.0 / 28 / log(2.0));
    CHECK(table_row(out, "wikitext", 0, c) && !strcmp(c[1], "2") && !strcmp(c[4], "bits_per_byte") &&
              !strcmp(c[5], "\xE2\x86\x93") && !strcmp(c[6], want),
          "wikitext rows sorted by metric name, lower is better: %s %s %s", c[4], c[5], c[6]);
    CHECK(table_row(out, "wikitext", 2, c) && !strcmp(c[4], "word_perplexity"), "word_perplexity third");
    snprintf(want, sizeof want, "%.4f", sqrt(95.0 / 228 / 133));
    CHECK(table_row(out, "mmlu", 0, c) && !strcmp(c[1], "2") && !strcmp(c[6], "0.5714") && !strcmp(c[8], want),
          "mmlu group row: %s %s %s", c[1], c[6], c[8]);
    CHECK(table_row(out, "mmlu", 1, c) && !strcmp(c[0], "- humanities"), "mmlu's subgroups follow, sorted: '%s'",
          c[0]);
    CHECK(table_row(out, "mmlu", 2, c) && !strcmp(c[0], "- formal_logic"), "then humanities' leaves: '%s'", c[0]);
    CHECK(strstr(out, "\n| - humanities ") && strstr(out, "\n|  - formal_logic "), "indentation by depth");
    CHECK(table_row(out, "Groups", 0, c), "groups table printed");
    CHECK(table_aligned(out), "every table line has the same width");
    CHECK(strstr(out, "gdn.c (pretrained=") == out, "header line first");
    CHECK(strstr(errt, "eval: scoring") && strstr(errt, "req/s"), "progress on stderr");
    free(out);
    free(errt);
}

static void test_old_mode_and_limit(void) {
    char file[400], log[400];
    snprintf(file, sizeof file, "%s/single/r.json", dir);
    snprintf(log, sizeof log, "%s/requests.jsonl", dir);
    char *argv[] = {"eval",      "--load", model, "--tasks",        "wikitext,race,arc_easy", "--data-dir", data,
                    "--bos-mode", "old",   "--limit", "1", "--output-path", file, "--batch-size=auto",
                    "--log-requests", log};
    char *out, *errt;
    int rc = run_child(argv, (int)(sizeof argv / sizeof argv[0]), &hooks, &out, &errt);
    CHECK(rc == 0, "old-mode run exits 0; stderr:\n%s", errt);
    cJSON *j = load_json(file);
    if (j) {
        STR(j, "lm_eval_version", "0.4.9.1");
        NUM(j, "versions/race", 2.0, 0);
        NUM(j, "results/wikitext/word_perplexity,none", exp(10.0 / 8), 1e-9); // no BOS: 10 tokens
        NUM(j, "n-samples/arc_easy/effective", 1, 0);
        NUM(j, "n-samples/arc_easy/original", 4, 0);
        STR(j, "results/arc_easy/acc_stderr,none", "N/A"); // one doc
        NUM(j, "config/limit", 1, 0);
        STR(j, "config/batch_size", "auto");
        CHECK(!get(j, "groups"), "no groups without mmlu");
        cJSON_Delete(j);
    }
    CHECK(strstr(errt, "--limit 1: scoring a subset"), "--limit warns");
    // the request log: 1 wikitext window + 4 race + 3 arc_easy requests, in task order
    char e[ERR_LEN];
    size_t n;
    char *text = read_file(log, &n, e, sizeof e);
    CHECK(text, "request log written: %s", e);
    int lines = 0, seen_arc = 0;
    for (char *save = NULL, *l = text ? strtok_r(text, "\n", &save) : NULL; l; l = strtok_r(NULL, "\n", &save)) {
        cJSON *o = cJSON_Parse(l);
        CHECK(o, "log line %d is JSON", lines);
        lines++;
        if (o && !strcmp(get(o, "task")->valuestring, "wikitext")) {
            CHECK(cJSON_GetArraySize(get(o, "tokens")) == 11 && get(o, "cont_len")->valueint == 10 &&
                      get(o, "ll")->valuedouble == -10.0 && cJSON_GetArrayItem(get(o, "tokens"), 0)->valueint == TOY_BOS,
                  "wikitext window: prefix BOS + 10 tokens, all 10 scored");
        }
        if (o && !strcmp(get(o, "task")->valuestring, "arc_easy") && get(o, "idx")->valueint == 0) {
            seen_arc = 1;
            STR(o, "context", "Question: Which gas do plants absorb?\nAnswer:");
            STR(o, "continuation", " Oxygen");
            NUM(o, "gold", 1, 0);
            NUM(o, "ll", -3.0, 0);
            NUM(o, "cont_len", 1, 0);
            const cJSON *tk = get(o, "tokens");
            int nt = cJSON_GetArraySize(tk);
            // the child tokenized; ids are hashes of the pieces, so the parent's own encoding must agree
            const char *whole = "Question: Which gas do plants absorb?\nAnswer: Oxygen"; // old mode: no BOS
            int32_t *want = NULL;
            size_t cap = 0, nw = toy_encode(NULL, whole, strlen(whole), 0, &want, &cap);
            int same = (size_t)nt == nw;
            for (int k = 0; same && k < nt; k++) same = cJSON_GetArrayItem(tk, k)->valueint == want[k];
            CHECK(same, "logged tokens are the encoding of context + continuation (%d vs %zu tokens)", nt, nw);
            free(want);
        }
        cJSON_Delete(o);
    }
    CHECK(lines == 8 && seen_arc, "8 request lines, got %d", lines);
    free(text);
    free(out);
    free(errt);
}

static void expect_error(const char *what, char **argv, int argc, const EvalHooks *h, const char *want) {
    char *out, *errt;
    int rc = run_child(argv, argc, h, &out, &errt);
    CHECK(rc != 0 && strstr(errt, want), "%s: want exit != 0 and \"%s\", got %d:\n%s", what, want, rc, errt);
    const char *g = strstr(errt, "gdn: ");
    CHECK(g && (g == errt || g[-1] == '\n') && !strstr(g + 1, "gdn: ") && strchr(g, '\n') == errt + strlen(errt) - 1,
          "%s: the error is one last line \"gdn: ...\":\n%s", what, errt);
    free(out);
    free(errt);
}

static void test_errors(void) {
    char bad[400], empty[400];
    snprintf(bad, sizeof bad, "%s/bad", dir);
    snprintf(empty, sizeof empty, "%s/empty", dir);
    mkdir_p(empty);
    toy_write(bad, "allenai/ai2_arc/ARC-Easy/test.jsonl",
              "{\"question\":\"q\",\"choices\":{\"text\":[\"a\"],\"label\":[\"A\"]},\"answerKey\":\"A\"}\n"
              "{\"question\":\"q\",\"choices\":{\"text\":[\"a\"],\"label\":[\"A\"]}}\n");
#define ARGS(...) (char *[]){"eval", __VA_ARGS__}, (int)(sizeof((char *[]){"eval", __VA_ARGS__}) / sizeof(char *))
    expect_error("unknown task", ARGS("--load", model, "--tasks", "arc_easy,boolq", "--data-dir", data), &hooks,
                 "gdn: eval: unknown task 'boolq'; known: arc_easy");
    expect_error("missing mmlu files", ARGS("--load", model, "--tasks", "mmlu", "--data-dir", empty), &hooks,
                 "mmlu_abstract_algebra: no test split found under");
    expect_error("malformed row", ARGS("--load", model, "--tasks", "arc_easy", "--data-dir", bad), &hooks,
                 "test.jsonl:2: field 'answerKey' is missing (expected a string)");
    expect_error("unknown option", ARGS("--load", model, "--tasks", "arc_easy", "--data-dir", data, "--fewshot", "1"),
                 &hooks, "unknown option '--fewshot'");
    expect_error("no tasks", ARGS("--load", model, "--data-dir", data), &hooks, "--tasks LIST is required");
    expect_error("no model", ARGS("--tasks", "piqa", "--data-dir", data), &hooks, "--load MODEL is required");
    expect_error("few-shot", ARGS("--load", model, "--tasks", "piqa", "--data-dir", data, "--num-fewshot", "5"), &hooks,
                 "supported for mmlu only");
    expect_error("bos mode", ARGS("--load", model, "--tasks", "piqa", "--data-dir", data, "--bos-mode", "maybe"),
                 &hooks, "--bos-mode expects old or new, got 'maybe'");
    expect_error("limit", ARGS("--load", model, "--tasks", "piqa", "--data-dir", data, "--limit", "1.5"), &hooks,
                 "--limit expects a count >= 1 or a fraction");
    expect_error("batch size", ARGS("--load", model, "--tasks", "piqa", "--data-dir", data, "--batch-size", "0"),
                 &hooks, "--batch-size expects an integer in [1,");
    // (without --tokenizer, eval looks in and beside MODEL, then .assets/llama3/, as generate does)
    char missing_tok[600];
    snprintf(missing_tok, sizeof missing_tok, "%s/tokenizer.json", empty);
    expect_error("no tokenizer", ARGS("--load", empty, "--tasks", "piqa", "--data-dir", data, "--tokenizer", missing_tok),
                 &hooks, "no tokenizer at");
    EvalHooks no_model = {open_toy_tokenizer, NULL, NULL};
    expect_error("no model loader", ARGS("--load", model, "--tasks", "piqa", "--data-dir", data), &no_model,
                 "model loading not built");
    char *out, *errt;
    int rc = run_child(ARGS("--help"), &hooks, &out, &errt);
    CHECK(rc == 0 && strstr(out, "usage: gdn eval") && strstr(out, "--bos-mode old|new"), "--help prints usage");
    free(out);
    free(errt);
#undef ARGS
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/test_eval_e2e.XXXXXX");
    if (!mkdtemp(dir)) die("mkdtemp failed");
    snprintf(data, sizeof data, "%s/data", dir);
    snprintf(model, sizeof model, "%s/model", dir);
    write_data();
    test_full_run();
    test_old_mode_and_limit();
    test_errors();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", dir);
    if (toy_failures) {
        fprintf(stderr, "test_eval_e2e: %d checks FAILED\n", toy_failures);
        return 1;
    }
    printf("PASS test_eval_e2e: full run over all task families + 57 MMLU subjects (results JSON field by field, "
           "groups, tables), old BOS/RACE mode, --limit, .json path, 13 command errors\n");
    return 0;
}
