#include "topoaware/topology/sysfs_source.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "node_build.h"
#include "sysfs_read.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/paths.h"

namespace topoaware::topology {
namespace {

namespace fs = std::filesystem;

// What sysfs says about one PCI function.
struct PciFunction {
  std::string busid;
  std::vector<std::string> chain;  // bus ids from the root port down to this function
  long pci_class = -1;
  PciInfo info;
  int numa = -1;
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Reads a "0x...." id attribute; empty when absent or not hex.
std::string read_hex_id(const fs::path& file) {
  auto v = sysfs::read_line(file);
  if (!v || !sysfs::parse_long(*v, 0)) return {};
  return lower(*v);
}

// NCCL's cpumap form: 32-bit hex words, most significant first, comma separated.
std::string cpumap_from_pus(const std::vector<std::uint32_t>& pus) {
  if (pus.empty()) return {};
  std::uint32_t words = pus.back() / 32 + 1;
  std::vector<std::uint32_t> mask(words, 0);
  for (std::uint32_t p : pus) mask[p / 32] |= 1u << (p % 32);
  std::string out;
  for (std::uint32_t i = words; i-- > 0;) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%08x", mask[i]);
    if (!out.empty()) out += ',';
    out += buf;
  }
  return out;
}

bool valid_cpumap(std::string_view s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return c == ',' || std::isxdigit(static_cast<unsigned char>(c));
  });
}

class SysfsBuilder {
 public:
  explicit SysfsBuilder(std::string fsroot) : root_(std::move(fsroot)) {}

  NodeTopology build() {
    std::error_code ec;
    if (!fs::is_directory(root_, ec)) {
      throw Error(ErrorCode::kNotFound, root_.string(), "sysfs root is not a directory");
    }
    // A root without sys/ is a mistyped --fsroot, not a machine with no devices.
    if (!fs::is_directory(root_ / "sys", ec)) {
      throw Error(ErrorCode::kNotFound, root_.string(),
                  "no sys/ below this root: not a sysfs root");
    }
    node_.source = "sysfs:" + root_.string();
    read_hostname();
    read_cpus();
    read_pci();
    return std::move(node_);
  }

 private:
  void note(std::string s) { node_.notes.push_back("sysfs: " + std::move(s)); }

  void read_hostname() {
    if (auto h = sysfs::read_line(root_ / "etc/hostname"); h && !h->empty()) {
      node_.hostname = *h;
    } else if (root_ == "/") {
      char buf[HOST_NAME_MAX + 1] = {};
      if (gethostname(buf, sizeof buf - 1) == 0) node_.hostname = buf;
    }
  }

  CpuInfo cpu_template() {
    CpuInfo c;
    std::ifstream in(root_ / "proc/cpuinfo");
    std::string line;
    bool arm = false, power = false;
    // The first processor block is enough: NCCL describes a socket by one vendor/family/model.
    for (int n = 0; n < 64 && std::getline(in, line); ++n) {
      if (line.empty()) break;
      std::size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string key = line.substr(0, colon);
      while (!key.empty() && std::isspace(static_cast<unsigned char>(key.back()))) key.pop_back();
      std::string val = line.substr(colon + 1);
      while (!val.empty() && std::isspace(static_cast<unsigned char>(val.front()))) val.erase(0, 1);
      if (key == "vendor_id") c.vendor = val;
      if (key == "cpu family") c.family = static_cast<int>(sysfs::parse_long(val).value_or(-1));
      if (key == "model") c.model = static_cast<int>(sysfs::parse_long(val).value_or(-1));
      if (key == "CPU implementer") arm = true;
      if (key == "cpu" && val.rfind("POWER", 0) == 0) power = true;
    }
    if (root_ == "/") {
      utsname u{};
      if (uname(&u) == 0) c.arch = u.machine;
    } else if (!c.vendor.empty()) {
      c.arch = "x86_64";
    } else if (arm) {
      c.arch = "arm64";
    } else if (power) {
      c.arch = "ppc64";
    }
    if (c.arch == "aarch64") c.arch = "arm64";  // NCCL matches arm64 only
    if (c.arch.rfind("ppc64", 0) == 0) c.arch = "ppc64";
    return c;
  }

  void read_cpus() {
    CpuInfo tmpl = cpu_template();
    fs::path nodes = root_ / "sys/devices/system/node";
    std::map<long, fs::path> numa_dirs;
    for (const auto& name : sysfs::list_dir(nodes)) {
      if (name.rfind("node", 0) != 0) continue;
      if (auto n = sysfs::parse_long(std::string_view(name).substr(4)); n && *n >= 0) {
        numa_dirs[*n] = nodes / name;
      }
    }
    if (numa_dirs.empty()) {
      note("no NUMA nodes under sys/devices/system/node; one CPU domain assumed");
      CpuInfo c = tmpl;
      auto online = sysfs::read_line(root_ / "sys/devices/system/cpu/online");
      if (auto pus = online ? sysfs::parse_cpulist(*online) : std::nullopt) c.pus = *pus;
      c.affinity = cpumap_from_pus(c.pus);
      add_cpu(0, std::move(c));
    }
    for (const auto& [n, dir] : numa_dirs) {
      CpuInfo c = tmpl;
      auto list = sysfs::read_line(dir / "cpulist");
      auto pus = list ? sysfs::parse_cpulist(*list) : std::nullopt;
      if (!pus) {
        note((dir / "cpulist").string() + ": missing or malformed; NUMA " + std::to_string(n) +
             " has no CPU set");
      } else {
        c.pus = std::move(*pus);
      }
      auto map = sysfs::read_line(dir / "cpumap");
      c.affinity = map && valid_cpumap(*map) ? *map : cpumap_from_pus(c.pus);
      if (c.pus.empty()) continue;  // memory-only node (CXL, HBM): nothing attaches there
      add_cpu(static_cast<int>(n), std::move(c));
    }
    if (cpus_.empty()) {
      note("no NUMA node lists any CPU; one CPU domain assumed");
      add_cpu(0, tmpl);
    }
    // Every pair of CPU domains talks through the socket interconnect (NCCL's SYS links).
    for (auto i = cpus_.begin(); i != cpus_.end(); ++i) {
      for (auto j = std::next(i); j != cpus_.end(); ++j) {
        Link l;
        l.a = i->second;
        l.b = j->second;
        l.kind = LinkKind::kSmp;
        l.bandwidth = smp_bandwidth(node_.graph.vertex(i->second).cpu);
        node_.graph.add_link(l);
      }
    }
  }

  void add_cpu(int numa, CpuInfo c) {
    Vertex v;
    v.kind = VertexKind::kCpu;
    v.name = "NUMA" + std::to_string(numa);
    v.numa = numa;
    v.cpu = std::move(c);
    cpus_[numa] = node_.graph.add_vertex(std::move(v));
  }

  // The CPU domain a root-attached PCI vertex hangs from.
  VertexId cpu_for(int numa, const std::string& busid) {
    if (auto it = cpus_.find(numa); it != cpus_.end()) return it->second;
    if (cpus_.size() > 1) {
      note(busid + ": NUMA node unknown (" + std::to_string(numa) + "); attached to " +
           node_.graph.vertex(cpus_.begin()->second).name);
    }
    return cpus_.begin()->second;
  }

  std::optional<PciFunction> read_function(const std::string& busid, const fs::path& dir) {
    PciFunction f;
    f.busid = busid;
    fs::path rel = dir.lexically_relative(root_ / "sys/devices");
    if (rel.empty() || *rel.begin() == "..") {
      note("sys/bus/pci/devices/" + busid + " points outside sys/devices; skipped");
      return std::nullopt;
    }
    for (const auto& part : rel) {
      if (sysfs::is_busid(part.string())) f.chain.push_back(lower(part.string()));
    }
    if (f.chain.empty() || f.chain.back() != lower(busid)) {
      note("sys/bus/pci/devices/" + busid + " resolves to " + rel.string() +
           ", not a PCI function of that address; skipped");
      return std::nullopt;
    }
    auto cls = sysfs::read_line(dir / "class");
    auto cls_value = cls ? sysfs::parse_long(*cls, 0) : std::nullopt;
    if (!cls_value || *cls_value < 0 || *cls_value > 0xffffff) {
      note(busid + ": class missing or malformed (" + (cls ? sysfs::excerpt(*cls) : "absent") +
           "); skipped");
      return std::nullopt;
    }
    f.pci_class = *cls_value;
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%06lx", f.pci_class);
    f.info.pci_class = buf;
    f.info.vendor = read_hex_id(dir / "vendor");
    f.info.device = read_hex_id(dir / "device");
    f.info.subsystem_vendor = read_hex_id(dir / "subsystem_vendor");
    f.info.subsystem_device = read_hex_id(dir / "subsystem_device");
    if (auto s = sysfs::read_line(dir / "current_link_speed"))
      f.info.link_speed = sysfs::pcie_speed(*s);
    if (auto w = sysfs::read_line(dir / "current_link_width")) {
      if (auto n = sysfs::parse_long(*w); n && *n > 0 && *n <= 32)
        f.info.link_width = static_cast<int>(*n);
    }
    if (auto n = sysfs::read_line(dir / "numa_node")) {
      auto v = sysfs::parse_long(*n);
      if (v && *v >= -1 && *v < 1 << 16) {
        f.numa = static_cast<int>(*v);
      } else {
        note(busid + ": numa_node malformed (" + sysfs::excerpt(*n) + ")");
      }
    }
    return f;
  }

  void read_pci() {
    fs::path bus = root_ / "sys/bus/pci/devices";
    for (const auto& name : sysfs::list_dir(bus)) {
      if (!sysfs::is_busid(name)) continue;
      auto dir = sysfs::resolve(root_, fs::path("sys/bus/pci/devices") / name);
      if (!dir) {
        note("sys/bus/pci/devices/" + name + ": dangling or looping link; skipped");
        continue;
      }
      if (auto f = read_function(name, *dir)) functions_[f->busid] = std::move(*f);
    }
    int gpu_index = 0;
    for (const auto& [busid, f] : functions_) {
      long base = f.pci_class >> 16;
      bool gpu = base == 0x03 && f.info.vendor == "0x10de";
      bool nic = base == 0x02;
      if (!gpu && !nic) continue;
      Vertex v;
      v.kind = gpu ? VertexKind::kGpu : VertexKind::kNic;
      if (gpu) v.name = "GPU" + std::to_string(gpu_index++);
      v.busid = busid;
      v.pci = f.info;
      v.numa = f.numa;
      VertexId parent = parent_of(f.chain, static_cast<int>(f.chain.size()) - 3, f.numa, busid);
      attach(std::move(v), parent);
    }
  }

  // NCCL's walk: from a function, the next PCI vertex up is two path levels higher (the
  // switch's upstream port, skipping the downstream port); below the root port lies the CPU.
  // `child` is the bus id of the vertex asking, named in a note when its socket is unknown.
  VertexId parent_of(const std::vector<std::string>& chain, int idx, int numa_hint,
                     const std::string& child) {
    if (idx < 0) return cpu_for(numa_hint, child);
    const std::string& busid = chain[static_cast<std::size_t>(idx)];
    if (auto it = switches_.find(busid); it != switches_.end()) return it->second;
    Vertex v;
    v.kind = VertexKind::kPciSwitch;
    v.busid = busid;
    auto f = functions_.find(busid);
    if (f != functions_.end()) {
      v.pci = f->second.info;
      v.numa = f->second.numa;
    } else {
      v.pci.pci_class = "0x060400";
    }
    if (v.numa < 0) v.numa = numa_hint;
    VertexId parent = parent_of(chain, idx - 2, v.numa, busid);
    VertexId id = attach(std::move(v), parent);
    switches_[busid] = id;
    return id;
  }

  VertexId attach(Vertex v, VertexId parent) {
    const Vertex& p = node_.graph.vertex(parent);
    if (v.numa < 0) v.numa = p.numa;
    v.parent = parent;
    double bw = pcie_bandwidth(v.pci.link_speed, v.pci.link_width);
    VertexId id = node_.graph.add_vertex(std::move(v));
    add_pcie_uplink(node_.graph, id, parent, bw);
    return id;
  }

  fs::path root_;
  NodeTopology node_;
  std::map<int, VertexId> cpus_;
  std::map<std::string, PciFunction> functions_;
  std::map<std::string, VertexId> switches_;
};

}  // namespace

NodeTopology load_sysfs_node(const std::string& fsroot) {
  return SysfsBuilder(fsroot.empty() ? "/" : fsroot).build();
}

}  // namespace topoaware::topology
