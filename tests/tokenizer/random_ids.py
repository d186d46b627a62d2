#!/usr/bin/env python3
"""Writes N lines of random token id arrays (deterministic) for decode tests: mostly single-byte tokens (ids
0..255, so that partial and invalid UTF-8 sequences are common), some regular and some special tokens.
Usage: random_ids.py N_REGULAR N_TOTAL LINES OUT.jsonl   (regular ids are < N_REGULAR, all ids < N_TOTAL)"""
import json
import random
import sys

n_regular, n_total, lines, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rng = random.Random(7)
with open(out, "w") as f:
    for _ in range(lines):
        ids = []
        for _ in range(rng.randint(0, 30)):
            r = rng.random()
            ids.append(rng.randrange(256) if r < 0.6 else rng.randrange(n_regular) if r < 0.95 else rng.randrange(n_regular, n_total))
        f.write(json.dumps(ids) + "\n")
