#!/usr/bin/env bash
# Held-out verification on the simulated boards (issue #12): every board of
# `spintune-agent --list-boards` streams to one tuner with its simulated
# driver waiting by each pushed table and reporting what its waits cost
# (outcomes), once with a right platform model and once with a wrong one
# (the board's true timer oversleep 5x the declared: --sim-timer-wake-factor).
# Every verdict compares what was measured after a push, on requests the
# table was not fitted on, with the incumbent's measurements. Prints per
# board and model the verdicts, then the shares of keys verified better,
# worse (rolled back) and inconclusive.
#
#   tools/verify_bench.sh [BUILD]     (SPINTUNE_VERIFY_SAMPLES, default 40000 per board)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-build}" && pwd)
SAMPLES=${SPINTUNE_VERIFY_SAMPLES:-40000}
OUT=$BUILD/verify-bench
CLI=$BUILD/cli/spintune
rm -rf "$OUT"
mkdir -p "$OUT"
. "$here/tools/lib.sh"
start_tuner "$BUILD" "$OUT" --refit-samples 4096
trap 'kill "$tuner_pid" 2>/dev/null || true' EXIT

boards=$("$BUILD/agent/spintune-agent" --list-boards --format json | jq -r '.boards[].name')
printf "%-34s %-6s %8s %7s %7s %7s %13s\n" BOARD MODEL VERSIONS BETTER WORSE INCONCL "ROLLED BACK"
for factor in 1 5; do
  model=$([ "$factor" = 1 ] && echo right || echo "x$factor")
  for board in $boards; do
    id="$board-$model"
    "$BUILD/agent/spintune-agent" --tuner "$addr" --agent-id "$id" --source "sim:$board" \
      --sim-timer-wake-factor "$factor" --max-samples "$SAMPLES" --rate 20000 \
      --batch-size 250 --state-dir "" --sink none --give-up-after 20 2>"$OUT/$id.log" || {
      echo "agent $id failed:"; tail -5 "$OUT/$id.log"; exit 1; }
    current=$("$CLI" --tuner "$addr" policy "$id" --format json | jq '.version')
    : > "$OUT/$id.verdicts"
    for v in $(seq 1 "$current"); do
      "$CLI" --tuner "$addr" policy "$id" --version "$v" --format json |
        jq -r '.verifications[]? | "\(.verdict) \(.rollback_version)"' >> "$OUT/$id.verdicts"
    done
    awk -v b="$board" -v m="$model" -v n="$current" '
      { c[$1]++; if ($2 != 0) r++ }
      END { printf "%-34s %-6s %8d %7d %7d %7d %13d\n", b, m, n, c["better"], c["worse"],
            c["inconclusive"], r }' "$OUT/$id.verdicts"
    sed "s/^/$model /" "$OUT/$id.verdicts" >> "$OUT/all.verdicts"
  done
done
echo
awk '{ n[$1]++; c[$1 " " $2]++ }
  END {
    for (m in n) printf "%s model: %d keys verified: %.0f%% better, %.0f%% worse (rolled back), %.0f%% inconclusive\n",
      m, n[m], 100 * c[m " better"] / n[m], 100 * c[m " worse"] / n[m], 100 * c[m " inconclusive"] / n[m]
  }' "$OUT/all.verdicts" | sort
kill -INT "$tuner_pid"
wait "$tuner_pid" || true
trap - EXIT
