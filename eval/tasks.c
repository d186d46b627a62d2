// tasks.c: the task registry and the rendering of dataset rows into (context, continuation) requests, as
// lm-eval's task YAMLs and utils define them (spec eval.md §2). One table holds every leaf task; MMLU's 57
// subjects are generated from the subject -> category table (from each leaf YAML's "tag").
// Few-shot is supported for MMLU only (first k rows of `dev`, spec §2.8); other tasks draw few-shot examples
// with Python's random.Random(1234).sample in lm-eval, which is not emulated, so k > 0 is refused there.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval/eval.h"
#include "util/common.h"

const char *const eval_mmlu_groups[4] = {"mmlu_stem", "mmlu_other", "mmlu_social_sciences", "mmlu_humanities"};
const char *const eval_mmlu_group_aliases[4] = {"stem", "other", "social sciences", "humanities"};

enum { G_STEM, G_OTHER, G_SOC, G_HUM };
static const struct { const char *subject; int group; } mmlu_subjects[57] = {
    {"abstract_algebra", G_STEM}, {"anatomy", G_STEM}, {"astronomy", G_STEM}, {"business_ethics", G_OTHER},
    {"clinical_knowledge", G_OTHER}, {"college_biology", G_STEM}, {"college_chemistry", G_STEM},
    {"college_computer_science", G_STEM}, {"college_mathematics", G_STEM}, {"college_medicine", G_OTHER},
    {"college_physics", G_STEM}, {"computer_security", G_STEM}, {"conceptual_physics", G_STEM},
    {"econometrics", G_SOC}, {"electrical_engineering", G_STEM}, {"elementary_mathematics", G_STEM},
    {"formal_logic", G_HUM}, {"global_facts", G_OTHER}, {"high_school_biology", G_STEM},
    {"high_school_chemistry", G_STEM}, {"high_school_computer_science", G_STEM},
    {"high_school_european_history", G_HUM}, {"high_school_geography", G_SOC},
    {"high_school_government_and_politics", G_SOC}, {"high_school_macroeconomics", G_SOC},
    {"high_school_mathematics", G_STEM}, {"high_school_microeconomics", G_SOC}, {"high_school_physics", G_STEM},
    {"high_school_psychology", G_SOC}, {"high_school_statistics", G_STEM}, {"high_school_us_history", G_HUM},
    {"high_school_world_history", G_HUM}, {"human_aging", G_OTHER}, {"human_sexuality", G_SOC},
    {"international_law", G_HUM}, {"jurisprudence", G_HUM}, {"logical_fallacies", G_HUM},
    {"machine_learning", G_STEM}, {"management", G_OTHER}, {"marketing", G_OTHER}, {"medical_genetics", G_OTHER},
    {"miscellaneous", G_OTHER}, {"moral_disputes", G_HUM}, {"moral_scenarios", G_HUM}, {"nutrition", G_OTHER},
    {"philosophy", G_HUM}, {"prehistory", G_HUM}, {"professional_accounting", G_OTHER},
    {"professional_law", G_HUM}, {"professional_medicine", G_OTHER}, {"professional_psychology", G_SOC},
    {"public_relations", G_SOC}, {"security_studies", G_SOC}, {"sociology", G_SOC}, {"us_foreign_policy", G_SOC},
    {"virology", G_OTHER}, {"world_religions", G_HUM},
};

// name, alias, family, type, repo, config, split, fewshot split, group, Parquet string columns, extra paths
static const EvalTaskDef base_tasks[] = {
    {"arc_easy", "arc_easy", FAM_ARC, EVAL_MC, "allenai/ai2_arc", "ARC-Easy", "test", NULL, NULL, NULL, NULL},
    {"arc_challenge", "arc_challenge", FAM_ARC, EVAL_MC, "allenai/ai2_arc", "ARC-Challenge", "test", NULL, NULL,
     NULL, NULL},
    {"hellaswag", "hellaswag", FAM_HELLASWAG, EVAL_MC, "Rowan/hellaswag", NULL, "validation", NULL, NULL, NULL,
     NULL},
    {"openbookqa", "openbookqa", FAM_OBQA, EVAL_MC, "allenai/openbookqa", "main", "test", NULL, NULL, NULL, NULL},
    {"piqa", "piqa", FAM_PIQA, EVAL_MC, "baber/piqa", NULL, "validation", NULL, NULL, NULL, NULL},
    {"winogrande", "winogrande", FAM_WINOGRANDE, EVAL_MC, "allenai/winogrande", "winogrande_xl", "validation",
     NULL, NULL, "sentence,option1,option2,answer", NULL},
    {"race", "race", FAM_RACE, EVAL_MC, "EleutherAI/race", "high", "test", NULL, NULL, "article,problems",
     "race_high_test.jsonl;data/race_high_test.jsonl"},
    {"lambada_openai", "lambada_openai", FAM_LAMBADA, EVAL_LOGLIK, "EleutherAI/lambada_openai", "default", "test",
     NULL, NULL, "text", "data/lambada_test.jsonl;lambada_test.jsonl;data/lambada_test_en.jsonl"},
    {"wikitext", "wikitext", FAM_WIKITEXT, EVAL_ROLLING, "EleutherAI/wikitext_document_level", "wikitext-2-raw-v1",
     "test", NULL, NULL, "page", NULL},
};
#define NBASE ((int)(sizeof base_tasks / sizeof base_tasks[0]))

static EvalTaskDef all_tasks[NBASE + 57];
static char mmlu_names[57][64];

static void registry_init(void) {
    if (all_tasks[0].name) return;
    memcpy(all_tasks, base_tasks, sizeof base_tasks);
    for (int i = 0; i < 57; i++) {
        snprintf(mmlu_names[i], sizeof mmlu_names[i], "mmlu_%s", mmlu_subjects[i].subject);
        all_tasks[NBASE + i] = (EvalTaskDef){mmlu_names[i], mmlu_subjects[i].subject, FAM_MMLU, EVAL_MC, "cais/mmlu",
                                             mmlu_subjects[i].subject, "test", "dev",
                                             eval_mmlu_groups[mmlu_subjects[i].group], NULL, NULL};
    }
}

int eval_task_count(void) {
    registry_init();
    return NBASE + 57;
}

const EvalTaskDef *eval_task_def(int i) {
    registry_init();
    return i >= 0 && i < NBASE + 57 ? &all_tasks[i] : NULL;
}

const EvalTaskDef *eval_task_find(const char *name) {
    registry_init();
    for (int i = 0; i < NBASE + 57; i++)
        if (!strcmp(all_tasks[i].name, name)) return &all_tasks[i];
    return NULL;
}

static void add_leaf(const EvalTaskDef ***out, int *n, int *cap, const EvalTaskDef *d) {
    for (int i = 0; i < *n; i++)
        if ((*out)[i] == d) return;
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        *out = xrealloc(*out, (size_t)*cap * sizeof **out);
    }
    (*out)[(*n)++] = d;
}

int eval_tasks_expand(const char *list, const EvalTaskDef ***out, unsigned *groups, char *err, size_t errlen) {
    registry_init();
    *out = NULL;
    *groups = 0;
    int n = 0, cap = 0;
    char *copy = xstrdup(list), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ') tok++;
        for (char *e = tok + strlen(tok); e > tok && e[-1] == ' ';) *--e = 0;
        if (!*tok) continue;
        int matched = 0;
        if (!strcmp(tok, "mmlu")) {
            *groups |= 0x1Fu;
            for (int g = 0; g < 4; g++)
                for (int i = 0; i < 57; i++)
                    if (mmlu_subjects[i].group == g) add_leaf(out, &n, &cap, &all_tasks[NBASE + i]);
            matched = 1;
        }
        for (int g = 0; g < 4 && !matched; g++)
            if (!strcmp(tok, eval_mmlu_groups[g])) {
                *groups |= 1u << g;
                for (int i = 0; i < 57; i++)
                    if (mmlu_subjects[i].group == g) add_leaf(out, &n, &cap, &all_tasks[NBASE + i]);
                matched = 1;
            }
        if (!matched) {
            const EvalTaskDef *d = eval_task_find(tok);
            if (!d) {
                set_err(err, errlen,
                        "unknown task '%s'; known: arc_easy, arc_challenge, hellaswag, openbookqa, piqa, winogrande, "
                        "race, lambada_openai, wikitext, mmlu, mmlu_stem, mmlu_other, mmlu_social_sciences, "
                        "mmlu_humanities, mmlu_<subject> (the 57 MMLU subjects, e.g. mmlu_anatomy)",
                        tok);
                free(copy);
                free(*out);
                *out = NULL;
                return -1;
            }
            add_leaf(out, &n, &cap, d);
        }
    }
    free(copy);
    if (n == 0) {
        free(*out);
        *out = NULL;
        return set_err(err, errlen, "--tasks lists no task");
    }
    return n;
}

// ---- documents ----

static const char *hf_hint(const EvalTaskDef *d, char *buf, size_t n) {
    if (d->config && strcmp(d->config, "default"))
        snprintf(buf, n, "the HF dataset %s, config %s", d->repo, d->config);
    else
        snprintf(buf, n, "the HF dataset %s", d->repo);
    return buf;
}

void eval_doc_free(EvalDoc *d) {
    for (int i = 0; i < d->nctx; i++) free(d->ctx[i]);
    for (int i = 0; i < d->ncont; i++) free(d->cont[i]);
    free(d->ctx);
    free(d->cont);
    free(d->choice_len);
    free(d->text);
    free(d->req);
    free(d->ll);
    free(d->greedy);
    memset(d, 0, sizeof *d);
}

static char *cat(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *s = xmalloc(la + lb + 1);
    memcpy(s, a, la);
    memcpy(s + la, b, lb + 1);
    return s;
}

// MC doc with one shared context and one continuation " " + choice per choice.
static void mc_single_context(EvalDoc *d, char *ctx, const char *const *choices, int n, int gold) {
    d->nctx = 1;
    d->ctx = xcalloc(1, sizeof(char *));
    d->ctx[0] = ctx;
    d->ncont = d->nchoice = n;
    d->cont = xcalloc((size_t)n, sizeof(char *));
    d->choice_len = xcalloc((size_t)n, sizeof(double));
    for (int i = 0; i < n; i++) {
        d->cont[i] = cat(" ", choices[i]);
        d->choice_len[i] = (double)utf8_codepoints(choices[i], strlen(choices[i]));
    }
    d->gold = gold >= 0 && gold < n ? gold : -100;
}

// index of key in the label list; -1 if absent
static int label_index(const char *const *labels, int n, const char *key) {
    for (int i = 0; i < n; i++)
        if (!strcmp(labels[i], key)) return i;
    return -1;
}

// ARC and OpenBookQA share the {"text": [...], "label": [...]} choices struct.
static int build_labeled(EvalTask *t, int row, EvalDoc *d, char *ctx_owned, const char *answer_key, char *err,
                         size_t errlen) {
    const EvalRows *r = &t->rows;
    char where[4200];
    const cJSON *choices = cJSON_GetObjectItemCaseSensitive(r->rows[row], "choices");
    const char **text = NULL, **label = NULL;
    if (!cJSON_IsObject(choices)) {
        free(ctx_owned);
        return set_err(err, errlen, "%s: field 'choices': expected an object {\"text\": [...], \"label\": [...]}",
                       eval_row_where(r, row, where, sizeof where));
    }
    int nt = eval_row_strlist(r, row, cJSON_GetObjectItemCaseSensitive(choices, "text"), "choices.text", &text, err,
                              errlen);
    int nl = nt < 0 ? -1
                    : eval_row_strlist(r, row, cJSON_GetObjectItemCaseSensitive(choices, "label"), "choices.label",
                                       &label, err, errlen);
    if (nt < 0 || nl < 0) goto fail;
    if (nt != nl || nt == 0) {
        set_err(err, errlen, "%s: 'choices.text' has %d entries but 'choices.label' has %d",
                eval_row_where(r, row, where, sizeof where), nt, nl);
        goto fail;
    }
    int gold = label_index(label, nl, answer_key);
    if (gold < 0) { // lm-eval: choices.label.index(answerKey) raises
        set_err(err, errlen, "%s: field 'answerKey': \"%s\" is not one of choices.label",
                eval_row_where(r, row, where, sizeof where), answer_key);
        goto fail;
    }
    mc_single_context(d, ctx_owned, text, nt, gold);
    free(text);
    free(label);
    return 0;
fail:
    free(ctx_owned);
    free(text);
    free(label);
    return -1;
}

static char *mmlu_doc_text(const EvalRows *r, int row, char *err, size_t errlen) {
    char where[4200];
    const char *q = eval_row_str(r, row, "question", err, errlen);
    if (!q) return NULL;
    const char **c = NULL;
    int n = eval_row_strlist(r, row, cJSON_GetObjectItemCaseSensitive(r->rows[row], "choices"), "choices", &c, err,
                             errlen);
    if (n < 0) return NULL;
    if (n < 4) {
        free(c);
        set_err(err, errlen, "%s: field 'choices': expected 4 strings, got %d", eval_row_where(r, row, where, sizeof where),
                n);
        return NULL;
    }
    char *qs = py_strip(q);
    Buf b = {0};
    buf_printf(&b, "%s\nA. %s\nB. %s\nC. %s\nD. %s\nAnswer:", qs, c[0], c[1], c[2], c[3]);
    free(qs);
    free(c);
    return eval_cstr(&b);
}

static const char *const ABCD[4] = {"A", "B", "C", "D"};

// RACE: `problems` is a Python-literal string in the hub data (a JSON list is accepted as well).
static cJSON *race_problems(const EvalRows *r, int row, char *err, size_t errlen) {
    char where[4200], perr[ERR_LEN];
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(r->rows[row], "problems");
    cJSON *list;
    if (cJSON_IsString(p)) {
        list = pylit_parse(p->valuestring, strlen(p->valuestring), perr, sizeof perr);
        if (!list) {
            set_err(err, errlen, "%s: field 'problems': not a Python literal list (%s)",
                    eval_row_where(r, row, where, sizeof where), perr);
            return NULL;
        }
    } else if (cJSON_IsArray(p)) {
        list = cJSON_Duplicate(p, 1);
    } else {
        set_err(err, errlen, "%s: field 'problems': expected a string holding a Python list of dicts%s",
                eval_row_where(r, row, where, sizeof where), p ? "" : " (missing)");
        return NULL;
    }
    if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) == 0) {
        cJSON_Delete(list);
        set_err(err, errlen, "%s: field 'problems': expected a non-empty list of question dicts",
                eval_row_where(r, row, where, sizeof where));
        return NULL;
    }
    return list;
}

// One RACE problem's fields; -1 + err.
static int race_problem(const EvalRows *r, int row, const cJSON *p, int k, const char **question,
                        const char ***options, int *nopt, int *answer, char *err, size_t errlen) {
    char where[4200];
    eval_row_where(r, row, where, sizeof where);
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(p, "question");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(p, "answer");
    if (!cJSON_IsObject(p) || !cJSON_IsString(q) || !cJSON_IsString(a))
        return set_err(err, errlen, "%s: problems[%d]: expected a dict with string 'question' and 'answer'", where, k);
    char what[64];
    snprintf(what, sizeof what, "problems[%d].options", k);
    *nopt = eval_row_strlist(r, row, cJSON_GetObjectItemCaseSensitive(p, "options"), what, options, err, errlen);
    if (*nopt < 0) return -1;
    *question = q->valuestring;
    *answer = -1;
    for (int i = 0; i < 4; i++)
        if (!strcmp(a->valuestring, ABCD[i])) *answer = i;
    if (*answer < 0 || *answer >= *nopt) {
        free(*options);
        *options = NULL;
        return set_err(err, errlen, "%s: problems[%d]: answer \"%s\" is not a letter A-D naming one of its %d options",
                       where, k, a->valuestring, *nopt);
    }
    return 0;
}

static int build_race(EvalTask *t, int row, EvalDoc *d, char *err, size_t errlen) {
    const EvalRows *r = &t->rows;
    char where[4200];
    const char *article = eval_row_str(r, row, "article", err, errlen);
    if (!article) return -1;
    cJSON *list = race_problems(r, row, err, errlen);
    if (!list) return -1;
    int np = cJSON_GetArraySize(list);
    Buf b = {0};
    buf_printf(&b, "Article: %s\n\n", article);
    for (int k = 0; k < np; k++) {
        const char *question = "", **opts = NULL;
        int nopt = 0, ans = 0;
        if (race_problem(r, row, cJSON_GetArrayItem(list, k), k, &question, &opts, &nopt, &ans, err, errlen) < 0) {
            buf_free(&b);
            cJSON_Delete(list);
            return -1;
        }
        size_t ql = strlen(question);
        if (k < np - 1) {
            if (ql >= 6 && !memcmp(question + ql - 6, "  _  .", 6)) {
                if (t->race_version >= 3) buf_put(&b, question, ql - 5); // stem kept, one space before the answer
                else buf_put(&b, question + ql - 5, 5);                // v2.0: stem dropped (lm-eval #3716)
                buf_printf(&b, "%s\n", opts[ans]);
            } else {
                buf_printf(&b, "Question: %s\nAnswer: %s\n", question, opts[ans]);
            }
            free(opts);
            continue;
        }
        buf_puts(&b, question); // the scored question, raw
        if (nopt < 4) {
            set_err(err, errlen, "%s: problems[%d]: expected 4 options, got %d", eval_row_where(r, row, where, sizeof where),
                    k, nopt);
            free(opts);
            buf_free(&b);
            cJSON_Delete(list);
            return -1;
        }
        buf_put(&b, "", 1);
        mc_single_context(d, b.p, opts, 4, ans);
        free(opts);
    }
    cJSON_Delete(list);
    return 0;
}

int eval_doc_build(EvalTask *t, int row, EvalDoc *d, char *err, size_t errlen) {
    const EvalRows *r = &t->rows;
    char where[4200];
    memset(d, 0, sizeof *d);
    switch (t->def->family) {
    case FAM_ARC: {
        const char *q = eval_row_str(r, row, "question", err, errlen);
        const char *key = q ? eval_row_str(r, row, "answerKey", err, errlen) : NULL;
        if (!key) return -1;
        Buf b = {0};
        buf_printf(&b, "Question: %s\nAnswer:", q);
        return build_labeled(t, row, d, eval_cstr(&b), key, err, errlen);
    }
    case FAM_OBQA: {
        const char *q = eval_row_str(r, row, "question_stem", err, errlen);
        const char *key = q ? eval_row_str(r, row, "answerKey", err, errlen) : NULL;
        if (!key) return -1;
        while (*key && py_isspace((unsigned char)*key)) key++; // answerKey.lstrip() (ASCII labels)
        return build_labeled(t, row, d, xstrdup(q), key, err, errlen);
    }
    case FAM_HELLASWAG: {
        const char *act = eval_row_str(r, row, "activity_label", err, errlen);
        const char *ca = act ? eval_row_str(r, row, "ctx_a", err, errlen) : NULL;
        const char *cb = ca ? eval_row_str(r, row, "ctx_b", err, errlen) : NULL;
        long label;
        if (!cb || eval_row_int(r, row, "label", &label, err, errlen) < 0) return -1;
        const char **endings;
        int ne = eval_row_strlist(r, row, cJSON_GetObjectItemCaseSensitive(r->rows[row], "endings"), "endings",
                                  &endings, err, errlen);
        if (ne < 0) return -1;
        char *cap = py_capitalize(cb);
        Buf q = {0};
        buf_printf(&q, "%s: %s %s", act, ca, cap);
        free(cap);
        char *query = hellaswag_clean(eval_cstr(&q));
        buf_free(&q);
        char **clean = xcalloc((size_t)ne + 1, sizeof(char *));
        for (int i = 0; i < ne; i++) clean[i] = hellaswag_clean(endings[i]);
        mc_single_context(d, query, (const char *const *)clean, ne, (int)(label >= 0 && label < ne ? label : -1));
        for (int i = 0; i < ne; i++) free(clean[i]);
        free(clean);
        free(endings);
        return 0;
    }
    case FAM_PIQA: {
        const char *goal = eval_row_str(r, row, "goal", err, errlen);
        const char *s1 = goal ? eval_row_str(r, row, "sol1", err, errlen) : NULL;
        const char *s2 = s1 ? eval_row_str(r, row, "sol2", err, errlen) : NULL;
        long label;
        if (!s2 || eval_row_int(r, row, "label", &label, err, errlen) < 0) return -1;
        Buf b = {0};
        buf_printf(&b, "Question: %s\nAnswer:", goal);
        const char *sols[2] = {s1, s2};
        mc_single_context(d, eval_cstr(&b), sols, 2, (int)(label >= 0 && label < 2 ? label : -1));
        return 0;
    }
    case FAM_WINOGRANDE: {
        const char *sent = eval_row_str(r, row, "sentence", err, errlen);
        const char *o1 = sent ? eval_row_str(r, row, "option1", err, errlen) : NULL;
        const char *o2 = o1 ? eval_row_str(r, row, "option2", err, errlen) : NULL;
        const char *ans = o2 ? eval_row_str(r, row, "answer", err, errlen) : NULL;
        if (!ans) return -1;
        const char *blank = strchr(sent, '_');
        if (!blank)
            return set_err(err, errlen, "%s: field 'sentence': no '_' blank in \"%s\"",
                           eval_row_where(r, row, where, sizeof where), sent);
        if (strcmp(ans, "1") && strcmp(ans, "2"))
            return set_err(err, errlen, "%s: field 'answer': expected \"1\" or \"2\", got \"%s\"",
                           eval_row_where(r, row, where, sizeof where), ans);
        size_t k = (size_t)(blank - sent);
        const char *opts[2] = {o1, o2};
        d->nctx = d->nchoice = 2;
        d->ctx = xcalloc(2, sizeof(char *));
        d->choice_len = xcalloc(2, sizeof(double));
        for (int i = 0; i < 2; i++) { // partial evaluation: the option fills the blank in the context
            Buf b = {0};
            buf_put(&b, sent, k);
            buf_puts(&b, opts[i]);
            d->ctx[i] = eval_cstr(&b);
            d->choice_len[i] = (double)utf8_codepoints(b.p, b.n);
        }
        char *suffix = py_strip(blank + 1);
        d->ncont = 1;
        d->cont = xcalloc(1, sizeof(char *));
        d->cont[0] = cat(" ", suffix);
        free(suffix);
        d->gold = ans[0] == '1' ? 0 : 1;
        return 0;
    }
    case FAM_RACE: return build_race(t, row, d, err, errlen);
    case FAM_MMLU: {
        char *text = mmlu_doc_text(r, row, err, errlen);
        long answer;
        if (!text) return -1;
        if (eval_row_int(r, row, "answer", &answer, err, errlen) < 0) {
            free(text);
            return -1;
        }
        Buf b = {0};
        char *subject = py_replace(t->def->config, "_", " ");
        buf_printf(&b, "The following are multiple choice questions (with answers) about %s.\n\n%s%s", subject,
                   t->fewshot_block ? t->fewshot_block : "", text);
        free(subject);
        free(text);
        mc_single_context(d, eval_cstr(&b), ABCD, 4, (int)(answer >= 0 && answer < 4 ? answer : -1));
        return 0;
    }
    case FAM_LAMBADA: {
        const char *text = eval_row_str(r, row, "text", err, errlen);
        if (!text) return -1;
        // text.split(" "): context = all pieces but the last, target = " " + the last piece
        const char *sp = strrchr(text, ' ');
        size_t cl = sp ? (size_t)(sp - text) : 0;
        d->nctx = d->ncont = 1;
        d->ctx = xcalloc(1, sizeof(char *));
        d->cont = xcalloc(1, sizeof(char *));
        d->ctx[0] = xmalloc(cl + 1);
        memcpy(d->ctx[0], text, cl);
        d->ctx[0][cl] = 0;
        d->cont[0] = cat(" ", sp ? sp + 1 : text);
        d->gold = 0;
        return 0;
    }
    case FAM_WIKITEXT: {
        const char *page = eval_row_str(r, row, "page", err, errlen);
        if (!page) return -1;
        d->text = wikitext_detokenize(page);
        d->words = wikitext_word_count(page);
        d->bytes = (long)strlen(page);
        return 0;
    }
    }
    return set_err(err, errlen, "internal: unknown task family");
}

// MMLU k-shot block: the first k rows of `dev`, each doc text + " " + letter + "\n\n".
static int mmlu_fewshot(EvalTask *t, const char *data_dir, EvalParquetFn pq, char *err, size_t errlen) {
    char looked[8192], hint[256];
    char **files = NULL;
    int nf = eval_find_split(data_dir, t->def->repo, t->def->config, t->def->fewshot_split, NULL, &files, looked,
                             sizeof looked);
    if (nf == 0)
        return set_err(err, errlen,
                       "%s: --num-fewshot %d needs the '%s' split, none found under %s; get it from %s (looked for "
                       "%s)",
                       t->def->name, t->num_fewshot, t->def->fewshot_split, data_dir, hf_hint(t->def, hint, sizeof hint),
                       looked);
    EvalRows dev;
    int rc = eval_rows_load(&dev, files, nf, pq, NULL, 0, err, errlen);
    for (int i = 0; i < nf; i++) free(files[i]);
    free(files);
    if (rc < 0) {
        eval_rows_free(&dev);
        return -1;
    }
    if (dev.n < t->num_fewshot) {
        int have = dev.n;
        eval_rows_free(&dev);
        return set_err(err, errlen, "%s: --num-fewshot %d but the '%s' split has only %d rows", t->def->name,
                       t->num_fewshot, t->def->fewshot_split, have);
    }
    Buf b = {0};
    buf_puts(&b, "");
    for (int k = 0; k < t->num_fewshot; k++) {
        char *text = mmlu_doc_text(&dev, k, err, errlen);
        long answer;
        if (!text || eval_row_int(&dev, k, "answer", &answer, err, errlen) < 0) {
            free(text);
            buf_free(&b);
            eval_rows_free(&dev);
            return -1;
        }
        if (answer < 0 || answer > 3) {
            char where[4200];
            set_err(err, errlen, "%s: field 'answer': %ld is not a choice index 0-3", eval_row_where(&dev, k, where, sizeof where),
                    answer);
            free(text);
            buf_free(&b);
            eval_rows_free(&dev);
            return -1;
        }
        buf_printf(&b, "%s %s\n\n", text, ABCD[answer]);
        free(text);
    }
    t->fewshot_block = eval_cstr(&b);
    eval_rows_free(&dev);
    return 0;
}

int eval_task_load(EvalTask *t, const EvalTaskDef *def, const char *data_dir, int num_fewshot, double limit,
                   int race_version, EvalParquetFn pq, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    t->def = def;
    t->num_fewshot = num_fewshot;
    t->race_version = race_version;
    if (num_fewshot > 0 && !def->fewshot_split)
        return set_err(err, errlen,
                       "%s: --num-fewshot %d is supported for mmlu only (lm-eval samples other tasks' examples with "
                       "Python's random.Random(1234), which is not emulated; these benchmarks are run 0-shot)",
                       def->name, num_fewshot);
    char looked[8192], hint[256];
    char *extra_buf = def->extra_paths ? xstrdup(def->extra_paths) : NULL;
    const char *extra[8] = {0};
    int ne = 0;
    for (char *save = NULL, *p = extra_buf ? strtok_r(extra_buf, ";", &save) : NULL; p && ne < 7;
         p = strtok_r(NULL, ";", &save))
        extra[ne++] = p;
    char **files = NULL;
    int nf = eval_find_split(data_dir, def->repo, def->config, def->split, extra, &files, looked, sizeof looked);
    free(extra_buf);
    if (nf == 0)
        return set_err(err, errlen,
                       "%s: no %s split found under %s; get it from %s, split %s, as %s (looked for %s)", def->name,
                       def->split, data_dir, hf_hint(def, hint, sizeof hint), def->split,
                       "Parquet or JSON Lines",
                       looked);
    const char *cols[8];
    int ncols = 0;
    char *colbuf = def->parquet_columns ? xstrdup(def->parquet_columns) : NULL;
    for (char *save = NULL, *p = colbuf ? strtok_r(colbuf, ",", &save) : NULL; p && ncols < 8;
         p = strtok_r(NULL, ",", &save))
        cols[ncols++] = p;
    int rc = eval_rows_load(&t->rows, files, nf, pq, colbuf ? cols : NULL, ncols, err, errlen);
    free(colbuf);
    for (int i = 0; i < nf; i++) free(files[i]);
    free(files);
    if (rc < 0) return -1;
    t->n_original = t->rows.n;
    long n = t->rows.n;
    if (limit > 0) n = limit < 1.0 ? (long)ceil((double)n * limit) : (long)limit < n ? (long)limit : n;
    if (num_fewshot > 0 && mmlu_fewshot(t, data_dir, pq, err, errlen) < 0) return -1;
    t->docs = xcalloc((size_t)n + 1, sizeof(EvalDoc));
    for (long i = 0; i < n; i++) {
        if (eval_doc_build(t, (int)i, &t->docs[i], err, errlen) < 0) return -1;
        t->ndocs = (int)i + 1;
    }
    t->acc = t->acc_stderr = t->acc_norm = t->acc_norm_stderr = NAN;
    t->perplexity = t->perplexity_stderr = t->word_perplexity = t->byte_perplexity = t->bits_per_byte = NAN;
    return 0;
}

void eval_task_free(EvalTask *t) {
    for (int i = 0; i < t->ndocs; i++) eval_doc_free(&t->docs[i]);
    free(t->docs);
    free(t->fewshot_block);
    eval_rows_free(&t->rows);
    memset(t, 0, sizeof *t);
}
