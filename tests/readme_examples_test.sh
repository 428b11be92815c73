#!/bin/bash
# Runs the README's example command lines (its ```sh blocks, in order, in one
# scratch directory) against the built binaries and checks that each exits 0.
#
# Adjusted, and only this: `build/`, `tests/` and `driver/` resolve through
# symlinks in the scratch directory to the build and source trees, and the
# variable assignments (T=...) carry over to the lines after them, and the
# first `spintune-tuner --listen 127.0.0.1:50051` runs in the background on
# a free port (port 0) that replaces 50051 in the commands after it.
# Skipped, with the reason printed: make targets (they are CI's own steps),
# sudo (a live capture), anything beyond loopback (0.0.0.0, tuner.example,
# TLS files the README does not create) and the second tuner (a fixed
# metrics port and a config file of the operator's).
#
# Usage: readme_examples_test.sh SOURCE_DIR BUILD_DIR
set -u
src=$1
build=$2
work=$(mktemp -d)
tuner_pid=
cleanup() {
  if [ -n "$tuner_pid" ]; then kill "$tuner_pid" 2>/dev/null; wait "$tuner_pid" 2>/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT
ln -s "$build" "$work/build"
ln -s "$src/tests" "$work/tests"
ln -s "$src/driver" "$work/driver"

# One command per line: the sh blocks' lines, continuations joined, comments
# and blank lines dropped.
awk '/^ *```sh *$/ {inblock=1; next} /^ *```/ {inblock=0; next}
     inblock {sub(/^   /, ""); print}' "$src/README.md" |
  awk '{ if (sub(/\\$/, "")) { acc = acc $0; next } print acc $0; acc = "" }' |
  grep -v '^ *#' | grep -v '^ *$' > "$work/commands.txt"

failures=0
ran=0
address=
cd "$work" || exit 1
while IFS= read -r cmd; do
  reason=
  case "$cmd" in
    make\ *) reason="a make target" ;;
    sudo\ *) reason="root: a live capture" ;;
    *0.0.0.0*|*tuner.example*) reason="beyond loopback" ;;
  esac
  if [ -z "$reason" ] && [[ "$cmd" == build/tuner/spintune-tuner* ]]; then
    if [ -n "$tuner_pid" ] || [[ "$cmd" != *"--listen 127.0.0.1:50051"* ]]; then
      reason="a second tuner (fixed ports, the operator's config file)"
    else
      ${cmd/127.0.0.1:50051/127.0.0.1:0} > tuner.out 2> tuner.log &
      tuner_pid=$!
      for _ in $(seq 100); do
        address=$(sed -n 's/^listening on \(127\.0\.0\.1:[0-9]*\).*/\1/p' tuner.out)
        [ -n "$address" ] && break
        sleep 0.1
      done
      if [ -z "$address" ]; then
        echo "FAIL (no tuner address): $cmd"; cat tuner.log; exit 1
      fi
      echo "started: $cmd (on $address)"
      continue
    fi
  fi
  if [ -n "$reason" ]; then
    echo "skipped ($reason): $cmd"
    continue
  fi
  # A variable the lines after it use (each line runs in its own shell).
  if [[ "$cmd" =~ ^[A-Za-z_][A-Za-z0-9_]*=[^\ ]*$ ]]; then
    export "${cmd?}"
    continue
  fi
  run=$cmd
  [ -n "$address" ] && run=${run//127.0.0.1:50051/$address}
  ran=$((ran + 1))
  if timeout 120 bash -c "$run" > out.txt 2> err.txt; then
    echo "ok: $cmd"
  else
    rc=$?
    failures=$((failures + 1))
    echo "FAIL (exit $rc): $cmd"
    tail -5 err.txt
  fi
done < "$work/commands.txt"

# Every binary's --version.
for b in cli/spintune tuner/spintune-tuner agent/spintune-agent agent/spintune-ioload; do
  ran=$((ran + 1))
  if ! "$build/$b" --version | grep -q '^[0-9]'; then
    failures=$((failures + 1))
    echo "FAIL: $b --version"
  fi
done

echo "$ran commands, $failures failed"
[ "$ran" -ge 30 ] || { echo "FAIL: fewer commands than the README has"; exit 1; }
[ "$failures" -eq 0 ]
