// eval.c: `gdn eval` with the product's hooks: the HF tokenizer (data/tokenizer.h), the Parquet reader
// (data/parquet.h, string columns read in lockstep, one reader per column) and the model scorer
// (eval/scorer_model.h, provided by the model side). The pipeline itself is eval_main (run.c).
#include <stdlib.h>
#include <string.h>

#include "data/parquet.h"
#include "data/tokenizer.h"
#include "eval/eval.h"
#include "eval/scorer_model.h"
#include "util/common.h"

static size_t hf_encode(void *ctx, const char *text, size_t len, int add_bos, int32_t **ids, size_t *cap) {
    return tok_encode((const Tokenizer *)ctx, text, len, add_bos, ids, cap);
}

static char *token_text(const Tokenizer *t, int id) {
    size_t n;
    const char *p = id >= 0 ? tok_token_bytes(t, id, &n) : NULL;
    if (!p) return NULL;
    char *s = xmalloc(n + 1);
    memcpy(s, p, n);
    s[n] = 0;
    return s;
}

// The tokenizer lives until the process exits (cmd_eval is the whole process).
int eval_open_hf_tokenizer(const char *path, EvalTokenizer *out, char *err, size_t errlen) {
    Tokenizer *t = tok_load(path, err, errlen);
    if (!t) return -1;
    out->ctx = t;
    out->encode = hf_encode;
    out->bos_id = tok_bos_id(t);
    out->eos_id = tok_eos_id(t);
    out->bos_text = token_text(t, out->bos_id);
    out->eos_text = token_text(t, out->eos_id);
    return 0;
}

int eval_read_parquet_strings(const char *path, const char *const *columns, int ncolumns, cJSON ***rows, int *n,
                              char *err, size_t errlen) {
    ParquetReader **r = xcalloc((size_t)ncolumns, sizeof *r);
    int rc = -1;
    *rows = NULL;
    *n = 0;
    int64_t nrows = -1;
    for (int c = 0; c < ncolumns; c++) {
        r[c] = parquet_open(path, columns[c], err, errlen);
        if (!r[c]) goto done;
        int64_t k = parquet_num_rows(r[c]);
        if (nrows >= 0 && k != nrows) {
            set_err(err, errlen, "%s: column '%s' has %lld rows, '%s' has %lld", path, columns[c], (long long)k,
                    columns[0], (long long)nrows);
            goto done;
        }
        nrows = k;
    }
    *rows = xcalloc((size_t)nrows + 1, sizeof **rows);
    for (int64_t i = 0; i < nrows; i++) {
        cJSON *o = cJSON_CreateObject();
        (*rows)[(*n)++] = o;
        for (int c = 0; c < ncolumns; c++) {
            const char *p;
            size_t len;
            int is_null = 0;
            int got = parquet_next(r[c], &p, &len, &is_null, err, errlen);
            if (got < 0) goto done;
            if (got == 0) {
                set_err(err, errlen, "%s: column '%s' ended at row %lld of %lld", path, columns[c], (long long)i + 1,
                        (long long)nrows);
                goto done;
            }
            if (is_null) {
                cJSON_AddNullToObject(o, columns[c]);
            } else {
                char *s = xmalloc(len + 1);
                memcpy(s, p, len);
                s[len] = 0;
                cJSON_AddStringToObject(o, columns[c], s);
                free(s);
            }
        }
    }
    rc = 0;
done:
    for (int c = 0; c < ncolumns; c++)
        if (r[c]) parquet_close(r[c]);
    free(r);
    if (rc < 0) {
        for (int i = 0; i < *n; i++) cJSON_Delete((*rows)[i]);
        free(*rows);
        *rows = NULL;
        *n = 0;
    }
    return rc;
}

int cmd_eval(int argc, char **argv) {
    EvalHooks hooks = {eval_open_hf_tokenizer, eval_open_scorer, eval_read_parquet_strings};
    return eval_main(argc, argv, &hooks);
}
