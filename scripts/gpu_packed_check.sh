#!/usr/bin/env bash
# Packed documents (reset_state_at_eod) against FLA's cu_seqlens path on the GPU machine, after
# scripts/gpu_check.sh's build stage (make CUDA=1 all gpu-tests). Logs to build/gpu_packed/<stage>.log, a summary last.
#   ops        FLA's chunk_gated_delta_rule varlen vs one document at a time (FLA's own semantics), fp32 and bf16
#   logits     one 2048-token row of real EOD data (23 documents) through FLA with cu_seqlens vs
#              gdn logits --reset_state_at_eod true (CUDA fp32): max relative difference and cosine
#   train      20 steps of the 300M from FLA's init on the same rows: FLA (bf16 autocast, batch flattened to one
#              varlen row, cu_seqlens after every EOS) vs gdn (CUDA bf16, reset_state_at_eod), per-step losses;
#              and gdn without the reset on the same rows (what the reset changes, and what it costs per step)
#   STAGES="ops logits train"  FLA_PATH=.fla  FLA_STEPS=20
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=build/gpu_packed; rm -rf "$OUT"; mkdir -p "$OUT"
STAGES=${STAGES:-ops logits train}
export FLA_PATH=${FLA_PATH:-.fla} PYTHONUNBUFFERED=1
W=build/fla_packed_work; mkdir -p "$W"
STEPS=${FLA_STEPS:-20}
source scripts/gpu_stages.sh
if has ops; then
  stage ops_fp32 python3 tests/gpu/fla_packed.py ops fp32
  stage ops_bf16 python3 tests/gpu/fla_packed.py ops bf16
fi
# real EOD data: Megatron documents (each ending in EOD) cut into 2048-token rows both trainers read alike
stage make_eod python3 tests/gpu/fla_packed.py make-eod .assets/data/corpus_text_document "$W/eod" 2048
if has logits || has train; then
  stage fla_init python3 scripts/fla_ref.py init "$W/hf_init"
  stage convert_from_hf ./gdn convert --from-hf "$W/hf_init" --save "$W/ckpt_init"
fi
if has logits; then
  python3 -c "import numpy as np; np.fromfile('$W/eod.bin', dtype=np.int32)[2048*5:2048*6].tofile('$W/row.bin')"
  # FLA's fused_recurrent kernel takes cu_seqlens too and has no dots: fp32 without TF32 and without the
  # minutes of ieee autotuning the chunk kernels need (FLA_PACKED_MODE=chunk TRITON_F32_DEFAULT=ieee for those)
  stage fla_logits python3 tests/gpu/fla_packed.py logits "$W/hf_init" "$W/row.bin" "$W/fla_logits.npy" 128001
  stage gdn_logits ./gdn logits --load "$W/ckpt_init" --ids "$W/row.bin" --out "$W/gdn_logits.f32" --device cuda \
      --precision fp32 --reset_state_at_eod true --eos_token_id 128001
  stage compare_logits python3 tests/gpu/compare_logits.py "$W/fla_logits.npy" "$W/gdn_logits.f32" \
      "packed-row logits FLA (fp32, cu_seqlens) vs gdn (CUDA fp32, reset_state_at_eod)"
fi
if has train; then
  stage fla_train python3 scripts/fla_ref.py train "$W/hf_init" "$W/eod" "$STEPS" --reset-at-eos 128001 --warmup-step
  for reset in true false; do
    stage gdn_train_reset_$reset ./gdn train --config configs/gdn-300m.yaml --load "$W/ckpt_init" --finetune \
        --train_data_path "$W/eod" --data_order fla --micro_batch_size 16 --global_batch_size 16 \
        --train_iters "$STEPS" --lr_warmup_iters 2 --log_interval 1 --device cuda --reset_state_at_eod $reset \
        --metrics_file "$W/gdn_metrics_$reset.jsonl" --save ""
  done
  stage compare_train python3 - "$W" "$OUT/fla_train.log" <<'PY'
import json, sys, statistics
w, fla_log = sys.argv[1], sys.argv[2]
fla = {r['iteration']: r['lm_loss'] for r in map(json.loads, (l for l in open(fla_log) if l.startswith('{"iteration"')))}
def load(tag):
    rows = list(map(json.loads, open(f'{w}/gdn_metrics_{tag}.jsonl')))
    loss = {r['iteration']: r['lm_loss'] for r in rows if 'lm_loss' in r}
    ms = statistics.median(r['ms_per_iter'] for r in rows if r.get('log') and r['iteration'] > 3)
    return loss, ms
(on, ms_on), (off, ms_off) = load('true'), load('false')
worst = 0
for it in sorted(fla):
    rel = abs(on[it] - fla[it]) / fla[it]; worst = max(worst, rel)
    print(f'iter {it:3d}  fla(cu_seqlens) {fla[it]:.5f}  gdn(reset) {on[it]:.5f}  rel {rel:.2e}   gdn(no reset) {off[it]:.5f}')
print(f'worst per-step relative loss difference, reset vs FLA cu_seqlens: {worst:.2e}')
print(f'step time on real EOD data (median of iterations 4..): reset {ms_on:.1f} ms, no reset {ms_off:.1f} ms: {100 * (ms_on / ms_off - 1):+.1f} %')
e1 = abs(on[1] - fla[1]) / fla[1]
print(f'iteration-1 loss relative difference {e1:.2e}')
sys.exit(0 if e1 <= 1e-3 else 1)
PY
fi
stage_summary
