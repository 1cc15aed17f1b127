# The launch styles with their real clients, sourced by tests/e2e/run.sh (its helpers: check,
# skip_check, lab_srun, set_config, good_config, $OUT, $CLI, $LAB, $LABSH, $PY, $ENVDUMP). Every
# style runs the way its framework documents it, through the sbatch examples in etc/examples/ as
# written (sbatch FILE, with the lab's sizes on the command line), on the lab variant a site with
# MpiDefault=pmix runs, and on the lab described as cabled across its names
# (tests/e2e/lab-crossed.toml), where the plan renumbers hosts: a client that followed Slurm's
# order instead of the plan would land on the wrong host or GPU.
#
#   per-GPU tasks, torch.distributed (gloo) from env://, groups built from TOPO_AWARE_COORDS
#   torchrun, one task a host, static rendezvous from the plugin's PET_* defaults
#   a Lightning-style reader (SLURM_PROCID/LOCALID/NODEID) with ids=slurm
#   JAX's Slurm detection (emulated: JAX is not in Debian) with ids=slurm
#   mpi4py under srun --mpi=pmix, placed by the plan's own hostfile (-m arbitrary)
#   two steps of one allocation at once, each with its own rendezvous (MASTER_PORT)
#   gloo's rendezvous where the node names resolve (run.sh switches the lab to that)
#
# The examples request GPUs the way sites schedule them (--gpus-per-node): Slurm binds them, and
# the plan `topo-aware map --gpus-bound` shows is the one the tasks get. Node names do not resolve
# in the lab unless told (slurm.conf NodeAddr=10.77.0.x): MASTER_ADDR must be the address, and
# gloo must be told its interface (GLOO_SOCKET_IFNAME) or it listens on loopback.
#
# Every client reports here whether it ran (CLIENTS_RAN, in run.sh's summary); one that cannot
# run is a skip with its reason, and a failure under CI=true. The refusals and the hostfile check
# need no client library and always run.

CLIENTS=$SRC/tests/e2e/clients
EXAMPLES=$SRC/etc/examples
CROSSED=$SRC/tests/e2e/lab-crossed.toml
# The lab's node addresses, for the coordinator check (jax): nodeN is 10.77.0.(10+N).
ADDRS=node1=10.77.0.11,node2=10.77.0.12,node3=10.77.0.13,node4=10.77.0.14
CLIENTS_RAN=""

client_ran() { CLIENTS_RAN="$CLIENTS_RAN $1=ran"; }
client_skipped() {  # name, why
  CLIENTS_RAN="$CLIENTS_RAN $1=skipped"
  skip_check "client $1" "$2"
}

have_torch() { "$PY" -c 'import torch.distributed' 2>/dev/null && command -v torchrun >/dev/null; }
# Whether torchrun can start its rendezvous with this torch (clients/torchrun_store.py): where
# this torch is built without libuv (Debian 13's), sets store_why to why and fails; any other
# failure is left to the checks.
torchrun_store_ok() {
  store_why=$("$PY" "$CLIENTS/torchrun_store.py" 2>&1)
  [ $? -ne 3 ]
}
# Slurm's mpi/pmix plugin, where the package that ships it put it: the file list of the package
# holding slurm-wlm/mpi_pmix.so, else Slurm's plugin folder under the multiarch triplet.
mpi_pmix_so() {
  local so triplet
  so=$(dpkg -S '*/slurm-wlm/mpi_pmix.so' 2>/dev/null | sed -n 's/^[^:]*: //p' | head -1)
  if [ -z "$so" ]; then
    triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch 2>/dev/null)
    so=/usr/lib/$triplet/slurm-wlm/mpi_pmix.so
  fi
  [ -e "$so" ] && echo "$so"
}
have_mpi4py() { "$PY" -c 'from mpi4py import MPI' 2>/dev/null; }

# The plan `topo-aware map` makes for the lab's 4 nodes with the crossed fabric. Args: name,
# map options.
plan_json() {
  local name=$1; shift
  "$CLI" map --config "$LAB/etc/topo-aware.toml" --nodes 'node[1-4]' "$@" --of json \
    -o "$OUT/$name.plan.json" 2>"$OUT/$name.map.err"
}

# sbatch --wait on an example; its output in $OUT/<name>.out. Args: name, sbatch options...
run_example() {
  local name=$1; shift
  rm -f "$OUT/$name.out"
  (cd "$OUT" && timeout 240 sbatch --wait -o "$OUT/$name.out" "$@") >"$OUT/$name.sbatch" 2>&1
}

# Requests no launch can honour, and a hostfile that is not the plan's: no client library needed.
refusals() {
  local policy
  for policy in fail-open fail-closed; do
    set_plugstack "config=$LAB/etc/topo-aware.toml" policy=$policy
    rm -f "$OUT/ran"
    lab_srun straddle-$policy -N3 --ntasks-per-node=1 --topo-aware=tp=3 bash -c "touch $OUT/ran"
    check "per-node launcher whose tp groups would straddle hosts ($policy): refused, nothing ran" \
      test $? -ne 0 -a ! -e "$OUT/ran"
    check "per-node launcher whose tp groups would straddle hosts ($policy): the fix is named" \
      grep -q 'would straddle hosts; run nproc=6' "$OUT/straddle-$policy.err"
    lab_srun idsmpi-$policy -N4 --ntasks-per-node=2 --mpi=pmix --topo-aware=tp=2,ids=slurm \
      bash -c "touch $OUT/ran"
    check "ids=slurm with --mpi=pmix ($policy): refused, nothing ran" test $? -ne 0 -a ! -e "$OUT/ran"
    check "ids=slurm with --mpi=pmix ($policy): one message naming --mpi=none" \
      test "$(grep -c 'ids=slurm renumbers SLURM_PROCID.*--mpi=none' "$OUT/idsmpi-$policy.err")" -eq 1
  done
  set_plugstack "config=$LAB/etc/topo-aware.toml"
  # A hostfile that is not the plan's: every node refuses alike (no task gets a RANK).
  if [ -z "$(mpi_pmix_so)" ]; then
    skip_check "a hostfile not the plan's (srun --mpi=pmix)" "Slurm's mpi_pmix.so not found"
    return
  fi
  "$CLI" map --config "$LAB/etc/topo-aware.toml" --nodes 'node[1-4]' --ntasks 8 \
    --layout tp=2,pp=2 --of hostfile -o "$OUT/plan.hostfile" 2>"$OUT/plan.hostfile.err"
  "$PY" -c "l=open('$OUT/plan.hostfile').read().split(); l[0],l[-1]=l[-1],l[0]; open('$OUT/mpi.badhosts','w').write('\n'.join(l)+'\n')"
  lab_srun_arbitrary mpibad "$OUT/mpi.badhosts" 'node[1-4]' 2 --mpi=pmix -n 8 \
    --topo-aware=tp=2,pp=2 bash -c 'echo "$SLURM_PROCID ran"; exec '"$ENVDUMP"
  check "a hostfile not the plan's: exit 0, every task runs unmodified on every node (fail-open)" \
    test $? -eq 0 -a "$(grep -c ' ran$' "$OUT/mpibad.out")" -eq 8 \
    -a "$(count_tasks_with mpibad RANK)" -eq 0
  check "a hostfile not the plan's: the warning says so" \
    grep -q "SLURM_HOSTFILE is not the plan's own" "$OUT/mpibad.err"
}

# The examples as written, on the MpiDefault=pmix variant, with GPUs held per node.
examples() {
  local torch=1 why=""
  have_torch || { torch=0; why="torch.distributed or torchrun missing (python3-torch)"; }

  if [ $torch = 1 ]; then
    # One task per GPU: RANK & co from env://, every dim's groups from TOPO_AWARE_COORDS.
    plan_json per-gpu --tasks-per-node 2 --gpus-bound --layout tp=2,pp=2
    PYTHON=$PY TRAIN=$CLIENTS/torch_check.py TRAIN_ARGS="" \
      run_example per-gpu -N4 --ntasks-per-node=2 --gpus-per-node=2 --topo-aware=tp=2,pp=2 \
      "$EXAMPLES/megatron-per-gpu.sbatch"
    check "per-GPU tasks (megatron-per-gpu.sbatch): the job exits 0" test $? -eq 0
    check "per-GPU tasks, torch.distributed gloo: every rank, host and GPU is the plan's, every group all-reduces" \
      "$PY" "$CLIENTS/check_plan.py" per-gpu "$OUT/per-gpu.plan.json" "$OUT/per-gpu.out"
    check "per-GPU tasks: the plan renumbers (task 2 is not rank 2 on the crossed lab)" \
      "$PY" -c "import json,sys; r={p['task']:p['rank'] for p in json.load(open('$OUT/per-gpu.plan.json'))['ranks']}; sys.exit(r[2]==2)"
    client_ran torch-gloo

    # torchrun, one task a host: the plugin's PET_* defaults and nothing else on its command line
    # (Debian 12's torch 1.13 takes underscore flags and needs its output redirected).
    if ! torchrun_store_ok; then
      skip_platform "client torchrun (torchrun-per-node.sbatch)" "$store_why" 3
      CLIENTS_RAN="$CLIENTS_RAN torchrun=ruled-out"
    else
      plan_json torchrun --tasks-per-node 1 --layout nproc=2,tp=2,pp=2
      TRAIN=$CLIENTS/torch_check.py \
        TORCHRUN_ARGS="--redirects=1 --tee=1 --log_dir=$OUT/torchrun-logs" \
        run_example torchrun -N4 --ntasks-per-node=1 --gpus-per-node=2 \
        --topo-aware=nproc=2,tp=2,pp=2 "$EXAMPLES/torchrun-per-node.sbatch"
      check "torchrun per node (torchrun-per-node.sbatch): the job exits 0" test $? -eq 0
      check "torchrun per node: every worker's RANK, host and visible GPU is the plan's" \
        "$PY" "$CLIENTS/check_plan.py" by-rank "$OUT/torchrun.plan.json" "$OUT/torchrun.out"
      check "torchrun per node: the plan orders hosts otherwise than Slurm (node3 before node2)" \
        "$PY" -c "import json,sys; n={p['host']:p['node_rank'] for p in json.load(open('$OUT/torchrun.plan.json'))['ranks']}; sys.exit(not n['node3'] < n['node2'])"
      client_ran torchrun
    fi

    # A Lightning-style reader: global rank = SLURM_PROCID, local = SLURM_LOCALID.
    plan_json lightning --tasks-per-node 2 --gpus-bound --layout tp=2,pp=2,ids=slurm
    PYTHON=$PY TRAIN=$CLIENTS/torch_check.py \
      run_example lightning -N4 --ntasks-per-node=2 --gpus-per-node=2 \
      --topo-aware=tp=2,pp=2,ids=slurm "$EXAMPLES/lightning-ids-slurm.sbatch" --slurm
    check "SLURM_PROCID reader, ids=slurm (lightning-ids-slurm.sbatch): the job exits 0" test $? -eq 0
    check "SLURM_PROCID reader, ids=slurm: each task's SLURM_PROCID, host and GPU is the plan's" \
      "$PY" "$CLIENTS/check_plan.py" slurm-ids "$OUT/lightning.plan.json" "$OUT/lightning.out"
    client_ran lightning
  else
    client_skipped torch-gloo "$why"
    client_skipped torchrun "$why"
    client_skipped lightning "$why"
  fi

  # JAX's Slurm detection, emulated (JAX is not in Debian): what initialize() would take.
  plan_json jax --tasks-per-node 2 --gpus-bound --layout tp=2,pp=2,ids=slurm
  PYTHON=$PY TRAIN=$CLIENTS/jax_check.py \
    run_example jax -N4 --ntasks-per-node=2 --gpus-per-node=2 --topo-aware=tp=2,pp=2,ids=slurm \
    "$EXAMPLES/jax-ids-slurm.sbatch"
  check "JAX, ids=slurm (jax-ids-slurm.sbatch): the job exits 0" test $? -eq 0
  check "JAX, ids=slurm: process ids are the plan's ranks, process 0 serves the coordinator" \
    "$PY" "$CLIENTS/check_plan.py" jax "$OUT/jax.plan.json" "$OUT/jax.out" "$ADDRS"
  client_ran jax

  # MPI: the plan's hostfile from `topo-aware map --config`, Slurm placing tasks from it.
  if [ -n "$(mpi_pmix_so)" ] && have_mpi4py; then
    plan_json mpi --ntasks 8 --gpus-bound --layout tp=2,pp=2
    LAYOUT=tp=2,pp=2 TOPO_AWARE_CONFIG=$LAB/etc/topo-aware.toml TOPO_AWARE_CLI=$CLI \
      HOSTFILE=$OUT/mpi.hostfile APP=$PY MPI=pmix \
      run_example mpi -N4 --ntasks-per-node=2 --gpus-per-node=2 "$EXAMPLES/mpi-hostfile.sbatch" \
      "$CLIENTS/mpi_check.py"
    check "mpi4py, srun --mpi=pmix -m arbitrary (mpi-hostfile.sbatch): the job exits 0" test $? -eq 0
    check "mpi4py: COMM_WORLD rank = RANK = task id, on the plan's host and GPU" \
      "$PY" "$CLIENTS/check_plan.py" by-rank "$OUT/mpi.plan.json" "$OUT/mpi.out"
    client_ran mpi4py
  else
    client_skipped mpi4py "mpi4py or Slurm's mpi_pmix.so missing (python3-mpi4py, openmpi-bin, slurmd)"
  fi
}

# Two steps of one allocation at once, each a real gloo rendezvous on its MASTER_PORT: with one
# port per job they would collide on rank 0's host. Both ports lie outside the ephemeral range.
concurrent_steps() {
  if ! have_torch; then
    client_skipped concurrent-steps "torch.distributed missing (python3-torch)"
    return
  fi
  local step
  cat >"$OUT/two-steps.sh" <<EOF
#!/bin/bash
# The rendezvous store without libuv, as the examples in etc/examples/ set it (torch 2.4 and
# later ask for libuv; Debian 13's torch 2.6 is built without it).
export USE_LIBUV=\${USE_LIBUV:-0}
pids=()
for step in a b; do
  srun --overlap -N2 -n2 --topo-aware=launcher=per-gpu \\
    -o "$OUT/two-steps-\$step.out" $PY $CLIENTS/torch_check.py --hold 3 &
  pids+=(\$!)
done
rc=0
for p in "\${pids[@]}"; do wait "\$p" || rc=1; done
exit \$rc
EOF
  timeout 180 sbatch --wait -N2 --ntasks-per-node=2 -o "$OUT/two-steps.out" "$OUT/two-steps.sh" \
    >"$OUT/two-steps.sbatch" 2>&1
  check "two srun --topo-aware steps at once in one allocation: both succeed" test $? -eq 0
  for step in a b; do
    check "two steps at once: step $step's ranks 0 and 1 all-reduce" \
      test "$(grep -c 'sum=ok' "$OUT/two-steps-$step.out")" -eq 2
  done
  local pa pb range
  pa=$(grep -o 'port=[0-9]*' "$OUT/two-steps-a.out" | sort -u)
  pb=$(grep -o 'port=[0-9]*' "$OUT/two-steps-b.out" | sort -u)
  read -r -a range </proc/sys/net/ipv4/ip_local_port_range
  check "two steps at once: each step one MASTER_PORT, the two distinct ($pa, $pb)" \
    test "$(wc -w <<<"$pa")" -eq 1 -a "$(wc -w <<<"$pb")" -eq 1 -a "$pa" != "$pb"
  check "two steps at once: both ports outside the ephemeral range (${range[0]}-${range[1]})" \
    bash -c "for p in ${pa#port=} ${pb#port=}; do [ \$p -lt ${range[0]} ] || [ \$p -gt ${range[1]} ] || exit 1; done"
  client_ran concurrent-steps
}

clients_main() {
  suite=clients
  set_config fabric="$CROSSED"
  set_plugstack "config=$LAB/etc/topo-aware.toml"
  refusals
  # What sites with MpiDefault=pmix run: the examples must work there as written.
  "$LABSH" mpi-default pmix
  examples
  concurrent_steps
  "$LABSH" mpi-default none
  good_config
  suite=e2e
}

# gloo where the node names resolve: run.sh calls it with the names switched on.
resolved_rendezvous() {
  suite=clients
  if ! have_torch; then
    client_skipped resolved-names "torch.distributed missing (python3-torch)"
    suite=e2e
    return
  fi
  USE_LIBUV=${USE_LIBUV:-0} lab_srun resolved-gloo -N4 --ntasks-per-node=2 \
    --topo-aware=tp=2,pp=2 "$PY" "$CLIENTS/torch_check.py"  # (the store as in two-steps.sh)
  check "names resolve: torch gloo from env:// (MASTER_ADDR a name) exits 0" test $? -eq 0
  check "names resolve: all 8 ranks all-reduce, every group too" \
    test "$(grep -c 'sum=ok' "$OUT/resolved-gloo.out")" -eq 8 -a \
      "$(grep -c 'groups=.*BAD' "$OUT/resolved-gloo.out")" -eq 0
  client_ran resolved-names
  suite=e2e
}

clients_main
