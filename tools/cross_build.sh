#!/usr/bin/env bash
# `make cross`: spintune-agent and the tests that run on a board, cross-built
# for Debian's arm64, armhf and armel ports (docs/install.md, "The agent on
# the boards").
#
#   tools/cross_build.sh [--jobs N] BUILD ARCH...   set up, configure, build
#   tools/cross_build.sh --targets                  what gets built, one a line
#
# Per ARCH (a toolchain file cmake/toolchains/ARCH.cmake: arm64, armhf, armel):
#  - host packages: Debian's cross compiler (crossbuild-essential-ARCH),
#    qemu-user-static and mmdebstrap (tools/install-deps.sh: only if missing);
#  - BUILD/cross/sysroot-ARCH: Debian's ARCH packages of every library the
#    build finds (SYSROOT_PACKAGES), extracted by mmdebstrap. Nothing is
#    installed into the machine's dpkg database and no foreign architecture
#    is added; made again only when the package list or this recipe changes;
#  - BUILD/cross/ARCH: a Release build of TARGETS with the toolchain file
#    cmake/toolchains/ARCH.cmake (programs run under qemu-user);
#  - BUILD/cross/ARCH/packages/spintune-agent_VERSION_ARCH.deb.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

# The agent, its load generator and the tests that run on a board: the
# agent's sources, sinks, spool, BPF histogram reader and trace parser, and
# the driver headers in C (live_trace_test needs tracefs and stays on the
# host).
TARGETS="spintune-agent spintune-ioload man_spintune-agent man_spintune-ioload
  sim_source_test replay_source_test trace_line_test trace_correlator_test policy_sink_test
  batch_spool_test histogram_slot_test wait_test driver_c_test"
# Every library the top CMakeLists.txt finds, as Debian packages of ARCH.
SYSROOT_PACKAGES="libc6-dev libstdc++-12-dev libgrpc++-dev libprotobuf-dev libabsl-dev
  libssl-dev libsqlite3-dev libmicrohttpd-dev libspdlog-dev libgtest-dev libgmock-dev
  libeigen3-dev nlohmann-json3-dev libcli11-dev libbpf-dev libelf-dev zlib1g-dev libtracefs-dev
  libtraceevent-dev libpq-dev"
# Where they come from. The security suite is left out: this workplace's
# mirror serves a broken armhf index of it (docs/install.md).
MIRRORS=("deb http://deb.debian.org/debian bookworm main"
         "deb http://deb.debian.org/debian bookworm-updates main")

if [ "${1:-}" = "--targets" ]; then printf '%s\n' $TARGETS; exit 0; fi
jobs=2
if [ "${1:-}" = "--jobs" ]; then jobs=$2; shift 2; fi
BUILD=${1:?usage: cross_build.sh [--jobs N] BUILD ARCH...}
shift
[ $# -gt 0 ] || set -- arm64 armhf
mkdir -p "$BUILD/cross"
BUILD=$(cd "$BUILD" && pwd)

# make_sysroot ARCH DIR: Debian's ARCH packages of SYSROOT_PACKAGES, extracted.
make_sysroot() {
  local arch=$1 dir=$2 want tmp
  want=$(echo $SYSROOT_PACKAGES "${MIRRORS[@]}"; declare -f make_sysroot | md5sum)
  [ "$(cat "$dir/.spintune-packages" 2>/dev/null)" = "$want" ] && return 0
  echo "cross: extracting Debian's $arch packages into $dir"
  tmp=$dir.new
  rm -rf "$tmp"
  mmdebstrap --quiet --variant=extract --format=directory --architectures="$arch" \
    --include="$(echo $SYSROOT_PACKAGES | tr ' ' ,)" bookworm "$tmp" "${MIRRORS[@]}"
  # Only usr/ and the lib symlinks are needed. qemu -L looks a path up in the
  # sysroot first: nothing there may shadow the host's /tmp, /etc or /proc.
  find "$tmp" -mindepth 1 -maxdepth 1 ! -name usr ! -name 'lib*' ! -name bin ! -name sbin \
    -exec rm -rf {} +
  # Absolute symlinks (libm.so -> /lib/TRIPLET/libm.so.6) would point into
  # the host: make them relative, or the linker takes libm.a instead.
  find "$tmp" -type l -lname '/*' | while read -r link; do
    ln -sfr "$tmp$(readlink "$link")" "$link"
  done
  # gRPC's CMake package checks that its code generators exist beside it;
  # the host's (same version) are the ones that run.
  for plugin in /usr/bin/grpc_*_plugin; do ln -sf "$plugin" "$tmp/usr/bin/"; done
  echo "$want" >"$tmp/.spintune-packages"
  rm -rf "$dir"
  mv "$tmp" "$dir"
}

# deb_depends ELF...: the Debian packages holding the libraries they load.
# A library package has the same name on every architecture, so this
# machine's dpkg database names them from the native copies.
deb_depends() {
  local host soname pkg
  host=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
  for soname in $(readelf -d "$@" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u); do
    case $soname in ld-linux*) continue ;; esac   # libc6's, as libc.so.6
    pkg=$(dpkg-query -S "/lib/$host/$soname" "/usr/lib/$host/$soname" 2>/dev/null | head -1 || true)
    [ -n "$pkg" ] || { echo "cross_build.sh: no package holds $soname on this machine" >&2; exit 1; }
    echo "${pkg%%:*}"
  done | sort -u | paste -sd, | sed 's/,/, /g'
}

for arch in "$@"; do
  [ -f "$here/cmake/toolchains/$arch.cmake" ] ||
    { echo "cross_build.sh: no toolchain file for '$arch' in cmake/toolchains" >&2; exit 2; }
  "$here/tools/install-deps.sh" "crossbuild-essential-$arch" qemu-user-static mmdebstrap
  sysroot=$BUILD/cross/sysroot-$arch
  make_sysroot "$arch" "$sysroot"
  out=$BUILD/cross/$arch
  # Configured afresh when a toolchain file or the sysroot changed (their
  # flags and paths are cached), or when an earlier configure failed.
  if [ ! -f "$out/CMakeCache.txt" ] || [ ! -f "$out/build.ninja" ] ||
     [ -n "$(find "$here/cmake/toolchains" "$sysroot/.spintune-packages" -newer "$out/CMakeCache.txt")" ]; then
    mkdir -p "$out"
    cmake --fresh -S "$here" -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_TOOLCHAIN_FILE="$here/cmake/toolchains/$arch.cmake" -DSPINTUNE_SYSROOT="$sysroot" \
      -DSPINTUNE_BUILD_BENCH=OFF >"$out.configure.log" 2>&1 || { cat "$out.configure.log"; exit 1; }
  fi
  echo "cross: building for $arch: $(echo $TARGETS)"
  cmake --build "$out" -j "$jobs" --target $TARGETS
  depends=$(deb_depends "$out/agent/spintune-agent" "$out/agent/spintune-ioload")
  (cd "$out" && cpack -B "$out/packages" -D "CPACK_DEBIAN_AGENT_PACKAGE_DEPENDS=$depends") \
    >"$out.cpack.log" 2>&1 || { cat "$out.cpack.log"; exit 1; }
  echo "cross: $(ls "$out"/packages/*.deb)"
done
