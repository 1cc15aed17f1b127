#!/usr/bin/env bash
# End-to-end test of the topo-aware SPANK plugin on a real Slurm cluster brought up on this
# machine (tests/lab/lab.sh: munged, slurmctld, 4 slurmd in their own network namespaces,
# topology/tree with 2 leaves, fake GPU devices, DGX H100 node captures).
#
# Real `srun --topo-aware=...` steps run 32 tasks over 4 nodes; every task's exported
# environment must equal what `topo-aware map ... --of env` gives for the same inputs. Then:
# contiguous vs spread allocations, Slurm-bound GPUs (task/cgroup ConstrainDevices) and GPUs held
# unevenly, sbatch with #SBATCH --topo-aware, user-set variables, the bad-input matrix under both
# policies (with daemons still up and later steps fine), and every way nodes can disagree --
# a fabric or capture that differs on one node, a capture one node cannot read, a host without a
# capture modeled otherwise on one node, another build of the plugin, srun's own failure -- each
# ending with every node unmodified or the step failed naming the node, never mixed. The real
# clients (clients.sh) run the examples on an MpiDefault=pmix variant, two steps of one
# allocation at once, and a pass where the node names resolve. The lab is torn down on exit
# (trap), also on failure, and the tear-down is checked to leave no daemon, namespace or cgroup.
#
# Usage: tests/e2e/run.sh [BUILD_DIR]     Exit: 0 pass, 1 fail, 77 skipped (with the reason).
# Under CI=true nothing may be skipped: a check that cannot run (no root, a client missing) is a
# failure with its reason, and so is the whole suite that cannot start. The summary
# ("e2e: N passed, M failed, K skipped", per suite: the lab's checks, the real clients) is printed
# last and written to BUILD_DIR/e2e-summary.txt (TOPO_AWARE_E2E_SUMMARY), which scripts/test.sh
# prints to the CI log and holds against its minimum counts.
# TOPO_AWARE_E2E_KEEP=1 keeps the lab up afterwards; TOPO_AWARE_E2E_ONLY=shadow runs only the
# shadow-mode checks (tests/e2e/shadow.sh) between bring-up and tear-down, =placement only the
# placement through cli_filter.lua (tests/e2e/placement.sh, about 35 s).
set -uo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=$(cd "${1:-$SRC/build/release}" 2>/dev/null && pwd || true)
STRICT=0
[ "${CI:-}" = true ] && STRICT=1
SUMMARY=${TOPO_AWARE_E2E_SUMMARY:-${BUILD:-${TMPDIR:-/tmp}}/e2e-summary.txt}
# The whole suite cannot run here: skipped with the reason, or under CI=true failed with it.
skip() {
  if [ "$STRICT" = 1 ]; then
    echo "e2e: FAIL: cannot run under CI=true: $*" | tee "$SUMMARY"
    exit 1
  fi
  echo "e2e: SKIP: $*" | tee "$SUMMARY"
  exit 77
}
[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces, mknod, Slurm daemons)"
for b in munged slurmctld slurmd srun sbatch scontrol nsenter unshare ip nm; do
  command -v "$b" >/dev/null || skip "$b not installed (scripts/deps.sh test installs the Slurm packages)"
done
[ -n "$BUILD" ] || skip "build directory ${1:-$SRC/build/release} not found"
PLUGIN=$BUILD/spank/topo_aware.so
CLI=$BUILD/tools/topo-aware
[ -f "$PLUGIN" ] || skip "$PLUGIN not built (TOPOAWARE_BUILD_SPANK=OFF?)"
[ -x "$CLI" ] || skip "$CLI not built"

export TOPO_AWARE_LAB=${TOPO_AWARE_LAB:-/tmp/topo-aware-lab}
LAB=$TOPO_AWARE_LAB
LABSH=$SRC/tests/lab/lab.sh
export SLURM_CONF=$LAB/etc/slurm.conf
CAPTURE=$SRC/tests/fixtures/nccl-topo/dgx-h100-topo.xml
FABRIC=${TOPO_AWARE_E2E_FABRIC:-$SRC/etc/lab-cluster.toml}
[ -f "$FABRIC" ] || FABRIC=$LAB/etc/topology.conf
OUT=$LAB/e2e
PY=/usr/bin/python3
VARS="RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE NODE_RANK MASTER_ADDR MASTER_PORT
      CUDA_VISIBLE_DEVICES NCCL_TOPO_FILE NCCL_IB_HCA NCCL_SOCKET_IFNAME NCCL_CROSS_NIC
      TOPO_AWARE_RANK TOPO_AWARE_COORDS"

# Counts per suite: "e2e" (the lab's own checks) and "clients" (tests/e2e/clients.sh).
suite=e2e
declare -A passed=([e2e]=0 [clients]=0) failed=([e2e]=0 [clients]=0) skipped=([e2e]=0 [clients]=0)
declare -A ruled_out=([e2e]=0 [clients]=0)  # checks the platform rules out (skip_platform)
pass() { passed[$suite]=$((passed[$suite] + 1)); echo "e2e: PASS: $*"; }
fail() { failed[$suite]=$((failed[$suite] + 1)); echo "e2e: FAIL: $*"; }
check() {  # description, command...
  local what=$1; shift
  if "$@"; then pass "$what"; else fail "$what"; fi
}
# A check that cannot run here: a skip with its reason, a failure under CI=true (the CI machine
# installs everything, scripts/deps.sh test).
skip_check() {  # what, why
  if [ "$STRICT" = 1 ]; then
    fail "$1: not run ($2), and CI=true allows no skip"
  else
    skipped[$suite]=$((skipped[$suite] + 1))
    echo "e2e: SKIP: $1: $2"
  fi
}
# A check the installed platform itself rules out, shown by a probe that fails with that
# platform's own known message (not something missing that deps.sh would install): skipped with
# the probe's words, also under CI=true, so a Debian release whose package cannot do it still
# runs everything else. Each use names the probe and the message it matched.
skip_platform() {  # what, why, how many checks it stands for
  skipped[$suite]=$((skipped[$suite] + 1))
  ruled_out[$suite]=$((ruled_out[$suite] + $3))
  echo "e2e: SKIP (the platform rules it out, $3 checks): $1: $2"
}
summary() {
  local s
  {
    for s in e2e clients; do
      echo "e2e: suite $s: ${passed[$s]} passed, ${failed[$s]} failed, ${skipped[$s]} skipped," \
        "${ruled_out[$s]} checks ruled out by the platform"
    done
    [ -z "${CLIENTS_RAN:-}" ] || echo "e2e: clients: $CLIENTS_RAN"
    echo "e2e: $(( ${passed[e2e]} + ${passed[clients]} )) passed," \
      "$(( ${failed[e2e]} + ${failed[clients]} )) failed," \
      "$(( ${skipped[e2e]} + ${skipped[clients]} )) skipped (outputs in $OUT)"
  } | tee "$SUMMARY"
}

teardown() {
  local rc=$?
  # Packages this run installed and did not get to remove (the packages' section below).
  [ -z "${PKG_NAMES:-}" ] || dpkg -r $PKG_NAMES >/dev/null 2>&1 || true
  if [ "${TOPO_AWARE_E2E_KEEP:-0}" = 1 ]; then
    echo "e2e: lab kept up at $LAB (tests/lab/lab.sh down to stop)"
    return
  fi
  "$LABSH" down >/dev/null 2>&1 || true
  if ! "$LABSH" leftovers; then
    echo "e2e: FAIL: tear-down left the above behind"
    exit 1
  fi
  exit $rc
}
trap teardown EXIT
trap 'exit 1' INT TERM

# --- bring-up -------------------------------------------------------------------------------
check "plugin exports only SPANK symbols (nm -D)" bash "$SRC/tests/spank/check_exports.sh" "$PLUGIN"
"$LABSH" up --plugin "$PLUGIN" || { echo "e2e: FAIL: lab bring-up"; exit 1; }
mkdir -p "$OUT"
rm -rf "${OUT:?}"/*

# Every task prints "<procid> NAME=value" for each variable topo-aware may export.
cat >"$OUT/envdump.sh" <<EOF
#!/bin/bash
for v in $(echo $VARS); do
  [ -n "\${!v+x}" ] && printf '%s %s=%s\n' "\$SLURM_PROCID" "\$v" "\${!v}"
done
if [ -n "\${NCCL_TOPO_FILE:-}" ]; then
  printf '%s FILE=%s\n' "\$SLURM_PROCID" "\$(stat -c '%a %U' "\$NCCL_TOPO_FILE" "\$(dirname "\$NCCL_TOPO_FILE")" | tr '\n' ' ')"
fi
exit 0
EOF
chmod 0755 "$OUT/envdump.sh"
ENVDUMP=$OUT/envdump.sh

# The plugin's lab config with the given overrides, and a plugstack line (args after the .so).
set_config() { "$LABSH" config fabric="$FABRIC" "$@"; }
set_plugstack() { "$LABSH" plugstack "$@"; }
good_config() {
  set_config
  set_plugstack "config=$LAB/etc/topo-aware.toml"
}

# srun in the lab; stdout/stderr to $OUT/<name>.out/.err; returns srun's exit code.
lab_srun() {  # name, srun args...
  local name=$1; shift
  timeout 60 srun "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"
}

# srun -m arbitrary from a hostfile, inside an allocation of the hostfile's nodes, as sites run it
# (a batch script or salloc). Outside an allocation Slurm 24.11's srun turns a hostfile that names
# a node twice into ReqNodeList=node[1,1-3,2], and the job pends on Resources until cancelled,
# with or without topo-aware (docs/install.md); inside one, 22.05 and 24.11 place tasks by the file.
lab_srun_arbitrary() {  # name, hostfile, nodes, tasks per node, srun args...
  local name=$1 hostfile=$2 nodes=$3 per_node=$4; shift 4
  timeout 60 salloc -N"$(scontrol show hostnames "$nodes" | wc -l)" -w "$nodes" \
    --ntasks-per-node="$per_node" env SLURM_HOSTFILE="$hostfile" srun -m arbitrary "$@" \
    >"$OUT/$name.out" 2>"$OUT/$name.err"
}

job_of() { grep -oE 'job [0-9]+' "$OUT/$1.err" | head -1 | awk '{print $2}'; }

# What `topo-aware map` says the tasks get, as sorted "<task> NAME=value" lines (minus the
# variables that name run-time paths). Args: layout, hostlist, job id[, step id].
# Where the lab's node names do not resolve (slurm.conf NodeAddr=10.77.0.x; NAMES_RESOLVE=0, the
# default), tasks get rank 0's address, nodeN's being 10.77.0.(10+N).
NAMES_RESOLVE=0
expected_env() {
  local layout=$1 hosts=$2 job=$3 step=${4:-0}
  "$CLI" map --fabric "$FABRIC" --nodes "$hosts" --node-type "$CAPTURE" --layout "$layout" \
    --job-id "$job" --step-id "$step" ${MAP_CALIBRATION:+--calibration "$MAP_CALIBRATION"} \
    --of env 2>"$OUT/map.err" | normalize_env |
    if [ "$NAMES_RESOLVE" = 1 ]; then cat; else
      sed -E 's/ MASTER_ADDR=node([0-9])$/ MASTER_ADDR=10.77.0.1\1/'
    fi | sort
}

# Accepts `topo-aware map --of env` lines "<task> NAME=value" (optionally "export "), or blocks
# headed "# task N".
normalize_env() {
  awk '
    /^# *task[ =]/ { gsub(/[^0-9]/, "", $0); task = $0; next }
    /^[0-9]+ [A-Z_]+=/ { print; next }
    /^(export )?[A-Z_]+=/ { sub(/^export /, ""); print task " " $0 }
  ' | grep -v ' NCCL_TOPO_FILE=' || true
}

observed_env() { grep -v -e ' NCCL_TOPO_FILE=' -e ' FILE=' "$OUT/$1.out" | sort; }

same_env() {  # name, layout, hostlist[, step id]
  local name=$1 job
  job=$(job_of "$name")
  expected_env "$2" "$3" "$job" "${4:-0}" >"$OUT/$name.expected"
  observed_env "$name" >"$OUT/$name.observed"
  if [ ! -s "$OUT/$name.expected" ]; then
    echo "e2e:   topo-aware map gave nothing:"; sed 's/^/e2e:   /' "$OUT/map.err"
    return 1
  fi
  if ! diff -u "$OUT/$name.expected" "$OUT/$name.observed" >"$OUT/$name.diff"; then
    head -40 "$OUT/$name.diff"
    return 1
  fi
}

count_tasks_with() { awk -v v=" $2=" 'index($0, v) { print $1 }' "$OUT/$1.out" | sort -u | wc -l; }

daemons_up() { "$LABSH" status >/dev/null; }

# shellcheck source=shadow.sh
. "$SRC/tests/e2e/shadow.sh"
# TOPO_AWARE_E2E_ONLY=shadow: the bring-up, shadow mode (below), the tear-down; nothing else.
if [ "${TOPO_AWARE_E2E_ONLY:-}" = shadow ]; then
  shadow_main
  summary
  [ "${failed[e2e]}" -eq 0 ]
  exit
fi

# Placement (tests/e2e/placement.sh) needs Slurm's cli_filter/lua plugin in the clients.
placement_hook() {
  if ! ls /usr/lib/*/slurm*/cli_filter_lua.so >/dev/null 2>&1; then
    skip_check "placement through cli_filter.lua" "Slurm's cli_filter/lua plugin is not installed"
    return
  fi
  # shellcheck source=placement.sh
  . "$SRC/tests/e2e/placement.sh"
}
# TOPO_AWARE_E2E_ONLY=placement: the bring-up, placement (above), the tear-down.
if [ "${TOPO_AWARE_E2E_ONLY:-}" = placement ]; then
  placement_hook
  summary
  [ "${failed[e2e]}" -eq 0 ]
  exit
fi

# --- the main case: 32 tasks over 4 nodes ---------------------------------------------------
good_config
lab_srun main -N4 -n32 --topo-aware=tp=8,pp=2 "$ENVDUMP"
check "srun --topo-aware=tp=8,pp=2 -N4 -n32 exits 0" test $? -eq 0
check "all 32 tasks got RANK" test "$(count_tasks_with main RANK)" -eq 32
check "every task's environment equals topo-aware map --of env" same_env main tp=8,pp=2 'node[1-4]'
check "RANKs are a permutation of 0..31" \
  test "$(awk -F'[ =]' '$2=="RANK" {print $3}' "$OUT/main.out" | sort -n | uniq | tr '\n' ' ')" = \
       "$(seq 0 31 | tr '\n' ' ')"
check "srun shows one allocation line" test "$(grep -c 'topo-aware: job' "$OUT/main.err")" -eq 1
check "MASTER_ADDR is rank 0's NodeAddr: the lab's node names do not resolve" \
  bash -c "! getent hosts node1 >/dev/null && grep -q ' MASTER_ADDR=10\.77\.0\.1[1-4]$' '$OUT/main.out'"
lab_srun gloo -N4 -n8 --topo-aware=tp=2 bash -c 'echo "$SLURM_PROCID GLOO=${GLOO_SOCKET_IFNAME:-}"'
check "srun --topo-aware=tp=2 -N4 -n8 exits 0" test $? -eq 0
check "GLOO_SOCKET_IFNAME names the interface towards MASTER_ADDR (gloo would take loopback)" \
  test "$(grep -c ' GLOO=eth0$' "$OUT/gloo.out")" -eq 8
check "NCCL_TOPO_FILE is 0644 in a 0700 per-job directory" \
  bash -c "grep ' FILE=' '$OUT/main.out' | awk '{print \$2, \$4}' | sort -u | grep -qx 'FILE=644 700'"
job=$(job_of main)
check "per-job directory removed after the step" test ! -e "$LAB/jobs/$job"
lab_srun plainv -N4 -n32 -v --topo-aware=tp=8,pp=2 true
check "srun -v --topo-aware=tp=8,pp=2 exits 0" test $? -eq 0
check "srun -v prints the plan summary" grep -q 'topo-aware: plan tp=8,pp=2' "$OUT/plainv.err"
check "srun -v compares each dim with Slurm's order" \
  grep -q "topo-aware:   pp: .* (Slurm's order .*), groups inside a host" "$OUT/plainv.err"
check "srun -v leaves out dims of size 1" bash -c "! grep -q 'topo-aware:   cp:' '$OUT/plainv.err'"
check "srun -v judges the allocation against the best of an empty cluster (docs/placement.md)" \
  grep -q "topo-aware:   allocation: 2 leaves; plan there .*, on the best allocation of an empty cluster .* (2 leaves): 1.00x" "$OUT/plainv.err"

# A site's calibration (docs/calibration.md, "Correct the model with your runs"): srun and the
# nodes read it with the config, -v says the figures rest on it, and every task gets what
# `map --calibration` computes with the same file. A broken file is named with its line, and
# fail-open runs the step unmodified.
cat >"$LAB/etc/calibration.toml" <<'CAL'
format = 1
[[entry]]
algorithm = "Ring"
tier = "spine"
bandwidth = 0.5
latency = 2
cases = 1
CAL
set_config calibration="$LAB/etc/calibration.toml"
lab_srun calv -N4 -n32 -v --topo-aware=tp=8,pp=2 "$ENVDUMP"
check "srun -v with calibration = PATH exits 0" test $? -eq 0
check "srun -v says the figures rest on the calibration" \
  grep -q "model corrected by $LAB/etc/calibration.toml: Ring/spine bandwidth x0.50, latency x2.00" \
  "$OUT/calv.err"
MAP_CALIBRATION="$LAB/etc/calibration.toml"
check "with calibration = PATH every task's environment equals map --calibration --of env" \
  same_env calv tp=8,pp=2 'node[1-4]'
MAP_CALIBRATION=
printf 'format = 1\n[[entry]]\nalgorithm = "Ring"\ntier = "rack"\nbandwidth = 0.5\n' \
  >"$LAB/etc/calibration.toml"
lab_srun calbad -N4 -n32 --topo-aware=tp=8,pp=2 true
check "a broken calibration file: fail-open runs the step (exit 0)" test $? -eq 0
check "a broken calibration file is named with its line" \
  grep -q "calibration.toml:4: tier 'rack' is not nvlink, leaf or spine" "$OUT/calbad.err"
good_config

# A job of an ordinary user: the per-job directory and the XML belong to that user.
# With job_dir missing, slurmstepd (root) re-creates it like /tmp (root, 1777) first.
if id nobody >/dev/null 2>&1 && command -v runuser >/dev/null; then
  rm -rf "$LAB/jobs"
  (cd / && timeout 60 runuser -u nobody -- srun -N4 -n32 --topo-aware=tp=8 "$ENVDUMP") \
    >"$OUT/user.out" 2>"$OUT/user.err"
  check "a job of user nobody exits 0" test $? -eq 0
  check "its NCCL XML and per-job directory belong to nobody (0644 / 0700)" \
    bash -c "grep ' FILE=' '$OUT/user.out' | awk '{print \$2, \$3, \$4, \$5}' | sort -u | grep -qx 'FILE=644 nobody 700 nobody'"
  check "the missing job_dir was re-created root-owned 1777" \
    test "$(stat -c '%a %U' "$LAB/jobs" 2>/dev/null)" = "1777 root"
fi

# What a user finds in srun --help and sbatch --help.
srun --help >"$OUT/help.out" 2>&1
check "srun --help lists --topo-aware=SPEC with file:PATH" \
  bash -c "grep -q -- '--topo-aware=SPEC' '$OUT/help.out' && grep -q 'file:/ABS/PATH' '$OUT/help.out'"
sbatch --help >"$OUT/sbatch-help.out" 2>&1
check "sbatch --help lists --topo-aware=SPEC" grep -q -- '--topo-aware=SPEC' "$OUT/sbatch-help.out"

# The option absent: the plugin is loaded and changes nothing.
lab_srun absent -N4 -n32 bash -c 'echo "$SLURM_PROCID ran"; exec '"$ENVDUMP"
check "without --topo-aware: srun exits 0, all 32 tasks ran, and no variable is exported" \
  test $? -eq 0 -a "$(grep -c ' ran$' "$OUT/absent.out")" -eq 32 \
  -a "$(count_tasks_with absent RANK)" -eq 0

# The environment fallback.
TOPO_AWARE=tp=4 lab_srun fallback -N4 -n32 "$ENVDUMP"
check "TOPO_AWARE=tp=4 srun exits 0" test $? -eq 0
check "TOPO_AWARE=tp=4 works like --topo-aware=tp=4" same_env fallback tp=4 'node[1-4]'

# --export=NONE keeps TOPO_AWARE out of the step's environment: it must reach the nodes anyway
# (srun hands it over as the option), and --topo-aware=SPEC still wins over it.
TOPO_AWARE=tp=4 lab_srun exportnone --export=NONE -N4 -n32 "$ENVDUMP"
check "TOPO_AWARE=tp=4 srun --export=NONE: exit 0, every task gets the plan" \
  test $? -eq 0 -a "$(count_tasks_with exportnone RANK)" -eq 32
TOPO_AWARE=tp=4 lab_srun optionwins -N4 -n32 --topo-aware=tp=8 "$ENVDUMP"
check "TOPO_AWARE=tp=4 with --topo-aware=tp=8: srun exits 0" test $? -eq 0
check "TOPO_AWARE=tp=4 with --topo-aware=tp=8: the option wins" same_env optionwins tp=8 'node[1-4]'
TOPO_AWARE=tp=4 lab_srun optionenv -N4 -n32 env
check "TOPO_AWARE handed over as the option: exit 0, every task ran, none has a SLURM_SPANK_ variable" \
  bash -c "test $? -eq 0 && test \"\$(grep -c '^SLURM_PROCID=' '$OUT/optionenv.out')\" -eq 32 &&
           ! grep -q '^SLURM_SPANK_' '$OUT/optionenv.out'"
# A TOPO_AWARE given to sbatch stays an environment variable: the script may change it per step.
TOPO_AWARE=tp=8 timeout 90 sbatch --wait -N4 -n32 -o "$OUT/sbenv.out" \
  --wrap "export TOPO_AWARE=tp=4; srun $ENVDUMP" >/dev/null 2>&1
check "TOPO_AWARE=tp=8 sbatch --wait exits 0" test $? -eq 0
check "TOPO_AWARE=tp=8 sbatch, TOPO_AWARE=tp=4 in the script: the step is tp=4" \
  test "$(grep -o 'TOPO_AWARE_COORDS=tp:[0-9]*' "$OUT/sbenv.out" | cut -d: -f2 | sort -un | tr '\n' ' ')" = "0 1 2 3 "

# slurmstepd reads TOPO_AWARE into a fixed buffer: a 1100-character job description path is
# still applied on the nodes, not dropped while srun reports the job as topo-aware.
deep=$OUT/deep
for _ in $(seq 1 9); do deep=$deep/$(printf 'd%.0s' $(seq 1 120)); done
mkdir -p "$deep"
printf 'layout = "tp=4"\n' >"$deep/job.toml"
TOPO_AWARE="file:$deep/job.toml" lab_srun longenv -N4 -n32 "$ENVDUMP"
check "TOPO_AWARE=file:<1100-character path>: exit 0, every task gets the plan" \
  test $? -eq 0 -a "$(count_tasks_with longenv RANK)" -eq 32
rm -rf "$OUT/deep"

# A TOML job description instead of an inline layout.
printf '# e2e job description\nlayout = "tp=8,pp=2"\n' >"$OUT/job.toml"
lab_srun jobfile -N4 -n32 --topo-aware="file:$OUT/job.toml" "$ENVDUMP"
check "--topo-aware=file:job.toml exits 0" test $? -eq 0
check "--topo-aware=file:job.toml equals topo-aware map --layout file:job.toml" \
  same_env jobfile "file:$OUT/job.toml" 'node[1-4]'

# file:PATH is read by srun and by every slurmstepd, each from its own working directory: a
# relative path (or a directory) is refused before anything runs, not run silently unmodified.
rm -f "$OUT/ran-relfile"
(cd "$OUT" && lab_srun relfile -N4 -n32 --topo-aware=file:job.toml bash -c "touch $OUT/ran-relfile")
check "--topo-aware=file:job.toml (relative): srun exits non-zero" test $? -ne 0
check "--topo-aware=file:job.toml (relative): the reason names the path" \
  grep -q 'file:job.toml: the job description needs an absolute path' "$OUT/relfile.err"
check "--topo-aware=file:job.toml (relative): nothing ran" test ! -e "$OUT/ran-relfile"
lab_srun dirfile -N4 -n32 --topo-aware="file:$OUT" bash -c "touch $OUT/ran-relfile"
check "--topo-aware=file:DIRECTORY: srun exits non-zero, nothing ran" \
  test $? -ne 0 -a ! -e "$OUT/ran-relfile"
check "--topo-aware=file:DIRECTORY: the reason is shown" grep -q 'not a regular file' "$OUT/dirfile.err"

# A variable the user set is kept.
MASTER_PORT=12345 lab_srun userset -N4 -n32 --topo-aware=tp=8 "$ENVDUMP"
check "user-set MASTER_PORT: exit 0, and it is not overwritten" \
  test $? -eq 0 -a "$(grep -c ' MASTER_PORT=12345$' "$OUT/userset.out")" -eq 32

# Without [[node]] entries every host uses its fabric node type's capture, which the lab
# cluster names relative to the fabric file: found from srun's and slurmstepd's directories.
if grep -q '^capture *= *"\.\./' "$FABRIC" 2>/dev/null; then
  set_config
  sed -i '/^\[\[node\]\]/,$d' "$LAB/etc/topo-aware.toml"
  (cd / && lab_srun nodetype -N4 -n32 --topo-aware=tp=8,pp=2 "$ENVDUMP")
  check "no [[node]]: srun exits 0" test $? -eq 0
  check "no [[node]]: the fabric's node type capture (relative to the fabric) is used" \
    same_env nodetype tp=8,pp=2 'node[1-4]'
  good_config
fi

# --- contiguous vs spread allocations ------------------------------------------------------
lab_srun contiguous -N2 -n16 -w 'node[1-2]' --topo-aware=tp=8 "$ENVDUMP"
check "contiguous allocation: srun exits 0" test $? -eq 0
check "contiguous allocation (node[1-2]) judged: 1 leaf" \
  grep -q 'topo-aware: job [0-9]*: 2 hosts, 1 leaf' "$OUT/contiguous.err"
check "contiguous allocation: env equals topo-aware map" same_env contiguous tp=8 'node[1-2]'
lab_srun spread -N2 -n16 -w 'node1,node3' --topo-aware=tp=8 "$ENVDUMP"
check "spread allocation: srun exits 0" test $? -eq 0
check "spread allocation (node1,node3) judged more spread than needed" \
  grep -q '2 leaves.*more spread than the fabric allows' "$OUT/spread.err"
check "spread allocation: env equals topo-aware map" same_env spread tp=8 'node1,node3'

# --- sbatch with #SBATCH --topo-aware ------------------------------------------------------
cat >"$OUT/batch.sh" <<EOF
#!/bin/bash
#SBATCH -N4 -n32 --topo-aware=tp=8,pp=2 -o $OUT/batch.out -e $OUT/batch.err
echo "batch RANK=\${RANK:-unset}"
srun $ENVDUMP
EOF
timeout 90 sbatch --wait "$OUT/batch.sh" >"$OUT/sbatch.out" 2>&1
check "sbatch --wait with #SBATCH --topo-aware exits 0" test $? -eq 0
check "the batch script's own step is left alone" grep -q '^batch RANK=unset$' "$OUT/batch.out"
grep -v '^batch ' "$OUT/batch.out" >"$OUT/batchsteps.out"
batchjob=$(grep -oE '[0-9]+' "$OUT/sbatch.out" | head -1)
echo "srun: topo-aware: job $batchjob" >"$OUT/batchsteps.err"
check "sbatch: every task of its srun step equals topo-aware map" same_env batchsteps tp=8,pp=2 'node[1-4]'

# --- GPUs bound by Slurm (gres, and task/cgroup ConstrainDevices where cgroup v1 has devices) -
# Every node plans with the GPUs slurmctld says the job holds on each host (srun hands them over);
# each node's own SLURM_STEP_GPUS only decides whether it can apply that plan.
constrained=0
grep -q '^TaskPlugin=task/cgroup' "$SLURM_CONF" && [ -d /sys/fs/cgroup/devices ] && constrained=1
lab_srun bound -N4 -n32 --gpus-per-task=1 --topo-aware=tp=8 \
  bash -c 'echo "$SLURM_PROCID SLURM_STEP_GPUS=$SLURM_STEP_GPUS"; exec '"$ENVDUMP"
check "bound GPUs: step exits 0" test $? -eq 0
if [ $constrained = 1 ]; then
  check "bound GPUs: Slurm's CUDA_VISIBLE_DEVICES (local index 0 under ConstrainDevices) is kept" \
    test "$(grep -c ' CUDA_VISIBLE_DEVICES=0$' "$OUT/bound.out")" -eq 32
else
  check "bound GPUs: Slurm's CUDA_VISIBLE_DEVICES (the task's one GPU) is kept" \
    test "$(grep -cE ' CUDA_VISIBLE_DEVICES=[0-9]+$' "$OUT/bound.out")" -eq 32
fi
check "bound GPUs: RANKs still a permutation of 0..31" \
  test "$(awk -F'[ =]' '$2=="RANK" {print $3}' "$OUT/bound.out" | sort -n | uniq | wc -l)" -eq 32
# SLURM_STEP_GPUS is each node's own (Slurm puts 3 tasks with GPUs 0-5 on node1, 1 task with
# GPUs 0-1 on node2): every node must still apply the same plan, none may be left out.
lab_srun bound2 -N2 -n4 --gpus-per-task=2 --topo-aware=tp=2 "$ENVDUMP"
check "bound GPUs, 2 per task, uneven tasks per node: step exits 0" test $? -eq 0
check "bound GPUs, 2 per task, uneven tasks per node: RANKs are a permutation of 0..3" \
  test "$(awk -F'[ =]' '$2=="RANK" {print $3}' "$OUT/bound2.out" | sort -n | tr '\n' ' ')" = "0 1 2 3 "
# Uneven GPUs, one task a host (--gpus=3 over 2 nodes: 2 on node1, 1 on node2). Each node used to
# infer the launcher style and its workers from its own GPUs; now both plan from what the job
# holds: one task per GPU on both (a host of one GPU is no per-node launcher), the same plan.
lab_srun uneven -N2 --ntasks-per-node=1 --gpus=3 --topo-aware \
  bash -c 'echo "$SLURM_PROCID ran"; exec '"$ENVDUMP"
check "--gpus=3 over 2 nodes, one task a host: exit 0, both tasks ran" \
  test $? -eq 0 -a "$(grep -c ' ran$' "$OUT/uneven.out")" -eq 2
check "--gpus=3 over 2 nodes, one task a host: one plan on both nodes (RANK 0 and 1 of 2)" \
  test "$(grep -E ' (RANK|WORLD_SIZE)=' "$OUT/uneven.out" | sort | cut -d' ' -f2 | tr '\n' ' ')" \
    = "RANK=0 WORLD_SIZE=2 RANK=1 WORLD_SIZE=2 "
rm -f "$OUT/ran"
lab_srun uneven-pernode -N2 --ntasks-per-node=1 --gpus=3 --topo-aware=launcher=per-node \
  bash -c "touch $OUT/ran"
check "--gpus=3 over 2 nodes as a per-node launcher (2 + 1 workers): refused, nothing ran" \
  test $? -ne 0 -a ! -e "$OUT/ran"
check "--gpus=3 over 2 nodes as a per-node launcher: the reason names the fix" \
  grep -q 'would straddle hosts; run nproc=1' "$OUT/uneven-pernode.err"
# A launcher whose step holds fewer GPUs on its node than the job (the plan's workers): that node
# cannot apply the plan every node agreed on, and fails the step naming itself.
rm -f "$OUT/ran"
timeout 90 sbatch --wait -N2 --gpus-per-node=2 -o "$OUT/narrow.out" -e "$OUT/narrow.err" \
  --wrap "srun -N2 --ntasks-per-node=1 --gpus-per-node=1 --topo-aware bash -c 'touch $OUT/ran'" \
  >/dev/null 2>&1
check "a launcher step on part of its job's GPUs: the job fails, no launcher ran" \
  test $? -ne 0 -a ! -e "$OUT/ran"
# (The first node to fail cancels the step: the other may not get to say it.)
check "a launcher step on part of its job's GPUs: a node names itself and the fix (nproc=1)" \
  grep -qE "slurmstepd-(node[12]): error: topo-aware: \1: Slurm bound 1 GPUs to its launcher.*nproc=1; failing the step" \
    "$OUT/narrow.err"

# --- the launch styles with their real clients (torch, torchrun, MPI) ----------------------
# shellcheck source=clients.sh
. "$SRC/tests/e2e/clients.sh"

# --- names that resolve ---------------------------------------------------------------------
# The usual cluster: Slurm's node names are the hosts' names (here in the nodes' /etc/hosts; srun
# and this script still do not resolve them). MASTER_ADDR is then the name, and gloo finds its
# interface by it.
"$LABSH" resolve on
NAMES_RESOLVE=1
lab_srun resolved -N4 -n32 --topo-aware=tp=8,pp=2 "$ENVDUMP"
check "names resolve: srun --topo-aware=tp=8,pp=2 -N4 -n32 exits 0" test $? -eq 0
check "names resolve: every task's environment equals topo-aware map --of env" \
  same_env resolved tp=8,pp=2 'node[1-4]'
check "names resolve: MASTER_ADDR is rank 0's name" \
  test "$(grep -c ' MASTER_ADDR=node[1-4]$' "$OUT/resolved.out")" -eq 32
lab_srun resolved-gloo-if -N4 -n8 --topo-aware=tp=2 \
  bash -c 'echo "$SLURM_PROCID GLOO=${GLOO_SOCKET_IFNAME:-unset}"'
check "names resolve: exit 0, and no task needs GLOO_SOCKET_IFNAME" \
  test $? -eq 0 -a "$(grep -c ' GLOO=unset$' "$OUT/resolved-gloo-if.out")" -eq 8
resolved_rendezvous
"$LABSH" resolve off
NAMES_RESOLVE=0

# --- shadow mode: planned and reported, the step unmodified (shadow.sh) --------------------
shadow_main

# --- bad input: each with its message and the policy's outcome ----------------------------
marker=$OUT/ran
# Runs a step that must not have been changed (fail-open) or must not have run (fail-closed).
bad_case() {  # name, policy, expected message regex, srun args...
  local name=$1 policy=$2 msg=$3; shift 3
  rm -f "$marker"
  lab_srun "$name" -N4 -n32 "$@" bash -c "touch $marker; exec $ENVDUMP"
  local rc=$?
  check "$name: message names the cause" grep -qE "$msg" "$OUT/$name.err"
  if [ "$policy" = fail-open ]; then
    check "$name (fail-open): exit 0, the job runs unmodified on every node" \
      test $rc -eq 0 -a -e "$marker" -a "$(count_tasks_with "$name" RANK)" -eq 0
    check "$name (fail-open): exactly one warning" \
      test "$(grep -c 'topo-aware: warning' "$OUT/$name.err")" -eq 1
  else
    check "$name (fail-closed): srun exits non-zero" test $rc -ne 0
    check "$name (fail-closed): nothing ran" test ! -e "$marker"
  fi
  check "$name: daemons still up" daemons_up
}

# -m arbitrary from a hostfile that is not the plan's: node1's tasks (0, 1) may be where the plan
# puts ranks 0-1, node2's (2, 4) and node3's (3) are not. Every node reads the whole hostfile, so
# all leave the step alone, not node1 hand out ranks 0-1 and the rest none.
printf 'node1\nnode1\nnode2\nnode3\nnode2\n' >"$OUT/hostfile"
lab_srun_arbitrary arbitrary "$OUT/hostfile" 'node[1-3]' 2 -n5 --topo-aware "$ENVDUMP"
check "-m arbitrary: exit 0, no task gets a RANK (fail-open)" \
  test $? -eq 0 -a "$(count_tasks_with arbitrary RANK)" -eq 0
check "-m arbitrary: the warning says the hostfile is not the plan's" \
  grep -q "SLURM_HOSTFILE is not the plan's own" "$OUT/arbitrary.err"

lab_srun badspec -N4 -n32 --topo-aware=tp=x bash -c "touch $marker"
check "bad SPEC: srun exits non-zero" test $? -ne 0
check "bad SPEC: the reason is shown" grep -q "invalid --topo-aware=tp=x" "$OUT/badspec.err"
check "bad SPEC: nothing ran" test ! -e "$marker"
# A 30 KB SPEC pasted by mistake: refused, its head and length quoted once, not echoed whole.
long_spec="tp=8,$(head -c 30000 /dev/zero | tr '\0' x)"
lab_srun longspec -N4 -n32 --topo-aware="$long_spec" bash -c "touch $marker"
check "30 KB SPEC: srun exits non-zero" test $? -ne 0
check "30 KB SPEC: the message gives its length" grep -q '(30005 characters)' "$OUT/longspec.err"
check "30 KB SPEC: srun's stderr stays under 4 KB" test "$(wc -c <"$OUT/longspec.err")" -lt 4096
check "30 KB SPEC: nothing ran" test ! -e "$marker"
lab_srun badworld -N4 -n32 --topo-aware=tp=3 bash -c "touch $marker"
check "SPEC not dividing 32 tasks: srun exits non-zero" test $? -ne 0
check "SPEC not dividing 32 tasks: nothing ran" test ! -e "$marker"
check "SPEC not dividing 32 tasks: the message names the option" \
  grep -q -- '--topo-aware=tp=3: .*does not divide 32' "$OUT/badworld.err"
TOPO_AWARE=tp=3 lab_srun badworldenv -N4 -n32 bash -c "touch $marker"
check "TOPO_AWARE=tp=3 not dividing 32 tasks: srun exits non-zero, names TOPO_AWARE" \
  bash -c "test $? -ne 0 && grep -q 'TOPO_AWARE=tp=3: .*does not divide 32' '$OUT/badworldenv.err'"

set_plugstack "config=$LAB/etc/missing.toml"
bad_case missing-config fail-open "missing.toml.*not found" --topo-aware=tp=8
set_plugstack "config=$LAB/etc/missing.toml" policy=fail-closed
bad_case missing-config-closed fail-closed "missing.toml.*not found" --topo-aware=tp=8

printf 'fabric = "%s"\njob_dir = "%s"\npolicy = fail-open\n' "$FABRIC" "$LAB/jobs" >"$LAB/etc/malformed.toml"
set_plugstack "config=$LAB/etc/malformed.toml"
bad_case malformed-config fail-open "malformed.toml:3" --topo-aware=tp=8

printf 'SwitchName=leaf1 Nodes=node[1-2\nthis is not a topology\n' >"$LAB/etc/bad-fabric.conf"
set_config fabric="$LAB/etc/bad-fabric.conf"
set_plugstack "config=$LAB/etc/topo-aware.toml"
bad_case malformed-fabric fail-open "bad-fabric.conf" --topo-aware=tp=8
set_plugstack "config=$LAB/etc/topo-aware.toml" policy=fail-closed
bad_case malformed-fabric-closed fail-closed "bad-fabric.conf" --topo-aware=tp=8

printf 'SwitchName=leaf1 Nodes=node[1-2]\nSwitchName=leaf2 Nodes=node3\nSwitchName=spine Switches=leaf[1-2]\n' \
  >"$LAB/etc/no-node4.conf"
set_config fabric="$LAB/etc/no-node4.conf"
set_plugstack "config=$LAB/etc/topo-aware.toml"
bad_case node-not-in-fabric fail-open "node4 is not in the fabric" --topo-aware=tp=8

set_config capture="$LAB/etc/no-such-capture.xml"
sed -i '/^\[\[node\]\]/,$d' "$LAB/etc/topo-aware.toml"
bad_case missing-capture fail-open "no-such-capture.xml" --topo-aware=tp=8

# An unwritable job directory is a node-local failure: fail-open keeps the plan (ranks must
# agree across nodes) without NCCL_TOPO_FILE; fail-closed fails the tasks from task_init.
: >"$LAB/etc/not-a-dir"
set_config job_dir="$LAB/etc/not-a-dir"
set_plugstack "config=$LAB/etc/topo-aware.toml"
lab_srun jobdir -N4 -n32 --topo-aware=tp=8 "$ENVDUMP"
check "unwritable job_dir (fail-open): exit 0" test $? -eq 0
check "unwritable job_dir (fail-open): the cause is named" grep -q "job_dir $LAB/etc/not-a-dir" "$OUT/jobdir.err"
check "unwritable job_dir (fail-open): tasks keep the plan" test "$(count_tasks_with jobdir RANK)" -eq 32
check "unwritable job_dir (fail-open): no NCCL_TOPO_FILE" test "$(count_tasks_with jobdir NCCL_TOPO_FILE)" -eq 0
set_plugstack "config=$LAB/etc/topo-aware.toml" policy=fail-closed
rm -f "$marker"
lab_srun jobdir-closed -N4 -n32 --topo-aware=tp=8 "$ENVDUMP"
check "unwritable job_dir (fail-closed): srun exits non-zero" test $? -ne 0
check "unwritable job_dir (fail-closed): error from task_init" \
  grep -q "job_dir $LAB/etc/not-a-dir.*fail-closed" "$OUT/jobdir-closed.err"
check "unwritable job_dir (fail-closed): daemons still up" daemons_up

# --- nodes that must agree ------------------------------------------------------------------
# $LAB/local is node-local in the lab (each slurmd sees $LAB/local.nodeN there). A fabric file
# updated on one node only, or a capture missing on one node, would make that node plan
# otherwise; srun's digest of its inputs makes the step fail instead, under either policy, with
# one message naming the node and what differs.
# A step that one node fails: srun exits non-zero, and that node alone says, once and naming itself,
# what differs from srun's inputs. Args: name (its .err in $OUT), srun's exit code, node, what
# differs (a grep regex), what the case is.
node_fails_step() {
  local name=$1 rc=$2 node=$3 what=$4 desc=$5
  check "$desc: the step fails" test "$rc" -ne 0
  check "$desc: one message, from $node, naming $node and what differs" \
    test "$(grep -c "slurmstepd-$node: error: topo-aware: $node: its inputs differ from srun's: $what" \
      "$OUT/$name.err")" -eq 1
}
agree_setup() {
  local n
  for n in "$LAB/local" "$LAB"/local.node*; do
    cp "$LAB/etc/topology.conf" "$n/topology.conf"
    cp "$CAPTURE" "$n/dgx-h100.xml"
  done
  set_config fabric="$LAB/local/topology.conf" capture="$LAB/local/dgx-h100.xml"
  sed -i '/^\[\[node\]\]/,$d' "$LAB/etc/topo-aware.toml"
}
agree_setup
set_plugstack "config=$LAB/etc/topo-aware.toml"
lab_srun agree -N4 -n32 --topo-aware=tp=8 "$ENVDUMP"
check "identical node-local inputs: the step runs the plan" \
  test $? -eq 0 -a "$(count_tasks_with agree RANK)" -eq 32
# Slurm's topology.conf gives no link speeds: srun -v says what the figures assume.
lab_srun assumed -N4 -n32 -v --topo-aware=tp=8 true
check "a topology.conf fabric: srun -v states the figures' assumptions" \
  grep -q 'topo-aware:   figures assume: ' "$OUT/assumed.err"
for policy in fail-open fail-closed; do
  set_plugstack "config=$LAB/etc/topo-aware.toml" policy=$policy
  echo "# updated on node3 only" >>"$LAB/local.node3/topology.conf"
  lab_srun disagree-fabric-$policy -N4 -n32 --topo-aware=tp=8 "$ENVDUMP"
  node_fails_step disagree-fabric-$policy $? node3 "the fabric .*; failing the step" \
    "a fabric file changed on node3 only ($policy)"
  agree_setup
  set_plugstack "config=$LAB/etc/topo-aware.toml" policy=$policy
  rm -f "$LAB/local.node2/dgx-h100.xml"
  lab_srun disagree-capture-$policy -N4 -n32 --topo-aware=tp=8 "$ENVDUMP"
  node_fails_step disagree-capture-$policy $? node2 "the node captures" \
    "a capture missing on node2 only ($policy)"
  agree_setup
done

# srun itself cannot plan (its own copy of the fabric is broken; the nodes' are fine): under
# fail-open every node runs the step unmodified, none plans alone; under fail-closed nothing runs.
printf 'SwitchName=leaf1 Nodes=node[1-2\n' >"$LAB/local/topology.conf"
set_plugstack "config=$LAB/etc/topo-aware.toml"
bad_case srun-fails fail-open "topology.conf" --topo-aware=tp=8
set_plugstack "config=$LAB/etc/topo-aware.toml" policy=fail-closed
bad_case srun-fails-closed fail-closed "topology.conf" --topo-aware=tp=8
agree_setup

# A node-local problem that leaves the plan standing (node3's job directory is a file): the
# warning reaches the user from node3, not only node 0's would.
for n in "$LAB"/local.node*; do rm -rf "$n/jobs"; mkdir -m 1777 "$n/jobs"; done
rm -rf "$LAB/local.node3/jobs"
: >"$LAB/local.node3/jobs"
set_config fabric="$LAB/local/topology.conf" capture="$LAB/local/dgx-h100.xml" \
  job_dir="$LAB/local/jobs"
sed -i '/^\[\[node\]\]/,$d' "$LAB/etc/topo-aware.toml"
set_plugstack "config=$LAB/etc/topo-aware.toml"
lab_srun node3-warns -N4 -n32 --topo-aware=tp=8 "$ENVDUMP"
check "job_dir unwritable on node3 only (fail-open): exit 0, every task keeps the plan" \
  test $? -eq 0 -a "$(count_tasks_with node3-warns RANK)" -eq 32
check "job_dir unwritable on node3 only: node3's warning reaches srun's terminal" \
  grep -q "topo-aware: warning: job_dir $LAB/local/jobs.* on node3; its tasks get the plan without NCCL_TOPO_FILE" \
    "$OUT/node3-warns.err"
check "job_dir unwritable on node3 only: only node3's 8 tasks go without NCCL_TOPO_FILE" \
  test "$(count_tasks_with node3-warns NCCL_TOPO_FILE)" -eq 24
rm -rf "$LAB"/local.node*/jobs
agree_setup

# A capture this node cannot read (a job of user nobody; node2's copy is root's, 0600).
if id nobody >/dev/null 2>&1 && command -v runuser >/dev/null; then
  for policy in fail-open fail-closed; do
    set_plugstack "config=$LAB/etc/topo-aware.toml" policy=$policy
    chmod 0600 "$LAB/local.node2/dgx-h100.xml"
    (cd / && timeout 60 runuser -u nobody -- srun -N4 -n32 --topo-aware=tp=8 "$ENVDUMP") \
      >"$OUT/unreadable-$policy.out" 2>"$OUT/unreadable-$policy.err"
    node_fails_step unreadable-$policy $? node2 "the node captures" \
      "a capture unreadable on node2 only ($policy)"
    agree_setup
  done
else
  skip_check "a capture unreadable on node2 only" "no user nobody or no runuser"
fi

# Hosts without a capture are modeled by each machine's live discovery (here a sysfs tree per
# node under discover_fsroot): node3's GPU 0 trained at x8 is another machine than the one srun
# modeled, and its plan could differ.
live_setup() {
  local n faults=$OUT/live-faults
  [ -d "$faults/healthy" ] ||
    bash "$SRC/tests/fixtures/sysfs/make-doctor-faults.sh" "$faults" >/dev/null
  for n in "$LAB/local" "$LAB"/local.node*; do
    rm -rf "$n/live-sysfs"
    cp -a "$faults/healthy" "$n/live-sysfs"
  done
  set_config fabric="$LAB/local/topology.conf" discover_fsroot="$LAB/local/live-sysfs"
  sed -i '/^\[\[node\]\]/,$d' "$LAB/etc/topo-aware.toml"
}
live_setup
set_plugstack "config=$LAB/etc/topo-aware.toml"
lab_srun live-agree -N4 -n32 --topo-aware=tp=8 "$ENVDUMP"
check "hosts without a capture, every node alike: the step runs the plan" \
  test $? -eq 0 -a "$(count_tasks_with live-agree RANK)" -eq 32
for policy in fail-open fail-closed; do
  set_plugstack "config=$LAB/etc/topo-aware.toml" policy=$policy
  rm -rf "$LAB/local.node3/live-sysfs"
  cp -a "$OUT/live-faults/pcie-gpu-x8" "$LAB/local.node3/live-sysfs"
  lab_srun live-differs-$policy -N4 -n32 --topo-aware=tp=8 "$ENVDUMP"
  node_fails_step live-differs-$policy $? node3 "the live-discovered model" \
    "a host without a capture modeled otherwise on node3 ($policy)"
  live_setup
done
rm -rf "$LAB/local/live-sysfs" "$LAB"/local.node*/live-sysfs
agree_setup

# Two builds of the plugin: node3 loads one whose build id is another revision's (the same code,
# its id bytes changed), everything else alike. Every node's plugin is $LAB/local/plugin here.
build_id=$("$CLI" --version | sed 's/^topo-aware //')
for n in "$LAB/local" "$LAB"/local.node*; do
  mkdir -p "$n/plugin"
  cp "$PLUGIN" "$n/plugin/topo_aware.so"
done
"$PY" - "$LAB/local.node3/plugin/topo_aware.so" "$build_id" <<'PYEOF'
import sys
path, bid = sys.argv[1], sys.argv[2].encode()
data = open(path, "rb").read()
assert data.count(bid) == 1, f"build id {bid!r} found {data.count(bid)} times"
other = bid[:-4] + (b"0000" if bid[-4:] != b"0000" else b"1111")
open(path, "wb").write(data.replace(bid, other))
PYEOF
check "the second build differs from the first in its build id only" \
  test "$(cmp -l "$PLUGIN" "$LAB/local.node3/plugin/topo_aware.so" | wc -l)" -le 4
for policy in fail-open fail-closed; do
  echo "required $LAB/local/plugin/topo_aware.so config=$LAB/etc/topo-aware.toml policy=$policy" \
    >"$LAB/etc/plugstack.conf"
  lab_srun two-builds-$policy -N4 -n32 --topo-aware=tp=8 "$ENVDUMP"
  node_fails_step two-builds-$policy $? node3 "the plugin's build" \
    "another build of the plugin on node3 ($policy)"
done
rm -rf "$LAB/local/plugin" "$LAB"/local.node*/plugin
set_plugstack "config=$LAB/etc/topo-aware.toml"
check "after the disagreements: daemons still up" daemons_up

# --- the node doctor as Slurm's HealthCheckProgram ------------------------------------------
# shellcheck source=health.sh
. "$SRC/tests/e2e/health.sh"

# --- scripts/calibrate.sh under sbatch, with a fake nccl-tests ---------------------------------
# shellcheck source=calibrate.sh
. "$SRC/tests/e2e/calibrate.sh"

# --- placement into Slurm through etc/cli_filter.lua (placement.sh) ------------------------
placement_hook

# --- the built packages, installed with dpkg as a site would (scripts/package.sh) -------------
if [ -z "${TOPOAWARE_E2E_PACKAGES:-}" ]; then
  skip_check "the built .deb packages installed with dpkg -i, and a step through them" \
    "TOPOAWARE_E2E_PACKAGES names no folder of packages (scripts/test.sh builds them)"
else
  pkg_files=("$TOPOAWARE_E2E_PACKAGES"/topo-aware_*.deb
             "$TOPOAWARE_E2E_PACKAGES"/topo-aware-spank-slurm-*.deb)
  # Package names are [a-z0-9.+-] (Debian policy): safe unquoted in the commands below.
  PKG_NAMES=$(for f in "${pkg_files[@]}"; do dpkg-deb -f "$f" Package; done | tr '\n' ' ')
  pkg_plugin=/usr/lib/$(gcc -print-multiarch)/slurm/topo_aware.so
  check "dpkg -i of the built packages ($PKG_NAMES)" \
    bash -c 'out=$1; shift; dpkg -i "$@" >"$out" 2>&1' _ "$OUT/dpkg-i.out" "${pkg_files[@]}"
  check "the plugin package installs the plugin, and its plugstack line only under /usr/share" \
    bash -c "test -f '$pkg_plugin' && test -f /usr/share/topo-aware/plugstack.conf.d/topo-aware.conf &&
             ! dpkg -L $PKG_NAMES | grep -q '^/etc/'"
  check "the installed topo-aware is this build" \
    test "$(/usr/bin/topo-aware --version)" = "$("$CLI" --version)"
  check "the installed doctor --spank: the packaged plugin loads in this Slurm" \
    /usr/bin/topo-aware doctor --spank "$pkg_plugin"
  echo "required $pkg_plugin config=$LAB/etc/topo-aware.toml" >"$LAB/etc/plugstack.conf"
  lab_srun packaged -N4 -n32 --topo-aware=tp=8,pp=2 "$ENVDUMP"
  check "srun --topo-aware through the installed package exits 0" test $? -eq 0
  check "through the installed package: every task equals topo-aware map" \
    same_env packaged tp=8,pp=2 'node[1-4]'
  set_plugstack "config=$LAB/etc/topo-aware.toml"
  check "dpkg -r removes both packages and the plugin" \
    bash -c "dpkg -r $PKG_NAMES >'$OUT/dpkg-r.out' 2>&1 && test ! -e '$pkg_plugin'"
  PKG_NAMES=""
fi

# --- under load: 200 small steps at once ----------------------------------------------------
load_n=${TOPO_AWARE_E2E_LOAD:-200}
mkdir -p "$OUT/load"
rm -f "$OUT"/load/*
# Each srun may wait its turn for minutes: Slurm 24.11's slurmctld takes allocation requests one at
# a time (sdiag: 0.3 to 0.65 s each under this burst), and the 200 took 345 s there, 137 s without
# --topo-aware (whose srun and stepd each ask slurmctld once more; docs/install.md).
for i in $(seq 1 "$load_n"); do
  timeout 600 srun -N1 -n2 --topo-aware=tp=2 "$ENVDUMP" >"$OUT/load/$i.out" 2>"$OUT/load/$i.err" &
done
load_failed=0
for job in $(jobs -p); do wait "$job" || load_failed=$((load_failed + 1)); done
check "$load_n concurrent srun --topo-aware steps: every one exits 0" test "$load_failed" -eq 0
check "$load_n concurrent steps: each got ranks 0 and 1 of 2, with NCCL_TOPO_FILE" \
  test "$(for f in "$OUT"/load/*.out; do
            grep -c -e '^0 RANK=0$' -e '^1 RANK=1$' -e ' WORLD_SIZE=2$' -e ' NCCL_TOPO_FILE=/' "$f"
          done | grep -cx 6)" -eq "$load_n"
check "$load_n concurrent steps: daemons still up" daemons_up
check "$load_n concurrent steps: nothing left in job_dir" \
  test -z "$(find "$LAB/jobs" -mindepth 1 -print -quit 2>/dev/null)"

# After all of that, a good step is still fine.
good_config
lab_srun after -N4 -n32 --topo-aware=tp=8,pp=2 "$ENVDUMP"
check "a later good step exits 0" test $? -eq 0
check "a later good step equals topo-aware map" same_env after tp=8,pp=2 'node[1-4]'
# (After a burst of queued jobs the scheduler may still show nodes "planned" or completing.)
for _ in $(seq 1 40); do
  sinfo -h -N -o '%T' | grep -qvx idle || break
  sleep 0.5
done
sinfo -h -N -o '%N %T %E' >"$OUT/sinfo-end.out"
check "nodes are idle, none drained or down" \
  bash -c "! grep -qvE ' (idle|mixed|allocated|completing|planned) ' '$OUT/sinfo-end.out'"

summary
[ $(( ${failed[e2e]} + ${failed[clients]} )) -eq 0 ]
