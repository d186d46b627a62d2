// optim_lp.h: internal to model/: the conversions behind model_set/get_params, model_set/get_optim and model_adamw
// when use_precision_aware_optimizer keeps the AdamW state in lower precision (model/optim_lp.c).
#pragma once
#include "gdn.h"

void model_lp_set_params(Model *m, const float *host); // with adam_rem: split into wact + remainders, small whole
void model_lp_get_params(Model *m, float *host);       // joined back, bit for bit
void model_lp_set_optim(Model *m, const float *hm, const float *hv); // fp32 moments rounded where kept at bf16
void model_lp_get_optim(Model *m, float *hm, float *hv);
void model_lp_plan(Model *m); // model_adamw's chunk table with remainders (not uploaded)
// ZeRO-1 (train/zero.c) with the state in lower precision: the masters of wact + the remainders rem_dev [lay.total]
// (backend memory, gathered) into host, the fp32-read tensors' from small; one moment [lay.total] in its storage
// (bf: at bf16 precision in act dtype) into host fp32
void model_lp_masters_to_host(Model *m, const uint16_t *rem_dev, float *host);
void model_lp_moment_to_host(const Model *m, float *host, int bf, const void *src_dev);
// bytes of one moment element as stored (bf: act dtype, else fp32)
size_t model_lp_moment_bytes(const Model *m, int bf);
// model/fp32_params.c: whether the forward reads tensor t in fp32 (kept whole in small without the masters)
int model_tensor_fp32_read(const TensorInfo *t);
