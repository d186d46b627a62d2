// tok_bpe.h: the lookup tables and the merge loop of byte-level BPE (spec data.md §1.4, §1.5).
// Everything works on raw bytes: vocab keys are converted from the byte-level alphabet at load time, so a
// piece of text is looked up without building its byte-level string.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

// ---- bytes -> id: open addressing; the first 16 bytes of each key live in its slot ------------------------
// Most pieces are shorter than 16 bytes, so a lookup usually touches one 32-byte slot and never the blob.
typedef struct {
    uint64_t prefix[2]; // the key's first 16 bytes, zero-padded
    uint32_t tag;       // high hash bits | 1; 0 marks an empty slot
    uint32_t len, off;  // the whole key is blob[off..off+len)
    int32_t id;
} TokStrSlot;
typedef struct {
    TokStrSlot *slots;
    size_t mask, count;
    const uint8_t *blob; // keys live here (owned by the caller); set before put/get
} TokStrMap;

static inline void tok_key_prefix(const void *p, size_t n, uint64_t prefix[2]) {
    prefix[0] = prefix[1] = 0;
    memcpy(prefix, p, n < 16 ? n : 16);
}
// A multiply-xorshift hash over 8-byte words (the zero-padded prefix, then the rest).
static inline uint64_t tok_hash_key(const uint64_t prefix[2], const uint8_t *p, size_t n) {
    uint64_t h = 0x243F6A8885A308D3ull ^ (n * 0x9E3779B97F4A7C15ull);
    h = (h ^ prefix[0]) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    h = (h ^ prefix[1]) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    for (size_t i = 16; i < n; i += 8) {
        uint64_t v = 0;
        memcpy(&v, p + i, n - i < 8 ? n - i : 8);
        h = (h ^ v) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 29;
    }
    h = (h ^ (h >> 31)) * 0x94D049BB133111EBull;
    return h ^ (h >> 32);
}
static inline uint64_t tok_hash_bytes(const void *p, size_t n) {
    uint64_t prefix[2];
    tok_key_prefix(p, n, prefix);
    return tok_hash_key(prefix, (const uint8_t *)p, n);
}
void tok_strmap_init(TokStrMap *m, size_t expected, const uint8_t *blob);
void tok_strmap_free(TokStrMap *m);
// Inserts blob[off..off+len) -> id unless the key is present; returns the existing id, or -1 if inserted.
int32_t tok_strmap_put(TokStrMap *m, uint32_t off, uint32_t len, int32_t id);

static inline int32_t tok_strmap_find(const TokStrMap *m, const uint64_t prefix[2], const uint8_t *key, size_t len,
                                      uint64_t h) {
    uint32_t tag = (uint32_t)(h >> 32) | 1u;
    for (size_t i = (size_t)h & m->mask;; i = (i + 1) & m->mask) {
        const TokStrSlot *s = &m->slots[i];
        if (!s->tag) return -1;
        if (s->tag == tag && s->len == len && s->prefix[0] == prefix[0] && s->prefix[1] == prefix[1] &&
            (len <= 16 || !memcmp(m->blob + s->off + 16, key + 16, len - 16)))
            return s->id;
    }
}
static inline int32_t tok_strmap_get(const TokStrMap *m, const void *key, size_t len) {
    uint64_t prefix[2];
    tok_key_prefix(key, len, prefix);
    return tok_strmap_find(m, prefix, (const uint8_t *)key, len, tok_hash_key(prefix, (const uint8_t *)key, len));
}
// Many lookups at once, with their memory accesses overlapped (loading a tokenizer does ~10^6 lookups in a
// table bigger than the caches). Fills q[i].id.
typedef struct {
    const void *key;
    size_t len;
    uint64_t hash;
    int32_t id;
} TokLookup;
void tok_strmap_get_many(const TokStrMap *m, TokLookup *q, size_t n);

// ---- (id_a, id_b) -> (rank, id_ab) ------------------------------------------------------------------------
typedef struct {
    uint64_t key; // (a << 32) | b; UINT64_MAX = empty
    uint32_t rank;
    int32_t id;
} TokPairSlot;
typedef struct {
    TokPairSlot *slots;
    size_t mask, count;
} TokPairMap;

void tok_pairmap_init(TokPairMap *m, size_t expected);
void tok_pairmap_free(TokPairMap *m);
// Inserts or overwrites (HF builds its merge map by collecting into a hash map: a repeated pair keeps the
// rank of its last line).
void tok_pairmap_put(TokPairMap *m, int32_t a, int32_t b, uint32_t rank, int32_t id);
void tok_pairmap_prefetch(const TokPairMap *m, int32_t a, int32_t b); // before a put, to overlap cache misses

// splitmix64's finalizer: every key bit reaches the low bits that pick the slot.
static inline size_t tok_pair_hash(uint64_t key) {
    key ^= key >> 30;
    key *= 0xBF58476D1CE4E5B9ull;
    key ^= key >> 27;
    key *= 0x94D049BB133111EBull;
    return (size_t)(key ^ (key >> 31));
}
// 1 and (rank, id) if the pair merges.
static inline int tok_pairmap_get(const TokPairMap *m, int32_t a, int32_t b, uint32_t *rank, int32_t *id) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    for (size_t i = tok_pair_hash(key) & m->mask;; i = (i + 1) & m->mask) {
        const TokPairSlot *s = &m->slots[i];
        if (s->key == key) return *rank = s->rank, *id = s->id, 1;
        if (s->key == UINT64_MAX) return 0;
    }
}

// ---- the merge loop ---------------------------------------------------------------------------------------
// Scratch memory for long words, owned by one thread at a time.
typedef struct {
    void *mem;
    size_t cap;
} TokBpeScratch;
void tok_bpe_scratch_free(TokBpeScratch *sc);

// Merges ids[0..n) (one symbol per byte to start with) in place: repeatedly the adjacent pair with the
// smallest (rank, position) is replaced by its merged id, until no adjacent pair merges. Returns the new count.
// Short words use a rescan loop, long ones a heap (O(n log n)); both give the same result.
size_t tok_bpe_merge(const TokPairMap *m, int32_t *ids, size_t n, TokBpeScratch *sc);
// The two strategies, exposed for the test that checks they agree.
size_t tok_bpe_merge_rescan(const TokPairMap *m, int32_t *ids, size_t n);
size_t tok_bpe_merge_heap(const TokPairMap *m, int32_t *ids, size_t n, TokBpeScratch *sc);

#ifdef __cplusplus
}
#endif
