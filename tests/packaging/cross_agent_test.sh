#!/usr/bin/env bash
# The agent cross-built by `make cross` (tools/cross_build.sh), run under
# qemu-user on this machine:
#
#   cross_agent_test.sh ARCH BUILD unit TEST   one of its cross-built test binaries
#   cross_agent_test.sh ARCH BUILD sim         a session of the emulated agent
#       (a simulated board whose SoC the port serves) with the native tuner of
#       BUILD on loopback
#   cross_agent_test.sh ARCH BUILD replay      the same with a replayed trace
#       (tests/fixtures/trace/virtio-6.18-trace.txt)
#   cross_agent_test.sh ARCH BUILD deb         the agent's .deb for ARCH installs into
#       a scratch root (dpkg --root) and the installed agent runs with its config
#
# A session passes when the agent exits 0 having applied the tuner's latest
# table and the blob its file: sink wrote is, byte for byte, the one the
# native `spintune blob` writes for that table. Exit 77 (skip) when
# BUILD/cross/ARCH was not built.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
arch=${1:?usage: cross_agent_test.sh ARCH BUILD unit TEST|sim|replay|deb}
BUILD=$(cd "${2:?}" && pwd)
mode=${3:?}
CROSS=$BUILD/cross/$arch
RUN=$CROSS/run-on-target
[ -x "$RUN" ] || { echo "skip: no $arch cross build in $CROSS (make cross)"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

if [ "$mode" = "deb" ]; then
  # The agent's .deb for ARCH into a scratch root; the installed agent runs.
  deb=$(ls "$CROSS"/packages/spintune-agent_*_"$arch".deb 2>/dev/null | head -1)
  [ -n "$deb" ] || fail "no spintune-agent .deb for $arch in $CROSS/packages"
  root=$BUILD/packaging-test/cross-$arch-deb
  rm -rf "$root"
  mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
  touch "$root/var/lib/dpkg/status"
  dpkg --root="$root" --force-architecture --force-depends -i "$deb" >"$root.log" 2>&1 ||
    { cat "$root.log"; fail "dpkg --root -i $deb"; }
  depends=$(dpkg-deb -f "$deb" Depends)
  for pkg in libc6 libgrpc++1.51 libprotobuf32 libspdlog1.10; do
    [[ ", $depends," == *", $pkg,"* ]] || fail "Depends lacks $pkg: $depends"
  done
  for f in usr/bin/spintune-agent usr/bin/spintune-ioload usr/share/man/man1/spintune-agent.1.gz \
           usr/lib/systemd/system/spintune-agent.service etc/spintune/agent.toml; do
    [ -e "$root/$f" ] || fail "$(basename "$deb") has no /$f"
  done
  "$RUN" "$root/usr/bin/spintune-agent" --config "$root/etc/spintune/agent.toml" --list-boards \
    >/dev/null || fail "the installed $arch agent refuses its /etc/spintune/agent.toml"
  version=$("$RUN" "$root/usr/bin/spintune-agent" --version)
  [ "$version" = "$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$BUILD/CMakeCache.txt")" ] ||
    fail "the installed $arch agent's --version printed '$version'"
  echo "$(basename "$deb"): installed; --version $version"
  echo "Depends: $depends"
  exit 0
fi

if [ "$mode" = "unit" ]; then
  name=${4:?}
  bin=$(find "$CROSS" -name "$name" -type f -perm -u+x | head -1)
  [ -n "$bin" ] || fail "$name was not built in $CROSS"
  machine=$(readelf -h "$bin" | sed -n 's/^ *Machine: *//p')
  [[ $machine == ARM || $machine == AArch64 ]] || fail "$bin is not an ARM binary: $machine"
  exec "$RUN" "$bin"
fi

# The board the session simulates: one whose SoC this port serves.
case $arch in
  arm64) board=bcm2835-spi-20mhz ;;   # spi-bcm2835 on a 64-bit Raspberry Pi 3/4
  armhf) board=ls1021a-dspi-12mhz ;;  # NXP LS1021A, Cortex-A7
  armel) board=imx28-mxs-mmc ;;       # NXP i.MX28, ARM926EJ-S
  *) fail "unknown architecture $arch" ;;
esac
OUT=$BUILD/packaging-test/cross-$arch-$mode
rm -rf "$OUT"
mkdir -p "$OUT/tables"
case $mode in
  sim)
    tuner_flags=()
    source=(--source "sim:$board" --seed 1 --max-samples 20000)
    ;;
  replay)
    cat >"$OUT/platform.json" <<'EOF'
{"irq_cpu_ns": 8000, "irq_wake_ns": 40000, "poll_read_ns": 200,
 "timer_cpu_ns": 20000, "timer_wake_ns": 30000, "board": "this-vm"}
EOF
    # Keys get an entry from 5 samples: the fixture has 83 requests.
    tuner_flags=(--min-samples 5)
    source=(--source "replay:$here/tests/fixtures/trace/virtio-6.18-trace.txt"
            --platform "$OUT/platform.json" --block-dev 254:0=vda --batch-size 20)
    ;;
  *) fail "unknown mode $mode" ;;
esac
. "$here/tools/lib.sh"
start_tuner "$BUILD" "$OUT" "${tuner_flags[@]}"
trap 'kill $tuner_pid 2>/dev/null || true' EXIT
agent_id=cross-$arch-$mode

start=$(date +%s.%N)
"$RUN" "$CROSS/agent/spintune-agent" --tuner "$addr" --agent-id "$agent_id" "${source[@]}" \
  --sink "file:$OUT/tables/{device}.bin" --state-dir "" --give-up-after 60 \
  >"$OUT/agent.out" 2>"$OUT/agent.log" || { rc=$?; cat "$OUT/agent.log"; fail "the $arch agent exited $rc"; }
end=$(date +%s.%N)
summary=$(grep -h " done samples=" "$OUT/agent.log" | tail -1 || true)
echo "$arch agent under qemu: ${summary#* done }"
awk -v s="$start" -v e="$end" 'BEGIN { printf "session took %.1f s\n", e - s }'
applied=$(sed -n 's/.*applied_version=\([0-9]*\).*/\1/p' <<<"$summary")
[ -n "$applied" ] && [ "$applied" -ge 1 ] || fail "no table applied: $summary"

cli=$BUILD/cli/spintune
latest=$("$cli" --tuner "$addr" policy "$agent_id" --format json |
  sed -n 's/^  "version": *\([0-9]*\).*/\1/p')
[ "$applied" = "$latest" ] || fail "the agent applied version $applied, the tuner's latest is $latest"
n=0
for blob in "$OUT"/tables/*.bin; do
  [ -e "$blob" ] || fail "the file: sink wrote no table"
  device=$(basename "$blob" .bin)
  "$cli" --tuner "$addr" blob "$agent_id" --device "$device" -o "$OUT/expected-$device.bin" >/dev/null
  cmp "$blob" "$OUT/expected-$device.bin" ||
    fail "$device: the $arch agent's table differs from the tuner's version $latest"
  n=$((n + 1))
done
echo "$n table(s) of version $applied written by the $arch agent, identical to the tuner's"
