// A step's request, from the SPEC and the step's shape: the one place that turns what the user
// asked (`--topo-aware=SPEC`, or `topo-aware map --layout SPEC`) into the mapper::Request a plan
// is made for. srun, every slurmstepd and `topo-aware map` call make_request(), so the plan a user
// inspects offline is the one a launch makes, and every node refuses alike what no launch could
// honour.
//
// A plan helps only a job whose launcher reads it, and the style decides what the request is:
//   per-GPU  one Slurm task per GPU in Slurm's block order: each task becomes the plan's rank for
//            its slot;
//   MPI      one task per GPU placed by Slurm from the plan's own hostfile (srun -m arbitrary);
//   per-node one task per host spawning its workers (torchrun, accelerate, deepspeed): the
//            request's ranks are the workers, each host's a contiguous block.
// Errors are thrown: RequestError for a request no launch could honour, mapper::Error for a
// distribution topo-aware cannot map.
#pragma once

#include <string>
#include <vector>

#include "topoaware/launch/config.h"
#include "topoaware/mapper/launch.h"
#include "topoaware/mapper/plan.h"
#include "topoaware/topology/node.h"

namespace topoaware::launch {

// The user's request contradicts itself or the step (a SPEC that does not fit the world, ids=slurm
// beside an MPI plugin, ...): refused under either policy, since running the job unmodified would
// not be what was asked either.
struct RequestError : mapper::Error {
  using mapper::Error::Error;
};

enum class Style { kPerGpu, kMpi, kPerNode };
const char* to_string(Style style);

// What Slurm says of the step (or `map`'s options say of it), in the order it says it.
struct StepShape {
  std::vector<std::string> hosts;  // the step's hosts, Slurm's order
  std::vector<int> tasks;          // Slurm tasks per host
  std::string distribution;        // SLURM_DISTRIBUTION ("block", "arbitrary", ...), empty: block
  std::string mpi_type;            // SLURM_MPI_TYPE ("pmix", "none", ...), empty: none
  // GPUs each host's task would spawn workers on, were it a per-node launcher (workers_per_host).
  std::vector<int> gpus_per_host;
  // Slurm binds the job's GPUs to the tasks (the job holds GPUs on the step's hosts): one task per
  // GPU then takes every host's k-th task to hold its GPU k, and the plan permutes ranks only.
  bool gpus_bound = false;
};

// GPUs per host for StepShape::gpus_per_host: nproc= when given, else the GPUs the job holds on
// that host (`held`, from slurmctld, the same on every node; empty or 0: none), else the host's
// model.
std::vector<int> workers_per_host(const mapper::LaunchSpec& launch,
                                  const std::vector<const topology::NodeTopology*>& nodes,
                                  const std::vector<int>& held);

// ids=slurm renumbers SLURM_PROCID, which MPI does not follow: refused (RequestError) when the step
// runs an MPI plugin (SLURM_MPI_TYPE other than none).
void check_ids(mapper::Ids ids, const std::string& mpi_type);

struct StepRequest {
  Style style = Style::kPerGpu;
  mapper::Ids ids = mapper::Ids::kPlan;
  mapper::Request request;  // hosts, tasks (workers for per-node), layout, host_blocks
};
// The request of a step, checked. The configuration gives the defaults a SPEC does not set
// (launcher=, ids=).
StepRequest make_request(const Config& config, const mapper::LaunchSpec& launch,
                         const StepShape& shape);

}  // namespace topoaware::launch
