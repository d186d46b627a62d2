#!/usr/bin/env python3
"""Test fixtures and checks for `gdn convert` (tests/t_convert.sh). Written from the formats in spec
model.md §5/§6, independent of the C code: FLA HuggingFace dirs (config.json + safetensors written by hand
from torch tensors' bytes) and Megatron/Primus model_optim_rng.pt files written by torch.save.

  fla_io.py make DIR     writes every input fixture under DIR
  fla_io.py verify DIR   checks every output gdn convert wrote under DIR (exit 1 on any mismatch)
  fla_io.py make-pt F    writes one Megatron-style torch.save file F (views, args/RNG/optimizer extras)
"""
import argparse, collections, io, json, os, random, struct, sys

import numpy as np
import torch

DT = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16", torch.int32: "I32"}
INV = {v: k for k, v in DT.items()}

# the test model: small, but GVA (HV = 2H), expand_v = 2 (dv = 2 dk) and 2 blocks
CFG = dict(hidden_size=64, num_hidden_layers=2, num_heads=2, num_v_heads=4, head_dim=16, expand_v=2.0,
           intermediate_size=96, conv_size=4, vocab_size=300, norm_eps=1e-6, initializer_range=0.02)


def dims(c):
    h, H = c["hidden_size"], c["num_heads"]
    HV = c["num_v_heads"] if c.get("num_v_heads") is not None else H
    dk = c["head_dim"]
    dv = int(dk * c["expand_v"])
    F = c.get("intermediate_size")
    if F is None:  # FLA GatedMLP default
        F = int(h * c.get("hidden_ratio", 4) * 2 / 3)
        F = 256 * ((F + 256 - 1) // 256)
    return dict(h=h, L=c["num_hidden_layers"], H=H, HV=HV, dk=dk, dv=dv, Kd=H * dk, Vd=HV * dv, F=F,
                K=c["conv_size"], V=c["vocab_size"])


def fla_tensors(c, seed):
    """FLA names and shapes (spec §5), random values with structure the converters could scramble."""
    d = dims(c)
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g) * 0.5
    t = collections.OrderedDict()
    t["model.embeddings.weight"] = r(d["V"], d["h"])
    for i in range(d["L"]):
        p = f"model.layers.{i}."
        t[p + "attn_norm.weight"] = 1 + r(d["h"])
        t[p + "attn.q_proj.weight"] = r(d["Kd"], d["h"])
        t[p + "attn.k_proj.weight"] = r(d["Kd"], d["h"])
        t[p + "attn.v_proj.weight"] = r(d["Vd"], d["h"])
        t[p + "attn.a_proj.weight"] = r(d["HV"], d["h"])
        t[p + "attn.b_proj.weight"] = r(d["HV"], d["h"])
        t[p + "attn.A_log"] = torch.log(torch.rand(d["HV"], generator=g) * 15 + 1)
        t[p + "attn.dt_bias"] = r(d["HV"])
        t[p + "attn.q_conv1d.weight"] = r(d["Kd"], 1, d["K"])
        t[p + "attn.k_conv1d.weight"] = r(d["Kd"], 1, d["K"])
        t[p + "attn.v_conv1d.weight"] = r(d["Vd"], 1, d["K"])
        t[p + "attn.g_proj.weight"] = r(d["Vd"], d["h"])
        t[p + "attn.o_norm.weight"] = 1 + r(d["dv"])
        t[p + "attn.o_proj.weight"] = r(d["h"], d["Vd"])
        t[p + "mlp_norm.weight"] = 1 + r(d["h"])
        t[p + "mlp.gate_proj.weight"] = r(d["F"], d["h"])
        t[p + "mlp.up_proj.weight"] = r(d["F"], d["h"])
        t[p + "mlp.down_proj.weight"] = r(d["h"], d["F"])
    t["model.norm.weight"] = 1 + r(d["h"])
    return t


def fla_config(c, **over):
    # what GatedDeltaNetConfig.save_pretrained writes (sorted keys), with the test's values
    j = dict(allow_neg_eigval=False, architectures=["GatedDeltaNetForCausalLM"], attn=None, attn_mode="chunk",
             bos_token_id=128000, eos_token_id=128001, fuse_cross_entropy=True, fuse_linear_cross_entropy=False,
             fuse_norm=True, fuse_swiglu=True, hidden_act="swish", hidden_ratio=4, max_position_embeddings=2048,
             model_type="gated_deltanet", pad_token_id=None, tie_word_embeddings=True, torch_dtype="bfloat16",
             transformers_version="4.53.0", use_cache=True, use_gate=True, use_l2warp=False, use_short_conv=True)
    j.update(c)
    j.update(over)
    return {k: v for k, v in j.items() if v != "<drop>"}


def raw(t):
    t = t.contiguous()
    return t.view(torch.int16).numpy().tobytes() if t.dtype == torch.bfloat16 else t.numpy().tobytes()


def write_st(path, tensors, meta={"format": "pt"}):
    header, blobs, off = {"__metadata__": meta} if meta else {}, [], 0
    for name, t in tensors.items():
        b = raw(t)
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
    meta = header.pop("__metadata__", {})
    out = collections.OrderedDict()
    for name, e in header.items():
        b0, b1 = e["data_offsets"]
        buf = bytearray(data[8 + n + b0:8 + n + b1])
        dt = INV[e["dtype"]]
        t = torch.frombuffer(buf, dtype=torch.int16).view(torch.bfloat16) if dt == torch.bfloat16 else \
            torch.frombuffer(buf, dtype=dt)
        out[name] = t.reshape(e["shape"])
    return meta, out


def write_hf(d, tensors, config, dtype=torch.float32, lm_head=None, shards=1):
    os.makedirs(d, exist_ok=True)
    json.dump(config, open(f"{d}/config.json", "w"), indent=2, sort_keys=True)
    ts = collections.OrderedDict()
    for k, v in tensors.items():  # A_log / dt_bias stay fp32 as in Primus exports (spec §5)
        ts[k] = v if k.endswith(("A_log", "dt_bias")) else v.to(dtype)
    if lm_head is not None:
        ts["lm_head.weight"] = lm_head.to(dtype)
    if shards == 1:
        write_st(f"{d}/model.safetensors", ts)
        return
    names = list(ts)
    per = (len(names) + shards - 1) // shards
    wm = {}
    for s in range(shards):
        fn = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = collections.OrderedDict((k, ts[k]) for k in names[s * per:(s + 1) * per])
        write_st(f"{d}/{fn}", part)
        wm.update({k: fn for k in part})
    json.dump({"metadata": {"total_size": 0}, "weight_map": wm}, open(f"{d}/model.safetensors.index.json", "w"), indent=2)


def megatron_state(t, c, te, dtype, views=False, extras=False):
    """Primus/Megatron torch-format state dict (spec §6) built from FLA tensors."""
    d = dims(c)
    m = collections.OrderedDict()
    cast = lambda x: x.to(dtype)
    m["embedding.word_embeddings.weight"] = cast(t["model.embeddings.weight"])
    for i in range(d["L"]):
        p, g, q = f"model.layers.{i}.", f"decoder.layers.{2 * i}.", f"decoder.layers.{2 * i + 1}."
        in_proj = torch.cat([t[p + f"attn.{x}_proj.weight"] for x in "qkvgba"])  # beta before alpha
        conv = torch.cat([t[p + f"attn.{x}_conv1d.weight"] for x in "qkv"])
        fc1 = torch.cat([t[p + "mlp.gate_proj.weight"], t[p + "mlp.up_proj.weight"]])
        out_proj = cast(t[p + "attn.o_proj.weight"])
        in_proj = cast(in_proj)
        if views:  # a storage offset and a transposed (non-contiguous) layout must be honoured
            big = torch.cat([torch.full((3, d["h"]), 7.0, dtype=dtype), in_proj])
            in_proj = big[3:]
            out_proj = out_proj.t().contiguous().t()
            assert in_proj.storage_offset() == 3 * d["h"] and not out_proj.is_contiguous()
        m[g + ("mixer.in_proj.layer_norm_weight" if te else "norm.weight")] = cast(t[p + "attn_norm.weight"])
        if te:
            m[g + "mixer.in_proj._extra_state"] = torch.tensor([1, 2, 3], dtype=torch.uint8) if i == 0 else io.BytesIO(b"x")
        m[g + "mixer.in_proj.weight"] = in_proj
        m[g + "mixer.A_log"] = t[p + "attn.A_log"].clone()
        m[g + "mixer.dt_bias"] = t[p + "attn.dt_bias"].clone()
        m[g + "mixer.conv1d.weight"] = cast(conv)
        m[g + "mixer.out_norm.weight"] = cast(t[p + "attn.o_norm.weight"])
        m[g + "mixer.out_proj.weight"] = out_proj
        m[q + ("mlp.linear_fc1.layer_norm_weight" if te else "pre_mlp_layernorm.weight")] = cast(t[p + "mlp_norm.weight"])
        m[q + "mlp.linear_fc1.weight"] = cast(fc1)
        m[q + "mlp.linear_fc2.weight"] = cast(t[p + "mlp.down_proj.weight"])
        if te:
            m[q + "mlp.linear_fc2._extra_state"] = None
    m["decoder.final_norm.weight"] = cast(t["model.norm.weight"])
    if te:
        m["output_layer.weight"] = m["embedding.word_embeddings.weight"].clone()
    sd = {"iteration": 0, "model": m, "checkpoint_version": 3.0}
    if extras:  # what real checkpoints also carry: args, RNG states, optimizer state, bytes, sets
        sd["args"] = argparse.Namespace(num_layers=2 * d["L"], hidden_size=d["h"], bf16=True, lr=2e-4, tag=b"\x00\xffab",
                                        layers={1, 2}, big=2**70)
        sd["rng_state"] = [{"random_rng_state": random.Random(1).getstate(), "np_rng_state": np.random.RandomState(2).get_state(),
                            "torch_rng_state": torch.get_rng_state(), "rng_tracker_states": {}}]
        sd["optimizer"] = {"state": {0: {"exp_avg": torch.zeros(3)}}, "param_groups": [{"lr": 1e-3, "params": [0]}]}
        sd["opt_param_scheduler"] = {"max_lr": 2e-4, "num_steps": 0}
    return sd


def save_megatron(root, sd, iteration=0):
    d = f"{root}/iter_{iteration:07d}/mp_rank_00"
    os.makedirs(d, exist_ok=True)
    torch.save(sd, f"{d}/model_optim_rng.pt")
    open(f"{root}/latest_checkpointed_iteration.txt", "w").write(str(iteration))


def make(d):
    t = fla_tensors(CFG, 1)
    cfg = fla_config(CFG)
    write_hf(f"{d}/hf_f32", t, fla_config(CFG, torch_dtype="float32"))
    write_hf(f"{d}/hf_bf16", t, cfg, torch.bfloat16, lm_head=t["model.embeddings.weight"])
    write_hf(f"{d}/hf_lmhead", t, cfg, lm_head=t["model.embeddings.weight"].clone())
    lm = t["model.embeddings.weight"].clone()
    lm[7, 5] += 1e-3
    write_hf(f"{d}/hf_lmhead_diff", t, cfg, lm_head=lm)
    write_hf(f"{d}/hf_sharded", t, cfg, torch.float16, shards=3)
    c2 = dict(CFG, num_v_heads=None, intermediate_size=None, expand_v=1.0)  # FLA defaults: HV = H, F from hidden_ratio
    write_hf(f"{d}/hf_defaults", fla_tensors(c2, 2), fla_config(c2, intermediate_size="<drop>"))
    # bad inputs
    bad = dict(t)
    del bad["model.layers.1.attn.dt_bias"]
    write_hf(f"{d}/bad_missing", bad, cfg)
    bad = dict(t, **{"model.layers.0.attn.foo.weight": torch.zeros(2)})
    write_hf(f"{d}/bad_extra", bad, cfg)
    bad = dict(t, **{"model.layers.1.attn.q_proj.weight": torch.zeros(dims(CFG)["Kd"] + 1, CFG["hidden_size"])})
    write_hf(f"{d}/bad_shape", bad, cfg)
    write_hf(f"{d}/bad_dtype", t, cfg)
    ts = read_st(f"{d}/bad_dtype/model.safetensors")[1]
    ts["model.norm.weight"] = torch.zeros(CFG["hidden_size"], dtype=torch.int32)
    write_st(f"{d}/bad_dtype/model.safetensors", ts)
    write_hf(f"{d}/bad_trunc", t, cfg)
    p = f"{d}/bad_trunc/model.safetensors"
    os.truncate(p, os.path.getsize(p) - 100)
    write_hf(f"{d}/bad_type", t, fla_config(CFG, model_type="llama"))
    write_hf(f"{d}/bad_untied", t, fla_config(CFG, tie_word_embeddings=False))
    write_hf(f"{d}/bad_conf", t, fla_config(CFG, hidden_size="64"))
    # Megatron: local spec fp32 with views and the extra state of real checkpoints; TE spec bf16
    save_megatron(f"{d}/meg_local", megatron_state(t, CFG, te=False, dtype=torch.float32, views=True, extras=True))
    save_megatron(f"{d}/meg_te", megatron_state(t, CFG, te=True, dtype=torch.bfloat16), iteration=1234)
    sd = megatron_state(t, CFG, te=False, dtype=torch.float32)
    sd["model"]["decoder.layers.1.mlp.linear_fc1.bias"] = torch.zeros(2 * CFG["intermediate_size"])
    save_megatron(f"{d}/meg_bad_extra", sd)
    sd = megatron_state(t, CFG, te=False, dtype=torch.float32)
    del sd["model"]["decoder.layers.2.mixer.A_log"]
    save_megatron(f"{d}/meg_bad_missing", sd)
    sd = megatron_state(t, CFG, te=True, dtype=torch.float32)
    sd["model"]["output_layer.weight"][0, 0] += 1
    save_megatron(f"{d}/meg_bad_untied", sd)
    # a tokenizer.json with Llama-3's special tokens at 128000/128001
    tok = {"version": "1.0", "added_tokens": [{"id": 128000, "content": "<|begin_of_text|>", "special": True},
                                              {"id": 128001, "content": "<|end_of_text|>", "special": True}],
           "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}
    json.dump(tok, open(f"{d}/tokenizer.json", "w"))
    print(f"fixtures written under {d}")


# ---------------------------------------------------------------------------------------------------

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL", what)


def bits_equal(a, b):
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    view = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}[a.dtype]
    return torch.equal(a.contiguous().view(view), b.contiguous().view(view))


def ckpt_tensors(d):
    meta, ts = read_st(f"{d}/iter_0000000/model.safetensors")
    return meta, ts


def compare_all(what, got, want, n_expected):
    check(list(got) == list(want) or sorted(got) == sorted(want), f"{what}: tensor names differ: "
          f"{sorted(set(got) ^ set(want))[:5]}")
    bad = [k for k in want if k in got and not bits_equal(got[k], want[k])]
    check(not bad, f"{what}: {len(bad)} tensors differ, e.g. {bad[:3]}")
    check(len(got) == n_expected, f"{what}: {len(got)} tensors, expected {n_expected}")
    print(f"{what}: {len(got)} tensors compared bit for bit, {len(bad)} differ")


def verify(d):
    t = fla_tensors(CFG, 1)
    n = len(t)
    f32 = collections.OrderedDict((k, v.float()) for k, v in t.items())
    keep32 = lambda k: k.endswith(("A_log", "dt_bias"))
    rounded = lambda dt: collections.OrderedDict((k, v if keep32(k) else v.to(dt).float()) for k, v in t.items())

    # HF -> ours: exactly the HF values (bf16/f16 widened exactly)
    meta, ck = ckpt_tensors(f"{d}/ck_f32")
    compare_all("from-hf fp32", ck, f32, n)
    check(meta.get("format") == "gdn.c-checkpoint" and meta.get("iteration") == "0", f"checkpoint metadata {meta.get('format')}")
    cj = json.loads(meta["config"])
    check((cj["hidden_size"], cj["num_layers"], cj["ffn_hidden_size"], cj["linear_num_key_heads"],
           cj["linear_num_value_heads"], cj["linear_key_head_dim"], cj["linear_value_head_dim"], cj["vocab_size"]) ==
          (64, 4, 96, 2, 4, 16, 32, 300), f"config mapping {cj}")
    check(not os.path.exists(f"{d}/ck_f32/iter_0000000/optimizer.safetensors"), "from-hf wrote optimizer state")
    compare_all("from-hf bf16 (+lm_head copy)", ckpt_tensors(f"{d}/ck_bf16")[1], rounded(torch.bfloat16), n)
    compare_all("from-hf lm_head present", ckpt_tensors(f"{d}/ck_lmhead")[1], f32, n)
    compare_all("from-hf sharded f16", ckpt_tensors(f"{d}/ck_sharded")[1], rounded(torch.float16), n)
    c2 = dict(CFG, num_v_heads=None, intermediate_size=None, expand_v=1.0)
    compare_all("from-hf FLA defaults", ckpt_tensors(f"{d}/ck_defaults")[1],
                collections.OrderedDict((k, v.float()) for k, v in fla_tensors(c2, 2).items()), n)
    cj = json.loads(ckpt_tensors(f"{d}/ck_defaults")[0]["config"])
    check((cj["ffn_hidden_size"], cj["linear_num_value_heads"], cj["linear_value_head_dim"]) == (256, 2, 16),
          f"FLA default rules: F {cj['ffn_hidden_size']} HV {cj['linear_num_value_heads']} dv {cj['linear_value_head_dim']}")

    # ours -> HF
    meta, hf = read_st(f"{d}/out_hf32/model.safetensors")
    check(meta == {"format": "pt"} or meta.get("format") == "pt", f"HF metadata {meta}")
    check("lm_head.weight" not in hf, "lm_head written although tied")
    compare_all("to-hf fp32", hf, f32, n)
    meta, hf = read_st(f"{d}/out_hf16/model.safetensors")
    dts = {k: v.dtype for k, v in hf.items()}
    check(all(dts[k] == (torch.float32 if keep32(k) else torch.bfloat16) for k in dts), "to-hf bf16 dtypes")
    want = collections.OrderedDict((k, v if keep32(k) else v.to(torch.bfloat16)) for k, v in t.items())
    compare_all("to-hf bf16 = torch RNE rounding", hf, want, n)
    conf = json.load(open(f"{d}/out_hf32/config.json"))
    exp = fla_config(CFG, torch_dtype="float32", transformers_version="<drop>")
    exp["dtype"] = "float32"
    exp["attnres_block_size"] = None
    for k, v in exp.items():
        check(k in conf and conf[k] == v and type(conf[k]) == type(v), f"config.json {k}: {conf.get(k)!r} != {v!r}")
    extra = set(conf) - set(exp)
    check(not extra, f"config.json has unexpected keys {extra}")
    check(json.load(open(f"{d}/out_hf16/config.json"))["torch_dtype"] == "bfloat16", "bf16 config torch_dtype")
    check(open(f"{d}/out_hf16/tokenizer.json", "rb").read() == open(f"{d}/tokenizer.json", "rb").read(), "tokenizer.json copied")
    tc = json.load(open(f"{d}/out_hf16/tokenizer_config.json"))
    sm = json.load(open(f"{d}/out_hf16/special_tokens_map.json"))
    check(tc.get("tokenizer_class") == "PreTrainedTokenizerFast" and tc.get("bos_token") == "<|begin_of_text|>" and
          tc.get("eos_token") == "<|end_of_text|>", f"tokenizer_config.json {tc}")
    check(sm == {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"}, f"special_tokens_map.json {sm}")

    # Megatron -> ours
    compare_all("from-megatron local fp32 (views, extras)", ckpt_tensors(f"{d}/ck_meg_local")[1], f32, n)
    compare_all("from-megatron TE bf16", ckpt_tensors(f"{d}/ck_meg_te")[1], rounded(torch.bfloat16), n)

    # ours -> Megatron, read by torch.load
    for name, te, dt in (("out_meg", False, torch.float32), ("out_meg_te", True, torch.bfloat16), ("out_meg_z64", False, torch.float32)):
        f = f"{d}/{name}/iter_0000000/mp_rank_00/model_optim_rng.pt"
        check((b"PK\x06\x06" in open(f, "rb").read()) == name.endswith("z64"), f"{name}: zip64 records present/absent")
        sd = torch.load(f, map_location="cpu")
        check(open(f"{d}/{name}/latest_checkpointed_iteration.txt").read().strip() == "0", f"{name}: latest file")
        check(set(sd) == {"iteration", "model", "checkpoint_version"} and sd["iteration"] == 0 and
              sd["checkpoint_version"] == 3.0, f"{name}: top-level {set(sd)}")
        check(isinstance(sd["model"], collections.OrderedDict), f"{name}: model is {type(sd['model'])}")
        ref = megatron_state(t, CFG, te=te, dtype=dt)["model"]
        ref = collections.OrderedDict((k, v) for k, v in ref.items() if not k.endswith("_extra_state") and k != "output_layer.weight")
        for k in ref:
            if k.endswith(("A_log", "dt_bias")):
                ref[k] = ref[k].float()
        compare_all(f"to-megatron {name} (torch.load)", sd["model"], ref, len(ref))


def main():
    mode, d = sys.argv[1], sys.argv[2]
    if mode == "make":
        make(d)
    elif mode == "make-pt":
        tiny = dict(CFG, hidden_size=8, num_heads=1, num_v_heads=2, head_dim=4, intermediate_size=8, vocab_size=10)
        torch.save(megatron_state(fla_tensors(tiny, 3), tiny, te=True, dtype=torch.bfloat16, views=True, extras=True), d)
    else:
        verify(d)
        print(f"{len(failures)} failures")
        sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
