// layer_attn.h: the buffers of a hybrid's softmax-attention mixer (layer kind LAYER_ATTN, spec hybrid.md).
// Its tensors are LAYER_TENSORS_attn in params.h; its forward, backward and KV cache are layer_attn.c.
#pragma once
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Activations of one attention mixer, kept from forward for backward. [N = B*T rows]
typedef struct {
    void *P;             // raw [q|k|v] projection [N, Dq+2Dkv]
    void *aQ, *aK, *aV;  // RoPE'd q [N, Dq], k and v [N, Dkv] (training layout; decoding uses the KV cache)
    void *aO;            // attention output [N, Dq]
    float *lse;          // [B, Ha, T] softmax logsumexp, for the backward (training only)
} AttnActs;

// Backward scratch, shared by every attention block.
typedef struct {
    void *dP;                 // [N, Dq+2Dkv]
    void *daQ, *daK, *daV;    // [N, Dq], [N, Dkv] x 2
    void *daO;                // [N, Dq]
} AttnGrads;

// Decode state of one attention block for B sequences: a KV cache of RoPE'd keys and values, which grows
// with the tokens seen (outside graph capture: layer_attn.c state_grow).
typedef struct {
    void *kc, *vc;  // [B, cap, Dkv] act (NULL until the first token)
    int cap, len;   // cache rows per sequence; tokens seen (host copy)
    int32_t *pos;   // [1] backend memory: tokens seen, read and advanced on the stream (a recorded step too)
} AttnState;

#ifdef __cplusplus
}
#endif
