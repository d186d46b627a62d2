// packed_flags.h: --reset_state_at_eod true|false and --eos_token_id N for gdn logits / gdn score.
#pragma once
#include "config.h"

#define PACKED_FLAGS_USAGE "[--reset_state_at_eod true|false] [--eos_token_id N]"
#define PACKED_FLAGS_HELP                                                                                   \
    "--reset_state_at_eod true: a token after --eos_token_id (default: the model's, 128001) starts a new document\n" \
    "from a zero delta-rule state and conv history, as FLA's cu_seqlens.\n"

// Applies the two flags (when present) to c, dying with the flag and the reason on a bad value.
void packed_flags_apply(Config *c, int argc, char **argv, const char *cmd);
