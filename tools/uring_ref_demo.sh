#!/usr/bin/env bash
# The io_uring reference driver with a table from the tuner, on this machine:
# measure its completion times, stream them through spintune-agent to a
# tuner, let the agent publish the table to shared memory, run the driver
# with that table and, for comparison, always blocking and always spinning;
# send what it measured back for the tuner to verify (and roll back keys
# measured worse than blocking), and measure the verified table again.
# Exit code 77 (skip) when io_uring or O_DIRECT is unavailable.
set -euo pipefail
BUILD=${1:-build}
OPS=${SPINTUNE_URING_OPS:-8000}
OUT=$BUILD/uring-ref
REF=$BUILD/driver/spintune-uring-ref
SHM="spintune-uring-ref-$$"
rm -rf "$OUT"
mkdir -p "$OUT"

set +e
"$REF" --mode measure --csv "$OUT/samples.csv" --platform "$OUT/platform.json" \
  --ops "$OPS" --file "$OUT/data.dat" --file-mib 64 >"$OUT/measure.txt" 2>&1
rc=$?
set -e
if [ "$rc" -eq 77 ]; then echo "skip: io_uring unavailable"; exit 77; fi
if [ "$rc" -ne 0 ]; then cat "$OUT/measure.txt"; exit 1; fi
echo "measured $(($(wc -l <"$OUT/samples.csv") - 1)) completions; platform estimate:"
cat "$OUT/platform.json"

. "$(dirname "$0")/lib.sh"
start_tuner "$BUILD" "$OUT"
# The driver reads the table from shared memory with this release's
# policy.h (format 3: A/B trials), which the agent cannot ask it: say so.
cleanup() { kill "$tuner_pid" 2>/dev/null || true; rm -f "/dev/shm/$SHM-uring0"; }
trap cleanup EXIT
"$BUILD/agent/spintune-agent" --tuner "$addr" --agent-id uring-ref \
  --source "csv:$OUT/samples.csv" --platform "$OUT/platform.json" \
  --sink "shm:$SHM-{device}" --driver-blob-format 3 --state-dir "$OUT/state" --give-up-after 20 \
  >"$OUT/agent.log" 2>&1
"$BUILD/cli/spintune" --db "$OUT/spintune.db" policy uring-ref --format table
echo
# The table, always blocking and always spinning, taking turns request by
# request (an interleaved comparison: the disk's drift biases none of them).
compare() {
  "$REF" --mode compare --shm "$SHM-uring0" --ops $((3 * OPS)) --file "$OUT/data.dat" \
    --file-mib 64 --report "$1"
}
latest_version() {
  "$BUILD/cli/spintune" --db "$OUT/spintune.db" policy uring-ref --format json |
    awk -F'[:,]' '/^  "version"/ {print $2 + 0}'
}
# Rounds: what the driver measured under the table (and under its default
# rule, always blocking) goes back to the tuner. The verifier compares each
# key the table changed with blocking and rolls back the keys measured
# worse; the refit prices each key's IRQ path as measured. The agent
# publishes the result and the driver measures it again, in a compare run
# of its own: the last compare always follows the last report sent, so the
# verification below is on requests no fit or verdict has seen. Rounds stop
# when one changes no version, or at ROUNDS compare runs. Each round's agent
# gives the earlier rounds' reports first (resent, not stored twice).
ROUNDS=${SPINTUNE_URING_ROUNDS:-3}
round=1
reports=()
compare "$OUT/round1"
echo
while :; do
  before=$(latest_version)
  reports+=(--outcomes "$OUT/round$round-table.json" --outcomes "$OUT/round$round-block.json")
  "$BUILD/agent/spintune-agent" --tuner "$addr" --agent-id uring-ref \
    --source "csv:$OUT/samples.csv" --platform "$OUT/platform.json" "${reports[@]}" \
    --sink "shm:$SHM-{device}" --driver-blob-format 3 --state-dir "$OUT/state" --give-up-after 20 \
    >"$OUT/agent-round$round.log" 2>&1
  after=$(latest_version)
  echo "round $round: the driver's outcomes sent; table version $before -> $after"
  "$BUILD/cli/spintune" --db "$OUT/spintune.db" policy uring-ref --format table
  echo
  round=$((round + 1))
  compare "$OUT/round$round"
  echo
  [ "$after" != "$before" ] && [ "$round" -lt "$ROUNDS" ] || break
done
for mode in table block spin; do cp "$OUT/round$round-$mode.json" "$OUT/outcomes-$mode.json"; done
# Its predictions against what the driver measured, per key.
"$BUILD/cli/spintune" --db "$OUT/spintune.db" verify uring-ref \
  --report "table=$OUT/outcomes-table.json" --report "block=$OUT/outcomes-block.json" \
  --report "spin=$OUT/outcomes-spin.json" -o "$OUT/verification.json"
echo "wrote $OUT/verification.json"
kill -INT "$tuner_pid"
wait "$tuner_pid"
trap - EXIT
rm -f "/dev/shm/$SHM-uring0" "$OUT/data.dat"
