#!/usr/bin/env bash
# The whole test suite, as README's quick start runs it: installs what is missing, then builds
# and tests twice -- a release build with warnings as errors (unit, CLI golden and real-Slurm
# end-to-end tests) and an AddressSanitizer+UndefinedBehaviorSanitizer build (unit and CLI tests),
# then a short pass of every parser's fuzz target (clang, build/fuzz; scripts/fuzz.sh); on Debian 12
# last the whole tree again with Debian 13's GCC in a debootstrap root of it, unit tests included
# (scripts/root-build.sh; docs/install.md).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
jobs=${JOBS:-$(nproc)}
scripts/deps.sh test

build() {  # dir, extra cmake args...
  local dir=$1; shift
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTOPOAWARE_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j "$jobs"
}

echo "== release build (warnings as errors)"
build build/release
echo "== release tests"
ctest --test-dir build/release --output-on-failure -j "$jobs"

echo "== sanitizer build (ASan + UBSan)"
# -O1 and line tables only (reports still name file and line): on 2 cores this build took 932 s
# at -O2 -g, twice the release build, and takes 464 s so; its tests ran as fast (194 s, 190 s).
san_flags="-O1 -g1 -DNDEBUG"
build build/asan -DTOPOAWARE_SANITIZE=ON -DTOPOAWARE_BUILD_SPANK=OFF -DTOPOAWARE_BUILD_BENCH=OFF \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$san_flags" -DCMAKE_C_FLAGS_RELWITHDEBINFO="$san_flags"
echo "== sanitizer tests"
# intercept_tls_get_addr=0: hwloc dlopens and dlcloses its plugins (gl, opencl, pci, libxml) on
# every first topology and last destroy; with enough such modules GCC 12's LeakSanitizer scans
# the stale dynamic-TLS block of a closed one and its tracer dies of SIGSEGV after the test
# passed ("Tracer caught signal 11", DTLS at 0x8e1). Leak checking stays on.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:intercept_tls_get_addr=0 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build/asan --output-on-failure -j "$jobs" -E '^e2e$'

echo "== fuzz targets, 10 s each (scripts/fuzz.sh)"
# Every target, hwloc_xml included: hwloc's XML import now runs first in a forked child, so
# what crashes or leaks inside hwloc there is a refusal here (docs/fuzzing.md). FUZZ_SKIP="a b"
# leaves targets out.
scripts/fuzz.sh "${FUZZ_SECONDS:-10}"

# Debian 13 from Debian 12: GCC 14's -Werror and libstdc++ on the whole tree, its unit tests run
# there, and scripts/deps.sh proven on that release, every run (a cold root: about a minute to
# bootstrap and two to install). TOPOAWARE_ROOT_SUITES="trixie forky" adds more, "" none; forky
# (GCC 16) runs before each release instead (docs/install.md).
# shellcheck source=scripts/debian-release.sh
. scripts/debian-release.sh
topoaware_release
default_suites=""
[ "$release" = bookworm ] && default_suites=trixie
suites=${TOPOAWARE_ROOT_SUITES-$default_suites}
for suite in $suites; do
  echo "== $suite root: whole tree with its GCC, unit tests (scripts/root-build.sh)"
  t0=$SECONDS
  scripts/root-build.sh "$suite" gcc
  echo "topo-aware: $suite stage took $((SECONDS - t0)) s"
done
