#!/usr/bin/env bash
# checkpatch --strict (scripts/checkpatch.pl of Debian's linux-source-6.1,
# unpacked by `ktree.sh source TREES`) on what goes into a kernel: the
# module, its trace header, self-test and demo driver, the headers a driver
# includes (spintune/uspace.h is user-space code, never compiled in a
# kernel, and is left out) and the seed-driver patches (commit message and
# code). Fails on any error or warning; checks (CHECK:) are counted only.
#
#   driver/kernel/checkpatch.sh TREES
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
trees=${1:?usage: checkpatch.sh TREES}
"$here/ktree.sh" source "$trees"
cp=$trees/linux/scripts/checkpatch.pl
[ -f "$cp" ] || { echo "checkpatch.sh: no $cp (ktree.sh source $trees)" >&2; exit 1; }

files=("$here"/spintune.c "$here"/spintune_trace.h "$here"/selftest/spintune_selftest.c
       "$here"/vboard/spintune_vboard.c "$here"/../include/linux/spintune.h)
for h in "$here"/../include/spintune/*.h; do
  [ "$(basename "$h")" = uspace.h ] || files+=("$h")
done

bad=0
report() {  # report WHAT OUTPUT: the problems of one checkpatch run, and its totals
  local problems
  problems=$(grep -E '^[^ ]+:[0-9]+: (ERROR|WARNING):' <<<"$2" || true)
  [ -z "$problems" ] || { echo "$problems"; bad=1; }
  echo "$1: $(grep -E '^total:' <<<"$2" | tail -1)"
}
for f in "${files[@]}"; do
  out=$(perl "$cp" --strict --no-tree --terse --show-types -f "$f" 2>&1 || true)
  report "${f#"$here"/}" "${out:-total: 0 errors, 0 warnings, 0 checks}"
done
for p in "$here"/patches/*.patch; do
  out=$(perl "$cp" --strict --no-tree --terse --show-types "$p" 2>&1 || true)
  report "patches/$(basename "$p")" "${out:-total: 0 errors, 0 warnings, 0 checks}"
done
[ $bad = 0 ] || { echo "checkpatch.sh: errors or warnings above" >&2; exit 1; }
echo "checkpatch --strict: 0 errors, 0 warnings"
