#!/usr/bin/env bash
# Hybrid (GDN + softmax attention) checks on the GPU machine, after scripts/gpu_check.sh's build stage
# (make CUDA=1 all gpu-tests). Logs to build/gpu_hybrid/<stage>.log, a summary last.
#   ops        the attention kernels and the biased q|k|v GEMM vs their CPU twins (test_cuda_ops --only attn,
#              --only matmul_bias)
#   bench_attn attention fwd and fwd+bwd TFLOP/s, T 2048/8192, d 64/128 (tests/gpu/bench_attention.c);
#              FA2's published H100 fwd+bwd: d64 232 (2k) / 273 (8k), d128 265 / 308 (spec hybrid.md §4.5);
#              also GQA 4 and rows packed with 512-token documents (reset_state_at_eod's mask)
#   fla        FLA's own hybrid 300M (scripts/fla_hybrid_ref.py: flash_attn_func replaced by torch SDPA)
#              -> gdn convert --from-hf -> fp32 logits of 300 tokens vs FLA's: cosine >= 0.99999
#   fla_train  20 steps from the same init and data, FLA (bf16 autocast) vs gdn (CUDA bf16), per-step losses
#   bench      hybrid 300M training tokens/s next to the pure 300M's
#   STAGES="ops bench_attn fla fla_train bench"  FLA_PATH=.fla  DATA=.assets/data/corpus_fla  FLA_STEPS=20
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=build/gpu_hybrid; rm -rf "$OUT"; mkdir -p "$OUT"
STAGES=${STAGES:-ops bench_attn fla fla_train bench}
export FLA_PATH=${FLA_PATH:-.fla} PYTHONUNBUFFERED=1
DATA=${DATA:-.assets/data/corpus_fla}
W=build/fla_hybrid_work; mkdir -p "$W"
source scripts/gpu_stages.sh
has ops && { stage ops build/gpu_tests/test_cuda_ops --only attn; stage ops_bias build/gpu_tests/test_cuda_ops --only matmul_bias; }
has bench_attn && { stage bench_attn build/gpu_tests/bench_attention; stage bench_attn_gqa4 build/gpu_tests/bench_attention --hkv-ratio 4;
                    stage bench_attn_docs build/gpu_tests/bench_attention --doc-len 512; }
if has fla || has fla_train; then
  stage fla_init python3 scripts/fla_hybrid_ref.py init "$W/hf_init"
  stage convert_from_hf ./gdn convert --from-hf "$W/hf_init" --save "$W/ckpt_init"
fi
if has fla; then
  python3 -c "import numpy as np; np.random.seed(1); np.random.randint(0,128256,300).astype('int32').tofile('$W/ids.bin')"
  stage fla_logits python3 scripts/fla_hybrid_ref.py logits "$W/hf_init" "$W/ids.bin" "$W/fla_logits.npy"
  stage gdn_logits ./gdn logits --load "$W/ckpt_init" --ids "$W/ids.bin" --out "$W/gdn_logits.f32" --device cuda --precision fp32
  stage compare_logits python3 - "$W" <<'PY'
import sys, numpy as np
w = sys.argv[1]
ref = np.load(f'{w}/fla_logits.npy').astype(np.float64)
got = np.fromfile(f'{w}/gdn_logits.f32', dtype=np.float32).astype(np.float64).reshape(ref.shape)
cos = (ref * got).sum() / np.sqrt((ref * ref).sum() * (got * got).sum())
rel = np.abs(ref - got).max() / np.abs(ref).max()
print(f'hybrid logits FLA (fp32, SDPA math stand-in) vs gdn (CUDA fp32): cosine {cos:.8f} (>= 0.99999), max rel {rel:.2e}')
sys.exit(0 if cos >= 0.99999 else 1)
PY
fi
if has fla_train; then
  stage fla_train python3 scripts/fla_hybrid_ref.py train "$W/hf_init" "$DATA" "${FLA_STEPS:-20}"
  stage gdn_train ./gdn train --config configs/gdn-hybrid-300m.yaml --load "$W/ckpt_init" --finetune \
      --train_data_path "$DATA" --data_order fla --micro_batch_size 16 --global_batch_size 16 \
      --train_iters "${FLA_STEPS:-20}" --lr_warmup_iters 2 --log_interval 1 --device cuda \
      --metrics_file "$W/gdn_metrics.jsonl" --save ""
  stage compare_train python3 - "$W" "$OUT/fla_train.log" <<'PY'
import json, sys
w, fla_log = sys.argv[1], sys.argv[2]
fla = {r['iteration']: r['lm_loss'] for r in map(json.loads, (l for l in open(fla_log) if l.startswith('{"iteration"')))}
gdn = {r['iteration']: r['lm_loss'] for r in map(json.loads, open(f'{w}/gdn_metrics.jsonl')) if 'lm_loss' in r}
worst = 0
for it in sorted(fla):
    g = gdn.get(it, float('nan')); rel = abs(g - fla[it]) / fla[it]; worst = max(worst, rel)
    print(f'iter {it:3d}  fla {fla[it]:.5f}  gdn {g:.5f}  rel {rel:.2e}')
print(f'worst per-step relative loss difference {worst:.2e} (issue target 1e-4)')
sys.exit(0 if worst <= 1e-4 else 1)
PY
fi
if has bench; then
  stage bench_hybrid ./gdn bench --config configs/gdn-hybrid-300m.yaml --micro_batch_size 16 --seq_length 2048 --device cuda --steps 10 --warmup 2
  stage bench_pure ./gdn bench --config configs/gdn-300m.yaml --micro_batch_size 16 --seq_length 2048 --device cuda --steps 10 --warmup 2
fi
stage_summary
