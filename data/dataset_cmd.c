// dataset_cmd.c: `gdn dataset info|show`: look inside a Megatron .bin/.idx token dataset, and at the
// samples the Megatron or FLA order would train on (data/indexed.h, data/sampler.h).
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "data/indexed.h"
#include "data/sampler.h"
#include "data/tokenizer.h"
#include "util/common.h"

int cmd_dataset_blend(int argc, char **argv); // blend_cmd.c

static const char *USAGE =
    "usage: gdn dataset info PREFIX\n"
    "       gdn dataset info --config FILE.yaml [--key value ...]   a run's blend and train/valid/test split\n"
    "       gdn dataset samples --config FILE.yaml [--key value ...] --set train|valid|test [--first A] [--count N]\n"
    "       gdn dataset show PREFIX --index I [--count K] [--tokenizer PATH]\n"
    "                        [--order megatron|fla [--seq-length L] [--seed S] [--num-samples N]]\n"
    "       gdn dataset show PREFIX --order megatron|fla --step T --micro-batch-size M --world W\n"
    "                        --global-batch-size G [--seq-length L] [--seed S] [--num-samples N]\n"
    "\n"
    "PREFIX names a Megatron indexed dataset: PREFIX.idx + PREFIX.bin (MMIDIDX, spec data.md §2).\n"
    "\n"
    "info   documents, sequences, tokens, dtype, file sizes, min/mean/max sequence length.\n"
    "show   without --order: the token ids of sequence I (K sequences from I with --count).\n"
    "       with --order: the training sample at global position I (0-based count of samples consumed\n"
    "       by the run): its seq_length inputs and labels (-1 = position not trained).\n"
    "         megatron  Megatron GPTDataset: documents shuffled over the epochs that num_samples needs,\n"
    "                   samples of L+1 tokens cut from the shuffled stream, then shuffled (spec §3.1).\n"
    "         fla       FLA / HF Trainer: every sequence is one L-token chunk; HF shuffle(seed) at load,\n"
    "                   torch.randperm(N) seeded seed+epoch per epoch (spec §4.2).\n"
    "       with --step: which positions each rank reads at optimizer step T (Megatron \"single\" loader /\n"
    "       accelerate BatchSamplerShard; the same closed form), with each sample's first ids.\n"
    "\n"
    "options:\n"
    "  --index I              sequence index, or sample position with --order\n"
    "  --count K              show K consecutive entries (default 1)\n"
    "  --tokenizer PATH       tokenizer.json: also print the decoded text\n"
    "  --order megatron|fla   show training samples in that order\n"
    "  --seq-length L         tokens per sample (default 2048)\n"
    "  --seed S               the run's seed (default 42)\n"
    "  --num-samples N        samples the run draws, train_iters x global_batch_size (Megatron sizes its\n"
    "                         epochs and hence its shuffle from it; default 0 = one epoch)\n"
    "  --step T --micro-batch-size M --world W --global-batch-size G   the rank layout of step T\n";

typedef struct {
    const char *name;
    const char *value;
} Opt;

// Parses "--name value" / "--name=value" options against the allowed list; exactly one positional
// (the prefix). Dies on anything else so a typo never silently falls back to a default.
static const char *parse_args(const char *sub, int argc, char **argv, Opt *opts, int n_opts) {
    const char *prefix = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0) {
            if (prefix) die("dataset %s: unexpected argument '%s' (one PREFIX expected; see --help)", sub, a);
            prefix = a;
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        Opt *o = NULL;
        for (int k = 0; k < n_opts; k++)
            if (strlen(opts[k].name) == len && !strncmp(opts[k].name, a, len)) o = &opts[k];
        if (!o) die("dataset %s: unknown option '%.*s' (see --help)", sub, (int)len, a);
        if (eq) o->value = eq + 1;
        else if (i + 1 < argc) o->value = argv[++i];
        else die("dataset %s: %s needs a value", sub, o->name);
    }
    if (!prefix) die("dataset %s: missing PREFIX (the dataset's path without .bin/.idx; see --help)", sub);
    return prefix;
}

static const char *opt_value(Opt *opts, int n_opts, const char *name) {
    for (int k = 0; k < n_opts; k++)
        if (!strcmp(opts[k].name, name)) return opts[k].value;
    return NULL;
}

static uint64_t parse_u64(const char *opt, const char *s, uint64_t max) {
    char *end;
    errno = 0;
    if (!s || !*s || *s == '-') die("%s: expected a non-negative integer, got '%s'", opt, s ? s : "");
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v > max) die("%s: expected an integer in [0, %" PRIu64 "], got '%s'", opt, max, s);
    return v;
}

static const char *dtype_label(int code) {
    static const char *names[] = {"?", "uint8", "int8", "int16", "int32", "int64", "float64", "float32", "uint16"};
    return code >= 1 && code <= 8 ? names[code] : "?";
}

static void open_or_die(IndexedDataset *ds, const char *prefix) {
    char err[ERR_LEN];
    if (indexed_open(ds, prefix, err, sizeof err) != 0) die("%s", err);
}

// Document holding sequence i: document d = sequences [di[d], di[d+1]), where a missing leading 0
// (convert_fla_to_megatron.py's layout) counts as an implicit one.
static uint64_t doc_of_seq(const IndexedDataset *ds, uint64_t i) {
    uint64_t lo = 0, hi = ds->num_docs_entries; // count entries <= i
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if ((uint64_t)indexed_doc_index(ds, mid) <= i) lo = mid + 1;
        else hi = mid;
    }
    int leading_zero = ds->num_docs_entries > 0 && indexed_doc_index(ds, 0) == 0;
    return lo - (uint64_t)leading_zero;
}

static int cmd_info(int argc, char **argv) {
    const char *prefix = parse_args("info", argc, argv, NULL, 0);
    IndexedDataset ds;
    open_or_die(&ds, prefix);
    int leading_zero = ds.num_docs_entries > 0 && indexed_doc_index(&ds, 0) == 0;
    uint64_t docs = ds.num_docs_entries - (uint64_t)leading_zero;
    uint32_t mn = UINT32_MAX, mx = 0;
    for (uint64_t i = 0; i < ds.num_seqs; i++) {
        uint32_t len = indexed_seq_len(&ds, i);
        if (len < mn) mn = len;
        if (len > mx) mx = len;
    }
    printf("prefix:      %s\n", prefix);
    printf("dtype:       %s (code %d, %d bytes per token)\n", dtype_label(ds.dtype_code), ds.dtype_code, ds.itemsize);
    printf("documents:   %" PRIu64 " (document_indices: %" PRIu64 " entries%s)\n", docs, ds.num_docs_entries,
           ds.num_docs_entries && !leading_zero ? ", no leading 0 as convert_fla_to_megatron.py writes" : "");
    printf("sequences:   %" PRIu64 "\n", ds.num_seqs);
    printf("tokens:      %" PRIu64 "\n", ds.total_tokens);
    if (ds.num_seqs)
        printf("seq length:  min %u, mean %.2f, max %u\n", mn, (double)ds.total_tokens / (double)ds.num_seqs, mx);
    else
        printf("seq length:  (no sequences)\n");
    printf("files:       %s.idx %zu bytes, %s.bin %zu bytes\n", prefix, ds.idx_size, prefix, ds.bin_size);
    indexed_close(&ds);
    return 0;
}

static void print_ids(const char *label, const int32_t *ids, size_t n) {
    printf("%s (%zu):", label, n);
    for (size_t k = 0; k < n; k++) printf(" %d", ids[k]);
    putchar('\n');
}

static void print_text(const Tokenizer *tok, const int32_t *ids, size_t n) {
    if (!tok) return;
    size_t len = 0;
    char *text = tok_decode(tok, ids, n, 0, &len);
    fputs("text: ", stdout);
    fwrite(text, 1, len, stdout);
    putchar('\n');
    free(text);
}

static SampleOrder parse_order(const char *s) {
    if (!strcmp(s, "megatron")) return ORDER_MEGATRON;
    if (!strcmp(s, "fla")) return ORDER_FLA;
    die("--order: expected megatron or fla, got '%s'", s);
}

static int cmd_show(int argc, char **argv) {
    Opt opts[] = {{"--index", NULL},       {"--count", NULL},      {"--tokenizer", NULL},
                  {"--order", NULL},       {"--seq-length", NULL}, {"--seed", NULL},
                  {"--num-samples", NULL}, {"--step", NULL},       {"--micro-batch-size", NULL},
                  {"--world", NULL},       {"--global-batch-size", NULL}};
    const int n_opts = (int)(sizeof opts / sizeof opts[0]);
    const char *prefix = parse_args("show", argc, argv, opts, n_opts);
#define OPT(name) opt_value(opts, n_opts, name)
    const char *order_s = OPT("--order"), *step_s = OPT("--step"), *tok_path = OPT("--tokenizer");
    const char *order_only[] = {"--seq-length", "--seed", "--num-samples", "--step"};
    const char *step_only[] = {"--micro-batch-size", "--world", "--global-batch-size"};
    for (size_t k = 0; k < sizeof order_only / sizeof *order_only; k++)
        if (!order_s && OPT(order_only[k])) die("dataset show: %s needs --order megatron|fla", order_only[k]);
    for (size_t k = 0; k < sizeof step_only / sizeof *step_only; k++)
        if (!step_s && OPT(step_only[k])) die("dataset show: %s needs --step", step_only[k]);
    if (step_s && (OPT("--index") || OPT("--count") || tok_path))
        die("dataset show: --step lists a whole step; it takes no --index, --count or --tokenizer");
    if (!step_s && !OPT("--index")) die("dataset show: --index I is required (or --order ... --step T)");
    uint64_t first = OPT("--index") ? parse_u64("--index", OPT("--index"), UINT64_MAX) : 0;
    uint64_t count = OPT("--count") ? parse_u64("--count", OPT("--count"), UINT64_MAX - first) : 1;

    IndexedDataset ds;
    open_or_die(&ds, prefix);
    Tokenizer *tok = NULL;
    if (tok_path) {
        char err[ERR_LEN];
        tok = tok_load(tok_path, err, sizeof err);
        if (!tok) die("%s", err);
    }

    if (!order_s) { // raw sequences
        if (first + count > ds.num_seqs)
            die("--index: sequence %" PRIu64 " is out of range: %s has %" PRIu64 " sequences",
                first >= ds.num_seqs ? first : ds.num_seqs, prefix, ds.num_seqs);
        for (uint64_t i = first; i < first + count; i++) {
            uint32_t len = indexed_seq_len(&ds, i);
            uint64_t off = indexed_seq_offset(&ds, i);
            int32_t *ids = xmalloc(((size_t)len + 1) * sizeof *ids);
            indexed_read_tokens(&ds, off, len, ids);
            printf("sequence %" PRIu64 " (document %" PRIu64 ", %u tokens at token offset %" PRIu64 ")\n", i,
                   doc_of_seq(&ds, i), len, off);
            print_ids("ids", ids, len);
            print_text(tok, ids, len);
            free(ids);
        }
    } else {
        SampleOrder order = parse_order(order_s);
        int L = (int)parse_u64("--seq-length", OPT("--seq-length") ? OPT("--seq-length") : "2048", 1 << 24);
        uint64_t seed = parse_u64("--seed", OPT("--seed") ? OPT("--seed") : "42", UINT64_MAX);
        uint64_t num_samples = parse_u64("--num-samples", OPT("--num-samples") ? OPT("--num-samples") : "0", UINT64_MAX);
        char err[ERR_LEN];
        Sampler *s = sampler_open(&ds, order, L, num_samples, seed, err, sizeof err);
        if (!s) die("%s: %s", prefix, err);
        uint64_t size = sampler_size(s);
        // Range checks before any output, so that a failing command prints only its error.
        if (order == ORDER_MEGATRON && !step_s && first + count > size)
            die("--index: position %" PRIu64 " is beyond the %" PRIu64
                " samples of the index (pass the run's --num-samples to build a larger one)",
                first >= size ? first : size, size);
        uint64_t step = 0;
        int M = 0, W = 0, G = 0, accum = 0;
        if (step_s) {
            step = parse_u64("--step", step_s, UINT64_MAX);
            const char *need[] = {"--micro-batch-size", "--world", "--global-batch-size"};
            for (int k = 0; k < 3; k++)
                if (!OPT(need[k])) die("dataset show: --step needs %s", need[k]);
            M = (int)parse_u64("--micro-batch-size", OPT("--micro-batch-size"), INT32_MAX);
            W = (int)parse_u64("--world", OPT("--world"), INT32_MAX);
            G = (int)parse_u64("--global-batch-size", OPT("--global-batch-size"), INT32_MAX);
            if (M < 1 || W < 1 || G < 1 || (int64_t)G % ((int64_t)M * W) != 0)
                die("--global-batch-size %d must be a positive multiple of --micro-batch-size %d x --world %d", G, M, W);
            accum = G / (M * W);
            if (step >= UINT64_MAX / (uint64_t)G) die("--step %" PRIu64 " is too large", step);
            if (order == ORDER_MEGATRON && (step + 1) * (uint64_t)G > size)
                die("step %" PRIu64 " reads positions up to %" PRIu64 ", beyond the %" PRIu64
                    " samples of the index: pass the run's --num-samples",
                    step, (step + 1) * (uint64_t)G - 1, size);
        }
        printf("%s order over %s: seq_length %d, seed %" PRIu64, order_s, prefix, L, seed);
        if (order == ORDER_MEGATRON)
            printf(", num_samples %" PRIu64 " -> %" PRIu64 " samples in the index\n", num_samples, size);
        else
            printf(", %" PRIu64 " chunks per epoch\n", size);
        int32_t *inputs = xmalloc((size_t)L * sizeof *inputs), *labels = xmalloc((size_t)L * sizeof *labels);
        if (step_s) {
            printf("step %" PRIu64 ": %d ranks x %d micro-batches x %d rows\n", step, W, accum, M);
            for (int r = 0; r < W; r++)
                for (int mu = 0; mu < accum; mu++)
                    for (int j = 0; j < M; j++) {
                        uint64_t g = sampler_position(s, step, mu, r, j, M, W, G);
                        sampler_get(s, g, inputs, labels);
                        printf("rank %d micro %d row %d: position %" PRIu64 " ids", r, mu, j, g);
                        for (int t = 0; t < L && t < 8; t++) printf(" %d", inputs[t]);
                        puts(L > 8 ? " ..." : "");
                    }
        } else {
            for (uint64_t g = first; g < first + count; g++) {
                sampler_get(s, g, inputs, labels);
                if (order == ORDER_FLA) printf("sample at position %" PRIu64 " (epoch %" PRIu64 ")\n", g, g / size);
                else printf("sample at position %" PRIu64 "\n", g);
                print_ids("inputs", inputs, (size_t)L);
                print_ids("labels", labels, (size_t)L);
                print_text(tok, inputs, (size_t)L);
            }
        }
        free(inputs);
        free(labels);
        sampler_free(s);
    }
#undef OPT
    if (tok) tok_free(tok);
    indexed_close(&ds);
    return 0;
}

int cmd_dataset(int argc, char **argv) {
    if (argc < 2 || (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        fputs(USAGE, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (arg_is_help(argc, argv)) {
        fputs(USAGE, stdout);
        return 0;
    }
    const char *sub = argv[1];
    // a run's blend and split (data/blend_cmd.c): info with --config or config keys, and samples
    if ((!strcmp(sub, "info") && argc > 2 && !strncmp(argv[2], "--", 2)) || !strcmp(sub, "samples"))
        return cmd_dataset_blend(argc - 1, argv + 1);
    if (!strcmp(sub, "info")) return cmd_info(argc - 2, argv + 2);
    if (!strcmp(sub, "show")) return cmd_show(argc - 2, argv + 2);
    die("dataset: unknown subcommand '%s' (expected info or show; see gdn dataset --help)", sub);
}
