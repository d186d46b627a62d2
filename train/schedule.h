// schedule.h: Megatron's learning-rate schedule (OptimizerParamScheduler): linear warmup from 0, then
// cosine or linear decay to min_lr over lr_decay_iters, min_lr after; constant keeps lr.
#pragma once
#include "../model/config.h"
// LR for the update that follows `done` completed steps (the first update uses lr_at(c, 0)).
double lr_at(const Config *c, long done);
