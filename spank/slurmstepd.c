/* topo-aware SPANK plugin, remote side: the step on each node, in slurmstepd (shell.h).
 *
 * user_init plans the step once per node (privileges dropped to the job's user), after srun's
 * verdict and its digest; task_init gives each task its environment. A step runs with the same
 * plan on every node or unmodified on every node: what fails alike everywhere follows the policy
 * and is told once (node 0); what fails on this node alone fails the whole step from here, under
 * either policy, with one message naming the node. Slurm drops a user_init failure (srun would
 * still exit 0), so the tasks fail from task_init.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "shell.h"

#define TA_BATCH_STEP 0xfffffffbu       /* SLURM_BATCH_SCRIPT */
#define TA_EXTERN_STEP 0xfffffffcu      /* SLURM_EXTERN_CONT */
#define TA_INTERACTIVE_STEP 0xfffffffau /* SLURM_INTERACTIVE_STEP */

int ta_stepd_init_post_opt(spank_t sp) {
  /* Still root here: the shared base of the per-job directories, if missing -- only for a step
   * that asks for topo-aware, so others do not even read the configuration. */
  char probe[8];
  spank_err_t e = spank_getenv(sp, "TOPO_AWARE", probe, sizeof probe);
  /* A shadow step leaves the node as it is. */
  if ((ta_active() || e == ESPANK_SUCCESS || e == ESPANK_NOSPACE) &&
      !ta_shadow_for(ta_active() ? ta_spec() : NULL)) {
    ta_prepare_job_dir_base();
  }
  return 0;
}

/* A variable of the step's environment into `buf`: 1 when it is set and fits, 0 when it is
 * unset (buf empty), -1 when it is longer than the buffer (buf empty). */
static int step_env(spank_t sp, const char *name, char *buf, int len) {
  spank_err_t e = spank_getenv(sp, name, buf, len);
  if (e == ESPANK_SUCCESS) return 1;
  buf[0] = '\0';
  return e == ESPANK_NOSPACE ? -1 : 0;
}

static void remember_failure(const char *reason, int kind) {
  ta_ctx.failed = kind;
  snprintf(ta_ctx.reason, sizeof ta_ctx.reason, "%s", reason);
}

/* Cancels the step; from task_init only (ta_context: no RPC in user_init). */
static void kill_step(void) {
  ta_ctx.kill_pending = 0;
  if (ta_kill_step(ta_ctx.job_id, ta_ctx.step_id, SIGKILL) != SLURM_SUCCESS) {
    slurm_error("topo-aware: %s: cannot cancel step %u.%u", ta_ctx.host, ta_ctx.job_id,
                ta_ctx.step_id);
  }
}

/* This node cannot run its part of the plan the other nodes run: one message naming the node and
 * the cause, and the whole step is cancelled (its other nodes would wait on missing ranks) -- at
 * once from task_init (`now`), by the node's first task from user_init. */
static void fail_step(const char *why, int now) {
  slurm_error("topo-aware: %s: %s; failing the step%s", ta_ctx.host, ta_ctx.reason, why);
  if (now) {
    kill_step();
  } else {
    ta_ctx.kill_pending = 1;
  }
}

/* Rank 0's host as tasks can reach it: its name where the name resolves here (no RPC; the
 * common case), else the address Slurm reaches it at (slurm.conf NodeAddr, one RPC per node
 * and step), else the name, with a warning: a rendezvous on it would hang. */
static void resolve_master(int tell) {
  const char *master = ta_step_unresolved_master();
  node_info_msg_t *nodes = NULL;
  char addr[256] = "";
  if (master != NULL) {
    if (slurm_load_node_single(&nodes, (char *)master, SHOW_ALL) == SLURM_SUCCESS &&
        nodes != NULL && nodes->record_count > 0 && nodes->node_array[0].node_addr != NULL &&
        strcmp(nodes->node_array[0].node_addr, master) != 0) {
      snprintf(addr, sizeof addr, "%s", nodes->node_array[0].node_addr);
    }
    if (nodes != NULL) slurm_free_node_info_msg(nodes);
    if (addr[0] == '\0' && tell && ta_ctx.node_id == 0) {
      slurm_spank_log(
          "topo-aware: warning: MASTER_ADDR=%s does not resolve and Slurm gives no "
          "other address for it",
          master);
    }
  }
  ta_step_set_master(addr[0] != '\0' ? addr : NULL);
}

/* The names of the variables topo-aware exports that the user set, newline-separated (malloc'd),
 * read before Slurm or topo-aware touch the task environment. */
static char *user_set_names(spank_t sp, int slurm_bound_gpus) {
  const char *const *names = ta_exported_names();
  char probe[8], *out = NULL;
  size_t len = 0, i;
  for (i = 0; names[i] != NULL; ++i) {
    spank_err_t e = spank_getenv(sp, names[i], probe, sizeof probe);
    size_t n = strlen(names[i]);
    char *grown;
    if (e != ESPANK_SUCCESS && e != ESPANK_NOSPACE) continue;
    /* Slurm's own, not the user's. */
    if (strcmp(names[i], "CUDA_VISIBLE_DEVICES") == 0 && slurm_bound_gpus) continue;
    grown = realloc(out, len + n + 2);
    if (grown == NULL) break;
    out = grown;
    memcpy(out + len, names[i], n);
    out[len + n] = '\n';
    out[len + n + 1] = '\0';
    len += n + 1;
  }
  return out;
}

/* This node's Slurm name, for messages: the node_id-th of the step's hosts (SLURMD_NODENAME is the
 * batch host's inside a batch job, and the host name need not be Slurm's). */
static void name_this_node(const char *hosts) {
  const char *line = hosts;
  uint32_t i;
  for (i = 0; line != NULL && i < ta_ctx.node_id; ++i) {
    line = strchr(line, '\n');
    if (line != NULL) ++line;
  }
  if (line != NULL && *line != '\0') {
    size_t n = strcspn(line, "\n");
    if (n < sizeof ta_ctx.host) {
      memcpy(ta_ctx.host, line, n);
      ta_ctx.host[n] = '\0';
    }
  }
}

/* Tells what user_init decided, by who must hear it. */
static void report(void) {
  switch (ta_ctx.failed) {
    case TA_EREQUEST: /* every node refuses alike, under either policy; told once */
      if (ta_ctx.node_id == 0) slurm_error("topo-aware: %s (not launching)", ta_ctx.reason);
      break;
    case TA_EDISAGREE:
      fail_step(", whose nodes would run different plans", 0);
      break;
    case TA_ENODE: /* this node's job directory: the plan stands without its XML */
      if (ta_fail_closed()) {
        fail_step(" (policy fail-closed)", 0);
      } else {
        slurm_spank_log("topo-aware: warning: %s; its tasks get the plan without NCCL_TOPO_FILE",
                        ta_ctx.reason);
      }
      break;
    default: /* TA_EFAIL: alike on every node; told once */
      if (ta_ctx.node_id != 0) {
        slurm_info("topo-aware: %s (as on node 0, which tells the user)", ta_ctx.reason);
      } else if (ta_fail_closed()) {
        slurm_error("topo-aware: %s (policy fail-closed: not launching)", ta_ctx.reason);
      } else {
        slurm_spank_log("topo-aware: warning: %s; the job runs without topo-aware (fail-open)",
                        ta_ctx.reason);
      }
      break;
  }
}

/* slurmstepd, once per node per step, privileges dropped to the job's user. */
int ta_stepd_user_init(spank_t sp) {
  char err[TA_ERRLEN] = "";
  static char nodelist[65536], tasks_per_node[65536], step_gpus[1024], spec[TA_SPEC_MAX],
      distribution[256], mpi_type[64], hostfile[4096], digest[TA_DIGEST_MAX], health[TA_HEALTH_MAX];
  char *hosts = NULL, *user_env = NULL;
  uint32_t i;
  struct ta_step step;
  uint32_t *local_global = NULL;
  struct timespec t0, t1;
  struct rusage usage0, usage1;
  const char *doctor;
  int rc;
  memset(&step, 0, sizeof step);
  if (spank_get_item(sp, S_JOB_STEPID, &ta_ctx.step_id) != ESPANK_SUCCESS) return 0;
  if (ta_ctx.step_id == TA_BATCH_STEP || ta_ctx.step_id == TA_EXTERN_STEP ||
      ta_ctx.step_id == TA_INTERACTIVE_STEP) {
    ta_ctx.skip = 1; /* the batch script itself is not a parallel step */
    return 0;
  }
  spank_get_item(sp, S_JOB_ID, &ta_ctx.job_id);
  spank_get_item(sp, S_JOB_NODEID, &ta_ctx.node_id);
  if (gethostname(ta_ctx.host, sizeof ta_ctx.host) != 0) {
    snprintf(ta_ctx.host, sizeof ta_ctx.host, "node %u", ta_ctx.node_id);
  }
  if (!ta_active()) {
    int got = step_env(sp, "TOPO_AWARE", spec, sizeof spec);
    if (got < 0) {
      /* srun refuses a SPEC this long; TOPO_AWARE set some other way must not pass unseen. */
      snprintf(err, sizeof err, "TOPO_AWARE: longer than %d characters", TA_SPEC_MAX - 1);
    }
    if (got < 0 || (got > 0 && ta_set_spec(spec, err, sizeof err) != 0)) {
      /* srun decided the step runs unmodified (a shadow step, whose SPEC srun reported): no
       * word of a SPEC it did not plan. */
      if (step_env(sp, TA_DIGEST_ENV, digest, sizeof digest) == 1 &&
          ta_unmodified_verdict(digest)) {
        ta_ctx.skip = 1;
        ta_ctx.unmodified = 1;
        return 0;
      }
      ta_ctx.skip = 0;
      remember_failure(err, TA_EFAIL);
      report();
      return 0;
    }
  }
  if (!ta_active()) {
    ta_ctx.skip = 1;
    return 0;
  }
  ta_ctx.skip = 0;
  step.job_id = ta_ctx.job_id;
  step.step_id = ta_ctx.step_id;
  step.node_id = ta_ctx.node_id;
  spank_get_item(sp, S_JOB_UID, &step.uid);
  spank_get_item(sp, S_JOB_GID, &step.gid);
  spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &step.ntasks);
  spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &step.nlocal);

  if (step_env(sp, "SLURM_STEP_NODELIST", nodelist, sizeof nodelist) != 1) {
    step_env(sp, "SLURM_JOB_NODELIST", nodelist, sizeof nodelist);
  }
  step_env(sp, "SLURM_STEP_TASKS_PER_NODE", tasks_per_node, sizeof tasks_per_node);
  step_env(sp, "SLURM_STEP_GPUS", step_gpus, sizeof step_gpus);
  step_env(sp, "SLURM_DISTRIBUTION", distribution, sizeof distribution);
  step_env(sp, "SLURM_MPI_TYPE", mpi_type, sizeof mpi_type);
  step_env(sp, "SLURM_HOSTFILE", hostfile, sizeof hostfile);
  /* What srun hands every node: cut short, it would make this node plan otherwise. */
  if (step_env(sp, TA_DIGEST_ENV, digest, sizeof digest) < 0 ||
      step_env(sp, TA_HEALTH_ENV, health, sizeof health) < 0) {
    snprintf(err, sizeof err, "%s or %s longer than this build reads (%d bytes)", TA_DIGEST_ENV,
             TA_HEALTH_ENV, TA_HEALTH_MAX - 1);
    remember_failure(err, TA_EDISAGREE);
    report();
    return 0;
  }
  hosts = ta_expand_hosts(nodelist);
  name_this_node(hosts);
  user_env = user_set_names(sp, step_gpus[0] != '\0');

  local_global = calloc(step.nlocal > 0 ? step.nlocal : 1, sizeof *local_global);
  for (i = 0; local_global != NULL && i < step.nlocal; ++i) {
    spank_get_item(sp, S_JOB_LOCAL_TO_GLOBAL_ID, i, &local_global[i]);
  }
  step.hosts = hosts != NULL ? hosts : "";
  step.tasks_per_node = tasks_per_node;
  step.step_gpus = step_gpus;
  step.distribution = distribution;
  step.mpi_type = mpi_type;
  step.hostfile = hostfile;
  step.digest = digest;
  step.health = health;
  step.user_env = user_env;
  step.local_global = local_global;
  if (local_global == NULL) step.nlocal = 0;

  /* What planning costs slurmstepd, for the slurmd log (tools/bench/stepd_cost.sh reads it). */
  getrusage(RUSAGE_SELF, &usage0);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  rc = ta_step_prepare(&step, err, sizeof err);
  free(hosts);
  free(user_env);
  free(local_global);
  if (rc == TA_UNMODIFIED) {
    /* srun could not plan the step and told the user so, or it is a shadow step: every node
     * leaves it alone. */
    ta_ctx.skip = 1;
    ta_ctx.unmodified = 1;
    slurm_info("topo-aware: step %u.%u runs unmodified, as srun decided", ta_ctx.job_id,
               ta_ctx.step_id);
    return 0;
  }
  /* A degradation of this node's tasks only; the node it happened on tells it. */
  if (ta_step_note() != NULL) slurm_spank_log("topo-aware: warning: %s", ta_step_note());
  /* doctor = "warn": the node's own checks, one line when it is degraded. */
  doctor = ta_step_doctor(ta_ctx.host);
  if (doctor != NULL) slurm_spank_log("topo-aware: warning: %s", doctor);
  /* The plan stands on this node: its tasks resolve MASTER_ADDR (task_init). */
  if (rc == TA_OK || rc == TA_ENODE) ta_ctx.master_pending = 1;
  if (rc == TA_OK) {
    clock_gettime(CLOCK_MONOTONIC, &t1);
    getrusage(RUSAGE_SELF, &usage1);
    slurm_info("topo-aware: step %u.%u planned on %s in %.1f ms, peak RSS %ld KiB (+%ld KiB)",
               ta_ctx.job_id, ta_ctx.step_id, ta_ctx.host,
               (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6,
               usage1.ru_maxrss, usage1.ru_maxrss - usage0.ru_maxrss);
    return 0;
  }
  remember_failure(err, rc);
  report();
  return 0;
}

static int set_task_env(void *arg, const char *name, const char *value) {
  return spank_setenv((spank_t)arg, name, value, 1) == ESPANK_SUCCESS ? 0 : -1;
}

/* slurmstepd, in each task's child just before exec. */
int ta_stepd_task_init(spank_t sp) {
  char err[TA_ERRLEN] = "";
  char bind[64], cvd[1024];
  uint32_t task = 0;
  int slurm_bound, local = -1;
  /* A step left unmodified runs as Slurm launched it: srun's verdict is not the task's either. */
  if (ta_ctx.unmodified) spank_unsetenv(sp, TA_DIGEST_ENV);
  if (ta_ctx.skip != 0) return 0;
  spank_get_item(sp, S_TASK_ID, &local);
  if (ta_ctx.kill_pending && local == 0) kill_step();
  /* Slurm drops a user_init failure; from task_init it fails the task and srun's exit code. What
   * to say was said in user_init. */
  switch (ta_ctx.failed) {
    case 0:
      break;
    case TA_ENODE:
      if (ta_fail_closed()) return -1;
      break;
    case TA_EFAIL:
      return ta_fail_closed() ? -1 : 0;
    default: /* TA_EREQUEST, TA_EDISAGREE */
      return -1;
  }
  if (!ta_step_ready()) return 0;
  if (ta_ctx.master_pending) resolve_master(local == 0);
  if (spank_get_item(sp, S_TASK_GLOBAL_ID, &task) != ESPANK_SUCCESS) {
    snprintf(err, sizeof err, "%s: global task id not available", __func__);
  } else {
    step_env(sp, "CUDA_VISIBLE_DEVICES", cvd, sizeof cvd);
    if (ta_task_env(task, cvd, set_task_env, sp, err, sizeof err) == 0) err[0] = '\0';
  }
  if (err[0] != '\0') {
    /* A task without its variables beside tasks with theirs: the step cannot run the plan. */
    snprintf(ta_ctx.reason, sizeof ta_ctx.reason, "task %u: %s", task, err);
    fail_step(", whose tasks would run different plans", 1);
    return -1;
  }
  step_env(sp, "SLURM_CPU_BIND_TYPE", bind, sizeof bind);
  slurm_bound = bind[0] != '\0' && strncmp(bind, "none", 4) != 0;
  if (ta_task_bind(task, slurm_bound, err, sizeof err) < 0) {
    slurm_info("topo-aware: task %u: CPU binding skipped: %s", task, err);
  }
  return 0;
}

void ta_stepd_exit(void) {
  if (ta_ctx.skip == 0) ta_step_finish();
}
