#!/usr/bin/env bash
# Applies one seed-driver patch to the file from Debian's linux-source-6.1
# and builds it, with spintune.ko, as out-of-tree modules against Debian's
# 6.1 amd64 headers with -Werror.
#
#   driver/kernel/patches/build.sh --fetch CACHE    download linux-source-6.1 once
#                                                   and extract the four files
#   driver/kernel/patches/build.sh NAME CACHE OUT   NAME: litex_mmc, mxs-mmc,
#                                                   spi-bcm2835 or spi-fsl-dspi
#
# x86 headers build all four: each compiles with -Werror. mxs-mmc calls two
# i.MX platform functions (mxs_ssp_set_clk_rate, stmp_reset_block) that an
# amd64 kernel does not have, so modpost may only warn about them there
# (KBUILD_MODPOST_WARN); every other symbol must resolve.
# Exit 77 (skip) without the headers.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
files="drivers/mmc/host/litex_mmc.c drivers/mmc/host/mxs-mmc.c drivers/spi/spi-bcm2835.c drivers/spi/spi-fsl-dspi.c"

if [ "${1:-}" = "--fetch" ]; then
  cache=${2:?usage: build.sh --fetch CACHE}
  [ -f "$cache/done" ] && exit 0
  rm -rf "$cache"
  mkdir -p "$cache"
  cd "$cache"
  apt-get download -q linux-source-6.1 >/dev/null 2>&1 || { echo "cannot download linux-source-6.1"; exit 1; }
  dpkg-deb --fsys-tarfile linux-source-6.1_*.deb | tar -x ./usr/src/linux-source-6.1.tar.xz
  # shellcheck disable=SC2086
  tar -xJf usr/src/linux-source-6.1.tar.xz --strip-components=1 $(for f in $files; do echo "linux-source-6.1/$f"; done)
  rm -rf usr linux-source-6.1_*.deb
  touch done
  exit 0
fi

name=${1:?usage: build.sh NAME CACHE OUT}
cache=${2:?usage: build.sh NAME CACHE OUT}
out=${3:?usage: build.sh NAME CACHE OUT}
kv=$("$here/../build.sh" --kv)
[ -n "$kv" ] && [ -d "/usr/src/linux-headers-$kv" ] || { echo "skip: no kernel headers"; exit 77; }
[ -f "$cache/done" ] || { echo "no kernel sources in $cache (build.sh --fetch)"; exit 1; }
src=$(for f in $files; do case $f in */"$name".c) echo "$f" ;; esac; done)
[ -n "$src" ] || { echo "unknown driver $name"; exit 2; }

rm -rf "$out"
mkdir -p "$out/tree/$(dirname "$src")"
cp "$cache/$src" "$out/tree/$src"
patch -s -d "$out/tree" -p1 < "$here/$name.patch"
cp "$out/tree/$src" "$here/../spintune.c" "$out/"
cat > "$out/Kbuild" <<EOF
ccflags-y := -Werror -I$(cd "$here/../../include" && pwd)
obj-m := spintune.o $name.o
EOF
warn=""
[ "$name" = mxs-mmc ] && warn="KBUILD_MODPOST_WARN=1"
# shellcheck disable=SC2086
make -s -C "/usr/src/linux-headers-$kv" M="$(cd "$out" && pwd)" $warn modules > "$out/build.log" 2>&1 || {
  cat "$out/build.log"; exit 1; }
grep -v "Skipping BTF generation" "$out/build.log" || true
[ -f "$out/$name.ko" ] || { echo "no $name.ko"; exit 1; }
if [ "$name" = mxs-mmc ]; then
  # Only the two i.MX platform symbols may be missing on amd64.
  if grep "undefined" "$out/build.log" | grep -v '"mxs_ssp_set_clk_rate"\|"stmp_reset_block"'; then
    exit 1
  fi
fi
echo "$name.ko built against linux-headers-$kv with -Werror"
