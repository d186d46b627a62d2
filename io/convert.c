// convert.c: `gdn convert`, moving weights between gdn.c checkpoints, FLA HuggingFace directories and
// Megatron/Primus torch checkpoints (spec model.md §5, §6).
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../model/config.h"
#include "../model/params.h"
#include "../util/args.h"
#include "../util/common.h"
#include "checkpoint.h"
#include "hf.h"
#include "safetensors.h"
#include "torch_pickle.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: gdn convert MODE [options]\n"
            "\n"
            "modes:\n"
            "  --to-hf --load CKPT --output-dir DIR [--dtype bf16|fp32] [--tokenizer PATH]\n"
            "        gdn.c checkpoint -> FLA HuggingFace directory (config.json, model.safetensors; lm_head omitted\n"
            "        since it is tied). A_log and dt_bias stay fp32, the rest is stored in --dtype (default bf16,\n"
            "        rounded to nearest even). --tokenizer: a tokenizer.json or a directory holding one; it is\n"
            "        copied with tokenizer_config.json and special_tokens_map.json.\n"
            "  --from-hf DIR --save CKPT_DIR\n"
            "        FLA HuggingFace directory (model.safetensors or sharded via model.safetensors.index.json;\n"
            "        F32/BF16/F16) -> weights-only gdn.c checkpoint at iteration 0, for gdn train --load --finetune.\n"
            "  --from-megatron PATH --save CKPT_DIR [--config YAML]\n"
            "        Megatron/Primus torch checkpoint (a save dir, an iter_N dir, or mp_rank_00/model_optim_rng.pt;\n"
            "        TE or local layer spec; bf16/fp16/fp32) -> weights-only gdn.c checkpoint. Shapes come from the\n"
            "        tensors; q/k head dim 64 unless --config (a gdn.c YAML) says otherwise.\n"
            "  --to-megatron --load CKPT --output-dir DIR [--dtype bf16|fp32] [--megatron-spec local|te]\n"
            "        gdn.c checkpoint -> DIR/iter_N/mp_rank_00/model_optim_rng.pt in Primus's fused layout\n"
            "        (in_proj [q|k|v|g|b|a], conv1d [q|k|v], linear_fc1 [gate|up]); default spec local (no TE).\n"
            "  --list FILE\n"
            "        print the tensors (name, dtype, shape) of a .safetensors or torch .pt file.\n"
            "\n"
            "CKPT: a gdn.c save dir (latest_checkpointed_iteration.txt), an iter_N dir, or its model.safetensors.\n");
}

typedef struct {
    const char *mode, *mode_arg, *load, *save, *output_dir, *dtype, *tokenizer, *config, *spec;
} Opts;

static void parse_args(int argc, char **argv, Opts *o) {
    memset(o, 0, sizeof *o);
    static const char *modes[] = {"--to-hf", "--from-hf", "--from-megatron", "--to-megatron", "--list"};
    static const ArgSpec spec[] = {
        {"--to-hf", ARG_FLAG, 0, 0},    {"--from-hf", ARG_STR, 0, 0},   {"--from-megatron", ARG_STR, 0, 0},
        {"--to-megatron", ARG_FLAG, 0, 0}, {"--list", ARG_STR, 0, 0},     {"--load", ARG_STR, 0, 0},
        {"--save", ARG_STR, 0, 0},       {"--output-dir", ARG_STR, 0, 0}, {"--dtype", ARG_STR, 0, 0},
        {"--tokenizer", ARG_STR, 0, 0},  {"--config", ARG_STR, 0, 0},     {"--megatron-spec", ARG_STR, 0, 0},
    };
    Args a;
    args_parse(&a, "convert", argc, argv, spec, sizeof spec / sizeof spec[0], 0);
    for (int m = 0; m < 5; m++)
        if (args_has(&a, modes[m])) {
            if (o->mode) die("convert: choose one mode (%s and %s given)", o->mode, modes[m]);
            o->mode = modes[m];
            if (spec[m].kind == ARG_STR) o->mode_arg = args_str(&a, modes[m], NULL);
        }
    o->load = args_str(&a, "--load", NULL), o->save = args_str(&a, "--save", NULL);
    o->output_dir = args_str(&a, "--output-dir", NULL), o->dtype = args_str(&a, "--dtype", NULL);
    o->tokenizer = args_str(&a, "--tokenizer", NULL), o->config = args_str(&a, "--config", NULL);
    o->spec = args_str(&a, "--megatron-spec", NULL);
    if (!o->mode)
        die("convert: no mode given: --to-hf, --from-hf DIR, --from-megatron PATH, --to-megatron or --list FILE");
}

static void need(const Opts *o, const char *v, const char *flag) {
    if (!v || !*v) die("convert %s needs %s", o->mode, flag);
}
static void refuse(const Opts *o, const char *v, const char *flag) {
    if (v) die("convert %s does not take %s", o->mode, flag);
}

static StDtype parse_dtype(const char *s) {
    if (!s || !strcmp(s, "bf16") || !strcmp(s, "bfloat16")) return ST_BF16;
    if (!strcmp(s, "fp32") || !strcmp(s, "float32") || !strcmp(s, "f32")) return ST_F32;
    die("convert: --dtype must be bf16 or fp32, not '%s'", s);
}

static double file_mb(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? sb.st_size / 1e6 : 0;
}

// Loads a gdn.c checkpoint's config and weights (no optimizer state).
static float *load_ckpt(const char *path, Config *cfg, ParamLayout *pl, CkptState *st) {
    char err[ERR_LEN], iter_dir[1024];
    if (ckpt_resolve(path, iter_dir, sizeof iter_dir, err, sizeof err)) die("%s", err);
    if (ckpt_read_config(iter_dir, cfg, err, sizeof err)) die("%s", err);
    ModelDims d = config_dims(cfg);
    params_layout(pl, &d);
    float *params = xmalloc(pl->total * sizeof(float));
    printf("convert: loading %s\n", iter_dir);
    fflush(stdout);
    if (ckpt_load(iter_dir, pl, params, NULL, NULL, NULL, st, err, sizeof err)) die("%s", err);
    return params;
}

static void print_model(const ParamLayout *pl) {
    char line[512];
    hf_describe(line, sizeof line, &pl->d, pl->total);
    printf("convert: model %s\n", line);
}

// Writes a weights-only checkpoint at iteration 0.
static void save_weights_only(const char *save, const Config *cfg, const ParamLayout *pl, const float *params) {
    CkptState st;
    memset(&st, 0, sizeof st);
    char err[ERR_LEN];
    double t0 = now_sec();
    if (ckpt_save(save, cfg, pl, params, NULL, NULL, &st, err, sizeof err)) die("%s", err);
    char p[1200];
    snprintf(p, sizeof p, "%s/iter_0000000/model.safetensors", save);
    printf("convert: wrote %s (%.1f MB, fp32, weights only) in %.1fs\n", p, file_mb(p), now_sec() - t0);
}

// ---------------------------------------------------------------------------------------------------
// --to-hf / --from-hf

static int cmd_to_hf(const Opts *o) {
    need(o, o->load, "--load CKPT");
    need(o, o->output_dir, "--output-dir DIR");
    refuse(o, o->save, "--save");
    refuse(o, o->config, "--config");
    refuse(o, o->spec, "--megatron-spec");
    StDtype dt = parse_dtype(o->dtype);
    Config cfg;
    ParamLayout pl;
    CkptState st;
    double t0 = now_sec();
    float *params = load_ckpt(o->load, &cfg, &pl, &st);
    print_model(&pl);
    printf("convert: checkpoint iteration %" PRId64 ", %" PRId64 " samples consumed\n", st.iteration,
           st.consumed_samples);
    char err[ERR_LEN];
    if (hf_export(o->output_dir, &cfg, &pl, params, dt, o->tokenizer, err, sizeof err)) die("%s", err);
    char p[1200];
    snprintf(p, sizeof p, "%s/model.safetensors", o->output_dir);
    printf("convert: wrote %s/{config.json, model.safetensors%s} (%d tensors, %s with A_log/dt_bias fp32, %.1f MB) in "
           "%.1fs\n",
           o->output_dir, o->tokenizer ? ", tokenizer.json, tokenizer_config.json, special_tokens_map.json" : "",
           pl.ntensors, dt == ST_BF16 ? "bf16" : "fp32", file_mb(p), now_sec() - t0);
    free(params);
    params_layout_free(&pl);
    return 0;
}

static int cmd_from_hf(const Opts *o) {
    need(o, o->save, "--save CKPT_DIR");
    refuse(o, o->load, "--load");
    refuse(o, o->output_dir, "--output-dir");
    refuse(o, o->dtype, "--dtype");
    refuse(o, o->tokenizer, "--tokenizer");
    refuse(o, o->config, "--config");
    refuse(o, o->spec, "--megatron-spec");
    Config cfg;
    char err[ERR_LEN];
    double t0 = now_sec();
    if (hf_read_config(o->mode_arg, &cfg, err, sizeof err)) die("%s", err);
    ModelDims d = config_dims(&cfg);
    ParamLayout pl;
    params_layout(&pl, &d);
    print_model(&pl);
    float *params = xmalloc(pl.total * sizeof(float));
    printf("convert: reading %s\n", o->mode_arg);
    fflush(stdout);
    if (hf_load_weights(o->mode_arg, &pl, params, err, sizeof err)) die("%s", err);
    printf("convert: read %d tensors in %.1fs\n", pl.ntensors, now_sec() - t0);
    save_weights_only(o->save, &cfg, &pl, params);
    free(params);
    params_layout_free(&pl);
    return 0;
}

// ---------------------------------------------------------------------------------------------------
// Megatron / Primus

static int is_dir(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

// A save dir, iter dir, mp_rank dir or the .pt file itself -> the .pt file.
static void resolve_megatron(const char *path, char *out, size_t n) {
    char dir[1024], probe[1200];
    if (!is_dir(path)) {
        if (!file_exists(path)) die("%s does not exist", path);
        snprintf(out, n, "%s", path);
        return;
    }
    snprintf(dir, sizeof dir, "%s", path);
    snprintf(probe, sizeof probe, "%s/latest_checkpointed_iteration.txt", dir);
    if (file_exists(probe)) {
        char err[ERR_LEN];
        char *txt = read_file(probe, NULL, err, sizeof err);
        if (!txt) die("%s", err);
        char *s = txt + strspn(txt, " \t\r\n");
        s[strcspn(s, " \t\r\n")] = 0;
        char *end;
        long long it = strtoll(s, &end, 10);
        if (!strcmp(s, "release"))
            snprintf(dir, sizeof dir, "%s/release", path);
        else if (end != s && !*end && it >= 0)
            snprintf(dir, sizeof dir, "%s/iter_%07lld", path, it);
        else
            die("%s: expected an iteration number or 'release', found '%s'", probe, s);
        free(txt);
    }
    snprintf(probe, sizeof probe, "%s/model_optim_rng.pt", dir);
    if (file_exists(probe)) {
        snprintf(out, n, "%s", probe);
        return;
    }
    snprintf(probe, sizeof probe, "%s/mp_rank_01", dir);
    char probe2[1200];
    snprintf(probe2, sizeof probe2, "%s/mp_rank_00_001", dir);
    if (is_dir(probe) || is_dir(probe2))
        die("%s: tensor- or pipeline-parallel checkpoint (several mp_rank_* dirs); only single-rank checkpoints are "
            "supported (save with TP=PP=1)",
            dir);
    snprintf(probe, sizeof probe, "%s/mp_rank_00/model_optim_rng.pt", dir);
    if (file_exists(probe)) {
        snprintf(out, n, "%s", probe);
        return;
    }
    snprintf(probe, sizeof probe, "%s/metadata.json", dir);
    snprintf(probe2, sizeof probe2, "%s/common.pt", dir);
    if (file_exists(probe) || file_exists(probe2))
        die("%s is a torch_dist (distributed) checkpoint; convert it to the torch format first "
            "(Megatron: --ckpt-convert-format torch)",
            dir);
    die("%s: no mp_rank_00/model_optim_rng.pt (not a Megatron torch-format checkpoint?)", dir);
}

// Megatron tensor names of one model, resolved to PyVals.
typedef struct {
    const PyVal *emb, *final_norm, *output;
    int nsub;
    struct {
        const PyVal *norm, *in_proj, *A_log, *dt_bias, *conv, *out_norm, *out_proj; // GDN sublayer 2i
        const PyVal *mlp_norm, *fc1, *fc2; // MLP sublayer 2i+1
        const char *norm_name, *mlp_norm_name;
    } * sub;
} MegModel;

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static void set_once(const PyVal **slot, const char **name_slot, const PyVal *v, const char *name) {
    if (*slot)
        die("model has both %s and %s for the same norm (mixed TE and local names)", name_slot ? *name_slot : "?",
            name);
    *slot = v;
    if (name_slot) *name_slot = name;
}

static void megatron_collect(const PyVal *model, MegModel *m, const char *file) {
    memset(m, 0, sizeof *m);
    int cap = 0;
    for (int i = 0; i + 1 < model->n; i += 2) {
        const PyVal *k = model->items[i], *v = model->items[i + 1];
        if (k->kind != PY_STR) die("%s: a 'model' key is a %s, not a string", file, py_kind_name(k->kind));
        const char *name = k->s;
        if (ends_with(name, "_extra_state")) continue; // Transformer Engine FP8 metadata
        if (v->kind != PY_TENSOR) die("%s: model entry '%s' is a %s, not a tensor", file, name, py_kind_name(v->kind));
        if (!strcmp(name, "embedding.word_embeddings.weight")) {
            m->emb = v;
            continue;
        }
        if (!strcmp(name, "decoder.final_norm.weight") || !strcmp(name, "decoder.final_layernorm.weight") ||
            !strcmp(name, "decoder.norm.weight")) {
            if (m->final_norm) die("%s: two final norms ('%s' and another)", file, name);
            m->final_norm = v;
            continue;
        }
        if (!strcmp(name, "output_layer.weight")) {
            m->output = v;
            continue;
        }
        if (strstr(name, ".self_attention.")) // a hybrid's softmax-attention sublayer
            die("%s: '%s' is a softmax-attention sublayer: Megatron/Primus hybrid checkpoints are not imported (the "
                "map from their attention tensors to FLA's q/k/v/o_proj is not known here); export the model to "
                "FLA's HF format and use --from-hf",
                file, name);
        int idx, off = 0;
        if (sscanf(name, "decoder.layers.%d.%n", &idx, &off) != 1 || off == 0 || idx < 0 || idx > 100000)
            die("%s: unexpected tensor '%s' in model (not part of a Primus GDN model)", file, name);
        const char *rest = name + off;
        if (idx >= cap) {
            int nc = cap ? cap : 16;
            while (nc <= idx) nc *= 2;
            m->sub = xrealloc(m->sub, (size_t)nc * sizeof *m->sub);
            memset(m->sub + cap, 0, (size_t)(nc - cap) * sizeof *m->sub);
            cap = nc;
        }
        if (idx + 1 > m->nsub) m->nsub = idx + 1;
        __typeof__(m->sub[0]) *s = &m->sub[idx];
        int gdn = idx % 2 == 0;
        if (gdn && (!strcmp(rest, "norm.weight") || !strcmp(rest, "mixer.in_proj.layer_norm_weight")))
            set_once(&s->norm, &s->norm_name, v, name);
        else if (gdn && !strcmp(rest, "mixer.in_proj.weight"))
            s->in_proj = v;
        else if (gdn && !strcmp(rest, "mixer.A_log"))
            s->A_log = v;
        else if (gdn && !strcmp(rest, "mixer.dt_bias"))
            s->dt_bias = v;
        else if (gdn && !strcmp(rest, "mixer.conv1d.weight"))
            s->conv = v;
        else if (gdn && !strcmp(rest, "mixer.out_norm.weight"))
            s->out_norm = v;
        else if (gdn && !strcmp(rest, "mixer.out_proj.weight"))
            s->out_proj = v;
        else if (!gdn &&
                 (!strcmp(rest, "pre_mlp_layernorm.weight") || !strcmp(rest, "mlp.linear_fc1.layer_norm_weight")))
            set_once(&s->mlp_norm, &s->mlp_norm_name, v, name);
        else if (!gdn && !strcmp(rest, "mlp.linear_fc1.weight"))
            s->fc1 = v;
        else if (!gdn && !strcmp(rest, "mlp.linear_fc2.weight"))
            s->fc2 = v;
        else
            die("%s: unexpected tensor '%s' (sublayer %d is a %s sublayer: GDN and MLP alternate, GDN first)", file,
                name, idx, gdn ? "GDN" : "MLP");
    }
    if (!m->emb) die("%s: model lacks 'embedding.word_embeddings.weight'", file);
    if (!m->final_norm) die("%s: model lacks 'decoder.final_norm.weight' (or final_layernorm / norm)", file);
    if (m->nsub == 0 || m->nsub % 2)
        die("%s: %d decoder sublayers; expected an even number (GDN + MLP pairs)", file, m->nsub);
}

static void shape_str(char *out, size_t n, const PyVal *t) {
    int o = snprintf(out, n, "[");
    for (int i = 0; i < t->ndim && o < (int)n; i++)
        o += snprintf(out + o, n - (size_t)o, i ? ", %lld" : "%lld", (long long)t->shape[i]);
    if (o < (int)n) snprintf(out + o, n - (size_t)o, "]");
}

static const PyVal *need_t(const PyVal *t, const char *file, int sub, const char *what) {
    if (!t) die("%s: model lacks 'decoder.layers.%d.%s'", file, sub, what);
    return t;
}

// Checks t's shape is exactly (d0[, d1[, d2]]) and converts it to fp32 into out.
static void take(TorchFile *tf, const PyVal *t, const char *name, int ndim, int64_t d0, int64_t d1, int64_t d2,
                 float *out) {
    int64_t want[3] = {d0, d1, d2};
    int ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == want[i];
    if (!ok) {
        char got[96], exp[96] = "[";
        shape_str(got, sizeof got, t);
        for (int i = 0; i < ndim; i++)
            snprintf(exp + strlen(exp), sizeof exp - strlen(exp), i ? ", %lld" : "%lld", (long long)want[i]);
        strcat(exp, "]");
        die("%s: tensor '%s' has shape %s, expected %s", tf->zip.path, name, got, exp);
    }
    char err[ERR_LEN];
    if (torch_tensor_to_f32(tf, t, out, err, sizeof err)) die("%s: tensor '%s': %s", tf->zip.path, name, err);
}

// Parameter slot by HF name (must exist in the layout).
static float *slot(const ParamLayout *pl, float *params, const char *name) {
    const TensorInfo *ti = params_find(pl, name);
    if (!ti) die("internal: tensor table lacks %s", name);
    return params + ti->off;
}

static int cmd_from_megatron(const Opts *o) {
    need(o, o->save, "--save CKPT_DIR");
    refuse(o, o->load, "--load");
    refuse(o, o->output_dir, "--output-dir");
    refuse(o, o->dtype, "--dtype");
    refuse(o, o->tokenizer, "--tokenizer");
    refuse(o, o->spec, "--megatron-spec");
    char file[1200], err[ERR_LEN];
    resolve_megatron(o->mode_arg, file, sizeof file);
    double t0 = now_sec();
    printf("convert: reading %s (%.1f MB)\n", file, file_mb(file));
    fflush(stdout);
    TorchFile tf;
    if (torch_load(&tf, file, err, sizeof err)) die("%s", err);
    if (tf.root->kind != PY_DICT) die("%s: the pickled object is a %s, not a dict", file, py_kind_name(tf.root->kind));
    const PyVal *model = py_dict_get(tf.root, "model");
    if (!model) {
        if (py_dict_get(tf.root, "model0"))
            die("%s: virtual-pipeline checkpoint (model0, model1, ...) not supported", file);
        die("%s: no \"model\" entry in the checkpoint dict", file);
    }
    if (model->kind != PY_DICT) die("%s: \"model\" is a %s, not a dict", file, py_kind_name(model->kind));
    const PyVal *itv = py_dict_get(tf.root, "iteration"), *ver = py_dict_get(tf.root, "checkpoint_version");
    printf("convert: Megatron checkpoint: iteration %lld, checkpoint_version %g, %d model entries\n",
           itv && itv->kind == PY_INT ? (long long)itv->i : -1LL, ver && ver->kind == PY_FLOAT ? ver->f : -1.0,
           py_dict_len(model));

    MegModel m;
    megatron_collect(model, &m, file);
    // shapes from the tensors (spec §6): in_proj rows 2Kd+2Vd+2HV, conv channels 2Kd+Vd
    if (m.emb->ndim != 2) die("%s: embedding.word_embeddings.weight is not 2-D", file);
    int V = (int)m.emb->shape[0], h = (int)m.emb->shape[1], L = m.nsub / 2;
    const PyVal *A0 = need_t(m.sub[0].A_log, file, 0, "mixer.A_log"),
                *c0 = need_t(m.sub[0].conv, file, 0, "mixer.conv1d.weight");
    const PyVal *i0 = need_t(m.sub[0].in_proj, file, 0, "mixer.in_proj.weight");
    const PyVal *n0 = need_t(m.sub[0].out_norm, file, 0, "mixer.out_norm.weight"),
                *f0 = need_t(m.sub[1].fc1, file, 1, "mlp.linear_fc1.weight");
    if (A0->ndim != 1 || c0->ndim != 3 || i0->ndim != 2 || n0->ndim != 1 || f0->ndim != 2)
        die("%s: layer 0 tensors have unexpected ranks (A_log 1-D, conv1d 3-D, in_proj 2-D, out_norm 1-D, fc1 2-D)",
            file);
    int HV = (int)A0->shape[0], C = (int)c0->shape[0], K = (int)c0->shape[2], R = (int)i0->shape[0];
    int dv = (int)n0->shape[0], F2 = (int)f0->shape[0];
    int Vd = R - C - 2 * HV, Kd2 = C - Vd;
    if (Vd <= 0 || Kd2 <= 0 || Kd2 % 2 || F2 % 2 || dv <= 0 || Vd != HV * dv)
        die("%s: cannot derive head sizes: in_proj has %d rows, conv1d %d channels, A_log %d heads, out_norm %d "
            "(expected rows 2Kd+2Vd+2HV, channels 2Kd+Vd, Vd = HV x dv)",
            file, R, C, HV, dv);
    int Kd = Kd2 / 2;

    Config cfg, given; // `given`: the YAML over -1 sentinels, to tell the keys it sets from defaults
    config_defaults(&cfg);
    int dk = 64;
    int vals[] = {h, 2 * L, F2 / 2, 0, HV, 0, dv, K, V};
    int *fields[] = {&cfg.hidden_size, &cfg.num_layers, &cfg.ffn_hidden_size, &cfg.num_heads, &cfg.num_v_heads,
                     &cfg.head_dim,    &cfg.v_head_dim, &cfg.conv_size,       &cfg.vocab_size};
    int *given_fields[] = {&given.hidden_size, &given.num_layers,  &given.ffn_hidden_size,
                           &given.num_heads,   &given.num_v_heads, &given.head_dim,
                           &given.v_head_dim,  &given.conv_size,   &given.vocab_size};
    const char *keys[] = {"hidden_size",
                          "num_layers",
                          "ffn_hidden_size",
                          "linear_num_key_heads",
                          "linear_num_value_heads",
                          "linear_key_head_dim",
                          "linear_value_head_dim",
                          "linear_conv_kernel_dim",
                          "vocab_size"};
    if (o->config) {
        if (config_load_yaml(&cfg, o->config, err, sizeof err)) die("%s", err);
        if (cfg.attn_layers[0])
            die("%s: attn_layers is set, but Megatron/Primus hybrid checkpoints are not imported (the map of their "
                "attention tensors is not known here); use --from-hf with an FLA export",
                o->config);
        config_defaults(&given);
        for (int i = 0; i < 9; i++) *given_fields[i] = -1;
        if (config_load_yaml(&given, o->config, err, sizeof err)) die("%s", err);
        if (given.head_dim > 0) dk = given.head_dim;
    }
    if (Kd % dk)
        die("%s: key dim %d is not a multiple of the q/k head dim %d (set linear_key_head_dim with --config)", file, Kd,
            dk);
    vals[3] = Kd / dk;
    vals[5] = dk;
    for (int i = 0; i < 9; i++) {
        if (o->config && *given_fields[i] != -1 && *given_fields[i] != vals[i])
            die("%s: key '%s' is %d but the checkpoint's tensors give %d", o->config, keys[i], *given_fields[i],
                vals[i]);
        *fields[i] = vals[i];
    }
    if (config_validate(&cfg, err, sizeof err)) die("%s: derived config: %s", file, err);
    ModelDims d = config_dims(&cfg);
    ParamLayout pl;
    params_layout(&pl, &d);
    print_model(&pl);
    printf("convert: layer spec %s\n", m.sub[0].norm_name && strstr(m.sub[0].norm_name, "layer_norm_weight")
                                           ? "TE (norms fused into linears)"
                                           : "local (no TE)");

    float *params = xmalloc(pl.total * sizeof(float));
    take(&tf, m.emb, "embedding.word_embeddings.weight", 2, V, h, 0, slot(&pl, params, "model.embeddings.weight"));
    take(&tf, m.final_norm, "decoder.final_norm.weight", 1, h, 0, 0, slot(&pl, params, "model.norm.weight"));
    // Block tensors by the table's Megatron names (local spec, else TE): each run of tensors sharing a name
    // is one fused Megatron tensor (in_proj [q|k|v|g|b|a], conv1d [q|k|v], linear_fc1 [gate|up]), contiguous
    // in the flat buffer, so it is read in place.
    for (int i = 0; i < pl.ntensors;) {
        const TensorInfo *t = &pl.tensors[i];
        int j = i + 1;
        if (t->layer < 0) { // embeddings, final norm: above
            i = j;
            continue;
        }
        int64_t rows = t->shape[0];
        while (j < pl.ntensors && pl.tensors[j].layer == t->layer && !strcmp(pl.tensors[j].meg, t->meg))
            rows += pl.tensors[j++].shape[0];
        char name[160];
        int sub = 2 * t->layer + t->meg_sub;
        snprintf(name, sizeof name, "decoder.layers.%d.%s", sub, t->meg);
        const PyVal *v = py_dict_get(model, name);
        if (!v && strcmp(t->meg, t->meg_te)) {
            snprintf(name, sizeof name, "decoder.layers.%d.%s", sub, t->meg_te);
            v = py_dict_get(model, name);
        }
        if (!v)
            die("%s: model lacks 'decoder.layers.%d.%s'%s", file, sub, t->meg,
                strcmp(t->meg, t->meg_te) ? " (or its TE name)" : "");
        take(&tf, v, name, t->ndim, rows, t->shape[1], t->shape[2], params + t->off);
        int l = t->layer;
        if ((j == pl.ntensors || pl.tensors[j].layer != l) && (l == 0 || (l + 1) % 8 == 0 || l + 1 == L)) {
            printf("convert: layer %d/%d\n", l + 1, L);
            fflush(stdout);
        }
        i = j;
    }
    if (m.output) { // untied output layer: acceptable only as an exact copy of the embeddings
        size_t n = (size_t)V * h;
        float *out = xmalloc(n * sizeof(float));
        take(&tf, m.output, "output_layer.weight", 2, V, h, 0, out);
        if (memcmp(out, params + pl.embeddings, n * sizeof(float)) != 0)
            die("%s: output_layer.weight differs from the embeddings (an untied head); gdn.c models tie them", file);
        free(out);
        printf("convert: output_layer.weight equals the embeddings (tied); dropped\n");
    }
    printf("convert: read %d tensors in %.1fs\n", pl.ntensors, now_sec() - t0);
    free(m.sub);
    torch_close(&tf);
    save_weights_only(o->save, &cfg, &pl, params);
    free(params);
    params_layout_free(&pl);
    return 0;
}

static int cmd_to_megatron(const Opts *o) {
    need(o, o->load, "--load CKPT");
    need(o, o->output_dir, "--output-dir DIR");
    refuse(o, o->save, "--save");
    refuse(o, o->tokenizer, "--tokenizer");
    refuse(o, o->config, "--config");
    StDtype sdt = parse_dtype(o->dtype);
    TorchDtype dt = sdt == ST_BF16 ? TD_BF16 : TD_F32;
    int te = 0;
    if (o->spec && !strcmp(o->spec, "te"))
        te = 1;
    else if (o->spec && strcmp(o->spec, "local") != 0)
        die("convert: --megatron-spec must be local or te, not '%s'", o->spec);
    Config cfg;
    ParamLayout pl;
    CkptState st;
    double t0 = now_sec();
    float *params = load_ckpt(o->load, &cfg, &pl, &st);
    print_model(&pl);
    if (pl.d.n_attn)
        die("convert: %s is a hybrid (attention blocks %s): Megatron/Primus export covers pure GDN models only (the "
            "name map of Megatron's attention sublayers is not known here); use --to-hf",
            o->load, cfg.attn_layers);
    TorchWriter *w = torch_writer_new();
    torch_writer_int(w, "iteration", st.iteration);
    torch_writer_begin_dict(w, "model");
    // In table order, which is Megatron's: each run of a block's tensors with the same Megatron name is one
    // fused tensor, and the run is contiguous in the flat buffer, so it is written in place.
    for (int i = 0; i < pl.ntensors;) {
        const TensorInfo *t = &pl.tensors[i];
        int j = i + 1;
        int64_t shape[3] = {t->shape[0], t->shape[1], t->shape[2]};
        while (j < pl.ntensors && pl.tensors[j].layer == t->layer && !strcmp(pl.tensors[j].meg, t->meg))
            shape[0] += pl.tensors[j++].shape[0];
        char meg[160];
        const char *name = te ? t->meg_te : t->meg;
        if (t->layer < 0) snprintf(meg, sizeof meg, "%s", name);
        else snprintf(meg, sizeof meg, "decoder.layers.%d.%s", 2 * t->layer + t->meg_sub, name);
        torch_writer_tensor(w, meg, t->meg_fp32 ? TD_F32 : dt, t->ndim, shape, params + t->off);
        i = j;
    }
    torch_writer_float(w, "checkpoint_version", 3.0);
    char dir[1100], path[1300], err[ERR_LEN], txt[32];
    snprintf(dir, sizeof dir, "%s/iter_%07" PRId64 "/mp_rank_00", o->output_dir, st.iteration);
    if (mkdir_p(dir)) die("cannot create %s: %s", dir, strerror(errno));
    snprintf(path, sizeof path, "%s/model_optim_rng.pt", dir);
    if (torch_writer_save(w, path, err, sizeof err)) die("%s", err);
    torch_writer_free(w);
    snprintf(dir, sizeof dir, "%s/latest_checkpointed_iteration.txt", o->output_dir);
    snprintf(txt, sizeof txt, "%" PRId64, st.iteration);
    if (write_file_atomic(dir, txt, strlen(txt), err, sizeof err)) die("%s", err);
    printf("convert: wrote %s (%s spec, %s with A_log/dt_bias fp32, %.1f MB) in %.1fs\n", path, te ? "TE" : "local",
           dt == TD_BF16 ? "bf16" : "fp32", file_mb(path), now_sec() - t0);
    free(params);
    params_layout_free(&pl);
    return 0;
}

// ---------------------------------------------------------------------------------------------------
// --list

static void list_pyval(const PyVal *v, const char *path, int depth, int *shown) {
    if (depth > 6) return;
    if (v->kind == PY_TENSOR) {
        char s[96];
        shape_str(s, sizeof s, v);
        printf("  %-60s %-9s %s\n", path, torch_dtype_name(v->dtype), s);
        ++*shown;
        return;
    }
    if (v->kind == PY_DICT || (v->kind == PY_OBJ && v->n)) {
        for (int i = 0; i + 1 < v->n; i += 2) {
            char sub[512];
            const PyVal *k = v->items[i];
            if (k->kind == PY_STR)
                snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", k->s);
            else if (k->kind == PY_INT)
                snprintf(sub, sizeof sub, "%s%s%lld", path, *path ? "." : "", (long long)k->i);
            else
                continue;
            list_pyval(v->items[i + 1], sub, depth + 1, shown);
        }
    } else if (v->kind == PY_LIST || v->kind == PY_TUPLE) {
        for (int i = 0; i < v->n; i++) {
            char sub[512];
            snprintf(sub, sizeof sub, "%s[%d]", path, i);
            list_pyval(v->items[i], sub, depth + 1, shown);
        }
    } else if (depth == 1) {
        if (v->kind == PY_INT)
            printf("  %-60s int %lld\n", path, (long long)v->i);
        else if (v->kind == PY_FLOAT)
            printf("  %-60s float %g\n", path, v->f);
        else if (v->kind == PY_STR)
            printf("  %-60s str '%.60s'\n", path, v->s);
        else if (v->kind == PY_OBJ && v->callable && v->callable->kind == PY_GLOBAL)
            printf("  %-60s %s.%s object\n", path, v->callable->s, v->callable->s2);
        else
            printf("  %-60s %s\n", path, py_kind_name(v->kind));
    }
}

static int cmd_list(const Opts *o) {
    char err[ERR_LEN];
    const char *f = o->mode_arg;
    if (ends_with(f, ".safetensors")) {
        StFile sf;
        if (st_open(&sf, f, err, sizeof err)) die("%s", err);
        for (int i = 0; i < sf.nmeta; i++)
            printf("  __metadata__.%-47s %.100s%s\n", sf.meta_keys[i], sf.meta_vals[i],
                   strlen(sf.meta_vals[i]) > 100 ? "..." : "");
        for (int i = 0; i < sf.ntensors; i++) {
            const StTensor *t = &sf.tensors[i];
            char s[96];
            int p = snprintf(s, sizeof s, "[");
            for (int k = 0; k < t->ndim; k++)
                p += snprintf(s + p, sizeof s - (size_t)p, k ? ", %lld" : "%lld", (long long)t->shape[k]);
            snprintf(s + p, sizeof s - (size_t)p, "]");
            printf("  %-60s %-9s %s\n", t->name, st_dtype_name(t->dtype), s);
        }
        printf("%s: %d tensors\n", f, sf.ntensors);
        st_close(&sf);
        return 0;
    }
    TorchFile tf;
    if (torch_load(&tf, f, err, sizeof err)) die("%s", err);
    int shown = 0;
    list_pyval(tf.root, "", 0, &shown);
    printf("%s: %d tensors (torch zip, archive '%.*s')\n", f, shown, (int)strlen(tf.prefix) - 1, tf.prefix);
    torch_close(&tf);
    return 0;
}

int cmd_convert(int argc, char **argv) {
    if (arg_is_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    Opts o;
    parse_args(argc, argv, &o);
    if (!strcmp(o.mode, "--to-hf")) return cmd_to_hf(&o);
    if (!strcmp(o.mode, "--from-hf")) return cmd_from_hf(&o);
    if (!strcmp(o.mode, "--from-megatron")) return cmd_from_megatron(&o);
    if (!strcmp(o.mode, "--to-megatron")) return cmd_to_megatron(&o);
    return cmd_list(&o);
}
