#!/usr/bin/env bash
# One call on the GPU machine: build with CUDA, run the CUDA tests, check parity with FLA, benchmark, and
# print a summary table last. Each stage logs to $OUT/<stage>.log and the run goes on past a failed stage.
#   STAGES="build ops model fla train300m"  (default: all but dp and dist, which want 2+ GPUs)   FLA_PATH=.fla (a folder holding a copy of FLA's fla/ package: .fla/fla/__init__.py)
#   FLA_STEPS=20  TRAIN_STEPS=50
set -uo pipefail
cd "$(dirname "$0")/.."
# Logs go to build/gpu_out; when the device tool's $OUT is set, a tarball of them and the summary land there.
RESULTS_DIR=${OUT:-}
OUT=build/gpu_out; rm -rf "$OUT"; mkdir -p "$OUT"
STAGES=${STAGES:-build ops model bench fla fla_train roundtrip decode eval train300m}
export FLA_PATH=${FLA_PATH:-.fla} PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
STAGE_TIMEOUT_DEFAULT=300
source scripts/gpu_stages.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"

if has build; then
  # without a package registry there: libraries carried in .deps (scripts/device_deps.sh), no OpenBLAS
  if [ -d .deps ]; then MK=(CUDA=1 BLAS=0 DEPS=.deps); else MK=(CUDA=1); fi
  stage build make -j"$(nproc)" "${MK[@]}" all gpu-tests
fi
if has ops; then
  stage ops build/gpu_tests/test_cuda_ops ${OPS_ARGS:-}
  stage ops_bench build/gpu_tests/test_cuda_ops --bench
fi
if has model; then
  stage model build/gpu_tests/test_cuda_model
fi

DATA=${DATA:-.assets/data/corpus_fla}
if has bench; then
  stage bench300m ./gdn bench --config configs/gdn-300m.yaml --micro_batch_size 16 --seq_length 2048 --device cuda --steps 10 --warmup 2
  # the lm head's logits in memory of their own (8192-row chunks) instead of the arena's backward-only buffers (4096):
  # the A/B of lmhead_ce's chunk fitting (peak allocated ~2 GiB apart at micro-batch 16)
  GDN_CUDA_CE_FIT=0 stage bench300m_cefit0 ./gdn bench --config configs/gdn-300m.yaml --micro_batch_size 16 \
      --seq_length 2048 --device cuda --steps 10 --warmup 2
  # memory toward FLA bf16-fce's 22.1 GiB: the SwiGLU outputs recomputed in the backward (-3 GiB, ~+1 ms)
  stage bench300m_lowmem ./gdn bench --config configs/gdn-300m.yaml --micro_batch_size 16 \
      --seq_length 2048 --device cuda --steps 10 --warmup 2 --recompute_swiglu true
  # where the step goes, per op (events around every op-table call; the table is in the log)
  stage bench300m_profile ./gdn bench --config configs/gdn-300m.yaml --micro_batch_size 16 --seq_length 2048 \
      --device cuda --steps 3 --warmup 2 --profile
fi
if has bench1b; then # the recipe's 1B config (16 GDN + 16 MLP blocks, hidden 2048)
  stage bench1b ./gdn bench --config configs/gdn-1b.yaml --micro_batch_size 16 --seq_length 2048 --device cuda --steps 5 --warmup 2
fi
W=build/fla_work
# FLA's 300M init as a gdn checkpoint in $W/ckpt_init, for the stages that need a model but not parity
ensure_ckpt_init() {
  [ -d "$W/ckpt_init" ] || { mkdir -p "$W"; python3 scripts/fla_ref.py init "$W/hf_init" >/dev/null 2>&1; ./gdn convert --from-hf "$W/hf_init" --save "$W/ckpt_init" >/dev/null; }
}
if has fla || has fla_train; then
  rm -rf "$W"; mkdir -p "$W"
  stage fla_init python3 scripts/fla_ref.py init "$W/hf_init"
  stage convert_from_hf ./gdn convert --from-hf "$W/hf_init" --save "$W/ckpt_init"
fi
if has fla; then
  # logits of one 300-token sequence: FLA fp32 vs gdn fp32 on CUDA
  python3 -c "import numpy as np; np.random.seed(1); np.random.randint(0,128256,300).astype('int32').tofile('$W/ids.bin')"
  stage fla_logits python3 scripts/fla_ref.py logits "$W/hf_init" "$W/ids.bin" "$W/fla_logits.npy"
  stage gdn_logits ./gdn logits --load "$W/ckpt_init" --ids "$W/ids.bin" --out "$W/gdn_logits.f32" --device cuda --precision fp32
  stage compare_logits python3 tests/gpu/compare_logits.py "$W/fla_logits.npy" "$W/gdn_logits.f32" \
      "logits FLA (fp32, fused_recurrent) vs gdn (CUDA fp32)"
fi
if has fla_train; then
  # FLA_LOG=file: FLA's losses from an earlier run of this stage (same init seed, data and schedule)
  if [ -n "${FLA_LOG:-}" ]; then cp "$FLA_LOG" "$OUT/fla_train.log"; RESULT[fla_train]="stored $FLA_LOG"
  else stage fla_train python3 scripts/fla_ref.py train "$W/hf_init" "$DATA" "${FLA_STEPS:-20}"; fi
  stage gdn_train_parity ./gdn train --config configs/gdn-300m.yaml --load "$W/ckpt_init" --finetune \
      --train_data_path "$DATA" --data_order fla --micro_batch_size 16 --global_batch_size 16 \
      --train_iters "${FLA_STEPS:-20}" --lr_warmup_iters 2 --log_interval 1 --device cuda \
      --metrics_file "$W/gdn_metrics.jsonl" --save ""
  stage compare_fla python3 tests/gpu/compare_fla_train.py "$W/gdn_metrics.jsonl" "$OUT/fla_train.log"
fi
if has roundtrip; then # ours -> FLA: a gdn checkpoint exported to HF, loaded by FLA, gives gdn's logits
  ensure_ckpt_init
  stage train_short ./gdn train --config configs/gdn-300m.yaml --load "$W/ckpt_init" --finetune \
      --train_data_path "$DATA" --data_order fla --micro_batch_size 16 --global_batch_size 16 --train_iters 10 \
      --lr_warmup_iters 2 --log_interval 5 --device cuda --save "$W/ckpt_trained"
  stage to_hf ./gdn convert --to-hf --load "$W/ckpt_trained" --output-dir "$W/hf_trained" --dtype fp32
  python3 -c "import numpy as np; np.random.seed(2); np.random.randint(0,128256,200).astype('int32').tofile('$W/ids2.bin')"
  stage fla_logits_ours python3 scripts/fla_ref.py logits "$W/hf_trained" "$W/ids2.bin" "$W/fla_logits2.npy"
  stage gdn_logits_ours ./gdn logits --load "$W/ckpt_trained" --ids "$W/ids2.bin" --out "$W/gdn_logits2.f32" --device cuda --precision fp32
  stage compare_roundtrip python3 tests/gpu/compare_logits.py "$W/fla_logits2.npy" "$W/gdn_logits2.f32" \
      "gdn checkpoint -> HF -> FLA (fp32)" "$W/ids2.bin"
fi
if has decode; then # recurrent decoding speed of the 300M, and greedy CPU == CUDA
  ensure_ckpt_init
  TOK=.assets/llama3/tokenizer.json
  for b in 1 16 64; do
    stage decode_b$b ./gdn generate --load "$W/ckpt_init" --tokenizer "$TOK" --prompt "The capital of France is" \
        --max-new-tokens 300 --greedy --batch $b --device cuda --quiet
    # the same without the recorded graph (every op launched from the host), to see what the graph buys
    GDN_NO_GRAPH=1 stage decode_nograph_b$b ./gdn generate --load "$W/ckpt_init" --tokenizer "$TOK" \
        --prompt "The capital of France is" --max-new-tokens 300 --greedy --batch $b --device cuda --quiet
    [ -d "$W/hf_init" ] && stage fla_decode_b$b python3 scripts/fla_ref.py decode "$W/hf_init" $b 100
  done
  # programmatic dependent launch off (GDN_CUDA_PDL=0): what it buys at batch 1, where the GEMVs run
  GDN_CUDA_PDL=0 stage decode_nopdl_b1 ./gdn generate --load "$W/ckpt_init" --tokenizer "$TOK" \
      --prompt "The capital of France is" --max-new-tokens 300 --greedy --batch 1 --device cuda --quiet
  # the lm head as cuBLASLt's GEMM + norm and argmax kernels (GDN_GEMV_LMHEAD=0) instead of one GEMV: what it buys
  GDN_GEMV_LMHEAD=0 stage decode_lmhead0_b1 ./gdn generate --load "$W/ckpt_init" --tokenizer "$TOK" \
      --prompt "The capital of France is" --max-new-tokens 300 --greedy --batch 1 --device cuda --quiet
  # batch 2 and 4 through cuBLASLt (the default since session 12), through the GEMVs' 2- and 4-row tiles
  # (GDN_GEMV_MAX_M=4), and through those at 2 blocks per SM (they hold 72-102 registers a thread: 2-3 blocks fit
  # per SM, so the default grid of 4 per SM runs in two waves)
  for b in 2 4; do
    stage decode_b$b ./gdn generate --load "$W/ckpt_init" --tokenizer "$TOK" --prompt "The capital of France is" \
        --max-new-tokens 300 --greedy --batch $b --device cuda --quiet
    GDN_GEMV_MAX_M=4 stage decode_gemv_b$b ./gdn generate --load "$W/ckpt_init" --tokenizer "$TOK" \
        --prompt "The capital of France is" --max-new-tokens 300 --greedy --batch $b --device cuda --quiet
    GDN_GEMV_MAX_M=4 GDN_GEMV_PER_SM=2 stage decode_2persm_b$b ./gdn generate --load "$W/ckpt_init" --tokenizer "$TOK" \
        --prompt "The capital of France is" --max-new-tokens 300 --greedy --batch $b --device cuda --quiet
  done
  # the token read after every step (GDN_DECODE_GROUP=1) instead of 16 steps queued as one graph: what queuing buys
  GDN_DECODE_GROUP=1 stage decode_group1_b1 ./gdn generate --load "$W/ckpt_init" --tokenizer "$TOK" \
      --prompt "The capital of France is" --max-new-tokens 300 --greedy --batch 1 --device cuda --quiet
  # greedy text of a (briefly trained) 300M checkpoint: the CPU reference and CUDA must agree token for token
  CK="$W/ckpt_trained"; [ -d "$CK" ] || CK="$W/ckpt_init"
  for d in "cpu fp32" "cuda fp32" "cuda bf16"; do set -- $d
    stage greedy_$1_$2 ./gdn generate --load "$CK" --tokenizer "$TOK" --prompt "The capital of France is" \
        --max-new-tokens 40 --greedy --device $1 --precision $2
  done
  # bf16, the token read after every step: the same text as the queued groups (graphs of 16 steps)
  GDN_DECODE_GROUP=1 stage greedy_cuda_bf16_group1 ./gdn generate --load "$CK" --tokenizer "$TOK" \
      --prompt "The capital of France is" --max-new-tokens 40 --greedy --device cuda --precision bf16
  stage greedy_same bash -c "a=\$(grep -v '^generate:' $OUT/greedy_cpu_fp32.log); b=\$(grep -v '^generate:' $OUT/greedy_cuda_fp32.log);
      [ -n \"\$a\" ] && [ \"\$a\" = \"\$b\" ] && grep -q '^generate:' $OUT/greedy_cuda_fp32.log && echo 'greedy text: CPU == CUDA (fp32)'"
  stage greedy_groups_same bash -c "a=\$(grep -v '^generate:' $OUT/greedy_cuda_bf16.log); b=\$(grep -v '^generate:' $OUT/greedy_cuda_bf16_group1.log);
      [ -n \"\$a\" ] && [ \"\$a\" = \"\$b\" ] && echo 'greedy text, bf16: groups of 16 == a read after every step'"
fi
if has eval; then # loglikelihood requests/s of the 300M: synthetic ARC-Easy docs in the hub's schema
  ensure_ckpt_init
  E=$W/evaldata/allenai/ai2_arc/ARC-Easy; mkdir -p "$E"
  python3 tests/gpu/make_arc_synthetic.py "$E/test.jsonl"
  for bs in 32 auto; do
    stage eval_arc_bs$bs ./gdn eval --load "$W/ckpt_init" --tasks arc_easy --data-dir "$W/evaldata" --device cuda \
        --tokenizer .assets/llama3/tokenizer.json --batch-size $bs --output-path "$W/eval_bs$bs.json"
  done
fi
if has dp; then # data parallel over the GPUs of this machine (NCCL): same global batch on 1 and on 2 GPUs
  NG=$(nvidia-smi -L 2>/dev/null | wc -l)
  if [ "$NG" -ge 2 ]; then
    DP=(--config configs/gdn-300m.yaml --train_data_path "$DATA" --data_order fla --micro_batch_size 16
        --global_batch_size 32 --train_iters "${DP_STEPS:-20}" --lr_warmup_iters 2 --log_interval 5 --device cuda --save "")
    stage dp_w1 ./gdn train "${DP[@]}" --metrics_file "$OUT/dp_w1.jsonl"
    stage dp_w2 ./gdn train "${DP[@]}" --nproc_per_node 2 --metrics_file "$OUT/dp_w2.jsonl"
    stage dp_compare python3 tests/gpu/compare_dp.py "$OUT"
  else
    echo "dp: skipped, $NG GPU(s) visible"
  fi
fi
if has dist; then # issue 19: NCCL through the backend's comm entries, torchrun, ZeRO-1, overlap; A/B at 1 GPU
  STAGE_TIMEOUT=3000 stage dist bash tests/gpu/dist_check.sh
fi
if has train300m; then
  stage train300m ./gdn train --config configs/gdn-300m.yaml --train_data_path "$DATA" --data_order fla \
      --micro_batch_size 16 --global_batch_size 16 --train_iters "${TRAIN_STEPS:-50}" --lr_warmup_iters 5 \
      --log_interval 5 --device cuda --metrics_file "$OUT/train300m_metrics.jsonl" --save ""
fi

finish() {
  if [ -n "$RESULTS_DIR" ]; then
    tar czf "$RESULTS_DIR/logs.tgz" -C "$OUT" . 2>/dev/null
    cp "$OUT/summary.txt" "$RESULTS_DIR/" 2>/dev/null
  fi
}
{
echo; echo "==================== summary ===================="
printf "%-20s %s\n" stage result
for k in build ops ops_bench model bench300m bench300m_cefit0 bench300m_lowmem bench300m_profile bench1b fla_init convert_from_hf fla_logits gdn_logits compare_logits fla_train \
         gdn_train_parity compare_fla train_short to_hf fla_logits_ours gdn_logits_ours compare_roundtrip decode_b1 decode_b16 decode_b64 \
         decode_nograph_b1 decode_nograph_b16 decode_nopdl_b1 decode_lmhead0_b1 decode_b2 decode_gemv_b2 decode_2persm_b2 decode_b4 decode_gemv_b4 decode_2persm_b4 decode_group1_b1 fla_decode_b1 fla_decode_b16 fla_decode_b64 eval_arc_bs32 eval_arc_bsauto \
         dp_w1 dp_w2 dp_compare dist \
         greedy_cpu_fp32 greedy_cuda_fp32 greedy_cuda_bf16 greedy_cuda_bf16_group1 greedy_same greedy_groups_same train300m; do
  [ -n "${RESULT[$k]:-}" ] && printf "%-20s %s\n" "$k" "${RESULT[$k]}"
done
grep -h "fla_ms_per_step" "$OUT/fla_train.log" 2>/dev/null | tail -1
grep -h "iteration-1 loss" "$OUT/compare_fla.log" 2>/dev/null
grep -h "cosine" "$OUT/compare_logits.log" 2>/dev/null
grep -h "^bench:" "$OUT/bench300m.log" "$OUT/bench300m_cefit0.log" "$OUT/bench300m_lowmem.log" "$OUT/bench1b.log" 2>/dev/null
grep -h "gdn checkpoint -> HF" "$OUT/compare_roundtrip.log" 2>/dev/null
for b in 1 16 64; do grep -h "^generate:" "$OUT/decode_b$b.log" 2>/dev/null | sed "s/^/batch $b: /"; done
for b in 1 16; do grep -h "^generate:" "$OUT/decode_nograph_b$b.log" 2>/dev/null | sed "s/^/no graph, batch $b: /"; done
grep -h "^generate:" "$OUT/decode_nopdl_b1.log" 2>/dev/null | sed "s/^/no PDL, batch 1: /"
grep -h "^generate:" "$OUT/decode_lmhead0_b1.log" 2>/dev/null | sed "s/^/lm head unfused (cuBLASLt), batch 1: /"
for b in 2 4; do grep -h "^generate:" "$OUT/decode_b$b.log" 2>/dev/null | sed "s/^/cuBLASLt (the default), batch $b: /"
  grep -h "^generate:" "$OUT/decode_gemv_b$b.log" 2>/dev/null | sed "s/^/GEMV tiles (GDN_GEMV_MAX_M=4), batch $b: /"
  grep -h "^generate:" "$OUT/decode_2persm_b$b.log" 2>/dev/null | sed "s/^/GEMV at 2 blocks per SM, batch $b: /"; done
grep -h "^generate:" "$OUT/decode_group1_b1.log" 2>/dev/null | sed "s/^/a read after every step, batch 1: /"
grep -h "fla_decode_batch" "$OUT"/fla_decode_b*.log 2>/dev/null
for bs in 32 auto; do grep -h "req/s" "$OUT/eval_arc_bs$bs.log" 2>/dev/null | tail -1 | sed "s/^/eval batch-size $bs: /"; done
grep -h "greedy text" "$OUT/greedy_same.log" "$OUT/greedy_groups_same.log" 2>/dev/null
grep -h "GPUs\|GPU:" "$OUT/dp_compare.log" 2>/dev/null
grep -h "elapsed time per iteration" "$OUT/train300m.log" 2>/dev/null | tail -2 | sed 's/.*iteration  *\([0-9]*\)\/.*elapsed time per iteration (ms): \([0-9.]*\).*tokens\/s\/GPU): \([0-9.]*\).*lm loss: \([0-9.E+-]*\).*/gdn 300M iter \1: \2 ms\/iter, \3 tokens\/s, loss \4/'
} | tee "$OUT/summary.txt"
finish
