// The cost model on hand-checkable cases, and the lower bound and topo against brute force:
// every assignment of ranks to slots of small instances is scored, the bound must not exceed
// the best, and topo must find it.
#include "topoaware/mapper/cost.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <limits>
#include <numeric>

#include "topoaware/mapper/synthetic.h"

namespace topoaware::mapper {
namespace {

struct Small {
  topology::Fabric fabric;
  topology::NodeTopology node;
  Request request;
  std::vector<const topology::NodeTopology*> nodes;
};

Small small(FatTreeSpec spec, const std::vector<int>& tasks, const std::string& layout,
            int host_offset = 0) {
  Small s;
  s.fabric = make_fat_tree(spec);
  s.node = make_node(spec.gpus_per_host, spec.ports_per_host, spec.nvlink_gbps, spec.port_gbps);
  std::vector<std::string> names;
  for (const auto& h : s.fabric.hosts) names.push_back(h.name);
  std::sort(names.begin(), names.end());
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    if (tasks[i] == 0) continue;
    s.request.hosts.push_back(names[i + static_cast<std::size_t>(host_offset)]);
    s.request.tasks_per_host.push_back(tasks[i]);
  }
  s.request.layout = parse_layout(layout);
  s.nodes.assign(s.request.hosts.size(), &s.node);
  return s;
}

// The best evaluate_seconds over every permutation of ranks onto the slots.
double brute_force(const Instance& in) {
  std::vector<std::uint32_t> a(in.block_slot.begin(), in.block_slot.end());
  std::sort(a.begin(), a.end());
  double best = std::numeric_limits<double>::infinity();
  do {
    best = std::min(best, evaluate_seconds(in.machine, in.traffic, a));
  } while (std::next_permutation(a.begin(), a.end()));
  return best;
}

FatTreeSpec tiny(int hosts, int per_leaf, int gpus, double oversub) {
  FatTreeSpec s;
  s.hosts = hosts;
  s.hosts_per_leaf = per_leaf;
  s.gpus_per_host = gpus;
  s.ports_per_host = gpus;
  s.leaf_oversub = oversub;
  s.port_gbps = 25;
  s.nvlink_gbps = 150;
  return s;
}

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

struct BruteCase {
  const char* name;
  FatTreeSpec spec;
  std::vector<int> tasks;
  const char* layout;
};

class BruteForceTest : public ::testing::TestWithParam<BruteCase> {};

TEST_P(BruteForceTest, LowerBoundAtMostOptimumAndTopoFindsIt) {
  const BruteCase& c = GetParam();
  Small s = small(c.spec, c.tasks, c.layout);
  Instance in = make_instance(s.fabric, s.nodes, s.request);
  const double best = brute_force(in);
  const double lb = lower_bound(in.machine, in.traffic);
  EXPECT_LE(lb, best * (1 + 1e-12)) << c.name;
  EXPECT_GT(lb, 0) << c.name;
  RankPlan p = plan(s.fabric, s.nodes, s.request);
  EXPECT_NEAR(p.cost.seconds, best, best * 1e-6) << c.name;
  EXPECT_LE(p.cost.seconds, p.block_cost.seconds) << c.name;
  EXPECT_DOUBLE_EQ(p.lower_bound, lb);
  std::cout << "  " << c.name << ": optimum " << best << " s, topo " << p.cost.seconds
            << " s, block " << p.block_cost.seconds << " s, bound " << lb << " s ("
            << lb / best * 100 << "% of optimum)\n";
}

FatTreeSpec rails(FatTreeSpec s) {
  s.rail_optimized = true;
  return s;
}
FatTreeSpec nvl(FatTreeSpec s, int hosts) {
  s.nvlink_domain_hosts = hosts;
  return s;
}

INSTANTIATE_TEST_SUITE_P(
    Small, BruteForceTest,
    ::testing::Values(
        BruteCase{"tp2-dp2-pp2 on 4x2, 2:1", tiny(4, 2, 2, 2), {2, 2, 2, 2}, "tp=2,dp=2,pp=2"},
        BruteCase{"tp2-pp2-dp2 order pp-tp-dp",
                  tiny(4, 2, 2, 2),
                  {2, 2, 2, 2},
                  "tp=2,pp=2,dp=2,order=pp-tp-dp"},
        BruteCase{"fragmented 3+1+2+2, tp4 dp2", tiny(4, 2, 4, 4), {3, 1, 2, 2}, "tp=4,dp=2"},
        BruteCase{
            "fragmented 1+3+3+1, tp2 pp2 dp2", tiny(4, 2, 4, 2), {1, 3, 3, 1}, "tp=2,pp=2,dp=2"},
        BruteCase{"ep4 all-to-all, dp2", tiny(4, 2, 2, 2), {2, 2, 2, 2}, "ep=4,dp=2"},
        BruteCase{"cp2 tp2 dp2, 4:1", tiny(4, 2, 2, 4), {2, 2, 2, 2}, "tp=2,cp=2,dp=2"},
        BruteCase{"rail-optimized 4x2", rails(tiny(4, 2, 2, 2)), {2, 2, 2, 2}, "tp=2,pp=2,dp=2"},
        BruteCase{"NVLink domains of 2 hosts", nvl(tiny(4, 2, 2, 2), 2), {2, 2, 2, 2}, "tp=4,dp=2"},
        BruteCase{"pipeline 8 over 4 hosts", tiny(4, 2, 2, 1), {2, 2, 2, 2}, "pp=8"},
        BruteCase{"NVLink domains, fragmented 3+1+2+2",
                  nvl(tiny(4, 2, 4, 2), 2),
                  {3, 1, 2, 2},
                  "tp=4,dp=2"},
        BruteCase{
            "rail-optimized fragmented, ep", rails(tiny(4, 2, 4, 2)), {3, 1, 1, 3}, "ep=4,dp=2"}),
    [](const auto& param) { return "case" + std::to_string(param.index); });

}  // namespace
}  // namespace topoaware::mapper
