// gdn_decode.cu: the GDN token mixer of one decode step (T = 1) as one kernel (backend.h gdn_decode_fwd): the
// conv step with its state update + SiLU, the L2 norm of q and k, the gates, the delta-rule step and the gated
// RMSNorm, which the unfused graph runs as 6-7 dependent kernels (conv.cu, norms.cu, gate.cu,
// delta_rule_decode.cu). At batch 1 each of those is a few microseconds of launch and drain for well under a
// microsecond of work; here the step costs one launch.
//
// One block per (sequence b, q/k head i) owns everything head i touches: the conv channels of q_i, k_i and of
// the G = HV/H v heads j = iG .. iG+G-1 that read them (so the conv state is read and rewritten by one block
// only), and those v heads' states. The G states side by side form one [dk, G*dv] matrix whose columns evolve
// independently (k, q are shared; v, beta, decay are per column's head); thread (x, y) holds rows
// d = y, y+8, .. of columns x + 32c of a 128-column slice, as delta_rule_decode.cu does for one head.
// Act roundings as the unfused graph stores them: the conv output, the L2-normed q and k, and o (rnd<T>).
// Shapes past this kernel's limits (dk > 128, G*dv > 1024, G > 32, K > 16, B > 65535) run the ops it stands for
// one by one (the CPU twin's sequence), so decoding takes every shape training takes.
#include "cuda/common.cuh"

enum { GD_COLS = 32, GD_ROWS = 8, GD_NC = 4, GD_SLICE = GD_COLS * GD_NC, GD_MAX_DK = 128,
       GD_MAX_R = GD_MAX_DK / GD_ROWS, GD_MAX_E = 1024, GD_MAX_G = 32, GD_KMAX = 16 };

__device__ __forceinline__ float gd_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

struct GdArgs {
    void *y;
    const void *P;
    const float *conv_w, *A_log, *dt_bias, *norm_w;
    float *conv_state, *S;
    const int32_t *ids;
    int32_t eod;
    int ldy, ldp, H, HV, dk, dv, K;
    float eps, scale;
};

template <typename T> __global__ void __launch_bounds__(GD_COLS *GD_ROWS) gdn_decode_kernel(GdArgs a) {
    const int x = threadIdx.x, y = threadIdx.y, tid = y * GD_COLS + x, nthr = GD_COLS * GD_ROWS;
    const int i = blockIdx.x, b = blockIdx.y, G = a.HV / a.H, E = G * a.dv, dk = a.dk;
    const int Kd = a.H * dk, Vd = a.HV * a.dv, Dc = 2 * Kd + Vd, H1 = a.K - 1;
    __shared__ float xc[2 * GD_MAX_DK + GD_MAX_E]; // conv outputs: q_i, k_i, the group's v
    __shared__ float qs[GD_MAX_DK], ks[GD_MAX_DK], red[GD_ROWS][GD_SLICE], os[GD_MAX_E];
    __shared__ float alpha_s[GD_MAX_G], beta_s[GD_MAX_G];
    const T *P = (const T *)a.P + (size_t)b * a.ldp;
    const bool reset = a.ids && a.ids[b] == a.eod; // the next token starts a document

    // conv step + SiLU of the block's channels; the state [B, Dc, K-1] shifts by one (oldest first)
    for (int cl = tid; cl < 2 * dk + E; cl += nthr) {
        const int c = cl < dk ? i * dk + cl : cl < 2 * dk ? Kd + i * dk + cl - dk : 2 * Kd + i * E + cl - 2 * dk;
        float *st = a.conv_state + ((size_t)b * Dc + c) * H1;
        const float xn = to_f(P[c]);
        float win[GD_KMAX];
        for (int j = 0; j < H1; j++) win[j] = st[j];
        win[H1] = xn;
        float acc = 0.0f;
        for (int j = 0; j < a.K; j++) acc += a.conv_w[(size_t)c * a.K + j] * win[j];
        xc[cl] = rnd<T>(acc * sigmoid_f(acc));
        for (int j = 0; j < H1; j++) st[j] = reset ? 0.0f : win[j + 1];
    }
    // gates of the group's v heads (gate.cu's formulas)
    if (tid < G) {
        const int j = i * G + tid;
        const float bb = to_f(P[2 * Kd + 2 * Vd + j]), aa = to_f(P[2 * Kd + 2 * Vd + a.HV + j]);
        beta_s[tid] = sigmoid_f(bb);
        alpha_s[tid] = expf(-expf(a.A_log[j]) * gd_softplus(aa + a.dt_bias[j]));
    }
    __syncthreads();
    // L2 norm of q_i (warp 0) and k_i (warp 1): y = x / sqrt(sum x^2 + 1e-6), rounded to act
    if (y < 2) {
        const float *src = xc + y * dk;
        float ss = 0.0f;
        for (int e = x; e < dk; e += 32) ss += src[e] * src[e];
        const float rs = 1.0f / sqrtf(warp_sum(ss) + 1e-6f);
        for (int e = x; e < dk; e += 32) {
            const float v = rnd<T>(src[e] * rs);
            if (y == 0) qs[e] = v * a.scale;
            else ks[e] = v;
        }
    }
    __syncthreads();

    // the delta-rule step, one 128-column slice of the group's [dk, E] state at a time
    for (int e0 = 0; e0 < E; e0 += GD_SLICE) {
        float s[GD_NC][GD_MAX_R], u[GD_NC];
#pragma unroll
        for (int cc = 0; cc < GD_NC; cc++) {
            const int e = e0 + x + GD_COLS * cc, jj = e / a.dv, ee = e - jj * a.dv;
            const bool col = e < E;
            const float *st = a.S + (((size_t)b * a.HV + i * G + jj) * dk) * a.dv + ee;
            const float al = col ? alpha_s[jj] : 0.0f;
            float part = 0.0f;
#pragma unroll
            for (int r = 0; r < GD_MAX_R; r++) {
                const int d = y + GD_ROWS * r;
                s[cc][r] = (col && d < dk) ? st[(size_t)d * a.dv] : 0.0f;
                if (d < dk) {
                    s[cc][r] *= al;
                    part += s[cc][r] * ks[d];
                }
            }
            red[y][x + GD_COLS * cc] = part;
        }
        __syncthreads();
#pragma unroll
        for (int cc = 0; cc < GD_NC; cc++) {
            const int e = e0 + x + GD_COLS * cc, jj = e / a.dv;
            float kS = 0.0f;
#pragma unroll
            for (int w = 0; w < GD_ROWS; w++) kS += red[w][x + GD_COLS * cc]; // the same order in every row lane
            u[cc] = e < E ? beta_s[jj] * (xc[2 * dk + e] - kS) : 0.0f;
        }
        __syncthreads(); // every lane has read red
#pragma unroll
        for (int cc = 0; cc < GD_NC; cc++) {
            const int e = e0 + x + GD_COLS * cc, jj = e / a.dv, ee = e - jj * a.dv;
            const bool col = e < E;
            float *st = a.S + (((size_t)b * a.HV + i * G + jj) * dk) * a.dv + ee;
            float part = 0.0f;
#pragma unroll
            for (int r = 0; r < GD_MAX_R; r++) {
                const int d = y + GD_ROWS * r;
                if (d < dk) {
                    s[cc][r] += ks[d] * u[cc];
                    part += s[cc][r] * qs[d];
                    if (col) st[(size_t)d * a.dv] = reset ? 0.0f : s[cc][r];
                }
            }
            red[y][x + GD_COLS * cc] = part;
        }
        __syncthreads();
        if (y == 0)
#pragma unroll
            for (int cc = 0; cc < GD_NC; cc++) {
                const int e = e0 + x + GD_COLS * cc;
                float acc = 0.0f;
#pragma unroll
                for (int w = 0; w < GD_ROWS; w++) acc += red[w][x + GD_COLS * cc];
                if (e < E) os[e] = rnd<T>(acc);
            }
        __syncthreads(); // red is reused by the next slice; os is complete after the last
    }

    // gated RMSNorm per v head (one warp per head): y = o * rstd * w * silu(z), z = the g columns
    T *yo = (T *)a.y + (size_t)b * a.ldy;
    for (int jj = y; jj < G; jj += GD_ROWS) {
        const int j = i * G + jj;
        const float *o = os + jj * a.dv;
        float ss = 0.0f;
        for (int e = x; e < a.dv; e += 32) ss += o[e] * o[e];
        const float rs = 1.0f / sqrtf(warp_sum(ss) / (float)a.dv + a.eps);
        for (int e = x; e < a.dv; e += 32) {
            const float z = to_f(P[2 * Kd + Vd + (size_t)j * a.dv + e]);
            yo[(size_t)j * a.dv + e] = from_f<T>(o[e] * rs * a.norm_w[e] * (z * sigmoid_f(z)));
        }
    }
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
    if (dk > GD_MAX_DK || HV / H * dv > GD_MAX_E || HV / H > GD_MAX_G || K < 1 || K > GD_KMAX || B > 65535) {
        gd_unfused<T>(y, ldy, P, ldp, conv_w, conv_state, S, A_log, dt_bias, norm_w, ids, eod, B, H, HV, dk, dv, K,
                      eps);
        return;
    }
    GdArgs a = {y, P, conv_w, A_log, dt_bias, norm_w, conv_state, S, ids, eod, ldy, ldp, H, HV, dk, dv, K, eps,
                1.0f / sqrtf((float)dk)};
    cu_launch("gdn_decode_fwd", gdn_decode_kernel<T>, dim3((unsigned)H, (unsigned)B), dim3(GD_COLS, GD_ROWS), 0, a);
}

void cu_register_gdn_decode(Backend *b, int use_bf16) {
    b->gdn_decode_fwd = use_bf16 ? cu_gdn_decode_fwd<bf16> : cu_gdn_decode_fwd<float>;
    g_gd_table[use_bf16 ? 1 : 0] = b;
}
