#!/usr/bin/env bash
# Captures the replayed stream of the context suite (spintune-bench
# --context): this machine's disk under an fsync-heavy load, as a
# completions CSV with issue times and the platform costs it was measured
# with. As root (tracefs), on a disk with O_DIRECT (/var/tmp):
#
#   bench/capture_context_fixture.sh [BUILD] [OUT_DIR]
#
# BUILD defaults to build, OUT_DIR to tests/fixtures/context. Writes
#   vda-fsync.csv            device,opcode,bytes,wait_ns,issue_ns (issue_ns
#                            from the first request), every request of the
#                            disk over the capture
#   vda-fsync-platform.json  irq_cpu_ns, poll_read_ns, timer_* from
#                            `spintune-agent --probe`; irq_wake_ns the mean
#                            IRQ -> waiter wake of this capture
# The load: 16 threads, 70% writes of 4-64 KiB, an fdatasync after every
# write (spintune-ioload), for 0.6 s: about 20,000 requests.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$here/build}" && pwd)
OUT=${2:-$here/tests/fixtures/context}
[ "$(id -u)" = 0 ] || { echo "capture_context_fixture.sh: needs root (tracefs)" >&2; exit 1; }
tmp=$(mktemp -d)
inst=/sys/kernel/tracing/instances/spintune-context-fixture
cleanup() {
  [ -n "${cat_pid:-}" ] && kill "$cat_pid" 2>/dev/null || true
  [ -d "$inst" ] && { echo 0 > "$inst/tracing_on"; rmdir "$inst"; } || true
  rm -rf "$tmp"
}
trap cleanup EXIT

disk=$(df --output=source /var/tmp | tail -1)
disk=${disk#/dev/}
majmin=$(cat "/sys/class/block/$disk/dev")
"$BUILD/agent/spintune-agent" --probe --format json > "$tmp/probe.json"

mkdir "$inst"
echo mono > "$inst/trace_clock"
echo 16384 > "$inst/buffer_size_kb"
for e in irq/irq_handler_entry irq/irq_handler_exit sched/sched_waking sched/sched_switch \
         block/block_rq_issue block/block_rq_complete block/block_rq_requeue; do
  echo 1 > "$inst/events/$e/enable"
done
cat "$inst/trace_pipe" > "$tmp/trace.txt" &
cat_pid=$!
"$BUILD/agent/spintune-ioload" --file /var/tmp/spintune-context-fixture.bin --file-mb 256 \
  --threads 16 --write-share 0.7 --fsync-every 1 --sizes 4096,16384,65536 --duration 0.6
sleep 0.5
kill "$cat_pid"
cat_pid=""

"$BUILD/cli/spintune" extract --trace "$tmp/trace.txt" --block-dev "$majmin=vda" \
  --completions "$tmp/c.csv" --dispatch "$tmp/d.csv"
mkdir -p "$OUT"
# Only the disk; issue times from the first request.
# (issue_ns found by name: docs/csv-formats.md gives the columns.)
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "issue_ns") c = i
                   print "device,opcode,bytes,wait_ns,issue_ns"; next }
         $1 == "vda" { if (t0 == "") t0 = $c; printf "%s,%s,%s,%s,%.0f\n", $1, $2, $3, $4, $c - t0 }' \
  "$tmp/c.csv" > "$OUT/vda-fsync.csv"
wake=$(awk -F, 'NR > 1 && $3 == "vda" && $5 != "" { s += $5; n++ } END { printf "%d", s / n }' \
  "$tmp/d.csv")
jq --argjson wake "$wake" '.irq_wake_ns = $wake | .board = "this host (vda, fsync-heavy load)"' \
  "$tmp/probe.json" > "$OUT/vda-fsync-platform.json"
echo "$(($(wc -l < "$OUT/vda-fsync.csv") - 1)) requests in $OUT/vda-fsync.csv; platform:"
cat "$OUT/vda-fsync-platform.json"
