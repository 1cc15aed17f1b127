// NCCL's bandwidth rules with the reference's worked numbers, and path search on small graphs
// built to exercise each rule (PIX/PXB/PHB/SYS, NVB relays, no transit through GPUs, tie-breaks).
#include "topoaware/topology/paths.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace topoaware::topology {
namespace {

TEST(Bandwidth, PcieIsWidthTimesLaneRateOver80) {
  EXPECT_DOUBLE_EQ(pcie_bandwidth("16.0 GT/s PCIe", 16), 24.0);  // Gen4 x16
  EXPECT_DOUBLE_EQ(pcie_bandwidth("32.0 GT/s PCIe", 16), 48.0);  // Gen5 x16
  EXPECT_DOUBLE_EQ(pcie_bandwidth("64.0 GT/s PCIe", 16), 96.0);  // Gen6 x16
  EXPECT_DOUBLE_EQ(pcie_bandwidth("8.0 GT/s PCIe", 16), 12.0);   // Gen3 x16
  EXPECT_DOUBLE_EQ(pcie_bandwidth("16 GT/s", 8), 12.0);          // short form, x8
  EXPECT_DOUBLE_EQ(pcie_bandwidth("5 GT/s", 4), 1.5);
  EXPECT_DOUBLE_EQ(pcie_bandwidth("2.5 GT/s PCIe", 1), 15.0 / 80);
  // AWS p5 writes "32 GT/s PCIe/s": the "32 GT/s" prefix still matches Gen5.
  EXPECT_DOUBLE_EQ(pcie_bandwidth("32 GT/s PCIe/s", 16), 48.0);
}

TEST(Bandwidth, PcieUnknownSpeedIsGen3AndUnknownWidthIsX16) {
  EXPECT_DOUBLE_EQ(pcie_bandwidth("", -1), 12.0);
  EXPECT_DOUBLE_EQ(pcie_bandwidth("", 0), 12.0);
  EXPECT_DOUBLE_EQ(pcie_bandwidth("garbage", 4), 3.0);
  // Gen6 has no short form in NCCL: "64 GT/s" reads as Gen3 (reference pitfall 4).
  EXPECT_DOUBLE_EQ(pcie_bandwidth("64 GT/s", 16), 12.0);
}

TEST(Bandwidth, NvlinkPerLaneBySm) {
  EXPECT_NEAR(18 * nvlink_lane_bandwidth(90), 370.8, 1e-9);  // H100, 18 lanes
  EXPECT_DOUBLE_EQ(nvlink_lane_bandwidth(60), 18.0);
  EXPECT_DOUBLE_EQ(nvlink_lane_bandwidth(70), 20.0);
  EXPECT_DOUBLE_EQ(nvlink_lane_bandwidth(80), 20.0);
  EXPECT_DOUBLE_EQ(nvlink_lane_bandwidth(86), 12.0);
  EXPECT_DOUBLE_EQ(nvlink_lane_bandwidth(100), 40.1);
  EXPECT_DOUBLE_EQ(nvlink_lane_bandwidth(-1), 20.0);  // unknown: NCCL's SM80 default
}

CpuInfo cpu(std::string arch, std::string vendor, int family, int model) {
  CpuInfo c;
  c.arch = std::move(arch);
  c.vendor = std::move(vendor);
  c.family = family;
  c.model = model;
  return c;
}

TEST(Bandwidth, SmpByCpuVendorAndModel) {
  EXPECT_DOUBLE_EQ(smp_bandwidth(cpu("x86_64", "GenuineIntel", 6, 143)), 22.0);   // SPR
  EXPECT_DOUBLE_EQ(smp_bandwidth(cpu("x86_64", "GenuineIntel", 6, 0xCF)), 40.0);  // EMR
  EXPECT_DOUBLE_EQ(smp_bandwidth(cpu("x86_64", "GenuineIntel", 6, 85)), 10.0);    // Skylake
  EXPECT_DOUBLE_EQ(smp_bandwidth(cpu("x86_64", "GenuineIntel", 6, 79)), 6.0);     // Broadwell
  EXPECT_DOUBLE_EQ(smp_bandwidth(cpu("x86_64", "AuthenticAMD", 25, 1)), 16.0);
  EXPECT_DOUBLE_EQ(smp_bandwidth(cpu("ppc64", "", -1, -1)), 32.0);
  EXPECT_DOUBLE_EQ(smp_bandwidth(cpu("arm64", "", -1, -1)), 6.0);
  EXPECT_DOUBLE_EQ(smp_bandwidth(cpu("x86_64", "CentaurHauls", 7, 0x5B)), 9.0);
  // NCCL does not recognise "aarch64" or an unknown x86 vendor: LOC bandwidth.
  EXPECT_DOUBLE_EQ(smp_bandwidth(cpu("aarch64", "", -1, -1)), kLocBandwidth);
  EXPECT_DOUBLE_EQ(smp_bandwidth(cpu("x86_64", "", -1, -1)), kLocBandwidth);
}

TEST(Bandwidth, NetIsSpeedOver8000WithA10GDefault) {
  EXPECT_DOUBLE_EQ(net_bandwidth(400000), 50.0);
  EXPECT_DOUBLE_EQ(net_bandwidth(100000), 12.5);
  EXPECT_DOUBLE_EQ(net_bandwidth(0), 1.25);
  EXPECT_DOUBLE_EQ(net_bandwidth(-1), 1.25);
}

TEST(PathType, NamesRoundTripExactly) {
  for (int i = 0; i <= static_cast<int>(PathType::DIS); ++i) {
    auto t = static_cast<PathType>(i);
    EXPECT_EQ(path_type_from_string(to_string(t)), t);
  }
  EXPECT_EQ(to_string(PathType::P2C), "P2C");
  EXPECT_EQ(to_string(PathType::PXN), "PXN");
  EXPECT_FALSE(path_type_from_string("pix"));
  EXPECT_FALSE(path_type_from_string(""));
  EXPECT_LT(PathType::PIX, PathType::PXB);
  EXPECT_LT(PathType::PHB, PathType::SYS);
}

TEST(Cpumap, ParsesMostSignificantWordFirst) {
  auto pus = parse_cpumap("ffffffff,00000000");
  ASSERT_TRUE(pus);
  ASSERT_EQ(pus->size(), 32u);
  EXPECT_EQ(pus->front(), 32u);
  EXPECT_EQ(pus->back(), 63u);
  // Short words as some vendor files write them ("c0c0").
  EXPECT_EQ(parse_cpumap("c0c0"), (std::vector<std::uint32_t>{6, 7, 14, 15}));
  EXPECT_FALSE(parse_cpumap(""));
  EXPECT_FALSE(parse_cpumap("ff,,ff"));
  EXPECT_FALSE(parse_cpumap("0x00ff"));
  EXPECT_FALSE(parse_cpumap("123456789"));
}

TEST(Cpumap, FormatsWithoutLeadingZeroWords) {
  EXPECT_EQ(format_cpumap({0, 1, 40}), "00000100,00000003");
  EXPECT_EQ(format_cpumap({}), "00000000");
  EXPECT_EQ(format_cpumap({31}), "80000000");
  std::vector<std::uint32_t> pus = {0, 5, 64, 200};
  EXPECT_EQ(parse_cpumap(format_cpumap(pus)), pus);
}

// A node built like the reference's section 6 example, one GPU+NIC pair per PCIe switch.
struct ExampleNode {
  NodeTopology node;
  VertexId cpu0, cpu1, sw0, sw0b, sw1, gpu0, gpu0b, gpu1, nic0, nic0b, nic1, nvs;

  VertexId add(VertexKind kind, std::string name, VertexId parent, int numa,
               std::string speed = "32.0 GT/s PCIe", int width = 16) {
    Vertex v;
    v.kind = kind;
    v.name = std::move(name);
    v.parent = parent;
    v.numa = numa;
    v.pci.link_speed = std::move(speed);
    v.pci.link_width = width;
    if (kind == VertexKind::kGpu) v.gpu.sm = 90;
    VertexId id = node.graph.add_vertex(std::move(v));
    if (parent.valid()) {
      const Vertex& c = node.graph.vertex(id);
      Link l;
      l.a = id;
      l.b = parent;
      l.kind = LinkKind::kPcie;
      l.bandwidth = pcie_bandwidth(c.pci.link_speed, c.pci.link_width);
      node.graph.add_link(l);
    }
    return id;
  }
  VertexId add_cpu(int numa, std::vector<std::uint32_t> pus) {
    Vertex v;
    v.kind = VertexKind::kCpu;
    v.numa = numa;
    v.name = "NUMA" + std::to_string(numa);
    v.cpu = cpu("x86_64", "GenuineIntel", 6, 143);
    v.cpu.pus = std::move(pus);
    return node.graph.add_vertex(std::move(v));
  }
  void nvlink(VertexId a, VertexId b, int count) {
    Link l;
    l.a = a;
    l.b = b;
    l.kind = LinkKind::kNvLink;
    l.count = count;
    l.bandwidth = count * nvlink_lane_bandwidth(90);
    node.graph.add_link(l);
  }

  explicit ExampleNode(bool with_nvswitch = true) {
    cpu0 = add_cpu(0, {0, 1, 2, 3});
    cpu1 = add_cpu(1, {4, 5, 6, 7});
    Link smp;
    smp.a = cpu0;
    smp.b = cpu1;
    smp.kind = LinkKind::kSmp;
    smp.bandwidth = smp_bandwidth(node.graph.vertex(cpu0).cpu);
    node.graph.add_link(smp);
    sw0 = add(VertexKind::kPciSwitch, "sw0", cpu0, 0);
    gpu0 = add(VertexKind::kGpu, "GPU0", sw0, 0);
    nic0 = add(VertexKind::kNic, "mlx5_0", sw0, 0);
    sw0b = add(VertexKind::kPciSwitch, "sw0b", cpu0, 0);
    gpu0b = add(VertexKind::kGpu, "GPU1", sw0b, 0);
    nic0b = add(VertexKind::kNic, "mlx5_1", sw0b, 0);
    sw1 = add(VertexKind::kPciSwitch, "sw1", cpu1, 1);
    gpu1 = add(VertexKind::kGpu, "GPU2", sw1, 1);
    nic1 = add(VertexKind::kNic, "mlx5_2", sw1, 1);
    if (with_nvswitch) {
      Vertex s;
      s.kind = VertexKind::kNvSwitch;
      s.name = "NVSwitch";
      nvs = node.graph.add_vertex(s);
      for (VertexId g : {gpu0, gpu0b, gpu1}) nvlink(g, nvs, 18);
    }
  }
};

TEST(NodePaths, ReferenceExampleMatchesNcclWithoutPxn) {
  ExampleNode ex;
  NodePaths paths(ex.node);
  Path gg = paths.path(ex.gpu0, ex.gpu1);
  EXPECT_EQ(gg.type, PathType::NVL);
  EXPECT_NEAR(gg.bandwidth, 370.8, 1e-9);
  EXPECT_EQ(gg.hops, 2);

  Path own = paths.path(ex.gpu0, ex.nic0);
  EXPECT_EQ(own.type, PathType::PIX);
  EXPECT_DOUBLE_EQ(own.bandwidth, 48.0);
  EXPECT_EQ(own.hops, 2);

  Path same_socket = paths.path(ex.gpu0, ex.nic0b);  // PXN in NCCL; PHB before post-processing
  EXPECT_EQ(same_socket.type, PathType::PHB);
  EXPECT_DOUBLE_EQ(same_socket.bandwidth, 48.0);
  EXPECT_EQ(same_socket.hops, 4);

  Path other_socket = paths.path(ex.gpu0, ex.nic1);
  EXPECT_EQ(other_socket.type, PathType::SYS);
  EXPECT_DOUBLE_EQ(other_socket.bandwidth, 22.0);

  Path cc = paths.path(ex.cpu0, ex.cpu1);
  EXPECT_EQ(cc.type, PathType::SYS);
  EXPECT_DOUBLE_EQ(cc.bandwidth, 22.0);

  Path self = paths.path(ex.gpu0, ex.gpu0);
  EXPECT_EQ(self.type, PathType::LOC);
  EXPECT_EQ(self.hops, 0);
  // Switches are not endpoints; invalid ids are DIS, not a crash.
  EXPECT_EQ(paths.path(ex.sw0, ex.gpu0).type, PathType::DIS);
  EXPECT_EQ(paths.path(VertexId(), ex.gpu0).type, PathType::DIS);
  EXPECT_EQ(paths.path(VertexId(9999), ex.gpu0).type, PathType::DIS);
}

TEST(NodePaths, SymmetricOnTheExample) {
  ExampleNode ex;
  NodePaths paths(ex.node);
  for (VertexId a : {ex.gpu0, ex.gpu1, ex.nic0, ex.nic1, ex.cpu0}) {
    for (VertexId b : {ex.gpu0, ex.gpu0b, ex.nic0b, ex.nic1, ex.cpu1}) {
      Path ab = paths.path(a, b), ba = paths.path(b, a);
      EXPECT_EQ(ab.type, ba.type);
      EXPECT_DOUBLE_EQ(ab.bandwidth, ba.bandwidth);
      EXPECT_EQ(ab.hops, ba.hops);
    }
  }
}

TEST(NodePaths, TwoSwitchesBetweenIsPxb) {
  ExampleNode ex(false);
  // GPU and NIC under two different switches below a common switch: GPU-sw-sw-sw-NIC.
  VertexId top = ex.add(VertexKind::kPciSwitch, "top", ex.cpu0, 0);
  VertexId a = ex.add(VertexKind::kPciSwitch, "a", top, 0);
  VertexId b = ex.add(VertexKind::kPciSwitch, "b", top, 0);
  VertexId g = ex.add(VertexKind::kGpu, "GPUx", a, 0);
  VertexId n = ex.add(VertexKind::kNic, "mlx5_9", b, 0, "16.0 GT/s PCIe", 16);
  NodePaths paths(ex.node);
  Path p = paths.path(g, n);
  EXPECT_EQ(p.type, PathType::PXB);
  EXPECT_DOUBLE_EQ(p.bandwidth, 24.0);  // the NIC's Gen4 link is the bottleneck
  EXPECT_EQ(p.hops, 4);
}

TEST(NodePaths, NvbOnlyThroughAnotherGpuOverNvlink) {
  ExampleNode ex(false);
  // GPU0 - GPU1 - GPU2 chained by NVLink, no NVSwitch: GPU0 -> GPU2 relays through GPU1.
  ex.nvlink(ex.gpu0, ex.gpu0b, 2);
  ex.nvlink(ex.gpu0b, ex.gpu1, 4);
  NodePaths paths(ex.node);
  Path direct = paths.path(ex.gpu0, ex.gpu0b);
  EXPECT_EQ(direct.type, PathType::NVL);
  EXPECT_EQ(direct.hops, 1);
  Path relay = paths.path(ex.gpu0, ex.gpu1);
  EXPECT_EQ(relay.type, PathType::NVB);
  EXPECT_NEAR(relay.bandwidth, 2 * 20.6, 1e-9);
  EXPECT_EQ(relay.hops, 2);
  // A NIC is never reached through a GPU: GPU0's NIC on socket 1 stays SYS over PCIe, not
  // NVLink to GPU2 and down its switch.
  EXPECT_EQ(paths.path(ex.gpu0, ex.nic1).type, PathType::SYS);
}

TEST(NodePaths, GpuWithoutPcieParentReachesNothingThroughItsPeer) {
  ExampleNode ex(false);
  Vertex lone;
  lone.kind = VertexKind::kGpu;
  lone.name = "lone";
  VertexId g = ex.node.graph.add_vertex(lone);
  ex.nvlink(g, ex.gpu0, 6);
  NodePaths paths(ex.node);
  EXPECT_EQ(paths.path(g, ex.gpu0).type, PathType::NVL);
  Path to_nic = paths.path(g, ex.nic0);
  EXPECT_EQ(to_nic.type, PathType::DIS);
  EXPECT_EQ(to_nic.bandwidth, 0);
}

TEST(NodePaths, BetterTypeWinsOverHigherBandwidth) {
  ExampleNode ex(false);
  // A thin NVLink between GPU0 and GPU1 beats the wide PCIe route through the CPU.
  ex.nvlink(ex.gpu0, ex.gpu0b, 1);
  NodePaths paths(ex.node);
  Path p = paths.path(ex.gpu0, ex.gpu0b);
  EXPECT_EQ(p.type, PathType::NVL);
  EXPECT_NEAR(p.bandwidth, 20.6, 1e-9);
}

TEST(GpuLocality, NearestNicClassNumaAndCpus) {
  ExampleNode ex;
  std::vector<GpuLocality> locs = gpu_locality(ex.node);
  ASSERT_EQ(locs.size(), 3u);
  EXPECT_EQ(locs[0].gpu, ex.gpu0);
  EXPECT_EQ(locs[0].nearest_nics, std::vector<VertexId>{ex.nic0});
  EXPECT_EQ(locs[0].path_to_nic, PathType::PIX);
  EXPECT_DOUBLE_EQ(locs[0].bandwidth_to_nic, 48.0);
  EXPECT_EQ(locs[0].numa, 0);
  EXPECT_EQ(locs[0].local_pus, (std::vector<std::uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(locs[2].nearest_nics, std::vector<VertexId>{ex.nic1});
  EXPECT_EQ(locs[2].numa, 1);
  EXPECT_EQ(locs[2].local_pus, (std::vector<std::uint32_t>{4, 5, 6, 7}));
}

TEST(GpuLocality, TiesKeepEveryCandidateAndAffinityFillsCpus) {
  ExampleNode ex(false);
  VertexId second = ex.add(VertexKind::kNic, "mlx5_0b", ex.sw0, 0);
  ex.node.graph.vertex(ex.cpu0).cpu.pus.clear();
  ex.node.graph.vertex(ex.cpu0).cpu.affinity = "00000100,00000003";
  std::vector<GpuLocality> locs = gpu_locality(ex.node);
  ASSERT_EQ(locs.size(), 3u);
  EXPECT_EQ(locs[0].nearest_nics, (std::vector<VertexId>{ex.nic0, second}));
  EXPECT_EQ(locs[0].local_pus, (std::vector<std::uint32_t>{0, 1, 40}));
}

TEST(GpuLocality, NoNicIsDis) {
  NodeTopology only_gpus;
  Vertex c;
  c.kind = VertexKind::kCpu;
  c.numa = 3;
  VertexId cpu_id = only_gpus.graph.add_vertex(c);
  Vertex g;
  g.kind = VertexKind::kGpu;
  g.parent = cpu_id;
  only_gpus.graph.add_vertex(g);
  std::vector<GpuLocality> locs = gpu_locality(only_gpus);
  ASSERT_EQ(locs.size(), 1u);
  EXPECT_TRUE(locs[0].nearest_nics.empty());
  EXPECT_EQ(locs[0].path_to_nic, PathType::DIS);
  EXPECT_EQ(locs[0].numa, 3);
}

}  // namespace
}  // namespace topoaware::topology
