#!/usr/bin/env bash
# The plugin on another Slurm release for real: the lab (tests/lab/lab.sh: slurmctld, four
# slurmd in their network namespaces) inside a Debian root of SUITE, its own Slurm running the
# plugin built there by scripts/root-build.sh, and a reduced end-to-end test:
#   - a per-GPU step, srun -N4 -n32 --topo-aware=tp=8,pp=2: exit 0, RANK 0..31 each once, and
#     every task's environment what `topo-aware map --of env` says for the step;
#   - #SBATCH --topo-aware (the batch step left alone, its srun step planned);
#   - the fail-closed path: a malformed config under policy=fail-closed fails srun before any
#     task runs, with the plugin's message;
#   - a torchrun-per-node step when python3-torch is in the root (SUITE's torch, its own
#     rendezvous), else said and left out.
# Prints PASS/FAIL per check and a summary line; exits 1 on any FAIL. Runs before each release
# (scripts/release-check.sh step trixie-lab; its cost in docs/install.md), not in every CI run.
# Usage: scripts/release-lab.sh SUITE   (trixie: Slurm 24.11; the root as root-build.sh left it)
# Needs root, the lab lock free (one lab per machine: the bridge and namespaces are the host's).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
me="topo-aware: release-lab.sh"

if [ "${1:-}" = "--here" ]; then
  # Inside the root: build/ is the root's own (scripts/debroot.sh), build/gcc from root-build.sh.
  build=${RELEASE_LAB_BUILD:-$here/build/gcc}  # another build tree to try the checks on
  cli=$build/tools/topo-aware
  plugin=$build/spank/topo_aware.so
  [ -x "$cli" ] && [ -f "$plugin" ] || { echo "$me: no $build (run scripts/root-build.sh first)" >&2; exit 1; }
  out=/tmp/release-lab
  mkdir -p "$out"
  lab=tests/lab/lab.sh
  pass=0 fail=0
  check() {  # description, command...
    local what=$1; shift
    if "$@"; then pass=$((pass + 1)); echo "release-lab: PASS: $what"
    else fail=$((fail + 1)); echo "release-lab: FAIL: $what"; fi
  }
  trap '"$here/$lab" down >/dev/null 2>&1 || true' EXIT
  "$lab" up --plugin "$plugin"
  set +e +o pipefail  # from here each check says what failed; none stops the rest
  export SLURM_CONF=/tmp/topo-aware-lab/etc/slurm.conf
  echo "release-lab: $(srun -V) with $("$cli" --version)"
  "$lab" config
  "$lab" plugstack "config=/tmp/topo-aware-lab/etc/topo-aware.toml"
  cat >"$out/envdump.sh" <<'EOF'
#!/bin/bash
for v in RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE NODE_RANK MASTER_ADDR CUDA_VISIBLE_DEVICES \
         NCCL_IB_HCA NCCL_SOCKET_IFNAME NCCL_CROSS_NIC TOPO_AWARE_RANK TOPO_AWARE_COORDS; do
  [ -n "${!v+x}" ] && printf '%s %s=%s\n' "$SLURM_PROCID" "$v" "${!v}"
done
exit 0
EOF
  chmod 0755 "$out/envdump.sh"

  timeout 120 srun -N4 -n32 --topo-aware=tp=8,pp=2 "$out/envdump.sh" >"$out/main.out" 2>"$out/main.err"
  check "srun -N4 -n32 --topo-aware=tp=8,pp=2 exits 0" test $? -eq 0
  check "RANK 0..31, each once" test "$(awk -F'[ =]' '$2=="RANK" {print $3}' "$out/main.out" |
    sort -n | tr '\n' ' ')" = "$(seq 0 31 | tr '\n' ' ')"
  job=$(grep -oE 'job [0-9]+' "$out/main.err" | head -1 | awk '{print $2}')
  # What `topo-aware map` says each task gets (tests/e2e/run.sh: expected_env), for the
  # variables that name no address or path.
  "$cli" map --fabric "$here/etc/lab-cluster.toml" --nodes 'node[1-4]' \
    --node-type "$here/tests/fixtures/nccl-topo/dgx-h100-topo.xml" --layout tp=8,pp=2 \
    --job-id "${job:-0}" --step-id 0 --of env 2>"$out/map.err" |
    awk '/^# *task[ =]/ { gsub(/[^0-9]/, "", $0); task = $0; next }
         /^[0-9]+ [A-Z_]+=/ { print; next }
         /^(export )?[A-Z_]+=/ { sub(/^export /, ""); print task " " $0 }' |
    grep -E '^[0-9]+ (RANK|LOCAL_RANK|CUDA_VISIBLE_DEVICES|NCCL_IB_HCA|TOPO_AWARE_COORDS)=' |
    sort >"$out/want" || true
  grep -E '^[0-9]+ (RANK|LOCAL_RANK|CUDA_VISIBLE_DEVICES|NCCL_IB_HCA|TOPO_AWARE_COORDS)=' \
    "$out/main.out" | sort >"$out/got" || true
  check "every task's RANK, LOCAL_RANK, CUDA_VISIBLE_DEVICES, NCCL_IB_HCA, coordinates: map's" \
    bash -c "test -s '$out/want' && diff -u '$out/want' '$out/got' | head -20 && cmp -s '$out/want' '$out/got'"

  cat >"$out/batch.sh" <<EOF
#!/bin/bash
#SBATCH -N4 -n32 --topo-aware=tp=8,pp=2 -o $out/batch.out -e $out/batch.err
echo "batch RANK=\${RANK:-unset}"
srun $out/envdump.sh
EOF
  timeout 120 sbatch --wait "$out/batch.sh" >"$out/sbatch.out" 2>&1
  check "sbatch --wait with #SBATCH --topo-aware exits 0" test $? -eq 0
  check "the batch step is left alone, its srun step planned (32 RANKs)" \
    bash -c "grep -q '^batch RANK=unset$' '$out/batch.out' &&
             test \"\$(grep -cE '^[0-9]+ RANK=' '$out/batch.out')\" -eq 32"

  printf 'fabric = \n' >/tmp/topo-aware-lab/etc/malformed.toml
  "$lab" plugstack "config=/tmp/topo-aware-lab/etc/malformed.toml" policy=fail-closed
  rm -f "$out/ran"
  timeout 60 srun -N2 -n4 --topo-aware=tp=2 touch "$out/ran" >"$out/closed.out" 2>"$out/closed.err"
  rc=$?
  check "fail-closed with a malformed config: srun fails" test "$rc" -ne 0
  check "fail-closed: no task ran" test ! -e "$out/ran"
  check "fail-closed: the plugin names the config file" grep -q 'malformed.toml' "$out/closed.err"
  "$lab" plugstack "config=/tmp/topo-aware-lab/etc/topo-aware.toml"

  # Debian 13's python3-torch 2.6 is built without libuv, and torchrun's rendezvous store asks for
  # it: no torchrun can start there, with or without topo-aware (tests/e2e/clients/torchrun_store.py).
  if ! /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null || ! command -v torchrun >/dev/null; then
    echo "release-lab: torchrun: left out (no python3-torch or torchrun in this root)"
  elif why=$(/usr/bin/python3 tests/e2e/clients/torchrun_store.py 2>&1); [ $? -eq 3 ]; then
    echo "release-lab: torchrun: left out: $why"
  else
    # The example as written (etc/examples/torchrun-per-node.sbatch), one task a host.
    # Debian 12's torch 1.13 takes underscore flags and needs its output redirected.
    targs=""
    /usr/bin/python3 -c 'import torch, sys; sys.exit(torch.__version__ >= "2")' 2>/dev/null &&
      targs="--redirects=1 --tee=1 --log_dir=$out/torchrun-logs"
    (cd "$out" && TRAIN=$here/tests/e2e/clients/torch_check.py TORCHRUN_ARGS=$targs \
       timeout 240 sbatch --wait \
       -o "$out/torchrun.out" -N4 --ntasks-per-node=1 --gpus-per-node=2 \
       --topo-aware=nproc=2,tp=2,pp=2 "$here/etc/examples/torchrun-per-node.sbatch") \
      >"$out/torchrun.sbatch" 2>&1
    rc=$?
    check "torchrun per node (torchrun-per-node.sbatch, --topo-aware=nproc=2,tp=2,pp=2) exits 0" \
      test $rc -eq 0
    [ $rc -eq 0 ] || tail -n 15 "$out/torchrun.sbatch" "$out/torchrun.out" | sed 's/^/release-lab:   /'
  fi
  echo "release-lab: $pass passed, $fail failed ($(srun -V))"
  [ "$fail" -eq 0 ]
  exit
fi

[ $# -eq 1 ] || { sed -n 's/^# Usage: //p' "$0" >&2; exit 2; }
suite=$1
root=$here/build/roots/$suite
[ -d "$root" ] || { echo "$me: no $root: run scripts/root-build.sh $suite first" >&2; exit 1; }
t0=$SECONDS
# The lab's daemons and tools in the root (deps.sh lab installs torch too, where SUITE has it).
scripts/debroot.sh run "$root" -- "$here/scripts/deps.sh" lab
echo "$me: $suite lab packages ready in $((SECONDS - t0)) s"
scripts/debroot.sh run "$root" -- "$here/scripts/release-lab.sh" --here
echo "$me: $suite: $((SECONDS - t0)) s in all"
