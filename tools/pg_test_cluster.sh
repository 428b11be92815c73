#!/usr/bin/env bash
# A throw-away PostgreSQL cluster for the tests (storage/pg_test_cluster.h).
#   pg_test_cluster.sh start STATE   initdb into a new temp directory, start the
#                                    server on a Unix socket there (no TCP), write
#                                    the directory into the file STATE
#   pg_test_cluster.sh stop STATE    stop it (immediate, then SIGKILL after 10 s)
#                                    and remove the directory
#   pg_test_cluster.sh pause STATE   stop the server as a crash would (immediate),
#                                    keeping the cluster (a test's database outage)
#   pg_test_cluster.sh resume STATE  start it again
# Run as root (CI), the cluster belongs to Debian's unprivileged `postgres`
# user (runuser). Without a PostgreSQL server installed, start says so, writes
# no STATE and exits 0: the tests that need it skip.
set -euo pipefail
action=${1:?start or stop}
state=${2:?state file}

bindir=${PG_BINDIR-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)}
as_owner=()
if [[ $(id -u) -eq 0 ]]; then as_owner=(runuser -u postgres --); fi

stop_cluster() {
  local dir=$1
  if [[ -f $dir/data/postmaster.pid && -n $bindir ]]; then
    # Immediate: the cluster is thrown away, no shutdown checkpoint needed.
    "${as_owner[@]}" "$bindir/pg_ctl" -D "$dir/data" -m immediate -t 10 -w stop >/dev/null 2>&1 ||
      { pid=$(head -n 1 "$dir/data/postmaster.pid" 2>/dev/null || true);
        [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null || true; }
  fi
  rm -rf "$dir"
}

start_server() {
  "${as_owner[@]}" "$bindir/pg_ctl" -D "$1/data" -l "$1/server.log" -w -t 30 \
    -o "$(cat "$1/options")" start >/dev/null
}

case $action in
start)
  if [[ -s $state ]]; then stop_cluster "$(cat "$state")"; fi  # left by a killed run
  rm -f "$state"
  if [[ -z $bindir || ! -x $bindir/postgres ]]; then
    echo "pg_test_cluster: no PostgreSQL server in /usr/lib/postgresql/*/bin (Debian package postgresql): PostgreSQL tests skip"
    exit 0
  fi
  if [[ $(id -u) -eq 0 ]] && ! id postgres >/dev/null 2>&1; then
    echo "pg_test_cluster: running as root and there is no user 'postgres' to own the cluster: PostgreSQL tests skip"
    exit 0
  fi
  dir=$(mktemp -d /tmp/spintune-pg.XXXXXX)
  chmod 700 "$dir"
  [[ $(id -u) -eq 0 ]] && chown postgres: "$dir"
  trap 'stop_cluster "$dir"' ERR
  "${as_owner[@]}" "$bindir/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C \
    --no-sync >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log"; false; }
  # One role logs in with a password (the wrong-password test); the rest is
  # trusted on the socket, which only this user can reach.
  { echo "local all spintune_pw scram-sha-256"; cat "$dir/data/pg_hba.conf"; } >"$dir/hba"
  "${as_owner[@]}" cp "$dir/hba" "$dir/data/pg_hba.conf"
  # No fsync: no test crashes the machine. Commits still wait for their WAL
  # write (synchronous_commit stays on), so a server crash (pause) loses no
  # acknowledged batch.
  # PG_DURABLE=1 (benchmarks): fsync as in production.
  nosync="-c fsync=off -c full_page_writes=off"
  [[ ${PG_DURABLE:-0} == 1 ]] && nosync=""
  echo "-c listen_addresses= -k $dir $nosync -c max_connections=300" >"$dir/options"
  start_server "$dir" || { cat "$dir/server.log"; false; }
  "${as_owner[@]}" "$bindir/psql" -q -h "$dir" -U postgres -d postgres \
    -c "CREATE ROLE spintune_pw LOGIN CREATEDB PASSWORD 'right'" >/dev/null
  echo "$dir" >"$state"
  echo "pg_test_cluster: PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') on socket $dir"
  ;;
stop)
  if [[ -s $state ]]; then stop_cluster "$(cat "$state")"; fi
  rm -f "$state"
  ;;
pause)
  "${as_owner[@]}" "$bindir/pg_ctl" -D "$(cat "$state")/data" -m immediate -t 10 -w stop >/dev/null
  ;;
resume)
  start_server "$(cat "$state")"
  ;;
*)
  echo "usage: $0 start|stop|pause|resume STATE" >&2
  exit 2
  ;;
esac
