// cuda_emu.cc: the CPU side of cuda/emu.cuh. A fiber scheduler that runs one kernel block at a time
// (one fiber per CUDA thread, switching only at __syncthreads, warp-level instructions (shuffles,
// __syncwarp, ldmatrix, mma), warpgroup instructions (wgmma) and mbarrier waits that must block), and the
// subset of the CUDA runtime and cuBLASLt that cuda/*.cu calls, implemented on host memory. Built and used
// only by tests/gpu/emu_check.sh. EMU_ORDER=reverse runs the warps of a block, and the lanes of a warp, in
// reverse order (a missing barrier then shows up in the other direction) and completes cp.async copies and
// TMA loads at issue (in order: cp.async at its wait, TMA only once no thread can run on without it).
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <string>
#include <vector>

#include <cublasLt.h>
#include <cublas_v2.h>

#include "cuda/emu.cuh"
#include <cuda_bf16.h>

[[noreturn]] static void emu_die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cuda emu: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(3);
}

// ---------------------------------------------------------------------------------------------------
// fibers

namespace emu {
uint3 *cur_tid;
uint3 block_idx;
dim3 block_dim, grid_dim;

enum State { RUNNABLE, AT_BAR, AT_SHFL, AT_COLL, AT_WGCOLL, AT_MBAR, DONE };
typedef void (*WarpFn)(void *const lanes[32]);
typedef void (*WgFn)(int wg, void *const threads[128]); // a warpgroup instruction, run once all 128 arrive
struct AsyncCopy {
    void *dst;
    const void *src;
    int bytes;
    long group; // the commit group it belongs to (the count of commits before it was issued)
};
// A fiber's saved context. x86-64: a stack pointer, the callee-saved registers and the FP control words pushed
// below it by emu_switch (a plain function call's worth of state: no system call; glibc's swapcontext saves
// and restores the signal mask with one at every switch, which was ~90% of the emulator's time). Elsewhere
// the ucontext calls.
#if defined(__x86_64__) && !defined(EMU_UCONTEXT)
#define EMU_FAST_SWITCH 1
extern "C" void emu_switch(void **save_sp, void *load_sp);
// Pushes rbp rbx r12-r15 and the MXCSR / x87 control words on the current stack, stores rsp to *save_sp,
// switches to load_sp and pops the same from there; `ret` resumes the other side (or enters fiber_start).
asm(R"(
    .text
    .globl emu_switch
    .type emu_switch, @function
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_switch, .-emu_switch
)");
struct Context {
    void *sp;
};
#else
struct Context {
    ucontext_t uc;
};
#endif

struct Fiber {
    Context ctx;
    uint3 tid;
    State st;
    uint64_t shfl_val, shfl_res;
    int shfl_mask;
    WarpFn coll_fn; // warp collective: the function run once all 32 lanes arrive, and this lane's data
    void *coll_data;
    WgFn wg_fn; // warpgroup instruction (data in coll_data) and its name for reports
    const char *wg_name;
    uint32_t mbar_off; // AT_MBAR: the barrier's offset in dynamic shared memory and the parity waited for
    unsigned mbar_parity;
    std::vector<AsyncCopy> copies; // cp.async issued and not yet retired by a wait_group
    long commits;
};
static const size_t STACK_BYTES = 256 * 1024;
static std::vector<Fiber> g_fibers;
static std::vector<char *> g_stacks;
static Context g_sched;
static Fiber *g_cur;
static const std::function<void()> *g_body;
static unsigned char *g_smem;
static size_t g_smem_cap, g_smem_bytes;
static const char *g_kernel;
// cp.async completion: deferred to the wait_group that retires it (a read before the wait sees NaN), or
// eager, at issue (a prefetch that overwrites data other warps still read shows up). EMU_CP_ASYNC=
// deferred|eager; by default deferred when threads run in order and eager when reversed. TMA loads follow
// the same switch: deferred, they land only when no thread can run on without them (a read of the box
// before its mbarrier wait sees NaN); eager, at issue (a stage refilled before its wgmmas retire shows up).
static bool g_cp_eager;
static const size_t GUARD = 256;
static long g_launches;

// sm_90 state of the running block, reset at its start.
static int g_nt; // the block's threads
struct MBar {    // an mbarrier, keyed by its offset in dynamic shared memory
    uint32_t off;
    int count, pending; // arrivals per phase, arrivals still missing in the current one
    long tx;            // transaction bytes announced and not yet landed (negative: landed before announced)
    unsigned phase;     // parity of the current (incomplete) phase
    long completed;     // phases completed (for reports)
};
static std::vector<MBar> g_mbars;
struct WgOp { // a wgmma issued by a warpgroup, performed when a wait retires its group
    float *d[128];
    int n;
    uint64_t da, db;
    int scale_d;
    long group; // the commit group (the count of commits before it was issued)
};
struct Warpgroup {
    std::vector<WgOp> ops; // issued, not yet retired, in issue order
    long commits;
};
static std::vector<Warpgroup> g_wgs;
struct EmuTmap { // the fields tmap_encode_2d keeps in a CUtensorMap's opaque bytes
    uint64_t magic;
    const unsigned char *base;
    uint64_t inner, outer, row_bytes;
    uint32_t box_inner, box_outer;
};
static const uint64_t TMAP_MAGIC = 0x70616d74756d65ull; // "emutmap"
struct TmaLoad {                                        // a TMA load issued and not yet landed (deferred mode)
    unsigned char *dst;
    EmuTmap map;
    int c0, c1;
    uint32_t bar_off;
};
static std::vector<TmaLoad> g_tma;
static void wg_exit_check(int t);

void *dyn_smem() { return g_smem; }

static void fiber_entry();
static void to_scheduler() { // from the running fiber g_cur
#ifdef EMU_FAST_SWITCH
    emu_switch(&g_cur->ctx.sp, g_sched.sp);
#else
    swapcontext(&g_cur->ctx.uc, &g_sched.uc);
#endif
}
static void to_fiber(Fiber *f) {
#ifdef EMU_FAST_SWITCH
    emu_switch(&g_sched.sp, f->ctx.sp);
#else
    swapcontext(&g_sched.uc, &f->ctx.uc);
#endif
}
#ifdef EMU_FAST_SWITCH
[[noreturn]] static void fiber_start() {
    fiber_entry();
    emu_die("a finished fiber was resumed");
}
#endif
// Sets f up to start in fiber_entry on `stack` at its first to_fiber.
static void fiber_init(Fiber *f, char *stack) {
#ifdef EMU_FAST_SWITCH
    uintptr_t top = ((uintptr_t)stack + STACK_BYTES) & ~(uintptr_t)15;
    void **slot = (void **)(top - 16); // fiber_start's "return address" slot (16-aligned: rsp = 8 mod 16 at entry)
    slot[1] = NULL;                    // a return address for fiber_start itself (never used)
    slot[0] = (void *)fiber_start;
    void **regs = slot - 7;           // control words, r15 r14 r13 r12 rbx rbp: popped in this order
    memset(regs, 0, 7 * sizeof(void *));
    uint32_t mxcsr;
    uint16_t fpucw;
    asm volatile("stmxcsr %0" : "=m"(mxcsr));
    asm volatile("fnstcw %0" : "=m"(fpucw));
    memcpy(regs, &mxcsr, 4);
    memcpy((char *)regs + 4, &fpucw, 2);
    f->ctx.sp = regs;
#else
    getcontext(&f->ctx.uc);
    f->ctx.uc.uc_stack.ss_sp = stack;
    f->ctx.uc.uc_stack.ss_size = STACK_BYTES;
    f->ctx.uc.uc_link = &g_sched.uc;
    makecontext(&f->ctx.uc, fiber_entry, 0);
#endif
}

static void fiber_entry() {
    (*g_body)();
    if (!g_cur->copies.empty())
        emu_die("%s block (%u,%u,%u) thread %u: exits with %zu cp.async copies never waited for", g_kernel,
                block_idx.x, block_idx.y, block_idx.z, g_cur->tid.x, g_cur->copies.size());
    wg_exit_check((int)(g_cur - g_fibers.data()));
    g_cur->st = DONE;
    to_scheduler(); // never resumed
}

void syncthreads() {
    g_cur->st = AT_BAR;
    to_scheduler();
}

static bool in_dyn_smem(const void *p, size_t bytes) {
    const unsigned char *c = (const unsigned char *)p;
    return c >= g_smem && c + bytes <= g_smem + g_smem_bytes;
}

static void warp_collective(WarpFn fn, void *data) {
    g_cur->coll_fn = fn;
    g_cur->coll_data = data;
    g_cur->st = AT_COLL;
    to_scheduler();
}

static void syncwarp_fn(void *const[32]) {}
void syncwarp() { warp_collective(syncwarp_fn, NULL); }

struct LdsmLane {
    const uint16_t *addr;
    uint32_t r[4];
    int nmat, trans;
};
static void ldmatrix_fn(void *const lanes[32]) {
    LdsmLane *L[32];
    for (int l = 0; l < 32; l++) L[l] = (LdsmLane *)lanes[l];
    const int nmat = L[0]->nmat, trans = L[0]->trans;
    for (int l = 0; l < 32; l++)
        if (L[l]->nmat != nmat || L[l]->trans != trans) emu_die("%s: lanes of one warp at different ldmatrix forms", g_kernel);
    for (int l = 0; l < 8 * nmat; l++) {
        if ((uintptr_t)L[l]->addr & 15) emu_die("%s: ldmatrix row address of lane %d not 16-byte aligned", g_kernel, l);
        if (!in_dyn_smem(L[l]->addr, 16))
            emu_die("%s: ldmatrix row address of lane %d outside the %zu bytes of dynamic shared memory", g_kernel, l,
                    g_smem_bytes);
    }
    for (int l = 0; l < 32; l++) {
        const int g = l >> 2, t = l & 3;
        for (int m = 0; m < nmat; m++) {
            uint16_t lo, hi;
            if (!trans) { // this lane: row g, columns 2t, 2t+1 of matrix m
                lo = L[8 * m + g]->addr[2 * t];
                hi = L[8 * m + g]->addr[2 * t + 1];
            } else { // transposed: rows 2t, 2t+1, column g
                lo = L[8 * m + 2 * t]->addr[g];
                hi = L[8 * m + 2 * t + 1]->addr[g];
            }
            L[l]->r[m] = (uint32_t)lo | ((uint32_t)hi << 16);
        }
    }
}
void ldmatrix(uint32_t *r, int nmat, bool trans, const void *row_addr) {
    if (nmat != 1 && nmat != 2 && nmat != 4) emu_die("%s: ldmatrix .x%d", g_kernel, nmat);
    LdsmLane me = {(const uint16_t *)row_addr, {0, 0, 0, 0}, nmat, trans ? 1 : 0};
    warp_collective(ldmatrix_fn, &me);
    for (int m = 0; m < nmat; m++) r[m] = me.r[m];
}

static float bf16_bits_to_float(uint32_t half) {
    uint32_t u = half << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
struct MmaLane {
    float d[4];
    uint32_t a[4], b[2];
};
static void mma_fn(void *const lanes[32]) {
    double A[16][16], B[16][8], C[16][8];
    for (int l = 0; l < 32; l++) {
        const MmaLane *m = (const MmaLane *)lanes[l];
        const int g = l >> 2, t = l & 3;
        for (int x = 0; x < 2; x++) {
            A[g][2 * t + x] = bf16_bits_to_float(m->a[0] >> (16 * x) & 0xffff);
            A[g + 8][2 * t + x] = bf16_bits_to_float(m->a[1] >> (16 * x) & 0xffff);
            A[g][8 + 2 * t + x] = bf16_bits_to_float(m->a[2] >> (16 * x) & 0xffff);
            A[g + 8][8 + 2 * t + x] = bf16_bits_to_float(m->a[3] >> (16 * x) & 0xffff);
            B[2 * t + x][g] = bf16_bits_to_float(m->b[0] >> (16 * x) & 0xffff);
            B[8 + 2 * t + x][g] = bf16_bits_to_float(m->b[1] >> (16 * x) & 0xffff);
            C[g][2 * t + x] = m->d[x];
            C[g + 8][2 * t + x] = m->d[2 + x];
        }
    }
    for (int l = 0; l < 32; l++) {
        MmaLane *m = (MmaLane *)lanes[l];
        const int g = l >> 2, t = l & 3;
        for (int h = 0; h < 2; h++)
            for (int x = 0; x < 2; x++) {
                const int row = g + 8 * h, col = 2 * t + x;
                double s = C[row][col];
                for (int k = 0; k < 16; k++) s += A[row][k] * B[k][col];
                m->d[2 * h + x] = (float)s;
            }
    }
}
void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    MmaLane me = {{d[0], d[1], d[2], d[3]}, {a[0], a[1], a[2], a[3]}, {b0, b1}};
    warp_collective(mma_fn, &me);
    for (int x = 0; x < 4; x++) d[x] = me.d[x];
}

void cp_async(void *dst, const void *src, int bytes) {
    if (bytes != 16 && bytes != 4) emu_die("%s: cp.async of %d bytes", g_kernel, bytes);
    if (((uintptr_t)dst | (uintptr_t)src) & (uintptr_t)(bytes - 1))
        emu_die("%s: cp.async of %d bytes with a misaligned address (dst %p, src %p)", g_kernel, bytes, dst, src);
    if (!in_dyn_smem(dst, bytes))
        emu_die("%s: cp.async destination outside the %zu bytes of dynamic shared memory", g_kernel, g_smem_bytes);
    if (g_cp_eager)
        memcpy(dst, src, bytes);
    else
        g_cur->copies.push_back(AsyncCopy{dst, src, bytes, g_cur->commits});
}
void cp_async_commit() { g_cur->commits++; }
void cp_async_wait(int newest_pending) {
    std::vector<AsyncCopy> &q = g_cur->copies;
    size_t keep = 0;
    for (size_t x = 0; x < q.size(); x++) {
        if (q[x].group < g_cur->commits - newest_pending)
            memcpy(q[x].dst, q[x].src, q[x].bytes);
        else
            q[keep++] = q[x];
    }
    q.resize(keep);
}

// ---------------------------------------------------------------------------------------------------
// sm_90: shared-space addresses, mbarriers, TMA loads and wgmma (cuda/hopper.cuh states the semantics)

// Shared address of dynamic shared memory's first byte: not a multiple of 1024 (on hardware the reserved bytes and
// static shared memory come first), so a kernel has to align its swizzled tiles itself.
static const uint32_t SMEM_BASE = 0x210;
static const uint32_t SMEM_LIMIT = 1u << 18; // a descriptor holds 14 bits of address >> 4

// "kernel block (x,y,z) thread t" for messages; while the scheduler lands TMA loads no thread runs.
static const char *who() {
    static char buf[256];
    if (g_cur)
        snprintf(buf, sizeof buf, "%s block (%u,%u,%u) thread %d", g_kernel, block_idx.x, block_idx.y, block_idx.z,
                 (int)(g_cur - g_fibers.data()));
    else
        snprintf(buf, sizeof buf, "%s block (%u,%u,%u) (a TMA load landing)", g_kernel, block_idx.x, block_idx.y,
                 block_idx.z);
    return buf;
}

uint32_t smem_addr(const void *p) {
    const unsigned char *c = (const unsigned char *)p;
    if (c < g_smem || c >= g_smem + g_smem_bytes)
        emu_die("%s: shared address of %p, outside the block's %zu bytes of dynamic shared memory (tiles and "
                "mbarriers must live there)",
                who(), p, g_smem_bytes);
    const size_t a = (size_t)(c - g_smem) + SMEM_BASE;
    if (a >= SMEM_LIMIT) emu_die("%s: shared address 0x%zx past the 256 KB a wgmma descriptor can address", who(), a);
    return (uint32_t)a;
}

// ---- mbarriers: the state lives in g_mbars; the barrier's own 8 bytes hold a token checked at every use, so a
// kernel that writes over a live barrier (a tile overlapping it) is caught.
static uint64_t mbar_token(uint32_t off) { return 0x6d62617200000000ull | off; } // "mbar" + offset
static MBar *mbar_find(uint32_t off) {
    for (MBar &m : g_mbars)
        if (m.off == off) return &m;
    return NULL;
}
static uint32_t mbar_offset(const uint64_t *bar, const char *op) {
    if (!in_dyn_smem(bar, 8) || ((uintptr_t)bar & 7))
        emu_die("%s: %s on %p: an mbarrier must be 8-byte aligned in dynamic shared memory", who(), op,
                (const void *)bar);
    return (uint32_t)((const unsigned char *)bar - g_smem);
}
static MBar *mbar_get(const uint64_t *bar, const char *op) {
    const uint32_t off = mbar_offset(bar, op);
    MBar *m = mbar_find(off);
    if (!m) emu_die("%s: %s on the mbarrier at shared 0x%x before its mbar_init", who(), op, off + SMEM_BASE);
    if (*bar != mbar_token(off))
        emu_die("%s: %s: the mbarrier at shared 0x%x was overwritten after its mbar_init", who(), op, off + SMEM_BASE);
    return m;
}
// Completes the phase once every arrival is in and every announced byte has landed; wakes its waiters.
static void mbar_progress(MBar *m) {
    if (m->tx <= -(1l << 20) || m->tx >= (1l << 20))
        emu_die("%s: the mbarrier at shared 0x%x has %ld transaction bytes pending (the hardware's count is 20 bits)",
                who(), m->off + SMEM_BASE, m->tx);
    if (m->pending || m->tx) return;
    m->phase ^= 1, m->completed++, m->pending = m->count;
    for (int t = 0; t < g_nt; t++) {
        Fiber &f = g_fibers[t];
        if (f.st == AT_MBAR && f.mbar_off == m->off && f.mbar_parity != m->phase) f.st = RUNNABLE;
    }
}
static void mbar_arrival(MBar *m, const char *op) {
    if (m->pending <= 0) // all arrivals in, bytes still missing: this one belongs to no phase
        emu_die("%s: %s: more than the %d arrivals of the mbarrier at shared 0x%x in one phase", who(), op, m->count,
                m->off + SMEM_BASE);
    m->pending--;
    mbar_progress(m);
}

void mbar_init(uint64_t *bar, unsigned count) {
    const uint32_t off = mbar_offset(bar, "mbar_init");
    if (count < 1 || count >= (1u << 20)) emu_die("%s: mbar_init with an arrival count of %u", who(), count);
    for (int t = 0; t < g_nt; t++)
        if (g_fibers[t].st == AT_MBAR && g_fibers[t].mbar_off == off)
            emu_die("%s: mbar_init of the mbarrier at shared 0x%x while thread %d waits on it", who(), off + SMEM_BASE, t);
    MBar *m = mbar_find(off);
    if (!m) g_mbars.push_back(MBar{}), m = &g_mbars.back();
    *m = MBar{off, (int)count, (int)count, 0, 0, 0};
    *bar = mbar_token(off);
}
void mbar_arrive_expect_tx(uint64_t *bar, unsigned bytes) {
    MBar *m = mbar_get(bar, "mbar_arrive_expect_tx");
    m->tx += bytes;
    mbar_arrival(m, "mbar_arrive_expect_tx");
}
void mbar_arrive(uint64_t *bar) { mbar_arrival(mbar_get(bar, "mbar_arrive"), "mbar_arrive"); }
void mbar_wait(uint64_t *bar, unsigned parity) {
    MBar *m = mbar_get(bar, "mbar_wait");
    if (parity > 1) emu_die("%s: mbar_wait with parity %u (0 or 1)", who(), parity);
    if (m->phase != parity) return; // the phase of that parity has completed
    g_cur->mbar_off = m->off;
    g_cur->mbar_parity = parity;
    g_cur->st = AT_MBAR; // until mbar_progress completes the phase
    to_scheduler();
}

// ---- TMA
// The 128-byte swizzle of the shared address a (bits 4-6 ^= bits 7-9).
static uint32_t swz128(uint32_t a) { return a ^ (((a >> 7) & 7) << 4); }

void tmap_encode_2d(void *map, const void *base, uint64_t inner, uint64_t outer, uint64_t row_bytes,
                    uint32_t box_inner, uint32_t box_outer) {
    static_assert(sizeof(EmuTmap) <= 128, "a CUtensorMap has 128 opaque bytes");
    if (((uintptr_t)map & 63) || ((uintptr_t)base & 15) || row_bytes % 16 || box_inner * 2 != 128 || box_outer < 1 ||
        box_outer > 256 || inner < 1 || outer < 1 || inner >= (1ull << 32) || outer >= (1ull << 32) ||
        (outer > 1 && row_bytes < inner * 2))
        emu_die("tmap_encode_2d: map %p (64-byte aligned?), base %p (16-byte aligned?), a [%llu x %llu] bf16 tensor, "
                "row stride %llu bytes (a multiple of 16, at least a row?), box %u x %u (64 wide, 1 to 256 rows?)",
                map, base, (unsigned long long)outer, (unsigned long long)inner, (unsigned long long)row_bytes,
                box_inner, box_outer);
    const EmuTmap t = {TMAP_MAGIC, (const unsigned char *)base, inner, outer, row_bytes, box_inner, box_outer};
    memset(map, 0, 128);
    memcpy(map, &t, sizeof t);
}
// Writes the box (zeros outside the tensor), swizzled, and counts its bytes on the barrier.
static void tma_land(const TmaLoad &L) {
    const EmuTmap &t = L.map;
    const uint32_t a0 = SMEM_BASE + (uint32_t)(L.dst - g_smem);
    for (uint32_t rr = 0; rr < t.box_outer; rr++)
        for (uint32_t cc = 0; cc < t.box_inner; cc++) {
            const int64_t row = (int64_t)L.c1 + rr, col = (int64_t)L.c0 + cc;
            uint16_t v = 0;
            if (row >= 0 && row < (int64_t)t.outer && col >= 0 && col < (int64_t)t.inner)
                memcpy(&v, t.base + (size_t)row * t.row_bytes + 2 * (size_t)col, 2);
            memcpy(g_smem + (swz128(a0 + rr * 128 + 2 * cc) - SMEM_BASE), &v, 2);
        }
    MBar *m = mbar_get((const uint64_t *)(g_smem + L.bar_off), "a TMA load's completion");
    m->tx -= (long)t.box_inner * t.box_outer * 2;
    mbar_progress(m);
}
static void tma_land_all() { // from the scheduler, in issue order
    Fiber *cur = g_cur;
    g_cur = NULL;
    std::vector<TmaLoad> q;
    q.swap(g_tma);
    for (const TmaLoad &L : q) tma_land(L);
    g_cur = cur;
}
void tma_load_2d(void *dst, const void *map, int c0, int c1, uint64_t *bar) {
    TmaLoad L;
    memcpy(&L.map, map, sizeof L.map);
    if (L.map.magic != TMAP_MAGIC) emu_die("%s: tma_load_2d with a tensor map not made by tmap_encode_2d", who());
    const uint32_t a = smem_addr(dst);
    if (a % 1024)
        emu_die("%s: tma_load_2d into shared 0x%x: not 1024-byte aligned (the 128-byte swizzle is a function of the "
                "address)",
                who(), a);
    if (!in_dyn_smem(dst, (size_t)L.map.box_outer * 128))
        emu_die("%s: tma_load_2d box of %u rows at shared 0x%x runs past the %zu bytes of dynamic shared memory", who(),
                L.map.box_outer, a, g_smem_bytes);
    mbar_get(bar, "tma_load_2d");
    L.dst = (unsigned char *)dst, L.c0 = c0, L.c1 = c1, L.bar_off = (uint32_t)((unsigned char *)bar - g_smem);
    if (g_cp_eager)
        tma_land(L);
    else
        g_tma.push_back(L); // lands when no thread can run on without it (run_block)
}

// ---- wgmma: warpgroup instructions. Each thread parks its operands; the last of the 128 to arrive lets
// release_warpgroup run the instruction once for all.
struct WgThread {
    float *d;
    int n;
    uint64_t da, db;
    int scale_d, keep;
};
static void wg_collective(WgFn fn, const char *name, WgThread *me) {
    const int t = (int)(g_cur - g_fibers.data());
    if ((t / 128 + 1) * 128 > g_nt)
        emu_die("%s: %s in a block of %d threads: thread %d's warpgroup is incomplete", who(), name, g_nt, t);
    g_cur->wg_fn = fn;
    g_cur->wg_name = name;
    g_cur->coll_data = me;
    g_cur->st = AT_WGCOLL;
    to_scheduler();
}

// The tile's start address, checked: 128-byte swizzle, 8-row groups 1024 bytes apart, a 1024-byte aligned tile
// plus a k16 step of 0, 32, 64 or 96 bytes.
static uint32_t desc_start(uint64_t desc, int wg, const char *which) {
    const uint32_t start = (uint32_t)(desc & 0x3FFF) << 4, stride = (uint32_t)((desc >> 32) & 0x3FFF) << 4;
    const unsigned layout = (unsigned)(desc >> 62), base_off = (unsigned)(desc >> 49) & 7;
    if (layout != 1 || stride != 1024 || base_off)
        emu_die("%s block (%u,%u,%u) warpgroup %d: wgmma %s descriptor 0x%016llx has layout type %u, stride byte "
                "offset %u, base offset %u; emulated: the 128-byte swizzle (1), 1024, 0",
                g_kernel, block_idx.x, block_idx.y, block_idx.z, wg, which, (unsigned long long)desc, layout, stride,
                base_off);
    if (start % 32 || start % 1024 >= 128)
        emu_die("%s block (%u,%u,%u) warpgroup %d: wgmma %s descriptor starts at shared 0x%x: tile not 1024-byte "
                "aligned (or a k step not a multiple of 32 bytes)",
                g_kernel, block_idx.x, block_idx.y, block_idx.z, wg, which, start);
    return start;
}
// rows x 16 bf16 of an operand from shared memory as it is now.
static void desc_load(double (*X)[16], int rows, uint64_t desc, int wg, const char *which) {
    const uint32_t start = desc_start(desc, wg, which);
    for (int r = 0; r < rows; r++)
        for (int k = 0; k < 16; k++) {
            const uint32_t a = swz128(start + (r / 8) * 1024 + (r % 8) * 128 + 2 * k);
            if (a < SMEM_BASE || a + 2 - SMEM_BASE > g_smem_bytes)
                emu_die("%s block (%u,%u,%u) warpgroup %d: wgmma %s row %d reads shared 0x%x, outside the dynamic "
                        "shared memory window [0x%x, 0x%zx)",
                        g_kernel, block_idx.x, block_idx.y, block_idx.z, wg, which, r, a, SMEM_BASE,
                        SMEM_BASE + g_smem_bytes);
            uint16_t h;
            memcpy(&h, g_smem + (a - SMEM_BASE), 2);
            X[r][k] = bf16_bits_to_float(h);
        }
}
// D[64 x n] = (scale_d ? D : 0) + A B^T: products exact, sums in double, one fp32 rounding (as mma_fn).
static void wgmma_perform(const WgOp &op, int wg) {
    static double A[64][16], B[256][16];
    desc_load(A, 64, op.da, wg, "A");
    desc_load(B, op.n, op.db, wg, "B");
    for (int t = 0; t < 128; t++) {
        const int w = t / 32, l = t % 32;
        float *d = op.d[t];
        for (int j = 0; j < op.n / 8; j++)
            for (int i = 0; i < 4; i++) {
                const int row = 16 * w + l / 4 + 8 * (i / 2), col = 8 * j + 2 * (l % 4) + i % 2;
                double s = op.scale_d ? d[4 * j + i] : 0.0;
                for (int k = 0; k < 16; k++) s += A[row][k] * B[col][k];
                d[4 * j + i] = (float)s;
            }
    }
}
static void wgfence_fn(int, void *const[128]) {}
static void wgcommit_fn(int wg, void *const[128]) { g_wgs[wg].commits++; }
static void wgwait_fn(int wg, void *const th[128]) {
    const int keep = ((const WgThread *)th[0])->keep;
    for (int t = 1; t < 128; t++)
        if (((const WgThread *)th[t])->keep != keep)
            emu_die("%s block (%u,%u,%u) warpgroup %d: wgmma_wait with different counts (%d, %d)", g_kernel,
                    block_idx.x, block_idx.y, block_idx.z, wg, keep, ((const WgThread *)th[t])->keep);
    Warpgroup &W = g_wgs[wg];
    size_t k = 0;
    for (size_t x = 0; x < W.ops.size(); x++) {
        if (W.ops[x].group < W.commits - keep)
            wgmma_perform(W.ops[x], wg);
        else
            W.ops[k++] = W.ops[x];
    }
    W.ops.resize(k);
}
static void wgmma_fn(int wg, void *const th[128]) {
    const WgThread *t0 = (const WgThread *)th[0];
    WgOp op;
    op.n = t0->n, op.da = t0->da, op.db = t0->db, op.scale_d = t0->scale_d, op.group = g_wgs[wg].commits;
    for (int t = 0; t < 128; t++) {
        const WgThread *m = (const WgThread *)th[t];
        if (m->n != op.n || m->da != op.da || m->db != op.db || (m->scale_d != 0) != (op.scale_d != 0))
            emu_die("%s block (%u,%u,%u) warpgroup %d: wgmma with different shapes, descriptors or scale-d across the "
                    "warpgroup (thread %d)",
                    g_kernel, block_idx.x, block_idx.y, block_idx.z, wg, t);
        op.d[t] = m->d;
    }
    desc_start(op.da, wg, "A"), desc_start(op.db, wg, "B"); // malformed descriptors fail at issue
    g_wgs[wg].ops.push_back(op);
}
void wgmma_fence() {
    WgThread me = {};
    wg_collective(wgfence_fn, "wgmma_fence", &me);
}
void wgmma_commit() {
    WgThread me = {};
    wg_collective(wgcommit_fn, "wgmma_commit", &me);
}
void wgmma_wait(int newest_pending) {
    if (newest_pending < 0 || newest_pending > 7) emu_die("%s: wgmma_wait(%d)", who(), newest_pending);
    WgThread me = {};
    me.keep = newest_pending;
    wg_collective(wgwait_fn, "wgmma_wait", &me);
}
void wgmma_bf16(float *d, int n, uint64_t desc_a, uint64_t desc_b, int scale_d) {
    if (n < 8 || n > 256 || n % 8) emu_die("%s: wgmma m64n%dk16", who(), n);
    WgThread me = {d, n, desc_a, desc_b, scale_d, 0};
    wg_collective(wgmma_fn, "wgmma_bf16", &me);
}
static void wg_exit_check(int t) {
    if (t / 128 >= (int)g_wgs.size()) return;
    const Warpgroup &W = g_wgs[t / 128];
    if (W.ops.empty()) return;
    size_t open = 0;
    for (const WgOp &op : W.ops) open += op.group == W.commits;
    emu_die("%s: exits with %zu wgmma of its warpgroup not retired (%zu of them never committed): each needs "
            "wgmma_commit and a wgmma_wait that retires its group",
            who(), W.ops.size(), open);
}

// Releases warpgroup wg if all 128 of its threads wait at a warpgroup instruction: performs it and makes them
// runnable. Returns whether it did.
static bool release_warpgroup(const char *name, int wg) {
    Fiber *F = &g_fibers[128 * wg];
    for (int t = 0; t < 128; t++)
        if (F[t].st != AT_WGCOLL) return false;
    void *data[128];
    for (int t = 0; t < 128; t++) {
        if (F[t].wg_fn != F[0].wg_fn)
            emu_die("%s block (%u,%u,%u) warpgroup %d: threads at different warpgroup instructions (thread %d at %s, "
                    "thread %d at %s)",
                    name, block_idx.x, block_idx.y, block_idx.z, wg, 128 * wg, F[0].wg_name, 128 * wg + t,
                    F[t].wg_name);
        data[t] = F[t].coll_data;
    }
    F[0].wg_fn(wg, data);
    for (int t = 0; t < 128; t++) F[t].st = RUNNABLE;
    return true;
}

uint64_t shfl_xor(uint64_t v, int lane_mask) {
    g_cur->shfl_val = v;
    g_cur->shfl_mask = lane_mask;
    g_cur->st = AT_SHFL;
    to_scheduler();
    return g_cur->shfl_res;
}

// Releases warp w if all 32 of its lanes wait at the same warp-level instruction (a collective or a
// shuffle): performs it and makes the lanes runnable. Returns whether it did.
static bool release_warp(const char *name, int nt, int w) {
    const int l0 = w * 32, n = nt - l0 < 32 ? nt - l0 : 32;
    int at_coll = 0, at_shfl = 0;
    for (int l = 0; l < n; l++) {
        at_coll += g_fibers[l0 + l].st == AT_COLL;
        at_shfl += g_fibers[l0 + l].st == AT_SHFL;
    }
    if (at_coll == 32) {
        void *data[32];
        for (int l = 0; l < 32; l++) {
            if (g_fibers[l0 + l].coll_fn != g_fibers[l0].coll_fn)
                emu_die("%s block (%u,%u,%u) warp %d: lanes at different warp-collective instructions", name,
                        block_idx.x, block_idx.y, block_idx.z, w);
            data[l] = g_fibers[l0 + l].coll_data;
        }
        g_fibers[l0].coll_fn(data);
    } else if (at_shfl == 32) {
        for (int l = 0; l < 32; l++) {
            int src = l ^ g_fibers[l0 + l].shfl_mask;
            if (src < 0 || src >= 32) emu_die("%s: shuffle lane mask %d out of range", name, g_fibers[l0 + l].shfl_mask);
            g_fibers[l0 + l].shfl_res = g_fibers[l0 + src].shfl_val;
        }
    } else {
        return false; // partial: a deadlock unless other lanes still run
    }
    for (int l = 0; l < 32; l++) g_fibers[l0 + l].st = RUNNABLE;
    return true;
}

// What thread t waits for, for the deadlock report.
static std::string wait_desc(int t) {
    const Fiber &f = g_fibers[t];
    char b[320];
    switch (f.st) {
    case AT_BAR: return "__syncthreads";
    case AT_SHFL: return "a warp shuffle";
    case AT_COLL: return "a warp collective (__syncwarp, ldmatrix, mma)";
    case AT_WGCOLL: snprintf(b, sizeof b, "%s (all 128 threads of warpgroup %d)", f.wg_name, t / 128); return b;
    case AT_MBAR: {
        const MBar *m = mbar_find(f.mbar_off);
        snprintf(b, sizeof b,
                 "mbar_wait parity %u on the mbarrier at shared 0x%x (%ld phases completed; the current one misses %d "
                 "of %d arrivals and %ld transaction bytes)",
                 f.mbar_parity, f.mbar_off + SMEM_BASE, m ? m->completed : -1, m ? m->pending : -1, m ? m->count : -1,
                 m ? m->tx : -1);
        return b;
    }
    case DONE: return "exited";
    default: return "runnable";
    }
}
[[noreturn]] static void deadlock(const char *name, int nt, int live) {
    int n[DONE + 1] = {0};
    std::string who;
    int lines = 0;
    for (int t = 0; t < nt;) { // runs of consecutive threads waiting for the same thing
        const std::string d = wait_desc(t);
        int u = t + 1;
        while (u < nt && wait_desc(u) == d) u++;
        for (int x = t; x < u; x++) n[g_fibers[x].st]++;
        if (lines++ < 24) who += "\n  threads " + std::to_string(t) + "-" + std::to_string(u - 1) + ": " + d;
        t = u;
    }
    emu_die("%s block (%u,%u,%u): deadlock: %d threads live, %d at __syncthreads, %d at a warp shuffle, %d at "
            "another warp collective, %d at a warpgroup instruction, %d at an mbarrier (a barrier, warp or warpgroup "
            "instruction not reached by every thread, or an mbarrier phase that cannot complete):%s",
            name, block_idx.x, block_idx.y, block_idx.z, live, n[AT_BAR], n[AT_SHFL], n[AT_COLL], n[AT_WGCOLL],
            n[AT_MBAR], who.c_str());
}

// Warp-serial schedule: each warp runs as far as it can (to __syncthreads or its end, its warp-level
// instructions performed as soon as all its lanes reach them) before the next warp starts, warps and
// lanes in order or reversed. Between two barriers one warp thus finishes before another begins, the
// largest skew the hardware allows: a read of shared memory that another warp writes without a barrier
// in between sees the NaN fill or stale data in one of the two orders. After each sweep: warpgroup
// instructions that all 128 threads reached are performed; threads woken by an mbarrier phase (or a
// warpgroup instruction) run in another sweep; a __syncthreads that every live thread reached is released;
// only when none of that applies do the deferred TMA loads land; else the block is deadlocked.
static void run_block(const char *name, int nt, bool reverse) {
    const int nw = (nt + 31) / 32;
    for (;;) {
        for (int wi = 0; wi < nw; wi++) {
            const int w = reverse ? nw - 1 - wi : wi, l0 = w * 32, n = nt - l0 < 32 ? nt - l0 : 32;
            do {
                for (int x = 0; x < n; x++) {
                    Fiber *f = &g_fibers[l0 + (reverse ? n - 1 - x : x)];
                    if (f->st != RUNNABLE) continue;
                    g_cur = f;
                    cur_tid = &f->tid;
                    to_fiber(f);
                }
            } while (release_warp(name, nt, w));
        }
        // warpgroup instructions all of whose 128 threads arrived in the sweep
        for (int gi = 0; gi < nt / 128; gi++) release_warpgroup(name, reverse ? nt / 128 - 1 - gi : gi);
        int live = 0, at_bar = 0, runnable = 0;
        for (int t = 0; t < nt; t++) {
            live += g_fibers[t].st != DONE;
            at_bar += g_fibers[t].st == AT_BAR;
            runnable += g_fibers[t].st == RUNNABLE;
        }
        if (runnable) continue; // woken by a completed mbarrier phase or a warpgroup instruction: another sweep
        if (!live) {
            if (!g_tma.empty())
                emu_die("%s block (%u,%u,%u): exits with %zu TMA loads in flight (their mbarrier never waited on)",
                        name, block_idx.x, block_idx.y, block_idx.z, g_tma.size());
            return;
        }
        if (at_bar == live) {
            for (int t = 0; t < nt; t++)
                if (g_fibers[t].st == AT_BAR) g_fibers[t].st = RUNNABLE;
            continue;
        }
        if (!g_tma.empty()) { // the latest a TMA load can land: a read of its box before the wait sees the NaN fill
            tma_land_all();
            continue;
        }
        deadlock(name, nt, live);
    }
}

// EMU_COUNT_KERNEL=name: how many launches had that name, printed at exit (emu_check.sh asserts that a routed op
// really ran the kernel it routes to, not a fallback)
static const char *g_count_name;
static long g_count_hits;
static void print_count() { fprintf(stderr, "cuda emu: %ld launches of %s\n", g_count_hits, g_count_name); }
static void count_launch(const char *name) {
    static bool init;
    if (!init) {
        init = true;
        g_count_name = getenv("EMU_COUNT_KERNEL");
        if (g_count_name) atexit(print_count);
    }
    if (g_count_name && !strcmp(name, g_count_name)) g_count_hits++;
}

void launch(const char *name, dim3 grid, dim3 block, size_t smem, const std::function<void()> &body) {
    const int nt = (int)(block.x * block.y * block.z);
    const char *order = getenv("EMU_ORDER");
    const bool reverse = order && !strcmp(order, "reverse");
    const char *cp = getenv("EMU_CP_ASYNC");
    g_cp_eager = cp ? !strcmp(cp, "eager") : reverse;
    g_launches++;
    count_launch(name);
    while ((int)g_fibers.size() < nt) {
        g_fibers.emplace_back();
        g_stacks.push_back((char *)malloc(STACK_BYTES));
    }
    if (smem + GUARD > g_smem_cap) {
        free(g_smem);
        g_smem_cap = smem + GUARD;
        g_smem = (unsigned char *)malloc(g_smem_cap);
    }
    g_body = &body;
    g_kernel = name;
    g_smem_bytes = smem;
    block_dim = block;
    grid_dim = grid;
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) {
                block_idx = make_uint3(bx, by, bz);
                memset(g_smem, 0xff, smem);         // NaN: reads of unwritten shared memory show up
                memset(g_smem + smem, 0xa5, GUARD); // overrun guard
                g_nt = nt;
                g_mbars.clear();
                g_wgs.assign(nt / 128, Warpgroup{});
                g_tma.clear();
                for (int t = 0; t < nt; t++) {
                    Fiber *f = &g_fibers[t];
                    f->tid = make_uint3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y));
                    f->st = RUNNABLE;
                    f->copies.clear();
                    f->commits = 0;
                    f->wg_fn = NULL;
                    fiber_init(f, g_stacks[t]);
                }
                run_block(name, nt, reverse);
                for (size_t x = 0; x < GUARD; x++)
                    if (g_smem[smem + x] != 0xa5)
                        emu_die("%s block (%u,%u,%u): wrote past its %zu bytes of dynamic shared memory", name, bx, by,
                                bz, smem);
            }
}
} // namespace emu

// ---------------------------------------------------------------------------------------------------
// CUDA runtime subset (host memory)

static cudaError_t g_last_error = cudaSuccess;

extern "C" {
const char *cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "emulated CUDA error"; }
cudaError_t cudaGetLastError(void) {
    cudaError_t e = g_last_error;
    g_last_error = cudaSuccess;
    return e;
}
cudaError_t cudaGetDeviceCount(int *n) {
    *n = 1;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : cudaErrorInvalidDevice; }
cudaError_t cudaGetDevice(int *d) {
    *d = 0;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int) {
    memset(p, 0, sizeof *p);
    strcpy(p->name, "emulated sm_90 (CPU)");
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 132;
    p->sharedMemPerBlockOptin = 232448;
    return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int) {
    *s = (cudaStream_t)0x1;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
cudaError_t cudaMalloc(void **p, size_t n) {
    *p = malloc(n ? n : 1);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void *p) {
    free(p);
    return cudaSuccess;
}
cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t) {
    *p = malloc(n ? n : 1);
    if (*p) memset(*p, 0xff, n); // scratch starts as NaN, so a kernel that reads before writing shows it
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFreeAsync(void *p, cudaStream_t) {
    free(p);
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t *fr, size_t *tot) {
    *fr = 0, *tot = 0;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int) {
    *pool = (cudaMemPool_t)0x1;
    return cudaSuccess;
}
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t, enum cudaMemPoolAttr, void *) { return cudaSuccess; }
cudaError_t cudaMemPoolTrimTo(cudaMemPool_t, size_t) { return cudaSuccess; }
cudaError_t cudaHostAlloc(void **p, size_t n, unsigned int) {
    *p = calloc(1, n);
    return cudaSuccess;
}
cudaError_t cudaHostGetDevicePointer(void **d, void *h, unsigned int) {
    *d = h;
    return cudaSuccess;
}
cudaError_t cudaMemset(void *p, int v, size_t n) {
    memset(p, v, n);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t) {
    memset(p, v, n);
    return cudaSuccess;
}
cudaError_t cudaMemset2DAsync(void *p, size_t pitch, int v, size_t width, size_t height, cudaStream_t) {
    for (size_t r = 0; r < height; r++) memset((char *)p + r * pitch, v, width);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind, cudaStream_t) {
    memmove(dst, src, n);
    return cudaSuccess;
}
// Blocks per multiprocessor by shared memory (228 KB per SM, 1 KB reserved per block) and threads
// (2048 per SM), as an sm_90 would allow without counting registers.
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, const void *, int threads, size_t smem) {
    int by_smem = (int)(233472 / (smem + 1024)), by_threads = 2048 / (threads > 0 ? threads : 1);
    *n = by_smem < by_threads ? by_smem : by_threads;
    if (*n > 32) *n = 32;
    return cudaSuccess;
}
cudaError_t cudaFuncSetAttribute(const void *, enum cudaFuncAttribute, int value) {
    if (value > 232448) g_last_error = cudaErrorInvalidValue;
    return cudaSuccess;
}
}

// ---------------------------------------------------------------------------------------------------
// cuBLASLt subset: layouts are checked as cuBLASLt checks them, the product is a plain loop in double.

struct EmuDesc {
    int32_t transa, transb;
};
struct EmuLayout {
    cudaDataType_t type;
    uint64_t rows, cols;
    int64_t ld;
};
static_assert(sizeof(EmuDesc) <= sizeof(cublasLtMatmulDescOpaque_t), "desc");
static_assert(sizeof(EmuLayout) <= sizeof(cublasLtMatrixLayoutOpaque_t), "layout");

static EmuDesc *desc_of(cublasLtMatmulDesc_t d) { return (EmuDesc *)d->data; }
static EmuLayout *layout_of(cublasLtMatrixLayout_t l) { return (EmuLayout *)l->data; }

// Shapes of C = op(A) op(B) implied by the layouts; 0 when inconsistent.
static int shapes(cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                  long *m, long *n, long *k) {
    EmuDesc *ds = desc_of(d);
    EmuLayout *la = layout_of(a), *lb = layout_of(b), *lc = layout_of(c);
    *m = ds->transa ? la->cols : la->rows;
    *k = ds->transa ? la->rows : la->cols;
    long kb = ds->transb ? lb->cols : lb->rows;
    *n = ds->transb ? lb->rows : lb->cols;
    if (kb != *k || (long)lc->rows != *m || (long)lc->cols != *n) return 0;
    if (la->ld < (int64_t)la->rows || lb->ld < (int64_t)lb->rows || lc->ld < (int64_t)lc->rows) return 0;
    if (la->type != lb->type) return 0;
    if (lc->type != CUDA_R_32F && lc->type != la->type) return 0;
    return 1;
}

static double load_el(const void *p, cudaDataType_t t, size_t i) {
    if (t == CUDA_R_32F) return ((const float *)p)[i];
    return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
}
static void store_el(void *p, cudaDataType_t t, size_t i, float v) {
    if (t == CUDA_R_32F)
        ((float *)p)[i] = v;
    else
        ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
}

extern "C" {
const char *cublasLtGetStatusString(cublasStatus_t s) {
    return s == CUBLAS_STATUS_SUCCESS ? "success" : "emulated cuBLASLt error";
}
cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
    *h = (cublasLtHandle_t)0x1;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t ct, cudaDataType_t st) {
    if (ct != CUBLAS_COMPUTE_32F || st != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
    *d = (cublasLtMatmulDesc_t)calloc(1, sizeof(cublasLtMatmulDescOpaque_t));
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
    free(d);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t size) {
    if (size != sizeof(int32_t)) return CUBLAS_STATUS_INVALID_VALUE;
    int32_t v;
    memcpy(&v, buf, sizeof v);
    if (attr == CUBLASLT_MATMUL_DESC_TRANSA)
        desc_of(d)->transa = v == CUBLAS_OP_T;
    else if (attr == CUBLASLT_MATMUL_DESC_TRANSB)
        desc_of(d)->transb = v == CUBLAS_OP_T;
    else
        return CUBLAS_STATUS_NOT_SUPPORTED;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType type, uint64_t rows, uint64_t cols,
                                          int64_t ld) {
    *l = (cublasLtMatrixLayout_t)calloc(1, sizeof(cublasLtMatrixLayoutOpaque_t));
    *layout_of(*l) = EmuLayout{type, rows, cols, ld};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
    free(l);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
    *p = (cublasLtMatmulPreference_t)calloc(1, sizeof(cublasLtMatmulPreferenceOpaque_t));
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
    free(p);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t,
                                                    const void *, size_t) {
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                              cublasLtMatrixLayout_t dd, cublasLtMatmulPreference_t, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int *returned) {
    long m, n, k;
    if (requested < 1 || !shapes(d, a, b, c, &m, &n, &k) || memcmp(layout_of(c), layout_of(dd), sizeof(EmuLayout)))
        return CUBLAS_STATUS_INVALID_VALUE;
    memset(&results[0], 0, sizeof results[0]);
    results[0].state = CUBLAS_STATUS_SUCCESS;
    *returned = 1;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t d, const void *alpha, const void *A,
                              cublasLtMatrixLayout_t a, const void *B, cublasLtMatrixLayout_t b, const void *beta,
                              const void *C, cublasLtMatrixLayout_t c, void *D, cublasLtMatrixLayout_t dd,
                              const cublasLtMatmulAlgo_t *, void *, size_t, cudaStream_t) {
    long m, n, k;
    if (!shapes(d, a, b, c, &m, &n, &k) || memcmp(layout_of(c), layout_of(dd), sizeof(EmuLayout)))
        return CUBLAS_STATUS_INVALID_VALUE;
    const EmuDesc *ds = desc_of(d);
    const EmuLayout *la = layout_of(a), *lb = layout_of(b), *lc = layout_of(c);
    const float al = *(const float *)alpha, be = *(const float *)beta;
    std::vector<float> out((size_t)m * n);
    for (long j = 0; j < n; j++)
        for (long i = 0; i < m; i++) {
            double acc = 0;
            for (long kk = 0; kk < k; kk++) {
                size_t ia = ds->transa ? (size_t)kk + (size_t)i * la->ld : (size_t)i + (size_t)kk * la->ld;
                size_t ib = ds->transb ? (size_t)j + (size_t)kk * lb->ld : (size_t)kk + (size_t)j * lb->ld;
                acc += load_el(A, la->type, ia) * load_el(B, lb->type, ib);
            }
            double r = al * acc;
            if (be != 0.0f) r += be * load_el(C, lc->type, (size_t)i + (size_t)j * lc->ld);
            out[(size_t)j * m + i] = (float)r;
        }
    for (long j = 0; j < n; j++)
        for (long i = 0; i < m; i++) store_el(D, lc->type, (size_t)i + (size_t)j * lc->ld, out[(size_t)j * m + i]);
    return CUBLAS_STATUS_SUCCESS;
}

// legacy cuBLAS: the cublasGemmEx fallback, same semantics through the Lt path above
const char *cublasGetStatusString(cublasStatus_t s) { return cublasLtGetStatusString(s); }
cublasStatus_t cublasCreate_v2(cublasHandle_t *h) {
    *h = (cublasHandle_t)0x1;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream_v2(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta, void *C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t ct, cublasGemmAlgo_t) {
    if (ct != CUBLAS_COMPUTE_32F || Atype != Btype) return CUBLAS_STATUS_NOT_SUPPORTED;
    cublasLtMatmulDesc_t d;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    int32_t ta = transa, tb = transb;
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, 4);
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, 4);
    cublasLtMatrixLayoutCreate(&la, Atype, transa == CUBLAS_OP_T ? k : m, transa == CUBLAS_OP_T ? m : k, lda);
    cublasLtMatrixLayoutCreate(&lb, Btype, transb == CUBLAS_OP_T ? n : k, transb == CUBLAS_OP_T ? k : n, ldb);
    cublasLtMatrixLayoutCreate(&lc, Ctype, m, n, ldc);
    cublasStatus_t s = cublasLtMatmul(NULL, d, alpha, A, la, B, lb, beta, C, lc, C, lc, NULL, NULL, 0, NULL);
    cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb), cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(d);
    return s;
}
}
