#!/usr/bin/env bash
# `make vboard`: the whole loop on a virtual board. Boots Debian's own 6.1
# kernel under QEMU (TCG, -icount: guest time counts instructions, so runs
# repeat) with an SD card on sdhci-pci, a busybox initramfs, spintune.ko,
# its self-test and the demo driver (driver/kernel/vboard/). In the guest,
# spintune-agent traces the card's mmc, irq and sched events, streams them
# to a tuner on this host's loopback (QEMU user networking, restricted: the
# guest reaches nothing but the tuner's port) and writes the pushed table
# into /sys/kernel/spintune/mmc0/table. Prints per key what the table
# predicts and what the demo driver measured with its default rule,
# always-IRQ, always-spin and the pushed table, then checks the results.
# Last, a short second agent run sends spintune.ko's outcome reports of the
# default-rule and table runs to the tuner, whose verifier judges the
# pushed version against the default rule.
#
#   tools/vboard.sh [BUILD]          run, report, check (exit 1 on a failed check)
#   tools/vboard.sh --check NAME [BUILD]   one check on the last run's log
#
# Exit 77 (skip) without qemu-system-x86_64 or the kernel headers.
# Set-up kept between runs in BUILD/vboard-cache (kernel image and modules
# of the headers' ABI, from the linux-image .deb: nothing is installed).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
check_only=""
if [ "${1:-}" = "--check" ]; then check_only=$2; shift 2; fi
BUILD=$(cd "${1:-build}" && pwd)
OUT=$BUILD/vboard
LOG=$OUT/guest.log
REQUESTS=${SPINTUNE_VBOARD_REQUESTS:-2000}   # per measured run, four kinds of command
SAMPLES=${SPINTUNE_VBOARD_SAMPLES:-3000}     # the agent stops after this many
MARGIN=${SPINTUNE_VBOARD_MARGIN:-0.05}       # table no worse than the better pure policy by more
# A verdict for every changed key from one run's outcome report: its
# REQUESTS / 4 requests per key reach the verifier's maximum (8x this).
VERIFY_REQUESTS=$(( REQUESTS / 32 > 0 ? REQUESTS / 32 : 1 ))

section() { sed -n "/^@@ begin $1\r\?$/,/^@@ end $1\r\?$/p" "$LOG" | sed '1d;$d' | tr -d '\r'; }

# Per kind of command: "opcode bytes cpu_ns lat_ns" of one measured run.
costs() { section "$1" | awk 'NR > 2 {print $1, $2, $4, $5}'; }

pushed_version() { section version | sed -n 's/^pushed=\([0-9]*\) .*/\1/p'; }

# spintune.ko's outcome report of a run by the table (default, table) as
# `spintune verify` reads it (ReadOutcomeReport), per key "opcode bytes
# requests cpu_ns lat_ns" (means); fails on a file it refuses.
outcomes() {
  local v
  v=$(pushed_version)
  section outcomes-default > "$OUT/outcomes-default.json"
  section outcomes-table > "$OUT/outcomes-table.json"
  "$BUILD/cli/spintune" --db "$OUT/spintune.db" verify vboard --version "${v:-0}" \
    --report "table=$OUT/outcomes-table.json" --report "default=$OUT/outcomes-default.json" \
    --format json | jq -r --arg m "$1" '.keys[] | [.opcode, .bytes, .measured[$m].requests,
      .measured[$m].cpu_ns, .measured[$m].latency_ns] | @tsv'
}

check() {
  case $1 in
    selftest)
      grep -q "^# totals: pass:[1-9][0-9]* fail:0$" <<<"$(section selftest)" || {
        section selftest | grep -v "^ok "; return 1; }
      ;;
    version)
      local v; v=$(section version)
      grep -Eq "^pushed=([1-9][0-9]*) sysfs=\1 source=sysfs$" <<<"$v" || {
        echo "pushed version and sysfs differ: $v"; return 1; }
      ;;
    cost)
      # The card's interrupt line, which the demo driver masks while it
      # polls, is its own.
      grep -q ' mmc0$' <<<"$(section board)" || { echo "mmc0 shares its interrupt line:"; section board; return 1; }
      # Every request of every run completed without an error, and every
      # block read back held what was written to it (reads verified).
      for run in default irq spin table; do
        section $run | awk -v r=$run 'NR > 2 && ($13 != 0 || $15 != 0) {
          print r ": opcode " $1 ": " $13 " failed requests, " $15 " blocks lost"; bad = 1 }
          NR > 2 { v += $14 } END { if (v == 0) { print r ": no block read back was verified"; bad = 1 }
          exit bad }' || return 1
      done
      # J = CPU + latency (objective balanced) per request, per kind.
      paste <(costs table) <(costs irq) <(costs spin) | awk -v m="$MARGIN" '
        { t = $3 + $4; i = $7 + $8; s = $11 + $12; best = i < s ? i : s
          printf "opcode %s %s bytes: table J %.1f us, irq %.1f us, spin %.1f us -> %+.1f%% vs the better\n",
                 $1, $2, t / 1000, i / 1000, s / 1000, 100 * (t - best) / best
          if (t > best * (1 + m)) bad++ ; n++ }
        END { exit (n == 0 || bad > 0) }'
      ;;
    outcomes)
      # Both reports parse, name their version, and per key hold exactly the
      # requests the demo driver counted, with its mean CPU and latency.
      local v; v=$(pushed_version)
      for run in default table; do
        local want=0 o
        [ $run = table ] && want=$v
        o=$(outcomes $run) || return 1
        jq -e --argjson v "$want" '.device == "mmc0" and .mode == "table" and .policy_version == $v' \
          "$OUT/outcomes-$run.json" >/dev/null || {
          echo "$run: outcome report not of mmc0 version $want:"; cat "$OUT/outcomes-$run.json"; return 1; }
        join -j1 <(echo "$o" | awk '{print $1 "_" $2, $3, $4, $5}' | sort) \
          <(section $run | awk 'NR > 2 {print $1 "_" $2, $3, $4, $5}' | sort) | awk -v r=$run '
          { n++; d1 = $3 - $6; d2 = $4 - $7
            printf "%s: opcode/bytes %s: %d requests reported, %d issued; cpu %.1f vs %d ns, latency %.1f vs %d ns\n",
                   r, $1, $2, $5, $3, $6, $4, $7
            if ($2 != $5 || d1 < 0 || d1 >= 1 || d2 < 0 || d2 >= 1) bad++ }
          END { if (n != 4) print r ": " n " keys in both, not 4"; exit (n != 4 || bad > 0) }' || return 1
      done
      ;;
    verified)
      # The tuner's verifier judged the pushed version from those reports.
      local v; v=$(pushed_version)
      grep -q "^agent exit 0" <<<"$(section agent-outcomes)" || { section agent-outcomes; return 1; }
      "$BUILD/cli/spintune" --db "$OUT/spintune.db" policy vboard --format json |
        jq -e --argjson v "${v:-0}" '[.verifications[] | select(.version == $v)] | length > 0' \
          >/dev/null || { echo "no verification of version ${v:-none} stored"; return 1; }
      "$BUILD/cli/spintune" --db "$OUT/spintune.db" policy vboard |
        sed -n '/^Verified against/,$p'
      ;;
    corrupt)
      local c; c=$(section corrupt)
      # Here-strings, not `echo | grep -q`: grep -q exits at its first match,
      # and under pipefail the writer's SIGPIPE failed the check now and then.
      grep -q "^write_failed=1 " <<<"$c" && grep -q "table_unchanged=yes" <<<"$c" &&
        grep -Eq "version_before=([1-9][0-9]*) version_after=\1 " <<<"$c" &&
        grep -q "CRC-32 mismatch" <<<"$c" || { echo "$c"; return 1; }
      ;;
    tracepoints)
      # Each of the 40 waits by the pushed table, with its key, its version
      # and the completion time the demo driver filled; the blob written
      # again put in force, the corrupted one refused with its errno.
      local v c; v=$(pushed_version); c=$(section tracepoints)
      awk -v v="$v" '/^spintune_wait: / {
          for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
          n++; ops[f["opcode"]]++
          if (f["device"] != "mmc0" || f["version"] != v || f["wait_ns"] <= 0 ||
              f["latency_ns"] <= 0 || f["cpu_ns"] <= 0 || f["arm"] != "table") { print "bad: " $0; bad++ } }
        END { if (n != 40 || length(ops) != 4) { print n " waits, " length(ops) " opcodes"; bad++ }
              exit bad > 0 }' <<<"$c" || return 1
      grep -Eq "^spintune_table_install: device=mmc0 origin=sysfs version=$v entries=[1-9][0-9]* nodes=[0-9]+ bytes=[0-9]+ rc=0$" <<<"$c" &&
        grep -q "^spintune_table_install: device=mmc0 origin=sysfs version=$v entries=0 nodes=0 bytes=[0-9]* rc=-74$" <<<"$c" ||
        { echo "$c" | grep table_install; return 1; }
      ;;
    writers)
      # Two open files, pages interleaved: each blob put in force whole,
      # in the order they completed; the one read back is the last.
      local c; c=$(section writers)
      grep -Eq "^writes=0000 after_first_pages=42 after_a=100 after_b=101 readback=b bytes=([0-9]+) source=dev$" <<<"$c" &&
        [ "$(echo "$c" | sed -n 's/.* bytes=\([0-9]*\).*/\1/p')" -gt 4096 ] || { echo "$c"; return 1; }
      ;;
    short)
      local c; c=$(section short)
      grep -q "^version_before=101 version_after=101$" <<<"$c" &&
        grep -Eq "^last_error=dev: cut short: 4096 of [0-9]+ bytes written \(-90\)$" <<<"$c" &&
        grep -q "^sysfs_write_failed=1 version=101$" <<<"$c" &&
        grep -q "^sysfs_last_error=sysfs: longer than one write to sysfs takes.*(-27)$" <<<"$c" ||
        { echo "$c"; return 1; }
      ;;
    atomic)
      local c; c=$(section atomic)
      grep -q "^write_failed=1 version_before=5 version_after=5$" <<<"$c" &&
        grep -q "^last_error=dev: .*atomic context (-22)$" <<<"$c" &&
        grep -Eq "^downgrade_warnings=[1-9]" <<<"$c" || { echo "$c"; return 1; }
      ;;
    firmware)
      local c; c=$(section firmware)
      grep -Eq "^pci=(.+) firmware=spintune/\1\.bin version=0 source=rule$" <<<"$c" &&
        grep -q "^last_error=firmware: larger than any valid table (-27)$" <<<"$c" ||
        { echo "$c"; return 1; }
      ;;
    unload)
      local c want
      c=$(section unload)
      for want in rmmod_spintune_in_use=1 rmmod_vboard_during_run=1 run=0 rmmod_vboard=0 sysfs_left=0 \
          write_after_unregister_failed=1 rmmod_selftest=0 rmmod_spintune_file_open=1 \
          rmmod_spintune=0 kernel_warnings=0; do
        grep -qx "$want" <<<"$c" || { echo "want $want:"; echo "$c"; return 1; }
      done
      ;;
    *) echo "unknown check $1"; return 2 ;;
  esac
}

if [ -n "$check_only" ]; then
  [ -s "$LOG" ] || { echo "skip: no guest log (tools/vboard.sh did not run)"; exit 77; }
  check "$check_only"
  exit
fi

command -v qemu-system-x86_64 >/dev/null || { echo "skip: qemu-system-x86_64 is missing"; exit 77; }
KV=$("$here/driver/kernel/build.sh" --kv)
[ -n "$KV" ] && [ -d "/usr/src/linux-headers-$KV" ] || {
  echo "skip: no Debian kernel headers (linux-headers-amd64)"; exit 77; }
start=$(date +%s.%N)
rm -rf "$OUT"
mkdir -p "$OUT"

# 1. The guest kernel: vmlinuz and the modules the board needs, from the .deb.
CACHE=$BUILD/vboard-cache/$KV
if [ ! -s "$CACHE/vmlinuz" ]; then
  rm -rf "$CACHE"
  mkdir -p "$CACHE/deb"
  (cd "$CACHE/deb" && apt-get download -q "linux-image-$KV" >/dev/null 2>&1) || {
    echo "cannot download linux-image-$KV"; exit 1; }
  dpkg-deb --fsys-tarfile "$CACHE"/deb/*.deb | tar -x -C "$CACHE" --wildcards \
    './boot/vmlinuz-*' "./lib/modules/$KV/modules.*" "./lib/modules/$KV/kernel/drivers/mmc/*" \
    "./lib/modules/$KV/kernel/drivers/net/ethernet/intel/e1000/*"
  mv "$CACHE/boot/vmlinuz-$KV" "$CACHE/vmlinuz"
  rm -rf "$CACHE/deb" "$CACHE/boot"
fi

# 2. spintune.ko, the self-test and the demo driver against the headers.
KMOD=$(SPINTUNE_CLI="$BUILD/cli/spintune" "$here/driver/kernel/build.sh" "$OUT/kmod" "$KV")

# 3. The initramfs: busybox, the modules, the agent and its libraries.
ROOT=$OUT/root
mkdir -p "$ROOT"/{bin,dev,proc,sys,tmp,modules,lib/firmware/spintune}
cp /bin/busybox "$ROOT/bin/busybox"
cp -a "$CACHE/lib" "$ROOT/"
depmod -b "$ROOT" "$KV"
cp "$KMOD/spintune.ko" "$KMOD/selftest/spintune_selftest.ko" "$KMOD/vboard/spintune_vboard.ko" \
  "$ROOT/modules/"
# The self-test's firmware file, named after its platform device (the
# stable name: a bus id, not a number handed out in probe order).
fixture=$here/driver/kernel/selftest/fixture-policy.json
"$BUILD/cli/spintune" blob --json "$fixture" \
  --device stfw0 -o "$ROOT/lib/firmware/spintune/spintune_selftest.bin" >/dev/null
# The blobs of the guest's refusal tests (driver/kernel/vboard/guest-init.sh,
# "Refused or reported as designed"): two multi-page tables for stfw0
# (250 keys, about 6 KiB, versions 100 and 101) and the fixture for the
# self-test's atomic device, whose opcode 25 sleeps.
mkdir -p "$ROOT/st"
for v in 100 101; do
  jq --argjson v $v '.version = $v | .entries = ([range(100; 350) | {device: "stfw0",
      cpu_class: "cpu", opcode: ., size_class: 0, fallback: false, strategy: "irq",
      spin_ns: 0, sleep_ns: 0, poll_interval_ns: 0}] + [.entries[] | select(.fallback)])' \
    "$fixture" > "$OUT/big-$v.json"
  "$BUILD/cli/spintune" blob --json "$OUT/big-$v.json" --device stfw0 \
    -o "$ROOT/st/big-$v.bin" >/dev/null
done
jq '.devices[0].name = "statomic0" | .entries[].device = "statomic0"' "$fixture" > "$OUT/atomic.json"
"$BUILD/cli/spintune" blob --json "$OUT/atomic.json" --device statomic0 \
  -o "$ROOT/st/statomic0.bin" >/dev/null
cp "$BUILD/agent/spintune-agent" "$ROOT/bin/"
ldd "$BUILD/agent/spintune-agent" | awk '/=> \// {print $3} /^\t\/lib/ {print $1}' |
  while read -r lib; do
    mkdir -p "$ROOT$(dirname "$lib")"
    cp -L "$lib" "$ROOT$lib"
  done
cp "$here/driver/kernel/vboard/guest-init.sh" "$ROOT/init"
chmod +x "$ROOT/init"
(cd "$ROOT" && find . | cpio -o -H newc --quiet | gzip -1 > "$OUT/initrd.gz")
truncate -s 64M "$OUT/sd.img"   # QEMU wants a power of two

# 4. The tuner, on loopback; the guest reaches it as 10.0.2.100:50051 only.
# A chardev guestfwd (tcp:HOST:PORT) connects once, when QEMU starts, and
# serves one guest connection; cmd: spawns its command for each, so both
# agent runs reach the tuner (busybox nc: the host has busybox-static).
. "$here/tools/lib.sh"
start_tuner "$BUILD" "$OUT" --verify-requests "$VERIFY_REQUESTS"
trap 'kill "$tuner_pid" 2>/dev/null || true' EXIT
port=${addr##*:}
setup=$(date +%s.%N)

# 5. Boot; the guest powers off when done (panic=-1: a panic ends QEMU too).
timeout 300 qemu-system-x86_64 -accel tcg -m 768 -smp 1 -nodefaults -display none \
  -serial stdio -no-reboot -icount shift=4,sleep=off,align=off \
  -kernel "$CACHE/vmlinuz" -initrd "$OUT/initrd.gz" \
  -append "console=ttyS0 panic=-1 quiet preempt=full spintune.tuner=10.0.2.100:50051 spintune.requests=$REQUESTS spintune.samples=$SAMPLES" \
  -device sdhci-pci -drive if=none,id=sd0,file="$OUT/sd.img",format=raw -device sd-card,drive=sd0 \
  -netdev "user,id=n0,restrict=on,guestfwd=tcp:10.0.2.100:50051-cmd:/bin/busybox nc 127.0.0.1 $port" \
  -device e1000,netdev=n0 > "$LOG" 2>&1 || true
end=$(date +%s.%N)
kill -INT "$tuner_pid" 2>/dev/null || true
wait "$tuner_pid" 2>/dev/null || true
trap - EXIT
grep -q "^@@ done" "$LOG" || { echo "the guest did not finish:"; tail -40 "$LOG"; exit 1; }

# 6. The report: the pushed table (the verifier's rollback, if any, is later;
# version 0: the latest).
pushed=$(pushed_version)
"$BUILD/cli/spintune" --db "$OUT/spintune.db" policy vboard --version "${pushed:-0}" \
  --format json > "$OUT/policy.json"
echo "virtual board: Debian $KV under QEMU TCG (-icount shift=4: 16 ns per guest instruction),"
echo "SD card on sdhci-pci, demo driver spintune_vboard, $REQUESTS requests per measured run"
echo
section board | head -1
echo "self-test of the loader: $(section selftest | sed -n 's/^# totals: //p')"
echo "platform costs measured in the guest: $(section platform)"
echo "loop: $(section agent | grep -o 'done samples=.*' | tail -1)"
echo "table version pushed and in sysfs: $(section version)"
echo
jq -r '.entries[] | select(.device == "mmc0" and .fallback == false) |
  [.opcode, .size_class, .strategy, .spin_ns, .sleep_ns, .poll_interval_ns,
   .expected_cpu_ns, .expected_latency_ns, .samples] | @tsv' "$OUT/policy.json" > "$OUT/predicted.tsv"
printf "%-6s %-6s %-30s %-17s %-17s %-17s %-17s %-17s %s\n" OPCODE BYTES "TABLE (pushed)" \
  "PREDICTED" "DEFAULT RULE" "ALWAYS IRQ" "ALWAYS SPIN" "WITH TABLE" "(cpu/latency per request, us)"
paste <(costs default) <(costs irq) <(costs spin) <(costs table) | while read -r op bytes dc dl _ _ ic il _ _ sc sl _ _ tc tl; do
  sc_bits=$(awk -v b="$bytes" 'BEGIN { n = 0; while (b > 0) { n++; b = int(b / 2) } print n }')
  pred=$(awk -v o="$op" -v s="$sc_bits" -F'\t' '$1 == o && $2 == s {
      p = $3
      if ($5 > 0) p = p sprintf(" S=%.1f", $5 / 1000)
      if ($4 > 0) p = p sprintf(" T=%.1f", $4 / 1000)
      if ($6 > 0) p = p sprintf(" I=%.1f", $6 / 1000)
      printf "%s|%.1f/%.1f", p, $7 / 1000, $8 / 1000 }' "$OUT/predicted.tsv")
  printf "%-6s %-6s %-30s %-17s %-17s %-17s %-17s %-17s\n" "$op" "$bytes" "${pred%%|*}" "${pred#*|}" \
    "$(awk -v c="$dc" -v l="$dl" 'BEGIN { printf "%.1f/%.1f", c / 1000, l / 1000 }')" \
    "$(awk -v c="$ic" -v l="$il" 'BEGIN { printf "%.1f/%.1f", c / 1000, l / 1000 }')" \
    "$(awk -v c="$sc" -v l="$sl" 'BEGIN { printf "%.1f/%.1f", c / 1000, l / 1000 }')" \
    "$(awk -v c="$tc" -v l="$tl" 'BEGIN { printf "%.1f/%.1f", c / 1000, l / 1000 }')"
done
echo
echo "corrupted blob written to /sys/kernel/spintune/mmc0/table:"
section corrupt | sed 's/^/  /'
echo
for c in writers short atomic firmware unload; do
  echo "refused or reported as designed: $c"
  section $c | sed 's/^/  /'
done
echo
awk -v a="$start" -v b="$setup" -v c="$end" 'BEGIN {
  printf "set-up %.1f s, guest run %.1f s, whole run %.1f s\n", b - a, c - b, c - a }'
echo
failed=0
for c in selftest version cost corrupt outcomes verified tracepoints writers short atomic firmware unload; do
  if out=$(check $c 2>&1); then echo "check $c: ok"; else echo "check $c: FAILED"; failed=1; fi
  case $c in cost|verified) echo "$out" | sed 's/^/  /' ;; esac
done
exit $failed
