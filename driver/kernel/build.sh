#!/usr/bin/env bash
# Builds spintune.ko, its self-test module and the virtual board's demo
# driver out of tree against Debian's 6.1 kernel headers, warnings as
# errors, in a copy under OUT (Kbuild of 6.1 writes beside the sources).
#
#   driver/kernel/build.sh OUT [KV]     # prints the directory of the .ko files
#   driver/kernel/build.sh --kv         # prints the ABI name only
#
# KV (e.g. 6.1.0-57-amd64) defaults to the ABI of the installed
# linux-headers-amd64, else the one apt would install. SPINTUNE_CLI (the
# spintune binary, default build/cli/spintune) generates the self-test's
# compiled-in table from selftest/fixture-policy.json.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

debian_kv() {
  local dep
  dep=$(dpkg-query -W -f='${Depends}' linux-headers-amd64 2>/dev/null || true)
  [ -n "$dep" ] || dep=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends:/ {print $2; exit}')
  dep=${dep%% *}
  dep=${dep#linux-headers-}
  echo "${dep#linux-image-}"
}

if [ "${1:-}" = "--kv" ]; then debian_kv; exit 0; fi
out=${1:?usage: build.sh OUT [KV]}
kv=${2:-$(debian_kv)}
headers=/usr/src/linux-headers-$kv
if [ -z "$kv" ] || [ ! -d "$headers" ]; then
  echo "build.sh: no kernel headers for '$kv' (install linux-headers-amd64)" >&2
  exit 77
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
# Refresh the copy, keeping objects of unchanged sources.
(cd "$here" && find . -name '*.c' -o -name '*.h' -o -name Kbuild) | while read -r f; do
  mkdir -p "$out/$(dirname "$f")"
  cmp -s "$here/$f" "$out/$f" || cp "$here/$f" "$out/$f"
done
cli=${SPINTUNE_CLI:-$here/../../build/cli/spintune}
"$cli" header --json "$here/selftest/fixture-policy.json" -o "$out/selftest/new_table.h" >/dev/null
cmp -s "$out/selftest/new_table.h" "$out/selftest/spintune_selftest_table.h" \
  || mv "$out/selftest/new_table.h" "$out/selftest/spintune_selftest_table.h"
rm -f "$out/selftest/new_table.h"
make -s -C "$headers" M="$out" SPINTUNE_INCLUDE="$(cd "$here/../include" && pwd)" modules \
  2> >(grep -v "Skipping BTF generation" >&2)
echo "$out"
