// Flow routing of the cost model, shared by the full evaluation (evaluate.cc) and the incremental
// one (incremental.cc): which resources a flow between two slots loads, and which flows a
// collective group's members exchange. One routine for both, so the two evaluations agree by
// construction and differ only in rounding.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "topoaware/mapper/cost.h"

namespace topoaware::mapper::internal {

constexpr double kGB = 1e9;
// What build_machine() gives a group with no uplink to charge (the top of the tree), in GB/s: no
// limit. The lower bound reads it to tell such a group's exits from a real uplink.
constexpr double kUnlimitedGbps = 1e9;

// Resource indexes: [nv_out slots][nv_in slots][nic_out ports][nic_in ports][per level: up, down]
struct ResourceIndex {
  std::size_t nv_out = 0, nv_in = 0, nic_out = 0, nic_in = 0;
  std::vector<std::size_t> up, down;  // per level
  std::size_t total = 0;
};

inline ResourceIndex resource_index(const Machine& m) {
  ResourceIndex r;
  std::size_t s = m.slots.size(), p = m.port_gbps.size();
  r.nv_out = 0;
  r.nv_in = s;
  r.nic_out = 2 * s;
  r.nic_in = 2 * s + p;
  std::size_t at = 2 * s + 2 * p;
  for (const auto& l : m.levels) {
    r.up.push_back(at);
    r.down.push_back(at + l.uplink_gbps.size());
    at += 2 * l.uplink_gbps.size();
  }
  r.total = at;
  return r;
}

// Bandwidth of every resource, bytes per second.
inline std::vector<double> resource_capacity(const Machine& m, const ResourceIndex& r) {
  std::vector<double> cap(r.total, 0.0);
  for (std::size_t s = 0; s < m.slots.size(); ++s) {
    cap[r.nv_out + s] = cap[r.nv_in + s] = m.slot_nvlink_gbps[s] * kGB;
  }
  for (std::size_t p = 0; p < m.port_gbps.size(); ++p) {
    cap[r.nic_out + p] = cap[r.nic_in + p] = m.port_gbps[p] * kGB;
  }
  for (std::size_t l = 0; l < m.levels.size(); ++l) {
    for (std::size_t g = 0; g < m.levels[l].uplink_gbps.size(); ++g) {
      cap[r.up[l] + g] = cap[r.down[l] + g] = m.levels[l].uplink_gbps[g] * kGB;
    }
  }
  return cap;
}

// A host's NVLink island, which is also its NCCL node, as a key below 2 x hosts (NodeGroups): the
// host's NVLink domain, or the host itself outside any domain. A flow inside an island goes over
// NVLink; and with MNNVL NCCL merges the topology of every GPU of one NVLink clique and counts
// the clique as one node (its rings, trees and algorithm choice see nodes, not hosts).
inline std::uint32_t nccl_node(const Machine& m, std::size_t h) {
  const int d = m.domain_of_host[h];
  return static_cast<std::uint32_t>(d >= 0 ? m.hosts.size() + static_cast<std::size_t>(d) : h);
}

// Parallel links ECMP hashes each resource's flows onto: 0 where flows spread evenly (NVLink,
// NICs, adaptive routing), the group's uplink links on an ECMP level.
inline std::vector<std::uint32_t> resource_ecmp_links(const Machine& m, const ResourceIndex& r) {
  std::vector<std::uint32_t> links(r.total, 0);
  for (std::size_t l = 0; l < m.levels.size(); ++l) {
    const NetLevel& nl = m.levels[l];
    if (!nl.ecmp) continue;
    for (std::size_t g = 0; g < nl.uplink_gbps.size(); ++g) {
      const std::uint32_t k = g < nl.uplink_links.size() ? nl.uplink_links[g] : 1;
      links[r.up[l] + g] = links[r.down[l] + g] = k;
    }
  }
  return links;
}

// ECMP: flows hashed onto `links` parallel links, `flows` the effective number of equal flows
// ((sum bytes)^2 / sum bytes^2). The expected load of the busiest link over the mean load
// (docs/mapper.md, "ECMP"): a normal approximation of the largest of `links` bins, at least one
// whole flow on the link that carries it, at most every flow on one link.
inline double ecmp_factor(double flows, std::uint32_t links) {
  if (links <= 1 || !(flows > 0)) return 1.0;
  const double L = static_cast<double>(links);
  // Expected largest of L standard normals, Blom's approximation Phi^-1((L - 0.375)/(L + 0.25)).
  const double p = (L - 0.375) / (L + 0.25);
  // Inverse normal CDF for p in (0.5, 1): Abramowitz & Stegun 26.2.23 (|error| < 4.5e-4).
  const double t = std::sqrt(-2.0 * std::log(1.0 - p));
  const double z = t - (2.515517 + 0.802853 * t + 0.010328 * t * t) /
                           (1.0 + 1.432788 * t + 0.189269 * t * t + 0.001308 * t * t * t);
  const double normal = 1.0 + z * std::sqrt((L - 1.0) / flows);
  return std::min(L, std::max({1.0, L / flows, normal}));
}

// One flow of `bytes` from slot a to slot b. `p2p`: a send/recv (all-to-all, pipeline, an
// explicit flow), which NCCL sends by PXN; else a ring's hop, which leaves by the sender's own
// NICs. The sink is told every resource it loads (`load(resource, bytes)`), the tier it travels
// (`tier(t, bytes)`: 0 NVLink, 1 network, 2 + l level l's uplinks) and every level it crosses
// (`crossed(l, bytes)`). Returns the level it reached: 0 inside a host or NVLink domain, 1
// between hosts under one switch group, 2 + l when it crossed level l.
//
// Between hosts a flow is cut into one piece per channel: the i-th of the sending ports with
// the i-th of the receiving GPU's ports (a GPU with several NICs spreads its channels over
// them). On a rail-optimized fabric a piece between different rails climbs to the switches
// above the rails even inside one leaf group.
template <class Sink>
int route_flow(const Machine& m, const ResourceIndex& res, std::uint32_t a, std::uint32_t b,
               double bytes, bool p2p, Sink& sink) {
  if (a == b || bytes <= 0) return 0;
  const Slot& sa = m.slots[a];
  const Slot& sb = m.slots[b];
  if (sa.host == sb.host ||
      (m.domain_of_host[sa.host] >= 0 && m.domain_of_host[sa.host] == m.domain_of_host[sb.host])) {
    sink.load(res.nv_out + a, bytes);
    sink.load(res.nv_in + b, bytes);
    sink.tier(0, bytes);
    return 0;
  }
  PortRange out = sa.ports;
  if (p2p && m.pxn[sa.host]) {
    // PXN: the local NICs of the GPU with the peer's NVML index, after an NVLink hop to it.
    const PortRange relay = m.relay_ports(sa.host, sb.gpu);
    if (relay.count > 0) {
      if (sb.gpu != sa.gpu) sink.load(res.nv_out + a, bytes);
      out = relay;
    }
  }
  const PortRange in = sb.ports;
  const std::uint32_t pieces = std::max<std::uint32_t>(1, std::max(out.count, in.count));
  const double each = bytes / static_cast<double>(pieces);
  sink.tier(1, bytes);
  int reached = 1;
  for (std::uint32_t i = 0; i < pieces; ++i) {
    const std::uint32_t po = m.port_list[out.begin + i % out.count];
    const std::uint32_t pi = m.port_list[in.begin + i % in.count];
    sink.load(res.nic_out + m.port_base[sa.host] + po, each);
    sink.load(res.nic_in + m.port_base[sb.host] + pi, each);
    const bool cross_rail = m.rail_optimized && po != pi;
    for (std::size_t l = 0; l < m.levels.size(); ++l) {
      const std::uint32_t ga = m.levels[l].group_of_host[sa.host];
      const std::uint32_t gb = m.levels[l].group_of_host[sb.host];
      if (ga == gb && !(l == 0 && cross_rail)) break;
      sink.load(res.up[l] + ga, each);
      sink.load(res.down[l] + gb, each);
      sink.crossed(l, each);
      sink.tier(static_cast<int>(2 + l), each);
      reached = std::max(reached, static_cast<int>(2 + l));
    }
  }
  return reached;
}

// Latency of one step of a collective whose flows reached `reached` (route_flow's levels).
inline double reach_latency_us(const Machine& m, int reached) {
  const auto& v = m.reach_latency_us;
  if (v.empty()) return reached == 0 ? m.nvlink_latency_us : 2.0;
  return v[std::min<std::size_t>(static_cast<std::size_t>(reached), v.size() - 1)];
}

// Latency steps of one call of a dim: a ring's 2 (n - 1), one for an all-to-all or a stage's send.
inline double latency_steps(const DimTraffic& d) {
  return d.pattern == Pattern::kRing ? 2.0 * (d.size - 1.0) : 1.0;
}

// Scratch space for grouping a collective's members by NCCL node (host, or NVLink clique) in
// first-rank order.
struct NodeGroups {
  std::vector<std::uint32_t> stamp, pos;
  std::uint32_t gen = 0;
  std::vector<std::uint32_t> order;                 // nodes by first appearance
  std::vector<std::vector<std::uint32_t>> members;  // per position: slots in rank order

  void reset(std::size_t nodes) {
    if (stamp.size() != nodes) {
      stamp.assign(nodes, 0);
      pos.assign(nodes, 0);
      gen = 0;
    }
    ++gen;
    order.clear();
  }
  void add(std::uint32_t node, std::uint32_t slot) {
    if (stamp[node] != gen) {
      stamp[node] = gen;
      pos[node] = static_cast<std::uint32_t>(order.size());
      order.push_back(node);
      if (members.size() < order.size()) members.emplace_back();
      members[order.size() - 1].clear();
    }
    members[pos[node]].push_back(slot);
  }
};

// What one member of a ring group sends around the ring: V = 2 (n-1)/n x bytes (NCCL's ring
// all-reduce; a ring of K/V blocks alike). The one place this volume is written.
inline double ring_volume(long long n, double bytes) {
  return 2.0 * static_cast<double>(n - 1) / static_cast<double>(n) * bytes;
}

// What one node of an all-reduce group spanning exactly two NCCL nodes (hosts, or NVLink cliques)
// sends to the other: NCCL runs Tree (or NVLS-Tree) there, one reduce and one broadcast over the
// single inter-node edge, so each node sends its `bytes` once where a ring sends V
// (docs/mapper.md).
inline double two_node_tree_volume(double bytes) { return bytes; }

// The flows of one group of dim `d` whose members (slots, in rank order) are members[0..n):
// pipeline stage to stage both ways; NCCL's ring (nodes, nccl_node(), numbered by first rank, a
// chain through each node's GPUs, one hop to the next node spread over the node's GPUs' NICs; an
// all-reduce on two nodes runs as a tree and sends `bytes` each way); all-to-all every ordered
// pair. Returns the highest level a flow reached.
template <class Sink>
int route_group(const Machine& m, const ResourceIndex& res, const DimTraffic& d,
                const std::uint32_t* members, NodeGroups& hg, Sink& sink) {
  const long long n = d.size;
  int reached = 0;
  auto flow = [&](std::uint32_t a, std::uint32_t b, double bytes, bool p2p) {
    reached = std::max(reached, route_flow(m, res, a, b, bytes, p2p, sink));
  };
  if (d.pattern == Pattern::kPipeline) {
    for (long long i = 0; i + 1 < n; ++i) {
      flow(members[i], members[i + 1], d.bytes, true);
      flow(members[i + 1], members[i], d.bytes, true);
    }
  } else if (d.pattern == Pattern::kRing) {
    hg.reset(2 * m.hosts.size());
    for (long long i = 0; i < n; ++i) hg.add(nccl_node(m, m.slots[members[i]].host), members[i]);
    const std::size_t nodes = hg.order.size();
    const double v = ring_volume(n, d.bytes);
    if (nodes == 1) {
      for (long long i = 0; i < n; ++i) flow(members[i], members[(i + 1) % n], v, false);
    } else {
      const bool tree = d.all_reduce && nodes == 2;
      const double hop = tree ? two_node_tree_volume(d.bytes) : v;
      for (std::size_t h = 0; h < nodes; ++h) {
        const auto& here = hg.members[h];
        const auto& next = hg.members[(h + 1) % nodes];
        const std::size_t k = here.size();
        if (k >= 2) {
          double intra = v * static_cast<double>(k - 1) / static_cast<double>(k);
          for (std::size_t j = 0; j < k; ++j) flow(here[j], here[(j + 1) % k], intra, false);
        }
        for (std::size_t j = 0; j < k; ++j) {
          flow(here[j], next[j % next.size()], hop / static_cast<double>(k), false);
        }
      }
    }
  } else {  // all-to-all: every ordered pair, bytes/n each
    const double each = d.bytes / static_cast<double>(n);
    for (long long i = 0; i < n; ++i) {
      for (long long j = 0; j < n; ++j) {
        if (i != j) flow(members[i], members[j], each, true);
      }
    }
  }
  return reached;
}

}  // namespace topoaware::mapper::internal
