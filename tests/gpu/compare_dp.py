# compare_dp.py: 1 GPU x 2 micro-batches vs 2 GPUs x 1 (the same global batch): the losses agree (step 1
# within 1e-5, every step within 1e-3 relative); prints the per-GPU scaling efficiency.
#   python3 tests/gpu/compare_dp.py DIR   (DIR/dp_w1.jsonl, DIR/dp_w2.jsonl: metrics files)
import json
import sys

out = sys.argv[1]


def load(f):
    rows = [json.loads(l) for l in open(f'{out}/{f}')]
    return {r['iteration']: r['lm_loss'] for r in rows if 'lm_loss' in r}, [r for r in rows if r.get('log')]


l1, g1 = load('dp_w1.jsonl')
l2, g2 = load('dp_w2.jsonl')
worst = max(abs(l2[k] - l1[k]) / l1[k] for k in l1)
print(f'1 GPU x 2 micro-batches vs 2 GPUs x 1 (same global batch), {len(l1)} steps: losses within {worst:.2e} relative '
      f'(first {l1[1]:.5f} / {l2[1]:.5f}, last {l1[max(l1)]:.5f} / {l2[max(l2)]:.5f})')
t1, t2 = g1[-1]['tokens_per_s'], g2[-1]['tokens_per_s']
print(f'tokens/s per GPU: 1 GPU {t1:.0f}, 2 GPUs {t2:.0f} ({2 * t2:.0f} total): scaling efficiency {t2 / t1:.3f}')
sys.exit(0 if abs(l2[1] - l1[1]) / l1[1] <= 1e-5 and worst <= 1e-3 else 1)
