#!/usr/bin/env python3
"""Fixtures and checks for `gdn convert` on hybrid FLA models (tests/t_convert_hybrid.sh), written from
spec hybrid.md §1 (the `attn` dict, its defaults, the attention blocks' tensor names), independent of the C
code. Reuses fla_io.py's safetensors reader/writer and the GDN tensors.

  fla_hybrid_io.py make DIR     writes the input HF dirs under DIR
  fla_hybrid_io.py verify DIR   checks what gdn convert wrote under DIR
"""
import collections, json, sys

import torch

import fla_io

CFG = dict(fla_io.CFG, num_hidden_layers=3)
# FLA's saved (normalised) form of one spec: all six keys
ATTN = {"layers": [1], "num_heads": 4, "num_kv_heads": 2, "qkv_bias": True, "window_size": 8, "rope_theta": 500000.0}


def tensors(attn, seed):
    """FLA names: GDN blocks as fla_io, attention blocks per hybrid.md §1.3 (q [h,h], k/v [Hkv*d,h], o [h,h])."""
    t = fla_io.fla_tensors(CFG, seed)
    g = torch.Generator().manual_seed(seed + 100)
    r = lambda *s: torch.randn(*s, generator=g) * 0.5
    h = CFG["hidden_size"]
    Ha = attn["num_heads"]
    Hkv = attn.get("num_kv_heads") or Ha
    d = h // Ha
    for i in attn["layers"]:
        p = f"model.layers.{i}."
        for k in [k for k in t if k.startswith(p + "attn.")]:
            del t[k]
        t[p + "attn.q_proj.weight"] = r(Ha * d, h)
        t[p + "attn.k_proj.weight"] = r(Hkv * d, h)
        t[p + "attn.v_proj.weight"] = r(Hkv * d, h)
        if attn.get("qkv_bias"):
            t[p + "attn.q_proj.bias"] = r(Ha * d)
            t[p + "attn.k_proj.bias"] = r(Hkv * d)
            t[p + "attn.v_proj.bias"] = r(Hkv * d)
        t[p + "attn.o_proj.weight"] = r(h, Ha * d)
    return t


def make(d):
    t = tensors(ATTN, 5)
    fla_io.write_hf(f"{d}/hyb", t, fla_io.fla_config(CFG, attn=ATTN, torch_dtype="float32"))
    # the list form with one spec, FLA's defaults (num_kv_heads null, no bias, no window, theta absent) and a key
    # FLA keeps but never uses
    a2 = {"layers": [0, 2], "num_heads": 2, "num_kv_heads": None, "qk_norm": True}
    fla_io.write_hf(f"{d}/hyb_list", tensors(a2, 6), fla_io.fla_config(CFG, attn=[a2]))
    # refusals
    two = [{"layers": [0], "num_heads": 2}, {"layers": [2], "num_heads": 4}]
    fla_io.write_hf(f"{d}/bad_two_specs", tensors(two[0], 7), fla_io.fla_config(CFG, attn=two))
    fla_io.write_hf(f"{d}/bad_no_heads", t, fla_io.fla_config(CFG, attn={"layers": [1]}))
    fla_io.write_hf(f"{d}/bad_layer", t, fla_io.fla_config(CFG, attn=dict(ATTN, layers=[3])))
    fla_io.write_hf(f"{d}/bad_kv", t, fla_io.fla_config(CFG, attn=dict(ATTN, num_kv_heads=3)))
    gdn_only = fla_io.fla_tensors(CFG, 5)  # GDN tensors where config.json says attention
    fla_io.write_hf(f"{d}/bad_tensors", gdn_only, fla_io.fla_config(CFG, attn=ATTN))
    print(f"hybrid fixtures written under {d}")


def verify(d):
    for src, attn, seed in (("hyb", ATTN, 5), ("hyb_list", {"layers": [0, 2], "num_heads": 2}, 6)):
        t = tensors(attn, seed)
        want = collections.OrderedDict((k, v.float()) for k, v in t.items())
        meta, ck = fla_io.ckpt_tensors(f"{d}/ck_{src}")
        fla_io.compare_all(f"from-hf {src}", ck, want, len(t))
        cj = json.loads(meta["config"])
        exp = (",".join(map(str, attn["layers"])), attn["num_heads"], attn.get("num_kv_heads") or attn["num_heads"],
               bool(attn.get("qkv_bias")), attn.get("window_size") or 0, attn.get("rope_theta", 10000.0))
        got = (cj["attn_layers"], cj["attn_num_heads"], cj["attn_num_kv_heads"], cj["attn_qkv_bias"],
               cj["attn_window_size"], cj["attn_rope_theta"])
        fla_io.check(got == exp, f"{src}: checkpoint attn keys {got} != {exp}")
        _, hf = fla_io.read_st(f"{d}/out_{src}/model.safetensors")
        fla_io.compare_all(f"to-hf {src}", hf, want, len(t))
        conf = json.load(open(f"{d}/out_{src}/config.json"))
        norm = {"layers": attn["layers"], "num_heads": attn["num_heads"],
                "num_kv_heads": attn.get("num_kv_heads") or attn["num_heads"], "qkv_bias": bool(attn.get("qkv_bias")),
                "window_size": attn.get("window_size"), "rope_theta": float(attn.get("rope_theta", 10000.0))}
        fla_io.check(conf["attn"] == norm and type(conf["attn"]["rope_theta"]) == float,
                     f"{src}: config.json attn {conf['attn']} != FLA's normalised {norm}")
        fla_io.check(conf["num_hidden_layers"] == 3, f"{src}: num_hidden_layers {conf['num_hidden_layers']}")
        print(f"{src}: config.json attn = {json.dumps(conf['attn'])}")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("make", "verify"):
        sys.exit(__doc__)
    make(sys.argv[2]) if sys.argv[1] == "make" else verify(sys.argv[2])
    if sys.argv[1] == "verify":
        print(f"{len(fla_io.failures)} failures")
        sys.exit(1 if fla_io.failures else 0)
