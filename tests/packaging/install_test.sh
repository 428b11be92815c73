#!/usr/bin/env bash
# The Debian packages and `make install`, checked without containers:
#
#   install_test.sh debs BUILD      cpack builds the four .debs into BUILD/packaging-test/debs
#   install_test.sh CHECK BUILD     one check on them (after `debs`):
#     install     dpkg --root into a scratch root: every package configured, the
#                 conffiles registered, each binary's --version is the project's,
#                 every Depends satisfiable on this machine (apt-get --simulate)
#     config      the example configurations start the installed binaries
#     units       systemd-analyze verify accepts the units (ExecStart pointed at
#                 the scratch root's binaries)
#     man         every man page renders without warnings and holds its options
#                 (and, for spintune, every subcommand)
#     completion  the installed bash completion completes subcommands, options,
#                 profile actions and simulated boards
#     kernel      spintune-dev's module sources build with its kernel/build.sh
#                 against Debian's kernel headers (skip without them)
#     destdir     `make install` (cmake --install) into a DESTDIR: same layout
#                 under the prefix, configurations in /etc/spintune, kept
#                 when edited
set -euo pipefail
check=${1:?usage: install_test.sh debs|install|config|units|man|completion|kernel|destdir BUILD}
BUILD=$(cd "${2:?usage: install_test.sh CHECK BUILD}" && pwd)
OUT=$BUILD/packaging-test
DEBS=$OUT/debs
VERSION=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$BUILD/CMakeCache.txt")
BINARIES="spintune-tuner spintune-agent spintune-ioload spintune"
fail() { echo "FAIL: $*" >&2; exit 1; }

# A scratch root of its own for this check, with the packages installed.
scratch_root() {
  root=$OUT/root-$check
  rm -rf "$root"
  mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
  touch "$root/var/lib/dpkg/status"
  # The libraries they depend on are this machine's, not the scratch root's.
  dpkg --root="$root" --force-depends -i "$DEBS"/*.deb >"$root.log" 2>&1 ||
    { cat "$root.log"; fail "dpkg --root -i"; }
}

case $check in
  debs)
    rm -rf "$DEBS"
    (cd "$BUILD" && cpack -B "$DEBS") >"$OUT.cpack.log" 2>&1 || { cat "$OUT.cpack.log"; fail cpack; }
    for p in tuner agent cli dev; do
      ls "$DEBS"/spintune-${p}_"$VERSION"_*.deb >/dev/null || fail "no spintune-$p .deb"
    done
    ls -l "$DEBS"/*.deb
    ;;

  install)
    scratch_root
    for p in tuner agent cli dev; do
      status=$(dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Status} ${Version}' "spintune-$p")
      [ "$status" = "install ok installed $VERSION" ] || fail "spintune-$p: $status"
    done
    for p in tuner agent; do
      dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Conffiles}' "spintune-$p" |
        grep -q "^ /etc/spintune/$p.toml " || fail "spintune-$p: /etc/spintune/$p.toml is not a conffile"
    done
    for b in $BINARIES; do
      v=$("$root/usr/bin/$b" --version) || fail "$b --version exited $?"
      [ "$v" = "$VERSION" ] || fail "$b --version printed '$v', not $VERSION"
      echo "$b --version: $v"
    done
    for h in policy table ab blob wait compat shm; do
      [ -f "$root/usr/include/spintune/$h.h" ] || fail "no /usr/include/spintune/$h.h"
    done
    [ -f "$root/usr/src/spintune-$VERSION/kernel/spintune.c" ] || fail "no kernel module sources"
    [ -f "$root/usr/src/spintune-$VERSION/include/linux/spintune.h" ] || fail "no <linux/spintune.h>"
    # The installed headers compile as C on their own.
    echo '#include <spintune/wait.h>' |
      cc -std=gnu11 -Wall -Wextra -Werror -fsyntax-only -I"$root/usr/include" -x c - ||
      fail "the installed headers do not compile"
    # The Depends dpkg-shlibdeps wrote are packages this machine can install.
    apt-get --simulate -q install "$DEBS"/*.deb >"$root.apt.log" 2>&1 ||
      { cat "$root.apt.log"; fail "the packages' dependencies cannot be met"; }
    echo "dpkg --root: $(cd "$DEBS" && echo *.deb) installed and configured"
    ;;

  config)
    scratch_root
    # The agent's file parses (a typo would be exit 2) ...
    "$root/usr/bin/spintune-agent" --config "$root/etc/spintune/agent.toml" --list-boards \
      >/dev/null || fail "spintune-agent refuses /etc/spintune/agent.toml"
    # ... and the tuner serves with its own, on a scratch database and port.
    "$root/usr/bin/spintune-tuner" --config "$root/etc/spintune/tuner.toml" \
      --listen 127.0.0.1:0 --db "$root/tuner.db" >"$root/tuner.out" 2>"$root/tuner.err" &
    pid=$!
    for _ in $(seq 100); do
      grep -q "listening on" "$root/tuner.out" && break
      kill -0 $pid 2>/dev/null || { cat "$root/tuner.err"; fail "spintune-tuner refuses /etc/spintune/tuner.toml"; }
      sleep 0.1
    done
    grep -q "listening on 127.0.0.1:" "$root/tuner.out" || { kill $pid; fail "the tuner did not start"; }
    kill -TERM $pid
    wait $pid || fail "spintune-tuner exited $? on SIGTERM"
    grep -q "objective=balanced max_spin_ns=1000000" "$root/tuner.err" ||
      fail "the tuner did not take tuner.toml's settings: $(head -1 "$root/tuner.err")"
    echo "both example configurations accepted"
    ;;

  units)
    command -v systemd-analyze >/dev/null || { echo "skip: no systemd-analyze"; exit 77; }
    scratch_root
    mkdir -p "$root/verify"
    for unit in spintune-tuner spintune-agent; do
      # ExecStart names the binary; systemd finds it in /usr/bin or
      # /usr/local/bin, here it is in the scratch root.
      sed "s|^ExecStart=\([^ ]*\)|ExecStart=$root/usr/bin/\1|" \
        "$root/usr/lib/systemd/system/$unit.service" >"$root/verify/$unit.service"
      grep -q "^ExecStart=$root/usr/bin/$unit --config /etc/spintune/${unit#spintune-}.toml$" \
        "$root/verify/$unit.service" || fail "$unit: unexpected ExecStart"
    done
    out=$(systemd-analyze verify --man=no "$root"/verify/*.service 2>&1) || fail "$out"
    [ -z "$out" ] || fail "systemd-analyze verify: $out"
    echo "systemd-analyze verify: both units clean"
    ;;

  man)
    scratch_root
    for b in $BINARIES; do
      page=$root/usr/share/man/man1/$b.1.gz
      [ -f "$page" ] || fail "no man page $page"
      warnings=$(MANWIDTH=100 man --warnings -l "$page" 2>&1 >/dev/null)
      [ -z "$warnings" ] || fail "$b.1: $warnings"
      text=$(MANWIDTH=100 man -l "$page" 2>/dev/null | col -b)
      # Every long option the binary lists is in its page.
      for opt in $("$root/usr/bin/$b" --help | grep -o -- '--[a-z][a-z0-9-]*' | sort -u); do
        grep -q -- "$opt" <<<"$text" || fail "$b.1 lacks $opt"
      done
      grep -q "^SYNOPSIS" <<<"$text" || fail "$b.1 has no SYNOPSIS"
    done
    text=$(MANWIDTH=100 man -l "$root/usr/share/man/man1/spintune.1.gz" 2>/dev/null | col -b)
    for sub in tune targets policy header blob profiles report extract tokens; do
      grep -q "^   spintune $sub$" <<<"$text" || fail "spintune.1 has no section for $sub"
    done
    echo "man pages: $BINARIES"
    ;;

  completion)
    scratch_root
    # complete WORDS...: what the installed completion offers for the last word.
    complete_line() {
      PATH=$root/usr/bin:$PATH bash -c '
        source "$1/usr/share/bash-completion/completions/spintune"; shift
        COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; COMP_WORDBREAKS=$'"'"' \t\n"'"'"'"'"'"'"'"'"'><=;|&(:'"'"'
        _spintune; echo "${COMPREPLY[*]}"' _ "$root" "$@"
    }
    expect() {
      local want=$1; shift
      local got; got=$(complete_line "$@")
      [ "$got" = "$want" ] || fail "completing '$*': got '$got', want '$want'"
      echo "'$*' -> $got"
    }
    expect "profiles" spintune pro
    expect "save list show diff export import rollback delete" spintune --db x.db profiles ""
    expect "--objective" spintune tune --obj
    expect "cpu balanced latency" spintune tune --objective ""
    expect "--listen" spintune-tuner --lis
    expect "warn" spintune-agent --log-level w
    expect "--file-mb" spintune-ioload --file-m
    # Each installed file registers the completion of its own command.
    for b in $BINARIES; do
      bash -c 'source "$1"; complete -p "$2"' _ "$root/usr/share/bash-completion/completions/$b" "$b" \
        >/dev/null || fail "completions/$b does not complete $b"
    done
    # bash replaces only what follows the ':' of sim:BOARD.
    expect "imx28-mxs-mmc" spintune-agent --source sim:imx
    expect "microwatt-100mhz microwatt-100mhz-gc" spintune-agent --source sim:microw
    ;;

  kernel)
    scratch_root
    src=$root/usr/src/spintune-$VERSION
    kv=$("$src/kernel/build.sh" --kv)
    [ -d "/usr/src/linux-headers-$kv" ] || { echo "skip: no linux-headers-$kv"; exit 77; }
    # The installed sources build as they do here: -Werror, Debian's headers,
    # the self-test's table from the installed spintune.
    mods=$(SPINTUNE_CLI=$root/usr/bin/spintune "$src/kernel/build.sh" "$OUT/kernel-build" | tail -1)
    for ko in spintune.ko selftest/spintune_selftest.ko vboard/spintune_vboard.ko; do
      [ -f "$mods/$ko" ] || fail "no $ko from the installed sources"
    done
    echo "the installed sources build spintune.ko and its self-test for $kv"
    ;;

  destdir)
    dest=$OUT/destdir
    rm -rf "$dest"
    DESTDIR=$dest cmake --install "$BUILD" --prefix /usr/local >"$dest.log" 2>&1 ||
      { cat "$dest.log"; fail "cmake --install"; }
    for f in usr/local/bin/spintune usr/local/bin/spintune-tuner usr/local/bin/spintune-agent \
             usr/local/include/spintune/policy.h usr/local/share/man/man1/spintune.1.gz \
             usr/local/lib/systemd/system/spintune-tuner.service \
             usr/local/share/bash-completion/completions/spintune-agent \
             etc/spintune/tuner.toml etc/spintune/agent.toml; do
      [ -e "$dest/$f" ] || fail "make install: no $f"
    done
    [ "$("$dest/usr/local/bin/spintune" --version)" = "$VERSION" ] || fail "installed spintune --version"
    # Installing again keeps a configuration edited in place.
    echo 'listen = "0.0.0.0:50051"' >>"$dest/etc/spintune/tuner.toml"
    DESTDIR=$dest cmake --install "$BUILD" --prefix /usr/local >"$dest.log" 2>&1 ||
      { cat "$dest.log"; fail "cmake --install (again)"; }
    grep -q '^listen = "0.0.0.0:50051"$' "$dest/etc/spintune/tuner.toml" ||
      fail "make install overwrote an edited /etc/spintune/tuner.toml"
    echo "make install into DESTDIR: $(find "$dest" -type f | wc -l) files"
    ;;

  *) fail "unknown check $check" ;;
esac
