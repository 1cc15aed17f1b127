// Node exporters on models from every source: NCCL XML written from hwloc captures obeys NCCL's
// rules and round-trips, JSON is complete and honest about unknowns, DOT is valid Graphviz.
#include "topoaware/topology/node_io.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <nlohmann/json.hpp>

#include "nccl_xml_lint.h"
#include "test_support.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/sources.h"

namespace topoaware::topology {
namespace {

namespace fs = std::filesystem;

std::string write_temp(const std::string& name, const std::string& content) {
  std::string path =
      (fs::temp_directory_path() / ("topoaware-nodeio-" + std::to_string(::getpid()) + "-" + name))
          .string();
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

// hwloc captures of real machines, through H1's loader: what we write for NCCL has no rule
// violation and is a fixed point of read-then-write.
TEST(NodeNcclXml, HwlocCapturesExportCleanlyAndRoundTrip) {
  TOPOAWARE_SHARED_OR_SKIP(dir, "hwloc");
  int checked = 0, refused = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    SCOPED_TRACE(name);
    NodeTopology node;
    try {
      node = load_node_file(entry.path().string());
    } catch (const Error& e) {
      // Refusals of hwloc files are the hwloc source's to test; here we need a model.
      continue;
    }
    std::string out1;
    try {
      out1 = node_to_nccl_xml(node);
    } catch (const Error& e) {
      // hwloc's own test machine "conan" lists 0000:04:00.0 twice (a SATA controller and an
      // HCA in different domains): refused rather than written ambiguous for NCCL.
      EXPECT_NE(std::string(e.what()).find("share this bus id"), std::string::npos) << e.what();
      ++refused;
      continue;
    }
    test::NcclXmlLint lint;
    for (const test::LintIssue& e : test::NcclXmlLint::errors(lint.check(out1))) {
      ADD_FAILURE() << "line " << e.line << ": " << e.message << " [" << e.key << "]";
    }
    std::string tmp = write_temp("hwloc.xml", out1);
    NodeTopology again = load_nccl_xml(tmp);
    fs::remove(tmp);
    EXPECT_EQ(node_to_nccl_xml(again), out1);
    // hwloc calls a function a GPU only with a CUDA/NVML device; NCCL XML also by class, so
    // reading back may find more GPUs (a Tesla without driver), never fewer.
    for (VertexId g : node.gpus()) {
      VertexId back = again.graph.find_busid(node.graph.vertex(g).busid);
      ASSERT_TRUE(back.valid());
      EXPECT_EQ(again.graph.vertex(back).kind, VertexKind::kGpu);
    }
    ++checked;
  }
  EXPECT_GE(checked, 8);
  EXPECT_LE(refused, 2);
}

TEST(NodeNcclXml, Dgx2hSixteenGpusAllReachTheNvswitch) {
  TOPOAWARE_SHARED_OR_SKIP(path, "hwloc/hwloc-v2fmt-nvidia-dgx2h-16xV100-nvml-nvlinkbw.xml");
  NodeTopology node = load_node_file(path);
  std::string xml = node_to_nccl_xml(node);
  std::size_t gpus = 0, nvs = 0, pos = 0;
  while ((pos = xml.find("<gpu ", pos)) != std::string::npos) ++gpus, ++pos;
  pos = 0;
  while ((pos = xml.find("tclass=\"0x068000\"", pos)) != std::string::npos) ++nvs, ++pos;
  EXPECT_EQ(gpus, 16u);
  EXPECT_EQ(nvs, 16u);
}

TEST(NodeNcclXml, RefusesWhatNcclCannotKey) {
  NodeTopology n;
  Vertex cpu;
  cpu.kind = VertexKind::kCpu;
  cpu.numa = 0;
  VertexId c = n.graph.add_vertex(cpu);
  Vertex gpu;
  gpu.kind = VertexKind::kGpu;
  gpu.name = "GPU0";
  gpu.parent = c;
  VertexId g = n.graph.add_vertex(gpu);
  EXPECT_THROW(node_to_nccl_xml(n), Error) << "a GPU without bus id";
  n.graph.vertex(g).busid = "0000:01:00.0";
  n.graph.vertex(c).cpu.vendor = "Genuine\"Intel";
  try {
    node_to_nccl_xml(n);
    FAIL() << "a quote inside a value would break NCCL's parser";
  } catch (const Error& e) {
    EXPECT_EQ(e.context(), "<cpu numaid=\"0\">");  // the element, and in the message its attribute
    EXPECT_NE(std::string(e.what()).find("attribute vendor=\"Genuine\"Intel\""), std::string::npos)
        << e.what();
  }
  n.graph.vertex(c).cpu.vendor = "GenuineIntel";
  n.graph.vertex(g).parent = VertexId();
  EXPECT_THROW(node_to_nccl_xml(n), Error) << "a GPU under no CPU";
}

TEST(NodeJson, CompleteAndHonestAboutUnknowns) {
  NodeTopology n = load_nccl_xml(test::fixture("nccl-topo/aws-g5.48xlarge-a10g-8gpu-topo.xml"));
  nlohmann::json j = nlohmann::json::parse(node_to_json(n));
  EXPECT_EQ(j["vertices"].size(), n.graph.vertex_count());
  EXPECT_EQ(j["links"].size(), n.graph.link_count());
  EXPECT_TRUE(j["gpus"].empty());
  EXPECT_TRUE(j["nics"].empty());
  ASSERT_EQ(j["cpus"].size(), 2u);
  EXPECT_TRUE(j["cpus"][0]["affinity"].is_null());
  EXPECT_TRUE(j["cpus"][0]["family"].is_null()) << "unknown is null, not -1";
  EXPECT_EQ(j["source"],
            "nccl-xml:" + test::fixture("nccl-topo/aws-g5.48xlarge-a10g-8gpu-topo.xml"));
  // Every link's ends are vertex ids of this document.
  for (const auto& l : j["links"]) {
    EXPECT_LT(l["a"].get<std::size_t>(), j["vertices"].size());
    EXPECT_LT(l["b"].get<std::size_t>(), j["vertices"].size());
  }
}

TEST(NodeJson, GpuNvlinkPeersAndNicPorts) {
  NodeTopology n = load_nccl_xml(
      test::fixture("nccl-topo/modal-hgx-b200-vm-8gpu-handedited-p2p-nvlink-topo.xml"));
  nlohmann::json j = nlohmann::json::parse(node_to_json(n));
  ASSERT_EQ(j["gpus"].size(), 8u);
  for (const auto& g : j["gpus"]) {
    EXPECT_EQ(g["sm"], 100);
    ASSERT_EQ(g["nvlinks"].size(), 1u);
    EXPECT_EQ(g["nvlinks"][0]["peer_kind"], "nvswitch");
    EXPECT_EQ(g["nvlinks"][0]["count"], 126);
    EXPECT_FALSE(g["nic"].is_null());
  }
  bool found = false;
  for (const auto& nic : j["nics"]) {
    if (nic.value("name", "") != "mlx5_5") continue;
    found = true;
    EXPECT_DOUBLE_EQ(nic["speed_gbps"].get<double>(), 400.0);
    EXPECT_EQ(nic["ports"].size(), 4u);
  }
  EXPECT_TRUE(found);
}

TEST(NodeDot, IsValidGraphviz) {
  if (std::system("command -v dot >/dev/null 2>&1") != 0) GTEST_SKIP() << "graphviz dot absent";
  for (const char* f : {"nccl-topo/azure-ndv4-a100-8gpu-8ib-topo.xml",
                        "nccl-topo/modal-hgx-b200-vm-8gpu-handedited-p2p-nvlink-topo.xml",
                        "nccl-topo/sugarlxn-4xRTX4090-epyc-8numa-virtualnics-topo.xml"}) {
    SCOPED_TRACE(f);
    NodeTopology n = load_nccl_xml(test::fixture(f));
    std::string dot = node_to_dot(n);
    EXPECT_EQ(dot.rfind("graph node_topology {", 0), 0u);
    for (VertexId gpu : n.gpus()) {
      EXPECT_NE(dot.find(n.graph.vertex(gpu).busid), std::string::npos);
    }
    std::string path = write_temp("node.dot", dot);
    int status = std::system(("dot -Tsvg '" + path + "' -o /dev/null 2>/dev/null").c_str());
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << dot;
    fs::remove(path);
  }
}

// hwloc's "conan" export lists 0000:04:00.0 twice (a SATA controller and a ConnectX-4). Only
// the ConnectX-4 is on a GPU/NIC path, so the NCCL XML holds it once and is unambiguous.
TEST(NodeNcclXml, ConanWritesItsHcaOnceWithoutTheChipsetFunctionOfTheSameBusid) {
  std::string path = test::fixture("hwloc/hwloc-v2fmt-2s-xeon-e5-2650-cuda-mlx5-ib-wholeio.xml");
  NodeTopology n = load_hwloc_xml(path);
  std::size_t functions = 0;
  for (const Vertex& v : n.graph.vertices()) functions += v.busid == "0000:04:00.0" ? 1 : 0;
  ASSERT_EQ(functions, 2u);
  std::string xml = node_to_nccl_xml(n);
  std::size_t first = xml.find("busid=\"0000:04:00.0\"");
  ASSERT_NE(first, std::string::npos);
  EXPECT_EQ(xml.find("busid=\"0000:04:00.0\"", first + 1), std::string::npos);
  EXPECT_NE(xml.find("busid=\"0000:04:00.0\" class=\"0x020700\" vendor=\"0x15b3\""),
            std::string::npos)
      << xml;
}

// Two kept functions with one bus id are refused, and the message names the capture as well as
// the bus id, so `nccl-topo -i` says which file to fix.
TEST(NodeNcclXml, DuplicateBusidRefusalNamesTheCapture) {
  std::string path = test::fixture("nccl-topo/dgx-h100-topo.xml");
  NodeTopology n = load_nccl_xml(path);
  ASSERT_GE(n.gpus().size(), 2u);
  std::string busid = n.graph.vertex(n.gpus()[0]).busid;
  n.graph.vertex(n.gpus()[1]).busid = busid;
  try {
    node_to_nccl_xml(n);
    ADD_FAILURE() << "written despite two GPUs at " << busid;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadInput);
    std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find(busid), std::string::npos) << what;
    EXPECT_NE(what.find("share this bus id"), std::string::npos) << what;
  }
}

// The SGI UV 2000 capture has 24 NUMA domains, so 276 socket-interconnect pairs between 24
// clusters: drawn edge by edge, dot failed ("trouble in init_rank") and exited 1. It must render,
// and still show every domain joined to the interconnect.
TEST(NodeDot, TwentyFourNumaMachineRenders) {
  if (std::system("command -v dot >/dev/null 2>&1") != 0) GTEST_SKIP() << "graphviz dot absent";
  NodeTopology n =
      load_hwloc_xml(test::fixture("hwloc/hwloc-v2fmt-24s-xeon-e5-4640-24numa-connectx3.xml"));
  ASSERT_EQ(n.cpus().size(), 24u);
  std::string dot = node_to_dot(n);
  std::size_t joins = 0;
  for (std::size_t at = 0; (at = dot.find(" -- smp [label=\"smp ", at)) != std::string::npos;
       ++at) {
    ++joins;
  }
  EXPECT_EQ(joins, 24u);
  std::size_t smp_edges = 0;
  for (std::size_t at = 0; (at = dot.find("[label=\"smp ", at)) != std::string::npos; ++at) {
    ++smp_edges;
  }
  EXPECT_EQ(smp_edges, joins) << "no CPU-to-CPU edge is left beside the interconnect";
  std::string path = write_temp("uv.dot", dot);
  int status = std::system(("dot -Tsvg '" + path + "' -o /dev/null 2>/dev/null").c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  fs::remove(path);
}

}  // namespace
}  // namespace topoaware::topology
