#!/usr/bin/env python3
"""Compares two JSONL files line by line (token id arrays, or decoded strings) and explains the first mismatches.

Usage: compare.py LABEL TEXTS.jsonl WANT.jsonl GOT.jsonl [--tokenizer TOKENIZER_JSON] [--pieces]
  TEXTS: the input texts (one JSON string per line), shown for context.
  WANT/GOT: one JSON value per line. With --tokenizer, id arrays are shown as token strings around the first
  differing position. --pieces: GOT holds arrays of raw text pieces, compared after mapping them to the byte-level
  alphabet (HF's preTokenizeString output). Exits 1 on any difference (count of lines included).
"""
import json
import sys

args = [a for a in sys.argv[1:] if a not in ("--tokenizer", "--pieces")]
tok_path = None
if "--tokenizer" in sys.argv:
    tok_path = sys.argv[sys.argv.index("--tokenizer") + 1]
    args.remove(tok_path)
label, texts_path, want_path, got_path = args


def read(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


texts, want, got = read(texts_path), read(want_path), read(got_path)
if "--pieces" in sys.argv:  # raw pieces -> byte-level strings (spec data.md §1.4)
    printable = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    others = [b for b in range(256) if b not in printable]
    byte_char = {b: chr(b) for b in printable} | {b: chr(0x100 + i) for i, b in enumerate(others)}
    got = [[ "".join(byte_char[b] for b in p.encode("utf-8")) for p in pieces] for pieces in got]
names = {}
if tok_path:
    with open(tok_path, encoding="utf-8") as f:
        j = json.load(f)
    names = {i: s for s, i in j["model"]["vocab"].items()}
    names.update({t["id"]: t["content"] for t in j.get("added_tokens", [])})

bad = 0
if len(want) != len(got):
    print(f"{label}: {len(want)} lines expected, {len(got)} produced")
    bad += 1
for i, (w, g) in enumerate(zip(want, got)):
    if w == g:
        continue
    bad += 1
    if bad > 5:
        continue
    text = texts[i] if i < len(texts) else "?"
    print(f"{label}: line {i + 1} differs; text {json.dumps(text[:160], ensure_ascii=False)}")
    if isinstance(w, list) and isinstance(g, list):
        k = next((k for k in range(min(len(w), len(g))) if w[k] != g[k]), min(len(w), len(g)))
        lo = max(0, k - 3)
        show = lambda ids: " ".join(f"{t}:{json.dumps(names.get(t, '?'), ensure_ascii=False)}" if isinstance(t, int)
                                    else json.dumps(t, ensure_ascii=False) for t in ids[lo:k + 4])
        print(f"  first difference at element {k} (want {len(w)}, got {len(g)})")
        print(f"  want ...{show(w)}")
        print(f"  got  ...{show(g)}")
    else:
        print(f"  want {json.dumps(w, ensure_ascii=False)[:200]}")
        print(f"  got  {json.dumps(g, ensure_ascii=False)[:200]}")
n_tokens = sum(len(w) for w in want if isinstance(w, list))
if bad:
    print(f"FAIL {label}: {bad} of {len(want)} lines differ")
    sys.exit(1)
print(f"PASS {label}: {len(want)} lines identical" + (f" ({n_tokens} ids or pieces)" if n_tokens else ""))
