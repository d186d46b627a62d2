// config.c: the key table of config.h applied to YAML files, flags and JSON.
#include "config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "../util/common.h"

typedef struct {
    const char *name;
    int type;
    size_t off, size;
    const char *def, *help;
} KeyInfo;

static const KeyInfo keys[] = {
#define X(name, type, field, def, help) {#name, type, offsetof(Config, field), sizeof(((Config *)0)->field), def, help},
    CONFIG_KEYS(X)
#undef X
};
enum { NKEYS = sizeof keys / sizeof keys[0] };

// FLA / HF names accepted for the same settings. num_hidden_layers counts GDN blocks, hence the factor.
static const struct { const char *alias, *key; int factor; } aliases[] = {
    {"num_hidden_layers", "num_layers", 2},      {"intermediate_size", "ffn_hidden_size", 1},
    {"num_heads", "linear_num_key_heads", 1},     {"num_v_heads", "linear_num_value_heads", 1},
    {"head_dim", "linear_key_head_dim", 1},       {"conv_size", "linear_conv_kernel_dim", 1},
    {"norm_eps", "norm_epsilon", 1},              {"layernorm_epsilon", "norm_epsilon", 1},
    {"initializer_range", "init_method_std", 1},  {"train_steps", "train_iters", 1},
};

// Valid range of every numeric key (reliability): checked wherever a value is set (YAML, flag, JSON), so the
// error names the file and line or the flag. open_lo: the lower bound itself is excluded. A numeric key without
// a row here is an error at startup (tests/test_config.c), so a new key gets its range when it is added.
static const struct { const char *key; double lo, hi; int open_lo; } ranges[] = {
    {"hidden_size", 1, 1 << 20, 0},           {"num_layers", 2, 1 << 16, 0},
    {"ffn_hidden_size", 1, 1 << 22, 0},       {"linear_num_key_heads", 1, 4096, 0},
    {"linear_num_value_heads", 1, 4096, 0},   {"linear_key_head_dim", 1, 4096, 0},
    {"linear_value_head_dim", 1, 4096, 0},    {"linear_conv_kernel_dim", 1, 64, 0},
    {"vocab_size", 1, 1 << 26, 0},            {"norm_epsilon", 0, 1, 1},
    {"init_method_std", 0, 10, 0},            {"train_iters", 1, 2000000000, 0},
    {"micro_batch_size", 1, 1 << 20, 0},      {"global_batch_size", 1, 1 << 30, 0},
    {"seq_length", 1, 1 << 24, 0},            {"lr", 0, 1000, 0},
    {"min_lr", 0, 1000, 0},                   {"lr_warmup_iters", 0, 2000000000, 0},
    {"lr_decay_iters", 0, 2000000000, 0},     {"weight_decay", 0, 1000, 0},
    {"adam_beta1", 0, 0.999999, 0},           {"adam_beta2", 0, 0.999999999, 0},
    {"adam_eps", 0, 1, 1},                    {"clip_grad", 0, 1e9, 0},
    {"seed", 0, 2000000000, 0},               {"log_interval", 1, 2000000000, 0},
    {"save_interval", 0, 2000000000, 0},      {"exit_interval", 0, 2000000000, 0},
    {"eos_token_id", 0, (1 << 26) - 1, 0},    {"nproc_per_node", 1, 1024, 0},
    // distributed (issue 19)
    {"distributed_timeout_minutes", 0, 1e6, 1}, {"ddp_bucket_size", 0, 2000000000, 0},
    // blends, validation, stops (issue 18)
    {"mid_level_dataset_surplus", 0, 10, 0},  {"eval_interval", 0, 2000000000, 0},
    {"eval_iters", 0, 2000000000, 0},         {"exit_duration_in_mins", 0, 1e9, 0},
    // hybrid attention (issue 21): 0 heads / kv heads / window = unset, full causal
    {"attn_num_heads", 0, 4096, 0},           {"attn_num_kv_heads", 0, 4096, 0},
    {"attn_window_size", 0, 1 << 24, 0},      {"attn_rope_theta", 0, 1e12, 1},
};

int config_key_range(const char *key, double *lo, double *hi, int *open_lo) {
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++)
        if (!strcmp(ranges[i].key, key)) {
            *lo = ranges[i].lo, *hi = ranges[i].hi, *open_lo = ranges[i].open_lo;
            return 0;
        }
    return -1;
}

int config_nkeys(void) { return NKEYS; }
const char *config_key_name(int i, int *type) {
    if (i < 0 || i >= NKEYS) return NULL;
    if (type) *type = keys[i].type;
    return keys[i].name;
}

static int check_range(const KeyInfo *k, double d, const char *v, char *err, size_t errlen) {
    double lo, hi;
    int open_lo;
    if (config_key_range(k->name, &lo, &hi, &open_lo))
        return set_err(err, errlen, "key '%s' has no valid range in model/config.c (add one)", k->name);
    if (d < lo || d > hi || (open_lo && d == lo))
        return set_err(err, errlen, "key '%s': %s is out of range, expected %s%.10g, %.10g]", k->name, v, open_lo ? "(" : "[",
                       lo, hi);
    return 0;
}

static const KeyInfo *find_key(const char *name) {
    for (int i = 0; i < NKEYS; i++)
        if (!strcmp(keys[i].name, name)) return &keys[i];
    return NULL;
}

static int parse_bool(const char *v, int *out) {
    if (!strcasecmp(v, "true") || !strcmp(v, "1") || !strcasecmp(v, "yes") || !strcasecmp(v, "on")) return *out = 1, 0;
    if (!strcasecmp(v, "false") || !strcmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "off")) return *out = 0, 0;
    return -1;
}

static int set_key(Config *c, const KeyInfo *k, const char *v, int factor, char *err, size_t errlen) {
    char *base = (char *)c + k->off, *end;
    switch (k->type) {
    case CK_INT: {
        errno = 0;
        double d = strtod(v, &end); // accepts 1e3 style integers too
        if (errno || end == v || *end || d != floor(d)) // the range check below keeps it inside an int
            return set_err(err, errlen, "key '%s': expected an integer, got '%s'", k->name, v);
        if (check_range(k, d * factor, v, err, errlen)) return -1;
        *(int *)base = (int)d * factor;
        return 0;
    }
    case CK_FLOAT: {
        errno = 0;
        double d = strtod(v, &end);
        if (errno || end == v || *end || !isfinite(d))
            return set_err(err, errlen, "key '%s': expected a number, got '%s'", k->name, v);
        if (!isfinite((float)d))
            return set_err(err, errlen, "key '%s': %s overflows a float (largest 3.4e38)", k->name, v);
        if (check_range(k, d, v, err, errlen)) return -1;
        *(float *)base = (float)d;
        return 0;
    }
    case CK_BOOL:
        if (parse_bool(v, (int *)base)) return set_err(err, errlen, "key '%s': expected true or false, got '%s'", k->name, v);
        return 0;
    case CK_STR:
        if (strlen(v) >= k->size) return set_err(err, errlen, "key '%s': value too long (max %zu)", k->name, k->size - 1);
        strcpy(base, v);
        return 0;
    }
    return -1;
}

int config_set(Config *c, const char *key, const char *value, char *err, size_t errlen) {
    if (!strcmp(key, "attn")) { // FLA's `attn: null`: pure GDN; a spec is a mapping of attn_* keys
        if (*value) return set_err(err, errlen, "key 'attn': expected null or a mapping (layers, num_heads, ...)");
        c->attn_layers[0] = 0;
        return 0;
    }
    const KeyInfo *k = find_key(key);
    int factor = 1;
    if (!k) {
        for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
            if (!strcmp(aliases[i].alias, key)) { k = find_key(aliases[i].key); factor = aliases[i].factor; }
    }
    if (!k) return set_err(err, errlen, "unknown key '%s' (gdn train --help lists the keys)", key);
    // FLA's null for these two means "none" / "= num_heads", which the keys spell 0
    if (!*value && (!strcmp(k->name, "attn_window_size") || !strcmp(k->name, "attn_num_kv_heads"))) value = "0";
    return set_key(c, k, value, factor, err, errlen);
}

void config_defaults(Config *c) {
    memset(c, 0, sizeof *c);
    for (int i = 0; i < NKEYS; i++) {
        char err[ERR_LEN];
        if (set_key(c, &keys[i], keys[i].def, 1, err, sizeof err)) die("bad default: %s", err);
    }
}

// Flattens nested mappings ("model: {hidden_size: 1024}" -> hidden_size) since Primus YAMLs group keys.
// The one exception is FLA's `attn:` mapping, whose keys get an attn_ prefix (its num_heads is not the GDN
// num_heads), and whose `layers` list is the one list accepted (joined with commas into attn_layers).
int config_load_yaml(Config *c, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) return set_err(err, errlen, "cannot open config %s: %s", path, strerror(errno));
    yaml_parser_t p;
    yaml_parser_initialize(&p);
    yaml_parser_set_input_file(&p, f);
    char key[128] = "";
    int have_key = 0, depth = 0, rc = 0, done = 0, attn_depth = 0, in_list = 0;
    char list[4096];
    while (!done) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            rc = set_err(err, errlen, "%s:%zu: YAML error: %s", path, p.problem_mark.line + 1,
                         p.problem ? p.problem : "parse error");
            break;
        }
        switch (ev.type) {
        case YAML_STREAM_END_EVENT: done = 1; break;
        case YAML_MAPPING_START_EVENT:
            depth++;
            if (have_key && !strcmp(key, "attn") && !attn_depth) attn_depth = depth;
            have_key = 0;
            break;
        case YAML_MAPPING_END_EVENT:
            if (depth == attn_depth) attn_depth = 0;
            depth--; have_key = 0;
            break;
        case YAML_SEQUENCE_START_EVENT:
            // data path lists (Megatron's nargs='*' keys) are joined with spaces, FLA's attn layers with commas;
            // no other key takes a list
            if (!have_key || (!strstr(key, "data_path") && strcmp(key, "attn_layers")) || in_list) {
                rc = set_err(err, errlen, "%s:%zu: key '%s': lists are not supported%s", path, ev.start_mark.line + 1,
                             key, !strcmp(key, "attn") ? " (FLA's list of attention specs: give one spec)" : "");
                done = 1;
            } else {
                in_list = 1;
                list[0] = 0;
            }
            break;
        case YAML_SEQUENCE_END_EVENT: {
            char e2[ERR_LEN];
            if (config_set(c, key, list, e2, sizeof e2)) {
                rc = set_err(err, errlen, "%s:%zu: %s", path, ev.start_mark.line + 1, e2);
                done = 1;
            }
            in_list = 0;
            have_key = 0;
            break;
        }
        case YAML_SCALAR_EVENT:
            if (in_list) {
                size_t n = strlen(list), add = strlen((const char *)ev.data.scalar.value);
                if (n + add + 2 > sizeof list) {
                    rc = set_err(err, errlen, "%s:%zu: key '%s': list too long", path, ev.start_mark.line + 1, key);
                    done = 1;
                } else {
                    snprintf(list + n, sizeof list - n, "%s%s", n ? (strcmp(key, "attn_layers") ? " " : ",") : "",
                             (const char *)ev.data.scalar.value);
                }
            } else if (!have_key) {
                snprintf(key, sizeof key, "%s%s", attn_depth ? "attn_" : "", (const char *)ev.data.scalar.value);
                have_key = 1;
            } else {
                char e2[ERR_LEN];
                const char *v = (const char *)ev.data.scalar.value;
                if (!strcmp(v, "null") || !strcmp(v, "~")) v = "";
                if (config_set(c, key, v, e2, sizeof e2)) {
                    rc = set_err(err, errlen, "%s:%zu: %s", path, ev.start_mark.line + 1, e2);
                    done = 1;
                }
                have_key = 0;
            }
            break;
        default: break;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    fclose(f);
    return rc;
}

int config_apply_flags(Config *c, int *argc, char **argv, char *err, size_t errlen) {
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0) { argv[out++] = argv[i]; continue; }
        char name[128];
        const char *eq = strchr(a + 2, '=');
        size_t n = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (n >= sizeof name) { argv[out++] = argv[i]; continue; }
        memcpy(name, a + 2, n);
        name[n] = 0;
        for (char *s = name; *s; s++) if (*s == '-') *s = '_';
        int known = find_key(name) != NULL;
        for (size_t j = 0; j < sizeof aliases / sizeof aliases[0]; j++) known |= !strcmp(aliases[j].alias, name);
        if (!known) { argv[out++] = argv[i]; continue; }
        const KeyInfo *k = find_key(name);
        const char *v;
        if (eq) v = eq + 1;
        else if (k && k->type == CK_BOOL && (i + 1 >= *argc || strncmp(argv[i + 1], "--", 2) == 0)) v = "true";
        else if (i + 1 < *argc) v = argv[++i];
        else return set_err(err, errlen, "flag --%s needs a value", name);
        if (config_set(c, name, v, err, errlen)) return -1;
    }
    argv[out] = NULL;
    *argc = out;
    return 0;
}

// attn_layers "3,7,11" -> is_attn flags; -1 with err set on a malformed list.
static int parse_attn_layers(const Config *c, int L, unsigned char *is_attn, char *err, size_t errlen) {
    memset(is_attn, 0, GDN_MAX_BLOCKS);
    int n = 0;
    const char *s = c->attn_layers;
    while (*s) {
        char *end;
        while (*s == ' ' || *s == '[') s++;
        if (!*s || *s == ']') break;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno)
            return set_err(err, errlen, "key 'attn_layers': expected comma-separated block indices, got '%s'", c->attn_layers);
        if (v < 0 || v >= L || v >= GDN_MAX_BLOCKS)
            return set_err(err, errlen, "key 'attn_layers': block %ld is outside [0, %d) (num_layers %d = %d GDN blocks)",
                           v, L, 2 * L, L);
        if (is_attn[v]) return set_err(err, errlen, "key 'attn_layers': block %ld is listed twice", v);
        is_attn[v] = 1;
        n++;
        s = end;
        while (*s == ' ' || *s == ']') s++;
        if (*s == ',') s++;
        else if (*s) return set_err(err, errlen, "key 'attn_layers': expected ',' after %ld in '%s'", v, c->attn_layers);
    }
    return n;
}

const char *layer_kind_name(int kind) {
    static const char *names[] = {
#define X(e, name) [e] = #name,
        LAYER_KINDS(X)
#undef X
    };
    return kind >= 0 && kind < LAYER_NKINDS ? names[kind] : "?";
}

ModelDims config_dims(const Config *c) {
    ModelDims d;
    memset(&d, 0, sizeof d); // compared with memcmp (train.c: checkpoint shape check)
    d.h = c->hidden_size;
    d.L = c->num_layers / 2;
    d.H = c->num_heads;
    d.HV = c->num_v_heads;
    d.dk = c->head_dim;
    d.dv = c->v_head_dim;
    d.Kd = d.H * d.dk;
    d.Vd = d.HV * d.dv;
    d.F = c->ffn_hidden_size;
    d.K = c->conv_size;
    d.V = c->vocab_size;
    d.eps = c->norm_eps;
    d.init_std = c->init_std;
    for (int l = 0; l < d.L && l < GDN_MAX_BLOCKS; l++) d.kind[l] = LAYER_GDN; // the one place a block's kind is chosen (attn_layers below)
    char err[ERR_LEN];
    unsigned char is_attn[GDN_MAX_BLOCKS];
    int n = parse_attn_layers(c, d.L, is_attn, err, sizeof err);
    if (n > 0 && c->attn_num_heads > 0) { // config_validate reports the other cases
        for (int l = 0; l < d.L && l < GDN_MAX_BLOCKS; l++)
            if (is_attn[l]) d.kind[l] = LAYER_ATTN;
        d.n_attn = n;
        d.Ha = c->attn_num_heads;
        d.Hkv = c->attn_num_kv_heads > 0 ? c->attn_num_kv_heads : d.Ha;
        d.da = d.h / d.Ha;
        d.Dq = d.Ha * d.da;
        d.Dkv = d.Hkv * d.da;
        d.qkv_bias = c->attn_qkv_bias;
        d.window = c->attn_window_size;
        d.rope_theta = c->attn_rope_theta;
    }
    return d;
}

int config_validate(const Config *c, char *err, size_t errlen) {
#define POS(f, name) if (c->f <= 0) return set_err(err, errlen, "key '%s' must be positive (got %d)", name, c->f)
    POS(hidden_size, "hidden_size"); POS(num_layers, "num_layers"); POS(ffn_hidden_size, "ffn_hidden_size");
    POS(num_heads, "linear_num_key_heads"); POS(num_v_heads, "linear_num_value_heads");
    POS(head_dim, "linear_key_head_dim"); POS(v_head_dim, "linear_value_head_dim");
    POS(conv_size, "linear_conv_kernel_dim"); POS(vocab_size, "vocab_size"); POS(train_iters, "train_iters");
    POS(micro_batch_size, "micro_batch_size"); POS(global_batch_size, "global_batch_size");
    POS(seq_length, "seq_length"); POS(log_interval, "log_interval");
#undef POS
    if (c->num_layers % 2)
        return set_err(err, errlen, "num_layers must be even (GDN and MLP sublayers alternate), got %d", c->num_layers);
    if (c->num_layers / 2 > GDN_MAX_BLOCKS)
        return set_err(err, errlen, "num_layers %d: at most %d blocks (%d sublayers)", c->num_layers, GDN_MAX_BLOCKS,
                       2 * GDN_MAX_BLOCKS);
    if (c->num_v_heads % c->num_heads)
        return set_err(err, errlen, "linear_num_value_heads (%d) must be a multiple of linear_num_key_heads (%d)",
                       c->num_v_heads, c->num_heads);
    // hybrid attention (spec hybrid.md §1.1; Ha % Hkv is checked here, FLA leaves it to flash-attn)
    unsigned char is_attn[GDN_MAX_BLOCKS];
    char e2[ERR_LEN];
    int na = parse_attn_layers(c, c->num_layers / 2, is_attn, e2, sizeof e2);
    if (na < 0) return set_err(err, errlen, "%s", e2);
    if (na > 0) {
        int Ha = c->attn_num_heads, Hkv = c->attn_num_kv_heads ? c->attn_num_kv_heads : Ha;
        if (Ha <= 0) return set_err(err, errlen, "attn_layers is set: key 'attn_num_heads' must be positive (got %d)", Ha);
        if (c->attn_num_kv_heads < 0 || Ha % Hkv)
            return set_err(err, errlen, "attn_num_kv_heads (%d) must be positive and divide attn_num_heads (%d)", Hkv, Ha);
        if (c->hidden_size % Ha || (c->hidden_size / Ha) % 2)
            return set_err(err, errlen, "hidden_size (%d) / attn_num_heads (%d) must be an even integer (the RoPE head dim)",
                           c->hidden_size, Ha);
        if (c->attn_window_size < 0)
            return set_err(err, errlen, "attn_window_size must be >= 0 (0: full causal), got %d", c->attn_window_size);
        if (!(c->attn_rope_theta > 0)) return set_err(err, errlen, "attn_rope_theta must be positive");
    }
    if (c->nproc_per_node < 1) return set_err(err, errlen, "nproc_per_node must be >= 1 (got %d)", c->nproc_per_node);
    if (!(c->distributed_timeout_minutes > 0))
        return set_err(err, errlen, "distributed_timeout_minutes must be > 0 (got %g)", c->distributed_timeout_minutes);
    if (c->ddp_bucket_size < 0) return set_err(err, errlen, "ddp_bucket_size must be >= 0 (got %d)", c->ddp_bucket_size);
    if (c->overlap_param_gather && !c->use_distributed_optimizer)
        return set_err(err, errlen, "overlap_param_gather needs use_distributed_optimizer (only ZeRO-1 all-gathers the weights)");
    // Megatron's precision-aware optimizer keys (its choices: fp32/fp16/bf16/fp8 moments, fp32/bf16 grads, fp32/fp16
    // masters); gdn.c keeps fp32 or bf16 moments, fp32 gradients and fp32 masters (whole or as remainders)
    const char *mom[2] = {c->exp_avg_dtype, c->exp_avg_sq_dtype}, *mom_key[2] = {"exp_avg_dtype", "exp_avg_sq_dtype"};
    for (int i = 0; i < 2; i++) {
        if (strcmp(mom[i], "fp32") && strcmp(mom[i], "bf16"))
            return set_err(err, errlen, "%s must be fp32 or bf16 (got '%s'; Megatron's fp16 and fp8 moments are not supported)",
                           mom_key[i], mom[i]);
        if (strcmp(mom[i], "fp32") && !c->use_precision_aware_optimizer)
            return set_err(err, errlen, "%s %s needs use_precision_aware_optimizer true (as in Megatron)", mom_key[i], mom[i]);
    }
    if (strcmp(c->main_grads_dtype, "fp32"))
        return set_err(err, errlen, "main_grads_dtype must be fp32 (got '%s'; bf16 gradient accumulation is not supported)",
                       c->main_grads_dtype);
    if (strcmp(c->main_params_dtype, "fp32"))
        return set_err(err, errlen, "main_params_dtype must be fp32 (got '%s'; fp16 masters are not supported)",
                       c->main_params_dtype);
    if (c->global_batch_size % ((long)c->micro_batch_size * c->nproc_per_node))
        return set_err(err, errlen, "global_batch_size (%d) must be a multiple of micro_batch_size (%d) x nproc_per_node (%d)",
                       c->global_batch_size, c->micro_batch_size, c->nproc_per_node);
    if (strcmp(c->lr_decay_style, "cosine") && strcmp(c->lr_decay_style, "linear") && strcmp(c->lr_decay_style, "constant"))
        return set_err(err, errlen, "lr_decay_style must be cosine, linear or constant (got '%s')", c->lr_decay_style);
    if (strcmp(c->data_order, "megatron") && strcmp(c->data_order, "fla"))
        return set_err(err, errlen, "data_order must be megatron or fla (got '%s')", c->data_order);
    if (strcmp(c->delta_rule, "chunk") && strcmp(c->delta_rule, "recurrent"))
        return set_err(err, errlen, "delta_rule must be chunk or recurrent (got '%s')", c->delta_rule);
    if (strcmp(c->precision, "bf16") && strcmp(c->precision, "fp32"))
        return set_err(err, errlen, "precision must be bf16 or fp32 (got '%s')", c->precision);
    if (c->lr < 0 || c->min_lr < 0 || c->min_lr > c->lr)
        return set_err(err, errlen, "need 0 <= min_lr <= lr (got lr %g, min_lr %g)", c->lr, c->min_lr);
    if (c->adam_beta1 < 0 || c->adam_beta1 >= 1 || c->adam_beta2 < 0 || c->adam_beta2 >= 1)
        return set_err(err, errlen, "adam betas must be in [0, 1)");
    if (!(c->norm_eps > 0)) return set_err(err, errlen, "norm_epsilon must be positive");
    if (c->eval_interval < 0 || c->eval_iters < 0) return set_err(err, errlen, "eval_interval and eval_iters must be >= 0");
    if (c->exit_duration_in_mins < 0) return set_err(err, errlen, "exit_duration_in_mins must be >= 0");
    if (!(c->mid_level_dataset_surplus >= 0)) return set_err(err, errlen, "mid_level_dataset_surplus must be >= 0");
    return 0;
}

char *config_to_json(const Config *c) {
    cJSON *o = cJSON_CreateObject();
    for (int i = 0; i < NKEYS; i++) {
        const char *base = (const char *)c + keys[i].off;
        switch (keys[i].type) {
        case CK_INT: cJSON_AddNumberToObject(o, keys[i].name, *(const int *)base); break;
        case CK_FLOAT: {
            char tmp[32]; // shortest text that reads back to the same float
            snprintf(tmp, sizeof tmp, "%.9g", *(const float *)base);
            cJSON_AddRawToObject(o, keys[i].name, tmp);
            break;
        }
        case CK_BOOL: cJSON_AddBoolToObject(o, keys[i].name, *(const int *)base); break;
        case CK_STR: cJSON_AddStringToObject(o, keys[i].name, base); break;
        }
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

int config_from_json(Config *c, const char *json, char *err, size_t errlen) {
    cJSON *o = cJSON_Parse(json);
    if (!o || !cJSON_IsObject(o)) { cJSON_Delete(o); return set_err(err, errlen, "config JSON does not parse"); }
    int rc = 0;
    for (cJSON *it = o->child; it && !rc; it = it->next) {
        const KeyInfo *k = find_key(it->string);
        if (!k) { rc = set_err(err, errlen, "config JSON: unknown key '%s'", it->string); break; }
        char tmp[64];
        const char *v = tmp;
        if (cJSON_IsString(it)) v = it->valuestring;
        else if (cJSON_IsBool(it)) v = cJSON_IsTrue(it) ? "true" : "false";
        else if (cJSON_IsNumber(it)) snprintf(tmp, sizeof tmp, "%.17g", it->valuedouble);
        else { rc = set_err(err, errlen, "config JSON: key '%s' has an unsupported type", it->string); break; }
        rc = set_key(c, k, v, 1, err, errlen);
    }
    cJSON_Delete(o);
    return rc;
}

void config_print_help(FILE *f) {
    fprintf(f, "config keys (YAML `key: value`, or flags `--key value`):\n");
    for (int i = 0; i < NKEYS; i++) fprintf(f, "  %-24s %-10s %s\n", keys[i].name, keys[i].def, keys[i].help);
    fprintf(f, "aliases:");
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        fprintf(f, "%s %s%s", i ? "," : "", aliases[i].alias, aliases[i].factor == 2 ? " (x2: GDN blocks)" : "");
    fprintf(f, "\n");
}

void config_print(const Config *c, FILE *f) {
    char *s = config_to_json(c);
    fprintf(f, "%s\n", s);
    free(s);
}
