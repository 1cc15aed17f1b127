/* The C facade between the SPANK shell (topo_aware_spank.c and its per-context files) and the
 * topo-aware libraries.
 *
 * slurm/spank.h is not C++-safe, so the shell is C and everything topo-aware does lives behind
 * these plain-C functions. Their C++ bodies (facade.cc) catch every exception: a function
 * returns 0 on success and a failure kind (below) with a one-line reason in `err` (NUL-terminated,
 * truncated to `errlen`). No exception, and no C++ type, crosses this boundary. The facade keeps
 * one process-wide state: a SPANK plugin is loaded once per srun/sbatch/slurmstepd process.
 *
 * A step runs with the same plan on every node or unmodified on every node, never mixed. srun
 * decides first: it reads the inputs and hands every node a digest of them (srun_check.h), or,
 * when it cannot plan under fail-open, the verdict that the step runs unmodified. Failures come
 * in these kinds, by what the shell must do with them:
 *   TA_EFAIL     something topo-aware needs is missing or broken, alike on every node (srun's
 *                own failure, or one every node that agreed with srun meets): the policy decides
 *                (fail-open warns once and leaves the job as Slurm launched it, fail-closed fails
 *                it);
 *   TA_ENODE     a problem of this node only (its job directory): the plan stands, its tasks
 *                go without NCCL_TOPO_FILE (fail-open, this node warns); fail-closed fails the
 *                step from this node;
 *   TA_EREQUEST  the user's request cannot be honoured as asked (a SPEC that does not fit the
 *                step, ids=slurm under MPI, ...): refused under either policy;
 *   TA_EDISAGREE this node read other inputs than srun (its digest differs), or cannot apply the
 *                plan every node agreed on (its tasks are not where the plan puts them, Slurm bound
 *                it other GPUs than the plan's workers): the node fails the step under either
 *                policy, naming itself (a partial plan would hang it).
 * And one outcome that is not a failure:
 *   TA_UNMODIFIED srun decided the step runs unmodified and told the user: the node leaves it.
 */
#ifndef TOPOAWARE_SPANK_FACADE_H
#define TOPOAWARE_SPANK_FACADE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Receives one line for the user or the log; level 0 info, 1 verbose (srun -v), 3 warning. */
typedef void (*ta_line_fn)(void *arg, int level, const char *line);
/* Receives one environment variable of a task. Returns 0, or -1 to stop. */
typedef int (*ta_env_fn)(void *arg, const char *name, const char *value);

#define TA_OK 0
#define TA_UNMODIFIED 1
#define TA_EFAIL (-1)
#define TA_ENODE (-2)
#define TA_EREQUEST (-3)
#define TA_EDISAGREE (-4)

/* What srun hands every node, as SLURM_* variables (Slurm passes those also under
 * --export=NONE). */
#define TA_DIGEST_ENV "SLURM_TOPO_AWARE_DIGEST"
#define TA_HEALTH_ENV "SLURM_TOPO_AWARE_HEALTH"
/* The longest digest and health text srun hands the nodes, with their NUL: slurmstepd reads them
 * into buffers of these sizes, and srun refuses to plan with more (a node must never plan without
 * them). */
#define TA_DIGEST_MAX 65536
#define TA_HEALTH_MAX 65536

/* Keeps the plugstack arguments (`config=PATH`, `key=value` overrides). They are parsed strictly,
 * but on first use: a job that does not ask for topo-aware pays nothing and hears nothing. */
int ta_configure(int argc, char **argv, char *err, size_t errlen);
/* The configuration problem (plugstack argument, file:line), or NULL when it is fine. */
const char *ta_config_error(void);
/* 1 when the failure policy is fail-closed (also when only the plugstack line says so). */
int ta_fail_closed(void);

/* The longest SPEC, with its NUL: slurmstepd reads TOPO_AWARE into a buffer of this size, so a
 * longer one is refused where it is given rather than dropped on the nodes. */
#define TA_SPEC_MAX 8192

/* The option value (NULL or "" = plain data parallel). Idempotent: slurmstepd calls the option
 * callback twice. Checks the syntax only, since the world size is not known yet. */
int ta_set_spec(const char *spec, char *err, size_t errlen);
/* slurmstepd's option callback: keeps the SPEC unchecked. It runs as root, before the job's
 * user is known, and a failure there is dropped by Slurm (the step would run unmodified without a
 * word to the user), so the SPEC is checked in ta_step_prepare, as the job's user, under the
 * configured policy. */
int ta_keep_spec(const char *spec);
/* 1 once ta_set_spec or ta_keep_spec was called (the option or TOPO_AWARE was given). */
int ta_active(void);
const char *ta_spec(void);

/* The names of every variable a task may get, NULL-terminated: the shell notes which of them the
 * user set before topo-aware touches the task (those are kept, unless configured otherwise). */
const char *const *ta_exported_names(void);

/* What srun knows before launch. */
struct ta_local {
  uint32_t job_id;
  uint32_t step_id;
  const char *hosts;          /* the allocation's hosts, newline-separated, Slurm's order */
  const char *gres;           /* per host of `hosts`, Slurm's GRES detail ("gpu:8(IDX:0-7)"),
                               * newline-separated; NULL when slurmctld gave none */
  uint32_t nnodes;            /* the step's node count */
  uint32_t ntasks;            /* the step's task count */
  const char *mpi_type;       /* SLURM_MPI_TYPE where srun sees it, or NULL */
  const char *hostfile;       /* SLURM_HOSTFILE where srun sees it, or NULL */
};

/* srun, before launch: checks the SPEC against the step (TA_EREQUEST when it cannot be
 * honoured), reads the inputs and makes the digest every node compares with its own, judges the
 * allocation against the fabric and emits the one-line verdict at level 0 and the plan summary at
 * level 1 (when the step spans the whole allocation). Any other problem returns TA_EFAIL with the
 * reason; the shell applies the policy. */
int ta_local_check(const struct ta_local *step, ta_line_fn out, void *arg, char *err,
                   size_t errlen);
/* Shadow mode (docs/spank.md): 1 when the configuration says mode = "shadow" (also when only the
 * plugstack line does, the file being broken) or `spec` carries the word `shadow` (NULL: the
 * configuration alone). A shadow step is planned by srun and reported, and runs unmodified. */
int ta_shadow_for(const char *spec);
/* srun, before launch, for a shadow step instead of ta_local_check: the same check and plan
 * (every line at level 1), then one shadow line at level 1 and appended to shadow_log. Never
 * fails: `failure` (or NULL) is what the shell could not learn about the step, written as the
 * line's reason. Afterwards ta_local_digest() is the verdict that every node runs the step
 * unmodified. */
void ta_local_shadow(const struct ta_local *step, const char *failure, ta_line_fn out, void *arg);
/* 1 when `digest` (a node's TA_DIGEST_ENV) is srun's verdict that the step runs unmodified. */
int ta_unmodified_verdict(const char *digest);

/* What srun hands the nodes as TA_DIGEST_ENV: the digest of the inputs ta_local_check read, or,
 * until it succeeded, the verdict that every node runs the step unmodified. */
const char *ta_local_digest(void);
/* The degraded NICs srun read from health_dir and planned with, as text for the nodes
 * (TA_HEALTH_ENV, under TA_HEALTH_MAX), or NULL. */
const char *ta_local_health(void);

/* What slurmstepd knows about the step, in plain C. */
struct ta_step {
  uint32_t job_id;
  uint32_t step_id;
  uint32_t uid;
  uint32_t gid;
  uint32_t node_id;          /* S_JOB_NODEID */
  uint32_t ntasks;           /* S_JOB_TOTAL_TASK_COUNT */
  const char *hosts;         /* the step's hosts, newline-separated, Slurm's order */
  const char *tasks_per_node;/* SLURM_STEP_TASKS_PER_NODE ("8(x4)") or NULL */
  const char *step_gpus;     /* SLURM_STEP_GPUS (physical, Slurm-bound) or NULL */
  const char *distribution;  /* SLURM_DISTRIBUTION ("cyclic", "block:cyclic", ...) or NULL */
  const char *mpi_type;      /* SLURM_MPI_TYPE or NULL */
  const char *hostfile;      /* SLURM_HOSTFILE (-m arbitrary) or NULL */
  const char *digest;        /* TA_DIGEST_ENV (srun's), or NULL: srun handed none */
  const char *health;        /* TA_HEALTH_ENV (srun's degraded NICs), or NULL */
  const char *user_env;      /* names the user set in the step's environment, newline-separated */
  const uint32_t *local_global; /* global task id of each local task */
  uint32_t nlocal;
};

/* Once per node per step, in user_init (privileges dropped to the job's user): node models,
 * fabric, the digest compared with srun's, the plan, and the node's NCCL topology XML in the
 * per-job directory. Returns TA_OK, TA_UNMODIFIED or a failure kind. */
int ta_step_prepare(const struct ta_step *step, char *err, size_t errlen);
/* The plan's rank 0 host (MASTER_ADDR), once the step is prepared, or NULL. */
const char *ta_step_master_host(void);
/* That host's name when it does not resolve here (the shell then asks Slurm for its address),
 * else NULL. */
const char *ta_step_unresolved_master(void);
/* The address tasks reach rank 0's host at, when its name does not resolve (Slurm's NodeAddr
 * for it); NULL keeps the name. Also decides GLOO_SOCKET_IFNAME: where this node's own name
 * does not resolve, gloo would listen on loopback, so it gets the interface that reaches
 * MASTER_ADDR. */
void ta_step_set_master(const char *addr);
/* doctor = "warn": this node's own checks (the node doctor, on sysfs under doctor_fsroot); one
 * line naming `host` and the worst finding when it is degraded, else NULL. */
const char *ta_step_doctor(const char *host);
/* 1 when ta_step_prepare succeeded for this step. */
int ta_step_ready(void);
/* What this node's tasks go without although the plan stands (Slurm bound its GPUs otherwise
 * than the plan, which every node computes alike, takes them), or NULL. */
const char *ta_step_note(void);
/* Calls `set` for each variable the task with this global id gets, in a stable order; variables
 * the user set are skipped unless the configuration says overwrite (SLURM_* under ids=slurm are
 * always set: that is what ids=slurm asks). `slurm_cvd`: the task's CUDA_VISIBLE_DEVICES as
 * Slurm set it, or NULL. */
int ta_task_env(uint32_t global_task, const char *slurm_cvd, ta_env_fn set, void *arg, char *err,
                size_t errlen);
/* Binds the calling task to its GPU's NUMA-local CPUs (those online here). Returns 1 when it
 * skipped (configured off, Slurm bound already, or no local CPU exists here), 0 when bound. */
int ta_task_bind(uint32_t global_task, int slurm_bound, char *err, size_t errlen);
/* Creates the configured job_dir (root, 01777, like /tmp) when it is missing. Call as root. */
int ta_prepare_job_dir_base(void);
/* Removes the node's NCCL XML (and the per-job directory when empty). Safe to call twice. */
void ta_step_finish(void);

#ifdef __cplusplus
}
#endif

#endif /* TOPOAWARE_SPANK_FACADE_H */
