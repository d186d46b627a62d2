"""Writes a small Megatron MMIDIDX dataset (<prefix>.bin/.idx, int32) of random documents for tests,
straight from the format (spec data.md §2), independent of gdn.c's writer.
    python3 make_dataset.py PREFIX NUM_TOKENS VOCAB [SEED]"""
import random
import struct
import sys

prefix, ntok, vocab = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 0)
lengths, toks = [], []
# a fixed Markov chain (next = succ[prev] with probability 0.8) so that a model learns quickly
succ = list(range(vocab))
rng.shuffle(succ)
while sum(lengths) < ntok:
    n = rng.randint(20, 400)
    doc = [rng.randrange(vocab)]
    while len(doc) < n:
        doc.append(succ[doc[-1]] if rng.random() < 0.8 else rng.randrange(vocab))
    lengths.append(n)
    toks += doc
with open(prefix + '.bin', 'wb') as f:
    f.write(struct.pack(f'<{len(toks)}i', *toks))
S = len(lengths)
ptrs, off = [], 0
for n in lengths:
    ptrs.append(off)
    off += 4 * n
with open(prefix + '.idx', 'wb') as f:
    f.write(b'MMIDIDX\x00\x00' + struct.pack('<Q', 1) + struct.pack('<B', 4) + struct.pack('<QQ', S, S + 1))
    f.write(struct.pack(f'<{S}i', *lengths))
    f.write(struct.pack(f'<{S}q', *ptrs))
    f.write(struct.pack(f'<{S + 1}q', *range(S + 1)))
