// hf.h: FLA HuggingFace checkpoints (spec model.md §5): a directory with config.json (a dump of FLA's
// GatedDeltaNetConfig) and model.safetensors (or shards listed in model.safetensors.index.json) holding
// the tensors under the names of params.h; lm_head.weight absent or a copy of the tied embeddings.
#pragma once
#include <stddef.h>

#include "../model/config.h"
#include "../model/params.h"
#include "safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

// "300M" / "1B" when the shape is one of the two pure-GDN reference models, else NULL.
const char *hf_model_name(const ModelDims *d);
// One line describing the model: name or "custom", dims and parameter count.
void hf_describe(char *out, size_t n, const ModelDims *d, size_t total_params);

// Reads <dir>/config.json with FLA's defaults and rules (num_v_heads null = num_heads, v head dim =
// head_dim * expand_v, intermediate_size null = 256-rounded int(hidden_size * hidden_ratio * 2/3));
// cfg gets config_defaults() plus the model keys. Errors name the file and key.
int hf_read_config(const char *dir, Config *cfg, char *err, size_t errlen);
// config.json text for cfg (sorted keys, 2-space indent, like transformers' save_pretrained).
// torch_dtype: "bfloat16" / "float32". Returns NULL + err when the shape has no FLA spelling.
char *hf_config_json(const Config *cfg, const char *torch_dtype, char *err, size_t errlen);
// Loads the weights of <dir> (any of F32/BF16/F16) into params [pl->total]; every tensor of pl must be
// present exactly once with its shape; lm_head.weight may be absent or must equal the embeddings.
int hf_load_weights(const char *dir, const ParamLayout *pl, float *params, char *err, size_t errlen);
// config + weights (the contract of io/model_load.c): *params malloc'd.
int hf_load_model(const char *dir, Config *cfg, float **params, char *err, size_t errlen);
// Writes out_dir/{config.json, model.safetensors} (A_log and dt_bias F32, the rest in `dtype`, no lm_head),
// and, when tokenizer is a tokenizer.json file or a directory holding one, the tokenizer files.
int hf_export(const char *out_dir, const Config *cfg, const ParamLayout *pl, const float *params, StDtype dtype,
              const char *tokenizer, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
