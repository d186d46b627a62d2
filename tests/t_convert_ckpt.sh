#!/usr/bin/env bash
# Checkpoint save/load (io/checkpoint.c): round trip incl. AdamW state, resolve rules, stale optimizer
# removal, DONE semantics, failed saves, shape errors; 300M/1B recognised with the spec's parameter counts. Builds tests/convert/ckpt_check.c from the few
# sources it needs (so it does not depend on the rest of the library; build/version.c is made by make) and runs
# it in a scratch dir.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d /tmp/gdn_ckpt.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
${CC:-gcc} -O1 -g -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -I. \
  -fsanitize=address,undefined -fno-sanitize-recover=all \
  -o "$tmp/ckpt_check" tests/convert/ckpt_check.c io/checkpoint.c io/hf.c io/safetensors.c model/params.c model/config.c \
  util/common.c util/stale_tmp.c build/version.c -lcjson -lyaml -lm
ASAN_OPTIONS=detect_leaks=1 "$tmp/ckpt_check" "$tmp/scratch"
