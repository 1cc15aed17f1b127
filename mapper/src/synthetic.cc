// Synthetic clusters (synthetic.h): real topology::Fabric graphs, derived by analyze().
#include "topoaware/mapper/synthetic.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <utility>

#include "splitmix.h"
#include "topoaware/mapper/layout.h"
#include "topoaware/topology/error.h"

namespace topoaware::mapper {
namespace {

using topology::Fabric;
using topology::Link;
using topology::LinkKind;
using topology::Vertex;
using topology::VertexId;
using topology::VertexKind;

VertexId add_switch(Fabric& f, const std::string& name) {
  Vertex v;
  v.kind = VertexKind::kSwitch;
  v.name = name;
  return f.graph.add_vertex(v);
}

Link make_link(VertexId a, VertexId b, LinkKind kind, double gbps) {
  Link l;
  l.a = a;
  l.b = b;
  l.kind = kind;
  l.bandwidth = gbps;
  return l;
}

// `cables` parallel cables sharing `gbps`: one Link with that count, as the importers merge them.
void link(Fabric& f, VertexId a, VertexId b, double gbps, int cables = 1) {
  Link l;
  l.a = a;
  l.b = b;
  l.kind = LinkKind::kNetwork;
  l.bandwidth = gbps;
  l.count = cables;
  l.latency_us = 0.15;
  f.graph.add_link(l);
}

std::string numbered(const std::string& prefix, long long i, int width) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%0*lld", width, i);
  return prefix + buf;
}

// The levels analyze() would derive, for when the fabric library cannot (yet).
void own_levels(Fabric& f, const FatTreeSpec& s, int units, int pods, double unit_up,
                double pod_up) {
  const std::size_t nh = f.hosts.size();
  topology::LocalityLevel host;
  host.name = "host";
  for (std::size_t h = 0; h < nh; ++h) {
    host.group_of_host.push_back(static_cast<std::uint32_t>(h));
    double cap = s.ports_per_host * s.port_gbps;
    host.group_uplink_gbps.push_back(cap);
    host.group_downlink_gbps.push_back(cap);
  }
  f.levels.push_back(host);
  topology::LocalityLevel leaf;
  leaf.name = "leaf";
  leaf.latency_us = 1.15;
  for (std::size_t h = 0; h < nh; ++h) {
    leaf.group_of_host.push_back(
        static_cast<std::uint32_t>(h / static_cast<std::size_t>(s.hosts_per_leaf)));
  }
  leaf.group_uplink_gbps.assign(static_cast<std::size_t>(units), unit_up);
  leaf.group_downlink_gbps.assign(static_cast<std::size_t>(units),
                                  s.hosts_per_leaf * s.ports_per_host * s.port_gbps);
  f.levels.push_back(leaf);
  if (s.leaves_per_pod > 0) {
    topology::LocalityLevel pod;
    pod.name = "pod";
    pod.latency_us = 1.45;
    for (std::size_t h = 0; h < nh; ++h) {
      pod.group_of_host.push_back(leaf.group_of_host[h] /
                                  static_cast<std::uint32_t>(s.leaves_per_pod));
    }
    pod.group_uplink_gbps.assign(static_cast<std::size_t>(pods), pod_up);
    pod.group_downlink_gbps.assign(static_cast<std::size_t>(pods), unit_up * s.leaves_per_pod);
    f.levels.push_back(pod);
  }
  topology::LocalityLevel spine;
  spine.name = "spine";
  spine.latency_us = s.leaves_per_pod > 0 ? 1.75 : 1.45;
  spine.group_of_host.assign(nh, 0);
  spine.group_uplink_gbps = {0};
  spine.group_downlink_gbps = {0};
  f.levels.push_back(spine);
  f.rail_optimized = s.rail_optimized && s.ports_per_host > 1;
  f.rails = f.rail_optimized ? s.ports_per_host : 0;
}

}  // namespace

Fabric make_fat_tree(const FatTreeSpec& s) {
  if (s.hosts < 1 || s.hosts_per_leaf < 1 || s.ports_per_host < 1 || s.gpus_per_host < 1 ||
      s.hosts > (1 << 20)) {
    throw Error("synthetic fabric: bad sizes");
  }
  if (s.uplink_cables < 1 || s.uplink_cables > 1024) throw Error("synthetic fabric: bad cables");
  Fabric f;
  f.source = "synthetic:fat-tree";
  f.routing = s.routing;
  SplitMix rng{s.seed};
  std::vector<long long> name_of(static_cast<std::size_t>(s.hosts));
  std::iota(name_of.begin(), name_of.end(), 0);
  if (s.scramble_names) {
    for (std::size_t i = name_of.size(); i > 1; --i)
      std::swap(name_of[i - 1], name_of[rng.below(i)]);
  }
  const int units = (s.hosts + s.hosts_per_leaf - 1) / s.hosts_per_leaf;
  const int pods = s.leaves_per_pod > 0 ? (units + s.leaves_per_pod - 1) / s.leaves_per_pod : 1;
  const double unit_down = s.hosts_per_leaf * s.ports_per_host * s.port_gbps;
  const double unit_up = unit_down / s.leaf_oversub;
  const double pod_up = s.leaves_per_pod > 0 ? unit_up * s.leaves_per_pod / s.pod_oversub : 0;
  // Hosts.
  for (int h = 0; h < s.hosts; ++h) {
    Vertex v;
    v.kind = VertexKind::kHost;
    v.name = numbered(s.prefix, name_of[static_cast<std::size_t>(h)], 5);
    topology::HostInfo hi;
    hi.vertex = f.graph.add_vertex(v);
    hi.name = v.name;
    f.host_index[hi.name] = static_cast<std::uint32_t>(h);
    f.hosts.push_back(hi);
  }
  // Leaf switches: one per unit, or one per rail per unit.
  const int per_unit = s.rail_optimized ? s.ports_per_host : 1;
  std::vector<std::vector<VertexId>> unit_switches(static_cast<std::size_t>(units));
  for (int u = 0; u < units; ++u) {
    for (int r = 0; r < per_unit; ++r) {
      std::string name = s.rail_optimized ? "su" + std::to_string(u) + "-rail" + std::to_string(r)
                                          : "leaf" + std::to_string(u);
      unit_switches[static_cast<std::size_t>(u)].push_back(add_switch(f, name));
    }
  }
  for (int h = 0; h < s.hosts; ++h) {
    auto& hi = f.hosts[static_cast<std::size_t>(h)];
    const auto& sw = unit_switches[static_cast<std::size_t>(h / s.hosts_per_leaf)];
    for (int p = 0; p < s.ports_per_host; ++p) {
      VertexId to = sw[static_cast<std::size_t>(s.rail_optimized ? p : 0)];
      link(f, hi.vertex, to, s.port_gbps);
      hi.port_switch.push_back(to);
      hi.port_gbps.push_back(s.port_gbps);
      hi.port_nic.push_back("mlx5_" + std::to_string(p));
    }
  }
  // Upper tiers: each unit's uplink capacity spread evenly over the switches above it.
  const int spines = 4;
  if (s.leaves_per_pod <= 0) {
    std::vector<VertexId> top;
    for (int k = 0; k < spines; ++k) top.push_back(add_switch(f, "spine" + std::to_string(k)));
    if (units > 1) {
      for (const auto& sw : unit_switches) {
        for (VertexId leaf : sw) {
          for (VertexId sp : top) link(f, leaf, sp, unit_up / per_unit / spines, s.uplink_cables);
        }
      }
    }
  } else {
    const int aggs = 4;
    std::vector<VertexId> core;
    for (int k = 0; k < spines; ++k) core.push_back(add_switch(f, "core" + std::to_string(k)));
    for (int p = 0; p < pods; ++p) {
      std::vector<VertexId> agg;
      for (int a = 0; a < aggs; ++a) {
        agg.push_back(add_switch(f, "pod" + std::to_string(p) + "-agg" + std::to_string(a)));
      }
      for (int u = p * s.leaves_per_pod; u < std::min(units, (p + 1) * s.leaves_per_pod); ++u) {
        for (VertexId leaf : unit_switches[static_cast<std::size_t>(u)]) {
          for (VertexId a : agg) link(f, leaf, a, unit_up / per_unit / aggs, s.uplink_cables);
        }
      }
      if (pods > 1) {
        for (VertexId a : agg) {
          for (VertexId c : core) link(f, a, c, pod_up / aggs / spines, s.uplink_cables);
        }
      }
    }
  }
  // NVLink domains over consecutive hosts (wiring order).
  if (s.nvlink_domain_hosts > 0) {
    for (int h = 0; h < s.hosts; h += s.nvlink_domain_hosts) {
      topology::NvlinkDomain d;
      d.name = "nvl" + std::to_string(h / s.nvlink_domain_hosts);
      d.gpu_bandwidth = s.nvlink_gbps;
      for (int k = h; k < std::min(s.hosts, h + s.nvlink_domain_hosts); ++k) {
        d.hosts.push_back(static_cast<std::uint32_t>(k));
        f.hosts[static_cast<std::size_t>(k)].nvlink_domain =
            static_cast<int>(f.nvlink_domains.size());
      }
      f.nvlink_domains.push_back(d);
    }
  }
  const auto domains = f.nvlink_domains;
  try {
    topology::analyze(f);
  } catch (const topology::Error&) {
    f.levels.clear();
  }
  if (f.nvlink_domains.empty() && !domains.empty()) {
    f.nvlink_domains = domains;
    for (std::size_t d = 0; d < domains.size(); ++d) {
      for (auto h : domains[d].hosts) f.hosts[h].nvlink_domain = static_cast<int>(d);
    }
  }
  if (f.levels.empty()) own_levels(f, s, units, pods, unit_up, pod_up);
  return f;
}

topology::NodeTopology make_node(int gpus, int nics, double nvlink_gbps, double nic_gbps,
                                 int sm) {
  topology::NodeTopology node;
  node.source = "synthetic";
  auto& g = node.graph;
  const int sockets = gpus >= 2 ? 2 : 1;
  std::vector<VertexId> cpu;
  for (int c = 0; c < sockets; ++c) {
    Vertex v;
    v.kind = VertexKind::kCpu;
    v.name = "NUMA" + std::to_string(c);
    v.numa = c;
    v.cpu.arch = "x86_64";
    v.cpu.vendor = "GenuineIntel";
    for (std::uint32_t p = 0; p < 32; ++p)
      v.cpu.pus.push_back(static_cast<std::uint32_t>(c) * 32 + p);
    cpu.push_back(g.add_vertex(v));
  }
  // The sockets' interconnect: a GPU on the socket without a NIC still reaches one (SYS), as
  // NCCL would use it.
  if (sockets == 2) g.add_link(make_link(cpu[0], cpu[1], LinkKind::kSmp, 40));
  VertexId nvs;
  if (gpus > 1 && nvlink_gbps > 0) {
    Vertex v;
    v.kind = VertexKind::kNvSwitch;
    v.name = "NVSwitch";
    nvs = g.add_vertex(v);
  }
  // One PCIe switch per GPU; with fewer NICs than GPUs, one per NIC shared by its GPUs (as on
  // 8-GPU, 4-NIC servers), so that no GPU is equally near two NICs.
  const bool shared = nics > 0 && nics < gpus;
  std::vector<VertexId> sw;
  for (int i = 0; i < gpus; ++i) {
    const int si = shared ? i * nics / gpus : i;
    // The socket of the switch's first GPU: a switch's GPUs share it.
    int c =
        (static_cast<std::size_t>(si) < sw.size() ? g.vertex(sw[static_cast<std::size_t>(si)]).numa
                                                  : i * sockets / std::max(1, gpus));
    char bus[32];
    if (static_cast<std::size_t>(si) == sw.size()) {
      Vertex s;
      s.kind = VertexKind::kPciSwitch;
      s.name = "PCIeSwitch" + std::to_string(si);
      s.parent = cpu[static_cast<std::size_t>(c)];
      s.numa = c;
      std::snprintf(bus, sizeof bus, "0000:%02x:00.0", 0x10 + 0x10 * i);
      s.busid = bus;
      sw.push_back(g.add_vertex(s));
      g.add_link(make_link(cpu[static_cast<std::size_t>(c)], sw.back(), LinkKind::kPcie, 48));
    }
    VertexId sid = sw[static_cast<std::size_t>(si)];
    Vertex v;
    v.kind = VertexKind::kGpu;
    v.name = "GPU" + std::to_string(i);
    v.parent = sid;
    v.numa = c;
    v.gpu.dev = i;
    v.gpu.sm = sm;
    std::snprintf(bus, sizeof bus, "0000:%02x:00.0", 0x11 + 0x10 * i);
    v.busid = bus;
    VertexId gid = g.add_vertex(v);
    g.add_link(make_link(sid, gid, LinkKind::kPcie, 48));
    if (nvs.valid()) g.add_link(make_link(gid, nvs, LinkKind::kNvLink, nvlink_gbps));
  }
  for (int k = 0; k < nics; ++k) {
    int at = gpus > 0 ? k * gpus / nics : 0;
    const int si = shared ? k : at;  // the NIC's switch
    Vertex v;
    v.kind = VertexKind::kNic;
    v.name = "mlx5_" + std::to_string(k);
    if (!sw.empty()) {
      v.parent = sw[static_cast<std::size_t>(si)];
      v.numa = g.vertex(sw[static_cast<std::size_t>(si)]).numa;
    } else {
      v.parent = cpu[0];
    }
    char bus[32];
    std::snprintf(bus, sizeof bus, "0000:%02x:00.0",
                  0x12 + 0x10 * at + k % std::max(1, nics / std::max(1, gpus)));
    v.busid = bus;
    topology::NetPort port;
    port.name = v.name;
    port.port = 1;
    port.speed_mbps = nic_gbps * 8000;
    port.link_layer = "InfiniBand";
    port.state = "ACTIVE";
    port.netdev = "ib" + std::to_string(k);
    v.nic.ports.push_back(port);
    VertexId nid = g.add_vertex(v);
    g.add_link(make_link(v.parent, nid, LinkKind::kPcie, 48));
  }
  return node;
}

Allocation fragmented_allocation(const Fabric& fabric, int gpus_per_host, double busy, int gpus,
                                 std::uint64_t seed) {
  SplitMix rng{seed * 7919 + 17};
  std::vector<std::pair<std::string, int>> free;  // by name
  for (const auto& h : fabric.hosts) {
    double r = rng.uniform();
    double p_full = busy * 0.7;
    double q = std::min(1 - p_full, busy * 0.6);
    int used = 0;
    if (r < p_full)
      used = gpus_per_host;
    else if (r < p_full + q)
      used = 1 + static_cast<int>(
                     rng.below(static_cast<std::uint64_t>(std::max(1, gpus_per_host - 1))));
    free.emplace_back(h.name, gpus_per_host - used);
  }
  std::sort(free.begin(), free.end());
  Allocation a;
  int need = gpus;
  for (const auto& [name, n] : free) {
    if (need == 0) break;
    if (n <= 0) continue;
    int take = std::min(n, need);
    a.hosts.push_back(name);
    a.tasks_per_host.push_back(take);
    need -= take;
  }
  if (need > 0) throw Error("synthetic allocation: the cluster has too few free GPUs");
  return a;
}

Allocation fragmented_hosts(const Fabric& fabric, int gpus_per_host, double busy, int hosts,
                            std::uint64_t seed) {
  if (busy < 0 || busy > 1 || hosts < 1 || gpus_per_host < 1) {
    throw Error("synthetic allocation: bad busy share or size");
  }
  // Exactly round(busy x n) busy hosts (a partial Fisher-Yates draw), so the busy share is what
  // the instance says and only where the busy hosts fall varies with the seed.
  SplitMix rng{seed * 104729 + 31};
  const std::size_t n = fabric.hosts.size();
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  const auto taken = static_cast<std::size_t>(std::llround(busy * static_cast<double>(n)));
  for (std::size_t i = 0; i < taken && i + 1 < n; ++i)
    std::swap(order[i], order[i + rng.below(n - i)]);
  std::vector<std::string> free;
  for (std::size_t i = std::min(taken, n); i < n; ++i) free.push_back(fabric.hosts[order[i]].name);
  std::sort(free.begin(), free.end());
  if (static_cast<std::size_t>(hosts) > free.size()) {
    throw Error("synthetic allocation: the cluster has too few free hosts");
  }
  Allocation a;
  a.hosts.assign(free.begin(), free.begin() + hosts);
  a.tasks_per_host.assign(static_cast<std::size_t>(hosts), gpus_per_host);
  return a;
}

Allocation whole_hosts(const Fabric& fabric, int gpus_per_host, int hosts) {
  std::vector<std::string> names;
  for (const auto& h : fabric.hosts) names.push_back(h.name);
  std::sort(names.begin(), names.end());
  if (hosts > static_cast<int>(names.size())) throw Error("synthetic allocation: too few hosts");
  Allocation a;
  a.hosts.assign(names.begin(), names.begin() + hosts);
  a.tasks_per_host.assign(static_cast<std::size_t>(hosts), gpus_per_host);
  return a;
}

}  // namespace topoaware::mapper
