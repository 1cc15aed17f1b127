#!/usr/bin/env bash
# Installs the Debian packages topo-aware builds and tests with, only those missing (idempotent).
# Usage: scripts/deps.sh [build|test|lab]   (test and lab include build)
set -euo pipefail
want=(cmake ninja-build g++ pkg-config libhwloc-dev hwloc libtomlplusplus-dev libcli11-dev
      nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev libibverbs-dev zlib1g-dev)
case "${1:-build}" in
  build) ;;
  # python3-torch (torch.distributed, torchrun), python3-mpi4py and openmpi-bin: the real
  # clients the end-to-end test launches (Slurm's mpi_pmix comes with slurmd).
  test|lab) want+=(libslurm-dev slurmctld slurmd slurm-client munge iproute2 util-linux
                   hyperfine graphviz libscotch-dev python3-torch python3-mpi4py openmpi-bin
                   clang-14 libclang-rt-14-dev) ;;
  *) echo "topo-aware: deps.sh: unknown set '$1' (build|test|lab)" >&2; exit 2 ;;
esac
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "topo-aware: missing Debian packages: ${missing[*]} (run as root, or install them)" >&2
  exit 1
fi
echo "topo-aware: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
