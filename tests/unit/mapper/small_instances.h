// Small instances for the cost model's and the lower bound's tests (cost_test.cc, bound_test.cc):
// fat trees of a few hosts built by synthetic.h, a request over some of their GPUs, and the optimum
// by brute force, every assignment of ranks to slots scored, which the bound must never exceed.
// The scoring is a parameter (best_over_permutations()): the cost model's, or the routed model's
// of routed_reference.h.
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

// The least `seconds(slot_of_rank)` over every permutation of ranks onto the slots.
template <class Seconds>
double best_over_permutations(const Instance& in, Seconds seconds) {
  std::vector<std::uint32_t> a(in.block_slot.begin(), in.block_slot.end());
  std::sort(a.begin(), a.end());
  double best = std::numeric_limits<double>::infinity();
  do {
    best = std::min(best, seconds(a));
  } while (std::next_permutation(a.begin(), a.end()));
  return best;
}

// The least `seconds(slot_of_rank)` over every split of the ranks over the hosts, each host's
// ranks on its slots in rank order. Where a host's GPUs and ports are alike (no rails, one port a
// GPU, one NVLink speed) a host's loads are the same whichever of its GPUs a rank takes, so this
// is every permutation for steps too large to permute: 12 ranks on three hosts of 4 are 34,650
// splits.
template <class Seconds>
double best_over_host_splits(const Instance& in, Seconds seconds) {
  const Machine& m = in.machine;
  std::vector<std::vector<std::uint32_t>> slots(m.hosts.size());
  for (std::uint32_t s = 0; s < m.slots.size(); ++s) slots[m.slots[s].host].push_back(s);
  std::vector<std::uint32_t> host_of_rank;
  for (std::uint32_t h = 0; h < slots.size(); ++h)
    host_of_rank.insert(host_of_rank.end(), slots[h].size(), h);
  std::vector<std::uint32_t> a(host_of_rank.size());
  double best = std::numeric_limits<double>::infinity();
  do {
    std::vector<std::size_t> next(slots.size(), 0);
    for (std::size_t r = 0; r < a.size(); ++r) {
      const std::uint32_t h = host_of_rank[r];
      a[r] = slots[h][next[h]++];
    }
    best = std::min(best, seconds(a));
  } while (std::next_permutation(host_of_rank.begin(), host_of_rank.end()));
  return best;
}

// The cost model's seconds of a placement that keeps the fast-domain rule (rule_shortfall() 0),
// infinity for one that does not: the optimum plan() searches for, and lower_bound() bounds.
inline double rule_keeping_seconds(const Instance& in, const std::vector<std::uint32_t>& a) {
  if (rule_shortfall(in.machine, in.traffic, a) > 0) return std::numeric_limits<double>::infinity();
  return evaluate_seconds(in.machine, in.traffic, a);
}

// The cost model's optimum: the best evaluate_seconds over every permutation that keeps the rule.
inline double brute_force(const Instance& in) {
  return best_over_permutations(
      in, [&](const std::vector<std::uint32_t>& a) { return rule_keeping_seconds(in, a); });
}

// The same over every split of the ranks over the hosts (best_over_host_splits).
inline double brute_force_hosts(const Instance& in) {
  return best_over_host_splits(
      in, [&](const std::vector<std::uint32_t>& a) { return rule_keeping_seconds(in, a); });
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
// `name` as const char*: a std::string temporary bound to a reference parameter of a function
// returning a reference is GCC 13+'s -Wdangling-reference.
inline const DimTraffic& dim(const Instance& in, const char* name) {
  for (const auto& d : in.traffic.dims) {
    if (d.name == name) return d;
  }
  throw std::runtime_error(std::string("no dim ") + name);
}

}  // namespace topoaware::mapper
