// hopper_selftest.cc: checks the emulator's sm_90 stand-ins (cuda/emu.cuh, tests/gpu/emu/emu_sm90.cc) through
// cuda/hopper.cuh before any kernel's results depend on them: TMA boxes of odd-sized bf16 matrices (zeros outside,
// negative coordinates), the 128-byte swizzle as TMA writes it and wgmma descriptors read it (k16 steps of 32
// bytes; MN-major operands with 2048-byte steps; narrow MN-major slices with the 64- and 32-byte swizzles), every
// thread's accumulator fragment against a host replay of the emulator's arithmetic (bit for bit) and
// a double-precision product; a 2-stage producer/consumer pipeline on full/empty mbarriers whose waits block; and
// mistakes that must show up: misaligned tiles, wgmmas not committed or not retired, mbarriers used before init,
// a pipeline that never releases its stages (deadlock), one that releases a stage before retiring its wgmmas and
// one that reads a stage without waiting for it (wrong results). Every check runs with the threads in order (TMA
// loads land late) and reversed (TMA loads land at issue). Run by tests/gpu/emu_check.sh; exit status 1 on a
// failed check.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <vector>

#include "cuda/hopper.cuh"

static int g_checks, g_failed;
static bool g_quiet; // the races' mismatches are expected: not printed
static const char *g_order = "";

static void set_order(bool reverse) {
    if (reverse)
        setenv("EMU_ORDER", "reverse", 1);
    else
        unsetenv("EMU_ORDER");
    unsetenv("EMU_CP_ASYNC"); // the order's default: TMA loads late in order, at issue reversed
    g_order = reverse ? "reversed" : "in order";
}

// ---- matrices
// bf16 [rows][cols], row stride ld elements; the padding past cols is NaN, so a box that reads it shows up.
struct Mat {
    int rows, cols, ld;
    std::vector<bf16> v;
    double at(long r, long c) const { // zero outside, as TMA fills
        return r >= 0 && r < rows && c >= 0 && c < cols ? (double)__bfloat162float(v[(size_t)r * ld + c]) : 0.0;
    }
};
static Mat random_mat(int rows, int cols, int ld, uint64_t seed) {
    Mat m{rows, cols, ld, std::vector<bf16>((size_t)rows * ld)};
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < ld; c++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            const float x = (float)((double)(s >> 11) / 9007199254740992.0 * 4.0 - 2.0);
            m.v[(size_t)r * ld + c] = __float2bfloat16_rn(c < cols ? x : NAN);
        }
    return m;
}
static void encode(CUtensorMap *map, const Mat &m, uint32_t box_outer) {
    emu::tmap_encode_2d(map, m.v.data(), (uint64_t)m.cols, (uint64_t)m.rows, (uint64_t)m.ld * 2, 64, box_outer);
}

// Thread t's fragment d of a 64 x n accumulator (row 0 = A's row m0, column 0 = B's row n0) over ksteps k16 steps
// from column k0: equal to the emulator's arithmetic replayed (per wgmma: products exact, sum in double, one fp32
// rounding) and within rounding of the double-precision product. Returns the largest relative error. ta / tb: A / B
// stored transposed (MN-major operands: the element (m, k) at A.at(k, m)).
static double check_frag(const char *what, const float *d, int t, int n, const Mat &A, const Mat &B, int m0, int n0,
                         int k0, int ksteps, bool ta = false, bool tb = false) {
    const int w = t / 32, l = t % 32;
    double worst = 0;
    for (int j = 0; j < n / 8; j++)
        for (int i = 0; i < 4; i++) {
            const int row = 16 * w + l / 4 + 8 * (i / 2), col = 8 * j + 2 * (l % 4) + i % 2;
            float replay = 0;
            double exact = 0, mag = 0;
            for (int s = 0; s < ksteps; s++) {
                double acc = s ? (double)replay : 0.0;
                for (int k = 0; k < 16; k++) {
                    const int kk = k0 + 16 * s + k;
                    const double p = (ta ? A.at(kk, m0 + row) : A.at(m0 + row, kk)) *
                                     (tb ? B.at(kk, n0 + col) : B.at(n0 + col, kk));
                    acc += p, exact += p, mag += fabs(p);
                }
                replay = (float)acc;
            }
            const float got = d[4 * j + i];
            const double err = fabs(got - exact) / (mag + 1e-30);
            if (!(got == replay) || !(err <= 2.0 * ksteps * 6e-8)) {
                if (!g_quiet && g_failed < 20)
                    printf("FAIL %s (%s): thread %d d[%d] = D[%d][%d]: %.9g, replay %.9g, exact %.12g\n", what, g_order,
                           t, 4 * j + i, row, col, got, replay, exact);
                return INFINITY;
            }
            if (err > worst) worst = err;
        }
    return worst;
}
static void report(const char *what, bool ok, const char *detail) {
    g_checks++;
    if (!ok) g_failed++;
    printf("%s %s (%s)%s%s\n", ok ? "ok  " : "FAIL", what, g_order, detail[0] ? ": " : "", detail);
}

// ---- one warpgroup, one stage: A [64 x 64] at (k0, m0) and B [n x 64] at (k0, n0), 4 k16 steps
enum { SINGLE_OK, SINGLE_MISALIGNED_DESC, SINGLE_MISALIGNED_TMA, SINGLE_UNCOMMITTED, SINGLE_UNRETIRED, SINGLE_NO_INIT };
struct SingleArgs {
    const CUtensorMap *ma, *mb;
    const int *coords; // m0, n0, k0 per block
    int n, variant;
    float *out; // per block and thread 128 floats
};
static const size_t SINGLE_SMEM = 1023 + 8192 + 32768 + 8;

static void single_kernel(const SingleArgs &p) {
    CU_DYN_SMEM(unsigned char, raw);
    unsigned char *ta = raw + ((1024u - (smem_u32(raw) & 1023u)) & 1023u), *tb = ta + 8192;
    uint64_t *full = reinterpret_cast<uint64_t *>(tb + 32768);
    const int *c = p.coords + 3 * blockIdx.x;
    if (threadIdx.x == 0 && p.variant != SINGLE_NO_INIT) {
        mbar_init(full, 1);
        mbar_fence_init();
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        mbar_arrive_expect_tx(full, 8192 + p.n * 128);
        tma_load_2d(p.variant == SINGLE_MISALIGNED_TMA ? ta + 512 : ta, p.ma, c[2], c[0], full);
        tma_load_2d(tb, p.mb, c[2], c[1], full);
    }
    mbar_wait(full, 0);
    float d[128];
    for (float &x : d) x = NAN; // scale_d = 0 must not read them
    const uint32_t a = smem_u32(ta) + (p.variant == SINGLE_MISALIGNED_DESC ? 128 : 0), b = smem_u32(tb);
    wg_fence();
    for (int kk = 0; kk < 4; kk++) {
        if (p.n == 256)
            wgmma_m64n256k16(d, wg_desc_sw128(a + 32 * kk), wg_desc_sw128(b + 32 * kk), kk > 0);
        else
            wgmma_m64n128k16(*reinterpret_cast<float(*)[64]>(d), wg_desc_sw128(a + 32 * kk),
                             wg_desc_sw128(b + 32 * kk), kk > 0);
    }
    if (p.variant == SINGLE_UNCOMMITTED) return;
    wg_commit();
    if (p.variant == SINGLE_UNRETIRED) return;
    wg_wait<0>();
    wg_fence_regs(d);
    float *o = p.out + ((size_t)blockIdx.x * 128 + threadIdx.x) * 128;
    for (int i = 0; i < p.n / 2; i++) o[i] = d[i];
}
static void run_single(const SingleArgs &p, int blocks) {
    emu::launch("hopper_selftest_single", dim3(blocks), dim3(128), SINGLE_SMEM, [&] { single_kernel(p); });
}

// ---- the same with MN-major operands (the transposed A of dW = dy^T x, the transposed B of dx = dy W and dW):
// A^T [K x M] and B^T [K x N] stored row-major, loaded as TMA boxes of 64 (K) x 64 (M or N) 8 KB apart, read by
// MN-major descriptors (k16 steps of 2048 bytes). `wrong_step`: K-major's 32-byte steps, which the emulator must
// refuse.
struct MnArgs {
    const CUtensorMap *ma, *mb; // boxes 64 x 64 of A (as stored: K-major A [M][K] or A^T [K][M]) and of B likewise
    const int *coords;          // m0, n0, k0 per block
    bool ta, tb, wrong_step;
    float *out;
};
template <int TA, int TB> static void mn_kernel(const MnArgs &p) {
    CU_DYN_SMEM(unsigned char, raw);
    unsigned char *ta = raw + ((1024u - (smem_u32(raw) & 1023u)) & 1023u), *tb = ta + 8192;
    uint64_t *full = reinterpret_cast<uint64_t *>(tb + 32768);
    const int *c = p.coords + 3 * blockIdx.x;
    if (threadIdx.x == 0) {
        mbar_init(full, 1);
        mbar_fence_init();
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        mbar_arrive_expect_tx(full, 8192 + 32768);
        if (TA) tma_load_2d(ta, p.ma, c[0], c[2], full); // A^T rows k0.., columns m0..m0+63
        else tma_load_2d(ta, p.ma, c[2], c[0], full);
        for (int j = 0; j < 4; j++) // B^T: four 64-wide column blocks n0 + 64 j; K-major B: 64-row boxes
            if (TB) tma_load_2d(tb + 8192 * j, p.mb, c[1] + 64 * j, c[2], full);
            else tma_load_2d(tb + 8192 * j, p.mb, c[2], c[1] + 64 * j, full);
    }
    mbar_wait(full, 0);
    float d[128];
    for (float &x : d) x = NAN;
    const uint32_t a = smem_u32(ta), b = smem_u32(tb), step = p.wrong_step ? 32 : 2048;
    wg_fence();
    for (int kk = 0; kk < 4; kk++)
        wgmma_m64n256k16<TA, TB>(d, TA ? wg_desc_mn_sw128(a + step * kk, 8192) : wg_desc_sw128(a + 32 * kk),
                                 TB ? wg_desc_mn_sw128(b + step * kk, 8192) : wg_desc_sw128(b + 32 * kk), kk > 0);
    wg_commit();
    wg_wait<0>();
    wg_fence_regs(d);
    float *o = p.out + ((size_t)blockIdx.x * 128 + threadIdx.x) * 128;
    for (int i = 0; i < 128; i++) o[i] = d[i];
}
static void run_mn(const MnArgs &p, int blocks) {
    emu::launch("hopper_selftest_mn", dim3(blocks), dim3(128), SINGLE_SMEM, [&] {
        if (p.ta && p.tb) mn_kernel<1, 1>(p);
        else if (p.ta) mn_kernel<1, 0>(p);
        else if (p.tb) mn_kernel<0, 1>(p);
        else mn_kernel<0, 0>(p);
    });
}

// ---- narrow MN-major B (the delta rule's warpgroup column slices): B^T's [64 of K][NC] box at (k0, n0) written by
// the threads at sw_off<NC> (the 64- and 32-byte swizzles, hopper.cuh), read by wg_desc_mn_sw<NC> in k16 steps of
// 32 NC bytes with m64nNCk16; A K-major by TMA. `misaligned`: a B start off its 8-row group, which must be refused.
struct NarrowArgs {
    const CUtensorMap *ma;
    const Mat *BT;
    const int *coords; // m0, n0, k0 per block
    bool misaligned;
    float *out;
};
template <int NC> static void narrow_kernel(const NarrowArgs &p) {
    CU_DYN_SMEM(unsigned char, raw);
    unsigned char *ta = raw + ((1024u - (smem_u32(raw) & 1023u)) & 1023u), *tb = ta + 8192;
    uint64_t *full = reinterpret_cast<uint64_t *>(tb + 32768);
    const int *c = p.coords + 3 * blockIdx.x;
    if (threadIdx.x == 0) {
        mbar_init(full, 1);
        mbar_fence_init();
    }
    for (int idx = threadIdx.x; idx < 64 * NC; idx += blockDim.x) {
        const int k = idx / NC, n = idx % NC;
        *reinterpret_cast<bf16 *>(tb + sw_off<NC>(k, n)) = __float2bfloat16_rn((float)p.BT->at(c[2] + k, c[1] + n));
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        mbar_arrive_expect_tx(full, 8192);
        tma_load_2d(ta, p.ma, c[2], c[0], full);
    }
    mbar_wait(full, 0);
    float d[NC / 2];
    for (float &x : d) x = NAN;
    const uint32_t a = smem_u32(ta), b = smem_u32(tb) + (p.misaligned ? 2 * NC : 0); // one row on
    wg_fence();
    for (int kk = 0; kk < 4; kk++)
        wgmma_m64nk16<NC, 0, 1>(d, wg_desc_sw128(a + 32 * kk), wg_desc_mn_sw<NC>(b + 32 * NC * kk), kk > 0);
    wg_commit();
    wg_wait<0>();
    wg_fence_regs(d);
    float *o = p.out + ((size_t)blockIdx.x * 128 + threadIdx.x) * 128;
    for (int i = 0; i < NC / 2; i++) o[i] = d[i];
}
static void run_narrow(const NarrowArgs &p, int nc, int blocks) {
    emu::launch("hopper_selftest_narrow", dim3(blocks), dim3(128), SINGLE_SMEM, [&] {
        if (nc == 32) narrow_kernel<32>(p);
        else narrow_kernel<16>(p);
    });
}

// ---- producer/consumer: warpgroup 0's thread 0 loads stage kt % 2 (A [128 x 64], B [256 x 64]) once empty[s]
// is released; warpgroups 1 and 2 wait on full[s], run 4 wgmma m64n256k16 on their 64 rows, keep one stage's
// group in flight (wg_wait<1>) and release the previous stage (one arrival per consumer warp).
enum { PIPE_OK, PIPE_EARLY_RELEASE, PIPE_NO_FULL_WAIT, PIPE_NO_RELEASE };
struct PipeArgs {
    const CUtensorMap *ma, *mb;
    const int *coords; // m0, n0 per block
    int kt_n, variant;
    float *out; // per block and consumer thread 128 floats
};
enum { PIPE_A = 128 * 128, PIPE_STAGE = PIPE_A + 256 * 128 };
static const size_t PIPE_SMEM = 1023 + 2 * PIPE_STAGE + 4 * 8;

static void pipe_kernel(const PipeArgs &p) {
    CU_DYN_SMEM(unsigned char, raw);
    unsigned char *ring = raw + ((1024u - (smem_u32(raw) & 1023u)) & 1023u);
    uint64_t *full = reinterpret_cast<uint64_t *>(ring + 2 * PIPE_STAGE), *empty = full + 2;
    const int wg = threadIdx.x / 128, m0 = p.coords[2 * blockIdx.x], n0 = p.coords[2 * blockIdx.x + 1];
    if (threadIdx.x == 0) {
        for (int s = 0; s < 2; s++) mbar_init(&full[s], 1), mbar_init(&empty[s], 8);
        mbar_fence_init();
    }
    __syncthreads();
    if (wg == 0) {
        if (threadIdx.x == 0)
            for (int kt = 0; kt < p.kt_n; kt++) {
                const int s = kt % 2;
                mbar_wait(&empty[s], ((kt / 2) & 1) ^ 1);
                mbar_arrive_expect_tx(&full[s], PIPE_STAGE);
                tma_load_2d(ring + s * PIPE_STAGE, p.ma, 64 * kt, m0, &full[s]);
                tma_load_2d(ring + s * PIPE_STAGE + PIPE_A, p.mb, 64 * kt, n0, &full[s]);
            }
        return;
    }
    const int c = wg - 1, lane = threadIdx.x & 31;
    float d[128];
    for (int kt = 0; kt < p.kt_n; kt++) {
        const int s = kt % 2;
        if (p.variant != PIPE_NO_FULL_WAIT) mbar_wait(&full[s], (kt / 2) & 1);
        const uint32_t a = smem_u32(ring + s * PIPE_STAGE + c * 8192), b = smem_u32(ring + s * PIPE_STAGE + PIPE_A);
        wg_fence();
        for (int kk = 0; kk < 4; kk++)
            wgmma_m64n256k16(d, wg_desc_sw128(a + 32 * kk), wg_desc_sw128(b + 32 * kk), kt > 0 || kk > 0);
        wg_commit();
        if (p.variant == PIPE_EARLY_RELEASE) { // the stage released while its wgmmas may still read it
            if (lane == 0) mbar_arrive(&empty[s]);
            wg_wait<1>();
        } else {
            wg_wait<1>();
            if (kt > 0 && lane == 0 && p.variant != PIPE_NO_RELEASE) mbar_arrive(&empty[(kt - 1) % 2]);
        }
    }
    wg_wait<0>();
    wg_fence_regs(d);
    float *o = p.out + ((size_t)blockIdx.x * 256 + threadIdx.x - 128) * 128;
    for (int i = 0; i < 128; i++) o[i] = d[i];
}
static void run_pipe(const PipeArgs &p, int blocks) {
    emu::launch("hopper_selftest_pipe", dim3(blocks), dim3(384), PIPE_SMEM, [&] { pipe_kernel(p); });
}

// ---- mistakes: f runs in a child process (the emulator dies with exit status 3 on an error it reports); returns
// the child's exit status (-1: killed) and its stderr's first line
static int in_child(const std::function<void()> &f, std::string *first_line) {
    fflush(stdout);
    fflush(stderr);
    FILE *log = tmpfile();
    if (!log) {
        perror("tmpfile");
        exit(1);
    }
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(fileno(log), 2);
        f();
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    std::string msg;
    char buf[4096];
    fseek(log, 0, SEEK_SET);
    for (size_t got; (got = fread(buf, 1, sizeof buf, log)) > 0;) msg.append(buf, got);
    fclose(log);
    *first_line = msg.substr(0, msg.find('\n'));
    if (first_line->size() > 400) *first_line = first_line->substr(0, 400) + "...";
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
// f must die saying `expect`.
static void expect_death(const char *what, const char *expect, const std::function<void()> &f) {
    std::string first;
    const int st = in_child(f, &first);
    const bool ok = st == 3 && first.find(expect) != std::string::npos;
    report(what, ok, ok ? first.c_str() : ("expected a death saying '" + std::string(expect) + "', got exit status " +
                                           std::to_string(st) + ": " + first).c_str());
}

int main() {
    // odd sizes: 16-byte row strides with NaN padding, edge tiles and negative coordinates
    const Mat A = random_mat(150, 300, 312, 1), B = random_mat(290, 300, 304, 2);
    const Mat AT = random_mat(300, 150, 152, 3), BT = random_mat(300, 290, 296, 4); // MN-major operands, K rows
    alignas(64) CUtensorMap ma64, ma128, mb256, mb128, mb64, mat64, mbt64;
    encode(&ma64, A, 64), encode(&ma128, A, 128), encode(&mb256, B, 256), encode(&mb128, B, 128);
    encode(&mb64, B, 64), encode(&mat64, AT, 64), encode(&mbt64, BT, 64);
    static const int single_coords[] = {0, 0, 0, 128, 256, 256, -7, -100, -20, 37, 13, 101, 149, 289, 299};
    const int single_blocks = (int)(sizeof single_coords / sizeof single_coords[0] / 3);
    static const int pipe_coords[] = {0, 0, 128, 256, -64, 40};
    const int pipe_blocks = (int)(sizeof pipe_coords / sizeof pipe_coords[0] / 2), kt_n = (300 + 63) / 64;
    std::vector<float> out((size_t)single_blocks * 128 * 128), pout((size_t)pipe_blocks * 256 * 128);

    int caught[3] = {0, 0, 0}; // per race: the orders that showed it
    for (int rev = 0; rev < 2; rev++) {
        set_order(rev);
        for (int n = 256; n >= 128; n -= 128) {
            SingleArgs p = {&ma64, n == 256 ? &mb256 : &mb128, single_coords, n, SINGLE_OK, out.data()};
            run_single(p, single_blocks);
            double worst = 0;
            for (int b = 0; b < single_blocks; b++)
                for (int t = 0; t < 128; t++) {
                    const int *c = single_coords + 3 * b;
                    const double e = check_frag(n == 256 ? "single tile n=256" : "single tile n=128",
                                                &out[((size_t)b * 128 + t) * 128], t, n, A, B, c[0], c[1], c[2], 4);
                    worst = e > worst ? e : worst;
                }
            char detail[160];
            snprintf(detail, sizeof detail, "%d tiles (edges, negative coordinates), max rel err %.2g vs double",
                     single_blocks, worst);
            report(n == 256 ? "TMA + wgmma m64n256k16, one stage" : "TMA + wgmma m64n128k16, one stage",
                   worst < INFINITY, detail);
        }
        // MN-major operands: A^T [300 x 150] and B^T [300 x 290] (K rows), the same tiles as the K-major ones
        for (int combo = 1; combo < 4; combo++) {
            const bool ta = combo & 1, tb = combo & 2;
            MnArgs p = {ta ? &mat64 : &ma64, tb ? &mbt64 : &mb64, single_coords, ta, tb, false, out.data()};
            run_mn(p, single_blocks);
            double worst = 0;
            for (int b = 0; b < single_blocks; b++)
                for (int t = 0; t < 128; t++) {
                    const int *c = single_coords + 3 * b;
                    const double e = check_frag("MN-major tile", &out[((size_t)b * 128 + t) * 128], t, 256,
                                                ta ? AT : A, tb ? BT : B, c[0], c[1], c[2], 4, ta, tb);
                    worst = e > worst ? e : worst;
                }
            char what[96], detail[160];
            snprintf(what, sizeof what, "TMA + wgmma m64n256k16, A %s-major, B %s-major", ta ? "M" : "K",
                     tb ? "N" : "K");
            snprintf(detail, sizeof detail, "%d tiles (edges, negative coordinates), max rel err %.2g vs double",
                     single_blocks, worst);
            report(what, worst < INFINITY, detail);
        }

        // narrow MN-major B slices: 32 and 16 columns of B^T [300 x 290] (the 64- and 32-byte swizzles)
        for (int nc = 32; nc >= 16; nc /= 2) {
            NarrowArgs p = {&ma64, &BT, single_coords, false, out.data()};
            run_narrow(p, nc, single_blocks);
            double worst = 0;
            for (int b = 0; b < single_blocks; b++)
                for (int t = 0; t < 128; t++) {
                    const int *c = single_coords + 3 * b;
                    const double e = check_frag("narrow tile", &out[((size_t)b * 128 + t) * 128], t, nc, A, BT, c[0],
                                                c[1], c[2], 4, false, true);
                    worst = e > worst ? e : worst;
                }
            char what[96], detail[160];
            snprintf(what, sizeof what, "wgmma m64n%dk16, B N-major with the %d-byte swizzle", nc, 2 * nc);
            snprintf(detail, sizeof detail, "%d tiles (edges, negative coordinates), max rel err %.2g vs double",
                     single_blocks, worst);
            report(what, worst < INFINITY, detail);
        }

        // the pipeline, right and with two races (in a child: results checked there, exit status 10 if wrong)
        for (int v = PIPE_OK; v <= PIPE_NO_FULL_WAIT; v++) {
            std::string first;
            const int st = in_child(
                [&] {
                    PipeArgs p = {&ma128, &mb256, pipe_coords, kt_n, v, pout.data()};
                    run_pipe(p, pipe_blocks);
                    g_quiet = v != PIPE_OK;
                    double worst = 0;
                    for (int b = 0; b < pipe_blocks && worst < INFINITY; b++)
                        for (int t = 0; t < 256 && worst < INFINITY; t++) {
                            const double e = check_frag("pipeline", &pout[((size_t)b * 256 + t) * 128], t % 128, 256,
                                                        A, B, pipe_coords[2 * b] + 64 * (t / 128),
                                                        pipe_coords[2 * b + 1], 0, 4 * kt_n);
                            worst = e > worst ? e : worst;
                        }
                    fflush(stdout);
                    if (v == PIPE_OK) fprintf(stderr, "max rel err %.2g vs double\n", worst);
                    _exit(worst < INFINITY ? 0 : 10);
                },
                &first);
            char detail[600];
            if (v == PIPE_OK) {
                snprintf(detail, sizeof detail, "%d blocks x %d k-tiles over 2 stages, %s", pipe_blocks, kt_n,
                         st == 0 ? first.c_str() : ("exit status " + std::to_string(st) + ": " + first).c_str());
                report("producer/consumer pipeline on full/empty mbarriers", st == 0, detail);
                continue;
            }
            caught[v] += st != 0;
            printf("     %s (%s): %s\n",
                   v == PIPE_EARLY_RELEASE ? "race: a stage released before its wgmmas retire"
                                           : "race: a stage read without waiting on full[s]",
                   g_order,
                   st == 10  ? "wrong results"
                   : st == 0 ? "results unaffected in this order"
                             : ("reported: " + first).c_str());
        }

        // mistakes the emulator must report
        static const struct {
            const char *what, *message;
            int variant;
        } single_mistakes[] = {
            {"misaligned wgmma tile", "not 1024-byte aligned", SINGLE_MISALIGNED_DESC},
            {"misaligned TMA destination", "tma_load_2d into shared", SINGLE_MISALIGNED_TMA},
            {"wgmma never committed", "4 of them never committed", SINGLE_UNCOMMITTED},
            {"wgmma committed, never retired", "wgmma of its warpgroup not retired (0 of them", SINGLE_UNRETIRED},
            {"mbarrier used before init", "before its mbar_init", SINGLE_NO_INIT},
        };
        for (const auto &mk : single_mistakes)
            expect_death(mk.what, mk.message, [&] {
                SingleArgs p = {&ma64, &mb256, single_coords, 256, mk.variant, out.data()};
                run_single(p, 1);
            });
        expect_death("MN-major operand stepped like a K-major one", "MN-major descriptor starts at", [&] {
            MnArgs p = {&ma64, &mbt64, single_coords, false, true, true, out.data()};
            run_mn(p, 1);
        });
        expect_death("narrow MN-major operand off its 8-row group", "MN-major descriptor starts at", [&] {
            NarrowArgs p = {&ma64, &BT, single_coords, true, out.data()};
            run_narrow(p, 32, 1);
        });
        expect_death("pipeline that never releases its stages", "deadlock", [&] {
            PipeArgs p = {&ma128, &mb256, pipe_coords, kt_n, PIPE_NO_RELEASE, pout.data()};
            run_pipe(p, 1);
        });
        expect_death("tensor map with a box not 128 bytes wide", "tmap_encode_2d", [&] {
            alignas(64) CUtensorMap m;
            emu::tmap_encode_2d(&m, A.v.data(), 300, 150, 624, 32, 64);
        });
        expect_death("shared address of a pointer outside dynamic shared memory", "outside the block's", [&] {
            static float not_dyn;
            emu::launch("hopper_selftest_addr", dim3(1), dim3(32), 64, [&] { (void)smem_u32(&not_dyn); });
        });
    }
    g_order = "either order";
    report("race 'released before retired' shows up", caught[PIPE_EARLY_RELEASE] > 0, "");
    report("race 'read without waiting on full' shows up", caught[PIPE_NO_FULL_WAIT] > 0, "");
    printf("hopper self-test: %d checks, %d failed\n", g_checks, g_failed);
    return g_failed ? 1 : 0;
}
