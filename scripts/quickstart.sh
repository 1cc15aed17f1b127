#!/usr/bin/env bash
# The main job, as README's quick start runs it: installs what is missing, builds (release, in
# build/release, reused), brings up (or reuses) the local Slurm lab -- 4 fake DGX H100 nodes,
# each slurmd in its own network namespace, two leaf switches -- and runs one real
#   srun -N4 -n32 --topo-aware=tp=4,cp=2,pp=2
# step through the topo-aware SPANK plugin: a long-context layout over both leaves, where
# Slurm's order sends the data-parallel gradients between hosts and the plan keeps them inside
# one. Prints the per-rank plan every task received and the plan's modeled cost against Slurm's
# order. LAYOUT, NODES and TASKS choose another step (LAYOUT=tp=8,pp=2 NODES=2 TASKS=16).
# Without root (or without Slurm) it cannot start the
# lab, says so, and shows the same plan offline with `topo-aware map`.
# The lab stays up for more sruns (export SLURM_CONF=/tmp/topo-aware-lab/etc/slurm.conf);
# stop it with tests/lab/lab.sh down.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
build=build/release
layout=${LAYOUT:-tp=4,cp=2,pp=2}
nodes=${NODES:-4}
tasks=${TASKS:-32}
capture=$here/tests/fixtures/nccl-topo/dgx-h100-topo.xml
fabric=$here/etc/lab-cluster.toml

root=0
[ "$(id -u)" -eq 0 ] && root=1
if [ $root -eq 1 ]; then scripts/deps.sh lab; else scripts/deps.sh build; fi

echo "== build ($build)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTOPOAWARE_WERROR=ON >/dev/null
targets=(topo-aware)
[ -f /usr/include/slurm/spank.h ] && targets+=(topo_aware_spank)
cmake --build "$build" -j "${JOBS:-$(nproc)}" --target "${targets[@]}"
cli=$here/$build/tools/topo-aware

offline() {
  echo "== topo-aware: $1; showing the plan offline instead (topo-aware map, same inputs)"
  "$cli" map --fabric "$fabric" --nodes "node[1-$nodes]" --node-type "$capture" \
    --layout "$layout" --of table
  exit 0
}
[ $root -eq 1 ] || offline "not root, so the local Slurm lab cannot start"
command -v slurmd >/dev/null || offline "Slurm is not installed"
[ -f "$build/spank/topo_aware.so" ] || offline "the SPANK plugin was not built (no libslurm-dev)"

echo "== lab (tests/lab/lab.sh)"
export TOPO_AWARE_LAB=${TOPO_AWARE_LAB:-/tmp/topo-aware-lab}
export SLURM_CONF=$TOPO_AWARE_LAB/etc/slurm.conf
tests/lab/lab.sh up --plugin "$build/spank/topo_aware.so"
tests/lab/lab.sh config fabric="$fabric"
tests/lab/lab.sh plugstack "config=$TOPO_AWARE_LAB/etc/topo-aware.toml"
sinfo -N -o '%N %T %G' | column -t

report=$(mktemp)
trap 'rm -f "$report"' EXIT
echo
echo "== srun -N$nodes -n$tasks --topo-aware=$layout -v  (each task prints what it received)"
# shellcheck disable=SC2016
srun -N"$nodes" -n"$tasks" --topo-aware="$layout" -v bash -c '
  printf "%s %s %s %s %s %s %s %s\n" "$SLURM_PROCID" "$(hostname)" "${RANK:--}" \
    "${LOCAL_RANK:--}" "${TOPO_AWARE_COORDS:--}" "${NCCL_IB_HCA:--}" \
    "$(taskset -cp $$ | sed "s/.*: //")" "${NCCL_TOPO_FILE:--}"' \
  >"$report" 2> >(grep -E 'topo-aware|error' >&2)
# srun can exit 0 after its step died (Slurm 24.11 did, when slurmstepd failed at launch): the
# tasks' own lines are the proof that the step ran.
got=$(wc -l <"$report")
if [ "$got" -ne "$tasks" ]; then
  echo "topo-aware: quickstart: $got of $tasks tasks reported; the step did not run" \
       "(slurmd logs: $TOPO_AWARE_LAB/log/)" >&2
  exit 1
fi
echo
echo "per-rank plan (sorted by RANK; task = Slurm's SLURM_PROCID):"
{
  echo "RANK TASK HOST LOCAL_RANK COORDS NCCL_IB_HCA CPUS NCCL_TOPO_FILE"
  sort -k3,3n "$report" | awk '{print $3, $1, $2, $4, $5, $6, $7, $8}'
} | column -t
echo
echo "== cost against Slurm's order (topo-aware map on the same inputs)"
"$cli" map --fabric "$fabric" --nodes "node[1-$nodes]" --node-type "$capture" \
  --layout "$layout" --of table || true
echo
echo "The lab stays up: export SLURM_CONF=$SLURM_CONF; srun --topo-aware=... ;"
echo "stop it with: tests/lab/lab.sh down"
