// The node doctor's reports fed to the plan (health.h): which NICs a report degrades and by how
// much, applied to a fabric, handed over as text, and the plan they lead to.
#include "topoaware/topology/health.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "doctor_fixtures.h"
#include "test_support.h"
#include "topoaware/mapper/plan.h"
#include "topoaware/topology/doctor_source.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/fabric_io.h"
#include "topoaware/topology/sources.h"

namespace topoaware::topology {
namespace {

namespace fs = std::filesystem;

HealthReport report_of(const std::string& fault, NodeTopology* node) {
  const fs::path root = test::doctor_faults() / fault;
  LiveOptions o;
  o.fsroot = root.string();
  o.use_hwloc = false;
  *node = discover_live(o);
  return diagnose(*node, read_health_facts(*node, root.string(), nullptr), {});
}

TEST(Health, RateFindingsAndDownPortsDegradeTheirNic) {
  NodeTopology node;
  auto h = nic_health(report_of("rdma-rate-1x", &node), &node);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].nic, "mlx5_6");
  EXPECT_DOUBLE_EQ(h[0].fraction, 0.25);
  EXPECT_EQ(h[0].what, "mlx5_6 at 100 of 400 Gb/s");
  h = nic_health(report_of("rdma-rate-hdr", &node), &node);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_DOUBLE_EQ(h[0].fraction, 0.5);
  h = nic_health(report_of("rdma-port-down", &node), &node);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_DOUBLE_EQ(h[0].fraction, 0.01);
  EXPECT_NE(h[0].what.find("port down"), std::string::npos) << h[0].what;
  // Nothing to model on a healthy node, nor for findings that are not a NIC's capacity.
  EXPECT_TRUE(nic_health(report_of("healthy", &node), &node).empty());
  EXPECT_TRUE(nic_health(report_of("rdma-counters", &node), &node).empty());
  EXPECT_TRUE(nic_health(report_of("acs-redirect", &node), &node).empty());
}

// A NIC behind a PCIe link slower than its slot: judged against what the NIC itself can send.
TEST(Health, ANicBehindADowntrainedLinkCarriesWhatTheLinkCarries) {
  NodeTopology node;
  HealthReport r = report_of("pcie-nic-gen3", &node);
  auto h = nic_health(r, &node);
  ASSERT_EQ(h.size(), 1u) << health_report_to_json(r);
  EXPECT_GT(h[0].fraction, 0.0);
  EXPECT_LT(h[0].fraction, 1.0);
  EXPECT_NE(h[0].what.find("behind a PCIe link"), std::string::npos) << h[0].what;
}

TEST(Health, AppliedToTheFabricAndHandedOverAsText) {
  Fabric f = load_fabric(test::fixture("../../etc/lab-cluster.toml"));
  std::map<std::string, std::vector<NicHealth>> health = {
      {"node3", {{"mlx5_2", 0.5, "mlx5_2 at 200 of 400 Gb/s"}}}, {"nosuch", {{"mlx5_0", 0.5, ""}}}};
  auto lines = apply_health(f, health);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "node3: mlx5_2 at 200 of 400 Gb/s");
  EXPECT_DOUBLE_EQ(f.hosts[static_cast<std::size_t>(f.find_host("node3"))].nic_fraction["mlx5_2"],
                   0.5);
  const std::string text = health_text(health);
  EXPECT_EQ(text, "node3:mlx5_2=0.5000;nosuch:mlx5_0=0.5000;");
  auto back = parse_health(text, "SLURM_TOPO_AWARE_HEALTH");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_DOUBLE_EQ(back["node3"][0].fraction, 0.5);
  EXPECT_THROW(parse_health("node3:mlx5_2=2", "x"), Error);
  EXPECT_THROW(parse_health("node3", "x"), Error);
  EXPECT_THROW(parse_health("node3:mlx5_2", "x"), Error);
}

// A step that does not need every GPU of a host leaves the degraded NIC's GPU out, and is scored
// against Slurm's order, which runs task j on GPU j whatever the NICs.
TEST(Health, ThePlanLeavesTheDegradedNicsGpuOutAndBeatsSlurmsOrder) {
  Fabric f = load_fabric(test::fixture("../../etc/lab-cluster.toml"));
  NodeTopology dgx = load_node_file(test::fixture("nccl-topo/dgx-h100-topo.xml"));
  mapper::Request r;
  r.hosts = {"node1", "node2", "node3", "node4"};
  r.tasks_per_host = {4, 4, 4, 4};
  r.layout = mapper::parse_layout("tp=4", 16);
  const std::vector<const NodeTopology*> nodes(4, &dgx);
  const mapper::RankPlan healthy = mapper::plan(f, nodes, r);
  apply_health(f, {{"node3", {{"mlx5_2", 0.5, ""}}}});
  const mapper::RankPlan p = mapper::plan(f, nodes, r);
  for (const auto& t : p.tasks) {
    if (p.hosts[t.host] == "node3") {
      EXPECT_NE(t.gpu, 2);
    }
  }
  EXPECT_LT(p.cost.seconds, 0.75 * p.block_cost.seconds);
  EXPECT_GT(p.block_cost.seconds, healthy.block_cost.seconds);
  EXPECT_NEAR(p.cost.seconds, healthy.cost.seconds, 1e-9 * healthy.cost.seconds);
  EXPECT_LE(p.lower_bound, p.cost.seconds * (1 + 1e-12));
}

}  // namespace
}  // namespace topoaware::topology
