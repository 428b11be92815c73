#!/bin/busybox sh
# /init of the virtual board's initramfs (tools/vboard.sh builds it).
# Loads spintune.ko and runs its self-test, brings up the SD card under the
# demo driver, measures the default rule, always-IRQ and always-spin, runs
# spintune-agent against the tuner on the host while the demo driver
# works, measures again with the pushed table, writes a corrupted blob
# and checks that it is refused, then sends spintune.ko's outcome reports
# of the default-rule and the table runs to the tuner's verifier with a
# short second agent run. Every result goes to the console between
# "@@ begin NAME" and "@@ end NAME" lines; the host reads them.
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

modprobe sdhci-pci || fail "modprobe sdhci-pci"
insmod /modules/spintune_vboard.ko || fail "insmod spintune_vboard.ko"
for _ in 1 2 3 4 5 6 7 8 9 10; do [ -e $DEMO/run ] && break; sleep 0.2; done
[ -e $DEMO/run ] || fail "the demo driver did not bind the SD card"

# The network is up for every measured run: its interrupts and timers take
# CPU from whatever a run's waits leave idle, so all runs share them.
modprobe e1000 || fail "modprobe e1000"
ip link set lo up
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0

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

# Verification: the outcomes of the default rule (version 0) and of the
# pushed table go to the tuner first, then a few samples; no sink, so a
# rollback the verifier decides is stored but not applied here.
agent /tmp/agent-outcomes.log --outcomes /tmp/outcomes-default.json \
  --outcomes /tmp/outcomes-table.json --max-samples 200 --batch-size 100
section agent-outcomes < /tmp/agent-outcomes.log
echo "@@ done"
poweroff -f
