// packed_flags.c: the packed-document flags of the inference subcommands (gdn logits, gdn score): the same
// keys as training, so a packed row can be checked against its documents run one by one.
#include "packed_flags.h"

#include "../util/common.h"

void packed_flags_apply(Model *m, const Args *a, const char *cmd) {
    if (m->blk) die("%s: packed-document flags applied after the first forward", cmd);
    const char *keys[] = {"reset_state_at_eod", "eos_token_id"};
    char flag[64], err[ERR_LEN];
    for (int i = 0; i < 2; i++) {
        snprintf(flag, sizeof flag, "--%s", keys[i]);
        const char *v = args_str(a, flag, NULL);
        if (v && config_set(&m->cfg, keys[i], v, err, sizeof err)) die("%s %s: %s", cmd, flag, err);
    }
    if (config_validate(&m->cfg, err, sizeof err)) die("%s: %s", cmd, err);
}
