#!/usr/bin/env bash
# Runs the test suite (or the tests matching a filter) N times in a row and
# prints, per test that ever failed, how often it failed (docs/testing.md).
#
#   tools/flake_hunt.sh [options] [BUILD]
#     --runs N        how many times (default 5)
#     --filter REGEX  only the tests ctest -R REGEX selects (default: all)
#     --stress        run under a stress-ng load for the whole hunt: a CPU
#                     worker and a sync(2) worker per core and one writer
#                     to a scratch file in BUILD's file system (installs
#                     Debian's stress-ng when missing)
#     --jobs J        ctest -j J (default: the number of cores)
#     --keep DIR      keep each failed run's output and JUnit file in DIR
#                     (default BUILD/flake-hunt)
#
# Prints one line per run as it ends (run, failures, seconds), then a table:
# TEST, RUNS, FAILED, RATE, sorted by failures; "0 failures in N runs" when
# none failed. Exit 0 when no test failed in any run, 1 otherwise, 2 for bad
# arguments.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

runs=5 filter="" stress=0 jobs=$(nproc) keep="" build=""
usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "flake_hunt: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) [ $# -ge 2 ] || die "--runs needs a number"; runs=$2; shift 2 ;;
    --filter) [ $# -ge 2 ] || die "--filter needs a regex"; filter=$2; shift 2 ;;
    --stress) stress=1; shift ;;
    --jobs) [ $# -ge 2 ] || die "--jobs needs a number"; jobs=$2; shift 2 ;;
    --keep) [ $# -ge 2 ] || die "--keep needs a directory"; keep=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) [ -z "$build" ] || die "one BUILD directory only (got '$build' and '$1')"; build=$1; shift ;;
  esac
done
build=${build:-build}
[[ "$runs" =~ ^[1-9][0-9]{0,3}$ ]] || die "--runs '$runs': a whole number from 1 to 9999"
[[ "$jobs" =~ ^[1-9][0-9]{0,2}$ ]] || die "--jobs '$jobs': a whole number from 1 to 999"
[ -f "$build/CTestTestfile.cmake" ] || die "'$build' is not a configured build directory (make build)"
keep=${keep:-$build/flake-hunt}
mkdir -p "$keep"
select=()
[ -n "$filter" ] && select=(-R "$filter")
total=$(ctest --test-dir "$build" -N "${select[@]}" | awk '/^Total Tests:/ {print $3}')
[ "${total:-0}" -gt 0 ] || die "no test matches '${filter}'"

stress_pid=""
cleanup() {
  if [ -n "$stress_pid" ]; then
    kill "$stress_pid" 2>/dev/null || true
    wait "$stress_pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ "$stress" = 1 ]; then
  "$here/install-deps.sh" stress-ng
  cores=$(nproc)
  # --io: sync(2) in a loop; --hdd: writes to a scratch file in BUILD's
  # file system, so the disk the capture tests trace is busy too.
  stress-ng --cpu "$cores" --io "$cores" --hdd 1 --hdd-bytes 64M \
    --temp-path "$keep" --timeout 0 >"$keep/stress-ng.log" 2>&1 &
  stress_pid=$!
  sleep 1
  kill -0 "$stress_pid" 2>/dev/null || { cat "$keep/stress-ng.log"; die "stress-ng did not start"; }
  echo "flake_hunt: under stress-ng --cpu $cores --io $cores --hdd 1 (pid $stress_pid)"
fi

echo "flake_hunt: $total tests x $runs runs, ctest -j $jobs${filter:+, filter '$filter'}"
declare -A failed_count=()
declare -A ran_count=()
any_failed=0
start_all=$(date +%s)
for run in $(seq "$runs"); do
  junit="$keep/run-$run.xml" out="$keep/run-$run.out"
  t0=$(date +%s)
  rc=0
  ctest --test-dir "$build" "${select[@]}" -j "$jobs" --output-on-failure \
    --output-junit "$(realpath "$junit")" >"$out" 2>&1 || rc=$?
  t1=$(date +%s)
  [ -s "$junit" ] || { cat "$out"; die "ctest wrote no results in run $run (exit $rc)"; }
  # One line per test case: its status (run, fail, notrun) and its name.
  mapfile -t rows < <(grep -o '<testcase name="[^"]*"[^>]*status="[a-z]*"' "$junit" |
    sed -E 's/^<testcase name="([^"]*)".*status="([a-z]*)"$/\2 \1/')
  fails=0
  for row in "${rows[@]}"; do
    status=${row%% *} name=${row#* }
    [ "$status" = notrun ] && continue
    ran_count[$name]=$(( ${ran_count[$name]:-0} + 1 ))
    if [ "$status" = fail ]; then
      failed_count[$name]=$(( ${failed_count[$name]:-0} + 1 ))
      fails=$((fails + 1))
    fi
  done
  if [ "$fails" -eq 0 ] && [ "$rc" -ne 0 ]; then
    # ctest failed without a failed test case (a crash of ctest itself,
    # a test that timed out without a record): count the run as failed.
    failed_count["(ctest exit $rc, run $run)"]=1
    ran_count["(ctest exit $rc, run $run)"]=1
    fails=1
  fi
  if [ "$fails" -gt 0 ]; then
    any_failed=1
  else
    rm -f "$junit" "$out"
  fi
  printf 'run %d/%d: %d failed of %d, %d s\n' "$run" "$runs" "$fails" "${#rows[@]}" $((t1 - t0))
done
elapsed=$(( $(date +%s) - start_all ))

echo
if [ "$any_failed" = 0 ]; then
  echo "0 failures in $runs runs of $total tests ($elapsed s)$([ "$stress" = 1 ] && echo ', under stress-ng')"
  exit 0
fi
printf '%-100s %5s %6s %6s\n' TEST RUNS FAILED RATE
for name in "${!failed_count[@]}"; do
  n=${ran_count[$name]} f=${failed_count[$name]}
  printf '%d\t%-100s %5d %6d %5d%%\n' "$f" "${name:0:100}" "$n" "$f" $((100 * f / n))
done | sort -t$'\t' -k1,1nr | cut -f2-
echo "failed runs' output and JUnit files: $keep ($elapsed s)"
exit 1
