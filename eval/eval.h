// eval.h: `gdn eval`, lm-evaluation-harness ("lm-eval") compatible zero-/k-shot benchmarks (spec eval.md).
// The pipeline, one file per stage:
//   text.c     Python string semantics the task templates rely on (strip, capitalize, hellaswag/wikitext
//              cleaning) and a Python-literal parser (RACE's `problems` column)
//   dataset.c  locating a task's split under --data-dir (HF hub layout) and reading its rows (JSONL / JSON,
//              Parquet through a hook) into cJSON objects
//   tasks.c    the task registry (one table) and doc -> (context, continuation) rendering per task
//   requests.c pair tokenization, BOS modes, left truncation, rolling windows, dedupe, sort, batched scoring
//   metrics.c  acc / acc_norm / perplexities, stderrs (closed form, lm-eval's bootstrap), MMLU groups
//   results.c  the results JSON (lm-eval layout) and the Markdown table
//   run.c      the command line (eval_main) over EvalHooks, so tests can drive it with toy models
//   eval.c     cmd_eval: the real hooks (HF tokenizer, Parquet reader, model scorer)
// Everything here is internal to eval/ and its tests; the model side is eval/scorer.h + scorer_model.h.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "eval/scorer.h"
#include "util/common.h"

#ifdef __cplusplus
extern "C" {
#endif

// util/common.h's Buf is not NUL-terminated: this terminates it (n unchanged) and returns the string.
static inline char *eval_cstr(Buf *b) {
    buf_put(b, "", 1);
    b->n--;
    return b->p;
}

// ---------------------------------------------------------------------------------------------------------
// text.c: Python str semantics over UTF-8. Returned strings are malloc'd.

int py_isspace(uint32_t cp);                        // str.isspace() of one code point (also re's \s)
size_t py_rstrip_len(const char *s, size_t n);      // length of s[0..n) after str.rstrip()
char *py_strip(const char *s);                      // str.strip()
char *py_capitalize(const char *s);                 // str.capitalize(): first char titlecased, rest lowercased
char *py_replace(const char *s, const char *from, const char *to); // str.replace (all, left to right)
long utf8_codepoints(const char *s, size_t n);      // len() of the Python string
char *hellaswag_clean(const char *s);               // lm-eval hellaswag preprocess() (spec §2.4)
char *wikitext_detokenize(const char *page);        // lm-eval wikitext_detokenizer (spec §2.10)
long wikitext_word_count(const char *page);         // len(re.split(r"\s+", page))
// Parses a Python literal (list/tuple/dict/str/int/float/True/False/None) as ast.literal_eval would, into
// cJSON (tuples become arrays). NULL + err ("offset N: ...") on anything else.
cJSON *pylit_parse(const char *s, size_t n, char *err, size_t errlen);

// ---------------------------------------------------------------------------------------------------------
// dataset.c: rows of one split.

typedef struct {
    cJSON **rows;     // [n] objects, one per dataset row, in file order
    int n;
    char **files;     // [nfiles] the files read, in order
    int nfiles;
    int *row_file;    // [n] index into files
    long *row_line;   // [n] 1-based line (JSON Lines) or row number (JSON array, Parquet) in that file
    int *file_lines;  // [nfiles] 1 if that file's rows are numbered by line
} EvalRows;

// Reads the columns `columns` (all when NULL) of one Parquet file into row objects (appends to *rows/*n).
// Provided by eval.c over data/parquet.h; NULL in builds/tests without Parquet.
typedef int (*EvalParquetFn)(const char *path, const char *const *columns, int ncolumns, cJSON ***rows,
                             int *n, char *err, size_t errlen);

// Where a split may live under dir, in the order tried. repo/config/split as on the HF hub (config NULL or
// "default" for single-config datasets); extra: more paths relative to dir/repo (NULL-terminated, or NULL).
// Fills *paths with the files of the first pattern that matches (sorted); returns their count, 0 when none
// matched (then `looked` gets the patterns tried, "; "-separated).
int eval_find_split(const char *dir, const char *repo, const char *config, const char *split,
                    const char *const *extra, char ***paths, char *looked, size_t looked_len);
// Loads the rows of files (.jsonl/.json: JSON Lines or one JSON array of objects; .parquet: through pq with
// `columns`). -1 + err naming file and line on failure.
int eval_rows_load(EvalRows *r, char **files, int nfiles, EvalParquetFn pq, const char *const *columns,
                   int ncolumns, char *err, size_t errlen);
void eval_rows_free(EvalRows *r);
// "FILE:LINE" (JSON Lines) or "FILE: row N" of row i, written into buf.
const char *eval_row_where(const EvalRows *r, int i, char *buf, size_t n);

// Typed field access with errors that name file:line, field and what was expected.
const char *eval_row_str(const EvalRows *r, int i, const char *key, char *err, size_t errlen);
// An integer given as a JSON number or a string of decimal digits ("0".."3" in hellaswag). -1 + err.
int eval_row_int(const EvalRows *r, int i, const char *key, long *out, char *err, size_t errlen);
// A list of strings (JSON array, or for RACE a Python literal string). Returns count, -1 + err.
int eval_row_strlist(const EvalRows *r, int i, const cJSON *list, const char *what, const char ***out,
                     char *err, size_t errlen);

// ---------------------------------------------------------------------------------------------------------
// tasks.c: registry and documents.

typedef enum { EVAL_MC, EVAL_LOGLIK, EVAL_ROLLING } EvalOutputType;
typedef enum {
    FAM_ARC, FAM_HELLASWAG, FAM_OBQA, FAM_PIQA, FAM_WINOGRANDE, FAM_RACE, FAM_MMLU, FAM_LAMBADA, FAM_WIKITEXT
} EvalFamily;

// One row of the registry: a leaf task as lm-eval defines it.
typedef struct {
    const char *name;        // lm-eval task name ("arc_easy", "mmlu_anatomy")
    const char *alias;       // results "alias" (MMLU leaves: the subject)
    EvalFamily family;
    EvalOutputType type;
    const char *repo, *config, *split; // HF dataset_path / dataset_name / the split lm-eval scores
    const char *fewshot_split;         // MMLU "dev"; NULL: few-shot not supported here
    const char *group;       // MMLU leaves: "mmlu_stem" ...; NULL otherwise
    const char *parquet_columns; // comma-separated string columns when Parquet can be read; NULL: JSONL only
    const char *extra_paths; // ';'-separated extra locations relative to DIR/repo (or NULL)
} EvalTaskDef;

int eval_task_count(void);
const EvalTaskDef *eval_task_def(int i);
const EvalTaskDef *eval_task_find(const char *name);
// The 4 MMLU subgroups and their aliases ("stem", "other", "social sciences", "humanities").
extern const char *const eval_mmlu_groups[4];
extern const char *const eval_mmlu_group_aliases[4];

// A scored document: its requests, gold and per-request results.
typedef struct {
    int nctx, ncont;      // 1 or nreq each: nreq = max(nctx, ncont); request i = (ctx[nctx>1?i:0], cont[...])
    char **ctx, **cont;   // continuations include the target delimiter " "
    int nchoice;          // MC: choices (== nreq); acc_norm divides by choice_len
    double *choice_len;   // [nchoice] code points of each choice string (without the delimiter)
    int gold;             // MC: gold index, -100 when out of range (scored wrong, as lm-eval)
    char *text;           // ROLLING: the detokenized string
    long words, bytes;    // ROLLING: counts from the original page
    int *req;             // [nreq] (MC/LOGLIK) or [nwin] (ROLLING): unique request ids, set by requests.c
    int nreq_ids;
    double *ll;           // [nreq] MC/LOGLIK results; ROLLING: ll[0] = sum over windows
    int *greedy;          // [nreq]
} EvalDoc;

typedef struct {
    const EvalTaskDef *def;
    int num_fewshot;
    int race_version;     // 2 or 3 (spec §2.7)
    EvalRows rows;        // the scored split
    int n_original;       // docs in the split before --limit
    EvalDoc *docs;
    int ndocs;
    char *fewshot_block;  // MMLU k-shot examples ("" for 0-shot)
    // metrics (metrics.c); NAN / has_* = 0 when not produced
    double acc, acc_stderr, acc_norm, acc_norm_stderr, perplexity, perplexity_stderr;
    double word_perplexity, byte_perplexity, bits_per_byte;
} EvalTask;

// Loads the task's split (and MMLU's dev split for k-shot) from data_dir and renders its documents.
// limit: 0 = all, < 1 a fraction (ceil), else a count. -1 + err (missing files: the paths looked at and the
// HF dataset to get them from; malformed rows: file:line and field).
int eval_task_load(EvalTask *t, const EvalTaskDef *def, const char *data_dir, int num_fewshot, double limit,
                   int race_version, EvalParquetFn pq, char *err, size_t errlen);
void eval_task_free(EvalTask *t);
// Renders one row into d (exposed for tests). -1 + err.
int eval_doc_build(EvalTask *t, int row, EvalDoc *d, char *err, size_t errlen);
void eval_doc_free(EvalDoc *d);
// Expands a --tasks list ("arc_easy,mmlu,mmlu_stem") into leaf defs (list order, registry order inside a
// group, duplicates dropped) and the groups to report: bit g (0..3) = eval_mmlu_groups[g], bit 4 = "mmlu"
// (which brings all four). Returns the count; -1 + err naming an unknown task and listing the known ones.
int eval_tasks_expand(const char *list, const EvalTaskDef ***out, unsigned *groups, char *err, size_t errlen);

// ---------------------------------------------------------------------------------------------------------
// requests.c: from strings to scored token sequences.

// What eval needs from a tokenizer (data/tokenizer.h in the product, a toy in tests). encode appends ids to
// *ids (growable) and returns the count; add_bos = 1 prepends BOS when the tokenizer's post-processor would.
typedef struct {
    void *ctx;
    size_t (*encode)(void *ctx, const char *text, size_t len, int add_bos, int32_t **ids, size_t *cap);
    int bos_id, eos_id;   // -1 when absent
    const char *bos_text; // BOS as text ("<|begin_of_text|>"), NULL when absent
    const char *eos_text; // EOS as text, NULL when absent (for the results JSON)
} EvalTokenizer;

typedef enum { EVAL_BOS_OLD = 0, EVAL_BOS_NEW = 1 } EvalBosMode;

typedef struct {
    int32_t *tokens;      // context + continuation after left truncation (<= max_length + 1 tokens)
    int n, cont_len;      // the last cont_len tokens are scored
    uint64_t hash;
} EvalReq;

typedef struct {
    EvalReq *reqs;        // unique requests
    int n, cap;
    int *order;           // scoring order: longest first, then lexicographic (lm-eval's Collator key)
    double *ll;           // [n] results
    int *greedy;
    int *slots; size_t nslots; // open-addressing hash table of request ids (-1 empty)
    long n_total;         // requests before dedupe
    int max_length;
    EvalBosMode bos_mode;
} EvalReqSet;

// Tokenizes a (context, continuation) pair as lm-eval's causal HFLM: trailing whitespace moved to the
// continuation, whole = enc(ctx + cont), ctx_ids = enc(ctx), cont_ids = whole[len(ctx_ids):]; an empty
// context uses the prefix token (BOS, else EOS). Fills *ctx_ids/*cont_ids (malloc'd). -1 + err.
int eval_encode_pair(const EvalTokenizer *tok, EvalBosMode mode, const char *ctx, const char *cont,
                     int32_t **ctx_ids, int *nctx, int32_t **cont_ids, int *ncont, char *err, size_t errlen);
// lm-eval's get_rolling_token_windows + make_disjoint_window with context_len 1: calls fn(tokens, n,
// cont_len) for each window; tokens = the window's input plus its last target (n <= max_length + 1).
void eval_rolling_windows(const int32_t *toks, int ntok, int32_t prefix, int max_length,
                          void (*fn)(void *arg, const int32_t *tokens, int n, int cont_len), void *arg);

void eval_reqset_init(EvalReqSet *s, int max_length, EvalBosMode mode);
void eval_reqset_free(EvalReqSet *s);
// Adds (context tokens ++ continuation tokens) truncated to the last max_length + 1 tokens; returns the
// unique request id (an identical earlier request is reused).
int eval_reqset_add(EvalReqSet *s, const int32_t *ctx, int nctx, const int32_t *cont, int ncont);
// Tokenizes every doc of the tasks into s (OpenMP over docs) and sets each doc's req[]. -1 + err.
int eval_build_requests(EvalTask *tasks, int ntasks, const EvalTokenizer *tok, EvalReqSet *s, char *err,
                        size_t errlen);
// Scores all requests through the scorer in the sorted order, batch_size requests per call (0 = auto: up
// to 64Ki tokens per call), with a progress line on stderr. Then fills each doc's ll/greedy. -1 + err.
int eval_score_requests(EvalReqSet *s, const Scorer *sc, int batch_size, EvalTask *tasks, int ntasks,
                        char *err, size_t errlen);

// ---------------------------------------------------------------------------------------------------------
// metrics.c

// numpy.argmax: first maximum; a NaN counts as the maximum (first NaN wins).
int eval_argmax(const double *v, int n);
double eval_mean(const double *x, long n);           // sum / n (compensated sum, as Python >= 3.12)
double eval_sample_stddev(const double *x, long n);  // sqrt(sum (x - mean)^2 / (n - 1))
double eval_mean_stderr(const double *x, long n);    // sample_stddev / sqrt(n); NAN when n <= 1
// lm-eval bootstrap_stderr(perplexity, xs, iters): chunks of 1000 replicates, chunk c draws with Python's
// random.Random(c).choices; returns the sample stddev of exp(-mean(resample)). NAN when n <= 1.
double eval_bootstrap_ppl_stderr(const double *x, long n, int iters);
// pooled_sample_stderr (spec §3.4); NAN if any stderr is NAN.
double eval_pooled_stderr(const double *stderrs, const long *sizes, int k);
// Per-document multiple-choice metrics: acc = argmax(ll) == gold, acc_norm = argmax(ll / len) == gold.
void eval_mc_doc(const double *ll, const double *len, int n, int gold, int *acc, int *acc_norm);
int eval_task_has_acc_norm(const EvalTaskDef *d); // arc, hellaswag, openbookqa, piqa
// Per-task aggregation into t->acc etc. (NAN where not applicable).
void eval_task_metrics(EvalTask *t, int bootstrap_iters);


// ---------------------------------------------------------------------------------------------------------
// results.c

typedef struct {
    const char *model_name;    // --load
    const char *model_args;    // "pretrained=..., device=..." for the JSON and the header line
    const char *device;
    const char *batch_size;    // as given ("32" / "auto")
    const char *tokenizer_path;
    double limit;              // 0 = none
    int num_fewshot;
    int max_length;
    EvalBosMode bos_mode;
    int race_version;
    int bos_id, eos_id;
    const char *bos_text, *eos_text;
    double start_time;         // unix seconds
    double total_seconds;
} EvalRunInfo;

// Builds the lm-eval results object for the scored tasks (metrics already computed); groups as from
// eval_tasks_expand (MMLU subgroups / mmlu to aggregate).
cJSON *eval_results_json(EvalTask *tasks, int ntasks, const EvalRunInfo *info, unsigned groups);
// The Markdown tables (Tasks, then Groups when any) as lm-eval's make_table prints them; malloc'd.
char *eval_results_table(const cJSON *results, const char *column);
// Output file: path ending in ".json" is used as is; otherwise path/<model_name_sanitized>/results_<now>.json.
char *eval_results_path(const char *output_path, const char *model_name);
char *eval_sanitize_model_name(const char *name); // runs of "<>:/|\?*[] -> "__"
// JSON Lines, one line per scored (doc, request): task, doc, idx (choice or rolling window), the rendered
// context/continuation (MC and loglikelihood), the exact token sequence given to the scorer with its
// cont_len, and ll / is_greedy. For replaying requests through another implementation (PyTorch).
int eval_write_request_log(const char *path, const EvalTask *tasks, int ntasks, const EvalReqSet *s, char *err,
                           size_t errlen);

// ---------------------------------------------------------------------------------------------------------
// run.c: the command line.

typedef struct {
    // Opens the tokenizer at path. -1 + err.
    int (*open_tokenizer)(const char *path, EvalTokenizer *out, char *err, size_t errlen);
    // Opens the model (eval/scorer_model.h). -1 + err.
    int (*open_scorer)(const char *load, const char *device, Scorer *out, char *err, size_t errlen);
    EvalParquetFn read_parquet; // NULL: Parquet files are rejected with a hint to convert them
} EvalHooks;

// `gdn eval ...` (argv[0] = "eval"). Returns the exit status; dies with one line on bad input.
int eval_main(int argc, char **argv, const EvalHooks *hooks);

// eval.c: the product's hooks. The HF tokenizer (data/tokenizer.h; kept open for the process) and the
// Parquet rows (data/parquet.h table reader): any supported column type, rendered as JSON values.
int eval_open_hf_tokenizer(const char *path, EvalTokenizer *out, char *err, size_t errlen);
int eval_read_parquet(const char *path, const char *const *columns, int ncolumns, cJSON ***rows, int *n,
                              char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
