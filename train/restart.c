// restart.c: whether --load has something to load, and the guard against overwriting another run.
#include "train/restart.h"

#include <stdio.h>
#include <sys/stat.h>

#include "util/common.h"

static int has_tracker(const char *dir) {
    char p[1100];
    snprintf(p, sizeof p, "%s/latest_checkpointed_iteration.txt", dir);
    return file_exists(p);
}

int restart_have_checkpoint(const Config *c, int lead) {
    if (!c->load[0]) return 0;
    struct stat sb;
    if (stat(c->load, &sb) == 0 && !S_ISDIR(sb.st_mode)) return 1; // a model.safetensors file: ckpt_resolve decides
    char p[1100];
    snprintf(p, sizeof p, "%s/model.safetensors", c->load);
    if (has_tracker(c->load) || file_exists(p)) return 1;
    snprintf(p, sizeof p, "%s/mp_rank_00", c->load);
    if (file_exists(p)) return 1; // a Megatron checkpoint: ckpt_resolve says how to import it
    if (lead) {
        printf("WARNING: could not find the metadata file %s/latest_checkpointed_iteration.txt\n", c->load);
        printf("    will not load any checkpoints and will start from random\n");
        fflush(stdout);
    }
    return 0;
}

void restart_check_save(const Config *c, int loading) {
    if (!c->save[0] || loading || !has_tracker(c->save)) return;
    die("save directory %s already holds checkpoints (latest_checkpointed_iteration.txt) of another run: "
        "resume it with --load %s, or choose an empty directory",
        c->save, c->save);
}
