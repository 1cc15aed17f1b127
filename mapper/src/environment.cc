// Environment export (plan.h): the variables a launch sets for one task of a plan, or for a
// per-node launcher's workers on one host, in a stable order; and the plan's assumptions in one
// line for people.
#include <algorithm>
#include <cstdio>
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "topoaware/mapper/launch.h"
#include "topoaware/mapper/layout.h"
#include "topoaware/mapper/plan.h"

namespace topoaware::mapper {

std::string model_line(const Layout& layout) {
  const Framework& fw = layout.framework;
  std::string out = "model: tp ";
  out += fw.sequence_parallel ? "as reduce-scatter + all-gather (sequence parallelism)"
                              : "as all-reduce (no sequence parallelism)";
  out += ", dp ";
  out += fw.distributed_optimizer ? "as reduce-scatter + all-gather (distributed optimizer)"
                                  : "as all-reduce";
  if (fw.overlap_grad_reduce || (fw.distributed_optimizer && fw.overlap_param_gather)) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", layout.model.gpu_tflops);
    out += std::string("; dp overlapped with one micro-batch's compute at ") + buf +
           " TFLOP/s a GPU";
  } else {
    out += "; dp not overlapped";
  }
  out += "; NCCL " + nccl::to_string(layout.nccl) + "'s algorithm choice";
  if (layout.collnet) out += " with CollNet";
  if (layout.split == SplitPolicy::kAllow) out += "; split=allow";
  return out;
}

std::string splits_line(const std::vector<SplitReport>& splits) {
  std::string out;
  for (const auto& s : splits) {
    if (s.split == 0) continue;
    out += (out.empty() ? "" : "; ") + s.dim + ": " + std::to_string(s.split) + " of " +
           std::to_string(s.groups) + " groups split over " + s.place + "s (" + s.why + ")";
  }
  return out;
}

std::string assumptions_line(const std::vector<std::string>& assumptions) {
  if (assumptions.empty()) return {};
  std::string s = "figures assume: ";
  for (std::size_t i = 0; i < assumptions.size(); ++i) s += (i ? "; " : "") + assumptions[i];
  return s;
}

bool is_device_name(std::string_view s) {
  if (s.empty() || !std::islower(static_cast<unsigned char>(s.front())) ||
      !std::isdigit(static_cast<unsigned char>(s.back()))) {
    return false;
  }
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) ||
           std::isdigit(static_cast<unsigned char>(c)) || c == '_';
  });
}

namespace {

std::string join_text(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& x : items) s += (s.empty() ? "" : ",") + x;
  return s;
}

// The host's tasks (workers) ordered by local rank.
std::vector<const TaskPlan*> tasks_on(const RankPlan& plan, std::uint32_t host) {
  std::vector<const TaskPlan*> out;
  for (const auto& t : plan.tasks) {
    if (t.host == host) out.push_back(&t);
  }
  std::sort(out.begin(), out.end(),
            [](const TaskPlan* x, const TaskPlan* y) { return x->local_rank < y->local_rank; });
  return out;
}

// What every task of a plan shares: rank 0's address and the port.
std::pair<std::string, std::string> master_of(const RankPlan& plan, const EnvOptions& options) {
  std::string addr = options.master_addr;
  for (const auto& t : plan.tasks) {
    if (t.rank == 0 && addr.empty()) addr = plan.hosts.at(t.host);
  }
  return {addr, options.master_port.empty() ? std::to_string(20000 + options.job_id % 20000)
                                            : options.master_port};
}

// NCCL_IB_HCA / NCCL_SOCKET_IFNAME for these tasks' NICs (device names only), in first-use order
// without repeats; NCCL_CROSS_NIC on rail-optimized fabrics; NCCL_TOPO_FILE.
void add_nccl(const RankPlan& plan, const std::vector<const TaskPlan*>& tasks,
              const EnvOptions& options, Environment& env) {
  if (plan.rail_optimized) env.emplace_back("NCCL_CROSS_NIC", "0");
  std::vector<std::string> hcas, netdevs;
  auto add = [](std::vector<std::string>& v, const std::string& x) {
    if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
  };
  for (const TaskPlan* t : tasks) {
    for (const auto& n : t->nics) {
      if (is_device_name(n)) add(hcas, n);
    }
    if (!t->netdev.empty()) add(netdevs, t->netdev);
  }
  if (!hcas.empty()) env.emplace_back("NCCL_IB_HCA", "=" + join_text(hcas));
  if (!netdevs.empty()) env.emplace_back("NCCL_SOCKET_IFNAME", "=" + join_text(netdevs));
  if (!options.topo_file.empty()) env.emplace_back("NCCL_TOPO_FILE", options.topo_file);
}

}  // namespace

Environment task_environment(const RankPlan& plan, int task, const EnvOptions& options) {
  if (plan.host_blocks) {
    throw Error(
        "a per-node launcher's plan: its tasks' environment is "
        "launcher_environment()");
  }
  if (task < 0 || static_cast<std::size_t>(task) >= plan.tasks.size()) {
    throw Error("task " + std::to_string(task) + " is not in the plan (" +
                std::to_string(plan.tasks.size()) + " tasks)");
  }
  const TaskPlan& me = plan.tasks[static_cast<std::size_t>(task)];
  // The host's GPUs in LOCAL_RANK order, so device index LOCAL_RANK is this task's GPU.
  const std::vector<const TaskPlan*> local = tasks_on(plan, me.host);
  Environment env;
  if (options.one_gpu_visible) {
    env.emplace_back("CUDA_VISIBLE_DEVICES", std::to_string(me.gpu));
  } else {
    std::vector<std::string> gpus;
    for (const TaskPlan* t : local) gpus.push_back(std::to_string(t->gpu));
    env.emplace_back("CUDA_VISIBLE_DEVICES", join_text(gpus));
  }
  env.emplace_back("LOCAL_RANK", std::to_string(me.local_rank));
  env.emplace_back("LOCAL_WORLD_SIZE", std::to_string(local.size()));
  const auto [addr, port] = master_of(plan, options);
  env.emplace_back("MASTER_ADDR", addr);
  env.emplace_back("MASTER_PORT", port);
  add_nccl(plan, {&me}, options, env);
  env.emplace_back("NODE_RANK", std::to_string(me.node_rank));
  env.emplace_back("RANK", std::to_string(me.rank));
  if (options.ids == Ids::kSlurm) {
    // Slurm's own numbering: the task's index in block order, its place among its host's tasks, and
    // its host's place in the step's node list.
    int slurm_local = 0;
    for (std::size_t t = 0; t < static_cast<std::size_t>(task); ++t) {
      if (plan.tasks[t].host == me.host) ++slurm_local;
    }
    // JAX started from SLURM_* takes the first host of SLURM_STEP_NODELIST for its coordinator,
    // which process 0 serves: it must be told where the plan's rank 0 is.
    env.emplace_back("JAX_COORDINATOR_ADDRESS", addr + ":" + port);
    env.emplace_back("SLURM_LOCALID", std::to_string(me.local_rank));
    env.emplace_back("SLURM_NODEID", std::to_string(me.node_rank));
    env.emplace_back("SLURM_PROCID", std::to_string(me.rank));
    env.emplace_back("TOPO_AWARE_SLURM_LOCALID", std::to_string(slurm_local));
    env.emplace_back("TOPO_AWARE_SLURM_NODEID", std::to_string(me.host));
    env.emplace_back("TOPO_AWARE_SLURM_PROCID", std::to_string(task));
  }
  std::vector<std::string> coords;
  for (const auto& [name, c] : me.coords) coords.push_back(name + ":" + std::to_string(c));
  env.emplace_back("TOPO_AWARE_COORDS", join_text(coords));
  env.emplace_back("TOPO_AWARE_RANK", std::to_string(me.rank));
  env.emplace_back("WORLD_SIZE", std::to_string(plan.tasks.size()));
  std::sort(env.begin(), env.end());
  return env;
}

Environment launcher_environment(const RankPlan& plan, std::uint32_t host,
                                 const EnvOptions& options) {
  if (!plan.host_blocks) {
    throw Error(
        "launcher_environment() needs a per-node launcher's plan (host "
        "blocks)");
  }
  if (host >= plan.hosts.size()) {
    throw Error("host " + std::to_string(host) + " is not in the plan (" +
                std::to_string(plan.hosts.size()) + " hosts)");
  }
  const std::vector<const TaskPlan*> workers = tasks_on(plan, host);
  if (workers.empty()) throw Error("host " + plan.hosts[host] + " runs no worker of the plan");
  Environment env;
  std::vector<std::string> gpus;
  for (const TaskPlan* t : workers) gpus.push_back(std::to_string(t->gpu));
  env.emplace_back("CUDA_VISIBLE_DEVICES", join_text(gpus));
  const auto [addr, port] = master_of(plan, options);
  env.emplace_back("MASTER_ADDR", addr);
  env.emplace_back("MASTER_PORT", port);
  add_nccl(plan, workers, options, env);
  const std::string node_rank = std::to_string(workers.front()->node_rank);
  const std::string nnodes = std::to_string(plan.hosts.size());
  const std::string nproc = std::to_string(workers.size());
  env.emplace_back("NNODES", nnodes);
  env.emplace_back("NODE_RANK", node_rank);
  env.emplace_back("NPROC_PER_NODE", nproc);
  // torchrun (torch.distributed.run) takes a flag's default from PET_<FLAG>: a bare `torchrun
  // train.py` (static rendezvous, its default) then runs the plan.
  env.emplace_back("PET_MASTER_ADDR", addr);
  env.emplace_back("PET_MASTER_PORT", port);
  env.emplace_back("PET_NNODES", nnodes);
  env.emplace_back("PET_NODE_RANK", node_rank);
  env.emplace_back("PET_NPROC_PER_NODE", nproc);
  if (options.ids == Ids::kSlurm) {
    // One task per host: Slurm's task id, node id and local id are the host's.
    env.emplace_back("SLURM_LOCALID", "0");
    env.emplace_back("SLURM_NODEID", node_rank);
    env.emplace_back("SLURM_PROCID", node_rank);
    env.emplace_back("TOPO_AWARE_SLURM_LOCALID", "0");
    env.emplace_back("TOPO_AWARE_SLURM_NODEID", std::to_string(host));
    env.emplace_back("TOPO_AWARE_SLURM_PROCID", std::to_string(host));
  }
  env.emplace_back("TOPO_AWARE_LAUNCHER", "per-node");
  env.emplace_back("WORLD_SIZE", std::to_string(plan.tasks.size()));
  std::sort(env.begin(), env.end());
  return env;
}

}  // namespace topoaware::mapper
