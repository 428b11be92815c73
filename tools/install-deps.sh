#!/usr/bin/env bash
# Installs the Debian packages given as arguments when any of them is missing.
# Idempotent: does nothing (and needs no root) when everything is installed.
set -euo pipefail
missing=()
for pkg in "$@"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi
echo "install-deps: installing missing Debian packages: ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
apt_opts=(-o DPkg::Lock::Timeout=600 -y -q --no-install-recommends)
$SUDO apt-get -o DPkg::Lock::Timeout=600 -q update
$SUDO apt-get "${apt_opts[@]}" install "${missing[@]}"
