// harness.h: the harness of test_cuda_ops (tests/gpu/test_cuda_ops.c): the tolerance table, the cases (an op,
// its tensors with their roles and tolerances, a wrapper that calls the op through the Backend table), running
// a case on the CPU twin and on the GPU, and the comparison (see test_cuda_ops.c's header for what is checked).
// The cases of each op family are built in tests/gpu/ops/cases_<family>.c.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "model/backend.h"
#include "util/common.h"


// ===================================================================================================
// tolerances: relative to max |reference| of the output

typedef struct {
    float tol;
    const char *why;
} Tol;

// fp32 mode
static const Tol F32_EXACT = {0.0f, "exact: the same fp32 operations in the same order as the CPU twin"};
static const Tol F32_ORDER = {1e-5f, "fp32 with a different summation order (trees, tiles vs sequential loops)"};
static const Tol F32_GEMM = {1e-5f, "fp32 GEMM (no TF32): summation order differs, ~sqrt(K) ulps of the row norm"};
static const Tol F32_CHAIN = {2e-5f, "fp32, 64-term block products chained across chunks in a different order"};
static const Tol F32_SUM = {1e-6f, "double sums in a different order, rounded to fp32 (<= 1 ulp)"};
// bf16 mode (inputs identical to the reference's; only the op's own roundings count)
static const Tol B16_EXACT = {0.0f, "exact: bf16 values copied, or fp32 additions in the CPU's order"};
static const Tol B16_STORE = {5e-3f, "one bf16 rounding of the output: <= 2^-8 (3.9e-3) of the element, so of "
                                     "max |ref|, plus fp32-order noise"};
static const Tol B16_STORE2 = {1e-2f, "an output computed from two bf16-rounded intermediates (swiglu of the rounded "
                                       "gate and up), then rounded: <= ~3 x 2^-8 of the element"};
static const Tol B16_FP32 = {1e-5f, "fp32 output computed in fp32 from the same inputs: as the fp32 mode"};
static const Tol B16_GEMM32 = {1e-4f, "fp32 output of a bf16 tensor-core GEMM: fp32 accumulation, order and "
                                      "internal alignment differ from a sequential sum"};
static const Tol B16_DA_SUM = {1e-2f, "sum of bf16-rounded terms (as FLA sums its bf16 da): <= 2^-8 per term"};
static const Tol B16_DELTA = {3e-2f, "passes through 3-6 stored bf16 intermediates (Tm, W, U, V_new, h, gated "
                                     "QK^T, dh, dV_new, dw; spec §2.7), <= 2^-8 each, through the products"};
static const Tol B16_DELTA_F32 = {3e-2f, "fp32 output (dbeta, dgamma, final state) computed from the bf16 "
                                         "intermediates above"};
static const Tol F32_ROPE = {2e-5f, "fp32 RoPE: the device's powf/cosf/sinf vs glibc's, a few ulps of angles up to "
                                    "~300 rad"};
static const Tol B16_ROPE = {1e-2f, "bf16 cos/sin tables (as FLA caches them) vs the CPU's fp32 ones, <= 2^-9 each, "
                                    "plus one bf16 rounding of the output"};
static const Tol B16_FLASH = {1e-2f, "FlashAttention-2's bf16 roundings of P (for P V, P^T dO) and dS (for dQ, dK), "
                                     "<= 2^-9 each, plus one bf16 rounding of the output"};
static const Tol B16_CE = {1e-2f, "bf16 logits (as FLA's lm_head gives) and bf16 dlogits feed the GEMMs"};

// ===================================================================================================
// random numbers (splitmix64)

typedef struct {
    uint64_t s;
} Rng;
uint64_t rng_u64(Rng *g);
float rng_uniform(Rng *g, float lo, float hi);
float rng_normal(Rng *g);


// ===================================================================================================
// cases

enum { GUARD = 256, MAXT = 24 };
typedef enum { K_ACT, K_F32, K_I32 } Kind;
// input; overwritten output; += / in-out; scratch the op may write (contents undefined after: not compared)
typedef enum { R_IN, R_OUT, R_ACC, R_SCRATCH } Role;

typedef struct {
    const char *name;
    Kind kind;
    Role role;
    size_t rows, cols, ld; // logical rows x cols, row stride ld (elements); storage rows * ld
    float *init;           // IN/ACC initial values [rows*ld] (K_F32, K_ACT)
    int32_t *init_i;       // K_I32 values
    int is_null;           // pass NULL
    int round_ref;         // bf16 mode: compare with the reference rounded to bf16 (exact copies of fp32 results)
    Tol t32, t16;
} Tensor;

struct Case;
typedef void (*RunFn)(const Backend *be, void **p, const struct Case *c);
typedef struct Case {
    char name[160];
    const char *op;
    RunFn run;
    int nt;
    Tensor t[MAXT];
    int i[16];
    float f[8];
    int determinism; // run twice, compare bitwise (every case; kept per case for experiments)
    int big;         // 300M-sized: skipped by --quick
    int alias[MAXT]; // alias[x] = y: tensor x is the same buffer as tensor y (x > y)
} Case;

extern Case *g_cases; // the case list, in the order built
extern int g_ncases;
extern int g_failures, g_checks;

Case *new_case(const char *op, RunFn run, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
Tensor *add_t(Case *c, const char *name, Kind kind, Role role, size_t rows, size_t cols, size_t ld, Tol t32, Tol t16);
Tensor *add_in(Case *c, const char *name, Kind kind, size_t rows, size_t cols, size_t ld);
size_t tsize(const Tensor *t);
void fill_normal(Tensor *t, Rng *g, float mean, float std);
void fill_uniform(Tensor *t, Rng *g, float lo, float hi);
void normalise_heads(Tensor *t, int heads, int d); // unit L2 norm per head vector of d elements
float round_bf16(float x);
// Runs c on cpu and gpu (bf16: the GPU backend's bf16 mode), compares, prints one line, counts the checks.
void check_case(const Case *c, const Backend *cpu, const Backend *gpu, int bf16);
void report_abort(void); // atexit: names the case that was running if the backend died during it

#define ACT(x) ((char *)(x))

// ---- the op families (cases_<family>.c); build_cases (test_cuda_ops.c) calls them in a fixed order, as the
// cases share one random stream.
// rows: embedding, RMSNorm, matmul, SwiGLU, lm head + cross-entropy, logits statistics
void cases_embedding(Rng *g, int N, int h, int V);
void cases_rmsnorm(Rng *g, int N, int h, int resid, int alias_s, int big);
void cases_matmul_swiglu_bwd(Rng *g, int M, int F, int K, int pad, int recompute, int big);
void cases_matmul(Rng *g, int M, int N, int K, int pad, int acc, int big);
void cases_swiglu(Rng *g, int N, int F, int mode, int big);
void cases_matmul_swiglu(Rng *g, int M, int F, int K, int pad, int big);
void cases_lmhead(Rng *g, int N, int h, int V, int with_grad, int chunk_rows, int big);
void cases_logits_stats(Rng *g, int rows, int V, int with_logprob, int big);
void cases_token_ring_push(Rng *g, int B, int K, int count0, int pushes);
// gdn: the GDN mixer's ops (short conv, doc starts, L2 norm, gates, gated RMSNorm, the chunked delta rule)
void doc_layout_random(Rng *g, int32_t *ids, int32_t *ds, int B, int T);
void add_doc_start(Case *c, Rng *g, int B, int T, int docs);
void cases_doc_starts(Rng *g, int B, int T, int docs);
void cases_conv(Rng *g, int B, int T, int D, int K, int pad, int state, int alias_state, int docs);
void cases_l2norm(Rng *g, int N, int heads, int d, int pad, int step);
void cases_gate(Rng *g, int N, int HV, int pad);
void cases_gated(Rng *g, int N, int HV, int dv, int pad);
typedef struct {
    int B, T, H, HV, dk, dv, pad, state, h_save;
    int weak; // weak decays: e^{G_i - G_j} stays O(1) across a whole chunk, so every block of every product
              // matters (with the default decays it falls below 1e-5 within 16 rows)
    int bv;   // > 0: GDN_CUDA_DR_BV for the serial tensor-core kernels: 16 or 32 the mma.sync kernels at that dv tile
              // width, 64 the wgmma state and dh kernels (also the default at dk = dv = 64 on sm_90)
    int docs; // packed-document layout (doc_layout): 0 none, 1 fixed starts, 2 hundreds of short documents
    int wg_nc;  // > 0: GDN_CUDA_DR_WG_NC, the wgmma kernels' columns a warpgroup (64, 32, 16)
    int wg_tma; // 1: GDN_CUDA_DR_WG_TMA=1 (the wgmma kernels' tiles by TMA, the default), -1: =0 (by cp.async)
} DeltaShape;
void cases_delta(Rng *g, DeltaShape s, int big);
void check_delta_scratch(const Backend *be); // delta_rule_fwd/_bwd with the caller's scratch == without, bits; no overrun
// attn: softmax attention (qkv projection with RoPE, the attention itself)
// docs: packed documents (doc_layout's layouts; 3: doc_layout_random's), training layout only
typedef struct { int B, T, Ha, Hkv, d, window, pos, kvs, bias, pad, big, docs; } AttnShape;
void cases_attention(Rng *g, AttnShape s);
void cases_attention_packed_and_d128(void); // its own random stream (issues 14/21)
// optim: AdamW and the gradient-norm sum
void cases_adamw(Rng *g, int n, int step);
void cases_adamw_multi(Rng *g, int layout, int step);
void cases_adamw_multi_lp(Rng *g, int layout, int step, int lp, int rem_runs);
void cases_clip_scale(Rng *g, float sumsq, float max_norm);
// adamw_multi vs adamw per run on one backend (bf16: its bf16 mode), bit for bit; prints and counts its checks
void check_adamw_multi_per_run(const Backend *be, int bf16);
void check_swiglu_recompute(const Backend *be);
void check_lmhead_scratch(const Backend *be); // lmhead_ce with the caller's scratch == without, bits; used, no overrun
void check_lmhead_scratch_fit(const Backend *be); // a scratch of half a chunk or more: smaller chunks in it
void cases_sum(Rng *g, int n);
// decode: the fused GDN token mixer (eods: some sequences fed EOD), the GEMMs with the norm / SwiGLU fused in
void cases_gdn_decode(Rng *g, int B, int H, int HV, int dk, int dv, int K, int pad, int eods);
void cases_rmsnorm_matmul(Rng *g, int M, int N, int K, int resid, int pad);
void cases_swiglu_matmul(Rng *g, int M, int N, int K, int pad);
void cases_rmsnorm_matmul_swiglu(Rng *g, int M, int F, int K, int resid);
void cases_gdn_decode_block(Rng *g, int B, int h, int H, int HV, int dk, int dv, int K, int F, int resid);
void check_decode_block_bits(const Backend *be); // the block kernel == the table's five ops, bit for bit
void cases_lmhead_norm_argmax(Rng *g, int M, int V, int h, int resid, int big, int ring_k);
void cases_state_reset(Rng *g, int B, int T, int row); // state_reset_at_eod (packed documents across calls)
