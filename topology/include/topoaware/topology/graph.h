// The hardware graph shared by the node and the fabric halves of topo-aware.
//
// One representation for everything from a GPU's PCIe switch to a spine switch: vertices in a
// std::vector addressed by strong ids, undirected links with a kind, a bandwidth (GB/s, one
// direction) and a latency. Node-level vertices also form a tree (parent ids) that mirrors the
// PCIe hierarchy under each CPU/NUMA domain, which is what NCCL's XML needs; fabric vertices
// (hosts, switches) have no parent. The graph holds facts only; policies (paths, mapping) live
// in other units.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace topoaware::topology {

// Strong ids: a VertexId cannot be passed where a LinkId is expected.
template <class Tag>
struct Id {
  static constexpr std::uint32_t kInvalid = std::numeric_limits<std::uint32_t>::max();
  std::uint32_t value = kInvalid;
  constexpr Id() = default;
  constexpr explicit Id(std::uint32_t v) : value(v) {}
  constexpr bool valid() const { return value != kInvalid; }
  friend constexpr bool operator==(Id a, Id b) { return a.value == b.value; }
  friend constexpr auto operator<=>(Id a, Id b) { return a.value <=> b.value; }
};
using VertexId = Id<struct VertexTag>;
using LinkId = Id<struct LinkTag>;

enum class VertexKind : std::uint8_t {
  kCpu,        // one NUMA domain / socket package as NCCL sees it (<cpu numaid=...>)
  kPciSwitch,  // a PCIe switch or bridge (class 0x0604xx), also synthetic ones of cloud VMs
  kPciDevice,  // any other PCI function we keep for fidelity (NVMe, a GPU-less VGA, ...)
  kGpu,
  kNic,        // one PCI NIC function (or a virtual NIC directly under a CPU)
  kNvSwitch,   // NVSwitch fabric inside a node (all NVSwitches merged, as NCCL does)
  kHost,       // a whole node in the fabric
  kSwitch,     // a network switch (InfiniBand / Ethernet)
};
std::string_view to_string(VertexKind k);

enum class LinkKind : std::uint8_t {
  kNvLink,
  kC2C,
  kPcie,
  kSmp,      // CPU <-> CPU (socket interconnect)
  kNetwork,  // NIC/host <-> switch, switch <-> switch
};
std::string_view to_string(LinkKind k);

// Attributes of a CPU/NUMA domain, as NCCL's <cpu> element carries them.
struct CpuInfo {
  std::string affinity;  // NCCL cpumap string ("ffffffff,00000000"), empty when unknown
  std::string arch;      // x86_64, arm64, ppc64
  std::string vendor;    // GenuineIntel, AuthenticAMD
  int family = -1;
  int model = -1;
  std::vector<std::uint32_t> pus;  // OS indexes of the processing units local to this domain
};

// Attributes of a PCI function or switch.
struct PciInfo {
  std::string pci_class;   // "0x030200" as sysfs writes it; empty when unknown
  std::string link_speed;  // NCCL form: "16.0 GT/s PCIe"; empty when unknown
  int link_width = -1;     // lanes; -1 unknown
  std::string vendor, device, subsystem_vendor, subsystem_device;  // "0x10de" or empty
  // Attributes the source wrote with an empty value ("link_speed", "link_width" in VM dumps
  // where sysfs had none). NCCL takes an empty value as given instead of reading sysfs, so
  // the NCCL XML writer writes them back empty.
  std::vector<std::string> empty_attrs;
};

struct GpuInfo {
  int dev = -1;  // NVML index
  int sm = -1;   // compute capability x10
  int gdr = -1;  // -1 unknown
  std::string uuid;
  std::string model;             // "Tesla V100-SXM3-32GB" where known
  std::string nvlink_cluster;    // NVLink fabric clusterUUID (multi-node NVLink), empty if none
  int nvlink_clique = -1;        // NVLink fabric cliqueId, -1 if none
};

// One port of a NIC as NCCL sees it (<net name=...>). A dual-port HCA has two.
struct NetPort {
  std::string name;     // mlx5_0, eth0
  int port = -1;
  double speed_mbps = -1;  // Mb/s as NCCL writes it
  std::string guid;     // "0x..." hex
  int latency = -1;
  int maxconn = -1;
  int gdr = -1;
  std::string link_layer;  // InfiniBand / Ethernet
  std::string state;       // ACTIVE / DOWN ...
  int width = -1;          // lanes (4x)
  std::string netdev;      // ib0, ens1f0 when known
};

// Whether a port is an RDMA device's (InfiniBand, RoCE, EFA, Omni-Path: a name NCCL_IB_HCA or
// a net plugin matches) rather than a plain socket interface. Verbs ports are numbered from 1;
// NCCL's socket transport writes port 0, and an interface seen only as a netdev (hwloc, sysfs)
// has no port and is named after itself.
bool is_rdma(const NetPort& p);

struct NicInfo {
  std::vector<NetPort> ports;
  bool virtual_nic = false;  // directly under a CPU (sockets, docker bridges)
};

struct SwitchInfo {
  std::string guid;       // node GUID, "0x..."
  std::string model;      // description text
  int ports = -1;         // port count
  int tier = -1;          // 1 = leaf (hosts attached), upward; -1 not computed
};

struct Vertex {
  VertexKind kind{};
  std::string name;     // "GPU0", "mlx5_0", "NUMA0", "leaf01", "node012"
  std::string busid;    // lowercase dddd:bb:dd.f for PCI things, empty otherwise
  int numa = -1;        // NUMA domain of node-level vertices
  VertexId parent;      // tree parent inside a node; invalid for roots and fabric vertices
  VertexId host;        // the host vertex a node-level vertex belongs to, if the graph has hosts
  CpuInfo cpu;          // kCpu only
  PciInfo pci;          // PCI things (switch, device, GPU, NIC)
  GpuInfo gpu;          // kGpu only
  NicInfo nic;          // kNic only
  SwitchInfo sw;        // kSwitch only
};

struct Link {
  VertexId a, b;
  LinkKind kind{};
  double bandwidth = 0;   // GB/s, one direction, whole link (count already applied)
  double latency_us = 0;
  int count = 1;          // NVLink lanes, parallel cables merged into one link
  int port_a = -1, port_b = -1;  // switch/HCA port numbers where known
  std::string nvlink_tclass;     // for NVLink: "0x068000" NVSwitch, "0x030200" GPU, "0x068001" CPU
  std::string rate;              // network: "4xHDR", "4xNDR" as ibnetdiscover writes it
  // Network: the source gives no speed (topology.conf without LinkSpeed), so `bandwidth` is a
  // placeholder that no figure may rest on (the mapper sizes such links from what they carry).
  bool speed_assumed = false;
};

class Graph {
 public:
  VertexId add_vertex(Vertex v);
  // Room for this many vertices and links in all, so a large fabric is built without copying
  // its vectors as they grow (a 16,384-host description: 0.36 s -> 0.23 s, 63 -> 52 MB).
  void reserve(std::size_t vertices, std::size_t links);
  LinkId add_link(Link l);

  std::size_t vertex_count() const { return vertices_.size(); }
  std::size_t link_count() const { return links_.size(); }
  const Vertex& vertex(VertexId id) const { return vertices_.at(id.value); }
  Vertex& vertex(VertexId id) { return vertices_.at(id.value); }
  const Link& link(LinkId id) const { return links_.at(id.value); }
  Link& link(LinkId id) { return links_.at(id.value); }
  const std::vector<Vertex>& vertices() const { return vertices_; }
  const std::vector<Link>& links() const { return links_; }

  // Links touching v, in insertion order.
  const std::vector<LinkId>& links_of(VertexId v) const { return adjacency_.at(v.value); }
  // The vertex at the other end of link l from v.
  VertexId other_end(LinkId l, VertexId v) const {
    const Link& k = link(l);
    return k.a == v ? k.b : k.a;
  }
  // Children in the node tree (vertices whose parent is v), in insertion order.
  std::vector<VertexId> children(VertexId v) const;
  // All vertices of one kind, in id order.
  std::vector<VertexId> of_kind(VertexKind k) const;
  // First vertex with this busid (case-insensitive match on the normalized form), or invalid.
  VertexId find_busid(std::string_view busid) const;
  // First vertex with this name and kind, or invalid.
  VertexId find_name(VertexKind k, std::string_view name) const;

 private:
  std::vector<Vertex> vertices_;
  std::vector<Link> links_;
  std::vector<std::vector<LinkId>> adjacency_;
};

// Normalizes a PCI bus id to NCCL's key form: lowercase, at least 4 hex digits of domain,
// "dddd:bb:dd.f". Accepts nvidia-smi's "00000000:1B:00.0" and hwloc's forms. Returns empty on
// malformed input.
std::string normalize_busid(std::string_view busid);

}  // namespace topoaware::topology
