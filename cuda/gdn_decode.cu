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
// Per-element arithmetic and summation order are the same for any split, so outputs are bit-identical.
// Act roundings as the unfused graph stores them: the conv output, the L2-normed q and k, and o (rnd<T>).
// Shapes past this kernel's limits (dk > 128, G*dv > 1024, G > 32, K > 16, B > 65535) run the ops it stands for
// one by one (the CPU twin's sequence), so decoding takes every shape training takes.
#include "cuda/common.cuh"

enum { GD_COLS = 32, GD_ROWS = 8, GD_MAX_DK = 128, GD_MAX_R = GD_MAX_DK / GD_ROWS, GD_MAX_E = 1024, GD_MAX_G = 32,
       GD_KMAX = 16, GD_MAX_GROUPS = 1024 };

// Arrivals per group (b, i) of a split launch; the last part resets its entry to 0 for the next launch (one
// stream: launches of this kernel never overlap).
#ifdef GDN_EMU
static int g_gd_arrive[GD_MAX_GROUPS];
#else
__device__ int g_gd_arrive[GD_MAX_GROUPS];
#endif

__device__ __forceinline__ float gd_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
template <typename T> __device__ __forceinline__ float gd_load_l2(const T *p) { // another block's store: not L1
#ifdef GDN_EMU
    return to_f(*p);
#else
    return to_f(__ldcg(p));
#endif
}

struct GdArgs {
    void *y;
    const void *P;
    const float *conv_w, *A_log, *dt_bias, *norm_w;
    float *conv_state, *S;
    const int32_t *ids;
    int32_t eod;
    int ldy, ldp, H, HV, dk, dv, K, parts, W; // W: a part's columns (a multiple of 32 * NC), parts * W >= E
    float eps, scale;
};

template <typename T, int NC> __global__ void __launch_bounds__(GD_COLS *GD_ROWS) gdn_decode_kernel(GdArgs a) {
    enum { SLICE = GD_COLS * NC };
    const int x = threadIdx.x, y = threadIdx.y, tid = y * GD_COLS + x, nthr = GD_COLS * GD_ROWS;
    const int i = blockIdx.x / a.parts, part = blockIdx.x - i * a.parts, b = blockIdx.y;
    const int G = a.HV / a.H, E = G * a.dv, dk = a.dk;
    constexpr bool split = NC == 1; // launched with parts > 1
    const int c0 = part * a.W, Wp = min(a.W, E - c0); // this part's columns c0 .. c0+Wp-1 of the group's E
    const int Kd = a.H * dk, Vd = a.HV * a.dv, Dc = 2 * Kd + Vd, H1 = a.K - 1;
    __shared__ float xc[2 * GD_MAX_DK + GD_MAX_E]; // conv outputs: q_i, k_i, the part's v
    __shared__ float qs[GD_MAX_DK], ks[GD_MAX_DK], red[GD_ROWS][SLICE], os[GD_MAX_E];
    __shared__ float alpha_s[GD_MAX_G], beta_s[GD_MAX_G];
    __shared__ float qk_new[NC == 1 ? 2 * GD_MAX_DK * (GD_KMAX - 1) : 1]; // split: q_i, k_i's next conv state
    __shared__ int last_s;
    const T *P = (const T *)a.P + (size_t)b * a.ldp;
    // the conv channel of the part's channel cl: q_i, k_i, then the part's v columns
    auto chan = [&](int cl) {
        return cl < dk ? i * dk + cl : cl < 2 * dk ? Kd + i * dk + cl - dk : 2 * Kd + i * E + c0 + cl - 2 * dk;
    };

    // Launched with programmatic dependent launch (cu_launch_pdl): until cu_pdl_wait, while the in_proj GEMV before
    // it finishes, the kernel reads only what no kernel of this step writes before it: the weights, and the conv
    // state and S, which only this layer's mixer writes (the previous step's, complete). Split launches (small B)
    // take the thread's first conv channel and the part's first slice of S into registers here.
    cu_pdl_trigger();
    float win0[GD_KMAX], cw0[GD_KMAX], s0[GD_MAX_R];
    if (split && tid < 2 * dk + Wp) {
        const int c = chan(tid);
#pragma unroll
        for (int j = 0; j < GD_KMAX; j++) { // unrolled with a fixed bound: registers, not the stack
            win0[j] = j < H1 ? a.conv_state[((size_t)b * Dc + c) * H1 + j] : 0.0f;
            cw0[j] = j < a.K ? a.conv_w[(size_t)c * a.K + j] : 0.0f;
        }
    }
    if (split) {
        const int e = c0 + x, jj = e / a.dv, ee = e - jj * a.dv;
        const float *st = a.S + (((size_t)b * a.HV + i * G + jj) * dk) * a.dv + ee;
#pragma unroll
        for (int r = 0; r < GD_MAX_R; r++) {
            const int d = y + GD_ROWS * r;
            s0[r] = (e < c0 + Wp && d < dk) ? st[(size_t)d * a.dv] : 0.0f;
        }
    }
    cu_pdl_wait();
    const bool reset = a.ids && a.ids[b] == a.eod; // the next token starts a document

    // conv step + SiLU of the part's channels; the state [B, Dc, K-1] shifts by one (oldest first)
    for (int cl = tid; cl < 2 * dk + Wp; cl += nthr) {
        const int c = chan(cl);
        const bool pre = split && cl == tid; // read before the wait
        float *st = a.conv_state + ((size_t)b * Dc + c) * H1;
        const float xn = to_f(P[c]);
        // loops over the fixed GD_KMAX, predicated on K: the window stays in registers (taps in the same order)
        float win[GD_KMAX];
#pragma unroll
        for (int j = 0; j < GD_KMAX; j++) win[j] = j < H1 ? (pre ? win0[j] : st[j]) : j == H1 ? xn : 0.0f;
        float acc = 0.0f;
#pragma unroll
        for (int j = 0; j < GD_KMAX; j++)
            if (j < a.K) acc += (pre ? cw0[j] : a.conv_w[(size_t)c * a.K + j]) * win[j];
        xc[cl] = rnd<T>(acc * sigmoid_f(acc));
        float *dst = split && cl < 2 * dk ? qk_new + cl * H1 : st; // split: q_i, k_i's by the last part (others read it)
#pragma unroll
        for (int j = 0; j < GD_KMAX - 1; j++)
            if (j < H1) dst[j] = reset ? 0.0f : win[j + 1];
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

    // the delta-rule step, one slice of the part's columns at a time (e: the column in the group's [dk, E])
    T *yo = (T *)a.y + (size_t)b * a.ldy;
    for (int e0 = c0; e0 < c0 + Wp; e0 += SLICE) {
        float s[NC][GD_MAX_R], u[NC];
#pragma unroll
        for (int cc = 0; cc < NC; cc++) {
            const int e = e0 + x + GD_COLS * cc, jj = e / a.dv, ee = e - jj * a.dv;
            const bool col = e < c0 + Wp;
            const float *st = a.S + (((size_t)b * a.HV + i * G + jj) * dk) * a.dv + ee;
            const float al = col ? alpha_s[jj] : 0.0f;
            float part_ = 0.0f;
#pragma unroll
            for (int r = 0; r < GD_MAX_R; r++) {
                const int d = y + GD_ROWS * r;
                // split: the part's first slice came in before the wait (same columns: e0 == c0, NC == 1)
                s[cc][r] = split && e0 == c0 ? s0[r] : (col && d < dk) ? st[(size_t)d * a.dv] : 0.0f;
                if (d < dk) {
                    s[cc][r] *= al;
                    part_ += s[cc][r] * ks[d];
                }
            }
            red[y][x + GD_COLS * cc] = part_;
        }
        __syncthreads();
#pragma unroll
        for (int cc = 0; cc < NC; cc++) {
            const int e = e0 + x + GD_COLS * cc, jj = e / a.dv;
            float kS = 0.0f;
#pragma unroll
            for (int w = 0; w < GD_ROWS; w++) kS += red[w][x + GD_COLS * cc]; // the same order in every row lane
            u[cc] = e < c0 + Wp ? beta_s[jj] * (xc[2 * dk + e - c0] - kS) : 0.0f;
        }
        __syncthreads(); // every lane has read red
#pragma unroll
        for (int cc = 0; cc < NC; cc++) {
            const int e = e0 + x + GD_COLS * cc, jj = e / a.dv, ee = e - jj * a.dv;
            const bool col = e < c0 + Wp;
            float *st = a.S + (((size_t)b * a.HV + i * G + jj) * dk) * a.dv + ee;
            float part_ = 0.0f;
#pragma unroll
            for (int r = 0; r < GD_MAX_R; r++) {
                const int d = y + GD_ROWS * r;
                if (d < dk) {
                    s[cc][r] += ks[d] * u[cc];
                    part_ += s[cc][r] * qs[d];
                    if (col) st[(size_t)d * a.dv] = reset ? 0.0f : s[cc][r];
                }
            }
            red[y][x + GD_COLS * cc] = part_;
        }
        __syncthreads();
        if (y == 0)
#pragma unroll
            for (int cc = 0; cc < NC; cc++) {
                const int e = e0 + x + GD_COLS * cc;
                float acc = 0.0f;
#pragma unroll
                for (int w = 0; w < GD_ROWS; w++) acc += red[w][x + GD_COLS * cc];
                if (e < c0 + Wp) {
                    if (split) yo[i * E + e] = from_f<T>(acc); // o, exactly rnd<T>(acc), for the last part
                    else os[e] = rnd<T>(acc);
                }
            }
        __syncthreads(); // red is reused by the next slice; os is complete after the last
    }

    if constexpr (split) { // arrive; the group's last part writes q_i, k_i's conv state and runs the RMSNorm
        // the loop's last barrier put the block's o stores before one thread's release (as a grid sync does)
        if (tid == 0) {
            int *cnt = g_gd_arrive + (size_t)b * a.H + i;
            __threadfence(); // global memory order across blocks
            last_s = atomicAdd(cnt, 1) == a.parts - 1;
            if (last_s) {
                *cnt = 0; // every part has arrived: no one else touches it in this launch
                __threadfence();
            }
        }
        __syncthreads();
        if (!last_s) return;
        for (int cl = tid; cl < 2 * dk; cl += nthr) {
            const int c = cl < dk ? i * dk + cl : Kd + i * dk + cl - dk;
            float *st = a.conv_state + ((size_t)b * Dc + c) * H1;
            for (int j = 0; j < H1; j++) st[j] = qk_new[cl * H1 + j];
        }
    }
    // gated RMSNorm per v head (one warp per head): y = o * rstd * w * silu(z), z = the g columns
    for (int jj = y; jj < G; jj += GD_ROWS) {
        const int j = i * G + jj;
        T *yj = yo + (size_t)j * a.dv;
        const float *o = os + jj * a.dv;
        float ss = 0.0f;
        for (int e = x; e < a.dv; e += 32) {
            const float v = split ? gd_load_l2(yj + e) : o[e];
            ss += v * v;
        }
        const float rs = 1.0f / sqrtf(warp_sum(ss) / (float)a.dv + a.eps);
        for (int e = x; e < a.dv; e += 32) {
            const float z = to_f(P[2 * Kd + Vd + (size_t)j * a.dv + e]), v = split ? gd_load_l2(yj + e) : o[e];
            yj[e] = from_f<T>(v * rs * a.norm_w[e] * (z * sigmoid_f(z)));
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
    // split a group's columns into 32-column parts while B*H groups leave most multiprocessors idle
    const int groups = B * H, E = HV / H * dv, chunks = (E + GD_COLS - 1) / GD_COLS;
    int parts = groups <= GD_MAX_GROUPS ? 2 * g_cu.sm_count / groups : 1;
    parts = parts < 1 ? 1 : parts > chunks ? chunks : parts;
    const int W = parts > 1 ? GD_COLS * ((chunks + parts - 1) / parts) : E;
    if (parts > 1) parts = (E + W - 1) / W;
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
