"""GPT-2's byte-level BPE alphabet: byte b -> the printable code point standing for it in vocab entries
(printable Latin-1 bytes map to themselves, the rest to U+0100 onwards, in byte order)."""


def byte_chars():
    bs = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(0x100 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}
