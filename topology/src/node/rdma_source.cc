#include "topoaware/topology/rdma_source.h"

#include <dlfcn.h>
#include <endian.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "sysfs_read.h"

namespace topoaware::topology {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kMaxRdmaDevices = 1024;
constexpr int kMaxPorts = 64;

// One port as sysfs and verbs describe it, before it lands in the model.
struct PortFacts {
  int port = -1;
  double gbps = -1;
  int width = -1;
  std::string state, link_layer, netdev;
};

struct RdmaDevice {
  std::string name;
  std::string busid;  // empty when not a PCI function we can place
  std::string guid;
  int numa = -1;
  std::map<int, PortFacts> ports;
};

// The nearest PCI function at or above a resolved sysfs path ("", when none).
std::string busid_of(const fs::path& resolved) {
  std::string found;
  for (const auto& part : resolved) {
    if (sysfs::is_busid(part.string())) found = part.string();
  }
  for (char& c : found) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return found;
}

// "4: ACTIVE" -> "ACTIVE".
std::string port_state(std::string_view s) {
  std::size_t colon = s.find(':');
  if (colon != std::string_view::npos) s.remove_prefix(colon + 1);
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  return std::string(s);
}

// "400 Gb/sec (4X NDR)" -> 400 Gb/s and 4 lanes. Anything else leaves them unknown.
bool parse_rate(std::string_view s, double* gbps, int* width) {
  std::size_t sp = s.find(' ');
  if (sp == std::string_view::npos || s.substr(sp + 1).rfind("Gb/sec", 0) != 0) return false;
  std::string num(s.substr(0, sp));
  char* end = nullptr;
  double v = std::strtod(num.c_str(), &end);
  if (end == num.c_str() || *end != '\0' || !(v > 0) || v > 1e6) return false;
  *gbps = v;
  std::size_t paren = s.find('(');
  if (paren != std::string_view::npos) {
    std::string_view w = s.substr(paren + 1);
    std::size_t x = w.find_first_of("Xx");
    if (x != std::string_view::npos) {
      auto lanes = sysfs::parse_long(w.substr(0, x));
      if (lanes && *lanes > 0 && *lanes <= 32) *width = static_cast<int>(*lanes);
    }
  }
  return true;
}

class RdmaScan {
 public:
  RdmaScan(NodeTopology& node, std::string fsroot)
      : node_(node), root_(fsroot.empty() ? "/" : std::move(fsroot)) {}

  void run(const VerbsApi* verbs) {
    read_sysfs();
    if (verbs != nullptr) read_verbs(*verbs);
    if (devices_.empty()) node_.notes.push_back("rdma: no RDMA devices");
    apply();
    read_netdevs();
  }

 private:
  void note(std::string s) { node_.notes.push_back("rdma: " + std::move(s)); }

  void read_sysfs() {
    fs::path cls("sys/class/infiniband");
    std::size_t count = 0;
    for (const auto& name : sysfs::list_dir(root_ / cls)) {
      if (++count > kMaxRdmaDevices) {
        note("more than " + std::to_string(kMaxRdmaDevices) + " RDMA devices; rest ignored");
        break;
      }
      RdmaDevice d;
      d.name = name;
      auto dir = sysfs::resolve(root_, cls / name);
      auto pci = sysfs::resolve(root_, cls / name / "device");
      if (!dir) {
        note((cls / name).string() + ": dangling link; skipped");
        continue;
      }
      if (pci) {
        d.busid = busid_of(*pci);
        if (auto n = sysfs::read_line(*pci / "numa_node")) {
          auto v = sysfs::parse_long(*n);
          if (v && *v >= -1 && *v < 1 << 16) d.numa = static_cast<int>(*v);
        }
      }
      if (d.busid.empty()) note(name + ": no PCI function behind device link");
      if (auto g = sysfs::read_line(*dir / "node_guid")) d.guid = sysfs::guid_from_sysfs(*g);
      for (const auto& p : sysfs::list_dir(*dir / "ports")) {
        auto num = sysfs::parse_long(p);
        if (!num || *num < 1 || *num > kMaxPorts) continue;
        PortFacts f;
        f.port = static_cast<int>(*num);
        fs::path pd = *dir / "ports" / p;
        if (auto r = sysfs::read_line(pd / "rate"); r && !parse_rate(*r, &f.gbps, &f.width)) {
          note(name + " port " + p + ": rate '" + sysfs::excerpt(*r) +
               "' not understood; speed unknown");
        }
        if (auto s = sysfs::read_line(pd / "state")) f.state = port_state(*s);
        if (auto l = sysfs::read_line(pd / "link_layer")) f.link_layer = *l;
        if (pci) f.netdev = netdev_for(*pci, f.port);
        d.ports[f.port] = f;
      }
      devices_[name] = std::move(d);
    }
  }

  // The netdev of an HCA port: the device's only netdev, or the one whose dev_port matches.
  std::string netdev_for(const fs::path& pci_dir, int port) {
    auto names = sysfs::list_dir(pci_dir / "net");
    if (names.size() == 1) return names.front();
    for (const auto& n : names) {
      auto dp = sysfs::read_line(pci_dir / "net" / n / "dev_port");
      auto v = dp ? sysfs::parse_long(*dp) : std::nullopt;
      if (v && *v == port - 1) return n;
    }
    return {};
  }

  void read_verbs(const VerbsApi& api) {
    int n = 0;
    ibv_device** list = api.get_device_list(&n);
    if (list == nullptr) {
      // Without the kernel's RDMA subsystem the list is null (ENOSYS): only worth a note when
      // sysfs did show devices whose ports verbs should have described.
      if (!devices_.empty()) note("ibv_get_device_list failed; port data from sysfs only");
      return;
    }
    for (int i = 0; i < n && list[i] != nullptr && i < static_cast<int>(kMaxRdmaDevices); ++i) {
      const char* raw = api.get_device_name(list[i]);
      if (raw == nullptr) continue;
      std::string name(raw);
      ibv_context* ctx = api.open_device(list[i]);
      if (ctx == nullptr) {
        note(name + ": ibv_open_device failed; sysfs data kept");
        continue;
      }
      ibv_device_attr attr{};
      if (api.query_device(ctx, &attr) != 0) {
        note(name + ": ibv_query_device failed; sysfs data kept");
        api.close_device(ctx);
        continue;
      }
      RdmaDevice& d = devices_[name];
      if (d.name.empty()) {
        d.name = name;
        note(name + ": seen by verbs but not in sysfs; its PCI place is unknown");
      }
      if (attr.node_guid != 0) {
        char buf[24];
        std::snprintf(buf, sizeof buf, "0x%016llx",
                      static_cast<unsigned long long>(be64toh(attr.node_guid)));
        d.guid = buf;
      }
      int ports = std::min<int>(attr.phys_port_cnt, kMaxPorts);
      for (int p = 1; p <= ports; ++p) {
        ibv_port_attr pa{};
        if (api.query_port(ctx, static_cast<std::uint8_t>(p), &pa) != 0) {
          note(name + " port " + std::to_string(p) + ": ibv_query_port failed");
          continue;
        }
        PortFacts& f = d.ports[p];
        f.port = p;
        f.state = std::string(ibv_port_state_str(pa.state));
        double gbps = ib_rate_gbps(pa.active_speed, pa.active_width);
        if (gbps > 0) f.gbps = gbps;
        if (int w = ib_width_lanes(pa.active_width); w > 0) f.width = w;
        if (pa.link_layer == IBV_LINK_LAYER_INFINIBAND) f.link_layer = "InfiniBand";
        if (pa.link_layer == IBV_LINK_LAYER_ETHERNET) f.link_layer = "Ethernet";
      }
      api.close_device(ctx);
    }
    api.free_device_list(list);
  }

  // ibv_port_state_str lives in the library; the fake has no such symbol, so name states here.
  static const char* ibv_port_state_str(ibv_port_state s) {
    switch (s) {
      case IBV_PORT_NOP: return "NOP";
      case IBV_PORT_DOWN: return "DOWN";
      case IBV_PORT_INIT: return "INIT";
      case IBV_PORT_ARMED: return "ARMED";
      case IBV_PORT_ACTIVE: return "ACTIVE";
      case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
    }
    return "UNKNOWN";
  }

  void apply() {
    // SR-IOV virtual functions a source left out can number in the hundreds: one note for all.
    std::vector<std::string> unplaced;
    for (auto& [name, d] : devices_) {
      if (d.busid.empty()) continue;
      VertexId v = node_.graph.find_busid(d.busid);
      if (!v.valid()) {
        unplaced.push_back(name + " (" + d.busid + ")");
        continue;
      }
      Vertex& x = node_.graph.vertex(v);
      if (x.kind == VertexKind::kPciDevice) x.kind = VertexKind::kNic;
      if (x.kind != VertexKind::kNic) {
        note(name + " (" + d.busid + "): PCI function is a " + std::string(to_string(x.kind)) +
             ", not a NIC; skipped");
        continue;
      }
      x.name = name;
      if (x.numa < 0 && d.numa >= 0) x.numa = d.numa;
      // Ports from an earlier source under the same device name are replaced, not duplicated.
      auto& ports = x.nic.ports;
      // (A named copy: clang before 16 cannot capture a structured binding.)
      const std::string& device = name;
      ports.erase(std::remove_if(ports.begin(), ports.end(),
                                 [&device](const NetPort& p) { return p.name == device; }),
                  ports.end());
      for (const auto& [num, f] : d.ports) {
        NetPort p;
        p.name = name;
        p.port = num;
        p.speed_mbps = f.gbps > 0 ? f.gbps * 1000 : -1;
        p.guid = d.guid;
        p.link_layer = f.link_layer;
        p.state = f.state;
        p.width = f.width;
        p.netdev = f.netdev;
        ports.push_back(std::move(p));
      }
    }
    if (!unplaced.empty()) {
      std::string list;
      for (std::size_t k = 0; k < unplaced.size() && k < 8; ++k) {
        list += (k ? ", " : "") + unplaced[k];
      }
      if (unplaced.size() > 8) list += ", ...";
      note(std::to_string(unplaced.size()) + " RDMA device(s) whose PCI function is not in the " +
           "node model, skipped: " + list);
    }
  }

  // PCI NICs without an RDMA device are named after their netdev (NCCL_SOCKET_IFNAME's words).
  void read_netdevs() {
    fs::path cls("sys/class/net");
    for (const auto& ifname : sysfs::list_dir(root_ / cls)) {
      auto pci = sysfs::resolve(root_, cls / ifname / "device");
      if (!pci) continue;  // virtual (lo, bridges, docker): not a PCI NIC
      std::string busid = busid_of(*pci);
      VertexId v = busid.empty() ? VertexId() : node_.graph.find_busid(busid);
      if (!v.valid()) continue;
      Vertex& x = node_.graph.vertex(v);
      if (x.kind != VertexKind::kNic) continue;
      // Ports named after an RDMA device (mlx5_0, netdev ib0 or none) differ from their netdev.
      bool has_rdma = std::any_of(x.nic.ports.begin(), x.nic.ports.end(),
                                  [](const NetPort& p) { return p.netdev != p.name; });
      if (has_rdma) continue;  // an HCA already named after its RDMA device
      // An earlier source (hwloc) may already list the interface: complete it, don't repeat it.
      auto it = std::find_if(x.nic.ports.begin(), x.nic.ports.end(),
                             [&](const NetPort& p) { return p.name == ifname; });
      NetPort fresh;
      NetPort& p = it != x.nic.ports.end() ? *it : fresh;
      p.name = ifname;
      p.netdev = ifname;
      if (p.link_layer.empty()) p.link_layer = "Ethernet";
      fs::path dir = root_ / cls / ifname;
      if (auto s = sysfs::read_line(dir / "speed"); s && p.speed_mbps <= 0) {
        auto mbps = sysfs::parse_long(*s);
        if (mbps && *mbps > 0) p.speed_mbps = static_cast<double>(*mbps);
      }
      if (auto st = sysfs::read_line(dir / "operstate"); st && p.state.empty()) {
        p.state = *st;
        for (char& c : p.state) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      }
      if (it == x.nic.ports.end()) x.nic.ports.push_back(std::move(fresh));
      if (x.name.empty()) x.name = ifname;
    }
  }

  NodeTopology& node_;
  fs::path root_;
  std::map<std::string, RdmaDevice> devices_;
};

template <class Fn>
bool bind(void* lib, Fn*& slot, const char* symbol, const char* version, std::string* missing) {
  void* p = version != nullptr ? dlvsym(lib, symbol, version) : nullptr;
  if (p == nullptr) p = dlsym(lib, symbol);
  if (p == nullptr) {
    if (!missing->empty()) *missing += ", ";
    *missing += symbol;
    return false;
  }
  slot = reinterpret_cast<Fn*>(p);
  return true;
}

struct LoadedVerbs {
  VerbsApi api;
  bool ok = false;
  std::string why;
};

LoadedVerbs load_verbs_once() {
  LoadedVerbs out;
  // RTLD_LOCAL keeps the library's symbols out of the global namespace of the host process
  // (slurmstepd loads us as a plugin); the handle stays open for the process lifetime.
  void* lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* e = dlerror();
    out.why = std::string("libibverbs.so.1 not loadable: ") + (e ? e : "unknown error");
    return out;
  }
  std::string missing;
  VerbsApi& a = out.api;
  const char* v11 = "IBVERBS_1.1";  // the current ABI of every entry point we use
  bind(lib, a.get_device_list, "ibv_get_device_list", v11, &missing);
  bind(lib, a.free_device_list, "ibv_free_device_list", v11, &missing);
  bind(lib, a.get_device_name, "ibv_get_device_name", v11, &missing);
  bind(lib, a.open_device, "ibv_open_device", v11, &missing);
  bind(lib, a.close_device, "ibv_close_device", v11, &missing);
  bind(lib, a.query_device, "ibv_query_device", v11, &missing);
  bind(lib, a.query_port, "ibv_query_port", v11, &missing);
  if (!missing.empty()) {
    out.why = "libibverbs.so.1 lacks " + missing;
    return out;
  }
  out.ok = true;
  return out;
}

}  // namespace

const VerbsApi* load_verbs(std::string* why) {
  static const LoadedVerbs loaded = load_verbs_once();
  if (!loaded.ok) {
    if (why != nullptr) *why = loaded.why;
    return nullptr;
  }
  return &loaded.api;
}

double ib_rate_gbps(int active_speed, int active_width) {
  double lane = -1;
  switch (active_speed) {
    case 1: lane = 2.5; break;    // SDR
    case 2: lane = 5; break;      // DDR
    case 4:                       // QDR
    case 8: lane = 10; break;     // FDR10 (10.3125 signalling, 64b/66b: NCCL counts 10)
    case 16: lane = 14; break;    // FDR
    case 32: lane = 25; break;    // EDR
    case 64: lane = 50; break;    // HDR
    case 128: lane = 100; break;  // NDR
    case 256: lane = 200; break;  // XDR
    default: return -1;
  }
  int lanes = ib_width_lanes(active_width);
  return lanes > 0 ? lane * lanes : -1;
}

int ib_width_lanes(int active_width) {
  switch (active_width) {
    case 1: return 1;
    case 2: return 4;
    case 4: return 8;
    case 8: return 12;
    case 16: return 2;
    default: return -1;
  }
}

void enrich_with_rdma(NodeTopology& node, const std::string& fsroot, const VerbsApi* verbs) {
  RdmaScan(node, fsroot).run(verbs);
}

}  // namespace topoaware::topology
