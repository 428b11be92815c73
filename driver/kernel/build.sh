#!/usr/bin/env bash
# Builds spintune.ko, its self-test and (for amd64) the virtual board's demo
# driver out of tree, warnings as errors, in a copy under OUT (Kbuild of 6.1
# writes beside the sources); with --patches also every seed-driver patch
# (patches/*.patch, applied to Debian's linux-source-6.1) as a module.
#
#   driver/kernel/build.sh [OPTIONS] OUT [KV]   prints the directory of the .ko files
#   driver/kernel/build.sh --kv                 prints the amd64 ABI name only
#
#   --target T      amd64 (default: Debian's installed headers of ABI KV),
#                   armmp (armhf), arm64 (Debian's headers of that flavour),
#                   mxs (armel, the i.MX28's mxs_defconfig tree), see ktree.sh
#   --trees DIR     where ktree.sh keeps the trees (needed for --patches and
#                   any target but amd64; made on first use)
#   --patches       also build the patched drivers
#   --spintune-off  only the patched drivers, with CONFIG_SPINTUNE off: they
#                   must build and reference no spintune symbol
#
# Every module's symbols must resolve against the target's exports
# (Module.symvers; for mxs, ktree.sh says which): modpost's undefined
# symbols fail the build. Compiler helpers the kernel does not have (__sync_*, __atomic_*,
# 64-bit division) are named apart.
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
target=amd64 trees="" patches=0 off=0
while [ $# -gt 0 ]; do
  case $1 in
    --target) target=$2; shift 2 ;;
    --trees) trees=$2; shift 2 ;;
    --patches) patches=1; shift ;;
    --spintune-off) patches=1; off=1; shift ;;
    -*) echo "build.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
out=${1:?usage: build.sh [--target T] [--trees DIR] [--patches|--spintune-off] OUT [KV]}
kv=${2:-}
if [ "$target" != amd64 ] || [ $patches = 1 ]; then
  [ -n "$trees" ] || { echo "build.sh: --target $target and --patches need --trees DIR" >&2; exit 2; }
fi

make_args=()
case $target in
  amd64)
    kv=${kv:-$(debian_kv)}
    kdir=/usr/src/linux-headers-$kv
    if [ -z "$kv" ] || [ ! -d "$kdir" ]; then
      echo "build.sh: no kernel headers for '$kv' (install linux-headers-amd64)" >&2
      exit 77
    fi
    cross="" ;;
  armmp) kdir=$("$here/ktree.sh" headers armmp "$trees"); cross=arm-linux-gnueabihf-
    make_args=(ARCH=arm) ;;
  arm64) kdir=$("$here/ktree.sh" headers arm64 "$trees"); cross=aarch64-linux-gnu-
    make_args=(ARCH=arm64) ;;
  mxs)
    "$here/ktree.sh" source "$trees"
    kdir=$("$here/ktree.sh" mxs "$trees")
    cross=$(cat "$kdir/cross")
    make_args=(ARCH=arm "KBUILD_EXTRA_SYMBOLS=$kdir/spintune-exports.symvers") ;;
  *) echo "build.sh: unknown target $target (amd64, armmp, arm64, mxs)" >&2; exit 2 ;;
esac
[ -z "$cross" ] || make_args+=(CROSS_COMPILE="$cross")
[ $patches = 0 ] || "$here/ktree.sh" source "$trees"

mkdir -p "$out"
out=$(cd "$out" && pwd)
# Refresh the copy, keeping objects of unchanged sources.
(cd "$here" && find . -path ./patches -prune -o \( -name '*.c' -o -name '*.h' -o -name Kbuild \) -print) |
  while read -r f; do
    mkdir -p "$out/$(dirname "$f")"
    cmp -s "$here/$f" "$out/$f" || cp "$here/$f" "$out/$f"
  done
if [ $off = 0 ]; then
  cli=${SPINTUNE_CLI:-$here/../../build/cli/spintune}
  "$cli" header --json "$here/selftest/fixture-policy.json" -o "$out/selftest/new_table.h" >/dev/null
  cmp -s "$out/selftest/new_table.h" "$out/selftest/spintune_selftest_table.h" \
    || mv "$out/selftest/new_table.h" "$out/selftest/spintune_selftest_table.h"
  rm -f "$out/selftest/new_table.h"
fi

# The patched drivers: every patch applied to a copy of the files it
# touches, each patched .c a module of its own in patched/.
modules="spintune.o selftest/"
if [ $patches = 1 ]; then
  rm -rf "$out/tree" "$out/patched"
  mkdir -p "$out/patched"
  objs=""
  for p in "$here"/patches/*.patch; do
    for f in $(sed -n 's|^+++ b/||p' "$p"); do
      [ -f "$out/tree/$f" ] && continue
      mkdir -p "$out/tree/$(dirname "$f")"
      cp "$trees/linux/$f" "$out/tree/$f"
    done
    patch -s -p1 -d "$out/tree" < "$p" || { echo "build.sh: $(basename "$p") does not apply"; exit 1; }
    for f in $(sed -n 's|^+++ b/\(.*\.c\)$|\1|p' "$p"); do
      cp "$out/tree/$f" "$out/patched/"
      objs="$objs $(basename "${f%.c}").o"
    done
  done
  echo "obj-m := $objs" >"$out/patched/Kbuild"
  modules="$modules patched/"
  [ $off = 0 ] || modules="patched/"
fi
spintune_flag=-DCONFIG_SPINTUNE_MODULE=1
[ $off = 0 ] || spintune_flag=""
cat >"$out/Kbuild" <<EOF
# SPDX-License-Identifier: GPL-2.0
# Generated by build.sh: spintune.ko out of tree, as if CONFIG_SPINTUNE=m.
subdir-ccflags-y := -Werror -I$(cd "$here/../include" && pwd) $spintune_flag
# spintune_trace.h is included from beside spintune.c (TRACE_INCLUDE_PATH .)
CFLAGS_spintune.o := -I\$(src)
obj-m := $modules
obj-\$(CONFIG_X86) += vboard/
EOF
[ $off = 0 ] || sed -i '/vboard/d' "$out/Kbuild"

log=$out/build.log
# KBUILD_MODPOST_WARN: modpost reports every undefined symbol (below, only
# the allowed ones may be) instead of stopping at the first module.
make -s -C "$kdir" M="$out" KBUILD_MODPOST_WARN=1 "${make_args[@]}" modules >"$log" 2>&1 || {
  grep -v "Skipping BTF generation" "$log" >&2; exit 1; }
grep -v "Skipping BTF generation\|undefined!$\|Module.symvers is missing\|Modules may not have\|many unresolved symbol" "$log" >&2 || true

if grep 'undefined!$' "$log" >&2; then
  echo "build.sh: unresolved symbols against the $target kernel's exports" >&2
  exit 1
fi
nm=${cross}nm
bad=$(find "$out" -name '*.ko' | sort | while read -r ko; do
  "$nm" -u "$ko" | awk -v ko="${ko#"$out"/}" \
    '$2 ~ /^(__sync_|__atomic_|__aeabi_u?ldivmod$|__u?divdi3$|__u?moddi3$)/ {print ko ": " $2}'
done)
[ -z "$bad" ] || { echo "build.sh: compiler helpers the kernel does not provide:"; echo "$bad"; exit 1; } >&2
if [ $off = 1 ]; then
  refs=$(for ko in "$out"/patched/*.ko; do "$nm" -u "$ko" | awk -v ko="${ko##*/}" '$2 ~ /^spintune_/ {print ko ": " $2}'; done)
  [ -z "$refs" ] || { echo "build.sh: with CONFIG_SPINTUNE off these still use spintune.ko:"; echo "$refs"; exit 1; } >&2
fi
echo "$out"
