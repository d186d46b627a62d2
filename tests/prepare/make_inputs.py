#!/usr/bin/env python3
"""Writes the inputs of tests/t_prepare.sh into OUTDIR, each with the texts `gdn prepare` must tokenize from it
(NAME.expect.jsonl: one JSON string per document, in order, for scripts/tok_oracle.js) and the counts it must
report (NAME.counts: KEY=VALUE lines for check.py sidecar).

  make_inputs.py OUTDIR CORPUS_DIR

docs.jsonl   objects, bare strings, blank lines, CRLF, a malformed line, a missing key, a non-string value,
             an empty text, invalid UTF-8 and a lone surrogate escape (both become U+FFFD), special-token text
lines.txt    one document per line (an empty line is skipped, a whitespace-only line is a document)
paras.txt    documents separated by blank lines (parasfile: the same file read whole)
rows.jsonl   FLA rows: short documents of corpus sentences, an empty row (kept: BOS only) and two bad lines
pq.texts.jsonl  texts (and one null) for tests/prepare/write_parquet.js
"""
import json
import os
import sys


def sentences(corpus_dir, n):
    out = []
    k = 0
    while len(out) < n:
        out += json.load(open(os.path.join(corpus_dir, f"doc-{k}.json"), encoding="utf-8"))
        k += 1
    return out[:n]


def groups(sents, sizes):
    """Consecutive sentences joined by a space, group sizes cycling through `sizes`."""
    docs, i, k = [], 0, 0
    while i < len(sents):
        n = sizes[k % len(sizes)]
        docs.append(" ".join(sents[i:i + n]))
        i, k = i + n, k + 1
    return docs


def jline(obj):
    return json.dumps(obj, ensure_ascii=False).encode("utf-8")


def write(outdir, name, data):
    with open(os.path.join(outdir, name), "wb") as f:
        f.write(data)


def write_expect(outdir, name, texts, counts):
    write(outdir, name + ".expect.jsonl", b"".join(json.dumps(t).encode() + b"\n" for t in texts))
    write(outdir, name + ".counts", "".join(f"{k}={v}\n" for k, v in counts.items()).encode())


def main():
    outdir, corpus = sys.argv[1], sys.argv[2]
    os.makedirs(outdir, exist_ok=True)
    sents = sentences(corpus, 400)
    flat = [" ".join(x.split("\n")) for x in sents]  # for the text files, where a newline splits documents

    # ---- docs.jsonl: (raw line bytes, expected text or None when the line is not a document)
    lines = [
        (jline({"text": "Hello world"}), "Hello world"),
        (jline("a bare JSON string is a document too"), "a bare JSON string is a document too"),
        (b"", None),  # blank: skipped, not counted
        (jline({"id": 7, "text": "line1\nline2\n\nline3\r\nend", "meta": {"text": "nested, not this"}}),
         "line1\nline2\n\nline3\r\nend"),
        (b'{"text": "malformed, no closing brace"', "BAD"),
        (jline({"content": "no text key here"}), "BAD"),
        (jline({"text": ""}), "EMPTY"),
        (jline({"text": 17}), "BAD"),
        (jline({"text": "special <|eot_id|> tokens <|begin_of_text|> in raw text"}),
         "special <|eot_id|> tokens <|begin_of_text|> in raw text"),
        (b'{"text": "bad \xff byte and \xe2\x82 cut"}', "bad \ufffd byte and \ufffd cut"),
        (b'{"text": "lone \\ud800 surrogate"}', "lone \ufffd surrogate"),
        (b'{"text": "emoji \\ud83e\\udd99 and \\u00e9 escaped"}\r', "emoji \U0001f999 and \u00e9 escaped"),
        (jline({"text": "  leading and trailing spaces   ", "text_extra": 1}), "  leading and trailing spaces   "),
        (jline({"text": "中文字符 日本語のテキスト 한국어 Ελληνικά"}), "中文字符 日本語のテキスト 한국어 Ελληνικά"),
        (b"   ", None),
    ]
    for d in groups(sents[:60], [1, 3, 2, 4]):
        lines.append((jline({"text": d}), d))
    raw = b"\xef\xbb\xbf" + b"\n".join(l for l, _ in lines) + b"\n"
    write(outdir, "docs.jsonl", raw)
    texts = [t for _, t in lines if t not in (None, "BAD", "EMPTY")]
    write_expect(outdir, "docs", texts, {
        "counts.records": sum(1 for _, t in lines if t is not None),
        "counts.documents": len(texts),
        "counts.bad_records": sum(1 for _, t in lines if t == "BAD"),
        "counts.empty_skipped": sum(1 for _, t in lines if t == "EMPTY"),
        "counts.invalid_utf8_documents": 2,
        "counts.invalid_utf8_sequences": 3,
    })

    # ---- lines.txt
    tl = ["First line of plain text.", "", "   ", "Windows line end\r", "tab\tinside", "ünïcödé ✓"]
    tl += flat[60:90]
    write(outdir, "lines.txt", "\n".join(tl).encode("utf-8") + b"\n")
    ltexts = [l[:-1] if l.endswith("\r") else l for l in tl]
    ltexts = [l for l in ltexts if l != ""]
    write_expect(outdir, "lines", ltexts, {"counts.documents": len(ltexts), "counts.empty_skipped": 1})

    # ---- paras.txt
    paras = [" ".join(flat[90 + 3 * i:93 + 3 * i]) + "\n" + flat[120 + i] for i in range(8)]
    body = "\n\n\n".join(paras[:4]) + "\n  \n" + "\r\n\r\n".join(paras[4:]) + "\n\n"
    write(outdir, "paras.txt", ("\n" + body).encode("utf-8"))
    write_expect(outdir, "paras", paras, {"counts.documents": len(paras)})
    # --text-mode file: the whole file, byte for byte
    write_expect(outdir, "parasfile", ["\n" + body], {"counts.documents": 1})

    # ---- rows.jsonl (FLA): every valid row is a row, the empty one included
    rows = groups(sents[130:330], [1, 2, 3, 1, 2])
    rows.insert(5, "")
    rl = [jline({"text": r}) for r in rows]
    rl.insert(3, b'{"text": broken}')
    rl.insert(40, jline({"body": "missing key"}))
    write(outdir, "rows.jsonl", b"\n".join(rl) + b"\n")
    write_expect(outdir, "rows", rows, {"counts.rows": len(rows), "counts.bad_records": 2,
                                        "counts.empty_rows_bos_only": 1})

    # ---- Parquet texts (a null is a bad record)
    pq = groups(sents[330:400], [2, 1, 3])
    pq_vals = pq[:4] + [None] + pq[4:]
    write(outdir, "pq.texts.jsonl", b"".join(json.dumps(t).encode() + b"\n" for t in pq_vals))
    write_expect(outdir, "pq", pq, {"counts.documents": len(pq), "counts.bad_records": 1})


if __name__ == "__main__":
    main()
