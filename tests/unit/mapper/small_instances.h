// Small instances for the cost model's and the lower bound's tests (cost_test.cc, bound_test.cc):
// fat trees of a few hosts built by synthetic.h, a request over some of their GPUs, and the optimum
// by brute force, every assignment of ranks to slots scored, which the bound must never exceed.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "topoaware/mapper/cost.h"
#include "topoaware/mapper/layout.h"
#include "topoaware/mapper/request.h"
#include "topoaware/mapper/synthetic.h"
#include "topoaware/topology/fabric.h"
#include "topoaware/topology/node.h"

namespace topoaware::mapper {

struct Small {
  topology::Fabric fabric;
  topology::NodeTopology node;
  Request request;
  std::vector<const topology::NodeTopology*> nodes;
};

inline Small small(FatTreeSpec spec, const std::vector<int>& tasks, const std::string& layout,
                   int host_offset = 0) {
  Small s;
  s.fabric = make_fat_tree(spec);
  s.node = make_node(spec.gpus_per_host, spec.ports_per_host, spec.nvlink_gbps, spec.port_gbps);
  std::vector<std::string> names;
  for (const auto& h : s.fabric.hosts) names.push_back(h.name);
  std::sort(names.begin(), names.end());
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    if (tasks[i] == 0) continue;
    s.request.hosts.push_back(names[i + static_cast<std::size_t>(host_offset)]);
    s.request.tasks_per_host.push_back(tasks[i]);
  }
  s.request.layout = parse_layout(layout);
  s.nodes.assign(s.request.hosts.size(), &s.node);
  return s;
}

// The best evaluate_seconds over every permutation of ranks onto the slots that keeps the
// fast-domain rule (rule_shortfall() 0: what plan() searches and lower_bound() bounds).
inline double brute_force(const Instance& in) {
  std::vector<std::uint32_t> a(in.block_slot.begin(), in.block_slot.end());
  std::sort(a.begin(), a.end());
  double best = std::numeric_limits<double>::infinity();
  do {
    if (rule_shortfall(in.machine, in.traffic, a) > 0) continue;
    best = std::min(best, evaluate_seconds(in.machine, in.traffic, a));
  } while (std::next_permutation(a.begin(), a.end()));
  return best;
}

inline FatTreeSpec tiny(int hosts, int per_leaf, int gpus, double oversub) {
  FatTreeSpec s;
  s.hosts = hosts;
  s.hosts_per_leaf = per_leaf;
  s.gpus_per_host = gpus;
  s.ports_per_host = gpus;
  s.leaf_oversub = oversub;
  s.port_gbps = 25;
  s.nvlink_gbps = 150;
  return s;
}

inline FatTreeSpec rails(FatTreeSpec s) {
  s.rail_optimized = true;
  return s;
}
inline FatTreeSpec nvl(FatTreeSpec s, int hosts) {
  s.nvlink_domain_hosts = hosts;
  return s;
}
inline FatTreeSpec ecmp(FatTreeSpec s, int cables) {
  s.routing = topology::Routing::kEcmp;
  s.uplink_cables = cables;
  return s;
}
inline FatTreeSpec two_nics(FatTreeSpec s) {  // every GPU shares its PCIe switch with two NICs
  s.ports_per_host = 2 * s.gpus_per_host;
  return s;
}

// The traffic of the dim named `name`.
inline const DimTraffic& dim(const Instance& in, const std::string& name) {
  for (const auto& d : in.traffic.dims) {
    if (d.name == name) return d;
  }
  throw std::runtime_error("no dim " + name);
}

}  // namespace topoaware::mapper
