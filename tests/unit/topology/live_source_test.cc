// discover_live() and the sysfs node builder: the fake DGX H100 tree (tests/fixtures/sysfs),
// damaged copies of it, and this machine.
#include <gtest/gtest.h>
#include <unistd.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fake_nvml.h"
#include "fake_verbs.h"
#include "test_support.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/paths.h"
#include "topoaware/topology/sources.h"
#include "topoaware/topology/sysfs_source.h"

namespace topoaware::topology {
namespace {

namespace fs = std::filesystem;

std::string dgx_root() { return test::fixture("sysfs/dgx-h100"); }

LiveOptions fake_root(const std::string& root) {
  LiveOptions o;
  o.fsroot = root;
  o.use_hwloc = false;
  return o;
}

bool has_note(const NodeTopology& n, std::string_view needle) {
  return std::any_of(n.notes.begin(), n.notes.end(),
                     [&](const std::string& s) { return s.find(needle) != std::string::npos; });
}

std::string notes_of(const NodeTopology& n) {
  std::string s;
  for (const auto& x : n.notes) s += x + "\n";
  return s;
}

const Vertex& by_name(const NodeTopology& n, VertexKind k, std::string_view name) {
  VertexId v = n.graph.find_name(k, name);
  if (!v.valid()) throw std::runtime_error("no vertex " + std::string(name));
  return n.graph.vertex(v);
}

// A writable copy of the fixture (symlinks copied as symlinks) that a test may damage.
class DamagedTree : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ =
        fs::path(::testing::TempDir()) /
        ("sysfs-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root_);
    fs::copy(dgx_root(), root_, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const std::string& rel, const std::string& text) {
    // Through the class links: the file written is the one the device directory holds.
    auto dir = fs::canonical((root_ / rel).parent_path());
    std::ofstream(dir / fs::path(rel).filename()) << text;
  }
  fs::path root_;
};

TEST(LiveSysfs, DgxH100TreeHasEightGpusAndEightHcasSplitAcrossTwoSockets) {
  NodeTopology n = discover_live(fake_root(dgx_root()));
  EXPECT_EQ(n.hostname, "dgx-h100-sim");
  ASSERT_EQ(n.cpus().size(), 2u);
  for (VertexId c : n.cpus()) {
    const Vertex& cpu = n.graph.vertex(c);
    EXPECT_EQ(cpu.cpu.pus.size(), 112u) << cpu.name;
    EXPECT_EQ(cpu.cpu.vendor, "GenuineIntel");
    EXPECT_EQ(cpu.cpu.arch, "x86_64");
    EXPECT_EQ(cpu.cpu.model, 143);
  }
  EXPECT_EQ(by_name(n, VertexKind::kCpu, "NUMA1").cpu.affinity,
            "ffffffff,ffffff00,00000000,0000ffff,ffffffff,ff000000,00000000");

  auto gpus = n.gpus();
  ASSERT_EQ(gpus.size(), 8u);  // the BMC's ASPEED VGA is not a GPU
  std::map<int, int> per_numa;
  for (VertexId g : gpus) {
    const Vertex& v = n.graph.vertex(g);
    ++per_numa[v.numa];
    EXPECT_EQ(v.pci.vendor, "0x10de");
    EXPECT_EQ(v.pci.link_speed, "32.0 GT/s PCIe");
    EXPECT_EQ(v.pci.link_width, 16);
  }
  EXPECT_EQ(per_numa, (std::map<int, int>{{0, 4}, {1, 4}}));
  EXPECT_EQ(n.graph.vertex(gpus[0]).busid, "0000:1b:00.0");
  EXPECT_EQ(n.graph.vertex(gpus[7]).busid, "0000:df:00.0");

  int hcas = 0;
  std::map<int, int> hca_numa;
  for (VertexId v : n.nics()) {
    const Vertex& x = n.graph.vertex(v);
    if (x.name.rfind("mlx5_", 0) == 0 && !x.nic.ports.empty() &&
        x.nic.ports[0].link_layer == "InfiniBand") {
      ++hcas;
      ++hca_numa[x.numa];
    }
  }
  EXPECT_EQ(hcas, 8);
  EXPECT_EQ(hca_numa, (std::map<int, int>{{0, 4}, {1, 4}}));
  // 8 compute HCAs + 2 storage ports + the management NIC.
  EXPECT_EQ(n.nics().size(), 11u);
  // NVSwitch PCI functions and the VGA are left out; each GPU/HCA pair hangs from its own
  // switch's upstream port, and devices right below a root port hang from the CPU.
  EXPECT_TRUE(n.graph.of_kind(VertexKind::kPciDevice).empty());
  EXPECT_EQ(n.graph.of_kind(VertexKind::kPciSwitch).size(), 8u);
  EXPECT_TRUE(has_note(n, "nvml")) << notes_of(n);
}

TEST(LiveSysfs, EachGpuIsNearestToTheHcaUnderItsOwnSwitchAtPix) {
  NodeTopology n = discover_live(fake_root(dgx_root()));
  auto loc = gpu_locality(n);
  ASSERT_EQ(loc.size(), 8u);
  for (const GpuLocality& l : loc) {
    const Vertex& g = n.graph.vertex(l.gpu);
    ASSERT_EQ(l.nearest_nics.size(), 1u) << g.busid;
    const Vertex& nic = n.graph.vertex(l.nearest_nics[0]);
    EXPECT_EQ(to_string(l.path_to_nic), "PIX") << g.busid;
    EXPECT_EQ(nic.parent, g.parent) << g.busid << " vs " << nic.name;
    // The fixture puts each HCA three buses below its GPU (as on a DGX H100).
    long gbus = std::stol(g.busid.substr(5, 2), nullptr, 16);
    long nbus = std::stol(nic.busid.substr(5, 2), nullptr, 16);
    EXPECT_EQ(nbus, gbus - 3) << g.busid << " -> " << nic.name;
    EXPECT_EQ(l.numa, nic.numa);
    EXPECT_EQ(l.local_pus.size(), 112u);
    EXPECT_DOUBLE_EQ(l.bandwidth_to_nic, 48.0);  // Gen5 x16 (NET 400G = 50 is not narrower)
  }
  // GPU0 and the HCA under GPU5's switch are on different sockets: SYS without PXN.
  NodePaths paths(n);
  VertexId gpu0 = n.graph.find_name(VertexKind::kGpu, "GPU0");
  VertexId mlx5 = n.graph.find_name(VertexKind::kNic, "mlx5_5");
  VertexId mlx1 = n.graph.find_name(VertexKind::kNic, "mlx5_1");
  EXPECT_EQ(to_string(paths.path(gpu0, mlx5).type), "SYS");
  EXPECT_EQ(to_string(paths.path(gpu0, mlx1).type), "PHB");
}

TEST(LiveSysfs, PortsCarryRateStateLinkLayerNetdevAndGuid) {
  NodeTopology n = discover_live(fake_root(dgx_root()));
  const Vertex& m0 = by_name(n, VertexKind::kNic, "mlx5_0");
  ASSERT_EQ(m0.nic.ports.size(), 1u);
  const NetPort& p = m0.nic.ports[0];
  EXPECT_EQ(m0.busid, "0000:18:00.0");
  EXPECT_EQ(p.port, 1);
  EXPECT_DOUBLE_EQ(p.speed_mbps, 400000);
  EXPECT_EQ(p.width, 4);
  EXPECT_EQ(p.state, "ACTIVE");
  EXPECT_EQ(p.link_layer, "InfiniBand");
  EXPECT_EQ(p.netdev, "ibp24s0");
  EXPECT_EQ(p.guid, "0x946dae0300a1b2c0");
  EXPECT_EQ(m0.pci.pci_class, "0x020700");

  const Vertex& m9 = by_name(n, VertexKind::kNic, "mlx5_9");
  EXPECT_EQ(m9.busid, "0000:ab:00.1");
  ASSERT_EQ(m9.nic.ports.size(), 1u);
  EXPECT_EQ(m9.nic.ports[0].link_layer, "Ethernet");
  EXPECT_DOUBLE_EQ(m9.nic.ports[0].speed_mbps, 200000);
  EXPECT_EQ(m9.nic.ports[0].netdev, "enp171s0f1np1");
  EXPECT_EQ(m9.numa, 1);

  // A NIC without an RDMA device is named after its netdev, with the netdev's speed.
  const Vertex& eno = by_name(n, VertexKind::kNic, "eno1");
  EXPECT_EQ(eno.busid, "0000:01:00.0");
  ASSERT_EQ(eno.nic.ports.size(), 1u);
  EXPECT_DOUBLE_EQ(eno.nic.ports[0].speed_mbps, 1000);
  EXPECT_EQ(eno.nic.ports[0].state, "UP");
}

TEST(LiveSysfs, FakeNvmlAddsNvSwitchLinksAndNvlPathsBetweenGpus) {
  test::FakeNvml nvml = test::FakeNvml::dgx_h100();
  NvmlApi api = nvml.api();
  LiveOptions o = fake_root(dgx_root());
  o.nvml = &api;
  NodeTopology n = discover_live(o);
  ASSERT_EQ(n.graph.of_kind(VertexKind::kNvSwitch).size(), 1u);
  NodePaths paths(n);
  auto gpus = n.gpus();
  ASSERT_EQ(gpus.size(), 8u);
  for (VertexId a : gpus) {
    EXPECT_EQ(n.graph.vertex(a).gpu.sm, 90);
    for (VertexId b : gpus) {
      if (a == b) continue;
      Path p = paths.path(a, b);
      EXPECT_EQ(to_string(p.type), "NVL");
      EXPECT_NEAR(p.bandwidth, 18 * 20.6, 1e-9);
    }
  }
  EXPECT_FALSE(has_note(n, "nvml: not used")) << notes_of(n);
}

TEST(LiveSysfs, FakeVerbsOverridesSysfsPortState) {
  test::FakeVerbs verbs = test::FakeVerbs::dgx_h100();
  verbs.hcas[3].ports[0].state = IBV_PORT_DOWN;
  verbs.hcas[3].ports[0].speed = 64;  // HDR: 200 Gb/s after a downgrade
  VerbsApi api = verbs.api();
  LiveOptions o = fake_root(dgx_root());
  o.verbs = &api;
  NodeTopology n = discover_live(o);
  const NetPort& p3 = by_name(n, VertexKind::kNic, "mlx5_3").nic.ports.at(0);
  EXPECT_EQ(p3.state, "DOWN");
  EXPECT_DOUBLE_EQ(p3.speed_mbps, 200000);
  EXPECT_EQ(p3.netdev, "ibp94s0");  // sysfs facts verbs does not have are kept
  const NetPort& p2 = by_name(n, VertexKind::kNic, "mlx5_2").nic.ports.at(0);
  EXPECT_EQ(p2.state, "ACTIVE");
  EXPECT_DOUBLE_EQ(p2.speed_mbps, 400000);
  EXPECT_EQ(verbs.opened, 10);
  EXPECT_EQ(verbs.closed, 10);
  EXPECT_EQ(verbs.freed, 1);
}

// On the DGX H100 tree with mlx5_3's cable pulled, NCCL's IB plugin does not list mlx5_3 (it
// keeps ACTIVE ports only). GPU3, which shares mlx5_3's switch, must get socket 0's other HCAs,
// not NCCL_IB_HCA==mlx5_3 and no usable device; the other GPUs keep their own HCA.
TEST(LiveSysfs, AnHcaWhosePortIsDownIsNoGpusNic) {
  test::FakeVerbs verbs = test::FakeVerbs::dgx_h100();
  verbs.hcas[3].ports[0].state = IBV_PORT_DOWN;
  VerbsApi api = verbs.api();
  LiveOptions o = fake_root(dgx_root());
  o.verbs = &api;
  NodeTopology n = discover_live(o);
  ASSERT_EQ(by_name(n, VertexKind::kNic, "mlx5_3").nic.ports.at(0).state, "DOWN");
  for (const GpuLocality& l : gpu_locality(n)) {
    const Vertex& g = n.graph.vertex(l.gpu);
    std::vector<std::string> names;
    for (VertexId nic : l.nearest_nics) names.push_back(n.graph.vertex(nic).name);
    if (g.busid == "0000:61:00.0") {
      EXPECT_EQ(names, (std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_2"}));
      EXPECT_EQ(to_string(l.path_to_nic), "PHB");
      EXPECT_DOUBLE_EQ(l.bandwidth_to_nic, 48.0);
    } else {
      ASSERT_EQ(names.size(), 1u) << g.busid;
      EXPECT_NE(names[0], "mlx5_3") << g.busid;
      EXPECT_EQ(to_string(l.path_to_nic), "PIX") << g.busid;
    }
  }
}

TEST(LiveSysfs, MissingRootIsANotFoundError) {
  try {
    discover_live(fake_root("/nonexistent/topo-aware-root"));
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/topo-aware-root"), std::string::npos);
  }
}

TEST(LiveSysfs, RootWithoutSysIsANotFoundError) {
  fs::path empty = fs::path(::testing::TempDir()) / "sysfs-no-sys";
  fs::create_directories(empty / "etc");
  try {
    discover_live(fake_root(empty.string()));
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find("not a sysfs root"), std::string::npos) << e.what();
  }
  fs::remove_all(empty);
}

TEST_F(DamagedTree, FifoAndHugeAttributesAreBoundedNotHanging) {
  // A FIFO would block a naive read forever; a 4 MiB attribute would be read whole.
  fs::path cls = fs::canonical(root_ / "sys/bus/pci/devices/0000:c3:00.0") / "class";
  fs::remove(cls);
  ASSERT_EQ(mkfifo(cls.c_str(), 0600), 0);
  {
    std::ofstream big(fs::canonical(root_ / "sys/class/infiniband/mlx5_6/ports/1") / "rate");
    big << std::string(4u << 20, '9');
  }
  NodeTopology n = discover_live(fake_root(root_.string()));
  EXPECT_EQ(n.gpus().size(), 7u);
  EXPECT_TRUE(has_note(n, "0000:c3:00.0: class missing or malformed")) << notes_of(n);
  EXPECT_LT(by_name(n, VertexKind::kNic, "mlx5_6").nic.ports.at(0).speed_mbps, 0);
  for (const auto& note : n.notes) EXPECT_LT(note.size(), 200u) << note.substr(0, 200);
}

TEST_F(DamagedTree, GarbageRateLeavesSpeedUnknownWithANote) {
  write("sys/class/infiniband/mlx5_2/ports/1/rate", "fast, really fast\n");
  NodeTopology n = discover_live(fake_root(root_.string()));
  const NetPort& p = by_name(n, VertexKind::kNic, "mlx5_2").nic.ports.at(0);
  EXPECT_LT(p.speed_mbps, 0);
  EXPECT_TRUE(has_note(n, "mlx5_2 port 1: rate")) << notes_of(n);
  EXPECT_EQ(n.gpus().size(), 8u);
}

TEST_F(DamagedTree, MissingNumaNodeIsInheritedFromTheSwitch) {
  fs::remove(fs::canonical(root_ / "sys/bus/pci/devices/0000:9d:00.0") / "numa_node");
  NodeTopology n = discover_live(fake_root(root_.string()));
  VertexId g = n.graph.find_busid("0000:9d:00.0");
  ASSERT_TRUE(g.valid());
  EXPECT_EQ(n.graph.vertex(g).numa, 1);
  EXPECT_EQ(n.graph.vertex(n.graph.vertex(g).parent).busid, "0000:98:00.0");
}

TEST_F(DamagedTree, NoNumaNodeAnywhereAttachesToTheFirstSocketWithANote) {
  for (const char* f : {"0000:97:01.0", "0000:98:00.0", "0000:99:00.0", "0000:99:01.0",
                        "0000:9a:00.0", "0000:9d:00.0"}) {
    fs::remove(fs::canonical(root_ / "sys/bus/pci/devices" / f) / "numa_node");
  }
  NodeTopology n = discover_live(fake_root(root_.string()));
  VertexId g = n.graph.find_busid("0000:9d:00.0");
  ASSERT_TRUE(g.valid());
  EXPECT_EQ(n.graph.vertex(g).numa, 0);
  EXPECT_TRUE(has_note(n, "0000:98:00.0: NUMA node unknown")) << notes_of(n);
  EXPECT_EQ(n.gpus().size(), 8u);
}

TEST_F(DamagedTree, DanglingLinkAndGarbageClassSkipOneDeviceEach) {
  fs::path link = root_ / "sys/bus/pci/devices/0000:43:00.0";
  fs::remove(link);
  fs::create_symlink("../../../devices/pci0000:3d/gone/0000:43:00.0", link);
  write("sys/devices/pci0000:d9/0000:d9:01.0/0000:da:00.0/0000:db:01.0/0000:df:00.0/class",
        "graphics!\n");
  NodeTopology n = discover_live(fake_root(root_.string()));
  EXPECT_EQ(n.gpus().size(), 6u);
  EXPECT_TRUE(has_note(n, "0000:43:00.0: dangling")) << notes_of(n);
  EXPECT_TRUE(has_note(n, "0000:df:00.0: class missing or malformed")) << notes_of(n);
}

TEST_F(DamagedTree, MalformedCpulistAndLoopingLinksDegradeWithNotes) {
  write("sys/devices/system/node/node1/cpulist", "56-abc\n");
  fs::create_symlink("loop", root_ / "sys/class/infiniband/loop");
  fs::create_symlink("../../../devices/../../../../../../etc",
                     root_ / "sys/bus/pci/devices/0000:77:00.0");
  NodeTopology n = discover_live(fake_root(root_.string()));
  EXPECT_TRUE(has_note(n, "cpulist: missing or malformed")) << notes_of(n);
  EXPECT_TRUE(has_note(n, "loop: dangling")) << notes_of(n);
  EXPECT_TRUE(has_note(n, "0000:77:00.0")) << notes_of(n);
  // NUMA1 lists no CPUs now, so socket 1's devices hang from NUMA0 with notes, not a crash.
  EXPECT_EQ(n.gpus().size(), 8u);
}

TEST_F(DamagedTree, RdmaDeviceOnAFunctionOutsideTheModelIsOneNote) {
  // An RDMA device on a PCI function the builder does not keep (a storage controller here).
  fs::path fn = root_ / "sys/devices/pci0000:00/0000:00:1d.0/0000:02:00.0";
  fs::create_directories(fn / "infiniband/odd0");
  std::ofstream(fn / "class") << "0x010802\n";
  fs::create_symlink("../../../devices/pci0000:00/0000:00:1d.0/0000:02:00.0",
                     root_ / "sys/bus/pci/devices/0000:02:00.0");
  fs::create_symlink("../../../0000:02:00.0", fn / "infiniband/odd0/device");
  fs::create_symlink("../../devices/pci0000:00/0000:00:1d.0/0000:02:00.0/infiniband/odd0",
                     root_ / "sys/class/infiniband/odd0");
  NodeTopology n = discover_live(fake_root(root_.string()));
  EXPECT_TRUE(has_note(n,
                       "1 RDMA device(s) whose PCI function is not in the node model, "
                       "skipped: odd0 (0000:02:00.0)"))
      << notes_of(n);
  EXPECT_EQ(n.nics().size(), 11u);
}

TEST_F(DamagedTree, AbsoluteLinksResolveInsideTheRoot) {
  fs::path link = root_ / "sys/bus/pci/devices/0000:1b:00.0";
  std::string target = fs::read_symlink(link).string();
  fs::remove(link);
  // "/sys/devices/..." means the fake root's sys, never this machine's.
  fs::create_symlink("/sys/devices/" + target.substr(target.find("pci0000:15")), link);
  NodeTopology n = discover_live(fake_root(root_.string()));
  VertexId g = n.graph.find_busid("0000:1b:00.0");
  ASSERT_TRUE(g.valid()) << notes_of(n);
  EXPECT_EQ(n.graph.vertex(g).kind, VertexKind::kGpu);
}

// The checked-in tree is exactly what its script writes (names, file contents, link targets).
TEST(SysfsFixture, ScriptRegeneratesTheCheckedInTree) {
  fs::path out =
      fs::path(::testing::TempDir()) / ("sysfs-regenerated-" + std::to_string(::getpid()));
  fs::remove_all(out);
  std::string cmd = "bash '" + test::fixture("sysfs/make-dgx-h100.sh") + "' '" + out.string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto listing = [](const fs::path& root) {
    std::map<std::string, std::string> m;
    for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
         ++it) {
      std::string rel = fs::relative(it->path(), root).string();
      if (it->is_symlink()) {
        m[rel] = "-> " + fs::read_symlink(it->path()).string();
      } else if (it->is_regular_file()) {
        std::ifstream in(it->path());
        m[rel] = std::string(std::istreambuf_iterator<char>(in), {});
      } else {
        m[rel] = "dir";
      }
    }
    return m;
  };
  auto want = listing(dgx_root());
  auto got = listing(out);
  EXPECT_EQ(want.size(), got.size());
  for (const auto& [rel, content] : want) {
    auto it = got.find(rel);
    ASSERT_NE(it, got.end()) << rel << " not regenerated";
    EXPECT_EQ(it->second, content) << rel;
  }
  fs::remove_all(out);
}

TEST(LiveThisMachine, DiscoversAndSaysWhatIsMissing) {
  NodeTopology n = discover_live();
  EXPECT_FALSE(n.cpus().empty());
  EXPECT_FALSE(n.source.empty());
  std::string why;
  if (load_nvml(&why) == nullptr) {
    EXPECT_TRUE(n.gpus().empty() || has_note(n, "NVML")) << notes_of(n);
    EXPECT_TRUE(has_note(n, "libnvidia-ml.so.1")) << notes_of(n);
  }
  if (!fs::exists("/sys/class/infiniband")) {
    EXPECT_TRUE(has_note(n, "no RDMA devices")) << notes_of(n);
  }
}

}  // namespace
}  // namespace topoaware::topology
