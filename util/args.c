// args.c: see args.h.
#include "args.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static int find(const ArgSpec *spec, int nspec, const char *name, size_t len) {
    for (int i = 0; i < nspec; i++)
        if (strlen(spec[i].name) == len && !strncmp(spec[i].name, name, len)) return i;
    return -1;
}

// A number of kind k within [lo, hi]; dies naming the flag otherwise.
double args_number(const char *cmd, const ArgSpec *s, const char *v) {
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    int whole = s->kind != ARG_INT || (d == floor(d) && strspn(v, "+-0123456789") == strlen(v));
    if (!*v || end == v || *end || errno == ERANGE || !isfinite(d) || !whole) {
        if (s->kind == ARG_INT)
            die("%s: %s expects an integer in [%.0f, %.0f], got '%s'", cmd, s->name, s->lo, s->hi, v);
        die("%s: %s expects a number in [%g, %g], got '%s'", cmd, s->name, s->lo, s->hi, v);
    }
    if (d < s->lo || d > s->hi) {
        if (s->kind == ARG_INT) die("%s: %s must be in [%.0f, %.0f], got %s", cmd, s->name, s->lo, s->hi, v);
        die("%s: %s must be in [%g, %g], got %s", cmd, s->name, s->lo, s->hi, v);
    }
    return d;
}

void args_parse(Args *a, const char *cmd, int argc, char **argv, const ArgSpec *spec, int nspec, int max_pos) {
    if (nspec > ARGS_MAX) die("%s: %d options (args.h allows %d)", cmd, nspec, ARGS_MAX);
    memset(a, 0, sizeof *a);
    a->cmd = cmd, a->spec = spec, a->nspec = nspec;
    if (max_pos > (int)(sizeof a->pos / sizeof a->pos[0])) max_pos = (int)(sizeof a->pos / sizeof a->pos[0]);
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (s[0] != '-' || !s[1] || (s[1] != '-' && strspn(s + 1, "0123456789.") == strlen(s + 1))) { // "-" or "-3"
            if (a->npos >= max_pos)
                die("%s: unexpected argument '%s' (%s; see gdn %s --help)", cmd, s,
                    max_pos ? "too many positional arguments" : "options start with --", cmd);
            a->pos[a->npos++] = s;
            continue;
        }
        const char *eq = strchr(s, '=');
        size_t len = eq ? (size_t)(eq - s) : strlen(s);
        int k = find(spec, nspec, s, len);
        if (k < 0) die("%s: unknown option '%.*s' (see gdn %s --help)", cmd, (int)len, s, cmd);
        const ArgSpec *o = &spec[k];
        if (a->val[k]) die("%s: %s given twice", cmd, o->name);
        if (o->kind == ARG_FLAG) {
            if (eq) die("%s: %s takes no value (got '%s')", cmd, o->name, eq + 1);
            a->val[k] = "1";
            continue;
        }
        const char *v = eq ? eq + 1 : NULL;
        if (!v) {
            // "--top-k --greedy": the next word is another option, not a value (negative numbers are values)
            if (i + 1 >= argc || (argv[i + 1][0] == '-' && argv[i + 1][1] == '-' && o->kind != ARG_STR))
                die("%s: %s needs a value", cmd, o->name);
            v = argv[++i];
        }
        if (o->kind == ARG_INT || o->kind == ARG_NUM) args_number(cmd, o, v);
        a->val[k] = v;
    }
}

static int index_of(const Args *a, const char *name) {
    int k = find(a->spec, a->nspec, name, strlen(name));
    if (k < 0) die("%s: internal: option %s is not in the command's list", a->cmd, name);
    return k;
}
const char *args_str(const Args *a, const char *name, const char *def) {
    const char *v = a->val[index_of(a, name)];
    return v ? v : def;
}
long long args_int(const Args *a, const char *name, long long def) {
    const char *v = a->val[index_of(a, name)];
    return v ? (long long)strtod(v, NULL) : def; // checked whole and in range by args_parse
}
double args_num(const Args *a, const char *name, double def) {
    const char *v = a->val[index_of(a, name)];
    return v ? strtod(v, NULL) : def;
}
int args_flag(const Args *a, const char *name) { return a->val[index_of(a, name)] != NULL; }
int args_has(const Args *a, const char *name) { return a->val[index_of(a, name)] != NULL; }
