// plan(): the rank mapping algorithms (block, cyclic, random, topo: search.h) run on the request's
// instance (instance.h), the guard that falls back to Slurm's block order, and the launch plan's
// tasks.
#include "topoaware/mapper/plan.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "domains.h"
#include "instance.h"
#include "node_facts.h"
#include "search.h"
#include "topoaware/mapper/cost.h"
#include "topoaware/mapper/layout.h"
#include "topoaware/mapper/request.h"
#include "topoaware/topology/fabric.h"
#include "topoaware/topology/node.h"

namespace topoaware::mapper {

using internal::Assignment;
using internal::Mapper;

RankPlan plan(const topology::Fabric& fabric,
              const std::vector<const topology::NodeTopology*>& nodes_in, const Request& request) {
  Instance in = make_instance(fabric, nodes_in, request);
  std::vector<const topology::NodeTopology*> nodes = nodes_in;
  if (nodes.empty()) nodes.assign(request.hosts.size(), nullptr);
  const Machine& m = in.machine;
  Mapper mapper(in, request);
  RankPlan out;
  out.hosts = request.hosts;
  out.layout = in.layout;
  out.algorithm = request.algorithm;
  out.rail_optimized = fabric.rail_optimized;
  out.host_blocks = request.host_blocks;
  out.lower_bound = lower_bound(m, in.traffic, false);  // without whole cuts: fast
  out.assumptions = m.assumptions;
  Assignment block = mapper.block();
  Assignment a;
  switch (request.algorithm) {
    case Algorithm::kBlock:
      a = block;
      break;
    case Algorithm::kCyclic:
      a = mapper.cyclic();
      break;
    case Algorithm::kRandom:
      a = mapper.random(request.seed);
      break;
    case Algorithm::kTopo:
      a = mapper.topo(out.lower_bound, &out.refine_moves);
      break;
  }
  // Every baseline as a per-node launcher would run it (block order already is).
  if (request.host_blocks) a = mapper.host_blocks(a);
  out.cost = evaluate(m, in.traffic, a);
  out.block_cost = evaluate(m, in.traffic, block);
  // Slurm's order runs local task j on GPU j. Where the plan chose other GPUs (to leave a
  // degraded NIC's out), Slurm's order is scored on Slurm's GPUs.
  bool health = false;
  for (std::uint32_t fh : m.fabric_host) health |= !fabric.hosts[fh].nic_fraction.empty();
  if (health) {
    Instance slurm = internal::instance_of(fabric, nodes_in, request, false);
    bool same_gpus = slurm.machine.slots.size() == m.slots.size();
    for (std::size_t i = 0; same_gpus && i < m.slots.size(); ++i) {
      same_gpus = slurm.machine.slots[i].gpu == m.slots[i].gpu;
    }
    if (!same_gpus) out.block_cost = evaluate(slurm.machine, slurm.traffic, slurm.block_slot);
  }
  // The guard: never hand out a plan the model says is slower than Slurm's, unless Slurm's
  // breaks the fast-domain rule where the plan keeps it.
  if (request.algorithm == Algorithm::kTopo) {
    out.searched_seconds = out.cost.seconds;
    const internal::DomainRule& rule = mapper.rule();
    out.searched_split = rule.shortfall(a);
    out.block_split = rule.shortfall(block);
    if (out.block_split < out.searched_split ||
        (out.block_split == out.searched_split && out.cost.seconds > out.block_cost.seconds)) {
      a = block;
      out.cost = evaluate(m, in.traffic, block);
      out.kept_block = true;
    }
  }
  out.splits = internal::domain_splits(m, in.traffic, in.layout.split, a);

  // Tasks: in free mode a host's tasks take its ranks in ascending order (LOCAL_RANK order);
  // with bound GPUs each task keeps its GPU and takes the rank placed on it.
  const long long world = in.traffic.world;
  std::vector<long long> rank_of_slot(m.slots.size(), -1);
  for (long long r = 0; r < world; ++r) rank_of_slot[a[static_cast<std::size_t>(r)]] = r;
  std::vector<std::vector<long long>> ranks_of_host(m.hosts.size());
  for (long long r = 0; r < world; ++r) {
    ranks_of_host[m.slots[a[static_cast<std::size_t>(r)]].host].push_back(r);
  }
  for (auto& v : ranks_of_host) std::sort(v.begin(), v.end());
  // NODE_RANK: hosts numbered by their smallest rank (NCCL's and torchrun's node order).
  std::vector<std::uint32_t> by_first(m.hosts.size());
  std::iota(by_first.begin(), by_first.end(), 0);
  std::sort(by_first.begin(), by_first.end(),
            [&](auto x, auto y) { return ranks_of_host[x].front() < ranks_of_host[y].front(); });
  std::vector<int> node_rank(m.hosts.size());
  for (std::size_t i = 0; i < by_first.size(); ++i) node_rank[by_first[i]] = static_cast<int>(i);
  std::map<std::string, std::uint32_t> req_index;
  for (std::uint32_t i = 0; i < request.hosts.size(); ++i) req_index[request.hosts[i]] = i;
  std::map<const topology::NodeTopology*, internal::NodeFacts> facts;
  const bool bound = !request.bound_gpu.empty();
  std::vector<int> local_seen(m.hosts.size(), 0);
  out.tasks.resize(static_cast<std::size_t>(world));
  for (std::size_t t = 0; t < out.tasks.size(); ++t) {
    const std::uint32_t mh = in.host_of_task[t];
    const int j = local_seen[mh]++;
    long long rank =
        bound ? rank_of_slot[in.block_slot[t]] : ranks_of_host[mh][static_cast<std::size_t>(j)];
    const Slot& slot = m.slots[a[static_cast<std::size_t>(rank)]];
    TaskPlan& tp = out.tasks[t];
    tp.task = static_cast<int>(t);
    tp.rank = static_cast<int>(rank);
    tp.host = req_index.at(m.hosts[mh]);
    const auto& on_host = ranks_of_host[mh];
    tp.local_rank =
        static_cast<int>(std::lower_bound(on_host.begin(), on_host.end(), rank) - on_host.begin());
    tp.node_rank = node_rank[mh];
    tp.gpu = slot.gpu;
    tp.coords = rank_coords(in.layout, rank);
    if (const topology::NodeTopology* node = nodes[tp.host]) {
      auto it = facts.find(node);
      if (it == facts.end()) it = facts.emplace(node, internal::node_facts(*node)).first;
      if (const internal::GpuFacts* g = it->second.find(slot.gpu)) {
        tp.gpu_busid = g->busid;
        tp.nics = g->nics;
        tp.netdev = g->netdev;
        tp.cpus = g->cpus;
      }
    }
    if (tp.nics.empty() || !is_device_name(tp.nics.front())) {
      // The node model names no device for the NIC (a plain node's "port-K"): the fabric's name
      // for this host's port when it has one ("mlx5_3"; or a dump's label "HCA-1", shown but
      // never exported).
      const auto& hi = fabric.hosts[m.fabric_host[mh]];
      const auto port = static_cast<std::size_t>(slot.port);
      if (port < hi.port_nic.size() && !hi.port_nic[port].empty()) tp.nics = {hi.port_nic[port]};
    }
    out.rank_of_task.push_back(tp.rank);
  }
  return out;
}

}  // namespace topoaware::mapper
