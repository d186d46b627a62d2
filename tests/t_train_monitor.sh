#!/usr/bin/env bash
# What a CPU training run writes for monitoring: the log line (elapsed, ETA, no per-GPU or TFLOP/s columns on
# the CPU, the learning rate the step used, as in the JSONL), the end-of-run summary, gdn --version in the log
# and in the checkpoint metadata, TensorBoard files read back by tests/report/tbread.py (framing, both CRCs,
# Megatron's tags, steps, values equal to the JSONL's), and the report page refreshed by --report_dir (in a
# forked child during the run, no longer reloading once it ends).
# Resume after a "crash" past the checkpoint (iterations 7-12 logged, only iter 6 saved): the JSONL keeps each
# iteration once and TensorBoard's steps stay monotonic (a SessionLog START purges the re-run steps).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=${T_KEEP:-$(mktemp -d)}; [ -n "${T_KEEP:-}" ] || trap 'rm -rf "$tmp"' EXIT; mkdir -p "$tmp"
/usr/bin/python3 tests/ref/make_dataset.py "$tmp/data" 60000 500 3
common=(--config configs/tiny.yaml --vocab_size 500 --train_data_path "$tmp/data" --seq_length 64
        --micro_batch_size 2 --global_batch_size 4 --log_interval 4 --device cpu --lr_warmup_iters 3 --train_iters 12)
./gdn train "${common[@]}" --save "$tmp/a" --save_interval 6 --tensorboard_dir "$tmp/a/tb" --report_dir "$tmp/a/report" \
    --log_memory_to_tensorboard true > "$tmp/a.log"
./gdn train "${common[@]}" --save "$tmp/b" --exit_interval 6 > "$tmp/b1.log"
cp "$tmp/a/metrics.jsonl" "$tmp/b/metrics.jsonl"   # the crashed run had logged up to 12
mkdir -p "$tmp/b/tb"; cp "$tmp"/a/tb/events.* "$tmp/b/tb/"
sleep 1   # a later second: the new events file sorts after the copied one, as a restart's does
./gdn train "${common[@]}" --save "$tmp/b" --load "$tmp/b/iter_0000006" --tensorboard_dir "$tmp/b/tb" > "$tmp/b2.log"
grep -q "dropped .* rows past iteration 6" "$tmp/b2.log"
./gdn report "$tmp/a" --vs "$tmp/b" > "$tmp/table.txt"
/usr/bin/python3 - "$tmp" "$(./gdn --version)" <<'PY'
import json, re, struct, sys
sys.path.insert(0, 'tests/report')
import tbread
tmp, version = sys.argv[1], sys.argv[2].split()[1]
log = open(f'{tmp}/a.log').read()
lines = [l for l in log.splitlines() if re.search(r'iteration +\d+/', l)]
assert [int(re.search(r'iteration +(\d+)/', l).group(1)) for l in lines] == [1, 4, 8, 12], lines
for l in lines:
    assert 'TFLOP' not in l and 'GPU' not in l and 'tokens per second:' in l, l
    assert re.search(r'elapsed: \d+:\d\d:\d\d \| ETA: \d+:\d\d:\d\d \|$', l), l
assert lines[-1].endswith('ETA: 0:00:00 |'), lines[-1]
assert f'gdn train (gdn {version}):' in log, log[:300]
summ = [l for l in log.splitlines() if l.startswith('gdn train: done')]
assert len(summ) == 1 and f'(gdn {version})' in summ[0] and 'iterations 1-12 (12), 3072 tokens' in summ[0] and \
    f'last checkpoint {tmp}/a/iter_0000012' in summ[0] and 'MFU' not in summ[0], summ
rows = [json.loads(l) for l in open(f'{tmp}/a/metrics.jsonl')]
step = {r['iteration']: r for r in rows if 'lm_loss' in r}
assert sorted(step) == list(range(1, 13))
for l in lines:   # one learning-rate convention: the line prints the rate the step used, as the JSONL does
    it = int(re.search(r'iteration +(\d+)/', l).group(1))
    assert re.search(r'learning rate: ([-+.\dE]+)', l).group(1) == f"{step[it]['lr']:.6E}", (l, step[it]['lr'])
s = [r for r in rows if r.get('summary')]
assert len(s) == 1 and s[0]['iterations'] == 12 and s[0]['tokens'] == 3072 and s[0]['gdn_version'] == version, s
assert all('tflops_megatron' not in r for r in rows)
# checkpoint metadata
raw = open(f'{tmp}/a/iter_0000012/model.safetensors', 'rb').read(1 << 20)
n, = struct.unpack('<Q', raw[:8])
assert json.loads(raw[8:8 + n])['__metadata__']['gdn_version'] == version
# TensorBoard: Megatron's tags, steps and values
tags, files = tbread.read_dir(f'{tmp}/a/tb')
assert len(files) == 1
f32 = lambda x: struct.unpack('<f', struct.pack('<f', x))[0]
# TensorBoard holds float32 of the double, the JSONL 9 digits of it: equal within one float32 rounding
close = lambda pts, want: [p[0] for p in pts] == [w[0] for w in want] and \
    all(abs(p[1] - w[1]) <= 2 ** -23 * abs(w[1]) for p, w in zip(pts, want))
want = {'lm loss': 'lm_loss', 'learning-rate': 'lr', 'grad-norm': 'grad_norm'}
for tag, key in want.items():
    assert close(tags[tag], [(i, step[i][key]) for i in range(1, 13)]), (tag, tags[tag][:3])
    assert close(tags[tag + ' vs samples'], [(4 * i, step[i][key]) for i in range(1, 13)]), tag
assert tags['batch-size'] == [(i, 4.0) for i in range(1, 13)] and tags['loss-scale'][0] == (1, 1.0)
logs = {r['iteration']: r for r in rows if r.get('log')}
it_time = tags['iteration-time']   # seconds; the JSONL has ms to 3 decimals
assert [p[0] for p in it_time] == [4, 8, 12] and all(abs(p[1] - logs[p[0]]['ms_per_iter'] / 1e3) < 1e-6 for p in it_time), it_time
assert 'throughput' not in tags   # TFLOP/s/GPU: not on the CPU
# --log_memory_to_tensorboard: Megatron's mem-* tags every iteration, from the backend's allocation statistics; the
# step's buffers are the same every iteration after the first (a leak would grow them), the peak never falls
mem = {t: tags[f'mem-{t}'] for t in ('reserved-bytes', 'allocated-bytes', 'max-allocated-bytes', 'allocated-count')}
for t, pts in mem.items():
    assert [p[0] for p in pts] == list(range(1, 13)), (t, pts)
alloc, peak, count = ([p[1] for p in mem[t]] for t in ('allocated-bytes', 'max-allocated-bytes', 'allocated-count'))
assert all(a > 2 ** 16 and p >= a for a, p in zip(alloc, peak)), (alloc, peak)
assert peak == sorted(peak) and len(set(alloc[1:])) == 1 and len(set(count[1:])) == 1 and count[0] > 0, (alloc, count)
assert all(r == a for r, a in zip([p[1] for p in mem['reserved-bytes']], alloc))   # the CPU: no pool
# resume: each iteration once in the JSONL, the same losses as the straight run, one summary
rb = [json.loads(l) for l in open(f'{tmp}/b/metrics.jsonl')]
its = [r['iteration'] for r in rb if 'lm_loss' in r]
assert its == list(range(1, 13)), its
# log rows: the straight run's 1, 4 (kept, <= 6), then the resumed run's first (7) and its intervals
assert [r['iteration'] for r in rb if r.get('log')] == [1, 4, 7, 8, 12], [r['iteration'] for r in rb if r.get('log')]
assert len([r for r in rb if r.get('summary')]) == 1
assert {r['iteration']: r['lm_loss'] for r in rb if 'lm_loss' in r} == {i: step[i]['lm_loss'] for i in step}
# TensorBoard after the resume: 2 files; read as TensorBoard does, every tag's steps rise and cover 1..12 once
tb, files = tbread.read_dir(f'{tmp}/b/tb')
assert len(files) == 2
for tag, pts in tb.items():
    st = [p[0] for p in pts]
    assert st == sorted(set(st)), (tag, st)
assert tb['lm loss'] == tags['lm loss'], (tb['lm loss'], tags['lm loss'])
raw_tb, _ = tbread.read_dir(f'{tmp}/b/tb', purge=False)   # without the purge the re-run steps would show twice
assert [p[0] for p in raw_tb['lm loss']] == list(range(1, 13)) + list(range(7, 13))
# the page --report_dir refreshed
html = open(f'{tmp}/a/report/index.html').read()
assert 'http-equiv="refresh"' not in html and html.count('data:image/svg+xml;base64,') == 4   # the run ended
rep = json.load(open(f'{tmp}/a/report/report.json'))
assert rep['runs'][0]['rows'][-1]['iteration'] == 12
table = open(f'{tmp}/table.txt').read()
assert 'none in 1-12' in table and '| 12 |' in table and '+0.00 |' in table, table
# the resumed run (iterations 7-12, no --log_memory_to_tensorboard) adds no mem-* points after the copied ones
btags = tbread.read_dir(f'{tmp}/b/tb')[0]
assert all(s < 7 for t, pts in btags.items() if t.startswith('mem-') for s, _ in pts), 'mem-* tags without the flag'
print(f'log lines {len(lines)}, TensorBoard {sum(map(len, tags.values()))} scalars in {len(tags)} tags; resume: '
      f'{len(its)} JSONL steps, TensorBoard steps monotonic over {len(files)} files; version {version}')
PY
