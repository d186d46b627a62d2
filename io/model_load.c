// model_load.c: one entry point for "a model to run": gdn.c checkpoints and FLA HuggingFace dirs.
#include "model_load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/gdn.h"
#include "../model/params.h"
#include "../util/common.h"
#include "checkpoint.h"
#include "hf.h"

int model_load_any(const char *path, Config *cfg, float **params, char *err, size_t errlen) {
    char probe[1100];
    snprintf(probe, sizeof probe, "%s/config.json", path);
    if (file_exists(probe)) return hf_load_model(path, cfg, params, err, errlen);
    char iter_dir[1024];
    if (ckpt_resolve(path, iter_dir, sizeof iter_dir, err, errlen)) return -1;
    config_defaults(cfg);
    if (ckpt_read_config(iter_dir, cfg, err, errlen)) return -1;
    ModelDims d = config_dims(cfg);
    ParamLayout pl;
    params_layout(&pl, &d);
    *params = xmalloc(pl.total * sizeof(float));
    int rc = ckpt_load(iter_dir, &pl, *params, NULL, NULL, NULL, NULL, err, errlen);
    params_layout_free(&pl);
    if (rc) { free(*params); *params = NULL; }
    return rc;
}

Model *model_open(const char *path, const char *device, const char *precision, char *err, size_t errlen) {
    Config c;
    float *params;
    if (model_load_any(path, &c, &params, err, errlen)) return NULL;
    const char *prec = precision && *precision ? precision : c.precision[0] ? c.precision : "bf16";
    Model *m = model_create(&c, backend_select(device && *device ? device : "auto", prec), 0);
    model_set_params(m, params);
    free(params);
    return m;
}

int model_find_tokenizer(const char *path, char *out, size_t n) {
    char parent[1200];
    snprintf(parent, sizeof parent, "%s", path);
    size_t k = strlen(parent);
    while (k > 1 && parent[k - 1] == '/') parent[--k] = 0; // "ckpt/iter_0000010/" -> its parent is ckpt
    char *sl = strrchr(parent, '/');
    if (sl) *sl = 0;
    else snprintf(parent, sizeof parent, ".");
    char cand[3][1300];
    snprintf(cand[0], sizeof cand[0], "%s/tokenizer.json", path);
    snprintf(cand[1], sizeof cand[1], "%s/tokenizer.json", parent);
    snprintf(cand[2], sizeof cand[2], ".assets/llama3/tokenizer.json");
    for (int i = 0; i < 3; i++)
        if (file_exists(cand[i])) return snprintf(out, n, "%s", cand[i]), 0;
    return -1;
}
