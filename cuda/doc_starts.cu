// doc_starts.cu: where each packed document begins (backend.h doc_starts; CPU twin cpu/doc_starts.c), computed
// on the device from the token ids, so a step with resets adds no host synchronisation. One block per row: each
// thread takes a contiguous span, finds the last document start in it, and a max-scan over the threads' spans
// (integers, so exact and deterministic) carries the start into the spans that have none.
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

void cu_register_doc_starts(Backend *b) { b->doc_starts = cu_doc_starts; }
