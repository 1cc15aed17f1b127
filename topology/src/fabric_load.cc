// load_fabric(): reads a fabric file, recognizes its format from the content (never from the
// name), and hands it to the importer; plus the helpers all importers share.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "fabric_build.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/fabric_io.h"

namespace topoaware::topology {
namespace detail {

std::string read_fabric_file(const std::string& path) {
  std::error_code ec;
  auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    throw Error(ErrorCode::kNotFound, path, "no such file");
  }
  if (std::filesystem::is_directory(status)) {
    throw Error(ErrorCode::kBadInput, path, "is a directory, not a fabric file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kSystem, path, "cannot open for reading");
  std::string text;
  // Read in chunks so a device or FIFO without a size is bounded too.
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxFabricFileBytes) {
      throw Error(ErrorCode::kLimit, path,
                  "larger than " + std::to_string(kMaxFabricFileBytes >> 20) +
                      " MiB; not a fabric description this tool will read");
    }
  }
  if (in.bad()) throw Error(ErrorCode::kSystem, path, "read failed");
  if (text.size() >= 3 && static_cast<unsigned char>(text[0]) == 0xEF &&
      static_cast<unsigned char>(text[1]) == 0xBB && static_cast<unsigned char>(text[2]) == 0xBF) {
    text.erase(0, 3);
  }
  return text;
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
                                     int port_a, int port_b, bool assumed) {
  Link l;
  l.speed_assumed = assumed;
  l.a = a;
  l.b = b;
  l.kind = LinkKind::kNetwork;
  l.bandwidth = gbps;
  l.rate = rate;
  l.port_a = port_a;
  l.port_b = port_b;
  fabric_.graph.add_link(std::move(l));
}

}  // namespace detail

namespace {

enum class Format { kIbnetdiscover, kSlurmTopology, kToml, kJson };

bool starts_with_ci(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) !=
        std::tolower(static_cast<unsigned char>(prefix[i]))) {
      return false;
    }
  }
  return true;
}

Format detect(const std::string& path, std::string_view text) {
  // Binary data: a NUL byte, or many control characters early on.
  std::string_view head = text.substr(0, 4096);
  std::size_t control = 0;
  for (char c : head) {
    auto u = static_cast<unsigned char>(c);
    if (u == 0)
      throw Error(ErrorCode::kBadInput, path, "binary data (NUL bytes), not a fabric description");
    if (u < 0x20 && c != '\n' && c != '\r' && c != '\t') ++control;
  }
  if (control * 50 > head.size() + 50) {
    throw Error(ErrorCode::kBadInput, path,
                "binary data (control characters), not a fabric description");
  }
  if (detail::trim(text).empty()) throw Error(ErrorCode::kBadInput, path, "empty file");
  long line_no = 0;
  bool ibd_comment = false;
  for (std::string_view raw : detail::split_lines(text)) {
    ++line_no;
    std::string_view line = detail::trim(raw);
    if (line.empty()) continue;
    if (line[0] == '#') {
      if (line.find("Topology file: generated") != std::string_view::npos ||
          line.find("generated by IBDIAG") != std::string_view::npos) {
        ibd_comment = true;
      }
      continue;
    }
    if (line[0] == '{') return Format::kJson;
    if (line == "---" || starts_with_ci(line, "- topology:")) {
      throw Error(ErrorCode::kUnsupported, where(path, line_no),
                  "a Slurm topology.yaml (Slurm 25.05 and later) is not read; give the "
                  "topology.conf form (SwitchName=/BlockName= lines) or a TOML description");
    }
    if (starts_with_ci(line, "SwitchName=") || starts_with_ci(line, "BlockName=") ||
        starts_with_ci(line, "BlockSizes=")) {
      return Format::kSlurmTopology;
    }
    if (starts_with_ci(line, "vendid=") || starts_with_ci(line, "devid=") ||
        starts_with_ci(line, "sysimgguid=") || starts_with_ci(line, "switchguid=") ||
        starts_with_ci(line, "caguid=") || starts_with_ci(line, "Switch\t") ||
        starts_with_ci(line, "Switch ") || starts_with_ci(line, "Ca\t") ||
        starts_with_ci(line, "Ca ")) {
      return Format::kIbnetdiscover;
    }
    if (starts_with_ci(line, "Name=") || starts_with_ci(line, "NodeName=") ||
        starts_with_ci(line, "AutoDetect=")) {
      throw Error(ErrorCode::kUnsupported, where(path, line_no),
                  "a Slurm gres.conf (the GPUs of a node, not the network between nodes); "
                  "give an ibnetdiscover dump, a topology.conf or a TOML description");
    }
    if (line[0] == '[') {
      if (ibd_comment) return Format::kIbnetdiscover;
      return Format::kToml;
    }
    std::size_t eq = line.find('=');
    if (eq != std::string_view::npos && eq > 0) return Format::kToml;
    break;
  }
  if (ibd_comment) return Format::kIbnetdiscover;
  throw Error(ErrorCode::kBadInput, path,
              "unrecognized format: expected an ibnetdiscover dump, a Slurm topology.conf, a "
              "TOML fabric description or topo-aware's fabric JSON");
}

}  // namespace

Fabric load_fabric(const std::string& path, const std::string& guid_map) {
  std::string text = detail::read_fabric_file(path);
  Fabric f;
  switch (detect(path, text)) {
    case Format::kIbnetdiscover:
      f = detail::parse_ibnetdiscover(path, text, guid_map);
      break;
    case Format::kSlurmTopology:
      f = detail::parse_slurm_topology(path, text);
      break;
    case Format::kToml:
      f = detail::parse_fabric_toml(path, text);
      break;
    case Format::kJson:
      f = detail::parse_fabric_json(path, text);
      break;
  }
  if (!guid_map.empty() && f.source.rfind("ibnetdiscover:", 0) != 0) {
    throw Error(ErrorCode::kBadInput, guid_map,
                "a GUID map applies to ibnetdiscover dumps only, and " + path + " is not one");
  }
  analyze(f);
  return f;
}

}  // namespace topoaware::topology
