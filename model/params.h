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

// X(field, hf_suffix, ndim, d0, d1, d2, init, decay). Shapes use ModelDims d (see params.c).
// decay follows Megatron: no weight decay on 1-D tensors (norms, A_log, dt_bias).
#define GDN_LAYER_TENSORS(X)                                                       \
    X(attn_norm, "attn_norm.weight", 1, d.h, 1, 1, INIT_ONES, 0)                   \
    X(q_proj, "attn.q_proj.weight", 2, d.Kd, d.h, 1, INIT_NORMAL, 1)               \
    X(k_proj, "attn.k_proj.weight", 2, d.Kd, d.h, 1, INIT_NORMAL, 1)               \
    X(v_proj, "attn.v_proj.weight", 2, d.Vd, d.h, 1, INIT_NORMAL, 1)               \
    X(g_proj, "attn.g_proj.weight", 2, d.Vd, d.h, 1, INIT_NORMAL, 1)               \
    X(b_proj, "attn.b_proj.weight", 2, d.HV, d.h, 1, INIT_NORMAL, 1)               \
    X(a_proj, "attn.a_proj.weight", 2, d.HV, d.h, 1, INIT_NORMAL, 1)               \
    X(A_log, "attn.A_log", 1, d.HV, 1, 1, INIT_A_LOG, 0)                           \
    X(dt_bias, "attn.dt_bias", 1, d.HV, 1, 1, INIT_DT_BIAS, 0)                     \
    X(q_conv1d, "attn.q_conv1d.weight", 3, d.Kd, 1, d.K, INIT_NORMAL, 1)           \
    X(k_conv1d, "attn.k_conv1d.weight", 3, d.Kd, 1, d.K, INIT_NORMAL, 1)           \
    X(v_conv1d, "attn.v_conv1d.weight", 3, d.Vd, 1, d.K, INIT_NORMAL, 1)           \
    X(o_norm, "attn.o_norm.weight", 1, d.dv, 1, 1, INIT_ONES, 0)                   \
    X(o_proj, "attn.o_proj.weight", 2, d.h, d.Vd, 1, INIT_NORMAL, 1)               \
    X(mlp_norm, "mlp_norm.weight", 1, d.h, 1, 1, INIT_ONES, 0)                     \
    X(gate_proj, "mlp.gate_proj.weight", 2, d.F, d.h, 1, INIT_NORMAL, 1)           \
    X(up_proj, "mlp.up_proj.weight", 2, d.F, d.h, 1, INIT_NORMAL, 1)               \
    X(down_proj, "mlp.down_proj.weight", 2, d.h, d.F, 1, INIT_NORMAL, 1)

// A hybrid's attention blocks (spec hybrid.md §1.3), X(field, hf_suffix, ndim, d0, d1, d2, init, decay, present):
// the same names as FLA's Attention layer; q|k|v weights contiguous for one fused GEMM, biases likewise.
// Fields shared with GDN_LAYER_TENSORS reuse its offsets (attn_norm, q/k/v/o_proj, the MLP).
#define ATTN_LAYER_TENSORS(X)                                                             \
    X(attn_norm, "attn_norm.weight", 1, d.h, 1, 1, INIT_ONES, 0, 1)                       \
    X(q_proj, "attn.q_proj.weight", 2, d.Dq, d.h, 1, INIT_NORMAL, 1, 1)                   \
    X(k_proj, "attn.k_proj.weight", 2, d.Dkv, d.h, 1, INIT_NORMAL, 1, 1)                  \
    X(v_proj, "attn.v_proj.weight", 2, d.Dkv, d.h, 1, INIT_NORMAL, 1, 1)                  \
    X(q_bias, "attn.q_proj.bias", 1, d.Dq, 1, 1, INIT_ZEROS, 0, d.qkv_bias)               \
    X(k_bias, "attn.k_proj.bias", 1, d.Dkv, 1, 1, INIT_ZEROS, 0, d.qkv_bias)              \
    X(v_bias, "attn.v_proj.bias", 1, d.Dkv, 1, 1, INIT_ZEROS, 0, d.qkv_bias)              \
    X(o_proj, "attn.o_proj.weight", 2, d.h, d.Dq, 1, INIT_NORMAL, 1, 1)                   \
    X(mlp_norm, "mlp_norm.weight", 1, d.h, 1, 1, INIT_ONES, 0, 1)                         \
    X(gate_proj, "mlp.gate_proj.weight", 2, d.F, d.h, 1, INIT_NORMAL, 1, 1)               \
    X(up_proj, "mlp.up_proj.weight", 2, d.F, d.h, 1, INIT_NORMAL, 1, 1)                   \
    X(down_proj, "mlp.down_proj.weight", 2, d.h, d.F, 1, INIT_NORMAL, 1, 1)

// Element offsets of one block's tensors in the flat buffer (an attention block sets only its own).
typedef struct {
#define X(field, hf, nd, a, b, c, init, decay) size_t field;
    GDN_LAYER_TENSORS(X)
#undef X
    size_t q_bias, k_bias, v_bias; // attention blocks with qkv_bias
} LayerOffsets;

typedef struct {
    char name[96];    // FLA HuggingFace name, e.g. "model.layers.3.attn.q_proj.weight"
    int ndim;
    int64_t shape[3];
    size_t off, numel; // in elements of the flat buffer
    int init, decay;
    int layer;        // block index, -1 for global tensors
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
