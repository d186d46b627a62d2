"""Float64 PyTorch reference of FLA's GatedDeltaNetForCausalLM, written from ../shared/spec/model.md
(§2: forward math, §2.4: the delta-rule recurrence) for gdn.c's tests, and of its hybrid form with
softmax-attention blocks (../shared/spec/hybrid.md §2: RoPE, causal GQA attention, sliding window). Not
FLA's code: plain torch ops, token-by-token recurrence, a masked softmax, autograd for gradients.

    python3 gdn_ref.py check DIR     # compare a dump written by tests/test_model_ref.c
"""
import json
import sys

import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)


def rmsnorm(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def short_conv_silu(x, w, doc=None):
    """Causal depthwise conv (no bias) + SiLU. x [B,T,D], w [D,1,K]; w[c,0,K-1] multiplies the current token.
    doc [B,T] (packed documents, spec train.md §7.1): the position where each token's document starts; inputs
    before it read as 0."""
    K = w.shape[-1]
    if doc is None:
        xp = F.pad(x.transpose(1, 2), (K - 1, 0))
        return F.silu(F.conv1d(xp, w, groups=x.shape[-1]).transpose(1, 2))
    B, T, D = x.shape
    t = torch.arange(T)
    y = torch.zeros(B, T, D)
    for s in range(K):  # tap K-1-s reads x[t - s]
        xs = torch.cat([torch.zeros(B, s, D), x[:, :T - s]], 1)
        keep = ((t - s)[None, :] >= doc).to(x.dtype)[..., None]
        y = y + w[:, 0, K - 1 - s] * xs * keep
    return F.silu(y)


def doc_starts(ids, eos):
    """Where each token's document starts: a token after an EOS starts one (FLA's rule for cu_seqlens)."""
    B, T = ids.shape
    doc = torch.zeros(B, T, dtype=torch.long)
    for b in range(B):
        cur = 0
        for t in range(T):
            if t > 0 and ids[b, t - 1] == eos:
                cur = t
            doc[b, t] = cur
    return doc


def delta_rule(q, k, v, beta, gamma, scale, doc=None):
    """q,k [B,T,HV,dk] (already repeated per v head), v [B,T,HV,dv], beta/gamma [B,T,HV]. Spec §2.4.
    doc [B,T]: packed documents; the state restarts at zero where one starts."""
    B, T, HV, dk = q.shape
    dv = v.shape[-1]
    S = torch.zeros(B, HV, dk, dv)
    outs = []
    for t in range(T):
        if doc is not None and t > 0:
            S = S * (doc[:, t] != t).to(S.dtype)[:, None, None, None]         # 0. a new document: zero state
        S = torch.exp(gamma[:, t])[..., None, None] * S                     # 1. decay
        e = v[:, t] - torch.einsum('bhkv,bhk->bhv', S, k[:, t])              # 2. read the decayed state
        u = beta[:, t][..., None] * e
        S = S + torch.einsum('bhk,bhv->bhkv', k[:, t], u)                    # 3. rank-1 write
        outs.append(torch.einsum('bhkv,bhk->bhv', S, scale * q[:, t]))       # 4. read after the write
    return torch.stack(outs, 1)


def attn_layers(cfg):
    """Blocks with softmax attention: the attn_layers key, comma-separated block indices."""
    return {int(x) for x in cfg.get('attn_layers', '').replace('[', '').replace(']', '').split(',') if x.strip()}


def rope_tables(T, d, theta):
    """cos/sin [T, d/2] as FLA's RotaryEmbedding builds them (hybrid.md §2.2): fp32 inv_freq, fp32
    outer product with fp32 positions, fp32 cos/sin (an fp32 model keeps them fp32), then used in float64."""
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    f = torch.outer(torch.arange(T, dtype=torch.float32), inv)
    return f.cos().double(), f.sin().double()


def rope(x, cos, sin):
    """Rotate-half (GPT-NeoX) over the whole head dim. x [B,T,H,d], cos/sin [T,d/2]."""
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], -1)


def rope_at(x, cos, sin, pos):
    """rope() with a position per token: pos [B,T] indexes the tables (packed documents)."""
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    c, s = cos[pos][:, :, None, :], sin[pos][:, :, None, :]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], -1)


def attention(u, p, cfg, doc=None):
    """FLA's Attention layer (hybrid.md §2.1, §2.3): q,k,v projections (+bias), RoPE on q and k, causal
    softmax attention with query head j reading kv head j // (Ha/Hkv), window w: keys t-w+1..t; o_proj.
    doc [B,T] (packed documents): as FLA's varlen path (cu_seqlens, hybrid.md §2.2-2.3), the RoPE position
    restarts at each document (t - doc[t]) and query t sees only keys of its document (>= doc[t])."""
    B, T, h = u.shape
    Ha = cfg['attn_num_heads']
    Hkv = cfg['attn_num_kv_heads'] or Ha
    d, w = h // Ha, cfg['attn_window_size']
    lin = lambda n: u @ p(f'attn.{n}_proj.weight').T + (p(f'attn.{n}_proj.bias') if cfg['attn_qkv_bias'] else 0)
    q, k, v = lin('q').view(B, T, Ha, d), lin('k').view(B, T, Hkv, d), lin('v').view(B, T, Hkv, d)
    cos, sin = rope_tables(T, d, cfg['attn_rope_theta'])
    if doc is None:
        q, k = rope(q, cos, sin), rope(k, cos, sin)
    else:
        pos = torch.arange(T)[None, :] - doc
        q, k = rope_at(q, cos, sin, pos), rope_at(k, cos, sin, pos)
    g = Ha // Hkv
    k, v = k.repeat_interleave(g, 2), v.repeat_interleave(g, 2)
    s = torch.einsum('bthd,bshd->bhts', q, k) * d ** -0.5
    t_idx, s_idx = torch.arange(T)[:, None], torch.arange(T)[None, :]
    allowed = (s_idx <= t_idx) & ((s_idx > t_idx - w) if w > 0 else True)
    allowed = allowed[None, None] if doc is None else allowed[None, None] & (s_idx[None, None] >= doc[:, None, :, None])
    s = s.masked_fill(~allowed, float('-inf'))
    o = torch.einsum('bhts,bshd->bthd', torch.softmax(s, -1), v)
    return o.reshape(B, T, Ha * d) @ p('attn.o_proj.weight').T


def forward(P, ids, cfg, gates=None):
    """The logits [B, T, V]. gates (a dict, optional) receives each GDN layer's gamma [B, T, HV] (check() uses
    them to scale the gate parameters' errors)."""
    h, L = cfg['hidden_size'], cfg['num_layers'] // 2
    H, HV, dk, dv = cfg['linear_num_key_heads'], cfg['linear_num_value_heads'], cfg['linear_key_head_dim'], cfg['linear_value_head_dim']
    eps = cfg['norm_epsilon']
    B, T = ids.shape
    E = P['model.embeddings.weight']
    doc = doc_starts(ids, cfg['eos_token_id']) if cfg.get('reset_state_at_eod') else None
    x = E[ids]
    hybrid = attn_layers(cfg)
    for l in range(L):
        p = lambda n: P[f'model.layers.{l}.{n}']
        u = rmsnorm(x, p('attn_norm.weight'), eps)
        if l in hybrid:
            s = x + attention(u, p, cfg, doc)
            m = rmsnorm(s, p('mlp_norm.weight'), eps)
            x = s + (F.silu(m @ p('mlp.gate_proj.weight').T) * (m @ p('mlp.up_proj.weight').T)) @ p('mlp.down_proj.weight').T
            continue
        q = short_conv_silu(u @ p('attn.q_proj.weight').T, p('attn.q_conv1d.weight'), doc)
        k = short_conv_silu(u @ p('attn.k_proj.weight').T, p('attn.k_conv1d.weight'), doc)
        v = short_conv_silu(u @ p('attn.v_proj.weight').T, p('attn.v_conv1d.weight'), doc)
        g = u @ p('attn.g_proj.weight').T
        a = u @ p('attn.a_proj.weight').T
        b = u @ p('attn.b_proj.weight').T
        q, k, v = q.view(B, T, H, dk), k.view(B, T, H, dk), v.view(B, T, HV, dv)
        q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6)
        k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
        beta = torch.sigmoid(b)
        gamma = -torch.exp(p('attn.A_log')) * F.softplus(a + p('attn.dt_bias'))  # softplus(x) = x above 20
        if gates is not None:
            gamma.retain_grad()
            gates[l] = gamma
        rep = HV // H  # v head j reads q/k head j // rep
        o = delta_rule(q.repeat_interleave(rep, 2), k.repeat_interleave(rep, 2), v, beta, gamma, dk ** -0.5, doc)
        o = rmsnorm(o, p('attn.o_norm.weight'), eps) * F.silu(g.view(B, T, HV, dv))
        s = x + o.reshape(B, T, HV * dv) @ p('attn.o_proj.weight').T
        m = rmsnorm(s, p('mlp_norm.weight'), eps)
        x = s + (F.silu(m @ p('mlp.gate_proj.weight').T) * (m @ p('mlp.up_proj.weight').T)) @ p('mlp.down_proj.weight').T
    y = rmsnorm(x, P['model.norm.weight'], eps)
    return y @ E.T


def load_dump(d):
    meta = json.load(open(f'{d}/meta.json'))
    raw = lambda n, dt: torch.frombuffer(bytearray(open(f'{d}/{n}', 'rb').read()), dtype=dt)
    flat = raw('params.bin', torch.float32).double()
    P = {}
    for t in meta['tensors']:
        n = 1
        for s in t['shape']:
            n *= s
        P[t['name']] = flat[t['off']:t['off'] + n].view(t['shape']).clone().requires_grad_(True)
    B, T = meta['B'], meta['T']
    ids = raw('ids.bin', torch.int32).long().view(B, T)
    tgt = raw('targets.bin', torch.int32).long().view(B, T)
    return meta, P, ids, tgt, raw


def rel(a, b):
    """Relative error of a tensor, ||a - b||_2 / ||b||_2 (FLA's tests use the same norm-based measure)."""
    return (a - b).norm().item() / max(b.norm().item(), 1e-300)


def rel_max(a, b):
    """Elementwise view: max |a - b| / max |b|."""
    return (a - b).abs().max().item() / max(b.abs().max().item(), 1e-300)


def gate_term_scales(P, gates):
    """A_log's and dt_bias's gradients are, per head j, sums over every token n of dL/dgamma_n * dgamma_n/dtheta_j,
    and those terms cancel (in the hybrid test cases the sum is down to 1/76 of the sum of the terms' magnitudes).
    An fp32 sum's error is a fraction of sum_n |term_n|, not of |sum|, so their errors are measured against it.
    dgamma/dA_log = gamma and dgamma/ddt_bias = -exp(A_log) sigmoid(a + dt_bias) are negative everywhere, so
    sum_n |term_n| = -d/dtheta sum_n |dL/dgamma_n| gamma_n (|dL/dgamma| held fixed), one autograd call."""
    out = {}
    for l, gamma in gates.items():
        names = [f'model.layers.{l}.attn.A_log', f'model.layers.{l}.attn.dt_bias']
        mags = torch.autograd.grad((gamma.grad.abs() * gamma).sum(), [P[n] for n in names], retain_graph=True)
        for n, m in zip(names, mags):
            out[n + '.grad'] = -m
    return out


def check(d, tol=1e-5, tol_max=1e-5):
    meta, P, ids, tgt, raw = load_dump(d)
    cfg = meta['config']
    gates = {}
    logits = forward(P, ids, cfg, gates)
    loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), tgt.view(-1), ignore_index=-1, reduction='mean')
    loss.backward(retain_graph=True)
    scale = gate_term_scales(P, gates)
    B, T, V = logits.shape
    worst, bad = 0.0, []
    c_logits = raw('logits.bin', torch.float32).double().view(B, T, V)
    c_grads = raw('grads.bin', torch.float32).double()
    lerr = abs(meta['loss'] - loss.item()) / abs(loss.item())
    pairs = [('logits', c_logits, logits.detach())]
    for t in meta['tensors']:
        g = P[t['name']].grad
        n = g.numel()
        pairs.append((t['name'] + '.grad', c_grads[t['off']:t['off'] + n].view(g.shape), g))
    worst_max = 0.0
    if not lerr <= tol:
        bad.append(f'loss: {lerr:.3e}')
    for name, a, b in pairs:
        e, em = rel(a, b), rel_max(a, b)
        if name in scale:  # a per-head sum over tokens: its error measured against the terms' magnitudes
            s = scale[name]
            e, em = (a - b).norm().item() / max(s.norm().item(), 1e-300), ((a - b).abs() / s.clamp_min(1e-300)).max().item()
        worst, worst_max = max(worst, e), max(worst_max, em)
        if not e <= tol:  # also catches NaN
            bad.append(f'{name}: relative error {e:.3e} > {tol:g}')
        if not em <= tol_max:
            bad.append(f'{name}: max-abs relative error {em:.3e} > {tol_max:g}')
    print(f'  {d}: loss {loss.item():.6f} (rel {lerr:.1e}), worst relative error over {len(pairs)} tensors: '
          f'{worst:.2e} in L2 (tol {tol:g}), {worst_max:.2e} elementwise (tol {tol_max:g})')
    for b in bad:
        print('  FAIL', b)
    return not bad


if __name__ == '__main__':
    if len(sys.argv) != 3 or sys.argv[1] != 'check':
        sys.exit(__doc__)
    sys.exit(0 if check(sys.argv[2]) else 1)
