// enrich_with_nvml() through the NvmlApi seam with fakes of a DGX H100 and a GB200 NVL72 tray,
// and the real dlopen on this machine.
#include "topoaware/topology/nvml_source.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "fake_nvml.h"
#include "test_support.h"
#include "topoaware/topology/paths.h"
#include "topoaware/topology/sysfs_source.h"

namespace topoaware::topology {
namespace {

NodeTopology dgx() { return load_sysfs_node(test::fixture("sysfs/dgx-h100")); }

bool has_note(const NodeTopology& n, std::string_view needle) {
  return std::any_of(n.notes.begin(), n.notes.end(),
                     [&](const std::string& s) { return s.find(needle) != std::string::npos; });
}

std::vector<const Link*> nvlinks(const NodeTopology& n) {
  std::vector<const Link*> out;
  for (const Link& l : n.graph.links()) {
    if (l.kind == LinkKind::kNvLink) out.push_back(&l);
  }
  return out;
}

TEST(Nvml, DgxH100GpusGetIndexSmUuidModelAndEighteenLanesIntoOneNvSwitch) {
  NodeTopology n = dgx();
  test::FakeNvml fake = test::FakeNvml::dgx_h100();
  NvmlApi api = fake.api();
  enrich_with_nvml(n, api);
  EXPECT_EQ(fake.init_calls, 1);
  EXPECT_EQ(fake.shutdown_calls, 1);

  auto switches = n.graph.of_kind(VertexKind::kNvSwitch);
  ASSERT_EQ(switches.size(), 1u);  // four NVSwitch chips merge into one vertex, as in NCCL
  auto links = nvlinks(n);
  ASSERT_EQ(links.size(), 8u);
  for (const Link* l : links) {
    EXPECT_EQ(l->count, 18);
    EXPECT_EQ(l->nvlink_tclass, "0x068000");
    EXPECT_NEAR(l->bandwidth, 18 * 20.6, 1e-9);
    EXPECT_TRUE(l->a == switches[0] || l->b == switches[0]);
  }
  const Vertex& g3 = n.graph.vertex(n.graph.find_busid("0000:61:00.0"));
  EXPECT_EQ(g3.name, "GPU3");
  EXPECT_EQ(g3.gpu.dev, 3);
  EXPECT_EQ(g3.gpu.sm, 90);
  EXPECT_EQ(g3.gpu.model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(g3.gpu.uuid, "GPU-00000003-h100-fake");
  EXPECT_TRUE(g3.gpu.nvlink_cluster.empty());  // a single-node NVLink domain
  EXPECT_EQ(g3.gpu.nvlink_clique, -1);

  // GPUs on different sockets talk over NVLink (NVL), not through the CPUs (SYS).
  NodePaths paths(n);
  Path p = paths.path(n.graph.find_busid("0000:1b:00.0"), n.graph.find_busid("0000:df:00.0"));
  EXPECT_EQ(to_string(p.type), "NVL");
}

TEST(Nvml, InactiveLanesAreNotCounted) {
  NodeTopology n = dgx();
  test::FakeNvml fake = test::FakeNvml::dgx_h100();
  fake.gpus[2].links[0].active = false;
  fake.gpus[2].links[17].active = false;
  NvmlApi api = fake.api();
  enrich_with_nvml(n, api);
  VertexId g2 = n.graph.find_busid("0000:52:00.0");
  int lanes = 0;
  for (LinkId l : n.graph.links_of(g2)) {
    if (n.graph.link(l).kind == LinkKind::kNvLink) lanes += n.graph.link(l).count;
  }
  EXPECT_EQ(lanes, 16);
}

// An HGX A100 4-GPU board: no NVSwitch, every GPU pair joined by 4 lanes. Older drivers lack
// nvmlDeviceGetNvLinkRemoteDeviceType, so the peer is recognised by its bus id.
TEST(Nvml, DirectGpuPeersAreOneLinkPerPairWithOrWithoutRemoteType) {
  for (bool remote_type : {true, false}) {
    NodeTopology n = dgx();
    test::FakeNvml fake;
    const char* buses[] = {"00000000:1B:00.0", "00000000:43:00.0", "00000000:52:00.0",
                           "00000000:61:00.0"};
    for (int i = 0; i < 4; ++i) {
      test::FakeGpu g;
      g.busid = buses[i];
      g.name = "NVIDIA A100-SXM4-40GB";
      g.major = 8;
      g.minor = 0;
      for (int j = 0; j < 4; ++j) {
        if (j == i) continue;
        for (int lane = 0; lane < 4; ++lane) {
          g.links.push_back({buses[j], nvml::kNvLinkDeviceGpu});
        }
      }
      fake.gpus.push_back(g);
    }
    fake.has_remote_type = remote_type;
    NvmlApi api = fake.api();
    enrich_with_nvml(n, api);
    auto links = nvlinks(n);
    ASSERT_EQ(links.size(), 6u) << "remote_type=" << remote_type;
    for (const Link* l : links) {
      EXPECT_EQ(l->count, 4);
      EXPECT_EQ(l->nvlink_tclass, "0x030200");
      EXPECT_NEAR(l->bandwidth, 4 * 20.0, 1e-9);
      EXPECT_EQ(n.graph.vertex(l->a).kind, VertexKind::kGpu);
      EXPECT_EQ(n.graph.vertex(l->b).kind, VertexKind::kGpu);
    }
    EXPECT_TRUE(n.graph.of_kind(VertexKind::kNvSwitch).empty());
    // GPUs 4-7 are not in this NVML view: they keep no NVLink and no NVML index.
    EXPECT_EQ(n.graph.vertex(n.graph.find_busid("0000:9d:00.0")).gpu.dev, -1);
  }
}

// One GB200 NVL72 compute tray: Grace CPUs, 4 GPUs whose lanes leave the tray to the rack's
// NVSwitches (bus ids invisible to the host), and the rack's fabric cluster UUID and clique.
TEST(Nvml, Nvl72TrayCarriesFabricClusterAndClique) {
  NodeTopology n;
  n.hostname = "gb200-tray";
  VertexId cpus[2];
  for (int s = 0; s < 2; ++s) {
    Vertex c;
    c.kind = VertexKind::kCpu;
    c.name = "NUMA" + std::to_string(s);
    c.numa = s;
    c.cpu.arch = "arm64";
    cpus[s] = n.graph.add_vertex(c);
  }
  const char* busids[] = {"0008:01:00.0", "0009:01:00.0", "0018:01:00.0", "0019:01:00.0"};
  for (int i = 0; i < 4; ++i) {
    Vertex g;
    g.kind = VertexKind::kGpu;
    g.busid = busids[i];
    g.numa = i / 2;
    g.parent = cpus[i / 2];
    n.graph.add_vertex(g);
  }
  test::FakeNvml fake = test::FakeNvml::nvl72_tray(7);
  NvmlApi api = fake.api();
  enrich_with_nvml(n, api);
  for (VertexId g : n.gpus()) {
    const GpuInfo& info = n.graph.vertex(g).gpu;
    EXPECT_EQ(info.sm, 100);
    EXPECT_EQ(info.nvlink_cluster, "a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf");
    EXPECT_EQ(info.nvlink_clique, 7);
  }
  auto links = nvlinks(n);
  ASSERT_EQ(links.size(), 4u);
  for (const Link* l : links) EXPECT_NEAR(l->bandwidth, 18 * 40.1, 1e-9);
  EXPECT_TRUE(n.notes.empty()) << n.notes.front();
}

TEST(Nvml, LegacyFabricCallIsUsedWhenTheVersionedOneIsMissing) {
  NodeTopology n = dgx();
  test::FakeNvml fake = test::FakeNvml::dgx_h100();
  fake.has_fabric_v = false;
  NvmlApi api = fake.api();
  // A fake legacy call reporting a completed registration in clique 3.
  api.gpu_fabric_info = [](nvml::Device, nvml::GpuFabricInfo* f) {
    *f = {};
    f->cluster_uuid[0] = 0x42;
    f->clique_id = 3;
    f->state = nvml::kFabricStateCompleted;
    f->status = nvml::kSuccess;
    return nvml::kSuccess;
  };
  enrich_with_nvml(n, api);
  const GpuInfo& g0 = n.graph.vertex(n.graph.find_busid("0000:1b:00.0")).gpu;
  EXPECT_EQ(g0.nvlink_cluster, "42000000-0000-0000-0000-000000000000");
  EXPECT_EQ(g0.nvlink_clique, 3);
}

TEST(Nvml, InitFailureLeavesTheModelAloneWithANote) {
  NodeTopology n = dgx();
  std::size_t links_before = n.graph.link_count();
  test::FakeNvml fake = test::FakeNvml::dgx_h100();
  fake.init_result = 9;  // NVML_ERROR_DRIVER_NOT_LOADED
  NvmlApi api = fake.api();
  enrich_with_nvml(n, api);
  EXPECT_EQ(n.graph.link_count(), links_before);
  EXPECT_EQ(fake.shutdown_calls, 0);
  EXPECT_TRUE(has_note(n, "nvmlInit failed: error 9 (fake NVML error)"));
  EXPECT_EQ(n.graph.vertex(n.gpus()[0]).gpu.dev, -1);
}

TEST(Nvml, GpuMissingFromTheModelIsSkippedWithANote) {
  NodeTopology n = dgx();
  test::FakeNvml fake = test::FakeNvml::dgx_h100();
  fake.gpus[5].busid = "00000000:EE:00.0";
  NvmlApi api = fake.api();
  enrich_with_nvml(n, api);
  EXPECT_TRUE(has_note(n, "GPU 5 (0000:ee:00.0) is not in the PCI model"));
  EXPECT_EQ(nvlinks(n).size(), 7u);
}

TEST(Nvml, EnrichingTwiceDoesNotDuplicateLinks) {
  NodeTopology n = dgx();
  test::FakeNvml fake = test::FakeNvml::dgx_h100();
  NvmlApi api = fake.api();
  enrich_with_nvml(n, api);
  enrich_with_nvml(n, api);
  EXPECT_EQ(nvlinks(n).size(), 8u);
  EXPECT_EQ(n.graph.of_kind(VertexKind::kNvSwitch).size(), 1u);
}

TEST(Nvml, AnNvSwitchFromAnotherSourceIsReused) {
  NodeTopology n = dgx();
  Vertex s;
  s.kind = VertexKind::kNvSwitch;
  s.name = "NVSwitch";
  VertexId existing = n.graph.add_vertex(s);
  test::FakeNvml fake = test::FakeNvml::dgx_h100();
  NvmlApi api = fake.api();
  enrich_with_nvml(n, api);
  EXPECT_EQ(n.graph.of_kind(VertexKind::kNvSwitch), std::vector<VertexId>{existing});
  EXPECT_EQ(n.graph.links_of(existing).size(), 8u);
}

TEST(Nvml, RealLibraryLoadsOrSaysWhyNot) {
  std::string why;
  const NvmlApi* api = load_nvml(&why);
  if (api != nullptr) GTEST_SKIP() << "libnvidia-ml.so.1 is present here; absence not testable";
  EXPECT_NE(why.find("libnvidia-ml.so.1"), std::string::npos) << why;
  EXPECT_EQ(load_nvml(), nullptr);  // loaded once: the same answer
}

}  // namespace
}  // namespace topoaware::topology
