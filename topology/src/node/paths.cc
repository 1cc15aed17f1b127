// NCCL's bandwidth rules and path search over a node's graph (see paths.h for the rules).
#include "topoaware/topology/paths.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <functional>
#include <iterator>
#include <limits>
#include <queue>
#include <utility>

namespace topoaware::topology {
namespace {

constexpr std::array<std::string_view, 12> kPathNames = {"LOC", "NVL", "NVB", "C2C", "PIX", "PXB",
                                                         "P2C", "PXN", "PHB", "SYS", "NET", "DIS"};

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool is_pci_node(VertexKind k) {
  return k == VertexKind::kPciSwitch || k == VertexKind::kPciDevice;
}

// Vertices a path may pass through. GPUs are relays only for NVB, handled separately.
bool is_transit(VertexKind k) {
  return k == VertexKind::kCpu || k == VertexKind::kPciSwitch || k == VertexKind::kNvSwitch;
}

bool is_endpoint(VertexKind k) {
  return k == VertexKind::kGpu || k == VertexKind::kNic || k == VertexKind::kCpu ||
         k == VertexKind::kNvSwitch;
}

PathType hop_type(const Graph& g, const Link& l) {
  switch (l.kind) {
    case LinkKind::kNvLink: return PathType::NVL;
    case LinkKind::kC2C: return PathType::C2C;
    case LinkKind::kSmp: return PathType::SYS;
    case LinkKind::kNetwork: return PathType::LOC;
    case LinkKind::kPcie: break;
  }
  VertexKind a = g.vertex(l.a).kind, b = g.vertex(l.b).kind;
  if (a == VertexKind::kCpu || b == VertexKind::kCpu) return PathType::PHB;
  if (is_pci_node(a) && is_pci_node(b)) return PathType::PXB;
  return PathType::PIX;
}

// Lexicographic order of NCCL's replacement rule: better type, then bandwidth, then hops.
bool better(const Path& a, const Path& b) {
  if (a.type != b.type) return a.type < b.type;
  if (a.bandwidth != b.bandwidth) return a.bandwidth > b.bandwidth;
  return a.hops < b.hops;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string_view to_string(PathType t) {
  auto i = static_cast<std::size_t>(t);
  return i < kPathNames.size() ? kPathNames[i] : std::string_view("?");
}

std::optional<PathType> path_type_from_string(std::string_view s) {
  for (std::size_t i = 0; i < kPathNames.size(); ++i) {
    if (kPathNames[i] == s) return static_cast<PathType>(i);
  }
  return std::nullopt;
}

double pcie_bandwidth(std::string_view link_speed, int width) {
  // NCCL matches prefixes of these spellings; the lane rate is in units of 1/80 GB/s per lane.
  struct Speed {
    std::string_view prefix;
    int rate;
  };
  static constexpr std::array<Speed, 11> kSpeeds = {{
      {"2.5 GT/s", 15},
      {"5 GT/s", 30},
      {"5.0 GT/s PCIe", 30},
      {"8 GT/s", 60},
      {"8.0 GT/s PCIe", 60},
      {"16 GT/s", 120},
      {"16.0 GT/s PCIe", 120},
      {"32 GT/s", 240},
      {"32.0 GT/s PCIe", 240},
      {"64.0 GT/s PCIe", 480},
      {"", 60},  // anything else: Gen3
  }};
  int rate = 60;
  for (const Speed& s : kSpeeds) {
    if (starts_with(link_speed, s.prefix)) {
      rate = s.rate;
      break;
    }
  }
  int lanes = width > 0 ? width : 16;
  return lanes * rate / 80.0;
}

double nvlink_lane_bandwidth(int sm) {
  if (sm >= 100) return 40.1;
  if (sm >= 90) return 20.6;
  if (sm == 86) return 12.0;
  if (sm >= 80) return 20.0;
  if (sm >= 70) return 20.0;
  if (sm >= 60) return 18.0;
  return 20.0;  // unknown: NCCL falls back to the SM80 figure
}

double smp_bandwidth(const CpuInfo& cpu) {
  if (starts_with(cpu.arch, "ppc64")) return 32.0;
  if (starts_with(cpu.arch, "arm64")) return 6.0;
  if (!starts_with(cpu.arch, "x86_64")) return kLocBandwidth;
  if (cpu.vendor == "GenuineIntel") {
    if (cpu.family == 6 && cpu.model >= 0xCF) return 40.0;  // Emerald Rapids and later
    if (cpu.family == 6 && cpu.model >= 0x8F) return 22.0;  // Sapphire Rapids
    if (cpu.family == 6 && cpu.model >= 0x55) return 10.0;  // Skylake
    return 6.0;                                             // Broadwell and older
  }
  if (cpu.vendor == "AuthenticAMD") return 16.0;
  if (cpu.vendor == "CentaurHauls" || cpu.vendor == "  Shanghai  ") {
    return (cpu.family == 7 && cpu.model == 0x5B) ? 9.0 : 6.0;  // Yongfeng : other Zhaoxin
  }
  return kLocBandwidth;
}

double net_bandwidth(double speed_mbps) { return (speed_mbps > 0 ? speed_mbps : 10000.0) / 8000.0; }

std::optional<std::vector<std::uint32_t>> parse_cpumap(std::string_view cpumap) {
  std::vector<std::string_view> words;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = cpumap.find(',', start);
    words.push_back(cpumap.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  // A 254-character attribute caps NCCL near 28 words; allow far more, but bound it.
  if (words.size() > 4096) return std::nullopt;
  std::vector<std::uint32_t> pus;
  for (std::size_t w = 0; w < words.size(); ++w) {
    std::string_view word = words[words.size() - 1 - w];  // last word holds CPUs 0-31
    if (word.empty() || word.size() > 8) return std::nullopt;
    std::uint32_t bits = 0;
    for (char c : word) {
      int v = hex_digit(c);
      if (v < 0) return std::nullopt;
      bits = (bits << 4) | static_cast<std::uint32_t>(v);
    }
    for (std::uint32_t b = 0; b < 32; ++b) {
      if (bits & (1u << b)) pus.push_back(static_cast<std::uint32_t>(w) * 32 + b);
    }
  }
  return pus;
}

std::string format_cpumap(const std::vector<std::uint32_t>& pus) {
  std::vector<std::uint32_t> words;
  for (std::uint32_t pu : pus) {
    std::size_t w = pu / 32;
    if (w >= words.size()) words.resize(w + 1, 0);
    words[w] |= 1u << (pu % 32);
  }
  while (words.size() > 1 && words.back() == 0) words.pop_back();
  if (words.empty()) words.push_back(0);
  std::string out;
  static constexpr char kHex[] = "0123456789abcdef";
  for (std::size_t i = words.size(); i-- > 0;) {
    for (int shift = 28; shift >= 0; shift -= 4) out += kHex[(words[i] >> shift) & 0xF];
    if (i > 0) out += ',';
  }
  return out;
}

// Single-source searches, exact for the lexicographic order (type, bandwidth, hops): the
// minimax type first (isotone, so Dijkstra-like label setting is exact), then the widest path
// among hops no worse than that type, then the fewest hops among links at least that wide.
struct NodePaths::Impl {
  const Graph& g;
  std::vector<PathType> hop;  // per link

  explicit Impl(const Graph& graph) : g(graph) {
    hop.reserve(g.link_count());
    for (const Link& l : g.links()) hop.push_back(hop_type(g, l));
  }

  bool can_leave(VertexId v, VertexId source) const {
    return v == source || is_transit(g.vertex(v).kind);
  }

  std::vector<int> min_types(VertexId s) const {
    const int kNone = static_cast<int>(PathType::DIS) + 1;
    std::vector<int> type(g.vertex_count(), kNone);
    using Item = std::pair<int, std::uint32_t>;
    std::priority_queue<Item, std::vector<Item>, std::greater<>> pq;
    type[s.value] = static_cast<int>(PathType::LOC);
    pq.emplace(type[s.value], s.value);
    while (!pq.empty()) {
      auto [t, u] = pq.top();
      pq.pop();
      if (t != type[u] || !can_leave(VertexId(u), s)) continue;
      for (LinkId l : g.links_of(VertexId(u))) {
        std::uint32_t v = g.other_end(l, VertexId(u)).value;
        int nt = std::max(t, static_cast<int>(hop[l.value]));
        if (nt < type[v]) {
          type[v] = nt;
          pq.emplace(nt, v);
        }
      }
    }
    return type;
  }

  std::vector<double> widest(VertexId s, int max_type) const {
    std::vector<double> bw(g.vertex_count(), -1);
    std::priority_queue<std::pair<double, std::uint32_t>> pq;
    bw[s.value] = kLocBandwidth * 1e6;  // larger than any link
    pq.emplace(bw[s.value], s.value);
    while (!pq.empty()) {
      auto [b, u] = pq.top();
      pq.pop();
      if (b != bw[u] || !can_leave(VertexId(u), s)) continue;
      for (LinkId l : g.links_of(VertexId(u))) {
        if (static_cast<int>(hop[l.value]) > max_type) continue;
        std::uint32_t v = g.other_end(l, VertexId(u)).value;
        double nb = std::min(b, g.link(l).bandwidth);
        if (nb > bw[v]) {
          bw[v] = nb;
          pq.emplace(nb, v);
        }
      }
    }
    return bw;
  }

  std::vector<int> fewest_hops(VertexId s, int max_type, double min_bw) const {
    std::vector<int> dist(g.vertex_count(), -1);
    std::deque<std::uint32_t> queue{s.value};
    dist[s.value] = 0;
    while (!queue.empty()) {
      std::uint32_t u = queue.front();
      queue.pop_front();
      if (!can_leave(VertexId(u), s)) continue;
      for (LinkId l : g.links_of(VertexId(u))) {
        if (static_cast<int>(hop[l.value]) > max_type || g.link(l).bandwidth < min_bw) continue;
        std::uint32_t v = g.other_end(l, VertexId(u)).value;
        if (dist[v] < 0) {
          dist[v] = dist[u] + 1;
          queue.push_back(v);
        }
      }
    }
    return dist;
  }
};

NodePaths::NodePaths(const NodeTopology& node) {
  const Graph& g = node.graph;
  compact_.assign(g.vertex_count(), -1);
  std::vector<VertexId> endpoints;
  for (std::uint32_t i = 0; i < g.vertex_count(); ++i) {
    if (is_endpoint(g.vertices()[i].kind)) {
      compact_[i] = static_cast<std::int32_t>(endpoints.size());
      endpoints.emplace_back(i);
    }
  }
  const std::size_t n = endpoints.size();
  table_.assign(n, std::vector<Path>(n));
  Impl impl(g);
  const int kUnreached = static_cast<int>(PathType::DIS) + 1;

  for (std::size_t i = 0; i < n; ++i) {
    VertexId s = endpoints[i];
    std::vector<int> type = impl.min_types(s);
    // Group destinations by type, then by bandwidth, so each search runs once per group.
    std::vector<std::vector<double>> widest_by_type(kUnreached);
    for (std::size_t j = 0; j < n; ++j) {
      Path& p = table_[i][j];
      if (i == j) {
        p = Path{PathType::LOC, kLocBandwidth, 0};
        continue;
      }
      int t = type[endpoints[j].value];
      if (t >= kUnreached) continue;  // DIS
      if (widest_by_type[t].empty()) widest_by_type[t] = impl.widest(s, t);
      p.type = static_cast<PathType>(t);
      p.bandwidth = widest_by_type[t][endpoints[j].value];
    }
    std::vector<std::pair<std::pair<int, double>, std::vector<int>>> hops_cache;
    for (std::size_t j = 0; j < n; ++j) {
      Path& p = table_[i][j];
      if (i == j || p.type == PathType::DIS) continue;
      std::pair<int, double> key{static_cast<int>(p.type), p.bandwidth};
      auto it = std::find_if(hops_cache.begin(), hops_cache.end(),
                             [&](const auto& e) { return e.first == key; });
      if (it == hops_cache.end()) {
        hops_cache.emplace_back(key, impl.fewest_hops(s, key.first, key.second));
        it = std::prev(hops_cache.end());
      }
      p.hops = it->second[endpoints[j].value];
    }
  }

  // NVB: GPU -NVLink-> GPU -NVLink-> GPU, the only way a path may use another GPU.
  for (std::size_t i = 0; i < n; ++i) {
    VertexId a = endpoints[i];
    if (g.vertex(a).kind != VertexKind::kGpu) continue;
    for (LinkId l1 : g.links_of(a)) {
      const Link& first = g.link(l1);
      VertexId relay = g.other_end(l1, a);
      if (first.kind != LinkKind::kNvLink || relay == a) continue;
      if (g.vertex(relay).kind != VertexKind::kGpu) continue;
      for (LinkId l2 : g.links_of(relay)) {
        const Link& second = g.link(l2);
        VertexId c = g.other_end(l2, relay);
        if (second.kind != LinkKind::kNvLink || c == a || c == relay) continue;
        if (g.vertex(c).kind != VertexKind::kGpu) continue;
        Path candidate{PathType::NVB, std::min(first.bandwidth, second.bandwidth), 2};
        Path& stored = table_[i][static_cast<std::size_t>(compact_[c.value])];
        if (better(candidate, stored)) stored = candidate;
      }
    }
  }
}

Path NodePaths::path(VertexId from, VertexId to) const {
  if (!from.valid() || !to.valid() || from.value >= compact_.size() ||
      to.value >= compact_.size()) {
    return {};
  }
  std::int32_t a = compact_[from.value], b = compact_[to.value];
  if (a < 0 || b < 0) return {};
  return table_[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)];
}

namespace {

// The kCpu a vertex hangs under, or the kCpu of its NUMA domain when the tree has no root.
VertexId cpu_of(const Graph& g, VertexId v) {
  VertexId cur = v;
  for (std::size_t steps = 0; cur.valid() && steps <= g.vertex_count(); ++steps) {
    if (g.vertex(cur).kind == VertexKind::kCpu) return cur;
    cur = g.vertex(cur).parent;
  }
  int numa = g.vertex(v).numa;
  if (numa < 0) return {};
  for (VertexId c : g.of_kind(VertexKind::kCpu)) {
    if (g.vertex(c).numa == numa) return c;
  }
  return {};
}

}  // namespace

std::vector<GpuLocality> gpu_locality(const NodeTopology& node) {
  return gpu_locality(node, NodePaths(node));
}

bool rdma_port_up(const NetPort& p) {
  // NCCL's IB plugin lists only ACTIVE ports: an HCA whose ports are all known to be down (a
  // pulled cable, a port still in INIT) is no net device. Unknown (files, hwloc) counts as up.
  return is_rdma(p) && (p.state.empty() || p.state == "ACTIVE" || p.state == "ACTIVE_DEFER");
}

std::vector<VertexId> net_candidates(const NodeTopology& node) {
  const Graph& g = node.graph;
  // NCCL's net devices are the RDMA ones when the node has any (its IB or net plugin), its
  // socket interfaces only otherwise.
  std::vector<VertexId> nics = node.nics();
  auto rdma = [&](VertexId n) {
    const auto& ports = g.vertex(n).nic.ports;
    return std::any_of(ports.begin(), ports.end(), rdma_port_up);
  };
  if (std::any_of(nics.begin(), nics.end(), rdma)) {
    nics.erase(std::remove_if(nics.begin(), nics.end(), [&](VertexId n) { return !rdma(n); }),
               nics.end());
  }
  // Without RDMA the nearest NIC names NCCL_SOCKET_IFNAME, which must reach other hosts. NCCL
  // dumps list every interface, and those without a PCI function (docker bridges, veth pairs,
  // calico and IPIP tunnels) sit under a CPU at LOC bandwidth, so they would win by "speed"
  // over the server's real ports. They are candidates only where the node has no PCI NIC
  // (a VM's eth0 on VMBus, as on Azure NC A100 v4).
  auto virtual_nic = [&](VertexId n) { return g.vertex(n).nic.virtual_nic; };
  if (std::any_of(nics.begin(), nics.end(), virtual_nic) &&
      !std::all_of(nics.begin(), nics.end(), virtual_nic)) {
    nics.erase(std::remove_if(nics.begin(), nics.end(), virtual_nic), nics.end());
  }
  return nics;
}

std::vector<GpuLocality> gpu_locality(const NodeTopology& node, const NodePaths& paths) {
  const Graph& g = node.graph;
  const std::vector<VertexId> nics = net_candidates(node);
  // NCCL's GPU-to-NET path ends with the port's own link (speed / 8000 GB/s), so behind one Gen5
  // PCIe path a 100G port gives 12.5 GB/s and a 400G port 48: NCCL picks the 400G one. A NIC whose
  // ports do not say their speed (NCCL asks the plugin then) counts at its PCIe bandwidth.
  auto port_cap = [&](VertexId n) {
    double mbps = -1;
    for (const NetPort& p : g.vertex(n).nic.ports) mbps = std::max(mbps, p.speed_mbps);
    return mbps > 0 ? net_bandwidth(mbps) : std::numeric_limits<double>::infinity();
  };
  std::vector<GpuLocality> out;
  for (VertexId gpu : node.gpus()) {
    GpuLocality loc;
    loc.gpu = gpu;
    for (VertexId nic : nics) {
      Path p = paths.path(gpu, nic);
      if (p.type == PathType::DIS) continue;
      p.bandwidth = std::min(p.bandwidth, port_cap(nic));
      bool wins = loc.nearest_nics.empty() || p.bandwidth > loc.bandwidth_to_nic ||
                  (p.bandwidth == loc.bandwidth_to_nic && p.type < loc.path_to_nic);
      bool ties = !loc.nearest_nics.empty() && p.bandwidth == loc.bandwidth_to_nic &&
                  p.type == loc.path_to_nic;
      if (wins) {
        loc.nearest_nics = {nic};
        loc.path_to_nic = p.type;
        loc.bandwidth_to_nic = p.bandwidth;
      } else if (ties) {
        loc.nearest_nics.push_back(nic);
      }
    }
    VertexId cpu = cpu_of(g, gpu);
    loc.numa = g.vertex(gpu).numa;
    if (cpu.valid()) {
      const Vertex& c = g.vertex(cpu);
      if (loc.numa < 0) loc.numa = c.numa;
      if (!c.cpu.pus.empty()) {
        loc.local_pus = c.cpu.pus;
      } else if (auto pus = parse_cpumap(c.cpu.affinity); pus && !c.cpu.affinity.empty()) {
        loc.local_pus = std::move(*pus);
      }
    }
    out.push_back(std::move(loc));
  }
  return out;
}

}  // namespace topoaware::topology
