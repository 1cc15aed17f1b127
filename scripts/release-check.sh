#!/usr/bin/env bash
# Before each release: the builds that do not fit in every CI run (scripts/test.sh already builds
# GCC 12 and GCC 14, Debian 12 and 13). Each builds the whole tree with -Werror and runs its unit
# tests (scripts/root-build.sh): this machine's clang, Debian 13's clang 19 in a trixie root, and
# Debian 14 (forky, testing) with its GCC 16 and clang 21 in a forky root; and the plugin on Slurm
# 24.11 for real: the lab inside the trixie root with a reduced end-to-end test
# (scripts/release-lab.sh, after scripts/test.sh's trixie stage built the tree there); and Slurm's
# node selection checked against the real slurmctld: a fresh recording of the host's Slurm
# (tests/lab/select-check.sh, about 20 minutes) replayed through the reimplementation
# (docs/placement.md, "Checked against slurmctld"); and the README's two commands on a clean
# clone in a fresh Debian 13 root (scripts/readme-in-root.sh, about an hour). Times on the 2-core
# CI machine are in docs/install.md; the roots are cached under build/roots.
# Usage: scripts/release-check.sh [STEP...]
#        (steps: host-clang trixie-clang forky-gcc forky-clang trixie-lab slurm-select
#         trixie-readme)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(host-clang trixie-clang forky-gcc forky-clang trixie-lab slurm-select
                                   trixie-readme)
for step in "${steps[@]}"; do
  echo "== $step"
  t0=$SECONDS
  case "$step" in
    host-clang) scripts/deps.sh unit; scripts/root-build.sh --here clang ;;
    trixie-clang) scripts/root-build.sh trixie clang ;;
    forky-gcc) scripts/root-build.sh forky gcc ;;
    forky-clang) scripts/root-build.sh forky clang ;;
    trixie-lab) [ -x build/roots/trixie/var/cache/topo-aware/build/gcc/tools/topo-aware ] ||
                  scripts/root-build.sh trixie gcc
                scripts/release-lab.sh trixie ;;
    slurm-select) rm -rf build/slurm-select
                  tests/lab/select-check.sh --out build/slurm-select --cases 60 --seed 36
                  tests/lab/select-check.sh --out build/slurm-select --modes tree --tag -targeted \
                    --patterns tests/fixtures/slurm-select/patterns-2205-vs-2411.txt
                  cmake --build build/release --target mapper_tests
                  TOPOAWARE_SLURM_SELECT_DIR=$PWD/build/slurm-select build/release/tests/mapper_tests \
                    --gtest_filter='SlurmSelectRecorded.*' ;;
    trixie-readme) mkdir -p build; scripts/readme-in-root.sh trixie | tee build/readme-trixie.log ;;
    *) echo "topo-aware: release-check.sh: unknown step '$step'" >&2; exit 2 ;;
  esac
  echo "topo-aware: $step took $((SECONDS - t0)) s"
done
