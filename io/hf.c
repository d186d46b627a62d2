// hf.c: FLA HuggingFace checkpoint directories in and out (see hf.h and spec model.md §1, §5).
#define _GNU_SOURCE
#include "hf.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../util/common.h"

// ---------------------------------------------------------------------------------------------------
// shapes

static const struct {
    const char *name;
    int h, L, H, HV, dk, dv, F, K, V;
} known_models[] = {
    {"300M", 1024, 12, 4, 8, 64, 64, 4096, 4, 128256},
    {"1B", 2048, 16, 8, 16, 64, 64, 8192, 4, 128256},
};

const char *hf_model_name(const ModelDims *d) {
    if (d->n_attn) return NULL;
    for (size_t i = 0; i < sizeof known_models / sizeof *known_models; i++) {
        const __typeof__(known_models[0]) *m = &known_models[i];
        if (d->h == m->h && d->L == m->L && d->H == m->H && d->HV == m->HV && d->dk == m->dk && d->dv == m->dv &&
            d->F == m->F && d->K == m->K && d->V == m->V)
            return m->name;
    }
    return NULL;
}

void hf_describe(char *out, size_t n, const ModelDims *d, size_t total_params) {
    char count[32];
    format_count(count, sizeof count, total_params);
    const char *name = hf_model_name(d);
    snprintf(out, n,
             "%s%s: hidden %d, %d GDN blocks, heads %d q/k x %d v (dk %d, dv %d), ffn %d, conv %d, vocab %d%s; "
             "%s parameters",
             name ? name : "custom shape", name ? " (FLA pure GDN)" : "", d->h, d->L, d->H, d->HV, d->dk, d->dv, d->F,
             d->K, d->V, d->n_attn ? ", hybrid: attention in some blocks" : "", count);
}

// ---------------------------------------------------------------------------------------------------
// config.json in

static int get_int(const cJSON *o, const char *key, int def, int *out, const char *path, char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return 0;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || fabs(v->valuedouble) > 1e9)
        return set_err(err, errlen, "%s: key '%s': expected an integer", path, key);
    *out = (int)v->valuedouble;
    return 0;
}
static int get_num(const cJSON *o, const char *key, double def, double *out, const char *path, char *err,
                   size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return 0;
    }
    if (!cJSON_IsNumber(v)) return set_err(err, errlen, "%s: key '%s': expected a number", path, key);
    *out = v->valuedouble;
    return 0;
}
static int get_bool(const cJSON *o, const char *key, int def, int *out, const char *path, char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return 0;
    }
    if (!cJSON_IsBool(v)) return set_err(err, errlen, "%s: key '%s': expected true or false", path, key);
    *out = cJSON_IsTrue(v);
    return 0;
}

// FLA's `attn` (spec hybrid.md §1.1): null, one dict, or a list holding one dict (gdn.c has one attention
// spec per model). Defaults as FLA's normalisation; keys FLA keeps but never uses (e.g. qk_norm) are ignored.
static int hf_read_attn(const cJSON *o, const char *path, Config *hy, char *err, size_t errlen) {
    config_defaults(hy);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "attn");
    if (!a || cJSON_IsNull(a)) return 0;
    if (cJSON_IsArray(a)) {
        int n = cJSON_GetArraySize(a);
        if (n != 1)
            return set_err(err, errlen, "%s: key 'attn' lists %d attention specs; gdn.c supports one (a dict or a list "
                           "of one)", path, n);
        a = cJSON_GetArrayItem(a, 0);
    }
    if (!cJSON_IsObject(a)) return set_err(err, errlen, "%s: key 'attn': expected null, a dict or a list of one dict", path);
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(a, "layers");
    if (!cJSON_IsArray(layers) || !cJSON_GetArraySize(layers))
        return set_err(err, errlen, "%s: key 'attn.layers': expected a non-empty list of block indices", path);
    size_t off = 0;
    for (const cJSON *e = layers->child; e; e = e->next) {
        if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || e->valuedouble < 0 || e->valuedouble > 1e6)
            return set_err(err, errlen, "%s: key 'attn.layers': expected non-negative integers", path);
        off += (size_t)snprintf(hy->attn_layers + off, sizeof hy->attn_layers - off, "%s%d", off ? "," : "",
                                (int)e->valuedouble);
        if (off >= sizeof hy->attn_layers) return set_err(err, errlen, "%s: key 'attn.layers': too many layers", path);
    }
    int kv = 0, win = 0;
    double theta = 0;
    if (get_int(a, "num_heads", -1, &hy->attn_num_heads, path, err, errlen) ||
        get_int(a, "num_kv_heads", 0, &kv, path, err, errlen) ||
        get_bool(a, "qkv_bias", 0, &hy->attn_qkv_bias, path, err, errlen) ||
        get_int(a, "window_size", 0, &win, path, err, errlen) ||
        get_num(a, "rope_theta", 10000.0, &theta, path, err, errlen))
        return -1;
    if (hy->attn_num_heads <= 0) return set_err(err, errlen, "%s: key 'attn.num_heads': required, a positive integer", path);
    if (kv < 0 || win < 0)
        return set_err(err, errlen, "%s: key 'attn.%s' must be positive or null", path, kv < 0 ? "num_kv_heads" : "window_size");
    hy->attn_num_kv_heads = kv ? kv : hy->attn_num_heads; // FLA's normalisation: null -> num_heads
    hy->attn_window_size = win;
    hy->attn_rope_theta = (float)theta;
    return 0;
}

int hf_read_config(const char *dir, Config *cfg, char *err, size_t errlen) {
    char path[1100];
    snprintf(path, sizeof path, "%s/config.json", dir);
    size_t len;
    char *txt = read_file(path, &len, err, errlen);
    if (!txt) return -1;
    cJSON *o = cJSON_ParseWithLength(txt, len);
    free(txt);
    if (!o || !cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return set_err(err, errlen, "%s: not a JSON object", path);
    }
    int rc = -1;
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(o, "model_type");
    if (!cJSON_IsString(mt) || strcmp(mt->valuestring, "gated_deltanet") != 0) {
        set_err(err, errlen, "%s: model_type is %s%s%s, expected \"gated_deltanet\" (FLA GatedDeltaNetConfig)", path,
                cJSON_IsString(mt) ? "\"" : "", cJSON_IsString(mt) ? mt->valuestring : "missing",
                cJSON_IsString(mt) ? "\"" : "");
        goto out;
    }
    // FLA's GatedDeltaNetConfig defaults apply to absent keys.
    int h = 0, L = 0, H = 0, HV = 0, dk = 0, F = 0, K = 0, V = 0, hidden_ratio = 0;
    int tie = 0, use_short_conv = 0, use_gate = 0, neg = 0;
    double expand_v = 0, eps = 0, init_std = 0;
    if (get_int(o, "hidden_size", 2048, &h, path, err, errlen) ||
        get_int(o, "num_hidden_layers", 21, &L, path, err, errlen) ||
        get_int(o, "num_heads", 6, &H, path, err, errlen) || get_int(o, "num_v_heads", -1, &HV, path, err, errlen) ||
        get_int(o, "head_dim", 256, &dk, path, err, errlen) ||
        get_num(o, "expand_v", 2.0, &expand_v, path, err, errlen) ||
        get_int(o, "intermediate_size", -1, &F, path, err, errlen) ||
        get_int(o, "hidden_ratio", 4, &hidden_ratio, path, err, errlen) ||
        get_int(o, "conv_size", 4, &K, path, err, errlen) || get_int(o, "vocab_size", 32000, &V, path, err, errlen) ||
        get_num(o, "norm_eps", 1e-6, &eps, path, err, errlen) ||
        get_num(o, "initializer_range", 0.02, &init_std, path, err, errlen) ||
        get_bool(o, "tie_word_embeddings", 0, &tie, path, err, errlen) ||
        get_bool(o, "use_short_conv", 1, &use_short_conv, path, err, errlen) ||
        get_bool(o, "use_gate", 1, &use_gate, path, err, errlen) ||
        get_bool(o, "allow_neg_eigval", 0, &neg, path, err, errlen))
        goto out;
    if (HV < 0) HV = H; // num_v_heads: null means one v head per q/k head
    if (F < 0) { // FLA GatedMLP: 2/3 of hidden_ratio x hidden, rounded up to a multiple of 256
        F = (int)((double)h * hidden_ratio * 2 / 3);
        F = 256 * ((F + 255) / 256);
    }
    int dv = (int)(dk * expand_v); // FLA: head_v_dim = int(head_dim * expand_v)
    if (fabs(dk * expand_v - dv) > 1e-5 * fabs(dk * expand_v) || dv <= 0) {
        set_err(err, errlen, "%s: key 'expand_v': head_dim %d x expand_v %g is not a positive integer", path, dk,
                expand_v);
        goto out;
    }
    if (!tie) {
        // untied heads would need their own lm_head; gdn.c models tie it to the embeddings
        set_err(err, errlen,
                "%s: key 'tie_word_embeddings' is false (or absent, FLA's default): gdn.c models tie lm_head "
                "to the embeddings",
                path);
        goto out;
    }
    if (!use_short_conv || !use_gate || neg) {
        set_err(err, errlen,
                "%s: key '%s' = %s is not supported (gdn.c implements use_short_conv=true, use_gate=true, "
                "allow_neg_eigval=false)",
                path,
                !use_short_conv ? "use_short_conv"
                : !use_gate     ? "use_gate"
                                : "allow_neg_eigval",
                neg && use_short_conv && use_gate ? "true" : "false");
        goto out;
    }
    Config hy; // the attn_* keys, applied after config_defaults below
    if (hf_read_attn(o, path, &hy, err, errlen)) goto out;
    const char *nonnull[] = {"attnres_block_size"};
    for (int i = 0; i < 1; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, nonnull[i]);
        if (v && !cJSON_IsNull(v)) {
            set_err(err, errlen, "%s: key '%s' is set: hybrid attention / attention residuals are not supported", path,
                    nonnull[i]);
            goto out;
        }
    }
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(o, "hidden_act");
    if (act && !(cJSON_IsString(act) && (!strcmp(act->valuestring, "swish") || !strcmp(act->valuestring, "silu")))) {
        set_err(err, errlen, "%s: key 'hidden_act': expected \"swish\" (SwiGLU)", path);
        goto out;
    }
    config_defaults(cfg);
    cfg->hidden_size = h;
    cfg->num_layers = 2 * L; // Megatron counts GDN and MLP sublayers separately
    cfg->ffn_hidden_size = F;
    cfg->num_heads = H;
    cfg->num_v_heads = HV;
    cfg->head_dim = dk;
    cfg->v_head_dim = dv;
    cfg->conv_size = K;
    cfg->vocab_size = V;
    cfg->norm_eps = (float)eps;
    cfg->init_std = (float)init_std;
    memcpy(cfg->attn_layers, hy.attn_layers, sizeof cfg->attn_layers);
    cfg->attn_num_heads = hy.attn_num_heads;
    cfg->attn_num_kv_heads = hy.attn_num_kv_heads;
    cfg->attn_qkv_bias = hy.attn_qkv_bias;
    cfg->attn_window_size = hy.attn_window_size;
    cfg->attn_rope_theta = hy.attn_rope_theta;
    char e2[ERR_LEN];
    if (config_validate(cfg, e2, sizeof e2)) {
        set_err(err, errlen, "%s: %s", path, e2);
        goto out;
    }
    rc = 0;
out:
    cJSON_Delete(o);
    return rc;
}

// ---------------------------------------------------------------------------------------------------
// config.json out

// Python's repr() of the float `f` (shortest digits that read back to f), so 1e-6f -> "1e-06", 1 -> "1.0".
static void py_float(char *out, size_t n, double x, int as_float) {
    int p = 1;
    char buf[64];
    for (; p < 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, x);
        if (as_float ? strtof(buf, NULL) == (float)x : strtod(buf, NULL) == x) break;
    }
    snprintf(buf, sizeof buf, "%.*e", p - 1, x);
    int e10 = atoi(strchr(buf, 'e') + 1);
    if (e10 < -4 || e10 >= 16) { // scientific, two-digit exponent at least, as Python prints it
        snprintf(out, n, "%s", buf);
        return;
    }
    int decimals = p - 1 - e10 > 0 ? p - 1 - e10 : 0;
    snprintf(out, n, "%.*f", decimals, x);
    if (!strchr(out, '.')) strncat(out, ".0", n - strlen(out) - 1);
}

char *hf_config_json(const Config *cfg, const char *torch_dtype, char *err, size_t errlen) {
    ModelDims d = config_dims(cfg);
    double expand_v = (double)d.dv / d.dk;
    if ((int)(d.dk * expand_v) != d.dv) { // FLA recomputes dv as int(head_dim * expand_v)
        set_err(err, errlen, "value head dim %d / key head dim %d has no exact FLA expand_v", d.dv, d.dk);
        return NULL;
    }
    char ev[64], eps[64], ir[64];
    py_float(ev, sizeof ev, expand_v, 0);
    py_float(eps, sizeof eps, cfg->norm_eps, 1);
    py_float(ir, sizeof ir, cfg->init_std, 1);
    // FLA's normalised attn dict (spec hybrid.md §1.1), keys sorted as json.dumps(sort_keys=True) does
    char *attn = xstrdup("null");
    if (d.n_attn) {
        Buf a = {0};
        char th[64];
        py_float(th, sizeof th, d.rope_theta, 1);
        buf_printf(&a, "{\n    \"layers\": [\n");
        for (int l = 0, k = 0; l < d.L; l++)
            if (d.kind[l] == LAYER_ATTN) buf_printf(&a, "%s      %d", k++ ? ",\n" : "", l);
        buf_printf(&a, "\n    ],\n    \"num_heads\": %d,\n    \"num_kv_heads\": %d,\n    \"qkv_bias\": %s,\n"
                   "    \"rope_theta\": %s,\n    \"window_size\": ",
                   d.Ha, d.Hkv, d.qkv_bias ? "true" : "false", th);
        if (d.window) buf_printf(&a, "%d\n  }", d.window);
        else buf_printf(&a, "null\n  }");
        free(attn);
        attn = a.p;
    }
    Buf b = {0};
    // sorted keys, as transformers' PretrainedConfig.to_json_string writes them
    buf_printf(&b,
               "{\n"
               "  \"allow_neg_eigval\": false,\n"
               "  \"architectures\": [\n    \"GatedDeltaNetForCausalLM\"\n  ],\n"
               "  \"attn\": %s,\n"
               "  \"attn_mode\": \"chunk\",\n"
               "  \"attnres_block_size\": null,\n"
               "  \"bos_token_id\": 128000,\n"
               "  \"conv_size\": %d,\n"
               "  \"dtype\": \"%s\",\n"
               "  \"eos_token_id\": 128001,\n"
               "  \"expand_v\": %s,\n"
               "  \"fuse_cross_entropy\": true,\n"
               "  \"fuse_linear_cross_entropy\": false,\n"
               "  \"fuse_norm\": true,\n"
               "  \"fuse_swiglu\": true,\n"
               "  \"head_dim\": %d,\n"
               "  \"hidden_act\": \"swish\",\n"
               "  \"hidden_ratio\": 4,\n"
               "  \"hidden_size\": %d,\n"
               "  \"initializer_range\": %s,\n"
               "  \"intermediate_size\": %d,\n"
               "  \"max_position_embeddings\": 2048,\n"
               "  \"model_type\": \"gated_deltanet\",\n"
               "  \"norm_eps\": %s,\n"
               "  \"num_heads\": %d,\n"
               "  \"num_hidden_layers\": %d,\n"
               "  \"num_v_heads\": %d,\n"
               "  \"pad_token_id\": null,\n"
               "  \"tie_word_embeddings\": true,\n"
               "  \"torch_dtype\": \"%s\",\n"
               "  \"use_cache\": true,\n"
               "  \"use_gate\": true,\n"
               "  \"use_l2warp\": false,\n"
               "  \"use_short_conv\": true,\n"
               "  \"vocab_size\": %d\n"
               "}\n",
               attn, d.K, torch_dtype, ev, d.dk, d.h, ir, d.F, eps, d.H, d.L, d.HV, torch_dtype, d.V);
    free(attn);
    return b.p;
}

// ---------------------------------------------------------------------------------------------------
// weights in

static void shape_str(char *out, size_t n, int ndim, const int64_t *shape) {
    int o = snprintf(out, n, "[");
    for (int i = 0; i < ndim && o < (int)n; i++)
        o += snprintf(out + o, n - (size_t)o, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (o < (int)n) snprintf(out + o, n - (size_t)o, "]");
}

// The shard files of dir: model.safetensors, or the distinct files of model.safetensors.index.json.
static int list_shards(const char *dir, char ***files, int *nfiles, char *err, size_t errlen) {
    char path[1100];
    *files = NULL;
    *nfiles = 0;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (file_exists(path)) {
        *files = xmalloc(sizeof(char *));
        (*files)[(*nfiles)++] = xstrdup(path);
        return 0;
    }
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (!file_exists(path)) {
        snprintf(path, sizeof path, "%s/pytorch_model.bin", dir);
        if (file_exists(path))
            return set_err(
                err, errlen,
                "%s: only safetensors weights are read; re-save with save_pretrained(safe_serialization=True)", dir);
        return set_err(err, errlen, "%s: no model.safetensors or model.safetensors.index.json", dir);
    }
    size_t len;
    char *txt = read_file(path, &len, err, errlen);
    if (!txt) return -1;
    cJSON *o = cJSON_ParseWithLength(txt, len);
    free(txt);
    const cJSON *wm = o ? cJSON_GetObjectItemCaseSensitive(o, "weight_map") : NULL;
    if (!cJSON_IsObject(wm)) {
        cJSON_Delete(o);
        return set_err(err, errlen, "%s: no \"weight_map\" object", path);
    }
    int cap = 0;
    for (const cJSON *e = wm->child; e; e = e->next) {
        if (!cJSON_IsString(e) || strchr(e->valuestring, '/')) {
            cJSON_Delete(o);
            return set_err(err, errlen, "%s: weight_map entry '%s' is not a file name in the directory", path,
                           e->string);
        }
        char full[1100];
        snprintf(full, sizeof full, "%s/%s", dir, e->valuestring);
        int seen = 0;
        for (int i = 0; i < *nfiles && !seen; i++) seen = !strcmp((*files)[i], full);
        if (seen) continue;
        if (*nfiles == cap) {
            cap = cap ? 2 * cap : 8;
            *files = xrealloc(*files, (size_t)cap * sizeof(char *));
        }
        (*files)[(*nfiles)++] = xstrdup(full);
    }
    cJSON_Delete(o);
    if (!*nfiles) return set_err(err, errlen, "%s: empty weight_map", path);
    return 0;
}

int hf_load_weights(const char *dir, const ParamLayout *pl, float *params, char *err, size_t errlen) {
    char **files;
    int nf;
    if (list_shards(dir, &files, &nf, err, errlen)) return -1;
    StFile *sf = xcalloc((size_t)nf, sizeof *sf);
    unsigned char *seen = xcalloc((size_t)pl->ntensors, 1);
    const StTensor *lm_head = NULL;
    const char *lm_file = NULL;
    int rc = 0, opened = 0;
    for (int k = 0; k < nf && !rc; k++) {
        if (st_open(&sf[k], files[k], err, errlen)) {
            rc = -1;
            break;
        }
        opened = k + 1;
        for (int i = 0; i < sf[k].ntensors && !rc; i++) {
            const StTensor *t = &sf[k].tensors[i];
            if (!strcmp(t->name, "lm_head.weight")) {
                lm_head = t;
                lm_file = files[k];
                continue;
            }
            const TensorInfo *ti = params_find(pl, t->name);
            if (!ti) {
                rc = set_err(err, errlen,
                             "%s: unexpected tensor '%s' (not part of a GatedDeltaNet with this config.json)", files[k],
                             t->name);
                break;
            }
            int idx = (int)(ti - pl->tensors);
            if (seen[idx]) {
                rc = set_err(err, errlen, "%s: tensor '%s' appears in two shards", files[k], t->name);
                break;
            }
            seen[idx] = 1;
            char want[64], got[64];
            shape_str(want, sizeof want, ti->ndim, ti->shape);
            shape_str(got, sizeof got, t->ndim, t->shape);
            if (strcmp(want, got) != 0) {
                rc = set_err(err, errlen, "%s: tensor '%s' has shape %s, config.json implies %s", files[k], t->name,
                             got, want);
                break;
            }
            char e2[ERR_LEN];
            if (st_to_f32(t, params + ti->off, e2, sizeof e2)) rc = set_err(err, errlen, "%s: %s", files[k], e2);
        }
    }
    for (int i = 0; i < pl->ntensors && !rc; i++)
        if (!seen[i]) {
            int missing = 0;
            for (int j = 0; j < pl->ntensors; j++) missing += !seen[j];
            rc = set_err(err, errlen, "%s: tensor '%s' missing (%d of %d model tensors missing)", dir,
                         pl->tensors[i].name, missing, pl->ntensors);
        }
    if (!rc && lm_head) { // tied: a stored copy must equal the embeddings
        const TensorInfo *emb = &pl->tensors[0];
        char want[64], got[64];
        shape_str(want, sizeof want, emb->ndim, emb->shape);
        shape_str(got, sizeof got, lm_head->ndim, lm_head->shape);
        if (strcmp(want, got) != 0)
            rc = set_err(err, errlen, "%s: tensor 'lm_head.weight' has shape %s, expected %s (tied to the embeddings)",
                         lm_file, got, want);
        enum { CH = 1 << 16 };
        float *tmp = xmalloc(CH * sizeof(float));
        for (uint64_t i = 0; !rc && i < lm_head->numel; i += CH) {
            StTensor part = *lm_head;
            part.numel = lm_head->numel - i < CH ? lm_head->numel - i : CH;
            part.data = lm_head->data + i * st_dtype_size(lm_head->dtype);
            if (st_to_f32(&part, tmp, err, errlen)) {
                rc = -1;
                break;
            }
            const float *e = params + pl->embeddings + i;
            for (uint64_t j = 0; j < part.numel; j++)
                if (memcmp(&tmp[j], &e[j], 4) != 0) {
                    uint64_t at = i + j;
                    rc = set_err(err, errlen,
                                 "%s: 'lm_head.weight' differs from 'model.embeddings.weight' at [%llu, %llu] "
                                 "(%g vs %g) although tie_word_embeddings is true; gdn.c models tie them",
                                 lm_file, (unsigned long long)(at / (uint64_t)emb->shape[1]),
                                 (unsigned long long)(at % (uint64_t)emb->shape[1]), tmp[j], e[j]);
                    break;
                }
        }
        free(tmp);
    }
    for (int k = 0; k < opened; k++) st_close(&sf[k]);
    for (int k = 0; k < nf; k++) free(files[k]);
    free(files);
    free(sf);
    free(seen);
    return rc;
}

int hf_load_model(const char *dir, Config *cfg, float **params, char *err, size_t errlen) {
    *params = NULL;
    if (hf_read_config(dir, cfg, err, errlen)) return -1;
    ModelDims d = config_dims(cfg);
    ParamLayout pl;
    params_layout(&pl, &d);
    *params = xmalloc(pl.total * sizeof(float));
    int rc = hf_load_weights(dir, &pl, *params, err, errlen);
    params_layout_free(&pl);
    if (rc) {
        free(*params);
        *params = NULL;
    }
    return rc;
}

// ---------------------------------------------------------------------------------------------------
// export

static int is_fp32_tensor(const char *name) { // FLA creates A_log (and the Primus export keeps dt_bias) in fp32
    size_t n = strlen(name);
    return (n >= 11 && !strcmp(name + n - 11, ".attn.A_log")) || (n >= 13 && !strcmp(name + n - 13, ".attn.dt_bias"));
}

// The content of the added token with `id` in a tokenizer.json, or NULL.
static char *added_token(const cJSON *tok, int id) {
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(tok, "added_tokens");
    for (const cJSON *e = arr ? arr->child : NULL; e; e = e->next) {
        const cJSON *i = cJSON_GetObjectItemCaseSensitive(e, "id"), *c = cJSON_GetObjectItemCaseSensitive(e, "content");
        if (cJSON_IsNumber(i) && (int)i->valuedouble == id && cJSON_IsString(c)) return xstrdup(c->valuestring);
    }
    return NULL;
}

static int export_tokenizer(const char *out_dir, const char *tokenizer, char *err, size_t errlen) {
    struct stat sb;
    if (stat(tokenizer, &sb) != 0) return set_err(err, errlen, "--tokenizer %s: %s", tokenizer, strerror(errno));
    char src[1100], dst[1100];
    int from_dir = S_ISDIR(sb.st_mode);
    if (from_dir)
        snprintf(src, sizeof src, "%s/tokenizer.json", tokenizer);
    else
        snprintf(src, sizeof src, "%s", tokenizer);
    size_t len;
    char *txt = read_file(src, &len, err, errlen);
    if (!txt) return -1;
    cJSON *tok = cJSON_ParseWithLength(txt, len);
    if (!tok || !cJSON_IsObject(tok) || !cJSON_GetObjectItemCaseSensitive(tok, "model")) {
        cJSON_Delete(tok);
        free(txt);
        return set_err(err, errlen, "%s: not a HuggingFace tokenizer.json (no \"model\" object)", src);
    }
    snprintf(dst, sizeof dst, "%s/tokenizer.json", out_dir);
    int rc = write_file_atomic(dst, txt, len, err, errlen);
    free(txt);
    // tokenizer_config.json / special_tokens_map.json: copied from a tokenizer directory when there,
    // else written for PreTrainedTokenizerFast with the BOS/EOS of config.json (128000 / 128001).
    const char *extra[2] = {"tokenizer_config.json", "special_tokens_map.json"};
    char *bos = added_token(tok, 128000), *eos = added_token(tok, 128001);
    for (int i = 0; i < 2 && !rc; i++) {
        snprintf(dst, sizeof dst, "%s/%s", out_dir, extra[i]);
        snprintf(src, sizeof src, "%s/%s", tokenizer, extra[i]);
        if (from_dir && file_exists(src)) {
            char *c = read_file(src, &len, err, errlen);
            rc = c ? write_file_atomic(dst, c, len, err, errlen) : -1;
            free(c);
            continue;
        }
        cJSON *o = cJSON_CreateObject();
        if (bos) cJSON_AddStringToObject(o, "bos_token", bos);
        if (eos) cJSON_AddStringToObject(o, "eos_token", eos);
        if (i == 0) {
            cJSON_AddBoolToObject(o, "clean_up_tokenization_spaces", 1);
            const char *names[2] = {"input_ids", "attention_mask"};
            cJSON_AddItemToObject(o, "model_input_names", cJSON_CreateStringArray(names, 2));
            cJSON_AddNumberToObject(o, "model_max_length", 131072);
            cJSON_AddStringToObject(o, "tokenizer_class", "PreTrainedTokenizerFast");
        }
        char *s = cJSON_Print(o);
        cJSON_Delete(o);
        rc = write_file_atomic(dst, s, strlen(s), err, errlen);
        free(s);
    }
    free(bos);
    free(eos);
    cJSON_Delete(tok);
    return rc;
}

int hf_export(const char *out_dir, const Config *cfg, const ParamLayout *pl, const float *params, StDtype dtype,
              const char *tokenizer, char *err, size_t errlen) {
    if (dtype != ST_F32 && dtype != ST_BF16) return set_err(err, errlen, "HF export dtype must be F32 or BF16");
    if (mkdir_p(out_dir)) return set_err(err, errlen, "cannot create %s: %s", out_dir, strerror(errno));
    char path[1100];
    char *js = hf_config_json(cfg, dtype == ST_BF16 ? "bfloat16" : "float32", err, errlen);
    if (!js) return -1;
    snprintf(path, sizeof path, "%s/config.json", out_dir);
    int rc = write_file_atomic(path, js, strlen(js), err, errlen);
    free(js);
    if (rc) return -1;
    StWriter *w = st_writer_new();
    st_writer_meta(w, "format", "pt"); // transformers refuses safetensors files without it
    for (int i = 0; i < pl->ntensors; i++) {
        const TensorInfo *t = &pl->tensors[i];
        st_writer_add_f32_as(w, t->name, is_fp32_tensor(t->name) ? ST_F32 : dtype, t->ndim, t->shape, params + t->off);
    }
    snprintf(path, sizeof path, "%s/model.safetensors", out_dir);
    rc = st_writer_save(w, path, err, errlen);
    st_writer_free(w);
    if (rc) return -1;
    if (tokenizer && *tokenizer) return export_tokenizer(out_dir, tokenizer, err, errlen);
    return 0;
}
