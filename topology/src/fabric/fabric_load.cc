// load_fabric(): reads a fabric file through read_input() (input_format.h: gzip, BOM, CRLF and
// shell prompts handled, the format recognized from the content or given), and hands it to the
// importer; plus the helpers all importers share.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "fabric_build.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/fabric_io.h"
#include "topoaware/topology/input_format.h"

namespace topoaware::topology {
namespace detail {

std::string read_fabric_file(const std::string& path) {
  return read_input(path, kMaxFabricFileBytes).text;
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t nl = text.find('\n', start);
    std::size_t end = nl == std::string_view::npos ? text.size() : nl;
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  return lines;
}

std::string_view trim(std::string_view s) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

double rate_gbps(std::string_view rate) {
  std::string r;
  for (char c : rate) r.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  // "<lanes>X<speed>": InfiniBand. Per-lane data rates after line encoding, in Gb/s.
  std::size_t x = r.find('X');
  if (x != std::string::npos && x > 0 && x <= 2 &&
      std::all_of(r.begin(), r.begin() + static_cast<long>(x),
                  [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    int lanes = std::stoi(r.substr(0, x));
    std::string speed = r.substr(x + 1);
    static const std::pair<const char*, double> kLane[] = {
        {"SDR", 2.0},  {"DDR", 4.0},  {"QDR", 8.0},   {"FDR10", 10.0}, {"FDR", 13.64},
        {"EDR", 25.0}, {"HDR", 50.0}, {"NDR", 100.0}, {"XDR", 200.0}};
    for (const auto& [name, gbit] : kLane) {
      if (speed == name) return lanes * gbit / 8.0;
    }
    return -1;
  }
  // "400G", "400Gb", "400Gb/s", "400GbE": Ethernet-style line rate in Gb/s.
  std::size_t i = 0;
  while (i < r.size() && (std::isdigit(static_cast<unsigned char>(r[i])) || r[i] == '.')) ++i;
  if (i == 0 || i > 8) return -1;
  std::string unit = r.substr(i);
  if (unit == "G" || unit == "GB" || unit == "GB/S" || unit == "GBE" || unit == "GBPS") {
    try {
      return std::stod(r.substr(0, i)) / 8.0;
    } catch (const std::exception&) {
      return -1;
    }
  }
  return -1;
}

VertexId FabricBuilder::switch_named(const std::string& name) const {
  auto it = switches_.find(name);
  return it == switches_.end() ? VertexId() : it->second;
}

VertexId FabricBuilder::add_switch(const std::string& name, const std::string& guid,
                                   const std::string& model, int ports) {
  Vertex v;
  v.kind = VertexKind::kSwitch;
  v.name = name;
  v.sw.guid = guid;
  v.sw.model = model;
  v.sw.ports = ports;
  VertexId id = fabric_.graph.add_vertex(std::move(v));
  switches_.emplace(name, id);
  return id;
}

std::uint32_t FabricBuilder::host(const std::string& name) {
  auto it = fabric_.host_index.find(name);
  if (it != fabric_.host_index.end()) return it->second;
  // Readers that know the line refuse first; this holds for every reader and every sum of lists.
  if (fabric_.hosts.size() >= kMaxFabricHosts) {
    throw Error(
        ErrorCode::kLimit, fabric_.source,
        "names more than " + std::to_string(kMaxFabricHosts) + " hosts, the limit for one fabric");
  }
  Vertex v;
  v.kind = VertexKind::kHost;
  v.name = name;
  HostInfo h;
  h.vertex = fabric_.graph.add_vertex(std::move(v));
  h.name = name;
  auto idx = static_cast<std::uint32_t>(fabric_.hosts.size());
  fabric_.hosts.push_back(std::move(h));
  fabric_.host_index.emplace(name, idx);
  return idx;
}

void FabricBuilder::connect_host(std::uint32_t host, VertexId sw, double gbps,
                                 const std::string& rate, const std::string& nic, int host_port,
                                 int switch_port, bool assumed) {
  HostInfo& h = fabric_.hosts.at(host);
  Link l;
  l.a = h.vertex;
  l.b = sw;
  l.kind = LinkKind::kNetwork;
  l.bandwidth = gbps;
  l.rate = rate;
  l.port_a = host_port;
  l.port_b = switch_port;
  l.speed_assumed = assumed;
  fabric_.graph.add_link(std::move(l));
  h.port_switch.push_back(sw);
  h.port_gbps.push_back(gbps);
  h.port_nic.push_back(nic);
  if (assumed) h.port_speed_assumed = true;
}

void FabricBuilder::connect_switches(VertexId a, VertexId b, double gbps, const std::string& rate,
                                     int port_a, int port_b, bool assumed, int cables) {
  if (cables < 1) return;
  Graph& g = fabric_.graph;
  const bool portless = port_a < 0 && port_b < 0;
  const std::uint64_t key = (std::uint64_t{a.value} << 32) | b.value;
  if (portless) {
    auto it = portless_.find(key);
    if (it != portless_.end()) {
      Link& l = g.link(it->second);
      // Same kind of cable: the merged link's bandwidth stays count x one cable's. A count is
      // bounded (a JSON file can repeat a pair without end); past it, a new link starts.
      constexpr int kMaxCount = 1 << 20;
      if (l.rate == rate && l.speed_assumed == assumed && l.bandwidth == gbps * l.count &&
          l.count <= kMaxCount - cables) {
        l.count += cables;
        l.bandwidth = gbps * l.count;
        return;
      }
    }
  }
  Link l;
  l.speed_assumed = assumed;
  l.a = a;
  l.b = b;
  l.kind = LinkKind::kNetwork;
  l.count = portless ? cables : 1;
  l.bandwidth = gbps * l.count;
  l.rate = rate;
  l.port_a = port_a;
  l.port_b = port_b;
  LinkId id = g.add_link(std::move(l));
  if (portless) {
    portless_[key] = id;
  } else {
    for (int k = 1; k < cables; ++k) {
      Link more = g.link(id);
      g.add_link(std::move(more));
    }
  }
}

Fabric load_fabric_input(InputText in, const std::string& path, const std::string& guid_map,
                         InputFormat format) {
  if (format == InputFormat::kAuto) format = detect_format(in.text, InputKind::kFabric, path);
  Fabric f;
  switch (format) {
    case InputFormat::kIbnetdiscover:
      f = parse_ibnetdiscover(path, in.text, guid_map);
      break;
    case InputFormat::kSlurmTopology:
      f = parse_slurm_topology(path, in.text);
      break;
    case InputFormat::kFabricToml:
      f = parse_fabric_toml(path, in.text);
      break;
    case InputFormat::kFabricJson:
      f = parse_fabric_json(path, in.text);
      break;
    case InputFormat::kLingjunCsv:
      f = parse_lingjun_csv(path, in.text);
      break;
    default:
      throw Error(ErrorCode::kBadInput, path, "no fabric reader for this format");
  }
  f.notes.insert(f.notes.begin(), in.notes.begin(), in.notes.end());
  if (!guid_map.empty() && f.source.rfind("ibnetdiscover:", 0) != 0) {
    throw Error(ErrorCode::kBadInput, guid_map,
                "a GUID map applies to ibnetdiscover dumps only, and " + path + " is not one");
  }
  analyze(f);
  return f;
}

}  // namespace detail

Fabric load_fabric(const std::string& path, const std::string& guid_map, InputFormat format) {
  if (!format_of_kind(format, InputKind::kFabric)) {
    throw Error(ErrorCode::kBadInput, path,
                std::string(to_string(format)) + " is a node capture format, not a fabric's (" +
                    format_names(InputKind::kFabric) + ")");
  }
  InputText in = read_input(path, detail::kMaxFabricFileBytes);
  return detail::load_fabric_input(std::move(in), path, guid_map, format);
}

Fabric load_fabric_text(std::string text, const std::string& name, InputFormat format) {
  if (!format_of_kind(format, InputKind::kFabric)) {
    throw Error(ErrorCode::kBadInput, name,
                std::string(to_string(format)) + " is a node capture format, not a fabric's");
  }
  if (text.size() > detail::kMaxFabricFileBytes) {
    throw Error(ErrorCode::kLimit, name, "larger than a fabric description this tool will read");
  }
  return detail::load_fabric_input(clean_input(std::move(text), name), name, {}, format);
}

}  // namespace topoaware::topology
