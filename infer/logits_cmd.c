// logits_cmd.c: `gdn logits` — raw logits of one token sequence, for parity checks against other
// implementations (scripts/gpu_check.sh compares them with FLA's).
#include <stdlib.h>
#include <string.h>

#include "../model/gdn.h"
#include "../model/model_load.h"
#include "../model/packed_flags.h"
#include "../util/common.h"

int cmd_logits(int argc, char **argv) {
    if (arg_is_help(argc, argv) || argc < 2) {
        printf("usage: gdn logits --load MODEL --ids FILE --out FILE [--device cpu|cuda|auto] [--precision bf16|fp32]\n"
               "                  " PACKED_FLAGS_USAGE "\n"
               "FILE --ids: int32 little-endian token ids (one sequence). --out: float32 [T, vocab] row-major.\n"
               PACKED_FLAGS_HELP);
        return argc < 2 ? 2 : 0;
    }
    const char *load = arg_get(argc, argv, "--load"), *idf = arg_get(argc, argv, "--ids"), *outf = arg_get(argc, argv, "--out");
    const char *dev = arg_get(argc, argv, "--device"), *prec = arg_get(argc, argv, "--precision");
    if (!load || !idf || !outf) die("logits: --load, --ids and --out are required");
    char err[ERR_LEN];
    size_t len;
    char *raw = read_file(idf, &len, err, sizeof err);
    if (!raw) die("%s", err);
    if (len == 0 || len % 4) die("%s: %zu bytes is not a non-empty int32 array", idf, len);
    int T = (int)(len / 4);
    Config c;
    float *params;
    if (model_load_any(load, &c, &params, err, sizeof err)) die("%s", err);
    packed_flags_apply(&c, argc, argv, "logits");
    Model *m = model_create(&c, backend_select(dev ? dev : "auto", prec ? prec : "bf16"), 0);
    model_set_params(m, params);
    free(params);
    model_forward(m, (const int32_t *)raw, 1, T);
    float *logits = xmalloc((size_t)T * c.vocab_size * sizeof(float));
    model_logits(m, 0, T, logits);
    if (write_file_atomic(outf, logits, (size_t)T * c.vocab_size * sizeof(float), err, sizeof err)) die("%s", err);
    printf("logits: %d x %d written to %s (%s)\n", T, c.vocab_size, outf, m->be->name);
    free(logits); free(raw);
    model_free(m);
    return 0;
}
