/* The C facade between the SPANK shell (topo_aware_spank.c) and the topo-aware libraries.
 *
 * slurm/spank.h is not C++-safe, so the shell is C and everything topo-aware does lives behind
 * these plain-C functions. Their C++ bodies (facade.cc) catch every exception: a function
 * returns 0 on success and -1 on failure with a one-line reason in `err` (NUL-terminated,
 * truncated to `errlen`). No exception, and no C++ type, crosses this boundary. The facade keeps
 * one process-wide state: a SPANK plugin is loaded once per srun/sbatch/slurmstepd process.
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

/* srun, before launch: checks the SPEC against the world size, judges the allocation (`hosts`:
 * newline-separated, Slurm's order) against the fabric and emits the one-line verdict at level 0
 * and the plan summary at level 1 (when the step spans the whole allocation, `nnodes` hosts). A SPEC that does not fit the world returns -1; any other
 * problem follows the policy (fail-open: a warning through `out` and 0). */
int ta_local_check(uint32_t job_id, const char *hosts, uint32_t nnodes, uint32_t ntasks,
                   ta_line_fn out, void *arg, char *err, size_t errlen);

/* What slurmstepd knows about the step, in plain C. */
struct ta_step {
  uint32_t job_id;
  uint32_t step_id;
  uint32_t uid;
  uint32_t gid;
  uint32_t node_id;          /* S_JOB_NODEID */
  uint32_t ntasks;           /* S_JOB_TOTAL_TASK_COUNT */
  const char *host;          /* this node's name as far as the environment knows (messages) */
  const char *hosts;         /* the step's hosts, newline-separated, Slurm's order */
  const char *tasks_per_node;/* SLURM_STEP_TASKS_PER_NODE ("8(x4)") or NULL */
  const char *step_gpus;     /* SLURM_STEP_GPUS (physical, Slurm-bound) or NULL */
  const char *distribution;  /* SLURM_DISTRIBUTION ("cyclic", "block:cyclic", ...) or NULL */
  const char *user_env;      /* names the user set in the step's environment, newline-separated */
  const uint32_t *local_global; /* global task id of each local task */
  uint32_t nlocal;
};

/* Once per node per step, in user_init (privileges dropped to the job's user): node models,
 * fabric, the plan, and the node's NCCL topology XML in the per-job directory. */
int ta_step_prepare(const struct ta_step *step, char *err, size_t errlen);
/* 1 when ta_step_prepare succeeded for this step. */
int ta_step_ready(void);
/* What this node's tasks go without although the plan stands (Slurm bound its GPUs otherwise
 * than the plan, which every node computes alike, takes them), or NULL. */
const char *ta_step_note(void);
/* Calls `set` for each variable the task with this global id gets, in a stable order; variables
 * the user set are skipped unless the configuration says overwrite. */
int ta_task_env(uint32_t global_task, ta_env_fn set, void *arg, char *err, size_t errlen);
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
