// What a step asks the mapper for: its hosts and tasks in Slurm's order, the layout, the
// algorithm and the search's budget. A header of its own because both halves of the mapper take
// it: plan() (plan.h) turns it into a launch plan, and make_instance() (cost.h) into the machine
// and traffic the cost model scores, and the cost model must not depend on the launch plan.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "topoaware/mapper/calibration.h"
#include "topoaware/mapper/layout.h"

namespace topoaware::mapper {

enum class Algorithm { kTopo, kBlock, kCyclic, kRandom };

struct Request {
  std::vector<std::string> hosts;   // the step's hosts in Slurm's node order
  std::vector<int> tasks_per_host;  // tasks (= GPUs used) per host, Slurm's order
  Layout layout;
  Algorithm algorithm = Algorithm::kTopo;
  std::uint64_t seed = 1;           // for kRandom
  // When Slurm already bound GPUs to tasks (cgroups): per task, the physical GPU index (NVML)
  // it holds. Empty: free choice. Non-empty: the plan permutes ranks only.
  std::vector<int> bound_gpu;
  double refine_budget_ms = 200;    // refinement budget (deterministic: counted in moves)
  // Explicit refinement budget in evaluated moves (host or rank exchanges); -1: from
  // refine_budget_ms, 100 moves by default, up to 2,000 where hosts are cut into pieces, down
  // to 10 on steps of 102,400 ranks and more (docs/mapper.md). Either way the work of all moves
  // is capped, never by wall time.
  long long refine_moves = -1;
  // A per-node launcher (torchrun, accelerate, deepspeed) starts tasks_per_host[h] workers on each
  // host and numbers them node_rank*G + local_rank: each host's ranks must be one contiguous block.
  // The plan then chooses only the hosts' order (NODE_RANK) and which GPU each local rank takes
  // (CUDA_VISIBLE_DEVICES order). Not with bound_gpu.
  bool host_blocks = false;
  // Model the dims' communication as overlapping (Traffic::overlap); default: one after another.
  bool overlap_dims = false;
  // A site's correction of the cost model from its own measurements (Traffic::calibration).
  Calibration calibration;
};

}  // namespace topoaware::mapper
