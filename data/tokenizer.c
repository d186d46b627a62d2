// tokenizer.c: encoding and decoding with a loaded tokenizer (spec data.md §1.2-§1.7); loading is tok_load.c.
// Pipeline of tok_encode, as HF's: repair invalid UTF-8 (§1.7) -> split out added tokens in raw text
// (leftmost-longest; non-normalized ones first, then normalized ones in the gaps, as HF's two tries) ->
// pre-tokenizer steps on each gap (regex split, prefix space) -> each piece: whole-piece vocab hit when
// ignore_merges, else byte-level BPE -> post-processor template (BOS).
// Everything here only reads the Tokenizer: calls on many threads at once are safe.
#include "data/tokenizer.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "data/tok_internal.h"
#include "data/tok_utf8.h"
#include "util/common.h"

// Longest added token starting at s[p]: its index in t->added (or -1); *end = p + its length.
static int trie_longest(const Trie *tr, const uint8_t *s, size_t n, size_t p, size_t *end) {
    int node = 0, best = -1;
    for (size_t i = p; i < n; i++) {
        int c = tr->nodes[node].first_child;
        while (c >= 0 && tr->nodes[c].byte != s[i]) c = tr->nodes[c].sibling;
        if (c < 0) break;
        node = c;
        if (tr->nodes[c].added >= 0) best = tr->nodes[c].added, *end = i + 1;
    }
    return best;
}

int tok_vocab_size(const Tokenizer *t) { return t->vocab_size; }
int tok_bos_id(const Tokenizer *t) { return t->bos_id; }
int tok_eos_id(const Tokenizer *t) { return t->eos_id; }
int tok_adds_bos(const Tokenizer *t) { return t->n_prefix > 0; }
const char *tok_sha256(const Tokenizer *t) { return t->sha256; }

const char *tok_token_bytes(const Tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->vocab_size || !(t->id_flags[id] & ID_VALID)) return NULL;
    if (len) *len = t->id_len[id];
    return (const char *)t->blob + t->id_off[id];
}

// ---- encoding ---------------------------------------------------------------------------------------------
// State of one tok_encode call: the output array and scratch memory (nothing shared, so calls on many threads
// are independent).
typedef struct {
    const Tokenizer *t;
    int32_t **ids;
    size_t *cap, n;
    uint8_t *prefixed; // piece with the ByteLevel prefix space
    size_t prefixed_cap;
    int32_t *syms; // byte symbols of a long word
    size_t syms_cap;
    TokBpeScratch bpe;
} Enc;

static void emit_grow(Enc *e) {
    *e->cap = *e->cap ? *e->cap * 2 : 256;
    *e->ids = xrealloc(*e->ids, *e->cap * sizeof **e->ids);
}

static inline void emit(Enc *e, int32_t id) {
    if (e->n == *e->cap) emit_grow(e);
    (*e->ids)[e->n++] = id;
}

// BPE over the bytes of one piece.
static void encode_piece_bpe(Enc *e, const uint8_t *s, size_t n) {
    const Tokenizer *t = e->t;
    if (n == 1 && t->byte_id[s[0]] >= 0) { emit(e, t->byte_id[s[0]]); return; }
    int32_t stack_syms[64], *sym = stack_syms;
    if (n > 64) {
        if (e->syms_cap < n) e->syms = xrealloc(e->syms, (e->syms_cap = n) * sizeof *e->syms);
        sym = e->syms;
    }
    size_t m = 0;
    int prev_unk = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_id[s[i]];
        if (id < 0) { // a byte without a token: HF uses unk (fused if asked) or drops the byte
            if (t->unk_id < 0 || (t->fuse_unk && prev_unk)) continue;
            id = t->unk_id, prev_unk = 1;
        } else {
            prev_unk = 0;
        }
        sym[m++] = id;
    }
    m = tok_bpe_merge(&t->merges, sym, m, &e->bpe);
    for (size_t i = 0; i < m; i++) emit(e, sym[i]);
}

// One pre-tokenized piece (raw bytes) -> ids.
static void encode_piece(Enc *e, const uint8_t *s, size_t n) {
    if (e->t->ignore_merges) { // the whole piece is a token: no merging (spec §1.5)
        int32_t id = tok_strmap_get(&e->t->vocab, s, n);
        if (id >= 0) { emit(e, id); return; }
    }
    encode_piece_bpe(e, s, n);
}

// The common case (Llama 3: one regex split, then ignore_merges lookups): pieces are cut a batch ahead and
// their vocab slots prefetched, so that the cache misses of the lookups overlap instead of queueing.
#define PIECE_BATCH 16
static void encode_split_lookup(Enc *e, TokSplitKind kind, const uint8_t *s, size_t n) {
    const TokStrMap *vocab = &e->t->vocab;
    size_t start[PIECE_BATCH + 1];
    uint64_t prefix[PIECE_BATCH][2], hash[PIECE_BATCH];
    for (size_t p = 0; p < n;) {
        int k = 0;
        start[0] = p;
        while (k < PIECE_BATCH && p < n) {
            p = tok_pretok_next(kind, s, n, p);
            size_t len = p - start[k];
            tok_key_prefix(s + start[k], len, prefix[k]);
            hash[k] = tok_hash_key(prefix[k], s + start[k], len);
            __builtin_prefetch(&vocab->slots[hash[k] & vocab->mask]);
            start[++k] = p;
        }
        for (int j = 0; j < k; j++) {
            size_t len = start[j + 1] - start[j];
            int32_t id = tok_strmap_find(vocab, prefix[j], s + start[j], len, hash[j]);
            if (id >= 0) emit(e, id);
            else encode_piece_bpe(e, s + start[j], len);
        }
    }
}

// Runs pre-tokenizer steps [step, n_steps) over s[0..n), then BPE on each resulting piece.
static void encode_steps(Enc *e, int step, const uint8_t *s, size_t n) {
    const Tokenizer *t = e->t;
    if (step == t->n_steps) {
        if (n) encode_piece(e, s, n);
        return;
    }
    const PretokStep *st = &t->steps[step];
    if (st->kind == STEP_PREFIX_SPACE) { // ByteLevel add_prefix_space: each split that does not start with ' '
        if (!n || s[0] == ' ') { encode_steps(e, step + 1, s, n); return; }
        // Only one ByteLevel step exists, so this buffer is never in use further up the recursion.
        if (e->prefixed_cap < n + 1) e->prefixed = xrealloc(e->prefixed, e->prefixed_cap = 2 * n + 16);
        e->prefixed[0] = ' ';
        memcpy(e->prefixed + 1, s, n);
        encode_steps(e, step + 1, e->prefixed, n + 1);
        return;
    }
    if (step + 1 == t->n_steps && t->ignore_merges) { encode_split_lookup(e, st->split, s, n); return; }
    for (size_t p = 0; p < n;) {
        size_t q = tok_pretok_next(st->split, s, n, p);
        encode_steps(e, step + 1, s + p, q - p);
        p = q;
    }
}

static size_t cp_len_at(const uint8_t *s) { return s[0] < 0x80 ? 1 : s[0] < 0xE0 ? 2 : s[0] < 0xF0 ? 3 : 4; }

static uint32_t cp_at(const uint8_t *s, size_t *len) {
    utf8proc_int32_t cp;
    *len = cp_len_at(s);
    utf8proc_iterate(s, (utf8proc_ssize_t)*len, &cp);
    return (uint32_t)cp;
}

static int is_space_cp(uint32_t cp) {
    int k = tok_cp_class(cp);
    return k == TOK_CLS_SPACE || k == TOK_CLS_CRLF;
}

// Rust regex \w (HF's single_word test): Alphabetic, marks, decimal digits, connector punctuation, joiners.
// Approximated by general category L, M, Nd, Nl, Pc plus U+200C/U+200D (misses the few Alphabetic symbols).
static int is_word_cp(uint32_t cp) {
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)cp);
    return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_ME) || k == UTF8PROC_CATEGORY_ND ||
           k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_PC || cp == 0x200C || cp == 0x200D;
}

static size_t prev_cp_start(const uint8_t *s, size_t p) {
    do p--;
    while (p > 0 && (s[p] & 0xC0) == 0x80);
    return p;
}

// Added tokens in s: level 0 matches the non-normalized ones, level 1 the normalized ones in level 0's gaps
// (HF's two tries; with no normalizer both see the same text). Gaps go on to the pre-tokenizer.
static void encode_added(Enc *e, int level, const uint8_t *s, size_t n) {
    const Tokenizer *t = e->t;
    if (level == 2) { encode_steps(e, 0, s, n); return; }
    const Trie *tr = level == 0 ? &t->trie_raw : &t->trie_normalized;
    if (!tr->n) { encode_added(e, level + 1, s, n); return; }
    size_t done = 0, p = 0, l;
    while (p < n) {
        if (tr->n_first == 1) {
            const uint8_t *hit = memchr(s + p, tr->only_first, n - p);
            if (!hit) break;
            p = (size_t)(hit - s);
        } else {
            while (p < n && !tr->first[s[p]]) p++;
            if (p == n) break;
        }
        size_t end;
        int k = trie_longest(tr, s, n, p, &end);
        if (k < 0) {
            p++;
            continue;
        }
        const AddedTok *at = &t->added[k];
        size_t start = p, stop = end;
        // A rejected match still consumes its text: HF iterates non-overlapping matches.
        if (at->single_word && ((start > 0 && is_word_cp(cp_at(s + prev_cp_start(s, start), &l))) ||
                                (stop < n && is_word_cp(cp_at(s + stop, &l))))) {
            p = end;
            continue;
        }
        if (at->lstrip)
            while (start > done) {
                size_t q = prev_cp_start(s, start);
                if (!is_space_cp(cp_at(s + q, &l))) break;
                start = q;
            }
        if (at->rstrip)
            while (stop < n && is_space_cp(cp_at(s + stop, &l))) stop += l;
        if (start > done) encode_added(e, level + 1, s + done, start - done);
        emit(e, at->id);
        done = p = stop;
    }
    if (done < n) encode_added(e, level + 1, s + done, n - done);
}

size_t tok_encode(const Tokenizer *t, const char *text, size_t len, int add_bos, int32_t **ids, size_t *cap) {
    Enc e = {.t = t, .ids = ids, .cap = cap};
    const uint8_t *s = (const uint8_t *)text;
    uint8_t *repaired = NULL;
    if (tok_utf8_valid_prefix(s, len) < len) { // §1.7: each maximal invalid subsequence -> U+FFFD
        repaired = xmalloc(3 * len);
        len = tok_utf8_lossy(s, len, repaired, NULL);
        s = repaired;
    }
    if (add_bos)
        for (int i = 0; i < t->n_prefix; i++) emit(&e, t->prefix_ids[i]);
    encode_added(&e, 0, s, len);
    if (add_bos)
        for (int i = 0; i < t->n_suffix; i++) emit(&e, t->suffix_ids[i]);
    free(repaired);
    free(e.prefixed);
    free(e.syms);
    tok_bpe_scratch_free(&e.bpe);
    return e.n;
}

// ---- decoding (§1.6) --------------------------------------------------------------------------------------
char *tok_decode(const Tokenizer *t, const int32_t *ids, size_t n, int skip_special, size_t *out_len) {
    // As HF: unknown ids are dropped, every token (special ones too) goes through the ByteLevel decoder, and
    // the concatenated bytes are decoded lossily as a whole.
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id >= 0 && id < t->vocab_size && (t->id_flags[id] & ID_VALID) && !(skip_special && (t->id_flags[id] & ID_SPECIAL)))
            total += t->id_len[id];
    }
    uint8_t *raw = xmalloc(total + 1), *out;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id >= 0 && id < t->vocab_size && (t->id_flags[id] & ID_VALID) && !(skip_special && (t->id_flags[id] & ID_SPECIAL))) {
            memcpy(raw + o, t->blob + t->id_off[id], t->id_len[id]);
            o += t->id_len[id];
        }
    }
    if (tok_utf8_valid_prefix(raw, o) == o) {
        out = raw;
    } else {
        out = xmalloc(3 * o + 1);
        o = tok_utf8_lossy(raw, o, out, NULL);
        free(raw);
    }
    out[o] = 0;
    if (out_len) *out_len = o;
    return (char *)out;
}
