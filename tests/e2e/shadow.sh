# Shadow mode (docs/spank.md, "Shadow mode"), sourced by tests/e2e/run.sh (its helpers: check,
# lab_srun, set_config, set_plugstack, good_config, job_of, daemons_up, $OUT, $CLI, $LAB). A
# shadow step must run exactly as the same step without the plugin: every task's whole
# environment is compared byte for byte with an unplugged run's. srun must write one line per
# step to shadow_log (with the predicted saving), say nothing without -v, leave the nodes alone
# (no job_dir), and never fail a step, whatever the SPEC, the inputs or the policy. Then
# `topo-aware shadow-report` summarizes the log.

# What differs between two runs of the same srun command with or without any plugin, and so is
# left out of the comparison: the job's id (each srun here is its own job), its start and end
# times (Slurm 24.11 exports them; a second later, they differ), the task's pid, and the ports
# srun listens on for this step. Nothing else: every other variable, the plugin's included, must
# be equal.
SHADOW_RUNTIME_VARS='SLURM_JOB_ID|SLURM_JOBID|SLURM_JOB_START_TIME|SLURM_JOB_END_TIME|SLURM_TASK_PID'
SHADOW_RUNTIME_VARS+='|SLURM_SRUN_COMM_PORT|SLURM_STEP_LAUNCHER_PORT'

shadow_main() {
  local log=$LAB/shadow.log dump=$OUT/shadow-envdump.sh job lines name rc
  # Each task writes its environment, NUL-separated records sorted, into <dir>/<task>; task 0
  # also the job id beside it (<dir>.job): a shadow srun prints none.
  cat >"$dump" <<EOF
#!/bin/bash
env -0 | sort -z | grep -zvE '^($SHADOW_RUNTIME_VARS)=' >"\$1/\$SLURM_PROCID"
[ "\$SLURM_PROCID" != 0 ] || echo "\$SLURM_JOB_ID" >"\$1.job"
EOF
  chmod 0755 "$dump"
  shadow_run() {  # name, srun args... (the dump's folder is $OUT/shadow/<name>)
    local name=$1; shift
    rm -rf "$OUT/shadow/$name"
    mkdir -p "$OUT/shadow/$name"
    lab_srun "shadow-$name" "$@" "$dump" "$OUT/shadow/$name"
  }
  rm -rf "$OUT/shadow"
  # The log as a site creates it: users append, root reads; srun never creates it.
  rm -f "$log"
  install -m 0622 /dev/null "$log"
  rm -rf "$LAB/jobs"

  # The reference: the same step without the plugin at all.
  set_plugstack none
  shadow_run plain -N4 -n32
  check "shadow: the unplugged step exits 0" test $? -eq 0

  set_config mode=shadow shadow_log="$log"
  set_plugstack "config=$LAB/etc/topo-aware.toml"
  shadow_run config -N4 -n32 --topo-aware=tp=8,pp=2
  check "shadow (mode = \"shadow\"): srun --topo-aware=tp=8,pp=2 -N4 -n32 exits 0" test $? -eq 0
  check "shadow: all 32 tasks wrote their environment" \
    test "$(find "$OUT/shadow/config" -type f | wc -l)" -eq 32
  check "shadow: every task's environment is byte-identical to the unplugged step's" \
    diff -r "$OUT/shadow/plain" "$OUT/shadow/config"
  check "shadow: srun says nothing without -v" test ! -s "$OUT/shadow-config.err"
  job=$(grep -c " job=$(shadow_job config) step=0 " "$log")
  check "shadow: exactly one log line for the step" test "$job" -eq 1
  check "shadow: the line has the predicted saving and would-apply" \
    grep -qE " job=$(shadow_job config) step=0 .*layout=tp=8,pp=2 .* saving=-?[0-9]+\.[0-9]% .*verdict=would-apply$" "$log"
  check "shadow: no node made job_dir (nothing on the nodes)" test ! -e "$LAB/jobs"

  # The lab's fabric puts Slurm's order on the lower bound already (saving 0.0%); described as
  # cabled across the names (lab-crossed.toml), the plan renumbers hosts and saves.
  set_config mode=shadow shadow_log="$log" fabric="$SRC/tests/e2e/lab-crossed.toml"
  shadow_run crossed -N4 -n32 --topo-aware=tp=8,pp=2
  rc=$?
  check "shadow (fabric cabled across the names): exits 0, environment unplugged's" \
    bash -c "test $rc -eq 0 && diff -r '$OUT/shadow/plain' '$OUT/shadow/crossed'"
  check "shadow (fabric cabled across the names): a positive saving" \
    grep -qE " job=$(shadow_job crossed) step=0 .* saving=[1-9][0-9]*\.[0-9]% .*verdict=would-apply$" "$log"

  # The word in the SPEC, with the plugin configured to apply: the same.
  set_config shadow_log="$log"
  shadow_run word -N4 -n32 --topo-aware=shadow,tp=8
  check "shadow (--topo-aware=shadow,tp=8 under mode = \"apply\"): exits 0" test $? -eq 0
  check "shadow (SPEC word): every task's environment is byte-identical to the unplugged step's" \
    diff -r "$OUT/shadow/plain" "$OUT/shadow/word"
  check "shadow (SPEC word): one line, layout without the word" \
    test "$(grep -c " job=$(shadow_job word) step=0 .*layout=tp=8 " "$log")" -eq 1

  # srun -v shows the line to the user.
  set_config mode=shadow shadow_log="$log"
  shadow_run verbose -v -N4 -n32 --topo-aware=tp=8,pp=2
  check "shadow: srun -v shows the line" \
    grep -q "topo-aware shadow job=$(shadow_job verbose) step=0 .* verdict=would-apply" \
    "$OUT/shadow-verbose.err"

  # Never a failure: a SPEC that does not fit, a malformed one, inputs srun cannot read, under
  # either policy. Each step runs and its line says what apply mode would have done.
  shadow_run nofit -N4 -n32 --topo-aware=tp=7
  check "shadow: a SPEC that does not fit the step runs (exit 0)" test $? -eq 0
  check "shadow: ... and its line says would-refuse with the reason" \
    grep -qE " job=$(shadow_job nofit) .*layout=tp=7 .*verdict=would-refuse reason=\".*does not divide 32" "$log"
  shadow_run garbage -N4 -n32 --topo-aware=shadow,tp=x
  check "shadow: a malformed SPEC runs too (exit 0)" test $? -eq 0
  check "shadow: ... would-refuse" grep -qE " job=$(shadow_job garbage) .*verdict=would-refuse" "$log"
  for policy in fail-open fail-closed; do
    set_config mode=shadow shadow_log="$log" policy=$policy fabric="$LAB/etc/no-such-fabric.toml"
    shadow_run nofabric-$policy -N4 -n32 --topo-aware=tp=8
    check "shadow: a fabric srun cannot read runs the step under $policy (exit 0)" test $? -eq 0
    check "shadow: ... and says nothing without -v ($policy)" \
      test ! -s "$OUT/shadow-nofabric-$policy.err"
  done
  check "shadow: fail-open: the unreadable fabric is an error line" \
    grep -qE " job=$(shadow_job nofabric-fail-open) .*verdict=error reason=\".*no-such-fabric" "$log"
  check "shadow: fail-closed: the unreadable fabric would have refused the step" \
    grep -qE " job=$(shadow_job nofabric-fail-closed) .*verdict=would-refuse reason=\".*no-such-fabric" "$log"

  # Concurrent steps append whole lines.
  set_config mode=shadow shadow_log="$log"
  for name in $(seq 1 8); do
    timeout 120 srun -N1 -n2 --topo-aware=tp=2 true >"$OUT/shadow-many-$name.out" \
      2>"$OUT/shadow-many-$name.err" &
  done
  wait
  lines=$(wc -l <"$log")
  check "shadow: one line per step, 8 of them at once included ($lines lines for 16 steps)" \
    test "$lines" -eq 16
  "$CLI" shadow-report "$log" >"$OUT/shadow-report.out" 2>"$OUT/shadow-report.err"
  check "shadow-report reads the lab's log whole (no --lenient)" test $? -eq 0
  check "shadow-report: 16 steps, 3 would-refuse, 1 error" \
    bash -c "grep -q '^topo-aware shadow report: 16 steps ' '$OUT/shadow-report.out' &&
             grep -qE '^  would-refuse +3$' '$OUT/shadow-report.out' &&
             grep -qE '^  error +1$' '$OUT/shadow-report.out'"
  "$CLI" shadow-report --of json "$log" >"$OUT/shadow-report.json" 2>>"$OUT/shadow-report.err"
  check "shadow-report --of json: 12 planned savings" \
    grep -q '"steps": 12,' "$OUT/shadow-report.json"
  check "shadow: daemons still up" daemons_up
  good_config
}

shadow_job() { cat "$OUT/shadow/$1.job" 2>/dev/null; }
