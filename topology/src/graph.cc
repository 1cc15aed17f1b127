#include "topoaware/topology/graph.h"

#include <cctype>
#include <cstdio>

#include "topoaware/topology/error.h"

namespace topoaware::topology {

std::string where(const std::string& path, long line) {
  return line > 0 ? path + ":" + std::to_string(line) : path;
}

std::string_view to_string(VertexKind k) {
  switch (k) {
    case VertexKind::kCpu: return "cpu";
    case VertexKind::kPciSwitch: return "pci-switch";
    case VertexKind::kPciDevice: return "pci-device";
    case VertexKind::kGpu: return "gpu";
    case VertexKind::kNic: return "nic";
    case VertexKind::kNvSwitch: return "nvswitch";
    case VertexKind::kHost: return "host";
    case VertexKind::kSwitch: return "switch";
  }
  return "?";
}

bool is_rdma(const NetPort& p) {
  if (p.port == 0) return false;
  return !(p.port < 0 && !p.netdev.empty() && p.netdev == p.name);
}

std::string_view to_string(LinkKind k) {
  switch (k) {
    case LinkKind::kNvLink: return "nvlink";
    case LinkKind::kC2C: return "c2c";
    case LinkKind::kPcie: return "pcie";
    case LinkKind::kSmp: return "smp";
    case LinkKind::kNetwork: return "network";
  }
  return "?";
}

VertexId Graph::add_vertex(Vertex v) {
  VertexId id(static_cast<std::uint32_t>(vertices_.size()));
  vertices_.push_back(std::move(v));
  adjacency_.emplace_back();
  return id;
}

void Graph::reserve(std::size_t vertices, std::size_t links) {
  vertices_.reserve(vertices);
  adjacency_.reserve(vertices);
  links_.reserve(links);
}

LinkId Graph::add_link(Link l) {
  if (!l.a.valid() || !l.b.valid() || l.a.value >= vertices_.size() ||
      l.b.value >= vertices_.size()) {
    throw Error(ErrorCode::kBadInput, {}, "link between unknown vertices");
  }
  LinkId id(static_cast<std::uint32_t>(links_.size()));
  adjacency_[l.a.value].push_back(id);
  if (l.b != l.a) adjacency_[l.b.value].push_back(id);
  links_.push_back(std::move(l));
  return id;
}

std::vector<VertexId> Graph::children(VertexId v) const {
  std::vector<VertexId> out;
  for (std::uint32_t i = 0; i < vertices_.size(); ++i) {
    if (vertices_[i].parent == v) out.emplace_back(i);
  }
  return out;
}

std::vector<VertexId> Graph::of_kind(VertexKind k) const {
  std::vector<VertexId> out;
  for (std::uint32_t i = 0; i < vertices_.size(); ++i) {
    if (vertices_[i].kind == k) out.emplace_back(i);
  }
  return out;
}

VertexId Graph::find_busid(std::string_view busid) const {
  std::string key = normalize_busid(busid);
  if (key.empty()) return {};
  for (std::uint32_t i = 0; i < vertices_.size(); ++i) {
    if (vertices_[i].busid == key) return VertexId(i);
  }
  return {};
}

VertexId Graph::find_name(VertexKind k, std::string_view name) const {
  for (std::uint32_t i = 0; i < vertices_.size(); ++i) {
    if (vertices_[i].kind == k && vertices_[i].name == name) return VertexId(i);
  }
  return {};
}

std::string normalize_busid(std::string_view in) {
  // Accept [domain:]bus:dev.fn with hex fields of any width; emit dddd:bb:dd.f (domain at least
  // four digits, as NCCL's own formatting does).
  unsigned long domain = 0, bus = 0, dev = 0, fn = 0;
  std::string s(in);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto parse_hex = [](const std::string& t, unsigned long& out) {
    if (t.empty() || t.size() > 8) return false;
    for (char c : t) {
      if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
    }
    out = std::stoul(t, nullptr, 16);
    return true;
  };
  std::size_t dot = s.rfind('.');
  if (dot == std::string::npos || dot + 2 != s.size()) return {};
  if (!parse_hex(s.substr(dot + 1), fn) || fn > 7) return {};
  std::string head = s.substr(0, dot);
  std::size_t c2 = head.rfind(':');
  if (c2 == std::string::npos) return {};
  if (!parse_hex(head.substr(c2 + 1), dev) || dev > 0x1f) return {};
  std::string rest = head.substr(0, c2);
  std::size_t c1 = rest.rfind(':');
  if (c1 == std::string::npos) {
    if (!parse_hex(rest, bus)) return {};
  } else {
    if (!parse_hex(rest.substr(c1 + 1), bus) || !parse_hex(rest.substr(0, c1), domain)) return {};
  }
  if (bus > 0xff || domain > 0xffffffffUL) return {};
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04lx:%02lx:%02lx.%lx", domain, bus, dev, fn);
  return buf;
}

}  // namespace topoaware::topology
