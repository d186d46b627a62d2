// rng.c: the reference loaders' random streams, bit for bit (spec data.md §3.1, §3.2, §4.2.5).
//   MT19937        numpy RandomState(seed) and torch's CPU generator after manual_seed(seed); Python's
//                  random.Random(c) (init_by_array, random()) for lm-eval's bootstrap
//   legacy shuffle numpy's random_interval() loop: RandomState.shuffle and Generator.permutation
//   torch.randperm CPU, both of torch's paths (small n: Fisher-Yates with u32 % k; n >= 2^32/20 in
//                  torch >= 2.6: inside-out Fisher-Yates with 64-bit draws)
//   PCG64          numpy default_rng(seed): SeedSequence(seed) -> PCG64 (XSL-RR 128/64), as HF datasets'
//                  Dataset.shuffle(seed) uses it
#include "data/rng.h"

// ---- MT19937 (init_genrand + genrand_int32)

enum { MT_N = 624, MT_M = 397 };

void mt_seed(Mt19937 *r, uint32_t seed) {
    r->mt[0] = seed;
    for (int i = 1; i < MT_N; i++) r->mt[i] = 1812433253u * (r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) + (uint32_t)i;
    r->i = MT_N;
}

void mt_seed_by_array(Mt19937 *r, const uint32_t *key, int klen) {
    mt_seed(r, 19650218u);
    int i = 1, j = 0;
    for (int k = MT_N > klen ? MT_N : klen; k; k--) {
        r->mt[i] = (r->mt[i] ^ ((r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) * 1664525u)) + key[j] + (uint32_t)j;
        i++;
        j++;
        if (i >= MT_N) {
            r->mt[0] = r->mt[MT_N - 1];
            i = 1;
        }
        if (j >= klen) j = 0;
    }
    for (int k = MT_N - 1; k; k--) {
        r->mt[i] = (r->mt[i] ^ ((r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) * 1566083941u)) - (uint32_t)i;
        i++;
        if (i >= MT_N) {
            r->mt[0] = r->mt[MT_N - 1];
            i = 1;
        }
    }
    r->mt[0] = 0x80000000u;
    r->i = MT_N;
}

static void mt_regenerate(Mt19937 *r) {
    for (int k = 0; k < MT_N; k++) {
        uint32_t y = (r->mt[k] & 0x80000000u) | (r->mt[(k + 1) % MT_N] & 0x7fffffffu);
        r->mt[k] = r->mt[(k + MT_M) % MT_N] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    r->i = 0;
}

uint32_t mt_u32(Mt19937 *r) {
    if (r->i >= MT_N) mt_regenerate(r);
    uint32_t y = r->mt[r->i++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

// Both numpy (mt19937_next64) and torch (random64) build a 64-bit draw from two outputs, the first
// one as the high half.
static uint64_t mt_u64(Mt19937 *r) {
    uint64_t hi = mt_u32(r);
    return hi << 32 | mt_u32(r);
}

double mt_random(Mt19937 *r) {
    uint32_t a = mt_u32(r) >> 5, b = mt_u32(r) >> 6;
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

uint32_t mt_u32_cb(void *r) { return mt_u32((Mt19937 *)r); }

// ---- PCG64 seeded through numpy's SeedSequence

#define PCG_MULT (((unsigned __int128)0x2360ed051fc65da4ull << 64) | 0x4385df649fccf645ull)

static void pcg64_step(Pcg64 *r) { r->state = r->state * PCG_MULT + r->inc; }

// SeedSequence hash constants (numpy/random/bit_generator.pyx).
enum {
    SS_INIT_A = 0x43b0d7e5u, SS_MULT_A = 0x931e8875u, SS_INIT_B = 0x8b51f9ddu, SS_MULT_B = 0x58f38dedu,
    SS_MIX_MULT_L = 0xca01f9ddu, SS_MIX_MULT_R = 0x4973f715u, SS_POOL = 4
};

static uint32_t ss_hashmix(uint32_t v, uint32_t *hash_const) {
    v ^= *hash_const;
    *hash_const *= SS_MULT_A;
    v *= *hash_const;
    return v ^ (v >> 16);
}

static uint32_t ss_mix(uint32_t x, uint32_t y) {
    uint32_t r = SS_MIX_MULT_L * x - SS_MIX_MULT_R * y;
    return r ^ (r >> 16);
}

void pcg64_seed_numpy(Pcg64 *r, uint64_t seed) {
    // The seed's entropy is its little-endian 32-bit words, at least one (seed 0 -> [0]).
    uint32_t entropy[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    int n_entropy = (seed >> 32) ? 2 : 1;
    uint32_t pool[SS_POOL], hash_const = SS_INIT_A;
    for (int i = 0; i < SS_POOL; i++) pool[i] = ss_hashmix(i < n_entropy ? entropy[i] : 0, &hash_const);
    for (int src = 0; src < SS_POOL; src++)
        for (int dst = 0; dst < SS_POOL; dst++)
            if (src != dst) pool[dst] = ss_mix(pool[dst], ss_hashmix(pool[src], &hash_const));
    // generate_state(4, uint64): 8 u32 words, paired little-endian into 4 u64.
    uint32_t words[8];
    uint32_t hb = SS_INIT_B;
    for (int k = 0; k < 8; k++) {
        uint32_t v = pool[k % SS_POOL] ^ hb;
        hb *= SS_MULT_B;
        v *= hb;
        words[k] = v ^ (v >> 16);
    }
    uint64_t s64[4];
    for (int k = 0; k < 4; k++) s64[k] = (uint64_t)words[2 * k] | (uint64_t)words[2 * k + 1] << 32;
    unsigned __int128 initstate = (unsigned __int128)s64[0] << 64 | s64[1];
    unsigned __int128 initseq = (unsigned __int128)s64[2] << 64 | s64[3];
    // pcg_setseq_128_srandom_r
    r->inc = initseq << 1 | 1u;
    r->state = 0;
    pcg64_step(r);
    r->state += initstate;
    pcg64_step(r);
    r->has32 = 0;
    r->buf = 0;
}

// XSL-RR output of the advanced state. Leaves the u32 buffer alone, as numpy's next_uint64 does.
uint64_t pcg64_u64(Pcg64 *r) {
    pcg64_step(r);
    uint64_t x = (uint64_t)(r->state >> 64) ^ (uint64_t)r->state;
    unsigned rot = (unsigned)(r->state >> 122);
    return (x >> rot) | (x << ((64 - rot) & 63));
}

uint32_t pcg64_u32(Pcg64 *r) {
    if (r->has32) {
        r->has32 = 0;
        return r->buf;
    }
    uint64_t v = pcg64_u64(r);
    r->has32 = 1;
    r->buf = (uint32_t)(v >> 32);
    return (uint32_t)v;
}

uint32_t pcg64_u32_cb(void *r) { return pcg64_u32((Pcg64 *)r); }

// ---- numpy random_interval and the legacy shuffle

// A 64-bit draw from the generator behind a u32 callback, as that generator's next_uint64 would make it.
static uint64_t draw_u64(uint32_t (*u32)(void *), void *rng) {
    if (u32 == pcg64_u32_cb) return pcg64_u64((Pcg64 *)rng);
    if (u32 == mt_u32_cb) return mt_u64((Mt19937 *)rng);
    uint64_t hi = u32(rng);
    return hi << 32 | u32(rng);
}

// numpy random_interval(max): uniform in [0, max] by masked rejection; 32-bit draws while max fits in
// 32 bits, 64-bit draws beyond. Not in rng.h: used by the shuffle and exercised directly by tests/test_rng.c.
uint64_t rng_interval(uint64_t max, uint32_t (*u32)(void *), void *rng) {
    if (max == 0) return 0;
    uint64_t mask = max;
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    mask |= mask >> 32;
    uint64_t v;
    if (max <= 0xffffffffu) {
        do v = u32(rng) & mask;
        while (v > max);
    } else {
        do v = draw_u64(u32, rng) & mask;
        while (v > max);
    }
    return v;
}

void legacy_shuffle_i64(int64_t *a, uint64_t n, uint32_t (*u32)(void *), void *rng) {
    for (uint64_t i = n > 0 ? n - 1 : 0; i > 0; i--) {
        uint64_t j = rng_interval(i, u32, rng);
        int64_t t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

// ---- torch.randperm (aten randperm_cpu)

// torch >= 2.6 (pytorch PR 143682) for n >= 2^32/20: inside-out Fisher-Yates with 64-bit draws,
// z = random64() % (i + 1); r[i] = r[z]; r[z] = i. Older torch (1.13 as installed here included) keeps the
// small-n loop below for every n; the two agree for every n < 2^32/20 = 214748364, far above the ~5M
// chunks of the recipe. Not in rng.h: exercised directly by tests/test_rng.c at small n.
void torch_randperm_large_path(int64_t *out, uint64_t n, uint64_t seed) {
    Mt19937 g;
    mt_seed(&g, (uint32_t)seed);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t z = mt_u64(&g) % (i + 1);
        out[i] = (int64_t)i; // read back below when z == i
        out[i] = out[z];
        out[z] = (int64_t)i;
    }
}

void torch_randperm(int64_t *out, uint64_t n, uint64_t seed) {
    if (n >= 0xffffffffu / 20) {
        torch_randperm_large_path(out, n, seed);
        return;
    }
    // Fisher-Yates forward, z = random() % (n - i), swap r[i] and r[i + z]. torch's mt19937 keeps the low
    // 32 bits of the manual seed.
    Mt19937 g;
    mt_seed(&g, (uint32_t)seed);
    for (uint64_t i = 0; i < n; i++) out[i] = (int64_t)i;
    for (uint64_t i = 0; i + 1 < n; i++) {
        uint64_t z = mt_u32(&g) % (n - i);
        int64_t t = out[i];
        out[i] = out[i + z];
        out[i + z] = t;
    }
}

// ---- HF datasets Dataset.shuffle(seed)

void hf_shuffle_permutation(int64_t *out, uint64_t n, uint64_t seed) {
    Pcg64 g;
    pcg64_seed_numpy(&g, seed);
    for (uint64_t i = 0; i < n; i++) out[i] = (int64_t)i;
    legacy_shuffle_i64(out, n, pcg64_u32_cb, &g);
}
