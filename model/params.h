// params.h: the one list of model tensors. Everything else (flat-buffer offsets, init, weight decay,
// checkpoint names, FLA HuggingFace names and shapes, parameter counts) is derived from it.
//
// All parameters live in one flat fp32 buffer (and grads, AdamW m and v in buffers of the same layout).
// Within a block the tensors are ordered so that fused GEMMs see one contiguous weight matrix:
//   q|k|v|g|b|a _proj  -> one [2Kd+2Vd+2HV, h] "in_proj" (Megatron's row order, spec model.md §6)
//   q|k|v _conv1d      -> one [2Kd+Vd, K] depthwise conv
//   gate|up _proj      -> one [2F, h] "fc1"
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "config.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { INIT_NORMAL, INIT_ONES, INIT_A_LOG, INIT_DT_BIAS, INIT_ZEROS };

// X(field, hf_suffix, meg_sub, meg, meg_te, meg_fp32, ndim, d0, d1, d2, init, decay). Shapes use ModelDims d
// (see params.c). hf_suffix: FLA HuggingFace name after "model.layers.<l>.". Megatron: the tensor lives in
// sublayer decoder.layers.<2l + meg_sub> (0: the mixer, 1: the MLP) under the name meg (local spec) or
// meg_te (Transformer Engine spec); consecutive tensors with the same name are row blocks of one fused
// Megatron tensor (in_proj, conv1d, linear_fc1), in this order; meg_fp32: stored fp32 whatever the dtype.
// decay follows Megatron: no weight decay on 1-D tensors (norms, A_log, dt_bias).
// A block is LAYER_TENSORS_PRE, then its kind's mixer LAYER_TENSORS_<kind> (config.h LAYER_KINDS), then
// LAYER_TENSORS_MLP: FLA's order, whatever the kind (the checkpoint prefix is "attn." for every mixer).
#define LAYER_TENSORS_PRE(X)                                                       \
    X(attn_norm, "attn_norm.weight", 0, "norm.weight", "mixer.in_proj.layer_norm_weight", 0, 1, d.h, 1, 1, INIT_ONES, 0)

#define LAYER_TENSORS_gdn(X)                                                       \
    X(q_proj, "attn.q_proj.weight", 0, "mixer.in_proj.weight", "mixer.in_proj.weight", 0, 2, d.Kd, d.h, 1, INIT_NORMAL, 1) \
    X(k_proj, "attn.k_proj.weight", 0, "mixer.in_proj.weight", "mixer.in_proj.weight", 0, 2, d.Kd, d.h, 1, INIT_NORMAL, 1) \
    X(v_proj, "attn.v_proj.weight", 0, "mixer.in_proj.weight", "mixer.in_proj.weight", 0, 2, d.Vd, d.h, 1, INIT_NORMAL, 1) \
    X(g_proj, "attn.g_proj.weight", 0, "mixer.in_proj.weight", "mixer.in_proj.weight", 0, 2, d.Vd, d.h, 1, INIT_NORMAL, 1) \
    X(b_proj, "attn.b_proj.weight", 0, "mixer.in_proj.weight", "mixer.in_proj.weight", 0, 2, d.HV, d.h, 1, INIT_NORMAL, 1) \
    X(a_proj, "attn.a_proj.weight", 0, "mixer.in_proj.weight", "mixer.in_proj.weight", 0, 2, d.HV, d.h, 1, INIT_NORMAL, 1) \
    X(A_log, "attn.A_log", 0, "mixer.A_log", "mixer.A_log", 1, 1, d.HV, 1, 1, INIT_A_LOG, 0) \
    X(dt_bias, "attn.dt_bias", 0, "mixer.dt_bias", "mixer.dt_bias", 1, 1, d.HV, 1, 1, INIT_DT_BIAS, 0) \
    X(q_conv1d, "attn.q_conv1d.weight", 0, "mixer.conv1d.weight", "mixer.conv1d.weight", 0, 3, d.Kd, 1, d.K, INIT_NORMAL, 1) \
    X(k_conv1d, "attn.k_conv1d.weight", 0, "mixer.conv1d.weight", "mixer.conv1d.weight", 0, 3, d.Kd, 1, d.K, INIT_NORMAL, 1) \
    X(v_conv1d, "attn.v_conv1d.weight", 0, "mixer.conv1d.weight", "mixer.conv1d.weight", 0, 3, d.Vd, 1, d.K, INIT_NORMAL, 1) \
    X(o_norm, "attn.o_norm.weight", 0, "mixer.out_norm.weight", "mixer.out_norm.weight", 0, 1, d.dv, 1, 1, INIT_ONES, 0) \
    X(o_proj, "attn.o_proj.weight", 0, "mixer.out_proj.weight", "mixer.out_proj.weight", 0, 2, d.h, d.Vd, 1, INIT_NORMAL, 1)

// A hybrid's attention mixer (spec hybrid.md §1.3): FLA's Attention names; q|k|v weights contiguous for one
// fused GEMM, biases likewise (zero-size, so absent, without qkv_bias). The Megatron names are placeholders:
// Megatron conversion of hybrids is refused (io/convert.c).
#define LAYER_TENSORS_attn(X)                                                      \
    X(q_proj, "attn.q_proj.weight", 0, "self_attention.linear_q.weight", "self_attention.linear_q.weight", 0, 2, d.Dq, d.h, 1, INIT_NORMAL, 1) \
    X(k_proj, "attn.k_proj.weight", 0, "self_attention.linear_k.weight", "self_attention.linear_k.weight", 0, 2, d.Dkv, d.h, 1, INIT_NORMAL, 1) \
    X(v_proj, "attn.v_proj.weight", 0, "self_attention.linear_v.weight", "self_attention.linear_v.weight", 0, 2, d.Dkv, d.h, 1, INIT_NORMAL, 1) \
    X(q_bias, "attn.q_proj.bias", 0, "self_attention.linear_q.bias", "self_attention.linear_q.bias", 0, 1, d.qkv_bias ? d.Dq : 0, 1, 1, INIT_ZEROS, 0) \
    X(k_bias, "attn.k_proj.bias", 0, "self_attention.linear_k.bias", "self_attention.linear_k.bias", 0, 1, d.qkv_bias ? d.Dkv : 0, 1, 1, INIT_ZEROS, 0) \
    X(v_bias, "attn.v_proj.bias", 0, "self_attention.linear_v.bias", "self_attention.linear_v.bias", 0, 1, d.qkv_bias ? d.Dkv : 0, 1, 1, INIT_ZEROS, 0) \
    X(o_proj, "attn.o_proj.weight", 0, "self_attention.linear_proj.weight", "self_attention.linear_proj.weight", 0, 2, d.h, d.Dq, 1, INIT_NORMAL, 1)

#define LAYER_TENSORS_MLP(X)                                                       \
    X(mlp_norm, "mlp_norm.weight", 1, "pre_mlp_layernorm.weight", "mlp.linear_fc1.layer_norm_weight", 0, 1, d.h, 1, 1, INIT_ONES, 0) \
    X(gate_proj, "mlp.gate_proj.weight", 1, "mlp.linear_fc1.weight", "mlp.linear_fc1.weight", 0, 2, d.F, d.h, 1, INIT_NORMAL, 1) \
    X(up_proj, "mlp.up_proj.weight", 1, "mlp.linear_fc1.weight", "mlp.linear_fc1.weight", 0, 2, d.F, d.h, 1, INIT_NORMAL, 1) \
    X(down_proj, "mlp.down_proj.weight", 1, "mlp.linear_fc2.weight", "mlp.linear_fc2.weight", 0, 2, d.h, d.F, 1, INIT_NORMAL, 1)

// Element offsets of one block's tensors in the flat buffer: the shared ones, and per kind its mixer's
// (LayerOffsets_gdn: w->gdn.q_proj; only the block's own kind is set).
#define X(field, ...) size_t field;
#define K(e, kind) typedef struct { LAYER_TENSORS_##kind(X) } LayerOffsets_##kind;
LAYER_KINDS(K)
#undef K
typedef struct {
    LAYER_TENSORS_PRE(X)
    LAYER_TENSORS_MLP(X)
#define K(e, kind) LayerOffsets_##kind kind;
    LAYER_KINDS(K)
#undef K
} LayerOffsets;
#undef X

typedef struct {
    char name[96];    // FLA HuggingFace name, e.g. "model.layers.3.attn.q_proj.weight"
    int ndim;
    int64_t shape[3];
    size_t off, numel; // in elements of the flat buffer
    int init, decay;
    int layer;        // block index, -1 for global tensors
    int kind;         // the block's LayerKind, -1 for global tensors
    // Megatron: name in sublayer 2*layer + meg_sub (global tensors: the full name), local and TE spec
    const char *meg, *meg_te;
    int meg_sub, meg_fp32;
} TensorInfo;

typedef struct {
    ModelDims d;
    size_t embeddings;      // [V, h], tied with lm_head
    LayerOffsets *layer;    // [L]
    size_t norm;            // final norm [h]
    TensorInfo *tensors;    // in flat-buffer order
    int ntensors;
    size_t total;           // elements in the flat buffer
} ParamLayout;

void params_layout(ParamLayout *pl, const ModelDims *d);
void params_layout_free(ParamLayout *pl);
const TensorInfo *params_find(const ParamLayout *pl, const char *hf_name);
// FLA init (spec model.md §4), deterministic in seed, into a host fp32 buffer of pl->total elements.
void params_init(const ParamLayout *pl, float *host, uint64_t seed);
// Human-readable count, e.g. 307,767,232.
void format_count(char *out, size_t n, uint64_t v);

#ifdef __cplusplus
}
#endif
