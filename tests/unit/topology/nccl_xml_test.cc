// NCCL topology XML as a node source and as an export: real vendor files load into the facts of
// their machines, what we write obeys NCCL's lexical rules and round-trips, and hostile input
// gets a clear error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "nccl_xml_lint.h"
#include "test_support.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/node_io.h"
#include "topoaware/topology/paths.h"
#include "topoaware/topology/sources.h"

namespace topoaware::topology {
namespace {

namespace fs = std::filesystem;

std::string nccl_fixture(const std::string& name) { return test::fixture("nccl-topo/" + name); }

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A scratch file that removes itself.
class TempFile {
 public:
  explicit TempFile(const std::string& content, const std::string& suffix = ".xml") {
    static int n = 0;
    path_ = (fs::temp_directory_path() / ("topoaware-ncclxml-" + std::to_string(::getpid()) + "-" +
                                          std::to_string(n++) + suffix))
                .string();
    std::ofstream(path_, std::ios::binary) << content;
  }
  ~TempFile() {
    std::error_code ec;
    fs::remove(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::size_t count_kind(const NodeTopology& n, VertexKind k) { return n.graph.of_kind(k).size(); }

const GpuLocality& locality_of(const std::vector<GpuLocality>& all, VertexId gpu) {
  for (const GpuLocality& l : all) {
    if (l.gpu == gpu) return l;
  }
  throw std::runtime_error("no locality for GPU");
}

// --- facts of named machines --------------------------------------------------------------

TEST(NcclXmlSource, AzureNdv4EachGpuHasItsOwnHcaUnderItsSwitchAtPix) {
  NodeTopology n = load_nccl_xml(nccl_fixture("azure-ndv4-a100-8gpu-8ib-topo.xml"));
  EXPECT_EQ(n.gpus().size(), 8u);
  EXPECT_EQ(n.nics().size(), 8u);
  EXPECT_EQ(n.cpus().size(), 4u);
  EXPECT_EQ(count_kind(n, VertexKind::kPciSwitch), 4u);
  for (VertexId nic : n.nics()) EXPECT_EQ(n.graph.vertex(nic).pci.pci_class, "0x020700");
  std::vector<GpuLocality> loc = gpu_locality(n);
  ASSERT_EQ(loc.size(), 8u);
  std::set<std::uint32_t> chosen;
  for (VertexId gpu : n.gpus()) {
    const GpuLocality& l = locality_of(loc, gpu);
    ASSERT_FALSE(l.nearest_nics.empty()) << n.graph.vertex(gpu).busid;
    EXPECT_EQ(l.path_to_nic, PathType::PIX) << n.graph.vertex(gpu).busid;
    for (VertexId nic : l.nearest_nics) {
      EXPECT_EQ(n.graph.vertex(nic).parent, n.graph.vertex(gpu).parent);
      chosen.insert(nic.value);
    }
    // Gen4 x16 on both hops: 24 GB/s.
    EXPECT_DOUBLE_EQ(l.bandwidth_to_nic, 24.0);
  }
  EXPECT_EQ(chosen.size(), 8u) << "every HCA is nearest to some GPU";
  // numa 1 owns GPU 0001:00:00.0 and CPUs 24-47 (affinity 00000000,0000ffff,ff000000).
  VertexId g1 = n.graph.find_busid("0001:00:00.0");
  ASSERT_TRUE(g1.valid());
  EXPECT_EQ(n.graph.vertex(g1).numa, 1);
  const GpuLocality& l1 = locality_of(loc, g1);
  ASSERT_EQ(l1.local_pus.size(), 24u);
  EXPECT_EQ(l1.local_pus.front(), 24u);
  EXPECT_EQ(l1.local_pus.back(), 47u);
}

TEST(NcclXmlSource, AwsP4dHasEightGpusAndFourEfaByPciClass) {
  NodeTopology n = load_nccl_xml(nccl_fixture("aws-p4d.24xlarge-a100-8gpu-4efa-topo.xml"));
  EXPECT_EQ(n.gpus().size(), 8u);
  EXPECT_EQ(n.nics().size(), 4u);
  EXPECT_EQ(n.cpus().size(), 2u);
  for (VertexId nic : n.nics()) {
    EXPECT_EQ(n.graph.vertex(nic).pci.vendor, "0x1d0f");  // Amazon EFA
    EXPECT_TRUE(n.graph.vertex(nic).nic.ports.empty());   // named by the plugin at run time
  }
  std::vector<GpuLocality> loc = gpu_locality(n);
  VertexId gpu = n.graph.find_busid("0000:90:1d.0");
  ASSERT_TRUE(gpu.valid());
  const GpuLocality& l = locality_of(loc, gpu);
  ASSERT_EQ(l.nearest_nics.size(), 1u);
  EXPECT_EQ(n.graph.vertex(l.nearest_nics[0]).busid, "0000:90:1b.0");
  EXPECT_EQ(l.path_to_nic, PathType::PIX);
  EXPECT_DOUBLE_EQ(l.bandwidth_to_nic, 12.0);  // Gen3 x16
  EXPECT_EQ(n.graph.vertex(gpu).numa, 1);
}

TEST(NcclXmlSource, AzureNdv2FlatLeavesRecognisedByClass) {
  NodeTopology n = load_nccl_xml(nccl_fixture("azure-ndv2-v100-8gpu-topo.xml"));
  EXPECT_EQ(n.gpus().size(), 8u);
  ASSERT_EQ(n.nics().size(), 1u);
  const Vertex& hca = n.graph.vertex(n.nics()[0]);
  EXPECT_EQ(hca.busid, "0101:00:00.0");
  EXPECT_EQ(hca.numa, 0);
  std::vector<GpuLocality> loc = gpu_locality(n);
  // GPUs on NUMA 0 reach the one HCA through their CPU, the others across sockets.
  EXPECT_EQ(locality_of(loc, n.graph.find_busid("0002:00:00.0")).path_to_nic, PathType::PHB);
  EXPECT_EQ(locality_of(loc, n.graph.find_busid("0006:00:00.0")).path_to_nic, PathType::SYS);
}

TEST(NcclXmlSource, AzureNcv4SelfNvlinkIsKeptAndExplained) {
  NodeTopology n = load_nccl_xml(nccl_fixture("azure-ncv4-a100-4gpu-topo.xml"));
  EXPECT_EQ(n.gpus().size(), 4u);
  EXPECT_EQ(n.cpus().size(), 4u);
  for (VertexId gpu : n.gpus()) {
    int self_links = 0;
    for (LinkId l : n.graph.links_of(gpu)) {
      const Link& k = n.graph.link(l);
      if (k.kind == LinkKind::kNvLink) {
        EXPECT_EQ(k.a, k.b);
        EXPECT_EQ(k.count, 12);
        ++self_links;
      }
    }
    EXPECT_EQ(self_links, 1);
    EXPECT_EQ(n.graph.vertex(gpu).gpu.sm, 80);
    EXPECT_EQ(n.graph.vertex(gpu).pci.link_width, 0);  // NCCL: 0 means x16
  }
  // eth0 is a virtual NIC directly under NUMA 0.
  ASSERT_EQ(n.nics().size(), 1u);
  const Vertex& eth0 = n.graph.vertex(n.nics()[0]);
  EXPECT_TRUE(eth0.nic.virtual_nic);
  EXPECT_EQ(eth0.name, "eth0");
  EXPECT_EQ(eth0.numa, 0);
  ASSERT_EQ(eth0.nic.ports.size(), 1u);
  EXPECT_DOUBLE_EQ(eth0.nic.ports[0].speed_mbps, 100000);
  // NCCL's socket transport wrote it (port 0): no RDMA device, but still each GPU's NIC.
  EXPECT_FALSE(is_rdma(eth0.nic.ports[0]));
  for (const GpuLocality& l : gpu_locality(n)) EXPECT_EQ(l.nearest_nics.size(), 1u);
  int self_notes = 0;
  for (const std::string& note : n.notes) self_notes += note.find("to itself") != std::string::npos;
  EXPECT_EQ(self_notes, 4);
  // The self link must not make a GPU its own NVLink peer in the written file's semantics:
  // it is written back exactly once per GPU.
  std::string xml = node_to_nccl_xml(n);
  std::size_t pos = 0, nvlinks = 0;
  while ((pos = xml.find("<nvlink target=\"0001:00:00.0\"", pos)) != std::string::npos) {
    ++nvlinks;
    ++pos;
  }
  EXPECT_EQ(nvlinks, 1u);
}

TEST(NcclXmlSource, AwsG5BarePciLeavesAreKeptUnclassified) {
  NodeTopology n = load_nccl_xml(nccl_fixture("aws-g5.48xlarge-a10g-8gpu-topo.xml"));
  EXPECT_EQ(n.cpus().size(), 2u);
  EXPECT_EQ(n.gpus().size(), 0u);  // no class, no <gpu>: nothing says which leaf is a GPU
  EXPECT_EQ(n.nics().size(), 0u);
  EXPECT_EQ(count_kind(n, VertexKind::kPciDevice), 9u);
  VertexId numa1 = n.graph.find_name(VertexKind::kCpu, "NUMA1");
  ASSERT_TRUE(numa1.valid());
  EXPECT_EQ(n.graph.children(numa1).size(), 5u);
  EXPECT_TRUE(n.graph.vertex(numa1).cpu.affinity.empty());
}

TEST(NcclXmlSource, AwsP5StaticFileHasSwitchesAndEfaLeavesOnly) {
  NodeTopology n = load_nccl_xml(nccl_fixture("aws-p5.48xlarge-h100-static-pci-only-topo.xml"));
  EXPECT_EQ(n.gpus().size(), 0u);
  EXPECT_EQ(count_kind(n, VertexKind::kPciSwitch), 8u);  // class-less but with children
  EXPECT_EQ(count_kind(n, VertexKind::kPciDevice), 32u);
  // "32 GT/s PCIe/s" is a typo NCCL still reads as Gen5 by prefix.
  for (VertexId v : n.graph.of_kind(VertexKind::kPciDevice)) {
    EXPECT_EQ(n.graph.vertex(v).pci.link_speed, "32 GT/s PCIe/s");
  }
  for (const Link& l : n.graph.links()) {
    if (l.kind == LinkKind::kPcie && n.graph.vertex(l.b).kind == VertexKind::kPciDevice) {
      EXPECT_DOUBLE_EQ(l.bandwidth, 48.0);
    }
  }
}

TEST(NcclXmlSource, AwsP5Full32EfaLoadsAndStaysUnderNcclNodeLimit) {
  NodeTopology n = load_nccl_xml(nccl_fixture("aws-p5.48xlarge-h100-8gpu-32efa-full-topo.xml"));
  EXPECT_EQ(n.gpus().size(), 8u);
  EXPECT_EQ(n.nics().size(), 32u);
  for (VertexId nic : n.nics()) {
    const Vertex& v = n.graph.vertex(nic);
    EXPECT_EQ(v.numa, 0);
    ASSERT_EQ(v.nic.ports.size(), 1u);
    EXPECT_EQ(v.nic.ports[0].name.rfind("rdmap", 0), 0u);
  }
  // guid="4" is hex in NCCL: kept as 0x4.
  VertexId nic = n.graph.find_name(VertexKind::kNic, "rdmap96s0");
  ASSERT_TRUE(nic.valid());
  EXPECT_EQ(n.graph.vertex(nic).nic.ports[0].guid, "0x4");
  // The file alone is 122 elements: NCCL overflowed only after adding detected nodes.
  std::string xml = node_to_nccl_xml(n);
  EXPECT_NE(xml.find("name=\"rdmap96s0\""), std::string::npos);
}

TEST(NcclXmlSource, ModalB200NvswitchTargetsMergeIntoOneNvsPerGpu) {
  NodeTopology n =
      load_nccl_xml(nccl_fixture("modal-hgx-b200-vm-8gpu-handedited-p2p-nvlink-topo.xml"));
  EXPECT_EQ(n.gpus().size(), 8u);
  ASSERT_EQ(count_kind(n, VertexKind::kNvSwitch), 1u);
  VertexId nvs = n.graph.of_kind(VertexKind::kNvSwitch)[0];
  // Each GPU lists 7 nvlinks of count 18 with tclass 0x068000; NCCL sums them into one NVS link.
  for (VertexId gpu : n.gpus()) {
    int links = 0;
    for (LinkId l : n.graph.links_of(gpu)) {
      const Link& k = n.graph.link(l);
      if (k.kind != LinkKind::kNvLink) continue;
      ++links;
      EXPECT_EQ(n.graph.other_end(l, gpu), nvs);
      EXPECT_EQ(k.count, 7 * 18);
      EXPECT_DOUBLE_EQ(k.bandwidth, 7 * 18 * nvlink_lane_bandwidth(100));
    }
    EXPECT_EQ(links, 1);
  }
  // A host bridge (class 0x060000) holding <nic> with several <net> ports is one NIC.
  VertexId bridge = n.graph.find_busid("0000:00:00.0");
  ASSERT_TRUE(bridge.valid());
  EXPECT_EQ(n.graph.vertex(bridge).kind, VertexKind::kNic);
  EXPECT_EQ(n.graph.vertex(bridge).nic.ports.size(), 5u);
  // The edit meant GPU peers; the admin is told once what NCCL makes of it.
  std::size_t told = 0;
  for (const std::string& note : n.notes) {
    if (note.find("tclass 0x068000 (NVSwitch) targets GPU 0002:00:02.0") == std::string::npos) {
      continue;
    }
    ++told;
    EXPECT_NE(note.find("modal-hgx-b200-vm-8gpu-handedited-p2p-nvlink-topo.xml:22:"),
              std::string::npos)
        << note;
    EXPECT_NE(note.find("GPU0: 126 lanes"), std::string::npos) << note;
  }
  EXPECT_EQ(told, 1u);
  EXPECT_EQ(n.notes.size(), 1u);
}

// Modal's B200 VM puts GPUs 0-3 beside two NICs under their CPU: a host bridge with four 100G
// ports and a 200G one (mlx5_0..4), and a card with four 400G ports (mlx5_5..8). Both are PHB
// behind Gen5 x16 (48 GB/s), but NCCL's GPU->NET path includes the port's link: 12.5 or 25 GB/s
// against 50. NCCL sends GPUs 0-3 through the 400G card; binding them to mlx5_0 would quarter
// their network bandwidth.
TEST(NcclXmlSource, ModalB200GpusAreNearestThe400GCardNotThe100GPorts) {
  NodeTopology n =
      load_nccl_xml(nccl_fixture("modal-hgx-b200-vm-8gpu-handedited-p2p-nvlink-topo.xml"));
  VertexId slow = n.graph.find_busid("0000:00:00.0");
  VertexId fast0 = n.graph.find_busid("0002:00:00.0");
  VertexId fast1 = n.graph.find_busid("0003:00:00.0");
  ASSERT_TRUE(slow.valid() && fast0.valid() && fast1.valid());
  std::vector<GpuLocality> loc = gpu_locality(n);
  ASSERT_EQ(loc.size(), 8u);
  for (const GpuLocality& l : loc) {
    const Vertex& gpu = n.graph.vertex(l.gpu);
    VertexId want = gpu.numa == 0 ? fast0 : fast1;
    EXPECT_EQ(l.nearest_nics, std::vector<VertexId>{want}) << gpu.busid;
    EXPECT_EQ(l.path_to_nic, PathType::PHB) << gpu.busid;
    EXPECT_DOUBLE_EQ(l.bandwidth_to_nic, 48.0) << gpu.busid;  // Gen5 x16, under the 400G port
  }
  EXPECT_EQ(n.graph.vertex(fast0).name, "mlx5_5");
}

// Panlichen's RTX 3090 box: GPUs 4-7 share a PCIe switch with a ConnectX-6 running FDR (56 Gb/s);
// NCCL's path bandwidth is the port's 7 GB/s, not the Gen4 switch's 24.
TEST(NcclXmlSource, PanlichenFdrPortCapsTheGpuToNicBandwidth) {
  NodeTopology n = load_nccl_xml(nccl_fixture("panlichen-8xRTX3090-plx-cx6-fdr-topo.xml"));
  std::vector<GpuLocality> loc = gpu_locality(n);
  ASSERT_EQ(loc.size(), 8u);
  for (const GpuLocality& l : loc) {
    ASSERT_EQ(l.nearest_nics.size(), 1u);
    EXPECT_EQ(n.graph.vertex(l.nearest_nics[0]).name, "mlx5_0");
    EXPECT_DOUBLE_EQ(l.bandwidth_to_nic, 56000.0 / 8000.0) << n.graph.vertex(l.gpu).busid;
  }
}

// Socket-only nodes: the nearest NIC becomes NCCL_SOCKET_IFNAME, so it must be a port that
// reaches other hosts. Sugarlxn's NCCL dump lists an Intel X550 port (enp34s0f0, 1 Gb/s) and,
// under every CPU, an IPIP tunnel, docker bridges and calico veths at 10 Gb/s; the tunnel won
// on speed and every task would have bootstrapped over tunl0.
TEST(NcclXmlSource, SugarlxnSocketNicIsTheX550PortNotATunnelOrBridge) {
  NodeTopology n =
      load_nccl_xml(nccl_fixture("sugarlxn-4xRTX4090-epyc-8numa-virtualnics-topo.xml"));
  VertexId x550 = n.graph.find_busid("0000:22:00.0");
  ASSERT_TRUE(x550.valid());
  EXPECT_EQ(n.graph.vertex(x550).name, "enp34s0f0");
  std::vector<GpuLocality> loc = gpu_locality(n);
  ASSERT_EQ(loc.size(), 4u);
  for (const GpuLocality& l : loc) {
    const Vertex& gpu = n.graph.vertex(l.gpu);
    EXPECT_EQ(l.nearest_nics, std::vector<VertexId>{x550}) << gpu.busid;
    // The X550 hangs under NUMA 2: PHB from the GPU of that NUMA node, SYS from the others.
    EXPECT_EQ(l.path_to_nic, gpu.numa == 2 ? PathType::PHB : PathType::SYS) << gpu.busid;
  }
}

// Yccl's Dell box: two Broadcom 1 GbE ports beside GPUs 0-1, and docker bridges and veths under
// the CPU. The Broadcom ports are every GPU's candidates, never br-3c276cd5dbc3.
TEST(NcclXmlSource, YcclDellSocketNicsAreTheBroadcomPortsNotDockerBridges) {
  TOPOAWARE_SHARED_OR_SKIP(path, "nccl-topo/yccl-4xRTXA6000-dell-bcm-vethnics-topo.xml");
  NodeTopology n = load_nccl_xml(path);
  VertexId eno1 = n.graph.find_busid("0000:18:00.0");
  VertexId eno2 = n.graph.find_busid("0000:18:00.1");
  ASSERT_TRUE(eno1.valid() && eno2.valid());
  std::vector<GpuLocality> loc = gpu_locality(n);
  ASSERT_EQ(loc.size(), 4u);
  for (const GpuLocality& l : loc) {
    EXPECT_EQ(l.nearest_nics, (std::vector<VertexId>{eno1, eno2})) << n.graph.vertex(l.gpu).busid;
  }
  EXPECT_EQ(n.graph.vertex(loc[0].nearest_nics[0]).name, "eno1np0");
}

// Where a VM shows no PCI NIC, its VMBus eth0 (a <nic> under the CPU) stays the GPUs' NIC.
TEST(NcclXmlSource, AzureNcv4VmbusEthernetIsStillTheNic) {
  NodeTopology n = load_nccl_xml(nccl_fixture("azure-ncv4-a100-4gpu-topo.xml"));
  for (const GpuLocality& l : gpu_locality(n)) {
    ASSERT_EQ(l.nearest_nics.size(), 1u);
    EXPECT_EQ(n.graph.vertex(l.nearest_nics[0]).name, "eth0");
  }
}

TEST(NcclXmlSource, SugarlxnVirtualNicsRepeatedUnderEachCpu) {
  NodeTopology n =
      load_nccl_xml(nccl_fixture("sugarlxn-4xRTX4090-epyc-8numa-virtualnics-topo.xml"));
  EXPECT_EQ(n.gpus().size(), 4u);
  std::size_t virtual_nics = 0, physical = 0;
  for (VertexId nic : n.nics()) {
    const Vertex& v = n.graph.vertex(nic);
    if (v.nic.virtual_nic) {
      ++virtual_nics;
      EXPECT_TRUE(v.busid.empty());
      EXPECT_EQ(v.name, "tunl0");
    } else {
      ++physical;
    }
  }
  EXPECT_GE(virtual_nics, 2u);
  EXPECT_EQ(physical, 1u);  // the Intel X550 enp34s0f0
  // NVML indexes 0, 1, 3, 4 (dev 3 has rank 2 in the dump): dev is what we keep, rank is not.
  std::set<int> devs;
  for (VertexId gpu : n.gpus()) devs.insert(n.graph.vertex(gpu).gpu.dev);
  EXPECT_EQ(devs, (std::set<int>{0, 1, 3, 4}));
}

TEST(NcclXmlSource, PanlichenRtx3090VgaClassGpusAndFdrHca) {
  NodeTopology n = load_nccl_xml(nccl_fixture("panlichen-8xRTX3090-plx-cx6-fdr-topo.xml"));
  EXPECT_EQ(n.gpus().size(), 8u);
  for (VertexId gpu : n.gpus()) EXPECT_EQ(n.graph.vertex(gpu).pci.pci_class, "0x030000");
  double best = 0;
  for (VertexId nic : n.nics()) {
    for (const NetPort& p : n.graph.vertex(nic).nic.ports) best = std::max(best, p.speed_mbps);
  }
  EXPECT_DOUBLE_EQ(best, 56000);
}

TEST(NcclXmlSource, CuiboyuanV100HybridCubeMeshWithUnknownNuma) {
  TOPOAWARE_SHARED_OR_SKIP(path,
                           "nccl-topo/cuiboyuan-8xV100-sxm2-hybridcubemesh-vm-numa-1-topo.xml");
  NodeTopology n = load_nccl_xml(path);
  EXPECT_EQ(n.gpus().size(), 8u);
  std::size_t gpu_pairs = 0;
  for (const Link& l : n.graph.links()) gpu_pairs += l.kind == LinkKind::kNvLink;
  EXPECT_EQ(gpu_pairs, 16u);  // each link listed from both ends, kept once
  for (VertexId gpu : n.gpus()) {
    int lanes = 0, peers = 0;
    for (LinkId l : n.graph.links_of(gpu)) {
      if (n.graph.link(l).kind != LinkKind::kNvLink) continue;
      lanes += n.graph.link(l).count;
      ++peers;
    }
    EXPECT_EQ(lanes, 6) << n.graph.vertex(gpu).busid;  // V100 SXM2: 6 links
    EXPECT_EQ(peers, 4);
    EXPECT_EQ(n.graph.vertex(gpu).numa, -1);
  }
  bool noted = false;
  for (const std::string& note : n.notes) noted |= note.find("numaid=\"-1\"") != std::string::npos;
  EXPECT_TRUE(noted);
}

// --- every real file: loads or is refused for a stated reason --------------------------------

bool is_graph_file(const std::string& name) { return name.find("graph") != std::string::npos; }

TEST(NcclXmlSource, EverySharedFileLoadsOrIsRefusedWithAReason) {
  TOPOAWARE_SHARED_OR_SKIP(dir, "nccl-topo");
  int loaded = 0, refused = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::string path = entry.path().string();
    std::string name = entry.path().filename().string();
    if (is_graph_file(name)) {
      try {
        load_node_file(path);
        ADD_FAILURE() << name << " is a graph file but loaded";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kUnsupported) << name;
        EXPECT_NE(std::string(e.what()).find("an NCCL graph file"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
        ++refused;
      }
      continue;
    }
    NodeTopology n;
    ASSERT_NO_THROW(n = load_node_file(path)) << name;
    EXPECT_FALSE(n.cpus().empty()) << name;
    EXPECT_EQ(n.source, "nccl-xml:" + path);
    ++loaded;
  }
  EXPECT_EQ(refused, 3);
  EXPECT_EQ(loaded, 17);
}

// --- writing NCCL XML ------------------------------------------------------------------------

// For every real topology capture: what we write has no lexical/structural error, lacks no
// attribute the source had, and write(read(write(x))) == write(x) byte for byte.
TEST(NcclXmlWriter, RealCapturesObeyNcclRulesAndRoundTrip) {
  TOPOAWARE_SHARED_OR_SKIP(dir, "nccl-topo");
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    if (is_graph_file(name)) continue;
    SCOPED_TRACE(name);
    NodeTopology first = load_nccl_xml(entry.path().string());
    std::string out1 = node_to_nccl_xml(first);

    test::NcclXmlLint lint;
    std::vector<test::LintIssue> issues = lint.check(out1);
    for (const test::LintIssue& e : test::NcclXmlLint::errors(issues)) {
      ADD_FAILURE() << "line " << e.line << ": " << e.message << " [" << e.key << "]";
    }
    std::set<std::string> source_gaps =
        test::NcclXmlLint::incomplete_keys(lint.check(slurp(entry.path().string())));
    for (const std::string& gap : test::NcclXmlLint::incomplete_keys(issues)) {
      EXPECT_TRUE(source_gaps.count(gap)) << "we dropped what the source had: " << gap;
    }
    EXPECT_EQ(out1.find('\t'), std::string::npos);
    EXPECT_EQ(out1.rfind("<system version=\"1\"", 0), 0u) << "no prolog, system first";

    TempFile tmp(out1);
    NodeTopology second = load_nccl_xml(tmp.path());
    std::string out2 = node_to_nccl_xml(second);
    EXPECT_EQ(out1, out2);
    EXPECT_EQ(second.gpus().size(), first.gpus().size());
    EXPECT_EQ(second.nics().size(), first.nics().size());
    EXPECT_EQ(second.graph.vertex_count(), first.graph.vertex_count());
    EXPECT_EQ(second.graph.link_count(), first.graph.link_count());
    ++checked;
  }
  EXPECT_EQ(checked, 17);
}

TEST(NcclXmlWriter, WritesFullAttributesInNcclsDialect) {
  NodeTopology n = load_nccl_xml(nccl_fixture("aws-p4d.24xlarge-a100-8gpu-4efa-topo.xml"));
  std::string xml = node_to_nccl_xml(n);
  EXPECT_NE(xml.find("  <cpu numaid=\"0\" affinity=\"000000ff,ffff0000,00ffffff\" arch=\"x86_64\" "
                     "vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"85\">\n"),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("    <pci busid=\"ffff:ff:01.0\" class=\"0x060400\" vendor=\"0xffff\" "
                     "device=\"0xffff\" subsystem_vendor=\"0xffff\" subsystem_device=\"0xffff\" "
                     "link_speed=\"8 GT/s\" link_width=\"16\">\n"),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("      <pci busid=\"0000:10:1c.0\" class=\"0x030200\""), std::string::npos);
  EXPECT_EQ(xml.find("<!--"), std::string::npos);  // comments of the source are not carried
  EXPECT_EQ(xml.back(), '\n');
}

TEST(NcclXmlWriter, ModelFromScratchGetsLowercaseBusidsAndDerivedAffinity) {
  NodeTopology n;
  Vertex cpu;
  cpu.kind = VertexKind::kCpu;
  cpu.numa = 1;
  cpu.cpu.pus = {0, 1, 2, 3, 40};
  cpu.cpu.arch = "x86_64";
  cpu.cpu.vendor = "AuthenticAMD";
  cpu.cpu.family = 25;
  cpu.cpu.model = 1;
  VertexId c = n.graph.add_vertex(cpu);
  Vertex gpu;
  gpu.kind = VertexKind::kGpu;
  gpu.busid = normalize_busid("00000000:1B:00.0");
  gpu.parent = c;
  gpu.gpu.dev = 0;
  gpu.gpu.sm = 90;
  n.graph.add_vertex(gpu);
  std::string xml = node_to_nccl_xml(n);
  EXPECT_EQ(xml,
            "<system version=\"1\">\n"
            "  <cpu numaid=\"1\" affinity=\"00000100,0000000f\" arch=\"x86_64\" "
            "vendor=\"AuthenticAMD\" familyid=\"25\" modelid=\"1\">\n"
            "    <pci busid=\"0000:1b:00.0\" class=\"0x030200\">\n"
            "      <gpu dev=\"0\" sm=\"90\"/>\n"
            "    </pci>\n"
            "  </cpu>\n"
            "</system>\n");
  test::NcclXmlLint lint;
  EXPECT_TRUE(test::NcclXmlLint::errors(lint.check(xml)).empty());
}

TEST(NcclXmlWriter, MoreThan256ElementsIsALimitError) {
  std::string xml = "<system version=\"1\">\n  <cpu numaid=\"0\">\n";
  for (int i = 0; i < 300; ++i) {
    char busid[32];
    std::snprintf(busid, sizeof busid, "0000:%02x:%02x.%x", i / 32 + 1, i % 32, 0);
    xml += std::string("    <pci busid=\"") + busid + "\" class=\"0x020000\"/>\n";
  }
  xml += "  </cpu>\n</system>\n";
  TempFile f(xml);
  NodeTopology n = load_nccl_xml(f.path());  // reading is fine: our bound is far larger
  EXPECT_EQ(n.nics().size(), 300u);
  try {
    node_to_nccl_xml(n);
    FAIL() << "wrote more than 256 elements";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kLimit);
    EXPECT_NE(std::string(e.what()).find("302 elements"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("256"), std::string::npos);
  }
}

// --- hostile and broken input ----------------------------------------------------------------

void expect_error(const std::string& path, ErrorCode code, const std::string& fragment) {
  for (int i = 0; i < 2; ++i) {
    try {
      if (i == 0) {
        load_nccl_xml(path);
      } else {
        load_node_file(path);
      }
      ADD_FAILURE() << "loaded: " << path;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << "names the file";
    }
  }
}

TEST(NcclXmlBadInput, TruncatedFileNamesTheUnclosedElementAndLine) {
  std::string text = slurp(nccl_fixture("azure-ndv4-a100-8gpu-8ib-topo.xml"));
  TempFile f(text.substr(0, text.find('\n', text.size() / 2) + 1));  // between tags
  expect_error(f.path(), ErrorCode::kBadInput, "never closed");
  try {
    load_nccl_xml(f.path());
  } catch (const Error& e) {
    EXPECT_NE(e.context().find(f.path() + ":"), std::string::npos) << "path:line";
  }
  // Cut inside a start tag too.
  TempFile g(text.substr(0, text.find("class=") + 3));
  expect_error(g.path(), ErrorCode::kBadInput, "end of file");
}

TEST(NcclXmlBadInput, WrongRootElement) {
  TempFile f("<topology2 version=\"1\"/>\n");
  try {
    load_node_file(f.path());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("neither <system>"), std::string::npos) << e.what();
  }
  try {
    load_nccl_xml(f.path());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected <system>"), std::string::npos) << e.what();
  }
}

TEST(NcclXmlBadInput, TenMegabytesOfRandomBytes) {
  std::mt19937 rng(42);
  std::string junk(10u << 20, '\0');
  for (char& c : junk) c = static_cast<char>(rng());
  junk[0] = 'x';  // make the first byte deterministic for the message
  TempFile f(junk, ".bin");
  // Read as NCCL XML, the parser names the first byte; left to detection, the data is named.
  try {
    load_nccl_xml(f.path());
    ADD_FAILURE() << "loaded random bytes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected '<'"), std::string::npos) << e.what();
  }
  try {
    load_node_file(f.path());
    ADD_FAILURE() << "loaded random bytes";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadInput);
    EXPECT_NE(std::string(e.what()).find("binary data"), std::string::npos) << e.what();
  }
  // Random bytes after a plausible start: still an error, never a crash.
  TempFile g("<system version=\"1\">" + junk.substr(0, 1u << 20), ".bin");
  EXPECT_THROW(load_nccl_xml(g.path()), Error);
}

TEST(NcclXmlBadInput, DirectoryEmptyMissingAndOversized) {
  expect_error(fs::temp_directory_path().string(), ErrorCode::kBadInput, "is a directory");
  TempFile empty("");
  expect_error(empty.path(), ErrorCode::kBadInput, "no root element");
  TempFile comments("<!-- nothing here -->\n\n");
  expect_error(comments.path(), ErrorCode::kBadInput, "no root element");
  expect_error("/nonexistent/topo.xml", ErrorCode::kNotFound, "no such file");
  TempFile big("<system version=\"1\">" + std::string(16u << 20, ' ') + "</system>\n");
  expect_error(big.path(), ErrorCode::kLimit, "bytes");
}

TEST(NcclXmlBadInput, RuleViolationsNamePathAndLine) {
  struct Case {
    const char* xml;
    const char* fragment;
    int line;
  };
  const Case cases[] = {
      {"<system>\n</system>", "no version", 1},
      {"<system version=\"2\">\n</system>", "only version 1", 1},
      {"<system version=\"1\">\n  <cpu>\n  </cpu>\n</system>", "no numaid", 2},
      {"<system version=\"1\">\n  <cpu numaid=\"0\">\n    <pci class=\"0x0302\"/>\n  </cpu>\n"
       "</system>",
       "no busid", 3},
      {"<system version=\"1\">\n  <cpu numaid=\"0\">\n    <pci busid=\"zz:00.0\"/>\n  </cpu>\n"
       "</system>",
       "not a PCI bus id", 3},
      {"<system version=\"1\">\n  <cpu numaid=\"0\">\n    <pci busid=\"0000:01:00.0\"/>\n"
       "    <pci busid=\"0000:01:00.0\"/>\n  </cpu>\n</system>",
       "repeats the bus id of line 3", 4},
      {"<system version=\"1\">\n  <cpu numaid=\"08\">\n  </cpu>\n</system>", "octal", 2},
      {"<system version=\"1\">\n  <cpu numaid=\"0\" affinity=\"xyz\">\n  </cpu>\n</system>",
       "not a cpumap", 2},
      {"<system version=\"1\">\n  <cpu numaid=\"0\">\n    <pci busid=\"0000:01:00.0\">\n"
       "      <gpu>\n        <nvlink target=\"0000:02:00.0\"/>\n      </gpu>\n    </pci>\n"
       "  </cpu>\n</system>",
       "count and tclass", 5},
      {"<system version=\"1\">\n  <cpu numaid=\"0\">\n    text\n  </cpu>\n</system>",
       "expected an element", 3},
      {"<system version=\"1\">\n  <cpu numaid=0>\n  </cpu>\n</system>", "quoted value", 2},
      {"<system version=\"1\">\n  <cpu numaid=\"0\">\n  </pci>\n</system>",
       "closes <cpu> opened at line 2", 3},
      {"<system version=\"1\">\n</system>\n<system version=\"1\"/>", "after the root", 3},
      {"<system version=\"1\">\n  <cpu numaid=\"0\">\n    <pci busid=\"0000:01:00.0\">\n"
       "      <nic>\n        <net speed=\"100\"/>\n      </nic>\n    </pci>\n  </cpu>\n</system>",
       "<net> has no name", 5},
      {"<system version=\"1\">\n  <cpu numaid=\"0\">\n    <nic>\n"
       "      <net name=\"eth0\" latency=\"1e11\"/>\n    </nic>\n  </cpu>\n</system>",
       "out of range", 4},
      {"<system version=\"1\">\n  <cpu numaid=\"99999999999\">\n  </cpu>\n</system>",
       "out of range", 2},
  };
  for (const Case& c : cases) {
    TempFile f(c.xml);
    try {
      load_nccl_xml(f.path());
      ADD_FAILURE() << "accepted: " << c.xml;
    } catch (const Error& e) {
      EXPECT_EQ(e.context(), f.path() + ":" + std::to_string(c.line)) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.fragment), std::string::npos) << e.what();
    }
  }
}

// Every prefix of a real file, and random byte edits of it, either load or throw
// topology::Error: no other exception, no crash (run under ASan/UBSan by scripts/test.sh).
TEST(NcclXmlBadInput, EveryPrefixAndRandomEditsFailCleanly) {
  std::string text = slurp(nccl_fixture("aws-p4d.24xlarge-a100-8gpu-4efa-topo.xml"));
  int loaded = 0, refused = 0;
  auto attempt = [&](const std::string& content) {
    TempFile f(content);
    try {
      NodeTopology n = load_node_file(f.path());
      node_to_nccl_xml(n);
      node_to_json(n);
      ++loaded;
    } catch (const Error&) {
      ++refused;
    }
  };
  for (std::size_t len = 0; len < text.size(); len += 7) attempt(text.substr(0, len));
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    std::string t = text;
    for (int k = 0; k < 3; ++k) t[rng() % t.size()] = static_cast<char>(rng());
    attempt(t);
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(loaded, 0);
}

TEST(NcclXmlBadInput, DeepNestingAndHugeValuesAreBounded) {
  std::string deep = "<system version=\"1\">\n<cpu numaid=\"0\">\n";
  for (int i = 0; i < 5000; ++i) deep += "<pci busid=\"0000:00:00.0\">";
  TempFile f(deep);
  expect_error(f.path(), ErrorCode::kBadInput, "nested deeper");
  TempFile g("<system version=\"1\" name=\"" + std::string(100000, 'a') + "\"/>");
  expect_error(g.path(), ErrorCode::kBadInput, "longer than");
}

TEST(NcclXmlSource, ToleratesPrologCrlfCommentsAndUnknownElements) {
  TempFile f(
      "<?xml version=\"1.0\"?>\r\n<!-- vendor header -->\r\n<system version=\"1\">\r\n"
      "  <cpu numaid=\"0\" affinity=\"ff\">\r\n"
      "    <pci busid=\"0000:3B:00.0\" class=\"0x030200\" link_speed=\"16.0 GT/s PCIe\" "
      "link_width=\"16\"> <!-- GPU -->\r\n"
      "      <gpu dev=\"0\" sm=\"80\"/>\r\n      <future attr=\"x\"><deeper/></future>\r\n"
      "    </pci>\r\n  </cpu>\r\n</system>\r\n");
  NodeTopology n = load_nccl_xml(f.path());
  ASSERT_EQ(n.gpus().size(), 1u);
  EXPECT_EQ(n.graph.vertex(n.gpus()[0]).busid, "0000:3b:00.0");
  EXPECT_EQ(n.graph.vertex(n.cpus()[0]).cpu.pus.size(), 8u);
  ASSERT_EQ(n.notes.size(), 1u);
  EXPECT_NE(n.notes[0].find(":7: <future>"), std::string::npos) << n.notes[0];
}

TEST(NcclXmlSource, GraphFileRefusedFromBothEntryPoints) {
  std::string graph = nccl_fixture("azure-ncv4-a100-4gpu-graph.xml");
  expect_error(graph, ErrorCode::kUnsupported, "an NCCL graph file, not a topology file");
}

// Every real `nvidia-smi topo -m` capture (spaces, tabs, legends or none) is named as such with
// what to give instead, not reported as XML missing its '<'.
TEST(NcclXmlBadInput, NvidiaSmiTopoMatrixIsNamedWithWhatToGiveInstead) {
  TOPOAWARE_SHARED_OR_SKIP(dir, "nvidia-smi-topo");
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    ++files;
    expect_error(entry.path().string(), ErrorCode::kUnsupported, "`nvidia-smi topo -m` output");
    expect_error(entry.path().string(), ErrorCode::kUnsupported, "lstopo --of xml");
  }
  EXPECT_EQ(files, 7u);
}

}  // namespace
}  // namespace topoaware::topology
