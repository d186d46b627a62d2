#!/usr/bin/env bash
# Failures of launcher-started ranks (torchrun, 2 "nodes" x 1 rank on loopback, Gloo):
#  * SIGKILL of rank 1 mid-run: rank 0 stops at once with one line naming rank 1, the latest checkpoint
#    stays complete, and torchrun's restart (--max_restarts 1, load == save) resumes from it and finishes;
#  * SIGSTOP of rank 1 (a hang): rank 0 stops within distributed_timeout_minutes (+ a roll call of 2..10 s) with
#    one line naming rank 1 (the roll call: 2 s at this timeout).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=${KEEP_TMP:-$(mktemp -d)}; [ -n "${KEEP_TMP:-}" ] || trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 tests/ref/make_dataset.py "$tmp/data" 60000 500 3
common=(--config configs/tiny.yaml --vocab_size 500 --train_data_path "$tmp/data" --seq_length 96
        --micro_batch_size 1 --global_batch_size 8 --log_interval 1 --device cpu --lr_warmup_iters 3
        --distributed_timeout_minutes 0.1)
port=$((10000 + ($$ + 7) % 20000)) # below the ephemeral range (32768-60999), as t_train_torchrun.sh
export OMP_NUM_THREADS=1
start() { # NAME NODE RESTARTS ARGS...: one torchrun of 1 rank as node NODE of 2
    local name=$1 n=$2 rs=$3; shift 3
    timeout 240 torchrun --nnodes 2 --node_rank "$n" --nproc_per_node 1 --master_addr 127.0.0.1 --master_port $port \
        --max_restarts "$rs" --redirects 1 --tee 2 --log_dir "$tmp/logs_${name}_$n" --no_python \
        ./gdn train "${common[@]}" "$@" > "$tmp/$name.$n.log" 2>&1 &
}
worker_of() { # the gdn process under the torchrun that `timeout` (pid $1) runs (waits up to 10 s for it)
    local agent w
    for _ in $(seq 100); do
        agent=$(pgrep -P "$1" | head -1 || true)
        w=$([ -n "$agent" ] && pgrep -P "$agent" | head -1 || true)
        [ -n "$w" ] && { echo "$w"; return 0; }
        sleep 0.1
    done
    return 1
}
fail() { echo "FAIL: $*"; for f in "$tmp"/*.log; do echo "--- $f"; tail -n 20 "$f"; done; exit 1; }
wait_file() { for _ in $(seq 600); do [ -e "$1" ] && return 0; sleep 0.1; done; echo "FAIL: no $1"; exit 1; }

# ---- a killed rank, then the launcher's restart
start k 0 1 --train_iters 60 --save_interval 5 --save "$tmp/ck" --load "$tmp/ck"; t0=$!
start k 1 1 --train_iters 60 --save_interval 5 --save "$tmp/ck" --load "$tmp/ck"; t1=$!
wait_file "$tmp/ck/iter_0000010/DONE"
victim=$(worker_of $t1) || fail "no gdn process under node 1's torchrun"
kill -KILL "$victim"
wait $t0 || { echo "FAIL: node 0's torchrun"; cat "$tmp/k.0.log"; exit 1; }
wait $t1 || { echo "FAIL: node 1's torchrun"; cat "$tmp/k.1.log"; exit 1; }
err0=$(cat "$tmp"/logs_k_0/*/attempt_0/0/stderr.log)
echo "$err0" | grep "gdn \[rank 0\]: rank 1 died or hung" > /dev/null || { echo "FAIL: rank 0 did not name rank 1: $err0"; exit 1; }
n=$(echo "$err0" | grep -c 'died or hung' || true); [ "$n" = 1 ] || fail "rank 0 printed $n 'died or hung' lines: $err0"
grep -q "resuming from $tmp/ck/iter_00000[1-9][05] at iteration" "$tmp"/logs_k_0/*/attempt_1/0/stdout.log ||
    fail "the restarted attempt did not resume from a checkpoint: $(cat "$tmp"/logs_k_0/*/attempt_1/0/stdout.log 2>&1 | head -5)"
test -f "$tmp/ck/iter_0000060/DONE" || fail "no complete checkpoint at iteration 60: $(ls "$tmp/ck")"
/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
its = [r['iteration'] for r in map(json.loads, open(sys.argv[1] + '/ck/metrics.jsonl')) if 'lm_loss' in r]
assert its[-1] == 60 and sorted(set(its)) == list(range(1, 61)), its  # every step logged; the resumed ones again
PY
echo "killed rank: named, restart resumed: $(grep -o 'resuming from [^ ]* at iteration [0-9]*' "$tmp"/logs_k_0/*/attempt_1/0/stdout.log)"

# ---- a hung rank: rank 0 must give up within the timeout (6 s) + the roll call (2 s)
port=$((port + 2))
start h 0 0 --train_iters 100000 --save ""; h0=$!
start h 1 0 --train_iters 100000 --save ""; h1=$!
for _ in $(seq 600); do [ -n "$(worker_of $h1 2>/dev/null)" ] && grep -qs "iteration  *3/" "$tmp"/logs_h_0/*/attempt_0/0/stdout.log && break; sleep 0.1; done
hung=$(worker_of $h1) || fail "no gdn process under node 1's torchrun (hang case)"
survivor=$(worker_of $h0) || fail "no gdn process under node 0's torchrun (hang case)"
kill -STOP "$hung"
s0=$(date +%s.%N)
exited() { # pid $1 has exited: gone, or a zombie that its torchrun agent has not reaped yet (it polls every few s)
    [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null || echo gone)" != Z ] && kill -0 "$1" 2>/dev/null && return 1
    return 0
}
for _ in $(seq 300); do exited "$survivor" && break; sleep 0.1; done # rank 0 gone?
el=$(echo "$(date +%s.%N) - $s0" | bc)
kill -KILL "$hung" # (torchrun's agents wait for it)
if wait $h0; then echo "FAIL: rank 0's torchrun exited 0 with a hung peer"; exit 1; fi
wait $h1 || true
grep -q "gdn \[rank 0\]: rank 1 died or hung (no answer within 6 s" "$tmp"/logs_h_0/*/attempt_0/0/stderr.log ||
    fail "rank 0 did not name the hung rank: $(cat "$tmp"/logs_h_0/*/attempt_0/0/stderr.log | tail -5)"
echo "hung rank: rank 0 stopped after $el s"
awk -v e="$el" 'BEGIN { exit !(e < 6 + 2 + 3) }' || fail "rank 0 took $el s (> 6 s timeout + 2 s roll call + 3 s)" # + the step in flight and teardown
echo "PASS: a killed or hung rank stops the run with its name; the restart resumes"
