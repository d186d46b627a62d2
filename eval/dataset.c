// dataset.c: finding a task's split under --data-dir and reading its rows (spec eval.md §2.2 schemas).
// Accepted layouts mirror the HF hub: DIR/<repo>/<config>/<split>-*.parquet (the hub's Parquet layout),
// the same with .jsonl, <split>.jsonl / .json, and <config>/<split>/*.parquet (the refs/convert/parquet
// branch); single-config datasets also under data/ or directly in the repo folder. JSON files hold JSON
// Lines or one array of row objects. Parquet is read through a hook (eval.c) that renders each row as the
// JSON object a JSON Lines export of the same file would hold.
#include <glob.h>
#include <stdlib.h>
#include <string.h>

#include "eval/eval.h"
#include "util/common.h"

static int has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static int glob_into(const char *pat, char ***paths) {
    glob_t g;
    int found = 0;
    if (glob(pat, 0, NULL, &g) == 0 && g.gl_pathc > 0) { // glob sorts: shards come in order
        *paths = xcalloc(g.gl_pathc, sizeof(char *));
        for (size_t k = 0; k < g.gl_pathc; k++) (*paths)[k] = xstrdup(g.gl_pathv[k]);
        found = (int)g.gl_pathc;
    }
    globfree(&g);
    return found;
}

int eval_find_split(const char *dir, const char *repo, const char *config, const char *split,
                    const char *const *extra, char ***paths, char *looked, size_t looked_len) {
    static const char *const pats[] = {"%s-*.parquet", "%s-*.jsonl", "%s.jsonl", "%s.json", "%s/*.parquet",
                                       "%s/*.jsonl"};
    const int npats = (int)(sizeof pats / sizeof pats[0]);
    int single = !config || !strcmp(config, "default");
    const char *subdirs_cfg[] = {config, NULL};
    const char *subdirs_single[] = {"data", ".", "default", NULL};
    const char *const *subdirs = single ? subdirs_single : subdirs_cfg;
    Buf look = {0}; // compact: DIR/repo/sub/{pattern,...}; ...
    *paths = NULL;
    int found = 0;
    for (int d = 0; subdirs[d] && !found; d++) {
        char base[4096];
        if (!strcmp(subdirs[d], ".")) snprintf(base, sizeof base, "%s/%s", dir, repo);
        else snprintf(base, sizeof base, "%s/%s/%s", dir, repo, subdirs[d]);
        buf_printf(&look, "%s%s/{", look.n ? "; " : "", base);
        for (int p = 0; p < npats && !found; p++) {
            char name[512], pat[4700];
            snprintf(name, sizeof name, pats[p], split);
            snprintf(pat, sizeof pat, "%s/%s", base, name);
            buf_printf(&look, "%s%s", p ? "," : "", name);
            found = glob_into(pat, paths);
        }
        buf_puts(&look, "}");
    }
    for (int e = 0; extra && extra[e] && !found; e++) {
        char pat[4200];
        snprintf(pat, sizeof pat, "%s/%s/%s", dir, repo, extra[e]);
        buf_printf(&look, "; %s", pat);
        found = glob_into(pat, paths);
    }
    if (looked && looked_len) snprintf(looked, looked_len, "%s", eval_cstr(&look));
    buf_free(&look);
    return found;
}

static void rows_push(EvalRows *r, cJSON *row, int file, long line, int *cap) {
    if (r->n == *cap) {
        *cap = *cap ? *cap * 2 : 256;
        r->rows = xrealloc(r->rows, (size_t)*cap * sizeof *r->rows);
        r->row_file = xrealloc(r->row_file, (size_t)*cap * sizeof *r->row_file);
        r->row_line = xrealloc(r->row_line, (size_t)*cap * sizeof *r->row_line);
    }
    r->rows[r->n] = row;
    r->row_file[r->n] = file;
    r->row_line[r->n] = line;
    r->n++;
}

static int load_json_file(EvalRows *r, int fi, int *cap, char *err, size_t errlen) {
    const char *path = r->files[fi];
    size_t len;
    char *text = read_file(path, &len, err, errlen);
    if (!text) return -1;
    size_t s = 0;
    while (s < len && (text[s] == ' ' || text[s] == '\t' || text[s] == '\r' || text[s] == '\n')) s++;
    if (s + 3 <= len && !memcmp(text + s, "\xEF\xBB\xBF", 3)) s += 3; // UTF-8 BOM
    if (s < len && text[s] == '[') { // one JSON array of rows
        const char *end = NULL;
        cJSON *arr = cJSON_ParseWithLengthOpts(text + s, len - s, &end, 0);
        if (!arr) {
            long line = 1;
            const char *at = cJSON_GetErrorPtr();
            for (const char *p = text; at && p < at && p < text + len; p++) line += *p == '\n';
            set_err(err, errlen, "%s:%ld: invalid JSON (expected one array of row objects)", path, line);
            free(text);
            return -1;
        }
        long idx = 0;
        cJSON *row;
        while ((row = cJSON_DetachItemFromArray(arr, 0))) {
            idx++;
            if (!cJSON_IsObject(row)) {
                set_err(err, errlen, "%s: row %ld: expected a JSON object", path, idx);
                cJSON_Delete(row);
                cJSON_Delete(arr);
                free(text);
                return -1;
            }
            rows_push(r, row, fi, idx, cap);
        }
        cJSON_Delete(arr);
        free(text);
        return 0;
    }
    r->file_lines[fi] = 1;
    long line = 0;
    for (size_t p = 0; p < len;) {
        size_t e = p;
        while (e < len && text[e] != '\n') e++;
        line++;
        size_t a = p, b = e;
        if (line == 1 && b - a >= 3 && !memcmp(text + a, "\xEF\xBB\xBF", 3)) a += 3;
        while (a < b && (text[a] == ' ' || text[a] == '\t' || text[a] == '\r')) a++;
        while (b > a && (text[b - 1] == ' ' || text[b - 1] == '\t' || text[b - 1] == '\r')) b--;
        if (b > a) {
            const char *end = NULL;
            cJSON *row = cJSON_ParseWithLengthOpts(text + a, b - a, &end, 0);
            if (!row || end != text + b) {
                const char *at = row ? end : cJSON_GetErrorPtr();
                long col = at && at >= text + p && at <= text + e ? (long)(at - (text + p)) + 1 : 1;
                set_err(err, errlen, "%s:%ld: invalid JSON at column %ld (expected one JSON object per line)", path,
                        line, col);
                cJSON_Delete(row);
                free(text);
                return -1;
            }
            if (!cJSON_IsObject(row)) {
                set_err(err, errlen, "%s:%ld: expected a JSON object, got another JSON value", path, line);
                cJSON_Delete(row);
                free(text);
                return -1;
            }
            rows_push(r, row, fi, line, cap);
        }
        p = e + 1;
    }
    free(text);
    return 0;
}

int eval_rows_load(EvalRows *r, char **files, int nfiles, EvalParquetFn pq, const char *const *columns,
                   int ncolumns, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    r->files = xcalloc((size_t)nfiles + 1, sizeof(char *));
    r->file_lines = xcalloc((size_t)nfiles + 1, sizeof(int));
    int cap = 0;
    for (int f = 0; f < nfiles; f++) {
        r->files[f] = xstrdup(files[f]);
        r->nfiles = f + 1;
        if (has_suffix(files[f], ".parquet")) {
            if (!pq) {
                return set_err(err, errlen,
                               "%s: Parquet is not supported by this build; convert it to JSON Lines once, e.g. "
                               "python3 -c \"import pandas as pd; "
                               "pd.read_parquet('%s').to_json('%.*sjsonl', orient='records', lines=True)\"",
                               files[f], files[f], (int)(strlen(files[f]) - strlen("parquet")), files[f]);
            }
            // columns NULL: the task names no columns, so every column is read (lists and structs too).
            cJSON **got = NULL;
            int ngot = 0;
            if (pq(files[f], columns, ncolumns, &got, &ngot, err, errlen) < 0) return -1;
            for (int k = 0; k < ngot; k++) rows_push(r, got[k], f, k + 1, &cap);
            free(got);
        } else if (load_json_file(r, f, &cap, err, errlen) < 0) {
            return -1;
        }
    }
    return 0;
}

void eval_rows_free(EvalRows *r) {
    for (int i = 0; i < r->n; i++) cJSON_Delete(r->rows[i]);
    for (int f = 0; f < r->nfiles; f++) free(r->files[f]);
    free(r->files);
    free(r->file_lines);
    free(r->rows);
    free(r->row_file);
    free(r->row_line);
    memset(r, 0, sizeof *r);
}

const char *eval_row_where(const EvalRows *r, int i, char *buf, size_t n) {
    int f = r->row_file[i];
    if (r->file_lines[f]) snprintf(buf, n, "%s:%ld", r->files[f], r->row_line[i]);
    else snprintf(buf, n, "%s: row %ld", r->files[f], r->row_line[i]);
    return buf;
}

static const char *json_type(const cJSON *v) {
    if (!v) return "nothing";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsArray(v)) return "a list";
    if (cJSON_IsObject(v)) return "an object";
    return "an unknown JSON value";
}

const char *eval_row_str(const EvalRows *r, int i, const char *key, char *err, size_t errlen) {
    char where[4200];
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->rows[i], key);
    if (!v) {
        set_err(err, errlen, "%s: field '%s' is missing (expected a string)", eval_row_where(r, i, where, sizeof where),
                key);
        return NULL;
    }
    if (!cJSON_IsString(v)) {
        set_err(err, errlen, "%s: field '%s': expected a string, got %s", eval_row_where(r, i, where, sizeof where),
                key, json_type(v));
        return NULL;
    }
    return v->valuestring;
}

int eval_row_int(const EvalRows *r, int i, const char *key, long *out, char *err, size_t errlen) {
    char where[4200];
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->rows[i], key);
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (d == (double)(long)d) {
            *out = (long)d;
            return 0;
        }
    } else if (cJSON_IsString(v)) { // Python int(): optional surrounding whitespace and sign
        const char *s = v->valuestring;
        while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') s++;
        char *end;
        long x = strtol(s, &end, 10);
        const char *e = end;
        while (*e == ' ' || *e == '\t' || *e == '\n' || *e == '\r') e++;
        if (end != s && !*e) {
            *out = x;
            return 0;
        }
    }
    return set_err(err, errlen, "%s: field '%s': expected an integer (number or digit string), got %s%s%s%s",
                   eval_row_where(r, i, where, sizeof where), key, json_type(v), cJSON_IsString(v) ? " \"" : "",
                   cJSON_IsString(v) ? v->valuestring : "", cJSON_IsString(v) ? "\"" : "");
}

int eval_row_strlist(const EvalRows *r, int i, const cJSON *list, const char *what, const char ***out, char *err,
                     size_t errlen) {
    char where[4200];
    *out = NULL;
    if (!cJSON_IsArray(list))
        return set_err(err, errlen, "%s: field '%s': expected a list of strings, got %s",
                       eval_row_where(r, i, where, sizeof where), what, json_type(list));
    int n = cJSON_GetArraySize(list);
    const char **a = xcalloc((size_t)n + 1, sizeof *a);
    int k = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, list) {
        if (!cJSON_IsString(e)) {
            free(a);
            return set_err(err, errlen, "%s: field '%s': element %d: expected a string, got %s",
                           eval_row_where(r, i, where, sizeof where), what, k, json_type(e));
        }
        a[k++] = e->valuestring;
    }
    *out = a;
    return n;
}
