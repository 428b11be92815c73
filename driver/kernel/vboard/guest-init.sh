#!/bin/busybox sh
# /init of the virtual board's initramfs (tools/vboard.sh builds it).
# Loads spintune.ko and runs its self-test, brings up the SD card (mmc_block)
# with the demo driver waiting for its commands, measures the default rule, always-IRQ and always-spin, runs
# spintune-agent against the tuner on the host while the demo driver
# works, measures again with the pushed table, writes a corrupted blob
# and checks that it is refused, then sends spintune.ko's outcome reports
# of the default-rule and the table runs to the tuner's verifier with a
# short second agent run. Between those, what must be refused or reported
# is tried: two writers at once, a multi-page blob cut short, a blob too
# long for sysfs, a table that would sleep on a device that waits in atomic
# context, an oversized firmware file, and last the demo driver unloaded
# while it waits. Every result goes to the console between "@@ begin NAME"
# and "@@ end NAME" lines; the host reads them.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t debugfs none /sys/kernel/debug
mount -t tracefs nodev /sys/kernel/tracing
mkdir -p /tmp /var/lib/spintune
export PATH=/bin:/sbin

arg() { sed -n "s/.*spintune\.$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
REQUESTS=$(arg requests)
SAMPLES=$(arg samples)
TUNER=$(arg tuner)
DEMO=/sys/kernel/debug/spintune_vboard
ST=/sys/kernel/spintune/mmc0
OUTCOMES=/sys/kernel/debug/spintune/mmc0/outcomes

section() { echo "@@ begin $1"; cat; echo "@@ end $1"; }
fail() { echo "@@ fail $*"; poweroff -f; }

insmod /modules/spintune.ko || fail "insmod spintune.ko"
insmod /modules/spintune_selftest.ko || fail "insmod spintune_selftest.ko"
dmesg | sed -n 's/.*spintune_selftest: //p' | section selftest

# until CMD: poll CMD (up to 10 s) until it succeeds.
until_ok() {
  for _ in $(seq 100); do eval "$1" && return 0; sleep 0.1; done
  return 1
}

# Refused or reported as designed, on the self-test's devices: stfw0
# (a rule, its firmware table version 42 in force) and statomic0
# (registered as waiting in atomic context, version 5 in force).
FW=/sys/kernel/spintune/stfw0
A=/st/big-100.bin
B=/st/big-101.bin
{
  # Two writers at once, each with its own open file, their pages
  # interleaved: each blob is staged apart and put in force whole.
  exec 3>/dev/spintune/stfw0 4>/dev/spintune/stfw0
  head -c 4096 $A >&3; ra1=$?
  head -c 4096 $B >&4; rb1=$?
  after_first_pages=$(cat $FW/version)
  tail -c +4097 $A >&3; ra2=$?
  after_a=$(cat $FW/version)
  tail -c +4097 $B >&4; rb2=$?
  exec 3>&- 4>&-
  cat /dev/spintune/stfw0 > /tmp/back.bin
  back=neither
  cmp -s /tmp/back.bin $A && back=a
  cmp -s /tmp/back.bin $B && back=b
  echo "writes=$ra1$rb1$ra2$rb2 after_first_pages=$after_first_pages after_a=$after_a after_b=$(cat $FW/version) readback=$back bytes=$(wc -c < $A) source=$(cat $FW/source)"
} 2>&1 | section writers
{
  # A multi-page blob cut short: its first page, then close().
  before=$(cat $FW/version)
  exec 3>/dev/spintune/stfw0
  head -c 4096 $A >&3
  exec 3>&-
  echo "version_before=$before version_after=$(cat $FW/version)"
  echo "last_error=$(cat $FW/last_error)"
  # The same blob through sysfs, which takes one write of a page at most.
  if cat $A > $FW/table 2>/dev/null; then rc=0; else rc=1; fi
  echo "sysfs_write_failed=$rc version=$(cat $FW/version)"
  echo "sysfs_last_error=$(cat $FW/last_error)"
} 2>&1 | section short
{
  # A table that would have a device that waits in atomic context sleep.
  S=/sys/kernel/spintune/statomic0
  before=$(cat $S/version)
  if cat /st/statomic0.bin > /dev/spintune/statomic0 2>/dev/null; then rc=0; else rc=1; fi
  echo "write_failed=$rc version_before=$before version_after=$(cat $S/version)"
  echo "last_error=$(cat $S/last_error)"
  # And on a device that does not: the self-test's atomic wait was asked
  # to sleep, took the IRQ instead, and the module said so.
  dmesg | grep -c "asks a wait in atomic context" | sed 's/^/downgrade_warnings=/'
  dmesg | sed -n 's/.*spintune_selftest: \(.*an atomic.*\)/\1/p'
} 2>&1 | section atomic

modprobe sdhci-pci || fail "modprobe sdhci-pci"
# An oversized firmware file at the demo driver's stable name (the
# controller's PCI address): refused before anything is allocated for it.
pci=$(ls /sys/bus/pci/drivers/sdhci-pci | grep : | head -1)
mkdir -p /lib/firmware/spintune
dd if=/dev/zero of=/lib/firmware/spintune/$pci.bin bs=1024 count=64 2>/dev/null
# The card is mmc_block's; the demo driver waits for its commands.
modprobe mmc_block || fail "modprobe mmc_block"
until_ok '[ -b /dev/mmcblk0 ]' || fail "no /dev/mmcblk0: the SD card was not found"
insmod /modules/spintune_vboard.ko || fail "insmod spintune_vboard.ko"
[ -e $DEMO/run ] || fail "the demo driver did not take the SD card"
{
  until_ok 'grep -q firmware $ST/last_error' || echo "no firmware refusal in 10 s"
  echo "pci=$pci firmware=$(cat $ST/firmware) version=$(cat $ST/version) source=$(cat $ST/source)"
  echo "last_error=$(cat $ST/last_error)"
} 2>&1 | section firmware
rm -f /lib/firmware/spintune/$pci.bin

# The network is up for every measured run: its interrupts and timers take
# CPU from whatever a run's waits leave idle, so all runs share them.
modprobe e1000 || fail "modprobe e1000"
ip link set lo up
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
# The demo driver masks the card's interrupt line while it polls: a line of
# its own (mmc0 alone on it), not the network's.
{ dmesg | sed -n 's/.*\(spintune virtual board.*\)/\1/p'; cat /proc/interrupts; } | section board

# settle: wait (up to 20 s) until the CPU is idle over half a second: a
# measured run charges its requests whatever else runs while they wait, and
# the agent's exit leaves work behind (its BPF maps and programs are freed
# by kworkers at 16 ns per instruction). 90%: this loop's own awk and sleep
# take about 7% of a quiet guest.
idle_jiffies() { awk '/^cpu / {print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat; }
settle() {
  for _ in $(seq 40); do
    set -- $(idle_jiffies)
    sleep 0.5
    set -- "$@" $(idle_jiffies)
    [ $(( ($3 - $1) * 100 )) -ge $(( ($4 - $2) * 90 )) ] && return
  done
  echo "@@ note the CPU did not settle before a run: idle $(($3 - $1)) of $(($4 - $2)) jiffies"
}

run() {  # run MODE SECTION: the demo driver's workload, then its results
  settle
  # By the table (or the default rule): spintune.ko's outcomes of this run
  # alone, kept in /tmp/outcomes-SECTION.json.
  [ "$1" = table ] && { echo 1 > $OUTCOMES || fail "reset $OUTCOMES"; }
  echo "$1 $REQUESTS 1" > $DEMO/run || fail "run $1"
  section "$2" < $DEMO/results
  if [ "$1" = table ]; then
    cat $OUTCOMES > /tmp/outcomes-$2.json || fail "read $OUTCOMES"
    section "outcomes-$2" < /tmp/outcomes-$2.json
  fi
}

# agent LOG FLAG...: spintune-agent tracing the card, against the tuner on
# the host, while the demo driver works until the agent exits.
agent() {
  log=$1
  shift
  spintune-agent --tuner "$TUNER" --agent-id vboard --source tracefs:mmc0 \
    --platform /tmp/platform.json --state-dir "" --irq-costs platform \
    --give-up-after 60 "$@" > $log 2>&1 &
  pid=$!
  for _ in $(seq 100); do
    grep -q "session up" $log && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.1
  done
  while kill -0 $pid 2>/dev/null; do
    echo "table 200 2" > $DEMO/run
  done
  wait $pid
  echo "agent exit $?" >> $log
}
run table default
run irq irq
run spin spin
echo "sleep $((REQUESTS / 4)) 1" > $DEMO/run || fail "run sleep"
section platform < $DEMO/platform
[ -s /tmp/platform.json ] || cat $DEMO/platform > /tmp/platform.json

# The loop: the agent traces the card while the demo driver works.
agent /tmp/agent.log --sink "attr:$ST/table" --max-samples "$SAMPLES" --batch-size 256
section agent < /tmp/agent.log

pushed=$(sed -n 's/.*applied_version=\([0-9]*\).*/\1/p' /tmp/agent.log | tail -1)
echo "pushed=${pushed:-none} sysfs=$(cat $ST/version) source=$(cat $ST/source)" | section version
run table table
section stats < /sys/kernel/debug/spintune/mmc0/stats

# A corrupted blob: the table in force with one entry byte flipped.
cat $ST/table > /tmp/good.bin
before=$(cat $ST/version)
size=$(wc -c < /tmp/good.bin)
if [ "$size" -gt 64 ]; then
  cp /tmp/good.bin /tmp/bad.bin
  byte=$(dd if=/tmp/good.bin bs=1 skip=72 count=1 2>/dev/null | od -An -tu1 | tr -d ' ')
  printf "\\$(printf %o $(( (byte + 1) % 256 )))" |
    dd of=/tmp/bad.bin bs=1 seek=72 conv=notrunc 2>/dev/null
  if cat /tmp/bad.bin > $ST/table 2>/tmp/write.err; then rc=0; else rc=1; fi
  cat $ST/table > /tmp/after.bin
  same=no
  cmp -s /tmp/good.bin /tmp/after.bin && same=yes
  {
    echo "write_failed=$rc error=$(cat /tmp/write.err | sed 's/.*: //')"
    echo "version_before=$before version_after=$(cat $ST/version) table_unchanged=$same"
    echo "last_error=$(cat $ST/last_error)"
    dmesg | grep "refused a" | tail -1
  } | section corrupt
else
  echo "no table in force ($size bytes)" | section corrupt
fi

# The tracepoints: every wait's outcome and every table install or refusal,
# here from 40 requests by the table and the blob in force written again,
# whole and corrupted.
T=/sys/kernel/tracing
echo > $T/trace
echo 1 > $T/events/spintune/enable
echo "table 40 3" > $DEMO/run
cat /tmp/good.bin > $ST/table
cat /tmp/bad.bin > $ST/table 2>/dev/null
echo 0 > $T/events/spintune/enable
grep -E " spintune_(wait|table_install):" $T/trace | sed 's/^.* \(spintune_[a-z_]*: \)/\1/' |
  section tracepoints

# Verification: the outcomes of the default rule (version 0) and of the
# pushed table go to the tuner first, then a few samples; no sink, so a
# rollback the verifier decides is stored but not applied here.
agent /tmp/agent-outcomes.log --outcomes /tmp/outcomes-default.json \
  --outcomes /tmp/outcomes-table.json --max-samples 200 --batch-size 100
section agent-outcomes < /tmp/agent-outcomes.log

# Unload while a wait runs: the demo driver in a run, a file of
# /dev/spintune/mmc0 open. Neither module may go while the run holds the
# demo driver's debugfs file (rmmod is refused, EAGAIN) or the demo driver
# uses spintune.ko; once the run is over the demo driver unregisters; the
# open file outlives the device, its writes refused, and keeps spintune.ko
# until it is closed.
{
  waits() { awk 'NR > 2 {n += $8} END {print n + 0}' /sys/kernel/debug/spintune/mmc0/stats; }
  w0=$(waits)
  exec 5<>/dev/spintune/mmc0
  echo "table 4000 3" > $DEMO/run &
  runpid=$!
  until_ok '[ $(waits) -gt $w0 ]' || echo "the run did not start"
  if rmmod spintune 2>/dev/null; then echo "rmmod_spintune_in_use=0"; else echo "rmmod_spintune_in_use=1"; fi
  if rmmod spintune_vboard 2>/dev/null; then echo "rmmod_vboard_during_run=0"; else echo "rmmod_vboard_during_run=1"; fi
  wait $runpid; echo "run=$?"
  rmmod spintune_vboard; echo "rmmod_vboard=$?"
  [ -e $ST ] && echo "sysfs_left=1" || echo "sysfs_left=0"
  if cat /st/big-100.bin >&5 2>/dev/null; then echo "write_after_unregister_failed=0"; else echo "write_after_unregister_failed=1"; fi
  rmmod spintune_selftest; echo "rmmod_selftest=$?"
  if rmmod spintune 2>/dev/null; then echo "rmmod_spintune_file_open=0"; else echo "rmmod_spintune_file_open=1"; fi
  exec 5>&-
  rmmod spintune; echo "rmmod_spintune=$?"
  echo "kernel_warnings=$(dmesg | grep -c -E 'BUG|WARNING|Oops|circular locking|sleeping function called')"
} 2>&1 | section unload
echo "@@ done"
poweroff -f
