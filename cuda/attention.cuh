// attention.cuh: what the attention files share (cuda/attention.cu: RoPE split, CUDA-core kernels, entry
// points; attention_fwd.cu / attention_bwd.cu: the FlashAttention-2 kernels on tensor cores).
#pragma once
#include "cuda/common.cuh"

// Arguments of every attention kernel (spec hybrid.md §2.3; layouts as model/backend.h's attn_fwd/attn_bwd).
struct AttnArgs {
    const void *Q, *K, *V, *O, *dO; // act [B*T, Ha*d], [B*kvs, Hkv*d] x2, [B*T, Ha*d] x2
    const float *lse;               // [B, Ha, T] natural-log logsumexp of the scaled scores
    void *Oout, *dQ, *dK, *dV;
    float *lse_out, *D; // lse written by the forward (may be NULL); D = rowsum(dO * O) [B, Ha, T] (backward)
    const int32_t *pos; // tokens seen before the call (device), NULL = 0
    const int32_t *ds;  // [B*T] packed documents (backend.h doc_start; only with pos NULL), NULL = none:
                        // query t sees keys tau >= ds[t] only
    int kvs, B, T, Ha, Hkv, d, window;
    float scale;
};

// FlashAttention-2 forward on bf16 tensor cores (attention_fwd.cu): d = 64 or 128, any T, pos, window, GQA.
bool attn_fa_supported(int d);
void attn_fa_fwd(const AttnArgs &a);
// FlashAttention-2 backward on bf16 tensor cores (attention_bwd.cu): d = 64 or 128; a.D is scratch [B, Ha, T].
bool attn_fa_bwd_supported(int d);
void attn_fa_bwd(const AttnArgs &a);
