#!/usr/bin/env bash
# The test command (README; .ci/run calls it): installs what is missing, builds, fetches the npm assets,
# runs every test. Prints "N passed, M failed" last.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/fetch_assets.sh
# CUDA=auto: the CUDA backend is compiled (not run) where nvcc exists, as CI checks it builds.
make -j"$(nproc)" CUDA="${CUDA:-auto}" all
bash tests/run.sh
