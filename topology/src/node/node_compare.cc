// Two views of one node compared as NCCL would see the difference (node_compare.h).
#include "topoaware/topology/node_compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <utility>

#include "topoaware/topology/paths.h"

namespace topoaware::topology {
namespace {

using Severity = NodeDifference::Severity;

std::string num(double v) {
  if (v < 0) return "unknown";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string integer(int v) { return v < 0 ? "unknown" : std::to_string(v); }

// Bandwidths computed from the same rules agree exactly; 1% absorbs rounding of speeds written
// in other units (Mb/s in the XML, Gb/s from verbs).
bool same_bandwidth(double a, double b) {
  return std::fabs(a - b) <= 0.01 * std::max(std::fabs(a), std::fabs(b));
}

// What NCCL keys a NIC by: its first port's name (the net plugin's device), else its bus id.
std::string nic_key(const Vertex& v) {
  for (const auto& p : v.nic.ports) {
    if (!p.name.empty()) return p.name;
  }
  return v.busid;
}

double nic_speed_mbps(const Vertex& v) {
  double best = -1;
  for (const auto& p : v.nic.ports) best = std::max(best, p.speed_mbps);
  return best;
}

struct NvlinkSummary {
  int lanes = 0;
  double gbps = 0;
};

// NVLink of a GPU as NCCL's search sees it: lanes and bandwidth summed over its NVLink links
// (to the NVSwitch, peer GPUs or the CPU).
NvlinkSummary nvlink_of(const Graph& g, VertexId gpu) {
  NvlinkSummary s;
  for (LinkId l : g.links_of(gpu)) {
    const Link& link = g.link(l);
    if (link.kind != LinkKind::kNvLink && link.kind != LinkKind::kC2C) continue;
    if (g.other_end(l, gpu) == gpu) continue;  // Azure NC A100 v4's self-links carry nothing
    s.lanes += link.count;
    s.gbps += link.bandwidth;
  }
  return s;
}

// One side: its GPUs by bus id and NICs by key, with their paths.
struct View {
  const NodeTopology& node;
  NodePaths paths;
  std::map<std::string, VertexId> gpus;                     // bus id -> vertex
  std::map<std::string, VertexId> nics;                     // key -> vertex
  std::map<std::string, std::vector<std::string>> nearest;  // GPU bus id -> nearest NIC keys

  explicit View(const NodeTopology& n) : node(n), paths(n) {
    for (VertexId g : n.gpus()) {
      const std::string& b = n.graph.vertex(g).busid;
      if (!b.empty()) gpus.emplace(b, g);
    }
    for (VertexId v : n.nics()) {
      std::string key = nic_key(n.graph.vertex(v));
      if (!key.empty()) nics.emplace(key, v);
    }
    for (const GpuLocality& loc : gpu_locality(n, paths)) {
      auto& list = nearest[n.graph.vertex(loc.gpu).busid];
      for (VertexId nic : loc.nearest_nics) list.push_back(nic_key(n.graph.vertex(nic)));
    }
  }
  const Vertex& v(VertexId id) const { return node.graph.vertex(id); }
};

class Comparer {
 public:
  Comparer(const NodeTopology& ours, const NodeTopology& nccl) : ours_(ours), nccl_(nccl) {}

  NodeComparison run() {
    gpus();
    nics();
    paths();
    return std::move(out_);
  }

 private:
  void diff(Severity s, std::string subject, std::string attribute, std::string ours,
            std::string nccl) {
    out_.differences.push_back(
        {s, std::move(subject), std::move(attribute), std::move(ours), std::move(nccl)});
  }

  std::string gpu_label(const std::string& busid) const {
    auto it = ours_.gpus.find(busid);
    int dev = it != ours_.gpus.end() ? ours_.v(it->second).gpu.dev : -1;
    if (dev < 0) {
      auto jt = nccl_.gpus.find(busid);
      if (jt != nccl_.gpus.end()) dev = nccl_.v(jt->second).gpu.dev;
    }
    return (dev >= 0 ? "GPU" + std::to_string(dev) + " " : std::string("GPU ")) + busid;
  }

  void gpus() {
    for (const auto& [busid, nv] : nccl_.gpus) {
      auto it = ours_.gpus.find(busid);
      if (it == ours_.gpus.end()) {
        diff(Severity::kMismatch, gpu_label(busid), "present", "-", "yes");
        continue;
      }
      ++out_.gpus_matched;
      const Vertex& o = ours_.v(it->second);
      const Vertex& n = nccl_.v(nv);
      const std::string who = gpu_label(busid);
      // NCCL fills dev and sm from NVML and overwrites nothing it finds in a file: a wrong
      // value here is what a file of ours would impose on it.
      if (o.gpu.dev >= 0 && n.gpu.dev >= 0 && o.gpu.dev != n.gpu.dev) {
        diff(Severity::kMismatch, who, "NVML index (dev)", integer(o.gpu.dev), integer(n.gpu.dev));
      } else if (o.gpu.dev < 0 && n.gpu.dev >= 0) {
        diff(Severity::kNote, who, "NVML index (dev)", "unknown", integer(n.gpu.dev));
      }
      if (o.gpu.sm >= 0 && n.gpu.sm >= 0 && o.gpu.sm != n.gpu.sm) {
        diff(Severity::kMismatch, who, "sm", integer(o.gpu.sm), integer(n.gpu.sm));
      } else if (o.gpu.sm < 0 && n.gpu.sm >= 0) {
        diff(Severity::kWarning, who, "sm", "unknown", integer(n.gpu.sm));
      }
      if (o.numa != n.numa)
        diff(Severity::kMismatch, who, "NUMA node", integer(o.numa), integer(n.numa));
      pci_link(who, o, n);
      NvlinkSummary on = nvlink_of(ours_.node.graph, it->second);
      NvlinkSummary nn = nvlink_of(nccl_.node.graph, nv);
      if (on.lanes != nn.lanes) {
        diff(Severity::kMismatch, who, "NVLink lanes", integer(on.lanes), integer(nn.lanes));
      }
      if (!same_bandwidth(on.gbps, nn.gbps)) {
        diff(Severity::kMismatch, who, "NVLink GB/s", num(on.gbps), num(nn.gbps));
      }
    }
    for (const auto& [busid, ov] : ours_.gpus) {
      if (nccl_.gpus.count(busid) == 0) {
        diff(Severity::kWarning, gpu_label(busid), "present", "yes",
             "- (not in the communicator: CUDA_VISIBLE_DEVICES, or not used)");
      }
    }
  }

  void pci_link(const std::string& who, const Vertex& o, const Vertex& n) {
    // Unknown on our side means NCCL fills it from sysfs: only known values can disagree.
    if (!o.pci.link_speed.empty() && !n.pci.link_speed.empty() &&
        !same_bandwidth(pcie_bandwidth(o.pci.link_speed, o.pci.link_width),
                        pcie_bandwidth(n.pci.link_speed, n.pci.link_width))) {
      diff(Severity::kMismatch, who, "PCIe link",
           o.pci.link_speed + " x" + integer(o.pci.link_width),
           n.pci.link_speed + " x" + integer(n.pci.link_width));
    }
  }

  void nics() {
    for (const auto& [key, nv] : nccl_.nics) {
      auto it = ours_.nics.find(key);
      const Vertex& n = nccl_.v(nv);
      if (it == ours_.nics.end()) {
        diff(Severity::kMismatch, "NIC " + key, "present", "-",
             n.nic.virtual_nic ? "socket" : "yes");
        continue;
      }
      ++out_.nics_matched;
      const Vertex& o = ours_.v(it->second);
      const std::string who = "NIC " + key;
      if (!o.busid.empty() && !n.busid.empty() && o.busid != n.busid) {
        diff(Severity::kMismatch, who, "bus id", o.busid, n.busid);
      }
      const double os = nic_speed_mbps(o), ns = nic_speed_mbps(n);
      if (os > 0 && ns > 0 && !same_bandwidth(os, ns)) {
        diff(Severity::kMismatch, who, "speed Mb/s", num(os), num(ns));
      } else if (os <= 0 && ns > 0) {
        diff(Severity::kWarning, who, "speed Mb/s", "unknown", num(ns));
      }
      if (o.numa != n.numa)
        diff(Severity::kMismatch, who, "NUMA node", integer(o.numa), integer(n.numa));
      if (!o.nic.virtual_nic && !n.nic.virtual_nic) pci_link(who, o, n);
    }
    for (const auto& [key, ov] : ours_.nics) {
      if (nccl_.nics.count(key) == 0) {
        diff(Severity::kWarning, "NIC " + key, "present", "yes",
             "- (NCCL does not use it: excluded, down, or not an RDMA/socket device it picked)");
      }
    }
  }

  void path(const std::string& subject, VertexId oa, VertexId ob, VertexId na, VertexId nb) {
    ++out_.paths_compared;
    Path po = ours_.paths.path(oa, ob);
    Path pn = nccl_.paths.path(na, nb);
    if (po.type != pn.type || !same_bandwidth(po.bandwidth, pn.bandwidth)) {
      diff(Severity::kMismatch, subject, "path",
           std::string(to_string(po.type)) + " " + num(po.bandwidth) + " GB/s",
           std::string(to_string(pn.type)) + " " + num(pn.bandwidth) + " GB/s");
    }
  }

  void paths() {
    std::vector<std::pair<VertexId, VertexId>> gpus;  // (ours, nccl), bus id order
    for (const auto& [busid, nv] : nccl_.gpus) {
      auto it = ours_.gpus.find(busid);
      if (it != ours_.gpus.end()) gpus.emplace_back(it->second, nv);
    }
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      const std::string a = gpu_label(nccl_.v(gpus[i].second).busid);
      for (std::size_t j = 0; j < gpus.size(); ++j) {
        if (i == j) continue;
        path("path " + a + " -> " + gpu_label(nccl_.v(gpus[j].second).busid), gpus[i].first,
             gpus[j].first, gpus[i].second, gpus[j].second);
      }
      for (const auto& [key, nv] : nccl_.nics) {
        auto it = ours_.nics.find(key);
        if (it == ours_.nics.end()) continue;
        path("path " + a + " -> " + key, gpus[i].first, it->second, gpus[i].second, nv);
      }
      // Nearest NICs among those both views have: where NCCL starts this GPU's channels.
      const std::string& busid = nccl_.v(gpus[i].second).busid;
      auto common = [&](const std::vector<std::string>& keys) {
        std::vector<std::string> kept;
        for (const auto& k : keys) {
          if (ours_.nics.count(k) && nccl_.nics.count(k)) kept.push_back(k);
        }
        std::sort(kept.begin(), kept.end());
        return kept;
      };
      auto join = [](const std::vector<std::string>& v) {
        std::string s;
        for (const auto& k : v) s += (s.empty() ? "" : ",") + k;
        return s.empty() ? std::string("none") : s;
      };
      std::vector<std::string> on = common(ours_.nearest[busid]);
      std::vector<std::string> nn = common(nccl_.nearest[busid]);
      if (on != nn) diff(Severity::kMismatch, a, "nearest NICs", join(on), join(nn));
    }
  }

  View ours_;
  View nccl_;
  NodeComparison out_;
};

}  // namespace

std::string_view to_string(NodeDifference::Severity s) {
  switch (s) {
    case Severity::kNote:
      return "note";
    case Severity::kWarning:
      return "warning";
    case Severity::kMismatch:
      return "MISMATCH";
  }
  return "?";
}

int NodeComparison::count(NodeDifference::Severity s) const {
  return static_cast<int>(std::count_if(differences.begin(), differences.end(),
                                        [s](const NodeDifference& d) { return d.severity == s; }));
}

NodeComparison compare_nodes(const NodeTopology& ours, const NodeTopology& nccl) {
  return Comparer(ours, nccl).run();
}

std::string format_comparison(const NodeComparison& c, const std::string& ours_label,
                              const std::string& nccl_label, std::size_t limit) {
  std::string out = ours_label + " vs " + nccl_label + ": " + (c.agrees() ? "agree" : "DIFFER") +
                    " (" + std::to_string(c.gpus_matched) + " GPUs, " +
                    std::to_string(c.nics_matched) + " NICs, " + std::to_string(c.paths_compared) +
                    " paths compared; " + std::to_string(c.count(Severity::kMismatch)) +
                    " mismatches, " + std::to_string(c.count(Severity::kWarning)) + " warnings, " +
                    std::to_string(c.count(Severity::kNote)) + " notes)\n";
  std::size_t shown = 0;
  // Mismatches first: they are what to act on.
  for (Severity s : {Severity::kMismatch, Severity::kWarning, Severity::kNote}) {
    for (const auto& d : c.differences) {
      if (d.severity != s) continue;
      if (limit > 0 && shown == limit) break;
      out += "  " + std::string(to_string(d.severity)) + " " + d.subject + " " + d.attribute +
             ": ours " + d.ours + ", NCCL " + d.nccl + "\n";
      ++shown;
    }
  }
  if (shown < c.differences.size()) {
    out += "  ... " + std::to_string(c.differences.size() - shown) + " more\n";
  }
  return out;
}

}  // namespace topoaware::topology
