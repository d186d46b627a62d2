// tok_bpe.c: hash tables and the BPE merge loop (spec data.md §1.5). The merge order is HF's
// Word::merge_all with dropout off: always the pair with the smallest (rank, position).
#include "data/tok_bpe.h"

#include <stdlib.h>

#include "util/common.h"

static size_t table_size(size_t expected) {
    size_t n = 16;
    while (n * 3 < expected * 5) n <<= 1; // load factor <= 0.6 keeps probe chains short
    return n;
}

void tok_strmap_init(TokStrMap *m, size_t expected, const uint8_t *blob) {
    size_t n = table_size(expected);
    // 32-byte slots on 64-byte lines: a probe never straddles two cache lines.
    m->slots = aligned_alloc(64, n * sizeof *m->slots);
    if (!m->slots) die("out of memory for a %zu-slot token table", n);
    memset(m->slots, 0, n * sizeof *m->slots);
    m->mask = n - 1;
    m->count = 0;
    m->blob = blob;
}

void tok_strmap_free(TokStrMap *m) {
    free(m->slots);
    m->slots = NULL;
}

int32_t tok_strmap_put(TokStrMap *m, uint32_t off, uint32_t len, int32_t id) {
    if ((m->count + 1) * 5 > (m->mask + 1) * 3) { // grow: rehash every key
        TokStrMap big;
        tok_strmap_init(&big, m->count * 2 + 16, m->blob);
        for (size_t i = 0; i <= m->mask; i++)
            if (m->slots[i].tag) tok_strmap_put(&big, m->slots[i].off, m->slots[i].len, m->slots[i].id);
        free(m->slots);
        *m = big;
    }
    const uint8_t *key = m->blob + off;
    uint64_t prefix[2];
    tok_key_prefix(key, len, prefix);
    uint64_t h = tok_hash_key(prefix, key, len);
    int32_t found = tok_strmap_find(m, prefix, key, len, h);
    if (found >= 0) return found;
    uint32_t tag = (uint32_t)(h >> 32) | 1u;
    size_t i = (size_t)h & m->mask;
    while (m->slots[i].tag) i = (i + 1) & m->mask;
    m->slots[i] = (TokStrSlot){{prefix[0], prefix[1]}, tag, len, off, id};
    m->count++;
    return -1;
}

void tok_strmap_get_many(const TokStrMap *m, TokLookup *q, size_t n) {
    for (size_t i = 0; i < n; i++) {
        q[i].hash = tok_hash_bytes(q[i].key, q[i].len);
        __builtin_prefetch(&m->slots[(size_t)q[i].hash & m->mask]);
    }
    for (size_t i = 0; i < n; i++) q[i].id = tok_strmap_get(m, q[i].key, q[i].len);
}

void tok_pairmap_prefetch(const TokPairMap *m, int32_t a, int32_t b) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    __builtin_prefetch(&m->slots[tok_pair_hash(key) & m->mask]);
}

void tok_pairmap_init(TokPairMap *m, size_t expected) {
    size_t n = table_size(expected);
    m->slots = xmalloc(n * sizeof *m->slots);
    for (size_t i = 0; i < n; i++) m->slots[i].key = UINT64_MAX;
    m->mask = n - 1;
    m->count = 0;
}

void tok_pairmap_free(TokPairMap *m) {
    free(m->slots);
    m->slots = NULL;
}

void tok_pairmap_put(TokPairMap *m, int32_t a, int32_t b, uint32_t rank, int32_t id) {
    if ((m->count + 1) * 5 > (m->mask + 1) * 3) {
        TokPairMap big;
        tok_pairmap_init(&big, m->count * 2 + 16);
        for (size_t i = 0; i <= m->mask; i++) {
            const TokPairSlot *s = &m->slots[i];
            if (s->key != UINT64_MAX) tok_pairmap_put(&big, (int32_t)(s->key >> 32), (int32_t)(uint32_t)s->key, s->rank, s->id);
        }
        free(m->slots);
        *m = big;
    }
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    for (size_t i = tok_pair_hash(key) & m->mask;; i = (i + 1) & m->mask) {
        TokPairSlot *s = &m->slots[i];
        if (s->key == key) {
            s->rank = rank, s->id = id;
            return;
        }
        if (s->key == UINT64_MAX) {
            *s = (TokPairSlot){key, rank, id};
            m->count++;
            return;
        }
    }
}

void tok_bpe_scratch_free(TokBpeScratch *sc) {
    free(sc->mem);
    sc->mem = NULL;
    sc->cap = 0;
}

// Rescan: keeps each adjacent pair's (rank, merged id) in arrays; each step takes the first minimum, merges it
// and refreshes the two pairs that touch the new symbol. O(n^2) in the worst case, fast for short words.
#define RESCAN_MAX 64
size_t tok_bpe_merge_rescan(const TokPairMap *m, int32_t *ids, size_t n) {
    if (n < 2) return n;
    uint32_t rank[RESCAN_MAX];
    int32_t merged[RESCAN_MAX];
    // A word longer than the stack arrays is processed by the caller with the heap; guard anyway.
    if (n > RESCAN_MAX) die("tok_bpe_merge_rescan: word of %zu symbols exceeds %d", n, RESCAN_MAX);
    for (size_t i = 0; i + 1 < n; i++) tok_pairmap_prefetch(m, ids[i], ids[i + 1]); // overlap the first misses
    for (size_t i = 0; i + 1 < n; i++)
        if (!tok_pairmap_get(m, ids[i], ids[i + 1], &rank[i], &merged[i])) rank[i] = UINT32_MAX;
    for (;;) {
        size_t best = 0;
        uint32_t best_rank = UINT32_MAX;
        for (size_t i = 0; i + 1 < n; i++)
            if (rank[i] < best_rank) best_rank = rank[i], best = i;
        if (best_rank == UINT32_MAX) break;
        ids[best] = merged[best];
        // Symbol best+1 disappears: shift the tail left by one.
        for (size_t i = best + 1; i + 1 < n; i++) ids[i] = ids[i + 1], rank[i] = rank[i + 1], merged[i] = merged[i + 1];
        n--;
        if (best > 0 && !tok_pairmap_get(m, ids[best - 1], ids[best], &rank[best - 1], &merged[best - 1]))
            rank[best - 1] = UINT32_MAX;
        if (best + 1 < n && !tok_pairmap_get(m, ids[best], ids[best + 1], &rank[best], &merged[best])) rank[best] = UINT32_MAX;
    }
    return n;
}

// Heap: a doubly linked list of symbols (indexed by their first byte) and a min-heap of candidate merges keyed
// by (rank, position). An entry is stale once either symbol has changed; it then no longer names the
// current (left, right) ids and is skipped, as HF does.
typedef struct {
    uint64_t key; // (rank << 32) | position of the left symbol
    int32_t left, right, merged;
} HeapEntry;

static void heap_push(HeapEntry *h, size_t *n, HeapEntry e) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (h[parent].key <= e.key) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = e;
}

static HeapEntry heap_pop(HeapEntry *h, size_t *n) {
    HeapEntry top = h[0], last = h[--*n];
    size_t i = 0, len = *n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= len) break;
        if (c + 1 < len && h[c + 1].key < h[c].key) c++;
        if (last.key <= h[c].key) break;
        h[i] = h[c];
        i = c;
    }
    if (len) h[i] = last;
    return top;
}

static inline void push_pair(const TokPairMap *m, HeapEntry *h, size_t *nh, const int32_t *ids, int32_t i, int32_t j) {
    uint32_t rank;
    int32_t merged;
    if (tok_pairmap_get(m, ids[i], ids[j], &rank, &merged))
        heap_push(h, nh, (HeapEntry){((uint64_t)rank << 32) | (uint32_t)i, ids[i], ids[j], merged});
}

size_t tok_bpe_merge_heap(const TokPairMap *m, int32_t *ids, size_t n, TokBpeScratch *sc) {
    if (n < 2) return n;
    // Each merge pushes at most 2 entries: the heap never holds more than (n - 1) + 2 (n - 1).
    size_t need = 2 * n * sizeof(int32_t) + 3 * n * sizeof(HeapEntry);
    if (sc->cap < need) {
        free(sc->mem);
        sc->mem = xmalloc(need);
        sc->cap = need;
    }
    HeapEntry *heap = sc->mem;
    int32_t *prev = (int32_t *)(heap + 3 * n), *next = prev + n;
    size_t nh = 0;
    for (size_t i = 0; i < n; i++) prev[i] = (int32_t)i - 1, next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    for (size_t i = 0; i + 1 < n; i++) push_pair(m, heap, &nh, ids, (int32_t)i, (int32_t)i + 1);
    while (nh) {
        HeapEntry e = heap_pop(heap, &nh);
        int32_t i = (int32_t)(uint32_t)e.key, j = next[i];
        // prev[i] == -2 marks a symbol absorbed into its left neighbour.
        if (prev[i] == -2 || j < 0 || ids[i] != e.left || ids[j] != e.right) continue;
        ids[i] = e.merged;
        next[i] = next[j];
        if (next[j] >= 0) prev[next[j]] = i;
        prev[j] = -2;
        if (prev[i] >= 0) push_pair(m, heap, &nh, ids, prev[i], i);
        if (next[i] >= 0) push_pair(m, heap, &nh, ids, i, next[i]);
    }
    size_t out = 0;
    for (int32_t i = 0; i >= 0; i = next[i]) ids[out++] = ids[i];
    return out;
}

size_t tok_bpe_merge(const TokPairMap *m, int32_t *ids, size_t n, TokBpeScratch *sc) {
    return n <= RESCAN_MAX ? tok_bpe_merge_rescan(m, ids, n) : tok_bpe_merge_heap(m, ids, n, sc);
}
