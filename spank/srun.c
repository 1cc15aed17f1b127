/* topo-aware SPANK plugin, srun side: srun, sbatch and salloc (shell.h).
 *
 * The SPEC is checked where it is given, before anything runs. srun then, after the allocation
 * and before launch, checks the SPEC against the step, reads the inputs the nodes will read, and
 * decides for all of them: it hands every node the digest they compare with their own, or, when
 * it cannot plan under fail-open, the verdict that every node runs the step unmodified (one
 * warning, here). Under fail-closed nothing launches.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "shell.h"

/* Where srun, sbatch and salloc look for a SPANK option in the environment (inside an allocation
 * they find the one sbatch or salloc was given there). */
#define TA_OPTION_ENV "SLURM_SPANK__SLURM_SPANK_OPTION_topo_aware_topo_aware"

/* srun/sbatch/salloc's option callback. It does not fail: Slurm would answer "Invalid
 * --topo-aware argument: " with the whole SPEC after our message, 30 KB of it for a layout pasted
 * by mistake; init_post_opt fails instead. */
int ta_srun_option(const char *spec) {
  char err[TA_ERRLEN] = "";
  const char *env = getenv("TOPO_AWARE");
  /* TOPO_AWARE handed over as the option (ta_srun_init) comes first; the command line after. */
  ta_ctx.spec_origin =
      env != NULL && spec != NULL && strcmp(env, spec) == 0 ? "TOPO_AWARE" : "--topo-aware";
  if (ta_set_spec(spec, err, sizeof err) != 0) {
    /* A shadow step never fails: srun reports the SPEC's problem in its shadow line. */
    if (ta_shadow_for(spec)) {
      ta_keep_spec(spec);
      ta_ctx.option_invalid = 0;
      return 0;
    }
    slurm_error("topo-aware: invalid --topo-aware=%s: %s", ta_spec_for_message(spec), err);
    ta_ctx.option_invalid = 1;
    return 0;
  }
  ta_ctx.option_invalid = 0; /* a later valid --topo-aware wins, as Slurm's options do */
  return 0;
}

/* TOPO_AWARE reaches the nodes only through the step's environment, which --export=NONE (or a
 * list without it) leaves out: srun would plan the job and the nodes would launch it unmodified,
 * silently. Handed over as the option instead, it travels with the step like --topo-aware=SPEC.
 * Slurm reads these variables after slurm_spank_init and before the command line, so a
 * --topo-aware=SPEC given there still wins, and an option already in the environment is kept. A
 * bad TOPO_AWARE is left to init_post_opt, which reports it by its name. srun only: sbatch and
 * salloc would copy the option into the job's environment, where it would then win over a
 * TOPO_AWARE the script sets for a step. */
void ta_srun_init(void) {
  char err[TA_ERRLEN] = "";
  const char *spec = getenv("TOPO_AWARE");
  if (spec == NULL || getenv(TA_OPTION_ENV) != NULL) return;
  if (ta_set_spec(spec, err, sizeof err) == 0 && setenv(TA_OPTION_ENV, spec, 0) == 0) {
    ta_ctx.option_env_set = 1;
  }
}

/* The environment fallback for srun/sbatch/salloc; the option wins when both are given. */
static int env_fallback(void) {
  char err[TA_ERRLEN] = "";
  const char *spec = getenv("TOPO_AWARE");
  if (ta_active() || spec == NULL) return 0;
  if (ta_set_spec(spec, err, sizeof err) != 0) {
    if (ta_shadow_for(spec)) { /* as in ta_srun_option */
      ta_keep_spec(spec);
      ta_ctx.spec_origin = "TOPO_AWARE";
      return 0;
    }
    slurm_error("topo-aware: invalid TOPO_AWARE=%s: %s", ta_spec_for_message(spec), err);
    return -1;
  }
  ta_ctx.spec_origin = "TOPO_AWARE";
  return 0;
}

int ta_srun_init_post_opt(void) {
  /* Read by now; the tasks' environment gets no trace of it (a task's own srun would otherwise
   * take it as an option given there). */
  if (ta_ctx.option_env_set) unsetenv(TA_OPTION_ENV);
  ta_ctx.option_env_set = 0;
  if (ta_ctx.option_invalid) return -1; /* said in ta_srun_option */
  return env_fallback();
}

static void emit(void *arg, int level, const char *line) {
  (void)arg;
  if (level == 1)
    slurm_verbose("%s", line);
  else if (level == 3)
    slurm_spank_log("%s", line);
  else
    slurm_info("%s", line);
}

/* The job's GRES detail per host ("gpu:8(IDX:0-7)"), newline-separated in the order of its node
 * list, or NULL when slurmctld gave none for every host (malloc'd). */
static char *gres_lines(const slurm_job_info_t *job, size_t nhosts) {
  char *out;
  size_t len = 0, i;
  if (job->gres_detail_str == NULL || job->gres_detail_cnt != nhosts) return NULL;
  for (i = 0; i < nhosts; ++i) {
    len += (job->gres_detail_str[i] != NULL ? strlen(job->gres_detail_str[i]) : 0) + 1;
  }
  out = malloc(len + 1);
  if (out == NULL) return NULL;
  out[0] = '\0';
  for (i = 0; i < nhosts; ++i) {
    /* An empty line would be skipped by the reader: "-" stands for a host without GRES. */
    const char *g = job->gres_detail_str[i];
    strcat(out, g != NULL && *g != '\0' ? g : "-");
    strcat(out, "\n");
  }
  return out;
}

/* srun, after the allocation and before launch. */
int ta_srun_local_user_init(spank_t sp) {
  char err[TA_ERRLEN] = "";
  struct ta_local step;
  job_info_msg_t *job = NULL;
  char *hosts = NULL, *gres = NULL;
  int rc = TA_OK, shadow;
  if (!ta_active()) return 0;
  shadow = ta_shadow_for(ta_spec());
  memset(&step, 0, sizeof step);
  if (spank_get_item(sp, S_JOB_ID, &step.job_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_STEPID, &step.step_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &step.ntasks) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_NNODES, &step.nnodes) != ESPANK_SUCCESS) {
    snprintf(err, sizeof err, "%s: job id, step id or task count not available", __func__);
    rc = TA_EFAIL;
  } else {
    /* The node list, and the GPUs the job holds on each node, are known before launch: ask
     * slurmctld (one RPC, only with --topo-aware). */
    if (ta_load_job(&job, step.job_id, SHOW_DETAIL) == SLURM_SUCCESS && job != NULL &&
        job->record_count > 0) {
      hosts = ta_expand_hosts(job->job_array[0].nodes);
      if (hosts != NULL) {
        size_t n = 0;
        const char *c;
        for (c = hosts; *c != '\0'; ++c) n += *c == '\n';
        gres = gres_lines(&job->job_array[0], n);
      }
    }
    if (job != NULL) slurm_free_job_info_msg(job);
    step.hosts = hosts != NULL ? hosts : "";
    step.gres = gres;
    step.mpi_type = getenv("SLURM_MPI_TYPE");
    step.hostfile = getenv("SLURM_HOSTFILE");
    if (!shadow) rc = ta_local_check(&step, emit, NULL, err, sizeof err);
  }
  /* Shadow mode: srun plans and reports, and the step runs as Slurm launched it on every node,
   * whatever the check found and whatever the policy. */
  if (shadow) ta_local_shadow(&step, rc == TA_EFAIL ? err : NULL, emit, NULL);
  free(hosts);
  free(gres);
  if (shadow) {
    /* The verdict that every node leaves the step alone, and nothing else. */
    unsetenv(TA_DIGEST_ENV);
    unsetenv(TA_HEALTH_ENV);
    setenv(TA_DIGEST_ENV, ta_local_digest(), 1);
    return 0;
  }
  if (rc == TA_EREQUEST) {
    slurm_error("topo-aware: %s=%s: %s", ta_ctx.spec_origin, ta_spec_for_message(ta_spec()), err);
    return -1;
  }
  if (rc != TA_OK && ta_fail_closed()) {
    slurm_error("topo-aware: %s (policy fail-closed: not launching)", err);
    return -1;
  }
  /* What every node takes: the digest of what srun read, or the verdict that the step runs
   * unmodified. SLURM_* names, so that they reach the nodes also under --export=NONE; an outer
   * step's are replaced. */
  unsetenv(TA_DIGEST_ENV);
  unsetenv(TA_HEALTH_ENV);
  setenv(TA_DIGEST_ENV, ta_local_digest(), 1);
  if (rc == TA_OK && ta_local_health() != NULL) setenv(TA_HEALTH_ENV, ta_local_health(), 1);
  if (rc != TA_OK) {
    slurm_spank_log("topo-aware: warning: %s; the job runs without topo-aware (fail-open)", err);
  }
  return 0;
}
