#!/usr/bin/env bash
# recompute_swiglu (model/gdn.c): the forward keeps no SwiGLU output per block and the backward recomputes it, so
# training gives the same losses, weights and AdamW state bit for bit, GDN-only and hybrid, with
# num_blocks x N x F activation elements fewer (the allocation line says how many bytes). recompute_gdn_acts
# (model/layer_gdn.c): likewise for each GDN block's conv output, normed q/k and gated-norm output, one shared set
# kept instead of one per GDN block; and both keys together.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 tests/ref/make_dataset.py "$tmp/data" 30000 500 3
common=(--config configs/tiny.yaml --vocab_size 500 --train_data_path "$tmp/data" --seq_length 64
        --micro_batch_size 2 --global_batch_size 4 --log_interval 1 --device cpu --lr_warmup_iters 2 --train_iters 6)
hybrid=(--attn_layers 1 --attn_num_heads 4 --attn_num_kv_heads 2)
for kind in gdn hybrid; do
  extra=(); [ $kind = hybrid ] && extra=("${hybrid[@]}")
  ./gdn train "${common[@]}" "${extra[@]}" --save "$tmp/$kind-keep" > "$tmp/$kind-keep.log" 2>&1
  ./gdn train "${common[@]}" "${extra[@]}" --recompute_swiglu true --save "$tmp/$kind-rec" > "$tmp/$kind-rec.log" 2>&1
  ./gdn train "${common[@]}" "${extra[@]}" --recompute_gdn_acts true --save "$tmp/$kind-gdn" > "$tmp/$kind-gdn.log" 2>&1
  ./gdn train "${common[@]}" "${extra[@]}" --recompute_gdn_acts true --recompute_swiglu true --save "$tmp/$kind-both" \
      > "$tmp/$kind-both.log" 2>&1
done
/usr/bin/python3 - "$tmp" <<'PY'
import json, re, sys
sys.path.insert(0, 'tests/ref')
from st import tensors_raw as tensors
tmp = sys.argv[1]
cfg = dict(re.findall(r'^(\w+):\s*(\S+)', open('configs/tiny.yaml').read(), re.M))
blocks, F, N = int(cfg['num_layers']) // 2, int(cfg['ffn_hidden_size']), 2 * 64
H, HV = int(cfg['linear_num_key_heads']), int(cfg['linear_num_value_heads'])
dk, dv = int(cfg['linear_key_head_dim']), int(cfg['linear_value_head_dim'])
per_gdn = N * (2 * H * dk + HV * dv) + N * 2 * H * dk + N * HV * dv   # C, QK, on (elements)
def rounded(elems):   # the arena takes 256-byte multiples
    return (elems * 4 + 255) // 256 * 256
def losses(path):
    return {r['iteration']: r['lm_loss'] for r in map(json.loads, open(path)) if 'lm_loss' in r}
def arena(log):   # the training arena's bytes (the first allocation line of the run)
    return int(re.search(r'activations for 2 x 64 tokens \(training\): allocating [\d.]+ MiB \((\d+) bytes\)',
                         open(log).read()).group(1))
for kind in ('gdn', 'hybrid'):
    a, b = losses(f'{tmp}/{kind}-keep/metrics.jsonl'), losses(f'{tmp}/{kind}-rec/metrics.jsonl')
    assert sorted(a) == list(range(1, 7)) and a == b, (kind, a, b)
    for f in ('model.safetensors', 'optimizer.safetensors'):
        ta, tb = tensors(f'{tmp}/{kind}-keep/iter_0000006/{f}'), tensors(f'{tmp}/{kind}-rec/iter_0000006/{f}')
        assert ta.keys() == tb.keys() and len(ta) > 0
        assert not [n for n in ta if ta[n] != tb[n]], (kind, f)
    for run in ('gdn', 'both'):
        c = losses(f'{tmp}/{kind}-{run}/metrics.jsonl')
        assert a == c, (kind, run, a, c)
        for f in ('model.safetensors', 'optimizer.safetensors'):
            ta, tc = tensors(f'{tmp}/{kind}-keep/iter_0000006/{f}'), tensors(f'{tmp}/{kind}-{run}/iter_0000006/{f}')
            assert ta.keys() == tc.keys() and not [n for n in ta if ta[n] != tc[n]], (kind, run, f)
    saved = arena(f'{tmp}/{kind}-keep.log') - arena(f'{tmp}/{kind}-rec.log')
    want = blocks * N * F * 4   # fp32 on the CPU
    assert saved == want, (kind, saved, want)
    gdn_blocks = blocks - (kind == 'hybrid')
    saved_g = arena(f'{tmp}/{kind}-keep.log') - arena(f'{tmp}/{kind}-gdn.log')
    parts = (N * (2 * H * dk + HV * dv), N * 2 * H * dk, N * HV * dv)
    want_g = (gdn_blocks - 1) * sum(rounded(e) for e in parts)   # one set kept of gdn_blocks
    assert saved_g == want_g, (kind, saved_g, want_g)
    saved_b = arena(f'{tmp}/{kind}-keep.log') - arena(f'{tmp}/{kind}-both.log')
    assert saved_b == want + want_g, (kind, saved_b, want + want_g)
    print(f'{kind}: 6 iterations, losses, weights and AdamW state identical with recompute_swiglu, recompute_gdn_acts '
          f'and both; {saved} bytes fewer activations ({blocks} blocks x {N} x {F} fp32), {saved_g} with '
          f'recompute_gdn_acts ({gdn_blocks} GDN blocks, one set kept), {saved_b} with both')
PY
