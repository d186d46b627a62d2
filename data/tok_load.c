// tok_load.c: tok_load/tok_free: HF tokenizer.json -> the tables of tok_internal.h (spec data.md §1.1).
// Supported: normalizer null; pre_tokenizer ByteLevel or Sequence[Split(Llama-3 or GPT-2 regex, Isolated)...,
// ByteLevel]; model BPE without dropout, prefixes/suffixes or byte_fallback; post_processor TemplateProcessing,
// Roberta/BertProcessing, ByteLevel, Sequence of these, or null; decoder ByteLevel. Anything else is refused
// with the key that is not supported, rather than tokenized differently from HF. Truncation and padding (batch
// options of HF's encode, not tokenization) are ignored.
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "data/tok_internal.h"
#include "data/tok_sha256.h"
#include "util/common.h"

// ---- byte-level alphabet (§1.4) ---------------------------------------------------------------------------
static uint16_t byte_to_cp[256];
static int16_t cp_to_byte[0x144]; // alphabet code points are all < U+0144; -1 outside the alphabet

static void bytelevel_init(void) {
    int next = 0x100;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        byte_to_cp[b] = (uint16_t)(printable ? b : next++);
    }
    for (int c = 0; c < 0x144; c++) cp_to_byte[c] = -1;
    for (int b = 0; b < 256; b++) cp_to_byte[byte_to_cp[b]] = (int16_t)b;
}

// Byte-level string -> raw bytes. Returns the byte count, or -1 if some character is outside the alphabet
// (HF's ByteLevel decoder then keeps that token's UTF-8 as is). out needs room for n bytes.
static long bytelevel_decode(const char *s, size_t n, uint8_t *out) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t l = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (l <= 0 || cp >= 0x144 || cp_to_byte[cp] < 0) return -1;
        out[o++] = (uint8_t)cp_to_byte[cp];
        i += (size_t)l;
    }
    return (long)o;
}

// ---- loading helpers --------------------------------------------------------------------------------------
typedef struct {
    const char *path;
    char *err;
    size_t errlen;
} LoadCtx;

#define LOAD_ERR(ctx, ...) load_err(ctx, __VA_ARGS__)
__attribute__((format(printf, 2, 3))) static int load_err(LoadCtx *c, const char *fmt, ...) {
    char msg[ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return set_err(c->err, c->errlen, "%s: %s", c->path, msg);
}

static const char *json_type_name(const cJSON *j) {
    if (!j) return "nothing";
    if (cJSON_IsNull(j)) return "null";
    if (cJSON_IsBool(j)) return "a boolean";
    if (cJSON_IsNumber(j)) return "a number";
    if (cJSON_IsString(j)) return "a string";
    if (cJSON_IsArray(j)) return "an array";
    return "an object";
}

// Optional boolean: absent or null -> def. -1 if present with another type.
static int json_bool(LoadCtx *c, const cJSON *obj, const char *where, const char *key, int def, int *out) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!j || cJSON_IsNull(j)) return *out = def, 0;
    if (!cJSON_IsBool(j)) return LOAD_ERR(c, "%s.%s: expected true or false, found %s", where, key, json_type_name(j));
    *out = cJSON_IsTrue(j);
    return 0;
}

static int json_id(const cJSON *j, int32_t *out) {
    if (!cJSON_IsNumber(j) || j->valuedouble < 0 || j->valuedouble > 2147483647.0 || j->valuedouble != (double)(int32_t)j->valuedouble)
        return -1;
    *out = (int32_t)j->valuedouble;
    return 0;
}

static const char *json_type(const cJSON *obj) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, "type");
    return cJSON_IsString(j) ? j->valuestring : NULL;
}

static void blob_put(Buf *b, const void *p, size_t n) {
    buf_put(b, p, n);
    buf_put(b, "", 1); // NUL after each entry so tok_token_bytes can hand out C strings
}

// ---- added-token tries ------------------------------------------------------------------------------------
static int trie_node(Trie *tr, uint8_t byte) {
    if (tr->n == tr->cap) {
        tr->cap = tr->cap ? tr->cap * 2 : 64;
        tr->nodes = xrealloc(tr->nodes, (size_t)tr->cap * sizeof *tr->nodes);
    }
    tr->nodes[tr->n] = (TrieNode){-1, -1, -1, byte};
    return tr->n++;
}

static void trie_add(Trie *tr, const uint8_t *s, size_t n, int added_index) {
    if (!tr->n) trie_node(tr, 0);
    int node = 0;
    for (size_t i = 0; i < n; i++) {
        int c = tr->nodes[node].first_child;
        while (c >= 0 && tr->nodes[c].byte != s[i]) c = tr->nodes[c].sibling;
        if (c < 0) {
            c = trie_node(tr, s[i]);
            tr->nodes[c].sibling = tr->nodes[node].first_child;
            tr->nodes[node].first_child = c;
        }
        node = c;
    }
    // Two added tokens with the same content: HF keeps one id per content; the later entry wins.
    tr->nodes[node].added = added_index;
    if (!tr->first[s[0]]) tr->first[s[0]] = 1, tr->n_first++, tr->only_first = s[0];
}


// ---- loading: sections ------------------------------------------------------------------------------------
static int load_normalizer(LoadCtx *c, const cJSON *root) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    if (!n || cJSON_IsNull(n)) return 0;
    const char *type = json_type(n);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "normalizers");
    if (type && !strcmp(type, "Sequence") && cJSON_IsArray(list) && cJSON_GetArraySize(list) == 0) return 0;
    return LOAD_ERR(c, "normalizer: type %s is not supported (only null: byte-level BPE files have no normalizer)",
                    type ? type : "(missing)");
}

static int add_bytelevel_steps(LoadCtx *c, Tokenizer *t, const cJSON *bl, const char *where) {
    int prefix = 0, use_regex = 0;
    if (json_bool(c, bl, where, "add_prefix_space", 1, &prefix) || json_bool(c, bl, where, "use_regex", 1, &use_regex))
        return -1;
    if (prefix) t->steps[t->n_steps++] = (PretokStep){STEP_PREFIX_SPACE, 0};
    if (use_regex) t->steps[t->n_steps++] = (PretokStep){STEP_SPLIT, TOK_SPLIT_GPT2};
    return 0;
}

static int load_split(LoadCtx *c, Tokenizer *t, const cJSON *sp, const char *where) {
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(sp, "pattern");
    const cJSON *re = pat ? cJSON_GetObjectItemCaseSensitive(pat, "Regex") : NULL;
    const cJSON *behavior = cJSON_GetObjectItemCaseSensitive(sp, "behavior");
    int invert = 0;
    if (json_bool(c, sp, where, "invert", 0, &invert)) return -1;
    if (!cJSON_IsString(re))
        return LOAD_ERR(c, "%s.pattern: expected {\"Regex\": \"...\"} (string patterns are not supported)", where);
    if (!cJSON_IsString(behavior) || strcmp(behavior->valuestring, "Isolated") || invert)
        return LOAD_ERR(c, "%s: only behavior \"Isolated\" with invert false is supported", where);
    TokSplitKind kind;
    if (!strcmp(re->valuestring, TOK_PATTERN_LLAMA3)) kind = TOK_SPLIT_LLAMA3;
    else if (!strcmp(re->valuestring, TOK_PATTERN_GPT2)) kind = TOK_SPLIT_GPT2;
    else
        return LOAD_ERR(c, "%s.pattern.Regex: unsupported regex (the Llama-3 and GPT-2 patterns are built in as state "
                           "machines): %.120s", where, re->valuestring);
    t->steps[t->n_steps++] = (PretokStep){STEP_SPLIT, kind};
    return 0;
}

static int load_pre_tokenizer(LoadCtx *c, Tokenizer *t, const cJSON *root) {
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    const char *type = pt ? json_type(pt) : NULL;
    if (!type) return LOAD_ERR(c, "pre_tokenizer: expected ByteLevel or Sequence[..., ByteLevel], found %s", json_type_name(pt));
    if (!strcmp(type, "ByteLevel")) return add_bytelevel_steps(c, t, pt, "pre_tokenizer");
    if (strcmp(type, "Sequence"))
        return LOAD_ERR(c, "pre_tokenizer: type %s is not supported (expected ByteLevel or Sequence)", type);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(pt, "pretokenizers");
    int n = cJSON_GetArraySize(list);
    if (!cJSON_IsArray(list) || n == 0) return LOAD_ERR(c, "pre_tokenizer.pretokenizers: expected a non-empty array");
    int i = 0;
    for (const cJSON *item = list->child; item; item = item->next, i++) {
        const char *it = json_type(item);
        char where[64];
        snprintf(where, sizeof where, "pre_tokenizer.pretokenizers[%d]", i);
        // ByteLevel maps text to its byte-level alphabet, so it has to come last.
        if (it && !strcmp(it, "ByteLevel") && i == n - 1) {
            if (add_bytelevel_steps(c, t, item, where)) return -1;
        } else if (it && !strcmp(it, "Split") && i < n - 1 && t->n_steps < 4) {
            if (load_split(c, t, item, where)) return -1;
        } else {
            return LOAD_ERR(c, "%s: %s is not supported here (expected Split... then ByteLevel last)", where,
                            it ? it : "an item without type");
        }
    }
    return 0;
}

static int load_decoder(LoadCtx *c, const cJSON *root) {
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "decoder");
    const char *type = d ? json_type(d) : NULL;
    if (type && !strcmp(type, "ByteLevel")) return 0;
    return LOAD_ERR(c, "decoder: expected type ByteLevel, found %s", type ? type : json_type_name(d));
}

// Merges: "A B" strings (or ["A", "B"] pairs in newer files); rank = index. Handled in batches so that the
// ~840k vocab lookups of a Llama-3 file overlap their cache misses (tok_strmap_get_many).
#define MERGE_BATCH 64
static int load_merges(LoadCtx *c, Tokenizer *t, const cJSON *merges) {
    struct {
        const char *a, *b; // the JSON strings, for messages
        int rank;
        uint32_t off, na, nb; // A's bytes then B's bytes at batch.p + off
    } pending[MERGE_BATCH];
    TokLookup q[3 * MERGE_BATCH];
    Buf batch = {0};
    int n = 0, r = 0, rc = 0;
    tok_pairmap_init(&t->merges, (size_t)cJSON_GetArraySize(merges));
    char syntax_err[256] = ""; // a malformed entry is reported after the merges before it were checked
    for (const cJSON *m = merges->child;; m = m->next, r++) { // (cJSON_GetArrayItem would walk the list each time)
        if (m) {
            const char *a = NULL, *b = NULL;
            size_t la = 0, lb = 0;
            if (cJSON_IsString(m)) {
                const char *sp = strchr(m->valuestring, ' ');
                if (!sp || sp == m->valuestring || !sp[1] || strchr(sp + 1, ' '))
                    snprintf(syntax_err, sizeof syntax_err, "model.merges[%d]: expected \"A B\" (two tokens, one space), "
                             "found \"%.60s\"", r, m->valuestring);
                else a = m->valuestring, la = (size_t)(sp - a), b = sp + 1, lb = strlen(b);
            } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) &&
                       cJSON_IsString(m->child->next)) {
                a = m->child->valuestring, la = strlen(a), b = m->child->next->valuestring, lb = strlen(b);
            } else {
                snprintf(syntax_err, sizeof syntax_err, "model.merges[%d]: expected \"A B\" or [\"A\", \"B\"], found %s",
                         r, json_type_name(m));
            }
            if (syntax_err[0]) m = NULL; // stop reading; check what is pending first
            else {
                size_t off = batch.n;
                if (batch.cap < off + la + lb) { // room for both decoded parts (never longer than the JSON text)
                    batch.cap = 2 * (off + la + lb) + 256;
                    batch.p = xrealloc(batch.p, batch.cap);
                }
                long na = bytelevel_decode(a, la, (uint8_t *)batch.p + off);
                long nb = na >= 0 ? bytelevel_decode(b, lb, (uint8_t *)batch.p + off + na) : -1;
                // A merge of tokens outside the byte-level alphabet can never apply to byte symbols: skip it.
                if (na >= 0 && nb >= 0) {
                    batch.n = off + (size_t)(na + nb);
                    pending[n].a = a, pending[n].b = b, pending[n].rank = r;
                    pending[n].off = (uint32_t)off, pending[n].na = (uint32_t)na, pending[n].nb = (uint32_t)nb;
                    n++;
                }
            }
        }
        if (n == MERGE_BATCH || (!m && n)) {
            for (int i = 0; i < n; i++) {
                const uint8_t *p = (const uint8_t *)batch.p + pending[i].off;
                q[3 * i] = (TokLookup){p, pending[i].na, 0, -1};
                q[3 * i + 1] = (TokLookup){p + pending[i].na, pending[i].nb, 0, -1};
                q[3 * i + 2] = (TokLookup){p, pending[i].na + pending[i].nb, 0, -1};
            }
            tok_strmap_get_many(&t->vocab, q, 3 * (size_t)n);
            for (int i = 0; i < n && !rc; i++) {
                if (q[3 * i].id < 0 || q[3 * i + 1].id < 0 || q[3 * i + 2].id < 0)
                    rc = LOAD_ERR(c, "model.merges[%d]: \"%.40s\" + \"%.40s\": %s is not in model.vocab", pending[i].rank,
                                  pending[i].a, pending[i].b,
                                  q[3 * i].id < 0 ? "the first token" : q[3 * i + 1].id < 0 ? "the second token" : "the merged token");
                else tok_pairmap_prefetch(&t->merges, q[3 * i].id, q[3 * i + 1].id);
            }
            if (rc) break;
            for (int i = 0; i < n; i++) tok_pairmap_put(&t->merges, q[3 * i].id, q[3 * i + 1].id, (uint32_t)pending[i].rank, q[3 * i + 2].id);
            n = 0, batch.n = 0;
        }
        if (!m) break;
    }
    if (!rc && syntax_err[0]) rc = LOAD_ERR(c, "%s", syntax_err);
    buf_free(&batch);
    return rc;
}

// Vocab, merges, options of the BPE model; fills the id tables for regular tokens into blob.
static int load_model(LoadCtx *c, Tokenizer *t, const cJSON *model, Buf *blob, int32_t max_id) {
    const char *type = json_type(model);
    if (type && strcmp(type, "BPE")) return LOAD_ERR(c, "model.type: %s is not supported (only BPE)", type);
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!cJSON_IsObject(vocab)) return LOAD_ERR(c, "model.vocab: expected an object {token: id}, found %s", json_type_name(vocab));
    if (!cJSON_IsArray(merges)) return LOAD_ERR(c, "model.merges: expected an array, found %s", json_type_name(merges));
    const cJSON *dropout = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    if (dropout && !cJSON_IsNull(dropout)) return LOAD_ERR(c, "model.dropout: BPE dropout is not supported (expected null)");
    const char *affix_keys[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(model, affix_keys[i]);
        if (j && !cJSON_IsNull(j) && !(cJSON_IsString(j) && !j->valuestring[0]))
            return LOAD_ERR(c, "model.%s: not supported with byte-level BPE (expected null)", affix_keys[i]);
    }
    int byte_fallback = 0;
    if (json_bool(c, model, "model", "byte_fallback", 0, &byte_fallback) ||
        json_bool(c, model, "model", "ignore_merges", 0, &t->ignore_merges) ||
        json_bool(c, model, "model", "fuse_unk", 0, &t->fuse_unk))
        return -1;
    if (byte_fallback) return LOAD_ERR(c, "model.byte_fallback: true is not supported (byte-level BPE has every byte)");

    // Regular tokens: decode bytes per id; the byte-level ones also become encode keys.
    uint8_t *tmp = xmalloc(4096);
    size_t tmp_cap = 4096;
    int n_vocab = cJSON_GetArraySize(vocab);
    uint32_t *key_off = xmalloc((size_t)(n_vocab ? n_vocab : 1) * sizeof *key_off);
    uint32_t *key_len = xmalloc((size_t)(n_vocab ? n_vocab : 1) * sizeof *key_len);
    int32_t *key_id = xmalloc((size_t)(n_vocab ? n_vocab : 1) * sizeof *key_id);
    int n_keys = 0, rc = 0;
    for (const cJSON *e = vocab->child; e; e = e->next) {
        int32_t id;
        if (json_id(e, &id) || id > max_id) {
            rc = LOAD_ERR(c, "model.vocab[\"%.60s\"]: expected a non-negative integer id, found %s", e->string, json_type_name(e));
            goto done;
        }
        size_t n = strlen(e->string);
        if (n > tmp_cap) tmp = xrealloc(tmp, tmp_cap = n);
        long nb = bytelevel_decode(e->string, n, tmp);
        uint32_t off = (uint32_t)blob->n;
        if (nb >= 0) blob_put(blob, tmp, (size_t)nb);
        else blob_put(blob, e->string, n);
        if (!(t->id_flags[id] & ID_VALID)) { // a repeated id keeps its first token for decoding
            t->id_off[id] = off, t->id_len[id] = nb >= 0 ? (uint32_t)nb : (uint32_t)n;
            t->id_flags[id] = ID_VALID;
        }
        if (nb >= 0) key_off[n_keys] = off, key_len[n_keys] = (uint32_t)nb, key_id[n_keys++] = id;
    }
    // The blob is complete only now (it may have moved while growing): build the key map over it.
    tok_strmap_init(&t->vocab, (size_t)n_keys, (const uint8_t *)blob->p);
    for (int i = 0; i < n_keys; i++) tok_strmap_put(&t->vocab, key_off[i], key_len[i], key_id[i]);
    for (int b = 0; b < 256; b++) {
        uint8_t byte = (uint8_t)b;
        t->byte_id[b] = tok_strmap_get(&t->vocab, &byte, 1);
    }

    if (load_merges(c, t, merges)) {
        rc = -1;
        goto done;
    }

    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
    t->unk_id = -1;
    if (cJSON_IsString(unk)) {
        const cJSON *u = cJSON_GetObjectItemCaseSensitive(vocab, unk->valuestring);
        if (!u || json_id(u, &t->unk_id)) {
            rc = LOAD_ERR(c, "model.unk_token: \"%.60s\" is not in model.vocab", unk->valuestring);
            goto done;
        }
    }
done:
    free(tmp);
    free(key_off);
    free(key_len);
    free(key_id);
    return rc;
}

static int load_added_tokens(LoadCtx *c, Tokenizer *t, const cJSON *list, Buf *blob) {
    int n = cJSON_GetArraySize(list);
    t->added = xcalloc((size_t)(n ? n : 1), sizeof *t->added);
    int i = 0;
    for (const cJSON *a = list->child; a; a = a->next, i++) {
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(a, "content");
        char where[48];
        snprintf(where, sizeof where, "added_tokens[%d]", i);
        AddedTok *at = &t->added[t->n_added];
        int flags[5] = {0}; // zeroed: gcc cannot see that json_bool sets each on success
        if (json_id(cJSON_GetObjectItemCaseSensitive(a, "id"), &at->id))
            return LOAD_ERR(c, "%s.id: expected a non-negative integer", where);
        if (!cJSON_IsString(content)) return LOAD_ERR(c, "%s.content: expected a string", where);
        if (json_bool(c, a, where, "single_word", 0, &flags[0]) || json_bool(c, a, where, "lstrip", 0, &flags[1]) ||
            json_bool(c, a, where, "rstrip", 0, &flags[2]) || json_bool(c, a, where, "normalized", 1, &flags[3]) ||
            json_bool(c, a, where, "special", 0, &flags[4]))
            return -1;
        if (!content->valuestring[0]) continue; // HF ignores empty added tokens
        at->single_word = (uint8_t)flags[0], at->lstrip = (uint8_t)flags[1], at->rstrip = (uint8_t)flags[2];
        at->normalized = (uint8_t)flags[3], at->special = (uint8_t)flags[4];
        size_t len = strlen(content->valuestring);
        if (at->id >= t->vocab_size) return LOAD_ERR(c, "%s.id: %d is out of range", where, (int)at->id);
        at->off = (uint32_t)blob->n, at->len = (uint32_t)len;
        blob_put(blob, content->valuestring, len);
        // Decoding bytes: HF runs the ByteLevel decoder over added tokens too (identity for ASCII names).
        uint8_t *tmp = xmalloc(len);
        long nb = bytelevel_decode(content->valuestring, len, tmp);
        t->id_off[at->id] = at->off, t->id_len[at->id] = (uint32_t)len;
        if (nb >= 0 && ((size_t)nb != len || memcmp(tmp, content->valuestring, len))) {
            t->id_off[at->id] = (uint32_t)blob->n, t->id_len[at->id] = (uint32_t)nb;
            blob_put(blob, tmp, (size_t)nb);
        }
        free(tmp);
        t->id_flags[at->id] = (uint8_t)(ID_VALID | ID_ADDED | (at->special ? ID_SPECIAL : 0));
        t->n_added++;
    }
    return 0;
}

// Post-processor: the single-sequence template becomes prefix/suffix id lists.
static int add_template_ids(LoadCtx *c, const cJSON *special_tokens, const char *name, const char *where,
                            int32_t **ids, int *n) {
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(special_tokens, name);
    const cJSON *list = st ? cJSON_GetObjectItemCaseSensitive(st, "ids") : NULL;
    if (!cJSON_IsArray(list)) return LOAD_ERR(c, "%s: special token \"%.60s\" has no ids in special_tokens", where, name);
    for (const cJSON *e = list->child; e; e = e->next) {
        *ids = xrealloc(*ids, (size_t)(*n + 1) * sizeof **ids);
        if (json_id(e, &(*ids)[*n])) return LOAD_ERR(c, "%s: special_tokens[\"%.60s\"].ids: expected integers", where, name);
        (*n)++;
    }
    return 0;
}

static int load_post_processor(LoadCtx *c, Tokenizer *t, const cJSON *pp, const char *where) {
    if (!pp || cJSON_IsNull(pp)) return 0;
    const char *type = json_type(pp);
    if (type && !strcmp(type, "ByteLevel")) return 0; // only adjusts offsets
    if (type && !strcmp(type, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(pp, "processors");
        int i = 0;
        for (const cJSON *e = cJSON_IsArray(list) ? list->child : NULL; e; e = e->next, i++) {
            char w[96];
            snprintf(w, sizeof w, "%s.processors[%d]", where, i);
            if (load_post_processor(c, t, e, w)) return -1;
        }
        return 0;
    }
    if (type && (!strcmp(type, "RobertaProcessing") || !strcmp(type, "BertProcessing"))) {
        const cJSON *cls = cJSON_GetObjectItemCaseSensitive(pp, "cls"), *sep = cJSON_GetObjectItemCaseSensitive(pp, "sep");
        int32_t cls_id, sep_id;
        if (!cJSON_IsArray(cls) || json_id(cJSON_GetArrayItem(cls, 1), &cls_id) || !cJSON_IsArray(sep) ||
            json_id(cJSON_GetArrayItem(sep, 1), &sep_id))
            return LOAD_ERR(c, "%s: expected cls and sep as [\"token\", id]", where);
        if (t->n_prefix || t->n_suffix) return LOAD_ERR(c, "%s: more than one processor adds special tokens", where);
        t->prefix_ids = xmalloc(sizeof(int32_t)), t->suffix_ids = xmalloc(sizeof(int32_t));
        t->prefix_ids[t->n_prefix++] = cls_id, t->suffix_ids[t->n_suffix++] = sep_id;
        return 0;
    }
    if (!type || strcmp(type, "TemplateProcessing"))
        return LOAD_ERR(c, "%s: type %s is not supported (TemplateProcessing, RobertaProcessing, ByteLevel, Sequence)",
                        where, type ? type : "(missing)");
    if (t->n_prefix || t->n_suffix) return LOAD_ERR(c, "%s: more than one processor adds special tokens", where);
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(pp, "single");
    const cJSON *special = cJSON_GetObjectItemCaseSensitive(pp, "special_tokens");
    if (!cJSON_IsArray(single)) return LOAD_ERR(c, "%s.single: expected an array of pieces", where);
    int seen_sequence = 0;
    for (const cJSON *e = single->child; e; e = e->next) {
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(e, "SpecialToken");
        const cJSON *seq = cJSON_GetObjectItemCaseSensitive(e, "Sequence");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(sp ? sp : seq, "id");
        if (sp && cJSON_IsString(id)) {
            if (add_template_ids(c, special, id->valuestring, where, seen_sequence ? &t->suffix_ids : &t->prefix_ids,
                                 seen_sequence ? &t->n_suffix : &t->n_prefix))
                return -1;
        } else if (seq && cJSON_IsString(id) && !strcmp(id->valuestring, "A") && !seen_sequence) {
            seen_sequence = 1;
        } else {
            return LOAD_ERR(c, "%s.single: expected {\"SpecialToken\": {\"id\": ...}} items around one {\"Sequence\": "
                               "{\"id\": \"A\"}}", where);
        }
    }
    if (!seen_sequence) return LOAD_ERR(c, "%s.single: the template has no {\"Sequence\": {\"id\": \"A\"}}", where);
    return 0;
}

// Pretty error for malformed JSON: line and column of where cJSON stopped.
static int json_syntax_err(LoadCtx *c, const char *text, const char *stop) {
    int line = 1, col = 1;
    for (const char *p = text; p < stop; p++) {
        if (*p == '\n') line++, col = 1;
        else col++;
    }
    return LOAD_ERR(c, "malformed JSON at line %d, column %d", line, col);
}

Tokenizer *tok_load(const char *path, char *err, size_t errlen) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, bytelevel_init);
    tok_unicode_init();
    LoadCtx c = {path, err, errlen};
    size_t len;
    char *text = read_file(path, &len, err, errlen);
    if (!text) return NULL;
    const char *stop = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &stop, 0);
    while (root && stop && stop < text + len && strchr(" \t\r\n", *stop) && *stop) stop++;
    if (!root || (stop && stop < text + len)) { // a syntax error, or something after the top-level value
        json_syntax_err(&c, text, stop ? stop : text);
        cJSON_Delete(root);
        free(text);
        return NULL;
    }
    Tokenizer *t = xcalloc(1, sizeof *t);
    tok_sha256_hex(text, len, t->sha256);
    t->bos_id = t->eos_id = t->unk_id = -1;
    Buf blob = {0};
    int rc = -1;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    const cJSON *vocab = model ? cJSON_GetObjectItemCaseSensitive(model, "vocab") : NULL;
    if (!cJSON_IsObject(root)) { LOAD_ERR(&c, "expected a JSON object at the top level"); goto out; }
    if (!cJSON_IsObject(model)) { LOAD_ERR(&c, "model: expected an object, found %s", json_type_name(model)); goto out; }
    if (added && !cJSON_IsNull(added) && !cJSON_IsArray(added)) { LOAD_ERR(&c, "added_tokens: expected an array"); goto out; }
    if (load_normalizer(&c, root) || load_pre_tokenizer(&c, t, root) || load_decoder(&c, root)) goto out;

    const char *model_type = json_type(model);
    if (model_type && strcmp(model_type, "BPE")) { LOAD_ERR(&c, "model.type: %s is not supported (only BPE)", model_type); goto out; }
    if (!cJSON_IsObject(vocab)) { LOAD_ERR(&c, "model.vocab: expected an object {token: id}, found %s", json_type_name(vocab)); goto out; }
    // Size the id tables: the largest id among regular and added tokens.
    // Ids are bounded by the number of entries (with room for holes: ids are table indices, so one stray
    // huge id would otherwise allocate gigabytes, and INT32_MAX would overflow max_id + 1).
    int32_t max_id = -1, id;
    long n_entries = cJSON_GetArraySize(vocab) + (cJSON_IsArray(added) ? cJSON_GetArraySize(added) : 0);
    long id_limit = 2 * n_entries + 1024; // ids must be below this
    for (const cJSON *e = vocab->child; e; e = e->next) {
        if (json_id(e, &id)) {
            LOAD_ERR(&c, "model.vocab[\"%.60s\"]: expected a non-negative integer id, found %s", e->string,
                     cJSON_IsNumber(e) ? "another number" : json_type_name(e));
            goto out;
        }
        if (id >= id_limit) {
            LOAD_ERR(&c, "model.vocab[\"%.60s\"]: id %d is far beyond the vocabulary (%ld tokens in all; ids must be below %ld)",
                     e->string, (int)id, n_entries, id_limit);
            goto out;
        }
        if (id > max_id) max_id = id;
    }
    int ai = 0;
    for (const cJSON *e = cJSON_IsArray(added) ? added->child : NULL; e; e = e->next, ai++) {
        if (json_id(cJSON_GetObjectItemCaseSensitive(e, "id"), &id)) continue; // load_added_tokens names it
        if (id >= id_limit) {
            LOAD_ERR(&c, "added_tokens[%d]: id %d is far beyond the vocabulary (%ld tokens in all; ids must be below %ld)",
                     ai, (int)id, n_entries, id_limit);
            goto out;
        }
        if (id > max_id) max_id = id;
    }
    if (max_id < 0) { LOAD_ERR(&c, "model.vocab: no tokens"); goto out; }
    t->vocab_size = max_id + 1;
    t->id_off = xcalloc((size_t)t->vocab_size, sizeof *t->id_off);
    t->id_len = xcalloc((size_t)t->vocab_size, sizeof *t->id_len);
    t->id_flags = xcalloc((size_t)t->vocab_size, 1);
    if (load_model(&c, t, model, &blob, max_id)) goto out;
    if (cJSON_IsArray(added) && load_added_tokens(&c, t, added, &blob)) goto out;
    if (load_post_processor(&c, t, cJSON_GetObjectItemCaseSensitive(root, "post_processor"), "post_processor")) goto out;
    for (int i = 0; i < t->n_prefix + t->n_suffix; i++) {
        int32_t pid = i < t->n_prefix ? t->prefix_ids[i] : t->suffix_ids[i - t->n_prefix];
        if (pid >= t->vocab_size) { LOAD_ERR(&c, "post_processor: id %d is outside the vocabulary", (int)pid); goto out; }
    }
    rc = 0;
out:
    if (rc) {
        cJSON_Delete(root);
        free(text);
        buf_free(&blob);
        tok_free(t);
        return NULL;
    }
    // Everything refers to blob by offset; now that it is final, point the tables at it.
    t->blob = (uint8_t *)blob.p;
    t->vocab.blob = t->blob;
    for (int i = 0; i < t->n_added; i++) {
        const AddedTok *at = &t->added[i];
        trie_add(at->normalized ? &t->trie_normalized : &t->trie_raw, t->blob + at->off, at->len, i);
    }
    t->bos_id = t->n_prefix ? t->prefix_ids[0] : -1;
    // EOS / Megatron EOD: the end-of-text special token under its usual names.
    static const char *const eos_names[] = {"<|end_of_text|>", "<|endoftext|>", "</s>"};
    for (size_t k = 0; k < sizeof eos_names / sizeof eos_names[0] && t->eos_id < 0; k++)
        for (int i = 0; i < t->n_added; i++)
            if (t->added[i].special && t->added[i].len == strlen(eos_names[k]) &&
                !memcmp(t->blob + t->added[i].off, eos_names[k], t->added[i].len)) {
                t->eos_id = t->added[i].id;
                break;
            }
    cJSON_Delete(root);
    free(text);
    return t;
}

void tok_free(Tokenizer *t) {
    if (!t) return;
    free(t->id_off);
    free(t->id_len);
    free(t->id_flags);
    free(t->blob);
    tok_strmap_free(&t->vocab);
    tok_pairmap_free(&t->merges);
    free(t->added);
    free(t->trie_raw.nodes);
    free(t->trie_normalized.nodes);
    free(t->prefix_ids);
    free(t->suffix_ids);
    free(t);
}
