// run.c: the `gdn eval` command line over EvalHooks (tokenizer, model scorer, Parquet reader), so that the
// whole pipeline -- task files -> requests -> scores -> metrics -> results JSON -- runs the same with the
// real model (eval.c) and with the toy models of the tests. Data problems are reported before the model is
// loaded: all task files are read and rendered first.
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>

#include "eval/eval.h"
#include "io/model_load.h"
#include "util/args.h"
#include "util/common.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: gdn eval --load MODEL --tasks LIST --data-dir DIR [options]\n"
            "\n"
            "Zero-shot (MMLU: k-shot) benchmarks scored the way lm-evaluation-harness scores an HF causal LM\n"
            "(loglikelihood of each answer), on local copies of the task datasets. Prints lm-eval's results\n"
            "table and writes its results JSON.\n"
            "\n"
            "  --load MODEL          checkpoint to evaluate (passed to the model loader)\n"
            "  --tasks LIST          comma-separated: arc_easy, arc_challenge, hellaswag, openbookqa, piqa,\n"
            "                        winogrande, race, lambada_openai, wikitext, mmlu (57 subjects + 4 groups),\n"
            "                        mmlu_stem|mmlu_other|mmlu_social_sciences|mmlu_humanities, mmlu_<subject>\n"
            "  --data-dir DIR        datasets in the HF hub layout, Parquet or JSON Lines (see below)\n"
            "  --num-fewshot N       few-shot examples (default 0; N > 0 only for mmlu: first N rows of dev)\n"
            "  --limit N             score only the first N docs per task (N < 1: that fraction); for testing\n"
            "  --batch-size N|auto   requests per scorer call (default 32; auto: up to 64Ki tokens per call)\n"
            "  --device cpu|cuda|auto  where the model runs (default auto: CUDA when built and present)\n"
            "  --output-path OUT     results JSON: OUT itself if it ends in .json, else\n"
            "                        OUT/<model_name_sanitized>/results_<local time>.json (as lm-eval)\n"
            "  --bos-mode old|new    BOS on requests: new (default) = lm-eval >= 0.4.9.2, the tokenizer's\n"
            "                        default (Llama-3.2: BOS first); old = lm-eval <= 0.4.9.1, no BOS\n"
            "  --race-version 2|3    RACE prompt rendering (default 3 = lm-eval >= 0.4.12; 2 with --bos-mode old)\n"
            "  --tokenizer PATH      tokenizer.json (default: tokenizer.json in MODEL's directory)\n"
            "  --max-length N        model context for truncation/rolling windows (default: the model's)\n"
            "  --bootstrap-iters N   bootstrap replicates for lambada's perplexity stderr (default 100000;\n"
            "                        0 = no stderrs, as lm-eval)\n"
            "  --log-requests FILE   JSON Lines of every scored request: rendered strings, the token sequence\n"
            "                        given to the model, cont_len, ll, is_greedy (to replay elsewhere)\n"
            "\n"
            "Dataset files, for HF dataset REPO (config CFG, split SPLIT), looked up under DIR in this order:\n"
            "  DIR/REPO/CFG/SPLIT-*.parquet  DIR/REPO/CFG/SPLIT-*.jsonl  DIR/REPO/CFG/SPLIT.jsonl  .../SPLIT.json\n"
            "  DIR/REPO/CFG/SPLIT/*.parquet  DIR/REPO/CFG/SPLIT/*.jsonl\n"
            "  (single-config datasets: CFG is data/, the repo folder itself, or default/)\n"
            "  arc_easy/arc_challenge  allenai/ai2_arc  ARC-Easy / ARC-Challenge  test\n"
            "  hellaswag               Rowan/hellaswag                            validation\n"
            "  openbookqa              allenai/openbookqa  main                   test\n"
            "  piqa                    baber/piqa                                 validation\n"
            "  winogrande              allenai/winogrande  winogrande_xl          validation\n"
            "  race                    EleutherAI/race  high                      test (or race_high_test.jsonl)\n"
            "  mmlu_<subject>          cais/mmlu  <subject>                       test (+ dev for k-shot)\n"
            "  lambada_openai          EleutherAI/lambada_openai  default         test (or data/lambada_test.jsonl)\n"
            "  wikitext                EleutherAI/wikitext_document_level  wikitext-2-raw-v1  test\n"
            "Every task is read from Parquet as the hub ships it (lists, structs, integers) or from JSON Lines.\n");
}

typedef struct {
    const char *load, *tasks, *data_dir, *device, *output_path, *tokenizer, *log_requests;
    const char *batch_size_text;
    int num_fewshot, batch_size, race_version, max_length, bootstrap_iters;
    double limit;
    EvalBosMode bos_mode;
} Opts;

static long parse_long(const char *opt, const char *v, long lo, long hi) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi)
        die("eval: %s expects an integer in [%ld, %ld], got '%s'", opt, lo, hi, v);
    return x;
}

static void parse_opts(int argc, char **argv, Opts *o) {
    static const char *const names[] = {"--load", "--tasks", "--data-dir", "--num-fewshot", "--limit",
                                        "--batch-size", "--device", "--output-path", "--bos-mode",
                                        "--race-version", "--tokenizer", "--max-length", "--bootstrap-iters",
                                        "--log-requests"};
    enum { NN = sizeof names / sizeof names[0] };
    ArgSpec spec[NN]; // all take a value; the numbers are checked below with their own messages
    for (int j = 0; j < NN; j++) spec[j] = (ArgSpec){names[j], ARG_STR, 0, 0};
    Args a;
    args_parse(&a, "eval", argc, argv, spec, NN, 0);
    const char *val[NN];
    for (int j = 0; j < NN; j++) val[j] = args_str(&a, names[j], NULL);
    memset(o, 0, sizeof *o);
    o->load = val[0];
    o->tasks = val[1];
    o->data_dir = val[2];
    if (!o->tasks) die("eval: --tasks LIST is required (see gdn eval --help)");
    if (!o->data_dir) die("eval: --data-dir DIR is required (see gdn eval --help)");
    if (!o->load) die("eval: --load MODEL is required (see gdn eval --help)");
    o->num_fewshot = val[3] ? (int)parse_long("--num-fewshot", val[3], 0, 1000) : 0;
    if (val[4]) {
        char *end;
        o->limit = strtod(val[4], &end);
        if (end == val[4] || *end || !(o->limit > 0) || (o->limit >= 1 && o->limit != floor(o->limit)))
            die("eval: --limit expects a count >= 1 or a fraction in (0, 1), got '%s'", val[4]);
    }
    o->batch_size_text = val[5] ? val[5] : "32";
    o->batch_size = !strcmp(o->batch_size_text, "auto") ? 0 : (int)parse_long("--batch-size", o->batch_size_text, 1, 1 << 20);
    o->device = val[6] ? val[6] : "auto";
    if (strcmp(o->device, "cpu") && strcmp(o->device, "cuda") && strcmp(o->device, "auto"))
        die("eval: --device expects cpu, cuda or auto, got '%s'", o->device);
    o->output_path = val[7];
    const char *bm = val[8] ? val[8] : "new";
    if (!strcmp(bm, "new")) o->bos_mode = EVAL_BOS_NEW;
    else if (!strcmp(bm, "old")) o->bos_mode = EVAL_BOS_OLD;
    else die("eval: --bos-mode expects old or new, got '%s'", bm);
    o->race_version = val[9] ? (int)parse_long("--race-version", val[9], 2, 3) : o->bos_mode == EVAL_BOS_NEW ? 3 : 2;
    o->tokenizer = val[10];
    o->max_length = val[11] ? (int)parse_long("--max-length", val[11], 1, 1 << 24) : 0;
    o->bootstrap_iters = val[12] ? (int)parse_long("--bootstrap-iters", val[12], 0, 100000000) : 100000;
    o->log_requests = val[13];
}

// The model's tokenizer, found as generate and verify find it (model/model_load.h).
static char *default_tokenizer(const char *load) {
    char path[1300];
    if (model_find_tokenizer(load, path, sizeof path))
        die("eval: no tokenizer.json in or beside %s (nor .assets/llama3/); pass --tokenizer PATH", load);
    return xstrdup(path);
}

int eval_main(int argc, char **argv, const EvalHooks *hooks) {
    if (arg_is_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    Opts o;
    parse_opts(argc, argv, &o);
    char err[8192];
    struct timeval tv;
    gettimeofday(&tv, NULL);
    double start_unix = (double)tv.tv_sec + tv.tv_usec * 1e-6, t0 = now_sec();

    const EvalTaskDef **defs;
    unsigned groups;
    int ntasks = eval_tasks_expand(o.tasks, &defs, &groups, err, sizeof err);
    if (ntasks < 0) die("eval: %s", err);
    if (o.limit > 0)
        fprintf(stderr, "eval: --limit %g: scoring a subset; the numbers are not comparable to full runs\n", o.limit);

    // what the run will need, before the slow parts
    char *tok_path = o.tokenizer ? xstrdup(o.tokenizer) : default_tokenizer(o.load);
    if (!file_exists(tok_path))
        die("eval: no tokenizer at %s; pass --tokenizer PATH (the model's tokenizer.json)", tok_path);
    if (!hooks->open_scorer) die("eval: model loading not built into this binary");

    // 1. data: every task file is read and rendered before the model is touched
    EvalTask *tasks = xcalloc((size_t)ntasks, sizeof *tasks);
    long ndocs = 0, mmlu_docs = 0;
    int mmlu_subjects = 0;
    for (int i = 0; i < ntasks; i++) {
        if (eval_task_load(&tasks[i], defs[i], o.data_dir, o.num_fewshot, o.limit, o.race_version,
                           hooks->read_parquet, err, sizeof err) < 0)
            die("eval: %s", err);
        if (tasks[i].ndocs == 0)
            die("eval: %s: the %s split under %s has no rows", defs[i]->name, defs[i]->split, o.data_dir);
        ndocs += tasks[i].ndocs;
        int bad_gold = 0;
        for (int d = 0; d < tasks[i].ndocs; d++) bad_gold += defs[i]->type == EVAL_MC && tasks[i].docs[d].gold < 0;
        if (bad_gold) // lm-eval warns and scores these wrong
            fprintf(stderr, "eval: warning: %s: %d doc%s with a gold label outside the choices, scored wrong\n",
                    defs[i]->name, bad_gold, bad_gold == 1 ? "" : "s");
        if (defs[i]->family == FAM_MMLU && ntasks > 8) { // one line for all subjects
            mmlu_subjects++;
            mmlu_docs += tasks[i].ndocs;
            continue;
        }
        fprintf(stderr, "eval: %s: %d doc%s from %s%s\n", defs[i]->name, tasks[i].ndocs, tasks[i].ndocs == 1 ? "" : "s",
                tasks[i].rows.files[0], tasks[i].rows.nfiles > 1 ? " (+ more shards)" : "");
    }
    if (mmlu_subjects)
        fprintf(stderr, "eval: mmlu: %d subjects, %ld docs from %s/cais/mmlu\n", mmlu_subjects, mmlu_docs, o.data_dir);
    fprintf(stderr, "eval: %d tasks, %ld docs\n", ntasks, ndocs);

    // 2. tokenizer and model
    EvalTokenizer tok;
    memset(&tok, 0, sizeof tok);
    if (hooks->open_tokenizer(tok_path, &tok, err, sizeof err) < 0) die("eval: %s", err);
    Scorer sc;
    memset(&sc, 0, sizeof sc);
    fprintf(stderr, "eval: loading %s on %s\n", o.load, o.device);
    if (hooks->open_scorer(o.load, o.device, &sc, err, sizeof err) < 0) die("eval: %s: %s", o.load, err);
    int max_length = o.max_length > 0 ? o.max_length : sc.max_length;
    if (max_length <= 0) die("eval: the model reports no max_length; pass --max-length N");

    // 3. requests, scores, metrics
    EvalReqSet rs;
    eval_reqset_init(&rs, max_length, o.bos_mode);
    double tt = now_sec();
    if (eval_build_requests(tasks, ntasks, &tok, &rs, err, sizeof err) < 0) die("eval: %s", err);
    fprintf(stderr, "eval: tokenized %ld requests in %.1fs (BOS mode %s)\n", rs.n_total, now_sec() - tt,
            o.bos_mode == EVAL_BOS_NEW ? "new" : "old");
    if (eval_score_requests(&rs, &sc, o.batch_size, tasks, ntasks, err, sizeof err) < 0) die("eval: %s", err);
    if (o.log_requests) {
        if (eval_write_request_log(o.log_requests, tasks, ntasks, &rs, err, sizeof err) < 0) die("eval: %s", err);
        fprintf(stderr, "eval: wrote %s\n", o.log_requests);
    }
    for (int i = 0; i < ntasks; i++) eval_task_metrics(&tasks[i], o.bootstrap_iters);
    if (o.bootstrap_iters <= 0) // lm-eval: no stderr at all without bootstrap iterations
        for (int i = 0; i < ntasks; i++)
            tasks[i].acc_stderr = tasks[i].acc_norm_stderr = tasks[i].perplexity_stderr = NAN;

    // 4. results
    Buf margs = {0};
    buf_printf(&margs, "pretrained=%s,device=%s,bos_mode=%s,max_length=%d", o.load, o.device,
               o.bos_mode == EVAL_BOS_NEW ? "new" : "old", max_length);
    EvalRunInfo info = {
        .model_name = o.load, .model_args = eval_cstr(&margs), .device = o.device, .batch_size = o.batch_size_text,
        .tokenizer_path = tok_path, .limit = o.limit, .num_fewshot = o.num_fewshot, .max_length = max_length,
        .bos_mode = o.bos_mode, .race_version = o.race_version, .bos_id = tok.bos_id, .eos_id = tok.eos_id,
        .bos_text = tok.bos_text, .eos_text = tok.eos_text, .start_time = start_unix,
        .total_seconds = now_sec() - t0,
    };
    cJSON *json = eval_results_json(tasks, ntasks, &info, groups);
    if (o.output_path) {
        char *path = eval_results_path(o.output_path, o.load);
        char *dir = xstrdup(path);
        char *slash = strrchr(dir, '/');
        if (slash && slash != dir) {
            *slash = 0;
            if (mkdir_p(dir) != 0) die("eval: cannot create directory %s: %s", dir, strerror(errno));
        }
        free(dir);
        char *text = cJSON_Print(json);
        if (write_file_atomic(path, text, strlen(text), err, sizeof err) < 0) die("eval: %s", err);
        fprintf(stderr, "eval: wrote %s\n", path);
        free(text);
        free(path);
    }
    char limit_text[32] = "None";
    if (o.limit > 0) snprintf(limit_text, sizeof limit_text, "%g", o.limit);
    printf("gdn.c (%s), gen_kwargs: (None), limit: %s, num_fewshot: %d, batch_size: %s\n", margs.p, limit_text,
           o.num_fewshot, o.batch_size_text);
    char *table = eval_results_table(json, "results");
    fputs(table, stdout);
    free(table);
    if (cJSON_GetObjectItemCaseSensitive(json, "groups")) {
        table = eval_results_table(json, "groups");
        printf("\n%s", table);
        free(table);
    }
    fflush(stdout);
    cJSON_Delete(json);
    buf_free(&margs);
    eval_reqset_free(&rs);
    for (int i = 0; i < ntasks; i++) eval_task_free(&tasks[i]);
    free(tasks);
    free(defs);
    free(tok_path);
    return 0;
}
