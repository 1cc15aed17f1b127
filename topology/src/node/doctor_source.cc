// The node doctor's sources (doctor_source.h): sysfs and NVML readings, capture facts, and the
// health directory.
#include "topoaware/topology/doctor_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <system_error>
#include <utility>
#include <vector>

#include "sysfs_read.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/nvml_source.h"

namespace topoaware::topology {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kConfigBytes = 4096;  // PCIe extended configuration space
constexpr std::size_t kExtCapStart = 0x100;
constexpr std::uint16_t kAcsCapId = 0x000D;
constexpr std::size_t kMaxReportBytes = std::size_t{16} << 20;

// The counters the doctor judges (doctor.h default_counter_thresholds); only these are kept.
std::set<std::string> judged_counters() {
  std::set<std::string> out;
  for (const auto& t : default_counter_thresholds()) out.insert(t.counter);
  return out;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "5: LinkUp" -> "LinkUp".
std::string after_colon(std::string_view s) {
  std::size_t colon = s.find(':');
  if (colon != std::string_view::npos) s.remove_prefix(colon + 1);
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  return std::string(s);
}

// Up to `limit` bytes of a regular file; empty when absent or unreadable.
std::string read_bytes(const fs::path& file, std::size_t limit) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return {};
  std::ifstream in(file, std::ios::binary);
  if (!in) return {};
  std::string buf(limit, '\0');
  in.read(buf.data(), static_cast<std::streamsize>(limit));
  buf.resize(static_cast<std::size_t>(in.gcount()));
  return buf;
}

struct Function {
  std::string busid;
  fs::path dir;
  std::vector<std::string> chain;  // bus ids from the root port down to this function
  long pci_class = -1;
  std::string vendor;
};

class FactsReader {
 public:
  FactsReader(const NodeTopology& node, std::string fsroot)
      : node_(node), root_(fsroot.empty() ? "/" : std::move(fsroot)) {}

  HealthFacts run(const NvmlApi* nvml) {
    read_pci();
    read_ports();
    if (nvml != nullptr) {
      read_nvlink(*nvml);
    } else {
      facts_.why_no_nvlink = "NVML is not available here: NVLink lanes not read";
    }
    return std::move(facts_);
  }

 private:
  void read_pci() {
    fs::path bus = root_ / "sys/bus/pci/devices";
    std::map<std::string, Function> fns;
    for (const auto& name : sysfs::list_dir(bus)) {
      if (!sysfs::is_busid(name)) continue;
      auto dir = sysfs::resolve(root_, fs::path("sys/bus/pci/devices") / name);
      if (!dir) continue;
      fs::path rel = dir->lexically_relative(root_ / "sys/devices");
      if (rel.empty() || *rel.begin() == "..") continue;
      Function f;
      f.busid = lower(name);
      f.dir = *dir;
      for (const auto& part : rel) {
        if (sysfs::is_busid(part.string())) f.chain.push_back(lower(part.string()));
      }
      if (f.chain.empty() || f.chain.back() != f.busid) continue;
      auto cls = sysfs::read_line(*dir / "class");
      auto v = cls ? sysfs::parse_long(*cls, 0) : std::nullopt;
      if (!v) continue;
      f.pci_class = *v;
      f.vendor = lower(sysfs::read_line(*dir / "vendor").value_or(""));
      fns[f.busid] = std::move(f);
    }
    if (fns.empty()) {
      facts_.why_no_pcie = "no PCI functions under sys/bus/pci/devices";
      facts_.why_no_acs = facts_.why_no_pcie;
      return;
    }
    // Devices the doctor looks at, and every bridge above them.
    std::map<std::string, std::string> kind;
    std::set<std::string> acs_ports;
    for (const auto& [busid, f] : fns) {
      long base = f.pci_class >> 16, sub = (f.pci_class >> 8) & 0xff;
      bool nvidia = f.vendor == "0x10de";
      std::string k;
      if (base == 0x03 && nvidia) k = "gpu";
      if (base == 0x02) k = "nic";
      if (base == 0x06 && sub == 0x80 && nvidia) k = "nvswitch";
      if (k.empty()) continue;
      kind[busid] = k;
      for (std::size_t i = 0; i + 1 < f.chain.size(); ++i) {
        if (!kind.count(f.chain[i])) kind[f.chain[i]] = "bridge";
        // Switch ports (not the root port) above GPUs and NICs carry their peer-to-peer traffic.
        if (i > 0 && k != "nvswitch") acs_ports.insert(f.chain[i]);
      }
    }
    std::vector<PcieLinkFacts> links;
    for (const auto& [busid, k] : kind) {
      auto it = fns.find(busid);
      if (it == fns.end()) continue;  // an ancestor sysfs does not list: nothing to read
      const Function& f = it->second;
      PcieLinkFacts p;
      p.busid = busid;
      p.kind = k;
      p.upstream = f.chain.size() > 1 ? f.chain[f.chain.size() - 2] : std::string();
      p.root_port = k == "bridge" && f.chain.size() == 1;
      if (auto s = sysfs::read_line(f.dir / "current_link_speed")) p.speed_gts = parse_pcie_gts(*s);
      if (auto s = sysfs::read_line(f.dir / "max_link_speed")) p.max_speed_gts = parse_pcie_gts(*s);
      p.width = read_width(f.dir / "current_link_width");
      p.max_width = read_width(f.dir / "max_link_width");
      links.push_back(std::move(p));
    }
    facts_.pcie = std::move(links);

    std::vector<AcsFacts> acs;
    int absent = 0;
    for (const std::string& busid : acs_ports) {
      auto it = fns.find(busid);
      if (it == fns.end()) continue;
      std::error_code ec;
      if (!fs::is_regular_file(it->second.dir / "config", ec)) {
        ++absent;
        continue;
      }
      std::string bytes = read_bytes(it->second.dir / "config", kConfigBytes);
      if (auto a = acs_from_config(busid, bytes)) {
        acs.push_back(*a);
      } else {
        acs.push_back(AcsFacts{busid, false, false, 0});
      }
    }
    if (acs.empty()) {
      facts_.why_no_acs = acs_ports.empty() ? "no PCIe switch above a GPU or NIC"
                                            : "no PCI config space in this sysfs tree";
      return;
    }
    if (absent > 0) {
      facts_.notes.push_back("doctor: " + std::to_string(absent) +
                             " switch port(s) without a config file; ACS not read there");
    }
    facts_.acs = std::move(acs);
  }

  static int read_width(const fs::path& file) {
    auto s = sysfs::read_line(file);
    auto v = s ? sysfs::parse_long(*s) : std::nullopt;
    return v && *v > 0 && *v <= 32 ? static_cast<int>(*v) : -1;
  }

  // The netdev discovery placed on a port (verbs/sysfs agree on names).
  std::string netdev_of(const std::string& device, int port) const {
    VertexId v = node_.graph.find_name(VertexKind::kNic, device);
    if (!v.valid()) return {};
    for (const NetPort& p : node_.graph.vertex(v).nic.ports) {
      if (p.name == device && p.port == port) return p.netdev;
    }
    return {};
  }

  void read_ports() {
    fs::path cls("sys/class/infiniband");
    const std::set<std::string> wanted = judged_counters();
    std::vector<RdmaPortFacts> ports;
    for (const auto& name : sysfs::list_dir(root_ / cls)) {
      auto dir = sysfs::resolve(root_, cls / name);
      if (!dir) continue;
      for (const auto& p : sysfs::list_dir(*dir / "ports")) {
        auto num = sysfs::parse_long(p);
        if (!num || *num < 1 || *num > 64) continue;
        fs::path pd = *dir / "ports" / p;
        RdmaPortFacts f;
        f.device = name;
        f.port = static_cast<int>(*num);
        if (auto s = sysfs::read_line(pd / "phys_state")) f.phys_state = after_colon(*s);
        for (const auto& c : sysfs::list_dir(pd / "counters")) {
          if (!wanted.count(c)) continue;
          auto s = sysfs::read_line(pd / "counters" / c);
          auto v = s ? sysfs::parse_long(*s) : std::nullopt;
          if (v && *v >= 0) f.counters[c] = static_cast<std::uint64_t>(*v);
        }
        f.netdev = netdev_of(name, f.port);
        if (!f.netdev.empty()) {
          fs::path nd = root_ / "sys/class/net" / f.netdev;
          auto carrier = sysfs::read_line(nd / "carrier");
          auto cv = carrier ? sysfs::parse_long(*carrier) : std::nullopt;
          if (cv && (*cv == 0 || *cv == 1)) {
            f.carrier = static_cast<int>(*cv);
          } else if (auto op = sysfs::read_line(nd / "operstate"); op && *op == "down") {
            f.carrier = 0;  // the kernel refuses to read carrier of an interface set down
          }
          auto mtu = sysfs::read_line(nd / "mtu");
          auto mv = mtu ? sysfs::parse_long(*mtu) : std::nullopt;
          if (mv && *mv > 0 && *mv <= 1 << 20) f.mtu = static_cast<int>(*mv);
        }
        ports.push_back(std::move(f));
      }
    }
    if (ports.empty()) {
      facts_.why_no_ports = "no RDMA ports under sys/class/infiniband";
      return;
    }
    facts_.ports = std::move(ports);
  }

  void read_nvlink(const NvmlApi& api) {
    if (api.init() != nvml::kSuccess) {
      facts_.why_no_nvlink = "NVML failed to initialize: NVLink lanes not read";
      return;
    }
    unsigned count = 0;
    std::vector<NvlinkFacts> out;
    if (api.device_count(&count) == nvml::kSuccess) {
      for (unsigned i = 0; i < count && i < 1024; ++i) {
        nvml::Device dev{};
        if (api.handle_by_index(i, &dev) != nvml::kSuccess) continue;
        nvml::PciInfo pci{};
        if (api.pci_info(dev, &pci) != nvml::kSuccess) continue;
        std::string raw(pci.bus_id, strnlen(pci.bus_id, sizeof pci.bus_id));
        NvlinkFacts f;
        f.busid = normalize_busid(raw);
        if (f.busid.empty()) continue;
        f.lanes = 0;
        f.active = 0;
        for (unsigned link = 0; link < nvml::kMaxNvLinks; ++link) {
          int enabled = 0;
          if (api.nvlink_state(dev, link, &enabled) != nvml::kSuccess) continue;
          ++f.lanes;
          if (enabled == nvml::kFeatureEnabled) ++f.active;
        }
        out.push_back(std::move(f));
      }
    }
    api.shutdown();
    facts_.nvlink = std::move(out);
  }

  const NodeTopology& node_;
  fs::path root_;
  HealthFacts facts_;
};

void check_host_name(const std::string& host) {
  if (host.empty() || host == "." || host == ".." || host.find('/') != std::string::npos ||
      host.find('\0') != std::string::npos) {
    throw Error(ErrorCode::kBadInput, host.empty() ? "(empty host name)" : host,
                "not usable as a file name in the health directory");
  }
}

}  // namespace

std::optional<AcsFacts> acs_from_config(const std::string& busid, std::string_view config) {
  if (config.size() < kExtCapStart + 4) return std::nullopt;
  auto dword = [&](std::size_t at) {
    return static_cast<std::uint32_t>(static_cast<unsigned char>(config[at])) |
           static_cast<std::uint32_t>(static_cast<unsigned char>(config[at + 1])) << 8 |
           static_cast<std::uint32_t>(static_cast<unsigned char>(config[at + 2])) << 16 |
           static_cast<std::uint32_t>(static_cast<unsigned char>(config[at + 3])) << 24;
  };
  AcsFacts a;
  a.busid = busid;
  a.readable = true;
  std::size_t at = kExtCapStart;
  // Each header: capability id (15:0), version (19:16), next offset (31:20). The list lives in
  // 0x100..0xfff, dword aligned; a bounded walk ends loops in a corrupt or hostile list.
  for (int hops = 0; hops < 1024 && at >= kExtCapStart && at + 8 <= config.size(); ++hops) {
    std::uint32_t h = dword(at);
    if (h == 0 || h == 0xffffffffu) break;
    if ((h & 0xffff) == kAcsCapId) {
      a.has_acs = true;
      a.control = static_cast<std::uint16_t>(dword(at + 4) >> 16);  // control at +6
      break;
    }
    std::size_t next = (h >> 20) & 0xffc;
    if (next <= at) break;  // the list only moves forward
    at = next;
  }
  return a;
}

HealthFacts read_health_facts(const NodeTopology& node, const std::string& fsroot,
                              const NvmlApi* nvml) {
  return FactsReader(node, fsroot).run(nvml);
}

HealthFacts facts_from_capture(const NodeTopology& node) {
  HealthFacts f;
  f.why_no_pcie = "a capture records the trained link only, not the maximum: not checked";
  f.why_no_acs = "a capture has no PCI config space: not checked";
  f.why_no_ports = "a capture has no port counters or netdev state: not checked";
  std::vector<NvlinkFacts> lanes;
  for (VertexId g : node.gpus()) {
    NvlinkFacts x;
    x.busid = node.graph.vertex(g).busid;
    x.lanes = 0;
    for (LinkId id : node.graph.links_of(g)) {
      const Link& l = node.graph.link(id);
      if (l.kind == LinkKind::kNvLink && l.a != l.b) x.lanes += l.count;
    }
    x.active = x.lanes;
    lanes.push_back(std::move(x));
  }
  f.nvlink = std::move(lanes);
  return f;
}

std::string health_report_path(const std::string& dir, const std::string& host) {
  check_host_name(host);
  return (fs::path(dir) / (host + ".json")).string();
}

void write_health_report(const std::string& dir, const HealthReport& report) {
  const std::string path = health_report_path(dir, report.host);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir, ec)) {
    throw Error(ErrorCode::kSystem, dir, "health directory missing and cannot be created");
  }
  std::string tmpl = (fs::path(dir) / ("." + report.host + ".json.XXXXXX")).string();
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  int fd = mkstemp(name.data());
  if (fd < 0) {
    throw Error(ErrorCode::kSystem, dir, std::string("cannot create a file: ") + strerror(errno));
  }
  const std::string tmp(name.data());
  const std::string text = health_report_to_json(report);
  bool ok = fchmod(fd, 0644) == 0;
  for (std::size_t done = 0; ok && done < text.size();) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<std::size_t>(n);
  }
  ok = ok && fsync(fd) == 0;
  int saved = errno;
  ok = ::close(fd) == 0 && ok;
  if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) {
    saved = errno;
    ok = false;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    throw Error(ErrorCode::kSystem, path, std::string("write failed: ") + strerror(saved));
  }
  // Make the rename itself durable (a crash right after must not bring the old file back).
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    fsync(dfd);
    ::close(dfd);
  }
}

std::optional<HealthReport> read_health_report(const std::string& dir, const std::string& host) {
  const std::string path = health_report_path(dir, host);
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  if (!fs::is_regular_file(path, ec)) throw Error(ErrorCode::kBadInput, path, "not a file");
  std::string text = read_bytes(path, kMaxReportBytes + 1);
  if (text.size() > kMaxReportBytes) throw Error(ErrorCode::kLimit, path, "over 16 MiB");
  return health_report_from_json(text, path);
}

}  // namespace topoaware::topology
