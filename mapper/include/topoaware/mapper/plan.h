// The launch plan: which logical rank each Slurm task becomes, with its GPU, NIC(s), CPU set
// and the environment a launch exports. This is the one call the CLI (`topo-aware map`) and the
// SPANK plugin share, so the plan a user inspects offline is byte for byte the plan a launch
// applies.
//
// The mapper is a pure function of (fabric model, node models, request): no I/O, no environment.
// Errors are reported by throwing topoaware::mapper::Error (see layout.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "topoaware/mapper/cost.h"
#include "topoaware/mapper/launch.h"
#include "topoaware/mapper/layout.h"
#include "topoaware/mapper/request.h"
#include "topoaware/topology/fabric.h"
#include "topoaware/topology/node.h"

namespace topoaware::mapper {

struct TaskPlan {
  int task = 0;                     // SLURM_PROCID
  int rank = 0;                     // logical rank
  std::uint32_t host = 0;           // index into Request::hosts
  int local_rank = 0;
  int node_rank = 0;
  int gpu = -1;                     // NVML index on that host
  std::string gpu_busid;
  std::vector<std::string> nics;    // HCA names, nearest first
  std::string netdev;               // socket interface for NCCL_SOCKET_IFNAME, when known
  std::vector<std::uint32_t> cpus;  // NUMA-local CPU set of its GPU
  std::vector<std::pair<std::string, int>> coords;  // ("tp",3), ("pp",1) ...
};

struct RankPlan {
  std::vector<TaskPlan> tasks;      // indexed by task
  std::vector<std::string> hosts;   // copy of the request's hosts
  Layout layout;
  Algorithm algorithm = Algorithm::kTopo;
  CostReport cost;                  // of this plan
  CostReport block_cost;            // of Slurm's block order on the same inputs
  double lower_bound = 0;           // seconds; never above the optimum
  bool rail_optimized = false;
  bool host_blocks = false;  // the request's: a per-node launcher's plan
  // topo only: the refined plan was not cheaper than Slurm's block order, so block was kept.
  bool kept_block = false;
  // topo only: what the search found, before that guard: its exposed seconds and how many
  // blocks short of the fast-domain rule it was (0: it keeps the rule).
  double searched_seconds = 0;
  long long searched_split = 0;
  long long block_split = 0;  // ... and how many Slurm's block order is short of it
  // Per fast dim (tp, cp, ep of size > 1): its groups that span NVLink domains, and why.
  std::vector<SplitReport> splits;
  long long refine_moves = 0;       // moves refinement evaluated
  std::vector<int> rank_of_task;    // = tasks[t].rank, for scripts and the cost model
  // What the modeled figures rest on where the inputs gave no capacity (Machine::assumptions),
  // one sentence each; empty when every capacity came from the inputs.
  std::vector<std::string> assumptions;
};

// The plan's split groups in one line for people (map, inspect, srun -v): "tp: 2 of 9 groups
// span hosts (the step's hosts hold 7 of its 9 blocks of tp whole ...)", or empty when no fast
// dim's group spans an NVLink domain.
std::string splits_line(const std::vector<SplitReport>& splits);

// What the modeled figures assume about the job, in one line for people (map, inspect, srun -v):
// "model: tp, dp as reduce-scatter + all-gather (sequence parallelism, distributed optimizer);
// dp overlapped with compute at 400 TFLOP/s a GPU; NCCL 2.30's algorithm choice".
std::string model_line(const Layout& layout);

// The plan's assumptions in one line for people (map, inspect, srun -v): "figures assume: A; B",
// or empty when there are none.
std::string assumptions_line(const std::vector<std::string>& assumptions);

// nodes[i] describes hosts[i] (the same pointer for hosts of one node type).
RankPlan plan(const topology::Fabric& fabric,
              const std::vector<const topology::NodeTopology*>& nodes, const Request& request);

struct EnvOptions {
  std::string master_port;  // empty: derived from job id
  std::string master_addr;  // rank 0's address; empty: its host's name
  std::uint32_t job_id = 0;
  std::string topo_file;         // NCCL_TOPO_FILE path for the task's node, empty: not set
  bool one_gpu_visible = false;  // CUDA_VISIBLE_DEVICES=<its GPU> and LOCAL_RANK as usual
  // kSlurm: SLURM_PROCID, SLURM_LOCALID and SLURM_NODEID carry the plan's rank, local rank and node
  // rank too (Lightning, NeMo, JAX read those), Slurm's own kept as TOPO_AWARE_SLURM_*.
  Ids ids = Ids::kPlan;
};

// Whether NIC is a device name NCCL_IB_HCA can match: lower-case letters, digits and '_', from a
// letter to a digit (mlx5_0, mlx5_bond_0, hfi1_0, bnxt_re1, rdmap16s27). A fabric dump's label
// ("HCA-1"), a GUID or a plain node's "port-0" is not, and is never exported.
bool is_device_name(std::string_view nic);

using Environment = std::vector<std::pair<std::string, std::string>>;

// The environment a launch exports for one task, in a stable order. NCCL_IB_HCA lists the task's
// NICs that are device names (none: not exported, NCCL chooses).
Environment task_environment(const RankPlan& plan, int task, const EnvOptions& options);

// The environment of a per-node launcher's task on `host` (index into RankPlan::hosts) of a
// host_blocks plan, in a stable order: NODE_RANK, NNODES, NPROC_PER_NODE, WORLD_SIZE,
// MASTER_ADDR/PORT, torchrun's PET_* defaults for the same, CUDA_VISIBLE_DEVICES ordered so that
// worker LOCAL_RANK=i runs on the plan's GPU i, and NCCL hints for all the host's workers (one
// environment for all of them: NCCL_IB_HCA lists every NIC the host's workers use, and each
// worker's NIC comes from NCCL_TOPO_FILE by NCCL's own nearest-NIC rule). No RANK/LOCAL_RANK: the
// launcher sets those per worker.
Environment launcher_environment(const RankPlan& plan, std::uint32_t host,
                                 const EnvOptions& options);

}  // namespace topoaware::mapper
