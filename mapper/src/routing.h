// Flow routing of the cost model, shared by the full evaluation (cost.cc) and the incremental
// one (incremental.cc): which resources a flow between two slots loads, and which flows a
// collective group's members exchange. One routine for both, so the two evaluations agree by
// construction and differ only in rounding.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "topoaware/mapper/cost.h"

namespace topoaware::mapper::internal {

constexpr double kGB = 1e9;

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

// One flow of `bytes` from slot a to slot b. The sink is told every resource it loads
// (`load(resource, bytes)`), the tier it travels (`tier(t, bytes)`: 0 NVLink, 1 network,
// 2 + l level l's uplinks) and every level it crosses (`crossed(l, bytes)`). Returns the level
// it reached: 0 inside a host or NVLink domain, 1 between hosts under one switch group, 2 + l
// when it crossed level l.
template <class Sink>
int route_flow(const Machine& m, const ResourceIndex& res, std::uint32_t a, std::uint32_t b,
               double bytes, Sink& sink) {
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
  int out_port = sa.port;
  if (m.rail_optimized) {
    // PXN: NCCL sends over the local NIC of the peer's rail, after an NVLink hop.
    out_port = std::min<int>(sb.port, static_cast<int>(m.port_count[sa.host]) - 1);
    if (out_port != sa.port) sink.load(res.nv_out + a, bytes);
  }
  sink.load(res.nic_out + m.port_base[sa.host] + static_cast<std::uint32_t>(out_port), bytes);
  sink.load(res.nic_in + m.port_base[sb.host] + static_cast<std::uint32_t>(sb.port), bytes);
  sink.tier(1, bytes);
  int reached = 1;
  for (std::size_t l = 0; l < m.levels.size(); ++l) {
    std::uint32_t ga = m.levels[l].group_of_host[sa.host];
    std::uint32_t gb = m.levels[l].group_of_host[sb.host];
    if (ga == gb) break;
    sink.load(res.up[l] + ga, bytes);
    sink.load(res.down[l] + gb, bytes);
    sink.crossed(l, bytes);
    sink.tier(static_cast<int>(2 + l), bytes);
    reached = static_cast<int>(2 + l);
  }
  return reached;
}

// Latency of one step of a collective whose flows reached `reached` (route_flow's levels).
inline double reach_latency_us(const Machine& m, int reached) {
  const auto& v = m.reach_latency_us;
  if (v.empty()) return reached == 0 ? m.nvlink_latency_us : 2.0;
  return v[std::min<std::size_t>(static_cast<std::size_t>(reached), v.size() - 1)];
}

// Scratch space for grouping a collective's members by host in first-rank order.
struct HostGroups {
  std::vector<std::uint32_t> stamp, pos;
  std::uint32_t gen = 0;
  std::vector<std::uint32_t> order;                 // hosts by first appearance
  std::vector<std::vector<std::uint32_t>> members;  // per position: slots in rank order

  void reset(std::size_t hosts) {
    if (stamp.size() != hosts) {
      stamp.assign(hosts, 0);
      pos.assign(hosts, 0);
      gen = 0;
    }
    ++gen;
    order.clear();
  }
  void add(std::uint32_t host, std::uint32_t slot) {
    if (stamp[host] != gen) {
      stamp[host] = gen;
      pos[host] = static_cast<std::uint32_t>(order.size());
      order.push_back(host);
      if (members.size() < order.size()) members.emplace_back();
      members[order.size() - 1].clear();
    }
    members[pos[host]].push_back(slot);
  }
};

// The flows of one group of dim `d` whose members (slots, in rank order) are members[0..n):
// pipeline stage to stage both ways; NCCL's ring (nodes numbered by first rank, a chain through
// each node's GPUs, one hop to the next node spread over the node's GPUs' NICs); all-to-all
// every ordered pair. Returns the highest level a flow reached.
template <class Sink>
int route_group(const Machine& m, const ResourceIndex& res, const DimTraffic& d,
                const std::uint32_t* members, HostGroups& hg, Sink& sink) {
  const long long n = d.size;
  int reached = 0;
  auto flow = [&](std::uint32_t a, std::uint32_t b, double bytes) {
    reached = std::max(reached, route_flow(m, res, a, b, bytes, sink));
  };
  if (d.pattern == Pattern::kPipeline) {
    for (long long i = 0; i + 1 < n; ++i) {
      flow(members[i], members[i + 1], d.bytes);
      flow(members[i + 1], members[i], d.bytes);
    }
  } else if (d.pattern == Pattern::kRing) {
    hg.reset(m.hosts.size());
    for (long long i = 0; i < n; ++i) hg.add(m.slots[members[i]].host, members[i]);
    const std::size_t hosts = hg.order.size();
    const double v = 2.0 * static_cast<double>(n - 1) / static_cast<double>(n) * d.bytes;
    if (hosts == 1) {
      for (long long i = 0; i < n; ++i) flow(members[i], members[(i + 1) % n], v);
    } else {
      for (std::size_t h = 0; h < hosts; ++h) {
        const auto& here = hg.members[h];
        const auto& next = hg.members[(h + 1) % hosts];
        const std::size_t k = here.size();
        if (k >= 2) {
          double intra = v * static_cast<double>(k - 1) / static_cast<double>(k);
          for (std::size_t j = 0; j < k; ++j) flow(here[j], here[(j + 1) % k], intra);
        }
        for (std::size_t j = 0; j < k; ++j) {
          flow(here[j], next[j % next.size()], v / static_cast<double>(k));
        }
      }
    }
  } else {  // all-to-all: every ordered pair, bytes/n each
    const double each = d.bytes / static_cast<double>(n);
    for (long long i = 0; i < n; ++i) {
      for (long long j = 0; j < n; ++j) {
        if (i != j) flow(members[i], members[j], each);
      }
    }
  }
  return reached;
}

}  // namespace topoaware::mapper::internal
