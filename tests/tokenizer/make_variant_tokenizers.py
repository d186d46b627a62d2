#!/usr/bin/env python3
"""Writes small GPT-2-style tokenizer.json variants for the tokenizer tests, derived from the Llama-3 file:
256 byte tokens (GPT-2's id order) plus the tokens of Llama-3's first N_MERGES merges (a BPE merge only uses
tokens made by earlier merges, so any prefix of the list is a complete table).

Usage: make_variant_tokenizers.py LLAMA3_TOKENIZER_JSON OUT_DIR
Writes OUT_DIR/{gpt2,roberta,split,unk,dropbytes}.json:
  gpt2       pre_tokenizer ByteLevel (GPT-2 regex, no prefix space), <|endoftext|> special + normalized (as GPT-2)
  roberta    ByteLevel with add_prefix_space, RobertaProcessing <s> ... </s>, <mask> with lstrip, a non-special
             added token "hello world", a single_word token "cat"
  split      Sequence[Split(GPT-2 regex), ByteLevel(add_prefix_space, use_regex false)], merges as [A, B] pairs,
             ignore_merges with unreachable whole-word tokens, TemplateProcessing <|bos|> $A <|eos|>, rstrip token
  unk        bytes F0..F4 have no token; unk_token <unk> with fuse_unk
  dropbytes  bytes F0..F4 have no token and there is no unk token (HF drops such bytes)
  llama_seqpost  the Llama-3 file itself with the post-processor written as the real Llama-3.2 file has it:
             Sequence[ByteLevel, TemplateProcessing]
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from byte_chars import byte_chars  # noqa: E402

N_MERGES = 6000
src, out_dir = sys.argv[1], sys.argv[2]
with open(src, encoding="utf-8") as f:
    llama = json.load(f)


B2C = byte_chars()
BYTE_ORDER = [B2C[b] for b in list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))]
BYTE_ORDER += [c for c in B2C.values() if c not in BYTE_ORDER]


def base(drop_bytes=()):
    dropped = {B2C[b] for b in drop_bytes}
    vocab = {}
    for c in BYTE_ORDER:
        if c not in dropped:
            vocab[c] = len(vocab)
    merges = []
    for m in llama["model"]["merges"][:N_MERGES]:
        a, b = m.split(" ") if isinstance(m, str) else m
        if a in vocab and b in vocab:
            merges.append([a, b])
            vocab.setdefault(a + b, len(vocab))
    return vocab, merges


def added(id_, content, special=True, normalized=False, lstrip=False, rstrip=False, single_word=False):
    return {"id": id_, "content": content, "single_word": single_word, "lstrip": lstrip, "rstrip": rstrip,
            "normalized": normalized, "special": special}


def tokenizer(vocab, merges, pre, post, added_tokens, merges_as_pairs=False, **model_opts):
    model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
             "merges": merges if merges_as_pairs else [f"{a} {b}" for a, b in merges]}
    model.update(model_opts)
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added_tokens, "normalizer": None,
            "pre_tokenizer": pre, "post_processor": post,
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": model}


GPT2_RE = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
bytelevel = lambda prefix, regex: {"type": "ByteLevel", "add_prefix_space": prefix, "trim_offsets": True, "use_regex": regex}
out = {}

v, m = base()
v["<|endoftext|>"] = len(v)  # GPT-2 has it in the vocab and as an added token
out["gpt2"] = tokenizer(v, m, bytelevel(False, True), bytelevel(True, False),
                        [added(v["<|endoftext|>"], "<|endoftext|>", special=True, normalized=True)])

v, m = base()
ids = {}
for name in ["<s>", "</s>", "<mask>", "hello world", "cat"]:
    ids[name] = v[name] = len(v)
out["roberta"] = tokenizer(
    v, m, bytelevel(True, True),
    {"type": "RobertaProcessing", "sep": ["</s>", ids["</s>"]], "cls": ["<s>", ids["<s>"]], "trim_offsets": True,
     "add_prefix_space": True},
    [added(ids["<s>"], "<s>"), added(ids["</s>"], "</s>"), added(ids["<mask>"], "<mask>", lstrip=True),
     added(ids["hello world"], "hello world", special=False, normalized=True),
     added(ids["cat"], "cat", special=False, normalized=False, single_word=True)])

v, m = base()
for w in ["zebra", "Ġtokenization", "Ġunreachable", "Ġsupercalifragilistic", "ĠĠĠĠĠĠĠĠ", "1234"]:
    v.setdefault(w, len(v))  # whole-word entries that merges do not build: only ignore_merges reaches them
ids = {}
for name in ["<|bos|>", "<|eos|>", "<sep>"]:
    ids[name] = len(v) + len(ids)
out["split"] = tokenizer(
    v, m,
    {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": GPT2_RE}, "behavior": "Isolated", "invert": False},
        bytelevel(True, False)]},
    {"type": "TemplateProcessing",
     "single": [{"SpecialToken": {"id": "<|bos|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": "<|eos|>", "type_id": 0}}],
     "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
     "special_tokens": {n: {"id": n, "ids": [i], "tokens": [n]} for n, i in ids.items() if n != "<sep>"}},
    [added(i, n, rstrip=(n == "<sep>")) for n, i in ids.items()], merges_as_pairs=True, ignore_merges=True)

v, m = base(drop_bytes=range(0xF0, 0xF5))
v["<unk>"] = len(v)
out["unk"] = tokenizer(v, m, bytelevel(False, True), None, [added(v["<unk>"], "<unk>")], unk_token="<unk>",
                       fuse_unk=True)
v, m = base(drop_bytes=range(0xF0, 0xF5))
out["dropbytes"] = tokenizer(v, m, bytelevel(False, True), None, [])

seqpost = dict(llama)
seqpost["post_processor"] = {"type": "Sequence", "processors": [
    {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True}, llama["post_processor"]]}
out["llama_seqpost"] = seqpost

os.makedirs(out_dir, exist_ok=True)
for name, j in out.items():
    with open(os.path.join(out_dir, name + ".json"), "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False)
print(f"make_variant_tokenizers: {', '.join(out)} -> {out_dir}", file=sys.stderr)
