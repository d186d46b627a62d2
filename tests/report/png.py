"""A minimal PNG decoder (8-bit RGB/RGBA/gray, non-interlaced) on zlib, for checking plots and screenshots."""
import struct, zlib


def decode(path):
    b = open(path, 'rb').read()
    assert b[:8] == b'\x89PNG\r\n\x1a\n', f'{path}: not a PNG'
    o, idat, hdr = 8, b'', None
    while o < len(b):
        n, kind = struct.unpack_from('>I4s', b, o)
        body = b[o + 8:o + 8 + n]
        assert zlib.crc32(kind + body) == struct.unpack_from('>I', b, o + 8 + n)[0], f'{path}: bad {kind} CRC'
        if kind == b'IHDR': hdr = struct.unpack('>IIBBBBB', body)
        elif kind == b'IDAT': idat += body
        o += 12 + n
    w, h, depth, ctype, _, _, interlace = hdr
    assert depth == 8 and interlace == 0 and ctype in (0, 2, 6), hdr
    bpp = {0: 1, 2: 3, 6: 4}[ctype]
    raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            c = prev[i - bpp] if i >= bpp else 0
            up = prev[i]
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + up) & 255
            elif f == 3: line[i] = (line[i] + (a + up) // 2) & 255
            elif f == 4:
                p = a + up - c; pa, pb, pc = abs(p - a), abs(p - up), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else up if pb <= pc else c)) & 255
        rows.append(bytes(line)); prev = line
    return w, h, bpp, rows


def colours(rows, bpp):
    """Distinct pixel values and the share of the most common one."""
    from collections import Counter
    cnt = Counter(r[i:i + bpp] for r in rows for i in range(0, len(r), bpp))
    return len(cnt), cnt.most_common(1)[0][1] / sum(cnt.values())
