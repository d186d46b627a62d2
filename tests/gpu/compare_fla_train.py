# compare_fla_train.py: FLA's training losses (scripts/fla_ref.py train log) vs gdn's metrics.jsonl, same
# init, data and schedule. Prints every iteration; passes when iteration 1 agrees within 1e-3 relative.
#   python3 tests/gpu/compare_fla_train.py GDN_METRICS.jsonl FLA_LOG
import json
import sys

gdn_path, fla_log = sys.argv[1], sys.argv[2]
fla = {r['iteration']: r['lm_loss'] for r in map(json.loads, (l for l in open(fla_log) if l.startswith('{"iteration"')))}
gdn = {r['iteration']: r['lm_loss'] for r in map(json.loads, open(gdn_path)) if 'lm_loss' in r}
if 1 not in fla or 1 not in gdn:
    sys.exit(f'compare_fla_train: no iteration-1 loss in {fla_log if 1 not in fla else gdn_path} '
             f'(FLA iterations {sorted(fla)[:3]}..., gdn {sorted(gdn)[:3]}...): did its run fail?')
for it in sorted(fla):
    g = gdn.get(it, float('nan'))
    print(f'iter {it:3d}  fla {fla[it]:.5f}  gdn {g:.5f}  rel {abs(g - fla[it]) / fla[it]:.2e}')
e1 = abs(gdn[1] - fla[1]) / fla[1]
print(f'iteration-1 loss relative difference {e1:.2e} (tol 1e-3)')
sys.exit(0 if e1 <= 1e-3 else 1)
