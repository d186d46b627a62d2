// restart.h: one fixed command line for every (re)start (spec train.md §4.2): --load DIR without a
// checkpoint yet starts from scratch with Megatron's warning; a save dir holding checkpoints is only
// trained into with --load.
#pragma once
#include "../model/config.h"

// 1: c->load names a checkpoint to load; 0: nothing to load (no --load, or DIR has no tracker file and
// no model.safetensors: warns on the lead rank and starts from random, as Megatron does).
int restart_have_checkpoint(const Config *c, int lead);
// Dies naming the directory when c->save already holds checkpoints and this run loads none.
void restart_check_save(const Config *c, int loading);
