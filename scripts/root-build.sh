#!/usr/bin/env bash
# The whole tree (libraries, CLI, plugin, tests, benchmarks) built with warnings as errors on
# another Debian release, in a debootstrap root of it (scripts/debroot.sh, cached under
# build/roots/SUITE), and its unit tests run there with ctest: what a site on that release gets
# from the README's build. Packages come from `scripts/deps.sh unit` run inside the root, so the
# release table is proven there too. The tests that start Slurm daemons (e2e, slurm_topology_conf)
# are left to scripts/test.sh run inside a root (docs/install.md).
# Usage: scripts/root-build.sh SUITE [gcc|clang]   (the release's default GCC, or its clang)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
me="topo-aware: root-build.sh"

if [ "${1:-}" = "--here" ]; then
  # On this machine (in a root, build/ is the root's own: scripts/debroot.sh): configure, build, test.
  compiler=$2
  # shellcheck source=scripts/debian-release.sh
  . scripts/debian-release.sh
  topoaware_release
  case "$compiler" in
    gcc) export CC=gcc CXX=g++ ;;
    clang) export CC=clang-$llvm CXX=clang++-$llvm ;;
  esac
  # The plugin's C shell refuses Slurm 25.11 and later by #error until those releases' calls are
  # written (issue 35); there the plugin is left out and said so.
  spank=ON
  slurm=$(sed -n 's/^#define SLURM_VERSION_NUMBER \(0x[0-9a-f]*\).*/\1/p' \
    /usr/include/slurm/slurm_version.h)
  if [ $((slurm)) -ge $((0x190b00)) ]; then
    spank=OFF
    printf '%s: Slurm %d.%02d headers: no plugin here (it builds against 22.05 to 25.05; issue 35)\n' \
      "$me" $((slurm >> 16)) $(((slurm >> 8) & 255))
  fi
  dir=build/$compiler
  "$CXX" --version | head -1
  t0=$SECONDS
  # No debug info: the same warnings as the release build, in less time on two cores.
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTOPOAWARE_WERROR=ON \
    -DTOPOAWARE_BUILD_SPANK=$spank -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG" \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG" >/dev/null
  cmake --build "$dir" -j "${JOBS:-2}"
  t1=$SECONDS
  ctest --test-dir "$dir" --output-on-failure -j "${JOBS:-2}" -E '^(e2e|slurm_topology_conf)$'
  echo "$me: $release_name, $compiler: build $((t1 - t0)) s, unit tests $((SECONDS - t1)) s"
  exit 0
fi

[ $# -ge 1 ] || { sed -n 's/^# Usage: //p' "$0" >&2; exit 2; }
suite=$1 compiler=${2:-gcc}
case "$compiler" in gcc|clang) ;; *) echo "$me: compiler gcc or clang, not '$compiler'" >&2; exit 2 ;; esac
root=$here/build/roots/$suite
t0=$SECONDS
scripts/debroot.sh create "$suite" "$root"
scripts/debroot.sh run "$root" -- "$here/scripts/deps.sh" unit
echo "$me: $suite root and packages ready in $((SECONDS - t0)) s"
scripts/debroot.sh run "$root" -- "$here/scripts/root-build.sh" --here "$compiler"
