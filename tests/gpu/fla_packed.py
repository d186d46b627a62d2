"""Packed documents vs FLA's varlen path (cu_seqlens), on the GPU machine (FLA at FLA_PATH, default .fla; torch 2.x).
Written for the lead to run; not part of CI (no GPU there).

  python3 tests/gpu/fla_packed.py ops [fp32|bf16]
      chunk_gated_delta_rule(q, k, v, g, beta, cu_seqlens=...) against the same call run one document at a time
      (FLA's own semantics), and against FLA with the documents as separate batch rows of a padded batch; prints
      the relative errors of o and of dq, dk, dv, dg, dbeta at the 300M head shapes (H=4, HV=8, d=64), T=2048,
      boundaries inside chunks, on chunk edges, length-1 documents and a run of 300 short documents.
      The gdn.c side of this comparison is the model check below (gdn has no op-level CLI).
  python3 tests/gpu/fla_packed.py logits HF_DIR IDS_FILE OUT.npy [EOS]
      fp32 logits of one packed row through GatedDeltaNetForCausalLM(..., cu_seqlens=...), cu_seqlens derived
      from EOS as FLA's flame collator does ({0} + {p+1 : ids[p] == EOS} + {T}); FLA_PACKED_MODE picks the
      delta-rule kernel (fused_recurrent, default, or chunk under TRITON_F32_DEFAULT=ieee); compare with
        ./gdn logits --load CKPT --ids IDS_FILE --out ours.f32 --reset_state_at_eod true --eos_token_id EOS
      using `compare`.
  python3 tests/gpu/fla_packed.py make-eod SRC_PREFIX DST_PREFIX [T]
      real EOD data in FLA's chunk layout: the ids of a Megatron dataset made with --append-eod (documents, each
      ending in EOD 128001), concatenated and cut into T-token chunks (default 2048), one sequence per chunk, so
      gdn (data_order fla) and scripts/fla_ref.py train read the same rows in the same order; the remainder is dropped.
  python3 tests/gpu/fla_packed.py compare OURS.f32 FLA.npy
      max |ours - fla| / max |fla| over all logits (fp32 run: expect <= 1e-4; bf16: ~1e-2).
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.environ.get('FLA_PATH', '.fla'))


def fla_setup():
    """As scripts/fla_ref.py: bypass FLA's Triton < 3.7.1 guard on its gated backward (its issue #640; the brief
    reports gradients within bf16 error of a float64 reference on this machine) and declare the tied weights in
    the form transformers 5 expects."""
    import fla.ops.common.chunk_o as chunk_o
    from fla.models import GatedDeltaNetForCausalLM
    chunk_o.TRITON_ABOVE_3_7_1 = True
    GatedDeltaNetForCausalLM._tied_weights_keys = {'lm_head.weight': 'model.embeddings.weight'}
    return GatedDeltaNetForCausalLM


def cu_from_eos(ids, eos):
    cuts = [0] + [p + 1 for p in range(len(ids) - 1) if ids[p] == eos] + [len(ids)]
    return sorted(set(cuts))


def layout(T):
    starts = {0, 1, 2, 37, 38, 63, 64, 65, 127, 128, 129, 500}
    p = 700
    while p < 1000:  # 300-odd short documents
        starts.add(p)
        p += 1 + (p * 7919) % 3
    starts.update({1024, 1500, 1536})
    return sorted(s for s in starts if s < T) + [T]


def cmd_ops(dtype_name):
    fla_setup()
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    torch.backends.cuda.matmul.allow_tf32 = False
    dt = torch.float32 if dtype_name == 'fp32' else torch.bfloat16
    torch.manual_seed(0)
    T, H, HV, D = 2048, 4, 8, 64
    cu = layout(T)
    dev = 'cuda'
    q = torch.nn.functional.normalize(torch.randn(1, T, H, D, device=dev), dim=-1).to(dt).requires_grad_()
    k = torch.nn.functional.normalize(torch.randn(1, T, H, D, device=dev), dim=-1).to(dt).requires_grad_()
    v = torch.randn(1, T, HV, D, device=dev).to(dt).requires_grad_()
    g = (-torch.rand(1, T, HV, device=dev) * 5).float().requires_grad_()
    beta = torch.rand(1, T, HV, device=dev).to(dt).requires_grad_()
    do = torch.randn(1, T, HV, D, device=dev).to(dt)
    cu_t = torch.tensor(cu, device=dev, dtype=torch.long)
    o, _ = chunk_gated_delta_rule(q, k, v, g, beta, scale=D ** -0.5, cu_seqlens=cu_t)
    grads = torch.autograd.grad(o, (q, k, v, g, beta), do)
    # one document at a time
    o1 = torch.empty_like(o)
    g1 = [torch.zeros_like(x) for x in (q, k, v, g, beta)]
    for a, b in zip(cu[:-1], cu[1:]):
        xs = [x[:, a:b].detach().clone().requires_grad_() for x in (q, k, v, g, beta)]
        oo, _ = chunk_gated_delta_rule(*xs, scale=D ** -0.5)
        o1[:, a:b] = oo.detach()
        for acc, gr in zip(g1, torch.autograd.grad(oo, xs, do[:, a:b])):
            acc[:, a:b] = gr

    def rel(x, y):
        return ((x.float() - y.float()).abs().max() / y.float().abs().max().clamp_min(1e-30)).item()
    print(f'{dtype_name}: {len(cu) - 1} documents in T={T}; varlen vs one by one: o {rel(o, o1):.1e}',
          ' '.join(f'd{n} {rel(a, b):.1e}' for n, a, b in zip(('q', 'k', 'v', 'g', 'beta'), grads, g1)))


def cmd_logits(hf, ids_file, out, eos=128001):
    GatedDeltaNetForCausalLM = fla_setup()
    torch.backends.cuda.matmul.allow_tf32 = False
    ids = np.fromfile(ids_file, dtype=np.int32).astype(np.int64)
    cu = torch.tensor(cu_from_eos(ids.tolist(), int(eos)), dtype=torch.long, device="cuda")
    model = GatedDeltaNetForCausalLM.from_pretrained(hf, torch_dtype=torch.float32).cuda().eval()
    # FLA_PACKED_MODE=fused_recurrent (default): FLA's recurrent kernel, varlen too, has no dots, so fp32 without
    # TF32 and without the minutes of ieee autotuning its chunk kernels need; chunk: run under TRITON_F32_DEFAULT=ieee
    mode = os.environ.get('FLA_PACKED_MODE', 'fused_recurrent')
    layers = [m for m in model.modules() if type(m).__name__ == 'GatedDeltaNet']
    for m in layers:
        m.mode = mode
    print(f'FLA GatedDeltaNet mode {mode} in {len(layers)} layers')
    with torch.no_grad():
        logits = model(input_ids=torch.from_numpy(ids)[None].cuda(), cu_seqlens=cu).logits[0].float().cpu().numpy()
    np.save(out, logits)
    print('logits', logits.shape, 'documents', len(cu) - 1)


def cmd_make_eod(src, dst, T=2048):
    import struct
    T = int(T)
    ids = np.fromfile(src + '.bin', dtype=np.int32)
    n = ids.size // T
    ids[:n * T].tofile(dst + '.bin')
    with open(dst + '.idx', 'wb') as f:  # Megatron's MMIDIDX layout: header, sizes, byte pointers, document index
        f.write(b'MMIDIDX\x00\x00' + struct.pack('<Q', 1) + bytes([4]) + struct.pack('<QQ', n, n + 1))
        f.write(np.full(n, T, np.int32).tobytes())
        f.write((np.arange(n, dtype=np.int64) * T * 4).tobytes())
        f.write(np.arange(n + 1, dtype=np.int64).tobytes())
    rows = ids[:n * T].reshape(n, T)
    print(f'{dst}: {n} chunks of {T}, {(rows == 128001).sum()} EOD ids, {(rows == 128001).sum(1).mean():.1f} per chunk')


def cmd_compare(ours, fla):
    ref = np.load(fla)
    got = np.fromfile(ours, dtype=np.float32).reshape(ref.shape)
    print(f'packed logits, gdn vs FLA cu_seqlens: max rel {np.abs(got - ref).max() / np.abs(ref).max():.2e}')


if __name__ == '__main__':
    cmd, args = sys.argv[1], sys.argv[2:]
    {'ops': cmd_ops, 'logits': cmd_logits, 'compare': cmd_compare, 'make-eod': cmd_make_eod}[cmd](*args)
