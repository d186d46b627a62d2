#!/usr/bin/env bash
# t_crash_resume.sh: training survives SIGKILL at any moment, inside a checkpoint save included. A tiny model
# saves every step; a run is killed (kill -9) at least KILLS times, half at random moments within two steps after
# the launch's first new checkpoint and half while a save's temp file exists, and is restarted each time with one
# fixed command line (plus --load once a checkpoint exists). The final weights and AdamW state, and every loss any
# of the runs logged, equal those of one uninterrupted run bit for bit; no temp file is left. Bounded: a deadline
# stops the kill loop.
set -euo pipefail
cd "$(dirname "$0")/.."
GDN=${GDN:-./gdn}
PY=${PYTHON:-/usr/bin/python3}
KILLS=${KILLS:-14}
DEADLINE=${DEADLINE:-120} # seconds for the kill loop
tmp=$(mktemp -d /tmp/gdn_t_crash.XXXXXX)
pid=""
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
shopt -s nullglob
RANDOM=20261201 # the kill moments vary with the machine's speed; the draws do not
"$PY" tests/ref/make_dataset.py "$tmp/data" 30000 300 5
ITERS=${ITERS:-60}
export OMP_NUM_THREADS=1 # a 2-core CI machine: spinning threads would only slow every run down
run() { # run DIR [--load DIR]: the fixed command line (exec: a background `run &` is gdn itself, so kill hits it)
  exec $GDN train --config configs/tiny.yaml --vocab_size 300 --train_data_path "$tmp/data" --seq_length 32 \
    --micro_batch_size 2 --global_batch_size 4 --log_interval 1 --device cpu --lr_warmup_iters 2 \
    --train_iters $ITERS --save_interval 1 --save "$@"
}
t0=$(date +%s.%N)
(run "$tmp/a") >"$tmp/a.log"
t_run=$(echo "$(date +%s.%N) - $t0" | bc)
echo "uninterrupted run: $ITERS steps, a save after each, ${t_run}s"
# a launch's start-up (process, model, data; about a step's worth of the 1-step run is the step itself):
# the kill moments below come after a random share of it plus a random share of the steps, so that most
# kills land after some progress whatever the machine's speed
t0=$(date +%s.%N)
(ITERS=1; run "$tmp/c") >"$tmp/c.log"
t_start=$(echo "scale=3; s = $(date +%s.%N) - $t0 - $t_run / $ITERS; if (s < 0) s = 0; s" | bc)

kills=0 in_save=0 launches=0 insave_at=-1 start=$(date +%s)
while :; do
  args=("$tmp/b")
  [ -f "$tmp/b/latest_checkpointed_iteration.txt" ] && args+=(--load "$tmp/b")
  launches=$((launches + 1))
  run "${args[@]}" >>"$tmp/b.log" 2>&1 &
  pid=$!
  if [ $kills -ge "$KILLS" ] || [ $(( $(date +%s) - start )) -ge "$DEADLINE" ]; then
    wait "$pid" || { tail -5 "$tmp/b.log"; echo "FAIL: the final run exited $?"; exit 1; }
    pid=""
    break
  fi
  # what is left to run (from the latest checkpoint) bounds the wait, so the kill lands before the end
  done_it=$(cat "$tmp/b/latest_checkpointed_iteration.txt" 2>/dev/null || echo 0)
  # (at most 1/KILLS of a run per launch: on average about half the steps happen in runs that are killed)
  left_s=$(echo "scale=3; l = $t_run * ($ITERS - $done_it) / $ITERS * 0.8; m = $t_run / $KILLS; if (l < m) m = l; $t_start + m + 0.02" | bc)
  if [ $((kills % 2)) = 0 ]; then # a random moment after this launch's first new checkpoint, within 2 steps of it
    # (a moment drawn from the clock alone let a fast machine finish the run before KILLS kills, and a loaded one
    # kill most launches before their first save: both were seen on 2-core machines)
    for _ in $(seq 4000); do
      c=0; [ -f "$tmp/b/latest_checkpointed_iteration.txt" ] && { read -r c < "$tmp/b/latest_checkpointed_iteration.txt" || true; }
      [ "${c:-0}" -gt "$done_it" ] && break
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.002
    done
    sleep "$(echo "scale=3; $((RANDOM % 1000)) / 1000 * 2 * $t_run / $ITERS" | bc)"
  else # inside a save: after a random while, as soon as a temp file of this process's save appears. When the
    # previous such kill left no new checkpoint, the second save is the target: its first one then completed
    # (killing every launch in its first save could repeat forever on a machine with a slow start-up or fsync)
    target=$((done_it + 1))
    [ "$done_it" != "$insave_at" ] || target=$((done_it + 2))
    [ $target -le "$ITERS" ] || target=$ITERS
    insave_at=$done_it
    sleep "$(echo "scale=3; $((RANDOM % 1000)) / 1000 * $left_s * 0.5" | bc)"
    for _ in $(seq 4000); do
      fs=("$tmp"/b/iter_*/*.tmp."$pid") # (nullglob; no fork in this loop: the temp files live for milliseconds)
      if [ ${#fs[@]} -gt 0 ]; then f=${fs[0]#"$tmp/b/iter_"}; [ $((10#${f%%/*})) -ge $target ] && break; fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.001
    done
  fi
  if kill -9 "$pid" 2>/dev/null; then
    wait "$pid" 2>/dev/null || true
    kills=$((kills + 1))
    if compgen -G "$tmp/b/iter_*/*.tmp.$pid" >/dev/null || compgen -G "$tmp/b/*.tmp.$pid" >/dev/null; then in_save=$((in_save + 1)); fi
  else
    wait "$pid" 2>/dev/null || true # it finished before the kill: start over from its checkpoint is not needed
    pid=""
    break
  fi
  pid=""
done
echo "killed $kills times ($in_save inside a save, a temp file on disk), $launches launches, $(( $(date +%s) - start ))s"
[ "$kills" -ge "$KILLS" ] || { echo "FAIL: only $kills kills before the deadline (${DEADLINE}s)"; exit 1; }
[ "$in_save" -ge 1 ] || { echo "FAIL: no kill landed inside a save"; exit 1; }
resumes=$(grep -c "resuming from" "$tmp/b.log" || true)
[ "$resumes" -ge $((KILLS / 2)) ] || { echo "FAIL: only $resumes of $launches launches resumed from a checkpoint"; exit 1; }
left=$(find "$tmp/b" -name "*.tmp.*" | wc -l)
[ "$left" = 0 ] || { find "$tmp/b" -name "*.tmp.*"; echo "FAIL: $left temp files left"; exit 1; }
"$PY" - "$tmp" "$ITERS" "$resumes" <<'PY'
import json, sys
sys.path.insert(0, 'tests/ref')
from st import tensors_raw as tensors
tmp, iters, resumes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def rows(path):
    return [r for r in map(json.loads, open(path)) if 'lm_loss' in r]
a = {r['iteration']: r['lm_loss'] for r in rows(f'{tmp}/a/metrics.jsonl')}
assert sorted(a) == list(range(1, iters + 1)), sorted(a)
# b's metrics hold the final run's lines from its resume point on; the killed runs' lines are in b.log
b = rows(f'{tmp}/b/metrics.jsonl')
logged = []
for line in open(f'{tmp}/b.log'):
    if line.startswith(' [') and 'lm loss:' in line:
        it = int(line.split('iteration')[1].split('/')[0])
        logged.append((it, float(line.split('lm loss:')[1].split('|')[0])))
bad = [r for r in b if a[r['iteration']] != r['lm_loss']]
assert not bad, bad[:3]
seen = {r['iteration'] for r in b}
assert max(seen) == iters, max(seen)
# the printed losses (every run, killed ones too) agree with the reference's printed precision
a_log = {}
for line in open(f'{tmp}/a.log'):
    if line.startswith(' [') and 'lm loss:' in line:
        a_log[int(line.split('iteration')[1].split('/')[0])] = float(line.split('lm loss:')[1].split('|')[0])
badlog = [(it, l, a_log[it]) for it, l in logged if a_log[it] != l]
assert not badlog, badlog[:3]
for f in ('model.safetensors', 'optimizer.safetensors'):
    ta, tb = tensors(f'{tmp}/a/iter_{iters:07d}/{f}'), tensors(f'{tmp}/b/iter_{iters:07d}/{f}')
    assert ta.keys() == tb.keys() and len(ta) > 0
    diff = [k for k in ta if ta[k] != tb[k]]
    assert not diff, diff[:5]
print(f'{resumes} resumes; {len(b)} metrics rows and {len(logged)} printed losses (all runs) equal the uninterrupted '
      f'run; final weights and AdamW state identical over {iters} steps')
PY
