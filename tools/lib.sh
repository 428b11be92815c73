# Shell helpers shared by the demo and benchmark scripts (sourced).

# start_tuner BUILD OUT [FLAG...]: starts spintune-tuner on a free loopback
# port with the database OUT/spintune.db (and FLAGs); sets tuner_pid and
# addr, or prints the tuner's log and exits.
start_tuner() {
  local build=$1 out=$2
  start_server "$out" "$build/tuner/spintune-tuner" --listen 127.0.0.1:0 \
    --db "$out/spintune.db" "${@:3}"
}

# start_server OUT COMMAND...: starts COMMAND, a server that prints
# "... listening on ADDR", with its output in OUT/tuner.out and OUT/tuner.log;
# sets tuner_pid and addr, or prints its log and exits.
start_server() {
  local out=$1; shift
  "$@" >"$out/tuner.out" 2>"$out/tuner.log" &
  tuner_pid=$!
  for _ in $(seq 100); do
    grep -q "listening on" "$out/tuner.out" 2>/dev/null && break
    kill -0 "$tuner_pid" 2>/dev/null || { cat "$out/tuner.log"; exit 1; }
    sleep 0.1
  done
  addr=$(awk '/listening on/ {print $NF; exit}' "$out/tuner.out")
  [ -n "$addr" ] || { echo "$1 did not start:"; cat "$out/tuner.log"; exit 1; }
}

# stop_pid PID: stops process PID (empty: none) and waits for it, quietly.
stop_pid() {
  [ -n "$1" ] && kill "$1" 2>/dev/null && wait "$1" 2>/dev/null || true
}

# disk_under PATH: the block disk holding PATH (a partition's parent disk).
disk_under() {
  local src pk
  src=$(findmnt -no SOURCE -T "$1")
  pk=$(lsblk -no PKNAME "$src" 2>/dev/null | head -1 || true)
  echo "${pk:-$(basename "$src")}"
}

# write_bench_platform FILE: the platform costs the capture benchmarks give
# their agents (--platform), so that they do not probe the host each start.
write_bench_platform() {
  cat >"$1" <<'JSON'
{"irq_cpu_ns": 8000, "irq_wake_ns": 60000, "poll_read_ns": 200,
 "timer_cpu_ns": 15000, "timer_wake_ns": 15000}
JSON
}
