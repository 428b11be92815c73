#!/usr/bin/env bash
# Sizes and resident memory of spintune-agent, native and cross-built
# (`make cross`), for docs/benchmarks.md ("The cross-built agent"):
#
#   tools/cross_bench.sh [BUILD] [SAMPLES]
#
# Per build (native, then each BUILD/cross/ARCH present): the agent's file
# size as built (Release) and stripped; the shared libraries it loads (the
# NEEDED closure, from the sysroot for a cross build) and their total size;
# the peak resident set of the process running `spintune-agent --version`
# and of a session streaming SAMPLES simulated samples (default 200000) to a
# native tuner on loopback. Cross-built agents run under qemu-user: their
# figures are those of the qemu process, which holds the emulated program's
# memory plus qemu's own and its translated code; the --version row is that
# baseline.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-build}" && pwd)
SAMPLES=${2:-200000}
"$here/tools/install-deps.sh" time
OUT=$BUILD/cross-bench
rm -rf "$OUT"
mkdir -p "$OUT"
. "$here/tools/lib.sh"
start_tuner "$BUILD" "$OUT"
trap 'kill $tuner_pid 2>/dev/null || true' EXIT

# needed_closure LIBDIR... < ELF: the shared libraries it loads, one path a line.
needed_closure() {
  local -a dirs=("$@") queue seen=()
  mapfile -t queue < <(readelf -d "$elf" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  while [ ${#queue[@]} -gt 0 ]; do
    local lib=${queue[0]}
    queue=("${queue[@]:1}")
    [[ " ${seen[*]} " == *" $lib "* ]] && continue
    seen+=("$lib")
    for d in "${dirs[@]}"; do
      if [ -e "$d/$lib" ]; then
        local path; path=$(readlink -f "$d/$lib")
        echo "$path"
        mapfile -t -O ${#queue[@]} queue < <(readelf -d "$path" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
        break
      fi
    done
  done
}

mib() { awk -v b="$1" 'BEGIN { printf "%.2f", b / 1048576 }'; }
peak_kib() { /usr/bin/time -f %M -o "$OUT/time" "$@" >/dev/null 2>"$OUT/err" || {
  cat "$OUT/err"; exit 1; }; cat "$OUT/time"; }

echo "| build | agent (Release) | stripped | shared libraries loaded | --version peak RSS | session peak RSS ($SAMPLES samples) | session time |"
echo "|---|---|---|---|---|---|---|"
for build in native "$BUILD"/cross/*/; do
  if [ "$build" = native ]; then
    name="amd64 (native)"; elf=$BUILD/agent/spintune-agent; run=()
    strip=$(sed -n 's/^CMAKE_STRIP:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
    dirs=(/lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu)
  else
    [ -x "$build/run-on-target" ] && [ -f "$build/agent/spintune-agent" ] || continue
    arch=$(basename "$build")
    elf=$build/agent/spintune-agent; run=("$build/run-on-target")
    strip=$(sed -n 's/^CMAKE_STRIP:[A-Z]*=//p' "$build/CMakeCache.txt")  # TRIPLET-strip
    triplet=$(basename "${strip%-strip}")
    sysroot=$BUILD/cross/sysroot-$arch
    dirs=("$sysroot/lib/$triplet" "$sysroot/usr/lib/$triplet")
    name="$arch (qemu-user)"
  fi
  "$strip" -o "$OUT/stripped" "$elf"
  libs=$(needed_closure "${dirs[@]}")
  nlibs=$(wc -l <<<"$libs")
  libbytes=$(xargs stat -L -c %s <<<"$libs" | awk '{ s += $1 } END { print s }')
  version_kib=$(peak_kib "${run[@]}" "$elf" --version)
  start=$(date +%s.%N)
  session_kib=$(peak_kib "${run[@]}" "$elf" --tuner "$addr" --agent-id "bench-$name" \
    --source sim:microwatt-100mhz --seed 1 --max-samples "$SAMPLES" --sink none --state-dir "")
  end=$(date +%s.%N)
  printf '| %s | %s MiB | %s MiB | %s, %s MiB | %s MiB | %s MiB | %s s |\n' "$name" \
    "$(mib "$(stat -c %s "$elf")")" "$(mib "$(stat -c %s "$OUT/stripped")")" "$nlibs" "$(mib "$libbytes")" \
    "$(mib $((version_kib * 1024)))" "$(mib $((session_kib * 1024)))" \
    "$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.1f", e - s }')"
done
