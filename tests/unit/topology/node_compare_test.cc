// compare_nodes() and load_nccl_graphs() on real NCCL dumps (NCCL_TOPO_DUMP_FILE and
// NCCL_GRAPH_DUMP_FILE output of real machines): what `topo-aware nccl-check` reports on a GPU
// machine, checked without one.
#include "topoaware/topology/node_compare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "fake_nvml.h"
#include "fake_verbs.h"
#include "test_support.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/nccl_graph.h"
#include "topoaware/topology/node_io.h"
#include "topoaware/topology/sources.h"

namespace topoaware::topology {
namespace {

namespace fs = std::filesystem;
using Severity = NodeDifference::Severity;

// Dumps written by NCCL itself (host_hash, rank and net dev attributes are NCCL's own), checked
// into tests/fixtures/nccl-topo.
const char* const kDumps[] = {
    "panlichen-8xRTX3090-plx-cx6-fdr-topo.xml",
    "sugarlxn-4xRTX4090-epyc-8numa-virtualnics-topo.xml",
    "modal-hgx-b200-vm-8gpu-handedited-p2p-nvlink-topo.xml",
};
// The same kind, only in ../shared (no licence to copy them here).
const char* const kSharedDumps[] = {
    "rwkvinllama-2xRTX4090-cx4-vpi-topo.xml",
    "yccl-8xL20-pcie-topo.xml",
    "yccl-4xRTXA6000-dell-bcm-vethnics-topo.xml",
    "cuiboyuan-8xV100-sxm2-hybridcubemesh-vm-numa-1-topo.xml",
};

NodeTopology dump(const std::string& name) {
  return load_nccl_xml(test::fixture("nccl-topo/" + name));
}

// The XML we would write for `n`, read back as NCCL would be handed it.
NodeTopology written(const NodeTopology& n, const std::string& tag) {
  fs::path p = fs::path(::testing::TempDir()) / ("node-compare-" + tag + ".xml");
  std::ofstream(p) << node_to_nccl_xml(n);
  NodeTopology back = load_nccl_xml(p.string());
  fs::remove(p);
  return back;
}

bool has(const NodeComparison& c, Severity s, std::string_view subject,
         std::string_view attribute) {
  return std::any_of(c.differences.begin(), c.differences.end(), [&](const NodeDifference& d) {
    return d.severity == s && d.subject.find(subject) != std::string::npos &&
           d.attribute == attribute;
  });
}

std::string text(const NodeComparison& c) { return format_comparison(c, "ours", "NCCL"); }

TEST(NodeCompare, EveryRealDumpAgreesWithItselfDeviceForDevice) {
  for (const char* name : kDumps) {
    SCOPED_TRACE(name);
    NodeTopology n = dump(name);
    NodeComparison c = compare_nodes(n, n);
    EXPECT_TRUE(c.differences.empty()) << text(c);
    EXPECT_EQ(c.gpus_matched, static_cast<int>(n.gpus().size()));
    EXPECT_GT(c.nics_matched, 0);
    const int g = c.gpus_matched;
    // Every ordered GPU pair and every GPU-NIC pair.
    EXPECT_EQ(c.paths_compared, g * (g - 1) + g * c.nics_matched);
  }
}

// What nccl-check compares on a GPU machine: NCCL's dump against the XML we would hand it.
// Reading a dump and writing it in NCCL's dialect must keep every fact NCCL's search uses.
TEST(NodeCompare, TheXmlWeWriteFromADumpGivesNcclTheSameMachine) {
  int checked = 0;
  auto check = [&](const std::string& path, const std::string& tag) {
    SCOPED_TRACE(path);
    NodeTopology nccl = load_nccl_xml(path);
    NodeComparison c = compare_nodes(written(nccl, tag), nccl);
    EXPECT_TRUE(c.agrees()) << text(c);
    EXPECT_EQ(c.count(Severity::kWarning), 0) << text(c);
    EXPECT_EQ(c.gpus_matched, static_cast<int>(nccl.gpus().size()));
    ++checked;
  };
  for (const char* name : kDumps) check(test::fixture(std::string("nccl-topo/") + name), name);
  for (const char* name : kSharedDumps) {
    std::string p = test::shared_fixture(std::string("nccl-topo/") + name);
    if (!p.empty()) check(p, name);
  }
  EXPECT_GE(checked, 3);
}

// panlichen: 8 RTX 3090 behind two PLX switches and one ConnectX-6 at FDR (56 Gb/s). Our model
// believing the port runs at 100 Gb/s is a different machine for NCCL: the NIC speed, and every
// GPU's path to it (capped by the port), disagree.
TEST(NodeCompare, AWrongNicSpeedIsAMismatchOnTheNicAndOnEveryGpuPathToIt) {
  NodeTopology nccl = dump(kDumps[0]);
  NodeTopology ours = nccl;
  ASSERT_EQ(ours.nics().size(), 1u);
  Vertex& nic = ours.graph.vertex(ours.nics()[0]);
  ASSERT_DOUBLE_EQ(nic.nic.ports.at(0).speed_mbps, 56000);
  nic.nic.ports[0].speed_mbps = 100000;
  NodeComparison c = compare_nodes(ours, nccl);
  EXPECT_FALSE(c.agrees());
  EXPECT_TRUE(has(c, Severity::kMismatch, "NIC mlx5_0", "speed Mb/s")) << text(c);
  EXPECT_NE(text(c).find("speed Mb/s: ours 1e+05, NCCL 5.6e+04"), std::string::npos) << text(c);
}

TEST(NodeCompare, AGpuNcclSeesAndWeDoNotIsAMismatchTheOtherWayAWarning) {
  NodeTopology full = dump(kDumps[0]);
  // Ours without GPU 3: drop its bus id, so it matches nothing.
  NodeTopology partial = full;
  VertexId g3 = partial.gpus().at(3);
  const std::string busid = partial.graph.vertex(g3).busid;
  partial.graph.vertex(g3).kind = VertexKind::kPciDevice;
  NodeComparison missing = compare_nodes(partial, full);
  EXPECT_FALSE(missing.agrees());
  EXPECT_TRUE(has(missing, Severity::kMismatch, busid, "present")) << text(missing);
  EXPECT_EQ(missing.gpus_matched, 7);
  // The dump of a communicator on 7 of the 8 GPUs (CUDA_VISIBLE_DEVICES): ours has one more.
  NodeComparison extra = compare_nodes(full, partial);
  EXPECT_TRUE(extra.agrees()) << text(extra);
  EXPECT_TRUE(has(extra, Severity::kWarning, busid, "present")) << text(extra);
}

TEST(NodeCompare, WrongSmNumaAndNvmlIndexAreEachNamed) {
  NodeTopology nccl = dump(kDumps[0]);
  NodeTopology ours = nccl;
  auto gpus = ours.gpus();
  ours.graph.vertex(gpus[0]).gpu.sm = 80;
  ours.graph.vertex(gpus[1]).numa = 1;  // GPU1 sits under socket 0 in the dump
  ours.graph.vertex(gpus[2]).gpu.dev = 7;
  NodeComparison c = compare_nodes(ours, nccl);
  EXPECT_TRUE(has(c, Severity::kMismatch, "GPU0 ", "sm")) << text(c);
  EXPECT_TRUE(has(c, Severity::kMismatch, "GPU1 ", "NUMA node")) << text(c);
  EXPECT_TRUE(has(c, Severity::kMismatch, "0000:11:00.0", "NVML index (dev)")) << text(c);
  EXPECT_EQ(c.count(Severity::kMismatch), 3) << text(c);
}

// modal B200: 8 GPUs with NVLink to each peer. Half of GPU0's lanes missing in our model (a
// link down, or NVML not read) changes its lane count and bandwidth, and its paths to peers.
TEST(NodeCompare, MissingNvlinkLanesShowInLanesBandwidthAndPaths) {
  NodeTopology nccl = dump(kDumps[2]);
  NodeTopology ours = nccl;
  VertexId g0 = ours.gpus().at(0);
  int halved = 0;
  for (LinkId l : ours.graph.links_of(g0)) {
    Link& link = ours.graph.link(l);
    if (link.kind != LinkKind::kNvLink || halved > 0) continue;
    link.count /= 2;
    link.bandwidth /= 2;
    ++halved;
  }
  ASSERT_EQ(halved, 1);
  NodeComparison c = compare_nodes(ours, nccl);
  EXPECT_TRUE(has(c, Severity::kMismatch, "GPU0 ", "NVLink lanes")) << text(c);
  EXPECT_TRUE(has(c, Severity::kMismatch, "GPU0 ", "NVLink GB/s")) << text(c);
  EXPECT_TRUE(has(c, Severity::kMismatch, "path GPU0 ", "path")) << text(c);
}

// sugarlxn: no RDMA NIC; NCCL's dump lists its socket interfaces (an X550 port, and tunnels and
// docker bridges under every CPU). They are matched by name like HCAs.
TEST(NodeCompare, SocketNicsAreMatchedByName) {
  NodeTopology nccl = dump(kDumps[1]);
  NodeComparison c = compare_nodes(nccl, nccl);
  EXPECT_GE(c.nics_matched, 2) << text(c);
  NodeTopology ours = nccl;
  for (VertexId v : ours.nics()) {
    for (auto& p : ours.graph.vertex(v).nic.ports) p.name += "-renamed";
  }
  NodeComparison renamed = compare_nodes(ours, nccl);
  EXPECT_EQ(renamed.nics_matched, 0);
  EXPECT_FALSE(renamed.agrees());
}

// The live view of the fake DGX H100 (sysfs tree, NVML and verbs fakes: what nccl-check
// discovers on such a node) against the XML we would write for it, read back.
TEST(NodeCompare, LiveDgxH100ViewAndTheXmlWeWriteForItAgree) {
  test::FakeNvml nvml = test::FakeNvml::dgx_h100();
  NvmlApi nvml_api = nvml.api();
  test::FakeVerbs verbs = test::FakeVerbs::dgx_h100();
  VerbsApi verbs_api = verbs.api();
  LiveOptions o;
  o.fsroot = test::fixture("sysfs/dgx-h100");
  o.use_hwloc = false;
  o.nvml = &nvml_api;
  o.verbs = &verbs_api;
  NodeTopology live = discover_live(o);
  NodeComparison c = compare_nodes(live, written(live, "dgx"));
  EXPECT_TRUE(c.agrees()) << text(c);
  EXPECT_EQ(c.gpus_matched, 8);
  EXPECT_GE(c.nics_matched, 8);
}

TEST(NodeCompare, FormatListsMismatchesFirstAndCapsTheList) {
  NodeTopology nccl = dump(kDumps[0]);
  NodeTopology ours = nccl;
  ours.graph.vertex(ours.gpus()[0]).gpu.sm = 80;
  VertexId g3 = ours.gpus()[3];
  ours.graph.vertex(g3).kind = VertexKind::kPciDevice;
  NodeComparison c = compare_nodes(nccl, ours);  // NCCL's side lacks GPU3: a warning
  std::string all = format_comparison(c, "live", "NCCL dump");
  EXPECT_EQ(all.rfind("live vs NCCL dump: DIFFER", 0), 0u) << all;
  const std::size_t list = all.find('\n');  // past the summary line, which counts both
  EXPECT_LT(all.find("MISMATCH", list), all.find("warning", list)) << all;
  std::string capped = format_comparison(c, "live", "NCCL dump", 1);
  EXPECT_NE(capped.find("... "), std::string::npos) << capped;
}

// --- NCCL_GRAPH_DUMP_FILE ------------------------------------------------------------------

TEST(NcclGraph, AzureNcv4GraphFileHasRingTreeAndCollnetChannels) {
  auto graphs = load_nccl_graphs(test::fixture("nccl-topo/azure-ncv4-a100-4gpu-graph.xml"));
  ASSERT_EQ(graphs.size(), 3u);
  EXPECT_EQ(nccl_graph_name(graphs[0].id), "ring");
  EXPECT_EQ(graphs[0].pattern, 4);
  EXPECT_EQ(graphs[0].nchannels, 2);
  EXPECT_DOUBLE_EQ(graphs[0].speed_intra, 12);
  EXPECT_EQ(graphs[0].type_intra, "SYS");
  ASSERT_FALSE(graphs[0].channels.empty());
  EXPECT_EQ(graphs[0].channels[0].front(), "gpu 0");
}

TEST(NcclGraph, RealDumpReadsHexDevIndexesAsNcclDoes) {
  TOPOAWARE_SHARED_OR_SKIP(p, "nccl-topo/yccl-4xRTXA6000-pcie-nccl-graph-dump.xml");
  auto graphs = load_nccl_graphs(p);
  ASSERT_FALSE(graphs.empty());
  ASSERT_FALSE(graphs[0].channels.empty());
  EXPECT_EQ(graphs[0].channels[0][1], "gpu 1");  // written dev="0x1"
}

TEST(NcclGraph, ATopologyFileIsRefusedWithItsRootElement) {
  try {
    load_nccl_graphs(test::fixture("nccl-topo/dgx-h100-topo.xml"));
    FAIL() << "accepted a topology file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected <graphs>"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace topoaware::topology
