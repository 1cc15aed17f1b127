# The Debian releases the README's commands are tested on, and the package names that differ
# between them: one table, sourced by scripts/deps.sh and scripts/fuzz.sh. Every name here was
# checked against that release's archive (apt-cache policy inside a debootstrap root); nothing is
# guessed at install time. A release not listed is refused by name, with the list.
# Sets: release (codename), release_name, llvm (the clang whose libFuzzer and sanitizer runtimes
# the fuzz build uses), release_pkgs_unit and release_pkgs_test (scripts/deps.sh's sets beyond
# the names every release shares).
# TOPOAWARE_OS_RELEASE reads another os-release file (the refusal's test uses it).
# shellcheck shell=bash

topoaware_supported="Debian 12 (bookworm), Debian 13 (trixie), Debian 14 (forky, testing)"

topoaware_release() {
  local file=${TOPOAWARE_OS_RELEASE:-/etc/os-release} ID="" VERSION_CODENAME="" PRETTY_NAME=""
  if [ ! -r "$file" ]; then
    echo "topo-aware: cannot read $file to tell the release; supported: $topoaware_supported" >&2
    return 1
  fi
  # Only the three names, read in a subshell: sourcing the file here would leave NAME, VERSION,
  # VERSION_ID... set in whatever script sourced this one.
  # shellcheck disable=SC1090
  eval "$(. "$file"; printf 'ID=%q VERSION_CODENAME=%q PRETTY_NAME=%q\n' \
            "${ID:-}" "${VERSION_CODENAME:-}" "${PRETTY_NAME:-}")"
  release=$VERSION_CODENAME
  case "$ID:$release" in
    # Slurm 22.05, GCC 12, clang 14, torch 1.13, Scotch 7.0.3.
    debian:bookworm) release_name="Debian 12 (bookworm)"; llvm=14 ;;
    # Slurm 24.11, GCC 14, clang 19, torch 2.6, Scotch 7.0.7.
    debian:trixie) release_name="Debian 13 (trixie)"; llvm=19 ;;
    # Testing, as of this table (archive of 2026-10-30): Slurm 26.05, GCC 16, clang 21, torch
    # 2.14, Scotch 7.0.12, no hyperfine. Names rechecked when it moves.
    debian:forky) release_name="Debian 14 (forky, testing)"; llvm=21 ;;
    *)
      echo "topo-aware: ${PRETTY_NAME:-$ID $release} (from $file) is not a release these scripts" \
           "know the package names of; supported: $topoaware_supported. On another" \
           "distribution install the equivalents of scripts/deps.sh's lists by hand." >&2
      return 1 ;;
  esac
  # The same names on every release listed (Slurm's header and daemons, Scotch's development
  # package, torch, mpi4py, the Lua that tests etc/cli_filter.lua without Slurm: lua5.1, Slurm's
  # own cli_filter/lua's); the sanitizer toolchain is the one that moves with the release, and
  # forky has no hyperfine (tools/bench/launch_overhead.sh skips without it).
  release_pkgs_unit=(libslurm-dev slurm-client libscotch-dev "clang-$llvm" "libclang-rt-$llvm-dev"
                     lua5.1)
  release_pkgs_test=(slurmctld slurmd slurm-client munge python3-torch python3-mpi4py
                     openmpi-bin)
  [ "$release" = forky ] || release_pkgs_test+=(hyperfine)
}

# The Slurm release a slurm_version.h is of ("22.05", from SLURM_VERSION_NUMBER 0xMMmmuu); fails
# when the file holds none. scripts/root-build.sh and scripts/slurm-releases.sh use it.
topoaware_slurm_release() {
  local hex
  hex=$(sed -nE 's/^#define SLURM_VERSION_NUMBER 0x([0-9a-fA-F]{6}).*/\1/p' "$1" 2>/dev/null)
  [ -n "$hex" ] || return 1
  printf '%d.%02d\n' "0x${hex:0:2}" "0x${hex:2:2}"
}
