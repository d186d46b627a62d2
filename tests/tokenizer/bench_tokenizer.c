// bench_tokenizer.c: throughput of tok_encode on a JSONL file of texts (one JSON string per line), for
// scripts/bench_tokenizer.sh. Not a test: built by that script against build/libgdn.a.
// Usage: bench_tokenizer TOKENIZER_JSON TEXTS_JSONL THREADS REPEATS [IDS_OUT]
// Prints one line: best and median wall time over REPEATS passes of encoding every text (BOS added), MB/s and
// tokens/s of the best pass. IDS_OUT gets the ids (a JSON array per line) to compare with HF's.
#include <cjson/cJSON.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/tokenizer.h"
#include "util/common.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 5) die("usage: bench_tokenizer TOKENIZER_JSON TEXTS_JSONL THREADS REPEATS [IDS_OUT]");
    int threads = atoi(argv[3]), repeats = atoi(argv[4]);
    char err[ERR_LEN];
    Tokenizer *tok = tok_load(argv[1], err, sizeof err);
    if (!tok) die("%s", err);
    size_t len;
    char *all = read_file(argv[2], &len, err, sizeof err);
    if (!all) die("%s", err);
    char **texts = NULL;
    size_t *lens = NULL, n = 0, bytes = 0;
    for (char *line = strtok(all, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        if (!cJSON_IsString(j)) die("%s: line %zu: expected a JSON string", argv[2], n + 1);
        texts = xrealloc(texts, (n + 1) * sizeof *texts);
        lens = xrealloc(lens, (n + 1) * sizeof *lens);
        texts[n] = xstrdup(j->valuestring);
        lens[n] = strlen(texts[n]);
        bytes += lens[n++];
        cJSON_Delete(j);
    }
    int32_t **ids = xcalloc(n, sizeof *ids);
    size_t *counts = xcalloc(n, sizeof *counts), *caps = xcalloc(n, sizeof *caps);
    double *times = xmalloc((size_t)repeats * sizeof *times);
    size_t tokens = 0;
    for (int r = 0; r < repeats; r++) {
        double t0 = now_sec();
        // Each text keeps its own output array across passes: passes after the first allocate nothing.
#pragma omp parallel for schedule(dynamic, 4) num_threads(threads)
        for (size_t i = 0; i < n; i++) counts[i] = tok_encode(tok, texts[i], lens[i], 1, &ids[i], &caps[i]);
        times[r] = now_sec() - t0;
    }
    for (size_t i = 0; i < n; i++) tokens += counts[i];
    double best = times[0];
    for (int r = 1; r < repeats; r++) best = times[r] < best ? times[r] : best;
    qsort(times, (size_t)repeats, sizeof *times, cmp_double);
    double median = times[repeats / 2];
    printf("gdn.c  threads=%d: %zu texts, %.2f MB, %zu tokens; best %.3f s (median %.3f s of %d): %.2f MB/s, %.3f M tokens/s\n",
           threads, n, bytes / 1e6, tokens, best, median, repeats, bytes / 1e6 / best, tokens / 1e6 / best);
    if (argc > 5) {
        FILE *f = xfopen(argv[5], "w");
        for (size_t i = 0; i < n; i++) {
            fputc('[', f);
            for (size_t k = 0; k < counts[i]; k++) fprintf(f, k ? ", %d" : "%d", (int)ids[i][k]);
            fputs("]\n", f);
        }
        fclose(f);
    }
    for (size_t i = 0; i < n; i++) free(texts[i]), free(ids[i]);
    free(texts), free(lens), free(ids), free(counts), free(caps), free(times), free(all);
    tok_free(tok);
    return 0;
}
