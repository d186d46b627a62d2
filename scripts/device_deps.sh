#!/usr/bin/env bash
# For a GPU machine with no package registry (the lent H200): fetches here, with apt, the Debian packages
# of the C libraries gdn.c links, and unpacks them into .deps/ (gitignored) to be carried along.
# scripts/gpu_check.sh finds .deps/ and points the compiler and loader at it.
set -euo pipefail
cd "$(dirname "$0")/.."
# OpenBLAS is left out (36 MB): the GPU build uses BLAS=0, where the CPU backend (only the tests' reference
# there) multiplies with plain loops.
PKGS="libcjson-dev libcjson1 libyaml-dev libyaml-0-2 libutf8proc-dev libutf8proc2 libzstd-dev libzstd1 libsnappy-dev libsnappy1v5
      libgloo-dev libgloo0 libhiredis0.14 libibverbs1 libnl-3-200 libnl-route-3-200" # Gloo and what libgloo.so.0 links
rm -rf .deps .deps.tmp; mkdir -p .deps.tmp/debs
(cd .deps.tmp/debs && apt-get download $PKGS >/dev/null)
for d in .deps.tmp/debs/*.deb; do dpkg -x "$d" .deps.tmp/root; done
mkdir -p .deps
cp -a .deps.tmp/root/usr/include .deps/include
mkdir -p .deps/lib
for f in $(find .deps.tmp/root/usr/lib -name '*.so*' -o -name '*.a' | grep -v '\.a$'); do cp -aL "$f" .deps/lib/ 2>/dev/null || true; done
rm -rf .deps.tmp
ls .deps/lib | head -40
du -sh .deps
