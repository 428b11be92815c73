#!/usr/bin/env bash
# What live capture costs, per capture mode (root): the bundled O_DIRECT load
# runs at RATE requests/s alone and with the agent capturing the disk
# (--capture bpf, raw, text), alternating, REPEAT times each. Per run it reads
# over the steady middle of the run:
#  - the WHOLE MACHINE's busy CPU from /proc/stat (every CPU's time minus
#    its idle, iowait and steal; see machine_ticks), less the tuner's
#    process (the other end of the wire: a board does not run it; its
#    database is on tmpfs, so it adds no disk I/O): with the agent minus
#    alone is the capture's full
#    cost, including BPF programs and trace events in the I/O issuers' and the
#    IRQs' context, not just the agent process. Only meaningful on an
#    otherwise idle machine (a saturated one shows ~100% per CPU either way);
#  - the same restricted to what this I/O runs in: the load generator, the
#    agent, the kernel's threads (kworkers, ksoftirqd, IRQ threads) and the
#    irq + softirq time of /proc/stat. Other processes (a compiler next door)
#    are left out, but contention still inflates what the load itself uses:
#    on a busy machine it is a rough figure;
#  - the agent process's own CPU (user + system, /proc/PID/stat);
#  - bpf: the time the kernel ran the capture's BPF programs
#    (kernel.bpf_stats_enabled, run_time_ns of the stc_* programs this agent
#    loaded), exact whatever else runs, without the ~20-50 ns per call of
#    the tracepoint itself, in total and per program (runs per request and
#    ns per run). The statistics cost CPU themselves (two clock reads and a
#    counter update per program run), so they are taken in a second run of
#    the load with the same agent ("+stats"), not in the measured one;
#  - the agent's peak resident memory (VmHWM), less the BPF maps it maps
#    (bpf's histograms and .bss/.rodata: kernel memory, in the maps' figure,
#    whose pages the kernel maps all at once).
#
# A/B mode, for changes to the BPF programs: `live_cpu_bench.sh --ab BUILD
# OTHER_AGENT [RATE] [SECS]` runs BUILD's agent and OTHER_AGENT (another
# build's spintune-agent binary) in bpf mode capturing the same load at the
# same time, once with each started first (the first program at a tracepoint
# pays for the cache misses), and prints per program the runs per request and
# each agent's ns per run.
#
# Toggle mode, for a whole-machine figure with less noise: `live_cpu_bench.sh
# --toggle BUILD [RATE] [PAIRS] [MODE]` runs ONE load for the whole time and
# starts and stops the agent (MODE, default bpf) in alternate 12 s windows,
# measuring each window's seconds 4-11 (after the agent is up, before it
# stops). Separate load runs differ by up to 4% of a core from each other
# (the "alone" rows), which at 10,000 requests/s is +-4 us per request; within
# one run the windows move far less. Each window with the agent is compared
# with the mean of the windows without it on either side; it prints every
# window, then the mean difference per request with its standard error over
# the pairs, and their median (robust to a burst of other work in a window).
# Then the same adjusted for the disk's interrupts per second (its PCI
# device's MSI lines in /proc/interrupts): on this VM they explain most of
# the load's own window-to-window swing (the host's completion pattern).
# The slope comes from the windows without an agent. The adjustment holds
# only if the agent does not move the covariate itself, so the line also
# says how far it moved, with its standard error, and what that shift alone
# adds through the slope (a shift beyond its noise: read the raw line).
# With OTHER_AGENT (`--toggle BUILD RATE PAIRS MODE OTHER_AGENT`, another
# build's spintune-agent binary), the windows with an agent alternate between
# BUILD's (A) and OTHER_AGENT (B), and each is summed up apart: two builds'
# whole-machine cost from one load.
#
# Windows mode, for a capture's whole-machine figure with the least noise:
# `live_cpu_bench.sh --windows BUILD [RATE] [SECS] [ON/EVERY] [MODE]` runs ONE
# load and ONE agent for SECS (default 600) with `--capture MODE` (default
# bpf) and `--capture-windows ON/EVERY` (default 1s/2s): the capture runs
# (bpf's programs attached, raw's and text's events enabled) for ON of every
# EVERY, the windows starting at multiples of EVERY on the wall clock, and
# nothing of it runs in between. The machine's busy CPU (less the tuner's)
# and the agent's are sampled every 50 ms; each window's attached part (from
# 150 ms after its start to 50 ms before its end) is compared with the mean
# of the detached parts on either side (from 100 ms after the drain to 50 ms
# before the next window). Per traced request: attached minus detached,
# both less the agent process, plus the agent process's own CPU over the
# whole run (what it costs whether or not its programs run; without an
# agent at all the machine would not pay it). (Before 2026-12-06 the agent
# was counted in the parts: its reads once a second fell in them 0 to 1.5
# times per window depending on the phase of its start.) Hundreds of short pairs instead of tens of 12 s ones: the load's own
# swing is mostly slower than a window, so it cancels within a pair.
# `--windows BUILD RATE SECS ON/EVERY MODE null` checks the method: the agent
# captures all the time (--capture-windows all) and the same parts are
# compared, so the figure should be 0 within its standard error (beyond the
# agent's own share): a bias of the parts' positions in the window would
# show there.
set -euo pipefail
AB_OTHER=
TOGGLE=
TOGGLE_OTHER=
WINDOWS=
if [ "${1:-}" = --ab ]; then
  AB_OTHER=${3:?usage: live_cpu_bench.sh --ab BUILD OTHER_AGENT [RATE] [SECS]}
  set -- "$2" "${4:-10000}" "${5:-10}" 1 bpf
elif [ "${1:-}" = --windows ]; then
  WINDOWS=${5:-1s/2s}
  WINDOWS_NULL=${7:-}
  set -- "${2:?usage: live_cpu_bench.sh --windows BUILD [RATE] [SECS] [ON/EVERY] [MODE] [null]}" "${3:-10000}" "${4:-600}" 1 "${6:-bpf}"
elif [ "${1:-}" = --toggle ]; then
  TOGGLE=${4:-8}
  TOGGLE_OTHER=${6:-}
  set -- "${2:?usage: live_cpu_bench.sh --toggle BUILD [RATE] [PAIRS] [MODE] [OTHER_AGENT]}" "${3:-10000}" 0 1 "${5:-bpf}"
fi
BUILD=${1:-build}
RATE=${2:-10000}
SECS=${3:-20}
REPEAT=${4:-2}
MODES=${5:-"bpf raw text"}
# A run of the load is measured from its 3rd second to 3 s before its end.
if [ -z "$TOGGLE" ] && [ -z "$WINDOWS" ] && { ! [[ "$SECS" =~ ^[0-9]+$ ]] || [ "$SECS" -lt 10 ]; }; then
  echo "live_cpu_bench: SECS is $SECS; it must be 10 or more (the first and last 3 s are not measured)" >&2
  exit 2
fi
OUT=$BUILD/live-cpu-bench
HZ=$(getconf CLK_TCK)
[ "$(id -u)" -eq 0 ] || { echo "live_cpu_bench: needs root"; exit 1; }
rm -rf "$OUT"; mkdir -p "$OUT"
. "$(dirname "$0")/lib.sh"
disk=$(disk_under /var/tmp)
write_bench_platform "$OUT/platform.json"

# Busy jiffies of the whole machine so far: every CPU's time since the epoch
# minus its idle, iowait and steal time (the "cpu" line of /proc/stat). Not
# the sum of user + system + irq + softirq: with tick-based accounting
# (CONFIG_TICK_CPU_ACCOUNTING) and idle ticks stopped (NO_HZ_IDLE) those are
# sampled at ticks that a paced load's short bursts between idle periods
# mostly miss (the load alone read 1% of a core against the ~27% its own
# process is charged), while the idle time is measured at every idle entry
# and exit (get_cpu_idle_time_us), so what is not idle is exact.
machine_ticks() {
  awk -v t="$(now)" -v n="$(nproc)" -v hz="$HZ" '/^cpu / {printf "%.3f\n", n * hz * t - $5 - $6 - $9}' /proc/stat
}
# The machine's busy jiffies less the tuner's (the other end of the wire).
busy_ticks() { echo "$(machine_ticks) - $(proc_ticks "$tuner_pid")" | bc -l; }
# irq + softirq jiffies of the whole machine.
irq_ticks() { awk '/^cpu / {print $7 + $8}' /proc/stat; }
proc_ticks() { awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$1/stat"; }
# user + system jiffies of every kernel thread (parent kthreadd, pid 2).
kthread_ticks() {
  cat /proc/[0-9]*/stat 2>/dev/null | awk '{sub(/^.*\) /, ""); if ($2 == 2) t += $12 + $13} END {print t + 0}'
}
now() { date +%s.%N; }
# The disk's interrupt lines (its PCI device's MSI vectors), for toggle mode's
# covariate; empty where the disk has none (then no adjustment is made).
disk_irq_lines() {
  local d; d=$(readlink -f "/sys/block/$1/device" 2>/dev/null) || return 0
  for _ in 1 2 3 4; do
    [ -d "$d/msi_irqs" ] && { ls "$d/msi_irqs" | tr '\n' ' '; return 0; }
    d=$(dirname "$d")
  done
}
# Interrupts of those lines so far, over every CPU.
disk_irqs() {
  awk -v lines=" $irq_lines " -v n="$(nproc)" '
    { irq = $1; sub(/:$/, "", irq) }
    index(lines, " " irq " ") { for (i = 2; i <= n + 1; i++) t += $i }
    END { print t + 0 }' /proc/interrupts
}

# run_load [AGENT_PID]: runs the load; prints "requests_per_s machine_cpu attributed_cpu agent_cpu"
# (CPU-seconds per second).
run_load() {
  local agent=${1:-}
  "$BUILD/agent/spintune-ioload" --file /var/tmp/spintune-cpu-bench.bin --duration "$SECS" \
    --threads 4 --sizes 4096 --write-share 0.2 --fsync-every 0 --rate "$RATE" \
    >"$OUT/load.out" 2>&1 &
  local pid=$!
  sleep 3
  local m0 i0 k0 l0 a0=0 w0
  m0=$(busy_ticks); i0=$(irq_ticks); k0=$(kthread_ticks); l0=$(proc_ticks "$pid"); w0=$(now)
  [ -n "$agent" ] && a0=$(proc_ticks "$agent")
  sleep $((SECS - 6))
  local m1 i1 k1 l1 a1=0 w1
  m1=$(busy_ticks); i1=$(irq_ticks); k1=$(kthread_ticks); l1=$(proc_ticks "$pid"); w1=$(now)
  [ -n "$agent" ] && a1=$(proc_ticks "$agent")
  wait "$pid"
  local rps; rps=$(sed -n 's/.*(\([0-9]*\) requests\/s).*/\1/p' "$OUT/load.out")
  local span; span=$(echo "$HZ * ($w1 - $w0)" | bc -l)
  echo "$rps $(echo "($m1 - $m0) / $span" | bc -l)" \
    "$(echo "($i1 - $i0 + $k1 - $k0 + $l1 - $l0 + $a1 - $a0) / $span" | bc -l)" \
    "$(echo "($a1 - $a0) / $span" | bc -l)"
}

# Ids of the loaded stc_* programs (other captures may run too).
stc_prog_ids() {
  bpftool -j prog show 2>/dev/null | python3 -c '
import json, sys
print(" ".join(str(p["id"]) for p in json.load(sys.stdin) if p.get("name", "").startswith("stc_")))'
}
# bpf_prog_stats IDS: "name runs run_time_ns" of those programs so far.
bpf_prog_stats() {
  bpftool -j prog show 2>/dev/null | python3 -c '
import json, sys
ids = set(sys.argv[1].split())
for p in json.load(sys.stdin):
    if str(p["id"]) in ids:
        print(p["name"], p.get("run_cnt", 0), p.get("run_time_ns", 0))' "$1"
}
stats_was=$(sysctl -n kernel.bpf_stats_enabled 2>/dev/null || echo 0)

db_dir=$(mktemp -d /dev/shm/spintune-cpu-bench.XXXXXX)
start_tuner "$BUILD" "$db_dir"
agent_pid=
trap 'kill $tuner_pid 2>/dev/null || true; rm -rf "$db_dir"; [ -n "$agent_pid" ] && kill $agent_pid 2>/dev/null || true
      sysctl -qw kernel.bpf_stats_enabled="$stats_was" 2>/dev/null || true' EXIT
bpf_lines=()

# start_agent AGENT MODE LOG: starts AGENT capturing the disk with --capture
# MODE, logging to LOG; sets agent_pid once its session is up and it is
# capturing, or prints the log and exits.
start_agent() {
  "$1" --tuner "$addr" --source "tracefs:$disk" --capture "$2" --platform "$OUT/platform.json" \
    --state-dir "" --spool-dir "" --batch-size 4096 >"$3" 2>&1 &
  agent_pid=$!
  for _ in $(seq 100); do grep -qs "session up" "$3" && break; sleep 0.1; done
  grep -q "capture $2: measuring" "$3" || { echo "the agent did not start capturing with $2:"; cat "$3"; exit 1; }
}

# start_bpf_agent AGENT LOG: start_agent in bpf mode; also sets `ours` (the
# ids of the programs it loaded).
start_bpf_agent() {
  local before; before=" $(stc_prog_ids) "
  start_agent "$1" bpf "$2"
  ours=""
  for i in $(stc_prog_ids); do [[ "$before" == *" $i "* ]] || ours="$ours $i"; done
}

if [ -n "$AB_OTHER" ]; then
  printf "bpf programs of two agents capturing the same load: %s requests/s on %s, %s s per order\n" \
    "$RATE" "$disk" "$SECS"
  printf "  A: %s\n  B: %s\n" "$BUILD/agent/spintune-agent" "$AB_OTHER"
  for order in "A B" "B A"; do
    declare -A ids=()
    pids=()
    for who in $order; do
      bin=$BUILD/agent/spintune-agent; [ "$who" = B ] && bin=$AB_OTHER
      start_bpf_agent "$bin" "$OUT/agent-$who.log"
      ids[$who]=$ours; pids+=("$agent_pid")
    done
    agent_pid="${pids[*]}"
    sysctl -qw kernel.bpf_stats_enabled=1
    bpf_prog_stats "${ids[A]}" >"$OUT/A-0"; bpf_prog_stats "${ids[B]}" >"$OUT/B-0"
    run_load >/dev/null
    bpf_prog_stats "${ids[A]}" >"$OUT/A-1"; bpf_prog_stats "${ids[B]}" >"$OUT/B-1"
    sysctl -qw kernel.bpf_stats_enabled="$stats_was"
    kill -INT ${pids[*]}; wait ${pids[*]} || true; agent_pid=
    requests=$(sed -n 's/.*: \([0-9]*\) reads, \([0-9]*\) writes.*/\1 \2/p' "$OUT/load.out" | awk '{print $1 + $2}')
    printf "\n%s first (%d requests)\n%-24s %8s %8s %8s %8s\n" "${order%% *}" "$requests" program \
      "A runs" "A ns" "B runs" "B ns"
    awk -v req="$requests" '
      FNR == 1 { f++ }
      { who = (f <= 2) ? "A" : "B"; sign = (f % 2) ? -1 : 1
        c[who, $1] += sign * $2; t[who, $1] += sign * $3
        if (!($1 in seen)) { seen[$1] = 1; order[n++] = $1 } }
      END {
        for (i = 0; i < n; i++) {
          p = order[i]
          printf "%-24s", p
          for (w = 0; w < 2; w++) {
            who = w ? "B" : "A"; dc = c[who, p]; dt = t[who, p]; C[who] += dc; T[who] += dt
            if (dc > 0) printf " %8.2f %8.0f", dc / req, dt / dc; else printf " %8s %8s", "-", "-"
          }
          printf "\n"
        }
        printf "%-24s %8.2f %8.0f %8.2f %8.0f   (runs and ns per request)\n", "total",
          C["A"] / req, T["A"] / req, C["B"] / req, T["B"] / req
      }' "$OUT/A-0" "$OUT/A-1" "$OUT/B-0" "$OUT/B-1"
  done
  exit 0
fi

if [ -n "$WINDOWS" ]; then
  "$BUILD/agent/spintune-ioload" --file /var/tmp/spintune-cpu-bench.bin --duration "$((SECS + 8))" \
    --threads 4 --sizes 4096 --write-share 0.2 --fsync-every 0 --rate "$RATE" \
    >"$OUT/load.out" 2>&1 &
  load_pid=$!
  sleep 2
  "$BUILD/agent/spintune-agent" --tuner "$addr" --source "tracefs:$disk" --capture "$MODES" \
    --capture-windows "$([ "$WINDOWS_NULL" = null ] && echo all || echo "$WINDOWS")" --platform "$OUT/platform.json" --state-dir "" --spool-dir "" --batch-size 4096 \
    >"$OUT/agent-windows.log" 2>&1 &
  agent_pid=$!
  for _ in $(seq 100); do grep -qs "session up" "$OUT/agent-windows.log" && break; sleep 0.1; done
  grep -q "capture $MODES: measuring" "$OUT/agent-windows.log" || { echo "the agent did not start capturing:"; cat "$OUT/agent-windows.log"; exit 1; }
  drain=$(sed -n 's/.*completions followed for \([^ ]*\) after.*/\1/p' "$OUT/agent-windows.log")
  if [ "$WINDOWS_NULL" = null ]; then
    drain=200ms
    echo "NULL CHECK: the agent captures all the time; the parts are compared as if it did not"
  fi
  printf "live capture cost, windows mode: one load at %s requests/s on %s (4 threads of 4 KiB O_DIRECT I/O)\n" "$RATE" "$disk"
  printf "and one agent (--capture %s --capture-windows %s, drain %s) for %s s\n" "$MODES" \
    "$([ "$WINDOWS_NULL" = null ] && echo "all; compared as $WINDOWS" || echo "$WINDOWS")" "$drain" "$SECS"
  # Samples: wall time, machine busy CPU-s less the tuner's, the agent's CPU-s.
  python3 - "$SECS" "$tuner_pid" "$agent_pid" >"$OUT/samples" <<'PY'
import os, sys, time
secs, tuner, agent = float(sys.argv[1]), sys.argv[2], sys.argv[3]
hz = os.sysconf("SC_CLK_TCK")
def task_ns(pid):  # every thread's exact run time (schedstat), summed
    t = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            t += int(open(f"/proc/{pid}/task/{tid}/schedstat").read().split()[0])
        except (OSError, ValueError):
            pass  # a thread that just ended
    return t
def sample():
    with open("/proc/stat") as f:
        cpu = f.readline().split()
    now = time.time()  # the wall clock, which the windows follow
    mono = time.clock_gettime(time.CLOCK_BOOTTIME)
    idle = (int(cpu[4]) + int(cpu[5]) + int(cpu[8])) / hz  # idle + iowait + steal
    busy = os.cpu_count() * mono - idle
    return now, busy - task_ns(tuner) / 1e9, task_ns(agent) / 1e9
end = time.time() + secs
while time.time() < end:
    print("%.4f %.6f %.6f" % sample(), flush=True)
    time.sleep(0.05 - time.time() % 0.05)
PY
  kill -INT "$agent_pid"; wait "$agent_pid" || true; agent_pid=
  wait "$load_pid"
  rps=$(sed -n 's/.*(\([0-9]*\) requests\/s).*/\1/p' "$OUT/load.out")
  python3 - "$OUT/samples" "$WINDOWS" "$drain" "$rps" "$WINDOWS_NULL" <<'PY'
import bisect, re, statistics, sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
def seconds(text):
    total = 0.0
    for n, unit in re.findall(r"([0-9.]+)(ms|us|s|m)", text):
        total += float(n) * {"ms": 1e-3, "us": 1e-6, "s": 1, "m": 60}[unit]
    return total
on, every = (seconds(x) for x in sys.argv[2].split("/"))
drain, rps = seconds(sys.argv[3]), float(sys.argv[4])
times = [r[0] for r in rows]
def at(t, col):  # a counter at time t, linear between samples
    i = bisect.bisect_left(times, t)
    if i == 0 or i >= len(rows):
        return None
    (t0, *a), (t1, *b) = rows[i - 1], rows[i]
    return a[col] + (b[col] - a[col]) * (t - t0) / (t1 - t0)
def rate(t0, t1, col):
    a, b = at(t0, col), at(t1, col)
    return None if a is None or b is None else (b - a) / (t1 - t0)
first = int(times[0] // every) + 1
last = int(times[-1] // every) - 1
# The machine less the agent process, per part: what the programs (or
# trace events) add in the I/O path and IRQs. The agent's own CPU comes in
# as its mean over the whole run: its work to a schedule (a histogram read
# a second) falls in an attached part, a detached one or neither depending
# on the phase of its start, so per part it would count 0 to 1.5 times.
def rest(t0, t1):
    m, a = rate(t0, t1, 0), rate(t0, t1, 1)
    return None if m is None or a is None else m - a
att, det = {}, {}
for k in range(first, last + 1):
    w = k * every
    att[k] = rest(w + 0.15, w + on - 0.05)
    det[k] = rest(w + on + drain + 0.1, w + every - 0.05)
agent = (rows[-1][2] - rows[0][2]) / (rows[-1][0] - rows[0][0])
path = []  # per traced request, in the I/O path and IRQs
for k in range(first + 1, last + 1):
    if None in (att[k], det[k - 1], det[k]):
        continue
    path.append((att[k] - (det[k - 1] + det[k]) / 2) / rps * 1e6)
n = len(path)
if n < 2:
    sys.exit("windows mode: fewer than two windows measured")
agent_us = agent / rps * 1e6
se = statistics.stdev(path) / n ** 0.5
print("%d windows at %d requests/s: whole machine (less the tuner) per traced request: mean %+.2f us "
      "(standard error %.2f), median %+.2f us; of it the agent process %.2f us (its mean over the run)"
      % (n, rps, statistics.mean(path) + agent_us, se, statistics.median(path) + agent_us, agent_us))
turns = ("" if len(sys.argv) > 5 and sys.argv[5] else
         "; the agent's mean includes attaching and detaching its programs at every window's "
         "turns, which an agent capturing all the time does not do")
print("  in the I/O path and IRQs (the machine less the tuner and the agent): mean %+.2f us "
      "(standard error %.2f), median %+.2f us%s"
      % (statistics.mean(path), se, statistics.median(path), turns))
print("machine busy (less the tuner and the agent), %% of a core: attached %.1f, detached %.1f (mean of the windows)"
      % (100 * statistics.mean(a for a in att.values() if a is not None),
         100 * statistics.mean(d for d in det.values() if d is not None)))
PY
  exit 0
fi

if [ -n "$TOGGLE" ]; then
  win=12
  sleep_until() { local d; d=$(echo "$1 - $(now)" | bc -l); [[ "$d" == -* ]] || sleep "$d"; }
  windows=$((2 * TOGGLE + 1))  # off, on, off, ..., off
  SECS=$((windows * win + 4))
  "$BUILD/agent/spintune-ioload" --file /var/tmp/spintune-cpu-bench.bin --duration "$SECS" \
    --threads 4 --sizes 4096 --write-share 0.2 --fsync-every 0 --rate "$RATE" \
    >"$OUT/load.out" 2>&1 &
  load_pid=$!
  sleep 2
  printf "live capture cost, toggle mode: one load at %s requests/s on %s (4 threads of 4 KiB O_DIRECT I/O);\n" \
    "$RATE" "$disk"
  printf "the agent (--capture %s) on in alternate %d s windows, seconds 4-11 of each measured\n" "$MODES" "$win"
  irq_lines=$(disk_irq_lines "$disk")
  printf "%6s %5s %8s %8s %10s\n" window agent "CPU %" "agent %" "disk IRQ/s"
  : >"$OUT/windows"
  for w in $(seq "$windows"); do
    w0=$(now)
    # 0: no agent; 1: BUILD's (A); 2: OTHER_AGENT (B), every other time.
    on=$((w % 2 == 0))
    bin=$BUILD/agent/spintune-agent
    if [ "$on" = 1 ] && [ -n "$TOGGLE_OTHER" ] && [ $((w % 4)) = 0 ]; then bin=$TOGGLE_OTHER; on=2; fi
    [ "$on" != 0 ] && start_agent "$bin" "$MODES" "$OUT/agent-toggle.log"
    sleep_until "$(echo "$w0 + 4" | bc -l)"
    m0=$(busy_ticks); t0=$(now); a0=0; q0=$(disk_irqs)
    [ "$on" != 0 ] && a0=$(proc_ticks "$agent_pid")
    sleep_until "$(echo "$w0 + 11" | bc -l)"
    m1=$(busy_ticks); t1=$(now); a1=0; q1=$(disk_irqs)
    [ "$on" != 0 ] && a1=$(proc_ticks "$agent_pid")
    if [ "$on" != 0 ]; then kill -INT "$agent_pid"; wait "$agent_pid" || true; agent_pid=; fi
    span=$(echo "$HZ * ($t1 - $t0)" | bc -l)
    busy=$(echo "($m1 - $m0) / $span" | bc -l); agent=$(echo "($a1 - $a0) / $span" | bc -l)
    irqs=$(echo "($q1 - $q0) * $HZ / $span" | bc -l)
    echo "$w $on $busy $agent $irqs" >>"$OUT/windows"
    printf "%6d %5s %8.1f %8s %10.0f\n" "$w" "$(case $on in 0) echo off;; 1) echo A;; 2) echo B;; esac)" \
      "$(echo "$busy * 100" | bc -l)" "$([ "$on" != 0 ] && printf "%.1f" "$(echo "$agent * 100" | bc -l)" || echo -)" \
      "$irqs"
    sleep_until "$(echo "$w0 + $win" | bc -l)"
  done
  wait "$load_pid"
  rps=$(sed -n 's/.*(\([0-9]*\) requests\/s).*/\1/p' "$OUT/load.out")
  [ -n "$TOGGLE_OTHER" ] && printf "A: %s\nB: %s\n" "$BUILD/agent/spintune-agent" "$TOGGLE_OTHER"
  for who in 1 2; do
    awk -v rps="$rps" -v who="$who" -v name="$([ -n "$TOGGLE_OTHER" ] && { [ "$who" = 1 ] && echo "A: " || echo "B: "; })" '
      # Mean, standard error and median of the pairs in d[1..k].
      function summary(d, k,    i, j, s, ss, t, mean, med) {
        for (i = 1; i <= k; i++) { s += d[i]; ss += d[i] * d[i] }
        mean = s / k
        # The median too: a burst of other work in one window moves the mean, not it.
        for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (d[j] < d[i]) { t = d[i]; d[i] = d[j]; d[j] = t }
        med = k % 2 ? d[(k + 1) / 2] : (d[k / 2] + d[k / 2 + 1]) / 2
        return sprintf("mean %+.2f us (standard error %.2f), median %+.2f us", mean,
                       k > 1 ? sqrt((ss - k * mean * mean) / (k - 1) / k) : 0, med)
      }
      { state[$1] = $2; busy[$1] = $3; agent[$1] = $4; irq[$1] = $5; n = $1 }
      END {
        # The slope of busy CPU on disk IRQs/s, over the windows without an agent.
        for (w = 1; w <= n; w += 2) { m++; mx += irq[w]; my += busy[w] }
        mx /= m; my /= m
        for (w = 1; w <= n; w += 2) { sxy += (irq[w] - mx) * (busy[w] - my); sxx += (irq[w] - mx) ^ 2 }
        b = sxx > 0 ? sxy / sxx : 0
        for (w = 2; w < n; w += 2) {
          if (state[w] != who) continue
          k++
          raw[k] = (busy[w] - (busy[w - 1] + busy[w + 1]) / 2) / rps * 1e6
          dirq = irq[w] - (irq[w - 1] + irq[w + 1]) / 2
          adj[k] = raw[k] - b * dirq / rps * 1e6
          shift += dirq / rps; shift2 += (dirq / rps) ^ 2; ag += agent[w] / rps * 1e6
        }
        if (k == 0) exit
        printf "%s%d pairs at %d requests/s: whole machine (less the tuner) per traced request: %s; agent process %.2f us\n",
          name, k, rps, summary(raw, k), ag / k
        shift /= k
        shift_se = k > 1 ? sqrt((shift2 - k * shift * shift) / (k - 1) / k) : 0
        if (sxx > 0)
          printf "%s  adjusted for the disk'"'"'s IRQs: %s (slope %.1f us of CPU per IRQ over the %d windows without an agent; the agent moved the disk'"'"'s IRQs by %+.4f per request, standard error %.4f: %+.2f us through the slope)\n",
            name, summary(adj, k), b * 1e6, m, shift, shift_se, b * shift * 1e6
      }' "$OUT/windows"
  done
  exit 0
fi

printf "live capture cost at %s requests/s on %s (%s s runs, 4 threads of 4 KiB O_DIRECT I/O, %s x each)\n" \
  "$RATE" "$disk" "$SECS" "$REPEAT"
printf "%-5s %-5s %10s %14s %21s %13s %9s\n" "" "" "" "whole machine" "load+agent+kernel" "agent" ""
printf "%-5s %-5s %10s %6s %7s %6s %7s %7s %5s %7s %7s\n" mode run "req/s" "CPU %" "+us/req" \
  "CPU %" "+us/req" "CPU %" "us/req" "" "RSS MiB"
for r in $(seq "$REPEAT"); do
  for mode in $MODES; do
    read -r base_rps base_m base_a _ < <(run_load)
    if [ "$mode" = bpf ]; then
      start_bpf_agent "$BUILD/agent/spintune-agent" "$OUT/agent-$mode.log"
    else
      start_agent "$BUILD/agent/spintune-agent" "$mode" "$OUT/agent-$mode.log"
    fi
    # The measured run has kernel.bpf_stats_enabled off, as an agent in the
    # field runs: with it on, every program run also reads the clock twice
    # and updates the program's counters (the "+stats" row below shows what
    # that adds).
    read -r rps m a agent_cpu < <(run_load "$agent_pid")
    if [ "$mode" = bpf ]; then
      sysctl -qw kernel.bpf_stats_enabled=1
      bpf_prog_stats "$ours" >"$OUT/bpf-stats-0"
      read -r s_rps s_m s_a s_agent_cpu < <(run_load "$agent_pid")
      # Kernel memory of the capture's maps (not in the agent's RSS).
      map_kib=$( { bpftool -j prog show; echo; bpftool -j map show; } 2>/dev/null | python3 -c '
import json, sys
progs, maps = [json.loads(l) for l in sys.stdin.read().split("\n") if l.strip()]
ours = set(sys.argv[1].split())
ids = {i for p in progs if str(p["id"]) in ours for i in p.get("map_ids", [])}
print(sum(m.get("bytes_memlock", 0) for m in maps if m["id"] in ids) // 1024)' "$ours")
      bpf_prog_stats "$ours" >"$OUT/bpf-stats-1"
      sysctl -qw kernel.bpf_stats_enabled="$stats_was"
      requests=$(sed -n 's/.*: \([0-9]*\) reads, \([0-9]*\) writes.*/\1 \2/p' "$OUT/load.out" | awk '{print $1 + $2}')
      # Per program and in total: runs per request, ns per run, ns per request.
      bpf_lines+=("$(awk -v req="$requests" -v maps="$map_kib" '
        NR == FNR { c0[$1] += $2; t0[$1] += $3; next }
        { c[$1] += $2; t[$1] += $3; if (!($1 in seen)) { seen[$1] = 1; order[n++] = $1 } }
        END {
          for (i = 0; i < n; i++) {
            p = order[i]; dc = c[p] - c0[p]; dt = t[p] - t0[p]; C += dc; T += dt
            if (dc > 0) lines = lines sprintf("\n  %-24s %5.2f runs/req %6.0f ns/run %6.0f ns/req", p, dc / req, dt / dc, dt / req)
          }
          printf "bpf programs: %.0f ns and %.1f runs per request (%d requests, whole run); maps %d KiB of kernel memory%s",
            T / req, C / req, req, maps, lines
        }' "$OUT/bpf-stats-0" "$OUT/bpf-stats-1")")
    fi
    map_rss=$(awk '/^[0-9a-f]+-[0-9a-f]+ / {m = ($NF == "anon_inode:bpf-map")} m && /^Rss:/ {s += $2}
      END {print s + 0}' "/proc/$agent_pid/smaps")
    rss=$(awk -v maps="$map_rss" '/VmHWM/ {printf "%.1f", ($2 - maps) / 1024}' "/proc/$agent_pid/status")
    kill -INT "$agent_pid"; wait "$agent_pid" || true; agent_pid=
    printf "%-5s %-5s %10s %6.1f %7s %6.1f %7s %7s %5s %7s %7s\n" "$mode" alone "$base_rps" \
      "$(echo "$base_m * 100" | bc -l)" - "$(echo "$base_a * 100" | bc -l)" - - "" - -
    # Extra CPU per traced request, and the agent's own.
    printf "%-5s %-5s %10s %6.1f %7.2f %6.1f %7.2f %7.1f %5.2f %7s %7s\n" "$mode" "+cap" "$rps" \
      "$(echo "$m * 100" | bc -l)" "$(echo "($m - $base_m) / $rps * 1000000" | bc -l)" \
      "$(echo "$a * 100" | bc -l)" "$(echo "($a - $base_a) / $rps * 1000000" | bc -l)" \
      "$(echo "$agent_cpu * 100" | bc -l)" "$(echo "$agent_cpu / $rps * 1000000" | bc -l)" "" "$rss"
    if [ "$mode" = bpf ]; then
      # The same with the programs' run-time statistics on (the programs' line).
      printf "%-5s %-5s %10s %6.1f %7.2f %6.1f %7.2f %7.1f %5.2f %7s %7s\n" "$mode" "+stats" "$s_rps" \
        "$(echo "$s_m * 100" | bc -l)" "$(echo "($s_m - $base_m) / $s_rps * 1000000" | bc -l)" \
        "$(echo "$s_a * 100" | bc -l)" "$(echo "($s_a - $base_a) / $s_rps * 1000000" | bc -l)" \
        "$(echo "$s_agent_cpu * 100" | bc -l)" "$(echo "$s_agent_cpu / $s_rps * 1000000" | bc -l)" "" "$rss"
    fi
  done
done
for l in "${bpf_lines[@]}"; do echo "$l"; done
echo "(CPU % is of one core, summed over the machine's $(nproc) CPUs; +us/req: with the agent"
echo " minus alone, per traced request)"

# Installed size: the agent binary (stripped) and the shared libraries it
# loads. One binary serves every mode, so all of them are needed to start it;
# the libraries only one mode uses are listed apart.
strip -o "$OUT/spintune-agent.stripped" "$BUILD/agent/spintune-agent"
bpf_obj=$(stat -c %s "$BUILD/agent/capture/bpf/capture.bpf.o" 2>/dev/null || echo 0)
libs=$(ldd "$BUILD/agent/spintune-agent" | awk '/=> \// {print $3}' | xargs -r readlink -f | sort -u)
lib_size() { [ -n "$1" ] && du -cb $1 | tail -1 | cut -f1 || echo 0; }
bpf_libs=$(echo "$libs" | grep -E 'libbpf|libelf' || true)
raw_libs=$(echo "$libs" | grep -E 'libtracefs|libtraceevent' || true)
printf "\nagent footprint: binary %.1f MiB stripped (BPF object %.0f KiB inside), %d shared libraries %.1f MiB\n" \
  "$(echo "$(stat -c %s "$OUT/spintune-agent.stripped") / 1048576" | bc -l)" \
  "$(echo "$bpf_obj / 1024" | bc -l)" "$(echo "$libs" | wc -l)" \
  "$(echo "$(lib_size "$libs") / 1048576" | bc -l)"
printf "  used by bpf only: %s (%.0f KiB); by raw only: %s (%.0f KiB)\n" \
  "$(echo $bpf_libs | xargs -rn1 basename | tr '\n' ' ')" "$(echo "$(lib_size "$bpf_libs") / 1024" | bc -l)" \
  "$(echo $raw_libs | xargs -rn1 basename | tr '\n' ' ')" "$(echo "$(lib_size "$raw_libs") / 1024" | bc -l)"
