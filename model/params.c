// params.c: flat-buffer layout, names and FLA initialisation, all derived from params.h's tensor table.
#include "params.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/common.h"

static void add_tensor(ParamLayout *pl, int *cap, const char *name, int ndim, int64_t d0, int64_t d1, int64_t d2,
                       int init, int decay, int layer, int kind, int meg_sub, const char *meg, const char *meg_te,
                       int meg_fp32, size_t *off_field) {
    if ((size_t)d0 * (size_t)d1 * (size_t)d2 == 0) return; // an absent optional tensor (attention qkv biases)
    if (pl->ntensors == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        pl->tensors = xrealloc(pl->tensors, (size_t)*cap * sizeof *pl->tensors);
    }
    TensorInfo *t = &pl->tensors[pl->ntensors++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    t->shape[0] = d0; t->shape[1] = d1; t->shape[2] = d2;
    t->numel = (size_t)d0 * (size_t)d1 * (size_t)d2;
    if (ndim == 2) t->shape[2] = 0;
    if (ndim == 1) t->shape[1] = t->shape[2] = 0;
    t->off = pl->total;
    t->init = init;
    t->decay = decay;
    t->layer = layer;
    t->kind = kind;
    t->meg_sub = meg_sub;
    t->meg = meg;
    t->meg_te = meg_te;
    t->meg_fp32 = meg_fp32;
    *off_field = t->off;
    pl->total += t->numel;
}

void params_layout(ParamLayout *pl, const ModelDims *dims) {
    memset(pl, 0, sizeof *pl);
    ModelDims d = *dims;
    pl->d = d;
    pl->layer = xcalloc((size_t)d.L, sizeof *pl->layer);
    int cap = 0;
    add_tensor(pl, &cap, "model.embeddings.weight", 2, d.V, d.h, 1, INIT_NORMAL, 1, -1, -1, -1,
               "embedding.word_embeddings.weight", "embedding.word_embeddings.weight", 0, &pl->embeddings);
    for (int l = 0; l < d.L; l++) {
        char name[96];
        int kind = d.kind[l];
        LayerOffsets *lo = &pl->layer[l];
#define ADD(field_ptr, hf, msub, meg, meg_te, mf32, nd, a, b, c, init, decay)                  \
        snprintf(name, sizeof name, "model.layers.%d.%s", l, hf);                            \
        add_tensor(pl, &cap, name, nd, a, b, c, init, decay, l, kind, msub, meg, meg_te, mf32, field_ptr);
#define X(field, ...) ADD(&lo->field, __VA_ARGS__)
        LAYER_TENSORS_PRE(X)
#undef X
        switch (kind) { // the block's mixer: its tensors go to lo-><kind>.<field>
#define X(field, ...) ADD(&mix->field, __VA_ARGS__)
#define K(e, kname) case e: { LayerOffsets_##kname *mix = &lo->kname; LAYER_TENSORS_##kname(X) } break;
        LAYER_KINDS(K)
#undef K
#undef X
        default: die("block %d: unknown layer kind %d", l, kind);
        }
#define X(field, ...) ADD(&lo->field, __VA_ARGS__)
        LAYER_TENSORS_MLP(X)
#undef X
#undef ADD
    }
    add_tensor(pl, &cap, "model.norm.weight", 1, d.h, 1, 1, INIT_ONES, 0, -1, -1, -1, "decoder.final_norm.weight",
               "decoder.final_norm.weight", 0, &pl->norm);
}

void params_layout_free(ParamLayout *pl) {
    free(pl->layer);
    free(pl->tensors);
    memset(pl, 0, sizeof *pl);
}

const TensorInfo *params_find(const ParamLayout *pl, const char *hf_name) {
    for (int i = 0; i < pl->ntensors; i++)
        if (!strcmp(pl->tensors[i].name, hf_name)) return &pl->tensors[i];
    return NULL;
}

// splitmix64 stream per tensor (seeded from the seed and the tensor index) so that each tensor's init
// does not depend on the sizes of the tensors before it.
static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double uniform01(uint64_t *s) { return ((splitmix(s) >> 11) + 0.5) * 0x1.0p-53; } // (0, 1)

void params_init(const ParamLayout *pl, float *host, uint64_t seed) {
    for (int i = 0; i < pl->ntensors; i++) {
        const TensorInfo *t = &pl->tensors[i];
        float *p = host + t->off;
        uint64_t s = seed * 0x100000001b3ull + (uint64_t)i * 0x9e3779b97f4a7c15ull;
        switch (t->init) {
        case INIT_ZEROS: // qkv biases (FLA _init_weights zeroes Linear biases)
            memset(p, 0, t->numel * sizeof(float));
            break;
        case INIT_ONES:
            for (size_t j = 0; j < t->numel; j++) p[j] = 1.0f;
            break;
        case INIT_NORMAL: // Box-Muller, both outputs used
            for (size_t j = 0; j < t->numel; j += 2) {
                double u1 = uniform01(&s), u2 = uniform01(&s), r = sqrt(-2.0 * log(u1));
                p[j] = (float)(pl->d.init_std * r * cos(2 * M_PI * u2));
                if (j + 1 < t->numel) p[j + 1] = (float)(pl->d.init_std * r * sin(2 * M_PI * u2));
            }
            break;
        case INIT_A_LOG: // A ~ U(0, 16), A_log = ln A
            for (size_t j = 0; j < t->numel; j++) p[j] = (float)log(16.0 * uniform01(&s));
            break;
        case INIT_DT_BIAS: { // dt log-uniform in [1e-3, 1e-1], clamped >= 1e-4; dt_bias = softplus^-1(dt)
            for (size_t j = 0; j < t->numel; j++) {
                double dt = exp(uniform01(&s) * (log(0.1) - log(0.001)) + log(0.001));
                if (dt < 1e-4) dt = 1e-4;
                p[j] = (float)(dt + log(-expm1(-dt)));
            }
            break;
        }
        }
    }
}

void format_count(char *out, size_t n, uint64_t v) {
    char tmp[32];
    int len = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v), o = 0;
    for (int i = 0; i < len && o + 2 < (int)n; i++) {
        if (i && (len - i) % 3 == 0) out[o++] = ',';
        out[o++] = tmp[i];
    }
    out[o] = 0;
}
