// The cost model on hand-checkable cases: which resources each collective loads and for how long,
// worked by hand from NCCL's behaviour (docs/mapper.md, "Cost model"). The lower bound's tests are
// bound_test.cc's.
#include "topoaware/mapper/cost.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "small_instances.h"
#include "topoaware/mapper/plan.h"
#include "topoaware/mapper/synthetic.h"
#include "topoaware/topology/fabric_io.h"
#include "topoaware/topology/sources.h"

namespace topoaware::mapper {
namespace {

TEST(CostTest, RingInsideAHostUsesNvlinkOnly) {
  Small s = small(tiny(4, 2, 4, 1), {4, 4}, "tp=4,dp=2");
  Instance in = make_instance(s.fabric, s.nodes, s.request);
  CostReport block =
      evaluate(in.machine, in.traffic,
               std::vector<std::uint32_t>(in.block_slot.begin(), in.block_slot.end()));
  ASSERT_GE(block.dims.size(), 4u);
  EXPECT_EQ(block.dims[0].dim, "tp");
  EXPECT_EQ(block.dims[0].groups_in_host, 2);
  EXPECT_EQ(block.dims[0].groups_across + block.dims[0].groups_in_leaf, 0);
  // tp ring of 4 in one host: each GPU sends 2*(3/4)*S over NVLink at 150 GB/s.
  const DimTraffic& tp = in.traffic.dims[0];
  double expect =
      2.0 * 3 / 4 * tp.bytes / 150e9 + tp.calls * 2 * 3 * in.machine.nvlink_latency_us * 1e-6;
  EXPECT_NEAR(block.dims[0].seconds, expect, expect * 1e-9);
  // dp pairs GPU k of host 0 with GPU k of host 1: same leaf, one NIC each way.
  EXPECT_EQ(block.dims[3].groups_in_leaf, 4);
}

TEST(CostTest, CrossingAnOversubscribedLeafCostsMore) {
  // Two hosts under different leaves (4:1) against two under one leaf, same layout.
  Small near = small(tiny(4, 2, 2, 4), {2, 2, 0, 0}, "dp=4");
  Small far = small(tiny(4, 2, 2, 4), {2, 0, 2, 0}, "dp=4");
  double c_near = plan(near.fabric, near.nodes,
                       [&] {
                         auto r = near.request;
                         r.algorithm = Algorithm::kBlock;
                         return r;
                       }())
                      .cost.seconds;
  double c_far = plan(far.fabric, far.nodes,
                      [&] {
                        auto r = far.request;
                        r.algorithm = Algorithm::kBlock;
                        return r;
                      }())
                     .cost.seconds;
  EXPECT_GT(c_far, c_near);
}

// ---- The model's NCCL facts on small instances worked by hand (docs/mapper.md, "Cost model").

namespace model {

// Bytes a named resource carries in one evaluation (0 when it carries nothing).
double carried(const std::vector<LinkLoad>& loads, const std::string& name) {
  for (const auto& l : loads) {
    if (l.name == name) return l.bytes;
  }
  return 0;
}

struct Evaluated {
  Instance in;
  CostReport cost;
  std::vector<LinkLoad> loads;
};

// Slurm's block order (or the given GPUs, task by task) evaluated with every resource's load.
Evaluated evaluated(const Small& s, std::vector<int> bound_gpu = {}) {
  Request r = s.request;
  r.bound_gpu = std::move(bound_gpu);
  Evaluated e;
  e.in = make_instance(s.fabric, s.nodes, r);
  e.cost = evaluate(e.in.machine, e.in.traffic,
                    std::vector<std::uint32_t>(e.in.block_slot.begin(), e.in.block_slot.end()),
                    &e.loads);
  return e;
}

}  // namespace model

TEST(CostModelTest, AllReduceOnTwoHostsRunsAsATreeAndSendsItsBytesOnce) {
  // 2 hosts x 4 GPUs, each GPU its own 25 GB/s NIC. dp=8 in block order: host 0 holds ranks
  // 0-3. NCCL runs Tree at 2 nodes: each host sends its S once, a quarter through each NIC:
  // S/4 out of port 0. A ring would send V/4 = 2 x 7/8 x S / 4 = 0.4375 S.
  const model::Evaluated two = model::evaluated(small(tiny(2, 2, 4, 1), {4, 4}, "dp=8"));
  const double S = dim(two.in, "dp").bytes;
  EXPECT_NEAR(model::carried(two.loads, "NIC out of node00000 port 0"), S / 4, S * 1e-12);
  EXPECT_NEAR(model::carried(two.loads, "NIC out of node00001 port 3"), S / 4, S * 1e-12);
  // cp is a ring of K/V blocks, not an all-reduce: the ring's V/4 at 2 hosts too.
  const model::Evaluated ring = model::evaluated(small(tiny(2, 2, 4, 1), {4, 4}, "cp=8"));
  const double C = dim(ring.in, "cp").bytes;
  EXPECT_NEAR(model::carried(ring.loads, "NIC out of node00000 port 0"), 0.4375 * C, C * 1e-12);
  // Three hosts: a ring again, V/4 = 2 x 11/12 x S / 4 each hop.
  const model::Evaluated three = model::evaluated(small(tiny(3, 3, 4, 1), {4, 4, 4}, "dp=12"));
  const double S3 = dim(three.in, "dp").bytes;
  EXPECT_NEAR(model::carried(three.loads, "NIC out of node00000 port 0"), 2.0 * 11 / 12 * S3 / 4,
              S3 * 1e-12);
}

TEST(CostModelTest, AnNvlinkCliqueIsOneNcclNode) {
  // NVLink domains of 2 hosts x 4 GPUs (hosts 0-1, hosts 2-3), each GPU its own 25 GB/s NIC.
  // With MNNVL, NCCL merges a clique's GPUs into one node. dp=12 on hosts 0, 1, 2 spans two
  // nodes, so it runs as a tree: clique {0, 1} sends S once, spread over its 8 GPUs' NICs (S/8
  // out of host 0's port 0), and host 2 sends S over its 4 (S/4). Counted by host it would be a
  // ring of three with host 0's hop to host 1 on NVLink: nothing out of host 0's NICs.
  const FatTreeSpec spec = nvl(tiny(4, 2, 4, 1), 2);
  const model::Evaluated tree = model::evaluated(small(spec, {4, 4, 4}, "dp=12"));
  ASSERT_EQ(tree.in.machine.domain_of_host[0], tree.in.machine.domain_of_host[1]);
  ASSERT_NE(tree.in.machine.domain_of_host[1], tree.in.machine.domain_of_host[2]);
  const double S = dim(tree.in, "dp").bytes;
  EXPECT_NEAR(model::carried(tree.loads, "NIC out of node00000 port 0"), S / 8, S * 1e-12);
  EXPECT_NEAR(model::carried(tree.loads, "NIC out of node00001 port 3"), S / 8, S * 1e-12);
  EXPECT_NEAR(model::carried(tree.loads, "NIC out of node00002 port 0"), S / 4, S * 1e-12);
  // cp is a ring, not an all-reduce: a ring of two nodes, each GPU of the clique sending V/8 of
  // its hop V = 2 x 11/12 x C by its own NIC, each GPU of host 2 V/4.
  const model::Evaluated ring = model::evaluated(small(spec, {4, 4, 4}, "cp=12"));
  const double V = 2.0 * 11 / 12 * dim(ring.in, "cp").bytes;
  EXPECT_NEAR(model::carried(ring.loads, "NIC out of node00000 port 0"), V / 8, V * 1e-12);
  EXPECT_NEAR(model::carried(ring.loads, "NIC out of node00002 port 3"), V / 4, V * 1e-12);
}

TEST(CostModelTest, SendRecvGoesThroughThePeerIndexNicByPxnOnAnyFabric) {
  // Not rail-optimized: 2 hosts x 2 GPUs on one leaf, NVSwitch nodes. ep=2 between host 0's
  // GPU 0 and host 1's GPU 1 (bound GPUs): each sends S/2. NCCL's PXN (P2P_PXN_LEVEL 2) sends
  // through the local NIC of the GPU with the peer's NVML index (port 1 of host 0) after an
  // NVLink hop, and the receiver takes it on its own NIC (port 1 of host 1).
  const model::Evaluated e = model::evaluated(small(tiny(2, 2, 2, 1), {1, 1}, "ep=2"), {0, 1});
  const double S = dim(e.in, "ep").bytes;
  EXPECT_NEAR(model::carried(e.loads, "NIC out of node00000 port 1"), S / 2, S * 1e-12);
  EXPECT_EQ(model::carried(e.loads, "NIC out of node00000 port 0"), 0);
  EXPECT_NEAR(model::carried(e.loads, "NVLink out of node00000 GPU0"), S / 2, S * 1e-12);
  EXPECT_NEAR(model::carried(e.loads, "NIC into node00001 port 1"), S / 2, S * 1e-12);
  // The way back: host 1's GPU 1 sends through host 1's GPU 0's NIC, into host 0's port 0.
  EXPECT_NEAR(model::carried(e.loads, "NIC out of node00001 port 0"), S / 2, S * 1e-12);
  EXPECT_NEAR(model::carried(e.loads, "NIC into node00000 port 0"), S / 2, S * 1e-12);
}

TEST(CostModelTest, RingHopsLeaveByTheirOwnNicAndCrossRailsThroughTheSpine) {
  // Rail-optimized, 2 scalable units of 2 hosts x 2 GPUs. cp=2 between host 0's GPU 0 and
  // host 1's GPU 1, both in unit 0: a ring takes no PXN, so the hop leaves by rail 0 and
  // arrives on rail 1, climbing from rail switch 0 to the spine and down to rail switch 1: V
  // (= S for n = 2) over the unit's uplink. On one rail (GPU 0 both) it stays on the rail.
  FatTreeSpec spec = tiny(4, 2, 2, 1);
  spec.rail_optimized = true;
  const model::Evaluated cross = model::evaluated(small(spec, {1, 1}, "cp=2"), {0, 1});
  ASSERT_FALSE(cross.in.machine.levels.empty());
  const double S = dim(cross.in, "cp").bytes;
  double up = 0;
  for (const auto& l : cross.loads) {
    if (l.level == cross.in.machine.levels[0].name && l.name.rfind("uplink", 0) == 0) up += l.bytes;
  }
  EXPECT_NEAR(up, 2 * S, S * 1e-12);  // both directions of the ring
  const model::Evaluated same = model::evaluated(small(spec, {1, 1}, "cp=2"), {0, 0});
  for (const auto& l : same.loads) EXPECT_NE(l.name.rfind("uplink", 0), 0u) << l.name;
}

TEST(CostModelTest, AGpuWithTwoNicsSpreadsItsChannelsOverBoth) {
  // 2 GPUs and 4 NICs per host: each GPU shares its PCIe switch with two NICs, both nearest.
  // cp=4 in block order on 2 hosts: each member's hop V/2 (V = 2 x 3/4 x S) goes half through
  // each of its NICs: V/4 out of ports 0 and 1 of host 0.
  FatTreeSpec spec = tiny(2, 2, 2, 1);
  spec.ports_per_host = 4;
  const model::Evaluated e = model::evaluated(small(spec, {2, 2}, "cp=4"));
  ASSERT_EQ(e.in.machine.slots[0].ports.count, 2u);
  const double V = 2.0 * 3 / 4 * dim(e.in, "cp").bytes;
  EXPECT_NEAR(model::carried(e.loads, "NIC out of node00000 port 0"), V / 4, V * 1e-12);
  EXPECT_NEAR(model::carried(e.loads, "NIC out of node00000 port 1"), V / 4, V * 1e-12);
  EXPECT_NEAR(model::carried(e.loads, "NIC out of node00000 port 2"), V / 4, V * 1e-12);
}

TEST(CostModelTest, EcmpChargesTheExpectedWorstUplink) {
  // 2 leaves of 1 host, 1 GPU and one 25 GB/s NIC each; each leaf's 25 GB/s uplink is 4 links
  // of 6.25 GB/s (one per spine). dp=2: one flow of S each way. Adaptive routing spreads it
  // over the 4 links: S / 25 GB/s. ECMP hashes the one flow onto one link: S / 6.25 GB/s, 4 x
  // the time on the uplink, which is then the bottleneck (the NIC takes S / 25 GB/s).
  FatTreeSpec spec = tiny(2, 1, 1, 1);
  const model::Evaluated adaptive = model::evaluated(small(spec, {1, 1}, "dp=2"));
  spec.routing = topology::Routing::kEcmp;
  const model::Evaluated ecmp = model::evaluated(small(spec, {1, 1}, "dp=2"));
  ASSERT_TRUE(ecmp.in.machine.levels[0].ecmp);
  ASSERT_EQ(ecmp.in.machine.levels[0].uplink_links[0], 4u);
  const double S = dim(ecmp.in, "dp").bytes;
  // Same latency in both: the difference is the bandwidth term, 4 S/25e9 - S/25e9.
  EXPECT_NEAR(ecmp.cost.seconds - adaptive.cost.seconds, 3 * S / 25e9, S / 25e9 * 1e-9);
}

TEST(CostModelTest, OverlappingDimsTakeTheBusiestResourceUnderAllOfThem) {
  // 2 hosts x 2 GPUs, tp=2 inside each host (a ring of 2: each GPU sends S_tp over 150 GB/s
  // NVLink) and dp=2 across (a two-host tree: each GPU sends S_dp through its 25 GB/s NIC). One
  // after another the bandwidth terms add up; overlapping, the dims load different resources and
  // the step takes the larger: the sum less min(S_tp/150e9, S_dp/25e9). Latency terms add up
  // either way.
  Small s = small(tiny(2, 2, 2, 1), {2, 2}, "tp=2,dp=2");
  const model::Evaluated seq = model::evaluated(s);
  s.request.overlap_dims = true;
  const model::Evaluated both = model::evaluated(s);
  ASSERT_TRUE(both.in.traffic.overlap);
  const double tp = dim(seq.in, "tp").bytes / 150e9;
  const double dp = dim(seq.in, "dp").bytes / 25e9;
  EXPECT_NEAR(both.cost.seconds, seq.cost.seconds - std::min(tp, dp), seq.cost.seconds * 1e-9);
  // Per-dim figures stay each dim's own.
  ASSERT_EQ(both.cost.dims.size(), seq.cost.dims.size());
  for (std::size_t d = 0; d < seq.cost.dims.size(); ++d) {
    EXPECT_DOUBLE_EQ(both.cost.dims[d].seconds, seq.cost.dims[d].seconds);
  }
  // The bound under overlap stays at most the optimum (brute force) and below the sequential.
  const double lb = lower_bound(both.in.machine, both.in.traffic);
  EXPECT_LE(lb, brute_force(both.in) * (1 + 1e-12));
  EXPECT_LE(lb, lower_bound(seq.in.machine, seq.in.traffic));
  Small t = small(tiny(4, 2, 2, 2), {2, 2, 2, 2}, "tp=2,ep=2,pp=2");
  t.request.overlap_dims = true;
  Instance in = make_instance(t.fabric, t.nodes, t.request);
  EXPECT_LE(lower_bound(in.machine, in.traffic), brute_force(in) * (1 + 1e-12));
  EXPECT_GT(lower_bound(in.machine, in.traffic), 0);
}

TEST(CostModelTest, TopologyConfWithoutSpeedsTakesNicsFromTheCaptureAndSaysSo) {
  // 2 leaves of 4 hosts without LinkSpeed, DGX H100 capture (8 x 400 Gb/s = 50 GB/s NICs):
  // host ports come from the capture, leaf uplinks carry what their 4 hosts inject (4 x 8 x 50
  // = 1600 GB/s, non-blocking), or half of it when tier 1 is declared 2:1.
  const std::string path = ::testing::TempDir() + "/cost_test_topology.conf";
  {
    std::ofstream f(path);
    f << "SwitchName=s0 Switches=l[0-1]\nSwitchName=l0 Nodes=n[0-3]\nSwitchName=l1 "
         "Nodes=n[4-7]\n";
  }
  topology::Fabric fabric = topology::load_fabric(path);
  const topology::NodeTopology node = topology::load_node_file(
      std::string(TOPOAWARE_TEST_FIXTURES) + "/nccl-topo/dgx-h100-topo.xml");
  Request r;
  r.hosts = {"n0", "n4"};
  r.tasks_per_host = {8, 8};
  r.layout = parse_layout("tp=8,dp=2");
  const std::vector<const topology::NodeTopology*> nodes(2, &node);
  Instance in = make_instance(fabric, nodes, r);
  ASSERT_EQ(in.machine.port_count[0], 8u);
  EXPECT_DOUBLE_EQ(in.machine.port_gbps[0], 50);
  ASSERT_EQ(in.machine.levels.size(), 2u);
  EXPECT_DOUBLE_EQ(in.machine.levels[0].uplink_gbps[0], 1600);
  ASSERT_EQ(in.machine.assumptions.size(), 3u);
  EXPECT_NE(in.machine.assumptions[0].find("node capture"), std::string::npos);
  EXPECT_NE(in.machine.assumptions[1].find("non-blocking"), std::string::npos);
  EXPECT_EQ(plan(fabric, nodes, r).assumptions, in.machine.assumptions);
  topology::declare_oversubscription(fabric, {2});
  Instance half = make_instance(fabric, nodes, r);
  EXPECT_DOUBLE_EQ(half.machine.levels[0].uplink_gbps[0], 800);
  EXPECT_NE(half.machine.assumptions[1].find("tier 1 2:1"), std::string::npos);
  // A fabric that gives every capacity assumes nothing.
  Small s = small(tiny(2, 2, 2, 1), {2, 2}, "dp=4");
  EXPECT_TRUE(make_instance(s.fabric, s.nodes, s.request).machine.assumptions.empty());
}

}  // namespace
}  // namespace topoaware::mapper
