// params_cmd.c: `gdn params` — the tensor table and parameter count of a config.
#include <stdio.h>
#include <string.h>

#include "../model/params.h"
#include "../util/common.h"
#include "train.h"

int cmd_params(int argc, char **argv) {
    if (arg_is_help(argc, argv)) {
        printf("usage: gdn params [--config FILE.yaml] [--key value ...] [--list]\n"
               "Prints the parameter count (and with --list every tensor: FLA name, shape, init, weight decay).\n");
        return 0;
    }
    int list = arg_flag(argc, argv, "--list");
    Config c;
    train_parse_config(&c, &argc, argv);
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--list")) die("unknown argument '%s'", argv[i]);
    char err[ERR_LEN];
    if (config_validate(&c, err, sizeof err)) die("%s", err);
    ModelDims d = config_dims(&c);
    ParamLayout pl;
    params_layout(&pl, &d);
    static const char *inits[] = {"normal", "ones", "A_log", "dt_bias", "zeros"};
    if (list)
        for (int i = 0; i < pl.ntensors; i++) {
            const TensorInfo *t = &pl.tensors[i];
            char shape[64];
            if (t->ndim == 1) snprintf(shape, sizeof shape, "[%lld]", (long long)t->shape[0]);
            else if (t->ndim == 2) snprintf(shape, sizeof shape, "[%lld, %lld]", (long long)t->shape[0], (long long)t->shape[1]);
            else snprintf(shape, sizeof shape, "[%lld, %lld, %lld]", (long long)t->shape[0], (long long)t->shape[1], (long long)t->shape[2]);
            printf("%-44s %-20s %-8s %s\n", t->name, shape, inits[t->init], t->decay ? "decay" : "no-decay");
        }
    char total[32], nonemb[32];
    format_count(total, sizeof total, pl.total);
    format_count(nonemb, sizeof nonemb, pl.total - (size_t)d.V * d.h);
    if (d.n_attn)
        printf("hybrid: %d of %d blocks softmax attention (%s; %d q / %d kv heads of dim %d, window %d, rope_theta %g)\n",
               d.n_attn, d.L, c.attn_layers, d.Ha, d.Hkv, d.da, d.window, d.rope_theta);
    printf("parameters: %s (non-embedding %s; lm_head tied to the embeddings)\n", total, nonemb);
    params_layout_free(&pl);
    return 0;
}
