#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, clang with ASan+UBSan, in build/fuzz) and runs each for
# SECONDS (default 60), two at a time, on a corpus seeded at run time from the real fixtures (not
# committed copies) plus the committed regressions. A finding stops the run with exit 1 and leaves
# the input under build/fuzz/findings/<target>/.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]     (FUZZ_JOBS=N runs N targets at a time;
#        FUZZ_SKIP="a b" leaves those targets out)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
seconds=${1:-60}
shift || true
jobs=${FUZZ_JOBS:-2}
build=build/fuzz
shared=${TOPOAWARE_SHARED_DIR:-$here/../shared}
# The clang this release ships (scripts/debian-release.sh; scripts/deps.sh test installs it);
# FUZZ_CXX/FUZZ_CC choose another, and then the release need not be one the table knows.
if [ -z "${FUZZ_CXX:-}" ] || [ -z "${FUZZ_CC:-}" ]; then
  # shellcheck source=scripts/debian-release.sh
  . "$here/scripts/debian-release.sh"
  topoaware_release || exit 1
fi
cxx=${FUZZ_CXX:-clang++-$llvm}
cc=${FUZZ_CC:-clang-$llvm}
command -v "$cxx" >/dev/null || { echo "topo-aware: fuzz.sh: $cxx not found (scripts/deps.sh test installs it)" >&2; exit 1; }

if [ ! -f "$build/build.ninja" ]; then
  CXX=$cxx CC=$cc cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS_RELEASE="-O1 -gline-tables-only" -DTOPOAWARE_FUZZ=ON \
    -DTOPOAWARE_BUILD_TESTS=OFF -DTOPOAWARE_BUILD_SPANK=OFF -DTOPOAWARE_BUILD_BENCH=OFF >/dev/null
fi
targets=(input_format nccl_xml hwloc_xml ibnetdiscover slurm_topology fabric_toml fabric_json
         lingjun_csv hostlist plugin_config plugstack shadow_line layout_spec job_toml trace)
[ $# -gt 0 ] && targets=("$@")
for skip in ${FUZZ_SKIP:-}; do
  for i in "${!targets[@]}"; do [ "${targets[$i]}" = "$skip" ] && unset 'targets[i]'; done
done
targets=("${targets[@]}")
cmake --build "$build" -j "${JOBS:-2}" --target "${targets[@]/#/fuzz_}"

# Seeds: the fixtures each parser reads, as they are.
seed() {  # target, files...
  local dir=$build/corpus/$1; shift
  mkdir -p "$dir"
  for f in "$@"; do [ -f "$f" ] && cp -f "$f" "$dir/$(basename "$f")"; done
  return 0
}
fx=tests/fixtures
seed nccl_xml "$fx"/nccl-topo/*.xml "$shared"/fixtures/nccl-topo/*.xml
seed hwloc_xml "$fx"/hwloc/*.xml
seed ibnetdiscover "$fx"/ibnetdiscover/*.txt "$shared"/fixtures/ibnetdiscover/*.txt
seed slurm_topology "$fx"/slurm-topology/*.conf "$shared"/fixtures/slurm-topology/*.conf
seed fabric_toml etc/cluster-*.toml etc/lab-cluster.toml
seed lingjun_csv "$fx"/lingjun/topo.csv
seed plugin_config etc/topo-aware.toml
seed trace "$fx"/traces/* "$shared"/traces/kalos/*.csv
seed shadow_line "$fx"/shadow/*.log
seed input_format "$fx"/slurm-topology/*.conf "$fx"/ibnetdiscover/*.txt "$fx"/nccl-topo/aws-*.xml \
  "$fx"/lingjun/topo.csv etc/lab-cluster.toml "$shared"/fixtures/nvidia-smi-topo/*.txt "$shared"/fixtures/slurm-topology/*.yaml
mkdir -p "$build/corpus/fabric_json" "$build/corpus/hostlist" "$build/corpus/plugstack" \
  "$build/corpus/layout_spec" "$build/corpus/job_toml"
# Fabric JSON as `fabric --of json` writes it, when a release build is there (scripts/test.sh
# makes one first); else a minimal document of the same shape.
cli=build/release/tools/topo-aware
if [ -x "$cli" ]; then
  for f in "$fx"/slurm-topology/*.conf etc/lab-cluster.toml; do
    "$cli" fabric -i "$f" --of json > "$build/corpus/fabric_json/$(basename "$f").json" 2>/dev/null || true
  done
fi
printf '{"format": "topo-aware-fabric", "switches": [{"name": "s1", "tier": 1}], "hosts": [{"name": "n1", "ports": [{"switch": "s1", "gbps": 25}]}]}\n' \
  > "$build/corpus/fabric_json/minimal.json"
# Hostlists as the fixtures write them (Nodes=/Switches= values), and the documented forms.
grep -ohE '(Nodes|Switches)=[^ ]+' "$fx"/slurm-topology/*.conf | cut -d= -f2 | sort -u | awk 'NR <= 50' |
  while read -r h; do printf '%s' "$h" > "$build/corpus/hostlist/$(printf '%s' "$h" | md5sum | cut -c1-12)"; done
i=0
for h in 'node[001-003,7]' 'gpu[1-2]-ib[0-1]' 'n[1-3' 'dgx[005,007,011,030-031]'; do
  printf '%s' "$h" > "$build/corpus/hostlist/doc$((i++))"; done
# Plugstack lines as etc/plugstack.conf.example writes them, one argument a line.
grep -hv '^#' etc/plugstack.conf.example | tr ' ' '\n' | grep '=' > "$build/corpus/plugstack/example" || true
printf 'policy=fail-closed\njob_dir=/tmp/x\ngpu_binding=one-gpu\nbind_cpus=false\nmode=shadow\nshadow_log=/tmp/s.log\n' > "$build/corpus/plugstack/keys"
# Layout specs (first byte: the world size) from docs/mapper.md's grammar, and a job file.
i=0
for s in 'tp=8,pp=4' 'tp=8,cp=2,ep=4,dp=auto,pp=4,order=tp-cp-ep-dp-pp' 'tp=4,dp=auto' 'pp=2,tp=2:ring'; do
  printf '\x40%s' "$s" > "$build/corpus/layout_spec/spec$((i++))"; done
printf '\x20layout = "tp=8,pp=2"\n[dims.tp]\nbytes = 1e9\n' > "$build/corpus/job_toml/basic"
for d in tests/fuzz/regressions/*/; do
  t=$(basename "$d"); mkdir -p "$build/corpus/$t"; cp -f "$d"* "$build/corpus/$t/" 2>/dev/null || true
done

run() {  # target
  local t=$1 out=$build/findings/$1
  mkdir -p "$out" "$build/corpus/$t" "$build/logs"
  # -rss_limit_mb: a parser must stay bounded; -timeout: so must its time per input.
  if "$build/tests/fuzz/fuzz_$t" "$build/corpus/$t" -max_total_time="$seconds" -timeout=10 \
      -rss_limit_mb=2048 -max_len=65536 -artifact_prefix="$out/" -print_final_stats=1 \
      >"$build/logs/$t.log" 2>&1; then
    printf 'topo-aware: fuzz %-15s ok   %s\n' "$t" "$(grep -m1 -oE 'stat::number_of_executed_units: *[0-9]+' "$build/logs/$t.log" | grep -oE '[0-9]+$') execs in ${seconds}s"
  else
    printf 'topo-aware: fuzz %-15s FINDING (log %s, input in %s)\n' "$t" "$build/logs/$t.log" "$out" >&2
    return 1
  fi
}
export -f run
export build seconds
export LSAN_OPTIONS=suppressions=$here/tests/fuzz/lsan.supp:print_suppressions=0
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run {}'
