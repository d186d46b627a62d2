// rng.h: the random streams the reference loaders use, reproduced bit for bit (spec data.md §3, §4;
// ../shared/spec/data_rng_ref.py): MT19937 (numpy RandomState, torch CPU generator), numpy's legacy
// shuffle, torch.randperm, and numpy default_rng (SeedSequence + PCG64) as HF datasets' shuffle uses.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct { uint32_t mt[624]; int i; } Mt19937;
void mt_seed(Mt19937 *r, uint32_t seed);
// init_by_array: Python's random.seed(n) seeds with n's 32-bit words (random.Random(c) for c < 2^32: {c}).
void mt_seed_by_array(Mt19937 *r, const uint32_t *key, int klen);
uint32_t mt_u32(Mt19937 *r);
double mt_random(Mt19937 *r); // Python's random.random(): 53 bits from two outputs, in [0, 1)

typedef struct { unsigned __int128 state, inc; int has32; uint32_t buf; } Pcg64;
void pcg64_seed_numpy(Pcg64 *r, uint64_t seed); // numpy.random.default_rng(seed)
uint64_t pcg64_u64(Pcg64 *r);
uint32_t pcg64_u32(Pcg64 *r); // low half first, high half buffered (numpy's next_uint32)

// numpy RandomState.shuffle / Generator.permutation loop on a[0..n) with a u32 source.
void legacy_shuffle_i64(int64_t *a, uint64_t n, uint32_t (*u32)(void *), void *rng);
void torch_randperm(int64_t *out, uint64_t n, uint64_t seed);         // torch.randperm(n, manual_seed(seed))
void hf_shuffle_permutation(int64_t *out, uint64_t n, uint64_t seed); // datasets.shuffle(seed): new i = old out[i]
uint32_t mt_u32_cb(void *r);    // adapters for legacy_shuffle_i64
uint32_t pcg64_u32_cb(void *r);

#ifdef __cplusplus
}
#endif
