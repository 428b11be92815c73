#!/usr/bin/env bash
# The demo of `make demo`: a tuner on loopback with a fresh SQLite file,
# agents for several simulated boards, each until it applied its final
# table; then per board the fitted table, a release header and an HTML report.
set -euo pipefail
BUILD=${1:-build}
BIN_AGENT=$BUILD/agent/spintune-agent
BIN_CLI=$BUILD/cli/spintune
OUT=$BUILD/demo
SAMPLES=${SPINTUNE_DEMO_SAMPLES:-60000}
BOARDS=(litex-rocket-50mhz-slowcard litex-rocket-100mhz-fastcard microwatt-100mhz
        imx28-mxs-mmc bcm2835-spi-20mhz ls1021a-dspi-12mhz)

rm -rf "$OUT"
mkdir -p "$OUT"
start=$(date +%s.%N)

. "$(dirname "$0")/lib.sh"
start_tuner "$BUILD" "$OUT"
cleanup() { kill "$tuner_pid" 2>/dev/null || true; }
trap cleanup EXIT
echo "tuner listening on $addr, database $OUT/spintune.db"

pids=()
for board in "${BOARDS[@]}"; do
  "$BIN_AGENT" --tuner "$addr" --agent-id "$board" --source "sim:$board" --seed 1 \
    --max-samples "$SAMPLES" --sink "file:$OUT/$board-{device}.bin" --give-up-after 30 \
    --state-dir "$OUT/state" \
    >"$OUT/agent-$board.log" 2>&1 &
  pids+=($!)
done
failed=0
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then
    echo "demo: agent ${BOARDS[$i]} failed:"; cat "$OUT/agent-${BOARDS[$i]}.log"; failed=1
  fi
done
[ "$failed" -eq 0 ] || exit 1
echo "${#BOARDS[@]} agents streamed $SAMPLES samples each and applied their final tables"
echo

"$BIN_CLI" --db "$OUT/spintune.db" targets
for board in "${BOARDS[@]}"; do
  echo
  "$BIN_CLI" --db "$OUT/spintune.db" policy "$board" --format table
  "$BIN_CLI" --db "$OUT/spintune.db" header "$board" -o "$OUT/spintune_$board.h"
  # The release header must compile as C with warnings as errors.
  printf '#include "spintune_%s.h"\n' "$board" >"$OUT/check_$board.c"
  cc -std=gnu11 -Wall -Wextra -Werror -fsyntax-only -Idriver/include -I"$OUT" "$OUT/check_$board.c"
  "$BIN_CLI" --db "$OUT/spintune.db" report --target "$board" -o "$OUT/report-$board.html" >/dev/null
  echo "  -> applied blob $(ls "$OUT"/"$board"-*.bin | head -1), header $OUT/spintune_$board.h,"
  echo "     report $OUT/report-$board.html"
done

kill -INT "$tuner_pid"
wait "$tuner_pid"
trap - EXIT
end=$(date +%s.%N)
echo
awk -v s="$start" -v e="$end" -v f="$OUT/tuner.log" \
  'BEGIN { printf "demo finished in %.1f s (tuner log: %s)\n", e - s, f }'
