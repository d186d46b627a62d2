# compare_logits.py: FLA's logits (.npy) vs gdn's (`gdn logits` float32 [T, V]) on the same ids.
#   python3 tests/gpu/compare_logits.py REF.npy GOT.f32 LABEL [IDS.bin]
# Passes when cosine >= 0.99999 and max |diff| / max |ref| <= 1e-4; with IDS.bin (int32) also the mean
# next-token loss of the two within 1e-4 relative. Used by scripts/gpu_check.sh (fla, roundtrip stages).
import sys

import numpy as np

ref_path, got_path, label = sys.argv[1:4]
ref = np.load(ref_path).astype(np.float64)
got = np.fromfile(got_path, dtype=np.float32).astype(np.float64).reshape(ref.shape)
cos = (ref * got).sum() / np.sqrt((ref * ref).sum() * (got * got).sum())
rel = np.abs(ref - got).max() / np.abs(ref).max()
ok = cos >= 0.99999 and rel <= 1e-4
msg = f'{label}: cosine {cos:.8f} (>= 0.99999), max rel {rel:.2e} (<= 1e-4)'
if len(sys.argv) > 4:
    ids = np.fromfile(sys.argv[4], dtype=np.int32)

    def loss(l):
        l = l[:-1]
        m = l.max(1, keepdims=True)
        return float((np.log(np.exp(l - m).sum(1)) + m[:, 0] - l[np.arange(len(l)), ids[1:]]).mean())

    lr, lg = loss(ref), loss(got)
    msg += f', loss FLA {lr:.6f} gdn {lg:.6f}'
    ok = ok and abs(lr - lg) <= 1e-4 * abs(lr)
print(msg)
sys.exit(0 if ok else 1)
