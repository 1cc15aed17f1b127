#!/usr/bin/env bash
# Records what the real slurmctld chooses, for tests/unit/mapper/slurm_select_lab_test.cc to
# replay through select_tree and select_flat. For each mode (tree: topology/tree with the given
# topology.conf; none: topology/none) it brings up a lab of LAB_NODES (12) nodes, then for each
# of CASES seeded random busy patterns: holds the busy nodes with one real exclusive job
# (sbatch -w LIST -N COUNT), waits until it runs, submits `sbatch -N K --exclusive` (K random,
# at most the free count), reads the allocation Slurm gave it (squeue %N), cancels both and
# waits for the nodes to be idle. One fixture file per mode, one line per case:
#   free=node[1,4-7] nodes=3 slurm=node[4-6]
# with a header naming the Slurm version, the mode and the topology.conf. --patterns FILE takes
# the cases from FILE instead (lines `free=LIST nodes=K`: chosen where the releases' rules part).
#
# Usage: tests/lab/select-check.sh [--cases N] [--seed S] [--out DIR] [--modes "tree none"]
#          [--topology FILE] [--tag TAG] [--patterns FILE]
# Needs root (the lab). Only one lab runs on a machine at a time (fixed bridge and namespace
# names): the script takes /tmp/ta-helper-lab.lock (flock, up to an hour) around its lab use,
# and always takes the lab down. TOPO_AWARE_LAB picks the lab directory as for lab.sh.
set -euo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LAB_SH=$SRC/tests/lab/lab.sh
CASES=60
SEED=36
OUT=$SRC/tests/fixtures/slurm-select
MODES="tree none"
TOPOLOGY=$SRC/tests/fixtures/slurm-select/topology.conf
TAG=""
PATTERNS=""
LOCK=/tmp/ta-helper-lab.lock
export LAB_NODES=${LAB_NODES:-12}
die() { echo "select-check: error: $*" >&2; exit 1; }
say() { echo "select-check: $*" >&2; }

while [ $# -gt 0 ]; do
  case $1 in
    --cases) CASES=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --modes) MODES=$2; shift 2 ;;
    --topology) TOPOLOGY=$2; shift 2 ;;
    --tag) TAG=$2; shift 2 ;;
    --patterns) PATTERNS=$(realpath "$2"); CASES=$(grep -c '^free=' "$2"); shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
[ "$(id -u)" -eq 0 ] || die "needs root (the lab)"
[ -f "$TOPOLOGY" ] || die "no topology.conf at $TOPOLOGY"

# The lab is one per machine: hold the lock for the whole run (re-run under flock once).
if [ "${SELECT_CHECK_LOCKED:-}" != 1 ]; then
  SELECT_CHECK_LOCKED=1 exec flock -w 3600 "$LOCK" "$0" --cases "$CASES" --seed "$SEED" \
    --out "$OUT" --modes "$MODES" --topology "$TOPOLOGY" --tag "$TAG" \
    ${PATTERNS:+--patterns "$PATTERNS"}
fi

eval "$("$LAB_SH" env)"
trap '"$LAB_SH" down >/dev/null 2>&1 || true' EXIT

state_of() { squeue -h -j "$1" -o %T 2>/dev/null || true; }

# Waits until job $1 runs; prints its state if it does not within $2 seconds.
wait_running() {
  local deadline=$((SECONDS + $2)) st
  while [ $SECONDS -lt $deadline ]; do
    st=$(state_of "$1")
    [ "$st" = RUNNING ] && return 0
    sleep 0.1
  done
  echo "$st"
  return 1
}

# No job left and every node idle.
wait_clean() {
  local deadline=$((SECONDS + 120)) states
  scancel --quiet --user=root 2>/dev/null || true
  while [ $SECONDS -lt $deadline ]; do
    if [ -z "$(squeue -h -o %i 2>/dev/null)" ]; then
      states=$(sinfo -h -N -o %T | sort -u)
      [ "$states" = idle ] && return 0
    fi
    sleep 0.2
  done
  sinfo -N >&2
  die "nodes not idle 120 s after scancel"
}

submit() { sbatch --parsable --exclusive -o /dev/null -J "$1" "${@:2}" --wrap 'sleep 1000'; }

record_mode() {
  local mode=$1 lab_topology nodes all file
  case $mode in
    tree) lab_topology=$TOPOLOGY ;;
    none) lab_topology=none ;;
    *) die "mode: tree or none, not $mode" ;;
  esac
  "$LAB_SH" down >/dev/null 2>&1 || true
  mkdir -p "$TOPO_AWARE_LAB/etc"
  "$LAB_SH" plugstack none  # Slurm's own choice: no SPANK plugin in the way
  LAB_TOPOLOGY=$lab_topology "$LAB_SH" up
  nodes=$LAB_NODES
  mapfile -t all < <(scontrol show hostnames "node[1-$nodes]")
  local version; version=$(sinfo -V | awk '{print $2}')
  file=$OUT/slurm-$(cut -d. -f1,2 <<<"$version")$TAG-$mode.txt
  {
    echo "# Slurm's node selection, recorded from the real slurmctld by tests/lab/select-check.sh"
    echo "# slurm: $version"
    echo "# mode: $mode"
    echo "# nodes: node[1-$nodes] in slurm.conf order, weight 1, $(grep -o 'CPUs=[0-9]*' \
      "$SLURM_CONF" | head -1) each; jobs --exclusive"
    if [ -n "$PATTERNS" ]; then
      echo "# patterns: $(basename "$PATTERNS"), cases: $CASES, recorded $(date -u +%Y-%m-%dT%H:%MZ)"
    else
      echo "# seed: $SEED, cases: $CASES, recorded $(date -u +%Y-%m-%dT%H:%MZ)"
    fi
    grep -E '^(TopologyPlugin|SelectType|SelectTypeParameters)=' "$SLURM_CONF" | sed 's/^/# /'
    if [ "$mode" = tree ]; then
      echo "# topology.conf ($(basename "$TOPOLOGY")):"
      sed 's/^/#   /' "$TOPOLOGY"
    fi
  } >"$file"
  RANDOM=$SEED
  local c busy_n free_list busy_list k job probe got st i j tmp
  for c in $(seq 1 "$CASES"); do
    local t_case=$SECONDS
    # A random busy set of 0 to nodes-1 nodes (a shuffle's first busy_n), then K in 1..free.
    local order=("${all[@]}")
    for ((i = nodes - 1; i > 0; i--)); do
      j=$((RANDOM % (i + 1))); tmp=${order[i]}; order[i]=${order[j]}; order[j]=$tmp
    done
    busy_n=$((RANDOM % nodes))
    k=$((RANDOM % (nodes - busy_n) + 1))
    busy_list=$(IFS=,; echo "${order[*]:0:busy_n}")
    free_list=$(IFS=,; echo "${order[*]:busy_n}")
    if [ -n "$PATTERNS" ]; then  # the case from the file; the shuffle above only keeps RANDOM's pace
      local pattern; pattern=$(grep '^free=' "$PATTERNS" | sed -n "${c}p")
      free_list=$(sed 's/^free=\([^ ]*\) .*/\1/' <<<"$pattern")
      k=$(sed 's/.* nodes=\([0-9]*\).*/\1/' <<<"$pattern")
      mapfile -t order < <(scontrol show hostnames "$free_list")
      busy_list=$(comm -23 <(printf '%s\n' "${all[@]}" | sort) <(printf '%s\n' "${order[@]}" | sort) |
        paste -sd,)
      busy_n=$(( nodes - ${#order[@]} ))
    fi
    free_list=$(scontrol show hostlistsorted "$free_list")
    if [ "$busy_n" -gt 0 ]; then
      job=$(submit busy -w "$busy_list" -N "$busy_n")
      st=$(wait_running "$job" 30) || die "case $c: the busy job $job did not run ($st)"
    fi
    probe=$(submit probe -N "$k")
    if st=$(wait_running "$probe" 20); then
      got=$(squeue -h -j "$probe" -o %N)
      got=$(scontrol show hostlistsorted "$got")
    else
      got="pending($(squeue -h -j "$probe" -o %r))"
    fi
    echo "free=$free_list nodes=$k slurm=$got" >>"$file"
    say "$mode case $c/$CASES ($((SECONDS - t_case)) s): free=$free_list nodes=$k slurm=$got"
    wait_clean
  done
  "$LAB_SH" down
}

mkdir -p "$OUT"
# The recordings are replayed with the topology.conf they were made with, from the same folder.
[ "$(realpath "$TOPOLOGY")" = "$(realpath -m "$OUT/topology.conf")" ] || cp "$TOPOLOGY" "$OUT/topology.conf"
t0=$SECONDS
for mode in $MODES; do
  record_mode "$mode"
done
say "done in $((SECONDS - t0)) s: $OUT"
