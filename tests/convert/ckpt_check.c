// ckpt_check.c: checkpoint save/load tests (built and run by tests/t_convert_ckpt.sh).
//  - save with AdamW state, load back: params, m, v and the state bit-identical; config round trip
//  - resolve: save dir (latest_checkpointed_iteration.txt), iter dir, model.safetensors file
//  - weights-only re-save of the same iteration drops the stale optimizer file
//  - a directory without DONE is refused by resolve and load ("incomplete checkpoint")
//  - a save that fails midway (model.safetensors cannot be renamed into place) leaves no DONE
//  - a different model shape: the error names the tensor and both shapes; an extra tensor is named
//  - 300M / 1B recognised from their shapes, with the spec's parameter counts
// Usage: ckpt_check DIR (an empty scratch directory)
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/checkpoint.h"
#include "io/hf.h"
#include "io/safetensors.h"
#include "util/common.h"

#include "../check.h"

static void small_config(Config *c) {
    config_defaults(c);
    c->hidden_size = 32;
    c->num_layers = 4;
    c->ffn_hidden_size = 48;
    c->num_heads = 2;
    c->num_v_heads = 4;
    c->head_dim = 8;
    c->v_head_dim = 16;
    c->vocab_size = 50;
    c->lr = 3e-4f;
}

static void fill(float *p, size_t n, uint32_t seed) {
    uint32_t s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        union {
            uint32_t u;
            float f;
        } v = {(s >> 9) | 0x3f800000u}; // [1, 2): every mantissa bit matters
        p[i] = (v.f - 1.5f) * (float)(1 + i % 7);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) die("usage: ckpt_check SCRATCH_DIR");
    const char *root = argv[1];
    char save[600], iter[700], path[800], err[ERR_LEN];
    snprintf(save, sizeof save, "%s/run", root);
    Config cfg;
    small_config(&cfg);
    CHECK(config_validate(&cfg, err, sizeof err) == 0, "config: %s", err);
    ModelDims d = config_dims(&cfg);
    ParamLayout pl;
    params_layout(&pl, &d);
    size_t n = pl.total, bytes = n * sizeof(float);
    float *p = xmalloc(bytes), *m = xmalloc(bytes), *v = xmalloc(bytes);
    fill(p, n, 1);
    fill(m, n, 2);
    fill(v, n, 3);
    CkptState st = {.iteration = 7, .consumed_samples = 12345, .rng_state = {1, 0xdeadbeefcafef00dull, 3, UINT64_MAX}};
    strcpy(st.tokenizer_sha256, "ab12");

    // 0. non-finite weights or moments are never saved as a checkpoint (a diverged run)
    {
        float keep = p[n / 2];
        p[n / 2] = NAN;
        st.iteration = 6;
        CHECK(ckpt_save(save, &cfg, &pl, p, m, v, &st, err, sizeof err) == -1 && strstr(err, "1 of ") &&
                  strstr(err, "weights are NaN/Inf"),
              "NaN weights saved: %s", err);
        p[n / 2] = keep;
        v[3] = INFINITY;
        CHECK(ckpt_save(save, &cfg, &pl, p, m, v, &st, err, sizeof err) == -1 && strstr(err, "exp_avg_sq"),
              "Inf exp_avg_sq saved: %s", err);
        fill(v, n, 3); // restored
        snprintf(path, sizeof path, "%s/iter_0000006/DONE", save);
        CHECK(!file_exists(path), "a refused save left %s", path);
        snprintf(path, sizeof path, "%s/latest_checkpointed_iteration.txt", save);
        CHECK(!file_exists(path), "a refused save wrote %s", path);
        printf("  refused: %s\n", err);
        st.iteration = 7;
    }

    // 1. full save + load
    CHECK(ckpt_save(save, &cfg, &pl, p, m, v, &st, err, sizeof err) == 0, "save: %s", err);
    snprintf(path, sizeof path, "%s/latest_checkpointed_iteration.txt", save);
    char *latest = read_file(path, NULL, err, sizeof err);
    CHECK(latest && !strcmp(latest, "7"), "latest file '%s'", latest ? latest : err);
    free(latest);
    CHECK(ckpt_resolve(save, iter, sizeof iter, err, sizeof err) == 0, "resolve save dir: %s", err);
    char want_iter[700];
    snprintf(want_iter, sizeof want_iter, "%s/iter_0000007", save);
    CHECK(!strcmp(iter, want_iter), "resolved to %s", iter);
    float *p2 = xcalloc(n, 4), *m2 = xcalloc(n, 4), *v2 = xcalloc(n, 4);
    CkptState st2;
    int has = -1;
    CHECK(ckpt_load(iter, &pl, p2, m2, v2, &has, &st2, err, sizeof err) == 0, "load: %s", err);
    CHECK(has == 1, "has_optim %d", has);
    CHECK(!memcmp(p, p2, bytes), "params differ after round trip");
    CHECK(!memcmp(m, m2, bytes), "exp_avg differs after round trip");
    CHECK(!memcmp(v, v2, bytes), "exp_avg_sq differs after round trip");
    CHECK(st2.iteration == 7 && st2.consumed_samples == 12345, "state %lld %lld", (long long)st2.iteration,
          (long long)st2.consumed_samples);
    CHECK(!memcmp(st.rng_state, st2.rng_state, sizeof st.rng_state), "rng state differs");
    CHECK(!strcmp(st2.tokenizer_sha256, "ab12"), "tokenizer sha '%s'", st2.tokenizer_sha256);
    Config c2;
    CHECK(ckpt_read_config(iter, &c2, err, sizeof err) == 0, "read config: %s", err);
    char *j1 = config_to_json(&cfg), *j2 = config_to_json(&c2);
    CHECK(!strcmp(j1, j2), "config differs:\n%s\n%s", j1, j2);
    free(j1);
    free(j2);
    // every tensor is F32 under its HF name with the table's shape
    snprintf(path, sizeof path, "%s/model.safetensors", iter);
    StFile sf;
    CHECK(st_open(&sf, path, err, sizeof err) == 0, "%s", err);
    if (sf.map) {
        CHECK(sf.ntensors == pl.ntensors, "%d tensors in file, table has %d", sf.ntensors, pl.ntensors);
        for (int i = 0; i < pl.ntensors; i++) {
            const StTensor *t = st_find(&sf, pl.tensors[i].name);
            CHECK(t && t->dtype == ST_F32 && t->ndim == pl.tensors[i].ndim && t->numel == pl.tensors[i].numel,
                  "tensor %s in model.safetensors", pl.tensors[i].name);
        }
        CHECK(st_meta(&sf, "iteration") && !strcmp(st_meta(&sf, "iteration"), "7"), "iteration metadata");
        st_close(&sf);
    }
    // other spellings of the same checkpoint
    CHECK(ckpt_resolve(want_iter, iter, sizeof iter, err, sizeof err) == 0 && !strcmp(iter, want_iter),
          "resolve iter dir: %s", err);
    snprintf(path, sizeof path, "%s/model.safetensors", want_iter);
    CHECK(ckpt_resolve(path, iter, sizeof iter, err, sizeof err) == 0 && !strcmp(iter, want_iter),
          "resolve file: %s -> %s", err, iter);
    // loading with m/v NULL still reports the optimizer state present; st NULL is fine
    CHECK(ckpt_load(want_iter, &pl, p2, NULL, NULL, &has, NULL, err, sizeof err) == 0 && has == 1,
          "params-only load: %s", err);

    // 2. weights-only save of the same iteration: the old moments must go
    fill(p, n, 9);
    CHECK(ckpt_save(save, &cfg, &pl, p, NULL, NULL, &st, err, sizeof err) == 0, "weights-only save: %s", err);
    snprintf(path, sizeof path, "%s/optimizer.safetensors", want_iter);
    CHECK(!file_exists(path), "stale optimizer.safetensors kept");
    CHECK(ckpt_load(want_iter, &pl, p2, m2, v2, &has, &st2, err, sizeof err) == 0 && has == 0,
          "load weights-only: %s has %d", err, has);
    CHECK(!memcmp(p, p2, bytes), "weights-only params differ");

    // 3. no DONE -> refused
    snprintf(path, sizeof path, "%s/DONE", want_iter);
    CHECK(unlink(path) == 0, "unlink DONE");
    CHECK(ckpt_resolve(save, iter, sizeof iter, err, sizeof err) == -1 && strstr(err, "incomplete checkpoint"),
          "resolve without DONE: %s", err);
    CHECK(ckpt_load(want_iter, &pl, p2, NULL, NULL, NULL, NULL, err, sizeof err) == -1 &&
              strstr(err, "incomplete checkpoint"),
          "load without DONE: %s", err);
    printf("  refused: %s\n", err);

    // 4. a save that fails while writing model.safetensors leaves no DONE and no temp files
    st.iteration = 8;
    char it8[700];
    snprintf(it8, sizeof it8, "%s/iter_0000008", save);
    snprintf(path, sizeof path, "%s/model.safetensors", it8);
    CHECK(mkdir_p(path) == 0, "mkdir blocker"); // a directory where the file must go: rename fails
    CHECK(ckpt_save(save, &cfg, &pl, p, m, v, &st, err, sizeof err) == -1, "save over a blocked path succeeded");
    printf("  failed save: %s\n", err);
    snprintf(path, sizeof path, "%s/DONE", it8);
    CHECK(!file_exists(path), "DONE written after a failed save");
    snprintf(path, sizeof path, "%s/latest_checkpointed_iteration.txt", save);
    latest = read_file(path, NULL, err, sizeof err);
    CHECK(latest && !strcmp(latest, "7"), "latest moved to '%s' by a failed save", latest ? latest : "?");
    free(latest);
    char cmd[900];
    snprintf(cmd, sizeof cmd, "ls %s | grep -q tmp", it8);
    CHECK(system(cmd) != 0, "temp file left in %s", it8);

    // 5. a model of another shape: error names the tensor and both shapes
    st.iteration = 9;
    CHECK(ckpt_save(save, &cfg, &pl, p, m, v, &st, err, sizeof err) == 0, "save 9: %s", err);
    snprintf(iter, sizeof iter, "%s/iter_0000009", save);
    Config big = cfg;
    big.ffn_hidden_size = 64;
    ModelDims d2 = config_dims(&big);
    ParamLayout pl2;
    params_layout(&pl2, &d2);
    float *p3 = xmalloc(pl2.total * sizeof(float));
    CHECK(ckpt_load(iter, &pl2, p3, NULL, NULL, NULL, NULL, err, sizeof err) == -1 &&
              strstr(err, "model.layers.0.mlp.gate_proj.weight") && strstr(err, "[48, 32]") && strstr(err, "[64, 32]"),
          "shape mismatch error: %s", err);
    printf("  refused: %s\n", err);
    Config fewer = cfg;
    fewer.num_layers = 2;
    ModelDims d3 = config_dims(&fewer);
    ParamLayout pl3;
    params_layout(&pl3, &d3);
    CHECK(ckpt_load(iter, &pl3, p3, NULL, NULL, NULL, NULL, err, sizeof err) == -1 && strstr(err, "model.layers.1."),
          "extra tensor error: %s", err);
    printf("  refused: %s\n", err);
    params_layout_free(&pl2);
    params_layout_free(&pl3);
    free(p3);

    // 6. the two reference shapes are recognised by name, with the parameter counts of spec model.md §1.2
    Config ref;
    config_defaults(&ref); // the defaults are the 300M model
    for (int k = 0; k < 2; k++) {
        if (k == 1) {
            ref.hidden_size = 2048;
            ref.num_layers = 32;
            ref.ffn_hidden_size = 8192;
            ref.num_heads = 8;
            ref.num_v_heads = 16;
        }
        ModelDims rd = config_dims(&ref);
        ParamLayout rl;
        params_layout(&rl, &rd);
        char line[512];
        hf_describe(line, sizeof line, &rd, rl.total);
        printf("  %s\n", line);
        const char *name = hf_model_name(&rd);
        CHECK(name && !strcmp(name, k ? "1B" : "300M"), "model name %s", name ? name : "NULL");
        CHECK(rl.total == (k ? 1203441152u : 307767232u), "parameter count %zu", rl.total);
        CHECK(rl.ntensors == 18 * rd.L + 2, "%d tensors", rl.ntensors);
        params_layout_free(&rl);
    }
    CHECK(hf_model_name(&d) == NULL, "the test model is not a reference model");

    params_layout_free(&pl);
    free(p);
    free(m);
    free(v);
    free(p2);
    free(m2);
    free(v2);
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
