#!/usr/bin/env bash
# The kernel trees spintune.ko and the patched drivers build against, made
# usable from this amd64 host and cached under CACHE (the build directory's
# kernel-trees/). Nothing is installed: packages are downloaded with
# apt-get and unpacked into CACHE.
#
#   ktree.sh source CACHE            Debian's linux-source-6.1, only what the builds read:
#                                    the files the patches touch (all of drivers/mmc,
#                                    drivers/spi), scripts/ (checkpatch.pl), and what
#                                    `make mxs_defconfig modules_prepare` needs
#   ktree.sh headers FLAVOUR CACHE   Debian's linux-headers-ABI-FLAVOUR; prints its directory
#                                    FLAVOUR: amd64 (the installed one), armmp (armhf),
#                                    arm64
#   ktree.sh mxs CACHE               an armel tree of the i.MX28's own configuration:
#                                    mxs_defconfig + modules_prepare from `source`; prints it
#   ktree.sh abi FLAVOUR CACHE       the ABI of a fetched FLAVOUR, e.g. 6.1.0-57-armmp
#
# Foreign headers: Debian ships each flavour's scripts/ (fixdep, modpost) in
# linux-kbuild-6.1 of the target architecture. The host's linux-kbuild-6.1
# of the same version builds for any architecture (modpost reads ELF of any
# class and byte order), so the flavour's scripts and tools links point to
# it; a version the host does not have is downloaded (amd64) into CACHE.
# Only modpost knows the target's struct layouts (of the device tables it
# reads): for armhf it comes from the mxs tree (needs `source`).
# The ABI is the host's (build.sh --kv) where the flavour's architecture has
# it, else the newest the archive has for that architecture.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
die() { echo "ktree.sh: $*" >&2; exit 1; }

# apt_for ARCH CACHE: apt-get options using a private package index of ARCH
# under CACHE/apt-ARCH (updated once), the machine's sources and keys.
apt_for() {
  local arch=$1 dir=$2/apt-$1
  mkdir -p "$dir/state/lists/partial" "$dir/cache/archives/partial"
  touch "$dir/state/status"
  APT=(-q -o "Dir::State=$dir/state" -o "Dir::State::status=$dir/state/status"
       -o "Dir::Cache=$dir/cache" -o "APT::Architecture=$arch" -o "APT::Architectures::=$arch"
       -o Acquire::Languages=none)
  if [ ! -f "$dir/updated" ]; then
    apt-get "${APT[@]}" update >"$dir/update.log" 2>&1 || {
      cat "$dir/update.log" >&2; die "cannot read Debian's $arch package index"; }
    touch "$dir/updated"
  fi
}

# download DIR PKG...: apt-get download into DIR (quiet about the sandbox).
download() {
  local dir=$1
  shift
  (cd "$dir" && apt-get "${APT[@]}" download "$@" >download.log 2>&1) || {
    cat "$dir/download.log" >&2; die "cannot download $*"; }
}

arch_of() {
  case $1 in
    amd64) echo amd64 ;;
    armmp) echo armhf ;;
    arm64) echo arm64 ;;
    *) die "unknown flavour $1 (amd64, armmp, arm64)" ;;
  esac
}

cmd_source() {
  local cache=$1 dest=$1/linux
  [ -f "$dest/.done" ] && return 0
  rm -rf "$dest" "$cache/src-deb"
  mkdir -p "$dest" "$cache/src-deb"
  (cd "$cache/src-deb" && apt-get -q download linux-source-6.1 >download.log 2>&1) || {
    cat "$cache/src-deb/download.log" >&2; die "cannot download linux-source-6.1"; }
  # Besides the drivers: Kconfig and Makefiles of the whole tree (kconfig
  # reads them all), scripts/, include/, arch/arm/ and the few files the
  # prepare step compiles or reads (measured: about 140 MB of 1.5 GB).
  local want=(Makefile Kconfig Kbuild '*/Kconfig*' '*/Makefile*' '*/Kbuild*' 'scripts/*' 'include/*'
              'arch/arm/*' 'tools/include/*' $(for f in $MXS_EXPORTS; do echo "${f%%:*}"; done) kernel/bounds.c kernel/time/timeconst.bc
              arch/x86/entry/syscalls/syscall_32.tbl 'drivers/mmc/*' 'drivers/spi/*')
  local patched
  # Files the patches touch beyond those (tar refuses a name twice).
  patched=$(sed -n 's|^+++ b/||p' "$here"/patches/*.patch 2>/dev/null | sort -u |
            grep -v '^drivers/mmc/\|^drivers/spi/\|Kconfig\|Makefile\|Kbuild' || true)
  dpkg-deb --fsys-tarfile "$cache"/src-deb/linux-source-6.1_*.deb |
    tar -x -O ./usr/src/linux-source-6.1.tar.xz |
    tar -xJ -C "$dest" --strip-components=1 --wildcards \
      $(for w in "${want[@]}" $patched; do echo "linux-source-6.1/$w"; done)
  dpkg-deb -f "$cache"/src-deb/linux-source-6.1_*.deb Version >"$dest/.version"
  rm -rf "$cache/src-deb"
  touch "$dest/.done"
}

# The host's kbuild scripts of VERSION (the installed package, or one
# downloaded into CACHE/kbuild-VERSION).
kbuild_of() {
  local version=$1 cache=$2 dir
  if [ "$(dpkg-query -W -f='${Version}' linux-kbuild-6.1 2>/dev/null)" = "$version" ]; then
    echo /usr/lib/linux-kbuild-6.1
    return
  fi
  dir=$cache/kbuild-$version
  if [ ! -f "$dir/.done" ]; then
    rm -rf "$dir"
    mkdir -p "$dir/deb"
    (cd "$dir/deb" && apt-get -q download "linux-kbuild-6.1=$version" >download.log 2>&1) || {
      cat "$dir/deb/download.log" >&2; die "cannot download linux-kbuild-6.1 $version"; }
    dpkg-deb -x "$dir"/deb/*.deb "$dir/root"
    rm -rf "$dir/deb"
    touch "$dir/.done"
  fi
  echo "$dir/root/usr/lib/linux-kbuild-6.1"
}

cmd_headers() {
  local flavour=$1 cache=$2 arch abi version dest deb kbuild common
  arch=$(arch_of "$flavour")
  if [ "$flavour" = amd64 ]; then
    abi=$("$here/build.sh" --kv)
    [ -d "/usr/src/linux-headers-$abi" ] || die "no /usr/src/linux-headers-$abi (install linux-headers-amd64)"
    echo "/usr/src/linux-headers-$abi"
    return
  fi
  dest=$cache/$flavour
  if [ ! -f "$dest/.done" ]; then
    rm -rf "$dest"
    mkdir -p "$dest/deb"
    apt_for "$arch" "$cache"
    abi="$("$here/build.sh" --kv)"
    abi=${abi%-amd64}-$flavour
    if ! apt-cache "${APT[@]}" show "linux-headers-$abi" >/dev/null 2>&1; then
      abi=$(apt-cache "${APT[@]}" depends "linux-headers-$flavour" 2>/dev/null |
            awk '/Depends: linux-headers-/ {print $2; exit}')
      abi=${abi#linux-headers-}
      [ -n "$abi" ] || die "no linux-headers-$flavour in Debian's $arch index"
    fi
    download "$dest/deb" "linux-headers-$abi"
    deb=$(ls "$dest"/deb/linux-headers-*.deb)
    version=$(dpkg-deb -f "$deb" Version)
    dpkg-deb -x "$deb" "$dest/root"
    mv "$dest/root/usr/src/linux-headers-$abi" "$dest/tree"
    # Point the tree at the host's kbuild scripts and the common headers.
    kbuild=$(kbuild_of "$version" "$cache")
    ln -sfn "$kbuild/tools" "$dest/tree/tools"
    rm -f "$dest/tree/scripts"
    if [ "$arch" = arm64 ]; then
      ln -sfn "$kbuild/scripts" "$dest/tree/scripts"
    else
      # modpost has the target's struct layouts compiled in (the device
      # tables it reads): a 32-bit target needs one built for it, the
      # mxs tree's (ARM EABI, the same layouts as armhf).
      cp -as "$kbuild/scripts" "$dest/tree/scripts"
      ln -sf "$(cmd_mxs "$cache")/scripts/mod/modpost" "$dest/tree/scripts/mod/modpost"
    fi
    common=/usr/src/linux-headers-${abi%-"$flavour"}-common
    if [ "$(dpkg-query -W -f='${Version}' "linux-headers-${abi%-"$flavour"}-common" 2>/dev/null)" != "$version" ]; then
      download "$dest/deb" "linux-headers-${abi%-"$flavour"}-common=$version"
      dpkg-deb -x "$(ls "$dest"/deb/linux-headers-*-common_*.deb)" "$dest/common"
      common=$dest/common/usr/src/linux-headers-${abi%-"$flavour"}-common
      sed -i "s|^include .*/Makefile$|include $common/Makefile|" "$dest/tree/Makefile"
    fi
    rm -rf "$dest/deb" "$dest/root"
    echo "$abi" >"$dest/abi"
    touch "$dest/.done"
  fi
  echo "$dest/tree"
}

# The symbols an i.MX28 kernel exports, for the mxs tree's modpost (only
# modules_prepare ran: the tree has no vmlinux and no Module.symvers). The
# exports of Debian's ARMv5 kernel (marvell: armel, uniprocessor like the
# i.MX28; only its Module.symvers is unpacked), plus those of the 6.1
# sources mxs_defconfig builds and marvell does not: the i.MX28 platform
# code the mxs drivers call, pin control, and the lock debugging
# (PROVE_LOCKING) that turns inline locks into calls. Each file counts only
# when the tree's .config has its option.
MXS_EXPORTS="lib/stmp_device.c:STMP_DEVICE drivers/clk/mxs/clk-ssp.c:ARCH_MXS
  drivers/pinctrl/core.c:PINCTRL kernel/locking/spinlock.c:DEBUG_SPINLOCK
  kernel/locking/spinlock_debug.c:DEBUG_SPINLOCK kernel/locking/lockdep.c:LOCKDEP
  kernel/locking/mutex.c:DEBUG_LOCK_ALLOC kernel/rcu/update.c:PROVE_RCU
  kernel/trace/trace_preemptirq.c:TRACE_IRQFLAGS"
# Single exports of files not unpacked (their others are marvell's too),
# SYMBOL:OPTION: mm/memory.c exports __might_fault() (what copy_from_user()
# calls under lock debugging) with PROVE_LOCKING or DEBUG_ATOMIC_SLEEP.
MXS_SYMBOLS="__might_fault:PROVE_LOCKING"
mxs_symbols() {
  local cache=$1 out=$1/mxs/spintune-exports.symvers dir=$1/marvell-symvers abi f file opt
  if [ ! -f "$dir/Module.symvers" ]; then
    rm -rf "$dir"
    mkdir -p "$dir/deb"
    apt_for armel "$cache"
    abi=$(apt-cache "${APT[@]}" depends linux-headers-marvell 2>/dev/null |
          awk '/Depends: linux-headers-/ {print $2; exit}')
    [ -n "$abi" ] || die "no linux-headers-marvell in Debian's armel index"
    download "$dir/deb" "$abi"
    dpkg-deb --fsys-tarfile "$dir"/deb/*.deb |
      tar -x -O --wildcards './usr/src/*/Module.symvers' >"$dir/Module.symvers.new"
    echo "${abi#linux-headers-}" >"$dir/abi"
    mv "$dir/Module.symvers.new" "$dir/Module.symvers"
    rm -rf "$dir/deb"
  fi
  {
    cat "$dir/Module.symvers"
    for f in $MXS_EXPORTS; do
      file=${f%%:*} opt=${f#*:}
      grep -q "^CONFIG_$opt=y" "$cache/mxs/.config" || continue
      sed -n 's/^EXPORT_SYMBOL\(_GPL\)\?(\([A-Za-z_0-9]*\));/0x00000000\t\2\tvmlinux\tEXPORT_SYMBOL\1\t/p' \
        "$cache/linux/$file"
    done
    for f in $MXS_SYMBOLS; do
      grep -q "^CONFIG_${f#*:}=y" "$cache/mxs/.config" &&
        printf '0x00000000\t%s\tvmlinux\tEXPORT_SYMBOL\t\n' "${f%%:*}"
    done
  } | awk -F'\t' '!seen[$2]++' >"$out"
  echo "$MXS_EXPORTS $MXS_SYMBOLS" >"$out.lists"
}

cmd_mxs() {
  local cache=$1 src=$1/linux dest=$1/mxs cross
  [ -f "$src/.done" ] || die "no kernel sources in $cache (ktree.sh source $cache)"
  cross=$(command -v arm-linux-gnueabi-gcc >/dev/null && echo arm-linux-gnueabi- ||
          echo arm-linux-gnueabihf-)
  if [ ! -f "$dest/.done" ]; then
    rm -rf "$dest"
    mkdir -p "$dest"
    make -s -C "$src" O="$dest" ARCH=arm CROSS_COMPILE="$cross" mxs_defconfig >/dev/null
    make -s -C "$src" O="$dest" ARCH=arm CROSS_COMPILE="$cross" -j"$(nproc)" modules_prepare
    echo "$cross" >"$dest/cross"
    touch "$dest/.done"
  fi
  # Made again when the lists above change.
  [ -f "$dest/spintune-exports.symvers" ] &&
    [ "$(cat "$dest/spintune-exports.symvers.lists" 2>/dev/null)" = "$MXS_EXPORTS $MXS_SYMBOLS" ] ||
    mxs_symbols "$cache"
  echo "$dest"
}

# abs DIR: DIR made and absolute.
abs() { mkdir -p "$1" && (cd "$1" && pwd); }

cmd=${1:-}
case $cmd in
  source) cmd_source "$(abs "${2:?usage: ktree.sh source CACHE}")" ;;
  headers) cmd_headers "${2:?usage: ktree.sh headers FLAVOUR CACHE}" "$(abs "${3:?usage: ktree.sh headers FLAVOUR CACHE}")" ;;
  mxs) cmd_mxs "$(abs "${2:?usage: ktree.sh mxs CACHE}")" ;;
  abi)
    if [ "$2" = amd64 ]; then "$here/build.sh" --kv; else cat "${3:?}/$2/abi"; fi ;;
  *) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
esac
