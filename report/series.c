// series.c: readers for the logs `gdn report` compares: ours (metrics JSONL), Megatron/Primus training logs,
// FLA / HF Trainer files (trainer_state.json, trainer_log.jsonl, stdout dicts). Field names: spec data.md §6.
#include "series.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "../util/common.h"

static Point *add(Series *s, long it) {
    if (s->n == s->cap) s->p = xrealloc(s->p, (s->cap = s->cap ? 2 * s->cap : 256) * sizeof(Point));
    Point *p = &s->p[s->n++];
    *p = (Point){it, NAN, NAN, NAN, NAN, NAN, NAN, NAN};
    return p;
}

typedef struct {
    Point p;
    size_t seq;
} Keyed;
static int cmp_it(const void *a, const void *b) {
    const Keyed *x = a, *y = b;
    if (x->p.it != y->p.it) return (x->p.it > y->p.it) - (x->p.it < y->p.it);
    return (x->seq > y->seq) - (x->seq < y->seq);
}
// Sorts by iteration (file order within one: later rows win) and merges the rows of one iteration field by field.
static void merge(Series *s) {
    Keyed *k = xmalloc((s->n ? s->n : 1) * sizeof(Keyed));
    for (size_t i = 0; i < s->n; i++) k[i] = (Keyed){s->p[i], i};
    qsort(k, s->n, sizeof(Keyed), cmp_it);
    size_t o = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (o && s->p[o - 1].it == k[i].p.it) {
            double *dst = &s->p[o - 1].loss, *src = &k[i].p.loss;
            for (int f = 0; f < 7; f++)
                if (!isnan(src[f])) dst[f] = src[f];
        } else s->p[o++] = k[i].p;
    }
    free(k);
    s->n = o;
    for (size_t i = 0; i < s->n; i++) // a log line's loss stands in where no per-iteration loss exists
        if (isnan(s->p[i].loss)) s->p[i].loss = s->p[i].loss_log;
}

// Megatron and HF log the rate after the scheduler step, i.e. the one step it+1 uses; ours is the rate the step
// used. One convention on the plots: theirs moves to it+1 (spec data.md §6.1).
static void next_step_lr(Series *s, long it, double lr) {
    if (!isnan(lr)) add(s, it + 1)->lr = lr; // moves s->p: callers use no Point pointer after this
}

static double num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItem(o, key);
    if (cJSON_IsNumber(v)) return v->valuedouble;
    if (cJSON_IsString(v)) { // newer transformers log '%.4g' strings
        char *end;
        double d = strtod(v->valuestring, &end);
        if (end != v->valuestring) return d;
    }
    return NAN;
}

// One JSON object of ours, of FLA's trainer_log.jsonl or of HF's log_history. Returns 1 if it was used.
static int take_row(Series *s, const cJSON *r, double div) {
    double it = num(r, "iteration");
    if (!isnan(it)) { // ours
        if (cJSON_GetObjectItem(r, "summary")) {
            s->wall_s = num(r, "wall_s");
            const cJSON *v = cJSON_GetObjectItem(r, "gdn_version");
            if (cJSON_IsString(v)) snprintf(s->version, sizeof s->version, "%s", v->valuestring);
            return 1;
        }
        Point *p = add(s, (long)it);
        p->loss = num(r, "lm_loss"); p->lr = num(r, "lr"); p->gnorm = num(r, "grad_norm");
        p->ms = num(r, "ms_per_iter"); p->tok_s_gpu = num(r, "tokens_per_s"); p->loss_log = num(r, "lm_loss_avg");
        p->valid = num(r, "valid_loss");
        double el = num(r, "elapsed_s");
        if (!isnan(el)) s->wall_s = el;
        return 1;
    }
    double step = num(r, "step");
    if (isnan(step)) step = num(r, "current_steps"); // FLA's trainer_log.jsonl
    if (isnan(step)) return 0;
    double rt = num(r, "train_runtime");
    if (!isnan(rt)) { s->wall_s = rt; return 1; }
    Point *p = add(s, (long)step);
    p->loss_log = num(r, "loss") / div; p->gnorm = num(r, "grad_norm") / div;
    p->tok_s_gpu = num(r, "throughput"); p->valid = num(r, "eval_loss") / div;
    next_step_lr(s, (long)step, num(r, "learning_rate"));
    return 1;
}

static int load_json(Series *s, const char *path, const char *text, double div, char *err, size_t errlen) {
    cJSON *j = cJSON_Parse(text);
    const cJSON *h = j ? cJSON_GetObjectItem(j, "log_history") : NULL;
    if (!cJSON_IsArray(h)) {
        cJSON_Delete(j);
        return set_err(err, errlen, "%s: not an HF trainer_state.json (no \"log_history\" array)", path);
    }
    snprintf(s->kind, sizeof s->kind, "hf trainer_state");
    s->loss_div = div;
    const cJSON *r;
    cJSON_ArrayForEach(r, h) take_row(s, r, div);
    cJSON_Delete(j);
    return 0;
}

// "'key': value" inside a Python dict's str(); values may be quoted.
static double dict_num(const char *line, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "'%s':", key);
    const char *p = strstr(line, pat);
    if (!p) return NAN;
    p += strlen(pat);
    while (*p == ' ' || *p == '\'') p++;
    char *end;
    double d = strtod(p, &end);
    return end == p ? NAN : d;
}
static double after(const char *line, const char *key) {
    const char *p = strstr(line, key);
    if (!p) return NAN;
    p += strlen(key);
    char *end;
    double d = strtod(p, &end);
    return end == p ? NAN : d;
}
// " [2026-03-06 14:21:48.123456] ..." -> seconds (local time; only differences are used)
static double stamp(const char *line) {
    const char *p = strchr(line, '[');
    int Y, M, D, h, m;
    double sec;
    if (!p || sscanf(p + 1, "%d-%d-%d %d:%d:%lf", &Y, &M, &D, &h, &m, &sec) != 6) return NAN;
    struct tm tm = {.tm_year = Y - 1900, .tm_mon = M - 1, .tm_mday = D, .tm_hour = h, .tm_min = m, .tm_isdst = -1};
    return (double)mktime(&tm) + sec;
}

static int load_text(Series *s, const char *path, char *text, const LoadOpts *o, char *err, size_t errlen) {
    long nline = 0, n_meg = 0, n_hf = 0;
    double t_first = NAN, t_last = NAN, ms_first = NAN;
    for (char *line = text, *nl; line && *line; line = nl) {
        nl = strchr(line, '\n');
        if (nl) *nl++ = 0;
        nline++;
        const char *v = strstr(line, "gdn train (gdn ");
        if (v) sscanf(v + 15, "%95[^)]", s->version);
        const char *ip = strstr(line, "iteration ");
        if (ip && strstr(line, "lm loss:")) { // Megatron / Primus / ours
            char *end;
            long it = strtol(ip + 10, &end, 10);
            while (*end == ' ') end++;
            if (end == ip + 10 || *end != '/') return set_err(err, errlen, "%s:%ld: a training log line without 'iteration N/M'", path, nline);
            Point *p = add(s, it);
            p->loss_log = after(line, "lm loss:");
            int ours = strstr(line, "| ETA: ") != NULL; // ours print the rate the step used
            if (ours) p->lr = after(line, "learning rate:");
            p->gnorm = after(line, "grad norm:");
            p->ms = after(line, "elapsed time per iteration (ms):");
            p->tok_s_gpu = after(line, "(tokens/s/GPU):");
            if (isnan(p->tok_s_gpu)) p->tok_s_gpu = after(line, "tokens/s/GPU inst/harmonic mean:"); // Primus
            if (isnan(p->tok_s_gpu)) p->tok_s_gpu = after(line, "(tokens/s/rank):");
            if (isnan(p->tok_s_gpu)) p->tok_s_gpu = after(line, "tokens per second:");
            if (isnan(p->loss_log)) return set_err(err, errlen, "%s:%ld: 'lm loss:' is not followed by a number", path, nline);
            double t = stamp(line);
            if (!isnan(t)) {
                if (isnan(t_first)) t_first = t, ms_first = p->ms;
                t_last = t;
            }
            if (!ours) next_step_lr(s, it, after(line, "learning rate:")); // last: add() may move p
            n_meg++;
            continue;
        }
        const char *vp = strstr(line, " validation loss at iteration ");
        if (vp && !strstr(line, "on test set")) {
            Point *p = add(s, strtol(vp + 30, NULL, 10));
            p->valid = after(line, "lm loss value:");
            if (isnan(p->valid)) return set_err(err, errlen, "%s:%ld: validation line without 'lm loss value:'", path, nline);
            continue;
        }
        const char *d = strchr(line, '{');
        if (d && d[1] == '\'') { // HF Trainer stdout: str() of a dict; no step in it
            double loss = dict_num(d, "loss"), ev = dict_num(d, "eval_loss"), rt = dict_num(d, "train_runtime");
            if (!isnan(rt)) { s->wall_s = rt; continue; }
            if (isnan(loss) && isnan(ev)) continue;
            if (!isnan(loss)) n_hf++;
            Point *p = add(s, n_hf * o->hf_logging_steps);
            p->loss_log = loss / o->hf_loss_div; p->valid = ev / o->hf_loss_div;
            p->gnorm = dict_num(d, "grad_norm") / o->hf_loss_div;
            p->tok_s_gpu = dict_num(d, "throughput");
            next_step_lr(s, n_hf * o->hf_logging_steps, dict_num(d, "learning_rate"));
        }
    }
    if (!s->n) return set_err(err, errlen, "%s: no training log lines found (Megatron 'iteration N/M | ... lm loss:' or HF dicts)", path);
    snprintf(s->kind, sizeof s->kind, "%s", n_meg ? "megatron-style log" : "hf trainer stdout");
    if (!n_meg) s->loss_div = o->hf_loss_div;
    if (!isnan(t_first) && isnan(s->wall_s)) s->wall_s = t_last - t_first + (isnan(ms_first) ? 0 : ms_first / 1e3);
    return 0;
}

int series_load(Series *s, const char *path, const LoadOpts *o, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    // label: the path, less a trailing slash or our default file name in a save dir
    snprintf(s->name, sizeof s->name, "%s", path);
    size_t nl = strlen(s->name);
    while (nl > 1 && s->name[nl - 1] == '/') s->name[--nl] = 0;
    if (nl > 14 && !strcmp(s->name + nl - 14, "/metrics.jsonl")) s->name[nl - 14] = 0;
    s->wall_s = NAN;
    s->loss_div = 1;
    struct stat sb;
    if (stat(path, &sb)) return set_err(err, errlen, "%s: no such file or directory", path);
    char file[1200];
    snprintf(file, sizeof file, "%s", path);
    if (S_ISDIR(sb.st_mode)) { // a save dir: ours first, then FLA's output_dir files
        static const char *names[] = {"metrics.jsonl", "trainer_state.json", "trainer_log.jsonl"};
        int found = 0;
        for (int i = 0; i < 3 && !found; i++) {
            snprintf(file, sizeof file, "%s/%s", path, names[i]);
            found = file_exists(file);
        }
        if (!found) return set_err(err, errlen, "%s: a directory without metrics.jsonl, trainer_state.json or trainer_log.jsonl", path);
    }
    size_t len;
    char *text = read_file(file, &len, err, errlen);
    if (!text) return -1;
    int rc = 0;
    size_t fl = strlen(file);
    const char *p = text;
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') p++;
    if (fl > 5 && !strcmp(file + fl - 5, ".json")) rc = load_json(s, file, text, o->hf_loss_div, err, errlen);
    else if (*p == '{' && p[1] == '"') { // JSON lines
        long nline = 0;
        int fla = 0;
        for (char *line = text, *nl; line && *line; line = nl) {
            nl = strchr(line, '\n');
            if (nl) *nl++ = 0;
            nline++;
            if (!line[strspn(line, " \t\r")]) continue;
            cJSON *r = cJSON_Parse(line);
            if (!r) { // a last line cut short by a crash is expected; anything else is an error
                if (!nl || !*nl) break;
                rc = set_err(err, errlen, "%s:%ld: not a JSON object", file, nline);
                break;
            }
            fla |= cJSON_GetObjectItem(r, "current_steps") != NULL;
            take_row(s, r, o->hf_loss_div);
            cJSON_Delete(r);
        }
        snprintf(s->kind, sizeof s->kind, "%s", fla ? "fla trainer_log.jsonl" : "gdn metrics");
        if (fla) s->loss_div = o->hf_loss_div;
    } else rc = load_text(s, file, text, o, err, errlen);
    free(text);
    if (rc) return rc;
    merge(s);
    if (!s->n) return set_err(err, errlen, "%s: no metrics rows", file);
    return 0;
}

void series_free(Series *s) {
    free(s->p);
    s->p = NULL;
    s->n = s->cap = 0;
}

static double field_of(const Point *p, size_t field) { return *(const double *)((const char *)p + field); }

double series_at(const Series *s, size_t field, long it, int *exact) {
    *exact = 0;
    size_t a = 0, b = s->n; // first point with p.it >= it (points are sorted and unique)
    while (a < b) {
        size_t m = (a + b) / 2;
        if (s->p[m].it < it) a = m + 1;
        else b = m;
    }
    const Point *hi = NULL, *lo = NULL;
    for (size_t i = a; i < s->n && !hi; i++)
        if (!isnan(field_of(&s->p[i], field))) hi = &s->p[i];
    if (hi && hi->it == it) { *exact = 1; return field_of(hi, field); }
    for (size_t i = a; i-- > 0 && !lo;)
        if (!isnan(field_of(&s->p[i], field))) lo = &s->p[i];
    if (!lo || !hi) return NAN;
    double x = field_of(lo, field), y = field_of(hi, field);
    return x + (y - x) * (double)(it - lo->it) / (double)(hi->it - lo->it);
}
