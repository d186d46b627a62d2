// backend_select.c: --device cpu|cuda|auto, and the delta rule form a config asks for.
#include <string.h>

#include "../util/common.h"
#include "backend.h"

const Backend *backend_select(const char *device, const char *precision) {
    char err[ERR_LEN] = "";
    int bf16 = strcmp(precision, "fp32") != 0;
    if (!strcmp(device, "cpu")) return backend_cpu();
    if (!strcmp(device, "cuda")) {
        const Backend *be = backend_cuda(bf16, err, sizeof err);
        if (!be) die("--device cuda: %s", err);
        return be;
    }
    if (!strcmp(device, "auto") || !device[0]) {
        const Backend *be = backend_cuda(bf16, err, sizeof err);
        return be ? be : backend_cpu();
    }
    die("unknown device '%s' (expected cpu, cuda or auto)", device);
}

const Backend *backend_with_delta_rule(const Backend *be, const char *delta_rule) {
    if (!strcmp(delta_rule, "chunk")) return be;
    if (strcmp(delta_rule, "recurrent")) die("delta_rule must be chunk or recurrent (got '%s')", delta_rule);
    if (be != backend_cpu()) die("delta_rule=recurrent is the CPU reference form; use chunk on %s", be->name);
    return backend_cpu_recurrent();
}
