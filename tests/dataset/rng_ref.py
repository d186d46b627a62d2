"""Pure-Python models of the RNG-driven orders the data loaders reproduce (no numpy or torch needed):
numpy's legacy MT19937 RandomState (seed, shuffle), torch.randperm on CPU, numpy's default_rng
(SeedSequence -> PCG64) as used by datasets.Dataset.shuffle, and Megatron's GPTDataset indices.
Written for tests/dataset/oracle.py from the algorithms' published definitions (MT19937 by Matsumoto and
Nishimura, PCG64 XSL-RR by O'Neill, numpy's SeedSequence hash mixing); `python3 rng_ref.py` checks known
values that real numpy 1.24 and torch 1.13 print."""
U32 = 0xFFFFFFFF
U64 = (1 << 64) - 1
U128 = (1 << 128) - 1


class MT19937:
    """init_genrand(seed) + genrand_int32: numpy RandomState(int seed) and torch manual_seed(seed)."""
    N, M = 624, 397

    def __init__(self, seed):
        s = [seed & U32]
        for i in range(1, self.N):
            s.append((1812433253 * (s[-1] ^ (s[-1] >> 30)) + i) & U32)
        self.state, self.pos = s, self.N

    def _twist(self):
        s, n = self.state, self.N
        for k in range(n):
            y = (s[k] & 0x80000000) | (s[(k + 1) % n] & 0x7FFFFFFF)
            s[k] = s[(k + self.M) % n] ^ (y >> 1) ^ (0x9908B0DF * (y & 1))
        self.pos = 0

    def u32(self):
        if self.pos >= self.N:
            self._twist()
        y = self.state[self.pos]
        self.pos += 1
        y ^= y >> 11
        y ^= (y << 7) & 0x9D2C5680
        y ^= (y << 15) & 0xEFC60000
        y ^= y >> 18
        return y & U32


def bounded_masked(gen, hi):
    """numpy's legacy random_interval(hi): rejection sampling under the smallest all-ones mask >= hi."""
    if hi == 0:
        return 0
    mask = (1 << hi.bit_length()) - 1
    while True:
        v = gen.u32() & mask
        if v <= hi:
            return v


def legacy_shuffle(a, gen):
    """RandomState.shuffle / Generator.permutation on a 1-D list: Fisher-Yates from the end, in place."""
    for i in range(len(a) - 1, 0, -1):
        j = bounded_masked(gen, i)
        a[i], a[j] = a[j], a[i]
    return a


def torch_randperm(n, seed):
    """torch.randperm(n, generator=manual_seed(seed)) on CPU for n < 2**32 / 20: forward swaps, u32 % rest."""
    gen, r = MT19937(seed), list(range(n))
    for i in range(n - 1):
        j = i + gen.u32() % (n - i)
        r[i], r[j] = r[j], r[i]
    return r


def _seed_sequence_words(seed, n_words):
    """numpy SeedSequence(seed).generate_state(n_words, uint32) (pool size 4, no spawn key)."""
    entropy = []
    while True:
        entropy.append(seed & U32)
        seed >>= 32
        if seed == 0:
            break
    mult = [0x43B0D7E5]

    def hashmix(v):
        v ^= mult[0]
        mult[0] = (mult[0] * 0x931E8875) & U32
        v = (v * mult[0]) & U32
        return v ^ (v >> 16)

    def mix(x, y):
        r = (0xCA01F9DD * x - 0x4973F715 * y) & U32
        return r ^ (r >> 16)

    pool = [hashmix(entropy[i] if i < len(entropy) else 0) for i in range(4)]
    for src in range(4):
        for dst in range(4):
            if src != dst:
                pool[dst] = mix(pool[dst], hashmix(pool[src]))
    for src in range(4, len(entropy)):
        for dst in range(4):
            pool[dst] = mix(pool[dst], hashmix(entropy[src]))
    out, h = [], 0x8B51F9DD
    for k in range(n_words):
        v = pool[k % 4] ^ h
        h = (h * 0x58F38DED) & U32
        v = (v * h) & U32
        out.append(v ^ (v >> 16))
    return out


class PCG64:
    """numpy.random.default_rng(seed).bit_generator: 128-bit LCG, XSL-RR output; u32 splits one u64."""
    MULT = (2549297995355413924 << 64) | 4865540595714422341

    def __init__(self, seed):
        w = _seed_sequence_words(seed, 8)
        q = [w[2 * k] | (w[2 * k + 1] << 32) for k in range(4)]  # four uint64, little-endian word pairs
        init_state, init_seq = (q[0] << 64) | q[1], (q[2] << 64) | q[3]
        self.inc = ((init_seq << 1) | 1) & U128
        self.state = 0
        self._advance()
        self.state = (self.state + init_state) & U128
        self._advance()
        self.spare = None

    def _advance(self):
        self.state = (self.state * self.MULT + self.inc) & U128

    def u64(self):
        self._advance()
        x = ((self.state >> 64) ^ self.state) & U64
        rot = self.state >> 122
        return ((x >> rot) | (x << ((64 - rot) & 63))) & U64

    def u32(self):
        if self.spare is not None:
            v, self.spare = self.spare, None
            return v
        v = self.u64()
        self.spare = v >> 32
        return v & U32


def hf_shuffle_permutation(n, seed):
    """datasets.Dataset.shuffle(seed=seed): new row i is old row p[i]."""
    return legacy_shuffle(list(range(n)), PCG64(seed))


def megatron_gpt_indices(sizes, seq_len, num_samples, seed, add_extra=1):
    """Megatron GPTDataset over all of `sizes`: (document_index, sample count S, shuffle_index).
    Sample k is the flattened document_index tokens [k*seq_len, k*seq_len + seq_len + add_extra)."""
    n_docs, n_tok = len(sizes), sum(sizes)
    epochs = 1
    while epochs * n_tok < num_samples * seq_len + add_extra:
        epochs += 1
    gen = MT19937(seed)
    separate_last = False
    if epochs > 1:
        before_last = ((epochs - 1) * n_tok - add_extra) // seq_len
        per_epoch = (n_tok - add_extra) // seq_len
        separate_last = (num_samples - before_last) < int(0.80 * per_epoch)
    if separate_last:
        doc = legacy_shuffle(list(range(n_docs)) * (epochs - 1), gen) + legacy_shuffle(list(range(n_docs)), gen)
    else:
        doc = legacy_shuffle(list(range(n_docs)) * epochs, gen)
    total = (epochs * n_tok - add_extra) // seq_len
    if separate_last:
        shuf = legacy_shuffle(list(range(before_last)), gen)
        shuf += [before_last + x for x in legacy_shuffle(list(range(total - before_last)), gen)]
    else:
        shuf = legacy_shuffle(list(range(total)), gen)
    return doc, total, shuf


if __name__ == "__main__":
    g = MT19937(42)
    assert [g.u32(), g.u32()] == [1608637542, 3421126067]
    assert torch_randperm(10, 42) == [2, 6, 1, 8, 4, 5, 0, 9, 3, 7]
    assert legacy_shuffle(list(range(10)), MT19937(42)) == [8, 1, 5, 0, 7, 2, 9, 4, 3, 6]
    assert hf_shuffle_permutation(10, 42) == [5, 6, 0, 7, 3, 2, 4, 9, 1, 8]
    assert megatron_gpt_indices([5, 3, 7, 2], 4, 6, 42) == ([1, 3, 0, 2, 1, 3, 0, 2], 8, [3, 0, 1, 2, 5, 4, 7, 6])
    print("ok")
