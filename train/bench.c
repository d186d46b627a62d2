// bench.c: `gdn bench` — times full training steps (forward, backward, AdamW) of a config on random
// tokens, without a dataset: ms/step, tokens/s, TFLOP/s on both FLOP bases, peak memory; with --profile also
// the time of every op-table call of those steps by op (model/backend_profile.c).
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "../model/backend_profile.h"
#include "../model/gdn.h"
#include "../util/args.h"
#include "../util/common.h"
#include "train.h"

// The bench's random numbers (token ids, document lengths, the calibration's data): a 64-bit LCG step.
static uint64_t lcg_next(uint64_t *r) { return *r = *r * 6364136223846793005ull + 1442695040888963407ull; }

// The backend's GEMM rate on one of the step's shapes: y [M, N] = x [M, K] . W [N, K]^T with random act data
// (zeros would draw less power and run faster), one warm-up call, then reps calls timed together. With the
// step's other big shape it forms the ceiling the step's GEMMs run against: MFU against it says how far the
// whole step is from doing nothing but GEMMs at this backend's rate.
static double gemm_rate(const Backend *be, int M, int N, int K, int reps) {
    const size_t nx = (size_t)M * K, nw = (size_t)N * K, nmax = nx > nw ? nx : nw;
    float *h = xmalloc(nmax * sizeof(float));
    float *stage = be->alloc(nmax * sizeof(float));
    void *x = be->alloc(nx * (size_t)be->act_bytes), *W = be->alloc(nw * (size_t)be->act_bytes);
    void *y = be->alloc((size_t)M * N * (size_t)be->act_bytes);
    uint64_t r = 12345;
    for (int t = 0; t < 2; t++) {
        const size_t n = t ? nw : nx;
        for (size_t i = 0; i < n; i++) {
            h[i] = (float)((double)(lcg_next(&r) >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
        }
        be->memcpy_h2d(stage, h, n * sizeof(float));
        be->to_act(t ? W : x, stage, n);
    }
    be->matmul_fwd(y, N, x, K, W, M, N, K, 0);
    be->sync();
    const double t0 = now_sec();
    for (int i = 0; i < reps; i++) be->matmul_fwd(y, N, x, K, W, M, N, K, 0);
    be->sync();
    const double dt = (now_sec() - t0) / reps;
    be->free(y), be->free(W), be->free(x), be->free(stage);
    free(h);
    return 2.0 * M * (double)N * K / dt;
}

int cmd_bench(int argc, char **argv) {
    if (arg_is_help(argc, argv)) {
        printf("usage: gdn bench [--config FILE.yaml] [--key value ...] [--steps N] [--warmup W] [--profile]\n"
               "Times N training steps (after W warm-up steps) of the config's model at micro_batch_size x\n"
               "seq_length on random tokens (one micro-batch per step) and prints ms/step, tokens/s, TFLOP/s, MFU,\n"
               "memory (the device's in use, and the peak the backend's buffers and scratch held: PyTorch's\n"
               "max_memory_allocated, what FLA's harness reports), and the backend's GEMM rate on the gate|up and lm\n"
               "head shapes with the step's share of it.\n"
               "--profile: also times every backend op of those steps (CUDA events on the stream, wall clock on\n"
               "the CPU) and prints them by op, GEMMs by weight shape, against the step time.\n");
        return 0;
    }
    int steps = 5, warm = 1, profile = 0;
    static const ArgSpec own[] = {{"--steps", ARG_INT, 1, 1 << 20}, {"--warmup", ARG_INT, 0, 1 << 20}};
    int out = 1; // take --steps/--warmup out before the config flags are parsed (those are strict too)
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--profile")) {
            profile = 1;
            continue;
        }
        int k = !strcmp(argv[i], "--steps") ? 0 : !strcmp(argv[i], "--warmup") ? 1 : -1;
        if (k < 0) { argv[out++] = argv[i]; continue; }
        if (i + 1 >= argc) die("bench: %s needs a value", own[k].name);
        int v = (int)args_number("bench", &own[k], argv[++i]);
        *(k ? &warm : &steps) = v;
    }
    argc = out;
    Config c;
    train_parse_config(&c, &argc, argv);
    if (argc > 1) die("unknown argument '%s'", argv[1]);
    char err[ERR_LEN];
    if (config_validate(&c, err, sizeof err)) die("%s", err);
    if (steps < 1 || warm < 0) die("bench: --steps must be >= 1 and --warmup >= 0");
    const Backend *be = backend_select(c.device, c.precision);
    if (profile) be = backend_profiled(be); // the model runs on the timed table
    Model *m = model_create(&c, be, 1);
    float *host = xmalloc(m->lay.total * sizeof(float));
    params_init(&m->lay, host, (uint64_t)c.seed);
    model_set_params(m, host);
    free(host);
    int B = c.micro_batch_size, T = c.seq_length;
    size_t N = (size_t)B * T;
    int32_t *ids = xmalloc(N * 4), *tgt = xmalloc(N * 4);
    uint64_t r = 1;
    for (size_t i = 0; i < N; i++) {
        ids[i] = (int32_t)((lcg_next(&r) >> 33) % (uint64_t)c.vocab_size);
    }
    int docs = 0;
    if (c.reset_state_at_eod) // packed documents: EOD-separated rows of documents of 1..1024 tokens (uniform)
        for (size_t i = 0, next = 0; i < N; i++)
            if (i == next) {
                ids[i] = c.eos_token_id, docs++;
                next = i + 1 + (size_t)((lcg_next(&r) >> 33) % 1024);
            }
    for (size_t i = 0; i < N; i++) tgt[i] = (i + 1) % (size_t)T ? ids[i + 1] : -1;
    double t0 = 0;
    for (int it = 0; it < warm + steps; it++) {
        if (it == warm) {
            be->sync();
            t0 = now_sec();
            if (profile) backend_profile_record(1);
        }
        model_zero_grads(m);
        model_fwd_bwd(m, ids, tgt, B, T, 1.0f / (float)(N - B), 0);
        model_clip_grads(m, 1.0f); // norm and clip scale stay on the backend: no host round trip in the step
        model_adamw(m, 1e-4f, it + 1);
    }
    be->sync();
    double ms = (now_sec() - t0) * 1e3 / steps, tok = N / (ms / 1e3);
    if (profile) backend_profile_record(0);
    double loss = model_read_loss_slots(m, 1) / (double)(N - B), gnorm = model_read_grad_norm(m);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    char count[32];
    format_count(count, sizeof count, m->lay.total);
    printf("bench: %s params, %s (%s), micro-batch %d x seq %d: %.1f ms/step, %.0f tokens/s, "
           "%.2f TFLOP/s (Megatron basis), %.2f TFLOP/s (GDN count), host peak RSS %.2f GiB",
           count, be->name, be->act_bytes == 2 ? "bf16" : "fp32", B, T, ms, tok,
           flops_per_token_megatron(&c) * tok / 1e12, flops_per_token_gdn(&c) * tok / 1e12, ru.ru_maxrss / 1048576.0);
    // read before the model is freed: on CUDA the device's (the pool included), on the CPU the backend's buffers;
    // then the most the model's buffers and the ops' scratch held at once (PyTorch's max_memory_allocated: what
    // FLA's harness reports as its peak)
    BackendMemStats mem;
    be->mem_stats(&mem);
    printf(", %s memory in use %.2f GiB, peak allocated %.2f GiB", be->name, mem.reserved / 1073741824.0,
           mem.peak / 1073741824.0);
    // MFU against H100/H200 dense bf16 (989.4 TFLOP/s), on the 6N-style GDN count
    if (be->act_bytes == 2) printf(", MFU %.1f%% of 989 TFLOP/s", 100.0 * flops_per_token_gdn(&c) * tok / 989.4e12);
    if (docs) printf(", %d EOD-separated documents per step (reset_state_at_eod)", docs);
    // what the peak is made of: the weights, gradients and optimizer state, and the activation arena
    printf(", of which weights + gradients + AdamW state %.2f GiB (%.0f bytes/parameter) and activations %.2f GiB",
           model_state_bytes_per_param(m) * (double)m->lay.total / 1073741824.0, model_state_bytes_per_param(m),
           m->arena_used / 1073741824.0);
    if (c.use_precision_aware_optimizer)
        printf(", precision-aware optimizer (exp_avg %s, exp_avg_sq %s%s)", c.exp_avg_dtype, c.exp_avg_sq_dtype,
               m->adam_rem ? ", master remainders" : "");
    printf("\nbench: last step loss %.9g, grad norm %.9g\n", loss, gnorm);
    if (profile) backend_profile_report(stdout, steps, ms);
    free(ids); free(tgt);
    model_free(m);
    // (after the model is freed: the calibration's buffers, 0.7 GB for the 300M, need not fit beside it)
    // Two shapes carry most of the step's GEMM FLOPs: gate|up [M x h] . [2F x h]^T in every block and the lm head
    // [M x h] . [V x h]^T (its rows in slices, as the step's fused pass runs it: y stays <= 2^28 elements). The
    // ceiling is their rate weighted by the step's FLOPs in each (the time both would take, divided into their
    // FLOPs): one shape alone misleads where the other dominates (the tiny config's 128k vocab at hidden 64).
    const ModelDims d = config_dims(&c);
    const int gM = (int)N, gN = 2 * d.F, gK = d.h;
    const int hM = (int)(N < ((size_t)1 << 28) / (size_t)d.V ? N : ((size_t)1 << 28) / (size_t)d.V);
    const int reps = be->act_bytes == 2 ? 20 : 3;
    const double r_gu = gemm_rate(be, gM, gN, gK, reps), r_head = gemm_rate(be, hM > 0 ? hM : 1, d.V, gK, reps);
    const double f_gu = 2.0 * d.h * gN * d.L, f_head = 2.0 * d.h * d.V; // forward FLOPs per token (x3 for both)
    const double rate = (f_gu + f_head) / (f_gu / r_gu + f_head / r_head);
    const int tera = rate >= 1e12; // the CPU's rates read better in GFLOP/s
    const double u = tera ? 1e12 : 1e9;
    printf("bench: GEMM rate %.2f %s (%s, random data: gate|up [%d x %d] . [%d x %d]^T %.2f, lm head [%d x %d] . "
           "[%d x %d]^T %.2f, weighted %.1f:%.1f by the step's FLOPs); the step's GDN-count rate is %.1f%% of it\n",
           rate / u, tera ? "TFLOP/s" : "GFLOP/s", be->name, gM, gK, gN, gK, r_gu / u, hM, gK, d.V, gK, r_head / u,
           100.0 * f_gu / (f_gu + f_head), 100.0 * f_head / (f_gu + f_head), 100.0 * flops_per_token_gdn(&c) * tok / rate);
    return 0;
}
