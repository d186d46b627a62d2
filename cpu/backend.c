// backend.c: the CPU backend's op table (fp32 activations, host memory) and its memory functions.
// The ops live in the other cpu/*.c files, one concern each; see cpu/cpu_ops.h.
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/cpu_ops.h"
#include "model/backend.h"

static size_t cpu_bytes_in_use; // what cpu_alloc handed out and cpu_free did not take back (atomic)
static size_t cpu_bytes_peak;   // the most cpu_bytes_in_use has been (atomic)
static size_t cpu_buffers;      // buffers handed out and not freed (atomic)

void *cpu_alloc(size_t bytes) {
    // aligned_alloc wants a size that is a multiple of the alignment.
    size_t rounded = bytes > SIZE_MAX - 64 ? 0 : (bytes + 63) / 64 * 64;
    if (bytes == 0) rounded = 64;
    void *p = rounded ? aligned_alloc(64, rounded) : NULL;
    if (!p)
        die("out of host memory allocating %zu bytes (%.2f GiB) for the CPU backend; "
            "try a smaller micro_batch_size or seq_length",
            bytes, (double)bytes / (1024.0 * 1024.0 * 1024.0));
    memset(p, 0, rounded);
    __atomic_add_fetch(&cpu_buffers, 1, __ATOMIC_RELAXED);
    const size_t now = __atomic_add_fetch(&cpu_bytes_in_use, malloc_usable_size(p), __ATOMIC_RELAXED);
    size_t peak = __atomic_load_n(&cpu_bytes_peak, __ATOMIC_RELAXED);
    while (now > peak &&
           !__atomic_compare_exchange_n(&cpu_bytes_peak, &peak, now, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return p;
}

void cpu_free(void *p) {
    if (!p) return;
    __atomic_sub_fetch(&cpu_bytes_in_use, malloc_usable_size(p), __ATOMIC_RELAXED);
    __atomic_sub_fetch(&cpu_buffers, 1, __ATOMIC_RELAXED);
    free(p);
}
static void cpu_mem_stats(BackendMemStats *s) {
    s->reserved = s->allocated = __atomic_load_n(&cpu_bytes_in_use, __ATOMIC_RELAXED);
    s->peak = __atomic_load_n(&cpu_bytes_peak, __ATOMIC_RELAXED);
    s->count = __atomic_load_n(&cpu_buffers, __ATOMIC_RELAXED);
}

static double cpu_time_ms(void (*fn)(void *), void *ctx, int reps) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < reps; i++) fn(ctx);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return reps > 0 ? ((t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) * 1e-6) / reps : 0.0;
}

// Profiling timestamps (backend.h mark): the wall clock, in a table grown as needed (one host thread calls).
static double *cpu_marks;
static int cpu_nmarks;
static void cpu_mark(int i) {
    if (i < 0) die("mark: negative timestamp index %d", i);
    if (i >= cpu_nmarks) {
        int n = cpu_nmarks ? cpu_nmarks : 1024;
        while (n <= i) n *= 2;
        cpu_marks = xrealloc(cpu_marks, (size_t)n * sizeof(double));
        cpu_nmarks = n;
    }
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    cpu_marks[i] = t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}
static double cpu_mark_ms(int a, int b) {
    if (a < 0 || b < 0 || a >= cpu_nmarks || b >= cpu_nmarks) die("mark_ms: timestamp %d or %d was never taken", a, b);
    return cpu_marks[b] - cpu_marks[a];
}

static void cpu_memcpy(void *dst, const void *src, size_t bytes) {
    if (bytes) memcpy(dst, src, bytes);
}
static void cpu_memset0(void *p, size_t bytes) {
    if (bytes) memset(p, 0, bytes);
}
static void cpu_sync(void) {}
// Activations are fp32 on the CPU, so the act <-> fp32 conversions are copies.
static void cpu_to_act(void *dst, const float *src, size_t n) {
    if (dst != src && n) memcpy(dst, src, n * sizeof(float));
}
static void cpu_from_act(float *dst, const void *src, size_t n) {
    if (dst != src && n) memcpy(dst, src, n * sizeof(float));
}

static const Backend cpu_backend = {
    .name = "cpu",
    .act_bytes = 4,
    .eval_batch = 4, // a few sequences per scoring forward keep the cores busy with a small activation set
    .alloc = cpu_alloc,
    .free = cpu_free,
    .memcpy_h2d = cpu_memcpy,
    .memcpy_d2h = cpu_memcpy,
    .memcpy_d2d = cpu_memcpy,
    .memset0 = cpu_memset0,
    .sync = cpu_sync,
    .mem_stats = cpu_mem_stats,
    .time_ms = cpu_time_ms,
    .mark = cpu_mark,
    .mark_ms = cpu_mark_ms,
    .to_act = cpu_to_act,
    .from_act = cpu_from_act,
    .embedding_fwd = cpu_embedding_fwd,
    .embedding_bwd = cpu_embedding_bwd,
    .rmsnorm_fwd = cpu_rmsnorm_fwd,
    .rmsnorm_bwd = cpu_rmsnorm_bwd,
    .matmul_fwd = cpu_matmul_fwd,
    .matmul_bias_fwd = cpu_matmul_bias_fwd,
    .matmul_bwd = cpu_matmul_bwd,
    .conv_silu_fwd = cpu_conv_silu_fwd,
    .conv_silu_bwd = cpu_conv_silu_bwd,
    .l2norm_fwd = cpu_l2norm_fwd,
    .l2norm_bwd = cpu_l2norm_bwd,
    .gate_fwd = cpu_gate_fwd,
    .gate_bwd = cpu_gate_bwd,
    .delta_rule_fwd = cpu_delta_rule_fwd,
    .delta_rule_bwd = cpu_delta_rule_bwd,
    .doc_starts = cpu_doc_starts,
    .state_reset_at_eod = cpu_state_reset_at_eod,
    .gated_rmsnorm_fwd = cpu_gated_rmsnorm_fwd,
    .gated_rmsnorm_bwd = cpu_gated_rmsnorm_bwd,
    .attn_qkv_fwd = cpu_attn_qkv_fwd,
    .attn_qkv_bwd = cpu_attn_qkv_bwd,
    .attn_fwd = cpu_attn_fwd,
    .attn_bwd = cpu_attn_bwd,
    .pos_advance = cpu_pos_advance,
    .gdn_decode_fwd = cpu_gdn_decode_fwd,
    .rmsnorm_matmul_fwd = cpu_rmsnorm_matmul_fwd,
    .swiglu_matmul_fwd = cpu_swiglu_matmul_fwd,
    .rmsnorm_matmul_swiglu_fwd = cpu_rmsnorm_matmul_swiglu_fwd,
    .gdn_decode_block_fwd = cpu_gdn_decode_block_fwd,
    .matmul_swiglu_fwd = cpu_matmul_swiglu_fwd,
    .matmul_swiglu_bwd = cpu_matmul_swiglu_bwd,
    .lmhead_norm_argmax = cpu_lmhead_norm_argmax,
    .swiglu_fwd = cpu_swiglu_fwd,
    .swiglu_bwd = cpu_swiglu_bwd,
    .lmhead_ce = cpu_lmhead_ce,
    .lmhead_logits = cpu_lmhead_logits,
    .logits_stats = cpu_logits_stats,
    .token_ring_push = cpu_token_ring_push,
    .sum = cpu_sum,
    .sumsq = cpu_sumsq,
    .adamw = cpu_adamw,
    .adamw_multi = cpu_adamw_multi,
    .adamw_multi_lp = cpu_adamw_multi_lp,
    .clip_scale = cpu_clip_scale,
};

const Backend *backend_cpu(void) { return &cpu_backend; }

const Backend *backend_cpu_recurrent(void) {
    static Backend t; // filled on first use (at startup, single-threaded)
    if (!t.name) {
        t = cpu_backend;
        t.delta_rule_fwd = cpu_delta_rule_recurrent_fwd;
        t.delta_rule_bwd = cpu_delta_rule_recurrent_bwd;
        t.gdn_decode_fwd = cpu_gdn_decode_recurrent_fwd;
        t.gdn_decode_block_fwd = NULL; // the model runs the block's ops one by one, with this mixer
    }
    return &t;
}
