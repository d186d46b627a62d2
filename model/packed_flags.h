// packed_flags.h: --reset_state_at_eod true|false and --eos_token_id N for gdn logits / gdn score.
#pragma once
#include "../util/args.h"
#include "gdn.h"

#define PACKED_FLAGS_USAGE "[--reset_state_at_eod true|false] [--eos_token_id N]"
#define PACKED_FLAGS_HELP                                                                                   \
    "--reset_state_at_eod true: a token after --eos_token_id (default: the model's, 128001) starts a new document\n" \
    "from a zero delta-rule state and conv history, as FLA's cu_seqlens.\n"
// The two rows of a subcommand's ArgSpec list (the values are checked again by config_set).
#define PACKED_FLAGS_SPEC {"--reset_state_at_eod", ARG_STR, 0, 0}, {"--eos_token_id", ARG_INT, 0, (1 << 26) - 1}

// Applies the two flags (when given) to the model's config, dying with the flag and the reason on a bad
// value. Before the model's first forward: the activations (doc_start among them) are laid out then.
void packed_flags_apply(Model *m, const Args *a, const char *cmd);
