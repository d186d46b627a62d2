#!/usr/bin/env bash
# A tiny hybrid (blocks 0 GDN, 1 softmax attention with GQA 2) end to end on the CPU through the CLI:
# training lowers the loss; `gdn generate` decodes greedily twice with the same output, and its batch of 2
# prints the same text as batch 1, and so do greedy steps queued in other groups (GDN_DECODE_GROUP 1: a read after
# every step, 3, 64). (Decode == full forward, past the KV cache's growth: tests/test_decode.c.)
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
hy=(--config configs/tiny.yaml --attn_layers 1 --attn_num_heads 4 --attn_num_kv_heads 2 --device cpu
    --seq_length 96 --micro_batch_size 2 --global_batch_size 4 --log_interval 1 --lr_warmup_iters 3)
/usr/bin/python3 tests/ref/make_dataset.py "$tmp/data" 60000 500 3
./gdn train "${hy[@]}" --vocab_size 500 --train_data_path "$tmp/data" --train_iters 40 --save "$tmp/a" > "$tmp/a.log"
/usr/bin/python3 - "$tmp/a/metrics.jsonl" <<'PY'
import json, sys
l = [r['lm_loss'] for r in map(json.loads, open(sys.argv[1])) if 'lm_loss' in r]
first, last = sum(l[:5]) / 5, sum(l[-5:]) / 5
print(f'hybrid training: loss {first:.3f} (steps 1-5) -> {last:.3f} (steps 36-40)')
sys.exit(0 if last < first - 0.5 else 1)
PY
/usr/bin/python3 tests/ref/make_dataset.py "$tmp/d2" 5000 128256 4
./gdn train "${hy[@]}" --train_data_path "$tmp/d2" --train_iters 2 --save "$tmp/b" > "$tmp/b.log"
gen=(--load "$tmp/b" --tokenizer .assets/llama3/tokenizer.json --prompt "The capital of France is" --greedy
     --max-new-tokens 40 --device cpu)
./gdn generate "${gen[@]}" > "$tmp/g1.txt" 2> "$tmp/g1.err"
./gdn generate "${gen[@]}" > "$tmp/g2.txt" 2> /dev/null
./gdn generate "${gen[@]}" --batch 2 > "$tmp/g3.txt" 2> /dev/null
cmp "$tmp/g1.txt" "$tmp/g2.txt"
cmp "$tmp/g1.txt" "$tmp/g3.txt"
for g in 1 3 64; do
  GDN_DECODE_GROUP=$g ./gdn generate "${gen[@]}" > "$tmp/g4.txt" 2> /dev/null
  cmp "$tmp/g1.txt" "$tmp/g4.txt" || { echo "FAILED: GDN_DECODE_GROUP=$g changes the text"; exit 1; }
done
[ "$(wc -c < "$tmp/g1.txt")" -gt 30 ] || { echo "FAILED: short output"; cat "$tmp/g1.txt" "$tmp/g1.err"; exit 1; }
cat "$tmp/g1.err" | tail -3
grep -q "KV cache" "$tmp/g1.err"
echo "t_hybrid_cli: training and greedy decoding of a hybrid as expected"
