#!/usr/bin/env bash
# dist_check.sh: the distributed paths on GPUs (NCCL through the backend's comm_* entries), which CI cannot
# run. On the GPU machine, after `make CUDA=1` (scripts/gpu_check.sh runs it as its `dist` stage):
#  1. world size 1 A/B in one call: plain vs buckets + overlap vs ZeRO-1 flags; at one rank they are off by
#     construction, so the losses must be bit-identical and the step time the same (printed: the cost);
#  2. with >= 2 GPUs: 1 GPU x 2 micro-batches vs 2 GPUs x 1 through the fork shortcut, torchrun (1 node, and
#     2 "nodes" x 1 on loopback: the NCCL id crosses the Gloo channel), ZeRO-1, bucketed overlap: losses
#     within the tolerance of gpu_check's dp stage (bf16), overlap == no overlap bit for bit, and the
#     exposed collective time per step (comm_ms) and tokens/s per GPU printed; ZeRO-1 (sharded fp32 masters)
#     in buckets with overlap_grad_reduce + overlap_param_gather == without overlap, bit for bit; the
#     precision-aware optimizer (bf16 moments, master remainders) on ZeRO-1 within 1e-4 of it on plain DDP.
#   DATA=.assets/data/corpus_fla  STEPS=20  OUT=dir (logs)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-build/gpu_out}/dist; mkdir -p "$OUT"
DATA=${DATA:-.assets/data/corpus_fla}
export NCCL_NVLS_ENABLE=0
B=(--config configs/gdn-300m.yaml --train_data_path "$DATA" --data_order fla --micro_batch_size 16
   --global_batch_size 32 --train_iters "${STEPS:-20}" --lr_warmup_iters 2 --log_interval 5 --device cuda --save "")
fail=0
run() { # NAME ARGS...
  local name=$1; shift
  echo "=== $name: $*"
  if ! timeout 600 "$@" > "$OUT/$name.log" 2>&1; then echo "FAIL: $name"; tail -20 "$OUT/$name.log"; fail=1; fi
}
trun() { # NAME NNODES NPROC ARGS...
  local name=$1 nn=$2 np=$3; shift 3
  local pids=() port=$((29500 + RANDOM % 1000 * 2))
  for ((n = 0; n < nn; n++)); do
    timeout 600 torchrun --nnodes "$nn" --node_rank $n --nproc_per_node "$np" --master_addr 127.0.0.1 --master_port $port \
      --redirects 1 --tee 2 --log_dir "$OUT/logs_$name" --no_python env GDN_CUDA_DEVICE_FROM_NODE=$n \
      bash -c 'GDN_CUDA_DEVICE=$(( GDN_CUDA_DEVICE_FROM_NODE * LOCAL_WORLD_SIZE + LOCAL_RANK )) exec ./gdn train "$@"' _ "$@" \
      > "$OUT/$name.$n.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { echo "FAIL: $name"; tail -20 "$OUT/$name".*.log; fail=1; }; done
}

# ---- 1. world size 1: the new code costs nothing
run w1_plain ./gdn train "${B[@]}" --metrics_file "$OUT/w1_plain.jsonl"
run w1_flags ./gdn train "${B[@]}" --ddp_bucket_size 40000000 --overlap_grad_reduce --metrics_file "$OUT/w1_flags.jsonl"
run w1_zero ./gdn train "${B[@]}" --use_distributed_optimizer --metrics_file "$OUT/w1_zero.jsonl"
run w1_zero_overlap ./gdn train "${B[@]}" --use_distributed_optimizer --ddp_bucket_size 20000000 --overlap_grad_reduce \
  --overlap_param_gather --metrics_file "$OUT/w1_zero_overlap.jsonl"

NG=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ "$NG" -ge 2 ]; then
  run w2_fork ./gdn train "${B[@]}" --nproc_per_node 2 --metrics_file "$OUT/w2_fork.jsonl"
  trun w2_torchrun 1 2 "${B[@]}" --metrics_file "$OUT/w2_torchrun.jsonl"
  trun w2_nodes 2 1 "${B[@]}" --metrics_file "$OUT/w2_nodes.jsonl"
  trun w2_zero 1 2 "${B[@]}" --use_distributed_optimizer --metrics_file "$OUT/w2_zero.jsonl"
  trun w2_buckets 1 2 "${B[@]}" --ddp_bucket_size 20000000 --metrics_file "$OUT/w2_buckets.jsonl"
  trun w2_overlap 1 2 "${B[@]}" --ddp_bucket_size 20000000 --overlap_grad_reduce --metrics_file "$OUT/w2_overlap.jsonl"
  # ZeRO-1 with sharded fp32 masters (bf16: the all-gathered bf16 copy is what the forward reads), in buckets,
  # overlapped with the backward and the next forward or not: the same bits
  trun w2_zero_buckets 1 2 "${B[@]}" --use_distributed_optimizer --ddp_bucket_size 20000000 --metrics_file "$OUT/w2_zero_buckets.jsonl"
  trun w2_zero_overlap 1 2 "${B[@]}" --use_distributed_optimizer --ddp_bucket_size 20000000 --overlap_grad_reduce \
    --overlap_param_gather --metrics_file "$OUT/w2_zero_overlap.jsonl"
  # the precision-aware optimizer (bf16 moments, master remainders) on plain DDP and on ZeRO-1 (its shards in that
  # storage, overlapped)
  PA=(--use_precision_aware_optimizer --exp_avg_dtype bf16 --exp_avg_sq_dtype bf16)
  trun w2_pa 1 2 "${B[@]}" "${PA[@]}" --metrics_file "$OUT/w2_pa.jsonl"
  trun w2_zero_pa 1 2 "${B[@]}" "${PA[@]}" --use_distributed_optimizer --ddp_bucket_size 20000000 --overlap_grad_reduce \
    --overlap_param_gather --metrics_file "$OUT/w2_zero_pa.jsonl"
  if [ "$NG" -ge 4 ]; then
    trun w4_zero 1 4 "${B[@]}" --micro_batch_size 8 --use_distributed_optimizer --metrics_file "$OUT/w4_zero.jsonl"
    trun w4_overlap 1 4 "${B[@]}" --micro_batch_size 8 --overlap_grad_reduce --metrics_file "$OUT/w4_overlap.jsonl"
  fi
else
  echo "dist: multi-GPU part skipped, $NG GPU(s) visible"
fi

python3 - "$OUT" <<'PY' || fail=1
import glob, json, os, statistics, sys
out = sys.argv[1]
def load(name):
    p = f'{out}/{name}.jsonl'
    if not os.path.exists(p): return None
    rows = [json.loads(l) for l in open(p)]
    steps = {r['iteration']: r for r in rows if 'lm_loss' in r}
    logs = [r for r in rows if r.get('log')][1:] or [r for r in rows if r.get('log')]
    return steps, statistics.median(r['ms_per_iter'] for r in logs), statistics.median(r['tokens_per_s'] for r in logs)
ok = True
base = load('w1_plain')
for name in ('w1_flags', 'w1_zero', 'w1_zero_overlap'):
    got = load(name)
    same = got and all((got[0][k]['lm_loss'], got[0][k]['grad_norm']) == (base[0][k]['lm_loss'], base[0][k]['grad_norm']) for k in base[0])
    print(f'{name}: losses bit-identical to plain: {same}; ms/step {got[1]:.1f} vs {base[1]:.1f} ({100 * (got[1] / base[1] - 1):+.2f} %)')
    ok &= bool(same)
for name in ('w2_fork', 'w2_torchrun', 'w2_nodes', 'w2_zero', 'w2_buckets', 'w2_overlap', 'w2_zero_buckets', 'w2_zero_overlap',
             'w4_zero', 'w4_overlap'):
    got = load(name)
    if not got: continue
    l1, l2 = base[0], got[0]
    worst = max(abs(l2[k]['lm_loss'] - l1[k]['lm_loss']) / l1[k]['lm_loss'] for k in l1)
    first = abs(l2[1]['lm_loss'] - l1[1]['lm_loss']) / l1[1]['lm_loss']
    comm = statistics.median(r['comm_ms'] for r in l2.values())
    print(f'{name}: losses within {worst:.2e} relative of 1 GPU (step 1: {first:.1e}); comm_ms median {comm:.2f}; '
          f'tokens/s/GPU {got[2]:.0f} (1 GPU {base[2]:.0f}: scaling {got[2] / base[2]:.3f})')
    ok &= first <= 1e-5 and worst <= 1e-3
b, o = load('w2_buckets'), load('w2_overlap')
if b and o:
    same = all((b[0][k]['lm_loss'], b[0][k]['grad_norm']) == (o[0][k]['lm_loss'], o[0][k]['grad_norm']) for k in b[0])
    print(f'overlap == no overlap (2 GPUs, buckets of 20M): {same}'); ok &= same
b, o = load('w2_zero_buckets'), load('w2_zero_overlap')
if b and o:
    same = all((b[0][k]['lm_loss'], b[0][k]['grad_norm']) == (o[0][k]['lm_loss'], o[0][k]['grad_norm']) for k in b[0])
    print(f'ZeRO-1 overlapped (grad reduce + param gather) == not (2 GPUs, buckets of 20M): {same}'); ok &= same
p, z = load('w2_pa'), load('w2_zero_pa')
if p and z:
    worst = max(abs(z[0][k]['lm_loss'] - p[0][k]['lm_loss']) / p[0][k]['lm_loss'] for k in p[0])
    first = abs(p[0][1]['lm_loss'] - base[0][1]['lm_loss']) / base[0][1]['lm_loss']
    last = max(p[0])
    drift = abs(p[0][last]['lm_loss'] - base[0][last]['lm_loss']) / base[0][last]['lm_loss']
    print(f'precision-aware optimizer, 2 GPUs: ZeRO-1 (overlapped) within {worst:.2e} of plain DDP (tol 1e-4); step 1 '
          f'within {first:.1e} of fp32 state 1 GPU (tol 1e-5); step {last} {drift:.2e} from it (printed)')
    ok &= worst <= 1e-4 and first <= 1e-5
sys.exit(0 if ok else 1)
PY
[ $fail = 0 ] && echo "PASS: dist_check" || { echo "FAIL: dist_check"; exit 1; }
