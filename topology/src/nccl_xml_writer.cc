// NCCL topology XML writer, in the exact dialect NCCL's hand-written parser accepts
// (reference nccl-topology.md section 1): no prolog, one start tag per line, two-space indent,
// attributes separated by single spaces, no tabs, lowercase dddd:bb:dd.f bus ids, integers
// never zero-padded, at most 256 elements.
//
// What is written when a value is unknown (documented in docs/topology-node.md):
// - cpu: numaid always (-1 when unknown, as NCCL's own VM dumps do); affinity from the model's
//   cpumap string, else built from the PU list, else omitted (NCCL reads it from sysfs);
//   arch/vendor/familyid/modelid omitted when unknown (NCCL fills them from CPUID).
// - pci: class from the model; when unknown it follows from what the vertex is (switch
//   0x060400, GPU 0x030200, NIC 0x020000) because NCCL only looks at the prefix and overwrites
//   it from sysfs anyway; a function of unknown kind and class gets none. link_speed,
//   link_width and the vendor quartet are omitted when unknown (NCCL fills them from sysfs).
// - gpu is written when anything about it is known (dev, sm, gdr, NVLink, C2C); otherwise the
//   PCI class alone identifies it, as in Azure's and AWS's own files.
// - values NCCL overwrites on every run (host_hash, rank, net dev) are never written.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "topoaware/topology/error.h"
#include "topoaware/topology/node_io.h"

namespace topoaware::topology {
namespace {

constexpr std::size_t kNcclMaxNodes = 256;  // NCCL_TOPO_XML_MAX_NODES (xml.h)

std::string cpumap_from_pus(const std::vector<std::uint32_t>& pus) {
  if (pus.empty()) return {};
  std::uint32_t top = 0;
  for (std::uint32_t p : pus) top = std::max(top, p);
  std::vector<std::uint32_t> words(top / 32 + 1, 0);
  for (std::uint32_t p : pus) words[p / 32] |= 1u << (p % 32);
  std::string out;
  for (std::size_t i = words.size(); i-- > 0;) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%08x", words[i]);
    if (!out.empty()) out += ',';
    out += buf;
  }
  return out;
}

// GUIDs as NCCL reads them (hex), without the zero padding ibstat and hwloc print.
std::string hex_guid(const std::string& guid) {
  std::string digits = guid;
  if (digits.rfind("0x", 0) == 0 || digits.rfind("0X", 0) == 0) digits = digits.substr(2);
  digits.erase(std::remove(digits.begin(), digits.end(), ':'), digits.end());
  bool ok = !digits.empty() && digits.size() <= 16;
  for (char c : digits) ok = ok && std::isxdigit(static_cast<unsigned char>(c));
  if (!ok) throw Error(ErrorCode::kBadInput, "guid", "\"" + guid + "\" is not a hex GUID");
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", std::strtoull(digits.c_str(), nullptr, 16));
  return buf;
}

class Writer {
 public:
  explicit Writer(const NodeTopology& node) : node_(node), g_(node.graph) {}

  std::string write() {
    Tag sys("system");
    sys.add("version", "1");
    if (!node_.hostname.empty()) sys.add("name", node_.hostname);
    open(sys, 0);
    for (VertexId cpu : node_.cpus()) {
      if (g_.vertex(cpu).parent.valid()) continue;
      write_cpu(cpu);
    }
    close("system", 0);
    check_placed();
    if (elements_ > kNcclMaxNodes) {
      throw Error(ErrorCode::kLimit, node_.source,
                  "the NCCL XML would hold " + std::to_string(elements_) +
                      " elements; NCCL accepts at most " + std::to_string(kNcclMaxNodes) +
                      " (file plus detected) and aborts beyond");
    }
    return out_;
  }

 private:
  // One start tag, built attribute by attribute so nothing can break NCCL's lexical rules.
  struct Tag {
    explicit Tag(std::string n) : name(std::move(n)) {}
    void add(const char* key, const std::string& value) {
      for (char c : value) {
        if (c == '"' || c == '<' || c == '>' || c == '\n' || c == '\r' || c == '\t' || c == '&') {
          throw Error(ErrorCode::kBadInput, key,
                      "value \"" + value + "\" cannot be written in NCCL's XML dialect");
        }
      }
      if (value.size() > 253) {
        throw Error(ErrorCode::kLimit, key, "value longer than NCCL's 254-character limit");
      }
      attrs += ' ';
      attrs += key;
      attrs += "=\"";
      attrs += value;
      attrs += '"';
      ++count;
    }
    void add(const char* key, long value) { add(key, std::to_string(value)); }
    std::string name;
    std::string attrs;
    int count = 0;
  };

  void line(int depth, const std::string& text) {
    out_.append(static_cast<std::size_t>(depth) * 2, ' ');
    out_ += text;
    out_ += '\n';
  }
  void open(const Tag& t, int depth) {
    ++elements_;
    line(depth, "<" + t.name + t.attrs + ">");
  }
  void leaf(const Tag& t, int depth) {
    ++elements_;
    line(depth, "<" + t.name + t.attrs + "/>");
  }
  void close(const std::string& name, int depth) { line(depth, "</" + name + ">"); }

  void write_cpu(VertexId id) {
    const Vertex& v = g_.vertex(id);
    placed_.push_back(id);
    Tag t("cpu");
    t.add("numaid", static_cast<long>(v.numa));
    std::string affinity = v.cpu.affinity.empty() ? cpumap_from_pus(v.cpu.pus) : v.cpu.affinity;
    if (!affinity.empty()) t.add("affinity", affinity);
    if (!v.cpu.arch.empty()) t.add("arch", v.cpu.arch);
    if (!v.cpu.vendor.empty()) t.add("vendor", v.cpu.vendor);
    if (v.cpu.family >= 0) t.add("familyid", static_cast<long>(v.cpu.family));
    if (v.cpu.model >= 0) t.add("modelid", static_cast<long>(v.cpu.model));
    std::vector<VertexId> kids = g_.children(id);
    if (kids.empty()) {
      leaf(t, 1);
      return;
    }
    open(t, 1);
    for (VertexId k : kids) write_child(k, 2);
    close("cpu", 1);
  }

  // A child of a <cpu> or <pci>: a PCI function, or a NIC without bus id (virtual NIC).
  void write_child(VertexId id, int depth) {
    const Vertex& v = g_.vertex(id);
    switch (v.kind) {
      case VertexKind::kPciSwitch:
      case VertexKind::kPciDevice:
      case VertexKind::kGpu:
      case VertexKind::kNic:
        break;
      default:
        return;  // nothing else lives in NCCL's tree
    }
    if (v.busid.empty()) {
      if (v.kind == VertexKind::kNic) {
        placed_.push_back(id);
        write_nic(v, depth);
        return;
      }
      if (v.kind == VertexKind::kGpu) {
        throw Error(ErrorCode::kBadInput, v.name,
                    "GPU without a PCI bus id cannot be written to NCCL XML (the bus id is "
                    "NCCL's key)");
      }
      // A PCI switch or device without bus id cannot be keyed; lift its children instead.
      for (VertexId k : g_.children(id)) write_child(k, depth);
      return;
    }
    placed_.push_back(id);
    if (!busids_.insert(v.busid).second) {
      throw Error(ErrorCode::kBadInput, v.busid,
                  "two PCI functions share this bus id; NCCL keys devices by bus id, so the "
                  "file would be ambiguous");
    }
    Tag t("pci");
    t.add("busid", v.busid);
    std::string cls = v.pci.pci_class;
    if (cls.empty()) {
      if (v.kind == VertexKind::kPciSwitch) cls = "0x060400";
      if (v.kind == VertexKind::kGpu) cls = "0x030200";
      if (v.kind == VertexKind::kNic) cls = "0x020000";
    }
    if (!cls.empty()) t.add("class", cls);
    if (!v.pci.vendor.empty()) t.add("vendor", v.pci.vendor);
    if (!v.pci.device.empty()) t.add("device", v.pci.device);
    if (!v.pci.subsystem_vendor.empty()) t.add("subsystem_vendor", v.pci.subsystem_vendor);
    if (!v.pci.subsystem_device.empty()) t.add("subsystem_device", v.pci.subsystem_device);
    if (!v.pci.link_speed.empty()) t.add("link_speed", v.pci.link_speed);
    if (v.pci.link_width >= 0) t.add("link_width", static_cast<long>(v.pci.link_width));

    std::vector<VertexId> kids = g_.children(id);
    std::vector<VertexId> peers = pcilink_peers(id);
    bool gpu_elem = v.kind == VertexKind::kGpu && gpu_known(id);
    bool nic_elem = v.kind == VertexKind::kNic && !v.nic.ports.empty();
    if (kids.empty() && peers.empty() && !gpu_elem && !nic_elem) {
      leaf(t, depth);
      return;
    }
    open(t, depth);
    if (gpu_elem) write_gpu(id, depth + 1);
    if (nic_elem) write_nic(v, depth + 1);
    for (VertexId k : kids) write_child(k, depth + 1);
    for (VertexId p : peers) {
      Tag l("pcilink");
      l.add("target", g_.vertex(p).busid);
      leaf(l, depth + 1);
    }
    close("pci", depth);
  }

  // pcilinks are PCIe links between vertices that are not parent and child (Broadcom
  // switch-to-switch); written on the side that was added first so they appear once.
  std::vector<VertexId> pcilink_peers(VertexId id) const {
    std::vector<VertexId> out;
    for (LinkId l : g_.links_of(id)) {
      const Link& k = g_.link(l);
      if (k.kind != LinkKind::kPcie || k.a != id) continue;
      VertexId o = k.b;
      if (o == id || g_.vertex(o).parent == id || g_.vertex(id).parent == o) continue;
      if (g_.vertex(o).busid.empty()) continue;
      out.push_back(o);
    }
    return out;
  }

  bool gpu_known(VertexId id) const {
    const GpuInfo& gi = g_.vertex(id).gpu;
    if (gi.dev >= 0 || gi.sm >= 0 || gi.gdr >= 0) return true;
    for (LinkId l : g_.links_of(id)) {
      LinkKind k = g_.link(l).kind;
      if (k == LinkKind::kNvLink || k == LinkKind::kC2C) return true;
    }
    return false;
  }

  void write_gpu(VertexId id, int depth) {
    const Vertex& v = g_.vertex(id);
    Tag t("gpu");
    if (v.gpu.dev >= 0) t.add("dev", static_cast<long>(v.gpu.dev));
    if (v.gpu.sm >= 0) t.add("sm", static_cast<long>(v.gpu.sm));
    if (v.gpu.gdr >= 0) t.add("gdr", static_cast<long>(v.gpu.gdr));
    std::vector<Tag> links;
    for (LinkId l : g_.links_of(id)) {
      const Link& k = g_.link(l);
      VertexId peer = g_.other_end(l, id);
      if (k.kind == LinkKind::kNvLink) {
        Tag n("nvlink");
        const Vertex& p = g_.vertex(peer);
        std::string tclass = k.nvlink_tclass;
        if (tclass.empty()) {
          tclass = p.kind == VertexKind::kNvSwitch ? "0x068000"
                   : p.kind == VertexKind::kCpu    ? "0x068001"
                   : !p.pci.pci_class.empty()      ? p.pci.pci_class
                                                   : "0x030200";
        }
        if (!p.busid.empty()) n.add("target", p.busid);
        n.add("count", static_cast<long>(k.count));
        n.add("tclass", tclass);
        links.push_back(std::move(n));
      } else if (k.kind == LinkKind::kC2C) {
        Tag c("c2c");
        int count = k.count > 0 ? k.count : 1;
        c.add("bw", std::lround(k.bandwidth * 1000.0 / count));  // MB/s per link
        c.add("count", static_cast<long>(count));
        links.push_back(std::move(c));
      }
    }
    if (links.empty()) {
      leaf(t, depth);
      return;
    }
    open(t, depth);
    for (const Tag& n : links) leaf(n, depth + 1);
    close("gpu", depth);
  }

  void write_nic(const Vertex& v, int depth) {
    if (v.nic.ports.empty()) return;
    open(Tag("nic"), depth);
    for (const NetPort& p : v.nic.ports) {
      Tag t("net");
      t.add("name", p.name);
      if (p.speed_mbps > 0) t.add("speed", std::llround(p.speed_mbps));
      if (p.port >= 0) t.add("port", static_cast<long>(p.port));
      if (p.latency >= 0) t.add("latency", static_cast<long>(p.latency));
      if (!p.guid.empty()) t.add("guid", hex_guid(p.guid));
      if (p.maxconn >= 0) t.add("maxconn", static_cast<long>(p.maxconn));
      if (p.gdr >= 0) t.add("gdr", static_cast<long>(p.gdr));
      leaf(t, depth + 1);
    }
    close("nic", depth);
  }

  // Every GPU must have been placed under a <cpu>; a GPU NCCL cannot key is a bug upstream.
  void check_placed() const {
    std::vector<bool> seen(g_.vertex_count(), false);
    for (VertexId id : placed_) seen[id.value] = true;
    for (VertexId gpu : node_.gpus()) {
      if (!seen[gpu.value]) {
        throw Error(ErrorCode::kBadInput, g_.vertex(gpu).busid,
                    "GPU is not under any CPU/NUMA domain, so it has no place in NCCL XML");
      }
    }
  }

  const NodeTopology& node_;
  const Graph& g_;
  std::string out_;
  std::size_t elements_ = 0;
  std::vector<VertexId> placed_;
  std::set<std::string> busids_;
};

}  // namespace

std::string node_to_nccl_xml(const NodeTopology& node) {
  try {
    return Writer(node).write();
  } catch (const Error& e) {
    // A refusal names the bus id or attribute at fault; say which node it was writing too, so
    // `nccl-topo -i FILE` tells the admin which capture to fix.
    if (node.source.empty() || e.context() == node.source) throw;
    throw Error(e.code(), node.source, e.what());
  }
}

}  // namespace topoaware::topology
