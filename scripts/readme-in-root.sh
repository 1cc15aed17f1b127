#!/usr/bin/env bash
# The README's two commands as a new user of another Debian release runs them: a clean clone of
# this tree's HEAD, a fresh root of SUITE (`debootstrap --variant=minbase`, nothing installed by
# hand; scripts/debroot.sh), then, as root inside it and in one run, `scripts/quickstart.sh` and
# `scripts/test.sh` (its e2e reuses the lab quickstart leaves up, as on a real machine), and the
# lab taken down at the end (a lab left up in a root outlives the run: scripts/debroot.sh).
# Prints the whole log, with "==" lines for each command's exit status and time; docs/install.md
# quotes the last trixie run. About an hour on two cores.
# Usage: scripts/readme-in-root.sh SUITE [DIR]   (DIR, default build/readme-SUITE, is made afresh)
# Needs root, Debian's archive, and the lab free (one lab per machine: the bridge is the host's).
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
me="topo-aware: readme-in-root.sh"
[ $# -ge 1 ] || { sed -n 's/^# Usage: //p' "$0" >&2; exit 2; }
suite=$1
dir=${2:-$here/build/readme-$suite}
[ "$(id -u)" -eq 0 ] || { echo "$me: needs root (debootstrap, chroot, the lab)" >&2; exit 1; }
rm -rf "$dir" "$dir.lock"
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
git clone -q "$here" "$dir/topo-aware" || exit 1
cd "$dir/topo-aware" || exit 1
echo "== $(date -u +%FT%TZ) a clone of $(git log --oneline -1)"
t0=$SECONDS
scripts/debroot.sh create "$suite" "$dir/root" || exit 1
echo "== root made in $((SECONDS - t0)) s ($(du -sh "$dir/root" | cut -f1))"
# shellcheck disable=SC2016  # expanded inside the root
scripts/debroot.sh run "$dir/root" -- bash -c '
  . /etc/os-release
  echo "== $(date -u +%FT%TZ) $PRETTY_NAME, $(uname -r), $(nproc) CPUs," \
    "$(dpkg-query -W -f="\${binary:Package}\n" | wc -l) packages"
  t=$SECONDS; scripts/quickstart.sh; q=$?
  echo "== quickstart.sh exit $q in $((SECONDS - t)) s"
  t=$SECONDS; scripts/test.sh; r=$?
  echo "== test.sh exit $r in $((SECONDS - t)) s"
  tests/lab/lab.sh down >/dev/null 2>&1
  [ $q -eq 0 ] && [ $r -eq 0 ]'
rc=$?
echo "== $(date -u +%FT%TZ) exit $rc after $((SECONDS - t0)) s"
exit $rc
