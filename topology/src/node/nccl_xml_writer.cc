// NCCL topology XML writer, in the exact dialect NCCL's hand-written parser accepts
// (reference nccl-topology.md section 1): no prolog, one start tag per line, two-space indent,
// attributes separated by single spaces, no tabs, lowercase dddd:bb:dd.f bus ids, integers
// never zero-padded, within every limit of NCCL's loader (see kNccl* below).
//
// What is written (docs/nccl-xml.md, "Writing NCCL XML"): every CPU, and of the PCI tree only
// what lies on the path from a CPU to a GPU, a NIC or an NVSwitch function, as NCCL's own dump
// keeps (NCCL trims the rest after loading, but it counts against the loader's element budget
// first: a whole-I/O hwloc capture lists every chipset controller). A function whose kind nothing
// tells (AWS g5's bare bus ids) is kept: it may be a GPU.
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
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "topoaware/topology/error.h"
#include "topoaware/topology/node_io.h"

namespace topoaware::topology {
namespace {

// NCCL's XML loader limits (src/graph/xml.h, xml.cc, topo.h), the smallest of the releases still
// in use, so a file written here loads with every NCCL since 2.6:
// - NCCL_TOPO_XML_MAX_NODES (topo.h, 2.21.5+) is 256 slots for the file and what detection adds
//   afterwards. The loader checks for a free slot before it reads every token, the final
//   </system> included, so a file of exactly 256 elements already fails: 255 at most.
constexpr std::size_t kNcclMaxElements = 255;
// - MAX_SUBS children per element: 32 in 2.6-2.20, 128 in 2.21-2.29.6, 640 since 2.29.7; one
//   more is "XML parser is limited to N subnodes" and NCCL init fails.
constexpr std::size_t kNcclMaxChildren = 32;
// - MAX_ATTR_COUNT: attributes past 16 are dropped without an error (so NCCL would lose one).
constexpr std::size_t kNcclMaxAttributes = 16;
// - MAX_STR_LEN 255 (256 before 2.9): a value buffer also holds the closing quote, and the
//   loader fails at 254 stored characters, so a value is at most 253 characters; an element
//   or attribute name likewise.
constexpr std::size_t kNcclMaxString = 253;

// What NCCL's detection adds to the file's elements at run time for things the file leaves to it:
// a <gpu> for a GPU written without one; a <nic> and at least one <net> for a NIC without ports.
constexpr std::size_t kDetectedPerBareGpu = 1;
constexpr std::size_t kDetectedPerBareNic = 2;

// One element of the output, built whole before anything is written, so that every limit can be
// checked with the element it concerns named.
struct Element {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;
  std::vector<Element> children;

  void add(const char* key, const std::string& value) { attrs.emplace_back(key, value); }
  void add(const char* key, long value) { add(key, std::to_string(value)); }
  // How a message names it: <pci busid="0000:3b:00.0">, <net name="mlx5_0">, <cpu numaid="1">.
  std::string label() const {
    for (const char* key : {"busid", "name", "numaid", "target"}) {
      for (const auto& [k, v] : attrs) {
        if (k == key) return "<" + name + " " + k + "=\"" + v + "\">";
      }
    }
    return "<" + name + ">";
  }
};

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
    mark_kept();
    Element sys{"system", {}, {}};
    sys.add("version", "1");
    if (!node_.hostname.empty()) sys.add("name", node_.hostname);
    for (VertexId cpu : node_.cpus()) {
      if (g_.vertex(cpu).parent.valid()) continue;
      sys.children.push_back(cpu_element(cpu));
    }
    check_placed();
    check_limits(sys);
    std::string out;
    serialize(sys, 0, out);
    return out;
  }

 private:
  // Whether a vertex leads to something NCCL uses: a GPU, a NIC, an NVSwitch function, or a
  // function of unknown kind and class (which may be a GPU: AWS g5 lists bare bus ids).
  static bool wanted(const Vertex& v) {
    switch (v.kind) {
      case VertexKind::kGpu:
      case VertexKind::kNic:
        return true;
      case VertexKind::kPciDevice:
        return v.pci.pci_class.empty() || v.pci.pci_class.rfind("0x068000", 0) == 0;
      default:
        return false;
    }
  }

  // keep_[v]: v is wanted or has a wanted vertex below it. Parents come before children in the
  // graph only by convention, so walk up from every wanted vertex instead.
  void mark_kept() {
    keep_.assign(g_.vertex_count(), false);
    for (std::uint32_t i = 0; i < g_.vertex_count(); ++i) {
      VertexId id(i);
      if (!wanted(g_.vertex(id))) continue;
      for (std::size_t hops = 0; id.valid() && !keep_[id.value] && hops <= g_.vertex_count();
           ++hops) {
        keep_[id.value] = true;
        id = g_.vertex(id).parent;
      }
    }
  }

  Element cpu_element(VertexId id) {
    const Vertex& v = g_.vertex(id);
    placed_.push_back(id);
    Element e{"cpu", {}, {}};
    e.add("numaid", static_cast<long>(v.numa));
    std::string affinity = v.cpu.affinity.empty() ? cpumap_from_pus(v.cpu.pus) : v.cpu.affinity;
    if (!affinity.empty()) e.add("affinity", affinity);
    if (!v.cpu.arch.empty()) e.add("arch", v.cpu.arch);
    if (!v.cpu.vendor.empty()) e.add("vendor", v.cpu.vendor);
    if (v.cpu.family >= 0) e.add("familyid", static_cast<long>(v.cpu.family));
    if (v.cpu.model >= 0) e.add("modelid", static_cast<long>(v.cpu.model));
    for (VertexId k : g_.children(id)) add_child(e, k);
    return e;
  }

  // A child of a <cpu> or <pci>: a PCI function on a kept path, or a NIC without bus id (virtual
  // NIC).
  void add_child(Element& parent, VertexId id) {
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
    if (!keep_[id.value]) return;  // off every GPU/NIC/NVSwitch path
    if (v.busid.empty()) {
      if (v.kind == VertexKind::kNic) {
        placed_.push_back(id);
        if (!v.nic.ports.empty()) parent.children.push_back(nic_element(v));
        return;
      }
      if (v.kind == VertexKind::kGpu) {
        throw Error(ErrorCode::kBadInput, v.name,
                    "GPU without a PCI bus id cannot be written to NCCL XML (the bus id is "
                    "NCCL's key)");
      }
      // A PCI switch or device without bus id cannot be keyed; lift its children instead.
      for (VertexId k : g_.children(id)) add_child(parent, k);
      return;
    }
    placed_.push_back(id);
    if (!busids_.insert(v.busid).second) {
      throw Error(ErrorCode::kBadInput, v.busid,
                  "two PCI functions share this bus id; NCCL keys devices by bus id, so the "
                  "file would be ambiguous");
    }
    Element e{"pci", {}, {}};
    e.add("busid", v.busid);
    std::string cls = v.pci.pci_class;
    if (cls.empty() && !empty_in_source(v.pci, "class")) {
      if (v.kind == VertexKind::kPciSwitch) cls = "0x060400";
      if (v.kind == VertexKind::kGpu) cls = "0x030200";
      if (v.kind == VertexKind::kNic) cls = "0x020000";
    }
    // Each attribute NCCL reads as the source had it: its value, or empty where the source
    // wrote it empty (NCCL then takes "" rather than asking sysfs), or absent.
    auto carry = [&](const char* key, const std::string& value) {
      if (!value.empty() || empty_in_source(v.pci, key)) e.add(key, value);
    };
    carry("class", cls);
    carry("vendor", v.pci.vendor);
    carry("device", v.pci.device);
    carry("subsystem_vendor", v.pci.subsystem_vendor);
    carry("subsystem_device", v.pci.subsystem_device);
    carry("link_speed", v.pci.link_speed);
    carry("link_width", v.pci.link_width >= 0 ? std::to_string(v.pci.link_width) : std::string());

    if (v.kind == VertexKind::kGpu && gpu_known(id)) e.children.push_back(gpu_element(id));
    if (v.kind == VertexKind::kNic && !v.nic.ports.empty()) e.children.push_back(nic_element(v));
    for (VertexId k : g_.children(id)) add_child(e, k);
    for (VertexId p : pcilink_peers(id)) {
      Element l{"pcilink", {}, {}};
      l.add("target", g_.vertex(p).busid);
      e.children.push_back(std::move(l));
    }
    if (v.kind == VertexKind::kGpu && !gpu_known(id)) detected_ += kDetectedPerBareGpu;
    if (v.kind == VertexKind::kNic && v.nic.ports.empty()) detected_ += kDetectedPerBareNic;
    parent.children.push_back(std::move(e));
  }

  static bool empty_in_source(const PciInfo& pci, std::string_view key) {
    return std::find(pci.empty_attrs.begin(), pci.empty_attrs.end(), key) != pci.empty_attrs.end();
  }

  // pcilinks are PCIe links between vertices that are not parent and child (Broadcom
  // switch-to-switch); written on the side that was added first so they appear once, and only
  // between vertices the file keeps.
  std::vector<VertexId> pcilink_peers(VertexId id) const {
    std::vector<VertexId> out;
    for (LinkId l : g_.links_of(id)) {
      const Link& k = g_.link(l);
      if (k.kind != LinkKind::kPcie || k.a != id) continue;
      VertexId o = k.b;
      if (o == id || g_.vertex(o).parent == id || g_.vertex(id).parent == o) continue;
      if (g_.vertex(o).busid.empty() || !keep_[o.value]) continue;
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

  Element gpu_element(VertexId id) const {
    const Vertex& v = g_.vertex(id);
    Element e{"gpu", {}, {}};
    if (v.gpu.dev >= 0) e.add("dev", static_cast<long>(v.gpu.dev));
    if (v.gpu.sm >= 0) e.add("sm", static_cast<long>(v.gpu.sm));
    if (v.gpu.gdr >= 0) e.add("gdr", static_cast<long>(v.gpu.gdr));
    for (LinkId l : g_.links_of(id)) {
      const Link& k = g_.link(l);
      VertexId peer = g_.other_end(l, id);
      if (k.kind == LinkKind::kNvLink) {
        Element n{"nvlink", {}, {}};
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
        e.children.push_back(std::move(n));
      } else if (k.kind == LinkKind::kC2C) {
        Element c{"c2c", {}, {}};
        int count = k.count > 0 ? k.count : 1;
        c.add("bw", std::lround(k.bandwidth * 1000.0 / count));  // MB/s per link
        c.add("count", static_cast<long>(count));
        e.children.push_back(std::move(c));
      }
    }
    return e;
  }

  static Element nic_element(const Vertex& v) {
    Element nic{"nic", {}, {}};
    for (const NetPort& p : v.nic.ports) {
      Element t{"net", {}, {}};
      t.add("name", p.name);
      if (p.speed_mbps > 0) t.add("speed", std::llround(p.speed_mbps));
      if (p.port >= 0) t.add("port", static_cast<long>(p.port));
      if (p.latency >= 0) t.add("latency", static_cast<long>(p.latency));
      if (!p.guid.empty()) t.add("guid", hex_guid(p.guid));
      if (p.maxconn >= 0) t.add("maxconn", static_cast<long>(p.maxconn));
      if (p.gdr >= 0) t.add("gdr", static_cast<long>(p.gdr));
      nic.children.push_back(std::move(t));
    }
    return nic;
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

  static std::size_t count(const Element& e) {
    std::size_t n = 1;
    for (const Element& c : e.children) n += count(c);
    return n;
  }

  // Refuses, naming the element, what NCCL's loader would reject, misread or silently cut.
  void check_limits(const Element& root) const {
    std::size_t total = count(root);
    if (total > kNcclMaxElements) {
      throw Error(ErrorCode::kLimit, node_.source,
                  "the NCCL XML would hold " + std::to_string(total) +
                      " elements; NCCL's loader has 256 slots for the file and what it detects "
                      "(at most " +
                      std::to_string(kNcclMaxElements) + " from a file) and aborts beyond");
    }
    if (total + detected_ > kNcclMaxElements) {
      throw Error(ErrorCode::kLimit, node_.source,
                  "the NCCL XML would hold " + std::to_string(total) + " elements and NCCL adds " +
                      std::to_string(detected_) +
                      " for the GPUs and NICs it leaves to detection: more than the 256 slots "
                      "NCCL's loader has, so NCCL would abort");
    }
    check_element(root);
  }

  void check_element(const Element& e) const {
    if (e.children.size() > kNcclMaxChildren) {
      throw Error(ErrorCode::kLimit, e.label(),
                  "would have " + std::to_string(e.children.size()) +
                      " child elements; NCCL before 2.21 loads at most " +
                      std::to_string(kNcclMaxChildren) + " per element and fails beyond");
    }
    if (e.attrs.size() > kNcclMaxAttributes) {
      throw Error(ErrorCode::kLimit, e.label(),
                  "would have " + std::to_string(e.attrs.size()) + " attributes; NCCL reads " +
                      std::to_string(kNcclMaxAttributes) + " and silently drops the rest");
    }
    for (const auto& [key, value] : e.attrs) {
      for (char c : value) {
        if (c == '"' || c == '<' || c == '>' || c == '\n' || c == '\r' || c == '\t' || c == '&' ||
            static_cast<unsigned char>(c) < 0x20) {
          throw Error(
              ErrorCode::kBadInput, e.label(),
              "attribute " + key + "=\"" + value + "\" cannot be written in NCCL's XML dialect");
        }
      }
      if (value.size() > kNcclMaxString || key.size() > kNcclMaxString) {
        throw Error(ErrorCode::kLimit, e.label(),
                    "attribute " + key + " is " + std::to_string(value.size()) +
                        " characters; NCCL's loader fails above " + std::to_string(kNcclMaxString));
      }
    }
    for (const Element& c : e.children) check_element(c);
  }

  static void serialize(const Element& e, int depth, std::string& out) {
    out.append(static_cast<std::size_t>(depth) * 2, ' ');
    out += '<';
    out += e.name;
    for (const auto& [k, v] : e.attrs) {
      out += ' ';
      out += k;
      out += "=\"";
      out += v;
      out += '"';
    }
    if (e.children.empty()) {
      out += "/>\n";
      return;
    }
    out += ">\n";
    for (const Element& c : e.children) serialize(c, depth + 1, out);
    out.append(static_cast<std::size_t>(depth) * 2, ' ');
    out += "</" + e.name + ">\n";
  }

  const NodeTopology& node_;
  const Graph& g_;
  std::vector<bool> keep_;
  std::size_t detected_ = 0;
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
