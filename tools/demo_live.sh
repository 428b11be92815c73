#!/usr/bin/env bash
# `make demo-live` (root): the loop on this machine's real kernel. A tuner on
# loopback, the agent capturing the root disk live through tracefs (it probes
# the host's platform costs first), the bundled O_DIRECT load generator
# (reads and writes of several sizes plus fsyncs); then the fitted table for
# the disk's opcodes with the measured platform costs.
set -euo pipefail
BUILD=${1:-build}
BIN_AGENT=$BUILD/agent/spintune-agent
BIN_LOAD=$BUILD/agent/spintune-ioload
BIN_CLI=$BUILD/cli/spintune
OUT=$BUILD/demo-live
SAMPLES=${SPINTUNE_LIVE_SAMPLES:-60000}

if [ "$(id -u)" -ne 0 ]; then
  echo "demo-live: needs root (a tracing instance under /sys/kernel/tracing); try: sudo make demo-live"
  exit 1
fi
rm -rf "$OUT"
mkdir -p "$OUT"
. "$(dirname "$0")/lib.sh"
disk=$(disk_under /var/tmp)  # where the load goes
agent_id="$(hostname)-live"

start_tuner "$BUILD" "$OUT"
load_pid=""
cleanup() {
  [ -n "$load_pid" ] && kill "$load_pid" 2>/dev/null || true
  kill "$tuner_pid" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT
echo "tuner listening on $addr, database $OUT/spintune.db"
echo "agent: live capture of $disk (probing this host's platform costs first)"

"$BIN_AGENT" --tuner "$addr" --agent-id "$agent_id" --source "tracefs:$disk" \
  --max-samples "$SAMPLES" --sink "file:$OUT/{device}.bin" --state-dir "$OUT/state" \
  --give-up-after 30 >"$OUT/agent.log" 2>&1 &
agent_pid=$!
for _ in $(seq 200); do
  grep -q "session up" "$OUT/agent.log" 2>/dev/null && break
  kill -0 "$agent_pid" 2>/dev/null || { cat "$OUT/agent.log"; exit 1; }
  sleep 0.1
done
echo "load: O_DIRECT reads and writes of 4-256 KiB plus fdatasync on /var/tmp, until the agent has $SAMPLES samples"
"$BIN_LOAD" --file /var/tmp/spintune-demo-live.bin --duration 300 --threads 2 \
  --sizes 4096,16384,65536,262144 --write-share 0.3 --fsync-every 16 >"$OUT/ioload.log" 2>&1 &
load_pid=$!
if ! wait "$agent_pid"; then
  echo "demo-live: the agent failed:"; cat "$OUT/agent.log"; exit 1
fi
kill -INT "$load_pid" 2>/dev/null || true
wait "$load_pid" 2>/dev/null || true
load_pid=""
cat "$OUT/ioload.log"
echo
sed -n '/host probe:/,/timer_wake_ns/p' "$OUT/agent.log" | sed 's/^[0-9T:.-]* info agent: //'
grep -o "done samples=.*" "$OUT/agent.log" | sed 's/^/agent /'
echo
"$BIN_CLI" --db "$OUT/spintune.db" policy "$agent_id" --format table
echo "  -> applied blob $(ls "$OUT"/*.bin | head -1)"
