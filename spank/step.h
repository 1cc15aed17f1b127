// A step's plan, by launch style. A plan helps only a job whose launcher reads it, and each
// style takes it its own way; this is the one place that knows them:
//   per-GPU  one Slurm task per GPU in Slurm's block order: each task becomes the plan's rank
//            for its slot (RANK, LOCAL_RANK, ...; with ids=slurm SLURM_PROCID & co too);
//   MPI      one task per GPU placed by Slurm from the plan's own hostfile (srun -m arbitrary):
//            ranks are Slurm's task ids (PMIx), so task g is rank g, and the plan gives its GPU,
//            NIC and CPUs;
//   per-node one task per host spawning its workers (torchrun, accelerate, deepspeed): the plan
//            orders hosts (NODE_RANK) and each host's GPUs (CUDA_VISIBLE_DEVICES).
// srun and every slurmstepd build the request alike (make_request), so every node computes the
// same plan, and refuse alike what no style can honour.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config.h"
#include "inputs.h"
#include "topoaware/mapper/plan.h"

namespace topoaware::spank {

enum class Style { kPerGpu, kMpi, kPerNode };
const char* to_string(Style style);

// What Slurm says of the step, in the order it says it.
struct StepShape {
  std::vector<std::string> hosts;  // the step's hosts, Slurm's order
  std::vector<int> tasks;          // Slurm tasks per host
  std::string distribution;        // SLURM_DISTRIBUTION ("block", "arbitrary", ...)
  std::string mpi_type;            // SLURM_MPI_TYPE ("pmix", "none", ...)
  // GPUs each host's task would spawn workers on, were it a per-node launcher: nproc=, else the
  // GPUs Slurm bound, else the host's node model.
  std::vector<int> gpus_per_host;
};

// The request of a step, checked. Throws RequestError for what no launch could honour (a layout
// that does not fit, ids=slurm under MPI, per-node workers that would straddle hosts) and
// mapper::Error for a distribution topo-aware cannot map (cyclic, plane).
struct StepRequest {
  Style style = Style::kPerGpu;
  mapper::Ids ids = mapper::Ids::kPlan;
  mapper::Request request;
};
StepRequest make_request(const Config& config, const mapper::LaunchSpec& launch,
                         const StepShape& shape);

// GPUs per host for StepShape::gpus_per_host: nproc= when given, else `bound` (the GPUs Slurm bound
// per host, 0: none), else each host's node model.
std::vector<int> workers_per_host(const mapper::LaunchSpec& launch, const NodeModels& nodes,
                                  int bound);

// This node's part of a step: the plan and how each local task takes it.
struct NodeStep {
  std::uint32_t job_id = 0;
  std::uint32_t step_id = 0;
  std::size_t node = 0;                     // this node's index in StepShape::hosts
  std::vector<std::uint32_t> local_global;  // this node's tasks' global ids
  std::string step_gpus;                    // SLURM_STEP_GPUS here, or empty
};

struct StepPlan {
  Style style = Style::kPerGpu;
  std::size_t node = 0;  // this node's index in StepShape::hosts
  mapper::RankPlan plan;
  mapper::EnvOptions env;
  std::map<std::uint32_t, std::size_t> plan_task;  // per-GPU styles: Slurm task -> plan task
  // Slurm bound GPUs here: its CUDA_VISIBLE_DEVICES stays (reordered for a per-node launcher).
  bool slurm_bound = false;
  bool gpu_hints = true;     // NIC and CPU hints fit the GPUs Slurm bound here
  // Per-node launcher on Slurm-bound GPUs: for worker i, the position in Slurm's
  // CUDA_VISIBLE_DEVICES of the plan's GPU i.
  std::vector<std::size_t> bound_order;
  std::string note;        // what this node's tasks go without, or empty
  std::string hosts_file;  // per-node launcher: TOPO_AWARE_HOSTFILE, once written
};

// A per-node launcher's hosts in NODE_RANK order, one line each as DeepSpeed's hostfile has them
// ("node3 slots=8"): deepspeed --no_ssh takes --node_rank as an index into it.
std::string launcher_hostfile(const StepPlan& step);

// Plans the step and checks this node's tasks against it: block order, or under
// -m arbitrary the plan's own hostfile (`hostfile_text`, SLURM_HOSTFILE's text, checked whole so
// that every node decides alike). Throws like make_request.
StepPlan plan_step(const Config& config, const mapper::LaunchSpec& launch, const StepShape& shape,
                   const NodeStep& here, const topology::Fabric& fabric, const NodeModels& nodes,
                   const std::string& hostfile_text);

// The variables one of this node's tasks gets (before the user-set filter). `slurm_cvd` is the
// task's CUDA_VISIBLE_DEVICES as Slurm set it.
mapper::Environment task_env(const StepPlan& step, std::uint32_t global_task,
                             const std::string& slurm_cvd);
// The CPUs a task is bound to: its GPU's NUMA-local CPUs; a per-node launcher's, those of all its
// workers' GPUs.
std::vector<std::uint32_t> task_cpus(const StepPlan& step, std::uint32_t global_task);

}  // namespace topoaware::spank
