// layer.h: what a layer kind adds to the graph (model/gdn.c), and pointer helpers the kinds share.
// Internal to model/. A kind (config.h LAYER_KINDS) provides one LayerKindOps in model/layer_<kind>.c;
// gdn.c runs each block's attn_norm, then its kind's mixer, then the MLP.
#pragma once
#include "gdn.h"

// act-dtype pointer arithmetic: element offset into an act buffer
static inline void *A(const Model *m, const void *p, size_t elems) {
    return (char *)p + elems * (size_t)m->be->act_bytes;
}
// an fp32 parameter: the master, or its kept copy when ZeRO-1 shards the masters (model_drop_masters)
static inline float *PF(const Model *m, size_t off) { return m->params ? m->params + off : model_small_param(m, off); }
static inline float *GF(const Model *m, size_t off) { return m->grads + off; }  // its gradient
static inline void *WA(const Model *m, size_t off) { return A(m, m->wact, off); } // its GEMM compute copy

// A slice of the model's activation arena (zero-filled, 256-byte aligned). gdn.c lays the activations out
// twice: a sizing pass (arena not allocated yet: returns NULL, adds up the bytes), then the real one.
void *model_arena_take(Model *m, size_t bytes);

// The mixer's first GEMM y[N, Dout] = y_attn . W^T; when forward_tokens left the block's input norm to it
// (m->in_norm.w set: decoding, kinds with fuses_in_norm), the RMSNorm and the GEMM in one op.
static inline void mixer_in_proj(Model *m, int l, void *y, int ldy, const void *W, int N, int Dout) {
    if (m->in_norm.w)
        m->be->rmsnorm_matmul_fwd(y, ldy, m->in_norm.s_out, m->in_norm.x, m->in_norm.resid, m->in_norm.w, W, N, Dout,
                                  m->d.h, m->d.eps);
    else
        m->be->matmul_fwd(y, ldy, m->blk[l].y_attn, m->d.h, W, N, Dout, m->d.h, 0);
}

typedef struct {
    // Activations of block l for (B, T) rows from model_arena_take: kept for backward when training.
    // share >= 0 (inference): alias block `share`'s buffers instead (an earlier block of the same kind).
    void (*acts_alloc)(Model *m, int l, int B, int T, int share);
    // Backward scratch shared by the kind's blocks (training), for B*T rows, from model_arena_take.
    void (*grads_alloc)(Model *m, int B, int T);
    // m->blk[l].y_attn [N,h] -> m->out [N,h]. st: the block's decode state (read and updated) or NULL.
    void (*fwd)(Model *m, int l, int B, int T, LayerState *st);
    // dout = dL/d out [N,h] -> m->dy = dL/d y_attn (overwrite); the mixer's parameter gradients accumulate.
    void (*bwd)(Model *m, int l, int B, int T, const void *dout);
    // Decode state of block l for B sequences: allocated zeroed, reset to zero, freed.
    void (*state_alloc)(Model *m, int l, int B, LayerState *st);
    void (*state_reset)(Model *m, int l, int B, LayerState *st);
    void (*state_free)(Model *m, int l, LayerState *st);
    // Optional (NULL: the state has a fixed size): before a forward of T more tokens, outside any graph
    // capture, makes room for them and counts them as seen. Returns 1 when buffers moved (a recorded
    // decode graph is then stale).
    int (*state_grow)(Model *m, int l, int B, int T, LayerState *st);
    // 1: fwd's first GEMM goes through mixer_in_proj, so a decode step may leave the input norm to it
    int fuses_in_norm;
    // Optional: a decode step of the whole block (input norm, mixer, MLP with SwiGLU into the gate|up GEMM) as one
    // backend op, m->out [B, h] out; x, resid, s_out: the input norm's (as m->in_norm). Returns 0 where the backend
    // has no such op (the caller then runs the parts).
    int (*decode_block)(Model *m, int l, int B, LayerState *st, const void *x, const void *resid, void *s_out);
} LayerKindOps;

#define X(e, name) extern const LayerKindOps layer_##name;
LAYER_KINDS(X)
#undef X
