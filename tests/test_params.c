// test_params.c: the tensor table with layer kinds (model/params.h, model/config.h LAYER_KINDS): each block
// is attn_norm, its kind's mixer tensors, then the MLP, in FLA's order and contiguous; tensors carry their
// block and kind, and their Megatron names (fused runs); the 300M and 1B configs give the published
// parameter counts (spec model.md §5).
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "model/config.h"
#include "model/params.h"

static const char *gdn_block[] = {"attn_norm.weight",     "attn.q_proj.weight",   "attn.k_proj.weight",
                                  "attn.v_proj.weight",   "attn.g_proj.weight",   "attn.b_proj.weight",
                                  "attn.a_proj.weight",   "attn.A_log",           "attn.dt_bias",
                                  "attn.q_conv1d.weight", "attn.k_conv1d.weight", "attn.v_conv1d.weight",
                                  "attn.o_norm.weight",   "attn.o_proj.weight",   "mlp_norm.weight",
                                  "mlp.gate_proj.weight", "mlp.up_proj.weight",   "mlp.down_proj.weight"};
enum { NB = sizeof gdn_block / sizeof gdn_block[0] };

static Config load(const char *yaml) {
    Config c;
    char err[512];
    config_defaults(&c);
    if (config_load_yaml(&c, yaml, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        checks++, failures++;
    }
    return c;
}

static void check_table(const char *yaml, size_t want_total) {
    Config c = load(yaml);
    ModelDims d = config_dims(&c);
    ParamLayout pl;
    params_layout(&pl, &d);
    CHECK(pl.ntensors == 2 + NB * d.L, "%s: %d tensors, expected %d", yaml, pl.ntensors, 2 + NB * d.L);
    CHECK(!want_total || pl.total == want_total, "%s: %zu parameters, expected %zu", yaml, pl.total, want_total);
    size_t off = 0;
    for (int i = 0; i < pl.ntensors; i++) {
        const TensorInfo *t = &pl.tensors[i];
        CHECK(t->off == off, "%s: %s at offset %zu, expected %zu (not contiguous)", yaml, t->name, t->off, off);
        off += t->numel;
        if (i == 0 || i == pl.ntensors - 1) {
            CHECK(t->layer == -1 && t->kind == -1, "%s: global %s has layer %d kind %d", yaml, t->name, t->layer,
                  t->kind);
            continue;
        }
        int l = (i - 1) / NB, j = (i - 1) % NB;
        char want[96];
        snprintf(want, sizeof want, "model.layers.%d.%s", l, gdn_block[j]);
        CHECK(!strcmp(t->name, want), "%s: tensor %d is %s, expected %s", yaml, i, t->name, want);
        CHECK(t->layer == l && t->kind == LAYER_GDN, "%s: %s has layer %d kind %d", yaml, t->name, t->layer, t->kind);
    }
    // Megatron columns: block l's runs of one name are the fused tensors, with Megatron's row counts
    for (int l = 0; l < d.L; l++) {
        int64_t in_rows = 0, conv_ch = 0, fc1_rows = 0;
        for (int i = 1 + NB * l; i < 1 + NB * (l + 1); i++) {
            const TensorInfo *t = &pl.tensors[i];
            CHECK(t->meg && t->meg_te && (t->meg_sub == 0 || t->meg_sub == 1), "%s: %s Megatron columns", yaml, t->name);
            if (!strcmp(t->meg, "mixer.in_proj.weight")) in_rows += t->shape[0];
            if (!strcmp(t->meg, "mixer.conv1d.weight")) conv_ch += t->shape[0];
            if (!strcmp(t->meg, "mlp.linear_fc1.weight")) fc1_rows += t->shape[0];
            CHECK(t->meg_fp32 == (t->init == INIT_A_LOG || t->init == INIT_DT_BIAS), "%s: %s fp32 flag", yaml, t->name);
            CHECK(t->meg_sub == (strncmp(t->meg, "mlp.", 4) && strcmp(t->meg, "pre_mlp_layernorm.weight") ? 0 : 1),
                  "%s: %s in the wrong Megatron sublayer", yaml, t->name);
        }
        CHECK(in_rows == 2 * d.Kd + 2 * d.Vd + 2 * d.HV && conv_ch == 2 * d.Kd + d.Vd && fc1_rows == 2 * d.F,
              "%s: block %d fused rows in_proj %lld conv %lld fc1 %lld", yaml, l, (long long)in_rows,
              (long long)conv_ch, (long long)fc1_rows);
    }
    CHECK(!strcmp(pl.tensors[0].meg, "embedding.word_embeddings.weight") &&
              !strcmp(pl.tensors[pl.ntensors - 1].meg, "decoder.final_norm.weight"),
          "%s: global Megatron names", yaml);
    // the per-kind offsets name the same tensors as the table
    for (int l = 0; l < d.L; l++) {
        char name[96];
        snprintf(name, sizeof name, "model.layers.%d.attn.o_proj.weight", l);
        const TensorInfo *t = params_find(&pl, name);
        CHECK(t && t->off == pl.layer[l].gdn.o_proj, "%s: block %d o_proj offset", yaml, l);
        snprintf(name, sizeof name, "model.layers.%d.mlp_norm.weight", l);
        t = params_find(&pl, name);
        CHECK(t && t->off == pl.layer[l].mlp_norm, "%s: block %d mlp_norm offset", yaml, l);
    }
    params_layout_free(&pl);
}

int main(void) {
    CHECK(!strcmp(layer_kind_name(LAYER_GDN), "gdn"), "kind name %s", layer_kind_name(LAYER_GDN));
    CHECK(!strcmp(layer_kind_name(LAYER_NKINDS), "?"), "out-of-range kind name");
    Config c = load("configs/tiny.yaml");
    ModelDims d = config_dims(&c);
    for (int l = 0; l < d.L; l++) CHECK(d.kind[l] == LAYER_GDN, "block %d kind %d", l, d.kind[l]);
    char err[512];
    c.num_layers = 2 * GDN_MAX_BLOCKS + 2;
    CHECK(config_validate(&c, err, sizeof err) != 0 && strstr(err, "num_layers"), "too many blocks accepted");
    check_table("configs/gdn-300m.yaml", 307767232);
    check_table("configs/gdn-1b.yaml", 1203441152);
    check_table("configs/tiny.yaml", 0); // no published count
    printf("%d checks, %d failed\n", checks, failures);
    return failures != 0;
}
