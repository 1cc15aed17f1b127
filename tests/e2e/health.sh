# The node doctor as Slurm's HealthCheckProgram, sourced by tests/e2e/run.sh (its helpers:
# check, $OUT, $CLI, $LAB, $SRC). slurmd runs $LAB/local/healthcheck.sh every 5 s on each node,
# and $LAB/local is node-local in the lab: node3 gets a sysfs tree with one RDMA port trained at
# 1X (100 of 400 Gb/s, critical), node2 the healthy tree. node3 must be drained with the finding
# as its reason (sinfo -R), node2 left alone, and both write their report to the health
# directory.

health_main() {
  local faults=$OUT/doctor-faults health=$LAB/health n
  bash "$SRC/tests/fixtures/sysfs/make-doctor-faults.sh" "$faults" >/dev/null
  rm -rf "$health" "$LAB/local.node2/sysfs" "$LAB/local.node3/sysfs"
  mkdir -p "$health"
  cp -a "$faults/healthy" "$LAB/local.node2/sysfs"
  cp -a "$faults/rdma-rate-1x" "$LAB/local.node3/sysfs"
  for n in 2 3; do
    cat >"$LAB/local.node$n/healthcheck.sh.new" <<EOS
#!/bin/sh
# slurmd runs health checks with a bare environment: scontrol needs the lab's config.
SLURM_CONF='$SLURM_CONF'; export SLURM_CONF
exec '$CLI' doctor --slurm --fsroot '$LAB/local/sysfs' --health-dir '$health' -q
EOS
    chmod 0755 "$LAB/local.node$n/healthcheck.sh.new"
    mv "$LAB/local.node$n/healthcheck.sh.new" "$LAB/local.node$n/healthcheck.sh"
  done
  local deadline=$((SECONDS + 30))
  while [ $SECONDS -lt $deadline ]; do
    sinfo -h -R -o '%n|%E' >"$OUT/sinfo-R.out" 2>/dev/null
    grep -q '^node3|topo-aware' "$OUT/sinfo-R.out" && [ -s "$health/node2.json" ] && break
    sleep 1
  done
  check "HealthCheckProgram (topo-aware doctor --slurm): node3 with a port at 1X is drained" \
    grep -q '^node3|topo-aware: .*rdma.rate' "$OUT/sinfo-R.out"
  check "HealthCheckProgram: the drain reason names the port and its rate" \
    grep -qE '^node3\|.*mlx5_[0-9].*100.*400' "$OUT/sinfo-R.out"
  check "HealthCheckProgram: healthy node2 is left alone" \
    bash -c "! grep -q '^node2|' '$OUT/sinfo-R.out'"
  check "HealthCheckProgram: each node's report in the health directory" \
    bash -c "grep -q '\"status\": *\"critical\"' '$health/node3.json' &&
             grep -q '\"status\": *\"healthy\"' '$health/node2.json'"
  # Back to a healthy lab: no-op checks, node3 resumed.
  for n in 2 3; do printf '#!/bin/sh\nexit 0\n' >"$LAB/local.node$n/healthcheck.sh"; done
  scontrol update nodename=node3 state=resume >/dev/null 2>&1
  deadline=$((SECONDS + 20))
  while [ $SECONDS -lt $deadline ] && sinfo -h -R -o '%n' | grep -q node3; do sleep 0.5; done
  check "node3 resumed after the test" bash -c "! sinfo -h -R -o '%n' | grep -q node3"

  # Fed to the plan: node3's report says mlx5_2 came up at HDR (200 of 400 Gb/s, a warning: not
  # drained). srun reads the health directory, names node3, and plans 4 tasks a host off GPU 2
  # there; with doctor = "warn" each node also checks itself (node3 finds the same) at step start.
  rm -rf "$health"
  mkdir -p "$health"
  for n in 1 2 4; do rm -rf "$LAB/local.node$n/sysfs"; cp -a "$faults/healthy" "$LAB/local.node$n/sysfs"; done
  rm -rf "$LAB/local.node3/sysfs"
  cp -a "$faults/rdma-rate-hdr" "$LAB/local.node3/sysfs"
  "$CLI" doctor --fsroot "$faults/rdma-rate-hdr" --node node3 --health-dir "$health" -q -o /dev/null
  set_config health_dir="$health" doctor=warn doctor_fsroot="$LAB/local/sysfs"
  set_plugstack "config=$LAB/etc/topo-aware.toml"
  lab_srun degraded -N4 --ntasks-per-node=4 -v --topo-aware=tp=4 "$ENVDUMP"
  check "health_dir: the step runs" test $? -eq 0
  check "health_dir: srun names the degraded host and NIC" \
    grep -q 'topo-aware: degraded (health report): node3: mlx5_2 at 200 of 400 Gb/s' \
      "$OUT/degraded.err"
  check "doctor = warn: node3, and only node3, warns about its own NIC at step start" \
    bash -c "test \"\$(grep -c 'topo-aware: warning: node[0-9]* is degraded' '$OUT/degraded.err')\" -eq 1 &&
             grep -q 'topo-aware: warning: node3 is degraded: rdma.rate mlx5_2' '$OUT/degraded.err'"
  # node3 is the third host: tasks 8-11.
  check "health_dir: node3's tasks stay off GPU 2 (behind mlx5_2)" \
    bash -c "test \"\$(grep -cE '^(8|9|10|11) CUDA_VISIBLE_DEVICES=' '$OUT/degraded.out')\" -eq 4 &&
             ! grep -qE '^(8|9|10|11) CUDA_VISIBLE_DEVICES=(.*,)?2(,|\$)' '$OUT/degraded.out'"
  check "health_dir: the plan models below Slurm's order on the degraded cluster" \
    grep -qE "topo-aware: plan tp=4: .*Slurm's order .*\(-[0-9.]+%\)" "$OUT/degraded.err"
  "$CLI" map --fabric "$FABRIC" --nodes 'node[1-4]' --node-type "$CAPTURE" --tasks-per-node 4 \
    --layout tp=4 --health-dir "$health" --job-id "$(job_of degraded)" --of env 2>/dev/null |
    normalize_env | sed -E 's/ MASTER_ADDR=node([0-9])$/ MASTER_ADDR=10.77.0.1\1/' | sort \
    >"$OUT/degraded.expected"
  observed_env degraded >"$OUT/degraded.observed"
  check "health_dir: every task's environment equals topo-aware map --health-dir" \
    diff -q "$OUT/degraded.expected" "$OUT/degraded.observed"
  grep -E "topo-aware: (plan|degraded)" "$OUT/degraded.err" | sed 's/^/e2e:   /'
  for n in 1 2 3 4; do rm -rf "$LAB/local.node$n/sysfs"; done
  good_config
}

health_main
