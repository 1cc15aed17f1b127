/* topo-aware SPANK plugin: the dispatcher.
 *
 * Defines what Slurm looks up (the plugin's identity, its one option, the slurm_spank_*
 * callbacks) and routes each callback by spank_context() to the file of that side (shell.h):
 * srun.c for srun, sbatch and salloc, slurmstepd.c for the step on each node. Failures follow the
 * configured policy there; nothing here decides anything.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "shell.h"

SPANK_PLUGIN(topo-aware, 1)

#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 5, 0)
/* A slurm_spank_init failure in slurmstepd drains the node by default (ESPANK_NODE_FAILURE); from
 * 25.05 a plugin may fail the job instead. Whatever the failure policy, what fails here is the
 * plugin's own configuration or registration, never the node: the job fails, the node stays. */
int slurm_spank_init_failure_mode = ESPANK_JOB_FAILURE;
#endif

struct ta_context ta_ctx = {"--topo-aware", 0, 0, -1, 0, 0, 0, 0, 0, "", "", 0, 0};

static int option_cb(int val, const char *spec, int is_remote) {
  (void)val;
  /* slurmstepd (as root, and Slurm ignores a failure here): keep it, user_init checks it. */
  if (is_remote) return ta_keep_spec(spec);
  return ta_srun_option(spec);
}

static struct spank_option ta_option = {
    "topo-aware", "SPEC",
    "Map ranks to GPUs, NICs and CPUs by topology. SPEC: a parallel layout such as tp=8,pp=2 "
    "(missing dims are 1, dp fills the rest), or file:/ABS/PATH to a TOML job description; "
    "none means data parallel. Also TOPO_AWARE=SPEC.",
    2, 0, option_cb};

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
  if (ctx == S_CTX_LOCAL) ta_srun_init();
  /* Once per step on each node: the release this file was built for (a plugin loads only where
   * the running Slurm's major.minor matches it). */
  if (ctx == S_CTX_REMOTE) {
    slurm_debug("topo-aware: built for Slurm %d.%02d.%d",
                SLURM_VERSION_MAJOR(SLURM_VERSION_NUMBER),
                SLURM_VERSION_MINOR(SLURM_VERSION_NUMBER),
                SLURM_VERSION_MICRO(SLURM_VERSION_NUMBER));
  }
  return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av) {
  (void)ac;
  (void)av;
  switch (spank_context()) {
    case S_CTX_LOCAL:
    case S_CTX_ALLOCATOR:
      return ta_srun_init_post_opt();
    case S_CTX_REMOTE:
      return ta_stepd_init_post_opt(sp);
    default:
      return 0;
  }
}

int slurm_spank_local_user_init(spank_t sp, int ac, char **av) {
  (void)ac;
  (void)av;
  return spank_context() == S_CTX_LOCAL ? ta_srun_local_user_init(sp) : 0;
}

int slurm_spank_user_init(spank_t sp, int ac, char **av) {
  (void)ac;
  (void)av;
  return spank_context() == S_CTX_REMOTE ? ta_stepd_user_init(sp) : 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av) {
  (void)ac;
  (void)av;
  return spank_context() == S_CTX_REMOTE ? ta_stepd_task_init(sp) : 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av) {
  (void)sp;
  (void)ac;
  (void)av;
  if (spank_context() == S_CTX_REMOTE) ta_stepd_exit();
  return 0;
}

const char *ta_spec_for_message(const char *spec) {
  static char buf[160];
  size_t n = spec != NULL ? strlen(spec) : 0;
  if (n < 120) return spec != NULL ? spec : "";
  snprintf(buf, sizeof buf, "%.96s... (%zu characters)", spec, n);
  return buf;
}

char *ta_expand_hosts(const char *list) {
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
