#!/usr/bin/env python3
"""Writes the valid seed files tests/t_fuzz.sh mutates, straight from the formats (not by gdn):
    make_seeds.py DIR  ->  DIR/seed.safetensors, seed.json (a small byte-level BPE with Llama 3's
    pre-tokenizer, post-processor and decoder), seed.parquet (one UTF8 column "text", plain encoding,
    uncompressed, written with the Thrift compact protocol here), seed.jsonl
The checkpoint, .idx/.bin, YAML and .pt seeds come from gdn train, tests/ref/make_dataset.py,
configs/tiny.yaml and tests/convert/fla_io.py."""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tokenizer"))
from byte_chars import byte_chars  # noqa: E402

d = sys.argv[1]

# ---- safetensors: three tensors of different dtypes, metadata
def safetensors(path):
    tensors = [("a.weight", "F32", [2, 3], struct.pack("<6f", *range(6))),
               ("b.bias", "BF16", [4], b"\x80\x3f" * 4), ("c", "I32", [1], struct.pack("<i", 7))]
    hdr, off, data = {"__metadata__": {"format": "pt", "note": "seed"}}, 0, b""
    for name, dt, shape, raw in tensors:
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        data += raw
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + data)


# ---- tokenizer.json: bytes, a few merges, two special tokens
def tokenizer(path):
    bt = byte_chars()
    vocab = {bt[b]: b for b in range(256)}
    merges = []
    for pair in ["Ġ t", "h e", "Ġt he", "Ġ a", "i n", "e r", "Ġ w", "o r", "l l", "Ġ 1", "1 2", "Ġ 12"]:
        a, b = pair.split(" ")
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
        merges.append(pair)
    bos, eos = len(vocab), len(vocab) + 1
    sp = lambda i, c: {"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                       "normalized": False, "special": True}
    regex = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
             "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
    tok = {"version": "1.0", "truncation": None, "padding": None,
           "added_tokens": [sp(bos, "<|begin_of_text|>"), sp(eos, "<|end_of_text|>")], "normalizer": None,
           "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
               {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
               {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
           "post_processor": {"type": "TemplateProcessing",
                              "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                                         {"Sequence": {"id": "A", "type_id": 0}}],
                              "pair": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                                       {"Sequence": {"id": "A", "type_id": 0}},
                                       {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 1}},
                                       {"Sequence": {"id": "B", "type_id": 1}}],
                              "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [bos],
                                                                      "tokens": ["<|begin_of_text|>"]}}},
           "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
                     "vocab": vocab, "merges": merges}}
    json.dump(tok, open(path, "w"), ensure_ascii=False)


# ---- Parquet, Thrift compact protocol (parquet.thrift field ids)
def varint(n):
    out = b""
    while True:
        if n < 0x80:
            return out + bytes([n])
        out += bytes([(n & 0x7F) | 0x80])
        n >>= 7


def zz(n):
    return varint((n << 1) ^ (n >> 63))


class S:  # a struct being written: fields in increasing id order
    def __init__(self):
        self.b, self.last = b"", 0

    def field(self, fid, ftype):
        delta = fid - self.last
        self.b += bytes([(delta << 4) | ftype]) if 0 < delta <= 15 else bytes([ftype]) + zz(fid)
        self.last = fid

    def i32(self, fid, v):
        self.field(fid, 5); self.b += zz(v); return self

    def i64(self, fid, v):
        self.field(fid, 6); self.b += zz(v); return self

    def str(self, fid, v):
        v = v.encode(); self.field(fid, 8); self.b += varint(len(v)) + v; return self

    def struct(self, fid, s):
        self.field(fid, 12); self.b += s.end(); return self

    def list(self, fid, etype, items):  # items: encoded element bytes
        self.field(fid, 9)
        self.b += bytes([(len(items) << 4) | etype]) if len(items) < 15 else bytes([0xF0 | etype]) + varint(len(items))
        self.b += b"".join(items); return self

    def end(self):
        return self.b + b"\x00"


def parquet(path, rows):
    values = b"".join(struct.pack("<i", len(r.encode())) + r.encode() for r in rows)  # PLAIN BYTE_ARRAY
    dph = S().i32(1, len(rows)).i32(2, 0).i32(3, 3).i32(4, 3)
    page = S().i32(1, 0).i32(2, len(values)).i32(3, len(values)).struct(5, dph).end() + values
    start = 4
    cmd = (S().i32(1, 6).list(2, 5, [zz(0), zz(3)]).list(3, 8, [varint(4) + b"text"]).i32(4, 0)
           .i64(5, len(rows)).i64(6, len(page)).i64(7, len(page)).i64(9, start))
    chunk = S().i64(2, start).struct(3, cmd)
    rg = S().list(1, 12, [chunk.end()]).i64(2, len(page)).i64(3, len(rows))
    root = S().str(4, "schema").i32(5, 1)
    col = S().i32(1, 6).i32(3, 0).str(4, "text").i32(6, 0)
    meta = (S().i32(1, 1).list(2, 12, [root.end(), col.end()]).i64(3, len(rows)).list(4, 12, [rg.end()])
            .str(6, "gdn.c tests/fuzz/make_seeds.py").end())
    open(path, "wb").write(b"PAR1" + page + meta + struct.pack("<i", len(meta)) + b"PAR1")


safetensors(f"{d}/seed.safetensors")
tokenizer(f"{d}/seed.json")
parquet(f"{d}/seed.parquet", ["The first document.", "", "caf\u00e9 \U0001F600 second", "third\nwith a newline"])
with open(f"{d}/seed.jsonl", "w") as f:
    for t in ["plain text", "escapes \\n \\t \\u00e9 \\ud83d\\ude00", "", "a \\\"quote\\\""]:
        f.write('{"id": 1, "text": "%s", "meta": {"k": [1, 2.5, null, true]}}\n' % t)
print("seeds written to", d)
