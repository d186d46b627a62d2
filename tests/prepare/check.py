#!/usr/bin/env python3
"""Checks for tests/t_prepare.sh, written independently of the C code under test:
a reader of Megatron MMIDIDX files (spec data.md §2) and the expected token layouts built from the tokenizer
oracle's ids (spec §4.1 for the FLA layout, with numpy's default_rng as the datasets.shuffle reference).

  check.py docs PREFIX ORACLE_OUT [--eod ID]           one sequence + one document per oracle line
  check.py fla PREFIX ORACLE_OUT --seq L --batch B --shards N [--shuffle SEED]
  check.py sidecar PREFIX KEY=VALUE...                  values in PREFIX.json (dotted keys: counts.tokens)
ORACLE_OUT: scripts/tok_oracle.js output, one {"ids": [...]} per document, in input order.
Exits non-zero with a message naming the first difference."""
import json
import struct
import sys

import numpy as np

ITEMSIZE = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 8, 7: 4, 8: 2}
NP_DTYPE = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32, 8: np.uint16}


def fail(msg):
    print("check.py: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def read_mmidx(prefix):
    """Returns (dtype code, list of sequences as numpy arrays, document_indices), validating the layout."""
    idx = open(prefix + ".idx", "rb").read()
    data = open(prefix + ".bin", "rb").read()
    if idx[:9] != b"MMIDIDX\x00\x00":
        fail(f"{prefix}.idx: bad magic {idx[:9]!r}")
    (version,) = struct.unpack_from("<Q", idx, 9)
    if version != 1:
        fail(f"{prefix}.idx: version {version}")
    dtype = idx[17]
    if dtype not in ITEMSIZE:
        fail(f"{prefix}.idx: dtype code {dtype}")
    S, Dc = struct.unpack_from("<QQ", idx, 18)
    off = 34
    lengths = np.frombuffer(idx, dtype="<i4", count=S, offset=off)
    off += 4 * S
    pointers = np.frombuffer(idx, dtype="<i8", count=S, offset=off)
    off += 8 * S
    docs = np.frombuffer(idx, dtype="<i8", count=Dc, offset=off)
    off += 8 * Dc
    if off != len(idx):
        fail(f"{prefix}.idx: {len(idx)} bytes, the header and arrays account for {off}")
    isz = ITEMSIZE[dtype]
    expect_ptr = np.concatenate([[0], np.cumsum(lengths.astype(np.int64) * isz)[:-1]]) if S else np.zeros(0)
    if not np.array_equal(pointers, expect_ptr):
        fail(f"{prefix}.idx: sequence_pointers are not the running sum of lengths x {isz}")
    if len(data) != int(lengths.astype(np.int64).sum()) * isz:
        fail(f"{prefix}.bin: {len(data)} bytes, lengths say {int(lengths.sum()) * isz}")
    if Dc < 1 or docs[0] != 0 or docs[-1] != S or np.any(np.diff(docs) < 0):
        fail(f"{prefix}.idx: document_indices must rise from 0 to S={S}: {docs[:10]}...")
    tokens = np.frombuffer(data, dtype=np.dtype(NP_DTYPE[dtype]).newbyteorder("<"))
    seqs = [tokens[p // isz: p // isz + n] for p, n in zip(pointers, lengths)]
    return dtype, seqs, docs


def read_oracle(path):
    return [json.loads(line)["ids"] for line in open(path, encoding="utf-8") if line.strip()]


def opt(args, name, default=None):
    return args[args.index(name) + 1] if name in args else default


def check_docs(prefix, oracle, args):
    eod = opt(args, "--eod")
    want = read_oracle(oracle)
    if eod is not None:
        want = [ids + [int(eod)] for ids in want]
    dtype, seqs, docs = read_mmidx(prefix)
    if dtype != 4:
        fail(f"dtype code {dtype}, want 4 (int32) for a 128256-token vocab")
    if len(seqs) != len(want):
        fail(f"{len(seqs)} sequences, want {len(want)}")
    if not np.array_equal(docs, np.arange(len(want) + 1)):
        fail("document_indices should be 0..S (one document per sequence)")
    for i, (got, exp) in enumerate(zip(seqs, want)):
        if len(got) != len(exp) or not np.array_equal(got, np.array(exp, dtype=np.int64)):
            k = next((j for j in range(min(len(got), len(exp))) if got[j] != exp[j]), min(len(got), len(exp)))
            fail(f"sequence {i}: {len(got)} ids, want {len(exp)}; first difference at {k}: "
                 f"got {list(got[k:k + 5])} want {exp[k:k + 5]}")
    print(f"check.py docs: {prefix}: {len(seqs)} sequences, {sum(map(len, want))} tokens match the oracle")


def fla_expected(rows, L, B, S, seed):
    """FLA legacy preprocess.py (spec data.md §4.1 steps 2-5) on per-row token ids."""
    R = len(rows)
    order = np.random.default_rng(seed).permutation(R) if seed is not None else np.arange(R)
    q, m = divmod(R, S)
    chunks, dropped = [], 0
    for s in range(S):
        lo = q * s + min(s, m)
        hi = lo + q + (1 if s < m else 0)
        for b in range(lo, hi, B):
            x = [t for i in order[b:min(b + B, hi)] for t in rows[i]]
            n = len(x) // L
            chunks += [x[c * L:(c + 1) * L] for c in range(n)]
            dropped += len(x) - n * L
    return chunks, dropped


def check_fla(prefix, oracle, args):
    L, B, S = int(opt(args, "--seq")), int(opt(args, "--batch")), int(opt(args, "--shards"))
    seed = opt(args, "--shuffle")
    rows = read_oracle(oracle)
    want, dropped = fla_expected(rows, L, B, S, int(seed) if seed is not None else None)
    dtype, seqs, docs = read_mmidx(prefix)
    if len(seqs) != len(want):
        fail(f"{len(seqs)} chunks, want {len(want)} (R={len(rows)} rows, L={L}, batch {B}, {S} shards)")
    if not np.array_equal(docs, np.arange(len(want) + 1)):
        fail("document_indices should be 0..S (one document per chunk)")
    for i, (got, exp) in enumerate(zip(seqs, want)):
        if not np.array_equal(got, np.array(exp, dtype=np.int64)):
            fail(f"chunk {i} differs: got {list(got[:8])}... want {exp[:8]}...")
    side = json.load(open(prefix + ".json"))
    if side["counts"]["dropped_tokens"] != dropped:
        fail(f"sidecar dropped_tokens {side['counts']['dropped_tokens']}, want {dropped}")
    print(f"check.py fla: {prefix}: {len(seqs)} chunks of {L} from {len(rows)} rows match "
          f"(batch {B}, {S} shards, shuffle {seed}); {dropped} tokens dropped")


def check_sidecar(prefix, args):
    side = json.load(open(prefix + ".json"))
    for kv in args:
        key, val = kv.split("=", 1)
        cur = side
        for part in key.split("."):
            if not isinstance(cur, dict) or part not in cur:
                fail(f"{prefix}.json has no {key}")
            cur = cur[part]
        if str(cur).lower() != val.lower():
            fail(f"{prefix}.json: {key} = {cur}, want {val}")
    print(f"check.py sidecar: {prefix}.json: {' '.join(args)}")


def main():
    a = sys.argv[1:]
    if len(a) >= 3 and a[0] == "docs":
        check_docs(a[1], a[2], a[3:])
    elif len(a) >= 3 and a[0] == "fla":
        check_fla(a[1], a[2], a[3:])
    elif len(a) >= 2 and a[0] == "sidecar":
        check_sidecar(a[1], a[2:])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
