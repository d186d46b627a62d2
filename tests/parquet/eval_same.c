// eval_same.c: a helper for tests/t_eval_parquet.sh (built there against build/libgdn.a). Runs the whole
// `gdn eval` pipeline (eval_main) twice, on the same tasks stored as JSON Lines and as Parquet, with the toy
// tokenizer and toy scorer of tests/eval/toy.h and the product's Parquet hook (eval_read_parquet), and
// checks that the two runs are the same: every scored request (rendered strings, tokens, log-likelihoods) in the
// --log-requests file, the results JSON (but its clock fields) and the printed table; and that the Parquet run
// read every task from .parquet files.
//   eval_same JSONL_DIR PARQUET_DIR WORK_DIR TASKS [NUM_FEWSHOT]
// Exits 1 on any difference.
#include <sys/wait.h>
#include <unistd.h>

#include "tests/eval/toy.h"
#include "util/common.h"

static ToyScorer scorer = {NULL, 0, 256, .fail_at_call = 0}; // every continuation: -1 per token, not greedy

static int open_toy_tokenizer(const char *path, EvalTokenizer *out, char *err, size_t errlen) {
    (void)path, (void)err, (void)errlen;
    *out = toy_tokenizer();
    return 0;
}
static int open_toy_scorer(const char *load, const char *device, Scorer *out, char *err, size_t errlen) {
    (void)load, (void)device, (void)err, (void)errlen;
    *out = toy_scorer(&scorer);
    return 0;
}
static const EvalHooks hooks = {open_toy_tokenizer, open_toy_scorer, eval_read_parquet};

// Runs eval_main on data_dir in a child; its stdout/stderr, results and request log go to WORK/<tag>.*.
static int run(const char *work, const char *tag, const char *model, const char *data_dir, const char *tasks,
               const char *fewshot) {
    char out[4096], errf[4096], results[4096], log[4096];
    snprintf(out, sizeof out, "%s/%s.stdout", work, tag);
    snprintf(errf, sizeof errf, "%s/%s.stderr", work, tag);
    snprintf(results, sizeof results, "%s/%s.json", work, tag);
    snprintf(log, sizeof log, "%s/%s.requests.jsonl", work, tag);
    char *argv[] = {"eval", "--load", (char *)model, "--tasks", (char *)tasks, "--data-dir", (char *)data_dir,
                    "--batch-size", "5", "--device", "cpu", "--output-path", results, "--log-requests", log,
                    "--num-fewshot", (char *)(fewshot ? fewshot : "0")};
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(out, "w", stdout) || !freopen(errf, "w", stderr)) _exit(99);
        int rc = eval_main((int)(sizeof argv / sizeof argv[0]), argv, &hooks);
        fflush(stdout);
        fflush(stderr);
        _exit(rc);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    if (rc != 0) {
        char e[ERR_LEN];
        size_t n;
        char *text = read_file(errf, &n, e, sizeof e);
        fprintf(stderr, "FAIL eval on %s exited %d:\n%s\n", data_dir, rc, text ? text : e);
        free(text);
    }
    return rc;
}

static char *slurp(const char *work, const char *tag, const char *ext) {
    char path[4096], e[ERR_LEN];
    size_t n;
    snprintf(path, sizeof path, "%s/%s.%s", work, tag, ext);
    char *text = read_file(path, &n, e, sizeof e);
    if (!text) die("%s", e);
    return text;
}

// Index of the first differing line (1-based), 0 if equal.
static long first_diff_line(const char *a, const char *b) {
    long line = 1;
    for (; *a && *a == *b; a++, b++) line += *a == '\n';
    return *a == *b ? 0 : line;
}

int main(int argc, char **argv) {
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: eval_same JSONL_DIR PARQUET_DIR WORK_DIR TASKS [NUM_FEWSHOT]\n");
        return 2;
    }
    const char *jdir = argv[1], *pdir = argv[2], *work = argv[3], *tasks = argv[4], *k = argc == 6 ? argv[5] : NULL;
    (void)toy_failures; // toy.h's CHECK counter: this helper reports through its exit status
    char model[2048];
    snprintf(model, sizeof model, "%.2000s/toy_model", work);
    toy_write(model, "tokenizer.json", "{}\n");
    if (run(work, "jsonl", model, jdir, tasks, k) || run(work, "parquet", model, pdir, tasks, k)) return 1;
    int bad = 0;

    // The Parquet run read every task from .parquet files (eval's "eval: TASK: N docs from FILE" lines).
    char *je = slurp(work, "jsonl", "stderr"), *pe = slurp(work, "parquet", "stderr");
    int tasks_seen = 0;
    for (char *line = pe; (line = strstr(line, "eval: ")); line++) {
        char *end = strchr(line, '\n');
        if (!end) break;
        *end = 0;
        if ((strstr(line, " docs from ") || strstr(line, " doc from ")) && !strstr(line, " subjects, ")) {
            tasks_seen++;
            if (!strstr(line, ".parquet")) {
                fprintf(stderr, "FAIL not read from Parquet: %s\n", line);
                bad = 1;
            }
            char want[512]; // "eval: TASK: N docs": the same count from JSON Lines
            snprintf(want, sizeof want, "%.*s", (int)(strstr(line, " from ") - line), line);
            if (!strstr(je, want)) {
                fprintf(stderr, "FAIL JSON Lines run did not report '%s'\n", want);
                bad = 1;
            }
        }
        *end = '\n';
    }
    if (tasks_seen == 0) {
        fprintf(stderr, "FAIL the Parquet run reported no task files:\n%s\n", pe);
        bad = 1;
    }

    // Every request and its scores, line by line.
    char *jl = slurp(work, "jsonl", "requests.jsonl"), *pl = slurp(work, "parquet", "requests.jsonl");
    long nreq = 0;
    for (const char *p = jl; *p; p++) nreq += *p == '\n';
    long d = first_diff_line(jl, pl);
    if (d) {
        fprintf(stderr, "FAIL request logs differ from line %ld\n", d);
        bad = 1;
    }
    if (nreq < 100) {
        fprintf(stderr, "FAIL only %ld requests logged\n", nreq);
        bad = 1;
    }

    // Results JSON, but for the clock.
    char *jr = slurp(work, "jsonl", "json"), *pr = slurp(work, "parquet", "json");
    cJSON *a = cJSON_Parse(jr), *b = cJSON_Parse(pr);
    static const char *const clock[] = {"date", "total_evaluation_time_seconds", "start_time", "end_time"};
    for (size_t i = 0; i < sizeof clock / sizeof clock[0]; i++) {
        cJSON_DeleteItemFromObjectCaseSensitive(a, clock[i]);
        cJSON_DeleteItemFromObjectCaseSensitive(b, clock[i]);
    }
    if (!a || !b || !cJSON_Compare(a, b, 1)) {
        char *x = a ? cJSON_Print(a) : NULL, *y = b ? cJSON_Print(b) : NULL;
        fprintf(stderr, "FAIL results differ from line %ld\n", x && y ? first_diff_line(x, y) : 0L);
        free(x);
        free(y);
        bad = 1;
    }
    const cJSON *results = cJSON_GetObjectItemCaseSensitive(a, "results");
    int ntask_results = cJSON_GetArraySize(results);

    // The printed table.
    char *jo = slurp(work, "jsonl", "stdout"), *po = slurp(work, "parquet", "stdout");
    if (strcmp(jo, po)) {
        fprintf(stderr, "FAIL printed tables differ from line %ld\n", first_diff_line(jo, po));
        bad = 1;
    }
    if (!bad)
        printf("PASS %s vs %s: %d task files read from Parquet, %ld scored requests, results for %d tasks/groups "
               "identical\n", jdir, pdir, tasks_seen, nreq, ntask_results);
    cJSON_Delete(a);
    cJSON_Delete(b);
    free(je), free(pe), free(jl), free(pl), free(jr), free(pr), free(jo), free(po);
    return bad;
}
