#!/usr/bin/env bash
# gdn convert end to end, against fixtures written independently in Python (tests/convert/fla_io.py):
#   FLA HF dirs (fp32 / bf16 + lm_head copy / sharded f16 / FLA config defaults) -> ours: exact values
#   ours -> HF fp32 bit-exact, -> HF bf16 equal to torch's RNE rounding; config.json key by key; tokenizer files
#   ours -> HF -> ours: byte-identical checkpoint
#   Megatron torch.save files (local spec fp32 with storage offsets/strides and args/RNG/optimizer extras;
#   TE spec bf16 with _extra_state and a tied output_layer copy) -> ours: exact values
#   ours -> Megatron (local fp32, TE bf16, forced zip64) read back by torch.load, and re-imported byte-identical
#   bad inputs: each error names the file and the tensor/key at fault
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}
GDN=${GDN:-./gdn}
[ -x "$GDN" ] || make -s gdn
tmp=$(mktemp -d /tmp/gdn_convert.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
T=$tmp
$PY tests/convert/fla_io.py make "$T"

. tests/convert/lib.sh # run, expect_fail

"$GDN" convert --help > "$T/help.txt"
grep -q -- "--from-megatron" "$T/help.txt" || { echo "FAILED: --help"; exit 1; }

# HF -> ours
run --from-hf "$T/hf_f32" --save "$T/ck_f32"
grep -q "custom shape" "$T/last.log"
run --from-hf "$T/hf_bf16" --save "$T/ck_bf16"
run --from-hf "$T/hf_lmhead" --save "$T/ck_lmhead"
run --from-hf "$T/hf_sharded" --save "$T/ck_sharded"
run --from-hf "$T/hf_defaults" --save "$T/ck_defaults"
# ours -> HF -> ours
run --to-hf --load "$T/ck_f32" --output-dir "$T/out_hf32" --dtype fp32
run --to-hf --load "$T/ck_f32/iter_0000000" --output-dir "$T/out_hf16" --dtype bf16 --tokenizer "$T/tokenizer.json"
run --from-hf "$T/out_hf32" --save "$T/ck_rt"
cmp "$T/ck_f32/iter_0000000/model.safetensors" "$T/ck_rt/iter_0000000/model.safetensors"
echo "  ours -> HF fp32 -> ours: model.safetensors byte-identical"
# Megatron -> ours (the test model's q/k head dim is 16, so it comes from --config)
expect_fail "key dim 32" "head dim 64" "--config" -- --from-megatron "$T/meg_local" --save "$T/x"
printf 'linear_key_head_dim: 16\nnorm_epsilon: 1e-6\n' > "$T/meg.yaml"
printf 'linear_key_head_dim: 16\nhidden_size: 128\n' > "$T/meg_wrong.yaml"
expect_fail "meg_wrong.yaml" "'hidden_size' is 128" "give 64" -- --from-megatron "$T/meg_local" --save "$T/x" --config "$T/meg_wrong.yaml"
run --from-megatron "$T/meg_local" --save "$T/ck_meg_local" --config "$T/meg.yaml"
grep -q "local (no TE)" "$T/last.log"
run --from-megatron "$T/meg_te/iter_0001234" --save "$T/ck_meg_te" --config "$T/meg.yaml"
grep -q "TE (norms fused" "$T/last.log"
# ours -> Megatron -> ours
run --to-megatron --load "$T/ck_f32" --output-dir "$T/out_meg" --dtype fp32
run --to-megatron --load "$T/ck_f32" --output-dir "$T/out_meg_te" --megatron-spec te
GDN_TEST_FORCE_ZIP64=1 run --to-megatron --load "$T/ck_f32" --output-dir "$T/out_meg_z64" --dtype fp32
run --from-megatron "$T/out_meg_z64/iter_0000000/mp_rank_00/model_optim_rng.pt" --save "$T/ck_meg_rt" --config "$T/meg.yaml"
cmp "$T/ck_f32/iter_0000000/model.safetensors" "$T/ck_meg_rt/iter_0000000/model.safetensors"
echo "  ours -> Megatron fp32 (zip64) -> ours: model.safetensors byte-identical"
run --list "$T/meg_local/iter_0000000/mp_rank_00/model_optim_rng.pt"
grep -q "model.decoder.layers.0.mixer.in_proj.weight" "$T/last.log"
run --list "$T/out_hf16/model.safetensors"
grep -q "model.layers.1.attn.A_log *F32" "$T/last.log"

$PY tests/convert/fla_io.py verify "$T"

# bad inputs
expect_fail "bad_missing" "model.layers.1.attn.dt_bias" "missing" -- --from-hf "$T/bad_missing" --save "$T/x"
expect_fail "bad_extra/model.safetensors" "model.layers.0.attn.foo.weight" -- --from-hf "$T/bad_extra" --save "$T/x"
expect_fail "model.layers.1.attn.q_proj.weight" "[33, 64]" "[32, 64]" -- --from-hf "$T/bad_shape" --save "$T/x"
expect_fail "model.norm.weight" "I32" -- --from-hf "$T/bad_dtype" --save "$T/x"
expect_fail "bad_trunc/model.safetensors" "truncated" -- --from-hf "$T/bad_trunc" --save "$T/x"
expect_fail "config.json" "model_type" "llama" -- --from-hf "$T/bad_type" --save "$T/x"
expect_fail "tie_word_embeddings" -- --from-hf "$T/bad_untied" --save "$T/x"
expect_fail "config.json" "'hidden_size'" "integer" -- --from-hf "$T/bad_conf" --save "$T/x"
expect_fail "lm_head.weight" "[7, 5]" -- --from-hf "$T/hf_lmhead_diff" --save "$T/x"
expect_fail "decoder.layers.1.mlp.linear_fc1.bias" -- --from-megatron "$T/meg_bad_extra" --save "$T/x" --config "$T/meg.yaml"
expect_fail "decoder.layers.2.mixer.A_log" -- --from-megatron "$T/meg_bad_missing" --save "$T/x" --config "$T/meg.yaml"
expect_fail "output_layer.weight" "differs" -- --from-megatron "$T/meg_bad_untied" --save "$T/x" --config "$T/meg.yaml"
cp -r "$T/ck_f32" "$T/ck_incomplete"; rm "$T/ck_incomplete/iter_0000000/DONE"
expect_fail "incomplete checkpoint" "iter_0000000" -- --to-hf --load "$T/ck_incomplete" --output-dir "$T/x"
expect_fail "FLA HuggingFace" "--from-hf" -- --to-hf --load "$T/hf_f32" --output-dir "$T/x"
head -c 3000 "$T/meg_local/iter_0000000/mp_rank_00/model_optim_rng.pt" > "$T/trunc.pt"
expect_fail "trunc.pt" "zip" -- --from-megatron "$T/trunc.pt" --save "$T/x" --config "$T/meg.yaml"
expect_fail "--dtype" -- --to-hf --load "$T/ck_f32" --output-dir "$T/x" --dtype int8
expect_fail "unknown option '--bogus'" -- --from-hf "$T/hf_f32" --save "$T/x" --bogus
expect_fail "does not take --dtype" -- --from-hf "$T/hf_f32" --save "$T/x" --dtype bf16
[ ! -e "$T/x" ] || { echo "FAILED: a refused conversion left $T/x behind"; ls -R "$T/x"; exit 1; }
echo "t_convert: all conversions and refusals as expected"
