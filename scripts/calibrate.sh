#!/usr/bin/env bash
# Measure your own cluster (issue 34): nccl-tests on a site's GPU nodes, for the cost model's
# calibration (docs/calibration.md, "Measure your own cluster: scripts/calibrate.sh").
#
#   sbatch -N 4 --gpus-per-node=8 --exclusive scripts/calibrate.sh [OPTIONS]
#   (or inside an salloc; --dry-run prints the steps without running them, also outside one)
#
# Runs all_reduce_perf, reduce_scatter_perf, all_gather_perf, alltoall_perf and sendrecv_perf
# (1 MiB to 4 GiB, doubling, one GPU a process) as steps of this allocation: on one node; on two
# nodes at 8, 4 and 2 GPUs a node; on 3..N nodes at every GPU. Each multi-node case runs in three
# host orders: Slurm's (block) and the plan's (`topo-aware map`) on the allocation's first n
# hosts, and leaf-interleaved (the first n of the allocation's hosts taken round-robin over the
# fabric's leaves, the worst locality host order can give). The order is
# imposed with srun --distribution=arbitrary and SLURM_HOSTFILE. NCCL_DEBUG=INFO records NCCL's
# algorithm and channel choices. Never needs root; writes only under --out. `topo-aware calibrate`
# reads the results (--check: the model against them; without: the calibration file).
#SBATCH --job-name=topo-aware-calibrate
set -euo pipefail

prog=calibrate
say() { echo "topo-aware: $prog: $*" >&2; }
die() { echo "topo-aware: $prog: error: $*" >&2; exit 1; }

usage() {
  cat <<'EOF'
usage: sbatch -N N --gpus-per-node=G [--exclusive] scripts/calibrate.sh [OPTIONS]
       scripts/calibrate.sh [OPTIONS]            (inside an salloc)
       scripts/calibrate.sh --dry-run --nodes LIST --gpus-per-node G [OPTIONS]

Runs nccl-tests on 1 node, on 2 nodes at 8, 4 and 2 GPUs a node, and on 3..N nodes, each
multi-node case in three host orders (block, plan, interleaved), one result file per case,
order and test under --out, and a manifest.txt of every case run or skipped and why.

  --out DIR            where the results go (default: calibrate-<job id>)
  --fabric FILE        the fabric (topology.conf, ibnetdiscover dump, TOML): the plan's and the
                       interleaved order come from it (topo-aware map --of host-order)
  --config TOML        the plugin's config (its fabric and node captures), instead of --fabric
  --tests LIST         comma-separated (default all_reduce,reduce_scatter,all_gather,alltoall,
                       sendrecv; a _perf suffix is accepted)
  --min-bytes SIZE     smallest message (default 1M)
  --max-bytes SIZE     largest message (default 4G)
  --nodes-max K        at most K nodes in any case (default: every node of the job)
  --gpus-per-node G    GPUs a node (default: from Slurm's job environment)
  --nccl-tests DIR     the nccl-tests build folder (default: $NCCL_TESTS_DIR, PATH,
                       /opt/nccl-tests/build, $HOME/nccl-tests/build, /usr/local/bin)
  --mpi TYPE           srun --mpi=TYPE for the steps (default: pmix where srun lists it, else
                       pmi2, else Slurm's MpiDefault); none for a build without MPI
  --all-orders         run an order also where its hosts come out as another order's
  --step-time MIN      time limit of each step in minutes (default 30)
  --topo-aware BIN     the topo-aware CLI (default: $TOPO_AWARE_CLI, else topo-aware on PATH)
  --nodes LIST         the hosts (default: the job's, SLURM_JOB_NODELIST); for --dry-run
                       away from Slurm, with --fabric or comma-separated
  --dry-run            print the steps it would run, run nothing, write nothing
  -h, --help           this text
EOF
}

# --- options --------------------------------------------------------------------------------
out="" fabric="" config="" nccl_dir="" mpi=auto nodes_max=0 gpn="" nodes_list=""
tests_list=all_reduce,reduce_scatter,all_gather,alltoall,sendrecv
min_bytes=1M max_bytes=4G dry_run=0 all_orders=0 step_time=30
cli=${TOPO_AWARE_CLI:-topo-aware}
need() { if [ $# -lt 2 ] || [ -z "$2" ]; then die "$1 needs a value (--help)"; fi; }
while [ $# -gt 0 ]; do
  case $1 in
    --out) need "$@"; out=$2; shift 2 ;;
    --fabric) need "$@"; fabric=$2; shift 2 ;;
    --config) need "$@"; config=$2; shift 2 ;;
    --tests) need "$@"; tests_list=$2; shift 2 ;;
    --min-bytes) need "$@"; min_bytes=$2; shift 2 ;;
    --max-bytes) need "$@"; max_bytes=$2; shift 2 ;;
    --nodes-max) need "$@"; nodes_max=$2; shift 2 ;;
    --gpus-per-node) need "$@"; gpn=$2; shift 2 ;;
    --nccl-tests) need "$@"; nccl_dir=$2; shift 2 ;;
    --mpi) need "$@"; mpi=$2; shift 2 ;;
    --all-orders) all_orders=1; shift ;;
    --step-time) need "$@"; step_time=$2; shift 2 ;;
    --topo-aware) need "$@"; cli=$2; shift 2 ;;
    --nodes) need "$@"; nodes_list=$2; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (--help)" ;;
  esac
done
[ -z "$fabric" ] || [ -z "$config" ] || die "--fabric and --config: give one (the config names its fabric)"
[ -z "$fabric" ] || [ -r "$fabric" ] || die "--fabric $fabric: not readable"
[ -z "$config" ] || [ -r "$config" ] || die "--config $config: not readable"
[[ $nodes_max =~ ^[0-9]+$ ]] || die "--nodes-max $nodes_max: not a number"
[[ $step_time =~ ^[1-9][0-9]*$ ]] || die "--step-time $step_time: minutes, a positive number"
for s in "$min_bytes" "$max_bytes"; do
  [[ $s =~ ^[0-9]+[KMGkmg]?$ ]] || die "byte size '$s': a number with an optional K, M or G"
done

# --- the allocation -------------------------------------------------------------------------
if [ -z "$nodes_list" ]; then
  nodes_list=${SLURM_JOB_NODELIST:-}
  [ -n "$nodes_list" ] || die "not inside a Slurm allocation (sbatch or salloc); --dry-run --nodes LIST to preview"
  [ $dry_run = 1 ] || [ -n "${SLURM_JOB_ID:-}" ] || die "SLURM_JOB_ID unset: submit with sbatch or run inside salloc"
fi
if [ -z "$gpn" ]; then
  # SLURM_GPUS_ON_NODE: the batch host's GPUs; SLURM_GPUS_PER_NODE: "8" or "h100:8".
  gpn=${SLURM_GPUS_ON_NODE:-${SLURM_GPUS_PER_NODE:-}}
  gpn=${gpn##*:}
fi
[[ $gpn =~ ^[1-9][0-9]*$ ]] || die "GPUs per node unknown: submit with --gpus-per-node=G or pass --gpus-per-node G"

# Slurm's order of the allocation's hosts (block distribution): scontrol's expansion of the
# job's node list. Away from the cluster scontrol has no slurm.conf and retries for a minute, so
# a dry run expands with topo-aware (which needs the fabric) or takes a comma-separated list.
src=()
if [ -n "$fabric" ]; then src=(--fabric "$fabric"); elif [ -n "$config" ]; then src=(--config "$config"); fi
block_hosts=""
if [ $dry_run = 0 ]; then
  block_hosts=$(timeout 60 scontrol show hostnames "$nodes_list" 2>/dev/null) || block_hosts=""
fi
if [ -z "$block_hosts" ] && [ ${#src[@]} -gt 0 ]; then
  block_hosts=$("$cli" map "${src[@]}" --nodes "$nodes_list" --gpus-per-node "$gpn" \
    --of host-order --order block) || block_hosts=""
fi
if [ -z "$block_hosts" ] && [[ $nodes_list != *[* ]]; then
  block_hosts=$(tr , '\n' <<<"$nodes_list")
fi
[ -n "$block_hosts" ] ||
  die "cannot expand the host list '$nodes_list' (scontrol show hostnames; topo-aware map with --fabric or --config; or give the hosts comma-separated)"
mapfile -t hosts <<<"$block_hosts"
nhosts=${#hosts[@]}
nmax=$nhosts
[ "$nodes_max" -eq 0 ] || [ "$nodes_max" -ge "$nmax" ] || nmax=$nodes_max

# --- nccl-tests -----------------------------------------------------------------------------
tests=()
IFS=, read -r -a req_tests <<<"$tests_list"
for t in "${req_tests[@]}"; do
  t=${t%_perf}
  case $t in
    all_reduce|reduce_scatter|all_gather|alltoall|sendrecv|broadcast|reduce|gather|scatter|hypercube) tests+=("$t") ;;
    *) die "--tests: unknown test '$t'" ;;
  esac
done
[ ${#tests[@]} -gt 0 ] || die "--tests: none given"

candidates=()
if [ -n "$nccl_dir" ]; then
  candidates=("$nccl_dir")
else
  [ -z "${NCCL_TESTS_DIR:-}" ] || candidates+=("$NCCL_TESTS_DIR")
  if p=$(command -v "${tests[0]}_perf" 2>/dev/null); then candidates+=("$(dirname "$p")"); fi
  candidates+=(/opt/nccl-tests/build "${HOME:-/nonexistent}/nccl-tests/build" /usr/local/bin)
fi
bin_dir=""
for d in "${candidates[@]}"; do
  for t in "${tests[@]}"; do
    if [ -x "$d/${t}_perf" ]; then bin_dir=$d; break 2; fi
  done
done

build_help() {
  local mpi_home=/path/to/mpi nccl_home=/path/to/nccl cuda_home=${CUDA_HOME:-/usr/local/cuda} p
  if p=$(command -v mpicc 2>/dev/null); then mpi_home=$(dirname "$(dirname "$p")"); fi
  [ -z "${NCCL_HOME:-}" ] || nccl_home=$NCCL_HOME
  [ -n "${NCCL_HOME:-}" ] || [ ! -e /usr/include/nccl.h ] || nccl_home=/usr
  cat >&2 <<EOF
topo-aware: $prog: nccl-tests not found (looked in: ${candidates[*]}).
Build it once as yourself (no root), on a node with CUDA, NCCL and MPI, in a folder every node
can read:
  git clone https://github.com/NVIDIA/nccl-tests
  cd nccl-tests
  make -j MPI=1 MPI_HOME=$mpi_home CUDA_HOME=$cuda_home NCCL_HOME=$nccl_home
then submit again with --nccl-tests \$PWD/build (or NCCL_TESTS_DIR=\$PWD/build).
MPI=1 is what lets one test span nodes (one process a GPU, started by srun --mpi=pmix).
EOF
}
if [ -z "$bin_dir" ]; then
  build_help
  [ $dry_run = 1 ] || exit 1
  bin_dir=NCCL_TESTS_DIR
  say "dry run: the commands below name $bin_dir for the nccl-tests folder"
fi

# A build with MPI links libmpi; one without runs one process per node (-g G), so it cannot
# span nodes. A wrapper that is not an ELF file is taken at its word (an MPI build).
mpi_build=yes
if [ "$bin_dir" != NCCL_TESTS_DIR ] && [ "$mpi" != none ]; then
  for t in "${tests[@]}"; do
    f=$bin_dir/${t}_perf
    [ -x "$f" ] || continue
    if libs=$(ldd "$f" 2>/dev/null) && ! grep -q 'libmpi' <<<"$libs"; then mpi_build=no; fi
    break
  done
fi
[ "$mpi" != none ] || mpi_build=no
mpi_opt=()
if [ "$mpi_build" = yes ]; then
  if [ "$mpi" = auto ]; then
    # srun --mpi=list prints the MPI plugins this Slurm has ("pmix", "pmix_v5", "pmi2", ...).
    # (A dry run away from the cluster: srun has no slurm.conf, and gives up after its retries.)
    plugins=$(timeout 20 srun --mpi=list 2>&1 || true)
    if grep -qw pmix <<<"$plugins"; then mpi=pmix
    elif grep -qw pmi2 <<<"$plugins"; then mpi=pmi2
    else mpi=""; fi
  fi
  [ -z "$mpi" ] || mpi_opt=("--mpi=$mpi")
fi

# --- the output folder ----------------------------------------------------------------------
out=${out:-calibrate-${SLURM_JOB_ID:-$(date -u +%Y%m%dT%H%M%SZ)}}
if [ $dry_run = 0 ]; then
  mkdir -p "$out/hostfiles"
  out=$(cd "$out" && pwd)
  manifest=$out/manifest.txt
  : >"$manifest"
fi

# NCCL_DEBUG=INFO prints NCCL's topology, rings, trees and channels; the subsystems add its
# algorithm and protocol tuning (TUNING) and the environment it read (ENV). A release that does
# not know a name ignores it: NVIDIA/nccl src/debug.cc, ncclDebugInit(), splits
# NCCL_DEBUG_SUBSYS on ',' and matches each name with strcasecmp; an unmatched one gives mask 0
# and is skipped (ENV is newer than TUNING, so an old release still prints TUNING).
export NCCL_DEBUG=INFO
export NCCL_DEBUG_SUBSYS=INIT,TUNING,ENV

now() { date -u +%Y-%m-%dT%H:%M:%SZ; }
# A manifest line; a dry run prints it instead, as a comment.
record() {
  if [ $dry_run = 0 ]; then echo "$*" >>"$manifest"
  elif [[ $* == '#'* ]]; then echo "$*"
  else echo "# $*"; fi
}
record "# topo-aware-calibrate manifest job=${SLURM_JOB_ID:-none} nodes=$(IFS=,; echo "${hosts[*]}")" \
  "gpus_per_node=$gpn nccl_tests=$bin_dir mpi_build=$mpi_build mpi=${mpi:-default}" \
  "bytes=$min_bytes-$max_bytes date=$(now)"
record "# STATUS case=C order=O test=T file=F hosts=H[: reason]"

# Hosts of a case in an order, one a line. Args: order, n hosts, GPUs a node.
# block and plan order the first n hosts of the allocation; interleaved takes the first n of
# the whole allocation interleaved, so that already two nodes sit on two leaves where the job
# has two (the first n in block order are often all on one leaf, where interleaving is moot).
order_hosts() {
  local order=$1 n=$2 g=$3 list
  case $order in
    block) printf '%s\n' "${hosts[@]:0:$n}" ;;
    plan)
      list=$(IFS=,; echo "${hosts[*]:0:$n}")
      "$cli" map "${src[@]}" --nodes "$list" --tasks-per-node "$g" --of host-order --order plan
      ;;
    interleaved)
      list=$(IFS=,; echo "${hosts[*]}")
      list=$("$cli" map "${src[@]}" --nodes "$list" --tasks-per-node "$g" --of host-order \
        --order interleaved) || return 1
      head -n "$n" <<<"$list"
      ;;
  esac
}

nruns=0 nfailed=0 nskipped=0
skip() {  # case, order, test, reason
  record "skipped case=$1 order=$2 test=$3 file=- hosts=-: $4"
  nskipped=$((nskipped + 1))
}

# One step: a test on n hosts in one order, g processes a host. Args: n, g, order, hosts (comma).
run_case() {
  local n=$1 g=$2 order=$3 hostcsv=$4 t name file hostfile rc t0 cmd h hl
  local case_id=${n}n${g}g
  # Line r of SLURM_HOSTFILE is task r's host: each host's g tasks together, hosts in the order.
  hostfile=$out/hostfiles/${n}n-${g}g-$order.hosts
  [ $dry_run = 0 ] || echo "# case=$case_id order=$order hosts=$hostcsv"
  if [ $dry_run = 0 ]; then
    IFS=, read -r -a hl <<<"$hostcsv"
    for h in "${hl[@]}"; do for _ in $(seq 1 "$g"); do echo "$h"; done; done >"$hostfile"
  fi
  for t in "${tests[@]}"; do
    name=${n}n-${g}g-$order-$t
    file=$out/$name.txt
    if [ ! -x "$bin_dir/${t}_perf" ] && [ "$bin_dir" != NCCL_TESTS_DIR ]; then
      skip "$case_id" "$order" "$t" "no ${t}_perf in $bin_dir"
      continue
    fi
    if [ "$mpi_build" = yes ]; then
      # No --nodes: the hostfile names them, and Slurm 24.11's srun refuses the two together
      # ("--nodes is incompatible with --distribution=arbitrary"); 22.05 takes either.
      cmd=(srun --ntasks=$((n * g)) --distribution=arbitrary --gpus-per-node="$g"
           "${mpi_opt[@]}" --kill-on-bad-exit=1 --time="$step_time"
           "$bin_dir/${t}_perf" -b "$min_bytes" -e "$max_bytes" -f 2 -g 1)
    else
      cmd=(srun --nodes=1 --ntasks=1 --nodelist="$hostcsv" --gpus-per-node="$g"
           --kill-on-bad-exit=1 --time="$step_time"
           "$bin_dir/${t}_perf" -b "$min_bytes" -e "$max_bytes" -f 2 -g "$g")
    fi
    if [ $dry_run = 1 ]; then
      echo "SLURM_HOSTFILE=$hostfile NCCL_DEBUG=$NCCL_DEBUG NCCL_DEBUG_SUBSYS=$NCCL_DEBUG_SUBSYS" \
        "${cmd[*]} > $file"
      continue
    fi
    say "$name on $hostcsv"
    t0=$SECONDS
    set +e
    {
      echo "# topo-aware-calibrate case=$case_id nodes=$n gpus_per_node=$g order=$order test=$t hosts=$hostcsv date=$(now)"
      SLURM_HOSTFILE=$hostfile "${cmd[@]}" 2>&1
    } >"$file"
    rc=$?
    set -e
    if [ $rc -eq 0 ]; then
      record "ran case=$case_id order=$order test=$t file=$name.txt hosts=$hostcsv seconds=$((SECONDS - t0))"
      nruns=$((nruns + 1))
    else
      record "failed case=$case_id order=$order test=$t file=$name.txt hosts=$hostcsv seconds=$((SECONDS - t0)): srun exited $rc"
      nfailed=$((nfailed + 1))
    fi
  done
}

# The orders of one case, each run unless its hosts come out as an earlier order's.
run_orders() {  # n, g
  local n=$1 g=$2 order list seen_orders=() seen_lists=() i dup
  for order in block plan interleaved; do
    if [ "$order" != block ] && [ -z "$fabric" ] && [ -z "$config" ]; then
      local why="no --fabric or --config: the leaves are unknown"
      [ "$order" = interleaved ] || why="no --fabric or --config: the plan's order is Slurm's"
      for t in "${tests[@]}"; do skip "${n}n${g}g" "$order" "$t" "$why"; done
      continue
    fi
    if ! list=$(order_hosts "$order" "$n" "$g" | paste -sd,); then
      for t in "${tests[@]}"; do skip "${n}n${g}g" "$order" "$t" "topo-aware map failed for the $order order"; done
      continue
    fi
    dup=""
    for i in "${!seen_lists[@]}"; do
      [ "${seen_lists[$i]}" != "$list" ] || dup=${seen_orders[$i]}
    done
    if [ -n "$dup" ] && [ $all_orders = 0 ]; then
      for t in "${tests[@]}"; do
        skip "${n}n${g}g" "$order" "$t" "same hosts in the same order as $dup ($list; --all-orders runs it)"
      done
      continue
    fi
    seen_orders+=("$order"); seen_lists+=("$list")
    run_case "$n" "$g" "$order" "$list"
  done
}

# --- what the nodes are ---------------------------------------------------------------------
if [ $dry_run = 0 ]; then
  set +e
  # shellcheck disable=SC2016  # expanded on each node, not here
  srun --nodes="$nhosts" --ntasks-per-node=1 --time=5 bash -c \
    'echo "== $(hostname)"; nvidia-smi -L 2>&1 || echo "(no nvidia-smi)"' >"$out/nvidia-smi.txt" 2>&1
  scontrol show topology >"$out/slurm-topology.txt" 2>&1
  set -e
fi

# --- the cases ------------------------------------------------------------------------------
if [ "$mpi_build" = no ]; then
  say "nccl-tests without MPI: one process a node, so only the one-node case runs"
fi
run_case 1 "$gpn" block "${hosts[0]}"
for g in 8 4 2; do
  if [ "$nmax" -lt 2 ] || [ "$mpi_build" = no ]; then break; fi
  if [ "$g" -gt "$gpn" ]; then
    for o in block plan interleaved; do
      for t in "${tests[@]}"; do skip "2n${g}g" "$o" "$t" "the job has $gpn GPUs a node, the case needs $g"; done
    done
    continue
  fi
  run_orders 2 "$g"
done
for ((n = 3; n <= nmax; n++)); do
  [ "$mpi_build" = yes ] || break
  run_orders "$n" "$gpn"
done
if [ "$mpi_build" = no ] && [ "$nhosts" -gt 1 ]; then
  record "skipped case=2n.. order=- test=- file=- hosts=-: nccl-tests built without MPI (make MPI=1): one process cannot span nodes"
fi
if [ "$nmax" -lt "$nhosts" ]; then
  over=$((nmax + 1))n
  [ $((nmax + 1)) -eq "$nhosts" ] || over=$over..${nhosts}n
  record "skipped case=$over order=- test=- file=- hosts=-: --nodes-max $nmax"
fi

[ $dry_run = 1 ] && exit 0
# The NCCL release the steps loaded, from the first result that printed it.
ver=$(grep -h -m1 -oE 'NCCL version [0-9][^ ]*' "$out"/*.txt 2>/dev/null | head -1 || true)
record "# nccl: ${ver:-version not printed}; $nruns ran, $nfailed failed, $nskipped skipped; done $(now)"
say "$nruns ran, $nfailed failed, $nskipped skipped; results and manifest.txt in $out"
# What reads them: the model against the runs, then the correction (docs/calibration.md).
say "next: topo-aware calibrate --check $out ${config:+--config $config}${fabric:+--fabric $fabric}; topo-aware calibrate $out ... -o calibration.toml"
[ $nfailed -eq 0 ]
