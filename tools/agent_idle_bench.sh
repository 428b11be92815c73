#!/usr/bin/env bash
# What an agent costs while nothing happens (root): each AGENT binary (a
# spintune-agent, e.g. build/agent/spintune-agent and another build's) runs
# in turn, capturing the disk under /var/tmp with --capture MODE beside an
# otherwise idle machine, for SECS after 4 s to settle (6 s with
# KEYS_LOAD_SIZES: 1 s, 2 s of requests, 3 s), ROUNDS times. Per
# run it prints the agent process's CPU (every thread's run time from
# /proc/PID/task/*/schedstat, exact, not tick-sampled) and its voluntary
# context switches (wakes) per second, then each agent's mean. On a board the
# agent runs all the time, busy or not: this is its floor.
#
#   tools/agent_idle_bench.sh BUILD [MODE] [SECS] [ROUNDS] [AGENT...]
#
# (Defaults: bpf, 20 s, 3 rounds, BUILD's agent.) BUILD's tuner takes the
# batches, its database on tmpfs. Other I/O on the disk is captured work,
# so run it on a quiet machine.
#
# With KEYS_LOAD_SIZES="4096 8192 ..." each agent first sees 2 s of reads
# and writes of those sizes (BUILD's spintune-ioload), so that it holds a
# histogram key per opcode and size class when the idle measure begins: an
# agent on a board keeps the keys it has seen, and reads them all each
# interval.
set -euo pipefail
BUILD=${1:?usage: agent_idle_bench.sh BUILD [MODE] [SECS] [ROUNDS] [AGENT...]}
MODE=${2:-bpf}
SECS=${3:-20}
ROUNDS=${4:-3}
shift $(( $# < 4 ? $# : 4 ))
[ $# -gt 0 ] || set -- "$BUILD/agent/spintune-agent"
[ "$(id -u)" -eq 0 ] || { echo "agent_idle_bench: needs root" >&2; exit 1; }
[[ "$SECS" =~ ^[0-9]+$ ]] && [ "$SECS" -ge 5 ] || { echo "agent_idle_bench: SECS must be 5 or more" >&2; exit 2; }
. "$(dirname "$0")/lib.sh"
OUT=$(mktemp -d /dev/shm/spintune-idle-bench.XXXXXX)
agent_pid=
cleanup() {
  stop_pid "$agent_pid"
  stop_pid "${tuner_pid:-}"
  rm -rf "$OUT"
}
trap cleanup EXIT
disk=$(disk_under /var/tmp)
write_bench_platform "$OUT/platform.json"
start_tuner "$BUILD" "$OUT"

# Sums of every thread of process $1: run time (ns) and voluntary switches.
run_ns() { local t=0 f; for f in /proc/"$1"/task/*/schedstat; do t=$((t + $(cut -d' ' -f1 "$f"))); done; echo "$t"; }
wakes() { cat /proc/"$1"/task/*/status | awk '/^voluntary_ctxt_switches/ {t += $2} END {print t + 0}'; }

settle_s=$(( ${KEYS_LOAD_SIZES:+2} + 4 ))
echo "idle agents, --capture $MODE on $disk, ${SECS} s each after ${settle_s} s, $ROUNDS rounds ($(date -u +%FT%TZ))${KEYS_LOAD_SIZES:+, after 2 s of requests of $KEYS_LOAD_SIZES bytes}"
declare -A cpu_sum wake_sum
for round in $(seq "$ROUNDS"); do
  for agent in "$@"; do
    "$agent" --tuner "$addr" --source "tracefs:$disk" --capture "$MODE" --platform "$OUT/platform.json" \
      --state-dir "" --spool-dir "" >"$OUT/agent.log" 2>&1 &
    agent_pid=$!
    sleep 1
    if [ -n "${KEYS_LOAD_SIZES:-}" ]; then
      # shellcheck disable=SC2086  # a list of sizes
      "$BUILD/agent/spintune-ioload" --file /var/tmp/spintune-idle-keys.bin --file-mb 64 \
        --sizes $KEYS_LOAD_SIZES --write-share 0.5 --duration 2 >/dev/null
    fi
    sleep 3
    kill -0 "$agent_pid" 2>/dev/null || { echo "$agent did not start:"; cat "$OUT/agent.log"; exit 1; }
    c0=$(run_ns "$agent_pid"); v0=$(wakes "$agent_pid")
    sleep "$SECS"
    c1=$(run_ns "$agent_pid"); v1=$(wakes "$agent_pid")
    kill "$agent_pid"; wait "$agent_pid" 2>/dev/null || true; agent_pid=
    cpu=$(( (c1 - c0) / SECS / 1000 )); wk=$(( (v1 - v0) / SECS ))
    cpu_sum[$agent]=$(( ${cpu_sum[$agent]:-0} + cpu )); wake_sum[$agent]=$(( ${wake_sum[$agent]:-0} + wk ))
    printf 'round %d %s: %d us of CPU per s, %d wakes per s\n' "$round" "$agent" "$cpu" "$wk"
  done
done
for agent in "$@"; do
  printf 'mean %s: %d us of CPU per s, %d wakes per s\n' "$agent" \
    $(( ${cpu_sum[$agent]} / ROUNDS )) $(( ${wake_sum[$agent]} / ROUNDS ))
done
