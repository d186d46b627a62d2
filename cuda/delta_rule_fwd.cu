// delta_rule_fwd.cu: the chunked gated delta rule forward (spec model.md §3.1), three kernels:
//   intra  (per chunk):  G = cumsum(gamma); A_ij = beta_i (k_i . k_j) e^{G_i - G_j} (i > j);
//                        Tm = (I + A)^-1 by forward substitution (one thread per column, fp32);
//                        W = Tm diag(beta e^G) K, U = Tm diag(beta) V
//   state  (serial over chunks, per dv tile): h_n saved; V_new = U - W h_n;
//                        h_{n+1} = e^{G_last} h_n + K^T (e^{G_last - G} . V_new)  (h fp32 in registers)
//   out    (per chunk):  O = s e^G (Q h_n) + s ((Q K^T . Gamma . M) V_new)
// See delta_rule.cuh for the thread layout, padding and rounding conventions. These are the CUDA-core
// kernels (fp32 mode, and bf16 with dk or dv > 64); bf16 with dk, dv <= 64 goes to delta_rule_tc_fwd.cu
// (the entry point below chooses).
#include "cuda/delta_rule.cuh"

// ---------------------------------------------------------------------------------------------------
// intra-chunk: grid (NT, HV, B)

template <typename T, int DKP, int DVP> struct IntraK {
    static constexpr int SK = DKP + 1, SV = DVP + 1, SC = DR_C + 1;
    static constexpr size_t smem = sizeof(float) * ((size_t)DR_C * SK + DR_C * SV + 2 * DR_C * SC + 2 * DR_C);
};

template <typename T, int DKP, int DVP> __global__ void __launch_bounds__(DR_THREADS) dr_intra_kernel(DrArgs a) {
    using L = IntraK<T, DKP, DVP>;
    constexpr int SK = L::SK, SV = L::SV, SC = L::SC;
    CU_DYN_SMEM(float, sm);
    float *Ks = sm;             // [64][SK] k, later beta e^G k
    float *Vs = Ks + DR_C * SK; // [64][SV] v, later beta v
    float *As = Vs + DR_C * SV; // [64][SC] strictly lower A
    float *Ts = As + DR_C * SC; // [64][SC] Tm = (I + A)^-1
    float *bs = Ts + DR_C * SC; // [64] beta
    float *Gs = bs + DR_C;      // [64] cumsum of gamma
    __shared__ int Ds[DR_C];    // doc_start per row (load_D)
    const int n = blockIdx.x, j = blockIdx.y, b = blockIdx.z, i = j / a.G;
    const int t0 = n * DR_C, Lc = min(DR_C, a.T - t0);
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const size_t tok0 = (size_t)b * a.T + t0, hr0 = dr_hrow(a, b, j, t0);

    load_tile(Ks, SK, (const T *)a.k + tok0 * a.ldqk + (size_t)i * a.dk, a.ldqk, Lc, a.dk, DR_C, DKP);
    load_tile(Vs, SV, (const T *)a.v + tok0 * a.ldv + (size_t)j * a.dv, a.ldv, Lc, a.dv, DR_C, DVP);
    if (threadIdx.x < DR_C) {
        int r = threadIdx.x;
        bs[r] = r < Lc ? a.beta[(tok0 + r) * a.HV + j] : 0.0f;
    }
    load_D(Ds, a, b, t0, Lc);
    if (threadIdx.x == 0) { // sequential cumsum: the CPU twin's order, restarting where a document starts
        float g = 0.0f;
        for (int r = 0; r < DR_C; r++) {
            if (r < Lc && a.ds && a.ds[tok0 + r] == t0 + r) g = 0.0f;
            if (r < Lc) g += a.gamma[(tok0 + r) * a.HV + j];
            Gs[r] = g; // rows past Lc keep G_last
        }
    }
    __syncthreads();
    if ((int)threadIdx.x < Lc) a.Gc[hr0 + threadIdx.x] = Gs[threadIdx.x];

    { // A = beta_i (K K^T)_ij e^{G_i - G_j}, strictly lower
        float acc[4][4];
        zero_acc(acc);
        mm_acc<4, 4>(acc, Ks, SK, 1, Ks, 1, SK, a.dk);
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                int row = ty + 16 * r, col = tx + 16 * c;
                As[row * SC + col] =
                    row > col && Ds[row] == Ds[col] ? bs[row] * acc[r][c] * expf(Gs[row] - Gs[col]) : 0.0f;
            }
    }
    __syncthreads();
    // (I + A) Tm = I: column c of Tm by one thread, rows in order: Tm_rc = -sum_{c <= m < r} A_rm Tm_mc.
    // Rows past Lc have A = 0 and get identity rows, which multiply zero rows below.
    if (threadIdx.x < DR_C) {
        const int c = threadIdx.x;
        for (int r = 0; r < DR_C; r++) {
            float val = r == c ? 1.0f : 0.0f;
            if (r > c) {
                float s = 0.0f;
                for (int m = c; m < r; m++) s = fmaf(As[r * SC + m], Ts[m * SC + c], s);
                val = -s;
            }
            Ts[r * SC + c] = val;
        }
        for (int r = 0; r < DR_C; r++) Ts[r * SC + c] = rnd<T>(Ts[r * SC + c]); // FLA stores Tm in bf16
    }
    __syncthreads();
    if (a.Tm) {
        T *tm = (T *)a.Tm + hr0 * DR_C;
        for (int idx = threadIdx.x; idx < Lc * DR_C; idx += blockDim.x)
            tm[idx] = from_f<T>(Ts[(idx / DR_C) * SC + idx % DR_C]);
    }
    // K <- beta e^G K, V <- beta V (act-rounded: FLA feeds these to the products in bf16)
    for (int idx = threadIdx.x; idx < DR_C * DKP; idx += blockDim.x) {
        int r = idx / DKP, d = idx % DKP;
        Ks[r * SK + d] = rnd<T>(bs[r] * (dr_carried(Ds, t0, r) ? expf(Gs[r]) : 0.0f) * Ks[r * SK + d]);
    }
    for (int idx = threadIdx.x; idx < DR_C * DVP; idx += blockDim.x) {
        int r = idx / DVP, e = idx % DVP;
        Vs[r * SV + e] = rnd<T>(bs[r] * Vs[r * SV + e]);
    }
    __syncthreads();
    { // W = Tm (beta e^G K)
        float acc[4][DKP / 16];
        zero_acc(acc);
        mm_acc<4, DKP / 16>(acc, Ts, SC, 1, Ks, SK, 1, DR_C);
        T *W = (T *)a.W + hr0 * a.dk;
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int c = 0; c < DKP / 16; c++) {
                int row = ty + 16 * r, d = tx + 16 * c;
                if (row < Lc && d < a.dk) W[(size_t)row * a.dk + d] = from_f<T>(acc[r][c]);
            }
    }
    { // U = Tm (beta V)
        float acc[4][DVP / 16];
        zero_acc(acc);
        mm_acc<4, DVP / 16>(acc, Ts, SC, 1, Vs, SV, 1, DR_C);
        T *U = (T *)a.U + hr0 * a.dv;
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int c = 0; c < DVP / 16; c++) {
                int row = ty + 16 * r, e = tx + 16 * c;
                if (row < Lc && e < a.dv) U[(size_t)row * a.dv + e] = from_f<T>(acc[r][c]);
            }
    }
}

// ---------------------------------------------------------------------------------------------------
// state recurrence: grid (dv / BV, HV, B), serial over chunks

template <typename T, int DKP, int BV> struct StateK {
    static constexpr int SK = DKP + 1, SB = BV + 1;
    static constexpr size_t smem = sizeof(float) * ((size_t)DKP * SB + 2 * DR_C * SK + DR_C * SB + DR_C);
};

template <typename T, int DKP, int BV> __global__ void __launch_bounds__(DR_THREADS) dr_state_kernel(DrArgs a) {
    using L = StateK<T, DKP, BV>;
    constexpr int SK = L::SK, SB = L::SB, MR = DKP / 16, NR = BV / 16;
    CU_DYN_SMEM(float, sm);
    float *hs = sm;             // [DKP][SB] act-rounded h_n (this dv tile)
    float *Ws = hs + DKP * SB;  // [64][SK]
    float *Ks = Ws + DR_C * SK; // [64][SK]
    float *Vd = Ks + DR_C * SK; // [64][SB] e^{G_last - G} . V_new, act-rounded
    float *Gs = Vd + DR_C * SB; // [64]
    __shared__ int Ds[DR_C];
    const int e0 = blockIdx.x * BV, j = blockIdx.y, b = blockIdx.z, i = j / a.G;
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const size_t bj = (size_t)b * a.HV + j;
    const T *U = (const T *)a.U, *Wg = (const T *)a.W, *k = (const T *)a.k;

    float hacc[MR][NR]; // the running state, rows d = ty + 16 r, columns e0 + tx + 16 c
#pragma unroll
    for (int r = 0; r < MR; r++)
#pragma unroll
        for (int c = 0; c < NR; c++) {
            int d = ty + 16 * r, e = e0 + tx + 16 * c;
            hacc[r][c] = a.state && d < a.dk ? a.state[(bj * a.dk + d) * a.dv + e] : 0.0f;
        }
    for (int n = 0; n < a.NT; n++) {
        const int t0 = n * DR_C, Lc = min(DR_C, a.T - t0);
        const size_t tok0 = (size_t)b * a.T + t0, hr0 = bj * a.T + t0;
#pragma unroll
        for (int r = 0; r < MR; r++)
#pragma unroll
            for (int c = 0; c < NR; c++) {
                int d = ty + 16 * r, e = tx + 16 * c;
                hs[d * SB + e] = rnd<T>(hacc[r][c]);
                if (a.h && d < a.dk)
                    ((T *)a.h)[dr_state_off(a, b, j, n) + (size_t)d * a.dv + e0 + e] = from_f<T>(hacc[r][c]);
            }
        load_tile(Ws, SK, Wg + hr0 * a.dk, a.dk, Lc, a.dk, DR_C, DKP);
        load_tile(Ks, SK, k + tok0 * a.ldqk + (size_t)i * a.dk, a.ldqk, Lc, a.dk, DR_C, DKP);
        load_G(Gs, a, hr0, Lc);
        load_D(Ds, a, b, t0, Lc);
        __syncthreads();
        const float GL = Gs[Lc - 1];
        { // V_new = U - W h_n
            float acc[4][NR];
            zero_acc(acc);
            mm_acc<4, NR>(acc, Ws, SK, 1, hs, SB, 1, a.dk);
#pragma unroll
            for (int r = 0; r < 4; r++)
#pragma unroll
                for (int c = 0; c < NR; c++) {
                    int row = ty + 16 * r, e = tx + 16 * c;
                    float vd = 0.0f;
                    if (row < Lc) {
                        size_t o = (hr0 + row) * a.dv + e0 + e;
                        float vn = to_f(U[o]) - acc[r][c];
                        if (a.vnew) ((T *)a.vnew)[o] = from_f<T>(vn);
                        vd = rnd<T>((Ds[row] == Ds[Lc - 1] ? expf(GL - Gs[row]) : 0.0f) * vn);
                    }
                    Vd[row * SB + e] = vd;
                }
        }
        __syncthreads();
        const float eL = dr_carried(Ds, t0, Lc - 1) ? expf(GL) : 0.0f; // 0: the last document starts here
#pragma unroll
        for (int r = 0; r < MR; r++)
#pragma unroll
            for (int c = 0; c < NR; c++) hacc[r][c] *= eL;
        mm_acc<MR, NR>(hacc, Ks, 1, SK, Vd, SB, 1, DR_C); // += K^T Vd
        __syncthreads();                                  // Ws, Ks, Vd and hs are rewritten by the next chunk
    }
    if (a.state) {
#pragma unroll
        for (int r = 0; r < MR; r++)
#pragma unroll
            for (int c = 0; c < NR; c++) {
                int d = ty + 16 * r, e = e0 + tx + 16 * c;
                if (d < a.dk) a.state[(bj * a.dk + d) * a.dv + e] = hacc[r][c];
            }
    }
}

// ---------------------------------------------------------------------------------------------------
// output: grid (NT, HV, B)

template <typename T, int DKP, int DVP> struct OutK {
    static constexpr int SK = DKP + 1, SV = DVP + 1, SC = DR_C + 1, SR = SK > SV ? SK : SV;
    static constexpr size_t smem = sizeof(float) * ((size_t)DR_C * SK + DR_C * SR + DKP * SV + DR_C * SC + DR_C);
};

template <typename T, int DKP, int DVP> __global__ void __launch_bounds__(DR_THREADS) dr_out_kernel(DrArgs a) {
    using L = OutK<T, DKP, DVP>;
    constexpr int SK = L::SK, SV = L::SV, SC = L::SC, SR = L::SR;
    CU_DYN_SMEM(float, sm);
    float *Qs = sm;             // [64][SK]
    float *R2 = Qs + DR_C * SK; // [64][SK] k, then [64][SV] V_new
    float *hs = R2 + DR_C * SR; // [DKP][SV] h_n (act)
    float *Sm = hs + DKP * SV;  // [64][SC] (Q K^T . Gamma . M), act-rounded
    float *Gs = Sm + DR_C * SC; // [64]
    __shared__ int Ds[DR_C];
    const int n = blockIdx.x, j = blockIdx.y, b = blockIdx.z, i = j / a.G;
    const int t0 = n * DR_C, Lc = min(DR_C, a.T - t0);
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const size_t tok0 = (size_t)b * a.T + t0, hr0 = dr_hrow(a, b, j, t0);

    load_tile(Qs, SK, (const T *)a.q + tok0 * a.ldqk + (size_t)i * a.dk, a.ldqk, Lc, a.dk, DR_C, DKP);
    load_tile(R2, SK, (const T *)a.k + tok0 * a.ldqk + (size_t)i * a.dk, a.ldqk, Lc, a.dk, DR_C, DKP);
    load_G(Gs, a, hr0, Lc);
    load_D(Ds, a, b, t0, Lc);
    __syncthreads();
    {
        float acc[4][4];
        zero_acc(acc);
        mm_acc<4, 4>(acc, Qs, SK, 1, R2, 1, SK, a.dk);
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                int row = ty + 16 * r, col = tx + 16 * c;
                Sm[row * SC + col] = col <= row && row < Lc && Ds[row] == Ds[col]
                                         ? rnd<T>(acc[r][c] * expf(Gs[row] - Gs[col]))
                                         : 0.0f;
            }
    }
    __syncthreads();
    load_tile(R2, SV, (const T *)a.vnew + hr0 * a.dv, a.dv, Lc, a.dv, DR_C, DVP);
    load_tile(hs, SV, (const T *)a.h + dr_state_off(a, b, j, n), a.dv, a.dk, a.dv, DKP, DVP);
    __syncthreads();
    float acc1[4][DVP / 16], acc2[4][DVP / 16];
    zero_acc(acc1);
    zero_acc(acc2);
    mm_acc<4, DVP / 16>(acc1, Qs, SK, 1, hs, SV, 1, a.dk);
    mm_acc<4, DVP / 16>(acc2, Sm, SC, 1, R2, SV, 1, DR_C);
    T *o = (T *)a.o;
#pragma unroll
    for (int r = 0; r < 4; r++)
#pragma unroll
        for (int c = 0; c < DVP / 16; c++) {
            int row = ty + 16 * r, e = tx + 16 * c;
            if (row < Lc && e < a.dv)
                o[(tok0 + row) * a.ldo + (size_t)j * a.dv + e] =
                    from_f<T>(a.scale * ((dr_carried(Ds, t0, row) ? expf(Gs[row]) : 0.0f) * acc1[r][c] + acc2[r][c]));
        }
}

// ---------------------------------------------------------------------------------------------------
// launchers

static dim3 chunk_grid(const DrArgs &a) { return dim3(a.NT, a.HV, a.B); }

template <typename T, int DKP, int DVP> static void run_intra(const DrArgs &a) {
    cu_launch("delta_rule intra", dr_intra_kernel<T, DKP, DVP>, chunk_grid(a), dim3(DR_THREADS),
              IntraK<T, DKP, DVP>::smem, a);
}
template <typename T, int DKP, int DVP> static void run_out(const DrArgs &a) {
    cu_launch("delta_rule out", dr_out_kernel<T, DKP, DVP>, chunk_grid(a), dim3(DR_THREADS), OutK<T, DKP, DVP>::smem,
              a);
}
template <typename T, int DKP, int BV> static void run_state(const DrArgs &a) {
    cu_launch("delta_rule state", dr_state_kernel<T, DKP, BV>, dim3(a.dv / BV, a.HV, a.B), dim3(DR_THREADS),
              StateK<T, DKP, BV>::smem, a);
}

template <typename T> void dr_run_intra(const DrArgs &a) {
    if (a.dk <= 64)
        a.dv <= 64 ? run_intra<T, 64, 64>(a) : run_intra<T, 64, 128>(a);
    else
        a.dv <= 64 ? run_intra<T, 128, 64>(a) : run_intra<T, 128, 128>(a);
}
template <typename T> void dr_run_state(const DrArgs &a) {
    // 32-wide dv tiles where dv allows (more blocks than one per head), else 16
    if (a.dk <= 64)
        a.dv % 32 == 0 ? run_state<T, 64, 32>(a) : run_state<T, 64, 16>(a);
    else
        a.dv % 32 == 0 ? run_state<T, 128, 32>(a) : run_state<T, 128, 16>(a);
}
template <typename T> static void dr_run_out(const DrArgs &a) {
    if (a.dk <= 64)
        a.dv <= 64 ? run_out<T, 64, 64>(a) : run_out<T, 64, 128>(a);
    else
        a.dv <= 64 ? run_out<T, 128, 64>(a) : run_out<T, 128, 128>(a);
}
template void dr_run_intra<float>(const DrArgs &);
template void dr_run_intra<bf16>(const DrArgs &);
template void dr_run_state<float>(const DrArgs &);
template void dr_run_state<bf16>(const DrArgs &);

void dr_check_dims(const char *op, int B, int T, int H, int HV, int dk, int dv) {
    if (B < 0 || T < 0 || H <= 0 || HV <= 0) die("cuda backend, %s: bad shape B=%d T=%d H=%d HV=%d", op, B, T, H, HV);
    if (HV % H) die("cuda backend, %s: v heads HV=%d must be a multiple of q/k heads H=%d", op, HV, H);
    if (dk <= 0 || dk > 128 || dk % 16 || dv <= 0 || dv > 128 || dv % 16)
        die("cuda backend, %s: head dims dk=%d dv=%d must be multiples of 16 in [16, 128]", op, dk, dv);
    if (B > 65535 || HV > 65535) die("cuda backend, %s: B=%d or HV=%d exceed the kernels' grid", op, B, HV);
}

template <typename T>
static void cu_delta_rule_fwd(const DeltaRuleArgs *in, void *o, int ldo, float *state) {
    const void *q = in->q, *k = in->k, *v = in->v;
    void *h_save = in->h_save;
    const float *beta = in->beta, *gamma = in->gamma;
    int ldqk = in->ldqk, ldv = in->ldv, B = in->B, T_ = in->T, H = in->H, HV = in->HV, dk = in->dk, dv = in->dv;
    float scale = in->scale;
    const int32_t *doc_start = in->doc_start;
    CU_REQUIRE(o && q && k && v && beta && gamma, "delta_rule_fwd", "NULL pointer (o, q, k, v, beta, gamma)");
    dr_check_dims("delta_rule_fwd", B, T_, H, HV, dk, dv);
    CU_REQUIRE(ldqk >= H * dk && ldv >= HV * dv && ldo >= HV * dv, "delta_rule_fwd",
               "row strides ldqk=%d ldv=%d ldo=%d below H*dk=%d / HV*dv=%d", ldqk, ldv, ldo, H * dk, HV * dv);
    if (B == 0 || T_ == 0) return;
    DrArgs a;
    memset(&a, 0, sizeof a);
    a.B = B, a.T = T_, a.H = H, a.HV = HV, a.G = HV / H, a.dk = dk, a.dv = dv, a.NT = (T_ + DR_C - 1) / DR_C;
    a.scale = scale;
    a.q = q, a.k = k, a.v = v, a.ldqk = ldqk, a.ldv = ldv, a.beta = beta, a.gamma = gamma, a.ds = doc_start;
    a.o = o, a.ldo = ldo, a.state = state;
    if (!h_save && T_ <= DR_DECODE_MAX_T && !doc_start) { // decode: no chunk work
        dr_decode_fwd<T>(a);
        return;
    }
    const size_t rows = (size_t)B * HV * T_, states = (size_t)B * HV * a.NT * dk * dv;
    // temporaries in the caller's scratch when all fit (training: the MLP's gate|up gradient buffer, free in the forward)
    const size_t sz[5] = {rows * sizeof(float), rows * dk * sizeof(T), rows * dv * sizeof(T), rows * dv * sizeof(T),
                          states * sizeof(T)};
    void *tmp[5];
    const int ntmp = h_save ? 4 : 5;
    const bool carved = dr_temps(tmp, sz, ntmp, in->scratch, in->scratch_bytes, "delta_rule_fwd");
    a.Gc = (float *)tmp[0], a.W = tmp[1], a.U = tmp[2], a.vnew = tmp[3];
    a.h = h_save ? h_save : tmp[4];
    if (dr_use_tc(sizeof(T) == sizeof(bf16), dk, dv)) { // tensor cores (delta_rule_tc_fwd.cu)
        dr_tc_fwd(a);
    } else {
        dr_run_intra<T>(a);
        dr_run_state<T>(a);
        dr_run_out<T>(a);
    }
    dr_temps_free(tmp, ntmp, carved);
}

void cu_register_delta_rule_fwd(Backend *b, int use_bf16) {
    b->delta_rule_fwd = use_bf16 ? cu_delta_rule_fwd<bf16> : cu_delta_rule_fwd<float>;
}
