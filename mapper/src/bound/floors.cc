// The lower bound's view of the machine (BoundMachine) and each dim's floors: the least time a dim
// takes given how many members of a rank's group share its host or its island, and the crossing
// floor that holds wherever its ranks sit (docs/mapper.md, "Lower bound").
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "bound/bound.h"
#include "routing.h"
#include "topoaware/mapper/cost.h"
#include "topoaware/mapper/layout.h"

namespace topoaware::mapper::internal {

namespace {

// The least a ring group's hop between two NCCL nodes (hosts, or NVLink cliques: nccl_node())
// carries: V, or the bytes themselves where NCCL may run the all-reduce as a two-node tree: the
// `others` members not on the rank's node fit on one node of at most kmax slots.
double least_hop(const DimTraffic& dt, long long others, long long kmax) {
  const double ring = internal::ring_volume(dt.size, dt.bytes);
  if (!dt.all_reduce || others > kmax) return ring;
  return std::min(ring, internal::two_node_tree_volume(dt.bytes));
}

// Members of one group that can share a "bin" (host, NVLink domain, level group) without
// splitting: how many groups of size n must be split over bins of the given slot counts.
double split_groups(const std::vector<long long>& bin_slots, long long n, long long groups) {
  long long whole = 0;
  for (long long c : bin_slots) whole += c / n;
  return static_cast<double>(std::max(0LL, groups - whole));
}

// Ring and all-to-all members are alike: when a rank's place holds k < n members, the other
// n - k sit on other places holding at most n - k each, and the dim takes at least as long as
// those members' own bound. floors[k-1] is the bound for k members on the rank's place.
void raise_by_other_members(std::vector<double>& floors, long long n) {
  const auto kcap = static_cast<long long>(floors.size());
  const std::vector<double> least = prefix_min(floors);
  for (long long k = 1; k <= kcap && k < n; ++k) {
    const long long j = std::min(n - k, kcap);
    auto& v = floors[static_cast<std::size_t>(k - 1)];
    v = std::max(v, least[static_cast<std::size_t>(j - 1)]);
  }
}

// A rank receives `on_host_bytes` that must come over NVLink and `off_host_bytes` that may come
// over NVLink (from its NVLink domain) or into its own NIC port: the least time of the best split
// of the latter.
double least_split(double on_host_bytes, double off_host_bytes, double nv, double port) {
  // Bytes by NIC that balance both.
  const double by_nic = port * (on_host_bytes + off_host_bytes) / (nv + port);
  return by_nic <= off_host_bytes ? (on_host_bytes + off_host_bytes) / (nv + port)
                                  : std::max(on_host_bytes / nv, off_host_bytes / port);
}

// The least time of a ring member whose NCCL node holds j of its group: all n there, V over
// NVLink; else (j-1)/j V along the node's chain over NVLink and hop/j to the next node by its own
// NICs, the hop a two-node tree's bytes where the others may fit on one node of `node_kmax`
// slots (never with `ring_only`).
double ring_on_node(const DimTraffic& dt, long long j, long long node_kmax, bool ring_only,
                    double nv, double port) {
  const double ring = internal::ring_volume(dt.size, dt.bytes);
  if (j == dt.size) return ring / nv;
  const double jd = static_cast<double>(j);
  const double hop = ring_only ? ring : least_hop(dt, dt.size - j, node_kmax);
  return std::max((jd - 1) / jd * ring / nv, hop / (jd * port));
}

// An all-reduce runs as a tree only on groups that span exactly two nodes, here hosts (the floor
// is left out with NVLink domains, whose nodes are cliques of hosts). A host lending
// 1..j slots (j < n/2) holds a piece of at most j members of some group; were that group a
// two-host tree, its other host would hold n - k >= n - j members of it, and two such hosts
// cannot share one group (their pieces add up to less than n). A host of c slots holds n - j
// members of at most floor(c / (n - j)) groups. So when there are more such small hosts than
// that capacity, some small host's piece (of at most j members) is on a ring and sends its hop V
// through its own ports: the dim takes at least V / (j port). Without NVLink domains only (a ring
// hop to a host of the same domain goes over NVLink).
double tree_shortfall_floor(const DimTraffic& dt, const BoundMachine& summary) {
  const long long n = dt.size;
  if (!dt.all_reduce || dt.pattern != Pattern::kRing || summary.has_domains || n < 3) return 0;
  const double ring = internal::ring_volume(n, dt.bytes);
  double floor = 0;
  for (long long j = 1; 2 * j < n; ++j) {
    long long small = 0, partners = 0;
    for (long long c : summary.host_slots) {
      if (c >= 1 && c <= j) ++small;
      partners += c / (n - j);
    }
    if (small > partners) floor = std::max(floor, ring / (static_cast<double>(j) * summary.port));
  }
  // One-GPU pieces, where no host holds more than n slots: a tree needs its one-GPU piece's
  // partner to hold n - 1 of the group. A host of n - 1 slots can; a host of n slots can only by
  // leaving its last slot to a one-GPU piece of another group; smaller hosts cannot. So there are
  // at least h1 + s one-GPU pieces for at most h_{n-1} + s partners (s: hosts of n slots split
  // n-1 + 1, h_c: hosts of c slots), and where h1 > h_{n-1} some one-GPU piece is on a ring.
  if (summary.kmax <= n) {
    long long h1 = 0, hn1 = 0;
    for (long long c : summary.host_slots) {
      h1 += c == 1 ? 1 : 0;
      hn1 += c == n - 1 ? 1 : 0;
    }
    if (h1 > hn1) floor = std::max(floor, ring / summary.port);
  }
  return floor;
}

}  // namespace

// Every host's NIC ports together, bytes/s: what leaves an island, in one place.
std::vector<double> host_port_capacity(const Machine& machine) {
  std::vector<double> cap(machine.hosts.size(), 0);
  for (std::size_t h = 0; h < machine.hosts.size(); ++h) {
    for (std::uint32_t p = 0; p < machine.port_count[h]; ++p)
      cap[h] += machine.port_gbps[machine.port_base[h] + p] * kGB;
  }
  return cap;
}

// The least hop of a group split over nodes in any way: a two-node tree needs n <= 2 kmax.
double any_split_hop(const DimTraffic& dt, long long kmax) {
  return least_hop(dt, dt.size - std::min(kmax, static_cast<long long>(dt.size) - 1), kmax);
}

// Floors over counts 1..k: p[k-1] = the least of v[0..k-1] (a floor for "at most k members").
std::vector<double> prefix_min(const std::vector<double>& v) {
  std::vector<double> p(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) p[i] = i == 0 ? v[0] : std::min(p[i - 1], v[i]);
  return p;
}

// The least time of a pipeline stage with `neighbours` (1 or 2) neighbour stages, k stages of
// its group on its host (itself included): each neighbour sends it S, into its NVLink ingress
// when on its host (at most k - 1 are) or, with NVLink domains, from a host of its domain;
// otherwise into its own NIC port (a flow enters by the receiver's port, PXN or not).
double pipe_stage(int neighbours, long long k, bool domains, double bytes, double nv, double port) {
  const int most_nvlink =
      domains ? neighbours : static_cast<int>(std::min<long long>(neighbours, k - 1));
  double best = std::numeric_limits<double>::infinity();
  for (int a = 0; a <= most_nvlink; ++a) {
    best = std::min(best, std::max(a * bytes / nv, (neighbours - a) * bytes / port));
  }
  return best;
}

// What a dim's steps wait beyond the least latency once some group of it leaves an island: the
// model charges a dim the latency of the highest level any of its flows reaches.
double network_latency(const DimTraffic& dt, const BoundMachine& summary) {
  return dt.calls * latency_steps(dt) * (summary.lat_network - summary.lat_min) * 1e-6;
}

BoundMachine bound_machine(const Machine& machine) {
  BoundMachine summary;
  summary.nv =
      *std::max_element(machine.slot_nvlink_gbps.begin(), machine.slot_nvlink_gbps.end()) * kGB;
  for (std::size_t s = 0; s < machine.slots.size(); ++s)
    summary.port = std::max(summary.port, machine.slot_port_gbps(s));
  summary.port *= kGB;
  summary.has_domains = std::any_of(machine.domain_of_host.begin(), machine.domain_of_host.end(),
                                    [](int d) { return d >= 0; });
  summary.host_slots.assign(machine.hosts.size(), 0);
  for (const auto& s : machine.slots) ++summary.host_slots[s.host];
  summary.kmax = *std::max_element(summary.host_slots.begin(), summary.host_slots.end());
  for (double g : machine.slot_nvlink_gbps) summary.total_egress += g * kGB;
  for (double g : machine.port_gbps) summary.total_egress += g * kGB;
  // The latencies the model charges (reach_latency_us(): reach 0 on NVLink, 1 between hosts,
  // then across levels; a machine without the table charges defaults), least overall and least
  // beyond an island.
  summary.lat_network = internal::reach_latency_us(machine, 1);
  for (std::size_t r = 2; r < machine.reach_latency_us.size(); ++r) {
    summary.lat_network =
        std::min(summary.lat_network, internal::reach_latency_us(machine, static_cast<int>(r)));
  }
  summary.lat_min = std::min(internal::reach_latency_us(machine, 0), summary.lat_network);
  // Islands: an NVLink domain's hosts in the step, or a host outside any domain. Flows inside an
  // island go over NVLink; every flow between islands leaves by a NIC port. (Hosts without slots
  // hold no rank and are left out.)
  const std::vector<double> host_ports = host_port_capacity(machine);
  std::map<std::uint32_t, std::size_t> idx;
  BoundMachine::Bins islands;
  for (std::size_t h = 0; h < machine.hosts.size(); ++h) {
    auto [it, fresh] = idx.emplace(internal::nccl_node(machine, h), islands.slots.size());
    if (fresh) islands.slots.push_back(0);
    islands.slots[it->second] += summary.host_slots[h];
    islands.cap += host_ports[h];
  }
  idx.clear();
  for (std::size_t h = 0; h < machine.hosts.size(); ++h) {
    if (summary.host_slots[h] == 0) continue;
    auto [it, fresh] = idx.emplace(internal::nccl_node(machine, h), idx.size());
    if (fresh) summary.island_slots.push_back(0);
    summary.island_slots[it->second] += summary.host_slots[h];
  }
  summary.island_kmax = *std::max_element(summary.island_slots.begin(), summary.island_slots.end());
  summary.bins.push_back(std::move(islands));
  for (const auto& l : machine.levels) {
    BoundMachine::Bins bin;
    bin.slots.assign(l.uplink_gbps.size(), 0);
    for (const auto& s : machine.slots) ++bin.slots[l.group_of_host[s.host]];
    for (std::size_t g = 0; g < l.uplink_gbps.size(); ++g) {
      if (bin.slots[g] > 0) bin.cap += l.uplink_gbps[g] * kGB;
    }
    summary.bins.push_back(std::move(bin));
  }
  return summary;
}

// A dim's crossing floor, which holds wherever its ranks sit: groups that cannot fit whole in the
// bins of a tier send at least so much across that tier's capacity; a group split over islands
// sends its hop out through at most min(n-1, kmax) members' ports; every rank's bytes leave
// through the machine's total egress.
double crossing_floor(const DimTraffic& dt, long long world, const BoundMachine& summary) {
  const long long n = dt.size;
  const double bytes = dt.bytes, nd = static_cast<double>(n);
  const long long groups = world / n;
  const double hop = any_split_hop(dt, summary.island_kmax);
  double cross = 0;
  for (const auto& bin : summary.bins) {
    const double split = split_groups(bin.slots, n, groups);
    const long long cmax =
        bin.slots.empty() ? 0 : *std::max_element(bin.slots.begin(), bin.slots.end());
    double per_split = 0;
    if (dt.pattern == Pattern::kRing) {
      per_split = 2 * hop;
    } else if (dt.pattern == Pattern::kAllToAll) {
      per_split = std::max(internal::ring_volume(n, bytes),
                           static_cast<double>(std::max(0LL, n - cmax)) * bytes);
    } else {
      per_split = 2 * bytes;
    }
    if (bin.cap > 0) cross = std::max(cross, split * per_split / bin.cap);
    if (&bin == &summary.bins[0] && split > 0) {
      // Some group leaves its island (its NCCL node): its hop out is spread over the ports of
      // its members there (at most min(n-1, island_kmax) of them), and a split pipeline sends a
      // stage's whole message through one GPU's ports.
      if (dt.pattern == Pattern::kRing) {
        cross = std::max(cross, hop / (static_cast<double>(std::min(n - 1, summary.island_kmax)) *
                                       summary.port));
      } else if (dt.pattern == Pattern::kPipeline) {
        cross = std::max(cross, bytes / summary.port);
      } else {
        // The smallest piece (at most n/2 members) receives half its bytes or more from off the
        // island, each flow into the receiver's own ports (PXN or not).
        cross = std::max(cross, 0.5 * bytes / summary.port);
      }
    }
  }
  double total_bytes = 0;
  if (dt.pattern == Pattern::kRing) {
    // Each member sends (k-1)/k V by NVLink and at least hop/k by NIC, so at least the hop.
    total_bytes = static_cast<double>(world) * hop;
  } else if (dt.pattern == Pattern::kAllToAll) {
    total_bytes = static_cast<double>(world) * (nd - 1) / nd * bytes;
  } else {
    total_bytes = 2.0 * static_cast<double>(groups) * (nd - 1) * bytes;
  }
  return std::max({cross, total_bytes / summary.total_egress, tree_shortfall_floor(dt, summary)});
}

// The dim's host floors: [k-1] the least time of the dim given that some rank has k members of its
// group (itself included) on its host, k = 1..min(n, kmax). `pipe_floor` receives a pipeline's
// middle-stage floor, which holds wherever the rank sits.
std::vector<double> host_floors(const DimTraffic& dt, const BoundMachine& summary, double cross,
                                double* pipe_floor, bool ring_only) {
  const long long n = dt.size;
  const double bytes = dt.bytes, nd = static_cast<double>(n);
  const double nv = summary.nv, port = summary.port;
  const long long kcap = std::min(n, summary.kmax);
  std::vector<double> floors(static_cast<std::size_t>(kcap), 0.0);
  *pipe_floor = 0;
  for (long long k = 1; k <= kcap; ++k) {
    double v = 0;
    const double kd = static_cast<double>(k);
    if (dt.pattern == Pattern::kRing) {
      // The rank's NCCL node is its host, or its NVLink clique holding some j >= k of the group.
      const long long top = summary.has_domains ? std::min(n, summary.island_kmax) : k;
      v = std::numeric_limits<double>::infinity();
      for (long long j = k; j <= top; ++j) {
        v = std::min(v, ring_on_node(dt, j, summary.island_kmax, ring_only, nv, port));
      }
    } else if (dt.pattern == Pattern::kAllToAll) {
      // What the rank receives: on_host_bytes from its host over NVLink, off_host_bytes from off
      // the host, each flow into its own NIC ports (PXN or not) or, from a host of its NVLink
      // domain, over NVLink.
      const double on_host_bytes = (kd - 1) * bytes / nd, off_host_bytes = (nd - kd) * bytes / nd;
      if (k == n) {
        v = on_host_bytes / nv;
      } else if (!summary.has_domains) {
        v = std::max(on_host_bytes / nv, off_host_bytes / port);
      } else {
        v = least_split(on_host_bytes, off_host_bytes, nv, port);
      }
    } else {
      // Pipeline.
      const double end = pipe_stage(1, k, summary.has_domains, bytes, nv, port);  // an end stage
      if (n == 2) {
        v = end;
      } else {
        // The rank the bound speaks for may be an end stage; a middle stage exists too and holds
        // at most kcap stages on its host.
        *pipe_floor = pipe_stage(2, kcap, summary.has_domains, bytes, nv, port);
        v = std::max(std::min(pipe_stage(2, k, summary.has_domains, bytes, nv, port), end),
                     *pipe_floor);
      }
    }
    floors[static_cast<std::size_t>(k - 1)] = std::max(v, cross);
  }
  if (dt.pattern != Pattern::kPipeline) raise_by_other_members(floors, n);
  return floors;
}

// The dim's island floors: [k-1] the least time of the dim given that some rank has k members on
// its island (k < n: the group leaves the island, and what leaves goes through NIC ports, never
// NVLink). `by_host` are the host floors: the rank's host holds between 1 and min(k, kmax) of the
// k.
std::vector<double> island_floors(const DimTraffic& dt, const BoundMachine& summary, double cross,
                                  double pipe_floor, const std::vector<double>& by_host,
                                  bool ring_only) {
  const long long n = dt.size;
  const double bytes = dt.bytes, nd = static_cast<double>(n);
  const double nv = summary.nv, port = summary.port;
  const long long kcap_i = std::min(n, summary.island_kmax);
  std::vector<double> floors(static_cast<std::size_t>(kcap_i), 0.0);
  const std::vector<double> host_min = prefix_min(by_host);  // the host-count floor
  for (long long k = 1; k <= kcap_i; ++k) {
    double v = 0;
    const double kd = static_cast<double>(k);
    if (dt.pattern == Pattern::kRing) {
      v = ring_on_node(dt, k, summary.island_kmax, ring_only, nv, port);  // the island is the node
    } else if (dt.pattern == Pattern::kAllToAll) {
      // The rank's k - 1 island peers use NVLink both ways; the n - k others each send bytes/n
      // into the rank's own NIC ports (a flow enters by the receiver's ports, PXN or not).
      const double on_host_bytes = (kd - 1) * bytes / nd, off_host_bytes = (nd - kd) * bytes / nd;
      v = k == n ? on_host_bytes / nv : std::max(on_host_bytes / nv, off_host_bytes / port);
    } else {
      // A chain of stages not all on the island crosses its edge: the stage on the island side
      // receives S from off the island through its own NIC ports. All on the island: a middle
      // stage sends S to each neighbour over NVLink.
      v = k < n ? bytes / port : (n == 2 ? bytes / nv : 2 * bytes / nv);
      v = std::max(v, pipe_floor);
    }
    const long long on_host = std::min(k, static_cast<long long>(host_min.size()));
    v = std::max(v, host_min[static_cast<std::size_t>(on_host - 1)]);
    floors[static_cast<std::size_t>(k - 1)] = std::max(v, cross);
  }
  if (dt.pattern != Pattern::kPipeline) raise_by_other_members(floors, n);
  return floors;
}

}  // namespace topoaware::mapper::internal
