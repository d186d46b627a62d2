"""An independent reader of TensorBoard event files (no TensorFlow): TFRecord framing with both masked
CRC32Cs checked, and the protobuf wire format decoded field by field (tensorboard's event.proto/summary.proto
numbers: Event 1 wall_time, 2 step, 3 file_version, 5 summary, 7 session_log; Summary 1 value; Value 1 tag,
2 simple_value). CRC32C is computed bitwise here, not with a table, so it shares no code with the writer."""
import glob, os, struct, sys, json


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    raw = open(path, 'rb').read()
    o = 0
    while o < len(raw):
        assert o + 12 <= len(raw), f'{path}: truncated header at {o}'
        n, = struct.unpack_from('<Q', raw, o)
        hc, = struct.unpack_from('<I', raw, o + 8)
        assert hc == masked(raw[o:o + 8]), f'{path}: bad length CRC at {o}'
        data = raw[o + 12:o + 12 + n]
        assert len(data) == n and o + 16 + n <= len(raw), f'{path}: truncated record at {o}'
        dc, = struct.unpack_from('<I', raw, o + 12 + n)
        assert dc == masked(data), f'{path}: bad data CRC at {o}'
        yield data
        o += 16 + n


def varint(b, o):
    v = s = 0
    while True:
        x = b[o]; o += 1
        v |= (x & 0x7F) << s; s += 7
        if not x & 0x80:
            return v, o


def fields(b):
    """(field number, wire type, value) triples; LEN values are bytes, fixed64/32 raw bytes."""
    o = 0
    while o < len(b):
        key, o = varint(b, o)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, o = varint(b, o)
        elif wt == 1:
            v = b[o:o + 8]; o += 8
        elif wt == 5:
            v = b[o:o + 4]; o += 4
        elif wt == 2:
            n, o = varint(b, o); v = b[o:o + n]; o += n
        else:
            raise ValueError(f'wire type {wt}')
        yield f, wt, v


def event(data):
    e = {'step': 0, 'scalars': []}
    for f, wt, v in fields(data):
        if f == 1: assert wt == 1; e['wall_time'] = struct.unpack('<d', v)[0]
        elif f == 2: assert wt == 0; e['step'] = v
        elif f == 3: e['file_version'] = v.decode()
        elif f == 7: e['session_log'] = {ff: vv for ff, _, vv in fields(v)}
        elif f == 5:
            for f2, _, val in fields(v):
                assert f2 == 1
                tag, x = None, None
                for f3, wt3, v3 in fields(val):
                    if f3 == 1: tag = v3.decode()
                    elif f3 == 2: assert wt3 == 5; x = struct.unpack('<f', v3)[0]
                e['scalars'].append((tag, x))
    return e


def read_dir(d, purge=True):
    """{tag: [(step, value), ...]} over every events file of d in name order (TensorBoard's order). With purge,
    a SessionLog START at step s drops the events read so far with step >= s (EventAccumulator's rule)."""
    out, files = {}, sorted(glob.glob(os.path.join(d, '*tfevents*')))
    for path in files:
        evs = [event(r) for r in records(path)]
        assert evs and evs[0].get('file_version') == 'brain.Event:2', f'{path}: first event is not the file version'
        for e in evs[1:]:
            if purge and e.get('session_log', {}).get(1) == 1:
                for t in out:
                    out[t] = [(s, v) for s, v in out[t] if s < e['step']]
            for tag, x in e['scalars']:
                out.setdefault(tag, []).append((e['step'], x))
    return out, files


if __name__ == '__main__':
    tags, files = read_dir(sys.argv[1], purge=len(sys.argv) < 3 or sys.argv[2] != 'raw')
    print(json.dumps({'files': len(files), 'tags': tags}))
