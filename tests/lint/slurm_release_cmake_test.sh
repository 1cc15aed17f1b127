#!/usr/bin/env bash
# spank/CMakeLists.txt reads the release of the Slurm headers it builds the plugin against and
# says it: refuses one older than 22.05, warns above the newest one compiled against (26.05),
# and warns when the Slurm installed here is another release. Configured against copies of this
# machine's headers with SLURM_VERSION_NUMBER changed (TOPOAWARE_SLURM_INCLUDE_DIR); skipped
# (77) without Slurm's headers. Configure only: nothing is built.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -f /usr/include/slurm/slurm_version.h ] || { echo "no Slurm headers (libslurm-dev)"; exit 77; }
command -v ninja >/dev/null || { echo "no ninja"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
configure() {  # hex version -> output of cmake, its status in $tmp/rc
  mkdir -p "$tmp/h$1/slurm"
  cp /usr/include/slurm/*.h "$tmp/h$1/slurm/"
  sed -i -E "s/^#define SLURM_VERSION_NUMBER .*/#define SLURM_VERSION_NUMBER 0x$1/" \
    "$tmp/h$1/slurm/slurm_version.h"
  set +e
  cmake -S "$src" -B "$tmp/b$1" -G Ninja -DTOPOAWARE_SLURM_INCLUDE_DIR="$tmp/h$1" 2>&1
  echo $? >"$tmp/rc"
  set -e
}
out=$(configure 150800)
[ "$(cat "$tmp/rc")" != 0 ] || fail "21.08 headers configured: $out"
grep -q "SPANK plugin for Slurm 21.08 (21.08.0, headers in $tmp/h150800)" <<<"$out" ||
  fail "the release is not said: $out"
grep -q "Slurm 21.08 is older than 22.05" <<<"$out" || fail "no refusal that names 21.08: $out"
out=$(configure 1a0b00)
[ "$(cat "$tmp/rc")" = 0 ] || fail "26.11 headers refused: $out"
grep -q "Slurm 26.11 is newer than 26.05" <<<"$out" || fail "no warning above 26.05: $out"
# The installed Slurm as spank/CMakeLists.txt asks it: slurmd, else srun (which needs a config).
installed=""
for daemon in slurmd srun; do
  installed=$("$daemon" -V 2>/dev/null | grep -oE '[0-9]+\.[0-9]+\.' | head -1 | sed 's/\.$//' || true)
  [ -z "$installed" ] || break
done
if [ -n "$installed" ] && [ "$installed" != 26.11 ]; then
  grep -q "is Slurm $installed; the plugin.*is built for 26.11" <<<"$(tr '\n' ' ' <<<"$out" | tr -s ' ')" ||
    fail "no warning that the installed Slurm $installed differs: $out"
fi
echo "ok: 21.08 refused, 26.11 warned${installed:+, installed $installed named}"
