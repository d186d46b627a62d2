// layer_gdn.h: the buffers of the Gated DeltaNet mixer (layer kind LAYER_GDN). Its tensors are
// LAYER_TENSORS_gdn in params.h; its forward, backward and decode state are layer_gdn.c.
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

// Activations of one GDN mixer, kept from forward for backward. [N = B*T rows]
typedef struct {
    void *P;                 // fused in_proj output [N, 2Kd+2Vd+2HV] = [q|k|v|g|b|a]
    void *C;                 // conv+SiLU output [N, 2Kd+Vd] = [q|k|v]
    void *QK;                // L2-normed q|k [N, 2Kd]
    float *qk_rstd;          // [N * 2H]
    float *beta, *gamma;     // [N, HV]
    void *h_save;            // per-chunk states [B, HV, NT, dk, dv] (training only)
    void *o, *on;            // delta-rule output and its gated norm [N, Vd]
    float *on_rstd;          // [N * HV]
} GdnActs;

// Backward scratch, shared by every GDN block (blocks run backward one at a time).
typedef struct {
    void *dP, *dC, *dQK, *do_, *don; // gradients of P, C, QK, o, on
    float *dbeta, *dgamma;           // [N, HV]
    // recompute_gdn_acts: every block's C, QK and on (the forward writes them here, each dead after its block; the
    // backward recomputes its block's from P, o and the saved statistics)
    void *C, *QK, *on;
} GdnGrads;

// Recurrent decode state of one GDN block for B sequences: constant size, whatever the length decoded.
typedef struct {
    float *conv; // [B, 2Kd+Vd, K-1]: the last K-1 pre-conv inputs of the q|k|v channels (backend memory)
    float *S;    // [B, HV, dk, dv]: each v head's delta-rule state
} GdnState;

#ifdef __cplusplus
}
#endif
