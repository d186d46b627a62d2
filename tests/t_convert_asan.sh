#!/usr/bin/env bash
# The file readers under AddressSanitizer + UBSan: a bad file must give an error, never an out-of-bounds
# read or undefined behaviour.
#   - safetensors: the corrupt-header cases of test_safetensors plus 3000 random mutations of a valid file
#   - torch.save: 1500 mutations of the pickle program and 1500 of the whole zip file (tests/convert/pt_fuzz.c)
# Built outside build/ from just the sources each driver needs.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d /tmp/gdn_asan.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
SAN="-O1 -g -std=gnu11 -I. -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
${CC:-gcc} $SAN -o "$tmp/test_safetensors_asan" tests/test_safetensors.c io/safetensors.c util/common.c -lcjson -lm
"$tmp/test_safetensors_asan" --no-python --fuzz 3000 | tail -n 3
${CC:-gcc} $SAN -o "$tmp/pt_fuzz" tests/convert/pt_fuzz.c io/torch_pickle.c io/pickle_vm.c io/zip_read.c util/common.c -lz -lm
$PY tests/convert/fla_io.py make-pt "$tmp/model_optim_rng.pt"
"$tmp/pt_fuzz" "$tmp/model_optim_rng.pt" 1500
echo "readers clean under ASan/UBSan"
