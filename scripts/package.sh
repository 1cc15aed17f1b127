#!/usr/bin/env bash
# The Debian packages (cmake/TopoAwarePackaging.cmake): topo-aware (the command, docs, examples)
# and topo-aware-spank-slurm-<release> (the plugin for the Slurm release the build's headers are
# of, pinned to that release's slurm-wlm-basic-plugins; its plugstack.conf line under
# /usr/share/topo-aware, never enabled). Built with CPack from a build tree configured for
# Debian's paths (CMAKE_INSTALL_PREFIX=/usr: reconfigured and rebuilt here when it is not), then
# checked: the two names, the plugin's pin, nothing under /etc. scripts/test.sh builds them in
# every run and the end-to-end test installs them with dpkg -i and runs a step through them.
# Usage: scripts/package.sh [BUILD_DIR [OUT_DIR]]   (default build/release, build/packages)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
me="topo-aware: package.sh"
die() { echo "$me: $*" >&2; exit 1; }
build=${1:-build/release}
out=${2:-build/packages}
[ -f "$build/CMakeCache.txt" ] || die "$build is not a configured build tree (scripts/test.sh makes build/release)"
command -v cpack >/dev/null && command -v dpkg-deb >/dev/null || die "needs cpack and dpkg-deb"
if [ "$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")" != /usr ]; then
  cmake -S . -B "$build" -DCMAKE_INSTALL_PREFIX=/usr >/dev/null
fi
cmake --build "$build" -j "${JOBS:-$(nproc)}" >/dev/null
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/*.deb
(cd "$build" && cpack -G DEB -B "$out" >"$out/cpack.log" 2>&1) || die "cpack failed ($out/cpack.log)"
rm -rf "$out/_CPack_Packages"

version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")
arch=$(dpkg --print-architecture)
cli=$out/topo-aware_${version}_$arch.deb
[ -f "$cli" ] || die "no $cli"
# (Listings to files: grep -q would close the pipe on dpkg-deb.)
for deb in "$out"/*.deb; do dpkg-deb -c "$deb" >"$deb.contents"; done
grep -q ' \./usr/bin/topo-aware$' "$cli.contents" || die "$cli holds no /usr/bin/topo-aware"
for deb in "$out"/*.deb; do
  if grep -q ' \./etc/' "$deb.contents"; then die "$deb installs under /etc"; fi
done
release=$(sed -n 's/^TOPOAWARE_SPANK_SYSTEM_RELEASE:INTERNAL=//p' "$build/CMakeCache.txt")
if [ -n "$release" ]; then
  plugin=$out/topo-aware-spank-slurm-${release}_${version}_$arch.deb
  [ -f "$plugin" ] || die "no $plugin"
  depends=$(dpkg-deb -f "$plugin" Depends)
  grep -q "slurm-wlm-basic-plugins (>= $release~)" <<<"$depends" ||
    die "$plugin is not pinned to Slurm $release: Depends: $depends"
  grep -q '/slurm/topo_aware\.so$' "$plugin.contents" || die "$plugin holds no topo_aware.so"
fi
rm -f "$out"/*.contents
for deb in "$out"/*.deb; do
  echo "$deb: $(dpkg-deb -f "$deb" Package Version | tr '\n' ' ')"
done
