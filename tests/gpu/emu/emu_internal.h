// emu_internal.h: what the two halves of the CPU emulator share, internal to tests/gpu/emu/ (kernels see only
// cuda/emu.cuh): a fiber's state and the scheduler's globals (cuda_emu.cc), and the hooks through which the
// scheduler drives the sm_90 stand-ins (emu_sm90.cc).
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>

#include <string>
#include <vector>

#include "cuda/emu.cuh"

// Prints "cuda emu: ..." and exits with status 3 (cuda_emu.cc).
[[noreturn]] void emu_die(const char *fmt, ...);

namespace emu {
// ---- a fiber: one CUDA thread of the running block, and what it waits at
enum State { RUNNABLE, AT_BAR, AT_SHFL, AT_COLL, AT_WGCOLL, AT_MBAR, AT_GRID, DONE }; // DONE last (counts)
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

// ---- the scheduler's state (cuda_emu.cc)
extern std::vector<Fiber> g_fibers; // one per thread of the running block
extern Fiber *g_cur;                // the running fiber; NULL while the scheduler itself runs
extern const char *g_kernel;        // the running kernel's name, for messages
extern unsigned char *g_smem;       // the block's dynamic shared memory and its size
extern size_t g_smem_bytes;
extern bool g_cp_eager; // cp.async copies and TMA loads complete at issue (else deferred; see cuda_emu.cc)

void to_scheduler(); // parks the running fiber g_cur (its st says why) until the scheduler resumes it

// Whether [p, p + bytes) lies in the running block's dynamic shared memory.
inline bool in_dyn_smem(const void *p, size_t bytes) {
    const unsigned char *c = (const unsigned char *)p;
    return c >= g_smem && c + bytes <= g_smem + g_smem_bytes;
}

// The float a bf16 bit pattern (the low 16 bits of half) stands for.
inline float bf16_bits_to_float(uint32_t half) {
    uint32_t u = half << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// ---- hooks into the sm_90 stand-ins (emu_sm90.cc) for the scheduler
void sm90_block_reset(int nt);                      // at the start of each block of nt threads
bool release_warpgroup(const char *name, int wg);   // run_block: a warpgroup instruction all 128 threads reached
bool tma_pending();                                 // run_block: deferred TMA loads not yet landed
void tma_land_all();                                // run_block: lands them, in issue order
void tma_exit_check(const char *name);              // run_block: the block ends with none in flight
void wg_exit_check(int t);                          // a thread exits with its warpgroup's wgmmas retired
std::string mbar_wait_desc(const Fiber &f);         // the deadlock report's line for a thread at AT_MBAR
} // namespace emu
