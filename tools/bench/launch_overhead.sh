#!/usr/bin/env bash
# Launch overhead of the topo-aware SPANK plugin on the local Slurm lab (tests/lab/lab.sh), with
# hyperfine: `srun -N4 -n32 true` with no plugin, with the plugin loaded but the option absent,
# and with --topo-aware=SPEC. Prints each median (and mean) and the ratios of medians against no
# plugin, measured in the same run, with the targets (option absent <= 1.02x, option given <=
# 1.10x). Medians, because a run now and then waits a scheduler cycle ("queued and waiting for
# resources") while the previous job's nodes finish completing, whatever the plugin. Needs root.
# Usage: tools/bench/launch_overhead.sh [BUILD_DIR]   (RUNS=20 WARMUP=3 SPEC=tp=8,pp=2)
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$src/build/release}" && pwd)
runs=${RUNS:-20}
warmup=${WARMUP:-3}
spec=${SPEC:-tp=8,pp=2}
[ "$(id -u)" -eq 0 ] || { echo "launch_overhead: needs root (the lab cluster)" >&2; exit 77; }
command -v hyperfine >/dev/null || { echo "launch_overhead: hyperfine missing (scripts/deps.sh test)" >&2; exit 77; }
export TOPO_AWARE_LAB=${TOPO_AWARE_LAB:-/tmp/topo-aware-lab}
export SLURM_CONF=$TOPO_AWARE_LAB/etc/slurm.conf
lab=$src/tests/lab/lab.sh
"$lab" up --plugin "$build/spank/topo_aware.so"
"$lab" config fabric="${FABRIC:-$src/etc/lab-cluster.toml}"
conf="config=$TOPO_AWARE_LAB/etc/topo-aware.toml"
out=$TOPO_AWARE_LAB/bench
mkdir -p "$out"
# Each command's --prepare installs its plugstack line before every run; the sruns themselves are
# what is timed. -N: no shell in between.
hyperfine -N --warmup "$warmup" --runs "$runs" --export-json "$out/launch_overhead.json" \
  --prepare "$lab plugstack none" -n "no plugin" "srun -N4 -n32 true" \
  --prepare "$lab plugstack $conf" -n "plugin, option absent" "srun -N4 -n32 true" \
  --prepare "$lab plugstack $conf" -n "plugin, --topo-aware=$spec" "srun -N4 -n32 --topo-aware=$spec true"
"$lab" plugstack "$conf"
jq -r --arg spec "$spec" '
  def ms: . * 10000 | round / 10;
  .results as $r | ($r[0].median) as $base |
  "\nsrun -N4 -n32 true on the 4-node lab (\($r[0].times | length) runs each)",
  ($r[] | "  \(.command | .[0:32] | . + " " * (32 - length)) median \(.median | ms) ms  mean \(.mean | ms) ms +- \(.stddev | ms)  \(.median / $base | . * 1000 | round / 1000)x"),
  "targets (medians): option absent <= 1.02x: \(if $r[1].median / $base <= 1.02 then "met" else "NOT met" end); option given <= 1.10x: \(if $r[2].median / $base <= 1.10 then "met" else "NOT met" end)"
' "$out/launch_overhead.json"
echo "JSON: $out/launch_overhead.json"
