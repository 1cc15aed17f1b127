// Vendor NCCL topology XML (NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE) as a node source.
//
// Elements map onto the model as NCCL itself reads them (reference nccl-topology.md section 1):
// <cpu> is a NUMA domain, <pci> a switch, GPU, NIC or other function (by its <gpu>/<nic> child,
// else by PCI class, else by having children), <nic> directly under <cpu> a virtual NIC,
// <nvlink>/<c2c> extra links. Link bandwidths come from NCCL's rules in paths.h. Everything the
// NCCL writer needs to reproduce the file is kept; what NCCL ignores or overwrites on every run
// (host_hash, rank, net dev) is dropped. Oddities of real vendor files become notes, not errors:
// a reader should see them, and NCCL accepts them too.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nccl_xml_reader.h"
#include "node_build.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/hwloc_source.h"
#include "topoaware/topology/input_format.h"
#include "topoaware/topology/paths.h"
#include "topoaware/topology/sources.h"

namespace topoaware::topology {
namespace {

// What load_node_file() reads before knowing the format: hwloc's bound (hwloc_source.cc); the
// NCCL XML reader then applies its own, smaller one.
constexpr std::uintmax_t kMaxNodeFileBytes = std::uintmax_t{256} << 20;

// NCCL's LOC bandwidth: what it gives a virtual NIC hanging directly off a CPU, and pcilinks.
constexpr double kCpuLocalBandwidth = 5000.0;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

class Loader {
 public:
  explicit Loader(std::string path) : path_(std::move(path)) {}

  NodeTopology load(const xml::Element& root) {
    node_.source = "nccl-xml:" + path_;
    if (root.name == "graphs") {
      throw Error(ErrorCode::kUnsupported, where(path_, root.line),
                  "an NCCL graph file, not a topology file (root <graphs>: NCCL_GRAPH_FILE)");
    }
    if (root.name != "system") {
      throw Error(ErrorCode::kBadInput, where(path_, root.line),
                  "root element is <" + root.name + ">, expected <system> (NCCL topology XML)");
    }
    const std::string* version = root.attr("version");
    if (version == nullptr) {
      throw Error(ErrorCode::kBadInput, where(path_, root.line),
                  "<system> has no version attribute (NCCL requires version=\"1\")");
    }
    // NCCL reads version as a number: "1", "0x1" and "1.0" all mean 1.
    char* end = nullptr;
    double v = std::strtod(version->c_str(), &end);
    if (version->empty() || *end != '\0' || v != 1.0) {
      throw Error(ErrorCode::kUnsupported, where(path_, root.line),
                  "<system version=\"" + *version + "\">: only version 1 exists");
    }
    if (const std::string* name = root.attr("name")) node_.hostname = *name;

    for (const xml::Element& child : root.children) {
      if (child.name == "cpu") {
        cpu(child);
      } else {
        unknown(child, "system");
      }
    }
    resolve_nvlinks();
    resolve_pcilinks();
    add_smp_links(node_);
    return std::move(node_);
  }

 private:
  [[noreturn]] void bad(const xml::Element& e, const std::string& msg) const {
    throw Error(ErrorCode::kBadInput, where(path_, e.line), msg);
  }

  // Integers as NCCL reads them (strtol base 0: 0x is hex, a leading 0 octal), whole value only.
  long integer(const xml::Element& e, std::string_view key, long fallback) const {
    const std::string* s = e.attr(key);
    if (s == nullptr) return fallback;
    errno = 0;
    char* end = nullptr;
    long v = std::strtol(s->c_str(), &end, 0);
    if (s->empty() || *end != '\0' || errno == ERANGE) {
      bad(e, "<" + e.name + "> attribute " + std::string(key) + "=\"" + *s +
                 "\" is not an integer (NCCL reads a leading 0 as octal, 0x as hex)");
    }
    if (v < -1000000000L || v > 1000000000L) {
      bad(e, "<" + e.name + "> attribute " + std::string(key) + "=\"" + *s + "\" is out of range");
    }
    return v;
  }
  double number(const xml::Element& e, std::string_view key, double fallback) const {
    const std::string* s = e.attr(key);
    if (s == nullptr) return fallback;
    char* end = nullptr;
    double v = std::strtod(s->c_str(), &end);
    if (s->empty() || *end != '\0' || !(v > -1e12 && v < 1e12)) {
      bad(e, "<" + e.name + "> attribute " + std::string(key) + "=\"" + *s + "\" is not a number");
    }
    return v;
  }
  std::string text(const xml::Element& e, std::string_view key) const {
    const std::string* s = e.attr(key);
    return s == nullptr ? std::string() : *s;
  }

  void unknown(const xml::Element& e, const char* parent) {
    // NCCL skips unknown elements with their subtree; say so once per (element, parent).
    std::string key = e.name + " in " + parent;
    if (ignored_.insert(key).second) {
      node_.notes.push_back(where(path_, e.line) + ": <" + e.name + "> inside <" + parent +
                            "> is not part of NCCL's vocabulary there; ignored with its subtree");
    }
  }

  // NCCL cpumap: comma-separated 32-bit hex words, most significant first.
  std::vector<std::uint32_t> cpumap_pus(const xml::Element& e, const std::string& map) const {
    std::vector<std::string> words;
    std::string cur;
    for (char c : map) {
      if (c == ',') {
        words.push_back(cur);
        cur.clear();
      } else if (std::isxdigit(static_cast<unsigned char>(c)) && cur.size() < 8) {
        cur += c;
      } else {
        bad(e, "<cpu affinity=\"" + map + "\"> is not a cpumap (comma-separated 32-bit hex words)");
      }
    }
    words.push_back(cur);
    std::vector<std::uint32_t> pus;
    for (std::size_t i = 0; i < words.size(); ++i) {
      if (words[i].empty()) bad(e, "<cpu affinity=\"" + map + "\"> has an empty word");
      unsigned long w = std::stoul(words[i], nullptr, 16);
      std::uint32_t base = static_cast<std::uint32_t>((words.size() - 1 - i) * 32);
      for (std::uint32_t b = 0; b < 32; ++b) {
        if (w & (1UL << b)) pus.push_back(base + b);
      }
    }
    std::sort(pus.begin(), pus.end());
    return pus;
  }

  void cpu(const xml::Element& e) {
    if (e.attr("numaid") == nullptr) bad(e, "<cpu> has no numaid attribute (NCCL requires it)");
    Vertex v;
    v.kind = VertexKind::kCpu;
    v.numa = static_cast<int>(integer(e, "numaid", -1));
    if (v.numa < -1) bad(e, "<cpu numaid> must be -1 or a NUMA node number");
    v.name =
        v.numa >= 0 ? "NUMA" + std::to_string(v.numa) : "CPU" + std::to_string(node_.cpus().size());
    v.cpu.affinity = lower(text(e, "affinity"));
    if (!v.cpu.affinity.empty()) v.cpu.pus = cpumap_pus(e, v.cpu.affinity);
    v.cpu.arch = text(e, "arch");
    v.cpu.vendor = text(e, "vendor");
    v.cpu.family = static_cast<int>(integer(e, "familyid", -1));
    v.cpu.model = static_cast<int>(integer(e, "modelid", -1));
    if (v.numa == -1 && numa_unknown_noted_++ == 0) {
      node_.notes.push_back(where(path_, e.line) +
                            ": <cpu numaid=\"-1\">: NUMA placement unknown (a VM that hides it); "
                            "devices under it get numa -1");
    }
    VertexId id = node_.graph.add_vertex(std::move(v));
    for (const xml::Element& child : e.children) {
      if (child.name == "pci") {
        pci(child, id);
      } else if (child.name == "nic") {
        virtual_nic(child, id);
      } else {
        unknown(child, "cpu");
      }
    }
  }

  static bool class_is(const std::string& cls, std::string_view prefix) {
    return cls.rfind(prefix, 0) == 0;
  }

  void pci(const xml::Element& e, VertexId parent) {
    const std::string* raw = e.attr("busid");
    if (raw == nullptr) bad(e, "<pci> has no busid attribute (NCCL's key for it)");
    std::string busid = normalize_busid(*raw);
    if (busid.empty()) bad(e, "<pci busid=\"" + *raw + "\"> is not a PCI bus id (dddd:bb:dd.f)");
    auto [it, fresh] = busid_line_.emplace(busid, e.line);
    if (!fresh) {
      bad(e,
          "<pci busid=\"" + *raw + "\"> repeats the bus id of line " + std::to_string(it->second));
    }
    Vertex v;
    v.busid = busid;
    v.numa = node_.graph.vertex(parent).numa;
    v.parent = parent;
    // NCCL's own dumps write link_speed="" and link_width="" where sysfs had nothing (VMs);
    // NCCL then uses the empty value rather than sysfs, so it is kept as written.
    for (const char* key : {"class", "vendor", "device", "subsystem_vendor", "subsystem_device",
                            "link_speed", "link_width"}) {
      const std::string* value = e.attr(key);
      if (value != nullptr && value->empty()) v.pci.empty_attrs.emplace_back(key);
    }
    v.pci.pci_class = lower(text(e, "class"));
    v.pci.link_speed = text(e, "link_speed");
    const std::string* width_attr = e.attr("link_width");
    v.pci.link_width = width_attr != nullptr && width_attr->empty()
                           ? -1
                           : static_cast<int>(integer(e, "link_width", -1));
    v.pci.vendor = lower(text(e, "vendor"));
    v.pci.device = lower(text(e, "device"));
    v.pci.subsystem_vendor = lower(text(e, "subsystem_vendor"));
    v.pci.subsystem_device = lower(text(e, "subsystem_device"));

    const xml::Element* gpu = nullptr;
    const xml::Element* nic = nullptr;
    bool has_pci_children = false;
    for (const xml::Element& c : e.children) {
      if (c.name == "gpu" && gpu == nullptr) gpu = &c;
      if (c.name == "nic" && nic == nullptr) nic = &c;
      if (c.name == "pci") has_pci_children = true;
    }
    const std::string& cls = v.pci.pci_class;
    if (gpu != nullptr) {
      v.kind = VertexKind::kGpu;
    } else if (nic != nullptr) {
      v.kind = VertexKind::kNic;
    } else if (class_is(cls, "0x0604")) {
      v.kind = VertexKind::kPciSwitch;
    } else if (class_is(cls, "0x03") &&
               (v.pci.vendor.empty() || v.pci.vendor == "0x10de" || v.pci.vendor == "0x1002")) {
      // A GPU leaf without <gpu>: Azure NDv2, AWS p4d. The display controller of a BMC
      // (Matrox, ASPEED) shares the class but is no GPU, so a known other vendor rules it out.
      v.kind = VertexKind::kGpu;
    } else if (class_is(cls, "0x02")) {
      v.kind = VertexKind::kNic;  // an HCA/EFA leaf without <nic>: NCCL's plugin names it
    } else if (has_pci_children) {
      v.kind = VertexKind::kPciSwitch;  // NCCL treats any other class as a switch
    } else {
      v.kind = VertexKind::kPciDevice;
    }
    if (gpu != nullptr && nic != nullptr) {
      node_.notes.push_back(where(path_, nic->line) + ": <nic> beside <gpu> in pci " + busid +
                            "; the NIC is ignored");
    }
    if (v.kind == VertexKind::kGpu) {
      v.name = "GPU" + std::to_string(node_.gpus().size());
      if (gpu != nullptr) {
        v.gpu.dev = static_cast<int>(integer(*gpu, "dev", -1));
        v.gpu.sm = static_cast<int>(integer(*gpu, "sm", -1));
        v.gpu.gdr = static_cast<int>(integer(*gpu, "gdr", -1));
        if (v.gpu.dev >= 0) v.name = "GPU" + std::to_string(v.gpu.dev);
      }
    }
    if (v.kind == VertexKind::kNic && nic != nullptr) {
      v.nic.ports = ports(*nic);
      if (!v.nic.ports.empty()) v.name = v.nic.ports.front().name;
    }
    int width = v.pci.link_width > 0 ? v.pci.link_width : 16;  // NCCL: 0 or absent means x16
    double bw = pcie_bandwidth(v.pci.link_speed, width);
    VertexId id = node_.graph.add_vertex(std::move(v));
    add_pcie_uplink(node_.graph, id, parent, bw);

    for (const xml::Element& c : e.children) {
      if (c.name == "pci") {
        pci(c, id);
      } else if (c.name == "gpu") {
        if (&c != gpu) bad(c, "a second <gpu> in pci " + busid);
        gpu_links(c, id);
      } else if (c.name == "nic") {
        if (&c != nic) bad(c, "a second <nic> in pci " + busid);
      } else if (c.name == "pcilink") {
        const std::string* target = c.attr("target");
        if (target == nullptr) bad(c, "<pcilink> has no target");
        pcilinks_.push_back({id, *target, c.line});
      } else {
        unknown(c, "pci");
      }
    }
  }

  std::vector<NetPort> ports(const xml::Element& nic) {
    std::vector<NetPort> out;
    for (const xml::Element& n : nic.children) {
      if (n.name != "net") {
        unknown(n, "nic");
        continue;
      }
      NetPort p;
      const std::string* name = n.attr("name");
      if (name == nullptr || name->empty()) bad(n, "<net> has no name (NCCL's key for it)");
      p.name = *name;
      p.port = static_cast<int>(integer(n, "port", -1));
      p.speed_mbps = number(n, "speed", -1);
      double latency = number(n, "latency", -1);  // dumps write "0.000000"
      if (latency < -1 || latency > 1e9) bad(n, "<net latency> out of range");
      p.latency = static_cast<int>(latency);
      p.maxconn = static_cast<int>(integer(n, "maxconn", -1));
      p.gdr = static_cast<int>(integer(n, "gdr", -1));
      if (const std::string* g = n.attr("guid")) {
        // NCCL parses guid as hex with or without 0x ("0", "1" in AWS p5 files mean 0x0, 0x1).
        std::string digits = lower(*g);
        if (digits.rfind("0x", 0) == 0) digits = digits.substr(2);
        bool ok = !digits.empty() && digits.size() <= 16;
        for (char c : digits) ok = ok && std::isxdigit(static_cast<unsigned char>(c));
        if (!ok) bad(n, "<net guid=\"" + *g + "\"> is not a hex GUID");
        char buf[24];
        std::snprintf(buf, sizeof buf, "0x%llx", std::strtoull(digits.c_str(), nullptr, 16));
        p.guid = buf;
      }
      out.push_back(std::move(p));
    }
    return out;
  }

  void virtual_nic(const xml::Element& e, VertexId cpu) {
    Vertex v;
    v.kind = VertexKind::kNic;
    v.nic.virtual_nic = true;
    v.nic.ports = ports(e);
    v.name = v.nic.ports.empty() ? std::string() : v.nic.ports.front().name;
    v.numa = node_.graph.vertex(cpu).numa;
    v.parent = cpu;
    VertexId id = node_.graph.add_vertex(std::move(v));
    add_pcie_uplink(node_.graph, id, cpu, kCpuLocalBandwidth);
  }

  void gpu_links(const xml::Element& g, VertexId gpu) {
    for (const xml::Element& c : g.children) {
      if (c.name == "nvlink") {
        if (c.attr("count") == nullptr || c.attr("tclass") == nullptr) {
          bad(c, "<nvlink> needs count and tclass (NCCL requires both)");
        }
        long count = integer(c, "count", 0);
        if (count <= 0 || count > 1024) bad(c, "<nvlink count> must be between 1 and 1024");
        nvlinks_.push_back(
            {gpu, text(c, "target"), static_cast<int>(count), lower(text(c, "tclass")), c.line});
      } else if (c.name == "c2c") {
        double bw = number(c, "bw", -1);
        long count = integer(c, "count", -1);
        if (bw <= 0 || count <= 0 || count > 1024) {
          bad(c, "<c2c> needs a positive bw (MB/s per link) and count");
        }
        Link l;
        l.a = gpu;
        l.b = cpu_of(gpu);
        l.kind = LinkKind::kC2C;
        l.count = static_cast<int>(count);
        l.bandwidth = bw * static_cast<double>(count) / 1000.0;  // NCCL: bw x count / 1000 GB/s
        node_.graph.add_link(l);
      } else {
        unknown(c, "gpu");
      }
    }
  }

  VertexId cpu_of(VertexId v) const {
    while (node_.graph.vertex(v).parent.valid()) v = node_.graph.vertex(v).parent;
    return v;
  }

  void resolve_nvlinks() {
    long gpu_target_line = 0;  // first NVSwitch-class nvlink whose target is a GPU here
    VertexId gpu_target_from;
    std::string gpu_target;
    VertexId nvs;
    std::map<std::uint32_t, LinkId> nvs_link;  // per GPU: its one merged link to the NVSwitch
    for (const PendingNvlink& p : nvlinks_) {
      Graph& g = node_.graph;
      const std::string here = where(path_, p.line);
      std::string target = normalize_busid(p.target);
      int sm = g.vertex(p.gpu).gpu.sm;
      Link l;
      l.a = p.gpu;
      l.kind = LinkKind::kNvLink;
      l.count = p.count;
      l.nvlink_tclass = p.tclass;
      l.bandwidth = p.count * nvlink_lane_bandwidth(sm);
      if (p.tclass == "0x068000") {
        // NCCL merges every NVSwitch into one NVS node and sums a GPU's lanes to it.
        if (!gpu_target_line && !target.empty()) {
          VertexId t = g.find_busid(target);
          if (t.valid() && g.vertex(t).kind == VertexKind::kGpu) {
            gpu_target_line = p.line;
            gpu_target_from = p.gpu;
            gpu_target = target;
          }
        }
        if (!nvs.valid()) {
          Vertex v;
          v.kind = VertexKind::kNvSwitch;
          v.name = "NVS";
          if (!target.empty() && !busid_line_.count(target)) v.busid = target;
          nvs = g.add_vertex(std::move(v));
        }
        auto it = nvs_link.find(p.gpu.value);
        if (it != nvs_link.end()) {
          Link& merged = g.link(it->second);
          merged.count += p.count;
          merged.bandwidth = merged.count * nvlink_lane_bandwidth(sm);
          continue;
        }
        l.b = nvs;
        nvs_link[p.gpu.value] = g.add_link(l);
      } else if (p.tclass == "0x068001") {
        l.b = cpu_of(p.gpu);
        g.add_link(l);
      } else if (p.tclass.rfind("0x03", 0) == 0) {
        VertexId peer = target.empty() ? VertexId() : g.find_busid(target);
        if (!peer.valid() || g.vertex(peer).kind != VertexKind::kGpu) {
          node_.notes.push_back(here + ": nvlink to " + p.target +
                                ", which is not a GPU in this file; ignored");
          continue;
        }
        if (peer == p.gpu) {
          // Azure NC A100 v4 lists each GPU's NVLink as pointing at itself. In NCCL such an
          // element only disables NVML NVLink detection for that GPU; keep it so the file
          // written back behaves the same, and say what it is.
          node_.notes.push_back(here + ": GPU " + g.vertex(p.gpu).busid +
                                " has an nvlink to itself (count " + std::to_string(p.count) +
                                "); kept, it carries no traffic");
        }
        // The peer usually lists the same link back; one undirected link stands for both.
        bool merged = false;
        for (LinkId id : g.links_of(p.gpu)) {
          Link& k = g.link(id);
          if (k.kind == LinkKind::kNvLink && g.other_end(id, p.gpu) == peer &&
              k.nvlink_tclass.rfind("0x03", 0) == 0) {
            if (k.count != p.count) {
              node_.notes.push_back(here + ": nvlink count " + std::to_string(p.count) +
                                    " differs from the peer's " + std::to_string(k.count) +
                                    "; keeping the larger");
              k.count = std::max(k.count, p.count);
              k.bandwidth = k.count * nvlink_lane_bandwidth(sm);
            }
            merged = true;
            break;
          }
        }
        if (merged) continue;
        l.b = peer;
        g.add_link(l);
      } else {
        node_.notes.push_back(here + ": nvlink tclass " + p.tclass + " is unknown; ignored");
      }
    }
    if (gpu_target_line != 0) {
      // Hand-edited files (Modal's B200) mean GPU-to-GPU links but keep the NVSwitch class;
      // NCCL goes by the class, so the admin should see what NCCL will make of it.
      int lanes = 0;
      const Graph& g = node_.graph;
      for (LinkId id : g.links_of(gpu_target_from)) {
        VertexId peer = g.other_end(id, gpu_target_from);
        if (g.link(id).kind == LinkKind::kNvLink && g.vertex(peer).kind == VertexKind::kNvSwitch) {
          lanes = g.link(id).count;
        }
      }
      node_.notes.push_back(
          where(path_, gpu_target_line) + ": nvlink tclass 0x068000 (NVSwitch) targets GPU " +
          gpu_target + "; NCCL goes by the class and adds every such link to its one NVSwitch (" +
          node_.graph.vertex(gpu_target_from).name + ": " + std::to_string(lanes) +
          " lanes). A GPU-to-GPU link is tclass 0x030200");
    }
  }

  void resolve_pcilinks() {
    for (const PendingPcilink& p : pcilinks_) {
      VertexId peer = node_.graph.find_busid(p.target);
      if (!peer.valid()) {
        node_.notes.push_back(where(path_, p.line) + ": pcilink to " + p.target +
                              ", not in this file; ignored");
        continue;
      }
      Link l;
      l.a = p.from;
      l.b = peer;
      l.kind = LinkKind::kPcie;
      l.bandwidth = kCpuLocalBandwidth;
      node_.graph.add_link(l);
    }
  }

  struct PendingNvlink {
    VertexId gpu;
    std::string target;
    int count;
    std::string tclass;
    long line;
  };
  struct PendingPcilink {
    VertexId from;
    std::string target;
    long line;
  };

  std::string path_;
  NodeTopology node_;
  std::map<std::string, long> busid_line_;
  std::vector<PendingNvlink> nvlinks_;
  std::vector<PendingPcilink> pcilinks_;
  std::set<std::string> ignored_;
  int numa_unknown_noted_ = 0;
};

// `nvidia-smi topo -m` prints a matrix whose header row starts with GPU0; people hand it to -i
// because it is the topology view they know. Name it instead of failing on a missing '<': it
// holds path classes but no PCI bus ids, which NCCL keys every device by.
void refuse_nvidia_smi_matrix(std::string_view text, const std::string& path) {
  std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || text.substr(first, 4) != "GPU0") return;
  throw Error(ErrorCode::kUnsupported, where(path, 1),
              "this is `nvidia-smi topo -m` output, which has no PCI bus ids to key devices by; "
              "give `lstopo --of xml` (hwloc) or an NCCL_TOPO_DUMP_FILE of that node");
}

}  // namespace

NodeTopology load_nccl_xml(const std::string& path) {
  InputText in = read_input(path, kMaxNodeFileBytes);
  refuse_nvidia_smi_matrix(in.text, path);
  NodeTopology node = Loader(path).load(xml::parse(in.text, path));
  node.notes.insert(node.notes.begin(), in.notes.begin(), in.notes.end());
  return node;
}

namespace {

NodeTopology load_node_input(InputText in, const std::string& path, InputFormat format) {
  if (!format_of_kind(format, InputKind::kNode)) {
    throw Error(ErrorCode::kBadInput, path,
                std::string(to_string(format)) + " is a fabric format, not a node capture's (" +
                    format_names(InputKind::kNode) + ")");
  }
  if (format == InputFormat::kAuto) format = detect_format(in.text, InputKind::kNode, path);
  NodeTopology node;
  if (format == InputFormat::kHwlocXml) {
    node = load_hwloc_xml_buffer(in.text, path);
  } else {
    refuse_nvidia_smi_matrix(in.text, path);
    node = Loader(path).load(xml::parse(in.text, path));
  }
  node.notes.insert(node.notes.begin(), in.notes.begin(), in.notes.end());
  return node;
}

}  // namespace

NodeTopology load_node_file(const std::string& path, InputFormat format) {
  if (!format_of_kind(format, InputKind::kNode)) return load_node_input({}, path, format);
  return load_node_input(read_input(path, kMaxNodeFileBytes), path, format);
}

NodeTopology load_node_text(std::string text, const std::string& name, InputFormat format) {
  if (text.size() > kMaxNodeFileBytes) {
    throw Error(ErrorCode::kLimit, name, "larger than a node capture this tool will read");
  }
  return load_node_input(clean_input(std::move(text), name), name, format);
}

}  // namespace topoaware::topology
