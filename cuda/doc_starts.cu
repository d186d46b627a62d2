// doc_starts.cu: where each packed document begins (backend.h doc_starts; CPU twin cpu/doc_starts.c), computed
// on the device from the token ids, so a step with resets adds no host synchronisation. One block per row: each
// thread takes a contiguous span, finds the last document start in it, and a max-scan over the threads' spans
// (integers, so exact and deterministic) carries the start into the spans that have none. state_reset_at_eod
// carries the rule across forward calls with a state (zeros where a row ended in EOD).
#include "cuda/common.cuh"

enum { DS_THREADS = 256 };

__global__ void doc_starts_kernel(int32_t *doc_start, const int32_t *ids, int T_, int32_t eod) {
    __shared__ int32_t last[DS_THREADS];
    const int b = blockIdx.x, tid = threadIdx.x, span = (T_ + DS_THREADS - 1) / DS_THREADS;
    const int t0 = tid * span, t1 = min(T_, t0 + span);
    const int32_t *id = ids + (size_t)b * T_;
    int32_t cur = 0; // 0: no start in this span (position 0 starts the row anyway)
    for (int t = t0; t < t1; t++)
        if (t > 0 && id[t - 1] == eod) cur = t;
    last[tid] = cur;
    __syncthreads();
    for (int off = 1; off < DS_THREADS; off <<= 1) { // inclusive max-scan (Hillis-Steele)
        int32_t v = tid >= off ? last[tid - off] : 0;
        __syncthreads();
        last[tid] = max(last[tid], v);
        __syncthreads();
    }
    cur = tid > 0 ? last[tid - 1] : 0;
    for (int t = t0; t < t1; t++) {
        if (t > 0 && id[t - 1] == eod) cur = t;
        doc_start[(size_t)b * T_ + t] = cur;
    }
}

static void cu_doc_starts(int32_t *doc_start, const int32_t *ids, int B, int T_, int32_t eod) {
    CU_REQUIRE(doc_start && ids, "doc_starts", "NULL pointer (doc_start, ids)");
    CU_REQUIRE(B >= 0 && T_ >= 0, "doc_starts", "bad shape B=%d T=%d", B, T_);
    if (B == 0 || T_ == 0) return;
    cu_launch("doc_starts", doc_starts_kernel, dim3(B), dim3(DS_THREADS), 0, doc_start, ids, T_, eod);
}

// state_reset_at_eod: grid (blocks over the row, B); a block whose row's last token is not EOD leaves at once.
__global__ void state_reset_at_eod_kernel(float *state, size_t row, const int32_t *ids, int T_, int32_t eod) {
    const int b = blockIdx.y;
    if (ids[(size_t)b * T_ + T_ - 1] != eod) return;
    float *s = state + (size_t)b * row;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < row; i += (size_t)gridDim.x * blockDim.x)
        s[i] = 0.0f;
}

static void cu_state_reset_at_eod(float *state, size_t row, const int32_t *ids, int B, int T_, int32_t eod) {
    CU_REQUIRE(state && ids, "state_reset_at_eod", "NULL pointer (state, ids)");
    CU_REQUIRE(B >= 0 && T_ >= 1, "state_reset_at_eod", "bad shape B=%d T=%d", B, T_);
    if (B == 0 || row == 0) return;
    const size_t blocks = (row + DS_THREADS - 1) / DS_THREADS;
    cu_launch("state_reset_at_eod", state_reset_at_eod_kernel, dim3((unsigned)(blocks < 64 ? blocks : 64), B),
              dim3(DS_THREADS), 0, state, row, ids, T_, eod);
}

void cu_register_doc_starts(Backend *b) {
    b->doc_starts = cu_doc_starts;
    b->state_reset_at_eod = cu_state_reset_at_eod;
}
