// test_cuda_ops.c: every op of the CUDA backend against its CPU twin (backend_cpu()), in the fp32 debug
// mode and in bf16 mode, on random inputs from each op's real domain.
//
// For each case and mode: the inputs are uploaded through the Backend API (act tensors via to_act),
// each output buffer is prefilled (NaN for overwritten outputs, the initial values for += outputs) and
// framed by 256 guard bytes on each side; after the op the guards, the untouched gap columns of strided
// outputs and the unchanged inputs are checked, NaN/Inf are reported by index, and
//     error = max |cuda - cpu| / max |cpu|
// over each output is compared with the tolerance table (tests/gpu/ops/harness.h; each bound states its reason). In bf16
// mode the CPU reference runs on the same bf16-rounded act inputs, so the error measures the op's own
// roundings only. Every case is run twice on the GPU and compared bit for bit (determinism).
// One line per (case, mode); exit status 1 on any failure, 2 when no usable GPU is found.
//
//   test_cuda_ops            all cases (small shapes plus a few at the 300M model's sizes)
//   test_cuda_ops --quick    small shapes only (the CPU emulator, tests/gpu/emu_check.sh, uses this)
//   test_cuda_ops --only OP  cases whose op name contains OP
//   test_cuda_ops --bench    time each op at the 300M shapes (bf16) and print time, rate and floor
//   test_cuda_ops --bench-small   the same code at tiny shapes (checks its arguments, e.g. in the emulator)
//
// Files: tests/gpu/ops/harness.{c,h} (tolerance table, cases, running and comparing), one file of cases per op
// family (tests/gpu/ops/cases_{rows,gdn,attn,optim}.c); this file: the case list, special checks, the benchmark.
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/adamw_plan.h"
#include "model/backend.h"
#include "tests/gpu/ops/harness.h"
#include "util/common.h"

// ===================================================================================================
// the case list (one random stream: the order of the calls fixes every case's inputs)

static void build_cases(int quick) {
    Rng g = {20240601};
    cases_embedding(&g, 37, 24, 50);
    cases_embedding(&g, 50, 20, 41); // h not a multiple of 8: bf16 scalar path
    cases_embedding(&g, 600, 24, 50); // a run of 200 equal ids: longer than a block's window, 8-row batches
    cases_rmsnorm(&g, 33, 64, 1, 0, 0);
    cases_rmsnorm(&g, 7, 1000, 1, 1, 0); // scalar path (1000 % 8 != 0) and s_out aliasing resid
    cases_rmsnorm(&g, 20, 256, 0, 0, 0);
    cases_rmsnorm(&g, 2048, 1024, 1, 0, 1);
    cases_rmsnorm(&g, 9, 3072, 1, 0, 0);  // two vectors per thread in the backward's registers
    cases_rmsnorm(&g, 5, 8000, 1, 0, 0);  // four, the last partial
    cases_rmsnorm(&g, 3, 12000, 0, 0, 0); // more than four: the kernel that reads twice
    cases_matmul(&g, 37, 48, 40, 8, 0, 0);
    cases_matmul(&g, 33, 24, 72, 5, 1, 0); // odd strides: unaligned rows for cuBLASLt
    cases_matmul(&g, 64, 96, 128, 0, 1, 0);
    cases_matmul(&g, 2048, 4096, 1024, 0, 0, 1);
    cases_matmul(&g, 300, 520, 200, 0, 0, 0); // several 128 x 256 tiles with edges in M, N and K (GDN_CUDA_GEMM=wg)
    cases_matmul(&g, 130, 264, 72, 8, 1, 0);  // accumulate, row strides past the width
    // dW through gemm_wg_dw at GDN_CUDA_GEMM=wg (its rule: 10 x 10 tiles of dW fill 3/4 of 132 SMs), edges in all
    // three dimensions; then whole tiles, dx accumulated, row strides past the width
    cases_matmul(&g, 70, 1256, 2504, 0, 0, 0);
    cases_matmul(&g, 40, 1280, 2560, 8, 1, 0);
    cases_conv(&g, 2, 70, 40, 4, 3, 1, 0, 0);
    cases_conv(&g, 3, 2, 24, 4, 0, 1, 0, 0);   // T < K-1: the state mixes state_in and x
    cases_conv(&g, 2, 1, 36, 4, 0, 1, 1, 0);   // decode: T=1, state in place
    cases_conv(&g, 3, 1, 48, 4, 8, 1, 1, 0);   // decode with 16-byte vectors (D and strides 8-aligned)
    cases_conv(&g, 1, 33, 20, 6, 2, 1, 0, 0);  // K=6: the 8-tap kernel
    cases_conv(&g, 1, 40, 17, 12, 0, 0, 0, 0); // K=12: the 16-tap kernel, no state
    cases_conv(&g, 2, 130, 1024, 4, 0, 0, 0, 0); // the 16-byte-vector backward, no documents
    cases_conv(&g, 2, 150, 48, 3, 8, 0, 0, 0);   // K=3 (a padding tap), rows padded by 8: still 16-byte aligned
    // packed documents: fixed starts / hundreds of short documents; the state only for the first document
    cases_conv(&g, 2, 300, 40, 4, 0, 1, 0, 1);  // D a multiple of 8: the 16-byte-vector backward
    cases_conv(&g, 2, 600, 24, 4, 0, 1, 0, 2);
    cases_conv(&g, 1, 260, 16, 2, 8, 0, 0, 2);  // K=2, padded rows: the vector backward's masks
    cases_conv(&g, 1, 90, 20, 4, 0, 0, 0, 1);   // D=20: scalar in bf16 (not 8-aligned), vectors of 4 in fp32
    cases_conv(&g, 1, 200, 17, 4, 3, 1, 0, 1);  // odd D, padded rows: the scalar backward
    cases_conv(&g, 1, 140, 20, 6, 0, 0, 0, 2);  // K=6: the 8-tap kernels
    cases_doc_starts(&g, 3, 300, 1);
    cases_doc_starts(&g, 2, 2048, 2);           // longer than the kernel's 256 threads: spans of 8
    cases_l2norm(&g, 50, 3, 32, 5, 1);  // odd strides: scalar kernels
    cases_l2norm(&g, 40, 4, 64, 0, 1);
    cases_l2norm(&g, 40, 8, 64, 0, 2);  // one pair per lane (strides not 8-aligned)
    cases_l2norm(&g, 40, 8, 64, 0, 8);  // the 300M's q|k: 16-byte vectors, 8 lanes per head in bf16
    cases_l2norm(&g, 33, 3, 32, 8, 8);  // vectors: 4 / 8 lanes per head, a partial last block
    cases_l2norm(&g, 17, 2, 128, 0, 16); // vectors: 16 / 32 lanes per head
    cases_l2norm(&g, 30, 2, 100, 4, 2); // two pairs per lane, the second partial
    cases_l2norm(&g, 9, 1, 256, 2, 6);  // four pairs per lane
    cases_gate(&g, 70, 6, 3);
    cases_gate(&g, 600, 8, 0); // more than one 256-row partial block
    cases_gated(&g, 40, 3, 48, 4);  // pairs, lanes 24-31 idle
    cases_gated(&g, 66, 8, 64, 0);  // the 300M's heads: the 16-byte-vector backward (8 lanes per row in bf16)
    cases_gated(&g, 50, 4, 32, 8);  // vectors, padded rows: 4 lanes per row in bf16, 8 in fp32
    cases_gated(&g, 30, 3, 128, 0); // vectors: 16 / 32 lanes per row, a partial last block
    cases_gated(&g, 35, 2, 40, 3);  // odd strides: scalar kernels
    cases_gated(&g, 21, 2, 176, 2); // three pairs per lane -> the four-pair kernel
    cases_gated(&g, 8, 1, 300, 0);  // dv > 256: scalar kernels
    cases_swiglu(&g, 30, 40, 0, 0);
    cases_swiglu(&g, 9, 36, 1, 0); // F % 8 != 0 (bf16 scalar path), dgu = gu in place
    cases_swiglu(&g, 2048, 4096, 0, 1);
    cases_matmul_swiglu(&g, 300, 256, 200, 0, 0); // fused at GDN_CUDA_GEMM=wg: 3 row tiles x 2 feature tiles, edges in M, K
    cases_matmul_swiglu(&g, 70, 40, 72, 8, 0);    // F % 128 != 0: the two ops
    cases_matmul_swiglu(&g, 2048, 4096, 1024, 0, 1);
    cases_matmul_swiglu_bwd(&g, 300, 520, 200, 0, 0, 0); // fused at GDN_CUDA_GEMM=wg: 3 x 3 tiles, edges in M, F, K
    cases_matmul_swiglu_bwd(&g, 130, 256, 72, 8, 1, 0);  // + y over the scratch (recompute_swiglu), strided dy
    cases_matmul_swiglu_bwd(&g, 2048, 4096, 1024, 0, 0, 1);
    cases_swiglu(&g, 30, 40, 2, 0);     // y recomputed
    cases_swiglu(&g, 9, 36, 3, 0);      // the scalar path, y over dy in place
    cases_swiglu(&g, 2048, 4096, 3, 1); // recompute_swiglu's form at the 300M's F
    cases_delta(&g, (DeltaShape){1, 64, 1, 1, 16, 16, 0, 0, 1}, 0);   // one full chunk, smallest heads
    cases_delta(&g, (DeltaShape){2, 100, 2, 4, 32, 32, 8, 1, 1}, 0);  // B>1, GVA 2, strides, state, partial chunk
    cases_delta(&g, (DeltaShape){1, 40, 2, 2, 64, 64, 0, 0, 0}, 0);   // T < 64, real head size, no h_save
    cases_delta(&g, (DeltaShape){2, 130, 1, 2, 64, 48, 0, 1, 1}, 0);  // dv % 32 != 0: 16-wide dv tiles
    cases_delta(&g, (DeltaShape){1, 70, 1, 1, 128, 128, 0, 1, 1}, 0); // the largest heads (128-wide tiles)
    cases_delta(&g, (DeltaShape){1, 65, 2, 4, 80, 16, 4, 0, 0}, 0);   // dk padded to 128, dv to 64
    // weak decays: the long-range terms of every block product count (bf16: the tensor-core kernels)
    cases_delta(&g, (DeltaShape){2, 150, 2, 4, 64, 64, 0, 1, 1, 1}, 0); // 300M heads, 3 chunks, partial last
    cases_delta(&g, (DeltaShape){1, 192, 1, 4, 48, 32, 3, 0, 0, 1}, 0); // GVA 4, odd strides (scalar loads and
                                                                        // stores), T = 3 x 64, no h_save
    cases_delta(&g, (DeltaShape){2, 140, 1, 2, 32, 64, 0, 1, 1, 1, 32}, 0); // 32-wide dv tiles (serial kernels)
    { // the serial recurrences (forward state, backward dh) on wgmma (GDN_CUDA_DR_BV=64: 300M heads, one block a
      // head): state and h_save, partial last chunk, GVA 2; then strided q|k without a state. Their own random
      // stream: the cases after them keep their inputs (drawing from g here shifted them, and two bf16 cases with
      // near ties failed: an lm head argmax and a SwiGLU GEMV at its tolerance; notes/PERF.md, session 19)
        Rng gw = {0x3c9a};
        cases_delta(&gw, (DeltaShape){2, 150, 2, 4, 64, 64, 0, 1, 1, 1, 64}, 0);
        cases_delta(&gw, (DeltaShape){1, 200, 1, 2, 64, 64, 8, 0, 1, 0, 64}, 0);
        // the mma.sync serial kernels at the 300M's heads (the wgmma ones take dk = dv = 64 by default on sm_90)
        cases_delta(&gw, (DeltaShape){2, 150, 2, 4, 64, 64, 0, 1, 1, 1, 16}, 0);
        // the other forms (the default above: 32 columns a warpgroup, tiles by TMA): 64 and 16 columns (1 and 4
        // warpgroups; the 128-, 32-byte swizzles), tiles by cp.async (zeros past a partial chunk) or TMA (the next
        // batch's rows there)
        cases_delta(&gw, (DeltaShape){2, 150, 2, 4, 64, 64, 0, 1, 1, 1, .wg_nc = 32, .wg_tma = -1}, 0);
        cases_delta(&gw, (DeltaShape){1, 200, 1, 2, 64, 64, 8, 0, 1, 0, .wg_nc = 16, .wg_tma = -1}, 0);
        cases_delta(&gw, (DeltaShape){2, 150, 2, 4, 64, 64, 0, 1, 1, 1, .wg_nc = 64, .wg_tma = -1}, 0);
        cases_delta(&gw, (DeltaShape){2, 150, 2, 4, 64, 64, 0, 1, 1, 1, .wg_nc = 64, .wg_tma = 1}, 0);
        cases_delta(&gw, (DeltaShape){2, 100, 1, 2, 64, 64, 8, 0, 1, 0, .wg_nc = 16, .wg_tma = 1}, 0);
        // packed documents through the default form: starts inside chunks and on their edges, state and h_save
        cases_delta(&gw, (DeltaShape){2, 150, 2, 4, 64, 64, 0, 1, 1, 1, .docs = 1}, 0);
    }
    cases_delta(&g, (DeltaShape){1, 100, 1, 1, 128, 64, 0, 1, 1, 1}, 0); // dk = 128 (CUDA-core kernels in bf16)
    cases_delta(&g, (DeltaShape){2, 256, 4, 8, 64, 64, 0, 0, 1}, 1);  // 300M heads
    // decode (T <= 16, no h_save: the token-by-token kernel), state carried in and out
    cases_delta(&g, (DeltaShape){2, 1, 4, 8, 64, 64, 0, 1, 0}, 0);    // one decode step of the 300M heads
    cases_delta(&g, (DeltaShape){1, 5, 2, 4, 32, 48, 3, 1, 0}, 0);    // GVA 2, dv not a multiple of 32, strides
    cases_delta(&g, (DeltaShape){1, 16, 1, 1, 128, 128, 0, 1, 0}, 0); // the largest heads, T at the limit
    cases_delta(&g, (DeltaShape){3, 2, 1, 2, 16, 16, 0, 0, 0}, 0);    // no state: starts from zero
    // packed documents (fp32: the CUDA-core kernels; bf16: the tensor-core ones, and at dk = dv = 64 the wgmma
    // recurrences): fixed starts (length 1, inside chunks, on the edges 64 and 128), hundreds of short documents;
    // state and h_save given or not, GVA, strides, weak decays
    cases_delta(&g, (DeltaShape){2, 300, 2, 4, 32, 32, 8, 1, 1, 0, 0, 1}, 0);
    cases_delta(&g, (DeltaShape){1, 600, 1, 2, 64, 64, 0, 0, 0, 1, 0, 2}, 0);
    cases_delta(&g, (DeltaShape){2, 200, 2, 4, 64, 48, 3, 1, 0, 1, 0, 1}, 0);
    cases_delta(&g, (DeltaShape){1, 10, 1, 1, 16, 16, 0, 1, 0, 0, 0, 1}, 0); // T <= 16 without h_save: not decode
    //                          B   T  Ha Hkv   d  win pos kvs bias pad big
    cases_attention(&g, (AttnShape){2, 70, 4, 2, 16, 0, 0, 0, 1, 3, 0});    // GQA 2, biases, strided P
    cases_attention(&g, (AttnShape){1, 45, 2, 2, 64, 9, 0, 0, 0, 0, 0});    // MHA, window 9, d = 64
    cases_attention(&g, (AttnShape){1, 33, 4, 1, 128, 0, 0, 0, 0, 0, 0});   // GQA 4, d = 128
    cases_attention(&g, (AttnShape){2, 1, 4, 2, 32, 0, 40, 64, 0, 0, 0});   // a decode step into a KV cache
    cases_attention(&g, (AttnShape){1, 5, 2, 1, 64, 7, 20, 32, 1, 0, 0});   // a 5-token chunk, window 7
    cases_attention(&g, (AttnShape){1, 200, 2, 1, 64, 70, 0, 0, 0, 0, 0}); // bf16: tensor cores, window skips blocks
    cases_attention(&g, (AttnShape){1, 40, 2, 2, 128, 0, 90, 160, 0, 0, 0}); // a prefill chunk after 90 cached
    cases_attention(&g, (AttnShape){2, 2048, 16, 4, 64, 0, 0, 0, 0, 0, 1}); // the hybrid 300M's attention
    cases_attention_packed_and_d128();
    cases_lmhead(&g, 70, 64, 1000, 1, 0, 0);
    cases_lmhead(&g, 50, 40, 517, 1, 16, 0); // forced 16-row chunks: the chunk loop
    cases_lmhead(&g, 33, 40, 300, 0, 0, 0);
    cases_lmhead(&g, 6, 32, 8200, 1, 0, 0); // rows longer than 4 x 512 float4s
    cases_lmhead(&g, 64, 1024, 128256, 1, 0, 1);
    cases_logits_stats(&g, 5, 1000, 1, 0);
    cases_logits_stats(&g, 3, 37, 0, 0); // fewer columns than threads
    cases_logits_stats(&g, 16, 128256, 1, 1);
    cases_adamw(&g, 1000, 1);
    cases_adamw(&g, 777, 7);
    cases_sum(&g, 100003);
    cases_sum(&g, 5);
    // bf16 logits with the gradient written over them (V % 8 == 0), over forced 16-row chunks, and loss only
    // (appended here so the cases above keep their random inputs)
    cases_lmhead(&g, 50, 40, 520, 1, 16, 0);
    cases_lmhead(&g, 33, 40, 304, 0, 0, 0);
    // the bf16 pass with fewer blocks than rows (each block walks rows b, b + grid, ...): with and without grad
    cases_lmhead(&g, 50, 40, 520, 1, 0, 0);
    g_cases[g_ncases - 1].i[4] = 3;
    strcat(g_cases[g_ncases - 1].name, " grid 3");
    cases_lmhead(&g, 33, 40, 304, 0, 0, 0);
    g_cases[g_ncases - 2].i[4] = 2; // (the loss-only call adds an lmhead_logits case after it)
    strcat(g_cases[g_ncases - 2].name, " grid 2");
    // dE through gemm_wg_dw at GDN_CUDA_GEMM=wg (25 x 4 tiles of dE fill 3/4 of 132 SMs); dy through gemm_wg_dx
    cases_lmhead(&g, 40, 1024, 3200, 1, 0, 0);
    // multi-tensor AdamW over chunk tables and the device-side clip scale (appended: the cases above keep their
    // random inputs)
    cases_adamw_multi(&g, 0, 1);
    cases_adamw_multi(&g, 1, 5);
    cases_clip_scale(&g, 2.25f, 1.0f);   // norm 1.5 > 1: scale 1 / (1.5 + 1e-6)
    cases_clip_scale(&g, 0.25f, 1.0f);   // norm 0.5: no clipping
    cases_clip_scale(&g, 3.7e7f, 0.3f);  // a large norm
    // logits_stats over few rows: each row split over several blocks (decoding's argmax), with and without logprob
    cases_logits_stats(&g, 3, 20000, 1, 0);
    cases_logits_stats(&g, 2, 9000, 0, 0);
    // decoding's fused ops and small-M GEMMs (the GEMV kernel; appended, as above)
    cases_gdn_decode(&g, 1, 4, 8, 64, 64, 4, 0, 0);   // the 300M's heads, batch 1
    cases_gdn_decode(&g, 16, 4, 8, 64, 64, 4, 0, 1);  // batch 16, some sequences fed EOD
    cases_gdn_decode(&g, 3, 2, 4, 32, 48, 4, 3, 1);   // GVA 2, dv not a multiple of 32, strides
    cases_gdn_decode(&g, 2, 1, 4, 128, 64, 4, 0, 0);  // dk = 128, four v heads per q/k head (two column slices)
    cases_gdn_decode(&g, 2, 2, 2, 16, 16, 6, 1, 1);   // G = 1, K = 6
    cases_matmul(&g, 1, 300, 1000, 0, 0, 0);          // M = 1: the GEMV
    cases_matmul(&g, 3, 70, 96, 3, 1, 0);             // M = 3 (a 4-row tile), strides, accumulate
    cases_matmul(&g, 4, 40, 36, 0, 0, 0);             // K % 8 != 0: scalar weight loads
    cases_rmsnorm_matmul(&g, 1, 1552, 1024, 1, 0);    // the 300M's in_proj at batch 1
    cases_rmsnorm_matmul(&g, 4, 200, 1024, 1, 2);     // batch 4, strided y
    cases_rmsnorm_matmul(&g, 3, 64, 40, 0, 0);        // no residual (block 0)
    cases_rmsnorm_matmul(&g, 16, 64, 48, 1, 0);       // batch 16: the unfused ops (cuBLASLt)
    cases_swiglu_matmul(&g, 1, 1024, 4096, 0);        // the 300M's down_proj at batch 1
    cases_swiglu_matmul(&g, 16, 96, 4096, 1);         // batch 16: the unfused ops
    cases_swiglu_matmul(&g, 3, 50, 8192, 0);          // the 1B's down: 2-row tiles (64 KB), the second half full
    cases_swiglu_matmul(&g, 2, 50, 8200, 0);          // K > 8192: the unfused ops
    cases_gdn_decode(&g, 2, 1, 16, 16, 128, 4, 2, 1); // G*dv = 2048 past the kernel's limit: the unfused ops
    cases_state_reset(&g, 5, 9, 300);                 // prefill rows ending in EOD: a conv state's size
    cases_state_reset(&g, 4, 1, 70000);               // decode, rows longer than one block's span
    // the GEMV's shape paths (S warps per row over slices of K, several rounds per block, the next row's loads
    // issued early): the 300M's four shapes at batch 1 and 3/4 (appended, as above)
    cases_matmul(&g, 1, 1024, 512, 0, 0, 0);          // o_proj at batch 1: 2 slices
    cases_matmul(&g, 4, 1024, 512, 0, 1, 0);          // o_proj at batch 4, accumulate
    cases_rmsnorm_matmul(&g, 1, 8192, 1024, 1, 0);    // gate|up at batch 1: 1 slice, 2 rounds per block
    cases_rmsnorm_matmul(&g, 3, 8192, 1024, 1, 1);    // gate|up at batch 3, strided y
    cases_rmsnorm_matmul(&g, 3, 1552, 1024, 1, 0);    // in_proj at batch 3: 4 slices, 2 rounds
    cases_rmsnorm_matmul(&g, 2, 1553, 1024, 0, 0);    // a row past N in the last round (its warps keep the barriers)
    cases_swiglu_matmul(&g, 4, 1024, 4096, 0);        // down at batch 4: 4 slices
    cases_swiglu_matmul(&g, 3, 1024, 4096, 1);        // down at batch 3, strided y
    cases_matmul(&g, 2, 45, 999, 1, 0, 0);            // scalar loads (K odd) in 4 slices, the last ones past K
    // the fused decode mixer's split over several blocks per (sequence, q/k head) at small B (32-column parts)
    cases_gdn_decode(&g, 1, 4, 4, 64, 40, 4, 0, 0);   // batch 1, G = 1, dv = 40: a part of 8 columns
    cases_gdn_decode(&g, 1, 2, 4, 32, 48, 4, 1, 0);   // batch 1, G = 2, a part across two v heads, strides
    cases_gdn_decode(&g, 3, 1, 4, 64, 24, 4, 2, 1);   // batch 3, G = 4, dv = 24, EOD
    cases_gdn_decode(&g, 3, 2, 2, 128, 72, 3, 0, 1);  // batch 3, G = 1, dk = 128, K = 3, EOD
    cases_gdn_decode(&g, 1, 1, 4, 64, 64, 4, 0, 0);   // batch 1, G = 4: eight parts
    cases_gdn_decode(&g, 3, 2, 4, 16, 40, 2, 0, 1);   // K = 2, dv = 40, EOD
    cases_gdn_decode(&g, 16, 4, 16, 32, 64, 4, 0, 1); // batch 16: four parts of 64 columns (two slices each)
    cases_gdn_decode(&g, 40, 4, 16, 32, 32, 4, 0, 1); // batch 40: enough groups, one block each
    // the RMSNorm staging: 16-byte loads over two rounds of the block (K > 256 x 8), and the scalar form (K % 4 != 0)
    cases_rmsnorm_matmul(&g, 1, 90, 2504, 1, 0);
    cases_rmsnorm_matmul(&g, 2, 70, 1002, 1, 0);
    // decoding's token history: the slot from the count, wrapping past K
    cases_token_ring_push(&g, 1, 16, 0, 1);
    cases_token_ring_push(&g, 3, 4, 6, 3);
    cases_token_ring_push(&g, 300, 2, 1, 1);
    // decoding's lm head: the final RMSNorm, fp32 logits and the argmax (CUDA at batch 1: one GEMV, the argmax
    // over blocks by integer keys; else the unfused ops); each row's maximum planted, row 0's twice (lower index wins)
    cases_lmhead_norm_argmax(&g, 1, 3001, 1024, 1, 0, 0);   // batch 1, a partial last round
    cases_lmhead_norm_argmax(&g, 3, 1000, 256, 1, 0, 0);    // 3 rows: the unfused ops
    cases_lmhead_norm_argmax(&g, 1, 77, 40, 0, 0, 0);       // no residual, K % 8 != 0: scalar loads
    cases_lmhead_norm_argmax(&g, 6, 500, 64, 1, 0, 0);      // 6 rows (past the GEMV's 4)
    cases_lmhead_norm_argmax(&g, 1, 128256, 1024, 1, 1, 0); // the 300M's lm head at batch 1 (no L2 prefetch)
    cases_lmhead_norm_argmax(&g, 4, 128256, 1024, 1, 1, 0); // batch 4
    // the token ring pushed by the same op (decoding's step): the GEMV's last block at batch 1, the unfused ops at 3
    cases_lmhead_norm_argmax(&g, 1, 3001, 1024, 1, 0, 4);
    cases_lmhead_norm_argmax(&g, 3, 1000, 256, 1, 0, 5);
    // AdamW with the state in lower precision (use_precision_aware_optimizer): bf16 moments, masters as remainders
    // in some runs (a mask over the layout's runs), fp32 masters in the others; appended, as above
    cases_adamw_multi_lp(&g, 0, 1, ADAMW_M_BF16 | ADAMW_V_BF16, 0x15);
    cases_adamw_multi_lp(&g, 1, 5, ADAMW_M_BF16 | ADAMW_V_BF16, 0x5);
    cases_adamw_multi_lp(&g, 0, 3, ADAMW_M_BF16, 0);
    cases_adamw_multi_lp(&g, 1, 2, ADAMW_V_BF16, 0xf);
    cases_adamw_multi_lp(&g, 0, 2, 0, 0x1f);
    // decoding's gate|up GEMV with SwiGLU in its epilogue (gate and up rows paired in a block; appended, as above)
    cases_rmsnorm_matmul_swiglu(&g, 1, 4096, 1024, 1); // the 300M's gate|up at batch 1: 1 slice, several rounds
    cases_rmsnorm_matmul_swiglu(&g, 3, 102, 1024, 1);  // batch 3: a 4-row tile, the last round's pairs past F idle
    cases_rmsnorm_matmul_swiglu(&g, 1, 70, 40, 0);     // no residual, short K
    cases_rmsnorm_matmul_swiglu(&g, 2, 24, 2048, 1);   // few features, long K: 4 slices, one feature a round
    cases_rmsnorm_matmul_swiglu(&g, 1, 50, 36, 1);     // K % 8 != 0: the unfused ops
    cases_rmsnorm_matmul_swiglu(&g, 16, 64, 48, 1);    // batch 16: the unfused ops
    // a GDN block's whole decode step (appended, as above): batch 1 in one kernel, block 0's form, batch 2's five ops
    cases_gdn_decode_block(&g, 1, 256, 2, 4, 32, 48, 4, 200, 1);
    cases_gdn_decode_block(&g, 1, 256, 2, 4, 32, 48, 4, 200, 0);
    cases_gdn_decode_block(&g, 2, 256, 2, 4, 32, 48, 4, 200, 1);
    cases_gdn_decode_block(&g, 1, 1024, 4, 8, 64, 64, 4, 4096, 1); // the 300M's block
    if (quick) {
        int w = 0;
        for (int x = 0; x < g_ncases; x++)
            if (!g_cases[x].big) g_cases[w++] = g_cases[x];
        g_ncases = w;
    }
}

// ===================================================================================================
// special checks

// The CUDA backend in fp32 (bf16 = 0) or bf16 mode; NULL, said on stderr, without a usable GPU.
static const Backend *gpu_backend(int bf16) {
    char err[ERR_LEN];
    const Backend *be = backend_cuda(bf16, err, sizeof err);
    if (!be) fprintf(stderr, "test_cuda_ops: no usable GPU: %s\n", err);
    return be;
}

// to_act / from_act against util/common.h's f32_to_bf16 on edge values.
static void check_conversion(const Backend *be) {
    float vals[] = {0.0f,      -0.0f,  1.0f,    1.00390625f,    1.0078125f,    1.01171875f, 3.14159265f,
                    -2.5e-40f, 1e-38f, 3.0e38f, 3.4e38f,        INFINITY,      -INFINITY,   NAN,
                    65504.0f,  -1.5f,  0.1f,    1.0f + 0x1p-8f, 1.0f + 0x1p-9f};
    int n = (int)(sizeof vals / sizeof vals[0]);
    float *dv = be->alloc(sizeof vals);
    void *act = be->alloc(sizeof vals);
    float *back = be->alloc(sizeof vals);
    be->memcpy_h2d(dv, vals, sizeof vals);
    be->to_act(act, dv, n);
    be->from_act(back, act, n);
    uint16_t raw[32];
    float out[32];
    be->memcpy_d2h(raw, act, n * 2);
    be->memcpy_d2h(out, back, sizeof vals);
    int bad = 0;
    for (int x = 0; x < n; x++) {
        uint16_t want = f32_to_bf16(vals[x]);
        int nan_ok = isnan(vals[x]) && (raw[x] & 0x7fff) > 0x7f80;
        if ((raw[x] != want && !nan_ok) || (memcmp(&out[x], &(float){bf16_to_f32(raw[x])}, 4) && !isnan(out[x]))) {
            printf("     to_act(%g) = 0x%04x, want 0x%04x\n", vals[x], raw[x], want);
            bad = 1;
        }
    }
    be->free(dv), be->free(act), be->free(back);
    g_checks++;
    if (bad) g_failures++;
    printf("%s %-62s bf16  round-to-nearest-even as util/common.h\n", bad ? "FAIL" : "PASS", "to_act/from_act");
}

// mem_stats (gdn bench's "peak allocated" against PyTorch's max_memory_allocated; the mem-* TensorBoard tags) counts
// what the backend's buffers hold: 600 small buffers (the pointer table grows past its first sizes) and one of 64 MiB
// that sets the peak, freed in a scrambled order with new ones in between. Allocated bytes and count must follow
// every call exactly, and one buffer 1 MiB larger than that peak alone must raise the peak by exactly the difference
// (any byte a free failed to take back would show).
static void check_mem_stats(const Backend *be) {
    enum { NB = 600, SMALL = 4096 };
    const size_t MiB = (size_t)1 << 20, big_b = 64 * MiB;
    BackendMemStats m0, m;
    be->mem_stats(&m0);
    void *small[NB];
    size_t live = 0, top = 0, n = 0; // this check's bytes and buffers, and its most bytes
    int exact = 1;                    // allocated and count == what was there before plus this check's
    for (int i = 0; i < NB; i++) small[i] = be->alloc(SMALL), live += SMALL, n++;
    void *big = be->alloc(big_b);
    live += big_b, n++, top = live;
    be->mem_stats(&m);
    const size_t p1 = m.peak;
    exact &= m.allocated == m0.allocated + live && m.count == m0.count + n;
    for (int k = 0; k < NB; k++) { // free in the order 7k mod 600 (7 is prime to 600), a new buffer every 5th
        const int i = (int)((7L * k) % NB);
        be->free(small[i]), live -= SMALL, n--;
        small[i] = NULL;
        if (k % 5 == 4) small[i] = be->alloc(2 * SMALL), live += 2 * SMALL, n++;
        if (k % 97 == 0) be->mem_stats(&m), exact &= m.allocated == m0.allocated + live && m.count == m0.count + n;
    }
    be->free(big), live -= big_b, n--;
    for (int i = 0; i < NB; i++)
        if (small[i]) be->free(small[i]), live -= 2 * SMALL, n--;
    be->mem_stats(&m);
    exact &= live == 0 && n == 0 && m.allocated == m0.allocated && m.count == m0.count;
    void *over = be->alloc(top + MiB);
    be->mem_stats(&m);
    const size_t p2 = m.peak;
    be->free(over);
    // (reserved is the device's own figure: 0 in the emulator)
    const int ok = exact && p1 >= m0.allocated + top && p2 - p1 == MiB;
    g_checks++;
    if (!ok) g_failures++;
    printf("%s %-62s %s  peak %zu -> %zu bytes (want +%zu); allocated and count exact: %s\n", ok ? "PASS" : "FAIL",
           "mem_stats", be->name, p1, p2, MiB, exact ? "yes" : "NO");
}

// Bad ids must stop the run with a message naming the op, row and id. Each check runs in a fresh
// process (this binary re-executed with --bad-id-child N), which must die with exit status 1.
static int bad_id_child(int which) {
    const Backend *be = gpu_backend(1);
    if (!be) return 10;
    int32_t ids[4] = {1, 2, 77, 3};
    int32_t *d_ids = be->alloc(sizeof ids);
    be->memcpy_h2d(d_ids, ids, sizeof ids);
    void *x = be->alloc(4 * 16 * 2);
    float *f = be->alloc(64 * 16 * 4);
    if (which == 0)
        be->embedding_bwd(f, x, d_ids, 4, 16, 50);
    else
        be->lmhead_ce(f, NULL, NULL, x, x, d_ids, 4, 16, 4, NULL, NULL, 0); // V = 4: id 77 is out of range
    be->sync();
    return 0; // not reached when the bad id is reported
}

static void check_bad_ids(void) {
    for (int which = 0; which < 2; which++) {
        int fds[2];
        if (pipe(fds)) die("test: pipe failed");
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            dup2(fds[1], 2);
            char arg[4];
            snprintf(arg, sizeof arg, "%d", which);
            execl("/proc/self/exe", "test_cuda_ops", "--bad-id-child", arg, (char *)NULL);
            _exit(11);
        }
        close(fds[1]);
        char msg[2048] = "";
        size_t len = 0;
        ssize_t r;
        while ((r = read(fds[0], msg + len, sizeof msg - 1 - len)) > 0) len += (size_t)r;
        msg[len] = 0;
        close(fds[0]);
        int status = 0;
        waitpid(pid, &status, 0);
        const char *want = which == 0 ? "embedding_bwd: token id 77 at row 2" : "lmhead_ce: target id 77 at row 2";
        int ok = WIFEXITED(status) && WEXITSTATUS(status) == 1 && strstr(msg, want);
        g_checks++;
        if (!ok) g_failures++;
        printf("%s %-62s id out of range is reported and stops the run\n", ok ? "PASS" : "FAIL",
               which == 0 ? "embedding_bwd bad id" : "lmhead_ce bad target");
        if (!ok) printf("     exit status %d, stderr: %s\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1, msg);
    }
}

// ===================================================================================================
// benchmark at the 300M shapes (bf16)

typedef struct {
    const Backend *be;
    void *p[12];
    const int32_t *ds; // doc_start for the conv and delta-rule entries (NULL: one document per row)
    int i[8];
    int which;
} BenchCtx;

enum {
    BE_EMB_F,
    BE_EMB_B,
    BE_RMS_F,
    BE_RMS_B,
    BE_MM_F,
    BE_MM_SWIGLU,
    BE_MM_SWIGLU_BWD,
    BE_MM_BX,
    BE_MM_BW,
    BE_CONV_F,
    BE_CONV_B,
    BE_L2_F,
    BE_L2_B,
    BE_GATE_F,
    BE_GATE_B,
    BE_DR_F,
    BE_DR_B,
    BE_GRMS_F,
    BE_GRMS_B,
    BE_SWI_F,
    BE_SWI_B,
    BE_CE,
    BE_ADAMW,
    BE_ADAMW_MULTI,
    BE_SUMSQ
};

static void bench_call(void *vctx) {
    BenchCtx *x = vctx;
    const Backend *be = x->be;
    void **p = x->p;
    int *I = x->i;
    switch (x->which) {
    case BE_EMB_F:
        be->embedding_fwd(p[0], p[1], p[2], I[0], I[1]);
        break;
    case BE_EMB_B:
        be->embedding_bwd(p[0], p[1], p[2], I[0], I[1], I[2]);
        break;
    case BE_RMS_F:
        be->rmsnorm_fwd(p[0], p[1], p[2], p[3], p[4], p[5], I[0], I[1], 1e-6f);
        break;
    case BE_RMS_B:
        be->rmsnorm_bwd(p[0], p[1], p[2], p[3], p[4], p[5], p[6], I[0], I[1]);
        break;
    case BE_MM_F:
        be->matmul_fwd(p[0], I[1], p[1], I[2], p[2], I[0], I[1], I[2], 0);
        break;
    case BE_MM_SWIGLU: // gu, h, x, W; M F K
        be->matmul_swiglu_fwd(p[0], p[1], p[2], I[2], p[3], I[0], I[1], I[2]);
        break;
    case BE_MM_SWIGLU_BWD: // dgu, dh, dy, W, gu; M F K
        be->matmul_swiglu_bwd(p[0], NULL, p[1], p[2], I[2], p[3], p[4], I[0], I[1], I[2]);
        break;
    case BE_MM_BX:
        be->matmul_bwd(p[0], I[2], NULL, p[1], I[1], NULL, I[2], p[2], I[0], I[1], I[2], 0);
        break;
    case BE_MM_BW:
        be->matmul_bwd(NULL, I[2], p[3], p[1], I[1], p[0], I[2], NULL, I[0], I[1], I[2], 0);
        break;
    case BE_CONV_F:
        be->conv_silu_fwd(p[0], I[2], p[1], I[2], p[2], NULL, NULL, I[0], I[1], I[2], 4, x->ds);
        break;
    case BE_CONV_B:
        be->conv_silu_bwd(p[0], I[2], p[3], p[4], I[2], p[1], I[2], p[2], I[0], I[1], I[2], 4, x->ds);
        break;
    case BE_L2_F:
        be->l2norm_fwd(p[0], I[3], p[1], p[2], I[3], I[0], I[1], I[2]);
        break;
    case BE_L2_B:
        be->l2norm_bwd(p[3], I[3], p[2], I[3], p[0], I[3], p[1], I[0], I[1], I[2]);
        break;
    case BE_GATE_F:
        be->gate_fwd(p[0], p[1], p[2], (char *)p[2] + 16, I[2], p[3], p[4], I[0], I[1]);
        break;
    case BE_GATE_B:
        be->gate_bwd(p[5], (char *)p[5] + 16, I[2], p[6], p[7], p[0], p[1], p[2], (char *)p[2] + 16, p[3], p[4], I[0],
                     I[1]);
        break;
    case BE_DR_F:
    case BE_DR_B: { // H=4 HV=8 dk=dv=64: q|k interleaved with row stride 256, v and o 512
        DeltaRuleArgs a = {.q = p[2], .k = p[3], .ldqk = 256, .v = p[4], .ldv = 512, .beta = p[5], .gamma = p[6],
                           .h_save = p[1], .B = I[0], .T = I[1], .H = 4, .HV = 8, .dk = 64, .dv = 64, .scale = 0.125f,
                           .doc_start = x->ds};
        if (x->which == BE_DR_F) {
            be->delta_rule_fwd(&a, p[0], 512, NULL);
        } else {
            DeltaRuleGrads g = {.dq = p[7], .dk = p[8], .lddqk = 256, .dv = p[9], .lddv = 512, .dbeta = p[10],
                                .dgamma = p[11]};
            be->delta_rule_bwd(&a, p[0], 512, &g);
        }
        break;
    }
    case BE_GRMS_F:
        be->gated_rmsnorm_fwd(p[0], 512, p[1], p[2], 512, p[3], 512, p[4], I[0], 8, 64, 1e-6f);
        break;
    case BE_GRMS_B:
        be->gated_rmsnorm_bwd(p[5], 512, p[6], 512, p[7], p[0], 512, p[2], 512, p[3], 512, p[1], p[4], I[0], 8, 64);
        break;
    case BE_SWI_F:
        be->swiglu_fwd(p[0], p[1], I[0], I[1]);
        break;
    case BE_SWI_B:
        be->swiglu_bwd(p[2], p[3], p[0], p[1], I[0], I[1]);
        break;
    case BE_CE:
        be->lmhead_ce(p[0], p[1], p[2], p[3], p[4], p[5], I[0], I[1], I[2], p[6], NULL, 0);
        break;
    case BE_ADAMW:
        be->adamw(p[0], p[1], p[2], p[3], p[4], (size_t)I[0], 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 10, 1.0f);
        break;
    case BE_ADAMW_MULTI: // p[5]: the chunk table, I[1] chunks; p[6]: the clip scale
        be->adamw_multi(p[5], I[1], p[0], p[1], p[2], p[3], p[4], 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 10, p[6]);
        break;
    case BE_SUMSQ:
        be->sumsq(p[1], p[0], (size_t)I[0]);
        break;
    }
}

// A device buffer of n act (or fp32) values, filled from a repeating random host pattern.
static void *bench_buf(const Backend *be, size_t n, int act, float mean, float std, Rng *g) {
    enum { PAT = 1 << 20 };
    static float *pat;
    if (!pat) {
        pat = xmalloc(PAT * sizeof(float));
        for (int x = 0; x < PAT; x++) pat[x] = rng_normal(g);
    }
    float *tmp = be->alloc(n * 4);
    float *chunk = xmalloc(PAT * sizeof(float));
    for (size_t off = 0; off < n; off += PAT) {
        size_t len = n - off < PAT ? n - off : PAT;
        for (size_t x = 0; x < len; x++) chunk[x] = mean + std * pat[(x + off / PAT * 7919) % PAT];
        be->memcpy_h2d(tmp + off, chunk, len * 4);
    }
    free(chunk);
    if (!act) return tmp;
    void *a = be->alloc(n * be->act_bytes);
    be->to_act(a, tmp, n);
    be->sync();
    be->free(tmp);
    return a;
}

static void bench_report(BenchCtx *x, const char *name, double bytes, double flops) {
    x->be->time_ms(bench_call, x, 1); // warm-up (plans, pool, lazy loading)
    double ms = x->be->time_ms(bench_call, x, 5);
    if (ms < 0) { // the CPU emulator has no timing
        printf("%-34s ran (no timing in the emulator)\n", name);
        return;
    }
    double floor_ms = flops > 0 ? flops / 790e12 * 1e3 : bytes / 4.3e12 * 1e3;
    if (flops > 0)
        printf("%-34s %9.3f ms  %8.1f TFLOP/s  floor %8.3f ms (%.0f%% of peak)\n", name, ms, flops / ms / 1e9, floor_ms,
               100 * floor_ms / ms);
    else
        printf("%-34s %9.3f ms  %8.1f GB/s     floor %8.3f ms (%.0f%% of peak)\n", name, ms, bytes / ms / 1e6, floor_ms,
               100 * floor_ms / ms);
    fflush(stdout);
}

static int run_bench(int small, int gemm_only) {
    const Backend *be = gpu_backend(1);
    if (!be) return 2;
    Rng g = {7};
    // --bench-small: the same code at tiny B, T, V and parameter count (a smoke run, e.g. in the emulator)
    const int B = small ? 1 : 16, T = small ? 128 : 2048, N = B * T, h = 1024, F = 4096, V = small ? 1000 : 128256;
    const int HV = 8, Kd = 256, Vd = 512;
    const double ab = 2; // bf16
    printf("bench: bf16, B=%d T=%d (N=%d) h=%d H=4 HV=%d dk=dv=64 F=%d V=%d; floors: bytes / 4.3 TB/s or FLOPs / "
           "790 TFLOP/s\n",
           B, T, N, h, HV, F, V);
    BenchCtx x;
    memset(&x, 0, sizeof x);
    x.be = be;
    int32_t *ids = xmalloc((size_t)N * 4);
    for (int n = 0; n < N; n++) ids[n] = (int)(rng_u64(&g) % V);

    if (!gemm_only) { // embedding
        void *E = bench_buf(be, (size_t)V * h, 1, 0, 0.02f, &g), *xx = bench_buf(be, (size_t)N * h, 1, 0, 1, &g);
        int32_t *d_ids = be->alloc((size_t)N * 4);
        be->memcpy_h2d(d_ids, ids, (size_t)N * 4);
        float *dE = be->alloc((size_t)V * h * 4);
        x.which = BE_EMB_F, x.p[0] = xx, x.p[1] = d_ids, x.p[2] = E, x.i[0] = N, x.i[1] = h;
        bench_report(&x, "embedding_fwd", 2.0 * N * h * ab, 0);
        x.which = BE_EMB_B, x.p[0] = dE, x.p[1] = xx, x.p[2] = d_ids, x.i[2] = V;
        bench_report(&x, "embedding_bwd", N * h * (ab + 8.0), 0);
        be->free(E), be->free(xx), be->free(d_ids), be->free(dE);
    }
    if (!gemm_only) { // rmsnorm
        void *xx = bench_buf(be, (size_t)N * h, 1, 0, 1, &g), *r = bench_buf(be, (size_t)N * h, 1, 0, 1, &g);
        void *y = bench_buf(be, (size_t)N * h, 1, 0, 1, &g), *s = bench_buf(be, (size_t)N * h, 1, 0, 1, &g);
        float *rstd = bench_buf(be, N, 0, 1, 0.1f, &g), *w = bench_buf(be, h, 0, 1, 0.1f, &g), *dw = be->alloc(h * 4);
        x.which = BE_RMS_F, x.p[0] = y, x.p[1] = rstd, x.p[2] = s, x.p[3] = xx, x.p[4] = r, x.p[5] = w;
        x.i[0] = N, x.i[1] = h;
        bench_report(&x, "rmsnorm_fwd (+resid)", 4.0 * N * h * ab, 0);
        x.which = BE_RMS_B, x.p[0] = xx, x.p[1] = dw, x.p[2] = y, x.p[3] = s, x.p[4] = rstd, x.p[5] = w, x.p[6] = r;
        bench_report(&x, "rmsnorm_bwd (+dres)", 4.0 * N * h * ab, 0);
        be->free(xx), be->free(r), be->free(y), be->free(s), be->free(rstd), be->free(w), be->free(dw);
    }
    { // GEMMs of one layer: fused q|k|v|g|b|a projection, o_proj, gate|up, down; and their backward; and the
      // three GEMMs of one 8192-row chunk of the lm head (x4 per step, bf16 logits as in lmhead_ce's bf16 mode)
        const int shapes[5][2] = {{2 * Kd + 2 * Vd + 2 * HV, h}, {h, Vd}, {2 * F, h}, {h, F}, {V, h}};
        const char *names[5] = {"in_proj [1552 x 1024]", "o_proj [1024 x 512]", "gate|up [8192 x 1024]",
                                "down [1024 x 4096]", "lm head chunk [128256 x 1024] M=8192"};
        for (int s = 0; s < 5; s++) {
            int No = shapes[s][0], K = shapes[s][1], M = s == 4 && N > 8192 ? 8192 : N;
            void *xx = bench_buf(be, (size_t)M * K, 1, 0, 1, &g), *W = bench_buf(be, (size_t)No * K, 1, 0, 0.02f, &g);
            void *y = bench_buf(be, (size_t)M * No, 1, 0, 1, &g);
            float *dW = be->alloc((size_t)No * K * 4);
            double fl = 2.0 * M * No * K;
            char nm[80];
            x.which = BE_MM_F, x.p[0] = y, x.p[1] = xx, x.p[2] = W, x.i[0] = M, x.i[1] = No, x.i[2] = K;
            snprintf(nm, sizeof nm, "matmul_fwd %s", names[s]);
            bench_report(&x, nm, 0, fl);
            x.which = BE_MM_BX, x.p[0] = xx, x.p[1] = y, x.p[2] = W;
            snprintf(nm, sizeof nm, "matmul_bwd dx %s", names[s]);
            bench_report(&x, nm, 0, fl);
            x.which = BE_MM_BW, x.p[0] = xx, x.p[1] = y, x.p[3] = dW;
            snprintf(nm, sizeof nm, "matmul_bwd dW %s", names[s]);
            bench_report(&x, nm, 0, fl);
            be->free(xx), be->free(W), be->free(y), be->free(dW);
        }
    }
    { // the MLP's gate|up GEMM with SwiGLU (fused under GDN_CUDA_GEMM=wg): against matmul_fwd gate|up + swiglu_fwd
        void *xx = bench_buf(be, (size_t)N * h, 1, 0, 1, &g), *W = bench_buf(be, (size_t)2 * F * h, 1, 0, 0.02f, &g);
        void *gu = be->alloc((size_t)N * 2 * F * 2), *hh = be->alloc((size_t)N * F * 2);
        x.which = BE_MM_SWIGLU, x.p[0] = gu, x.p[1] = hh, x.p[2] = xx, x.p[3] = W, x.i[0] = N, x.i[1] = F, x.i[2] = h;
        bench_report(&x, "matmul_swiglu_fwd gate|up + SwiGLU", 0, 2.0 * N * 2 * F * h);
        be->free(xx), be->free(W), be->free(gu), be->free(hh);
    }
    { // its backward through the down projection (fused under GDN_CUDA_GEMM=wg): against matmul_bwd dx down + swiglu_bwd
        void *dy = bench_buf(be, (size_t)N * h, 1, 0, 1, &g), *W = bench_buf(be, (size_t)h * F, 1, 0, 0.02f, &g);
        void *gu = bench_buf(be, (size_t)N * 2 * F, 1, 0, 1, &g);
        void *dgu = be->alloc((size_t)N * 2 * F * 2), *dh = be->alloc((size_t)N * F * 2);
        x.which = BE_MM_SWIGLU_BWD, x.p[0] = dgu, x.p[1] = dh, x.p[2] = dy, x.p[3] = W, x.p[4] = gu;
        x.i[0] = N, x.i[1] = F, x.i[2] = h;
        bench_report(&x, "matmul_swiglu_bwd down dx + SwiGLU bwd", 0, 2.0 * N * F * h);
        be->free(dy), be->free(W), be->free(gu), be->free(dgu), be->free(dh);
    }
    if (gemm_only) { // the GEMMs alone: `GDN_CUDA_GEMM_ALGO=r test_cuda_ops --bench-gemm` sweeps cuBLASLt's choices
        free(ids);
        return 0;
    }
    { // conv (q|k|v: D = 1024), l2norm (q: 4 heads of 64 inside the 1024-wide conv output)
        const int D = 2 * Kd + Vd;
        void *xx = bench_buf(be, (size_t)N * D, 1, 0, 1, &g), *y = bench_buf(be, (size_t)N * D, 1, 0, 1, &g);
        void *dx = bench_buf(be, (size_t)N * D, 1, 0, 1, &g);
        float *w = bench_buf(be, (size_t)D * 4, 0, 0, 0.3f, &g), *dw = be->alloc((size_t)D * 4 * 4);
        float *rstd = be->alloc((size_t)N * 4 * 4);
        x.which = BE_CONV_F, x.p[0] = y, x.p[1] = xx, x.p[2] = w, x.i[0] = B, x.i[1] = T, x.i[2] = D;
        bench_report(&x, "conv_silu_fwd D=1024", 2.0 * N * D * ab, 0);
        x.which = BE_CONV_B, x.p[0] = dx, x.p[1] = xx, x.p[2] = w, x.p[3] = dw, x.p[4] = y;
        bench_report(&x, "conv_silu_bwd D=1024", 3.0 * N * D * ab, 0);
        { // the same with packed documents
            int32_t *dsh = xmalloc((size_t)N * 4), *eids = xmalloc((size_t)N * 4);
            doc_layout_random(&g, eids, dsh, B, T);
            int32_t *ds = be->alloc((size_t)N * 4);
            be->memcpy_h2d(ds, dsh, (size_t)N * 4);
            x.ds = ds;
            x.which = BE_CONV_F, x.p[0] = y;
            bench_report(&x, "conv_silu_fwd D=1024 (packed documents)", 2.0 * N * D * ab, 0);
            x.which = BE_CONV_B, x.p[0] = dx;
            bench_report(&x, "conv_silu_bwd D=1024 (packed documents)", 3.0 * N * D * ab, 0);
            x.ds = NULL;
            be->free(ds), free(dsh), free(eids);
        }
        x.which = BE_L2_F, x.p[0] = y, x.p[1] = rstd, x.p[2] = xx, x.i[0] = N, x.i[1] = 4, x.i[2] = 64, x.i[3] = D;
        bench_report(&x, "l2norm_fwd (q, 4 x 64)", 2.0 * N * Kd * ab, 0);
        x.which = BE_L2_B, x.p[0] = y, x.p[1] = rstd, x.p[2] = xx, x.p[3] = dx;
        bench_report(&x, "l2norm_bwd (q, 4 x 64)", 3.0 * N * Kd * ab, 0);
        be->free(xx), be->free(y), be->free(dx), be->free(w), be->free(dw), be->free(rstd);
    }
    { // gate: b|a columns of a 16-wide buffer
        void *ba = bench_buf(be, (size_t)N * 16, 1, 0, 1, &g), *dba = bench_buf(be, (size_t)N * 16, 1, 0, 1, &g);
        float *beta = be->alloc((size_t)N * HV * 4), *gam = be->alloc((size_t)N * HV * 4);
        float *Al = bench_buf(be, HV, 0, 1, 0.5f, &g), *dt = bench_buf(be, HV, 0, -4, 1, &g);
        float *dAl = be->alloc(HV * 4), *ddt = be->alloc(HV * 4);
        x.which = BE_GATE_F, x.p[0] = beta, x.p[1] = gam, x.p[2] = ba, x.p[3] = Al, x.p[4] = dt;
        x.i[0] = N, x.i[1] = HV, x.i[2] = 16;
        bench_report(&x, "gate_fwd", N * 16 * ab + 2.0 * N * HV * 4, 0);
        x.which = BE_GATE_B, x.p[0] = beta, x.p[1] = gam, x.p[5] = dba, x.p[6] = dAl, x.p[7] = ddt;
        bench_report(&x, "gate_bwd", 2.0 * N * 16 * ab + 2.0 * N * HV * 4, 0);
        be->free(ba), be->free(dba), be->free(beta), be->free(gam), be->free(Al), be->free(dt), be->free(dAl),
            be->free(ddt);
    }
    { // delta rule: q|k as a 256-wide pair of buffers, v/o 512 wide
        size_t NT = (T + 63) / 64, hs_n = (size_t)B * HV * NT * 64 * 64;
        void *o = bench_buf(be, (size_t)N * Vd, 1, 0, 1, &g), *hsv = be->alloc(hs_n * 2);
        void *q = bench_buf(be, (size_t)N * Kd, 1, 0, 0.125f, &g), *k = bench_buf(be, (size_t)N * Kd, 1, 0, 0.125f, &g);
        void *v = bench_buf(be, (size_t)N * Vd, 1, 0, 1, &g);
        float *beta = bench_buf(be, (size_t)N * HV, 0, 0.5f, 0.1f, &g),
              *gam = bench_buf(be, (size_t)N * HV, 0, -0.5f, 0.1f, &g);
        void *dq = be->alloc((size_t)N * Kd * 2), *dk = be->alloc((size_t)N * Kd * 2),
             *dv = be->alloc((size_t)N * Vd * 2);
        float *db = be->alloc((size_t)N * HV * 4), *dg = be->alloc((size_t)N * HV * 4);
        x.which = BE_DR_F, x.p[0] = o, x.p[1] = hsv, x.p[2] = q, x.p[3] = k, x.p[4] = v, x.p[5] = beta, x.p[6] = gam;
        x.i[0] = B, x.i[1] = T;
        // useful FLOPs per (b, v head, chunk): KK^T, solve, W, U, W h, K^T V, Q K^T, Q h, S V: ~9 x 2*64^3
        double dr_fl = (double)B * HV * NT * 9 * 2 * 64.0 * 64 * 64;
        bench_report(&x, "delta_rule_fwd", 0, dr_fl);
        x.which = BE_DR_B, x.p[0] = o, x.p[1] = hsv, x.p[7] = dq, x.p[8] = dk, x.p[9] = dv, x.p[10] = db, x.p[11] = dg;
        bench_report(&x, "delta_rule_bwd", 0, 2.5 * dr_fl);
        // packed documents: EOD-separated rows (documents of 1..1024 tokens, ~500 on average), the same work
        int32_t *dsh = xmalloc((size_t)N * 4), *eids = xmalloc((size_t)N * 4);
        doc_layout_random(&g, eids, dsh, B, T);
        int32_t *ds = be->alloc((size_t)N * 4);
        be->memcpy_h2d(ds, dsh, (size_t)N * 4);
        x.ds = ds;
        x.which = BE_DR_F, x.p[0] = o;
        bench_report(&x, "delta_rule_fwd (packed documents)", 0, dr_fl);
        x.which = BE_DR_B;
        bench_report(&x, "delta_rule_bwd (packed documents)", 0, 2.5 * dr_fl);
        x.ds = NULL;
        be->free(ds), free(dsh), free(eids);
        be->free(o), be->free(hsv), be->free(q), be->free(k), be->free(v), be->free(beta), be->free(gam);
        be->free(dq), be->free(dk), be->free(dv), be->free(db), be->free(dg);
    }
    { // gated rmsnorm, swiglu
        void *o = bench_buf(be, (size_t)N * Vd, 1, 0, 1, &g), *z = bench_buf(be, (size_t)N * Vd, 1, 0, 1, &g);
        void *y = bench_buf(be, (size_t)N * Vd, 1, 0, 1, &g), *dz = bench_buf(be, (size_t)N * Vd, 1, 0, 1, &g);
        float *rstd = bench_buf(be, (size_t)N * HV, 0, 1, 0.1f, &g), *w = bench_buf(be, 64, 0, 1, 0.1f, &g);
        float *dw = be->alloc(64 * 4);
        x.which = BE_GRMS_F, x.p[0] = y, x.p[1] = rstd, x.p[2] = o, x.p[3] = z, x.p[4] = w, x.i[0] = N;
        bench_report(&x, "gated_rmsnorm_fwd", 3.0 * N * Vd * ab, 0);
        x.which = BE_GRMS_B, x.p[0] = y, x.p[5] = dz, x.p[6] = dz, x.p[7] = dw;
        x.p[5] = bench_buf(be, (size_t)N * Vd, 1, 0, 1, &g);
        bench_report(&x, "gated_rmsnorm_bwd", 5.0 * N * Vd * ab, 0);
        be->free(x.p[5]), be->free(o), be->free(z), be->free(y), be->free(dz), be->free(rstd), be->free(w),
            be->free(dw);
        void *gu = bench_buf(be, (size_t)N * 2 * F, 1, 0, 1, &g), *sy = bench_buf(be, (size_t)N * F, 1, 0, 1, &g);
        void *dgu = be->alloc((size_t)N * 2 * F * 2);
        x.which = BE_SWI_F, x.p[0] = sy, x.p[1] = gu, x.i[0] = N, x.i[1] = F;
        bench_report(&x, "swiglu_fwd F=4096", 3.0 * N * F * ab, 0);
        x.which = BE_SWI_B, x.p[0] = sy, x.p[1] = gu, x.p[2] = dgu, x.p[3] = NULL;
        bench_report(&x, "swiglu_bwd F=4096", 5.0 * N * F * ab, 0);
        x.p[3] = sy; // recompute_swiglu: y recomputed over dy (the bench's dy is garbage after the first call)
        bench_report(&x, "swiglu_bwd F=4096 +y", 6.0 * N * F * ab, 0);
        x.p[3] = NULL;
        be->free(gu), be->free(sy), be->free(dgu);
    }
    { // lm head + CE
        void *y = bench_buf(be, (size_t)N * h, 1, 0, 1, &g), *E = bench_buf(be, (size_t)V * h, 1, 0, 0.02f, &g);
        void *dy = be->alloc((size_t)N * h * 2);
        float *dE = be->alloc((size_t)V * h * 4), *losses = be->alloc((size_t)N * 4);
        int32_t *d_t = be->alloc((size_t)N * 4);
        be->memcpy_h2d(d_t, ids, (size_t)N * 4);
        float *scale = be->alloc(4), inv_n = 1.0f / N;
        be->memcpy_h2d(scale, &inv_n, 4);
        x.which = BE_CE, x.p[0] = losses, x.p[1] = dy, x.p[2] = dE, x.p[3] = y, x.p[4] = E, x.p[5] = d_t, x.p[6] = scale;
        x.i[0] = N, x.i[1] = h, x.i[2] = V;
        bench_report(&x, "lmhead_ce (fwd+bwd, 3 GEMMs)", 0, 3 * 2.0 * N * (double)V * h);
        be->free(y), be->free(E), be->free(dy), be->free(dE), be->free(losses), be->free(d_t), be->free(scale);
    }
    { // optimizer over the 300M parameters
        size_t n = small ? 1000003 : 307767232;
        float *p = bench_buf(be, n, 0, 0, 0.02f, &g), *gg = bench_buf(be, n, 0, 0, 1, &g);
        float *m = be->alloc(n * 4), *v = be->alloc(n * 4), *out = be->alloc(16);
        void *pact = be->alloc(n * 2);
        x.which = BE_ADAMW, x.p[0] = p, x.p[1] = pact, x.p[2] = gg, x.p[3] = m, x.p[4] = v;
        x.i[0] = (int)n;
        bench_report(&x, "adamw (all parameters)", n * (4.0 * 4 + 3 * 4 + 2), 0);
        AdamwPlan plan = {0}; // the training step's form: one launch over 64K-element chunks
        adamw_plan_add(&plan, 0, 0, 0, n, 1);
        adamw_plan_upload(&plan, be);
        float one = 1.0f, *gs = be->alloc(4);
        be->memcpy_h2d(gs, &one, 4);
        x.which = BE_ADAMW_MULTI, x.p[5] = plan.dev, x.p[6] = gs, x.i[1] = plan.n;
        bench_report(&x, "adamw_multi (all parameters)", n * (4.0 * 4 + 3 * 4 + 2), 0);
        adamw_plan_free(&plan, be);
        be->free(gs);
        x.which = BE_SUMSQ, x.p[0] = gg, x.p[1] = out;
        bench_report(&x, "sumsq (all parameters)", n * 4.0, 0);
        be->free(p), be->free(gg), be->free(m), be->free(v), be->free(out), be->free(pact);
    }
    free(ids);
    return 0;
}

// ===================================================================================================

int main(int argc, char **argv) {
    if (arg_is_help(argc, argv)) {
        printf("usage: test_cuda_ops [--quick] [--only OP] [--bench]\n"
               "  compares every CUDA backend op with the CPU twin in fp32 and bf16 mode (see the file's header)\n"
               "  --quick    small shapes only      --only OP  cases whose name contains OP\n"
               "  --bench    time each op at the 300M model's shapes (bf16)\n"
               "  --bench-small  the benchmark's code at tiny shapes (a smoke run)\n"
               "  --bench-gemm   the benchmark's GEMMs only (with GDN_CUDA_GEMM_ALGO=r: cuBLASLt's r-th choice)\n"
               "  env: GDN_CUDA_DEBUG=1 synchronises after every kernel; VERBOSE=1 prints worst elements\n");
        return 0;
    }
    if (arg_flag(argc, argv, "--bench") || arg_flag(argc, argv, "--bench-small") || arg_flag(argc, argv, "--bench-gemm"))
        return run_bench(arg_flag(argc, argv, "--bench-small"), arg_flag(argc, argv, "--bench-gemm"));
    const char *child = arg_get(argc, argv, "--bad-id-child");
    if (child) return bad_id_child(atoi(child));
    const int quick = arg_flag(argc, argv, "--quick");
    const char *only = arg_get(argc, argv, "--only");
    // the GEMV's tiles of 2 and 4 rows (off by default: cuBLASLt is faster there) stay covered: GDN_GEMV_MAX_M turns
    // them on
    setenv("GDN_GEMV_MAX_M", "4", 0);
    const Backend *cpu = backend_cpu();
    const Backend *g32 = gpu_backend(0);
    const Backend *g16 = g32 ? gpu_backend(1) : NULL;
    if (!g32 || !g16) return 2;
    atexit(report_abort);
    build_cases(quick);
    check_conversion(g16);
    if (!only || strstr("mem_stats", only)) check_mem_stats(g32);
    if (!only) check_bad_ids();
    if (!only || strstr("adamw_multi", only)) check_adamw_multi_per_run(g32, 0), check_adamw_multi_per_run(g16, 1);
    if (!only || strstr("delta_rule_fwd", only) || strstr("delta_rule_bwd", only)) check_delta_scratch(g32), check_delta_scratch(g16);
    if (!only || strstr("swiglu_bwd", only)) check_swiglu_recompute(g32), check_swiglu_recompute(g16);
    if (!only || strstr("gdn_decode_block_fwd", only)) check_decode_block_bits(g32), check_decode_block_bits(g16);
    if (!only || strstr("lmhead_ce", only)) check_lmhead_scratch(g32), check_lmhead_scratch(g16), check_lmhead_scratch_fit(g32),
            check_lmhead_scratch_fit(g16);
    for (int x = 0; x < g_ncases; x++) {
        Case *c = &g_cases[x];
        if (only && !strstr(c->op, only)) continue;
        char forced[16] = "", bv[16] = "", grid[16] = "";
        if (!strcmp(c->op, "lmhead_ce") && c->i[3] > 0) snprintf(forced, sizeof forced, "%d", c->i[3]);
        if (forced[0]) setenv("GDN_CUDA_CE_ROWS", forced, 1);
        if (!strcmp(c->op, "lmhead_ce") && c->i[4] > 0) snprintf(grid, sizeof grid, "%d", c->i[4]);
        if (grid[0]) setenv("GDN_CUDA_CE_GRID", grid, 1);
        if (!strncmp(c->op, "delta_rule", 10) && c->i[12] > 0) snprintf(bv, sizeof bv, "%d", c->i[12]);
        if (bv[0]) setenv("GDN_CUDA_DR_BV", bv, 1);
        char nc[16] = "";
        if (!strncmp(c->op, "delta_rule", 10) && c->i[13] > 0) snprintf(nc, sizeof nc, "%d", c->i[13]);
        if (nc[0]) setenv("GDN_CUDA_DR_WG_NC", nc, 1);
        const int tma = !strncmp(c->op, "delta_rule", 10) ? c->i[14] : 0;
        if (tma) setenv("GDN_CUDA_DR_WG_TMA", tma > 0 ? "1" : "0", 1);
        // the decode block kernel is opt-in (GDN_DECODE_BLOCK=1): its cases run it unless the caller chose
        const int block_env = !strcmp(c->op, "gdn_decode_block_fwd") && !getenv("GDN_DECODE_BLOCK");
        if (block_env) setenv("GDN_DECODE_BLOCK", "1", 1);
        check_case(c, cpu, g32, 0);
        check_case(c, cpu, g16, 1);
        if (forced[0]) unsetenv("GDN_CUDA_CE_ROWS");
        if (grid[0]) unsetenv("GDN_CUDA_CE_GRID");
        if (bv[0]) unsetenv("GDN_CUDA_DR_BV");
        if (nc[0]) unsetenv("GDN_CUDA_DR_WG_NC");
        if (tma) unsetenv("GDN_CUDA_DR_WG_TMA");
        if (block_env) unsetenv("GDN_DECODE_BLOCK");
    }
    printf("%d checks, %d failed\n", g_checks, g_failures);
    return g_failures ? 1 : 0;
}
