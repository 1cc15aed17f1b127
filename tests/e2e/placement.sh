#!/usr/bin/env bash
# Placement into Slurm through etc/cli_filter.lua (docs/placement.md, "Into Slurm: cli_filter"),
# on the lab's real sbatch. Sourced by tests/e2e/run.sh (its helpers: check, $OUT, $CLI, $LAB,
# $SRC, $LABSH); run alone, `bash tests/e2e/placement.sh [BUILD_DIR]` brings the lab up without
# the plugin, runs these checks and takes the lab down. About 35 s (34 s measured on a shared
# 2-core machine), plus the bring-up when run alone.
#
# The lab's Slurm tree says node[1-2] | node[3-4]; the fabric the filter is given,
# tests/e2e/lab-crossed.toml, is cabled across the names: node1,3 on one leaf, node2,4 on the
# other. node1 is held by another job, so three nodes are free. Slurm's own choice for a 2-node
# job (its tree, or a flat best fit over consecutive nodes alike) is node[3-4] or node[2-3]:
# across the real leaves. With the filter the job is pinned to node[2,4], one leaf.
#   - the same job without asking: Slurm's choice, no node list set;
#   - TOPO_AWARE_PLACE=1, and --comment topo-aware:place: ReqNodeList=node[2,4], run there;
#   - the fabric from the plugin's configuration beside slurm.conf (lab-cluster.toml, where
#     Slurm's tree is right): node[3-4];
#   - fail-open: a fabric that is not there, a tool that is not there, a node count no partition
#     holds: the job is submitted as asked (exit 0, no node list) with one line on stderr;
#   - `place --of nodelist` (from the free list and from the running Slurm) read back through
#     `scontrol show hostnames` is exactly the chosen hosts.

placement_main() {
  local dir=$OUT/placement t0=$SECONDS
  rm -rf "$dir"
  mkdir -p "$dir"
  placement_checks "$dir"
  # Whatever happened above: no job of ours left, the filter off for what runs next.
  local name
  for name in hold slurm env comment layout config nofabric notool toobig; do
    scancel -n "$name" 2>/dev/null
  done
  "$LABSH" up >>"$dir/up.log" 2>&1
  check "placement: the filter removed again" test ! -e "$LAB/etc/cli_filter.lua"
  echo "e2e:   placement took $((SECONDS - t0)) s"
}

placement_checks() {
  local dir=$1 crossed=$SRC/tests/e2e/lab-crossed.toml
  LAB_CLI_FILTER=$SRC/etc/cli_filter.lua "$LABSH" up >"$dir/up.log" 2>&1 ||
    { check "placement: the lab with the cli_filter" false; return; }
  # The plugin's lab configuration as lab.sh writes it (fabric etc/lab-cluster.toml, the DGX
  # H100 capture for every node): what the filter hands place by default.
  "$LABSH" config
  check "placement: the filter sits beside slurm.conf, CliFilterPlugins=cli_filter/lua" \
    bash -c "cmp -s '$SRC/etc/cli_filter.lua' '$LAB/etc/cli_filter.lua' &&
             grep -qx 'CliFilterPlugins=cli_filter/lua' '$LAB/etc/slurm.conf'"

  # Another job holds node1 for the whole test.
  local hold
  hold=$(sbatch --parsable -w node1 --exclusive -o /dev/null -J hold --wrap 'sleep 600' 2>"$dir/hold.err")
  placement_wait_running "$hold" || { check "placement: a job holds node1" false; return; }

  # sbatch in the lab; stderr in $dir/<name>.err; the job's id in $dir/<name>.id.
  submit() {  # name, sbatch args...
    local name=$1; shift
    TOPO_AWARE_TOOL=${TOPO_AWARE_TOOL:-$CLI} timeout 60 sbatch --parsable -o /dev/null -J "$name" \
      "$@" --wrap 'sleep 30' >"$dir/$name.id" 2>"$dir/$name.err"
  }
  # The job's ReqNodeList and, once it runs, its NodeList; then it is cancelled and its nodes
  # given time to be free again, so the next submission sees what this one saw.
  nodes_of() {  # name
    local id; id=$(cat "$dir/$1.id")
    placement_wait_running "$id"
    scontrol show job "$id" | tr ' ' '\n' | grep -E '^(NodeList|ReqNodeList)=' | sort | paste -sd' '
    placement_cancel "$id"
  }

  submit slurm -N2
  check "placement: not asked: sbatch exits 0 and says nothing" test $? -eq 0 -a ! -s "$dir/slurm.err"
  local slurm_choice; slurm_choice=$(nodes_of slurm)
  echo "e2e:   Slurm's own choice: $slurm_choice"
  check "placement: not asked: no node list, and Slurm's choice spans the fabric's leaves" \
    placement_is "$slurm_choice" 'NodeList=node\[(3-4|2-3)\] ReqNodeList=\(null\)'

  TOPO_AWARE_PLACE=1 TOPO_AWARE_FABRIC=$crossed submit env -N2
  check "placement: TOPO_AWARE_PLACE=1: sbatch exits 0 and says nothing" \
    test $? -eq 0 -a ! -s "$dir/env.err"
  check "placement: TOPO_AWARE_PLACE=1: pinned to node[2,4], one leaf of the fabric, and runs there" \
    placement_is "$(nodes_of env)" 'NodeList=node\[2,4\] ReqNodeList=node\[2,4\]'

  TOPO_AWARE_FABRIC=$crossed submit comment -N2 --comment 'run 7 topo-aware:place'
  check "placement: --comment topo-aware:place: pinned to node[2,4]" \
    placement_is "$(nodes_of comment)" 'NodeList=node\[2,4\] ReqNodeList=node\[2,4\]'

  TOPO_AWARE_PLACE=tp=8 TOPO_AWARE_FABRIC=$crossed submit layout -N2 -p gpu
  check "placement: TOPO_AWARE_PLACE=tp=8 -p gpu: pinned to node[2,4]" \
    placement_is "$(nodes_of layout)" 'NodeList=node\[2,4\] ReqNodeList=node\[2,4\]'

  TOPO_AWARE_PLACE=1 submit config -N2
  check "placement: the fabric from topo-aware.toml beside slurm.conf (Slurm's tree is right there): node[3-4]" \
    placement_is "$(nodes_of config)" 'NodeList=node\[3-4\] ReqNodeList=node\[3-4\]'

  # Fail-open: the job goes in as asked, one line on stderr says why.
  TOPO_AWARE_PLACE=1 TOPO_AWARE_FABRIC=$LAB/etc/no-such-fabric.toml submit nofabric -N2
  check "placement: fabric missing: sbatch exits 0 with exactly one line on stderr" \
    placement_one_line $? nofabric
  check "placement: fabric missing: the line names the fabric" grep -q 'no-such-fabric' "$dir/nofabric.err"
  check "placement: fabric missing: no node list, Slurm's choice" \
    placement_is "$(nodes_of nofabric)" 'NodeList=node\[[0-9,-]+\] ReqNodeList=\(null\)'
  TOPO_AWARE_PLACE=1 TOPO_AWARE_TOOL=/nonexistent/topo-aware submit notool -N2
  check "placement: tool missing: sbatch exits 0 with exactly one line on stderr" \
    placement_one_line $? notool
  placement_cancel "$(cat "$dir/notool.id")"
  TOPO_AWARE_PLACE=1 TOPO_AWARE_FABRIC=$crossed submit toobig -N4
  check "placement: 4 nodes with 3 free: sbatch exits 0 with one line, the job waits as asked" \
    placement_one_line $? toobig
  placement_cancel "$(cat "$dir/toobig.id")"

  # The node list a user would paste, read back by Slurm.
  "$CLI" place --fabric "$crossed" --free 'node[2-4]' -N 2 --of nodelist >"$dir/free.nodelist" 2>"$dir/free.err"
  check "placement: place --free --of nodelist exits 0" test $? -eq 0
  check "placement: place --free --of nodelist through scontrol show hostnames: node2 node4" \
    test "$(scontrol show hostnames "$(cat "$dir/free.nodelist")" | paste -sd' ')" = "node2 node4"
  "$CLI" place --fabric "$crossed" --from-slurm -N 2 --of nodelist >"$dir/slurm.nodelist" 2>"$dir/slurm-nodelist.err"
  check "placement: place --from-slurm --of nodelist through scontrol show hostnames: node2 node4" \
    test "$(scontrol show hostnames "$(cat "$dir/slurm.nodelist" 2>/dev/null)" 2>/dev/null | paste -sd' ')" = "node2 node4"
}

# Waits (up to 30 s) until job $1 runs.
placement_wait_running() {
  local _
  for _ in $(seq 1 150); do
    [ "$(squeue -h -j "$1" -o %T 2>/dev/null)" = RUNNING ] && return 0
    sleep 0.2
  done
  return 1
}

# Cancels job $1 and waits (up to 30 s) until no node is completing a job but node1's holder.
placement_cancel() {
  local _
  [ -z "$1" ] || scancel "$1" 2>/dev/null
  for _ in $(seq 1 150); do
    [ "$(squeue -h -o %i | wc -l)" -le 1 ] && ! sinfo -h -N -o %T | grep -q completing && return 0
    sleep 0.2
  done
  return 1
}

placement_is() {  # got, extended regex it must match whole
  [[ $1 =~ ^$2$ ]] || { echo "e2e:   got '$1'"; return 1; }
}

placement_one_line() {  # sbatch's exit code, name
  local err=$OUT/placement/$2.err
  [ "$1" -eq 0 ] || { echo "e2e:   sbatch exit $1"; cat "$err"; return 1; }
  [ "$(wc -l <"$err")" -eq 1 ] || { echo "e2e:   stderr:"; cat "$err"; return 1; }
  grep -q '^topo-aware: place: .*: left as asked$' "$err" || { cat "$err"; return 1; }
  echo "e2e:   $(cat "$err")"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  # Alone: the lab without the plugin (an empty plugstack), these checks, the lab down.
  set -uo pipefail
  SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  BUILD=$(cd "${1:-$SRC/build}" && pwd)
  CLI=$BUILD/tools/topo-aware
  LABSH=$SRC/tests/lab/lab.sh
  export TOPO_AWARE_LAB=${TOPO_AWARE_LAB:-/tmp/topo-aware-lab}
  LAB=$TOPO_AWARE_LAB
  export SLURM_CONF=$LAB/etc/slurm.conf
  OUT=$LAB/e2e
  npass=0 nfail=0
  check() {
    local what=$1; shift
    if "$@"; then npass=$((npass + 1)); echo "e2e: PASS: $what"; else nfail=$((nfail + 1)); echo "e2e: FAIL: $what"; fi
  }
  [ "$(id -u)" -eq 0 ] || { echo "e2e: SKIP: needs root (the lab)"; exit 77; }
  [ -x "$CLI" ] || { echo "e2e: SKIP: $CLI not built"; exit 77; }
  [ -f /usr/lib/x86_64-linux-gnu/slurm-wlm/cli_filter_lua.so ] ||
    ls /usr/lib/*/slurm*/cli_filter_lua.so >/dev/null 2>&1 ||
    { echo "e2e: SKIP: Slurm's cli_filter/lua is not installed"; exit 77; }
  mkdir -p "$LAB/etc" "$OUT"
  "$LABSH" plugstack none
  trap '"$LABSH" down >/dev/null 2>&1' EXIT
  "$LABSH" up || { echo "e2e: FAIL: lab bring-up"; exit 1; }
  placement_main
  echo "e2e: placement: $npass passed, $nfail failed (outputs in $OUT/placement)"
  [ "$nfail" -eq 0 ]
  exit
fi

placement_main
