// cuda_emu.cc: the CPU side of cuda/emu.cuh. A fiber scheduler that runs one kernel block at a time
// (one fiber per CUDA thread, switching only at __syncthreads, warp-level instructions (shuffles,
// __syncwarp, ldmatrix, mma), warpgroup instructions (wgmma) and mbarrier waits that must block), and the
// subset of the CUDA runtime and cuBLASLt that cuda/*.cu calls, implemented on host memory. Built and used
// only by tests/gpu/emu_check.sh. EMU_ORDER=reverse runs the warps of a block, and the lanes of a warp, in
// reverse order (a missing barrier then shows up in the other direction) and completes cp.async copies and
// TMA loads at issue (in order: cp.async at its wait, TMA only once no thread can run on without it).
// The sm_90 stand-ins (mbarriers, TMA loads, wgmma) are in emu_sm90.cc; what both files share is in
// emu_internal.h.
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

#include "emu_internal.h"

[[noreturn]] void emu_die(const char *fmt, ...) {
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

#ifdef EMU_FAST_SWITCH
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
#endif
static const size_t STACK_BYTES = 256 * 1024;
std::vector<Fiber> g_fibers;
static std::vector<char *> g_stacks;
static std::vector<char *> g_coop_stacks; // launch_coop's: one per thread of every block, kept for the next launch
static Context g_sched;
Fiber *g_cur;
static const std::function<void()> *g_body;
unsigned char *g_smem;
static size_t g_smem_cap;
size_t g_smem_bytes;
const char *g_kernel;
// cp.async completion: deferred to the wait_group that retires it (a read before the wait sees NaN), or
// eager, at issue (a prefetch that overwrites data other warps still read shows up). EMU_CP_ASYNC=
// deferred|eager; by default deferred when threads run in order and eager when reversed. TMA loads follow
// the same switch: deferred, they land only when no thread can run on without them (a read of the box
// before its mbarrier wait sees NaN); eager, at issue (a stage refilled before its wgmmas retire shows up).
bool g_cp_eager;
static const size_t GUARD = 256;
static long g_launches;

void *dyn_smem() { return g_smem; }

static void fiber_entry();
void to_scheduler() { // from the running fiber g_cur
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

static bool g_coop; // the running launch is cooperative (launch_coop)
void grid_sync() {
    if (!g_coop) emu_die("%s: grid_sync in a launch that is not cooperative (cu_launch_coop)", g_kernel);
    g_cur->st = AT_GRID;
    to_scheduler();
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
    case AT_MBAR: return mbar_wait_desc(f);
    case AT_GRID: return "grid_sync";
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
// Returns true when the block's live threads all wait at grid_sync (cooperative launches), false when all exited.
static bool run_block(const char *name, int nt, bool reverse) {
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
        int live = 0, at_bar = 0, runnable = 0, at_grid = 0;
        for (int t = 0; t < nt; t++) {
            live += g_fibers[t].st != DONE;
            at_bar += g_fibers[t].st == AT_BAR;
            runnable += g_fibers[t].st == RUNNABLE;
            at_grid += g_fibers[t].st == AT_GRID;
        }
        if (runnable) continue; // woken by a completed mbarrier phase or a warpgroup instruction: another sweep
        if (!live) {
            tma_exit_check(name);
            return false;
        }
        if (at_grid == live) return true;
        if (at_bar == live) {
            for (int t = 0; t < nt; t++)
                if (g_fibers[t].st == AT_BAR) g_fibers[t].st = RUNNABLE;
            continue;
        }
        if (tma_pending()) { // the latest a TMA load can land: a read of its box before the wait sees the NaN fill
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

// What every launch does first: the thread order (EMU_ORDER), cp.async's completion mode, the launch counts.
static bool launch_begin(const char *name) {
    const char *order = getenv("EMU_ORDER");
    const bool reverse = order && !strcmp(order, "reverse");
    const char *cp = getenv("EMU_CP_ASYNC");
    g_cp_eager = cp ? !strcmp(cp, "eager") : reverse;
    g_launches++;
    count_launch(name);
    return reverse;
}
// Thread t of a block starting afresh on `stack`.
static void fiber_start_thread(Fiber *f, int t, dim3 block, char *stack) {
    f->tid = make_uint3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y));
    f->st = RUNNABLE;
    f->copies.clear();
    f->commits = 0;
    f->wg_fn = NULL;
    fiber_init(f, stack);
}

void launch(const char *name, dim3 grid, dim3 block, size_t smem, const std::function<void()> &body) {
    const int nt = (int)(block.x * block.y * block.z);
    const bool reverse = launch_begin(name);
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
                sm90_block_reset(nt);
                for (int t = 0; t < nt; t++) fiber_start_thread(&g_fibers[t], t, block, g_stacks[t]);
                (void)run_block(name, nt, reverse);
                for (size_t x = 0; x < GUARD; x++)
                    if (g_smem[smem + x] != 0xa5)
                        emu_die("%s block (%u,%u,%u): wrote past its %zu bytes of dynamic shared memory", name, bx, by,
                                bz, smem);
            }
}
void launch_coop(const char *name, dim3 grid, dim3 block, size_t smem, const std::function<void()> &body) {
    const int nt = (int)(block.x * block.y * block.z), G = (int)(grid.x * grid.y * grid.z);
    const bool reverse = launch_begin(name);
    struct Block {
        std::vector<Fiber> fibers;
        std::vector<unsigned char> smem;
        bool done;
    };
    std::vector<Block> blocks((size_t)G);
    unsigned char *const plain_smem = g_smem;
    g_body = &body;
    g_kernel = name;
    g_smem_bytes = smem;
    block_dim = block;
    grid_dim = grid;
    g_coop = true;
    for (int b = 0; b < G; b++) {
        Block &k = blocks[(size_t)b];
        k.fibers.resize((size_t)nt);
        k.smem.assign(smem + GUARD, 0xff); // NaN: reads of unwritten shared memory show up
        memset(k.smem.data() + smem, 0xa5, GUARD);
        k.done = false;
        for (int t = 0; t < nt; t++) {
            const size_t i = (size_t)b * nt + t;
            while (g_coop_stacks.size() <= i) g_coop_stacks.push_back((char *)malloc(STACK_BYTES));
            fiber_start_thread(&k.fibers[(size_t)t], t, block, g_coop_stacks[i]);
        }
    }
    for (int phase = 0;; phase++) {
        int waiting = 0, exited = 0;
        for (int bi = 0; bi < G; bi++) {
            const int b = reverse ? G - 1 - bi : bi;
            Block &k = blocks[(size_t)b];
            if (k.done) {
                exited++;
                continue;
            }
            block_idx = make_uint3(b % grid.x, (b / grid.x) % grid.y, b / (grid.x * grid.y));
            g_smem = k.smem.data();
            sm90_block_reset(nt);
            std::swap(g_fibers, k.fibers); // the scheduler works on g_fibers; a swap moves no fiber
            const bool at_grid = run_block(name, nt, reverse);
            std::swap(g_fibers, k.fibers);
            for (size_t x = 0; x < GUARD; x++)
                if (k.smem[smem + x] != 0xa5)
                    emu_die("%s block %d: wrote past its %zu bytes of dynamic shared memory", name, b, smem);
            if (at_grid) waiting++;
            else k.done = true, exited++;
        }
        if (!waiting) break;
        if (exited)
            emu_die("%s: deadlock: %d blocks exited while %d wait at grid_sync %d (every block must reach each "
                    "grid_sync)", name, exited, waiting, phase);
        for (Block &k : blocks)
            for (Fiber &f : k.fibers)
                if (f.st == AT_GRID) f.st = RUNNABLE;
    }
    g_coop = false;
    g_smem = plain_smem; // the plain launches' buffer (the blocks' own went with them)
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
