#!/usr/bin/env python3
"""safetensors interop for tests/test_safetensors.c, written from the format description (the
`safetensors` package is not installed): 8-byte LE header length, JSON header, raw little-endian data.

  st_interop.py write DIR   writes DIR/py.safetensors (every dtype, metadata) and, per tensor, DIR/<name>.f64:
                            the values as float64 so the C side compares exactly
  st_interop.py check DIR   reads DIR/c_bf16.safetensors written by the C writer from DIR/src.f32 and checks
                            that its BF16/F16 tensors equal torch's own rounding of the same fp32 values
"""
import json, struct, sys
import numpy as np
import torch

DT = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16", torch.int32: "I32",
      torch.int64: "I64", torch.uint8: "U8", torch.float64: "F64"}


def raw_bytes(t):
    t = t.contiguous()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16: view the bits
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def write_st(path, tensors, meta):
    header, blobs, off = {}, [], 0
    if meta:
        header["__metadata__"] = meta
    for name, t in tensors:
        b = raw_bytes(t)
        header[name] = {"dtype": DT[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_st(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    base = 8 + n
    inv = {v: k for k, v in DT.items()}
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b0, b1 = e["data_offsets"]
        buf = bytearray(data[base + b0:base + b1])
        dt = inv[e["dtype"]]
        if dt == torch.bfloat16:
            t = torch.frombuffer(buf, dtype=torch.int16).view(torch.bfloat16)
        else:
            t = torch.frombuffer(buf, dtype=dt) if len(buf) else torch.empty(0, dtype=dt)
        out[name] = t.reshape(e["shape"])
    return header.get("__metadata__", {}), out


def main():
    mode, d = sys.argv[1], sys.argv[2]
    if mode == "write":
        g = torch.Generator().manual_seed(1234)
        x = torch.randn(3, 5, 7, generator=g) * 3
        x[0, 0, 0] = float("inf"); x[0, 0, 1] = -0.0; x[0, 0, 2] = 1e-40  # inf, signed zero, subnormal
        tensors = [
            ("f32", x),
            ("bf16", (torch.randn(4, 9, generator=g) * 100).to(torch.bfloat16)),
            ("f16", (torch.randn(2, 3, 4, 5, generator=g) * 10).to(torch.float16)),
            ("i32", torch.randint(-2**31, 2**31 - 1, (6,), generator=g, dtype=torch.int64).to(torch.int32)),
            ("i64", torch.randint(-2**62, 2**62, (2, 2), generator=g, dtype=torch.int64)),
            ("u8", torch.randint(0, 256, (11,), generator=g, dtype=torch.int64).to(torch.uint8)),
            ("f64", torch.randn(5, generator=g, dtype=torch.float64)),
            ("scalar", torch.tensor(2.5)),
            ("empty", torch.zeros(0, 4)),
        ]
        write_st(f"{d}/py.safetensors", tensors, {"who": "python", "quote": "a \"b\" \\ c"})
        for name, t in tensors:
            # float64 holds every value of these dtypes except the int64 extremes; int64 is sent as text
            if t.dtype == torch.int64:
                open(f"{d}/{name}.txt", "w").write(" ".join(str(v) for v in t.flatten().tolist()))
            else:
                t.to(torch.float64).numpy().tofile(f"{d}/{name}.f64")
        print(f"wrote {len(tensors)} tensors")
    elif mode == "check":
        src = torch.from_numpy(np.fromfile(f"{d}/src.f32", dtype=np.float32))
        meta, ts = read_st(f"{d}/c_conv.safetensors")
        assert meta.get("k") == "v", meta
        bad = 0
        for name, dt in (("as_f32", torch.float32), ("as_bf16", torch.bfloat16), ("as_f16", torch.float16)):
            got, want = ts[name].flatten(), src.to(dt)
            assert got.dtype == dt, (name, got.dtype)
            gb = got.view(torch.int16) if dt != torch.float32 else got.view(torch.int32)
            wb = want.view(torch.int16) if dt != torch.float32 else want.view(torch.int32)
            nmis = int((gb != wb).sum())
            print(f"{name}: {got.numel()} values, {nmis} differ from torch's rounding")
            bad += nmis
        sys.exit(1 if bad else 0)


main()
