#!/usr/bin/env bash
# Tuner ingest under many agents (docs/benchmarks.md): for each run a fresh
# tuner (fresh SQLite file) and spintune-loadgen with N simulated agents;
# prints samples/s, batches/s, batch ack latency p50/p99, the tuner's peak
# resident memory (VmHWM), the tuner process's CPU seconds (utime + stime
# from /proc/PID/stat, all its threads), the share of it its fitter thread
# used (refits at nice 10, which take what CPU is left), and samples per
# CPU second of the rest (receiving, decoding, storing, compacting): the
# ingest rate one core running only that would sustain. The load
# generator's simulated boards share the machine and are in neither.
# Usage: tools/ingest_bench.sh [BUILD [AGENTS:SAMPLES_PER_AGENT:BATCH...]]
# (default rows: 200:10000:512 and 50:20000:B for B in 64 256 1024 4096)
set -euo pipefail
BUILD=${1:-build}
OUT=$BUILD/ingest-bench
. "$(dirname "$0")/lib.sh"

run() {  # AGENTS SAMPLES_PER_AGENT BATCH
  rm -rf "$OUT"; mkdir -p "$OUT"
  start_tuner "$BUILD" "$OUT"
  local json
  json=$("$BUILD/bench/spintune-loadgen" --tuner "$addr" --agents "$1" --samples-per-agent "$2" \
    --batch-size "$3" --format json)
  local hwm ticks fit_ticks
  hwm=$(awk '/VmHWM/ {print $2}' "/proc/$tuner_pid/status")
  # utime + stime: fields 14 and 15 (the names in field 2 have no spaces).
  ticks=$(awk '{print $14 + $15}' "/proc/$tuner_pid/stat")
  fit_ticks=$(cat /proc/"$tuner_pid"/task/*/stat | awk '$2 == "(fitter)" {t += $14 + $15} END {print t + 0}')
  kill -INT "$tuner_pid"; wait "$tuner_pid" || true
  python3 - "$json" "$hwm" "$ticks" "$fit_ticks" "$(getconf CLK_TCK)" <<'PY'
import json, sys
r = json.loads(sys.argv[1]); hwm = int(sys.argv[2])
cpu, fits = int(sys.argv[3]) / int(sys.argv[5]), int(sys.argv[4]) / int(sys.argv[5])
assert r["samples_stored"] == r["samples"] and r["failed_agents"] == 0, r
print(f'{r["agents"]:>6} {r["batch_size"]:>6} {r["samples"]:>10} {r["seconds"]:>8.2f} '
      f'{r["samples_per_second"]:>12.0f} {r["batches"]/r["seconds"]:>10.0f} '
      f'{r["ack_p50_ms"]:>10.1f} {r["ack_p99_ms"]:>10.1f} {hwm/1024:>10.1f} '
      f'{cpu:>8.2f} {fits:>8.2f} {r["samples"]/(cpu - fits):>13.0f}')
PY
}

printf "%6s %6s %10s %8s %12s %10s %10s %10s %10s %8s %8s %13s\n" agents batch samples seconds \
  samples/s batches/s "ack p50 ms" "ack p99 ms" "tuner MiB" "tuner s" "fits s" "ingest/cpu-s"
rows=("${@:2}")
[ ${#rows[@]} -gt 0 ] || rows=(200:10000:512 50:20000:64 50:20000:256 50:20000:1024 50:20000:4096)
for row in "${rows[@]}"; do IFS=: read -r a s b <<<"$row"; run "$a" "$s" "$b"; done
