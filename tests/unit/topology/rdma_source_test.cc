// enrich_with_rdma(): sysfs under a fake root, verbs through a fake of the VerbsApi seam, and the
// real libibverbs on this machine.
#include "topoaware/topology/rdma_source.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>

#include "fake_verbs.h"
#include "test_support.h"
#include "topoaware/topology/sysfs_source.h"

namespace topoaware::topology {
namespace {

std::string dgx_root() { return test::fixture("sysfs/dgx-h100"); }

bool has_note(const NodeTopology& n, std::string_view needle) {
  return std::any_of(n.notes.begin(), n.notes.end(),
                     [&](const std::string& s) { return s.find(needle) != std::string::npos; });
}

const NetPort& port0(const NodeTopology& n, std::string_view name) {
  VertexId v = n.graph.find_name(VertexKind::kNic, name);
  if (!v.valid() || n.graph.vertex(v).nic.ports.empty()) {
    throw std::runtime_error("no NIC port " + std::string(name));
  }
  return n.graph.vertex(v).nic.ports.front();
}

TEST(IbRate, FollowsTheVerbsSpeedAndWidthCodes) {
  EXPECT_DOUBLE_EQ(ib_rate_gbps(128, 2), 400);  // 4x NDR
  EXPECT_DOUBLE_EQ(ib_rate_gbps(64, 2), 200);   // 4x HDR
  EXPECT_DOUBLE_EQ(ib_rate_gbps(64, 16), 100);  // 2x HDR (HDR100 splitter)
  EXPECT_DOUBLE_EQ(ib_rate_gbps(32, 2), 100);   // 4x EDR
  EXPECT_DOUBLE_EQ(ib_rate_gbps(16, 2), 56);    // 4x FDR
  EXPECT_DOUBLE_EQ(ib_rate_gbps(1, 1), 2.5);    // 1x SDR
  EXPECT_DOUBLE_EQ(ib_rate_gbps(256, 2), 800);  // 4x XDR
  EXPECT_LT(ib_rate_gbps(3, 2), 0);
  EXPECT_LT(ib_rate_gbps(128, 3), 0);
  EXPECT_EQ(ib_width_lanes(8), 12);
}

TEST(Rdma, SysfsAloneNamesTheHcasAndFillsTheirPorts) {
  NodeTopology n = load_sysfs_node(dgx_root());
  enrich_with_rdma(n, dgx_root(), nullptr);
  for (int k = 0; k < 8; ++k) {
    const NetPort& p = port0(n, "mlx5_" + std::to_string(k));
    EXPECT_DOUBLE_EQ(p.speed_mbps, 400000);
    EXPECT_EQ(p.link_layer, "InfiniBand");
    EXPECT_EQ(p.state, "ACTIVE");
  }
  EXPECT_FALSE(has_note(n, "no RDMA devices"));
}

TEST(Rdma, VerbsFailuresKeepTheSysfsView) {
  NodeTopology n = load_sysfs_node(dgx_root());
  test::FakeVerbs fake = test::FakeVerbs::dgx_h100();
  fake.hcas[4].open_fails = true;
  fake.hcas[4].ports[0].state = IBV_PORT_DOWN;  // never seen: the device does not open
  VerbsApi api = fake.api();
  enrich_with_rdma(n, dgx_root(), &api);
  EXPECT_TRUE(has_note(n, "mlx5_4: ibv_open_device failed"));
  EXPECT_EQ(port0(n, "mlx5_4").state, "ACTIVE");
  EXPECT_EQ(fake.opened, fake.closed);
  EXPECT_EQ(fake.freed, 1);
}

TEST(Rdma, VerbsGuidAndEthernetLinkLayerWin) {
  NodeTopology n = load_sysfs_node(dgx_root());
  test::FakeVerbs fake = test::FakeVerbs::dgx_h100();
  fake.hcas[1].guid = 0x0123456789abcdefull;
  VerbsApi api = fake.api();
  enrich_with_rdma(n, dgx_root(), &api);
  EXPECT_EQ(port0(n, "mlx5_1").guid, "0x0123456789abcdef");
  EXPECT_EQ(port0(n, "mlx5_8").link_layer, "Ethernet");
  EXPECT_DOUBLE_EQ(port0(n, "mlx5_8").speed_mbps, 200000);
}

TEST(Rdma, DeviceOnlyVerbsKnowsIsNotedNotPlaced) {
  NodeTopology n = load_sysfs_node(dgx_root());
  test::FakeVerbs fake = test::FakeVerbs::dgx_h100();
  test::FakeHca ghost;
  ghost.name = "rxe0";
  ghost.ports.push_back({});
  fake.hcas.push_back(ghost);
  VerbsApi api = fake.api();
  enrich_with_rdma(n, dgx_root(), &api);
  EXPECT_TRUE(has_note(n, "rxe0: seen by verbs but not in sysfs"));
  EXPECT_FALSE(n.graph.find_name(VertexKind::kNic, "rxe0").valid());
}

TEST(Rdma, FailedDeviceListWithSysfsDevicesIsNoted) {
  NodeTopology n = load_sysfs_node(dgx_root());
  test::FakeVerbs fake = test::FakeVerbs::dgx_h100();
  fake.list_fails = true;
  VerbsApi api = fake.api();
  enrich_with_rdma(n, dgx_root(), &api);
  EXPECT_TRUE(has_note(n, "ibv_get_device_list failed"));
  EXPECT_DOUBLE_EQ(port0(n, "mlx5_7").speed_mbps, 400000);
}

TEST(Rdma, RealLibibverbsOnThisMachine) {
  std::string why;
  const VerbsApi* api = load_verbs(&why);
  if (api == nullptr) GTEST_SKIP() << "libibverbs not loadable here: " << why;
  EXPECT_EQ(load_verbs(), api);  // loaded once per process
  NodeTopology n = load_sysfs_node("/");
  std::size_t nics_before = n.nics().size();
  enrich_with_rdma(n, "/", api);
  EXPECT_EQ(n.nics().size(), nics_before);
  if (!std::filesystem::exists("/sys/class/infiniband")) {
    EXPECT_TRUE(has_note(n, "no RDMA devices"));
  }
}

}  // namespace
}  // namespace topoaware::topology
