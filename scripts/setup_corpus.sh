#!/usr/bin/env bash
# Makes the small real-text training corpus of the README's first commands:
#   .assets/corpus.jsonl                      JSON Lines, {"text": ...}: the npm nlp-corpus sentences
#                                             (builds/doc-0.json ... doc-99.json, 100k sentences, ~9 MB) grouped
#                                             into documents of 1-8 consecutive sentences (sizes cycle 3,5,2,8,4,6,1,7;
#                                             joined by one space), in file-number order: deterministic
#   .assets/data/corpus_text_document.{bin,idx,json}   `gdn prepare --append-eod` (Megatron "Option A" layout)
#   .assets/data/corpus_fla.{bin,idx,json}             `gdn prepare --fla-chunks --seq-length SEQ_LENGTH`
# usage: bash scripts/setup_corpus.sh [SEQ_LENGTH]    (default 2048; FORCE=1 rebuilds what is up to date)
#        bash scripts/setup_corpus.sh --jsonl-only      only .assets/corpus.jsonl, from a .assets/corpus carried
#                                                       to a machine without npm (scripts/recipe.sh)
# Steps whose outputs are newer than their inputs (and were made with the same SEQ_LENGTH) are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
JSONL_ONLY=0
if [ "${1:-}" = --jsonl-only ]; then JSONL_ONLY=1; shift; fi
SEQ=${1:-2048}
if ! [[ "$SEQ" =~ ^[1-9][0-9]*$ ]]; then
  echo "setup_corpus: SEQ_LENGTH must be a positive integer, got '$SEQ'" >&2
  exit 2
fi
A=.assets
if [ "$JSONL_ONLY" = 0 ]; then
  bash scripts/fetch_assets.sh
  [ -x ./gdn ] || make -j"$(nproc)" gdn
elif [ ! -d "$A/corpus/builds" ]; then
  echo "setup_corpus: $A/corpus/builds is missing (bash scripts/fetch_assets.sh fetches it; carry it to this machine)" >&2
  exit 2
fi
TOK=$A/llama3/tokenizer.json
mkdir -p "$A/data"

# The JSONL is rewritten only when its content changes, so its time stamp says when the data last changed.
python3 - "$A/corpus/builds" "$A/corpus.jsonl.tmp" <<'EOF'
import json, os, re, sys
src, out = sys.argv[1], sys.argv[2]
files = sorted((f for f in os.listdir(src) if re.fullmatch(r"doc-\d+\.json", f)), key=lambda f: int(f[4:-5]))
if len(files) != 100:
    sys.exit(f"setup_corpus: expected doc-0.json ... doc-99.json in {src}, found {len(files)} files")
sizes = [3, 5, 2, 8, 4, 6, 1, 7]
docs = sents = 0
with open(out, "w", encoding="utf-8") as f:
    k = 0
    for name in files:
        s = json.load(open(os.path.join(src, name), encoding="utf-8"))
        i = 0
        while i < len(s):
            n = sizes[k % len(sizes)]
            f.write(json.dumps({"text": " ".join(s[i:i + n])}, ensure_ascii=False) + "\n")
            i, k, docs = i + n, k + 1, docs + 1
        sents += len(s)
print(f"setup_corpus: {sents} sentences -> {docs} documents", file=sys.stderr)
EOF
if cmp -s "$A/corpus.jsonl.tmp" "$A/corpus.jsonl"; then rm "$A/corpus.jsonl.tmp"
else mv "$A/corpus.jsonl.tmp" "$A/corpus.jsonl"; fi
if [ "$JSONL_ONLY" = 1 ]; then echo "setup_corpus: ok ($A/corpus.jsonl)"; exit 0; fi

# up_to_date PREFIX [SEQ]: outputs newer than the corpus, the tokenizer and ./gdn (and of that chunk length)
up_to_date() {
  [ "${FORCE:-0}" = 1 ] && return 1
  local p=$1
  for f in "$p.bin" "$p.idx" "$p.json"; do [ -f "$f" ] || return 1; done
  for f in "$A/corpus.jsonl" "$TOK" ./gdn; do [ "$p.json" -nt "$f" ] || return 1; done
  [ -z "${2:-}" ] || grep -Eq "\"seq_length\":[[:space:]]*$2," "$p.json"
}
if up_to_date "$A/data/corpus_text_document"; then echo "setup_corpus: $A/data/corpus_text_document is up to date"
else ./gdn prepare --input "$A/corpus.jsonl" --tokenizer "$TOK" --output-prefix "$A/data/corpus_text_document" --append-eod
fi
if up_to_date "$A/data/corpus_fla" "$SEQ"; then echo "setup_corpus: $A/data/corpus_fla is up to date"
else ./gdn prepare --input "$A/corpus.jsonl" --tokenizer "$TOK" --output-prefix "$A/data/corpus_fla" --fla-chunks --seq-length "$SEQ"
fi
echo "setup_corpus: ok ($A/data/corpus_text_document, $A/data/corpus_fla with seq_length $SEQ)"
