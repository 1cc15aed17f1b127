#!/usr/bin/env bash
# Installs the Debian packages topo-aware builds and tests with, only those missing (idempotent),
# under the names the running release uses (scripts/debian-release.sh; an unknown release is
# refused, naming the ones supported).
# Usage: scripts/deps.sh [build|unit|test|lab]   (each includes the ones before it; lab = test)
#        scripts/deps.sh --list [SET]   prints the names for this release, installs nothing
# build: the CLI and libraries; unit: the whole tree (plugin, benchmarks with Scotch, the fuzz
# build's clang) and its daemon-free tests (srun among them: Slurm's loader takes the plugin); test: everything scripts/test.sh runs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/debian-release.sh
. "$here/debian-release.sh"
list=0
[ "${1:-}" = "--list" ] && { list=1; shift; }
set_=${1:-build}
case "$set_" in build|unit|test|lab) ;;
  *) echo "topo-aware: deps.sh: unknown set '$set_' (build|unit|test|lab)" >&2; exit 2 ;;
esac
topoaware_release || exit 1
want=(cmake ninja-build g++ pkg-config libhwloc-dev hwloc libtomlplusplus-dev libcli11-dev
      nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev libibverbs-dev zlib1g-dev)
# graphviz: the DOT writer's test renders with dot; python3: scripts/check-includes.py.
# python3-torch (torch.distributed, torchrun), python3-mpi4py and openmpi-bin: the real clients
# the end-to-end test launches (Slurm's mpi_pmix comes with slurmd). debootstrap: the Debian 13
# stage of scripts/test.sh (scripts/debroot.sh). bsdextrautils (column: quickstart's tables) and
# jq (launch_overhead.sh): not in a minimal Debian, as a root made with debootstrap showed.
# rpm: rpmspec checks the RPM spec template (ctest rpm_spec). file and dpkg-dev: CPack's .deb
# generator runs both (dpkg-shlibdeps for the packages' dependencies; scripts/package.sh); a
# minimal Debian 12 or 13 has neither, as a fresh trixie root's test.sh showed.
[ "$set_" = build ] || want+=("${release_pkgs_unit[@]}" graphviz python3)
case "$set_" in test|lab) want+=("${release_pkgs_test[@]}" iproute2 util-linux debootstrap
                                      bsdextrautils jq rpm file dpkg-dev) ;; esac
if [ $list -eq 1 ]; then printf '%s\n' "${want[@]}"; exit 0; fi
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "topo-aware: missing Debian packages: ${missing[*]} (run as root, or install them)" >&2
  exit 1
fi
echo "topo-aware: installing on $release_name: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
