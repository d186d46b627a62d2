// test_config.c: every numeric config key has a valid range (model/config.c), values just outside it are
// refused with the key named, its bounds are accepted, and float keys refuse values that overflow a float.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/config.h"
#include "util/common.h"

#include "check.h"

int main(void) {
    char err[ERR_LEN], v[64];
    int nnum = 0;
    for (int i = 0; i < config_nkeys(); i++) {
        int type;
        const char *k = config_key_name(i, &type);
        if (type != CK_INT && type != CK_FLOAT) continue;
        nnum++;
        double lo, hi;
        int open_lo;
        CHECK(config_key_range(k, &lo, &hi, &open_lo) == 0, "key '%s' has no range", k);
        if (config_key_range(k, &lo, &hi, &open_lo)) continue;
        Config c;
        config_defaults(&c);
        double below = open_lo ? lo : (type == CK_INT ? lo - 1 : lo - fmax(1e-3, fabs(lo) * 1e-3));
        double above = type == CK_INT ? hi + 1 : hi + fmax(1e-3, fabs(hi) * 1e-3);
        snprintf(v, sizeof v, "%.17g", below);
        CHECK(config_set(&c, k, v, err, sizeof err) == -1 && strstr(err, k) && strstr(err, "out of range"),
              "%s = %s accepted (%s)", k, v, err);
        snprintf(v, sizeof v, "%.17g", above);
        CHECK(config_set(&c, k, v, err, sizeof err) == -1 && strstr(err, "out of range"), "%s = %s accepted", k, v);
        snprintf(v, sizeof v, "%.17g", hi);
        CHECK(config_set(&c, k, v, err, sizeof err) == 0, "%s = %s (its upper bound) refused: %s", k, v, err);
        if (!open_lo) {
            snprintf(v, sizeof v, "%.17g", lo);
            CHECK(config_set(&c, k, v, err, sizeof err) == 0, "%s = %s (its lower bound) refused: %s", k, v, err);
        }
        if (type == CK_FLOAT) {
            CHECK(config_set(&c, k, "1e39", err, sizeof err) == -1 && strstr(err, "overflows a float"), "%s = 1e39: %s",
                  k, err);
            CHECK(config_set(&c, k, "nan", err, sizeof err) == -1, "%s = nan accepted", k);
        }
    }
    // a default outside its range would make every run fail: config_defaults dies on one, so reaching here is it
    CHECK(nnum >= 30, "only %d numeric keys seen", nnum);
    printf("test_config: %d numeric keys, each refused below and above its range; %d checks, %d failures\n", nnum,
           checks, failures);
    return failures != 0;
}
