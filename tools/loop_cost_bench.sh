#!/usr/bin/env bash
# What live capture adds to the I/O path, per request, measured where the
# machine's noise cannot hide it (root): a loop device on a tmpfs file, read
# with 4 KiB O_DIRECT requests by one dd, with dd and the loop device's
# worker on one CPU (the unbound workqueues' cpumask, restored at exit). Each
# request then runs issue, copy, completion and wakeups back to back on that
# CPU with nothing to wait for, so the time per request is that CPU's work
# per request (6.72-6.93 us from round to round here, 2026-12-05). The agent and the tuner run on another
# CPU: what this measures is what capture costs *in the path* (the BPF
# programs, the tracepoints, the kernel writing trace events), not the
# agent process's own CPU (live_cpu_bench.sh measures both, on the disk).
#
# usage: loop_cost_bench.sh BUILD [ROUNDS] [MODE] [OTHER_AGENT]
# Each round times dd alone, with BUILD's agent (--capture MODE, default
# bpf) and, given OTHER_AGENT (another build's spintune-agent), with that
# one, in an order that alternates from round to round. It prints every
# run, then each agent's added time per request against the runs without
# one in the same round (mean and standard error over the rounds) and, with
# two agents, their paired difference.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:?usage: loop_cost_bench.sh BUILD [ROUNDS] [MODE] [OTHER_AGENT]}
ROUNDS=${2:-6}
MODE=${3:-bpf}
OTHER=${4:-}
[ "$(id -u)" = 0 ] || { echo "loop_cost_bench.sh: needs root (a loop device, tracepoints)"; exit 1; }
ncpu=$(nproc)
[ "$ncpu" -ge 2 ] || { echo "loop_cost_bench.sh: needs two CPUs (one for the path, one for the agent)"; exit 1; }
. tools/lib.sh
OUT=$BUILD/loop-cost-bench
rm -rf "$OUT"; mkdir -p "$OUT"
path_cpu=$((ncpu - 1))
other_cpus=0-$((ncpu - 2))
img=$(mktemp /dev/shm/spintune-loop.XXXX)
wq=/sys/devices/virtual/workqueue/cpumask
wq0=$(cat "$wq")
loopdev=
agent_pid=
tuner_pid=
cleanup() {
  [ -n "$agent_pid" ] && kill -INT "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null
  [ -n "$tuner_pid" ] && kill "$tuner_pid" 2>/dev/null
  echo "$wq0" >"$wq" 2>/dev/null || true
  [ -n "$loopdev" ] && losetup -d "$loopdev" 2>/dev/null
  rm -f "$img"
}
trap cleanup EXIT
truncate -s 256M "$img"
loopdev=$(losetup -f --show "$img")
dev=$(basename "$loopdev")
dd if=/dev/zero of="$loopdev" bs=1M count=256 oflag=direct status=none  # every page backed
requests=65536
# The path's CPU gets the loop worker (an unbound workqueue) and dd.
printf '%x\n' $((1 << path_cpu)) >"$wq"
start_tuner "$BUILD" "$OUT"
taskset -pc "$other_cpus" "$tuner_pid" >/dev/null
write_bench_platform "$OUT/platform.json"

# run_dd: one pass over the device; sets ns, per request.
run_dd() {
  local t0 t1
  t0=$(date +%s%N)
  taskset -c "$path_cpu" dd if="$loopdev" of=/dev/null bs=4k iflag=direct count=$requests status=none
  t1=$(date +%s%N)
  ns=$(((t1 - t0) / requests))
}
run_with() {  # run_with AGENT_BINARY LOG: one pass with that agent capturing; sets ns
  taskset -c "$other_cpus" "$1" --tuner "$addr" --source "tracefs:$dev" --capture "$MODE" \
    --platform "$OUT/platform.json" --state-dir "" --spool-dir "" >"$2" 2>&1 &
  agent_pid=$!
  for _ in $(seq 100); do grep -qs "capture $MODE: measuring" "$2" && break; sleep 0.1; done
  grep -q "capture $MODE: measuring" "$2" || { echo "the agent did not start capturing:"; cat "$2"; exit 1; }
  sleep 0.5
  run_dd
  kill -INT "$agent_pid"; wait "$agent_pid" || true; agent_pid=
}

printf "capture cost in the I/O path: %d x 4 KiB O_DIRECT reads of %s (tmpfs-backed), dd and the loop\n" \
  "$requests" "$dev"
printf "worker on CPU %d, agent (--capture %s) and tuner on CPUs %s; %d rounds\n" "$path_cpu" "$MODE" \
  "$other_cpus" "$ROUNDS"
printf "  A: %s\n" "$BUILD/agent/spintune-agent"
[ -n "$OTHER" ] && printf "  B: %s\n" "$OTHER"
run_dd  # warm up
printf "%5s %10s %10s %10s   (ns per request)\n" round alone A "$([ -n "$OTHER" ] && echo B)"
: >"$OUT/rounds"
for r in $(seq "$ROUNDS"); do
  order="off A B"
  [ $((r % 2)) = 0 ] && order="B A off"
  declare -A t=()
  for who in $order; do
    case $who in
      off) run_dd; t[off]=$ns ;;
      A) run_with "$BUILD/agent/spintune-agent" "$OUT/agent-A.log"; t[A]=$ns ;;
      B) if [ -n "$OTHER" ]; then run_with "$OTHER" "$OUT/agent-B.log"; t[B]=$ns; fi ;;
    esac
  done
  echo "$r ${t[off]} ${t[A]} ${t[B]:-}" >>"$OUT/rounds"
  printf "%5d %10d %10d %10s\n" "$r" "${t[off]}" "${t[A]}" "${t[B]:-}"
done
grep -h "completions" "$OUT"/agent-*.log | sed 's/^.*info agent: /last run: /'
python3 - "$OUT/rounds" <<'PY'
import statistics, sys
rows = [list(map(int, l.split())) for l in open(sys.argv[1]) if l.strip()]
def line(name, d):
    se = statistics.stdev(d) / len(d) ** 0.5 if len(d) > 1 else 0.0
    print("%s: %+.0f ns per request (standard error %.0f, %d rounds)" % (name, statistics.mean(d), se, len(d)))
print("alone: %.0f ns per request (mean)" % statistics.mean(r[1] for r in rows))
line("A - alone", [r[2] - r[1] for r in rows])
if all(len(r) > 3 for r in rows):
    line("B - alone", [r[3] - r[1] for r in rows])
    line("A - B    ", [r[2] - r[3] for r in rows])
PY
