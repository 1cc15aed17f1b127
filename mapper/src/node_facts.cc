#include "node_facts.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "topoaware/topology/error.h"
#include "topoaware/topology/paths.h"

namespace topoaware::mapper::internal {
namespace {

using topology::Graph;
using topology::LinkKind;
using topology::VertexId;
using topology::VertexKind;

std::vector<VertexId> ancestors(const Graph& g, VertexId v) {
  std::vector<VertexId> chain;
  for (VertexId p = v; p.valid() && chain.size() < 64; p = g.vertex(p).parent) chain.push_back(p);
  return chain;
}

std::string nic_name(const Graph& g, VertexId nic) {
  const auto& v = g.vertex(nic);
  if (!v.nic.ports.empty() && !v.nic.ports[0].name.empty()) return v.nic.ports[0].name;
  return v.name;
}

std::string nic_netdev(const Graph& g, VertexId nic) {
  for (const auto& p : g.vertex(nic).nic.ports) {
    if (!p.netdev.empty()) return p.netdev;
  }
  // A socket-only NIC (NCCL's socket transport names its nets after the interface).
  const auto& ports = g.vertex(nic).nic.ports;
  if (!ports.empty() && !topology::is_rdma(ports[0])) return ports[0].name;
  return {};
}

}  // namespace

namespace {

// A GPU's compute capability x10: the capture's, else read off its model name (hwloc captures
// name the GPU but give no capability), -1 where neither says.
int gpu_sm(const topology::GpuInfo& gpu) {
  if (gpu.sm > 0) return gpu.sm;
  const std::string& m = gpu.model;
  auto has = [&](const char* s) { return m.find(s) != std::string::npos; };
  if (has("B200") || has("B100") || has("GB200") || has("B300")) return 100;
  if (has("H100") || has("H200") || has("H800") || has("H20") || has("GH200")) return 90;
  if (has("A100") || has("A800") || has("A30") || has("A10") || has("A40") || has("A6000") ||
      has("RTX 30") || has("L40") || has("L4") || has("L20") || has("RTX 40")) {
    return has("L40") || has("L4") || has("L20") || has("RTX 40") ? 89 : 80;
  }
  if (has("V100")) return 70;
  if (has("P100")) return 60;
  return -1;
}

}  // namespace

NodeFacts node_facts(const topology::NodeTopology& node) {
  const Graph& g = node.graph;
  NodeFacts facts;
  std::vector<VertexId> gpus = node.gpus();
  std::vector<VertexId> nics = node.nics();
  facts.capture = node.source != "synthetic";
  facts.nvswitch = !g.of_kind(VertexKind::kNvSwitch).empty();
  for (VertexId c : node.cpus()) facts.amd_cpu |= g.vertex(c).cpu.vendor == "AuthenticAMD";
  for (VertexId gv : gpus) {
    const int sm = gpu_sm(g.vertex(gv).gpu);
    if (sm > 0) facts.sm = facts.sm < 0 ? sm : std::min(facts.sm, sm);
  }
  // The NICs a GPU may use, by NCCL's rules (the tree walk below chooses among them too).
  const std::vector<VertexId> usable = topology::net_candidates(node);
  for (VertexId n : nics) {
    facts.nic_names.push_back(nic_name(g, n));
    const bool use = std::find(usable.begin(), usable.end(), n) != usable.end();
    double mbps = 0;
    for (const auto& p : g.vertex(n).nic.ports) {
      const bool counts = topology::is_rdma(p) ? topology::rdma_port_up(p) : p.state != "DOWN";
      if (counts && p.speed_mbps > 0) mbps += p.speed_mbps;
    }
    facts.nic_usable.push_back(use ? 1 : 0);
    facts.nic_gbps.push_back(mbps / 8000.0);
  }
  // NVML indices: GPUs the capture gives none (hwloc saw no nvml device for them) take the
  // indices no other GPU has, in PCI bus order as NVML numbers GPUs, so two never share one.
  std::vector<int> taken;
  std::vector<VertexId> unindexed;
  for (VertexId gv : gpus) {
    if (g.vertex(gv).gpu.dev >= 0)
      taken.push_back(g.vertex(gv).gpu.dev);
    else
      unindexed.push_back(gv);
  }
  std::stable_sort(unindexed.begin(), unindexed.end(), [&](VertexId a, VertexId b) {
    return g.vertex(a).busid < g.vertex(b).busid;
  });
  std::map<std::uint32_t, int> dev_of;  // vertex -> assigned index
  int next = 0;
  for (VertexId gv : unindexed) {
    while (std::find(taken.begin(), taken.end(), next) != taken.end()) ++next;
    taken.push_back(next);
    dev_of[gv.value] = next;
  }
  // The node library's view (NCCL's rules) when it is there; the tree walk below otherwise.
  std::vector<topology::GpuLocality> locality;
  try {
    locality = topology::gpu_locality(node);
  } catch (const topology::Error&) {
    locality.clear();
  }
  for (VertexId gv : gpus) {
    const auto& v = g.vertex(gv);
    GpuFacts f;
    f.dev = v.gpu.dev >= 0 ? v.gpu.dev : dev_of.at(gv.value);
    f.busid = v.busid;
    double nvl = 0, pcie = 0;
    for (auto l : g.links_of(gv)) {
      const auto& link = g.link(l);
      if (link.kind == LinkKind::kNvLink || link.kind == LinkKind::kC2C) {
        VertexId other = g.other_end(l, gv);
        if (g.vertex(other).kind != VertexKind::kCpu) {
          nvl += link.bandwidth;
          f.nvlink = true;
        }
      } else if (link.kind == LinkKind::kPcie) {
        pcie = std::max(pcie, link.bandwidth);
      }
    }
    f.nvlink_gbps = nvl > 0 ? nvl : (pcie > 0 ? pcie : 12.0);
    const topology::GpuLocality* loc = nullptr;
    for (const auto& l : locality) {
      if (l.gpu == gv) loc = &l;
    }
    std::vector<VertexId> nearest;
    if (loc) {
      nearest = loc->nearest_nics;
      f.cpus = loc->local_pus;
    } else {
      // Nearest NICs: those sharing the deepest common PCIe ancestor with the GPU.
      std::vector<VertexId> up = ancestors(g, gv);
      std::size_t best = up.size() + 1;
      for (VertexId n : usable) {
        std::vector<VertexId> nup = ancestors(g, n);
        std::size_t d = up.size() + 1;
        for (std::size_t i = 0; i < up.size(); ++i) {
          if (std::find(nup.begin(), nup.end(), up[i]) != nup.end()) {
            d = i;
            break;
          }
        }
        if (d < best) {
          best = d;
          nearest.clear();
        }
        if (d == best && d <= up.size()) nearest.push_back(n);
      }
      if (!up.empty()) {
        const auto& root = g.vertex(up.back());
        if (root.kind == VertexKind::kCpu) f.cpus = root.cpu.pus;
      }
    }
    // NCCL_IB_HCA's names: the nearest NICs that are RDMA devices (none on a socket-only node).
    for (VertexId n : nearest) {
      // Every RDMA port's device (a <nic> of NCCL XML may hold several: mlx5_5..mlx5_8).
      for (const auto& p : g.vertex(n).nic.ports) {
        if (!topology::rdma_port_up(p)) continue;
        const std::string name = p.name.empty() ? nic_name(g, n) : p.name;
        if (std::find(f.nics.begin(), f.nics.end(), name) == f.nics.end()) f.nics.push_back(name);
      }
    }
    if (!nearest.empty()) {
      f.netdev = nic_netdev(g, nearest[0]);
      for (VertexId n : nearest) {
        auto it = std::find(nics.begin(), nics.end(), n);
        if (it != nics.end()) f.nic_ordinals.push_back(static_cast<int>(it - nics.begin()));
      }
      if (!f.nic_ordinals.empty()) f.nic_ordinal = f.nic_ordinals.front();
    }
    facts.gpus.push_back(std::move(f));
  }
  std::sort(facts.gpus.begin(), facts.gpus.end(),
            [](const GpuFacts& a, const GpuFacts& b) { return a.dev < b.dev; });
  return facts;
}

}  // namespace topoaware::mapper::internal
