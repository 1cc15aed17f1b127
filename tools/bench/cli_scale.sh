#!/usr/bin/env bash
# The 131,072-GPU target of issue 11, end to end as a user meets it: `topo-aware map` reading a
# Slurm topology.conf of 16,384 hosts without LinkSpeed (3 tiers: leaves of 32, pods of 16
# leaves) and the DGX H100 node capture, planning tp=8,cp=2,ep=2,pp=8,dp=auto and writing the
# plan as JSON -- parsing, planning and JSON included -- on one core (taskset -c 0). Target: <= 2 s
# and <= 1 GiB peak. Prints each run and PASS/FAIL on the median of RUNS (default 5).
# Usage: tools/bench/cli_scale.sh [BUILD_DIR]
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$src/build/release}" && pwd)
runs=${RUNS:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$build/tools/bench/mapper_bench" --write-scale-conf "$work/topology.conf"
cmd=("$build/tools/topo-aware" map --fabric "$work/topology.conf"
     --node-type "$src/tests/fixtures/nccl-topo/dgx-h100-topo.xml" --nodes 'node[00000-16383]'
     --layout tp=8,cp=2,ep=2,pp=8,dp=auto --of json -o "$work/plan.json")
pin=()
command -v taskset >/dev/null && pin=(taskset -c 0)
walls=() rss=0
for ((i = 0; i < runs; i++)); do
  /usr/bin/time -f "%e %M" -o "$work/time" "${pin[@]}" "${cmd[@]}"
  read -r wall kb < "$work/time"
  echo "run $((i + 1)): ${wall} s wall, $((kb / 1024)) MiB peak"
  walls+=("$wall")
  (( kb > rss )) && rss=$kb
done
median=$(printf '%s\n' "${walls[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
mib=$((rss / 1024))
verdict=FAIL
awk -v m="$median" 'BEGIN {exit !(m <= 2.0)}' && (( mib <= 1024 )) && verdict=PASS
echo "$verdict  131,072 GPUs, CLI end to end (topology.conf + capture -> JSON), one core: median" \
     "${median} s wall (target <= 2 s), ${mib} MiB peak (target <= 1024)"
