#!/usr/bin/env bash
# Installs the Debian packages gdn.c builds and tests with. Idempotent; a no-op when all are present.
set -euo pipefail
PKGS="build-essential libyaml-dev libcjson-dev libopenblas-dev libutf8proc-dev libzstd-dev libsnappy-dev zlib1g-dev libomp-dev libxxhash-dev python3-torch python3-numpy nodejs npm libgloo-dev openmpi-bin"
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
  # Another apt/dpkg (unattended-upgrades, a second install) may hold the lock: wait for it, bounded.
  wait_s=${APT_LOCK_WAIT:-600}
  lock_holder() { # prints the process holding an apt/dpkg lock, if any (fuser when present, else lslocks)
    local l; for l in /var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock; do
      [ -e "$l" ] || continue
      if command -v fuser >/dev/null 2>&1; then fuser "$l" 2>/dev/null | tr -s ' ' && return 0
      elif command -v lslocks >/dev/null 2>&1; then lslocks -n -o PID,PATH 2>/dev/null | grep -F "$l" | awk '{print $1}' | head -1 | grep . && return 0
      fi
    done; return 1; }
  t0=$(date +%s)
  while pid=$(lock_holder); do
    waited=$(( $(date +%s) - t0 ))
    [ "$waited" -ge "$wait_s" ] && { echo "install_deps: the apt/dpkg lock is still held by process$pid after ${wait_s}s; try again later (APT_LOCK_WAIT=seconds)" >&2; exit 1; }
    [ $((waited % 30)) -lt 5 ] && echo "install_deps: waiting for the apt/dpkg lock held by process$pid (${waited}s of ${wait_s}s)"
    sleep 5
  done
  # apt itself also waits (same bound) should the lock be taken between the check and the call
  APT="$SUDO apt-get -o DPkg::Lock::Timeout=$wait_s"
  $APT update -qq
  DEBIAN_FRONTEND=noninteractive $APT install -y -qq --no-install-recommends $missing >/dev/null
fi
echo "install_deps: ok"
