#!/usr/bin/env python3
"""Bad-input fixtures for tests/t_reliability.sh, written from the formats (not by gdn):
  tokenizers DIR      DIR/tok_{bigid,hugeid,allspecial}.json: an added token with id 2**31-1, one with id 999999999,
                      and an 8-token tokenizer whose every token is special (<|s0|> .. <|s7|>)
  st-nul FILE         a safetensors file with one tensor named "a\\u0000b"
  set-meta FILE K V   rewrites FILE's __metadata__[K] = V (a safetensors file; tensors kept)"""
import json
import struct
import sys


BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}


def tokenizer(vocab, added):
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
            "pre_tokenizer": BYTE_LEVEL, "post_processor": None, "decoder": BYTE_LEVEL,
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                      "merges": []}}


def special(i, content):
    return {"id": i, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": True}


def st_read(path):
    raw = open(path, "rb").read()
    n, = struct.unpack_from("<Q", raw, 0)
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def st_write(path, header_text, data):
    h = header_text.encode()
    h += b" " * (-len(h) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + data)


def main():
    a = sys.argv[1:]
    if a[0] == "tokenizers":
        d = a[1]
        base = {"a": 0, "b": 1, "c": 2}
        json.dump(tokenizer(base, [special(2**31 - 1, "<|big|>")]), open(f"{d}/tok_bigid.json", "w"))
        json.dump(tokenizer(base, [special(999999999, "<|huge|>")]), open(f"{d}/tok_hugeid.json", "w"))
        json.dump(tokenizer({}, [special(i, f"<|s{i}|>") for i in range(8)]),
                  open(f"{d}/tok_allspecial.json", "w"))
    elif a[0] == "st-nul":
        # written as text: json.dumps would escape the NUL the same way ("\u0000")
        st_write(a[1], '{"a\\u0000b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', b"\0\0\0\0")
    elif a[0] == "set-meta":
        hdr, data = st_read(a[1])
        hdr.setdefault("__metadata__", {})[a[2]] = a[3]
        st_write(a[1], json.dumps(hdr), data)
    else:
        sys.exit(__doc__)


main()
