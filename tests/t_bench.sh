#!/usr/bin/env bash
# gdn bench --profile on the CPU: the per-op table of a real training step (issue 20). Its rows are the ops the
# step calls, with the calls per step the model makes; their sum is the step's wall time less host time between
# calls (CPU ops run synchronously: within 5%); and profiling changes nothing: the last step's loss and grad norm
# are the same bits with and without it. --help documents the flag.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
args=(--config configs/tiny.yaml --device cpu --steps 2 --warmup 1 --seq_length 64 --micro_batch_size 2)
./gdn bench "${args[@]}" > "$tmp/plain.txt" 2>/dev/null
./gdn bench "${args[@]}" --profile > "$tmp/prof.txt" 2>/dev/null
./gdn bench --help | grep -- '--profile: also times every backend op' > /dev/null
/usr/bin/python3 - "$tmp" <<'PY'
import re, sys
tmp = sys.argv[1]
plain, prof = open(f'{tmp}/plain.txt').read(), open(f'{tmp}/prof.txt').read()
last = lambda s: re.search(r'^bench: last step loss (\S+), grad norm (\S+)$', s, re.M).groups()
assert last(plain) == last(prof), (last(plain), last(prof))
assert 'profile:' not in plain, 'the table without --profile'
step = float(re.search(r'([\d.]+) ms/step', prof).group(1))
rows = {}
for m in re.finditer(r'^  (\S+(?: \[\d+x\d+\])?) +([\d.]+) +([\d.]+) +([\d.]+)%$', prof, re.M):
    rows[m.group(1)] = (float(m.group(2)), float(m.group(3)))
# memory: in use now (the model still allocated) and the peak of the backend's buffers (CPU: the same count, so
# the peak is at least what is in use, and the activations and weights are in it: > 1 MiB for tiny at 2 x 64)
for out in (plain, prof):
    used, peak = map(float, re.search(r'cpu memory in use ([\d.]+) GiB, peak allocated ([\d.]+) GiB', out).groups())
    assert 2**-10 < used <= peak, (used, peak)
total = float(re.search(r'^  sum of ops +([\d.]+)', prof, re.M).group(1))
wall = float(re.search(r'^  step \(wall\) +([\d.]+)', prof, re.M).group(1))
ops = {k.split(' ')[0] for k in rows}
need = {'embedding_fwd', 'rmsnorm_fwd', 'rmsnorm_bwd', 'matmul_fwd', 'matmul_bwd', 'conv_silu_fwd', 'l2norm_fwd',
        'gate_fwd', 'delta_rule_fwd', 'delta_rule_bwd', 'gated_rmsnorm_fwd', 'matmul_swiglu_fwd', 'matmul_swiglu_bwd',
        'lmhead_ce', 'embedding_bwd', 'sumsq', 'clip_scale', 'adamw_multi', 'memset0'}
assert need <= ops, sorted(need - ops)
assert 'adamw' not in ops, 'the step should update with one adamw_multi, not per-tensor adamw'
# tiny: 2 blocks -> 2 * 2 + 1 RMSNorms; one multi-tensor AdamW, one sum of squares, one clip scale per step
assert rows['rmsnorm_fwd'][0] == 5 and rows['rmsnorm_bwd'][0] == 5, rows['rmsnorm_fwd']
assert rows['adamw_multi'][0] == 1 and rows['sumsq'][0] == 1 and rows['clip_scale'][0] == 1, rows['adamw_multi']
assert rows['delta_rule_fwd'][0] == 2 and rows['lmhead_ce'][0] == 1
# each block: the fused in-projection's GEMM [N = 2*Hk*dk + 2*Hv*dv + ..., K = hidden 64] among the rows
assert any(k.startswith('matmul_fwd [') and k.endswith('x64]') for k in rows), sorted(rows)
s = sum(ms for _, ms in rows.values())
assert abs(s - total) <= 0.002 * len(rows) + 1e-3, (s, total)
assert abs(wall - step) <= 0.05 * step + 0.1, (wall, step)
assert 0.95 * wall <= total <= wall, (total, wall)   # CPU: the ops are the step, host glue aside
gap = float(re.search(r'^  gap \(launch gaps, host time\) +(-?[\d.]+)', prof, re.M).group(1))
assert abs(wall - total - gap) <= 2e-3, (wall, total, gap)
# the GEMM-rate line: the config's gate|up [B*T x h] . [2F x h]^T and lm head [rows x h] . [V x h]^T shapes, their
# rates, the rate weighted by the step's FLOPs in each (1 / (w/r_gu + (1-w)/r_head)), and the step's share of it
cfg = dict(re.findall(r'^(\w+):\s*(\S+)', open('configs/tiny.yaml').read(), re.M))
h, F, V = int(cfg['hidden_size']), int(cfg['ffn_hidden_size']), int(cfg['vocab_size'])
for out in (plain, prof):
    g = re.search(r'^bench: GEMM rate ([\d.]+) ([TG])FLOP/s \(cpu, random data: gate\|up \[(\d+) x (\d+)\] \. '
                  r'\[(\d+) x (\d+)\]\^T ([\d.]+), lm head \[(\d+) x (\d+)\] \. \[(\d+) x (\d+)\]\^T ([\d.]+), '
                  r'weighted ([\d.]+):([\d.]+) by the step.s FLOPs\); the step.s GDN-count rate is ([\d.]+)% of it$', out, re.M)
    assert g, out
    rate, r_gu, r_head, w_gu, w_head, share = map(float, g.group(1, 7, 12, 13, 14, 15))
    assert tuple(map(int, g.group(3, 4, 5, 6))) == (2 * 64, h, 2 * F, h), g.groups()
    assert tuple(map(int, g.group(8, 9, 10, 11))) == (2 * 64, h, V, h), g.groups()   # 128 rows x V <= 2^28
    assert abs(w_gu + w_head - 100) <= 0.11 and w_head > w_gu, g.groups()              # the 128k vocab dominates
    assert r_gu > 0 and r_head > 0 and min(r_gu, r_head) - 0.01 <= rate <= max(r_gu, r_head) + 0.01, g.groups()
    want = 1 / (w_gu / 100 / r_gu + w_head / 100 / r_head)
    assert abs(rate - want) <= 0.01 * want + 0.01, (rate, want)
    gdn = float(re.search(r'([\d.]+) TFLOP/s \(GDN count\)', out).group(1))
    gdn *= 1e3 if g.group(2) == 'G' else 1
    unit = 1e3 if g.group(2) == 'G' else 1    # the GDN count is printed to 0.01 TFLOP/s
    assert abs(share - 100 * gdn / rate) <= 100 * 0.005 * unit / rate + 0.1, (share, gdn, rate)
times = [ms for _, ms in rows.values()]
assert times == sorted(times, reverse=True), 'rows not sorted by time'
print(f'profile: {len(rows)} rows ({len(ops)} ops), sum {total:.1f} of {wall:.1f} ms/step; loss and grad norm '
      f'identical with and without --profile ({last(prof)[0]}, {last(prof)[1]})')
PY
