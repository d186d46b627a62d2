// emu_sm90.cc: the emulator's sm_90 stand-ins (cuda/emu.cuh declares them, cuda/hopper.cuh states the semantics):
// shared-space addresses, mbarriers (their phases, arrivals and transaction bytes), tensor maps and TMA loads
// (landing at issue or deferred until no thread can run on without them), and wgmma as warpgroup collectives
// performed when a wait retires their group, with the checks a thread's or a block's exit makes on them. The
// scheduler (cuda_emu.cc) calls in through the hooks declared in emu_internal.h. Built and used only by
// tests/gpu/emu_check.sh.
#include <stdio.h>
#include <string.h>

#include <string>
#include <vector>

#include "emu_internal.h"

namespace emu {

// ---------------------------------------------------------------------------------------------------
// sm_90: shared-space addresses, mbarriers, TMA loads and wgmma (cuda/hopper.cuh states the semantics)

// Shared address of dynamic shared memory's first byte: not a multiple of 1024 (on hardware the reserved bytes and
// static shared memory come first), so a kernel has to align its swizzled tiles itself.
static const uint32_t SMEM_BASE = 0x210;
static const uint32_t SMEM_LIMIT = 1u << 18; // a descriptor holds 14 bits of address >> 4

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
    int scale_d, ta, tb; // ta / tb: A / B MN-major
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

// At the start of each block (launch).
void sm90_block_reset(int nt) {
    g_nt = nt;
    g_mbars.clear();
    g_wgs.assign(nt / 128, Warpgroup{});
    g_tma.clear();
}

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
// The swizzle of wgmma descriptor layout type `layout` (1, 2, 3: 128, 64, 32 bytes) on the shared address a: bits
// 4-6 (4-5, 4) ^= bits 7-9 (7-8, 7). TMA writes the 128-byte one (1).
static uint32_t swz(uint32_t a, unsigned layout) {
    const uint32_t mask = layout == 1 ? 7 : layout == 2 ? 3 : 1;
    return a ^ (((a >> 7) & mask) << 4);
}

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
            memcpy(g_smem + (swz(a0 + rr * 128 + 2 * cc, 1) - SMEM_BASE), &v, 2);
        }
    MBar *m = mbar_get((const uint64_t *)(g_smem + L.bar_off), "a TMA load's completion");
    m->tx -= (long)t.box_inner * t.box_outer * 2;
    mbar_progress(m);
}
void tma_land_all() { // from the scheduler, in issue order
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
    int scale_d, keep, ta, tb;
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

// Bytes a row of a tile with layout type `layout` holds: 128, 64, 32.
static uint32_t swz_row_bytes(unsigned layout) { return 128u >> (layout - 1); }

// The tile's start address, checked: no base offset; K-major: the 128-byte swizzle, 8-row groups 1024 bytes apart,
// a 1024-byte aligned tile plus a k16 step of 0, 32, 64 or 96 bytes; MN-major: the 128-, 64- or 32-byte swizzle
// (rows of RB = 128, 64, 32 bytes), 8-row groups 8 RB bytes apart, a start aligned to that (k16 steps are 16 RB bytes)
// and, where `mn_rows` > RB / 2 rows of M (N) are read, a leading byte offset that keeps the next ones aligned.
static uint32_t desc_start(uint64_t desc, int mn_major, int mn_rows, int wg, const char *which) {
    const uint32_t start = (uint32_t)(desc & 0x3FFF) << 4, stride = (uint32_t)((desc >> 32) & 0x3FFF) << 4;
    const uint32_t lead = (uint32_t)((desc >> 16) & 0x3FFF) << 4;
    const unsigned layout = (unsigned)(desc >> 62), base_off = (unsigned)(desc >> 49) & 7;
    const bool narrow_ok = mn_major && (layout == 2 || layout == 3);
    if ((layout != 1 && !narrow_ok) || base_off || stride != 8 * swz_row_bytes(layout ? layout : 1))
        emu_die("%s block (%u,%u,%u) warpgroup %d: wgmma %s descriptor 0x%016llx (%s) has layout type %u, stride "
                "byte offset %u, base offset %u; emulated: the 128-byte swizzle (1; K- or MN-major) or the 64- or "
                "32-byte one (2, 3; MN-major), 8 rows' bytes (1024, 512, 256), 0",
                g_kernel, block_idx.x, block_idx.y, block_idx.z, wg, which, (unsigned long long)desc,
                mn_major ? "MN-major" : "K-major", layout, stride, base_off);
    const uint32_t rb = swz_row_bytes(layout), atom = 8 * rb;
    if (!mn_major && (start % 32 || start % 1024 >= 128))
        emu_die("%s block (%u,%u,%u) warpgroup %d: wgmma %s descriptor starts at shared 0x%x: tile not 1024-byte "
                "aligned (or a k step not a multiple of 32 bytes)",
                g_kernel, block_idx.x, block_idx.y, block_idx.z, wg, which, start);
    if (mn_major && start % atom)
        emu_die("%s block (%u,%u,%u) warpgroup %d: wgmma %s MN-major descriptor starts at shared 0x%x: not %u-byte "
                "aligned (an MN-major k16 step is %u bytes, not a 32-byte K-major one)",
                g_kernel, block_idx.x, block_idx.y, block_idx.z, wg, which, start, atom, 2 * atom);
    if (mn_major && mn_rows > (int)rb / 2 && (lead == 0 || lead % atom))
        emu_die("%s block (%u,%u,%u) warpgroup %d: wgmma %s MN-major descriptor reads %d rows of M/N with a leading byte "
                "offset of %u: the next %u need a non-zero multiple of %u",
                g_kernel, block_idx.x, block_idx.y, block_idx.z, wg, which, mn_rows, lead, rb / 2, atom);
    return start;
}
// rows x 16 bf16 of an operand from shared memory as it is now (element [r][k]: row r of M or N, k of K).
static void desc_load(double (*X)[16], int rows, uint64_t desc, int mn_major, int wg, const char *which) {
    const uint32_t start = desc_start(desc, mn_major, rows, wg, which);
    const uint32_t lead = (uint32_t)((desc >> 16) & 0x3FFF) << 4;
    const unsigned layout = (unsigned)(desc >> 62);
    const uint32_t rb = swz_row_bytes(layout), per_row = rb / 2; // MN-major: per_row of M (N) in a row
    for (int r = 0; r < rows; r++)
        for (int k = 0; k < 16; k++) {
            const uint32_t a = swz(mn_major ? start + (r / per_row) * lead + (k / 8) * 8 * rb + (k % 8) * rb +
                                                  2 * (r % per_row)
                                            : start + (r / 8) * 1024 + (r % 8) * 128 + 2 * k,
                                   layout);
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
    desc_load(A, 64, op.da, op.ta, wg, "A");
    desc_load(B, op.n, op.db, op.tb, wg, "B");
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
    op.ta = t0->ta, op.tb = t0->tb;
    for (int t = 0; t < 128; t++) {
        const WgThread *m = (const WgThread *)th[t];
        if (m->n != op.n || m->da != op.da || m->db != op.db || (m->scale_d != 0) != (op.scale_d != 0) ||
            m->ta != op.ta || m->tb != op.tb)
            emu_die("%s block (%u,%u,%u) warpgroup %d: wgmma with different shapes, descriptors or scale-d across the "
                    "warpgroup (thread %d)",
                    g_kernel, block_idx.x, block_idx.y, block_idx.z, wg, t);
        op.d[t] = m->d;
    }
    desc_start(op.da, op.ta, 64, wg, "A"), desc_start(op.db, op.tb, op.n, wg, "B"); // malformed ones fail at issue
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
void wgmma_bf16(float *d, int n, uint64_t desc_a, uint64_t desc_b, int scale_d, int trans_a, int trans_b) {
    if (n < 8 || n > 256 || n % 8) emu_die("%s: wgmma m64n%dk16", who(), n);
    if ((trans_a | trans_b) & ~1) emu_die("%s: wgmma transpose flags %d, %d (0 or 1)", who(), trans_a, trans_b);
    WgThread me = {d, n, desc_a, desc_b, scale_d, 0, trans_a, trans_b};
    wg_collective(wgmma_fn, "wgmma_bf16", &me);
}
void wg_exit_check(int t) {
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
bool release_warpgroup(const char *name, int wg) {
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

bool tma_pending() { return !g_tma.empty(); }
void tma_exit_check(const char *name) {
    if (!g_tma.empty())
        emu_die("%s block (%u,%u,%u): exits with %zu TMA loads in flight (their mbarrier never waited on)",
                name, block_idx.x, block_idx.y, block_idx.z, g_tma.size());
}

// What a thread at AT_MBAR waits for, for the deadlock report (wait_desc).
std::string mbar_wait_desc(const Fiber &f) {
    char b[320];
    const MBar *m = mbar_find(f.mbar_off);
    snprintf(b, sizeof b,
             "mbar_wait parity %u on the mbarrier at shared 0x%x (%ld phases completed; the current one misses %d "
             "of %d arrivals and %ld transaction bytes)",
             f.mbar_parity, f.mbar_off + SMEM_BASE, m ? m->completed : -1, m ? m->pending : -1, m ? m->count : -1,
             m ? m->tx : -1);
    return b;
}
} // namespace emu
