#!/usr/bin/env bash
# Packed documents end to end on the CPU: training runs with reset_state_at_eod (and eod_mask_loss), the key is
# stored in the checkpoint, and `gdn logits --reset_state_at_eod true --eos_token_id E` on a packed row gives, for
# its last document, the logits of that document run alone (<= 1e-5 relative); with the flag off they differ.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 tests/ref/make_dataset.py "$tmp/data" 20000 500 5
common=(--config configs/tiny.yaml --vocab_size 500 --train_data_path "$tmp/data" --seq_length 96
        --micro_batch_size 2 --global_batch_size 2 --log_interval 1 --device cpu --train_iters 3 --eos_token_id 7)
./gdn train "${common[@]}" --reset_state_at_eod true --eod_mask_loss true --save "$tmp/m" > "$tmp/train.log"
# the stored config (read into a file first: `head | grep -q` under pipefail fails when grep exits before head
# has written everything and head dies of SIGPIPE)
head -c 65536 "$tmp/m/iter_0000003/model.safetensors" > "$tmp/header"
grep -a -q 'reset_state_at_eod\\":true' "$tmp/header"
./gdn score --load "$tmp/m" --data "$tmp/data" --seq-length 96 --max-samples 4 --device cpu \
    --reset_state_at_eod true --eos_token_id 7 | grep "^loss: " > /dev/null
if ./gdn score --load "$tmp/m" --data "$tmp/data" --max-samples 1 --device cpu --reset_state_at_eod maybe 2> "$tmp/err"; then
    echo "a bad --reset_state_at_eod value was accepted"; exit 1
fi
grep -q "reset_state_at_eod" "$tmp/err"
/usr/bin/python3 - "$tmp" <<'PY'
import struct, sys, random
tmp = sys.argv[1]
r = random.Random(3)
a = [r.randrange(8, 500) for _ in range(70)] + [7]        # document 1 ends with EOD (7)
b = [r.randrange(8, 500) for _ in range(90)]              # document 2: 70 + 1 + 90 = 161 tokens, crosses 64 and 128
open(f'{tmp}/packed.ids', 'wb').write(struct.pack(f'<{len(a + b)}i', *(a + b)))
open(f'{tmp}/alone.ids', 'wb').write(struct.pack(f'<{len(b)}i', *b))
PY
for f in on off; do
    flag=$([ $f = on ] && echo true || echo false)
    ./gdn logits --load "$tmp/m" --ids "$tmp/packed.ids" --out "$tmp/packed_$f.f32" --device cpu \
        --reset_state_at_eod $flag --eos_token_id 7 > /dev/null
done
./gdn logits --load "$tmp/m" --ids "$tmp/alone.ids" --out "$tmp/alone.f32" --device cpu > /dev/null
/usr/bin/python3 - "$tmp" <<'PY'
import struct, sys
tmp, V = sys.argv[1], 500
def rows(path, first):
    raw = open(path, 'rb').read()
    x = struct.unpack(f'<{len(raw) // 4}f', raw)
    return x[first * V:]
alone = rows(f'{tmp}/alone.f32', 0)
on, off = rows(f'{tmp}/packed_on.f32', 71), rows(f'{tmp}/packed_off.f32', 71)
assert len(on) == len(alone) == 90 * V
m = max(abs(v) for v in alone)
r_on = max(abs(p - q) for p, q in zip(on, alone)) / m
r_off = max(abs(p - q) for p, q in zip(off, alone)) / m
assert r_on <= 1e-5, r_on
assert r_off > 1e-3, r_off   # without the reset the second document reads the first one's state
print(f'gdn logits: packed document vs alone {r_on:.1e} with --reset_state_at_eod, {r_off:.1e} without')
PY
