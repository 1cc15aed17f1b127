#!/usr/bin/env bash
# What the topo-aware plugin adds to slurmstepd per step, on the local Slurm lab: each node logs,
# for every step it plans, the wall time of its user_init work (inputs, plan, NCCL XML, rank 0's
# address) and its peak RSS before and after (getrusage), in the slurmd log:
#   topo-aware: step 12.0 planned on node2 in 14.3 ms, peak RSS 9120 KiB (+2304 KiB)
# This runs STEPS steps of each shape on the 4 nodes and prints per shape the median and maximum
# of both, over every node of every step. Shapes: 32 tasks tp=8,pp=2 on the lab's fabric; one
# torchrun-style task a host; and 32 tasks against 2,048- and 16,384-host fabric descriptions
# (the cost of reading a large cluster's fabric in every step). Needs root.
# Usage: tools/bench/stepd_cost.sh [BUILD_DIR]     (STEPS=10)
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$src/build/release}" && pwd)
steps=${STEPS:-10}
[ "$(id -u)" -eq 0 ] || { echo "stepd_cost: needs root (the lab cluster)" >&2; exit 77; }
export TOPO_AWARE_LAB=${TOPO_AWARE_LAB:-/tmp/topo-aware-lab}
export SLURM_CONF=$TOPO_AWARE_LAB/etc/slurm.conf
lab=$src/tests/lab/lab.sh
out=$TOPO_AWARE_LAB/bench
mkdir -p "$out"
"$lab" up --plugin "$build/spank/topo_aware.so" >/dev/null
"$lab" plugstack "config=$TOPO_AWARE_LAB/etc/topo-aware.toml"

# Large fabrics: leaves of 16 DGX hosts, 2:1 to 8 spines with 64 cables a leaf-spine pair; the
# lab's node1-4 in them. 2,048 hosts (128 leaves) and 16,384 (1,024 leaves).
big_fabric() {
  local hosts=$1 leaves=$(($1 / 16))
  cat >"$out/fabric-$hosts.toml" <<EOT
name = "bench-$hosts"
[defaults]
link = "4xNDR"
[node_types.dgx-h100]
capture = "$src/tests/fixtures/nccl-topo/dgx-h100-topo.xml"
gpus = 8
[[unit]]
name = "all"
hosts = "node[1-$hosts]"
node_type = "dgx-h100"
leaves = "leaf[1-$leaves]"
wiring = "spread"
nics = 8
[[uplinks]]
from = "leaf[1-$leaves]"
to = "spine[1-8]"
cables = 64
EOT
  echo "$out/fabric-$hosts.toml"
}

# Byte sizes of the slurmd logs now: each shape reads only what its steps wrote after.
log_marks() { for f in "$TOPO_AWARE_LAB"/log/slurmd-node*.log; do echo "$f $(stat -c %s "$f")"; done; }

# shape name, fabric, srun arguments...
run_shape() {
  local name=$1 fabric=$2 marks; shift 2
  "$lab" config fabric="$fabric" >/dev/null
  marks=$(log_marks)
  for _ in $(seq 1 "$steps"); do srun "$@" true >/dev/null 2>&1 || true; done
  while read -r f size; do tail -c +"$((size + 1))" "$f"; done <<<"$marks" |
    grep 'topo-aware: step .* planned on' >"$out/stepd-$name.raw" || true
}

mark=$(date +%s)
run_shape per-gpu "$src/etc/lab-cluster.toml" -N4 -n32 --topo-aware=tp=8,pp=2
run_shape per-node "$src/etc/lab-cluster.toml" -N4 --ntasks-per-node=1 --topo-aware=tp=8,pp=2
run_shape fabric-2048 "$(big_fabric 2048)" -N4 -n32 --topo-aware=tp=8,pp=2
run_shape fabric-16384 "$(big_fabric 16384)" -N4 -n32 --topo-aware=tp=8,pp=2
"$lab" config fabric="$src/etc/lab-cluster.toml" >/dev/null

echo "slurmstepd cost of topo-aware per node per step ($steps steps x 4 nodes per shape)"
python3 - "$out" <<'PY' | tee "$out/stepd-cost.txt"
import re, statistics, sys
out = sys.argv[1]
pat = re.compile(r"in ([0-9.]+) ms, peak RSS (\d+) KiB \(\+(-?\d+) KiB\)")
print(f"  {'shape':12} {'n':>4} {'ms med':>8} {'ms max':>8} {'+KiB med':>9} {'+KiB max':>9} "
      f"{'peak KiB max':>13}")
for shape in ("per-gpu", "per-node", "fabric-2048", "fabric-16384"):
    rows = [tuple(map(float, m.groups())) for m in map(pat.search, open(f"{out}/stepd-{shape}.raw"))
            if m]
    if not rows:
        print(f"  {shape:12} no lines logged")
        continue
    ms, peak, add = zip(*rows)
    print(f"  {shape:12} {len(rows):4d} {statistics.median(ms):8.1f} {max(ms):8.1f} "
          f"{statistics.median(add):9.0f} {max(add):9.0f} {max(peak):13.0f}")
PY
echo "(elapsed $(( $(date +%s) - mark )) s; the raw log lines in $out/stepd-*.raw)"
