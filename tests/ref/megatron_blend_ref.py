"""An independent Python model of Megatron's dataset builder for tests (written from the spec's description
of Megatron-LM: blended_megatron_dataset_builder.py, blended_dataset.py, helpers.cpp, gpt_dataset.py):
the split of each prefix, the per-split sizes, the weighted / length-weighted blends and each GPTDataset's
document, sample and shuffle indices (with numpy's RandomState, as Megatron uses it).

    python3 megatron_blend_ref.py write PREFIX NSEQ MINLEN MAXLEN SEED    a random int32 MMIDIDX dataset
    python3 megatron_blend_ref.py samples SET key=value ...              'g dataset item : L+1 tokens' lines
keys: data_path, train_data_path, valid_data_path, test_data_path (lists as in Megatron), split,
seq_length, seed, train_iters, global_batch_size, eval_interval, eval_iters, surplus."""
import math
import re
import struct
import sys

import numpy as np

SPLITS = ['train', 'valid', 'test']


def write(prefix, nseq, lo, hi, seed):
    rng = np.random.RandomState(seed)
    lengths = rng.randint(lo, hi + 1, size=nseq)
    toks, ptrs, off = [], [], 0
    for i, n in enumerate(lengths):
        toks += [(i * 37 + t) % 30000 for t in range(n)]
        ptrs.append(off)
        off += 4 * int(n)
    with open(prefix + '.bin', 'wb') as f:
        f.write(struct.pack('<%di' % len(toks), *toks))
    with open(prefix + '.idx', 'wb') as f:
        f.write(b'MMIDIDX\x00\x00' + struct.pack('<Q', 1) + bytes([4]) + struct.pack('<QQ', nseq, nseq + 1))
        f.write(struct.pack('<%di' % nseq, *[int(x) for x in lengths]))
        f.write(struct.pack('<%dq' % nseq, *ptrs))
        f.write(struct.pack('<%dq' % (nseq + 1), *range(nseq + 1)))


def read(prefix):
    idx = open(prefix + '.idx', 'rb').read()
    S, = struct.unpack_from('<Q', idx, 18)
    lengths = list(struct.unpack_from('<%di' % S, idx, 34))
    ptrs = list(struct.unpack_from('<%dq' % S, idx, 34 + 4 * S))
    b = open(prefix + '.bin', 'rb').read()
    return [list(struct.unpack_from('<%di' % n, b, p)) for n, p in zip(lengths, ptrs)]


def normalize(w):
    w = np.array(w, dtype=np.float64)
    return (w / np.sum(w)).tolist()


def parse_list(s):
    toks = s.split()
    try:
        if len(toks) % 2:
            raise ValueError
        w = [float(t) for t in toks[0::2]]
        return toks[1::2], w
    except ValueError:
        return toks, None


class GPT:
    """One GPTDataset over the sequences `docs` of `seqs` (Megatron's index building, loops as written there)."""

    def __init__(self, seqs, docs, L, num_samples, seed, E=1):
        self.seqs, self.L, self.E = seqs, L, E
        sizes = np.array([len(seqs[d]) for d in docs], dtype=np.int64)
        T = int(sizes.sum())
        if num_samples is None:
            e = 1
        else:
            e, ntok = 1, T
            while ntok < num_samples * L + E:
                ntok += T
                e += 1
        sep = False
        if e > 1:
            sans = ((e - 1) * T - E) // L
            per_epoch = (T - E) // L
            sep = (num_samples - sans) < int(0.80 * per_epoch)
        rs = np.random.RandomState(seed)

        def doc_index(epochs):
            di = np.array(list(docs) * epochs, dtype=np.int32)
            rs.shuffle(di)
            return di

        di = np.concatenate([doc_index(e - 1), doc_index(1)]) if sep else doc_index(e)
        S = (e * T - E) // L
        # helpers.cpp build_sample_idx
        sidx = [(0, 0)]
        k, off = 0, 0
        for _ in range(S):
            rem = L + E
            while rem != 0:
                dl = len(seqs[di[k]]) - off
                rem -= dl
                if rem <= 0:
                    off += rem + dl - E
                    rem = 0
                else:
                    k += 1
                    off = 0
            sidx.append((k, off))
        self.di, self.sidx = di, sidx

        def shuffle(n, total):
            a = np.arange(0, n, dtype=np.uint32)
            rs.shuffle(a)
            if n == total:
                return a
            b = np.arange(n, total, dtype=np.uint32)
            rs.shuffle(b)
            return np.concatenate([a, b])

        self.shuf = shuffle(((e - 1) * T - E) // L if sep else S, S)
        self.size = S

    def __len__(self):
        return self.size

    def item(self, i):
        k = int(self.shuf[i])
        (d0, o0), (d1, o1) = self.sidx[k], self.sidx[k + 1]
        if d0 == d1:
            return self.seqs[self.di[d0]][o0:o1 + self.E]
        out = self.seqs[self.di[d0]][o0:]
        for d in range(d0 + 1, d1):
            out = out + self.seqs[self.di[d]]
        return out + self.seqs[self.di[d1]][:o1 + self.E]


def build(a):
    L, seed, gbs = int(a['seq_length']), int(a.get('seed', 42)), int(a['global_batch_size'])
    ti, ei, iv = int(a['train_iters']), int(a.get('eval_iters', 0)), int(a.get('eval_interval', 0))
    surplus = float(a.get('surplus', 0.005))
    S = [ti * gbs, ((ti // iv if iv else 0) + 1) * ei * gbs, ei * gbs]
    cache = {}

    def seqs_of(p):
        if p not in cache:
            cache[p] = read(p)
        return cache[p]

    out = {}
    if a.get('data_path'):
        prefixes, weights = parse_list(a['data_path'])
        v = [float(x) for x in re.findall(r'[.0-9]+', a.get('split', '969, 30, 1'))]
        v = normalize(v + [0.0] * (3 - len(v)))
        ends = [0.0]
        for x in v:
            ends.append(ends[-1] + x)
        per = {}
        for j in range(3):
            if ends[j + 1] <= ends[j] or S[j] == 0:
                continue
            per[j] = []
            for p in prefixes:
                N = len(seqs_of(p))
                per[j].append((p, range(int(round(ends[j] * N)), int(round(ends[j + 1] * N)))))
        lists = {j: (per[j], weights, True) for j in per}
    else:
        lists = {}
        for j, key in enumerate(['train_data_path', 'valid_data_path', 'test_data_path']):
            if a.get(key) and S[j]:
                prefixes, weights = parse_list(a[key])
                lists[j] = ([(p, range(len(seqs_of(p)))) for p in prefixes], weights, False)
    for j, (pl, weights, with_split) in lists.items():
        if len(pl) == 1 and (weights is None or not with_split):
            p, r = pl[0]
            ds = GPT(seqs_of(p), r, L, S[j], seed)
            out[SPLITS[j]] = [(0, i, ds.item(i)) for i in range(len(ds))]
            continue
        if weights is not None:
            w = normalize(weights)
            target = [int(math.ceil(S[j] * x)) for x in w]
            buf = [int(math.ceil(t * (1 + surplus))) for t in target]
            dss = [GPT(seqs_of(p), r, L, b, seed) for (p, r), b in zip(pl, buf)]
            size = sum(target)
        else:
            dss = [GPT(seqs_of(p), r, L, None, seed) for p, r in pl]
            w = [len(d) for d in dss]
            size = min(S[j], sum(w))
        w = normalize(w)  # BlendedDataset normalises again
        count = [0] * len(dss)
        items = []
        for s in range(size):
            x = max(float(s), 1.0)
            best = max(range(len(dss)), key=lambda i: (w[i] * x - count[i], -i))
            items.append((best, count[best], dss[best].item(count[best])))
            count[best] += 1
        assert all(c <= len(d) for c, d in zip(count, dss)), 'IndexError: a dataset is too small'
        out[SPLITS[j]] = items
    return out


if __name__ == '__main__':
    if sys.argv[1] == 'write':
        write(sys.argv[2], *map(int, sys.argv[3:7]))
    else:
        a = dict(kv.split('=', 1) for kv in sys.argv[3:])
        for g, (k, i, toks) in enumerate(build(a).get(sys.argv[2], [])):
            print('%d %d %d : %s' % (g, k, i, ' '.join(map(str, toks))))
