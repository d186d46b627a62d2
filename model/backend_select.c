// backend_select.c: --device cpu|cuda|auto.
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
