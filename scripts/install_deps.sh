#!/usr/bin/env bash
# Installs the Debian packages gdn.c builds and tests with. Idempotent; a no-op when all are present.
set -euo pipefail
PKGS="build-essential libyaml-dev libcjson-dev libopenblas-dev libutf8proc-dev libzstd-dev libsnappy-dev zlib1g-dev libomp-dev libxxhash-dev python3-torch python3-numpy nodejs npm"
# gdn report: Cairo plots (found through pkg-config), the font they use, chromium for the page test
PKGS="$PKGS pkg-config libcairo2-dev fonts-dejavu-core chromium"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# nodejs may come from another source that bundles npm
if command -v npm >/dev/null 2>&1; then missing=$(echo "$missing" | tr ' ' '\n' | grep -vx -e npm -e nodejs | tr '\n' ' '); fi
if [ -n "${missing// /}" ]; then
  echo "install_deps: installing$missing"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
echo "install_deps: ok"
