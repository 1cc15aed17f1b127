/* The C shell's one context and its per-context files.
 *
 * topo_aware_spank.c is the dispatcher: it defines the SPANK symbols and routes each callback by
 * spank_context() to srun.c (srun, sbatch, salloc: the SPEC and srun's check before launch) or to
 * slurmstepd.c (the step on each node: plan once in user_init, each task's environment in
 * task_init). All logic lives behind the C facade (facade.h); spank.h is C-only, so it is
 * included by these files and nowhere else.
 */
#ifndef TOPOAWARE_SPANK_SHELL_H
#define TOPOAWARE_SPANK_SHELL_H

#include <stdint.h>
#include <string.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "facade.h"

#define TA_ERRLEN 1024

/* Calls whose form changed between the releases the plugin builds for (22.05 to 26.05; each
 * release's slurm.h, compiled against in every CI run, scripts/slurm-releases.sh):
 *  - 23.11: hostlist_t became the struct itself, its functions taking a hostlist_t *, and
 *    slurm_kill_job_step gained a flags argument;
 *  - 25.11: slurm_kill_job_step takes a slurm_step_id_t * (and a sluid field entered the id);
 *  - 26.05: slurm_load_job takes a slurm_step_id_t (the job-id form is left only under
 *    SLURM_BACKWARD_COMPAT). */
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
typedef hostlist_t *ta_hostlist;
#else
typedef hostlist_t ta_hostlist;
#endif
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
static inline int ta_kill_step(uint32_t job_id, uint32_t step_id, uint16_t sig) {
  slurm_step_id_t id;
  memset(&id, 0, sizeof id); /* a sluid of 0: none, as SLURM_STEP_ID_INITIALIZER has it */
  id.job_id = job_id;
  id.step_id = step_id;
  id.step_het_comp = NO_VAL;
  return slurm_kill_job_step(&id, sig, 0);
}
#elif SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
#define ta_kill_step(job_id, step_id, sig) slurm_kill_job_step((job_id), (step_id), (sig), 0)
#else
#define ta_kill_step(job_id, step_id, sig) slurm_kill_job_step((job_id), (step_id), (sig))
#endif
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(26, 5, 0)
static inline int ta_load_job(job_info_msg_t **resp, uint32_t job_id, uint16_t show_flags) {
  slurm_step_id_t id;
  memset(&id, 0, sizeof id); /* the whole job: steps NO_VAL, as SLURM_STEP_ID_INITIALIZER has */
  id.job_id = job_id;
  id.step_id = NO_VAL;
  id.step_het_comp = NO_VAL;
  return slurm_load_job(resp, id, show_flags);
}
#else
#define ta_load_job(resp, job_id, show_flags) slurm_load_job((resp), (job_id), (show_flags))
#endif

/* What one process remembers between SPANK callbacks; -1 means "not decided yet". A process is
 * either an srun/sbatch/salloc or a slurmstepd, so each side uses its own part. */
struct ta_context {
  /* srun, sbatch, salloc */
  const char *spec_origin; /* how the user gave the SPEC, for messages: "--topo-aware" or
                            * "TOPO_AWARE" */
  int option_invalid;      /* 1: the SPEC given is not valid; init_post_opt fails */
  int option_env_set;      /* 1 while srun's environment holds the option only because the
                            * TOPO_AWARE fallback put it there */
  /* slurmstepd */
  int skip;   /* 1: a step topo-aware leaves alone (batch, extern, option absent,
               * srun's verdict), 0: topo-aware's */
  int unmodified; /* 1: srun's verdict is that the step runs unmodified (its tasks do not get
                   * that verdict either) */
  int failed; /* user_init's failure kind (TA_E*), 0: none; task_init acts on it */
  uint32_t job_id, step_id, node_id;
  char host[256]; /* this node's name, for messages */
  char reason[TA_ERRLEN];
  /* Slurm RPCs user_init needs, made from task_init instead: slurmstepd runs user_init with the
   * job's privileges and Slurm's auth lock held for writing (auth_setuid_lock, 24.11 as Debian 13
   * ships it), so an RPC there dies in auth_g_create ("pthread_rwlock_rdlock(): Resource deadlock
   * avoided", a fatal() that kills the step). task_init runs with the lock released; each task's
   * process makes them, the node's first task speaks. */
  int master_pending; /* resolve MASTER_ADDR through slurmctld */
  int kill_pending;   /* cancel the step */
};
extern struct ta_context ta_ctx;

/* Shared by both sides. */
/* A SPEC for a message: a long one (a 30 KB layout pasted by mistake) is cut, saying so. */
const char *ta_spec_for_message(const char *spec);
/* Expands a Slurm hostlist into newline-separated names (malloc'd), or NULL. */
char *ta_expand_hosts(const char *list);

/* srun.c: srun, sbatch, salloc. */
int ta_srun_option(const char *spec);
void ta_srun_init(void);
int ta_srun_init_post_opt(void);
int ta_srun_local_user_init(spank_t sp);

/* slurmstepd.c: the step on each node. */
int ta_stepd_init_post_opt(spank_t sp);
int ta_stepd_user_init(spank_t sp);
int ta_stepd_task_init(spank_t sp);
void ta_stepd_exit(void);

#endif /* TOPOAWARE_SPANK_SHELL_H */
