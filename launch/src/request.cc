// A step's request from the SPEC and the step's shape (request.h).
#include "topoaware/launch/request.h"

#include <algorithm>

#include "topoaware/launch/calibration_file.h"
#include "topoaware/launch/inputs.h"

namespace topoaware::launch {
namespace {

using mapper::Launcher;

int sum(const std::vector<int>& v) {
  long long n = 0;
  for (int x : v) n += x;
  if (n > (1 << 22)) throw RequestError("more than 4M ranks in one step");
  return static_cast<int>(n);
}

// "what a world of this shape is", for messages: "32 tasks" or "4 hosts x 8 workers".
std::string world_text(Style style, const std::vector<int>& per_host) {
  const int world = sum(per_host);
  if (style != Style::kPerNode) return std::to_string(world) + " tasks";
  const bool uniform =
      std::all_of(per_host.begin(), per_host.end(), [&](int g) { return g == per_host.front(); });
  if (!uniform) return std::to_string(world) + " workers of a per-node launcher";
  return std::to_string(per_host.size()) + " hosts x " + std::to_string(per_host.front()) +
         " workers (per-node launcher)";
}

}  // namespace

const char* to_string(Style style) {
  switch (style) {
    case Style::kPerGpu:
      return "per-gpu";
    case Style::kMpi:
      return "mpi";
    case Style::kPerNode:
      return "per-node";
  }
  return "per-gpu";
}

std::vector<int> workers_per_host(const mapper::LaunchSpec& launch,
                                  const std::vector<const topology::NodeTopology*>& nodes,
                                  const std::vector<int>& held) {
  std::vector<int> out;
  for (std::size_t h = 0; h < nodes.size(); ++h) {
    const int gpus = h < held.size() ? held[h] : 0;
    out.push_back(launch.nproc > 0 ? launch.nproc
                  : gpus > 0       ? gpus
                                   : static_cast<int>(nodes[h]->gpus().size()));
  }
  return out;
}

void check_ids(mapper::Ids ids, const std::string& mpi_type) {
  if (ids != mapper::Ids::kSlurm || mpi_type.empty() || mpi_type == "none") return;
  throw RequestError("ids=slurm renumbers SLURM_PROCID, but under --mpi=" + mpi_type +
                     " MPI ranks are Slurm's task ids and would not follow it. An MPI program "
                     "gets the plan from Slurm placing its tasks (srun -m arbitrary with "
                     "`topo-aware map --of hostfile`); a job that does not use MPI runs with "
                     "--mpi=none");
}

StepRequest make_request(const Config& config, const mapper::LaunchSpec& launch,
                         const StepShape& shape) {
  StepRequest out;
  out.ids = launch.ids_given ? launch.ids : config.ids;
  check_ids(out.ids, shape.mpi_type);
  const std::string& dist = shape.distribution;
  const std::string across = dist.substr(0, dist.find_first_of(":,"));
  // The plan numbers tasks in Slurm's block order, or takes them where the plan's own hostfile put
  // them; cyclic and plane put other tasks on each slot, unless every host runs one task (srun in
  // a batch job of one task a node inherits SLURM_DISTRIBUTION=cyclic).
  const bool one_each =
      std::all_of(shape.tasks.begin(), shape.tasks.end(), [](int n) { return n <= 1; });
  if ((across == "cyclic" || across.rfind("plane", 0) == 0) && !one_each) {
    throw mapper::Error("tasks are in " + across + " distribution (SLURM_DISTRIBUTION=" + dist +
                        "); topo-aware maps Slurm's block order (-m block), or the plan's own "
                        "hostfile (-m arbitrary)");
  }
  const Launcher asked = launch.launcher != Launcher::kAuto ? launch.launcher : config.launcher;
  const Launcher launcher = mapper::resolve_launcher(asked, shape.tasks, shape.gpus_per_host);
  if (across == "arbitrary") {
    if (launcher == Launcher::kPerNode) {
      throw RequestError(
          "-m arbitrary places one task per GPU from a hostfile (MPI); a per-node launcher "
          "(launcher=per-node) runs one task per host in block order");
    }
    out.style = Style::kMpi;
  } else {
    out.style = launcher == Launcher::kPerNode ? Style::kPerNode : Style::kPerGpu;
  }
  mapper::Request& r = out.request;
  r.hosts = shape.hosts;
  if (out.style == Style::kPerNode) {
    for (std::size_t h = 0; h < shape.tasks.size(); ++h) {
      if (shape.tasks[h] != 1) {
        throw RequestError("launcher=per-node runs one task per host, but " + shape.hosts[h] +
                           " runs " + std::to_string(shape.tasks[h]) +
                           " (srun --ntasks-per-node=1)");
      }
    }
    r.tasks_per_host = shape.gpus_per_host;
    r.host_blocks = true;
  } else {
    r.tasks_per_host = shape.tasks;
    // Every node must compute the same plan, but a node sees only its own GPUs (SLURM_STEP_GPUS;
    // --gpus-per-task=2 with 3 tasks here and 1 there lists 0-5 here, 0-1 there). So the plan
    // takes every host's k-th task to hold its GPU k, from the tasks per host all nodes share; each
    // node then checks that Slurm bound its own tasks that way.
    if (shape.gpus_bound) {
      for (int count : r.tasks_per_host) {
        for (int t = 0; t < count; ++t) r.bound_gpu.push_back(t);
      }
    }
  }
  const int world = sum(r.tasks_per_host);
  try {
    r.layout = layout_for(launch, world);
  } catch (const mapper::Error& e) {
    throw RequestError(std::string(e.what()) + " (" + world_text(out.style, r.tasks_per_host) +
                       ")");
  }
  if (out.style == Style::kPerNode) {
    try {
      mapper::check_host_blocks(r.layout, r.tasks_per_host);
    } catch (const mapper::Error& e) {
      throw RequestError(e.what());
    }
  }
  // The site's correction of the model: srun and every node read the same file (its bytes are
  // part of the digest's configuration).
  if (!config.calibration.empty()) r.calibration = read_calibration(config.calibration);
  return out;
}

}  // namespace topoaware::launch
