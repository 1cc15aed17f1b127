/* topo-aware SPANK plugin: the C shell.
 *
 * A dispatcher over spank_context(): srun (local) checks the SPEC and judges the allocation
 * before anything launches; sbatch/salloc (allocator) only check the SPEC; slurmstepd (remote)
 * plans the step once per node in user_init and exports each task's environment in task_init.
 * All logic lives behind the C facade (facade.h); spank.h is C-only, so it is included here and
 * nowhere else. Failures follow the configured policy: fail-open warns once and leaves the job
 * as Slurm launched it, fail-closed fails the tasks from task_init (a user_init failure alone
 * would be dropped by Slurm, srun would still exit 0).
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

#include "facade.h"

SPANK_PLUGIN(topo-aware, 1)

/* Slurm 23.11 changed two calls made here: hostlist_t became the struct itself, its functions
 * taking a hostlist_t *, and slurm_kill_job_step gained a flags argument (Debian 12 ships 22.05,
 * Debian 13 24.11). 25.11 changed slurm_kill_job_step again (a slurm_step_id_t *) and 26.05
 * slurm_load_job; those releases are refused here rather than compiled into a wrong call. */
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
#error "topo-aware: the SPANK plugin builds against Slurm 22.05 to 25.05 only so far; configure with -DTOPOAWARE_BUILD_SPANK=OFF"
#elif SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
typedef hostlist_t *ta_hostlist;
#define ta_kill_step(job_id, step_id, sig) slurm_kill_job_step((job_id), (step_id), (sig), 0)
#else
typedef hostlist_t ta_hostlist;
#define ta_kill_step(job_id, step_id, sig) slurm_kill_job_step((job_id), (step_id), (sig))
#endif

#define TA_ERRLEN 1024
#define TA_BATCH_STEP 0xfffffffbu       /* SLURM_BATCH_SCRIPT */
#define TA_EXTERN_STEP 0xfffffffcu      /* SLURM_EXTERN_CONT */
#define TA_INTERACTIVE_STEP 0xfffffffau /* SLURM_INTERACTIVE_STEP */

/* Variables a task gets; the ones the user already set are left alone (unless configured). */
static const char *const ta_exported[] = {
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK", "MASTER_ADDR",
    "MASTER_PORT", "CUDA_VISIBLE_DEVICES", "NCCL_TOPO_FILE", "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME",
    "NCCL_CROSS_NIC", "TOPO_AWARE_RANK", "TOPO_AWARE_COORDS", "NNODES", "NPROC_PER_NODE",
    "PET_MASTER_ADDR", "PET_MASTER_PORT", "PET_NNODES", "PET_NODE_RANK", "PET_NPROC_PER_NODE",
    "GLOO_SOCKET_IFNAME", "JAX_COORDINATOR_ADDRESS", "TOPO_AWARE_LAUNCHER",
    "TOPO_AWARE_HOSTFILE", NULL};
/* Not in that list, so always set when exported: SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID
 * (ids=slurm asks for them; an srun inside a batch script carries the batch task's own) and
 * TOPO_AWARE_SLURM_*. */

/* One context struct for the remote side; -1 means "not decided yet". */
static struct {
  int skip;          /* 1: a step topo-aware leaves alone (batch, extern, option absent) */
  int failed;        /* user_init's failure kind (TA_EFAIL, TA_ENODE, TA_EREQUEST), 0: none;
                      * task_init acts on it */
  uint32_t node_id;
  char reason[TA_ERRLEN];
  /* Slurm RPCs user_init needs, made from task_init instead: slurmstepd runs user_init with the
   * job's privileges and Slurm's auth lock held for writing (auth_setuid_lock, 24.11 as
   * Debian 13 ships it), so an RPC there dies in auth_g_create ("pthread_rwlock_rdlock():
   * Resource deadlock avoided", a fatal() that kills the step). task_init runs with the lock
   * released; each task's process makes them, the node's first task speaks. */
  int master_pending; /* resolve MASTER_ADDR through slurmctld */
  int kill_pending;   /* cancel the step (TA_EDISAGREE) */
  uint32_t job_id, step_id;
} remote = {-1, 0, 0, "", 0, 0, 0, 0};

/* A SPEC for a message: a long one (a 30 KB layout pasted by mistake) is cut, saying so. */
static const char *spec_for_message(const char *spec) {
  static char buf[160];
  size_t n = spec != NULL ? strlen(spec) : 0;
  if (n < 120) return spec != NULL ? spec : "";
  snprintf(buf, sizeof buf, "%.96s... (%zu characters)", spec, n);
  return buf;
}

static int option_cb(int val, const char *optarg, int is_remote);

static struct spank_option ta_option = {
    "topo-aware", "SPEC",
    "Map ranks to GPUs, NICs and CPUs by topology. SPEC: a parallel layout such as tp=8,pp=2 "
    "(missing dims are 1, dp fills the rest), or file:/ABS/PATH to a TOML job description; "
    "none means data parallel. Also TOPO_AWARE=SPEC.",
    2, 0, option_cb};

/* How the user gave the SPEC, for messages: "--topo-aware" or "TOPO_AWARE". */
static const char *spec_origin = "--topo-aware";

/* 1 when srun/sbatch/salloc was given a SPEC that is not valid; init_post_opt then fails. The
 * option callback itself does not fail: Slurm would answer "Invalid --topo-aware argument: " with
 * the whole SPEC after our message, 30 KB of it for a layout pasted by mistake. */
static int option_invalid = 0;

static int option_cb(int val, const char *optarg, int is_remote) {
  char err[TA_ERRLEN] = "";
  const char *env = getenv("TOPO_AWARE");
  (void)val;
  /* slurmstepd (as root, and Slurm ignores a failure here): keep it, user_init checks it. */
  if (is_remote) return ta_keep_spec(optarg);
  /* TOPO_AWARE handed over as the option (env_as_option) comes first; the command line after. */
  spec_origin = env != NULL && optarg != NULL && strcmp(env, optarg) == 0 ? "TOPO_AWARE"
                                                                           : "--topo-aware";
  if (ta_set_spec(optarg, err, sizeof err) != 0) {
    slurm_error("topo-aware: invalid --topo-aware=%s: %s", spec_for_message(optarg), err);
    option_invalid = 1;
    return 0;
  }
  option_invalid = 0;  /* a later valid --topo-aware wins, as Slurm's options do */
  return 0;
}

static void emit(void *arg, int level, const char *line) {
  (void)arg;
  if (level == 1) slurm_verbose("%s", line);
  else if (level == 3) slurm_spank_log("%s", line);
  else slurm_info("%s", line);
}

/* Where srun, sbatch and salloc look for a SPANK option in the environment (inside an allocation
 * they find the one sbatch or salloc was given there). */
#define TA_OPTION_ENV "SLURM_SPANK__SLURM_SPANK_OPTION_topo_aware_topo_aware"

/* 1 while srun's environment holds TA_OPTION_ENV only because env_as_option put it there. */
static int option_env_set = 0;

/* TOPO_AWARE reaches the nodes only through the step's environment, which --export=NONE (or a
 * list without it) leaves out: srun would plan the job and the nodes would launch it unmodified,
 * silently. Handed over as the option instead, it travels with the step like --topo-aware=SPEC.
 * Slurm reads these variables after slurm_spank_init and before the command line, so a
 * --topo-aware=SPEC given there still wins, and an option already in the environment is kept. A
 * bad TOPO_AWARE is left to init_post_opt, which reports it by its name. srun only: sbatch and
 * salloc would copy the option into the job's environment, where it would then win over a
 * TOPO_AWARE the script sets for a step. */
static void env_as_option(void) {
  char err[TA_ERRLEN] = "";
  const char *spec = getenv("TOPO_AWARE");
  if (spec == NULL || getenv(TA_OPTION_ENV) != NULL) return;
  if (ta_set_spec(spec, err, sizeof err) == 0 && setenv(TA_OPTION_ENV, spec, 0) == 0) {
    option_env_set = 1;
  }
}

int slurm_spank_init(spank_t sp, int ac, char **av) {
  char err[TA_ERRLEN] = "";
  spank_context_t ctx = spank_context();
  if (ctx != S_CTX_LOCAL && ctx != S_CTX_REMOTE && ctx != S_CTX_ALLOCATOR) return 0;
  if (ta_configure(ac, av, err, sizeof err) != 0) {
    slurm_error("topo-aware: %s", err);
    return -1;
  }
  if (spank_option_register(sp, &ta_option) != ESPANK_SUCCESS) {
    slurm_error("topo-aware: %s: cannot register --topo-aware", __func__);
    return -1;
  }
  if (ctx == S_CTX_LOCAL) env_as_option();
  return 0;
}

/* The environment fallback for srun/sbatch/salloc; the option wins when both are given. */
static int env_fallback_local(void) {
  char err[TA_ERRLEN] = "";
  const char *spec = getenv("TOPO_AWARE");
  if (ta_active() || spec == NULL) return 0;
  if (ta_set_spec(spec, err, sizeof err) != 0) {
    slurm_error("topo-aware: invalid TOPO_AWARE=%s: %s", spec_for_message(spec), err);
    return -1;
  }
  spec_origin = "TOPO_AWARE";
  return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av) {
  (void)ac;
  (void)av;
  switch (spank_context()) {
    case S_CTX_LOCAL:
    case S_CTX_ALLOCATOR:
      /* Read by now; the tasks' environment gets no trace of it (a task's own srun would
       * otherwise take it as an option given there). */
      if (option_env_set) unsetenv(TA_OPTION_ENV);
      option_env_set = 0;
      if (option_invalid) return -1;  /* said in option_cb */
      return env_fallback_local();
    case S_CTX_REMOTE: {
      /* Still root here: the shared base of the per-job directories, if missing -- only for a
       * step that asks for topo-aware, so others do not even read the configuration. */
      char probe[8];
      spank_err_t e = spank_getenv(sp, "TOPO_AWARE", probe, sizeof probe);
      if (ta_active() || e == ESPANK_SUCCESS || e == ESPANK_NOSPACE) ta_prepare_job_dir_base();
      return 0;
    }
    default:
      return 0;
  }
}

/* Expands a Slurm hostlist into newline-separated names (malloc'd), or NULL. */
static char *expand_hosts(const char *list) {
  ta_hostlist hl;
  char *host, *out = NULL;
  size_t len = 0;
  if (list == NULL || *list == '\0') return NULL;
  hl = slurm_hostlist_create(list);
  if (hl == NULL) return NULL;
  while ((host = slurm_hostlist_shift(hl)) != NULL) {
    size_t n = strlen(host);
    char *grown = realloc(out, len + n + 2);
    if (grown == NULL) {
      free(host);
      free(out);
      slurm_hostlist_destroy(hl);
      return NULL;
    }
    out = grown;
    memcpy(out + len, host, n);
    out[len + n] = '\n';
    out[len + n + 1] = '\0';
    len += n + 1;
    free(host);
  }
  slurm_hostlist_destroy(hl);
  return out;
}

#define TA_DIGEST_ENV "SLURM_TOPO_AWARE_DIGEST"
/* The degraded NICs srun planned with (health_dir), for the nodes to plan alike. */
#define TA_HEALTH_ENV "SLURM_TOPO_AWARE_HEALTH"

/* srun, after the allocation and before launch. */
int slurm_spank_local_user_init(spank_t sp, int ac, char **av) {
  char err[TA_ERRLEN] = "";
  struct ta_local step;
  job_info_msg_t *job = NULL;
  char *hosts = NULL;
  int rc;
  (void)ac;
  (void)av;
  if (spank_context() != S_CTX_LOCAL || !ta_active()) return 0;
  memset(&step, 0, sizeof step);
  if (spank_get_item(sp, S_JOB_ID, &step.job_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &step.ntasks) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_NNODES, &step.nnodes) != ESPANK_SUCCESS) {
    slurm_error("topo-aware: %s: job id or task count not available", __func__);
    return ta_fail_closed() ? -1 : 0;
  }
  /* The node list is known before launch: ask slurmctld (one RPC, only with --topo-aware). */
  if (slurm_load_job(&job, step.job_id, SHOW_DETAIL) == SLURM_SUCCESS && job != NULL &&
      job->record_count > 0) {
    hosts = expand_hosts(job->job_array[0].nodes);
  }
  if (job != NULL) slurm_free_job_info_msg(job);
  step.hosts = hosts != NULL ? hosts : "";
  step.mpi_type = getenv("SLURM_MPI_TYPE");
  step.gpus_per_node = getenv("SLURM_GPUS_PER_NODE");
  rc = ta_local_check(&step, emit, NULL, err, sizeof err);
  free(hosts);
  /* The digest of what srun read, for every node to compare with its own (digest.h); a SLURM_*
   * name, so that it reaches the nodes also under --export=NONE. An outer step's is dropped. */
  unsetenv(TA_DIGEST_ENV);
  unsetenv(TA_HEALTH_ENV);
  if (rc == TA_OK && ta_local_digest() != NULL) {
    setenv(TA_DIGEST_ENV, ta_local_digest(), 1);
    if (ta_local_health() != NULL) setenv(TA_HEALTH_ENV, ta_local_health(), 1);
  }
  if (rc == TA_EREQUEST) {
    slurm_error("topo-aware: %s=%s: %s", spec_origin, spec_for_message(ta_spec()), err);
    return -1;
  }
  if (rc != TA_OK) {
    if (ta_fail_closed()) {
      slurm_error("topo-aware: %s (policy fail-closed: not launching)", err);
      return -1;
    }
    /* slurmstepd warns about what it cannot do; here it is only the judgement that failed. */
    slurm_verbose("topo-aware: cannot judge the allocation: %s", err);
  }
  return 0;
}

static void getenv_dup(spank_t sp, const char *name, char *buf, int len) {
  if (spank_getenv(sp, name, buf, len) != ESPANK_SUCCESS) buf[0] = '\0';
}

static void remember_failure(const char *reason, int kind) {
  remote.failed = kind;
  snprintf(remote.reason, sizeof remote.reason, "%s", reason);
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
    if (addr[0] == '\0' && tell && remote.node_id == 0) {
      slurm_spank_log("topo-aware: warning: MASTER_ADDR=%s does not resolve and Slurm gives no "
                      "other address for it",
                      master);
    }
  }
  ta_step_set_master(addr[0] != '\0' ? addr : NULL);
}

/* slurmstepd, once per node per step, privileges dropped to the job's user. */
int slurm_spank_user_init(spank_t sp, int ac, char **av) {
  char err[TA_ERRLEN] = "";
  static char nodelist[65536], tasks_per_node[65536], step_gpus[1024], host[256],
      spec[TA_SPEC_MAX], distribution[256], mpi_type[64], hostfile[4096], digest[512],
      health[16384];
  char probe[8];
  char *hosts = NULL, *user_env = NULL;
  size_t user_len = 0;
  uint32_t step_id = 0, i;
  struct ta_step step;
  uint32_t *local_global = NULL;
  struct timespec t0, t1;
  struct rusage usage0, usage1;
  const char *doctor;
  int rc;
  (void)ac;
  (void)av;
  if (spank_context() != S_CTX_REMOTE) return 0;
  memset(&step, 0, sizeof step);
  if (spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS) return 0;
  if (step_id == TA_BATCH_STEP || step_id == TA_EXTERN_STEP || step_id == TA_INTERACTIVE_STEP) {
    remote.skip = 1; /* the batch script itself is not a parallel step */
    return 0;
  }
  if (!ta_active()) {
    spank_err_t e = spank_getenv(sp, "TOPO_AWARE", spec, sizeof spec);
    if (e == ESPANK_NOSPACE) {
      /* srun refuses a SPEC this long; TOPO_AWARE set some other way must not pass unseen. */
      snprintf(err, sizeof err, "TOPO_AWARE: longer than %d characters", TA_SPEC_MAX - 1);
    }
    if (e == ESPANK_NOSPACE || (e == ESPANK_SUCCESS && ta_set_spec(spec, err, sizeof err) != 0)) {
      remote.skip = 0;
      remember_failure(err, TA_EFAIL);
      goto report;
    }
  }
  if (!ta_active()) {
    remote.skip = 1;
    return 0;
  }
  remote.skip = 0;
  spank_get_item(sp, S_JOB_ID, &step.job_id);
  step.step_id = step_id;
  spank_get_item(sp, S_JOB_UID, &step.uid);
  spank_get_item(sp, S_JOB_GID, &step.gid);
  spank_get_item(sp, S_JOB_NODEID, &step.node_id);
  spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &step.ntasks);
  spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &step.nlocal);
  remote.node_id = step.node_id;

  getenv_dup(sp, "SLURMD_NODENAME", host, sizeof host);
  if (host[0] == '\0' && gethostname(host, sizeof host) != 0) host[0] = '\0';
  getenv_dup(sp, "SLURM_STEP_NODELIST", nodelist, sizeof nodelist);
  if (nodelist[0] == '\0') getenv_dup(sp, "SLURM_JOB_NODELIST", nodelist, sizeof nodelist);
  getenv_dup(sp, "SLURM_STEP_TASKS_PER_NODE", tasks_per_node, sizeof tasks_per_node);
  getenv_dup(sp, "SLURM_STEP_GPUS", step_gpus, sizeof step_gpus);
  getenv_dup(sp, "SLURM_DISTRIBUTION", distribution, sizeof distribution);
  getenv_dup(sp, "SLURM_MPI_TYPE", mpi_type, sizeof mpi_type);
  getenv_dup(sp, "SLURM_HOSTFILE", hostfile, sizeof hostfile);
  getenv_dup(sp, TA_DIGEST_ENV, digest, sizeof digest);
  getenv_dup(sp, TA_HEALTH_ENV, health, sizeof health);
  hosts = expand_hosts(nodelist);

  /* What the user set explicitly, before Slurm or topo-aware touch the task environment. */
  for (i = 0; ta_exported[i] != NULL; ++i) {
    spank_err_t e = spank_getenv(sp, ta_exported[i], probe, sizeof probe);
    if (e == ESPANK_SUCCESS || e == ESPANK_NOSPACE) {
      size_t n = strlen(ta_exported[i]);
      char *grown;
      if (strcmp(ta_exported[i], "CUDA_VISIBLE_DEVICES") == 0 && step_gpus[0] != '\0') continue;
      grown = realloc(user_env, user_len + n + 2);
      if (grown == NULL) break;
      user_env = grown;
      memcpy(user_env + user_len, ta_exported[i], n);
      user_env[user_len + n] = '\n';
      user_env[user_len + n + 1] = '\0';
      user_len += n + 1;
    }
  }

  local_global = calloc(step.nlocal > 0 ? step.nlocal : 1, sizeof *local_global);
  for (i = 0; local_global != NULL && i < step.nlocal; ++i) {
    spank_get_item(sp, S_JOB_LOCAL_TO_GLOBAL_ID, i, &local_global[i]);
  }
  step.host = host;
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
  /* A degradation of this node's tasks only; the node it happened on tells it. */
  if (ta_step_note() != NULL) slurm_spank_log("topo-aware: warning: %s", ta_step_note());
  /* doctor = "warn": the node's own checks, one line when it is degraded. */
  doctor = ta_step_doctor(host);
  if (doctor != NULL) slurm_spank_log("topo-aware: warning: %s", doctor);
  if (rc == TA_OK) {
    remote.master_pending = 1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    getrusage(RUSAGE_SELF, &usage1);
    slurm_info("topo-aware: step %u.%u planned on %s in %.1f ms, peak RSS %ld KiB (+%ld KiB)",
               step.job_id, step_id, host,
               (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6,
               usage1.ru_maxrss, usage1.ru_maxrss - usage0.ru_maxrss);
    return 0;
  }
  if (rc == TA_ENODE) remote.master_pending = 1; /* the plan stands on this node too */
  remember_failure(err, rc);

report:
  /* Only slurm_error/slurm_spank_log from user_init reach the user. A failure every node shares
   * is told once (node 0); a node-local one by the node it happened on. */
  if (remote.failed == TA_EREQUEST) {
    /* Every node refuses alike, under either policy; task_init fails the tasks. */
    if (remote.node_id == 0) slurm_error("topo-aware: %s (not launching)", remote.reason);
  } else if (remote.failed == TA_EDISAGREE) {
    /* This node alone: the others would launch the plan, and its tasks would be missing from
     * it. Under either policy the whole step is stopped, by the node that knows why. */
    slurm_error("topo-aware: %s: %s; failing the step, whose nodes would run different plans",
                host, remote.reason);
    remote.kill_pending = 1;
    remote.job_id = step.job_id;
    remote.step_id = step_id;
  } else if (ta_fail_closed()) {
    slurm_info("topo-aware: %s (policy fail-closed)", remote.reason);
  } else if (remote.failed == TA_ENODE) {
    slurm_spank_log("topo-aware: warning: %s; its tasks get the plan without NCCL_TOPO_FILE",
                    remote.reason);
  } else if (remote.node_id == 0) {
    slurm_spank_log("topo-aware: warning: %s; the job runs without topo-aware (fail-open)",
                    remote.reason);
  } else {
    slurm_info("topo-aware: warning: %s; the job runs without topo-aware (fail-open)",
               remote.reason);
  }
  return 0;
}

static int set_task_env(void *arg, const char *name, const char *value) {
  return spank_setenv((spank_t)arg, name, value, 1) == ESPANK_SUCCESS ? 0 : -1;
}

/* slurmstepd, in each task's child just before exec. */
int slurm_spank_task_init(spank_t sp, int ac, char **av) {
  char err[TA_ERRLEN] = "";
  char bind[64], cvd[1024];
  uint32_t task = 0;
  int local = -1, slurm_bound;
  (void)ac;
  (void)av;
  if (spank_context() != S_CTX_REMOTE || remote.skip != 0) return 0;
  spank_get_item(sp, S_TASK_ID, &local);
  /* Slurm drops a user_init failure; from task_init it fails the task and srun's exit code. */
  /* Told once: by node 0 (request) or by the node that disagrees. */
  if (remote.kill_pending && local == 0 &&
      ta_kill_step(remote.job_id, remote.step_id, SIGKILL) != SLURM_SUCCESS) {
    slurm_error("topo-aware: cannot cancel step %u.%u", remote.job_id, remote.step_id);
  }
  if (remote.failed == TA_EREQUEST || remote.failed == TA_EDISAGREE) return -1;
  if (remote.failed && (remote.failed != TA_ENODE || ta_fail_closed())) {
    if (!ta_fail_closed()) return 0;
    if (local == 0) slurm_error("topo-aware: %s (policy fail-closed)", remote.reason);
    return -1;
  }
  if (!ta_step_ready()) return 0;
  if (remote.master_pending) resolve_master(local == 0);
  if (spank_get_item(sp, S_TASK_GLOBAL_ID, &task) != ESPANK_SUCCESS) {
    slurm_error("topo-aware: %s: global task id not available", __func__);
    return ta_fail_closed() ? -1 : 0;
  }
  getenv_dup(sp, "CUDA_VISIBLE_DEVICES", cvd, sizeof cvd);
  if (ta_task_env(task, cvd, set_task_env, sp, err, sizeof err) != 0) {
    slurm_error("topo-aware: task %u: %s", task, err);
    return ta_fail_closed() ? -1 : 0;
  }
  getenv_dup(sp, "SLURM_CPU_BIND_TYPE", bind, sizeof bind);
  slurm_bound = bind[0] != '\0' && strncmp(bind, "none", 4) != 0;
  if (ta_task_bind(task, slurm_bound, err, sizeof err) < 0) {
    slurm_info("topo-aware: task %u: CPU binding skipped: %s", task, err);
  }
  return 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av) {
  (void)sp;
  (void)ac;
  (void)av;
  if (spank_context() == S_CTX_REMOTE && remote.skip == 0) ta_step_finish();
  return 0;
}
