// eval.c: `gdn eval` with the product's hooks: the HF tokenizer (data/tokenizer.h), the Parquet reader
// (data/parquet.h's table reader: whole rows, list and struct columns included) and the model scorer
// (eval/scorer_model.h, provided by the model side). The pipeline itself is eval_main (run.c).
#include <limits.h>
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

// Parquet rows through the table reader (data/parquet.h): the named columns, or every column when columns is
// NULL (the tasks whose rows hold lists and structs: arc, hellaswag, openbookqa, piqa, mmlu). Each row is an
// object shaped like the JSON Lines export of the same data. (The name is older than list/struct support.)
int eval_read_parquet(const char *path, const char *const *columns, int ncolumns, cJSON ***rows, int *n,
                              char *err, size_t errlen) {
    *rows = NULL;
    *n = 0;
    ParquetTable *t = parquet_read_table(path, columns, ncolumns, err, errlen);
    if (!t) return -1;
    int64_t nrows = parquet_table_num_rows(t);
    if (nrows >= INT_MAX) {
        parquet_table_free(t);
        return set_err(err, errlen, "%s: %lld rows: more than a task file can have", path, (long long)nrows);
    }
    *rows = xcalloc((size_t)nrows + 1, sizeof **rows);
    for (int64_t i = 0; i < nrows; i++) (*rows)[i] = parquet_table_take_row(t, i);
    *n = (int)nrows;
    parquet_table_free(t);
    return 0;
}

int cmd_eval(int argc, char **argv) {
    EvalHooks hooks = {eval_open_hf_tokenizer, eval_open_scorer, eval_read_parquet};
    return eval_main(argc, argv, &hooks);
}
