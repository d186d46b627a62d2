// args.h: the strict command-line parser of the subcommands. A command lists its options once (name, kind,
// range); args_parse checks the whole command line against the list before anything runs, and dies with one
// line naming the command and the flag for: an unknown option, a missing value, a value given to a flag, a
// number that does not parse completely or lies outside its range, a repeated option, a stray argument.
#pragma once

typedef enum {
    ARG_FLAG, // --name (no value)
    ARG_STR,  // --name VALUE or --name=VALUE
    ARG_INT,  // an integer in [lo, hi]
    ARG_NUM,  // a finite number in [lo, hi]
} ArgKind;

typedef struct {
    const char *name; // "--max-new-tokens"
    ArgKind kind;
    double lo, hi; // ARG_INT / ARG_NUM: the valid range
} ArgSpec;

#define ARGS_MAX 48
typedef struct {
    const char *cmd; // "generate": the prefix of every error
    const ArgSpec *spec;
    int nspec;
    const char *val[ARGS_MAX]; // per spec entry: the value (flags: "1"), NULL when absent
    const char *pos[8];        // positional arguments, in order
    int npos;
} Args;

// Parses argv[1..argc) against spec[0..nspec); at most max_pos positional arguments.
void args_parse(Args *a, const char *cmd, int argc, char **argv, const ArgSpec *spec, int nspec, int max_pos);
const char *args_str(const Args *a, const char *name, const char *def); // the value or def
long long args_int(const Args *a, const char *name, long long def);
double args_num(const Args *a, const char *name, double def);
int args_flag(const Args *a, const char *name); // 1 when given
int args_has(const Args *a, const char *name);  // any kind: given
// Checks one value of a numeric row (for commands that share argv with the config flags); returns it.
double args_number(const char *cmd, const ArgSpec *s, const char *v);
