// Instances (cost.h's make_instance(), instance.h): a request checked and turned into the machine
// the cost model routes over, the resolved layout's traffic and each task's slot under Slurm's
// block order.
#include "instance.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "node_facts.h"
#include "topoaware/mapper/cost.h"
#include "topoaware/mapper/layout.h"
#include "topoaware/mapper/request.h"
#include "topoaware/topology/fabric.h"
#include "topoaware/topology/node.h"

namespace topoaware::mapper {
namespace {

long long total_tasks(const Request& r) {
  long long n = 0;
  for (int t : r.tasks_per_host) {
    if (t < 0) throw Error("tasks_per_host: negative count");
    n += t;
  }
  return n;
}

// The k GPUs a host's tasks use when the plan may choose them: the first k by NVML index, except
// that GPUs whose nearest NIC the node doctor found degraded (HostInfo::nic_fraction) come last,
// so a step that does not need every GPU of a host leaves the slow NIC's out.
std::vector<int> healthiest_gpus(const topology::Fabric& fabric, const std::string& host,
                                 const topology::NodeTopology& node, const std::vector<int>& devs,
                                 int k) {
  std::vector<int> out(devs.begin(), devs.begin() + k);
  const std::int64_t fi = fabric.find_host(host);
  if (fi < 0 || static_cast<std::size_t>(k) == devs.size()) return out;
  const auto& fraction = fabric.hosts[static_cast<std::size_t>(fi)].nic_fraction;
  if (fraction.empty()) return out;
  const internal::NodeFacts facts = internal::node_facts(node);
  auto health = [&](int dev) {
    const internal::GpuFacts* g = facts.find(dev);
    if (g == nullptr || g->nics.empty()) return 1.0;
    auto it = fraction.find(g->nics.front());
    return it == fraction.end() ? 1.0 : it->second;
  };
  std::vector<int> ranked = devs;
  std::stable_sort(ranked.begin(), ranked.end(),
                   [&](int a, int b) { return health(a) > health(b); });
  out.assign(ranked.begin(), ranked.begin() + k);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

namespace internal {

Instance instance_of(const topology::Fabric& fabric,
                     const std::vector<const topology::NodeTopology*>& nodes_in,
                     const Request& request, bool choose_gpus) {
  if (request.hosts.empty()) throw Error("request: no hosts");
  if (request.tasks_per_host.size() != request.hosts.size()) {
    throw Error("request: " + std::to_string(request.hosts.size()) + " hosts but " +
                std::to_string(request.tasks_per_host.size()) + " task counts");
  }
  std::vector<const topology::NodeTopology*> nodes = nodes_in;
  if (nodes.empty()) nodes.assign(request.hosts.size(), nullptr);
  if (nodes.size() != request.hosts.size()) {
    throw Error("request: " + std::to_string(request.hosts.size()) + " hosts but " +
                std::to_string(nodes.size()) + " node models");
  }
  const long long world = total_tasks(request);
  if (world <= 0) throw Error("request: no tasks");
  if (world > (1LL << 22)) throw Error("request: more than 4M tasks");
  const bool bound = !request.bound_gpu.empty();
  if (bound && request.host_blocks) {
    throw Error("request: host blocks (a per-node launcher) choose GPUs; bound_gpu fixes them");
  }
  if (bound && static_cast<long long>(request.bound_gpu.size()) != world) {
    throw Error("request: bound_gpu has " + std::to_string(request.bound_gpu.size()) +
                " entries for " + std::to_string(world) + " tasks");
  }
  // GPUs used per host: bound ones, else the first tasks_per_host by NVML index.
  std::map<const topology::NodeTopology*, std::vector<int>> devs_of;
  std::vector<std::vector<int>> gpus(request.hosts.size());
  std::size_t t = 0;
  for (std::size_t h = 0; h < request.hosts.size(); ++h) {
    const int k = request.tasks_per_host[h];
    if (bound) {
      for (int j = 0; j < k; ++j)
        gpus[h].push_back(request.bound_gpu[t + static_cast<std::size_t>(j)]);
    } else if (nodes[h]) {
      auto it = devs_of.find(nodes[h]);
      if (it == devs_of.end()) {
        std::vector<int> devs;
        for (const auto& g : internal::node_facts(*nodes[h]).gpus) devs.push_back(g.dev);
        it = devs_of.emplace(nodes[h], devs).first;
      }
      if (static_cast<int>(it->second.size()) < k) {
        throw Error("host " + request.hosts[h] + ": " + std::to_string(k) +
                    " tasks but its node has " + std::to_string(it->second.size()) + " GPUs");
      }
      gpus[h] = choose_gpus ? healthiest_gpus(fabric, request.hosts[h], *nodes[h], it->second, k)
                            : std::vector<int>(it->second.begin(), it->second.begin() + k);
    } else {
      for (int j = 0; j < k; ++j) gpus[h].push_back(j);
    }
    t += static_cast<std::size_t>(k);
  }
  Instance in;
  in.machine = build_machine(fabric, request.hosts, nodes, gpus);
  in.layout = request.layout;
  resolve_layout(in.layout, static_cast<int>(world));
  in.traffic = job_traffic(in.layout);
  in.traffic.overlap = request.overlap_dims;
  in.traffic.calibration = request.calibration;
  if (request.calibration.measured()) in.machine.assumptions.push_back(describe(request.calibration));
  // Each task's slot under block order: the j-th task of a host takes its j-th GPU (free) or
  // the GPU bound to it.
  std::map<std::string, std::uint32_t> host_idx;
  for (std::uint32_t i = 0; i < in.machine.hosts.size(); ++i) host_idx[in.machine.hosts[i]] = i;
  std::vector<std::uint32_t> first_slot(in.machine.hosts.size(), 0);
  for (std::uint32_t s = static_cast<std::uint32_t>(in.machine.slots.size()); s-- > 0;) {
    first_slot[in.machine.slots[s].host] = s;
  }
  t = 0;
  for (std::size_t h = 0; h < request.hosts.size(); ++h) {
    std::uint32_t mh = host_idx.at(request.hosts[h]);
    for (int j = 0; j < request.tasks_per_host[h]; ++j, ++t) {
      std::uint32_t slot = first_slot[mh] + static_cast<std::uint32_t>(j);
      if (bound) {
        int want = request.bound_gpu[t];
        slot = first_slot[mh];
        while (in.machine.slots[slot].gpu != want) ++slot;
      }
      in.block_slot.push_back(slot);
      in.host_of_task.push_back(mh);
    }
  }
  return in;
}

}  // namespace internal

Instance make_instance(const topology::Fabric& fabric,
                       const std::vector<const topology::NodeTopology*>& nodes_in,
                       const Request& request) {
  return internal::instance_of(fabric, nodes_in, request, true);
}

}  // namespace topoaware::mapper
