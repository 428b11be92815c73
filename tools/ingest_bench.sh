#!/usr/bin/env bash
# Tuner ingest under many agents (docs/benchmarks.md). Each run starts a
# fresh tuner (fresh SQLite file, default flags) and spintune-loadgen.
#
#   tools/ingest_bench.sh [BUILD [AGENTS:SAMPLES_PER_AGENT:BATCH...]]
#     N simulated agents (real Agent objects on simulated boards, unpaced);
#     default rows 200:10000:512 and 50:20000:B for B in 64 256 1024 4096.
#   tools/ingest_bench.sh BUILD --one-core [BATCH...]
#     The tuner pinned to CPU 0, the load generator to CPU 1: 50 streams
#     sending pre-encoded batches of BATCH raw samples (default 4096), each
#     with a dispatch sample, 16 unacknowledged at most, for 10 s.
#   tools/ingest_bench.sh BUILD --fleet [AGENTS...]
#     AGENTS streams (default 1000 3000 10000), each a Hello then one
#     histogram batch (64 keys x 100 completions) per second for
#     $FLEET_SECONDS (default 10) seconds; $FLEET_WIRE arrays|bytes sets the
#     load generator's --histogram-wire (unset: its default, arrays).
#   tools/ingest_bench.sh BUILD --null-fleet API [AGENTS...]
#     The --fleet load against spintune-null-tuner --api API (callback or
#     async) instead of the tuner: a Session server that only acknowledges,
#     so the row is gRPC's own cost on both sides (no decoding or storage).
#
# Besides the load generator's figures (samples/s, batches/s, ack latency
# from a batch written to its ack; for streams also the batches left
# unacknowledged 30 s after the last send, and refused ones) it prints the tuner's peak resident
# memory (VmHWM), the tuner process's CPU seconds (utime + stime from
# /proc/PID/stat, all its threads), the part of it its fitter thread used
# (refits at nice 10, which take what CPU is left) and samples per CPU
# second of the rest (receiving, decoding, storing, compacting): the ingest
# rate one core running only that would sustain. The load generator shares
# the machine (except with --one-core) and is in none of the tuner's figures.
# Stream rows against the tuner are followed by its write gate's figures
# (its metrics, --metrics-listen on a free loopback port), the write-ahead
# log's largest size (sampled every second) and the batches still staged
# (not yet compacted) when the run ended. Stream rows end
# with the CPU per acknowledged batch of each tuner thread
# kind and of the load generator, and "KiB/b": what the tuner passed to
# write(2)/pwrite(2) per acknowledged batch (/proc/PID/io wchar: SQLite's
# WAL, its checkpoints into the database file, the log).
set -euo pipefail
BUILD=${1:-build}
OUT=$BUILD/ingest-bench
. "$(dirname "$0")/lib.sh"

# tuner_figures: sets hwm_kib, cpu_ticks and fit_ticks of the running tuner,
# and thread_ticks: its CPU ticks per thread kind ("NAME=TICKS ...": the
# ingest worker, its sender (ack writes, next reads), the fitter, the
# compactor, and "grpc" for the rest: gRPC's threads, which receive, decode
# and encode batches).
tuner_figures() {
  hwm_kib=$(awk '/VmHWM/ {print $2}' "/proc/$tuner_pid/status")
  # Bytes the tuner passed to write(2)/pwrite(2): its SQLite file, WAL and
  # logs (gRPC's socket writes are sendmsg(2), not counted here).
  wchar=$(awk '/^wchar/ {print $2}' "/proc/$tuner_pid/io")
  # utime + stime: fields 14 and 15 (the names in field 2 have no spaces).
  cpu_ticks=$(awk '{print $14 + $15}' "/proc/$tuner_pid/stat")
  fit_ticks=$(cat /proc/"$tuner_pid"/task/*/stat |
    awk '$2 == "(fitter)" {t += $14 + $15} END {print t + 0}')
  thread_ticks=$(cat /proc/"$tuner_pid"/task/*/stat | awk '
    {k = $2 ~ /^\((ingest|sender|fitter|compactor)\)$/ ? substr($2, 2, length($2) - 2) : "grpc"
     t[k] += $14 + $15}
    END {for (k in t) printf "%s=%d ", k, t[k]}')
}

# report FORMAT_KIND JSON: one table row from the load generator's JSON and
# the tuner's figures.
report() {
  python3 - "$1" "$2" "$hwm_kib" "$cpu_ticks" "$fit_ticks" "$(getconf CLK_TCK)" \
    "${thread_ticks:-}" "${loadgen_cpu_s:-0}" "${wchar:-0}" <<'PY'
import json, sys
kind, r = sys.argv[1], json.loads(sys.argv[2])
threads = {k: int(v) / int(sys.argv[6]) for k, v in (t.split("=") for t in sys.argv[7].split())}
hwm = int(sys.argv[3]) / 1024
cpu, fits = int(sys.argv[4]) / int(sys.argv[6]), int(sys.argv[5]) / int(sys.argv[6])
if kind == "agents":
    assert r["samples_stored"] == r["samples"] and r["failed_agents"] == 0, r
    print(f'{r["agents"]:>6} {r["batch_size"]:>6} {r["samples"]:>10} {r["seconds"]:>8.2f} '
          f'{r["samples_per_second"]:>12.0f} {r["batches"]/r["seconds"]:>10.0f} '
          f'{r["ack_p50_ms"]:>10.1f} {r["ack_p99_ms"]:>10.1f} {hwm:>10.1f} '
          f'{cpu:>8.2f} {fits:>8.2f} {r["samples"]/(cpu - fits):>13.0f}')
else:
    print(f'{r["agents"]:>6} {r["hello_seconds"]:>8.1f} {r["batches_acked"]:>8} '
          f'{r["seconds"]:>8.2f} {r["batches_per_second"]:>10.0f} {r["samples_per_second"]:>12.0f} '
          f'{r["ack_p50_ms"]:>10.1f} {r["ack_p99_ms"]:>10.1f} {hwm:>10.1f} '
          f'{hwm * 1024 / r["agents"]:>8.0f} {cpu:>8.2f} {fits:>8.2f} '
          f'{r["samples_acked"]/(cpu - fits):>13.0f} '
          f'{r["batches_sent"] - r["batches_acked"]:>8} {r["refused"]:>7}', end="")
    # CPU per acknowledged batch (us): per tuner thread kind, and the load
    # generator's (the whole run, Hellos included, for both).
    per = lambda s: f'{s / max(1, r["batches_acked"]) * 1e6:>8.1f}'
    print(" " + " ".join(per(threads.get(k, 0)) for k in ("grpc", "ingest", "sender", "compactor", "fitter")),
          per(float(sys.argv[8])), f'{int(sys.argv[9]) / max(1, r["batches_acked"]) / 1024:>8.1f}')
PY
}

run() {  # AGENTS SAMPLES_PER_AGENT BATCH
  rm -rf "$OUT"; mkdir -p "$OUT"
  start_tuner "$BUILD" "$OUT"
  local json
  json=$("$BUILD/bench/spintune-loadgen" --tuner "$addr" --agents "$1" --samples-per-agent "$2" \
    --batch-size "$3" --format json)
  tuner_figures
  kill -INT "$tuner_pid"; wait "$tuner_pid" || true
  report agents "$json"
}

# start_null_tuner API: spintune-null-tuner in place of the tuner (sets
# tuner_pid and addr as start_tuner does).
start_null_tuner() {
  start_server "$OUT" "$BUILD/bench/spintune-null-tuner" --listen 127.0.0.1:0 --api "$1"
}

run_streams() {  # PIN(0|1) LOADGEN_FLAG...
  local pin=$1; shift
  rm -rf "$OUT"; mkdir -p "$OUT"
  if [ -n "${NULL_API:-}" ]; then start_null_tuner "$NULL_API"
  else start_tuner "$BUILD" "$OUT" --metrics-listen 127.0.0.1:0 ${TUNER_FLAGS:-}; fi
  local -a loadgen=("$BUILD/bench/spintune-loadgen")
  if [ "$pin" = 1 ]; then
    taskset -a -p -c 0 "$tuner_pid" >/dev/null  # every thread, and those it starts
    loadgen=(taskset -c 1 "${loadgen[@]}")
  fi
  local json sampler=
  # The write-ahead log's largest size, sampled every second.
  if [ -z "${NULL_API:-}" ]; then
    (largest=0
     while kill -0 "$tuner_pid" 2>/dev/null; do
       size=$(stat -c %s "$OUT/spintune.db-wal" 2>/dev/null || echo 0)
       [ "$size" -le "$largest" ] || { largest=$size; echo "$largest" >"$OUT/wal.largest"; }
       sleep 1
     done) &
    sampler=$!
  fi
  # Exit 1 when some batches were not acknowledged (within 30 s of the
  # last send) or were refused: the row says how many. Its CPU (user +
  # system: the subshell's children's line of `times`).
  json=$({ "${loadgen[@]}" --tuner "$addr" --fleet --format json "$@" || true; }
         times >"$OUT/loadgen.times")
  loadgen_cpu_s=$(awk 'NR == 2 {
    for (i = 1; i <= 2; i++) {split($i, p, /[ms]/); s += p[1] * 60 + p[2]}
    print s}' "$OUT/loadgen.times")
  tuner_figures
  local gate
  gate=$(gate_figures)
  kill -INT "$tuner_pid"; wait "$tuner_pid" || true
  [ -z "$sampler" ] || { kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null || true; }
  report streams "$json"
  [ -z "$gate" ] || echo "$gate"
  [ -n "$sampler" ] || return 0
  # What storage was left with: the log at its largest, and the batches
  # compaction had not folded yet (with the sqlite3 shell, if installed).
  local staged=
  if command -v sqlite3 >/dev/null; then
    staged=$(sqlite3 "$OUT/spintune.db" "SELECT COUNT(*) FROM pending_deltas" 2>/dev/null || true)
  fi
  echo "  write-ahead log at most $(( $(cat "$OUT/wal.largest" 2>/dev/null || echo 0) >> 20 )) MiB${staged:+; $staged batches staged at the end}"
}

# gate_figures: the running tuner's write gate over the whole run, from its
# metrics (storage/write_gate.h): how long the ingest worker's and the
# background writers' transactions held the write turn, how long the worker
# waited, the longest background transaction.
gate_figures() {
  local url
  url=$(awk '/metrics on/ {print $NF}' "$OUT/tuner.out" 2>/dev/null)
  [ -n "$url" ] || return 0
  curl -s "$url" | awk '
    /^spintune_tuner_write_gate_held_seconds_total\{writer="ingest"\}/ {i = $2}
    /^spintune_tuner_write_gate_held_seconds_total\{writer="background"\}/ {b = $2}
    /^spintune_tuner_write_gate_wait_seconds_total/ {w = $2}
    /^spintune_tuner_write_gate_longest_background_seconds/ {l = $2}
    END {if (i != "") printf "  write turn held: ingest %.1f s, background %.1f s; ingest waited %.1f s; longest background %.0f ms\n", i, b, w, l * 1000}'
}

streams_header() {
  printf "%6s %8s %8s %8s %10s %12s %10s %10s %10s %8s %8s %8s %13s %8s %7s %8s %8s %8s %8s %8s %8s %8s\n" \
    streams "hello s" batches seconds batches/s samples/s "ack p50 ms" "ack p99 ms" \
    "tuner MiB" "KiB/str" "tuner s" "fits s" "ingest/cpu-s" unacked refused "grpc us" \
    "ingest us" "sender" "compact" "fits us" "loadgen" "KiB/b"
}

case "${2:-}" in
  --one-core)
    streams_header
    batches=("${@:3}")
    [ ${#batches[@]} -gt 0 ] || batches=(4096)
    for b in "${batches[@]}"; do
      run_streams 1 --raw --batch-size "$b" --agents 50 --channels 8 --interval 0.01 --window 16 \
        --duration 10
    done
    ;;
  --null-fleet)
    NULL_API=${3:?--null-fleet needs an API: callback or async}
    streams_header
    fleet=("${@:4}")
    [ ${#fleet[@]} -gt 0 ] || fleet=(1000 3000 10000)
    for n in "${fleet[@]}"; do
      run_streams 0 --agents "$n" --duration "${FLEET_SECONDS:-10}" \
        ${FLEET_WIRE:+--histogram-wire "$FLEET_WIRE"}
    done
    ;;
  --fleet)
    streams_header
    fleet=("${@:3}")
    [ ${#fleet[@]} -gt 0 ] || fleet=(1000 3000 10000)
    for n in "${fleet[@]}"; do
      run_streams 0 --agents "$n" --duration "${FLEET_SECONDS:-10}" \
        ${FLEET_WIRE:+--histogram-wire "$FLEET_WIRE"}
    done
    ;;
  *)
    printf "%6s %6s %10s %8s %12s %10s %10s %10s %10s %8s %8s %13s\n" agents batch samples \
      seconds samples/s batches/s "ack p50 ms" "ack p99 ms" "tuner MiB" "tuner s" "fits s" \
      "ingest/cpu-s"
    rows=("${@:2}")
    [ ${#rows[@]} -gt 0 ] ||
      rows=(200:10000:512 50:20000:64 50:20000:256 50:20000:1024 50:20000:4096)
    for row in "${rows[@]}"; do IFS=: read -r a s b <<<"$row"; run "$a" "$s" "$b"; done
    ;;
esac
