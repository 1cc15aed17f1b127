// A step's plan by launch style (step.h).
#include "step.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>
#include <utility>

#include "topoaware/topology/error.h"
#include "topoaware/topology/hostlist.h"

namespace topoaware::spank {
namespace {

namespace topology = topoaware::topology;
// Slurm's list of GPUs ("0,1,2,3"), or nullopt-like empty with ok=false when unreadable.
std::vector<long> parse_gpu_list(const std::string& text, bool* ok) {
  std::vector<long> out;
  *ok = true;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    long g = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0') *ok = false;
    out.push_back(g);
  }
  return out;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(item);
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

// Under -m arbitrary the tasks are the plan's only when SLURM_HOSTFILE is the plan's own: line r (a
// hostlist expression, as Slurm reads it) names rank r's host.
void check_hostfile(const mapper::RankPlan& plan, const std::string& text) {
  std::vector<std::string> host_of_rank(plan.tasks.size());
  for (const auto& t : plan.tasks)
    host_of_rank[static_cast<std::size_t>(t.rank)] = plan.hosts[t.host];
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    line.erase(0, line.find_first_not_of(" \t\r"));
    line.erase(line.find_last_not_of(" \t\r") + 1);
    if (line.empty() || line[0] == '#') continue;
    for (auto& h : topology::expand_hostlist(line, "SLURM_HOSTFILE")) lines.push_back(h);
  }
  for (std::size_t r = 0; r < host_of_rank.size(); ++r) {
    const std::string got = r < lines.size() ? lines[r] : std::string("(nothing)");
    if (got != host_of_rank[r]) {
      throw mapper::Error("-m arbitrary: SLURM_HOSTFILE is not the plan's own (rank " +
                          std::to_string(r) + " on " + got + ", the plan puts it on " +
                          host_of_rank[r] +
                          "); write it with `topo-aware map ... --of hostfile` for the same "
                          "layout, hosts and task count");
    }
  }
}

}  // namespace

StepPlan plan_step(const Config& config, const mapper::LaunchSpec& launch, const StepShape& shape,
                   const NodeStep& here, const topology::Fabric& fabric, const NodeModels& nodes,
                   const std::string& hostfile_text) {
  launch::StepRequest req = launch::make_request(config, launch, shape);
  StepPlan s;
  s.style = req.style;
  s.node = here.node;
  mapper::Request& request = req.request;
  if (here.node >= shape.hosts.size()) {
    throw topology::Error(topology::ErrorCode::kBadInput, "SLURM_STEP_NODELIST",
                          "node id " + std::to_string(here.node) + " beyond its " +
                              std::to_string(shape.hosts.size()) + " hosts");
  }
  const std::string& host = shape.hosts[here.node];
  const std::size_t k = static_cast<std::size_t>(shape.tasks[here.node]);

  // Block order (per-GPU tasks and per-node launchers): this node's tasks are the block's. The
  // step's distribution, which every node sees alike, decided the style already; a node's own tasks
  // can still disagree with it (-m arbitrary looks like block on some nodes).
  if (s.style != Style::kMpi) {
    std::uint32_t first = 0;
    for (std::size_t i = 0; i < here.node; ++i) first += static_cast<std::uint32_t>(shape.tasks[i]);
    for (std::uint32_t i = 0; i < here.local_global.size(); ++i) {
      if (here.local_global[i] != first + i) {
        throw DisagreeError("its tasks are not in block distribution (task " +
                            std::to_string(here.local_global[i]) + " on " + host +
                            "); topo-aware maps Slurm's block order only (-m block)");
      }
    }
  }

  bool readable = true;
  const std::vector<long> mine = parse_gpu_list(here.step_gpus, &readable);
  s.slurm_bound = !here.step_gpus.empty();
  s.step_gpu_count = mine.size();
  if (!request.bound_gpu.empty()) {
    // The plan takes this host's k-th task to hold its GPU k (make_request): where Slurm bound
    // each task its own GPUs otherwise, its tasks keep their ranks (the same on every node) but
    // not the NIC and CPU hints, which would be another GPU's.
    bool as_planned = readable && k > 0 && mine.size() >= k && mine.size() % k == 0;
    const std::size_t per_task = as_planned ? mine.size() / k : 1;
    for (std::size_t j = 0; as_planned && j < k; ++j) {
      as_planned = mine[j * per_task] == static_cast<long>(j);
    }
    if (s.slurm_bound && !as_planned) {
      s.gpu_hints = false;
      s.note = "Slurm bound " + host + "'s " + std::to_string(k) + " tasks to GPUs " +
               here.step_gpus +
               ", not task k to GPU k as the plan takes it on every node; its tasks keep their "
               "ranks, without NCCL_IB_HCA, NCCL_SOCKET_IFNAME and CPU binding";
    }
  } else if (s.style != Style::kPerNode && s.slurm_bound) {
    // srun saw no GPUs held by the job (the plan chose them freely), yet Slurm bound some here.
    s.gpu_hints = false;
    s.note = "Slurm bound " + host + " GPUs " + here.step_gpus +
             " where srun saw none held by the job; its tasks keep their ranks, without "
             "NCCL_IB_HCA, NCCL_SOCKET_IFNAME and CPU binding";
  }
  if (s.style == Style::kPerNode && s.slurm_bound &&
      mine.size() != static_cast<std::size_t>(request.tasks_per_host[here.node])) {
    // The launcher would start the plan's workers on devices it cannot see, or leave some unused
    // while the other hosts count on them.
    throw DisagreeError("Slurm bound " + std::to_string(mine.size()) + " GPUs to its launcher " +
                        "(SLURM_STEP_GPUS=" + here.step_gpus + "), the plan gives it " +
                        std::to_string(request.tasks_per_host[here.node]) +
                        " workers from the GPUs the job holds on each host; a step on part of "
                        "its job's GPUs runs with nproc=" +
                        std::to_string(mine.size()));
  }

  s.plan = mapper::plan(fabric, nodes.per_host, request);

  if (s.style == Style::kPerNode && s.slurm_bound) {
    // The launcher's workers see Slurm's CUDA_VISIBLE_DEVICES; the plan reorders it when Slurm
    // bound this host exactly the GPUs the plan uses here (as many it always did: checked above).
    std::vector<int> planned(static_cast<std::size_t>(request.tasks_per_host[here.node]), -1);
    for (const auto& t : s.plan.tasks) {
      if (t.host == here.node) planned[static_cast<std::size_t>(t.local_rank)] = t.gpu;
    }
    std::vector<long> a(planned.begin(), planned.end()), b = mine;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    if (readable && a == b) {
      for (int g : planned) {
        s.bound_order.push_back(static_cast<std::size_t>(
            std::find(mine.begin(), mine.end(), static_cast<long>(g)) - mine.begin()));
      }
    } else {
      s.gpu_hints = false;
      s.note = "Slurm bound " + host + " GPUs " + here.step_gpus + ", not the " +
               std::to_string(planned.size()) +
               " the plan uses there; its launcher keeps Slurm's "
               "CUDA_VISIBLE_DEVICES order, "
               "without NCCL_IB_HCA, NCCL_SOCKET_IFNAME and CPU binding";
    }
  }

  if (s.style != Style::kPerNode && s.slurm_bound && readable) {
    // Where every task sees all of the step's GPUs here (--gpus-per-node), a framework takes
    // device LOCAL_RANK: Slurm's list is put in the plan's local rank order (each task's own GPU
    // at its LOCAL_RANK), the GPUs no task uses after them.
    std::vector<long> planned;
    for (const auto& t : s.plan.tasks) {
      if (t.host != here.node) continue;
      const auto at = static_cast<std::size_t>(t.local_rank);
      if (planned.size() <= at) planned.resize(at + 1, -1);
      planned[at] = t.gpu;
    }
    for (long g : planned) {
      const auto it = std::find(mine.begin(), mine.end(), g);
      if (it == mine.end()) {
        s.bound_order.clear();
        break;
      }
      s.bound_order.push_back(static_cast<std::size_t>(it - mine.begin()));
    }
    for (std::size_t p = 0; !s.bound_order.empty() && p < mine.size(); ++p) {
      if (std::find(planned.begin(), planned.end(), mine[p]) == planned.end()) {
        s.bound_order.push_back(p);
      }
    }
  }

  if (s.style == Style::kMpi) {
    // Task g is rank g: Slurm placed it from the hostfile, and MPI numbers it g.
    std::vector<std::size_t> task_of_rank(s.plan.tasks.size());
    for (std::size_t t = 0; t < s.plan.tasks.size(); ++t) {
      task_of_rank[static_cast<std::size_t>(s.plan.tasks[t].rank)] = t;
    }
    // The whole hostfile, so that every node decides alike (a node's own tasks can match the plan
    // where another node's do not); then this node's tasks, which Slurm placed.
    check_hostfile(s.plan, hostfile_text);
    for (std::uint32_t g : here.local_global) {
      if (g >= task_of_rank.size() || s.plan.tasks[task_of_rank[g]].host != here.node) {
        throw DisagreeError("-m arbitrary: task " + std::to_string(g) + " runs on " + host +
                            ", where the plan does not put rank " + std::to_string(g) +
                            "; SLURM_HOSTFILE must be the plan's own (`topo-aware map ... --of "
                            "hostfile`)");
      }
    }
    for (std::uint32_t g = 0; g < task_of_rank.size(); ++g) s.plan_task[g] = task_of_rank[g];
  } else if (s.style == Style::kPerGpu) {
    for (std::uint32_t g = 0; g < s.plan.tasks.size(); ++g) s.plan_task[g] = g;
  }

  s.env.job_id = here.job_id;
  s.env.master_port = config.master_port.empty() ? here.master_port : config.master_port;
  s.env.one_gpu_visible = config.gpu_binding == launch::GpuBinding::kOneGpu;
  s.env.ids = req.ids;
  return s;
}

mapper::Environment task_env(const StepPlan& s, std::uint32_t global_task,
                             const std::string& slurm_cvd) {
  mapper::Environment env;
  if (s.style == Style::kPerNode) {
    env = mapper::launcher_environment(s.plan, static_cast<std::uint32_t>(s.node), s.env);
    if (!s.hosts_file.empty()) env.emplace_back("TOPO_AWARE_HOSTFILE", s.hosts_file);
  } else {
    auto it = s.plan_task.find(global_task);
    if (it == s.plan_task.end()) {
      throw mapper::Error("task " + std::to_string(global_task) + " is not this node's");
    }
    env = mapper::task_environment(s.plan, static_cast<int>(it->second), s.env);
  }
  if (!s.gloo_ifname.empty()) env.emplace_back("GLOO_SOCKET_IFNAME", s.gloo_ifname);
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& [name, value] : env) {
    if (name == "CUDA_VISIBLE_DEVICES" && s.slurm_bound) {
      // Slurm's devices stay, put in the plan's order where the task sees all of the step's GPUs
      // here (a per-node launcher, or one task per GPU under --gpus-per-node); a task Slurm bound
      // its own GPUs (--gpus-per-task) keeps its list as it is.
      const std::vector<std::string> slurm = split_list(slurm_cvd);
      if (s.bound_order.empty() ||
          (s.style != Style::kPerNode && slurm.size() != s.step_gpu_count)) {
        continue;
      }
      std::vector<std::string> ordered;
      for (std::size_t p : s.bound_order) {
        if (p >= slurm.size()) {
          ordered.clear();
          break;
        }
        ordered.push_back(slurm[p]);
      }
      if (ordered.empty()) continue;
      value = join(ordered);
    }
    if (!s.gpu_hints && (name == "NCCL_IB_HCA" || name == "NCCL_SOCKET_IFNAME")) continue;
    out.emplace_back(std::move(name), std::move(value));
  }
  return out;
}

const std::vector<std::string>& exported_names() {
  static const std::vector<std::string> names = {"RANK",
                                                 "LOCAL_RANK",
                                                 "WORLD_SIZE",
                                                 "LOCAL_WORLD_SIZE",
                                                 "NODE_RANK",
                                                 "MASTER_ADDR",
                                                 "MASTER_PORT",
                                                 "CUDA_VISIBLE_DEVICES",
                                                 "NCCL_TOPO_FILE",
                                                 "NCCL_IB_HCA",
                                                 "NCCL_SOCKET_IFNAME",
                                                 "NCCL_CROSS_NIC",
                                                 "TOPO_AWARE_RANK",
                                                 "TOPO_AWARE_COORDS",
                                                 "NNODES",
                                                 "NPROC_PER_NODE",
                                                 "PET_MASTER_ADDR",
                                                 "PET_MASTER_PORT",
                                                 "PET_NNODES",
                                                 "PET_NODE_RANK",
                                                 "PET_NPROC_PER_NODE",
                                                 "GLOO_SOCKET_IFNAME",
                                                 "JAX_COORDINATOR_ADDRESS",
                                                 "TOPO_AWARE_LAUNCHER",
                                                 "TOPO_AWARE_HOSTFILE"};
  return names;
}

std::string launcher_hostfile(const StepPlan& s) {
  std::vector<std::pair<int, std::uint32_t>> order;  // (node rank, host)
  std::map<std::uint32_t, int> slots;
  for (const auto& t : s.plan.tasks) {
    if (slots[t.host]++ == 0) order.emplace_back(t.node_rank, t.host);
  }
  std::sort(order.begin(), order.end());
  std::string out;
  for (const auto& [rank, host] : order) {
    out += s.plan.hosts[host] + " slots=" + std::to_string(slots[host]) + "\n";
  }
  return out;
}

std::vector<std::uint32_t> task_cpus(const StepPlan& s, std::uint32_t global_task) {
  if (!s.gpu_hints) return {};
  if (s.style == Style::kPerNode) {
    std::set<std::uint32_t> all;
    for (const auto& t : s.plan.tasks) {
      if (t.host == s.node) all.insert(t.cpus.begin(), t.cpus.end());
    }
    return {all.begin(), all.end()};
  }
  auto it = s.plan_task.find(global_task);
  if (it == s.plan_task.end()) return {};
  return s.plan.tasks[it->second].cpus;
}

bool bind_to_cpus(const std::vector<std::uint32_t>& cpus) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
    throw std::runtime_error(std::string("sched_getaffinity: ") + std::strerror(errno));
  }
  cpu_set_t want;
  CPU_ZERO(&want);
  int count = 0;
  for (auto c : cpus) {
    if (c < static_cast<std::uint32_t>(CPU_SETSIZE) && CPU_ISSET(c, &allowed)) {
      CPU_SET(c, &want);
      ++count;
    }
  }
  if (count == 0) return false;
  if (::sched_setaffinity(0, sizeof want, &want) != 0) {
    throw std::runtime_error(std::string("sched_setaffinity: ") + std::strerror(errno));
  }
  return true;
}

}  // namespace topoaware::spank
