// A step's plan, by launch style. A plan helps only a job whose launcher reads it, and each
// style takes it its own way; this is the one place that knows them:
//   per-GPU  one Slurm task per GPU in Slurm's block order: each task becomes the plan's rank
//            for its slot (RANK, LOCAL_RANK, ...; with ids=slurm SLURM_PROCID & co too);
//   MPI      one task per GPU placed by Slurm from the plan's own hostfile (srun -m arbitrary):
//            ranks are Slurm's task ids (PMIx), so task g is rank g, and the plan gives its GPU,
//            NIC and CPUs;
//   per-node one task per host spawning its workers (torchrun, accelerate, deepspeed): the plan
//            orders hosts (NODE_RANK) and each host's GPUs (CUDA_VISIBLE_DEVICES).
// srun and every slurmstepd build the request alike (launch::make_request, which `topo-aware map`
// shares), so every node computes the same plan, and refuse alike what no style can honour.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "topoaware/launch/config.h"
#include "topoaware/launch/inputs.h"
#include "topoaware/launch/request.h"
#include "topoaware/mapper/plan.h"

namespace topoaware::spank {

using launch::Config;
using launch::NodeModels;
using launch::StepShape;
using launch::Style;

// This node read other inputs than srun, or cannot apply the plan every node agreed on (its tasks
// are not where the plan puts them, Slurm bound it other GPUs than the plan's workers): the other
// nodes would run a plan this node's tasks are missing from, so the step fails under either
// policy, from this node, naming it.
struct DisagreeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// This node's part of a step: the plan and how each local task takes it.
struct NodeStep {
  std::uint32_t job_id = 0;
  std::uint32_t step_id = 0;
  std::size_t node = 0;                     // this node's index in StepShape::hosts
  std::vector<std::uint32_t> local_global;  // this node's tasks' global ids
  std::string step_gpus;                    // SLURM_STEP_GPUS here, or empty
  std::string master_port;  // srun's (launch/port.h), unless the configuration sets one
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
  // On Slurm-bound GPUs, for local rank (a launcher's worker) i, the position in Slurm's
  // CUDA_VISIBLE_DEVICES of the plan's GPU i; empty where Slurm's list cannot be put in that order.
  // One task per GPU takes it only where its CUDA_VISIBLE_DEVICES lists all of the step's GPUs
  // here (--gpus-per-node), not where Slurm bound each task its own (--gpus-per-task).
  std::vector<std::size_t> bound_order;
  std::size_t step_gpu_count = 0;  // GPUs in SLURM_STEP_GPUS here
  std::string note;        // what this node's tasks go without, or empty
  std::string hosts_file;  // per-node launcher: TOPO_AWARE_HOSTFILE, once written
  std::string gloo_ifname;  // GLOO_SOCKET_IFNAME, where this node's own name does not resolve
};

// Every variable a task may get from the plan (task_env, and GLOO_SOCKET_IFNAME the facade adds),
// in one list: the shell checks which of them the user set before topo-aware touches the task.
// SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID and TOPO_AWARE_SLURM_* (ids=slurm) are not in it:
// they are always set when asked for.
const std::vector<std::string>& exported_names();

// A per-node launcher's hosts in NODE_RANK order, one line each as DeepSpeed's hostfile has them
// ("node3 slots=8"): deepspeed --no_ssh takes --node_rank as an index into it.
std::string launcher_hostfile(const StepPlan& step);

// Plans the step and checks this node's tasks against it: block order, or under
// -m arbitrary the plan's own hostfile (`hostfile_text`, SLURM_HOSTFILE's text, checked whole so
// that every node decides alike). Throws like make_request for what fails alike on every node,
// and DisagreeError where this node's own tasks or GPUs do not fit the plan.
StepPlan plan_step(const Config& config, const mapper::LaunchSpec& launch, const StepShape& shape,
                   const NodeStep& here, const topology::Fabric& fabric, const NodeModels& nodes,
                   const std::string& hostfile_text);

// The variables one of this node's tasks gets (before the user-set filter), all of them named in
// exported_names() or SLURM_*/TOPO_AWARE_SLURM_* (ids=slurm). `slurm_cvd` is the task's
// CUDA_VISIBLE_DEVICES as Slurm set it.
mapper::Environment task_env(const StepPlan& step, std::uint32_t global_task,
                             const std::string& slurm_cvd);
// The CPUs a task is bound to: its GPU's NUMA-local CPUs; a per-node launcher's, those of all its
// workers' GPUs.
std::vector<std::uint32_t> task_cpus(const StepPlan& step, std::uint32_t global_task);
// Binds the calling process to those of `cpus` it may use here (a node model from a capture of a
// bigger machine names CPUs that do not exist here). False when none is: left unbound. Throws
// std::runtime_error naming the system call that failed.
bool bind_to_cpus(const std::vector<std::uint32_t>& cpus);

}  // namespace topoaware::spank
