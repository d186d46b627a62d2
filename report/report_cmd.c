// report_cmd.c: the command line of `gdn report`.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../util/common.h"
#include "report.h"

static void help(void) {
    printf("usage: gdn report RUN... [--vs REF] [--out DIR] [--iters 1,100,500] [--hf_loss_div N] [--hf_logging_steps N]\n\n"
           "Compares training runs: prints the recipe's step-6 table (iteration, REF, each RUN, delta %%, first\n"
           "crossover, mean ms/iter, tokens/s/GPU, wall time) and, with --out, writes DIR/index.html (one\n"
           "self-contained page), loss/lr/grad_norm/throughput .png and .svg, table.md and report.json.\n\n"
           "RUN and REF can be: a gdn save dir or metrics JSONL; a Megatron or Primus training log (its\n"
           "'iteration N/M | ... lm loss: ...' lines and validation blocks, or a gdn train log); an FLA/HF\n"
           "Trainer trainer_state.json, trainer_log.jsonl, output dir, or stdout log (its dict lines).\n\n"
           "  --vs REF             the reference the delta %% and the crossover are computed against\n"
           "  --out DIR            write the page and plots there\n"
           "  --iters LIST         table iterations (default 1, 100, 500, 1000, then every 1000, and the last)\n"
           "  --hf_loss_div N      divide FLA/HF losses and grad norms by N (default 8: FLA's logged loss is\n"
           "                       world_size x the mean token loss; Primus compares FLA/8 with Megatron)\n"
           "  --hf_logging_steps N step of the k-th HF stdout dict = k*N (default 32; the dicts carry no step)\n");
}

static long parse_long(const char *flag, const char *v, long lo) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo) die("report: %s: expected an integer >= %ld, got '%s'", flag, lo, v);
    return x;
}

int cmd_report(int argc, char **argv) {
    if (arg_is_help(argc, argv)) { help(); return 0; }
    ReportOpts o;
    report_opts_default(&o);
    const char *ref = NULL, *out = NULL;
    const char **runs = xcalloc((size_t)argc, sizeof(char *));
    int nruns = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || !a[1]) { runs[nruns++] = a; continue; }
        if (i + 1 >= argc) die("report: %s needs a value", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--vs")) ref = v;
        else if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--hf_loss_div")) {
            char *end;
            o.load.hf_loss_div = strtod(v, &end);
            if (end == v || *end || !(o.load.hf_loss_div > 0)) die("report: --hf_loss_div: expected a number > 0, got '%s'", v);
        } else if (!strcmp(a, "--hf_logging_steps")) o.load.hf_logging_steps = (int)parse_long(a, v, 1);
        else if (!strcmp(a, "--iters")) {
            char *list = xstrdup(v), *save = NULL;
            for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (o.n_iters == 64) die("report: --iters: at most 64 iterations");
                o.iters[o.n_iters++] = parse_long("--iters", t, 0);
            }
            free(list);
            if (!o.n_iters) die("report: --iters: empty list");
        } else die("report: unknown flag '%s' (gdn report --help)", a);
    }
    if (!nruns) die("report: no RUN given (gdn report --help)");
    char err[ERR_LEN];
    if (report_build(runs, nruns, ref, out, &o, stdout, err, sizeof err)) die("report: %s", err);
    if (out) printf("\ngdn report: wrote %s/index.html\n", out);
    free(runs);
    return 0;
}
