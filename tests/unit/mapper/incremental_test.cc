// IncrementalCost: after any run of exchanges and undos it reports what a full evaluation of the
// same assignment reports, on every kind of machine the cost model knows (trees, rails, NVLink
// domains, partial hosts, explicit traffic matrices) and for what the framework and NCCL run
// (gathers and all-reduces, NCCL's choice of rings, trees and CollNet per group, older NCCL rules,
// dp behind compute or not); and host exchanges recover what whole-host fragments cost Slurm's
// order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <utility>
#include <vector>

#include "topoaware/mapper/cost.h"
#include "topoaware/mapper/layout.h"
#include "topoaware/mapper/nccl_model.h"
#include "topoaware/mapper/plan.h"
#include "topoaware/mapper/synthetic.h"

namespace topoaware::mapper {
namespace {

struct Case {
  const char* name;
  FatTreeSpec spec;
  bool partial;  // GPU-level fragments (hosts lend 1..8 GPUs) instead of whole hosts
  const char* layout;
  int gpus;
  bool matrix;
  bool overlap = false;  // the dims overlap (Traffic::overlap): one lane for all
  // What the framework issues and overlaps (default: Megatron-core's gathers, dp behind compute),
  // NCCL's CollNet and the NCCL release whose rules pick each group's algorithm.
  Framework framework = {};
  bool collnet = false;
  nccl::Version nccl = nccl::kNewest;
};

FatTreeSpec spec_of(int hosts, int per_leaf, int leaves_per_pod, double oversub) {
  FatTreeSpec s;
  s.hosts = hosts;
  s.hosts_per_leaf = per_leaf;
  s.leaves_per_pod = leaves_per_pod;
  s.leaf_oversub = oversub;
  s.pod_oversub = oversub;
  return s;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  out.push_back({"3-tier 4:1, whole-host fragments, 5 dims", spec_of(128, 8, 4, 4), false,
                 "tp=4,cp=2,ep=2,pp=2,dp=auto", 256, false});
  out.push_back({"2-tier 2:1, partial hosts, MoE", spec_of(64, 8, 0, 2), true,
                 "tp=2,ep=8,pp=2,dp=auto", 128, false});
  FatTreeSpec rails = spec_of(64, 16, 0, 2);
  rails.rail_optimized = true;
  out.push_back({"rail-optimized, partial hosts", rails, true, "tp=4,pp=4,dp=auto", 128, false});
  FatTreeSpec nvl = spec_of(72, 18, 0, 2);
  nvl.gpus_per_host = 4;
  nvl.ports_per_host = 4;
  nvl.nvlink_domain_hosts = 18;
  nvl.nvlink_gbps = 900;
  out.push_back({"NVL72 domains, whole-host fragments", nvl, false, "tp=4,cp=2,pp=2,dp=auto", 96,
                 false});
  out.push_back({"2-tier with a traffic matrix", spec_of(64, 8, 0, 4), false, "tp=8,dp=auto", 128,
                 true});
  FatTreeSpec ecmp = spec_of(64, 8, 0, 2);
  ecmp.routing = topology::Routing::kEcmp;
  ecmp.uplink_cables = 4;
  out.push_back(
      {"ECMP 2:1, partial hosts, 5 dims", ecmp, true, "tp=4,cp=2,ep=2,pp=2,dp=auto", 128, false});
  out.push_back({"overlapping dims with a matrix, partial hosts", spec_of(64, 8, 0, 4), true,
                 "tp=2,ep=4,pp=2,dp=auto", 128, true, true});
  // tp and dp as all-reduces: NCCL's choice per group shape (rings, or trees over two nodes, a
  // group of each in the same dim), which moves with every exchange; dp on the critical path in
  // full, then behind compute with CollNet (CollNetDirect for dp's groups) under older rules.
  Framework all_reduces;
  all_reduces.sequence_parallel = false;
  all_reduces.distributed_optimizer = false;
  all_reduces.overlap_grad_reduce = false;
  all_reduces.overlap_param_gather = false;
  out.push_back({"all-reduces, partial hosts, dp exposed", spec_of(64, 8, 0, 2), true,
                 "tp=4,cp=2,pp=2,dp=auto", 128, false, false, all_reduces});
  out.push_back({"all-reduces on NVL72 domains, whole-host fragments", nvl, false,
                 "tp=8,pp=2,dp=auto", 96, false, false, all_reduces});
  Framework hidden = all_reduces;
  hidden.overlap_grad_reduce = true;
  hidden.overlap_param_gather = true;
  out.push_back({"all-reduces with CollNet under NCCL 2.20, partial hosts", spec_of(64, 8, 0, 4),
                 true, "tp=2,ep=4,pp=2,dp=auto", 128, false, false, hidden, true,
                 nccl::Version{2, 20}});
  return out;
}

Instance instance_of(const Case& c, const topology::Fabric& fabric,
                     const topology::NodeTopology& node) {
  const int g = c.spec.gpus_per_host;
  Allocation a = c.partial ? fragmented_allocation(fabric, g, 0.6, c.gpus, 3)
                           : fragmented_hosts(fabric, g, 0.6, c.gpus / g, 3);
  Request r;
  r.hosts = a.hosts;
  r.tasks_per_host = a.tasks_per_host;
  r.layout = parse_layout(c.layout);
  r.layout.framework = c.framework;
  r.layout.collnet = c.collnet;
  r.layout.nccl = c.nccl;
  r.overlap_dims = c.overlap;
  if (c.matrix) {
    for (int k = 0; k < 40; ++k) r.layout.matrix.push_back({k * 3 % c.gpus, k * 7 % c.gpus, 1e8});
  }
  return make_instance(fabric, std::vector<const topology::NodeTopology*>(a.hosts.size(), &node),
                       r);
}

void expect_agrees(const IncrementalCost& inc, const Instance& in, const char* when) {
  double crossing = 0;
  const double full = evaluate_seconds(in.machine, in.traffic, inc.slot_of_rank(), &crossing);
  EXPECT_NEAR(inc.seconds(), full, 1e-9 * full) << when;
  EXPECT_NEAR(inc.crossing(), crossing, 1e-9 * std::max(1.0, crossing)) << when;
}

TEST(IncrementalCostTest, AgreesWithFullEvaluationThroughExchangesAndUndos) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    topology::Fabric fabric = make_fat_tree(c.spec);
    auto node = make_node(c.spec.gpus_per_host, c.spec.ports_per_host, c.spec.nvlink_gbps,
                          c.spec.port_gbps);
    Instance in = instance_of(c, fabric, node);
    std::vector<std::uint32_t> a(in.block_slot.begin(), in.block_slot.end());
    IncrementalCost inc(in.machine, in.traffic, a);
    expect_agrees(inc, in, "fresh");
    const auto n = static_cast<std::uint32_t>(a.size());
    std::uint64_t x = 12345;
    auto next = [&] {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      return static_cast<std::uint32_t>((x >> 33) % n);
    };
    for (int step = 0; step < 200; ++step) {
      std::vector<std::pair<std::uint32_t, std::uint32_t>> pairs;
      std::vector<bool> used(n, false);
      const int k = 1 + step % 8;  // one rank pair up to a host's worth
      for (int i = 0; i < k; ++i) {
        std::uint32_t p = next(), q = next();
        if (p == q || used[p] || used[q]) continue;
        used[p] = used[q] = true;
        pairs.emplace_back(p, q);
      }
      if (pairs.empty()) continue;
      const std::vector<std::uint32_t> before = inc.slot_of_rank();
      const double seconds_before = inc.seconds();
      inc.exchange(pairs);
      for (const auto& [p, q] : pairs) {
        ASSERT_EQ(inc.slot_of_rank()[p], before[q]);
        ASSERT_EQ(inc.slot_of_rank()[q], before[p]);
      }
      if (step % 3 == 0) {
        inc.undo();
        ASSERT_EQ(inc.slot_of_rank(), before);
        EXPECT_DOUBLE_EQ(inc.seconds(), seconds_before);
      }
      if (step % 10 == 0) expect_agrees(inc, in, "after exchanges");
    }
    expect_agrees(inc, in, "at the end");
    EXPECT_GT(inc.work(), 0);
  }
}

TEST(IncrementalCostTest, BadExchangesAreErrors) {
  auto c = cases()[0];
  topology::Fabric fabric = make_fat_tree(c.spec);
  auto node = make_node(8, 8, 450, 50);
  Instance in = instance_of(c, fabric, node);
  IncrementalCost inc(in.machine, in.traffic,
                      std::vector<std::uint32_t>(in.block_slot.begin(), in.block_slot.end()));
  EXPECT_THROW(inc.undo(), Error);
  EXPECT_THROW(inc.exchange({{0, 1}, {1, 2}}), Error);
  EXPECT_THROW(inc.exchange({{0, 100000}}), Error);
  EXPECT_THROW(IncrementalCost(in.machine, in.traffic, {0, 1}), Error);
}

// Whole hosts scattered over pods with leftovers (8, 6, 8 and 10 free hosts of a 3-tier 4:1
// tree), every fourth lending 4 GPUs of 8: Slurm's order lays every data-parallel ring across
// pods; exchanging hosts regroups them. Hosts of two slot counts, so the start is a candidate
// order's (with every host lending 8, the best start already scores 1.1282 s unrefined, and
// refinement takes it to 1.1269 s; here 1.4675 s, refined to 1.1914 s, block 1.4248 s). The
// figures are the model's; the bound shows what is left.
TEST(IncrementalCostTest, HostExchangesRecoverWholeHostFragments) {
  FatTreeSpec s = spec_of(256, 8, 4, 4);
  topology::Fabric fabric = make_fat_tree(s);
  auto node = make_node(8, 8, 450, 50);
  Allocation a = fragmented_hosts(fabric, 8, 0.7, 32, 1);
  Request r;
  r.hosts = a.hosts;
  r.tasks_per_host = a.tasks_per_host;
  for (std::size_t i = 0; i < r.tasks_per_host.size(); i += 4) r.tasks_per_host[i] = 4;
  r.layout = parse_layout("tp=4,cp=2,ep=2,pp=2,dp=auto");
  const std::vector<const topology::NodeTopology*> nodes(a.hosts.size(), &node);
  RankPlan p = plan(fabric, nodes, r);
  r.refine_moves = 0;
  RankPlan unrefined = plan(fabric, nodes, r);
  std::printf("  block %.4f s, topo unrefined %.4f s, topo %.4f s, bound %.4f s\n",
              p.block_cost.seconds, unrefined.cost.seconds, p.cost.seconds, p.lower_bound);
  EXPECT_LT(p.cost.seconds, 0.95 * unrefined.cost.seconds);
  EXPECT_FALSE(p.kept_block);
  EXPECT_GT(p.refine_moves, 0);
  EXPECT_LT(p.cost.seconds, 0.9 * p.block_cost.seconds)
      << "topo " << p.cost.seconds << " s, block " << p.block_cost.seconds << " s";
  EXPECT_GE(p.cost.seconds, p.lower_bound);
}

}  // namespace
}  // namespace topoaware::mapper
