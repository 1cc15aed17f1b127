// How a job starts, as far as the plan is concerned: the launch style and which variables carry
// the plan's ranks. A plan only helps a job whose framework reads it, and frameworks start in
// different ways:
//   per-GPU tasks  one Slurm task per GPU reading RANK/LOCAL_RANK (torch env://, Megatron) or
//                  SLURM_PROCID/SLURM_LOCALID (Lightning, NeMo, JAX: ids=slurm);
//   per-node       one Slurm task per host spawning its G workers (torchrun, accelerate,
//                  deepspeed): the launcher numbers workers node_rank*G + local_rank, so the
//                  plan may only choose the hosts' order and the GPUs' order inside each;
//   MPI            ranks are Slurm's task ids (PMIx): the plan reaches them when Slurm places
//                  the tasks from the plan's own hostfile (srun -m arbitrary).
//
// The SPEC of `--topo-aware=SPEC` carries these choices beside the layout:
//   launcher=auto|per-gpu|per-node   (auto: per-node when every host runs one task and has
//                                     more than one GPU, per-gpu otherwise)
//   nproc=G                          (per-node: workers per host; default its GPUs;
//                                     implies launcher=per-node)
//   ids=plan|slurm                   (slurm: also renumber SLURM_PROCID/LOCALID/NODEID)
//   shadow                           (plan and report only; the step runs unmodified: the
//                                     plugin's shadow mode, docs/spank.md)
// anywhere before the layout's own items or a trailing file:PATH (whose path may hold commas).
// Pure: no I/O, no environment. Errors throw topoaware::mapper::Error.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace topoaware::mapper {

enum class Launcher { kAuto, kPerGpu, kPerNode };
enum class Ids { kPlan, kSlurm };

std::string_view to_string(Launcher launcher);   // "auto", "per-gpu", "per-node"
std::string_view to_string(Ids ids);             // "plan", "slurm"
Launcher parse_launcher(std::string_view text);  // throws Error naming the value
Ids parse_ids(std::string_view text);

struct LaunchSpec {
  Launcher launcher = Launcher::kAuto;
  int nproc = 0;  // per-node workers per host; 0: the host's GPUs
  Ids ids = Ids::kPlan;
  bool ids_given = false;  // ids= was in the SPEC (else the site's default applies)
  bool shadow = false;     // the bare word `shadow`: plan and report, change nothing
  std::string layout;      // the rest: a layout spec, file:PATH, or empty (data parallel)
};

// Splits a SPEC into its launch keys and the layout text. Checks the launch keys only; the layout
// is the caller's to parse (parse_layout, or parse_job_toml for file:PATH).
LaunchSpec parse_launch_spec(std::string_view spec);

// Whether a SPEC carries the word `shadow` among its launch items, also when the rest of it is
// malformed: a shadow step never fails, so the word is honoured before the SPEC is checked.
bool asks_shadow(std::string_view spec);
// The SPEC without its `shadow` items: what a shadow step plans (and digests) as, so its plan is
// the one the same step would get without the word.
std::string without_shadow(std::string_view spec);

// The launch style a step gets: `asked` unless auto, then per-node when every host runs exactly one
// task and `gpus_per_host` (the GPUs each such task would spawn workers on) exceeds one.
Launcher resolve_launcher(Launcher asked, const std::vector<int>& tasks_per_host,
                          const std::vector<int>& gpus_per_host);

struct Layout;

// A per-node launcher numbers a host's G workers node_rank*G + i (`per_host`: G of each host). A
// block of the layout's innermost dims (tp, then tp x cp, ...) of P ranks stays whole on hosts
// only when P divides G or G divides P; otherwise some of its groups straddle two hosts in every
// plan. Throws Error naming the dims and the workers per host that would fit (nproc=).
void check_host_blocks(const Layout& layout, const std::vector<int>& per_host);

}  // namespace topoaware::mapper
