// test_runlog.c: train/runlog.c's validation API (the hook issue 18's eval calls) and the resume truncation:
// Megatron's dashed validation block on stdout, the JSONL rows, the summary's final/best validation loss,
// TensorBoard's validation tags (read back by tests/report/tbread.py), `gdn report`'s reader of those rows,
// and metrics_truncate on a file whose last line a crash cut short.
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "report/series.h"
#include "train/runlog.h"
#include "util/common.h"

static char *slurp(const char *path) {
    char err[ERR_LEN];
    size_t n;
    char *t = read_file(path, &n, err, sizeof err);
    if (!t) { fprintf(stderr, "%s\n", err); exit(1); }
    return t;
}
static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++) n++;
    return n;
}

int main(void) {
    char dir[] = "/tmp/test_runlog.XXXXXX";
    if (!mkdtemp(dir)) return 1;
    Config c;
    config_defaults(&c);
    c.global_batch_size = 8; c.seq_length = 16; c.train_iters = 10;
    snprintf(c.metrics_file, sizeof c.metrics_file, "%s/m.jsonl", dir);
    snprintf(c.tensorboard_dir, sizeof c.tensorboard_dir, "%s/tb", dir);
    char out[600];
    snprintf(out, sizeof out, "%s/stdout.txt", dir);
    fflush(stdout);
    int saved = dup(1);
    if (!freopen(out, "w", stdout)) return 1;
    RunLog *r = runlog_open(&c, 0, 1, 0, 1e6, 1e6);
    for (int it = 1; it <= 4; it++) runlog_step(r, it, 5.0 - 0.5 * it, 1e-3, 0.5, -1);
    runlog_valid(r, 2, "iteration 2", 3.0);
    runlog_valid(r, 4, "iteration 4 on validation set", 2.5);
    runlog_close(r, 4);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    char *text = slurp(out);
    const char *line = " validation loss at iteration 2 | lm loss value: 3.000000E+00 | lm loss PPL: 2.008554E+01 | ";
    char block[800], dashes[200];
    memset(dashes, '-', strlen(line) + 1);
    dashes[strlen(line) + 1] = 0;
    snprintf(block, sizeof block, "%s\n%s\n%s\n", dashes, line, dashes);
    CHECK(strstr(text, block) != NULL, "Megatron's validation block not printed; stdout:\n%s", text);
    CHECK(strstr(text, "validation loss final 2.5000 best 2.5000") != NULL, "summary: %s", text);
    free(text);

    char *m = slurp(c.metrics_file);
    CHECK(count(m, "\"valid_loss\"") == 2 && count(m, "\"summary\": true") == 1, "rows:\n%s", m);
    CHECK(strstr(m, "{\"iteration\": 2, \"valid_loss\": 3, \"valid_ppl\": 20.0855369, \"consumed_samples\": 16}") != NULL, "valid row:\n%s", m);
    CHECK(strstr(m, "\"final_valid_loss\": 2.5, \"best_valid_loss\": 2.5") != NULL, "summary row:\n%s", m);
    free(m);

    Series s;
    LoadOpts lo = {8, 32};
    char err[ERR_LEN];
    CHECK(series_load(&s, c.metrics_file, &lo, err, sizeof err) == 0, "series_load: %s", err);
    int ex;
    CHECK(s.n == 4 && series_at(&s, offsetof(Point, valid), 4, &ex) == 2.5 && ex, "reader: %zu points", s.n);
    CHECK(series_at(&s, offsetof(Point, loss), 3, &ex) == 3.5 && !strcmp(s.kind, "gdn metrics"), "reader loss");
    series_free(&s);

    // TensorBoard's validation tags, read by the independent reader
    char cmd[700];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/report/tbread.py %s/tb", dir);
    FILE *p = popen(cmd, "r");
    Buf js = {0};
    char chunk[4096];
    size_t k;
    while (p && (k = fread(chunk, 1, sizeof chunk, p)) > 0) buf_put(&js, chunk, k);
    CHECK(p && pclose(p) == 0, "tbread.py failed");
    cJSON *j = cJSON_Parse(js.p ? js.p : "");
    const cJSON *tags = cJSON_GetObjectItem(j, "tags");
    struct { const char *tag; long s0, s1; double v0, v1; } want[] = {
        {"lm loss validation", 2, 4, 3.0, 2.5}, {"lm loss validation vs samples", 16, 32, 3.0, 2.5},
        {"lm loss validation ppl", 2, 4, exp(3.0), exp(2.5)}, {"lm loss validation ppl vs samples", 16, 32, exp(3.0), exp(2.5)}};
    for (int i = 0; i < 4; i++) {
        const cJSON *a = cJSON_GetObjectItem(tags, want[i].tag);
        int ok = cJSON_GetArraySize(a) == 2;
        for (int q = 0; ok && q < 2; q++) {
            const cJSON *pt = cJSON_GetArrayItem(a, q);
            double st = cJSON_GetArrayItem(pt, 0)->valuedouble, v = cJSON_GetArrayItem(pt, 1)->valuedouble;
            ok = st == (q ? want[i].s1 : want[i].s0) && fabs(v - (q ? want[i].v1 : want[i].v0)) <= 1e-6 * v;
        }
        CHECK(ok, "tag '%s' wrong or missing", want[i].tag);
    }
    cJSON_Delete(j);
    buf_free(&js);

    // truncation for a resume at 2: rows of 1-2 stay (the validation at 2 too), the rest and the summary go;
    // a cut-short last line is dropped
    FILE *f = fopen(c.metrics_file, "a");
    fputs("{\"iteration\": 1, \"lm_l", f);
    fclose(f);
    CHECK(metrics_truncate(c.metrics_file, 2, err, sizeof err) == 3, "kept rows");
    m = slurp(c.metrics_file);
    CHECK(count(m, "\n") == 3 && count(m, "\"iteration\": 1,") == 1 && count(m, "\"iteration\": 2,") == 2 && !strstr(m, "summary"),
          "after truncation:\n%s", m);
    free(m);
    CHECK(metrics_truncate("/nonexistent/x.jsonl", 2, err, sizeof err) == 0, "a missing file is 0 rows");

    // a GPU run of 2 ranks: per-GPU columns and MFU. 8 x 16 tokens a step, 64 a rank, 1 s a step, 1e12
    // FLOP/token: 64 tokens/s/GPU, 64 TFLOP/s/GPU, MFU = 64e12 / 989.4e12 = 6.5%
    Config g = c;
    g.metrics_file[0] = g.tensorboard_dir[0] = 0;
    snprintf(out, sizeof out, "%s/gpu.txt", dir);
    fflush(stdout);
    saved = dup(1);
    if (!freopen(out, "w", stdout)) return 1;
    r = runlog_open(&g, 0, 2, 1, 1e12, 1e12);
    runlog_step(r, 1, 4.0, 1e-3, 0.5, -1);
    runlog_interval(r, 1, 1000.0, 4.0, 1e-3, 0.5);
    runlog_close(r, 1);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    text = slurp(out);
    CHECK(strstr(text, "| throughput per GPU (TFLOP/s/GPU): 64.0 | tokens per GPU (tokens/s/GPU): 64.0 |") != NULL, "GPU line:\n%s", text);
    CHECK(strstr(text, "ETA: 0:00:09 |") != NULL, "ETA of 9 more 1-s steps:\n%s", text);
    CHECK(strstr(text, "MFU 6.5%") != NULL && strstr(text, "(64.0 per GPU)") != NULL, "GPU summary:\n%s", text);
    free(text);

    char hms[32];
    format_hms(hms, sizeof hms, 3725.4);
    CHECK(!strcmp(hms, "1:02:05"), "%s", hms);
    format_hms(hms, sizeof hms, 2 * 86400 + 61);
    CHECK(!strcmp(hms, "2d 0:01:01"), "%s", hms);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {}
    printf("%d checks, %d failures\n", checks, failures);
    return failures != 0;
}
