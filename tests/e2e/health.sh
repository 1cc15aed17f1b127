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
}

health_main
