// The routed model the routed bound (cost.h's routed_lower_bound(), mapper/src/bound/) is proven
// against: what the cost model was before it followed NCCL's own choices (commit 6edbaf1's
// routing.h and cost.cc), written again on its own so that the bound's tests by brute force do not
// lean on the code they check. docs/mapper.md's "Lower bound" derives the bound for these flows:
// - a ring dim (DimTraffic::pattern kRing) on one NCCL node (a host, or an NVLink domain): each
//   member sends V = 2(n-1)/n S to the next over NVLink. On several, NCCL's ring over the nodes
//   numbered by first rank: a chain through each node's k members over NVLink, each sending
//   (k-1)/k V, then the node's j-th member sends hop/k to the next node's (j mod its size)-th
//   member by its own NICs; hop is V, or S where an all-reduce (all_reduce) spans exactly two
//   nodes (a tree);
// - all-to-all: S/n to every other member; pipeline: S to the next stage and to the previous; both
//   as send/recv, which NCCL's PXN sends through the NICs of the sender host's GPU with the peer's
//   NVML index (after an NVLink hop to it), any GPU of that host, where its GPUs share NVLink
//   (Machine::pxn) and that GPU's ports are known;
// - between hosts a flow is cut into one piece per port (the i-th sending port with the i-th
//   receiving one); a piece climbs the levels to the lowest group holding both hosts, above the
//   rails on a rail-optimized fabric when its ports' rails differ; ECMP tiers charge a group's
//   uplink its expected busiest link (ecmp_factor);
// - a dim takes its most loaded resource's load over bandwidth, plus calls x steps (2(n-1) for a
//   ring, 1 otherwise) x the latency of the farthest level any of its flows reached; the step is
//   the sum over dims, and the explicit matrix (send/recv, PXN, no latency) adds its own.
// It reads a DimTraffic's pattern, all_reduce, bytes, calls, size and stride (not its
// collective), the machine as built (ports at NCCL's channel speed), and not Traffic::overlap.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "small_instances.h"
#include "topoaware/mapper/cost.h"
#include "topoaware/mapper/layout.h"

namespace topoaware::mapper::routed {

// ECMP: the expected busiest of `links` parallel links over their mean, `flows` equal flows
// hashed onto them (docs/mapper.md, "ECMP"): Blom's approximation of the largest of `links`
// normals, at least one whole flow on one link, at most every flow on one.
inline double ecmp_factor(double flows, std::uint32_t links) {
  if (links <= 1 || !(flows > 0)) return 1.0;
  const double l = links;
  const double p = (l - 0.375) / (l + 0.25);
  const double t = std::sqrt(-2.0 * std::log(1.0 - p));  // Abramowitz & Stegun 26.2.23
  const double z = t - (2.515517 + 0.802853 * t + 0.010328 * t * t) /
                           (1.0 + 1.432788 * t + 0.189269 * t * t + 0.001308 * t * t * t);
  return std::min(l, std::max({1.0, l / flows, 1.0 + z * std::sqrt((l - 1.0) / flows)}));
}

// Loads of one dim on every resource: each slot's NVLink out and in, each port out and in, each
// level group's uplink and downlink.
class Loads {
 public:
  explicit Loads(const Machine& m) : m_(m) {
    const std::size_t slots = m.slots.size(), ports = m.port_gbps.size();
    for (std::size_t s = 0; s < slots; ++s) add_resource(m.slot_nvlink_gbps[s], 0);  // out
    for (std::size_t s = 0; s < slots; ++s) add_resource(m.slot_nvlink_gbps[s], 0);  // in
    for (std::size_t p = 0; p < ports; ++p) add_resource(m.port_gbps[p], 0);         // out
    for (std::size_t p = 0; p < ports; ++p) add_resource(m.port_gbps[p], 0);         // in
    for (const NetLevel& l : m.levels) {
      level_base_.push_back(gbps_.size());
      for (int dir = 0; dir < 2; ++dir) {  // uplinks, then downlinks
        for (std::size_t g = 0; g < l.uplink_gbps.size(); ++g) {
          add_resource(l.uplink_gbps[g],
                       l.ecmp ? (g < l.uplink_links.size() ? l.uplink_links[g] : 1) : 0);
        }
      }
    }
    bytes_.assign(gbps_.size(), 0.0);
    squares_.assign(gbps_.size(), 0.0);
  }

  std::size_t nv_out(std::uint32_t slot) const { return slot; }
  std::size_t nv_in(std::uint32_t slot) const { return m_.slots.size() + slot; }
  std::size_t nic_out(std::uint32_t host, std::uint32_t port) const {
    return 2 * m_.slots.size() + m_.port_base[host] + port;
  }
  std::size_t nic_in(std::uint32_t host, std::uint32_t port) const {
    return nic_out(host, port) + m_.port_gbps.size();
  }
  std::size_t up(std::size_t level, std::uint32_t group) const {
    return level_base_[level] + group;
  }
  std::size_t down(std::size_t level, std::uint32_t group) const {
    return up(level, group) + m_.levels[level].uplink_gbps.size();
  }

  void add(std::size_t r, double bytes) {
    bytes_[r] += bytes;
    squares_[r] += bytes * bytes;
  }

  // The most loaded resource's time (seconds); clears the loads for the next dim.
  double finish() {
    double worst = 0;
    for (std::size_t r = 0; r < bytes_.size(); ++r) {
      if (bytes_[r] <= 0) continue;
      double t =
          gbps_[r] > 0 ? bytes_[r] / (gbps_[r] * 1e9) : std::numeric_limits<double>::infinity();
      // Effective number of equal flows: (sum bytes)^2 / sum bytes^2.
      if (links_[r] > 1) t *= ecmp_factor(bytes_[r] * bytes_[r] / squares_[r], links_[r]);
      worst = std::max(worst, t);
      bytes_[r] = squares_[r] = 0;
    }
    return worst;
  }

 private:
  void add_resource(double gbps, std::uint32_t links) {
    gbps_.push_back(gbps);
    links_.push_back(links);
  }

  const Machine& m_;
  std::vector<std::size_t> level_base_;
  std::vector<double> gbps_, bytes_, squares_;
  std::vector<std::uint32_t> links_;  // ECMP links (0 or 1: flows spread evenly)
};

// A host's NCCL node: its NVLink domain, or the host alone.
inline std::size_t nccl_node(const Machine& m, std::uint32_t host) {
  const int d = m.domain_of_host[host];
  return d >= 0 ? m.hosts.size() + static_cast<std::size_t>(d) : host;
}

// One flow from slot a to slot b; `pxn`: a send/recv. Returns the level it reached: 0 inside an
// NCCL node (NVLink), 1 between hosts under one group of levels[0], 2 + l when it crossed level l.
inline int route_flow(const Machine& m, Loads& loads, std::uint32_t a, std::uint32_t b,
                      double bytes, bool pxn) {
  if (a == b || bytes <= 0) return 0;
  const Slot& sa = m.slots[a];
  const Slot& sb = m.slots[b];
  if (nccl_node(m, sa.host) == nccl_node(m, sb.host)) {
    loads.add(loads.nv_out(a), bytes);
    loads.add(loads.nv_in(b), bytes);
    return 0;
  }
  PortRange out = sa.ports;
  if (pxn && m.pxn[sa.host]) {
    const PortRange relay = m.relay_ports(sa.host, sb.gpu);
    if (relay.count > 0) {
      if (sb.gpu != sa.gpu) loads.add(loads.nv_out(a), bytes);  // the hop to the relay GPU
      out = relay;
    }
  }
  const PortRange in = sb.ports;
  const std::uint32_t pieces = std::max<std::uint32_t>(1, std::max(out.count, in.count));
  int reached = 1;
  for (std::uint32_t i = 0; i < pieces; ++i) {
    const double piece = bytes / pieces;
    const std::uint32_t po = m.port_list[out.begin + i % out.count];
    const std::uint32_t pi = m.port_list[in.begin + i % in.count];
    loads.add(loads.nic_out(sa.host, po), piece);
    loads.add(loads.nic_in(sb.host, pi), piece);
    const bool cross_rail = m.rail_optimized && po != pi;
    for (std::size_t l = 0; l < m.levels.size(); ++l) {
      const std::uint32_t ga = m.levels[l].group_of_host[sa.host];
      const std::uint32_t gb = m.levels[l].group_of_host[sb.host];
      if (ga == gb && !(l == 0 && cross_rail)) break;
      loads.add(loads.up(l, ga), piece);
      loads.add(loads.down(l, gb), piece);
      reached = std::max(reached, static_cast<int>(2 + l));
    }
  }
  return reached;
}

// The flows of one group (slots in rank order); returns the farthest level they reached.
inline int route_group(const Machine& m, Loads& loads, const DimTraffic& d,
                       const std::vector<std::uint32_t>& members) {
  const std::size_t n = members.size();
  int reached = 0;
  auto flow = [&](std::uint32_t a, std::uint32_t b, double bytes, bool pxn) {
    reached = std::max(reached, route_flow(m, loads, a, b, bytes, pxn));
  };
  if (d.pattern == Pattern::kPipeline) {
    for (std::size_t i = 0; i + 1 < n; ++i) {
      flow(members[i], members[i + 1], d.bytes, true);
      flow(members[i + 1], members[i], d.bytes, true);
    }
  } else if (d.pattern == Pattern::kAllToAll) {
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < n; ++j) {
        if (i != j) flow(members[i], members[j], d.bytes / static_cast<double>(n), true);
      }
    }
  } else {
    // NCCL nodes in order of first rank, each with its members in rank order.
    std::vector<std::size_t> node_keys;
    std::vector<std::vector<std::uint32_t>> nodes;
    for (std::uint32_t s : members) {
      const std::size_t key = nccl_node(m, m.slots[s].host);
      const auto at = std::find(node_keys.begin(), node_keys.end(), key);
      if (at == node_keys.end()) {
        node_keys.push_back(key);
        nodes.push_back({s});
      } else {
        nodes[static_cast<std::size_t>(at - node_keys.begin())].push_back(s);
      }
    }
    const double v = 2.0 * (n - 1.0) / n * d.bytes;
    const double hop = d.all_reduce && nodes.size() == 2 ? d.bytes : v;
    if (nodes.size() == 1) {
      for (std::size_t i = 0; i < n; ++i) flow(members[i], members[(i + 1) % n], v, false);
    } else {
      for (std::size_t h = 0; h < nodes.size(); ++h) {
        const auto& here = nodes[h];
        const auto& next = nodes[(h + 1) % nodes.size()];
        const std::size_t k = here.size();
        if (k >= 2) {
          for (std::size_t j = 0; j < k; ++j)
            flow(here[j], here[(j + 1) % k], v * (k - 1.0) / k, false);
        }
        for (std::size_t j = 0; j < k; ++j) flow(here[j], next[j % next.size()], hop / k, false);
      }
    }
  }
  return reached;
}

// The latency of a step whose flows reached `reached` (Machine::reach_latency_us).
inline double reach_latency_us(const Machine& m, int reached) {
  const auto& v = m.reach_latency_us;
  if (v.empty()) return reached == 0 ? m.nvlink_latency_us : 2.0;
  return v[std::min(static_cast<std::size_t>(reached), v.size() - 1)];
}

}  // namespace topoaware::mapper::routed

namespace topoaware::mapper {

// The routed model's time of one assignment: slot_of_rank[r] indexes Machine::slots.
inline double routed_reference_seconds(const Machine& m, const Traffic& t,
                                       const std::vector<std::uint32_t>& slot_of_rank) {
  if (static_cast<long long>(slot_of_rank.size()) != t.world) {
    throw std::invalid_argument("routed reference: ranks placed differ from the layout's world");
  }
  routed::Loads loads(m);
  double seconds = 0;
  std::vector<std::uint32_t> members;
  for (const DimTraffic& d : t.dims) {
    if (d.size <= 1 || d.bytes <= 0) continue;
    int reached = 0;
    const long long block = d.stride * d.size;
    for (long long outer = 0; outer < t.world; outer += block) {
      for (long long inner = 0; inner < d.stride; ++inner) {
        members.clear();
        for (long long i = 0; i < d.size; ++i) {
          members.push_back(slot_of_rank[static_cast<std::size_t>(outer + inner + i * d.stride)]);
        }
        reached = std::max(reached, routed::route_group(m, loads, d, members));
      }
    }
    const double steps = d.pattern == Pattern::kRing ? 2.0 * (d.size - 1) : 1.0;
    seconds += loads.finish() + d.calls * steps * routed::reach_latency_us(m, reached) * 1e-6;
  }
  if (!t.matrix.empty()) {
    for (const Flow& f : t.matrix) {
      routed::route_flow(m, loads, slot_of_rank[static_cast<std::size_t>(f.from)],
                         slot_of_rank[static_cast<std::size_t>(f.to)], f.bytes, true);
    }
    seconds += loads.finish();
  }
  return seconds;
}

// The routed model's optimum: every permutation of the instance's ranks over its slots.
inline double brute_force_routed(const Instance& in) {
  return best_over_permutations(in, [&](const std::vector<std::uint32_t>& a) {
    return routed_reference_seconds(in.machine, in.traffic, a);
  });
}

// The same over every split of the ranks over the hosts (best_over_host_splits: where a host's
// GPUs are alike).
inline double brute_force_routed_hosts(const Instance& in) {
  return best_over_host_splits(in, [&](const std::vector<std::uint32_t>& a) {
    return routed_reference_seconds(in.machine, in.traffic, a);
  });
}

}  // namespace topoaware::mapper
