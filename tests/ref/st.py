"""Reads safetensors files for the test scripts (no dependency beyond the standard library and torch)."""
import json
import struct


def header(path):
    """(header dict without __metadata__, metadata dict, raw file bytes, data offset)"""
    raw = open(path, 'rb').read()
    n = struct.unpack('<Q', raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    meta = hdr.pop('__metadata__', {})
    return hdr, meta, raw, 8 + n


def tensors_raw(path):
    """name -> the tensor's bytes (for bit-for-bit comparisons that ignore the metadata)"""
    hdr, _, raw, base = header(path)
    return {k: raw[base + v['data_offsets'][0]: base + v['data_offsets'][1]] for k, v in hdr.items()}


def tensors_f32(path):
    """name -> tuple of floats (F32 tensors)"""
    hdr, _, raw, base = header(path)
    out = {}
    for k, v in hdr.items():
        assert v['dtype'] == 'F32', (k, v['dtype'])
        b = raw[base + v['data_offsets'][0]: base + v['data_offsets'][1]]
        out[k] = struct.unpack(f'<{len(b) // 4}f', b)
    return out
