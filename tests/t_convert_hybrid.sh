#!/usr/bin/env bash
# gdn convert on hybrid FLA models (spec hybrid.md §1), against fixtures written in Python
# (tests/convert/fla_hybrid_io.py): HF dirs with attention blocks (dict form with GQA, biases, window, theta;
# list form with one spec and FLA's defaults) -> ours bit-exact, checkpoint attn_* keys; ours -> HF bit-exact
# with FLA's normalised attn dict; ours -> HF -> ours byte-identical; `gdn params` on the result; refusals
# (two specs, no num_heads, layer out of range, Hkv not dividing Ha, GDN tensors where attention is declared,
# Megatron export/import of hybrids).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}
GDN=${GDN:-./gdn}
[ -x "$GDN" ] || make -s gdn
T=$(mktemp -d /tmp/gdn_convert_hybrid.XXXXXX)
trap 'rm -rf "$T"' EXIT
$PY tests/convert/fla_hybrid_io.py make "$T"

. tests/convert/lib.sh # run, expect_fail

for s in hyb hyb_list; do
  run --from-hf "$T/$s" --save "$T/ck_$s"
  grep -q "hybrid" "$T/last.log"
  run --to-hf --load "$T/ck_$s" --output-dir "$T/out_$s" --dtype fp32
  run --from-hf "$T/out_$s" --save "$T/rt_$s"
  cmp "$T/ck_$s/iter_0000000/model.safetensors" "$T/rt_$s/iter_0000000/model.safetensors"
  echo "  $s: ours -> HF -> ours byte-identical"
done
$PY tests/convert/fla_hybrid_io.py verify "$T"

expect_fail "config.json" "2 attention specs" -- --from-hf "$T/bad_two_specs" --save "$T/x"
expect_fail "config.json" "attn.num_heads" -- --from-hf "$T/bad_no_heads" --save "$T/x"
expect_fail "config.json" "block 3 is outside" -- --from-hf "$T/bad_layer" --save "$T/x"
expect_fail "config.json" "divide attn_num_heads" -- --from-hf "$T/bad_kv" --save "$T/x"
expect_fail "model.layers.1.attn." -- --from-hf "$T/bad_tensors" --save "$T/x"
expect_fail "hybrid" "--to-hf" -- --to-megatron --load "$T/ck_hyb" --output-dir "$T/x"
printf 'linear_key_head_dim: 16\nattn:\n  layers: [1]\n  num_heads: 4\n' > "$T/meg.yaml"
mkdir -p "$T/meg/iter_0000000/mp_rank_00"; echo 0 > "$T/meg/latest_checkpointed_iteration.txt"
$PY -c "import sys; sys.path.insert(0, 'tests/convert'); import torch, fla_io; torch.save(fla_io.megatron_state(fla_io.fla_tensors(fla_io.CFG, 1), fla_io.CFG, te=False, dtype=torch.float32), '$T/meg/iter_0000000/mp_rank_00/model_optim_rng.pt')"
expect_fail "attn_layers is set" "--from-hf" -- --from-megatron "$T/meg" --save "$T/x" --config "$T/meg.yaml"
[ ! -e "$T/x" ] || { echo "FAILED: a refused conversion left $T/x behind"; exit 1; }
"$GDN" params --attn_layers 1 --attn_num_heads 4 --attn_num_kv_heads 2 --attn_qkv_bias true --hidden_size 64 \
  --num_layers 6 --ffn_hidden_size 96 --linear_num_key_heads 2 --linear_num_value_heads 4 --linear_key_head_dim 16 \
  --linear_value_head_dim 32 --vocab_size 300 | tee "$T/params.txt"
n=$($PY -c "import sys; sys.path.insert(0, 'tests/convert'); import fla_hybrid_io as f; print(f'{sum(v.numel() for v in f.tensors(f.ATTN, 5).values()):,}')")
grep -q "parameters: $n " "$T/params.txt" || { echo "FAILED: gdn params != $n (the fixture's element count)"; exit 1; }
echo "t_convert_hybrid: all conversions and refusals as expected ($n parameters)"
