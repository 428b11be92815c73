#!/usr/bin/env bash
# How often does a bpf agent started on a busy disk attach its nested
# completion program (stc_rq_complete_nested)? On a disk whose completions
# all run in one context it never should (docs/traces.md, "Completions
# that interrupt completions"); when it does, the programs saw completions
# in two contexts, as they did while attaching in the skeleton's order.
# Root. Each START runs 4 threads of 4 KiB O_DIRECT reads at full speed on
# the disk under /var/tmp and, 0.5 s in, starts each AGENT for SECS (default
# 2.3) with `--capture bpf` and FLAGS (e.g. "--capture-windows 1s/2s"),
# then counts the starts whose log says it attached the program.
#
#   tools/nested_attach_probe.sh BUILD STARTS AGENT... [env SECS=2.3 FLAGS=...]
#
# BUILD's tuner takes the batches (database on tmpfs), BUILD's
# spintune-ioload makes the load.
set -euo pipefail
BUILD=${1:?usage: nested_attach_probe.sh BUILD STARTS AGENT...}
STARTS=${2:?usage: nested_attach_probe.sh BUILD STARTS AGENT...}
shift 2
[ $# -gt 0 ] || { echo "nested_attach_probe: name at least one agent binary" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "nested_attach_probe: needs root" >&2; exit 1; }
SECS=${SECS:-2.3}
. "$(dirname "$0")/lib.sh"
OUT=$(mktemp -d /dev/shm/spintune-nested-probe.XXXXXX)
agent_pid= load_pid=
cleanup() {
  stop_pid "$agent_pid"
  stop_pid "$load_pid"
  stop_pid "${tuner_pid:-}"
  rm -rf "$OUT"
}
trap cleanup EXIT
disk=$(disk_under /var/tmp)
write_bench_platform "$OUT/platform.json"
start_tuner "$BUILD" "$OUT"
load_secs=$(echo "$SECS + 1" | bc -l)
echo "agents started under load on $disk, $STARTS starts each, ${SECS} s each${FLAGS:+, $FLAGS} ($(date -u +%FT%TZ))"
declare -A hits
for _ in $(seq "$STARTS"); do
  for agent in "$@"; do
    "$BUILD/agent/spintune-ioload" --file /var/tmp/spintune-nested-probe.bin --file-mb 64 \
      --sizes 4096 --threads 4 --duration "$load_secs" >/dev/null &
    load_pid=$!
    sleep 0.5
    # shellcheck disable=SC2086  # FLAGS is a list of flags
    "$agent" --tuner "$addr" --source "tracefs:$disk" --capture bpf ${FLAGS:-} \
      --platform "$OUT/platform.json" --state-dir "" --spool-dir "" >"$OUT/agent.log" 2>&1 &
    agent_pid=$!
    sleep "$SECS"
    kill "$agent_pid"; wait "$agent_pid" 2>/dev/null || true; agent_pid=
    wait "$load_pid" || true; load_pid=
    if grep -q "attaching stc_rq_complete_nested" "$OUT/agent.log"; then
      hits[$agent]=$(( ${hits[$agent]:-0} + 1 ))
      echo "$agent: $(grep -o 'block completions ran in[^:]*' "$OUT/agent.log" | head -1)"
    fi
  done
done
for agent in "$@"; do
  echo "$agent: attached the nested program in ${hits[$agent]:-0} of $STARTS starts under load"
done
