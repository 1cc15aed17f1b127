// The cost model on hand-checkable cases: which resources each collective loads and for how long,
// worked by hand from NCCL's behaviour (docs/mapper.md, "Cost model"). The lower bound's tests are
// bound_test.cc's.
#include "topoaware/mapper/cost.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>
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
  // tp=4 with sequence parallelism: reduce-scatters and all-gathers, which NCCL runs as a Ring
  // inside one node (NVLS gathers are slower there). Its ring graph on 4 GPUs of 150 GB/s:
  // 3 channels of 50 (150 reached), doubled to 6 of 25: 150 GB/s of bus bandwidth, 200 of
  // buffer (x 4/3). Each GPU sends (n-1)/n = 3/4 of every buffer over its 150 GB/s of NVLink:
  // the same S / 200 GB/s. Latency per call: 8.4 us + 3 steps x 3.4 us (tuning.cc, Ring/Simple
  // over NVLink).
  const DimTraffic& tp = in.traffic.dims[0];
  EXPECT_EQ(block.dims[0].nccl, "Ring");
  EXPECT_EQ(block.dims[0].collective, "reduce-scatter+all-gather");
  const double expect = tp.bytes / 200e9 + tp.calls * (8.4 + 3 * 3.4) * 1e-6;
  EXPECT_NEAR(block.dims[0].seconds, expect, expect * 1e-9);
  EXPECT_DOUBLE_EQ(block.dims[0].exposed, block.dims[0].seconds);  // tp: all of it
  // dp pairs GPU k of host 0 with GPU k of host 1: same leaf, one NIC each way.
  EXPECT_EQ(block.dims[3].groups_in_leaf, 4);
  // Without sequence parallelism tp issues all-reduces, which NCCL runs by NVLS on an NVSwitch.
  s.request.layout.framework.sequence_parallel = false;
  Instance ar = make_instance(s.fabric, s.nodes, s.request);
  EXPECT_EQ(evaluate(ar.machine, ar.traffic,
                     std::vector<std::uint32_t>(ar.block_slot.begin(), ar.block_slot.end()))
                .dims[0]
                .nccl,
            "NVLS");
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

// The traffic with all-reduces for tp and dp (Megatron without sequence parallelism and without
// the distributed optimizer).
Small& all_reduces(Small& s) {
  s.request.layout.framework.sequence_parallel = false;
  s.request.layout.framework.distributed_optimizer = false;
  return s;
}

TEST(CostModelTest, AllReduceOnTwoHostsRunsWhatNcclPicksAndATreeSendsItsBytesOnce) {
  // 2 hosts x 4 GPUs, each GPU its own 25 GB/s NIC (24 GB/s of NCCL channel). dp=8 all-reduces
  // in block order: host 0 holds ranks 0-3. NCCL's choice at 2 nodes for the dp bucket is
  // NVLS-Tree (8-rank ring 96 x 8/14 = 54.9 GB/s of buffer, Tree 165.6 x .5 x .8 (its size
  // correction) = 66.2, NVLS-Tree 4 x min(24 x .85 x 3/4 x 2, 48, 57.7) x 8/14 = 69.9): each
  // host sends its S once over the one inter-node edge, a quarter through each NIC: S/4 out of
  // port 0. A ring would send V/4 = 2 x 7/8 x S / 4 = 0.4375 S.
  Small two_hosts = small(tiny(2, 2, 4, 1), {4, 4}, "dp=8");
  const model::Evaluated two = model::evaluated(all_reduces(two_hosts));
  EXPECT_EQ(two.cost.dims[3].dim, "dp");
  EXPECT_EQ(two.cost.dims[3].nccl, "NVLSTree");
  const double S = dim(two.in, "dp").bytes;
  EXPECT_NEAR(model::carried(two.loads, "NIC out of node00000 port 0"), S / 4, S * 1e-12);
  EXPECT_NEAR(model::carried(two.loads, "NIC out of node00001 port 3"), S / 4, S * 1e-12);
  // Reduce-scatter + all-gather never run as trees (tuning.cc: Ring, PAT, NVLS, CollNet Direct
  // only): the ring's (n-1)/n of every buffer crosses, a quarter per NIC.
  const model::Evaluated gather = model::evaluated(small(tiny(2, 2, 4, 1), {4, 4}, "dp=8"));
  EXPECT_EQ(gather.cost.dims[3].nccl, "Ring");
  const double G = dim(gather.in, "dp").bytes;
  EXPECT_NEAR(model::carried(gather.loads, "NIC out of node00000 port 0"), 7.0 / 8 * G / 4,
              G * 1e-12);
  // Three hosts, gathers: the ring's hop of 11/12 of the buffers, a quarter per NIC.
  const model::Evaluated three = model::evaluated(small(tiny(3, 3, 4, 1), {4, 4, 4}, "dp=12"));
  const double S3 = dim(three.in, "dp").bytes;
  EXPECT_NEAR(model::carried(three.loads, "NIC out of node00000 port 0"), 11.0 / 12 * S3 / 4,
              S3 * 1e-12);
}

TEST(CostModelTest, AnNvlinkCliqueIsOneNcclNode) {
  // NVLink domains of 2 hosts x 4 GPUs (hosts 0-1, hosts 2-3), each GPU its own 25 GB/s NIC.
  // With MNNVL, NCCL merges a clique's GPUs into one node. dp=12 on hosts 0, 1, 2 spans two
  // nodes, so its all-reduce runs as a tree: clique {0, 1} sends S once, spread over its 8 GPUs'
  // NICs (S/8 out of host 0's port 0), and host 2 sends S over its 4 (S/4). Counted by host it
  // would be a ring of three with host 0's hop to host 1 on NVLink: nothing out of host 0's NICs.
  const FatTreeSpec spec = nvl(tiny(4, 2, 4, 1), 2);
  Small three_hosts = small(spec, {4, 4, 4}, "dp=12");
  const model::Evaluated tree = model::evaluated(all_reduces(three_hosts));
  ASSERT_EQ(tree.in.machine.domain_of_host[0], tree.in.machine.domain_of_host[1]);
  ASSERT_NE(tree.in.machine.domain_of_host[1], tree.in.machine.domain_of_host[2]);
  const double S = dim(tree.in, "dp").bytes;
  EXPECT_NEAR(model::carried(tree.loads, "NIC out of node00000 port 0"), S / 8, S * 1e-12);
  EXPECT_NEAR(model::carried(tree.loads, "NIC out of node00001 port 3"), S / 8, S * 1e-12);
  EXPECT_NEAR(model::carried(tree.loads, "NIC out of node00002 port 0"), S / 4, S * 1e-12);
  // Gathers make a ring of the two nodes: each GPU of the clique sends V/8 of the clique's hop
  // V = 11/12 x G by its own NIC, each GPU of host 2 V/4.
  const model::Evaluated ring = model::evaluated(small(spec, {4, 4, 4}, "dp=12"));
  const double V = 11.0 / 12 * dim(ring.in, "dp").bytes;
  EXPECT_NEAR(model::carried(ring.loads, "NIC out of node00000 port 0"), V / 8, V * 1e-12);
  EXPECT_NEAR(model::carried(ring.loads, "NIC out of node00002 port 3"), V / 4, V * 1e-12);
}

TEST(CostModelTest, SendRecvRelaysByPxnOnlyThroughAGpuOfItsOwnCommunicator) {
  // Not rail-optimized: 2 hosts x 2 GPUs on one leaf, NVSwitch nodes. ep=2 between host 0's
  // GPU 0 and host 1's GPU 1 (bound GPUs): each sends S/2. NCCL's PXN relays through the local
  // GPU with the peer's NVML index only where that GPU is a rank of the same communicator
  // (search.cc ncclTopoGetNetDev: ncclTopoDevToRank over the communicator's own topology):
  // host 0's GPU 1 is not, so the send leaves by GPU 0's own NIC.
  const model::Evaluated alone = model::evaluated(small(tiny(2, 2, 2, 1), {1, 1}, "ep=2"), {0, 1});
  const double S = dim(alone.in, "ep").bytes;
  EXPECT_NEAR(model::carried(alone.loads, "NIC out of node00000 port 0"), S / 2, S * 1e-12);
  EXPECT_EQ(model::carried(alone.loads, "NIC out of node00000 port 1"), 0);
  EXPECT_EQ(model::carried(alone.loads, "NVLink out of node00000 GPU0"), 0);
  EXPECT_NEAR(model::carried(alone.loads, "NIC into node00001 port 1"), S / 2, S * 1e-12);
  // ep=4 over both GPUs of both hosts: rank 0 (host 0 GPU 0) sends to rank 3 (host 1 GPU 1)
  // through rank 1 (host 0 GPU 1) after an NVLink hop, and to rank 2 (host 1 GPU 0) by its own
  // NIC. Each pair carries S/4; each of host 0's NICs carries two of them.
  const model::Evaluated both = model::evaluated(small(tiny(2, 2, 2, 1), {2, 2}, "ep=4"));
  const double S4 = dim(both.in, "ep").bytes;
  EXPECT_NEAR(model::carried(both.loads, "NIC out of node00000 port 0"), S4 / 2, S4 * 1e-12);
  EXPECT_NEAR(model::carried(both.loads, "NIC out of node00000 port 1"), S4 / 2, S4 * 1e-12);
  // GPU 0's NVLink: its send to rank 1 and the hop of its send to rank 3.
  EXPECT_NEAR(model::carried(both.loads, "NVLink out of node00000 GPU0"), S4 / 2, S4 * 1e-12);
}

TEST(CostModelTest, RingHopsLeaveByTheirOwnNicAndCrossRailsThroughTheSpine) {
  // Rail-optimized, 2 scalable units of 2 hosts x 2 GPUs. A dp gather between host 0's GPU 0
  // and host 1's GPU 1, both in unit 0: a ring takes no PXN, so the hop leaves by rail 0 and
  // arrives on rail 1, climbing from rail switch 0 to the spine and down to rail switch 1: half
  // the buffer each way over the unit's uplink. On one rail (GPU 0 both) it stays on the rail.
  FatTreeSpec spec = tiny(4, 2, 2, 1);
  spec.rail_optimized = true;
  const model::Evaluated cross = model::evaluated(small(spec, {1, 1}, "dp=2"), {0, 1});
  ASSERT_FALSE(cross.in.machine.levels.empty());
  const double S = dim(cross.in, "dp").bytes;
  double up = 0;
  for (const auto& l : cross.loads) {
    if (l.level == cross.in.machine.levels[0].name && l.name.rfind("uplink", 0) == 0) up += l.bytes;
  }
  EXPECT_NEAR(up, 2 * S / 2, S * 1e-12);  // both directions of the ring
  const model::Evaluated same = model::evaluated(small(spec, {1, 1}, "dp=2"), {0, 0});
  for (const auto& l : same.loads) EXPECT_NE(l.name.rfind("uplink", 0), 0u) << l.name;
}

TEST(CostModelTest, RingChannelsStayOnTheirRailWhateverTheRankOrderInsideANode) {
  // Rail-optimized, 2 hosts x 2 GPUs in one unit. dp=4 gathers with ranks 0, 1 on host 0's GPUs
  // 0, 1 and ranks 2, 3 on host 1's GPUs 1, 0 (bound GPUs): paired by rank position the hop
  // would go GPU 0 -> GPU 1 and GPU 1 -> GPU 0, across rails; NCCL keeps channel c on the c-th
  // NIC of every node, so the hops stay on rails 0 and 1 and nothing climbs above them.
  FatTreeSpec spec = tiny(4, 2, 2, 1);
  spec.rail_optimized = true;
  const model::Evaluated e = model::evaluated(small(spec, {2, 2}, "dp=4"), {0, 1, 1, 0});
  for (const auto& l : e.loads) EXPECT_NE(l.name.rfind("uplink", 0), 0u) << l.name;
  EXPECT_GT(model::carried(e.loads, "NIC out of node00000 port 1"), 0);
}

TEST(CostModelTest, AGpuWithTwoNicsSpreadsItsChannelsOverBoth) {
  // 2 GPUs and 4 NICs per host: each GPU shares its PCIe switch with two NICs, both nearest.
  // dp=4 gathers in block order on 2 hosts: each member's hop V/2 (V = 3/4 x S) goes half
  // through each of its NICs: V/4 out of ports 0 and 1 of host 0.
  FatTreeSpec spec = tiny(2, 2, 2, 1);
  spec.ports_per_host = 4;
  const model::Evaluated e = model::evaluated(small(spec, {2, 2}, "dp=4"));
  ASSERT_EQ(e.in.machine.slots[0].ports.count, 2u);
  const double V = 3.0 / 4 * dim(e.in, "dp").bytes;
  EXPECT_NEAR(model::carried(e.loads, "NIC out of node00000 port 0"), V / 4, V * 1e-12);
  EXPECT_NEAR(model::carried(e.loads, "NIC out of node00000 port 1"), V / 4, V * 1e-12);
  EXPECT_NEAR(model::carried(e.loads, "NIC out of node00000 port 2"), V / 4, V * 1e-12);
}

TEST(CostModelTest, EcmpChargesTheExpectedWorstUplink) {
  // 2 leaves of 1 host, 1 GPU and one 25 GB/s NIC each (24 GB/s of NCCL channel); each leaf's
  // 25 GB/s uplink is 4 links of 6.25 GB/s (one per spine). dp=2 gathers: a ring of two nodes,
  // one flow of S/2 each way. Adaptive routing spreads it over the 4 links: the NIC (and NCCL's
  // own ring, 24 GB/s x 2/1 of buffer) bound it, S/2 / 24 GB/s. ECMP hashes the one flow onto
  // one link: S/2 / 6.25 GB/s on the uplink, which is then the bottleneck.
  FatTreeSpec spec = tiny(2, 1, 1, 1);
  const model::Evaluated adaptive = model::evaluated(small(spec, {1, 1}, "dp=2"));
  spec.routing = topology::Routing::kEcmp;
  const model::Evaluated ecmp = model::evaluated(small(spec, {1, 1}, "dp=2"));
  ASSERT_TRUE(ecmp.in.machine.levels[0].ecmp);
  ASSERT_EQ(ecmp.in.machine.levels[0].uplink_links[0], 4u);
  const double S = dim(ecmp.in, "dp").bytes;
  const double nic = ecmp.in.machine.port_gbps[0] * 1e9;
  ASSERT_DOUBLE_EQ(nic, 24e9);
  // Same latency in both: the difference is the bandwidth term.
  EXPECT_NEAR(ecmp.cost.raw_seconds - adaptive.cost.raw_seconds, 4 * (S / 2) / 25e9 - S / 2 / nic,
              S / 25e9 * 1e-9);
}

TEST(CostModelTest, OverlappingDimsTakeTheBusiestResourceUnderAllOfThem) {
  // 2 hosts x 2 GPUs, tp=2 inside each host (gathers: a ring of 2 sending S_tp / 2 a GPU over
  // 150 GB/s of NVLink, NCCL's own time the same) and dp=2 across (gathers: a ring of two nodes,
  // S_dp / 2 a GPU through its 24 GB/s NIC, NCCL's ring the same). One after another the
  // bandwidth terms add up; overlapping, the dims load different resources and the step takes
  // the larger: all of it less min(S_tp/2/150e9, S_dp/2/24e9). Latency terms add up either way.
  Small s = small(tiny(2, 2, 2, 1), {2, 2}, "tp=2,dp=2");
  const model::Evaluated seq = model::evaluated(s);
  s.request.overlap_dims = true;
  const model::Evaluated both = model::evaluated(s);
  ASSERT_TRUE(both.in.traffic.overlap);
  const double tp = dim(seq.in, "tp").bytes / 2 / 150e9;
  const double dp = dim(seq.in, "dp").bytes / 2 / (seq.in.machine.port_gbps[0] * 1e9);
  EXPECT_NEAR(both.cost.seconds, seq.cost.raw_seconds - std::min(tp, dp),
              seq.cost.raw_seconds * 1e-9);
  // Per-dim figures stay each dim's own.
  ASSERT_EQ(both.cost.dims.size(), seq.cost.dims.size());
  for (std::size_t d = 0; d < seq.cost.dims.size(); ++d) {
    EXPECT_DOUBLE_EQ(both.cost.dims[d].seconds, seq.cost.dims[d].seconds);
  }
  // The bound under overlap stays at most the optimum (brute force). (It need not stay below the
  // sequential bound: one after another the step waits only for dp's exposed part, overlapping
  // the dims model no compute overlap.)
  const double lb = lower_bound(both.in.machine, both.in.traffic);
  EXPECT_LE(lb, brute_force(both.in) * (1 + 1e-12));
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
  // A 400 Gb/s port (50 GB/s) carries NCCL's channels at 48 GB/s (search.cc's speed arrays).
  EXPECT_DOUBLE_EQ(in.machine.port_gbps[0], 48);
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
