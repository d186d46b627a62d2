// doc_starts.c: where each packed document begins (backend.h doc_starts): a token after an EOD starts a new
// document, the rule FLA uses to derive cu_seqlens from EOS ids (spec train.md §7.3). Rows are independent.
// state_reset_at_eod carries the rule from one forward call with a state to the next.
#include <string.h>

#include "cpu/cpu_ops.h"

void cpu_doc_starts(int32_t *doc_start, const int32_t *ids, int B, int T, int32_t eod) {
    CPU_REQUIRE(doc_start && ids, "doc_starts", "NULL pointer (doc_start, ids)");
    CPU_REQUIRE(B >= 0 && T >= 0, "doc_starts", "bad shape B=%d T=%d", B, T);
    for (int b = 0; b < B; b++) {
        const int32_t *id = ids + (size_t)b * T;
        int32_t *ds = doc_start + (size_t)b * T, cur = 0;
        for (int t = 0; t < T; t++) {
            if (t > 0 && id[t - 1] == eod) cur = t;
            ds[t] = cur;
        }
    }
}

void cpu_state_reset_at_eod(float *state, size_t row, const int32_t *ids, int B, int T, int32_t eod) {
    CPU_REQUIRE(state && ids, "state_reset_at_eod", "NULL pointer (state, ids)");
    CPU_REQUIRE(B >= 0 && T >= 1, "state_reset_at_eod", "bad shape B=%d T=%d", B, T);
    for (int b = 0; b < B; b++)
        if (ids[(size_t)b * T + T - 1] == eod) memset(state + (size_t)b * row, 0, row * sizeof(float));
}
