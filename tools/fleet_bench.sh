#!/usr/bin/env bash
# Tuners on one PostgreSQL database (docs/deploy.md, docs/benchmarks.md
# "Fleets on PostgreSQL"): 1, 2 and 4 tuner processes on a throw-away local
# cluster (tools/pg_test_cluster.sh, fsync on), and one tuner on an SQLite
# file, under the same two loads, each tuner fed by its own load generator
# with its share of the agents:
#   samples     AGENTS real agents on simulated boards, unpaced, batches of
#               BATCH samples, SAMPLES each (spintune-loadgen --agents)
#   histograms  STREAMS streams, each a Hello then one histogram batch
#               (64 keys x 100 completions) per second for 10 s (--fleet)
#
#   tools/fleet_bench.sh [BUILD]    (AGENTS=200 SAMPLES=5000 BATCH=512 STREAMS=1000)
#
# Rows: stored samples/s over the slowest generator's time (every sample
# of the sample load checked stored), batches/s, and the worst of the
# generators' ack p50/p99 (a batch written to its ack). Everything shares
# this machine's cores: PostgreSQL, the tuners and the generators.
set -euo pipefail
BUILD=${1:-build}
AGENTS=${AGENTS:-200} SAMPLES=${SAMPLES:-5000} BATCH=${BATCH:-512} STREAMS=${STREAMS:-1000}
OUT=$BUILD/fleet-bench
rm -rf "$OUT" && mkdir -p "$OUT"
STATE=$OUT/pg-state
PG_DURABLE=1 "$(dirname "$0")/pg_test_cluster.sh" start "$STATE" >/dev/null
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  "$(dirname "$0")/pg_test_cluster.sh" stop "$STATE"
}
trap cleanup EXIT
socket=$(cat "$STATE")
n=0

# run BACKEND TUNERS LOAD: one row.
run() {
  local backend=$1 tuners=$2 load=$3 db addrs=() gens=()
  n=$((n + 1))
  if [[ $backend == sqlite ]]; then
    db=$OUT/run$n.db
  else
    psql -q -h "$socket" -U postgres -d postgres -c "CREATE DATABASE run$n"
    db="postgresql:///run$n?host=$socket&user=postgres"
  fi
  pids=()
  for t in $(seq "$tuners"); do
    "$BUILD/tuner/spintune-tuner" --listen 127.0.0.1:0 --db "$db" --log-level warn \
      >"$OUT/t$n-$t.out" 2>"$OUT/t$n-$t.err" &
    pids+=($!)
    for _ in $(seq 100); do grep -qs "listening on" "$OUT/t$n-$t.out" && break; sleep 0.1; done
    addrs+=("$(awk '/listening on/ {print $3}' "$OUT/t$n-$t.out")")
  done
  for t in $(seq "$tuners"); do
    if [[ $load == samples ]]; then
      args=(--agents $((AGENTS / tuners)) --samples-per-agent "$SAMPLES" --batch-size "$BATCH")
    else
      args=(--fleet --agents $((STREAMS / tuners)) --duration 10)
    fi
    "$BUILD/bench/spintune-loadgen" --tuner "${addrs[$((t - 1))]}" --prefix "g$t" \
      --format json "${args[@]}" >"$OUT/g$n-$t.json" 2>"$OUT/g$n-$t.err" &
    gens+=($!)
  done
  for g in "${gens[@]}"; do wait "$g"; done
  for p in "${pids[@]}"; do kill -INT "$p"; wait "$p" || true; done
  pids=()
  python3 - "$backend" "$tuners" "$load" "$OUT"/g$n-*.json <<'PY'
import json, sys
backend, tuners, load, files = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
rs = [json.load(open(f)) for f in files]
secs = max(r["seconds"] for r in rs)
if load == "samples":
    assert all(r["samples_stored"] == r["samples"] and r["failed_agents"] == 0 for r in rs), rs
    samples, batches = sum(r["samples"] for r in rs), sum(r["batches"] for r in rs)
else:
    samples, batches = sum(r["samples_acked"] for r in rs), sum(r["batches_acked"] for r in rs)
print(f'| {backend} | {tuners} | {load} | {sum(r["agents"] for r in rs)} | {samples / secs:,.0f} | '
      f'{batches / secs:,.0f} | {max(r["ack_p50_ms"] for r in rs):.1f} | '
      f'{max(r["ack_p99_ms"] for r in rs):.1f} |')
PY
}

echo "| backend | tuners | load | agents | samples/s | batches/s | ack p50 ms | ack p99 ms |"
echo "|---|---|---|---|---|---|---|---|"
for load in samples histograms; do
  run sqlite 1 "$load"
  for t in 1 2 4; do run postgresql "$t" "$load"; done
done
