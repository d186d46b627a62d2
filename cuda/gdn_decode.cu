// gdn_decode.cu: the GDN token mixer of one decode step (T = 1) as one kernel (backend.h gdn_decode_fwd): the
// conv step with its state update + SiLU, the L2 norm of q and k, the gates, the delta-rule step and the gated
// RMSNorm, which the unfused graph runs as 6-7 dependent kernels (conv.cu, norms.cu, gate.cu,
// delta_rule_decode.cu). At batch 1 each of those is a few microseconds of launch and drain for well under a
// microsecond of work; here the step costs one launch.
//
// One block group per (sequence b, q/k head i) owns everything head i touches: the conv channels of q_i, k_i
// and of the G = HV/H v heads j = iG .. iG+G-1 that read them, and those v heads' states. The G states side by
// side form one [dk, E = G*dv] matrix whose columns evolve independently (k, q are shared; v, beta, decay are
// per column's head); thread (x, y) holds rows d = y, y+8, .. of columns x + 32c of a 32*NC-column slice, as
// delta_rule_decode.cu does for one head.
// At large B the group is one block (parts = 1, NC = 4). At small B (300M, batch 1: 4 groups for 132
// multiprocessors) the group's columns are split over `parts` blocks of W columns each (NC = 1): every part
// recomputes q_i, k_i and their L2 norms (2*dk values) and runs the conv and state of its own columns. Each
// conv-state and state entry has one writer: a part's v channels and columns by that part; q_i, k_i's conv
// state (read by every part) and the gated RMSNorm (over whole v heads, which parts may cut) by the group's
// last part to arrive (an integer counter), after every part has read that state and stored its o into y.
// Per-element arithmetic and summation order are the same for any split, so outputs are bit-identical
// (GDN_CUDA_DECODE_PARTS=n takes n parts a group at any B, for A/B runs; 1: one block a group).
// Act roundings as the unfused graph stores them: the conv output, the L2-normed q and k, and o (rnd<T>).
// Shapes past this kernel's limits (dk > 128, G*dv > 1024, G > 32, K > 16, B > 65535) run the ops it stands for
// one by one (the CPU twin's sequence), so decoding takes every shape training takes.
#include <stdlib.h>

#include "cuda/gdn_decode.cuh"

// Launched with programmatic dependent launch (cu_launch_pdl); grid (H * parts, B), block (32, 8).
template <typename T, int NC> __global__ void __launch_bounds__(GD_COLS *GD_ROWS) gdn_decode_kernel(GdArgs a) {
    cu_pdl_trigger();
    gd_run<T, NC>(a, blockIdx.x, blockIdx.y, (int)threadIdx.x, (int)threadIdx.y, [] { cu_pdl_wait(); });
}

static const Backend *g_gd_table[2]; // the tables this op is registered in (their other ops: the fallback)

template <typename T>
static void gd_unfused(void *y, int ldy, const void *P, int ldp, const float *conv_w, float *conv_state, float *S,
                       const float *A_log, const float *dt_bias, const float *norm_w, const int32_t *ids,
                       int32_t eod, int B, int H, int HV, int dk, int dv, int K, float eps) {
    const Backend *be = g_gd_table[sizeof(T) == sizeof(bf16)];
    const int Kd = H * dk, Vd = HV * dv, Dc = 2 * Kd + Vd;
    const T *Pt = (const T *)P;
    const char *op = "gdn_decode_fwd";
    void *C = cu_scratch((size_t)B * Dc * sizeof(T), op), *QK = cu_scratch((size_t)B * 2 * Kd * sizeof(T), op);
    void *o = cu_scratch((size_t)B * Vd * sizeof(T), op);
    float *f = (float *)cu_scratch((size_t)B * (2 * H + 3 * HV) * sizeof(float), op);
    float *qk_rstd = f, *beta = f + (size_t)B * 2 * H, *gamma = beta + (size_t)B * HV, *o_rstd = gamma + (size_t)B * HV;
    be->conv_silu_fwd(C, Dc, P, ldp, conv_w, conv_state, conv_state, B, 1, Dc, K, NULL);
    be->l2norm_fwd(QK, 2 * Kd, qk_rstd, C, Dc, B, 2 * H, dk);
    be->gate_fwd(beta, gamma, Pt + Dc + Vd, Pt + Dc + Vd + HV, ldp, A_log, dt_bias, B, HV);
    DeltaRuleArgs a = {};
    a.q = QK, a.k = (const T *)QK + Kd, a.ldqk = 2 * Kd, a.v = (const T *)C + 2 * Kd, a.ldv = Dc, a.beta = beta;
    a.gamma = gamma, a.B = B, a.T = 1, a.H = H, a.HV = HV, a.dk = dk, a.dv = dv, a.scale = 1.0f / sqrtf((float)dk);
    be->delta_rule_fwd(&a, o, Vd, S);
    be->gated_rmsnorm_fwd(y, ldy, o_rstd, o, Vd, Pt + Dc, ldp, norm_w, B, HV, dv, eps);
    if (ids) { // the step's tokens are this call's last: the same rule
        be->state_reset_at_eod(conv_state, (size_t)Dc * (K - 1), ids, B, 1, eod);
        be->state_reset_at_eod(S, (size_t)HV * dk * dv, ids, B, 1, eod);
    }
    cu_scratch_free(f);
    cu_scratch_free(o);
    cu_scratch_free(QK);
    cu_scratch_free(C);
}

template <typename T>
static void cu_gdn_decode_fwd(void *y, int ldy, const void *P, int ldp, const float *conv_w, float *conv_state,
                              float *S, const float *A_log, const float *dt_bias, const float *norm_w,
                              const int32_t *ids, int32_t eod, int B, int H, int HV, int dk, int dv, int K,
                              float eps) {
    CU_REQUIRE(y && P && conv_w && conv_state && S && A_log && dt_bias && norm_w, "gdn_decode_fwd",
               "NULL pointer (y, P, conv_w, conv_state, S, A_log, dt_bias, norm_w)");
    CU_REQUIRE(B >= 0 && H > 0 && HV > 0 && HV % H == 0 && dk > 0 && dv > 0, "gdn_decode_fwd",
               "bad shape B=%d H=%d HV=%d dk=%d dv=%d", B, H, HV, dk, dv);
    CU_REQUIRE(ldp >= 2 * H * dk + 2 * HV * dv + 2 * HV && ldy >= HV * dv, "gdn_decode_fwd",
               "row strides ldp=%d ldy=%d too small", ldp, ldy);
    if (B == 0) return;
    if (!gd_fits(B, H, HV, dk, dv, K)) {
        gd_unfused<T>(y, ldy, P, ldp, conv_w, conv_state, S, A_log, dt_bias, norm_w, ids, eod, B, H, HV, dk, dv, K,
                      eps);
        return;
    }
    int parts, W;
    static const char *forced = getenv("GDN_CUDA_DECODE_PARTS"); // n: n parts a group at any B (A/B runs)
    gd_plan(B, H, HV, dv, forced ? atoi(forced) : 0, &parts, &W);
    GdArgs a = {y, P, conv_w, A_log, dt_bias, norm_w, conv_state, S, ids, eod, ldy, ldp, H, HV, dk, dv, K, parts, W,
                eps, 1.0f / sqrtf((float)dk)};
    if (parts > 1)
        cu_launch_pdl("gdn_decode_fwd", gdn_decode_kernel<T, 1>, dim3((unsigned)(H * parts), (unsigned)B),
                      dim3(GD_COLS, GD_ROWS), 0, a);
    else
        cu_launch_pdl("gdn_decode_fwd", gdn_decode_kernel<T, 4>, dim3((unsigned)H, (unsigned)B),
                      dim3(GD_COLS, GD_ROWS), 0, a);
}

void cu_register_gdn_decode(Backend *b, int use_bf16) {
    b->gdn_decode_fwd = use_bf16 ? cu_gdn_decode_fwd<bf16> : cu_gdn_decode_fwd<float>;
    g_gd_table[use_bf16 ? 1 : 0] = b;
}
