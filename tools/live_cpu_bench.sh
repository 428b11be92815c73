#!/usr/bin/env bash
# The live agent's own CPU use at a fixed rate of traced requests (root).
# Runs the bundled load at RATE requests/s twice, without and with the agent
# capturing the disk, and reports per run: requests/s achieved, the load
# generator's CPU (the I/O issuers pay the tracepoints), and the agent's CPU
# (user + system: the kernel formats trace_pipe text in the agent's read()).
# Usage: tools/live_cpu_bench.sh [BUILD] [RATE] [SECONDS]
set -euo pipefail
BUILD=${1:-build}
RATE=${2:-10000}
SECS=${3:-20}
OUT=$BUILD/live-cpu-bench
HZ=$(getconf CLK_TCK)
[ "$(id -u)" -eq 0 ] || { echo "live_cpu_bench: needs root"; exit 1; }
rm -rf "$OUT"; mkdir -p "$OUT"
. "$(dirname "$0")/lib.sh"
disk=$(disk_under /var/tmp)
cat >"$OUT/platform.json" <<'JSON'
{"irq_cpu_ns": 8000, "irq_wake_ns": 60000, "poll_read_ns": 200,
 "timer_cpu_ns": 15000, "timer_wake_ns": 15000}
JSON

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# Runs the load; prints "achieved_rps load_cpu_percent".
run_load() {
  "$BUILD/agent/spintune-ioload" --file /var/tmp/spintune-cpu-bench.bin --duration "$SECS" \
    --threads 4 --sizes 4096 --write-share 0.2 --fsync-every 0 --rate "$RATE" \
    >"$OUT/load.out" 2>&1 &
  local pid=$!
  sleep 2; local t0; t0=$(cpu_ticks "$pid"); local w0; w0=$(date +%s.%N)
  sleep $((SECS - 4)); local t1; t1=$(cpu_ticks "$pid"); local w1; w1=$(date +%s.%N)
  wait "$pid"
  local rps; rps=$(sed -n 's/.*(\([0-9]*\) requests\/s).*/\1/p' "$OUT/load.out")
  echo "$rps $(echo "($t1 - $t0) / $HZ / ($w1 - $w0) * 100" | bc -l)"
}

read -r base_rps base_cpu < <(run_load)

start_tuner "$BUILD" "$OUT"
trap 'kill $tuner_pid 2>/dev/null || true; kill ${agent_pid:-0} 2>/dev/null || true' EXIT
"$BUILD/agent/spintune-agent" --tuner "$addr" --source "tracefs:$disk" --platform "$OUT/platform.json" \
  --state-dir "" --batch-size 4096 >"$OUT/agent.log" 2>&1 &
agent_pid=$!
for _ in $(seq 100); do grep -q "session up" "$OUT/agent.log" && break; sleep 0.1; done
a0=$(cpu_ticks "$agent_pid"); aw0=$(date +%s.%N)
read -r traced_rps traced_cpu < <(run_load)
a1=$(cpu_ticks "$agent_pid"); aw1=$(date +%s.%N)
kill -INT "$agent_pid"; wait "$agent_pid" || true
agent_cpu=$(echo "($a1 - $a0) / $HZ / ($aw1 - $aw0) * 100" | bc -l)
samples=$(grep -o "done samples=[0-9]*" "$OUT/agent.log" | cut -d= -f2)

printf "live agent CPU at %s requests/s on %s (%s s per run, 4 threads of 4 KiB O_DIRECT I/O)\n" "$RATE" "$disk" "$SECS"
printf "%-28s %14s %16s %18s\n" "run" "requests/s" "ioload CPU %" "agent CPU % (1 core)"
printf "%-28s %14s %16.1f %18s\n" "load alone" "$base_rps" "$base_cpu" "-"
printf "%-28s %14s %16.1f %18.1f\n" "load + live agent" "$traced_rps" "$traced_cpu" "$agent_cpu"
printf "agent samples sent: %s\n" "$samples"
