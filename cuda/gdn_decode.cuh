// gdn_decode.cuh: the device code of the GDN token mixer's decode step (cuda/gdn_decode.cu: what it computes and
// why, the launch and the op), shared with cuda/gdn_decode_block.cu, whose block kernel runs it as a phase.
#pragma once
#include "cuda/common.cuh"

enum { GD_COLS = 32, GD_ROWS = 8, GD_MAX_DK = 128, GD_MAX_R = GD_MAX_DK / GD_ROWS, GD_MAX_E = 1024, GD_MAX_G = 32,
       GD_KMAX = 16, GD_MAX_GROUPS = 1024 };

// Arrivals per group (b, i) of a split launch; the last part resets its entry to 0 for the next launch (one
// stream: launches of this kernel never overlap).
#ifdef GDN_EMU
static int g_gd_arrive[GD_MAX_GROUPS];
#else
static __device__ int g_gd_arrive[GD_MAX_GROUPS]; // static: a copy per file that includes this one
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

// No marks (gd_run's mark: a diagnostic's stamps at the body's stages, 0..5, by cuda/gdn_decode_block.cu's trace)
struct GdNoMark {
    __device__ __forceinline__ void operator()(int) const {}
};

// The kernel's body (gdn_decode_kernel below; cuda/gdn_decode_block.cu runs it as a phase of its block kernel) for
// block (bx, by) of the launch's grid (H * parts, B), by thread (x, y) of 32 x 8.
// wait() is called once by every thread, after the loads that read only the previous step's state and before
// anything the kernel (or phase) before wrote is read: cu_pdl_wait in the kernel, the grid barrier in a phase.
template <typename T, int NC, typename Wait, typename Mark = GdNoMark>
__device__ __forceinline__ void gd_run(const GdArgs &a, unsigned bx, unsigned by, int x, int y, Wait wait,
                                       Mark mark = {}) {
    enum { SLICE = GD_COLS * NC };
    const int tid = y * GD_COLS + x, nthr = GD_COLS * GD_ROWS;
    const int i = bx / a.parts, part = bx - i * a.parts, b = by;
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

    // Until wait(), while the in_proj GEMV before it finishes, the body reads only what nothing of this step writes
    // before it: the weights, and the conv state and S, which only this layer's mixer writes (the previous step's,
    // complete). The thread's first conv channel and its columns of the first slice of S come into registers here.
    float win0[GD_KMAX], cw0[GD_KMAX], s0[NC][GD_MAX_R];
    if (tid < 2 * dk + Wp) {
        const int c = chan(tid);
#pragma unroll
        for (int j = 0; j < GD_KMAX; j++) { // unrolled with a fixed bound: registers, not the stack
            win0[j] = j < H1 ? a.conv_state[((size_t)b * Dc + c) * H1 + j] : 0.0f;
            cw0[j] = j < a.K ? a.conv_w[(size_t)c * a.K + j] : 0.0f;
        }
    }
#pragma unroll
    for (int cc = 0; cc < NC; cc++) {
        const int e = c0 + x + GD_COLS * cc, jj = e / a.dv, ee = e - jj * a.dv;
        const float *st = a.S + (((size_t)b * a.HV + i * G + jj) * dk) * a.dv + ee;
#pragma unroll
        for (int r = 0; r < GD_MAX_R; r++) {
            const int d = y + GD_ROWS * r;
            s0[cc][r] = (e < c0 + Wp && d < dk) ? st[(size_t)d * a.dv] : 0.0f;
        }
    }
    wait();
    const bool reset = a.ids && a.ids[b] == a.eod; // the next token starts a document

    // conv step + SiLU of the part's channels; the state [B, Dc, K-1] shifts by one (oldest first)
    for (int cl = tid; cl < 2 * dk + Wp; cl += nthr) {
        const int c = chan(cl);
        const bool pre = cl == tid; // read before the wait
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
    mark(0); // conv done
    // gates of the group's v heads (gate.cu's formulas)
    if (tid < G) {
        const int j = i * G + tid;
        const float bb = to_f(P[2 * Kd + 2 * Vd + j]), aa = to_f(P[2 * Kd + 2 * Vd + a.HV + j]);
        beta_s[tid] = sigmoid_f(bb);
        alpha_s[tid] = expf(-expf(a.A_log[j]) * gd_softplus(aa + a.dt_bias[j]));
    }
    __syncthreads();
    mark(1); // gates
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
    mark(2); // l2 norms

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
                // the first slice came in before the wait (the same columns)
                s[cc][r] = e0 == c0 ? s0[cc][r] : (col && d < dk) ? st[(size_t)d * a.dv] : 0.0f;
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
    mark(3); // the state's update and o

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
        mark(4); // arrived
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

// ---- host side, shared with gdn_decode_block.cu
// Whether the kernel takes the shape (else the ops it stands for run one by one).
static inline bool gd_fits(int B, int H, int HV, int dk, int dv, int K) {
    return !(dk > GD_MAX_DK || HV / H * dv > GD_MAX_E || HV / H > GD_MAX_G || K < 1 || K > GD_KMAX || B > 65535);
}
// A group's columns split into parts of W columns (multiples of 32) while B*H groups leave most multiprocessors idle;
// want > 0 asks for that many parts instead (at most one per 32 columns).
static inline void gd_plan(int B, int H, int HV, int dv, int want, int *parts_out, int *W_out) {
    const int groups = B * H, E = HV / H * dv, chunks = (E + GD_COLS - 1) / GD_COLS;
    int parts = want > 0 ? want : groups <= GD_MAX_GROUPS ? 2 * g_cu.sm_count / groups : 1;
    parts = parts < 1 ? 1 : parts > chunks ? chunks : parts;
    const int W = parts > 1 ? GD_COLS * ((chunks + parts - 1) / parts) : E;
    if (parts > 1) parts = (E + W - 1) / W;
    *parts_out = parts, *W_out = W;
}
