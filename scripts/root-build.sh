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
  dir=build/$compiler
  "$CXX" --version | head -1
  t0=$SECONDS
  # No debug info: the same warnings as the release build, in less time on two cores.
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTOPOAWARE_WERROR=ON \
    -DTOPOAWARE_BUILD_SPANK=ON -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG" \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG" >/dev/null
  cmake --build "$dir" -j "${JOBS:-2}"
  t1=$SECONDS
  ctest --test-dir "$dir" --output-on-failure -j "${JOBS:-2}" -E '^(e2e|slurm_topology_conf)$'
  # Slurm's own plugin loader of this release (its srun, no daemons): it loads the plugin built
  # here (ctest's spank_plugin_release just did) and refuses the host's build for the host's
  # release, which the host side put under /var/tmp/topo-aware-plugins/<release>/.
  others=(/var/tmp/topo-aware-plugins/*/topo_aware.so)
  if [ -e "${others[0]}" ] && command -v srun >/dev/null; then
    TOPOAWARE_CLI=$dir/tools/topo-aware tests/spank/plugin_release_test.sh \
      "$dir/spank/topo_aware.so" "${others[@]}"
  fi
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
# The host's plugin, where it is built for another release than the root's: the root's srun must
# refuse it with Slurm's own message (above).
# shellcheck source=scripts/debian-release.sh
. scripts/debian-release.sh
rm -rf "$root/var/tmp/topo-aware-plugins"
host_release=$(topoaware_slurm_release /usr/include/slurm/slurm_version.h || true)
root_release=$(topoaware_slurm_release "$root/usr/include/slurm/slurm_version.h" || true)
if [ -f build/release/spank/topo_aware.so ] && [ -n "$host_release" ] &&
   [ "$host_release" != "$root_release" ]; then
  mkdir -p "$root/var/tmp/topo-aware-plugins/$host_release"
  cp build/release/spank/topo_aware.so "$root/var/tmp/topo-aware-plugins/$host_release/"
fi
scripts/debroot.sh run "$root" -- "$here/scripts/root-build.sh" --here "$compiler"
