#!/usr/bin/env python3
"""Test oracle for data/indexed.c, data/rng.c and data/sampler.c (run with /usr/bin/python3).

Expected values come from sources independent of the C code:
  * tests/dataset/rng_ref.py (pure-Python models of the loaders' RNGs and Megatron's indices),
  * real numpy and torch where importable,
  * an MMIDIDX reader/writer written here from the format table of spec data.md §2,
  * simulations of the loaders' rank assignment (Megatron's MegatronPretrainingSampler and accelerate's
    BatchSamplerShard) written as loops over batches, not as the closed form the C code uses.

Subcommands (all print to stdout):
  rng                         RNG cases, one per line: "<source> <kind> <args...> : <values...>"
  dump PREFIX                 JSON of every field of PREFIX.idx and every token of PREFIX.bin
  write PREFIX DTYPE SEED NSEQ [--no-leading-zero]   write a random dataset; print the same JSON
  megatron DIR                write small datasets into DIR; JSON of the expected Megatron samples
  fla DIR                     write chunk datasets into DIR; JSON of the expected FLA samples
  cli-fixtures DIR            DIR/tiny_tok.json (byte-level BPE, id = byte, 256 = <|eot|>) and DIR/bytes.{bin,idx}
"""
import json
import os
import random
import struct
import subprocess
import sys
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))
import rng_ref as ref  # noqa: E402  (tests/dataset/rng_ref.py, next to this file)


# ---------------------------------------------------------------- MMIDIDX, from spec data.md §2
MAGIC = b"MMIDIDX\x00\x00"
ITEM = {1: ("B", 1), 2: ("b", 1), 3: ("h", 2), 4: ("i", 4), 5: ("q", 8), 6: ("d", 8), 7: ("f", 4), 8: ("H", 2)}


def mmidx_read(prefix):
    idx = Path(prefix + ".idx").read_bytes()
    binb = Path(prefix + ".bin").read_bytes()
    assert idx[:9] == MAGIC, "magic"
    version, = struct.unpack_from("<Q", idx, 9)
    dtype = idx[17]
    S, Dc = struct.unpack_from("<QQ", idx, 18)
    off = 34
    lengths = list(struct.unpack_from("<%di" % S, idx, off)); off += 4 * S
    pointers = list(struct.unpack_from("<%dq" % S, idx, off)); off += 8 * S
    docs = list(struct.unpack_from("<%dq" % Dc, idx, off)); off += 8 * Dc
    fmt, size = ITEM[dtype]
    tokens = []
    for ln, p in zip(lengths, pointers):
        tokens.append(list(struct.unpack_from("<%d%s" % (ln, fmt), binb, p)))
    return {"version": version, "dtype": dtype, "S": S, "Dc": Dc, "lengths": lengths, "pointers": pointers,
            "doc_indices": docs, "tokens": tokens, "idx_size": len(idx), "bin_size": len(binb), "trailing": len(idx) - off}


def mmidx_write(prefix, dtype, seqs, doc_indices):
    fmt, size = ITEM[dtype]
    ptrs, pos = [], 0
    with open(prefix + ".bin", "wb") as f:
        for s in seqs:
            ptrs.append(pos)
            f.write(struct.pack("<%d%s" % (len(s), fmt), *s))
            pos += len(s) * size
    with open(prefix + ".idx", "wb") as f:
        f.write(MAGIC + struct.pack("<Q", 1) + bytes([dtype]) + struct.pack("<QQ", len(seqs), len(doc_indices)))
        f.write(struct.pack("<%di" % len(seqs), *[len(s) for s in seqs]))
        f.write(struct.pack("<%dq" % len(seqs), *ptrs))
        f.write(struct.pack("<%dq" % len(doc_indices), *doc_indices))


def cmd_write(prefix, dtype, seed, nseq, leading_zero):
    rnd = random.Random(seed)
    hi = {1: 255, 2: 127, 3: 32767, 4: 2**31 - 1, 5: 2**31 - 1, 8: 65535}[dtype]
    lo = {1: 0, 2: -128, 3: -32768, 4: -2**31, 5: -2**31, 8: 0}[dtype]
    seqs = [[rnd.randint(lo, hi) for _ in range(rnd.choice([0, 1, 2, 5, 17, 100]))] for _ in range(nseq)]
    docs = [0] + sorted(rnd.sample(range(1, nseq), min(nseq - 1, nseq // 3))) + [nseq] if nseq else [0]
    if not leading_zero:
        docs = docs[1:]
    mmidx_write(prefix, dtype, seqs, docs)
    print(json.dumps(mmidx_read(prefix)))


# ---------------------------------------------------------------- RNG cases
SIZES = [1, 2, 3, 4, 5, 7, 8, 9, 16, 31, 32, 33, 64, 100, 127, 128, 256, 1000, 1024, 2048, 2500, 4096]
SEEDS = [0, 1, 42, 43, 1234, 2**31 - 1, 2**32 - 1]


def emit(source, kind, args, values):
    print(source, kind, *args, ":", *values)


def cmd_rng():
    for seed in SEEDS:
        g = ref.MT19937(seed)
        emit("ref", "mt", [seed, 1500], [g.u32() for _ in range(1500)])  # crosses two state regenerations
    for seed in SEEDS + [2**32, 2**32 + 42, 2**63 + 12345, 2**64 - 1]:
        g = ref.PCG64(seed)
        emit("ref", "pcg64", [seed, 40], [g.u64() for _ in range(40)])
        g = ref.PCG64(seed)
        emit("ref", "pcg32", [seed, 41], [g.u32() for _ in range(41)])
    for i, n in enumerate(SIZES):
        for seed in SEEDS if n <= 256 else SEEDS[i % 3::3]:
            emit("ref", "shuffle_mt", [n, seed], ref.legacy_shuffle(list(range(n)), ref.MT19937(seed)))
            emit("ref", "randperm", [n, seed], ref.torch_randperm(n, seed))
            emit("ref", "hfperm", [n, seed], ref.hf_shuffle_permutation(n, seed))
    for seed in [2**32 + 7, 2**63 + 12345]:  # SeedSequence with two entropy words
        emit("ref", "hfperm", [100, seed], ref.hf_shuffle_permutation(100, seed))
    # torch >= 2.6 randperm for n >= 2^32/20, written here from the aten source's description: inside-out
    # Fisher-Yates, z = random64() % (i + 1) with random64 = first u32 << 32 | second u32.
    for n, seed in [(1, 42), (2, 0), (10, 42), (1000, 7), (4099, 2**32 + 3)]:
        g, r = ref.MT19937(seed & 0xFFFFFFFF), [0] * n
        for i in range(n):
            z = ((g.u32() << 32) | g.u32()) % (i + 1)
            r[i] = r[z]
            r[z] = i
        emit("oracle", "randperm_large", [n, seed], r)
    try:
        import numpy as np
    except ImportError:
        print("skip numpy not importable")
    else:
        for seed in [0, 42, 1234, 2**32 - 1]:
            emit("numpy", "mt", [seed, 1000], np.random.RandomState(seed).randint(0, 2**32, size=1000, dtype=np.uint32).tolist())
            emit("numpy", "pcg64", [seed, 50], np.random.PCG64(seed).random_raw(50).tolist())
            emit("numpy", "pcg32", [seed, 51], np.random.default_rng(seed).integers(0, 2**32, size=51, dtype=np.uint32).tolist())
            for n in [1, 2, 10, 1000, 5000]:
                emit("numpy", "shuffle_mt", [n, seed], np.random.RandomState(seed).permutation(n).tolist())
                emit("numpy", "hfperm", [n, seed], np.random.default_rng(seed).permutation(n).tolist())
            # random_interval's 64-bit draws (max >= 2^32) mixed with 32-bit ones: legacy randint is the
            # same masked rejection loop, on MT19937 and on PCG64 (whose u32 buffer the u64 draws skip).
            spec = [(999, 3), (2**40 - 1, 4), (999, 3), (2**33 + 5, 3), (2**64 - 1, 2), (12, 2)]
            for gen in ["mt", "pcg"]:
                rs = np.random.RandomState(seed) if gen == "mt" else np.random.RandomState(np.random.PCG64(seed))
                vals = []
                for mx, k in spec:
                    if mx == 2**64 - 1:
                        vals += rs.randint(0, 2**64, size=k, dtype=np.uint64).tolist()
                    else:
                        vals += rs.randint(0, mx + 1, size=k, dtype=np.int64).tolist()
                emit("numpy", "interval_" + gen, [seed, ",".join("%dx%d" % (mx, k) for mx, k in spec)], vals)
    try:
        import torch
    except ImportError:
        print("skip torch not importable")
    else:
        for seed in [0, 1, 42, 43, 2**31, 2**32 + 42]:
            for n in [1, 2, 3, 10, 20, 1000, 65536, 100000]:
                gen = torch.Generator().manual_seed(seed)
                emit("torch", "randperm", [n, seed], torch.randperm(n, generator=gen).tolist())


# ---------------------------------------------------------------- sample orders
def megatron_single_positions(M, DP, gbs, steps):
    """MegatronPretrainingSampler, simulated: every rank walks the items in order, collects G = M*DP of
    them and keeps its own slice rank*M..; a step is gbs/G consecutive micro-batches."""
    G = M * DP
    n_mb = gbs // G
    out = []
    for r in range(DP):
        micro_batches, batch = [], []
        for idx in range(steps * gbs):
            batch.append(idx)
            if len(batch) == G:
                micro_batches.append(batch[r * M:(r + 1) * M])
                batch = []
        for t in range(steps):
            for mu in range(n_mb):
                for j, g in enumerate(micro_batches[t * n_mb + mu]):
                    out.append([t, r, mu, j, g])
    return out


def accelerate_shard_positions(b, W, a, steps):
    """accelerate BatchSamplerShard (split_batches False), simulated: the sampler's batches of b positions
    are dealt round-robin to the W processes; a Trainer step takes a consecutive batches of each rank."""
    total = steps * a * W * b
    batches = [list(range(k, k + b)) for k in range(0, total, b)]
    out = []
    for r in range(W):
        mine = batches[r::W]
        for t in range(steps):
            for mu in range(a):
                for j, g in enumerate(mine[t * a + mu]):
                    out.append([t, r, mu, j, g])
    return out


def cmd_megatron(d):
    cases = []

    def add(name, sizes, L, num_samples, seed, dtype=4, token=lambda d, p: 100 * d + p, layouts=()):
        seqs = [[token(i, p) for p in range(n)] for i, n in enumerate(sizes)]
        prefix = os.path.join(d, name)
        mmidx_write(prefix, dtype, seqs, list(range(len(seqs) + 1)))
        doc, S, shuf = ref.megatron_gpt_indices(sizes, L, num_samples, seed)
        flat = [t for di in doc for t in seqs[di]]
        items = [flat[k * L:k * L + L + 1] for k in shuf]
        pos = []
        for M, DP, gbs in layouts:
            steps = num_samples // gbs
            pos.append({"M": M, "W": DP, "G": gbs, "expect": megatron_single_positions(M, DP, gbs, steps)})
        cases.append({"name": name, "prefix": prefix, "L": L, "num_samples": num_samples, "seed": seed, "S": S,
                      "document_index": doc, "shuffle_index": shuf, "items": items, "positions": pos})

    add("worked", [5, 3, 7, 2], 4, 6, 42)  # spec §3.1 worked example
    add("one_epoch", [9, 1, 30, 4, 12, 7, 22, 3], 5, 10, 42)
    add("one_epoch_all", [9, 1, 30, 4, 12, 7, 22, 3], 5, 0, 42)  # num_samples 0 = Megatron's None
    rnd = random.Random(5)
    sizes = [rnd.randint(1, 40) for _ in range(150)]  # T ~ 3000
    T = sum(sizes)
    L = 16
    per_epoch = (T - 1) // L
    # three epochs, final one nearly full (>= 80 %): one shuffle over all epochs
    add("three_epochs_joint", sizes, L, 2 * per_epoch + int(0.95 * per_epoch), 42, layouts=[(4, 2, 16), (2, 4, 16), (8, 1, 16)])
    # three epochs, final one small (< 80 %): separate final epoch
    add("three_epochs_separate", sizes, L, 2 * per_epoch + 10, 1234, layouts=[(4, 4, 32), (1, 1, 4)])
    # separate_final_epoch flips exactly at num_samples - S_sans == int(0.80 * per_epoch)
    sizes2 = [rnd.randint(1, 30) for _ in range(60)]
    per2 = (sum(sizes2) - 1) // 8
    sans2 = (sum(sizes2) - 1) // 8  # two epochs: ((2-1)*T - 1) // L
    add("threshold_separate", sizes2, 8, sans2 + int(0.80 * per2) - 1, 42)
    add("threshold_joint", sizes2, 8, sans2 + int(0.80 * per2), 42)
    add("with_empty_seqs", [0, 5, 0, 0, 8, 3, 0, 11, 2, 0], 3, 25, 7)
    add("uint16", [rnd.randint(1, 60) for _ in range(40)], 8, 300, 3, dtype=8,
        token=lambda d, p: (d * 977 + p * 31) % 65536)
    add("long_seqs", [700, 2, 1300, 450], 128, 40, 42)  # samples span several documents and vice versa
    print(json.dumps({"cases": cases}))


def cmd_fla(d):
    cases = []
    for N, L, seed in [(10, 4, 42), (300, 8, 42), (257, 6, 7)]:
        seqs = [[1000 * c + t for t in range(L)] for c in range(N)]
        prefix = os.path.join(d, "fla_%d_%d" % (N, seed))
        mmidx_write(prefix, 4, seqs, list(range(1, N + 1)))  # convert_fla_to_megatron.py layout: no leading 0
        p2 = ref.hf_shuffle_permutation(N, seed)
        chunk_at = []  # position g -> chunk, over two epochs and a bit
        for g in range(2 * N + 5):
            p3 = ref.torch_randperm(N, seed + g // N)
            chunk_at.append(p2[p3[g % N]])
        pos = []
        for b, W, a in [(2, 2, 1), (8, 1, 2), (4, 2, 2), (2, 4, 2), (4, 4, 1), (1, 2, 8)]:
            steps = N // (b * W * a)
            exp = [[t, r, mu, j, chunk_at[g]] for t, r, mu, j, g in accelerate_shard_positions(b, W, a, steps)]
            pos.append({"M": b, "W": W, "G": b * W * a, "expect": exp})
        cases.append({"name": prefix, "prefix": prefix, "L": L, "seed": seed, "N": N, "p2": p2,
                      "chunk_at": chunk_at, "positions": pos})
    print(json.dumps({"cases": cases}))


def cmd_cli_fixtures(d):
    # GPT-2's byte <-> printable code point table, so that token id b is the single byte b.
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + \
        list(range(ord("\u00ae"), ord("\u00ff") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    vocab = {chr(c): b for b, c in zip(bs, cs)}
    special = {"id": 256, "content": "<|eot|>", "single_word": False, "lstrip": False, "rstrip": False,
               "normalized": False, "special": True}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [special], "normalizer": None,
           "pre_tokenizer": byte_level, "post_processor": None, "decoder": byte_level,
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                     "merges": []}}
    with open(os.path.join(d, "tiny_tok.json"), "w") as f:
        json.dump(tok, f)
    mmidx_write(os.path.join(d, "bytes"), 8, [list(b"Hi there"), list("\u00e9!".encode()) + [256]], [0, 2])


def main():
    a = sys.argv[1:]
    if not a:
        sys.exit(__doc__)
    if a[0] == "rng":
        cmd_rng()
    elif a[0] == "dump":
        print(json.dumps(mmidx_read(a[1])))
    elif a[0] == "write":
        cmd_write(a[1], int(a[2]), int(a[3]), int(a[4]), "--no-leading-zero" not in a)
    elif a[0] == "megatron":
        cmd_megatron(a[1])
    elif a[0] == "fla":
        cmd_fla(a[1])
    elif a[0] == "cli-fixtures":
        cmd_cli_fixtures(a[1])
    else:
        sys.exit("oracle.py: unknown subcommand " + a[0])


if __name__ == "__main__":
    main()
