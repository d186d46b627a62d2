// results.c: the results JSON in lm-eval's layout (spec eval.md §4) and the Markdown table lm-eval prints
// (utils.make_table: rows in group-tree order, values "%.4f", stderr "±", "N/A" for missing stderrs).
// The JSON says which lm-eval behaviour it emulates: "lm_eval_version" holds the emulated release and the
// extra key "gdn_eval" the switches (BOS mode, RACE version); "model_source" is "gdn.c", not "hf".
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "eval/eval.h"
#include "util/common.h"

static double task_version(const EvalTask *t) {
    return t->def->family == FAM_WIKITEXT ? 2.0 : t->def->family == FAM_RACE ? (double)t->race_version : 1.0;
}

static void add_metric(cJSON *o, const char *name, double v, double se, int has_se) {
    char key[96];
    snprintf(key, sizeof key, "%s,none", name);
    cJSON_AddNumberToObject(o, key, v);
    snprintf(key, sizeof key, "%s_stderr,none", name);
    if (has_se && !isnan(se)) cJSON_AddNumberToObject(o, key, se);
    else cJSON_AddStringToObject(o, key, "N/A");
}

static cJSON *metric_list(const char *const *names, const char *const *aggs, const int *hib, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "metric", names[i]);
        if (aggs[i]) cJSON_AddStringToObject(m, "aggregation", aggs[i]);
        if (hib[i] >= 0) cJSON_AddBoolToObject(m, "higher_is_better", hib[i]);
        cJSON_AddItemToArray(a, m);
    }
    return a;
}

// A minimal dump of the task config (lm-eval's configs[task]; nothing reads it back).
static cJSON *task_config(const EvalTask *t) {
    const EvalTaskDef *d = t->def;
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "task", d->name);
    if (strcmp(d->alias, d->name)) cJSON_AddStringToObject(c, "task_alias", d->alias);
    if (d->group) cJSON_AddStringToObject(c, "tag", d->family == FAM_MMLU ? "mmlu" : d->group);
    cJSON_AddStringToObject(c, "dataset_path", d->repo);
    if (d->config) cJSON_AddStringToObject(c, "dataset_name", d->config);
    else cJSON_AddNullToObject(c, "dataset_name");
    cJSON_AddStringToObject(c, d->family == FAM_HELLASWAG || d->family == FAM_PIQA || d->family == FAM_WINOGRANDE
                                   ? "validation_split"
                                   : "test_split",
                            d->split);
    if (d->fewshot_split) cJSON_AddStringToObject(c, "fewshot_split", d->fewshot_split);
    static const char *const text[][3] = {
        // doc_to_text, doc_to_target, doc_to_choice, per family (the YAML strings)
        [FAM_ARC] = {"Question: {{question}}\nAnswer:", "{{choices.label.index(answerKey)}}", "{{choices.text}}"},
        [FAM_HELLASWAG] = {"{{query}}", "{{label}}", "choices"},
        [FAM_OBQA] = {"question_stem", "{{choices.label.index(answerKey.lstrip())}}", "{{choices.text}}"},
        [FAM_PIQA] = {"Question: {{goal}}\nAnswer:", "label", "{{[sol1, sol2]}}"},
        [FAM_WINOGRANDE] = {"preprocess_winogrande.doc_to_text", "preprocess_winogrande.doc_to_target",
                            "preprocess_winogrande.doc_to_choice"},
        [FAM_RACE] = {"preprocess_race.doc_to_text", "preprocess_race.doc_to_target", "preprocess_race.doc_to_choice"},
        [FAM_MMLU] = {"{{question.strip()}}\nA. {{choices[0]}}\nB. {{choices[1]}}\nC. {{choices[2]}}\nD. "
                      "{{choices[3]}}\nAnswer:",
                      "answer", "['A', 'B', 'C', 'D']"},
        [FAM_LAMBADA] = {"{{text.split(' ')[:-1]|join(' ')}}", "{{' '+text.split(' ')[-1]}}", NULL},
        [FAM_WIKITEXT] = {"", "preprocess_wikitext.wikitext_detokenizer", NULL},
    };
    cJSON_AddStringToObject(c, "doc_to_text", text[d->family][0]);
    cJSON_AddStringToObject(c, "doc_to_target", text[d->family][1]);
    if (text[d->family][2]) cJSON_AddStringToObject(c, "doc_to_choice", text[d->family][2]);
    if (d->family == FAM_MMLU) {
        char *subject = py_replace(d->config, "_", " ");
        Buf b = {0};
        buf_printf(&b, "The following are multiple choice questions (with answers) about %s.\n\n", subject);
        cJSON_AddStringToObject(c, "description", eval_cstr(&b));
        buf_free(&b);
        free(subject);
    } else {
        cJSON_AddStringToObject(c, "description", "");
    }
    cJSON_AddStringToObject(c, "target_delimiter", " ");
    cJSON_AddStringToObject(c, "fewshot_delimiter", "\n\n");
    cJSON_AddNumberToObject(c, "num_fewshot", t->num_fewshot);
    static const char *const mean = "mean";
    if (d->type == EVAL_MC) {
        const char *names[2] = {"acc", "acc_norm"}, *aggs[2] = {mean, mean};
        int hib[2] = {1, 1};
        cJSON_AddItemToObject(c, "metric_list", metric_list(names, aggs, hib, eval_task_has_acc_norm(d) ? 2 : 1));
        cJSON_AddStringToObject(c, "output_type", "multiple_choice");
    } else if (d->type == EVAL_LOGLIK) {
        const char *names[2] = {"perplexity", "acc"}, *aggs[2] = {"perplexity", mean};
        int hib[2] = {0, 1};
        cJSON_AddItemToObject(c, "metric_list", metric_list(names, aggs, hib, 2));
        cJSON_AddStringToObject(c, "output_type", "loglikelihood");
    } else {
        const char *names[3] = {"word_perplexity", "byte_perplexity", "bits_per_byte"}, *aggs[3] = {NULL, NULL, NULL};
        int hib[3] = {-1, -1, -1};
        cJSON_AddItemToObject(c, "metric_list", metric_list(names, aggs, hib, 3));
        cJSON_AddStringToObject(c, "output_type", "loglikelihood_rolling");
    }
    cJSON_AddNumberToObject(c, "repeats", 1);
    cJSON_AddBoolToObject(c, "should_decontaminate", 0);
    cJSON *md = cJSON_AddObjectToObject(c, "metadata");
    cJSON_AddNumberToObject(md, "version", task_version(t));
    return c;
}

static cJSON *task_hib(const EvalTask *t) {
    cJSON *h = cJSON_CreateObject();
    if (t->def->type == EVAL_MC) {
        cJSON_AddBoolToObject(h, "acc", 1);
        if (eval_task_has_acc_norm(t->def)) cJSON_AddBoolToObject(h, "acc_norm", 1);
    } else if (t->def->type == EVAL_LOGLIK) {
        cJSON_AddBoolToObject(h, "perplexity", 0);
        cJSON_AddBoolToObject(h, "acc", 1);
    } else {
        cJSON_AddBoolToObject(h, "word_perplexity", 0);
        cJSON_AddBoolToObject(h, "byte_perplexity", 0);
        cJSON_AddBoolToObject(h, "bits_per_byte", 0);
    }
    return h;
}

// One MMLU group over the evaluated leaves whose group is in mask (bit g = eval_mmlu_groups[g]).
static cJSON *group_entry(EvalTask *tasks, int ntasks, unsigned mask, const char *name, const char *alias) {
    double *accs = xcalloc((size_t)ntasks + 1, sizeof *accs), *ses = xcalloc((size_t)ntasks + 1, sizeof *ses);
    long *sizes = xcalloc((size_t)ntasks + 1, sizeof *sizes);
    int k = 0;
    for (int i = 0; i < ntasks; i++) {
        const EvalTaskDef *d = tasks[i].def;
        if (d->family != FAM_MMLU) continue;
        int g = 0;
        while (g < 4 && strcmp(d->group, eval_mmlu_groups[g])) g++;
        if (!(mask & (1u << g))) continue;
        accs[k] = tasks[i].acc;
        ses[k] = tasks[i].acc_stderr;
        sizes[k] = tasks[i].ndocs;
        k++;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "alias", alias);
    cJSON_AddStringToObject(o, "name", name);
    long N = 0;
    double num = 0;
    for (int i = 0; i < k; i++) {
        N += sizes[i];
        num += accs[i] * (double)sizes[i];
    }
    cJSON_AddNumberToObject(o, "sample_len", (double)N);
    if (k > 0) {
        add_metric(o, "acc", num / (double)N, eval_pooled_stderr(ses, sizes, k), 1);
        cJSON *sc = cJSON_AddObjectToObject(o, "sample_count");
        cJSON_AddNumberToObject(sc, "acc,none", (double)N);
    }
    free(accs);
    free(ses);
    free(sizes);
    return o;
}

static const char *emulated_version(const EvalRunInfo *info) {
    if (info->bos_mode == EVAL_BOS_OLD) return "0.4.9.1";
    return info->race_version >= 3 ? "0.4.12" : "0.4.11";
}

static void add_token_pair(cJSON *o, const char *key, const char *text, int id) {
    cJSON *a = cJSON_AddArrayToObject(o, key);
    char num[32];
    snprintf(num, sizeof num, "%d", id);
    cJSON_AddItemToArray(a, text && id >= 0 ? cJSON_CreateString(text) : cJSON_CreateNull());
    cJSON_AddItemToArray(a, id >= 0 ? cJSON_CreateString(num) : cJSON_CreateNull());
}

cJSON *eval_results_json(EvalTask *tasks, int ntasks, const EvalRunInfo *info, unsigned groups) {
    cJSON *root = cJSON_CreateObject();
    cJSON *res = cJSON_AddObjectToObject(root, "results");
    for (int i = 0; i < ntasks; i++) {
        EvalTask *t = &tasks[i];
        cJSON *o = cJSON_AddObjectToObject(res, t->def->name);
        cJSON_AddStringToObject(o, "name", t->def->name);
        cJSON_AddStringToObject(o, "alias", t->def->alias);
        cJSON_AddNumberToObject(o, "sample_len", t->ndocs);
        int many = t->ndocs > 1;
        if (t->def->type == EVAL_MC) {
            add_metric(o, "acc", t->acc, t->acc_stderr, many);
            if (eval_task_has_acc_norm(t->def)) add_metric(o, "acc_norm", t->acc_norm, t->acc_norm_stderr, many);
        } else if (t->def->type == EVAL_LOGLIK) {
            add_metric(o, "perplexity", t->perplexity, t->perplexity_stderr, many);
            add_metric(o, "acc", t->acc, t->acc_stderr, many);
        } else {
            add_metric(o, "word_perplexity", t->word_perplexity, NAN, 0);
            add_metric(o, "byte_perplexity", t->byte_perplexity, NAN, 0);
            add_metric(o, "bits_per_byte", t->bits_per_byte, NAN, 0);
        }
    }
    // groups: the four subgroups first (each over its leaves), then mmlu over all leaves
    cJSON *grp = cJSON_CreateObject();
    for (int g = 0; g < 4; g++)
        if (groups & (1u << g)) {
            cJSON *e = group_entry(tasks, ntasks, 1u << g, eval_mmlu_groups[g], eval_mmlu_group_aliases[g]);
            cJSON_AddItemToObject(grp, eval_mmlu_groups[g], cJSON_Duplicate(e, 1));
            cJSON_AddItemToObject(res, eval_mmlu_groups[g], e);
        }
    if (groups & 0x10u) {
        cJSON *e = group_entry(tasks, ntasks, 0xFu, "mmlu", "mmlu");
        cJSON_AddItemToObject(grp, "mmlu", cJSON_Duplicate(e, 1));
        cJSON_AddItemToObject(res, "mmlu", e);
    }
    if (cJSON_GetArraySize(grp) > 0) cJSON_AddItemToObject(root, "groups", grp);
    else cJSON_Delete(grp);

    cJSON *gs = cJSON_AddObjectToObject(root, "group_subtasks");
    if (groups & 0x10u) {
        cJSON *a = cJSON_AddArrayToObject(gs, "mmlu");
        for (int g = 0; g < 4; g++) cJSON_AddItemToArray(a, cJSON_CreateString(eval_mmlu_groups[g]));
    }
    for (int g = 0; g < 4; g++) {
        if (!(groups & (1u << g))) continue;
        cJSON *a = cJSON_AddArrayToObject(gs, eval_mmlu_groups[g]);
        for (int i = 0; i < ntasks; i++)
            if (tasks[i].def->group && !strcmp(tasks[i].def->group, eval_mmlu_groups[g]))
                cJSON_AddItemToArray(a, cJSON_CreateString(tasks[i].def->name));
    }

    cJSON *cf = cJSON_AddObjectToObject(root, "configs");
    cJSON *ver = cJSON_AddObjectToObject(root, "versions");
    cJSON *nshot = cJSON_AddObjectToObject(root, "n-shot");
    cJSON *hib = cJSON_AddObjectToObject(root, "higher_is_better");
    for (int i = 0; i < ntasks; i++) {
        cJSON_AddItemToObject(cf, tasks[i].def->name, task_config(&tasks[i]));
        cJSON_AddNumberToObject(ver, tasks[i].def->name, task_version(&tasks[i]));
        cJSON_AddNumberToObject(nshot, tasks[i].def->name, tasks[i].num_fewshot);
        cJSON_AddItemToObject(hib, tasks[i].def->name, task_hib(&tasks[i]));
    }
    for (int g = 0; g < 5; g++) {
        if (!(groups & (1u << g))) continue;
        const char *name = g < 4 ? eval_mmlu_groups[g] : "mmlu";
        cJSON_AddStringToObject(ver, name, "2");
        cJSON_AddNumberToObject(nshot, name, info->num_fewshot);
        cJSON *h = cJSON_AddObjectToObject(hib, name);
        cJSON_AddBoolToObject(h, "acc", 1);
    }
    cJSON *ns = cJSON_AddObjectToObject(root, "n-samples");
    for (int i = 0; i < ntasks; i++) {
        cJSON *o = cJSON_AddObjectToObject(ns, tasks[i].def->name);
        cJSON_AddNumberToObject(o, "original", tasks[i].n_original);
        cJSON_AddNumberToObject(o, "effective", tasks[i].ndocs);
    }

    cJSON *cfg = cJSON_AddObjectToObject(root, "config");
    cJSON_AddStringToObject(cfg, "model", "gdn.c");
    cJSON_AddStringToObject(cfg, "model_args", info->model_args ? info->model_args : "");
    cJSON_AddNullToObject(cfg, "model_num_parameters");
    cJSON_AddNullToObject(cfg, "model_dtype");
    cJSON_AddStringToObject(cfg, "model_revision", "main");
    cJSON_AddStringToObject(cfg, "model_sha", "");
    cJSON_AddStringToObject(cfg, "batch_size", info->batch_size ? info->batch_size : "");
    cJSON_AddArrayToObject(cfg, "batch_sizes");
    cJSON_AddStringToObject(cfg, "device", info->device ? info->device : "");
    cJSON_AddNullToObject(cfg, "use_cache");
    if (info->limit > 0) cJSON_AddNumberToObject(cfg, "limit", info->limit);
    else cJSON_AddNullToObject(cfg, "limit");
    cJSON_AddNumberToObject(cfg, "bootstrap_iters", 100000);
    cJSON_AddNullToObject(cfg, "gen_kwargs");
    cJSON_AddNumberToObject(cfg, "random_seed", 0);
    cJSON_AddNumberToObject(cfg, "numpy_seed", 1234);
    cJSON_AddNumberToObject(cfg, "torch_seed", 1234);
    cJSON_AddNumberToObject(cfg, "fewshot_seed", 1234);

    cJSON_AddNullToObject(root, "git_hash");
    cJSON_AddNumberToObject(root, "date", info->start_time);
    cJSON_AddStringToObject(root, "pretty_env_info", "gdn.c eval (C re-implementation of lm-eval's HF causal-LM "
                                                     "scoring; no PyTorch)");
    cJSON_AddStringToObject(root, "transformers_version", "N/A");
    cJSON_AddStringToObject(root, "lm_eval_version", emulated_version(info));
    cJSON_AddNullToObject(root, "upper_git_hash");
    // lm-eval pads with EOS when the tokenizer has no pad token (Llama-3)
    add_token_pair(root, "tokenizer_pad_token", info->eos_text, info->eos_id);
    add_token_pair(root, "tokenizer_eos_token", info->eos_text, info->eos_id);
    add_token_pair(root, "tokenizer_bos_token", info->bos_text, info->bos_id);
    cJSON_AddNumberToObject(root, "eot_token_id", info->eos_id);
    cJSON_AddNumberToObject(root, "max_length", info->max_length);
    cJSON_AddObjectToObject(root, "task_hashes");
    cJSON_AddStringToObject(root, "model_source", "gdn.c");
    cJSON_AddStringToObject(root, "model_name", info->model_name ? info->model_name : "");
    char *san = eval_sanitize_model_name(info->model_name ? info->model_name : "");
    cJSON_AddStringToObject(root, "model_name_sanitized", san);
    free(san);
    cJSON_AddNullToObject(root, "system_instruction");
    cJSON_AddNullToObject(root, "system_instruction_sha");
    cJSON_AddBoolToObject(root, "fewshot_as_multiturn", 0);
    cJSON_AddNullToObject(root, "chat_template");
    cJSON_AddNullToObject(root, "chat_template_sha");
    char secs[64];
    snprintf(secs, sizeof secs, "%.6f", info->total_seconds);
    cJSON_AddStringToObject(root, "total_evaluation_time_seconds", secs);
    cJSON *ge = cJSON_AddObjectToObject(root, "gdn_eval");
    cJSON_AddStringToObject(ge, "emulates", info->bos_mode == EVAL_BOS_OLD
                                                ? "lm-eval <= 0.4.9.1 (no BOS on requests)"
                                                : "lm-eval >= 0.4.9.2 (tokenizer-default BOS on requests)");
    cJSON_AddStringToObject(ge, "bos_mode", info->bos_mode == EVAL_BOS_OLD ? "old" : "new");
    cJSON_AddNumberToObject(ge, "race_version", info->race_version);
    cJSON_AddStringToObject(ge, "tokenizer", info->tokenizer_path ? info->tokenizer_path : "");
    return root;
}

// ---- the Markdown table ----

static long disp_width(const char *s) { return utf8_codepoints(s, strlen(s)); }

typedef struct {
    char *cell[9];
} Row;

static void row_add(Row **rows, int *n, int *cap, const char *c[9]) {
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 32;
        *rows = xrealloc(*rows, (size_t)*cap * sizeof **rows);
    }
    for (int i = 0; i < 9; i++) (*rows)[*n].cell[i] = xstrdup(c[i] ? c[i] : "");
    (*n)++;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

typedef struct {
    const cJSON *gs;        // group_subtasks
    const cJSON *col;       // results or groups
    const char **keys;      // display order
    int *depth;
    int n, cap;
    const char **seen;      // names given a depth
    int nseen, seencap;
} Order;

static void order_push(Order *o, const char *name, int depth) {
    if (o->n == o->cap) {
        o->cap = o->cap ? o->cap * 2 : 32;
        o->keys = xrealloc(o->keys, (size_t)o->cap * sizeof *o->keys);
        o->depth = xrealloc(o->depth, (size_t)o->cap * sizeof *o->depth);
    }
    o->keys[o->n] = name;
    o->depth[o->n++] = depth;
}

static void order_visit(Order *o, const char *name, int depth) {
    if (o->nseen == o->seencap) {
        o->seencap = o->seencap ? o->seencap * 2 : 32;
        o->seen = xrealloc(o->seen, (size_t)o->seencap * sizeof *o->seen);
    }
    o->seen[o->nseen++] = name;
    if (cJSON_GetObjectItemCaseSensitive(o->col, name)) order_push(o, name, depth);
    const cJSON *kids = cJSON_GetObjectItemCaseSensitive(o->gs, name);
    int nk = cJSON_GetArraySize(kids);
    if (nk <= 0) return;
    const char **names = xmalloc((size_t)nk * sizeof *names);
    for (int i = 0; i < nk; i++) names[i] = cJSON_GetArrayItem(kids, i)->valuestring;
    qsort(names, (size_t)nk, sizeof *names, cmp_str);
    for (int i = 0; i < nk; i++) order_visit(o, names[i], depth + 1);
    free(names);
}

static int is_child(const cJSON *gs, const char *name) {
    const cJSON *g;
    cJSON_ArrayForEach(g, gs) {
        const cJSON *c;
        cJSON_ArrayForEach(c, g) if (cJSON_IsString(c) && !strcmp(c->valuestring, name)) return 1;
    }
    return 0;
}

static void python_center(Buf *b, const char *s, long width) {
    long len = disp_width(s), marg = width - len;
    if (marg <= 0) {
        buf_puts(b, s);
        return;
    }
    long left = marg / 2 + (marg & width & 1); // CPython str.center
    for (long i = 0; i < left; i++) buf_puts(b, " ");
    buf_puts(b, s);
    for (long i = 0; i < marg - left; i++) buf_puts(b, " ");
}

static int cmp_metric_keys(const void *a, const void *b) {
    return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

static void fmt_value(const cJSON *v, char *buf, size_t n) {
    if (cJSON_IsString(v)) snprintf(buf, n, "%s", v->valuestring);
    else if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (d == floor(d) && fabs(d) < 1e15) snprintf(buf, n, "%.0f", d); // ints print as ints
        else snprintf(buf, n, "%.4f", d);
    } else snprintf(buf, n, "%s", "");
}

char *eval_results_table(const cJSON *root, const char *column) {
    const cJSON *col = cJSON_GetObjectItemCaseSensitive(root, column);
    const cJSON *gs = cJSON_GetObjectItemCaseSensitive(root, "group_subtasks");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "versions");
    const cJSON *nshot = cJSON_GetObjectItemCaseSensitive(root, "n-shot");
    const cJSON *hibs = cJSON_GetObjectItemCaseSensitive(root, "higher_is_better");
    if (!cJSON_IsObject(col)) return xstrdup("");
    Order o = {.gs = gs, .col = col};
    // roots of the group tree (sorted), then everything else (sorted)
    int ng = cJSON_GetArraySize(gs);
    const char **gnames = xcalloc((size_t)ng + 1, sizeof *gnames);
    for (int i = 0; i < ng; i++) gnames[i] = cJSON_GetArrayItem(gs, i)->string;
    qsort(gnames, (size_t)ng, sizeof *gnames, cmp_str);
    for (int i = 0; i < ng; i++)
        if (!is_child(gs, gnames[i])) order_visit(&o, gnames[i], 0);
    free(gnames);
    int nk = cJSON_GetArraySize(col);
    const char **rest = xcalloc((size_t)nk + 1, sizeof *rest);
    int nr = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, col) {
        int seen = 0;
        for (int i = 0; i < o.nseen && !seen; i++) seen = !strcmp(o.seen[i], e->string);
        if (!seen) rest[nr++] = e->string;
    }
    qsort(rest, (size_t)nr, sizeof *rest, cmp_str);
    for (int i = 0; i < nr; i++) order_push(&o, rest[i], 0);
    free(rest);

    Row *rows = NULL;
    int nrows = 0, cap = 0;
    for (int k = 0; k < o.n; k++) {
        const cJSON *entry = cJSON_GetObjectItemCaseSensitive(col, o.keys[k]);
        const cJSON *alias = cJSON_GetObjectItemCaseSensitive(entry, "alias");
        Buf name = {0};
        for (int d = 0; d < o.depth[k]; d++) buf_puts(&name, " ");
        if (o.depth[k] > 0) buf_puts(&name, "- ");
        buf_puts(&name, cJSON_IsString(alias) ? alias->valuestring : o.keys[k]);
        char version[64], shot[64];
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(ver, o.keys[k]);
        if (v) fmt_value(v, version, sizeof version);
        else snprintf(version, sizeof version, "    N/A");
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(nshot, o.keys[k]);
        if (s) fmt_value(s, shot, sizeof shot);
        else snprintf(shot, sizeof shot, " ");
        const cJSON *hib = cJSON_GetObjectItemCaseSensitive(hibs, o.keys[k]);
        // metric keys sorted, as make_table does
        int nm = cJSON_GetArraySize(entry);
        const cJSON **ms = xcalloc((size_t)nm + 1, sizeof *ms);
        int m = 0;
        cJSON_ArrayForEach(e, entry) if (strchr(e->string, ',')) ms[m++] = e;
        qsort(ms, (size_t)m, sizeof *ms, cmp_metric_keys);
        int first = 1;
        for (int i = 0; i < m; i++) {
            char metric[96], filter[96];
            const char *comma = strchr(ms[i]->string, ',');
            snprintf(metric, sizeof metric, "%.*s", (int)(comma - ms[i]->string), ms[i]->string);
            snprintf(filter, sizeof filter, "%s", comma + 1);
            size_t ml = strlen(metric);
            if (ml >= 7 && !strcmp(metric + ml - 7, "_stderr")) continue;
            if (!cJSON_IsNumber(ms[i]) && !cJSON_IsString(ms[i])) continue;
            const cJSON *h = cJSON_GetObjectItemCaseSensitive(hib, metric);
            const char *arrow = cJSON_IsTrue(h) ? "\xE2\x86\x91" : cJSON_IsFalse(h) ? "\xE2\x86\x93" : "";
            char val[64], se[64], sekey[200];
            fmt_value(ms[i], val, sizeof val);
            if (cJSON_IsNumber(ms[i])) snprintf(val, sizeof val, "%.4f", ms[i]->valuedouble);
            snprintf(sekey, sizeof sekey, "%s_stderr,%s", metric, filter);
            const cJSON *sev = cJSON_GetObjectItemCaseSensitive(entry, sekey);
            const char *cells[9] = {first ? eval_cstr(&name) : "", first ? version : "", filter, shot, metric, arrow, val,
                                    "", ""};
            if (sev) {
                if (cJSON_IsNumber(sev)) snprintf(se, sizeof se, "%.4f", sev->valuedouble);
                else snprintf(se, sizeof se, "   N/A");
                cells[7] = "\xC2\xB1";
                cells[8] = se;
            }
            row_add(&rows, &nrows, &cap, cells);
            first = 0;
        }
        free(ms);
        buf_free(&name);
    }
    free(o.keys);
    free(o.depth);
    free(o.seen);

    const char *head[9] = {!strcmp(column, "groups") ? "Groups" : "Tasks", "Version", "Filter", "n-shot", "Metric",
                           "", "Value", "", "Stderr"};
    const int right[9] = {0, 1, 0, 1, 0, 0, 1, 0, 1}; // numeric columns align right
    long width[9];
    for (int c = 0; c < 9; c++) {
        width[c] = disp_width(head[c]) > 3 ? disp_width(head[c]) : 3;
        for (int r = 0; r < nrows; r++)
            if (disp_width(rows[r].cell[c]) > width[c]) width[c] = disp_width(rows[r].cell[c]);
    }
    Buf b = {0};
    buf_puts(&b, "|");
    for (int c = 0; c < 9; c++) {
        python_center(&b, head[c], width[c]);
        buf_puts(&b, "|");
    }
    buf_puts(&b, "\n|");
    for (int c = 0; c < 9; c++) {
        for (long i = 0; i < width[c] - right[c]; i++) buf_puts(&b, "-");
        buf_puts(&b, right[c] ? ":|" : "|");
    }
    buf_puts(&b, "\n");
    for (int r = 0; r < nrows; r++) {
        buf_puts(&b, "|");
        for (int c = 0; c < 9; c++) {
            long pad = width[c] - disp_width(rows[r].cell[c]);
            if (right[c])
                for (long i = 0; i < pad; i++) buf_puts(&b, " ");
            buf_puts(&b, rows[r].cell[c]);
            if (!right[c])
                for (long i = 0; i < pad; i++) buf_puts(&b, " ");
            buf_puts(&b, "|");
            free(rows[r].cell[c]);
        }
        buf_puts(&b, "\n");
    }
    free(rows);
    return eval_cstr(&b);
}

// ---- output path ----

char *eval_sanitize_model_name(const char *name) {
    Buf b = {0};
    for (const char *p = name; *p;) {
        if (strchr("\"<>:/|\\?*[]", *p)) {
            while (*p && strchr("\"<>:/|\\?*[]", *p)) p++;
            buf_puts(&b, "__");
        } else {
            buf_put(&b, p++, 1);
        }
    }
    return eval_cstr(&b);
}

char *eval_results_path(const char *output_path, const char *model_name) {
    size_t n = strlen(output_path);
    if (n >= 5 && !strcmp(output_path + n - 5, ".json")) return xstrdup(output_path);
    // datetime.now().isoformat() with ':' -> '-' (microseconds omitted when zero, as Python does)
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    char stamp[64], usec[16] = "";
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H-%M-%S", &tm);
    if (tv.tv_usec) snprintf(usec, sizeof usec, ".%06ld", (long)tv.tv_usec);
    char *san = eval_sanitize_model_name(model_name);
    Buf b = {0};
    buf_printf(&b, "%s/%s/results_%s%s.json", output_path, san, stamp, usec);
    free(san);
    return eval_cstr(&b);
}

// ---- request log ----

int eval_write_request_log(const char *path, const EvalTask *tasks, int ntasks, const EvalReqSet *s, char *err,
                           size_t errlen) {
    AtomicFile af;
    if (atomic_open(&af, path, err, errlen) < 0) return -1;
    Buf line = {0};
    int bad = 0;
    for (int ti = 0; ti < ntasks && !bad; ti++) {
        const EvalTask *t = &tasks[ti];
        for (int di = 0; di < t->ndocs && !bad; di++) {
            const EvalDoc *d = &t->docs[di];
            for (int i = 0; i < d->nreq_ids && !bad; i++) {
                const EvalReq *q = &s->reqs[d->req[i]];
                cJSON *o = cJSON_CreateObject();
                cJSON_AddStringToObject(o, "task", t->def->name);
                cJSON_AddNumberToObject(o, "doc", di);
                cJSON_AddNumberToObject(o, "idx", i);
                if (t->def->type != EVAL_ROLLING) {
                    cJSON_AddStringToObject(o, "context", d->ctx[d->nctx > 1 ? i : 0]);
                    cJSON_AddStringToObject(o, "continuation", d->cont[d->ncont > 1 ? i : 0]);
                    if (t->def->type == EVAL_MC) cJSON_AddNumberToObject(o, "gold", d->gold);
                }
                cJSON *toks = cJSON_AddArrayToObject(o, "tokens");
                for (int k = 0; k < q->n; k++) cJSON_AddItemToArray(toks, cJSON_CreateNumber(q->tokens[k]));
                cJSON_AddNumberToObject(o, "cont_len", q->cont_len);
                cJSON_AddNumberToObject(o, "ll", s->ll ? s->ll[d->req[i]] : NAN);
                cJSON_AddBoolToObject(o, "is_greedy", s->greedy ? s->greedy[d->req[i]] : 0);
                char *text = cJSON_PrintUnformatted(o);
                line.n = 0;
                buf_puts(&line, text);
                buf_puts(&line, "\n");
                bad = atomic_write(&af, line.p, line.n) < 0;
                free(text);
                cJSON_Delete(o);
            }
        }
    }
    buf_free(&line);
    if (bad) {
        atomic_abort(&af);
        return set_err(err, errlen, "%s: write failed", path);
    }
    return atomic_commit(&af, err, errlen);
}
