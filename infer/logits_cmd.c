// logits_cmd.c: `gdn logits` — raw logits of one token sequence, for parity checks against other
// implementations (scripts/gpu_check.sh compares them with FLA's).
#include <stdlib.h>
#include <string.h>

#include "../model/gdn.h"
#include "../io/model_load.h"
#include "../util/args.h"
#include "../util/common.h"

int cmd_logits(int argc, char **argv) {
    if (arg_is_help(argc, argv) || argc < 2) {
        printf("usage: gdn logits --load MODEL --ids FILE --out FILE [--device cpu|cuda|auto] [--precision bf16|fp32]\n"
               "FILE --ids: int32 little-endian token ids (one sequence). --out: float32 [T, vocab] row-major.\n");
        return argc < 2 ? 2 : 0;
    }
    static const ArgSpec spec[] = {{"--load", ARG_STR, 0, 0},   {"--ids", ARG_STR, 0, 0},       {"--out", ARG_STR, 0, 0},
                                   {"--device", ARG_STR, 0, 0}, {"--precision", ARG_STR, 0, 0}};
    Args a;
    args_parse(&a, "logits", argc, argv, spec, sizeof spec / sizeof spec[0], 0);
    const char *load = args_str(&a, "--load", NULL), *idf = args_str(&a, "--ids", NULL), *outf = args_str(&a, "--out", NULL);
    const char *dev = args_str(&a, "--device", NULL), *prec = args_str(&a, "--precision", NULL);
    if (!load || !idf || !outf) die("logits: --load, --ids and --out are required");
    char err[ERR_LEN];
    size_t len;
    char *raw = read_file(idf, &len, err, sizeof err);
    if (!raw) die("%s", err);
    if (len == 0 || len % 4) die("%s: %zu bytes is not a non-empty int32 array", idf, len);
    int T = (int)(len / 4);
    Model *m = model_open(load, dev, prec, err, sizeof err);
    if (!m) die("%s", err);
    const Config c = m->cfg;
    model_forward(m, (const int32_t *)raw, 1, T);
    float *logits = xmalloc((size_t)T * c.vocab_size * sizeof(float));
    model_logits(m, 0, T, logits);
    if (write_file_atomic(outf, logits, (size_t)T * c.vocab_size * sizeof(float), err, sizeof err)) die("%s", err);
    printf("logits: %d x %d written to %s (%s)\n", T, c.vocab_size, outf, m->be->name);
    free(logits); free(raw);
    model_free(m);
    return 0;
}
