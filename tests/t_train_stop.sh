#!/usr/bin/env bash
# Graceful stops and restarts (train/signals.c, train/restart.c; spec train.md §4): SIGTERM at a random
# moment -> a checkpoint and exit 0, and resuming gives the uninterrupted run's losses, weights and AdamW
# state bit for bit; exit_duration_in_mins stops with a checkpoint; the fixed-command restart loop
# (run, kill -9, re-run the same --save D --load D command, the first run into an empty dir) ends equal
# to the uninterrupted run; a save dir holding another run's checkpoints is refused without --load.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 # a tiny model: threads only contend on a loaded machine
tmp=$(mktemp -d); pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$tmp"' EXIT
/usr/bin/python3 tests/ref/make_dataset.py "$tmp/data" 60000 500 3
common=(--config configs/tiny.yaml --vocab_size 500 --train_data_path "$tmp/data" --seq_length 64 --micro_batch_size 2
        --global_batch_size 4 --log_interval 1 --device cpu --lr_warmup_iters 3 --train_iters 60 --exit_signal_handler true)
./gdn train "${common[@]}" --save "$tmp/ref" > "$tmp/ref.log"
wait_for() { # wait_for FILE PATTERN: until the running job's log shows it (at most 60 s)
  for _ in $(seq 3000); do grep -q "$2" "$1" 2>/dev/null && return 0; kill -0 $pid 2>/dev/null || return 0; sleep 0.02; done
  echo "timed out waiting for '$2' in $1"; exit 1
}
# ---- SIGTERM at a random moment of training
./gdn train "${common[@]}" --save "$tmp/sig" --load "$tmp/sig" > "$tmp/sig1.log" 2>&1 & pid=$!
# a random iteration, not a random time: 60 tiny iterations take well under a second on a fast machine, so a sleep
# after iteration 1 could land after the end of the run (a CI flake)
wait_for "$tmp/sig1.log" "iteration  *$((1 + RANDOM % 30))/"
kill -TERM $pid
rc=0; wait $pid || rc=$?; pid=
test $rc = 0 || { echo "SIGTERM: exit status $rc"; cat "$tmp/sig1.log"; exit 1; }
grep -q "WARNING: could not find the metadata file $tmp/sig/latest_checkpointed_iteration.txt" "$tmp/sig1.log"
k=$(cat "$tmp/sig/latest_checkpointed_iteration.txt")
if [ "$k" -lt 60 ]; then
  grep -q "exiting program after receiving signal 15 (SIGTERM) at iteration $k$" "$tmp/sig1.log"
else
  echo "note: the run ended before the signal (no stop exercised)"; exit 1
fi
test -f "$tmp/sig/iter_$(printf %07d "$k")/DONE"
./gdn train "${common[@]}" --save "$tmp/sig" --load "$tmp/sig" > "$tmp/sig2.log"
grep -q "resuming from .* at iteration $k" "$tmp/sig2.log"
# ---- 2 data-parallel ranks: SIGTERM to the process group (as Slurm and Ctrl-C send it); the launcher waits
./gdn train "${common[@]}" --nproc_per_node 2 --save "$tmp/dpref" > "$tmp/dpref.log"
setsid ./gdn train "${common[@]}" --nproc_per_node 2 --save "$tmp/dp" > "$tmp/dp1.log" 2>&1 & pid=$!
wait_for "$tmp/dp1.log" "iteration  *$((1 + RANDOM % 30))/"
kill -TERM -- -$pid
rc=0; wait $pid || rc=$?; pid=
test $rc = 0 || { echo "2 ranks, SIGTERM: exit status $rc"; cat "$tmp/dp1.log"; exit 1; }
kdp=$(cat "$tmp/dp/latest_checkpointed_iteration.txt")
grep -q "exiting program after receiving signal 15 (SIGTERM) at iteration $kdp$" "$tmp/dp1.log"
./gdn train "${common[@]}" --nproc_per_node 2 --save "$tmp/dp" --load "$tmp/dp" > "$tmp/dp2.log"
# ---- exit_duration_in_mins: saves and stops (0.04 min = 2.4 s, well before 5000 iterations)
./gdn train "${common[@]}" --train_iters 5000 --exit_duration_in_mins 0.04 --save "$tmp/dur" > "$tmp/dur.log"
d=$(cat "$tmp/dur/latest_checkpointed_iteration.txt")
test "$d" -gt 0 && test "$d" -lt 5000
grep -q "exiting program after [0-9.]* minutes (exit_duration_in_mins 0.04) at iteration $d$" "$tmp/dur.log"
test -f "$tmp/dur/iter_$(printf %07d "$d")/DONE"
# ---- another run's checkpoints are not overwritten without --load
if ./gdn train "${common[@]}" --save "$tmp/dur" > "$tmp/refuse.log" 2>&1; then echo "trained into a used save dir"; exit 1; fi
grep -q "save directory $tmp/dur already holds checkpoints" "$tmp/refuse.log"
# ---- the restart loop: one fixed command, kill -9 at random moments, until it completes
loop=(./gdn train "${common[@]}" --save "$tmp/loop" --load "$tmp/loop" --save_interval 7)
kills=0; warned=0; runs=0
while [ $runs -lt 12 ]; do
  runs=$((runs + 1))
  "${loop[@]}" > "$tmp/loop$runs.log" 2>&1 & pid=$!
  if [ $runs -le 4 ]; then # the first kill lands before any checkpoint (empty dir), later ones after a save
    if [ $runs = 1 ]; then sleep 0.3; else wait_for "$tmp/loop$runs.log" "saved checkpoint"; sleep "0.$((RANDOM % 3))$((RANDOM % 10))"; fi
    kill -9 $pid 2>/dev/null && kills=$((kills + 1))
  fi
  rc=0; wait $pid || rc=$?; pid=
  grep -q "WARNING: could not find the metadata file" "$tmp/loop$runs.log" && warned=$((warned + 1))
  [ $rc = 0 ] && break
done
test "$(cat "$tmp/loop/latest_checkpointed_iteration.txt")" = 60
test $warned -ge 1
grep -q "resuming from $tmp/loop/iter_" "$tmp"/loop*.log # at least one restart picked up a checkpoint
/usr/bin/python3 - "$tmp" "$k" "$kills" "$runs" "$kdp" <<'PY'
import json, sys
sys.path.insert(0, 'tests/ref')
from st import tensors_raw as tensors
tmp, k, kills, runs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def losses(path):  # the last row of each iteration (a restarted run appends the iterations it redoes)
    out = {}
    for line in open(path):
        r = json.loads(line)
        if 'lm_loss' in r:
            out[r['iteration']] = r['lm_loss']
    return out
ref = losses(f'{tmp}/ref/metrics.jsonl')
assert sorted(ref) == list(range(1, 61)), sorted(ref)
for d in ('sig', 'loop', 'dp'):
    if d == 'dp':
        ref = losses(f'{tmp}/dpref/metrics.jsonl')
        d0 = 'dpref'
    else:
        d0 = 'ref'
    got = losses(f'{tmp}/{d}/metrics.jsonl')
    assert got == ref, (d, [(i, ref[i], got.get(i)) for i in ref if ref[i] != got.get(i)][:5])
    for f in ('model.safetensors', 'optimizer.safetensors'):
        ta, tb = tensors(f'{tmp}/{d0}/iter_0000060/{f}'), tensors(f'{tmp}/{d}/iter_0000060/{f}')
        assert ta.keys() == tb.keys() and len(ta) > 0
        assert not [n for n in ta if ta[n] != tb[n]], (d, f)
print(f'SIGTERM at iteration {k} (2 ranks: at {sys.argv[5]}): resumed runs identical to the straight one (60 losses, weights, AdamW state); '
      f'restart loop: {kills} kill -9 over {runs} runs of one command, identical')
PY
