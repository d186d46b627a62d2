#!/usr/bin/env bash
# bench_dist_cpu.sh: collective time per step (comm_ms: what of the step's collectives is not overlapped —
# loss sum, gradient reduction, grad norm, ZeRO-1's all-gather) on CPU ranks, at 1, 2 and 4 ranks, through
# the fork shortcut (shared memory) and torchrun (Gloo, 1 node), plain DDP, ZeRO-1, and ZeRO-1 in buckets
# overlapped with the backward and the next forward. configs/tiny.yaml (the real 128k vocabulary: 8.4 M
# parameters, 98 % of them the tied embedding), micro-batch 1 x 96 tokens, global batch 8, one thread per
# rank. Prints the mean comm_ms (the summary's mean_comm_ms: steps 2..STEPS) and step time (the mean of
# steps 2..STEPS, ms_per_iter of the log rows). The machine's other load shows: run it on a quiet one.
#   STEPS=6 bash scripts/bench_dist_cpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 tests/ref/make_dataset.py "$tmp/data" 200000 128256 3 > /dev/null
common=(--config configs/tiny.yaml --train_data_path "$tmp/data" --seq_length 96 --micro_batch_size 1
        --global_batch_size 8 --log_interval 1 --device cpu --train_iters "${STEPS:-6}" --save "")
export OMP_NUM_THREADS=1
port=$((30000 + $$ % 10000))
row() { # NAME METRICS
    /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[2])]
s = [r for r in rows if r.get('summary')][0]
ms = [r['ms_per_iter'] for r in rows if r.get('log') and r['iteration'] > 1]
print(f"{sys.argv[1]:<40} comm {s.get('mean_comm_ms', 0.0):7.1f} ms/step   step {sum(ms) / len(ms):7.1f} ms")
PY
}
./gdn train "${common[@]}" --metrics_file "$tmp/w1.jsonl" > /dev/null 2>&1; row "1 rank (no collectives)" "$tmp/w1.jsonl"
for w in 2 4; do
    ./gdn train "${common[@]}" --nproc_per_node $w --metrics_file "$tmp/f$w.jsonl" > /dev/null 2>&1
    row "$w ranks fork (shared memory)" "$tmp/f$w.jsonl"
    ./gdn train "${common[@]}" --nproc_per_node $w --use_distributed_optimizer --metrics_file "$tmp/fz$w.jsonl" > /dev/null 2>&1
    row "$w ranks fork, ZeRO-1" "$tmp/fz$w.jsonl"
    for v in plain zero zero_overlap; do
        case $v in
            plain) extra=() ;;
            zero) extra=(--use_distributed_optimizer) ;;
            zero_overlap) extra=(--use_distributed_optimizer --ddp_bucket_size 200000 --overlap_grad_reduce --overlap_param_gather) ;;
        esac
        timeout 300 torchrun --nnodes 1 --nproc_per_node $w --master_addr 127.0.0.1 --master_port $port --redirects 1 --tee 2 \
            --log_dir "$tmp/logs_$v$w" --no_python ./gdn train "${common[@]}" "${extra[@]}" --metrics_file "$tmp/t$v$w.jsonl" > /dev/null 2>&1
        port=$((port + 2))
        row "$w ranks torchrun (Gloo), $v" "$tmp/t$v$w.jsonl"
    done
done
