// tok_internal.h: the Tokenizer struct shared by tok_load.c (building it from tokenizer.json) and tokenizer.c
// (encoding and decoding with it). Not a public interface: use data/tokenizer.h.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "data/tok_bpe.h"
#include "data/tok_pretok.h"
#include "data/tokenizer.h"

enum { STEP_SPLIT, STEP_PREFIX_SPACE };
typedef struct {
    int kind;          // STEP_*
    TokSplitKind split; // for STEP_SPLIT
} PretokStep;

typedef struct {
    uint32_t off, len; // content in t->blob
    int32_t id;
    uint8_t single_word, lstrip, rstrip, normalized, special;
} AddedTok;

// Byte trie over added-token contents; leftmost-longest matching walks it from each candidate position.
typedef struct {
    int32_t first_child, sibling, added; // added: index into t->added, -1 if no token ends here
    uint8_t byte;
} TrieNode;
typedef struct {
    TrieNode *nodes;
    int n, cap;
    uint8_t first[256]; // bytes that start some token
    int n_first;
    uint8_t only_first; // the single first byte when n_first == 1 (memchr fast path)
} Trie;

enum { ID_VALID = 1, ID_ADDED = 2, ID_SPECIAL = 4 };

struct Tokenizer {
    int vocab_size;                // max id + 1
    uint32_t *id_off, *id_len;     // [vocab_size] decode bytes of each id in blob (NUL-terminated there)
    uint8_t *id_flags;             // [vocab_size] ID_*
    uint8_t *blob;
    TokStrMap vocab;               // raw bytes -> id (keys of the byte-level alphabet only)
    TokPairMap merges;             // (id_a, id_b) -> (rank, id_ab)
    int32_t byte_id[256];          // single-byte tokens, -1 if absent
    int ignore_merges, unk_id, fuse_unk;
    AddedTok *added;
    int n_added;
    Trie trie_raw, trie_normalized; // added tokens with normalized false / true
    PretokStep steps[8];
    int n_steps;
    int32_t *prefix_ids, *suffix_ids; // post-processor template around the text
    int n_prefix, n_suffix;
    int bos_id, eos_id;
    char sha256[65];
};
