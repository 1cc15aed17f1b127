// A step's plan by launch style (step.h).
#include "step.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>
#include <utility>

#include "topoaware/topology/error.h"
#include "topoaware/topology/hostlist.h"

namespace topoaware::spank {
namespace {

namespace topology = topoaware::topology;
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

std::vector<int> workers_per_host(const mapper::LaunchSpec& launch, const NodeModels& nodes,
                                  int bound) {
  std::vector<int> out;
  for (const topology::NodeTopology* n : nodes.per_host) {
    out.push_back(launch.nproc > 0 ? launch.nproc
                  : bound > 0      ? bound
                                   : static_cast<int>(n->gpus().size()));
  }
  return out;
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
          "-m arbitrary places one task per GPU from a hostfile (MPI); a "
          "per-node launcher "
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
  return out;
}

StepPlan plan_step(const Config& config, const mapper::LaunchSpec& launch, const StepShape& shape,
                   const NodeStep& here, const topology::Fabric& fabric, const NodeModels& nodes,
                   const std::string& hostfile_text) {
  StepRequest req = make_request(config, launch, shape);
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
        throw mapper::Error("tasks are not in block distribution (task " +
                            std::to_string(here.local_global[i]) + " on " + host +
                            "); topo-aware maps Slurm's block order only (-m block)");
      }
    }
  }

  bool readable = true;
  const std::vector<long> mine = parse_gpu_list(here.step_gpus, &readable);
  if (!here.step_gpus.empty()) {
    s.slurm_bound = true;
    if (s.style != Style::kPerNode) {
      // Slurm bound GPUs (gres, maybe cgroups): the plan permutes ranks only. Every node must
      // compute the same plan, but SLURM_STEP_GPUS lists this node's GPUs alone, and nodes differ
      // (--gpus-per-task=2 with 3 tasks here and 1 there lists 0-5 here, 0-1 there). So the plan
      // takes every host's k-th task to hold its GPU k, from the tasks per node that all nodes
      // share; this node then checks that Slurm bound its own tasks that way, and where it did not,
      // its tasks keep their ranks (the same on every node) but not the NIC and CPU hints, which
      // would be another GPU's.
      for (int count : request.tasks_per_host) {
        for (int t = 0; t < count; ++t) request.bound_gpu.push_back(t);
      }
      bool as_planned = readable && k > 0 && mine.size() >= k && mine.size() % k == 0;
      const std::size_t per_task = as_planned ? mine.size() / k : 1;
      for (std::size_t j = 0; as_planned && j < k; ++j) {
        as_planned = mine[j * per_task] == static_cast<long>(j);
      }
      if (!as_planned) {
        s.gpu_hints = false;
        s.note = "Slurm bound " + host + "'s " + std::to_string(k) + " tasks to GPUs " +
                 here.step_gpus +
                 ", not task k to GPU k as the plan takes it on every node; "
                 "its tasks keep "
                 "their ranks, without NCCL_IB_HCA, NCCL_SOCKET_IFNAME and CPU "
                 "binding";
      }
    }
  }

  s.plan = mapper::plan(fabric, nodes.per_host, request);

  if (s.style == Style::kPerNode && s.slurm_bound) {
    // The launcher's workers see Slurm's CUDA_VISIBLE_DEVICES; the plan reorders it when Slurm
    // bound this host exactly the GPUs the plan uses here.
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
        throw mapper::Error("-m arbitrary: task " + std::to_string(g) + " runs on " + host +
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
  s.env.master_port = config.master_port;
  s.env.one_gpu_visible = config.gpu_binding == GpuBinding::kOneGpu;
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
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& [name, value] : env) {
    if (name == "CUDA_VISIBLE_DEVICES" && s.slurm_bound) {
      // Slurm's devices stay; a per-node launcher's are reordered to the plan's worker order.
      if (s.bound_order.empty()) continue;
      const std::vector<std::string> slurm = split_list(slurm_cvd);
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

}  // namespace topoaware::spank
