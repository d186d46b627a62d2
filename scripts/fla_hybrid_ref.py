"""FLA side of the hybrid (GDN + softmax attention) checks on the GPU machine (scripts/gpu_hybrid_check.sh).

flash-attn is not installed there, and FLA's Attention layer refuses to build without it (spec hybrid.md
§2.4). This script gives FLA a stand-in for `flash_attn_func`, in FLA's calling convention ([B, T, H, d],
causal=True, window_size=(w-1, 0) or (-1, -1)): torch's scaled_dot_product_attention with GQA by head
grouping (query head j reads KV head j // g) and the causal mask aligned bottom-right. Without a window,
at Tq == Tk, it calls SDPA with is_causal=True (PyTorch's FlashAttention-2 kernels); otherwise an explicit
boolean mask. The subcommands mirror scripts/fla_ref.py on the hybrid 300M (configs/gdn-hybrid-300m.yaml):

  init   OUT_DIR              FLA's hybrid GatedDeltaNetForCausalLM (attention in blocks 3, 7, 11), FLA init
  logits HF_DIR IDS_FILE OUT  fp32 logits of one sequence (no TF32) to OUT (.npy)
  train  HF_DIR DATA STEPS    FLA training in the recipe's setup (scripts/fla_ref.py train), JSON per step
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fla_ref  # noqa: E402  (FLA import, the Triton-guard and tied-weights fixes, train/logits loops)
import fla.layers.attn as fla_attn  # noqa: E402

HYBRID_ATTN = {'layers': [3, 7, 11], 'num_heads': 16, 'num_kv_heads': 4, 'qkv_bias': False, 'window_size': None,
               'rope_theta': 10000.0}


def sdpa_flash_attn_func(q, k, v, causal=True, window_size=(-1, -1), softmax_scale=None, **kw):
    """flash_attn_func(q, k, v) on [B, T, H, d] through torch SDPA (FA's semantics: GQA, bottom-right causal)."""
    assert causal and not kw.get('dropout_p'), 'FLA calls flash_attn_func causal, without dropout'
    B, Tq, Ha, d = q.shape
    Tk, Hkv = k.shape[1], k.shape[2]
    g = Ha // Hkv
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    if g > 1:
        k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    left = window_size[0]
    if left < 0 and Tq == Tk:
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=softmax_scale)
    else:
        t = torch.arange(Tq, device=q.device)[:, None] + (Tk - Tq)  # bottom-right alignment
        tau = torch.arange(Tk, device=q.device)[None, :]
        allowed = tau <= t
        if left >= 0:
            allowed &= tau >= t - left
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=softmax_scale)
    return o.transpose(1, 2)


fla_attn.flash_attn_func = sdpa_flash_attn_func
fla_ref.CFG = dict(fla_ref.CFG, attn=HYBRID_ATTN)

if __name__ == '__main__':
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == 'init':
        fla_ref.cmd_init(*args)
    elif cmd == 'logits':
        # SDPA's math backend for the fp32 logits (its flash kernels are bf16/fp16 only)
        from torch.nn.attention import SDPBackend, sdpa_kernel
        with sdpa_kernel(SDPBackend.MATH):
            fla_ref.cmd_logits(*args)
    elif cmd == 'train':
        fla_ref.cmd_train(args[0], args[1], int(args[2]))
    else:
        sys.exit(__doc__)
