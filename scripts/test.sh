#!/usr/bin/env bash
# The whole test suite, as README's quick start runs it: installs what is missing, then builds
# and tests twice -- a release build with warnings as errors (unit, CLI golden and real-Slurm
# end-to-end tests) and an AddressSanitizer+UndefinedBehaviorSanitizer build (unit and CLI tests),
# then a short pass of every parser's fuzz target (clang, build/fuzz; scripts/fuzz.sh); on Debian 12
# last the whole tree again with Debian 13's GCC in a debootstrap root of it, unit tests included
# (scripts/root-build.sh; docs/install.md), and the lab on that root's Slurm 24.11 with a reduced
# end-to-end test (scripts/release-lab.sh).
#
# It says what it ran: each suite (ctest label: unit, cli, bench, lint, slurm, e2e; the e2e's own
# suites e2e and clients) as "N passed, M failed, K skipped", and each must pass at least the
# count below, so that a suite that quietly stopped running cannot pass. Under CI=true (.ci/run
# sets it) nothing in the end-to-end test may be skipped: the machine has everything
# (scripts/deps.sh test), and a skip there fails with its reason.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
jobs=${JOBS:-$(nproc)}
strict=0
[ "${CI:-}" = true ] && strict=1
# What each suite runs today, a little under: raise them as suites grow, never lower one to let
# a skip through.
min_unit=370 min_cli=60 min_e2e=160 min_clients=28

counts=()
# Each stage's header, and how long the one before it took: "where the time went" at the end says
# what a CI run spends its minutes on (the target is 45 on 2 cores).
times=() stage_name="" stage_t0=$SECONDS
stage() {
  [ -n "$stage_name" ] && times+=("$(printf '%5d s  %s' $((SECONDS - stage_t0)) "$stage_name")")
  stage_name=$1 stage_t0=$SECONDS
  [ -z "$1" ] || echo "== $1"
}
# Said on the way out, also when a stage failed.
where_the_time_went() {
  stage ""
  echo "== where the time went ($SECONDS s in all)"
  printf '  %s\n' "${times[@]}"
}
trap where_the_time_went EXIT
# ctest over one label; prints and keeps "label: N passed, M failed, K skipped" and fails when a
# test failed or fewer than `min` passed. Args: build dir, label, min, ctest args...
suite() {
  local dir=$1 label=$2 min=$3 log rc total failed skipped passed
  shift 3
  log=$dir/ctest-$label.log
  set +e
  ctest --test-dir "$dir" -L "^$label\$" --output-on-failure "$@" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  set -e
  total=$(sed -nE 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\2/p' "$log" | tail -1)
  failed=$(sed -nE 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/p' "$log" | tail -1)
  skipped=$(grep -cE '^[[:space:]]*[0-9]+ - .*\((Skipped|Not Run|Disabled)\)' "$log" || true)
  passed=$(( ${total:-0} - ${failed:-0} - skipped ))
  counts+=("$label ($(basename "$dir")): $passed passed, ${failed:-0} failed, $skipped skipped")
  echo "== $label: $passed passed, ${failed:-0} failed, $skipped skipped (at least $min must pass)"
  if [ "$rc" -ne 0 ]; then return 1; fi
  if [ "$passed" -lt "$min" ]; then
    echo "topo-aware: the $label suite passed $passed tests, fewer than the $min it runs" >&2
    return 1
  fi
}

# The end-to-end test's own summary (tests/e2e/run.sh writes it), printed to the log and held
# against its minimums; a skipped e2e is allowed only outside CI (and says why).
e2e_summary() {
  local file=$1/e2e-summary.txt s n
  echo "== e2e summary ($file)"
  [ -f "$file" ] || { echo "topo-aware: the e2e wrote no summary" >&2; return 1; }
  cat "$file"
  counts+=("$(tail -1 "$file")")
  if grep -q '^e2e: SKIP:' "$file" && [ $strict = 0 ]; then return 0; fi
  for s in e2e clients; do
    # Checks the platform rules out (Debian 13's torch cannot start torchrun: tests/e2e/clients.sh)
    # count toward the minimum: they were not lost, the e2e proved they cannot run there.
    n=$(sed -nE "s/^e2e: suite $s: ([0-9]+) passed.*/\1/p" "$file")
    n=$(( ${n:-0} + $(sed -nE "s/^e2e: suite $s: .* ([0-9]+) checks ruled out.*/\1/p" "$file" | grep . || echo 0) ))
    local min_var=min_$s
    if [ "${n:-0}" -lt "${!min_var}" ]; then
      echo "topo-aware: the e2e's $s suite passed ${n:-0} checks, fewer than the ${!min_var} it runs" >&2
      return 1
    fi
  done
}

build() {  # dir, extra cmake args...
  local dir=$1; shift
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTOPOAWARE_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j "$jobs"
}

stage "what this needs (scripts/deps.sh test)"
scripts/deps.sh test

# The SPANK plugin's version matrix: besides the system's Slurm, built with -Werror against the
# headers of Debian trixie's and forky's Slurm (24.11 and 26.05 today), fetched once into
# build/slurm-releases with a private apt configuration (scripts/slurm-releases.sh), and each
# build checked against its release's libslurmfull.so (ctest spank_release_*, in the unit suite).
# Under CI a failed fetch fails the run; elsewhere (offline) the matrix is left out and said so.
stage "Slurm releases for the plugin's version matrix (scripts/slurm-releases.sh)"
matrix=""
if releases=$(scripts/slurm-releases.sh build/slurm-releases); then
  echo "$releases"
  matrix=$(awk '{print $3}' <<<"$releases" | paste -sd';')
  counts+=("slurm releases: the plugin built for the system's and $(awk '{print $2}' <<<"$releases" | paste -sd' ')")
elif [ $strict = 1 ]; then
  echo "topo-aware: the Slurm releases of the version matrix could not be fetched" >&2
  exit 1
else
  echo "topo-aware: the version matrix is left out: its Slurm releases could not be fetched"
  counts+=("slurm releases: left out (not fetched)")
fi

stage "release build (warnings as errors)"
# Debian's paths (CMAKE_INSTALL_PREFIX=/usr), so that its packages are what a site installs.
build build/release -DTOPOAWARE_SLURM_RELEASES="$matrix" -DCMAKE_INSTALL_PREFIX=/usr
stage "release tests"
suite build/release unit "$min_unit" -j "$jobs"
suite build/release cli "$min_cli" -j "$jobs"
suite build/release bench 1 -j "$jobs"
suite build/release lint 3 -j "$jobs"
suite build/release slurm 0
# The .deb packages of this build (scripts/package.sh checks their names, pin and contents); the
# end-to-end test installs them with dpkg -i, runs a step through them and removes them.
stage "packages (scripts/package.sh)"
scripts/package.sh build/release build/packages
export TOPOAWARE_E2E_PACKAGES=$here/build/packages
counts+=("packages: $(cd build/packages && ls ./*.deb | sed 's|^\./||' | paste -sd' ')")
stage "end-to-end test on the lab (tests/e2e/run.sh)"
rm -f build/release/e2e-summary.txt
suite build/release e2e 0
e2e_summary build/release

stage "sanitizer build (ASan + UBSan)"
# -O1 and line tables only (reports still name file and line): on 2 cores this build took 932 s
# at -O2 -g, twice the release build, and takes 464 s so; its tests ran as fast (194 s, 190 s).
san_flags="-O1 -g1 -DNDEBUG"
build build/asan -DTOPOAWARE_SANITIZE=ON -DTOPOAWARE_BUILD_SPANK=OFF -DTOPOAWARE_BUILD_BENCH=OFF \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$san_flags" -DCMAKE_C_FLAGS_RELWITHDEBINFO="$san_flags"
stage "sanitizer tests"
# intercept_tls_get_addr=0: hwloc dlopens and dlcloses its plugins (gl, opencl, pci, libxml) on
# every first topology and last destroy; with enough such modules GCC 12's LeakSanitizer scans
# the stale dynamic-TLS block of a closed one and its tracer dies of SIGSEGV after the test
# passed ("Tracer caught signal 11", DTLS at 0x8e1). Leak checking stays on.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:intercept_tls_get_addr=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
suite build/asan unit "$min_unit" -j "$jobs"
suite build/asan cli "$min_cli" -j "$jobs"
suite build/asan slurm 0
unset ASAN_OPTIONS UBSAN_OPTIONS

stage "fuzz targets, 10 s each (scripts/fuzz.sh)"
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
for root_suite in $suites; do
  stage "$root_suite root: whole tree with its GCC, unit tests (scripts/root-build.sh)"
  scripts/root-build.sh "$root_suite" gcc
  # The lab on that release's own Slurm (24.11 in trixie) with the plugin built there: a reduced
  # end-to-end test, about a minute with the root warm (scripts/release-lab.sh).
  stage "$root_suite root: the lab on its Slurm (scripts/release-lab.sh)"
  scripts/release-lab.sh "$root_suite" | tee "build/release-lab-$root_suite.log"
  counts+=("$root_suite lab: $(grep -E '^release-lab: [0-9]+ passed' "build/release-lab-$root_suite.log")")
done
echo "== what ran"
printf '  %s\n' "${counts[@]}"
