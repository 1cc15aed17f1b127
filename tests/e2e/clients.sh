# The launch styles with their real clients, sourced by tests/e2e/run.sh (its helpers: check,
# lab_srun, set_config, good_config, $OUT, $CLI, $LAB). Every style runs the way its framework
# documents it, through the sbatch examples in etc/examples/, on the lab described as cabled
# across its names (tests/e2e/lab-crossed.toml), where the plan renumbers hosts: a client that
# followed Slurm's order instead of the plan would land on the wrong host or GPU.
#
#   per-GPU tasks, torch.distributed (gloo) from env://, groups built from TOPO_AWARE_COORDS
#   torchrun, one task a host, static rendezvous from the plugin's PET_* defaults
#   a Lightning-style reader (SLURM_PROCID/LOCALID/NODEID) with ids=slurm
#   JAX's Slurm detection (emulated: JAX is not in Debian) with ids=slurm
#   mpi4py under srun --mpi=pmix, placed by the plan's own hostfile (-m arbitrary)
#
# Node names do not resolve in the lab (slurm.conf NodeAddr=10.77.0.x): MASTER_ADDR must be the
# address, and gloo must be told its interface (GLOO_SOCKET_IFNAME) or it listens on loopback.

CLIENTS=$SRC/tests/e2e/clients
EXAMPLES=$SRC/etc/examples
PY=/usr/bin/python3
CROSSED=$SRC/tests/e2e/lab-crossed.toml
# The lab's node addresses, for the coordinator check (jax): nodeN is 10.77.0.(10+N).
ADDRS=node1=10.77.0.11,node2=10.77.0.12,node3=10.77.0.13,node4=10.77.0.14

have_torch() { "$PY" -c 'import torch.distributed' 2>/dev/null && command -v torchrun >/dev/null; }
have_mpi() { "$PY" -c 'from mpi4py import MPI' 2>/dev/null &&
  [ -e /usr/lib/x86_64-linux-gnu/slurm-wlm/mpi_pmix.so ]; }

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

clients_main() {
  if ! have_torch; then
    echo "e2e: SKIP: real clients: torch.distributed or torchrun missing (python3-torch)"
    return
  fi
  set_config fabric="$CROSSED"
  set_plugstack "config=$LAB/etc/topo-aware.toml"
  local torchrun_args="--redirects=1 --tee=1 --log_dir=$OUT/torchrun-logs"

  # One task per GPU: RANK & co from env://, every dim's groups from TOPO_AWARE_COORDS.
  plan_json per-gpu --tasks-per-node 2 --layout tp=2,pp=2
  PYTHON=$PY TRAIN=$CLIENTS/torch_check.py TRAIN_ARGS="" \
    run_example per-gpu -N4 --ntasks-per-node=2 --topo-aware=tp=2,pp=2 \
    "$EXAMPLES/megatron-per-gpu.sbatch"
  check "per-GPU tasks (megatron-per-gpu.sbatch): the job exits 0" test $? -eq 0
  check "per-GPU tasks, torch.distributed gloo: every rank, host and GPU is the plan's, every group all-reduces" \
    "$PY" "$CLIENTS/check_plan.py" per-gpu "$OUT/per-gpu.plan.json" "$OUT/per-gpu.out"
  check "per-GPU tasks: the plan renumbers (task 2 is not rank 2 on the crossed lab)" \
    "$PY" -c "import json,sys; r={p['task']:p['rank'] for p in json.load(open('$OUT/per-gpu.plan.json'))['ranks']}; sys.exit(r[2]==2)"

  # torchrun, one task a host: the plugin's PET_* defaults and nothing else on its command line.
  plan_json torchrun --tasks-per-node 1 --layout nproc=2,tp=2,pp=2
  TRAIN=$CLIENTS/torch_check.py TORCHRUN_ARGS=$torchrun_args \
    run_example torchrun -N4 --ntasks-per-node=1 --topo-aware=nproc=2,tp=2,pp=2 \
    "$EXAMPLES/torchrun-per-node.sbatch"
  check "torchrun per node (torchrun-per-node.sbatch): the job exits 0" test $? -eq 0
  check "torchrun per node: every worker's RANK, host and visible GPU is the plan's" \
    "$PY" "$CLIENTS/check_plan.py" by-rank "$OUT/torchrun.plan.json" "$OUT/torchrun.out"
  check "torchrun per node: the plan orders hosts otherwise than Slurm (node3 before node2)" \
    "$PY" -c "import json,sys; n={p['host']:p['node_rank'] for p in json.load(open('$OUT/torchrun.plan.json'))['ranks']}; sys.exit(not n['node3'] < n['node2'])"

  # deepspeed --no_ssh takes --node_rank as an index into a hostfile: TOPO_AWARE_HOSTFILE lists
  # the hosts in NODE_RANK order on every node.
  lab_srun dshosts -N4 --ntasks-per-node=1 --topo-aware=nproc=2,tp=2,pp=2 \
    bash -c '[ "$SLURM_PROCID" != 2 ] || cat "$TOPO_AWARE_HOSTFILE"'
  check "per-node launcher: TOPO_AWARE_HOSTFILE lists the hosts in NODE_RANK order" \
    test "$(cat "$OUT/dshosts.out")" = "$("$PY" -c "import json; r=json.load(open('$OUT/torchrun.plan.json'))['ranks']; print('\n'.join(h + ' slots=2' for n, h in sorted({(p['node_rank'], p['host']) for p in r})))")"

  # A Lightning-style reader: global rank = SLURM_PROCID, local = SLURM_LOCALID.
  plan_json lightning --tasks-per-node 2 --layout tp=2,pp=2,ids=slurm
  PYTHON=$PY TRAIN=$CLIENTS/torch_check.py \
    run_example lightning -N4 --ntasks-per-node=2 --topo-aware=tp=2,pp=2,ids=slurm \
    "$EXAMPLES/lightning-ids-slurm.sbatch" --slurm
  check "SLURM_PROCID reader, ids=slurm (lightning-ids-slurm.sbatch): the job exits 0" test $? -eq 0
  check "SLURM_PROCID reader, ids=slurm: each task's SLURM_PROCID, host and GPU is the plan's" \
    "$PY" "$CLIENTS/check_plan.py" slurm-ids "$OUT/lightning.plan.json" "$OUT/lightning.out"

  # JAX's Slurm detection, emulated (JAX is not in Debian): what initialize() would take.
  PYTHON=$PY TRAIN=$CLIENTS/jax_check.py \
    run_example jax -N4 --ntasks-per-node=2 --topo-aware=tp=2,pp=2,ids=slurm \
    "$EXAMPLES/jax-ids-slurm.sbatch"
  check "JAX, ids=slurm (jax-ids-slurm.sbatch): the job exits 0" test $? -eq 0
  check "JAX, ids=slurm: process ids are the plan's ranks, process 0 serves the coordinator" \
    "$PY" "$CLIENTS/check_plan.py" jax "$OUT/lightning.plan.json" "$OUT/jax.out" "$ADDRS"

  # MPI: the plan's hostfile from `topo-aware map --config`, Slurm placing tasks from it.
  if have_mpi; then
    plan_json mpi --ntasks 8 --layout tp=2,pp=2
    LAYOUT=tp=2,pp=2 TOPO_AWARE_CONFIG=$LAB/etc/topo-aware.toml TOPO_AWARE_CLI=$CLI \
      HOSTFILE=$OUT/mpi.hostfile APP=$PY MPI=pmix \
      run_example mpi -N4 --ntasks-per-node=2 "$EXAMPLES/mpi-hostfile.sbatch" \
      "$CLIENTS/mpi_check.py"
    check "mpi4py, srun --mpi=pmix -m arbitrary (mpi-hostfile.sbatch): the job exits 0" test $? -eq 0
    check "mpi4py: COMM_WORLD rank = RANK = task id, on the plan's host and GPU" \
      "$PY" "$CLIENTS/check_plan.py" by-rank "$OUT/mpi.plan.json" "$OUT/mpi.out"
    # A hostfile that is not the plan's: every node refuses alike (no task gets a RANK).
    "$PY" -c "import sys; l=open('$OUT/mpi.hostfile').read().split(); l[0],l[-1]=l[-1],l[0]; open('$OUT/mpi.badhosts','w').write('\n'.join(l)+'\n')"
    SLURM_HOSTFILE=$OUT/mpi.badhosts lab_srun mpibad --mpi=pmix -m arbitrary -n 8 \
      --topo-aware=tp=2,pp=2 "$ENVDUMP"
    check "a hostfile not the plan's: the step runs unmodified on every node (fail-open)" \
      test $? -eq 0 -a "$(count_tasks_with mpibad RANK)" -eq 0
    check "a hostfile not the plan's: the warning says so" \
      grep -q "SLURM_HOSTFILE is not the plan's own" "$OUT/mpibad.err"
  else
    echo "e2e: SKIP: MPI client: mpi4py or Slurm's mpi_pmix missing (python3-mpi4py, openmpi-bin)"
  fi

  # Requests no launch can honour: one message naming the fix, under either policy.
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
  good_config
}

clients_main
