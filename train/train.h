// train.h: pieces of the trainer shared with other subcommands (score, bench).
#pragma once
#include "../model/config.h"

double flops_per_token_megatron(const Config *c); // spec model.md §7 (a), what Megatron/Primus print
double flops_per_token_gdn(const Config *c);      // spec model.md §7 (d), a GDN-aware count
// Defaults, then --config FILE, then --key value flags; leaves unconsumed args in argv.
int train_parse_config(Config *c, int *argc, char **argv);
