// hwloc -> NodeTopology (see hwloc_source.h for the mapping).
#include "topoaware/topology/hwloc_source.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "node_build.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/input_format.h"
#include "topoaware/topology/paths.h"
#include "topoaware/topology/sources.h"

namespace topoaware::topology {
namespace {

// hwloc XML of the largest machines is a few MB; anything this big is not an export.
constexpr std::size_t kMaxXmlBytes = std::size_t{256} << 20;

using PciAttr = hwloc_obj_attr_u::hwloc_pcidev_attr_s;
using BridgeAttr = hwloc_obj_attr_u::hwloc_bridge_attr_s;

// An hwloc enum field as the integer it holds. hwloc's XML import stores whatever number the file
// gave (bridge_type="2-1", osdev_type=9), and reading such a value as the enum is undefined
// behaviour (found by fuzzing: UBSan on a bridge type of 2); compared as an integer, an unknown
// value is simply none of the known ones.
template <typename E>
std::underlying_type_t<E> enum_value(const E& e) {
  std::underlying_type_t<E> v;
  static_assert(sizeof v == sizeof e);
  std::memcpy(&v, &e, sizeof v);
  return v;
}

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using TopologyPtr = std::unique_ptr<hwloc_topology, TopologyDeleter>;

// Initializes a topology that keeps every I/O object: bridges, PCI functions, OS devices.
TopologyPtr new_topology(unsigned long flags, const std::string& context) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) {
    throw Error(ErrorCode::kSystem, context, "hwloc_topology_init failed");
  }
  TopologyPtr topo(raw);
  if (hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_ALL) != 0 ||
      hwloc_topology_set_flags(raw, flags) != 0) {
    throw Error(ErrorCode::kSystem, context, "cannot configure hwloc to keep I/O objects");
  }
  return topo;
}

std::string info(hwloc_obj_t obj, const char* name) {
  const char* v = obj ? hwloc_obj_get_info_by_name(obj, name) : nullptr;
  return v ? std::string(v) : std::string();
}

std::string hex4(unsigned v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%04x", v & 0xFFFFu);
  return buf;
}

std::string busid_of(const PciAttr& p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%01x", static_cast<unsigned>(p.domain),
                static_cast<unsigned>(p.bus), static_cast<unsigned>(p.dev),
                static_cast<unsigned>(p.func));
  return buf;
}

int parse_int(const std::string& s) {
  if (s.empty()) return -1;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s.c_str(), &end, 0);
  if (errno != 0 || end == s.c_str() || *end != '\0' || v < 0 || v > 1'000'000) return -1;
  return static_cast<int>(v);
}

// hwloc reports a link as total GB/s after encoding. Split it back into NCCL's generation string
// and a width; x16 is preferred among equal products (Gen3 x16 == Gen4 x8), which gives the same
// NCCL bandwidth either way since both scale per lane alike.
void set_link(PciInfo& pci, float gbps) {
  if (!(gbps > 0)) return;
  struct Gen {
    const char* name;
    double lane_gbps;
  };
  static constexpr Gen kGens[] = {
      {"2.5 GT/s PCIe", 0.25},
      {"5.0 GT/s PCIe", 0.5},
      {"8.0 GT/s PCIe", 8.0 * 128 / 130 / 8},
      {"16.0 GT/s PCIe", 16.0 * 128 / 130 / 8},
      {"32.0 GT/s PCIe", 32.0 * 128 / 130 / 8},
      {"64.0 GT/s PCIe", 64.0 * 242 / 256 / 8},
  };
  static constexpr int kWidths[] = {16, 8, 4, 2, 1, 32, 12};
  double best_err = 1e300;
  for (int w : kWidths) {
    for (const Gen& g : kGens) {
      double err = std::fabs(gbps - w * g.lane_gbps) / gbps;
      if (err < 0.002) err = 0;  // exact up to hwloc's float rounding: first in order wins
      if (err < best_err) {
        best_err = err;
        pci.link_speed = g.name;
        pci.link_width = w;
      }
    }
  }
}

// The full class as sysfs writes it ("0x010802"), when this is the machine hwloc looked at and
// sysfs agrees with hwloc on class and subclass; empty otherwise.
std::string sysfs_class(const std::string& busid, unsigned class_id) {
  std::string path = "/sys/bus/pci/devices/" + busid + "/class";
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "re"), &std::fclose);
  if (!f) return {};
  char buf[16] = {};
  if (!std::fgets(buf, sizeof buf, f.get())) return {};
  std::string v(buf);
  while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.pop_back();
  char expect[8];
  std::snprintf(expect, sizeof expect, "0x%04x", class_id & 0xFFFFu);
  if (v.size() != 8 || v.compare(0, 6, expect) != 0) return {};
  return v;
}

void fill_pci(PciInfo& pci, const PciAttr& p, bool this_system) {
  char buf[16];
  // hwloc keeps class and subclass only; the programming interface byte comes from sysfs when
  // the topology is this machine's, and is written as 00 otherwise.
  std::snprintf(buf, sizeof buf, "0x%04x00", static_cast<unsigned>(p.class_id));
  pci.pci_class = buf;
  if (this_system) {
    std::string full = sysfs_class(busid_of(p), p.class_id);
    if (!full.empty()) pci.pci_class = full;
  }
  pci.vendor = hex4(p.vendor_id);
  pci.device = hex4(p.device_id);
  pci.subsystem_vendor = hex4(p.subvendor_id);
  pci.subsystem_device = hex4(p.subdevice_id);
  set_link(pci, p.linkspeed);
}

// Compute capability from the marketing name, for NVLink lane bandwidth and NCCL's sm attribute.
int sm_from_model(const std::string& model) {
  struct Entry {
    const char* needle;
    int sm;
  };
  // Longer names first: "A100" before "A10", "L40" before "L4", "H200" before "H20".
  static constexpr Entry kTable[] = {
      {"GB200", 100}, {"B200", 100}, {"B100", 100}, {"H100", 90}, {"H200", 90}, {"H800", 90},
      {"GH200", 90},  {"H20", 90},   {"L40", 89},   {"L4", 89},   {"A100", 80}, {"A800", 80},
      {"A30", 80},    {"A10", 86},   {"A40", 86},   {"T4", 75},   {"V100", 70}, {"P100", 60},
      {"P40", 61},    {"K80", 37},   {"M2075", 20},
  };
  for (const Entry& e : kTable) {
    if (model.find(e.needle) != std::string::npos) return e.sm;
  }
  return -1;
}

// Port numbers an OpenFabrics device describes ("Port1State", "Port2LID", ...), ascending.
std::set<int> ports_of(hwloc_obj_t dev) {
  std::set<int> ports;
  for (unsigned k = 0; k < dev->infos_count; ++k) {
    const char* key = dev->infos[k].name;
    if (!key || std::strncmp(key, "Port", 4) != 0) continue;
    int n = 0, digits = 0;
    for (const char* c = key + 4; *c >= '0' && *c <= '9' && digits < 4; ++c, ++digits) {
      n = n * 10 + (*c - '0');
    }
    if (digits > 0 && n > 0) ports.insert(n);
  }
  if (ports.empty()) ports.insert(1);  // an HCA has at least one port even when hwloc is silent
  return ports;
}

// Index from an OS device name such as "nvml3" after its prefix, or -1.
int index_after(const std::string& name, std::string_view prefix) {
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return -1;
  return parse_int(name.substr(prefix.size()));
}

// NVLink lanes from hwloc's MB/s: 20000 per NVLink1 lane, 25000 per lane of later generations.
int lanes_from_mbps(std::uint64_t mbps) {
  if (mbps % 25000 == 0) return static_cast<int>(mbps / 25000);
  if (mbps % 20000 == 0) return static_cast<int>(mbps / 20000);
  return std::max(1, static_cast<int>(std::lround(static_cast<double>(mbps) / 25000.0)));
}

std::string arch_for_nccl(const std::string& arch) {
  if (arch.rfind("ppc64", 0) == 0) return "ppc64";
  if (arch == "aarch64" || arch == "arm64") return "arm64";
  return arch;
}

std::string port_state(const std::string& v) {
  switch (parse_int(v)) {
    case 1: return "DOWN";
    case 2: return "INIT";
    case 3: return "ARMED";
    case 4: return "ACTIVE";
    case 5: return "ACTIVE_DEFER";
    default: return v;
  }
}

class Converter {
 public:
  Converter(hwloc_topology_t topo, NodeTopology& out)
      : topo_(topo), out_(out), this_system_(hwloc_topology_is_thissystem(topo) == 1) {}

  void run() {
    hwloc_obj_t root = hwloc_get_root_obj(topo_);
    out_.hostname = info(root, "HostName");
    add_cpus(root);
    walk_normal(root);
    add_nvlinks();
    add_smp_links(out_);
    if (pci_count_ == 0) {
      out_.notes.push_back("hwloc: no PCI devices (I/O discovery unavailable or not exported)");
    }
  }

 private:
  void add_cpus(hwloc_obj_t root) {
    std::string arch = arch_for_nccl(info(root, "Architecture"));
    for (hwloc_obj_t numa = hwloc_get_next_obj_by_type(topo_, HWLOC_OBJ_NUMANODE, nullptr); numa;
         numa = hwloc_get_next_obj_by_type(topo_, HWLOC_OBJ_NUMANODE, numa)) {
      Vertex v;
      v.kind = VertexKind::kCpu;
      v.numa = static_cast<int>(numa->os_index);
      v.name = "NUMA" + std::to_string(numa->os_index);
      v.cpu.arch = arch;
      hwloc_obj_t package = package_of(numa);
      v.cpu.vendor = info(package, "CPUVendor");
      v.cpu.family = parse_int(info(package, "CPUFamilyNumber"));
      v.cpu.model = parse_int(info(package, "CPUModelNumber"));
      if (numa->cpuset) {
        unsigned pu;
        hwloc_bitmap_foreach_begin(pu, numa->cpuset) { v.cpu.pus.push_back(pu); }
        hwloc_bitmap_foreach_end();
      }
      v.cpu.affinity = format_cpumap(v.cpu.pus);
      VertexId id = out_.graph.add_vertex(std::move(v));
      cpu_by_numa_.emplace(static_cast<int>(numa->os_index), id);
      obj_vertex_[numa] = id;
    }
  }

  // The Package whose CPU model describes this NUMA node: an ancestor, or for a NUMA node
  // spanning packages (one NUMA, several sockets) the first package inside its cpuset.
  hwloc_obj_t package_of(hwloc_obj_t numa) {
    hwloc_obj_t p = hwloc_get_ancestor_obj_by_type(topo_, HWLOC_OBJ_PACKAGE, numa);
    if (p) return p;
    if (numa->cpuset && !hwloc_bitmap_iszero(numa->cpuset)) {
      p = hwloc_get_next_obj_covering_cpuset_by_type(topo_, numa->cpuset, HWLOC_OBJ_PACKAGE,
                                                     nullptr);
      if (!p) p = hwloc_get_obj_inside_cpuset_by_type(topo_, numa->cpuset, HWLOC_OBJ_PACKAGE, 0);
    }
    if (!p) p = hwloc_get_obj_by_type(topo_, HWLOC_OBJ_PACKAGE, 0);
    return p;
  }

  // The kCpu for an object: the first NUMA node of its (or its non-I/O ancestor's) nodeset.
  VertexId cpu_for(hwloc_obj_t obj) {
    hwloc_obj_t anc = obj->type == HWLOC_OBJ_PACKAGE || obj->type == HWLOC_OBJ_MACHINE ||
                              obj->type == HWLOC_OBJ_GROUP
                          ? obj
                          : hwloc_get_non_io_ancestor_obj(topo_, obj);
    if (anc && anc->nodeset) {
      int first = hwloc_bitmap_first(anc->nodeset);
      auto it = cpu_by_numa_.find(first);
      if (it != cpu_by_numa_.end()) return it->second;
    }
    return cpu_by_numa_.empty() ? VertexId() : cpu_by_numa_.begin()->second;
  }

  void walk_normal(hwloc_obj_t obj) {
    for (hwloc_obj_t io = obj->io_first_child; io; io = io->next_sibling) {
      VertexId cpu = cpu_for(obj);
      walk_io(io, cpu, 0);
    }
    for (hwloc_obj_t c = obj->first_child; c; c = c->next_sibling) walk_normal(c);
  }

  // bridge_depth: PCI-to-PCI bridges above `obj` (the root port is depth 1). Bridges at even
  // depth are switch upstream ports and become kPciSwitch; odd ones (root ports, downstream
  // ports) are folded into their parent, as NCCL's two-levels-at-a-time sysfs walk does.
  void walk_io(hwloc_obj_t obj, VertexId parent, unsigned bridge_depth) {
    if (obj->type == HWLOC_OBJ_BRIDGE) {
      const BridgeAttr& b = obj->attr->bridge;
      VertexId below = parent;
      unsigned depth = bridge_depth;
      if (enum_value(b.upstream_type) == HWLOC_OBJ_BRIDGE_PCI) {
        depth = bridge_depth + 1;
        if (depth % 2 == 0) below = add_switch(b.upstream.pci, parent);
      }
      for (hwloc_obj_t c = obj->io_first_child; c; c = c->next_sibling) walk_io(c, below, depth);
    } else if (obj->type == HWLOC_OBJ_PCI_DEVICE) {
      add_pci_device(obj, parent);
    }
    // OS devices are handled with their PCI function; others (misc) carry nothing we model.
  }

  VertexId add_child(Vertex v, VertexId parent) {
    v.parent = parent;
    if (parent.valid()) v.numa = out_.graph.vertex(parent).numa;
    VertexId id = out_.graph.add_vertex(std::move(v));
    if (parent.valid()) {
      const Vertex& child = out_.graph.vertex(id);
      add_pcie_uplink(out_.graph, id, parent,
                      pcie_bandwidth(child.pci.link_speed, child.pci.link_width));
    }
    return id;
  }

  VertexId add_switch(const PciAttr& p, VertexId parent) {
    Vertex v;
    v.kind = VertexKind::kPciSwitch;
    v.busid = busid_of(p);
    fill_pci(v.pci, p, this_system_);
    ++pci_count_;
    return add_child(std::move(v), parent);
  }

  void add_pci_device(hwloc_obj_t obj, VertexId parent) {
    const PciAttr& p = obj->attr->pcidev;
    ++pci_count_;
    Vertex v;
    v.busid = busid_of(p);
    fill_pci(v.pci, p, this_system_);

    std::vector<hwloc_obj_t> osdevs;
    for (hwloc_obj_t c = obj->io_first_child; c; c = c->next_sibling) {
      if (c->type == HWLOC_OBJ_OS_DEVICE && c->name) osdevs.push_back(c);
    }
    // GPU OS devices in order of preference: NVML's index is what NCCL calls dev.
    hwloc_obj_t gpu_dev = nullptr;
    int gpu_index = -1;
    for (std::string_view prefix : {"nvml", "cuda", "rsmi"}) {
      for (hwloc_obj_t d : osdevs) {
        int idx = index_after(d->name, prefix);
        if (idx >= 0 && !gpu_dev) {
          gpu_dev = d;
          gpu_index = idx;
        }
      }
    }
    hwloc_obj_t opencl = nullptr;
    std::vector<hwloc_obj_t> fabrics, netdevs;
    for (hwloc_obj_t d : osdevs) {
      auto t = enum_value(d->attr->osdev.type);
      if (t == HWLOC_OBJ_OSDEV_OPENFABRICS) fabrics.push_back(d);
      if (t == HWLOC_OBJ_OSDEV_NETWORK) netdevs.push_back(d);
      if (!opencl && std::strncmp(d->name, "opencl", 6) == 0) opencl = d;
    }
    unsigned base_class = p.class_id >> 8;
    bool gpu_vendor = p.vendor_id == 0x10de || p.vendor_id == 0x1002;
    bool is_nvswitch = (obj->subtype && std::strcmp(obj->subtype, "NVSwitch") == 0) ||
                       (p.vendor_id == 0x10de && p.class_id == 0x0680);

    // A VGA function of a GPU vendor with no compute driver and a narrow link is a management
    // controller's display (the ATI ES1000 of many servers), not a GPU.
    bool display_only =
        p.class_id == 0x0300 && !gpu_dev && !opencl && p.linkspeed > 0 && p.linkspeed < 2.0f;
    if (gpu_dev || (base_class == 0x03 && gpu_vendor && !display_only)) {
      v.kind = VertexKind::kGpu;
      hwloc_obj_t named = gpu_dev ? gpu_dev : opencl;
      if (named) v.name = named->name;
      // NCCL's dev is the NVML index (PCI order); ROCm SMI's plays that part for AMD. hwloc's
      // cudaN is the CUDA runtime's order (fastest first), which differs on mixed nodes and
      // under CUDA_VISIBLE_DEVICES, and NCCL lets a file's dev override NVML: leave it unknown.
      bool cuda_only = gpu_dev && std::strncmp(gpu_dev->name, "cuda", 4) == 0;
      v.gpu.dev = cuda_only ? -1 : gpu_index;
      for (hwloc_obj_t d : osdevs) {
        if (v.gpu.model.empty()) v.gpu.model = info(d, "GPUModel");
        if (v.gpu.uuid.empty()) v.gpu.uuid = info(d, "NVIDIAUUID");
        if (v.gpu.uuid.empty()) v.gpu.uuid = info(d, "AMDUUID");
      }
      if (p.vendor_id == 0x10de) v.gpu.sm = sm_from_model(v.gpu.model);
    } else if (!fabrics.empty() || base_class == 0x02) {
      v.kind = VertexKind::kNic;
      fill_ports(v, p, fabrics, netdevs);
    } else {
      v.kind = VertexKind::kPciDevice;
      if (is_nvswitch) v.name = "nvswitch-" + v.busid;
    }
    VertexId id = add_child(std::move(v), parent);
    obj_vertex_[obj] = id;
    for (hwloc_obj_t d : osdevs) obj_vertex_[d] = id;
    if (is_nvswitch) nvswitches_.insert(id.value);
  }

  void fill_ports(Vertex& v, const PciAttr& p, const std::vector<hwloc_obj_t>& fabrics,
                  const std::vector<hwloc_obj_t>& netdevs) {
    std::string layer;
    if (p.class_id == 0x0207) {
      layer = "InfiniBand";
    } else if (p.class_id == 0x0200) {
      layer = "Ethernet";
    }
    for (hwloc_obj_t f : fabrics) {
      std::string guid = info(f, "NodeGUID");
      // NCCL's form: hex without leading zeros ("0x2c903001bb0a0"), as its dumps write it.
      guid.erase(std::remove(guid.begin(), guid.end(), ':'), guid.end());
      std::size_t nz = guid.find_first_not_of('0');
      if (!guid.empty()) {
        guid = "0x" + (nz == std::string::npos ? std::string("0") : guid.substr(nz));
      }
      for (int port : ports_of(f)) {
        std::string state = info(f, ("Port" + std::to_string(port) + "State").c_str());
        NetPort np;
        np.name = f->name;
        np.port = port;
        np.guid = guid;
        np.state = port_state(state);
        np.link_layer = layer;
        // The netdev of this port: hwloc tags IPoIB/RoCE interfaces with Port=N.
        for (hwloc_obj_t n : netdevs) {
          std::string nport = info(n, "Port");
          if (nport.empty() ? netdevs.size() == 1 : parse_int(nport) == port) np.netdev = n->name;
        }
        v.nic.ports.push_back(std::move(np));
      }
      if (v.name.empty()) v.name = f->name;
    }
    if (fabrics.empty()) {
      for (hwloc_obj_t n : netdevs) {
        NetPort np;
        np.name = n->name;
        np.netdev = n->name;
        np.link_layer = layer;
        v.nic.ports.push_back(std::move(np));
        if (v.name.empty()) v.name = n->name;
      }
    }
  }

  // NVLink from hwloc's NVLinkBandwidth matrix (MB/s), between GPUs (as OS devices or PCI
  // functions), NVSwitches (PCI functions) and CPUs (POWER packages).
  void add_nvlinks() {
    unsigned nr = 1;
    hwloc_distances_s* dist = nullptr;
    if (hwloc_distances_get_by_name(topo_, "NVLinkBandwidth", &nr, &dist, 0) != 0 || nr == 0 ||
        !dist) {
      bool nvidia = false;
      for (VertexId g : out_.gpus()) nvidia |= out_.graph.vertex(g).pci.vendor == "0x10de";
      if (nvidia) out_.notes.push_back("hwloc: no NVLinkBandwidth matrix; NVLink not described");
      return;
    }
    std::unique_ptr<hwloc_distances_s, std::function<void(hwloc_distances_s*)>> hold(
        dist, [this](hwloc_distances_s* d) { hwloc_distances_release(topo_, d); });
    const unsigned n = dist->nbobjs;
    std::vector<VertexId> ends(n);
    enum class End { kNone, kGpu, kSwitch, kCpu };
    std::vector<End> kind(n, End::kNone);
    for (unsigned i = 0; i < n; ++i) {
      hwloc_obj_t o = dist->objs[i];
      if (!o) continue;
      if (o->type == HWLOC_OBJ_PACKAGE || o->type == HWLOC_OBJ_NUMANODE ||
          o->type == HWLOC_OBJ_MACHINE || o->type == HWLOC_OBJ_GROUP) {
        ends[i] = cpu_for(o);
        kind[i] = ends[i].valid() ? End::kCpu : End::kNone;
        continue;
      }
      auto it = obj_vertex_.find(o);
      if (it == obj_vertex_.end()) continue;
      ends[i] = it->second;
      if (nvswitches_.count(it->second.value)) {
        kind[i] = End::kSwitch;
      } else if (out_.graph.vertex(it->second).kind == VertexKind::kGpu) {
        kind[i] = End::kGpu;
      }
    }
    std::map<std::uint32_t, std::uint64_t> to_switch;  // GPU -> MB/s summed over NVSwitches
    for (unsigned i = 0; i < n; ++i) {
      for (unsigned j = i + 1; j < n; ++j) {
        std::uint64_t mbps = std::max(dist->values[i * n + j], dist->values[j * n + i]);
        if (mbps == 0) continue;
        End a = kind[i], b = kind[j];
        VertexId va = ends[i], vb = ends[j];
        if (a != End::kGpu && b == End::kGpu) {
          std::swap(a, b);
          std::swap(va, vb);
        }
        if (a != End::kGpu) continue;  // switch-switch, CPU-CPU, unknown objects
        if (b == End::kSwitch) {
          to_switch[va.value] += mbps;
        } else if (b == End::kGpu) {
          add_nvlink(va, vb, mbps, out_.graph.vertex(vb).pci.pci_class);
        } else if (b == End::kCpu) {
          add_nvlink(va, vb, mbps, "0x068001");
        }
      }
    }
    if (!to_switch.empty()) {
      Vertex s;
      s.kind = VertexKind::kNvSwitch;
      s.name = "NVSwitch";
      VertexId sid = out_.graph.add_vertex(std::move(s));
      for (auto [gpu, mbps] : to_switch) add_nvlink(VertexId(gpu), sid, mbps, "0x068000");
    }
  }

  void add_nvlink(VertexId gpu, VertexId peer, std::uint64_t mbps, std::string tclass) {
    Link l;
    l.a = gpu;
    l.b = peer;
    l.kind = LinkKind::kNvLink;
    l.count = lanes_from_mbps(mbps);
    l.bandwidth = l.count * nvlink_lane_bandwidth(out_.graph.vertex(gpu).gpu.sm);
    l.nvlink_tclass = std::move(tclass);
    out_.graph.add_link(std::move(l));
  }

  hwloc_topology_t topo_;
  NodeTopology& out_;
  bool this_system_;
  std::map<int, VertexId> cpu_by_numa_;
  std::unordered_map<hwloc_obj_t, VertexId> obj_vertex_;
  std::set<std::uint32_t> nvswitches_;
  std::size_t pci_count_ = 0;
};

// The start tag of the root element, past the prolog, DOCTYPE and comments; empty if none.
std::string_view root_start_tag(std::string_view xml) {
  std::size_t i = 0;
  if (xml.substr(0, 3) == "\xEF\xBB\xBF") i = 3;  // UTF-8 byte order mark
  while (i < xml.size()) {
    while (i < xml.size() && std::strchr(" \t\r\n", xml[i]) != nullptr && xml[i] != '\0') ++i;
    if (i >= xml.size() || xml[i] != '<') return {};
    std::string_view rest = xml.substr(i);
    std::size_t end;
    if (rest.substr(0, 4) == "<!--") {
      end = rest.find("-->");
      if (end != std::string_view::npos) end += 2;  // at the comment's closing '>'
    } else {
      end = rest.find('>');
    }
    if (end == std::string_view::npos) return {};
    if (rest[1] != '?' && rest[1] != '!') return rest.substr(0, end + 1);
    i += end + 1;
  }
  return {};
}

// Whether a start tag has attribute `name` (preceded by whitespace, followed by '=').
bool has_attribute(std::string_view tag, std::string_view name) {
  for (std::size_t at = tag.find(name); at != std::string_view::npos; at = tag.find(name, at + 1)) {
    if (at > 0 && std::strchr(" \t\r\n", tag[at - 1]) != nullptr && tag[at - 1] != '\0' &&
        at + name.size() < tag.size() && tag[at + name.size()] == '=') {
      return true;
    }
  }
  return false;
}

// The value of attribute `name` in a start tag, when it has one.
std::optional<std::string_view> attribute_value(std::string_view tag, std::string_view name) {
  for (std::size_t at = tag.find(name); at != std::string_view::npos; at = tag.find(name, at + 1)) {
    std::size_t q = at + name.size() + 1;
    if (at == 0 || std::strchr(" \t\r\n", tag[at - 1]) == nullptr || tag[at - 1] == '\0' ||
        q >= tag.size() || tag[q - 1] != '=' || (tag[q] != '"' && tag[q] != '\'')) {
      continue;
    }
    std::size_t close = tag.find(tag[q], q + 1);
    if (close == std::string_view::npos) return std::nullopt;
    return tag.substr(q + 1, close - q - 1);
  }
  return std::nullopt;
}

// A bitmap as hwloc writes it: comma-separated 32-bit words "0x0000ffff" (empty words between
// commas are zero words), the first one present, "0xf...f" for an infinite set. hwloc 2.9's
// parser asserts (aborting the process) on other forms such as ",x00000002"; found by fuzzing.
bool is_hwloc_bitmap(std::string_view v) {
  if (v.substr(0, 7) == "0xf...f") {
    v.remove_prefix(7);
    if (v.empty()) return true;
    if (v[0] != ',') return false;
    v.remove_prefix(1);
  }
  bool first = true;
  for (;;) {
    std::size_t comma = v.find(',');
    std::string_view word = v.substr(0, comma);
    if (!(word.empty() && !first)) {
      if (word.size() < 3 || word.size() > 10 || word[0] != '0' || word[1] != 'x') return false;
      for (char c : word.substr(2)) {
        if (std::isxdigit(static_cast<unsigned char>(c)) == 0) return false;
      }
    }
    first = false;
    if (comma == std::string_view::npos) return true;
    v.remove_prefix(comma + 1);
  }
}

// hwloc 2.9's XML import dereferences an object's complete cpuset/nodeset without checking that
// the file gave one (a NULL bitmap: SEGV in hwloc_bitmap_compare_first while the topology is
// loaded; found by fuzzing, tests/fuzz/regressions/hwloc_xml). Every export writes them in pairs,
// so a set without its complete set is an edited or damaged file: refused before hwloc sees it.
constexpr unsigned long kMaxOsIndex = 1ul << 20;

void check_object_sets(std::string_view xml, const std::string& name) {
  long line = 1;
  std::size_t counted = 0;
  for (std::size_t at = xml.find("<object"); at != std::string_view::npos;
       at = xml.find("<object", at + 1)) {
    line += std::count(xml.begin() + static_cast<long>(counted),
                       xml.begin() + static_cast<long>(at), '\n');
    counted = at;
    std::size_t end = xml.find('>', at);
    std::string_view tag = xml.substr(at, end == std::string_view::npos ? end : end - at);
    for (std::string_view set : {"cpuset", "complete_cpuset", "allowed_cpuset", "online_cpuset",
                                 "nodeset", "complete_nodeset", "allowed_nodeset"}) {
      std::optional<std::string_view> value = attribute_value(tag, set);
      if (value && !is_hwloc_bitmap(*value)) {
        throw Error(ErrorCode::kBadInput, where(name, line),
                    "<object> " + std::string(set) + "=\"" + std::string(value->substr(0, 64)) +
                        "\" is not an hwloc bitmap (0x-prefixed 32-bit words, comma-separated)");
      }
    }
    // A PU or NUMA node is a bit in hwloc's sets at its os_index: without one hwloc uses
    // UINT_MAX and grows every bitmap it touches to 512 MiB (seconds and a GiB per import; found
    // by fuzzing). Linux numbers CPUs and NUMA nodes far below kMaxOsIndex.
    std::optional<std::string_view> type = attribute_value(tag, "type");
    if (type && (*type == "PU" || *type == "NUMANode")) {
      std::optional<std::string_view> index = attribute_value(tag, "os_index");
      unsigned long value = 0;
      bool ok = index && !index->empty() && index->size() <= 9 &&
                std::all_of(index->begin(), index->end(),
                            [](char c) { return c >= '0' && c <= '9'; });
      if (ok) value = std::stoul(std::string(*index));
      if (!ok || value > kMaxOsIndex) {
        throw Error(ErrorCode::kBadInput, where(name, line),
                    "<object type=\"" + std::string(*type) + "\"> " +
                        (index ? "has os_index=\"" + std::string(index->substr(0, 32)) +
                                     "\", not a CPU or NUMA node number"
                               : std::string("has no os_index")) +
                        ": not an hwloc export as lstopo writes it (edited or damaged)");
      }
    }
    for (auto [set, complete] :
         {std::pair<std::string_view, std::string_view>{"cpuset", "complete_cpuset"},
          {"nodeset", "complete_nodeset"}}) {
      if (has_attribute(tag, set) && !has_attribute(tag, complete)) {
        throw Error(ErrorCode::kBadInput, where(name, line),
                    "<object> has " + std::string(set) + " but no " + std::string(complete) +
                        ": not an hwloc export as lstopo writes it (edited or damaged), and "
                        "hwloc cannot import it");
      }
    }
  }
}

// Checks what hwloc would otherwise reject without a reason: emptiness, binary data, the root
// element, and the format version (absent in format 1, "2.x" in format 2).
void precheck(std::string_view xml, const std::string& name) {
  if (xml.empty()) throw Error(ErrorCode::kBadInput, name, "empty file, not an hwloc XML export");
  std::size_t probe = std::min<std::size_t>(xml.size(), 65536);
  if (std::memchr(xml.data(), '\0', probe) != nullptr) {
    throw Error(ErrorCode::kBadInput, name, "binary data, not an hwloc XML export");
  }
  std::string_view tag = root_start_tag(xml);
  if (tag.empty()) {
    throw Error(ErrorCode::kBadInput, name, "not XML: no root element found");
  }
  std::size_t name_end = tag.find_first_of(" \t\r\n/>", 1);
  std::string_view root = tag.substr(1, name_end - 1);
  if (root == "system") {
    throw Error(ErrorCode::kBadInput, name,
                "root element <system> is NCCL topology XML, not hwloc XML");
  }
  if (root != "topology") {
    throw Error(ErrorCode::kBadInput, name,
                "root element <" + std::string(root) + ">, expected hwloc's <topology>");
  }
  check_object_sets(xml, name);
  std::size_t v = tag.find("version=");
  if (v == std::string_view::npos) return;  // format 1 has no version attribute
  std::string_view value = tag.substr(v + 8);
  if (value.empty() || (value[0] != '"' && value[0] != '\'')) {
    throw Error(ErrorCode::kBadInput, name, "malformed version attribute on <topology>");
  }
  std::size_t close = value.find(value[0], 1);
  std::string_view version = value.substr(1, close == std::string_view::npos ? 0 : close - 1);
  if (version.empty()) {
    throw Error(ErrorCode::kBadInput, name, "empty version attribute on <topology>");
  }
  if (version.substr(0, 1) != "1" && version.substr(0, 1) != "2") {
    throw Error(ErrorCode::kUnsupported, name,
                "hwloc XML format " + std::string(version) +
                    " is not supported: the hwloc library in use (" HWLOC_VERSION
                    ") reads formats 1 and 2; export it with an hwloc 2.x lstopo");
  }
}

// hwloc's XML import (2.9, either of its parsers) is not safe on damaged files: fuzzing found
// SEGVs and leaks inside it that no check of ours can rule out (docs/fuzzing.md). So a file is
// first imported by a child process, which can crash or leak without harm; only a file the child
// imported is imported here. hwloc's import is deterministic, so what loaded there loads here.
// Returns nothing when the child could not be run or reaped (another thread of the process
// reaped it, as slurmstepd may): the import then happens here, as before.
constexpr int kVetLoaded = 0;
constexpr int kVetRejected = 3;
constexpr int kVetSeconds = 30;

std::optional<int> import_in_child(const std::string& owned) {
  pid_t pid = fork();
  if (pid < 0) return std::nullopt;
  if (pid == 0) {
    // hwloc's warnings (and a sanitizer's report of a crash inside it) are not the caller's.
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null >= 0) dup2(null, STDERR_FILENO);
    hwloc_topology_t raw = nullptr;
    int status = kVetRejected;
    if (hwloc_topology_init(&raw) == 0 &&
        hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_ALL) == 0 &&
        hwloc_topology_set_flags(raw, HWLOC_TOPOLOGY_FLAG_IMPORT_SUPPORT) == 0 &&
        hwloc_topology_set_xmlbuffer(raw, owned.c_str(), static_cast<int>(owned.size() + 1)) ==
            0 &&
        hwloc_topology_load(raw) == 0) {
      status = kVetLoaded;
    }
    _exit(status);  // no destructors, no leak check: the process ends here
  }
  const timespec tick{0, 2'000'000};
  for (long waited_ms = 0;; waited_ms += 2) {
    int status = 0;
    pid_t got = waitpid(pid, &status, WNOHANG);
    if (got == pid) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    }
    if (got < 0 && errno != EINTR) return std::nullopt;  // reaped elsewhere
    if (waited_ms >= kVetSeconds * 1000) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    nanosleep(&tick, nullptr);
  }
}

}  // namespace

NodeTopology node_from_hwloc(hwloc_topology_t topology, std::string source) {
  NodeTopology node;
  node.source = std::move(source);
  Converter(topology, node).run();
  return node;
}

NodeTopology load_hwloc_live() {
  TopologyPtr topo = new_topology(HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED, "hwloc:live");
  // PCI from sysfs (hwloc's linux backend, what NCCL reads too) rather than the libpciaccess
  // plugin: the same objects here, and libpciaccess leaks on every load (about 1 KB, seen under
  // LeakSanitizer with a plain C init/load/destroy), which a long-lived slurmstepd would keep.
  hwloc_topology_set_components(topo.get(), HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
  if (hwloc_topology_load(topo.get()) != 0) {
    throw Error(ErrorCode::kSystem, "hwloc:live",
                std::string("hwloc_topology_load failed: ") + std::strerror(errno));
  }
  return node_from_hwloc(topo.get(), "hwloc:live");
}

NodeTopology load_hwloc_xml_buffer(std::string_view xml, const std::string& name) {
  if (xml.size() > kMaxXmlBytes) {
    throw Error(ErrorCode::kLimit, name,
                "larger than " + std::to_string(kMaxXmlBytes >> 20) + " MiB");
  }
  // An XML declaration must open the document for libxml2; a skipped prompt line (input_format.h)
  // leaves an empty line in front of it.
  std::size_t start = xml.find_first_not_of(" \t\r\n");
  if (start != std::string_view::npos) xml.remove_prefix(start);
  precheck(xml, name);
  TopologyPtr topo = new_topology(HWLOC_TOPOLOGY_FLAG_IMPORT_SUPPORT, name);
  // hwloc wants the terminating NUL inside the buffer it is given.
  std::string owned(xml);
  if (std::optional<int> vetted = import_in_child(owned)) {
    if (*vetted == kVetRejected) {
      throw Error(ErrorCode::kBadInput, name,
                  "hwloc cannot import this XML (malformed, truncated or inconsistent hwloc "
                  "export)");
    }
    if (*vetted == -1) {
      throw Error(ErrorCode::kLimit, name,
                  "hwloc's XML import took longer than " + std::to_string(kVetSeconds) +
                      " s (not a sane hwloc export)");
    }
    if (*vetted != kVetLoaded) {
      throw Error(ErrorCode::kBadInput, name,
                  "hwloc's XML import failed on this file (it crashed a test import, status " +
                      std::to_string(*vetted) + "): damaged, or not an hwloc export");
    }
  }
  if (hwloc_topology_set_xmlbuffer(topo.get(), owned.c_str(), static_cast<int>(owned.size() + 1)) !=
      0) {
    throw Error(ErrorCode::kBadInput, name,
                "hwloc cannot parse this XML (malformed or truncated hwloc export)");
  }
  if (hwloc_topology_load(topo.get()) != 0) {
    throw Error(ErrorCode::kBadInput, name,
                "hwloc rejected the topology (unknown elements or inconsistent objects)");
  }
  return node_from_hwloc(topo.get(), "hwloc-xml:" + name);
}

NodeTopology load_hwloc_xml(const std::string& path) {
  InputText in = read_input(path, kMaxXmlBytes);
  NodeTopology node = load_hwloc_xml_buffer(in.text, path);
  node.notes.insert(node.notes.begin(), in.notes.begin(), in.notes.end());
  return node;
}

}  // namespace topoaware::topology
