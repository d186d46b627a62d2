// real_io.c: a helper for tests/t_eval_real.sh (built there against build/libgdn.a), driving eval with the
// product's hooks (eval/eval.c): the HF tokenizer and the Parquet reader.
//   real_io compare JSONL_DIR PARQUET_DIR TASKS   the same docs from JSON Lines and from Parquet; exit 1 if not
//   real_io pairs TOKENIZER DATA_DIR TASKS OUT      every (context, continuation) of TASKS with its ids from
//                                                   eval_encode_pair in both BOS modes, as JSON Lines
#include <stdlib.h>
#include <string.h>

#include "eval/eval.h"
#include "util/common.h"

static int load_all(const char *dir, const char *list, EvalParquetFn pq, EvalTask **out) {
    char err[8192];
    const EvalTaskDef **defs;
    unsigned groups;
    int n = eval_tasks_expand(list, &defs, &groups, err, sizeof err);
    if (n < 0) die("%s", err);
    *out = xcalloc((size_t)n, sizeof **out);
    for (int i = 0; i < n; i++)
        if (eval_task_load(&(*out)[i], defs[i], dir, 0, 0, 3, pq, err, sizeof err) < 0) die("%s", err);
    free(defs);
    return n;
}

static int same_str(const char *a, const char *b) { return (!a && !b) || (a && b && !strcmp(a, b)); }

static int compare(const char *jdir, const char *pdir, const char *list) {
    EvalTask *a, *b;
    int n = load_all(jdir, list, NULL, &a);
    load_all(pdir, list, eval_read_parquet, &b);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        const char *f = b[i].rows.files[0];
        if (strlen(f) < 8 || strcmp(f + strlen(f) - 8, ".parquet")) {
            fprintf(stderr, "FAIL %s: read %s, not a Parquet file\n", a[i].def->name, f);
            bad++;
        }
        if (a[i].ndocs != b[i].ndocs) {
            fprintf(stderr, "FAIL %s: %d docs from JSON Lines, %d from Parquet\n", a[i].def->name, a[i].ndocs, b[i].ndocs);
            bad++;
            continue;
        }
        for (int d = 0; d < a[i].ndocs; d++) {
            const EvalDoc *x = &a[i].docs[d], *y = &b[i].docs[d];
            int ok = x->nctx == y->nctx && x->ncont == y->ncont && x->gold == y->gold && same_str(x->text, y->text) &&
                     x->words == y->words && x->bytes == y->bytes;
            for (int k = 0; ok && k < x->nctx; k++) ok = same_str(x->ctx[k], y->ctx[k]);
            for (int k = 0; ok && k < x->ncont; k++) ok = same_str(x->cont[k], y->cont[k]);
            if (!ok) {
                fprintf(stderr, "FAIL %s doc %d differs between JSON Lines and Parquet\n", a[i].def->name, d);
                bad++;
            }
        }
        printf("%s %s: %d docs identical from %s\n", bad ? "FAIL" : "PASS", a[i].def->name, a[i].ndocs, f);
        eval_task_free(&a[i]);
        eval_task_free(&b[i]);
    }
    free(a);
    free(b);
    return bad ? 1 : 0;
}

static cJSON *ids_json(const int32_t *ids, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
    return a;
}

static int pairs(const char *tok_path, const char *dir, const char *list, const char *out) {
    char err[8192];
    EvalTokenizer tok;
    if (eval_open_hf_tokenizer(tok_path, &tok, err, sizeof err) < 0) die("%s", err);
    EvalTask *t;
    int n = load_all(dir, list, NULL, &t);
    FILE *f = xfopen(out, "w");
    long count = 0;
    for (int i = 0; i < n; i++)
        for (int d = 0; d < t[i].ndocs; d++) {
            const EvalDoc *doc = &t[i].docs[d];
            int nreq = doc->nctx > doc->ncont ? doc->nctx : doc->ncont;
            for (int r = 0; r < nreq; r++)
                for (int mode = 0; mode < 2; mode++) {
                    const char *ctx = doc->ctx[doc->nctx > 1 ? r : 0], *cont = doc->cont[doc->ncont > 1 ? r : 0];
                    int32_t *ci, *ki;
                    int nc, nk;
                    if (eval_encode_pair(&tok, (EvalBosMode)mode, ctx, cont, &ci, &nc, &ki, &nk, err, sizeof err) < 0)
                        die("%s doc %d: %s", t[i].def->name, d, err);
                    cJSON *o = cJSON_CreateObject();
                    cJSON_AddStringToObject(o, "task", t[i].def->name);
                    cJSON_AddStringToObject(o, "mode", mode ? "new" : "old");
                    cJSON_AddStringToObject(o, "ctx", ctx);
                    cJSON_AddStringToObject(o, "cont", cont);
                    cJSON_AddItemToObject(o, "ctx_ids", ids_json(ci, nc));
                    cJSON_AddItemToObject(o, "cont_ids", ids_json(ki, nk));
                    char *s = cJSON_PrintUnformatted(o);
                    fprintf(f, "%s\n", s);
                    free(s);
                    cJSON_Delete(o);
                    free(ci);
                    free(ki);
                    count++;
                }
        }
    fclose(f);
    printf("pairs: %ld (context, continuation) encodings written to %s\n", count, out);
    for (int i = 0; i < n; i++) eval_task_free(&t[i]);
    free(t);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "compare")) return compare(argv[2], argv[3], argv[4]);
    if (argc == 6 && !strcmp(argv[1], "pairs")) return pairs(argv[2], argv[3], argv[4], argv[5]);
    fprintf(stderr, "usage: real_io compare JSONL_DIR PARQUET_DIR TASKS | pairs TOKENIZER DATA_DIR TASKS OUT\n");
    return 2;
}
