// checkpoint.h: gdn.c training checkpoints.
//
// Layout (Megatron-like): <save>/iter_%07d/ holding
//   model.safetensors      fp32 parameters under their FLA HuggingFace names (params.h), __metadata__:
//                          format="gdn.c-checkpoint", version="1", config=<resolved config JSON>,
//                          iteration, consumed_samples, rng (hex of the RNG state), tokenizer_sha256, ...
//   optimizer.safetensors  AdamW state: "<name>.exp_avg", "<name>.exp_avg_sq" (fp32), metadata step
//                          (absent in weights-only checkpoints, e.g. converted ones)
//   DONE                   written last: a directory without it is incomplete and never loaded
// and <save>/latest_checkpointed_iteration.txt = N (updated atomically after DONE).
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "../model/config.h"
#include "../model/params.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int64_t iteration;         // optimizer steps done
    int64_t consumed_samples;  // data position
    int64_t consumed_valid_samples; // validation sampler position (Megatron's args.consumed_valid_samples); -1 = absent
    uint64_t rng_state[4];     // trainer RNG (reserved for dropout-free determinism checks)
    char tokenizer_sha256[65]; // "" if unknown
} CkptState;

// Writes iter dir for st->iteration. params: host fp32 [pl->total]; adam_m/adam_v may be NULL (weights only).
int ckpt_save(const char *save_dir, const Config *cfg, const ParamLayout *pl, const float *params,
              const float *adam_m, const float *adam_v, const CkptState *st, char *err, size_t errlen);
// Resolves `path` (a save dir with latest_checkpointed_iteration.txt, or an iter_N dir, or a file
// model.safetensors) to the iter dir; reads its config (cfg_out may be NULL).
int ckpt_resolve(const char *path, char *iter_dir, size_t n, char *err, size_t errlen);
int ckpt_read_config(const char *iter_dir, Config *cfg_out, char *err, size_t errlen);
// Loads params (host fp32 [pl->total]); adam_m/adam_v (nullable) from optimizer.safetensors; st (nullable).
// Every tensor of pl must be present with its shape; extra tensors are errors. Returns -1 + err naming
// the tensor on mismatch. *has_optim set to whether optimizer state was found.
int ckpt_load(const char *iter_dir, const ParamLayout *pl, float *params, float *adam_m, float *adam_v,
              int *has_optim, CkptState *st, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
