#!/usr/bin/env bash
# scripts/calibrate.sh submitted with sbatch to the lab, with a fake nccl-tests folder
# (fake_nccl_perf.sh under each test's name: no GPU here) whose ranks print the real host name
# of the node Slurm started them on. Sourced by tests/e2e/run.sh (its helpers: check, $OUT, $CLI,
# $LAB, $SRC); run alone, `bash tests/e2e/calibrate.sh [BUILD_DIR]` brings the lab up (without
# the plugin), runs these checks and takes the lab down.
#
# Four jobs, queued at once (sbatch --wait):
#   crossed  4 nodes, tests/e2e/lab-crossed.toml (node1,3 on leaf1, node2,4 on leaf2): the plan's
#            order keeps each leaf's hosts together, interleaving gives Slurm's order back
#   lab      4 nodes, etc/lab-cluster.toml (node1-2 on leaf1, node3-4 on leaf2): interleaved is
#            node1,node3,node2,node4, the plan's order is Slurm's
#   nofabric 4 nodes, --nodes-max 2, no fabric: plan and interleaved skipped with the reason
#   notests  an empty --nccl-tests folder: the job fails with the commands that build it
# Each result file must start with the header line, its ranks (Rank lines) must sit on the
# header's hosts in its order, g a host, as `topo-aware map --of host-order` computes the order;
# the manifest must list every case, order and test, ran or skipped with why.

calibrate_main() {
  local dir=$OUT/calibrate fake t job
  rm -rf "$dir"
  mkdir -p "$dir/fake-nccl-tests" "$dir/empty"
  fake=$dir/fake-nccl-tests
  for t in all_reduce reduce_scatter all_gather alltoall sendrecv; do
    cp "$SRC/tests/e2e/fake_nccl_perf.sh" "$fake/${t}_perf"
    chmod 0755 "$fake/${t}_perf"
  done
  local common=(--nccl-tests "$fake" --topo-aware "$CLI" --max-bytes 16M)
  local crossed=$SRC/tests/e2e/lab-crossed.toml lab=$SRC/etc/lab-cluster.toml
  declare -A rc=() pid=()
  submit() {  # name, sbatch args..., --, calibrate args...
    local name=$1; shift
    local sb=()
    while [ "$1" != -- ]; do sb+=("$1"); shift; done
    shift
    timeout 600 sbatch --wait --chdir="$dir" -o "$dir/$name.log" -J "cal-$name" "${sb[@]}" \
      "$SRC/scripts/calibrate.sh" --out "$dir/$name" "$@" >"$dir/$name.sbatch" 2>&1
  }
  submit crossed -N4 --gpus-per-node=8 --exclusive -- "${common[@]}" --fabric "$crossed" &
  pid[crossed]=$!
  submit lab -N4 --gpus-per-node=8 --exclusive -- "${common[@]}" --fabric "$lab" \
    --tests all_reduce,sendrecv_perf &
  pid[lab]=$!
  submit nofabric -N4 --gpus-per-node=8 --exclusive -- "${common[@]}" --nodes-max 2 \
    --tests all_reduce &
  pid[nofabric]=$!
  submit notests -N1 --gpus-per-node=8 -- --nccl-tests "$dir/empty" --topo-aware "$CLI" &
  pid[notests]=$!
  for job in crossed lab nofabric notests; do
    wait "${pid[$job]}"
    rc[$job]=$?
  done

  check "calibrate.sh (crossed fabric) under sbatch: the job exits 0" test "${rc[crossed]}" -eq 0
  check "calibrate.sh (lab fabric) under sbatch: the job exits 0" test "${rc[lab]}" -eq 0
  check "calibrate.sh (no fabric, --nodes-max 2) under sbatch: the job exits 0" \
    test "${rc[nofabric]}" -eq 0

  # Every case x order x test has one manifest line: 1 node; 2 nodes at 8, 4, 2 GPUs in three
  # orders; 3 and 4 nodes in three orders.
  check "crossed: the manifest lists all 16 case-orders x 5 tests" \
    test "$(grep -cE '^(ran|skipped|failed) ' "$dir/crossed/manifest.txt")" -eq 80
  check "lab: the manifest lists all 16 case-orders x 2 tests" \
    test "$(grep -cE '^(ran|skipped|failed) ' "$dir/lab/manifest.txt")" -eq 32
  check "no step failed" bash -c "! grep -h '^failed ' '$dir'/{crossed,lab,nofabric}/manifest.txt"
  for job in crossed lab nofabric; do
    check "$job: every file the manifest says ran has the header and its ranks on the header's hosts, in order" \
      calibrate_results_match "$dir/$job" "$job"
  done
  check "crossed: 4 nodes, the plan's order keeps each leaf's hosts together" \
    grep -qE '^ran case=4n8g order=plan test=all_reduce file=4n-8g-plan-all_reduce.txt hosts=(node1,node3,node2,node4|node3,node1,node4,node2|node2,node4,node1,node3|node4,node2,node3,node1) ' \
      "$dir/crossed/manifest.txt"
  check "crossed: 4 nodes, interleaved is Slurm's order there, skipped as such" \
    grep -q '^skipped case=4n8g order=interleaved test=sendrecv file=- hosts=-: same hosts in the same order as block' \
      "$dir/crossed/manifest.txt"
  check "lab: 4 nodes interleaved over the leaves: node1,node3,node2,node4" \
    grep -q '^ran case=4n8g order=interleaved test=sendrecv file=4n-8g-interleaved-sendrecv.txt hosts=node1,node3,node2,node4 ' \
      "$dir/lab/manifest.txt"
  check "lab: 3 nodes interleaved: node1,node3,node2" \
    grep -q '^ran case=3n8g order=interleaved test=all_reduce file=3n-8g-interleaved-all_reduce.txt hosts=node1,node3,node2 ' \
      "$dir/lab/manifest.txt"
  check "lab: 2 nodes interleaved: one on each leaf, node1,node3" \
    grep -q '^ran case=2n4g order=interleaved test=all_reduce file=2n-4g-interleaved-all_reduce.txt hosts=node1,node3 ' \
      "$dir/lab/manifest.txt"
  check "lab: 2 nodes, the plan's order is Slurm's there, skipped as such" \
    grep -q '^skipped case=2n2g order=plan test=sendrecv file=- hosts=-: same hosts in the same order as block' \
      "$dir/lab/manifest.txt"
  check "lab: the one-node case on node1 with 8 ranks" \
    test "$(calibrate_rank_hosts "$dir/lab/1n-8g-block-all_reduce.txt" | grep -cx node1)" -eq 8
  check "lab: 2 nodes at 2 GPUs: 4 ranks, 2 a host" \
    test "$(calibrate_rank_hosts "$dir/lab/2n-2g-block-sendrecv.txt" | uniq -c | awk '{print $1 $2}' | paste -sd,)" = 2node1,2node2
  check "the steps ran with NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=INIT,TUNING,ENV" \
    grep -q 'NCCL INFO NCCL_DEBUG_SUBSYS set by environment to INIT,TUNING,ENV' \
      "$dir/lab/4n-8g-interleaved-sendrecv.txt"
  check "the manifest records the NCCL release the steps printed" \
    grep -q '^# nccl: NCCL version 2.21.5+cuda12.4; ' "$dir/lab/manifest.txt"
  check "nvidia-smi -L asked on every node (none in the lab: said so)" \
    test "$(grep -c '(no nvidia-smi)' "$dir/lab/nvidia-smi.txt")" -eq 4
  check "no fabric: plan skipped with the reason" \
    grep -q "^skipped case=2n8g order=plan test=all_reduce file=- hosts=-: no --fabric or --config: the plan's order is Slurm's" \
      "$dir/nofabric/manifest.txt"
  check "no fabric: interleaved skipped with the reason" \
    grep -q '^skipped case=2n2g order=interleaved test=all_reduce file=- hosts=-: no --fabric or --config: the leaves are unknown' \
      "$dir/nofabric/manifest.txt"
  check "--nodes-max 2: the 3- and 4-node cases skipped with the reason" \
    grep -q '^skipped case=3n..4n order=- test=- file=- hosts=-: --nodes-max 2' "$dir/nofabric/manifest.txt"
  check "no fabric: only block order ran (4 files)" \
    test "$(find "$dir/nofabric" -maxdepth 1 -name '*n-*g-*.txt' | wc -l)" -eq 4
  check "no nccl-tests: the job fails" test "${rc[notests]}" -ne 0
  check "no nccl-tests: the job's log says how to build it" \
    bash -c "grep -q 'git clone https://github.com/NVIDIA/nccl-tests' '$dir/notests.log' &&
             grep -q 'make -j MPI=1 MPI_HOME=' '$dir/notests.log' &&
             ! test -e '$dir/notests/manifest.txt'"

  # `topo-aware calibrate` reads what the script wrote (docs/calibration.md, "Correct the model
  # with your runs"): every run the manifest says ran is modeled on its hosts in its order, the
  # host orders are compared, and a fit writes a calibration file. The fake's bus bandwidths are
  # made up, so the verdict itself is not held to anything here.
  local ran_lab crc
  ran_lab=$(grep -c '^ran ' "$dir/lab/manifest.txt")
  "$CLI" calibrate --check "$dir/lab" --fabric "$SRC/etc/lab-cluster.toml" --of json \
    >"$dir/lab-check.json" 2>"$dir/lab-check.err"
  crc=$?
  check "calibrate --check reads calibrate.sh's results and gives a verdict (exit 0 or 4)" \
    test "$crc" -eq 0 -o "$crc" -eq 4
  check "calibrate --check models every run the manifest says ran ($ran_lab)" \
    python3 -c "import json,sys; d=json.load(open('$dir/lab-check.json')); \
sys.exit(0 if len(d['runs']) == $ran_lab and not d['skipped'] else 1)"
  check "calibrate --check compares block and interleaved orders of the same cases" \
    python3 -c "import json,sys; d=json.load(open('$dir/lab-check.json')); \
sys.exit(0 if d['cases'] and all({'block','interleaved'} <= set(c['orders']) for c in d['cases']) else 1)"
  "$CLI" calibrate "$dir/lab" --fabric "$SRC/etc/lab-cluster.toml" -o "$dir/lab-calibration.toml" \
    >"$dir/lab-fit.out" 2>&1
  check "calibrate fits the lab's results into a calibration file" \
    grep -qx 'format = 1' "$dir/lab-calibration.toml"
}

# The host of each rank in a result file, rank order ("#  Rank  3 Group  0 Pid  123 on  node2 ...").
calibrate_rank_hosts() {
  awk '$1 == "#" && $2 == "Rank" { print $3, $9 }' "$1" | sort -n | awk '{ print $2 }'
}

# Every "ran" line of a manifest: its file starts with the header, the header's hosts are the
# manifest's, the Rank lines are n*g ranks, g a host, hosts in that order, and that order is what
# Slurm's allocation (block) or `topo-aware map --of host-order` gives. Args: out dir, job name.
calibrate_results_match() {
  local out=$1 job=$2 line case_id order t file hosts n g head got want fabric=""
  case $job in
    crossed) fabric=$SRC/tests/e2e/lab-crossed.toml ;;
    lab) fabric=$SRC/etc/lab-cluster.toml ;;
  esac
  local ran=0
  while read -r line; do
    case_id=$(sed -E 's/.* case=([^ ]+) .*/\1/' <<<"$line")
    order=$(sed -E 's/.* order=([^ ]+) .*/\1/' <<<"$line")
    t=$(sed -E 's/.* test=([^ ]+) .*/\1/' <<<"$line")
    file=$(sed -E 's/.* file=([^ ]+) .*/\1/' <<<"$line")
    hosts=$(sed -E 's/.* hosts=([^ ]+) .*/\1/' <<<"$line")
    n=${case_id%%n*}
    g=${case_id#*n}; g=${g%g}
    head=$(head -1 "$out/$file")
    if ! [[ $head =~ ^\#\ topo-aware-calibrate\ case=$case_id\ nodes=$n\ gpus_per_node=$g\ order=$order\ test=$t\ hosts=$hosts\ date=[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z$ ]]; then
      echo "e2e:   $file: header '$head'"; return 1
    fi
    got=$(calibrate_rank_hosts "$out/$file" | uniq -c | awk -v g="$g" '$1 != g { bad = 1 } { print $2 } END { exit bad }' | paste -sd,) ||
      { echo "e2e:   $file: a host without $g ranks"; return 1; }
    [ "$got" = "$hosts" ] || { echo "e2e:   $file: ranks on $got, header says $hosts"; return 1; }
    case $order in
      block) want=$(seq 1 "$n" | sed 's/^/node/' | paste -sd,) ;;
      plan) want=$("$CLI" map --fabric "$fabric" --nodes "$(seq 1 "$n" | sed 's/^/node/' | paste -sd,)" \
                     --tasks-per-node "$g" --of host-order --order plan | paste -sd,) ;;
      # The first n of all four hosts interleaved.
      *) want=$("$CLI" map --fabric "$fabric" --nodes 'node[1-4]' --tasks-per-node "$g" \
                  --of host-order --order interleaved | head -n "$n" | paste -sd,) ;;
    esac
    [ "$got" = "$want" ] || { echo "e2e:   $file: ranks on $got, the $order order is $want"; return 1; }
    ran=$((ran + 1))
  done < <(grep '^ran ' "$out/manifest.txt")
  [ "$ran" -gt 0 ] || { echo "e2e:   $out: nothing ran"; return 1; }
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  # Alone: the lab without the plugin (an empty plugstack), these checks, the lab down.
  set -uo pipefail
  SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  BUILD=$(cd "${1:-$SRC/build}" && pwd)
  CLI=$BUILD/tools/topo-aware
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
  mkdir -p "$LAB/etc" "$OUT"
  "$SRC/tests/lab/lab.sh" plugstack none
  trap '"$SRC/tests/lab/lab.sh" down >/dev/null 2>&1' EXIT
  "$SRC/tests/lab/lab.sh" up || { echo "e2e: FAIL: lab bring-up"; exit 1; }
  calibrate_main
  echo "e2e: calibrate: $npass passed, $nfail failed (outputs in $OUT/calibrate)"
  [ "$nfail" -eq 0 ]
  exit
fi

calibrate_main
