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

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "facade.h"

#define TA_ERRLEN 1024

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
int ta_srun_option(const char *optarg);
void ta_srun_init(void);
int ta_srun_init_post_opt(void);
int ta_srun_local_user_init(spank_t sp);

/* slurmstepd.c: the step on each node. */
int ta_stepd_init_post_opt(spank_t sp);
int ta_stepd_user_init(spank_t sp);
int ta_stepd_task_init(spank_t sp);
void ta_stepd_exit(void);

#endif /* TOPOAWARE_SPANK_SHELL_H */
