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

#include <slurm/spank.h>

#include "facade.h"

#define TA_ERRLEN 1024

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
