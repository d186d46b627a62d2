// blend_cmd.c: `gdn dataset info --config X.yaml [--key value ...]` shows a run's blend and split (per
// set: prefixes, sequence ranges, tokens, samples, weights); `gdn dataset samples ...` prints its items.
#include <stdlib.h>
#include <string.h>

#include "data/blend.h"
#include "util/common.h"

static const char *BLEND_USAGE =
    "usage: gdn dataset info --config FILE.yaml [--key value ...]\n"
    "       gdn dataset samples --config FILE.yaml [--key value ...] --set train|valid|test [--first A] [--count N]\n"
    "The run's datasets as gdn train builds them from data_path + split, or train/valid/test_data_path (each a\n"
    "prefix, 'A B' or 'w1 A w2 B'); the requested sizes follow train_iters, global_batch_size, eval_interval and\n"
    "eval_iters (Megatron's rules). samples prints item g of a set per line: 'g dataset item : L+1 tokens'\n"
    "(inputs, then the last label), dataset/item naming the blended dataset and its item.\n";

static const char *take(int *argc, char **argv, const char *flag) {
    for (int i = 1; i + 1 < *argc; i++)
        if (!strcmp(argv[i], flag)) {
            const char *v = argv[i + 1];
            memmove(argv + i, argv + i + 2, (size_t)(*argc - i - 2) * sizeof *argv);
            *argc -= 2;
            return v;
        }
    return NULL;
}

static Datasets *open_from_args(int *argc, char **argv, Config *c) {
    char err[ERR_LEN];
    config_defaults(c);
    const char *cfg = take(argc, argv, "--config");
    if (cfg && config_load_yaml(c, cfg, err, sizeof err)) die("%s", err);
    if (config_apply_flags(c, argc, argv, err, sizeof err)) die("%s", err);
    if (*argc > 1) die("dataset: unknown argument '%s' (see gdn dataset info --help)", argv[1]);
    if (config_validate(c, err, sizeof err)) die("%s", err);
    Datasets *d = datasets_open(c, err, sizeof err);
    if (!d) die("%s", err);
    return d;
}

// argv[0] is the subcommand name (info or samples).
int cmd_dataset_blend(int argc, char **argv) {
    if (arg_is_help(argc, argv)) { fputs(BLEND_USAGE, stdout); return 0; }
    int samples = !strcmp(argv[0], "samples");
    const char *set = samples ? take(&argc, argv, "--set") : NULL, *first = samples ? take(&argc, argv, "--first") : NULL;
    const char *count = samples ? take(&argc, argv, "--count") : NULL;
    Config c;
    Datasets *d = open_from_args(&argc, argv, &c);
    if (!samples) {
        datasets_describe(d, stdout);
        datasets_free(d);
        return 0;
    }
    int split = !set ? -1 : !strcmp(set, "train") ? SPLIT_TRAIN : !strcmp(set, "valid") ? SPLIT_VALID : !strcmp(set, "test") ? SPLIT_TEST : -1;
    if (split < 0) die("dataset samples: --set must be train, valid or test");
    if (!datasets_has(d, split)) die("dataset samples: the %s set has no dataset", set);
    uint64_t a = first ? strtoull(first, NULL, 10) : 0, n = count ? strtoull(count, NULL, 10) : datasets_size(d, split) - a;
    if (a + n > datasets_size(d, split)) die("dataset samples: items [%llu, %llu) are beyond the set's %llu", (unsigned long long)a, (unsigned long long)(a + n), (unsigned long long)datasets_size(d, split));
    int L = c.seq_length;
    int32_t *in = xmalloc((size_t)L * sizeof *in), *lab = xmalloc((size_t)L * sizeof *lab);
    for (uint64_t g = a; g < a + n; g++) {
        int k;
        uint64_t item;
        datasets_locate(d, split, g, &k, &item);
        datasets_get(d, split, g, in, lab);
        printf("%llu %d %llu :", (unsigned long long)g, k, (unsigned long long)item);
        for (int t = 0; t < L; t++) printf(" %d", in[t]);
        printf(" %d\n", lab[L - 1]);
    }
    free(in); free(lab);
    datasets_free(d);
    return 0;
}
