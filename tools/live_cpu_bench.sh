#!/usr/bin/env bash
# What live capture costs, per capture mode (root): the bundled O_DIRECT load
# runs at RATE requests/s alone and with the agent capturing the disk
# (--capture bpf, raw, text), alternating, REPEAT times each. Per run it reads
# over the steady middle of the run:
#  - the WHOLE MACHINE's busy CPU from /proc/stat (user + nice + system + irq
#    + softirq of every CPU): with the agent minus alone is the capture's full
#    cost, including BPF programs and trace events in the I/O issuers' and the
#    IRQs' context, not just the agent process;
#  - the agent process's own CPU (user + system, /proc/PID/stat);
#  - the agent's peak resident memory (VmHWM).
# The machine must be otherwise idle: other work lands in the whole-machine
# figure (the "alone" runs around each traced run show how much there is).
# Usage: tools/live_cpu_bench.sh [BUILD] [RATE] [SECONDS] [REPEAT] [MODES]
set -euo pipefail
BUILD=${1:-build}
RATE=${2:-10000}
SECS=${3:-20}
REPEAT=${4:-2}
MODES=${5:-"bpf raw text"}
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

# Busy jiffies of the whole machine (the "cpu" line of /proc/stat).
machine_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
proc_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
now() { date +%s.%N; }

# run_load [AGENT_PID]: runs the load; prints "requests_per_s machine_cpu_s_per_s agent_cpu_s_per_s".
run_load() {
  local agent=${1:-}
  "$BUILD/agent/spintune-ioload" --file /var/tmp/spintune-cpu-bench.bin --duration "$SECS" \
    --threads 4 --sizes 4096 --write-share 0.2 --fsync-every 0 --rate "$RATE" \
    >"$OUT/load.out" 2>&1 &
  local pid=$!
  sleep 3
  local m0 a0=0 w0; m0=$(machine_ticks); w0=$(now)
  [ -n "$agent" ] && a0=$(proc_ticks "$agent")
  sleep $((SECS - 6))
  local m1 a1=0 w1; m1=$(machine_ticks); w1=$(now)
  [ -n "$agent" ] && a1=$(proc_ticks "$agent")
  wait "$pid"
  local rps; rps=$(sed -n 's/.*(\([0-9]*\) requests\/s).*/\1/p' "$OUT/load.out")
  echo "$rps $(echo "($m1 - $m0) / $HZ / ($w1 - $w0)" | bc -l) $(echo "($a1 - $a0) / $HZ / ($w1 - $w0)" | bc -l)"
}

start_tuner "$BUILD" "$OUT"
agent_pid=
trap 'kill $tuner_pid 2>/dev/null || true; [ -n "$agent_pid" ] && kill $agent_pid 2>/dev/null || true' EXIT

printf "live capture cost at %s requests/s on %s (%s s runs, 4 threads of 4 KiB O_DIRECT I/O, %s x each)\n" \
  "$RATE" "$disk" "$SECS" "$REPEAT"
printf "%-6s %-4s %11s %14s %14s %16s %13s %9s\n" mode run "requests/s" "machine CPU %" \
  "+CPU/request" "agent CPU %" "agent/request" "RSS MiB"
for r in $(seq "$REPEAT"); do
  for mode in $MODES; do
    read -r base_rps base_cpu _ < <(run_load)
    "$BUILD/agent/spintune-agent" --tuner "$addr" --source "tracefs:$disk" --capture "$mode" \
      --platform "$OUT/platform.json" --state-dir "" --spool-dir "" --batch-size 4096 \
      >"$OUT/agent-$mode.log" 2>&1 &
    agent_pid=$!
    for _ in $(seq 100); do grep -q "session up" "$OUT/agent-$mode.log" && break; sleep 0.1; done
    grep -q "capture $mode: measuring" "$OUT/agent-$mode.log" ||
      { echo "the agent did not start capturing with $mode:"; cat "$OUT/agent-$mode.log"; exit 1; }
    read -r rps cpu agent_cpu < <(run_load "$agent_pid")
    rss=$(awk '/VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$agent_pid/status")
    kill -INT "$agent_pid"; wait "$agent_pid" || true; agent_pid=
    # Extra whole-machine CPU per traced request, and the agent's share.
    extra_us=$(echo "($cpu - $base_cpu) / $rps * 1000000" | bc -l)
    agent_us=$(echo "$agent_cpu / $rps * 1000000" | bc -l)
    printf "%-6s %-4s %11s %14.1f %14s %16s %13s %9s\n" "$mode" alone "$base_rps" \
      "$(echo "$base_cpu * 100" | bc -l)" - - - -
    printf "%-6s %-4s %11s %14.1f %11.2f us %16.1f %10.2f us %9s\n" "$mode" "+cap" "$rps" \
      "$(echo "$cpu * 100" | bc -l)" "$extra_us" "$(echo "$agent_cpu * 100" | bc -l)" \
      "$agent_us" "$rss"
  done
done
echo "(machine CPU % is of one core, summed over the machine's $(nproc) CPUs)"
