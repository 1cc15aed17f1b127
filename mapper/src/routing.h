// Flow routing of the cost model, shared by the full evaluation (evaluate.cc) and the incremental
// one (incremental.cc): which resources a flow between two slots loads, and which flows a
// collective group's members exchange. One routine for both, so the two evaluations agree by
// construction and differ only in rounding.
#pragma once

#include <algorithm>
#include <cmath>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "topoaware/mapper/cost.h"
#include "topoaware/mapper/nccl_model.h"

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

// No relay GPU: a flow leaves by its sender's own NICs.
constexpr std::uint32_t kOwnNics = 0xffffffffu;
// Any GPU of the sender's host may relay (the explicit matrix, whose communicator is unknown).
constexpr std::uint32_t kAnyRelay = 0xfffffffeu;

// One flow of `bytes` from slot a to slot b. `relay`: the slot of the GPU that relays a
// send/recv by PXN (a GPU of the same communicator on a's host with b's NVML index: NCCL's
// topology holds only the communicator's own GPUs, search.cc ncclTopoGetNetDev), kOwnNics for a
// ring's or tree's hop (the graph's NICs, no PXN), kAnyRelay for a flow of the explicit matrix.
// The sink is told every resource it loads (`load(resource, bytes)`), the tier it travels
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
               double bytes, std::uint32_t relay, Sink& sink) {
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
  if (relay != kOwnNics && m.pxn[sa.host]) {
    // PXN: the local NICs of the relay GPU, after an NVLink hop to it.
    PortRange via{};
    if (relay == kAnyRelay) {
      via = m.relay_ports(sa.host, sb.gpu);
    } else if (relay != a) {
      via = m.slots[relay].ports;
    }
    if (via.count > 0) {
      if (sb.gpu != sa.gpu) sink.load(res.nv_out + a, bytes);
      out = via;
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
// sends to the other when NCCL runs Tree or NVLS-Tree there: one reduce and one broadcast over
// the single inter-node edge, so each node sends its `bytes` once where a ring sends V.
inline double two_node_tree_volume(double bytes) { return bytes; }

// NCCL's binary tree over `n` nodes (src/graph/trees.cc ncclGetBtree, rewritten): the parent of
// node r, -1 at the root 0. r's lowest set bit b: the parent is (r ^ b) | (b << 1), or r ^ b
// where that is past the end.
inline int btree_parent(int n, int r) {
  if (r <= 0 || r >= n) return -1;
  int bit = 1;
  while (!(bit & r)) bit <<= 1;
  int up = (r ^ bit) | (bit << 1);
  if (up >= n) up = r ^ bit;
  return up;
}
// The second tree of NCCL's double binary tree (ncclGetDtree): the first mirrored on an even
// count, shifted by one on an odd one.
inline int dtree_parent(int n, int r, int tree) {
  if (tree == 0) return btree_parent(n, r);
  if (n % 2 == 1) {
    const int u = btree_parent(n, (r - 1 + n) % n);
    return u == -1 ? -1 : (u + 1) % n;
  }
  const int u = btree_parent(n, n - 1 - r);
  return u == -1 ? -1 : n - 1 - u;
}

// What NCCL picks for the collectives of the cost model's groups (nccl_model.h), cached per dim
// and communicator shape: a step's groups have few shapes, and refinement re-routes the same
// groups many times.
class CollectiveModel {
 public:
  explicit CollectiveModel(const Traffic& t) : t_(t), calibrated_(t.calibration.measured()) {}
  // Whether the traffic carries a measured calibration (asked once, not per group).
  bool calibrated() const { return calibrated_; }
  const nccl::Choice& choice(std::size_t dim, nccl::Func func, const nccl::Comm& c) {
    const Key key{dim, c.ranks, c.nodes, c.max_local_ranks, c.nics, c.sm, c.nic_GBps, c.gpu_GBps,
                  c.nvswitch, c.nvlink, c.amd_cpu};
    // A dim's groups come one after another and mostly share a shape: the last one first.
    if (last_ && last_->first == key) return last_->second;
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      last_ = &*it;
      return it->second;
    }
    const DimTraffic& d = t_.dims[dim];
    nccl::Comm comm = c;
    comm.collnet = t_.collnet;
    const double call = d.bytes / std::max(1.0, d.calls);
    const nccl::Tuning tuning = nccl::tune(comm, t_.nccl);
    nccl::Choice ch;
    try {
      ch = nccl::choose(tuning, func, call, t_.nccl_algo ? &*t_.nccl_algo : nullptr);
    } catch (const Error&) {
      ch = nccl::choose(tuning, func, call);  // the forced algorithm does not exist here
    }
    auto at = cache_.emplace(key, ch).first;
    last_ = &*at;
    return at->second;
  }

  // How much faster than a ring's bytes over the GPUs' links NVLS runs an all-reduce on one node
  // of `local` GPUs like the communicator's (its bus bandwidth over theirs; 1 without NVLS): what
  // an NVLS-Tree's node charges its NVLink, never above the lower bound's view (bound/exposed.cc).
  double nvls_speedup(const nccl::Comm& c, int local) {
    const auto key = std::make_tuple(local, c.sm, c.gpu_GBps, c.nvswitch);
    auto it = speedup_.find(key);
    if (it != speedup_.end()) return it->second;
    nccl::Comm one = c;
    one.ranks = one.max_local_ranks = local;
    one.nodes = 1;
    const nccl::Tuning t = nccl::tune(one, t_.nccl);
    const double algbw = t.bandwidth[0][static_cast<std::size_t>(nccl::Algo::kNvls)]
                                    [static_cast<std::size_t>(nccl::Proto::kSimple)];
    const double bus = algbw * 2.0 * (local - 1) / std::max(1, local);
    return speedup_.emplace(key, std::max(1.0, bus / c.gpu_GBps)).first->second;
  }

 private:
  struct Key {
    std::size_t dim;
    int ranks, nodes, local_max, nics, sm;
    double nic, gpu;
    bool nvswitch, nvlink, amd;
    auto operator<=>(const Key&) const = default;
  };
  const Traffic& t_;
  bool calibrated_ = false;
  std::map<Key, nccl::Choice> cache_;
  const std::pair<const Key, nccl::Choice>* last_ = nullptr;
  std::map<std::tuple<int, int, double, bool>, double> speedup_;
};

// What a group costs beside the loads its flows put on resources: NCCL's own bandwidth time for
// its collectives (nccl_model.h; 0 for send/recv patterns, which NCCL does not tune), its latency
// per step, the highest level its flows reached, and the algorithm NCCL runs.
struct GroupCost {
  double nccl_seconds = 0;
  double latency_seconds = 0;
  int reached = 0;
  bool collective = false;
  nccl::Algo algo = nccl::Algo::kRing;
};

// The tier a group reaches (calibration.h): its hosts all in one host or NVLink domain, all under
// one group of the innermost level (or between hosts of a fabric without levels), or beyond.
inline Tier group_tier(const Machine& m, const std::uint32_t* members, long long n) {
  const std::uint32_t first = m.slots[members[0]].host;
  const int domain = m.domain_of_host[first];
  Tier tier = Tier::kNvlink;
  for (long long i = 1; i < n; ++i) {
    const std::uint32_t h = m.slots[members[i]].host;
    if (h == first || (domain >= 0 && m.domain_of_host[h] == domain)) continue;
    if (!m.levels.empty() && m.levels[0].group_of_host[h] != m.levels[0].group_of_host[first]) {
      return Tier::kSpine;
    }
    tier = Tier::kLeaf;
  }
  return tier;
}

// A sink whose loads weigh `factor` times their bytes (a calibrated group's); the bytes per tier
// and up the tree stay what the group sends.
template <class Sink>
struct ScaledSink {
  Sink& sink;
  double factor;
  void load(std::size_t r, double bytes) { sink.load(r, bytes * factor); }
  void tier(int t, double bytes) { sink.tier(t, bytes); }
  void crossed(std::size_t l, double bytes) { sink.crossed(l, bytes); }
};

// Scratch space of route_group: the group's members by NCCL node, and its members by (host, GPU)
// for PXN relays.
struct GroupScratch {
  NodeGroups nodes;
  std::vector<std::vector<std::uint32_t>> by_port;  // per node: members sorted by rail
  std::vector<std::uint64_t> relay;                  // (host << 32 | gpu) << 24 | member, sorted
  std::vector<std::uint32_t> ports;
};

// NCCL's latency for one send/recv: its ring's Simple hardware latency for the link class
// (tuning.cc hwLat: NVLink 3.4 us, PCI 5.7, network 14), NCCL having no latency model for
// point-to-point.
inline double p2p_latency_us(const Machine& m, std::uint32_t slot, int reached) {
  if (reached > 0) return 14.0;
  return m.pxn[m.slots[slot].host] ? 3.4 : 5.7;
}

// The extra latency of one network step that reached level `reached` over one that stays under a
// leaf: the fabric's switch hops above the first (Fabric::levels latency_us); NCCL's network
// latency (hwLat NET) stands for a typical hop.
inline double level_extra_us(const Machine& m, int reached) {
  if (reached <= 1) return 0;
  return std::max(0.0, reach_latency_us(m, reached) - reach_latency_us(m, 1));
}

// The flows of one group of dim `dim` whose members (slots, in rank order) are members[0..n),
// as the framework issues them and NCCL runs them (docs/mapper.md, "What NCCL runs"):
// - send/recv (pipeline) stage to stage both ways, a ring exchange member to the next, an
//   all-to-all every ordered pair: point-to-point, relayed by PXN through a GPU of the group;
// - an all-reduce or a reduce-scatter/all-gather: NCCL's choice for the group's shape (nodes,
//   GPUs and NICs a node), routed as that algorithm sends: Ring (nodes numbered by first rank, a
//   chain through each node's GPUs, one hop to the next node spread over the node's NICs, channel
//   c on the c-th NIC of each node in rail order), Tree and NVLS-Tree (NCCL's double binary tree
//   over the nodes, half the data each), NVLS (each GPU sends and receives its buffer through the
//   NVSwitch), CollNet (each node's buffer to the switches, which reduce it), PAT (rounds to the
//   ranks 2^k away).
template <class Sink>
GroupCost route_group(const Machine& m, const ResourceIndex& res, const Traffic& t, std::size_t dim,
                      const std::uint32_t* members, GroupScratch& scratch, CollectiveModel& model,
                      Sink& sink) {
  const DimTraffic& d = t.dims[dim];
  const long long n = d.size;
  GroupCost gc;
  // A site's calibration (calibration.h) of the group's class and tier: its bytes weigh 1 /
  // bandwidth on every resource they load (set once NCCL's algorithm is known).
  const bool calibrated = model.calibrated();
  const Tier tier = calibrated ? group_tier(m, members, n) : Tier::kNvlink;
  const Calibration::Entry* entry = nullptr;
  ScaledSink<Sink> scaled{sink, 1.0};
  auto flow = [&](std::uint32_t a, std::uint32_t b, double bytes, std::uint32_t relay) {
    const int r = route_flow(m, res, a, b, bytes, relay, scaled);
    gc.reached = std::max(gc.reached, r);
    return r;
  };
  auto calibrate = [&](std::size_t cls) {
    if (!calibrated) return;
    const Calibration::Entry& e = t.calibration.at(cls, tier);
    if (e.cases <= 0) return;
    entry = &e;
    scaled.factor = 1.0 / e.bandwidth;
  };
  const bool p2p = d.collective == Collective::kSendRecv ||
                   d.collective == Collective::kAllToAll ||
                   d.collective == Collective::kRingExchange;
  if (p2p) {
    calibrate(kP2pClass);
    // PXN relays: the group's member on the sender's host with the receiver's NVML index.
    auto& rel = scratch.relay;
    rel.clear();
    for (long long i = 0; n > 16 && i < n; ++i) {
      const Slot& s = m.slots[members[i]];
      rel.push_back(((static_cast<std::uint64_t>(s.host) << 32 | static_cast<std::uint32_t>(s.gpu))
                     << 24) |
                    static_cast<std::uint64_t>(i));
    }
    std::sort(rel.begin(), rel.end());
    auto relay_of = [&](std::uint32_t a, std::uint32_t b) -> std::uint32_t {
      const std::uint32_t host = m.slots[a].host;
      const int gpu = m.slots[b].gpu;
      if (n <= 16) {  // a scan beats sorting on the small groups most dims have
        for (long long i = 0; i < n; ++i) {
          const Slot& s = m.slots[members[i]];
          if (s.host == host && s.gpu == gpu) return members[i];
        }
        return kOwnNics;
      }
      const std::uint64_t key =
          (static_cast<std::uint64_t>(host) << 32 | static_cast<std::uint32_t>(gpu)) << 24;
      auto it = std::lower_bound(rel.begin(), rel.end(), key);
      if (it == rel.end() || (*it >> 24) != (key >> 24)) return kOwnNics;
      return members[*it & 0xffffffu];
    };
    double worst_lat = 0;
    auto send = [&](std::uint32_t a, std::uint32_t b, double bytes) {
      const int r = flow(a, b, bytes, relay_of(a, b));
      worst_lat = std::max(worst_lat, p2p_latency_us(m, a, r) + level_extra_us(m, r));
    };
    if (d.collective == Collective::kSendRecv) {
      for (long long i = 0; i + 1 < n; ++i) {
        send(members[i], members[i + 1], d.bytes);
        send(members[i + 1], members[i], d.bytes);
      }
    } else if (d.collective == Collective::kRingExchange) {
      for (long long i = 0; i < n; ++i) send(members[i], members[(i + 1) % n], d.bytes);
    } else {  // all-to-all: every ordered pair, bytes/n each
      const double each = d.bytes / static_cast<double>(n);
      for (long long i = 0; i < n; ++i) {
        for (long long j = 0; j < n; ++j) {
          if (i != j) send(members[i], members[j], each);
        }
      }
    }
    gc.latency_seconds = d.calls * worst_lat * 1e-6 * (entry ? entry->latency : 1.0);
    return gc;
  }
  // Collectives: the group's NCCL nodes in first-rank order.
  NodeGroups& hg = scratch.nodes;
  hg.reset(2 * m.hosts.size());
  for (long long i = 0; i < n; ++i) hg.add(nccl_node(m, m.slots[members[i]].host), members[i]);
  const std::size_t nodes = hg.order.size();
  // The communicator as NCCL sees it: the narrowest node's GPUs, NICs and links.
  nccl::Comm comm;
  comm.ranks = static_cast<int>(n);
  comm.nodes = static_cast<int>(nodes);
  comm.max_local_ranks = 0;
  comm.nics = 1 << 30;
  comm.nic_GBps = 1e30;
  comm.gpu_GBps = 1e30;
  comm.sm = 1 << 30;
  comm.nvswitch = comm.nvlink = true;
  comm.amd_cpu = false;
  if (scratch.by_port.size() < nodes) scratch.by_port.resize(nodes);
  for (std::size_t h = 0; h < nodes; ++h) {
    auto& here = scratch.by_port[h];
    here = hg.members[h];
    if (here.size() > 1) {
      std::sort(here.begin(), here.end(), [&](std::uint32_t x, std::uint32_t y) {
        const Slot& sx = m.slots[x];
        const Slot& sy = m.slots[y];
        return std::tie(sx.host, sx.port, sx.gpu) < std::tie(sy.host, sy.port, sy.gpu);
      });
    }
    comm.max_local_ranks = std::max(comm.max_local_ranks, static_cast<int>(here.size()));
    auto& ports = scratch.ports;
    ports.clear();
    for (std::uint32_t s : here) {
      const Slot& sl = m.slots[s];
      const std::uint32_t host = sl.host;
      comm.gpu_GBps = std::min(comm.gpu_GBps, m.slot_nvlink_gbps[s]);
      comm.sm = std::min(comm.sm, m.host_sm[host]);
      comm.nvswitch = comm.nvswitch && m.host_nvswitch[host];
      comm.nvlink = comm.nvlink && m.pxn[host];
      comm.amd_cpu = comm.amd_cpu || m.host_amd_cpu[host];
      for (std::uint32_t i = 0; i < sl.ports.count; ++i) {
        const std::uint32_t p = m.port_base[host] + m.port_list[sl.ports.begin + i];
        ports.push_back(p);
        comm.nic_GBps = std::min(comm.nic_GBps, m.port_gbps[p]);
      }
    }
    std::ptrdiff_t distinct = static_cast<std::ptrdiff_t>(ports.size());
    if (ports.size() > 1) {
      std::sort(ports.begin(), ports.end());
      distinct = std::unique(ports.begin(), ports.end()) - ports.begin();
    }
    comm.nics = std::min(comm.nics, static_cast<int>(std::max<std::ptrdiff_t>(1, distinct)));
  }
  if (comm.nic_GBps > 1e29) comm.nic_GBps = 0;
  const bool gather = d.collective == Collective::kGather;
  const nccl::Choice& ch =
      model.choice(dim, gather ? nccl::Func::kReduceScatter : nccl::Func::kAllReduce, comm);
  gc.collective = true;
  gc.algo = ch.algo;
  calibrate(static_cast<std::size_t>(ch.algo));
  gc.nccl_seconds = ch.algbw_GBps > 0 ? d.bytes / (ch.algbw_GBps * kGB) : 0;
  if (entry) gc.nccl_seconds /= entry->bandwidth;
  const double S = d.bytes;
  // A hop between nodes x and y carrying `bytes` per node: one piece per member of x, channel c
  // from the c-th member of x to the c-th of y in rail order (NCCL keeps a channel on its NIC).
  auto hop = [&](std::size_t x, std::size_t y, double bytes) {
    const auto& from = scratch.by_port[x];
    const auto& to = scratch.by_port[y];
    const double each = bytes / static_cast<double>(from.size());
    for (std::size_t j = 0; j < from.size(); ++j) flow(from[j], to[j % to.size()], each, kOwnNics);
  };
  // A chain through each node's GPUs carrying `volume` per member (ring or tree inside a node).
  auto chain = [&](double volume) {
    for (std::size_t h = 0; h < nodes; ++h) {
      const auto& here = hg.members[h];
      const std::size_t k = here.size();
      if (k < 2) continue;
      const double intra = volume * static_cast<double>(k - 1) / static_cast<double>(k);
      for (std::size_t j = 0; j < k; ++j) flow(here[j], here[(j + 1) % k], intra, kOwnNics);
    }
  };
  // NVLS on one node: the ring's bytes over NVLink at NCCL's NVLS speed-up over the GPUs' links
  // (its bus bandwidth over theirs), so the loads time the group as NCCL's model does and never
  // below the lower bound's view of a ring (bound/exposed.cc).
  auto nvls = [&]() {
    const double bus = ch.algbw_GBps * 2.0 * static_cast<double>(n - 1) / static_cast<double>(n);
    const double speedup = std::max(1.0, bus / comm.gpu_GBps);
    const double v = ring_volume(n, S) / speedup;
    for (long long i = 0; i < n; ++i) flow(members[i], members[(i + 1) % n], v, kOwnNics);
  };
  // NCCL's double binary tree over the nodes, half the buffer on each tree, up and down.
  auto trees = [&]() {
    if (nodes == 2) {
      hop(0, 1, two_node_tree_volume(S));
      hop(1, 0, two_node_tree_volume(S));
      return;
    }
    const int nn = static_cast<int>(nodes);
    for (int tree = 0; tree < 2; ++tree) {
      for (int r = 0; r < nn; ++r) {
        const int up = dtree_parent(nn, r, tree);
        if (up < 0) continue;
        hop(static_cast<std::size_t>(r), static_cast<std::size_t>(up), S / 2);
        hop(static_cast<std::size_t>(up), static_cast<std::size_t>(r), S / 2);
      }
    }
  };
  const double ring_v = gather ? static_cast<double>(n - 1) / static_cast<double>(n) * S
                               : ring_volume(n, S);
  double steps = 0;  // network steps a call takes, for the fabric's extra latency
  switch (ch.algo) {
    case nccl::Algo::kNvls:
      nvls();
      break;
    case nccl::Algo::kNvlsTree:
      // NVLS inside each node (the ring's chain at NVLS's speed-up), NCCL's trees between them.
      chain(ring_volume(n, S) / model.nvls_speedup(comm, static_cast<int>(n / nodes)));
      trees();
      steps = 2 * std::log2(static_cast<double>(nodes));
      break;
    case nccl::Algo::kTree:
      chain(ring_volume(n, S));
      trees();
      steps = 2 * std::log2(static_cast<double>(nodes));
      break;
    case nccl::Algo::kCollNetDirect:
    case nccl::Algo::kCollNetChain: {
      // Each node sends its buffer into the network and gets the result back; the switches
      // reduce it, so a switch group sends one buffer up and takes one down wherever the group
      // does not hold all the nodes.
      chain(ring_volume(n, S));
      for (std::size_t h = 0; h < nodes; ++h) {
        const auto& here = scratch.by_port[h];
        for (std::uint32_t s : here) {
          const Slot& sl = m.slots[s];
          const double each =
              S / static_cast<double>(here.size()) / std::max<std::uint32_t>(1, sl.ports.count);
          for (std::uint32_t i = 0; i < sl.ports.count; ++i) {
            const std::uint32_t p = m.port_base[sl.host] + m.port_list[sl.ports.begin + i];
            sink.load(res.nic_out + p, each);
            sink.load(res.nic_in + p, each);
          }
        }
        sink.tier(1, S);
      }
      gc.reached = std::max(gc.reached, 1);
      for (std::size_t l = 0; l < m.levels.size(); ++l) {
        std::vector<std::uint32_t> groups;
        for (std::size_t h = 0; h < nodes; ++h) {
          groups.push_back(m.levels[l].group_of_host[m.slots[hg.members[h][0]].host]);
        }
        std::sort(groups.begin(), groups.end());
        groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
        if (groups.size() < 2) break;
        for (std::uint32_t g : groups) {
          sink.load(res.up[l] + g, S);
          sink.load(res.down[l] + g, S);
          sink.crossed(l, S);
          sink.tier(static_cast<int>(2 + l), S);
        }
        gc.reached = std::max(gc.reached, static_cast<int>(2 + l));
      }
      steps = 2;
      break;
    }
    case nccl::Algo::kPat: {
      // One GPU a node: rounds to the rank 2^k ahead, min(2^k, n - 2^k)/n of the buffer each.
      for (long long k = 1; k < n; k *= 2) {
        const double bytes = static_cast<double>(std::min(k, n - k)) / static_cast<double>(n) * S;
        for (long long i = 0; i < n; ++i) flow(members[i], members[(i + k) % n], bytes, kOwnNics);
        steps += 1;
      }
      break;
    }
    case nccl::Algo::kRing:
      if (nodes == 1) {
        for (long long i = 0; i < n; ++i) flow(members[i], members[(i + 1) % n], ring_v, kOwnNics);
      } else {
        chain(ring_v);
        for (std::size_t h = 0; h < nodes; ++h) hop(h, (h + 1) % nodes, ring_v);
      }
      steps = (gather ? 1.0 : 2.0) * static_cast<double>(nodes - 1);
      break;
  }
  gc.latency_seconds = d.calls * (ch.latency_us + steps * level_extra_us(m, gc.reached)) * 1e-6 *
                       (entry ? entry->latency : 1.0);
  return gc;
}

}  // namespace topoaware::mapper::internal
