// model_load.h: open a model for inference from either a gdn.c checkpoint or an FLA HuggingFace dir.
#pragma once
#include <stddef.h>

#include "../model/config.h"

#ifdef __cplusplus
extern "C" {
#endif

// path: a gdn.c save dir / iter_N dir, or a directory with config.json + model.safetensors (FLA HF).
// Fills *cfg (model keys from the checkpoint) and *params (malloc'd host fp32, params.h layout).
int model_load_any(const char *path, Config *cfg, float **params, char *err, size_t errlen);

// A model to run (inference): loaded from path as above, on --device (NULL or "": auto) with --precision
// (NULL or "": the checkpoint's precision key, bf16 unless it was trained otherwise; the CPU is fp32
// whatever). The one way the subcommands open a model. NULL with err set if the load fails.
struct Model *model_open(const char *path, const char *device, const char *precision, char *err, size_t errlen);

// The tokenizer of the model at path, as generate, verify and eval look for it: path/tokenizer.json (an HF
// dir or a save dir), then beside path (an iter_N dir's save dir, or the dir of a model.safetensors), then
// the repository's .assets/llama3/tokenizer.json. Writes the first that exists to out; -1 when none does.
int model_find_tokenizer(const char *path, char *out, size_t n);

#ifdef __cplusplus
}
#endif
