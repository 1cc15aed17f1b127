#!/usr/bin/env bash
# scripts/calibrate.sh without Slurm or GPUs (the lab's test, tests/e2e/calibrate.sh, runs it
# under sbatch):
#   mode "shellcheck": the script, the lab's test of it and the fake nccl-tests binary are
#                clean under shellcheck (exit 77 without it: apt-get install shellcheck)
#   mode "dry-run": its options, its refusal outside an allocation, and --dry-run's steps on the
#                lab's 4 nodes: the cases, the orders `topo-aware map --of host-order` gives, the
#                srun line, the skips, and nothing written
# Usage: calibrate_sh_test.sh shellcheck | dry-run CLI
set -uo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SCRIPT=$SRC/scripts/calibrate.sh
fails=0
ok() { echo "PASS: $1"; }
bad() { echo "FAIL: $1"; fails=$((fails + 1)); }
expect() {  # what, command...
  local what=$1; shift
  if "$@"; then ok "$what"; else bad "$what"; fi
}

case ${1:-} in
  shellcheck)
    command -v shellcheck >/dev/null || { echo "SKIP: shellcheck not installed"; exit 77; }
    expect "shellcheck: scripts/calibrate.sh, tests/e2e/calibrate.sh, tests/e2e/fake_nccl_perf.sh" \
      shellcheck -x "$SCRIPT" "$SRC/tests/e2e/calibrate.sh" "$SRC/tests/e2e/fake_nccl_perf.sh"
    ;;
  dry-run)
    CLI=${2:?usage: calibrate_sh_test.sh dry-run CLI}
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    mkdir -p "$tmp/fake"
    for t in all_reduce reduce_scatter all_gather alltoall sendrecv; do
      cp "$SRC/tests/e2e/fake_nccl_perf.sh" "$tmp/fake/${t}_perf"
    done
    chmod 0755 "$tmp"/fake/*
    # Away from any Slurm allocation, whatever the caller's environment says. (--mpi is given:
    # srun --mpi=list without a slurm.conf retries for as long as the probe lets it.)
    unset SLURM_JOB_ID SLURM_JOB_NODELIST SLURM_GPUS_ON_NODE SLURM_GPUS_PER_NODE
    export SLURM_CONF=$tmp/no-slurm.conf

    bash "$SCRIPT" --help >"$tmp/help" 2>&1
    expect "--help exits 0 and names the options" \
      bash -c "[ $? -eq 0 ] && grep -q -- '--fabric FILE' '$tmp/help' && grep -q -- '--dry-run' '$tmp/help'"
    bash "$SCRIPT" --bogus >"$tmp/bogus" 2>&1
    expect "an unknown option exits 1, named" \
      bash -c "[ $? -eq 1 ] && grep -q \"topo-aware: calibrate: error: unknown argument '--bogus'\" '$tmp/bogus'"
    bash "$SCRIPT" --nccl-tests "$tmp/fake" >"$tmp/noalloc" 2>&1
    expect "outside an allocation, without --dry-run: exits 1, says so" \
      bash -c "[ $? -eq 1 ] && grep -q 'not inside a Slurm allocation' '$tmp/noalloc'"
    bash "$SCRIPT" --fabric "$SRC/etc/lab-cluster.toml" --config x.toml --dry-run >"$tmp/both" 2>&1
    expect "--fabric and --config together: refused" \
      bash -c "[ $? -eq 1 ] && grep -q 'give one' '$tmp/both'"

    (cd "$tmp" && bash "$SCRIPT" --dry-run --nodes 'node[1-4]' --gpus-per-node 8 --mpi pmix \
      --fabric "$SRC/etc/lab-cluster.toml" --nccl-tests "$tmp/fake" --topo-aware "$CLI" \
      --out "$tmp/out") >"$tmp/dry" 2>"$tmp/dry.err"
    expect "--dry-run exits 0" test $? -eq 0
    expect "--dry-run writes nothing" test ! -e "$tmp/out"
    # 5 tests x (1 node + 2 nodes at 8/4/2 GPUs in block and interleaved + 3 and 4 nodes in
    # block and interleaved), the plan's order being Slurm's on this fabric.
    expect "--dry-run: one srun per run (55)" \
      test "$(grep -c '^SLURM_HOSTFILE=' "$tmp/dry")" -eq 55
    expect "--dry-run: the 4-node interleaved case's srun line" \
      grep -qF "SLURM_HOSTFILE=$tmp/out/hostfiles/4n-8g-interleaved.hosts NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING,ENV srun --ntasks=32 --distribution=arbitrary --gpus-per-node=8 --mpi=pmix --kill-on-bad-exit=1 --time=30 $tmp/fake/all_reduce_perf -b 1M -e 4G -f 2 -g 1 > $tmp/out/4n-8g-interleaved-all_reduce.txt" \
      "$tmp/dry"
    expect "--dry-run: interleaved over the lab's leaves is node1,node3,node2,node4" \
      grep -qx '# case=4n8g order=interleaved hosts=node1,node3,node2,node4' "$tmp/dry"
    expect "--dry-run: 2 nodes at 2 GPUs a node: 4 tasks" \
      grep -q 'srun --ntasks=4 --distribution=arbitrary .*2n-2g-block-sendrecv.txt$' "$tmp/dry"
    expect "--dry-run: an order that gives block's hosts again is skipped, saying so" \
      grep -q '^# skipped case=2n8g order=plan test=all_reduce file=- hosts=-: same hosts in the same order as block' \
        "$tmp/dry"
    expect "--dry-run: 2 nodes interleaved: one on each leaf" \
      grep -qx '# case=2n4g order=interleaved hosts=node1,node3' "$tmp/dry"

    (cd "$tmp" && bash "$SCRIPT" --dry-run --nodes node1,node2 --gpus-per-node 4 --mpi pmix \
      --nccl-tests "$tmp/fake" --topo-aware "$CLI" --tests all_reduce) >"$tmp/dry2" 2>&1
    expect "--dry-run, 4 GPUs a node, no fabric: 8-GPU case and plan/interleaved skipped with why" \
      bash -c "[ $? -eq 0 ] &&
        grep -q '^# skipped case=2n8g order=block test=all_reduce file=- hosts=-: the job has 4 GPUs a node, the case needs 8' '$tmp/dry2' &&
        grep -q \"^# skipped case=2n4g order=plan test=all_reduce file=- hosts=-: no --fabric or --config: the plan's order is Slurm's\" '$tmp/dry2' &&
        grep -q '^# skipped case=2n2g order=interleaved test=all_reduce file=- hosts=-: no --fabric or --config: the leaves are unknown' '$tmp/dry2'"

    (cd "$tmp" && bash "$SCRIPT" --dry-run --nodes node1,node2,node3 --gpus-per-node 8 --mpi pmix \
      --nccl-tests "$tmp/fake" --topo-aware "$CLI" --tests sendrecv --nodes-max 1) >"$tmp/dry4" 2>&1
    expect "--dry-run --nodes-max 1: the one-node case only, the rest named as left out" \
      bash -c "[ $? -eq 0 ] && [ \$(grep -c '^SLURM_HOSTFILE=' '$tmp/dry4') -eq 1 ] &&
        grep -qx '# skipped case=2n..3n order=- test=- file=- hosts=-: --nodes-max 1' '$tmp/dry4'"

    (cd "$tmp" && bash "$SCRIPT" --dry-run --nodes node1,node2 --gpus-per-node 8 --mpi pmix \
      --nccl-tests "$tmp/empty" --topo-aware "$CLI") >"$tmp/dry3" 2>&1
    expect "--dry-run without nccl-tests: the build commands, and the steps naming NCCL_TESTS_DIR" \
      bash -c "[ $? -eq 0 ] && grep -q 'git clone https://github.com/NVIDIA/nccl-tests' '$tmp/dry3' &&
        grep -q 'make -j MPI=1 MPI_HOME=' '$tmp/dry3' && grep -q ' NCCL_TESTS_DIR/all_reduce_perf -b 1M' '$tmp/dry3'"
    ;;
  *) echo "usage: calibrate_sh_test.sh shellcheck | dry-run CLI" >&2; exit 2 ;;
esac
[ "$fails" -eq 0 ]
