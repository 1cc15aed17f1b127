// The lower bound (cost.h's lower_bound(), docs/mapper.md "Lower bound") against brute force: on
// small instances every assignment of ranks to slots is scored, and the bound must not exceed the
// best; worked cases check that each of its parts is not trivial where it should bind. The public
// bound is checked against the cost model; the routed bound it is built on (routed_lower_bound(),
// the walk, crossing terms, whole cuts and cases of mapper/src/bound/) against the routed model it
// was derived for (routed_reference.h), where the worked cases can say which part binds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "routed_reference.h"
#include "small_instances.h"
#include "topoaware/mapper/cost.h"
#include "topoaware/mapper/layout.h"
#include "topoaware/mapper/plan.h"
#include "topoaware/mapper/synthetic.h"

namespace topoaware::mapper {
namespace {

// draw_order_note: the random tests draw each value in a statement of its own. The arguments of
// one call are evaluated in an unspecified order (GCC 12 went right to left, clang 14 left to
// right), so `tiny(8, 1 + below(3), gpus, 1 + below(4))` drew other instances under clang, and
// a count held below ("at the optimum on 22 of 60") held on GCC's instances only: clang's gave 20.
// Where one call drew twice, the values are drawn in the order GCC drew them, so that the counts
// written down stay the ones measured.
// How many random instances a brute-force test checks: all of them in the release build, a
// quarter under the sanitizers (tests/CMakeLists.txt), which look for memory errors that a few
// instances exercise as well, and which make each instance 10-20 times slower.
template <class T>
constexpr T instances(T n) {
#ifdef TOPOAWARE_SANITIZED
  return n / 4 > 0 ? n / 4 : 1;
#else
  return n;
#endif
}

// tp and dp as all-reduces, as frameworks issue them without sequence parallelism and the
// distributed optimizer: what the routed bound's worked cases need where they reason about
// NCCL's two-node trees (DimTraffic::all_reduce; the routed model runs an all-reduce spanning
// exactly two nodes as a tree that sends S once, a ring sends V = 2(n-1)/n S).
Request all_reduces(Request r) {
  r.layout.framework.sequence_parallel = false;
  r.layout.framework.distributed_optimizer = false;
  return r;
}

// The instance of `s` for the routed model's checks: its request with tp and dp as all-reduces
// (all_reduces()), so that the routed bound's trees are in play.
Instance routed_instance(const Small& s) {
  return make_instance(s.fabric, s.nodes, all_reduces(s.request));
}

// Each dim's bytes scaled by 0.001..1 and its calls set to 1..20,000, drawn from `g`, alike in
// `in` and `routed`: so that latency and bandwidth both count.
void draw_bytes_and_calls(Instance& in, Instance& routed, std::mt19937_64& g) {
  for (std::size_t i = 0; i < in.traffic.dims.size(); ++i) {
    const double scale = 0.001 * static_cast<double>(1 + g() % 1000);
    const double calls = static_cast<double>(1 + g() % 20000);
    for (Instance* x : {&in, &routed}) {
      x->traffic.dims[i].bytes *= scale;
      x->traffic.dims[i].calls = calls;
    }
  }
}

// The fastest NIC port of the machine, bytes/s: what a port carries in the cost model (NCCL's
// channel speed, 24 GB/s for the test fabrics' 25 GB/s ports), which the worked cases divide by.
double port_Bps(const Machine& m) {
  return *std::max_element(m.port_gbps.begin(), m.port_gbps.end()) * 1e9;
}

// The bound alone against brute force: never above the optimum, and not trivial.
void expect_bound_at_most_optimum(const Instance& in, const char* name) {
  const double best = brute_force(in);
  const double lb = lower_bound(in.machine, in.traffic);
  EXPECT_LE(lb, best * (1 + 1e-12)) << name;
  EXPECT_GT(lb, 0) << name;
  std::cout << "  " << name << ": optimum " << best << " s, bound " << lb << " s ("
            << lb / best * 100 << "% of optimum)\n";
}

// The routed bound against the routed model's optimum (routed_reference.h) on `s` with tp and dp
// as all-reduces: never above it, and not trivial.
void expect_routed_bound_at_most_optimum(const Small& s, const char* name) {
  const Instance in = routed_instance(s);
  const double best = brute_force_routed(in);
  const double lb = routed_lower_bound(in.machine, in.traffic);
  EXPECT_LE(lb, best * (1 + 1e-12)) << name << " (routed)";
  EXPECT_GT(lb, 0) << name << " (routed)";
  std::cout << "  " << name << ": routed optimum " << best << " s, routed bound " << lb << " s ("
            << lb / best * 100 << "% of optimum)\n";
}

struct BruteCase {
  const char* name;
  FatTreeSpec spec;
  std::vector<int> tasks;
  const char* layout;
  double topo_within = 1e-6;  // how far above the optimum topo's plan may be, relative
};

class BruteForceTest : public ::testing::TestWithParam<BruteCase> {};

TEST_P(BruteForceTest, LowerBoundAtMostOptimumAndTopoFindsIt) {
  const BruteCase& c = GetParam();
  Small s = small(c.spec, c.tasks, c.layout);
  // The optimum is over every placement, so topo is free to split fast domains as well
  // (split=allow): under the default rule it keeps tp, cp and ep groups whole where they fit a
  // host, which some of these cases' optima do not.
  s.request.layout.split = SplitPolicy::kAllow;
  Instance in = make_instance(s.fabric, s.nodes, s.request);
  const double best = brute_force(in);
  const double lb = lower_bound(in.machine, in.traffic);
  EXPECT_LE(lb, best * (1 + 1e-12)) << c.name;
  EXPECT_GT(lb, 0) << c.name;
  RankPlan p = plan(s.fabric, s.nodes, s.request);
  EXPECT_NEAR(p.cost.seconds, best, best * c.topo_within) << c.name;
  EXPECT_LE(p.cost.seconds, p.block_cost.seconds) << c.name;
  EXPECT_DOUBLE_EQ(p.lower_bound, lower_bound(in.machine, in.traffic, false));  // plan()'s: fast
  EXPECT_LE(p.lower_bound, lb * (1 + 1e-12));
  expect_routed_bound_at_most_optimum(s, c.name);
  std::cout << "  " << c.name << ": optimum " << best << " s, topo " << p.cost.seconds
            << " s, block " << p.block_cost.seconds << " s, bound " << lb << " s ("
            << lb / best * 100 << "% of optimum)\n";
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
        // Topo's plan here is Slurm's block order, three of whose DP pairs cross rails where the
        // optimum's stay on one: 0.004% of the step, which refinement does not find.
        BruteCase{"rail-optimized fragmented, ep",
                  rails(tiny(4, 2, 4, 2)),
                  {3, 1, 1, 3},
                  "ep=4,dp=2",
                  1e-4},
        // The model's NCCL facts: ECMP uplinks, GPUs with two NICs, all-reduces on two hosts.
        BruteCase{"ECMP, 2 cables a spine, 2:1",
                  ecmp(tiny(4, 2, 2, 2), 2),
                  {2, 2, 2, 2},
                  "tp=2,dp=2,pp=2"},
        BruteCase{"ECMP, all-to-all", ecmp(tiny(4, 2, 2, 1), 1), {2, 2, 2, 2}, "ep=4,dp=2"},
        BruteCase{
            "two NICs per GPU, cp2 dp4", two_nics(tiny(4, 2, 2, 2)), {2, 2, 2, 2}, "cp=2,dp=4"},
        BruteCase{"two NICs per GPU, fragmented ep",
                  two_nics(tiny(4, 2, 2, 1)),
                  {1, 2, 2, 1},
                  "ep=2,dp=3"},
        BruteCase{"all-reduce on two hosts, tp2 dp4", tiny(2, 2, 4, 1), {4, 4}, "tp=2,dp=4"},
        // Two one-GPU hosts and no host of 3 for a tp=4 tree partner: one piece is a ring.
        BruteCase{"one-GPU pieces without partners", tiny(4, 2, 4, 1), {1, 4, 2, 1}, "tp=4,dp=2"},
        BruteCase{
            "partial hosts cut into two-host trees", tiny(4, 4, 4, 1), {3, 1, 2, 2}, "tp=4,dp=2"}),
    [](const auto& param) { return "case" + std::to_string(param.index); });

// The lower bound alone against brute force on instances with NVLink domains, where the bound
// argues over islands (an NVLink domain's hosts in the step, or a host outside any domain).
struct IslandCase {
  const char* name;
  FatTreeSpec spec;
  std::vector<int> tasks;
  const char* layout;
  std::vector<int> outside = {};  // hosts (name order) taken out of their NVLink domain
};

Small island_small(const IslandCase& c) {
  Small s = small(c.spec, c.tasks, c.layout);
  std::vector<std::string> names;
  for (const auto& h : s.fabric.hosts) names.push_back(h.name);
  std::sort(names.begin(), names.end());
  for (int i : c.outside) {
    auto at = s.fabric.find_host(names[static_cast<std::size_t>(i)]);
    s.fabric.hosts[static_cast<std::size_t>(at)].nvlink_domain = -1;
  }
  return s;
}

class IslandBoundTest : public ::testing::TestWithParam<IslandCase> {};

TEST_P(IslandBoundTest, LowerBoundAtMostOptimum) {
  const IslandCase& c = GetParam();
  Small s = island_small(c);
  Instance in = make_instance(s.fabric, s.nodes, s.request);
  ASSERT_TRUE(std::any_of(in.machine.domain_of_host.begin(), in.machine.domain_of_host.end(),
                          [](int d) { return d >= 0; }))
      << c.name;
  for (int i : c.outside) {
    // the host keeps its slots but leaves its domain
    ASSERT_EQ(in.machine.domain_of_host[static_cast<std::size_t>(i)], -1) << c.name;
  }
  expect_bound_at_most_optimum(in, c.name);
  expect_routed_bound_at_most_optimum(s, c.name);
}

FatTreeSpec slow_nvlink(FatTreeSpec s, double gbps) {
  s.nvlink_gbps = gbps;
  return s;
}

INSTANTIATE_TEST_SUITE_P(
    Domains, IslandBoundTest,
    ::testing::Values(
        IslandCase{"ring, domain of 2 hosts + a host alone",
                   nvl(tiny(3, 3, 2, 1), 2),
                   {2, 2, 2},
                   "tp=2,dp=3"},
        IslandCase{"all-to-all over a 3-host domain and a lone host",
                   nvl(tiny(4, 2, 2, 2), 3),
                   {2, 1, 2, 2},
                   "ep=7"},
        IslandCase{"pipeline over domains of 2, fragmented",
                   nvl(tiny(5, 2, 2, 2), 2),
                   {2, 1, 2, 1, 2},
                   "pp=4,dp=2"},
        IslandCase{"mixed tp ep pp, domains of 2", nvl(tiny(4, 2, 2, 2), 2), {2, 2, 2, 2},
                   "tp=2,ep=2,pp=2"},
        IslandCase{"mixed, order pp-ep-tp, domains of 3, fragmented",
                   nvl(tiny(5, 3, 2, 4), 3),
                   {1, 2, 1, 2, 2},
                   "tp=2,ep=2,pp=2,order=pp-ep-tp-dp"},
        IslandCase{"rail-optimized, domain of 3 + lone host, all-to-all",
                   rails(nvl(tiny(4, 2, 2, 2), 3)),
                   {1, 2, 2, 2},
                   "ep=7"},
        IslandCase{"rail-optimized, domains of 2, tp pp dp",
                   rails(nvl(tiny(4, 2, 2, 2), 2)),
                   {2, 2, 2, 2},
                   "tp=2,pp=2,dp=2"},
        IslandCase{"host outside any domain, tp4 dp2",
                   nvl(tiny(4, 2, 2, 2), 2),
                   {2, 2, 2, 2},
                   "tp=4,dp=2",
                   {3}},
        IslandCase{"two hosts outside, ring + all-to-all",
                   nvl(tiny(5, 5, 2, 1), 3),
                   {2, 1, 2, 1, 2},
                   "ep=2,dp=4",
                   {0, 4}},
        // NVLink no faster than a NIC port: a stage or rank may split its traffic over both.
        IslandCase{"slow NVLink, pipeline of 5 one-GPU hosts",
                   slow_nvlink(nvl(tiny(5, 5, 1, 1), 4), 20),
                   {1, 1, 1, 1, 1},
                   "pp=5"},
        IslandCase{"slow NVLink, all-to-all of 8",
                   slow_nvlink(nvl(tiny(5, 5, 2, 1), 3), 30),
                   {1, 2, 2, 2, 1},
                   "ep=8"},
        IslandCase{"slow NVLink, all-to-all of 6 over 3-GPU hosts",
                   slow_nvlink(nvl(tiny(3, 3, 3, 1), 2), 20),
                   {3, 1, 2},
                   "ep=6,order=dp-ep"}),
    [](const auto& param) { return "case" + std::to_string(param.index); });

// Random small instances (fixed seeds): fabric shape, NVLink domains or none, NVLink faster or
// slower than a port, rails, fragmented tasks, layout and dim order all drawn; the bound must
// not exceed the brute-force optimum on any of them, nor the routed bound the routed model's.
TEST(BoundTest, LowerBoundAtMostOptimumOnRandomInstances) {
  int checked = 0, with_domains = 0;
  for (std::uint64_t seed = 1; checked < instances(160); ++seed) {
    ASSERT_LT(seed, 1000u) << "too few valid instances drawn";
    std::mt19937_64 g(seed);  // its raw output is fixed by the standard: same draws everywhere
    auto below = [&](int n) { return static_cast<int>(g() % static_cast<std::uint64_t>(n)); };
    FatTreeSpec spec;
    spec.hosts = 2 + below(5);
    spec.hosts_per_leaf = 1 + below(3);
    spec.gpus_per_host = 1 + below(3);
    spec.ports_per_host = 1 + below(spec.gpus_per_host);
    spec.leaf_oversub = 1 + below(4);
    spec.rail_optimized = below(3) == 0;
    spec.nvlink_domain_hosts = below(4) == 0 ? 0 : 2 + below(3);
    spec.port_gbps = 25;
    const double nvlink[] = {10, 20, 25, 30, 60, 150, 450};
    spec.nvlink_gbps = nvlink[below(7)];
    spec.seed = g();
    if (below(4) == 0) spec = ecmp(spec, 1 + below(2));
    if (below(5) == 0) spec = two_nics(spec);
    Small s;
    s.fabric = make_fat_tree(spec);
    s.node = make_node(spec.gpus_per_host, spec.ports_per_host, spec.nvlink_gbps, spec.port_gbps);
    std::vector<std::string> names;
    for (const auto& h : s.fabric.hosts) names.push_back(h.name);
    std::sort(names.begin(), names.end());
    const int max_world = 7 + below(2);
    int world = 0;
    for (const auto& name : names) {
      int k = below(3) == 0 ? spec.gpus_per_host : below(spec.gpus_per_host + 1);
      k = std::min(k, max_world - world);
      if (k <= 0) continue;
      s.request.hosts.push_back(name);
      s.request.tasks_per_host.push_back(k);
      world += k;
    }
    if (world < 2) continue;
    std::string layout;
    int rest = world;
    for (const char* dim : {"tp", "cp", "ep", "pp"}) {
      std::vector<int> divisors;
      for (int x = 2; x <= rest; ++x) {
        if (rest % x == 0) divisors.push_back(x);
      }
      if (divisors.empty() || below(2) == 0) continue;
      const int x = divisors[static_cast<std::size_t>(below(static_cast<int>(divisors.size())))];
      layout += std::string(dim) + "=" + std::to_string(x) + ",";
      rest /= x;
    }
    layout += "dp=auto";
    if (below(3) == 0) {
      std::vector<std::string> order = {"tp", "cp", "ep", "pp", "dp"};
      for (std::size_t i = order.size() - 1; i > 0; --i) {
        std::swap(order[i], order[static_cast<std::size_t>(below(static_cast<int>(i) + 1))]);
      }
      layout += ",order=" + order[0];
      for (std::size_t i = 1; i < order.size(); ++i) layout += "-" + order[i];
    }
    s.request.layout = parse_layout(layout);
    // What the framework issues, drawn too: all-reduces (trees on two nodes) or reduce-scatter +
    // all-gather, and whether the data-parallel reduction overlaps compute.
    s.request.layout.framework.sequence_parallel = below(2) == 0;
    s.request.layout.framework.distributed_optimizer = below(2) == 0;
    s.request.layout.framework.overlap_grad_reduce = below(2) == 0;
    s.nodes.assign(s.request.hosts.size(), &s.node);
    Instance in = make_instance(s.fabric, s.nodes, s.request);
    const double best = brute_force(in);
    const double lb = lower_bound(in.machine, in.traffic);
    ASSERT_LE(lb, best * (1 + 1e-12))
        << "seed " << seed << ": " << layout << " on " << world << " GPUs, domains of "
        << spec.nvlink_domain_hosts << " hosts, NVLink " << spec.nvlink_gbps << " GB/s";
    // The same placement problem with latency dominating: a byte a dim, many calls.
    Instance slow = in;
    for (auto& d : slow.traffic.dims) {
      d.bytes = std::min(d.bytes, 1.0);
      d.calls = 1 + below(1000);
    }
    ASSERT_LE(lower_bound(slow.machine, slow.traffic), brute_force(slow) * (1 + 1e-12))
        << "seed " << seed << " (latency): " << layout << " on " << world << " GPUs";
    // The routed bound on the same traffic (all-reduces where the framework issues them) against
    // the routed model, both ways.
    ASSERT_LE(routed_lower_bound(in.machine, in.traffic), brute_force_routed(in) * (1 + 1e-12))
        << "seed " << seed << " (routed): " << layout << " on " << world << " GPUs";
    ASSERT_LE(routed_lower_bound(slow.machine, slow.traffic),
              brute_force_routed(slow) * (1 + 1e-12))
        << "seed " << seed << " (routed, latency): " << layout << " on " << world << " GPUs";
    ++checked;
    if (std::any_of(in.machine.domain_of_host.begin(), in.machine.domain_of_host.end(),
                    [](int d) { return d >= 0; })) {
      ++with_domains;
    }
  }
  EXPECT_GE(with_domains, instances(60));  // the draw must exercise islands, not just hosts
}

// Latency in the routed bound's walk, worked by hand against the routed model (whose latency is
// calls x 2 (n - 1) steps x the latency of the level a dim's flows reach; the cost model's is
// NCCL's): two hosts of 2 GPUs under one leaf, tp=2 and dp=2 with almost no bytes and many calls,
// so the step is its latency terms. Whatever the placement, one
// of the two dims has a group split over the hosts and waits for the leaf on each of its steps
// (2 per call); the other may stay on NVLink. The optimum keeps the dim with more calls inside
// hosts; the bound must see that one dim leaves its host (a place of 2 slots cannot hold a
// whole tp group and a whole dp group) and charge the cheaper one the network's latency.
TEST(BoundTest, BoundChargesNetworkLatencyToADimThatMustLeaveItsHost) {
  Small s = small(tiny(2, 2, 2, 1), {2, 2}, "tp=2,dp=2");
  Instance in = make_instance(s.fabric, s.nodes, s.request);
  double tp_calls = 0, dp_calls = 0;
  for (auto& d : in.traffic.dims) {
    if (d.size <= 1) continue;
    d.bytes = 1;  // one byte: bandwidth terms vanish next to latency
    d.calls = d.name == "tp" ? 1000 : 10;
    (d.name == "tp" ? tp_calls : dp_calls) = d.calls;
  }
  const Machine& m = in.machine;
  ASSERT_EQ(m.reach_latency_us.size(), 3u);  // NVLink, the leaf, above it
  const double nv = m.reach_latency_us[0], leaf = m.reach_latency_us[1];
  ASSERT_LT(nv, leaf);
  // Each dim: calls x 2 (n - 1) steps x the latency of the level its flows reach.
  const double expect = (tp_calls * 2 * nv + dp_calls * 2 * leaf) * 1e-6;
  const double best = brute_force_routed(in);
  EXPECT_NEAR(best, expect, expect * 1e-3);
  const double lb = routed_lower_bound(m, in.traffic);
  EXPECT_LE(lb, best * (1 + 1e-12));
  // Without the network latency the bound would be (1000 + 10) x 2 x nv.
  EXPECT_GT(lb, 0.999 * expect) << "bound " << lb << " s, optimum " << best << " s";
}

// The same two hosts, each under a leaf of its own: a dim that leaves its host now leaves its leaf
// and waits for the spine. TP in hosts (dp over the spine) is the routed optimum; the host walk
// charged dp only a leaf's latency, level_latency_bound() the spine's.
TEST(BoundTest, BoundChargesSpineLatencyToADimThatMustLeaveItsLeaf) {
  Small s = small(tiny(2, 1, 2, 1), {2, 2}, "tp=2,dp=2");
  Instance in = make_instance(s.fabric, s.nodes, s.request);
  for (auto& d : in.traffic.dims) {
    if (d.size <= 1) continue;
    d.bytes = 1;
    d.calls = d.name == "tp" ? 1000 : 10;
  }
  const Machine& m = in.machine;
  ASSERT_EQ(m.reach_latency_us.size(), 4u);  // NVLink, a leaf, the spine, above it
  const double nv = m.reach_latency_us[0], leaf = m.reach_latency_us[1],
               spine = m.reach_latency_us[2];
  ASSERT_LT(leaf, spine);
  const double expect = (1000 * 2 * nv + 10 * 2 * spine) * 1e-6;
  const double best = brute_force_routed(in);
  EXPECT_NEAR(best, expect, expect * 1e-3);
  const double lb = routed_lower_bound(m, in.traffic);
  EXPECT_LE(lb, best * (1 + 1e-12));
  EXPECT_GT(lb, 0.999 * expect) << "bound " << lb << " s, optimum " << best << " s, with a leaf's "
                                << (1000 * 2 * nv + 10 * 2 * leaf) * 1e-6 << " s";
}

// The bound against brute force on `in`, and the routed bound against the routed model on
// `routed` (the same placement problem for the routed checks, routed_instance()); then both again
// with latency dominating (one byte a dim, the same calls drawn from `g`).
void expect_bounds_at_most_optima_both_ways(const Instance& in, const Instance& routed,
                                            std::mt19937_64& g, const std::string& what) {
  ASSERT_LE(lower_bound(in.machine, in.traffic), brute_force(in) * (1 + 1e-12)) << what;
  ASSERT_LE(routed_lower_bound(routed.machine, routed.traffic),
            brute_force_routed(routed) * (1 + 1e-12))
      << what << " (routed)";
  Instance slow = in, routed_slow = routed;
  for (std::size_t i = 0; i < slow.traffic.dims.size(); ++i) {
    const double calls = 1 + static_cast<int>(g() % 1000);
    for (Instance* x : {&slow, &routed_slow}) {
      x->traffic.dims[i].bytes = std::min(x->traffic.dims[i].bytes, 1.0);
      x->traffic.dims[i].calls = calls;
    }
  }
  ASSERT_LE(lower_bound(slow.machine, slow.traffic), brute_force(slow) * (1 + 1e-12))
      << what << " (latency)";
  ASSERT_LE(routed_lower_bound(routed_slow.machine, routed_slow.traffic),
            brute_force_routed(routed_slow) * (1 + 1e-12))
      << what << " (routed, latency)";
}

// Tree chains, worked by hand in the routed model: tp=3 and dp=3 all-reduces on hosts lending 2,
// 2, 2, 2 and 1 GPUs (one leaf, ports charged 24 GB/s). No group fits a host, so each TP and DP
// group is a two-host tree (its one lone member sends its bytes S through its port) or a ring (a
// lone member sends V = 4/3 S). The walk allowed both as trees: S_tp + S_dp over a port. But the
// one-GPU host's rank is alone in both dims; as a tree its TP group's other two members fill a
// host, each alone in its DP group there, which as a tree needs a host full of its other two
// members, each alone in TP... and no two of these hosts can be one, nor the one-GPU host
// (tree_chain_bound). So some rank sends a ring's V in tp or in dp: the optimum is the least of
// V_tp and S_tp + V_dp over a port (the two are equal here, S_dp = S_tp / 4), plus latency.
TEST(BoundTest, BoundSeesThatTwoHostTreesCannotChain) {
  Small s = small(tiny(5, 5, 2, 1), {2, 2, 2, 2, 1}, "tp=3,dp=3");
  Instance in = routed_instance(s);
  double s_tp = 0, s_dp = 0;
  for (const auto& d : in.traffic.dims) {
    if (d.name == "tp") s_tp = d.bytes;
    if (d.name == "dp") s_dp = d.bytes;
    if (d.size > 1) {
      ASSERT_TRUE(d.all_reduce) << d.name;
    }
  }
  ASSERT_GT(s_tp, 0);
  ASSERT_GT(s_dp, 0);
  const double port = port_Bps(in.machine);
  const double rings = std::min(4.0 / 3 * s_tp, s_tp + 4.0 / 3 * s_dp) / port;
  const double best = brute_force_routed(in);
  const double lb = routed_lower_bound(in.machine, in.traffic);
  EXPECT_GE(best, rings);
  EXPECT_LE(lb, best * (1 + 1e-12));
  EXPECT_GE(lb, rings) << "bound " << lb << " s, optimum " << best << " s, two trees "
                       << (s_tp + s_dp) / port << " s";
}

// The tree chain bound against brute force where it applies: 9 ranks of tp=3 and dp=3 (either
// order) on hosts lending 1 or 2 GPUs, random fabrics without NVLink domains; the routed bound with
// tp and dp as all-reduces (the chains are of their trees), the public bound as configured.
TEST(BoundTest, TreeChainBoundAtMostOptimumOnRandomInstances) {
  // Each instance brute-forces 9! assignments both ways: minutes under ASan (CMakeLists.txt).
#ifdef TOPOAWARE_SANITIZED
  constexpr std::uint64_t kSeeds = 1;
#else
  constexpr std::uint64_t kSeeds = 4;
#endif
  for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
    std::mt19937_64 g(seed);
    auto below = [&](int n) { return static_cast<int>(g() % static_cast<std::uint64_t>(n)); };
    std::vector<int> tasks;
    for (int left = 9; left > 0;) {
      const int k = std::min(left, 1 + below(2));
      tasks.push_back(k);
      left -= k;
    }
    const int oversub = 1 + below(4);  // drawn before per_leaf: see draw_order_note
    const int per_leaf = 1 + below(4);
    FatTreeSpec spec = tiny(static_cast<int>(tasks.size()), per_leaf, 2, oversub);
    spec.rail_optimized = below(3) == 0;
    const double nvlink[] = {20, 30, 150};
    spec.nvlink_gbps = nvlink[below(3)];
    spec.seed = g();
    if (below(4) == 0) spec = ecmp(spec, 1 + below(2));
    if (below(4) == 0) spec = two_nics(spec);
    const std::string layout = below(2) == 0 ? "tp=3,dp=3" : "tp=3,dp=3,order=dp-tp";
    Small sm = small(spec, tasks, layout);
    Instance in = make_instance(sm.fabric, sm.nodes, sm.request);
    ASSERT_NO_FATAL_FAILURE(expect_bounds_at_most_optima_both_ways(
        in, routed_instance(sm), g, "seed " + std::to_string(seed) + ": " + layout));
  }
}

// The island argument on a case worked by hand. Hosts of 2 GPUs: h0 and h1 form an NVLink
// domain, h2 is a domain of its own; tp=2, dp=3 (6 ranks). The host argument treats every
// off-host flow as possibly NVLink-fast; h2 gets, for each dp ring, only a crossing bound of
// V_dp / (2 ports): bound V_tp/nv + V_dp/(2 port). On islands: h2's two ranks either form a tp
// pair (then each dp ring has one member alone on h2, whose hop out of the island is V_dp
// through one port) or not (then a tp pair is split over islands: V_tp through one port), so
// the bound is V_tp/nv + V_dp/port: V_dp/(2 port) tighter.
TEST(BoundTest, IslandBoundTighterThanHostBoundOnNvlinkDomains) {
  Small s = small(nvl(tiny(3, 3, 2, 1), 2), {2, 2, 2}, "tp=2,dp=3");
  Instance in = routed_instance(s);
  const Machine& m = in.machine;
  ASSERT_EQ(m.domain_of_host.size(), 3u);
  ASSERT_GE(m.domain_of_host[0], 0);
  ASSERT_EQ(m.domain_of_host[0], m.domain_of_host[1]);
  ASSERT_NE(m.domain_of_host[2], m.domain_of_host[0]);
  const double nv = *std::max_element(m.slot_nvlink_gbps.begin(), m.slot_nvlink_gbps.end()) * 1e9;
  const double port = port_Bps(m);
  ASSERT_DOUBLE_EQ(nv, 150e9);
  ASSERT_DOUBLE_EQ(port, 24e9);  // a 25 GB/s port at NCCL's channel speed
  double v_tp = 0, v_dp = 0, latency = 0;
  double lat_min = m.nvlink_latency_us;
  for (double l : m.reach_latency_us) lat_min = std::min(lat_min, l);
  // The least latency of a step that leaves an island (reaches 1 and up).
  ASSERT_GE(m.reach_latency_us.size(), 2u);
  const double lat_net =
      *std::min_element(m.reach_latency_us.begin() + 1, m.reach_latency_us.end());
  ASSERT_GT(lat_net, lat_min);
  for (const auto& d : in.traffic.dims) {
    if (d.size <= 1) continue;
    // A ring member's bytes for tp; for dp (3 members on hosts of 2) the least hop: its group may
    // lie 2 + 1 on two hosts, where the routed model runs the all-reduce as a tree and each host
    // sends S.
    // The islands hold 4 and 2 slots, so some dp group leaves its island and every dp step
    // waits for the network; tp stays on NVLink.
    const double v = d.name == "tp" ? 2.0 * (d.size - 1) / d.size * d.bytes : d.bytes;
    (d.name == "tp" ? v_tp : v_dp) = v;
    latency += d.calls * 2.0 * (d.size - 1) * (d.name == "tp" ? lat_min : lat_net) * 1e-6;
  }
  ASSERT_GT(v_tp, 0);
  ASSERT_GT(v_dp, 0);
  const double host_bound = v_tp / nv + v_dp / (2 * port) + latency;
  const double island_bound = v_tp / nv + v_dp / port + latency;
  const double lb = routed_lower_bound(m, in.traffic);
  EXPECT_NEAR(lb, island_bound, island_bound * 1e-9);
  EXPECT_GT(lb, host_bound * (1 + 1e-6));
  EXPECT_LE(lb, brute_force_routed(in) * (1 + 1e-12));
}

// The walk's lines, in the routed model. Hosts of 3 GPUs lending 3, 3 and 2; tp=4, dp=2
// all-reduces (8 ranks). The 3 ranks of a
// full host fall into tp groups as 3, 2 + 1 or 1 + 1 + 1, never with 2 as the fewest: a rank
// with 2 tp peers there has a rank beside it with 1 or 3, and 3 leaves the group's fourth member
// alone on another host. So some tp member is a one-GPU piece: its group spans two hosts (a
// tree, S_tp each way) or three (a ring, V_tp), and it sends at least S_tp through its one port.
// The count argument alone would let the rank have 2 tp peers: S_tp / (2 port).
TEST(BoundTest, WalkKnowsWhichFewestMembersAPlaceCanHold) {
  Small s = small(tiny(3, 3, 3, 1), {3, 3, 2}, "tp=4,dp=2");
  Instance in = routed_instance(s);
  double S = 0;
  for (const auto& d : in.traffic.dims) S = d.name == "tp" ? d.bytes : S;
  ASSERT_GT(S, 0);
  ASSERT_TRUE(dim(in, "tp").all_reduce);
  const double lb = routed_lower_bound(in.machine, in.traffic), best = brute_force_routed(in);
  EXPECT_GE(lb, S / port_Bps(in.machine));
  EXPECT_LE(lb, best * (1 + 1e-12));
}

// The walk's other lines, in the routed model. Hosts of 5 GPUs lending 5, 5 and 2; tp=4 x dp=3
// all-reduces (12 ranks), DP all but free. A full host's 5 ranks fall into tp groups as 4 + 1,
// 3 + 2, 3 + 1 + 1, 2 + 2 + 1, ...: 5 is odd, so some line holds 1 or 3, and a line of 3 leaves
// the group's fourth member alone on another host. So some tp member is alone on its host and
// sends at least S through its one port (a two-host tree: S each way). The fewest members a rank
// finds there may be 2 (3 + 2), and the walk charged that rank's 2 + 2 tree, S / (2 port); a line
// of 2 beside one of 3 now charges the line of 3. Block order is optimal: tp groups 4 | 1 + 3 |
// 2 + 2 over the hosts.
TEST(BoundTest, WalkChargesThePlacesOtherLinesTheirFloors) {
  Small s = small(tiny(3, 3, 5, 1), {5, 5, 2}, "tp=4,dp=3");
  Instance in = routed_instance(s);
  ASSERT_TRUE(dim(in, "tp").all_reduce);
  double S = 0;
  for (auto& d : in.traffic.dims) {
    if (d.name == "tp") S = d.bytes;
    if (d.name == "dp") d.bytes = 1;
    d.calls = 0;
  }
  ASSERT_GT(S, 0);
  const double alone = S / port_Bps(in.machine);
  const double block = routed_reference_seconds(in.machine, in.traffic, in.block_slot);
  EXPECT_NEAR(block, alone, alone * 1e-3);  // DP's byte and NVLink add next to nothing
  const double lb = routed_lower_bound(in.machine, in.traffic);
  EXPECT_GE(lb, alone * (1 - 1e-9)) << "a line of 2 beside one of 3 charged as a 2 + 2 tree";
  EXPECT_LE(lb, block * (1 + 1e-12));
}

// The joint crossing bound: instances where a leaf cannot hold whole groups of two heavy dims at
// once (oversubscribed leaves, rings, all-to-all and pipelines, three tiers, fragments, NVLink
// domains straddling leaves). The bound alone against brute force.
using JointCase = BruteCase;

class JointBoundTest : public ::testing::TestWithParam<JointCase> {};

TEST_P(JointBoundTest, LowerBoundAtMostOptimum) {
  const JointCase& c = GetParam();
  Small s = small(c.spec, c.tasks, c.layout);
  Instance in = make_instance(s.fabric, s.nodes, s.request);
  expect_bound_at_most_optimum(in, c.name);
  expect_routed_bound_at_most_optimum(s, c.name);
}

FatTreeSpec three_tier(FatTreeSpec s, int leaves_per_pod, double pod_oversub) {
  s.leaves_per_pod = leaves_per_pod;
  s.pod_oversub = pod_oversub;
  return s;
}

INSTANTIATE_TEST_SUITE_P(
    Joint, JointBoundTest,
    ::testing::Values(
        JointCase{"cp2 dp2 on 1-GPU hosts, leaves of 2, 4:1", tiny(4, 2, 1, 4), {1, 1, 1, 1},
                  "cp=2,dp=2"},
        JointCase{"cp2 dp4 on 1-GPU hosts, leaves of 4, 8:1", tiny(8, 4, 1, 8),
                  {1, 1, 1, 1, 1, 1, 1, 1}, "cp=2,dp=4"},
        JointCase{"tp2 cp2 dp2, leaves of 2 hosts, 8:1", tiny(4, 2, 2, 8), {2, 2, 2, 2},
                  "tp=2,cp=2,dp=2"},
        JointCase{"ring and all-to-all, leaves of 2, 4:1", tiny(8, 2, 1, 4),
                  {1, 1, 1, 1, 1, 1, 1, 1}, "cp=2,ep=2,dp=2"},
        JointCase{"ring and pipeline, 2-GPU hosts, 4:1", tiny(4, 2, 2, 4), {2, 2, 2, 2},
                  "cp=2,pp=2,dp=2"},
        JointCase{"cp3 dp2 on leaves of 3, 4:1", tiny(6, 3, 1, 4), {1, 1, 1, 1, 1, 1},
                  "cp=3,dp=2"},
        JointCase{"three tiers: pods of 2 leaves of 2 hosts", three_tier(tiny(8, 2, 1, 2), 2, 4),
                  {1, 1, 1, 1, 1, 1, 1, 1}, "cp=2,dp=4"},
        JointCase{"fragmented 1+2+1+2, leaves of 2, 4:1", tiny(4, 2, 2, 4), {1, 2, 1, 2},
                  "cp=2,dp=3"},
        JointCase{"NVLink domains of 3 hosts over leaves of 2", nvl(tiny(4, 2, 1, 4), 3),
                  {1, 1, 1, 1}, "cp=2,dp=2"},
        JointCase{"rail-optimized, 2-GPU hosts, 4:1", rails(tiny(4, 2, 2, 4)), {2, 2, 2, 2},
                  "cp=2,dp=4"}),
    [](const auto& param) { return "case" + std::to_string(param.index); });

// Seeded random instances built for the joint term: every slot used, oversubscribed leaves
// (and sometimes pods) of few hosts, two or three dims of any pattern and order; the public bound
// against the cost model, the routed bound against the routed model.
TEST(BoundTest, JointBoundAtMostOptimumOnRandomOversubscribedInstances) {
  int checked = 0, whole_cuts_tighter = 0;
  for (std::uint64_t seed = 1; checked < instances(120); ++seed) {
    ASSERT_LT(seed, 2000u) << "too few valid instances drawn";
    std::mt19937_64 g(seed * 7919);
    auto below = [&](int n) { return static_cast<int>(g() % static_cast<std::uint64_t>(n)); };
    FatTreeSpec spec;
    spec.gpus_per_host = 1 + below(2);
    spec.hosts = (6 + below(3)) / spec.gpus_per_host;
    spec.hosts_per_leaf = 2 + below(2);
    spec.ports_per_host = 1 + below(spec.gpus_per_host);
    spec.leaf_oversub = 2 + below(7);
    if (below(3) == 0) {
      spec.leaves_per_pod = 2;
      spec.pod_oversub = 1 + below(4);
    }
    spec.rail_optimized = below(4) == 0;
    spec.nvlink_domain_hosts = below(4) == 0 ? 2 + below(2) : 0;
    spec.port_gbps = 25;
    spec.nvlink_gbps = below(4) == 0 ? 20 : 150;
    spec.seed = g();
    // ECMP on a third of them, from a generator of its own (the other draws stay as they were).
    std::mt19937_64 g_ecmp(seed * 104729);
    if (g_ecmp() % 3 == 0) spec = ecmp(spec, 1 + static_cast<int>(g_ecmp() % 3));
    Small s;
    s.fabric = make_fat_tree(spec);
    s.node = make_node(spec.gpus_per_host, spec.ports_per_host, spec.nvlink_gbps, spec.port_gbps);
    std::vector<std::string> names;
    for (const auto& h : s.fabric.hosts) names.push_back(h.name);
    std::sort(names.begin(), names.end());
    int world = 0;
    for (const auto& name : names) {
      const int k = below(4) == 0 ? 1 + below(spec.gpus_per_host) : spec.gpus_per_host;
      if (world + k > 8) break;
      s.request.hosts.push_back(name);
      s.request.tasks_per_host.push_back(k);
      world += k;
    }
    std::string layout;
    int rest = world;
    for (const char* dim : {"tp", "cp", "ep", "pp"}) {
      std::vector<int> divisors;
      for (int x = 2; x < rest; ++x) {
        if (rest % x == 0) divisors.push_back(x);
      }
      if (divisors.empty() || below(3) == 0) continue;
      const int x = divisors[static_cast<std::size_t>(below(static_cast<int>(divisors.size())))];
      layout += std::string(dim) + "=" + std::to_string(x) + ",";
      rest /= x;
    }
    if (rest == world) continue;  // one dim only: nothing joint to bound
    layout += "dp=auto";
    if (below(2) == 0) layout += ",order=dp-pp-ep-cp-tp";
    s.request.layout = parse_layout(layout);
    // What the framework issues, drawn too: all-reduces (trees on two nodes) or reduce-scatter +
    // all-gather, and whether the data-parallel reduction overlaps compute.
    s.request.layout.framework.sequence_parallel = below(2) == 0;
    s.request.layout.framework.distributed_optimizer = below(2) == 0;
    s.request.layout.framework.overlap_grad_reduce = below(2) == 0;
    s.nodes.assign(s.request.hosts.size(), &s.node);
    Instance in = make_instance(s.fabric, s.nodes, s.request);
    const double best = brute_force(in);
    const double lb = lower_bound(in.machine, in.traffic);
    ASSERT_LE(lb, best * (1 + 1e-12)) << "seed " << seed << ": " << layout << " on " << world
                                      << " GPUs, leaves of " << spec.hosts_per_leaf << " at "
                                      << spec.leaf_oversub << ":1";
    const double without_cuts = lower_bound(in.machine, in.traffic, false);
    ASSERT_LE(without_cuts, lb * (1 + 1e-12)) << "seed " << seed;
    // The routed bound on the same traffic against the routed model.
    ASSERT_LE(routed_lower_bound(in.machine, in.traffic), brute_force_routed(in) * (1 + 1e-12))
        << "seed " << seed << " (routed): " << layout;
    if (lb > without_cuts * (1 + 1e-9)) ++whole_cuts_tighter;
    ++checked;
  }
  // The whole cuts (cut_case_bound) must be what binds on a share of these, or this test does not
  // check them.
  EXPECT_GE(whole_cuts_tighter, instances(60));  // 89 of the 120 at the time of writing
}

// The routed bound's joint term worked by hand in the routed model. Four 1-GPU hosts, leaves of
// two at 4:1 (a leaf's uplink is U = 2 x 25 / 4 = 12.5 GB/s, sized from the ports' nominal 25 GB/s;
// a port carries 24, NCCL's channel speed), cp=2 x dp=2 rings with the same bytes S (V = S).
// Each leaf holds two of the four ranks: a cp pair (both dp rings leave it), a dp pair (both cp
// rings leave it) or neither (all four leave), so its exits carry at least 2V, and some dim
// takes 2V / U. The per-dim bounds see only that every rank's host sends V out of the host
// through one port: V / port per dim, 2V / port in all. The best placement takes
// V / port + 2V / U: the joint term splits each dim's time between its floor and the cut and
// gets 2V / U; the whole cuts (cut_case_bound) charge the dim a leaf cuts the larger of the two,
// 2V / U, and the other its floor, V / port, and so reach the optimum, latency included.
TEST(BoundTest, JointBoundTighterWhereTwoRingsCannotShareALeaf) {
  Small s = small(tiny(4, 2, 1, 4), {1, 1, 1, 1}, "cp=2,dp=2");
  Instance in = make_instance(s.fabric, s.nodes, s.request);
  const Machine& m = in.machine;
  ASSERT_GE(m.levels.size(), 1u);  // leaves (a top level of one group is crossed by nothing)
  for (std::size_t l = 1; l < m.levels.size(); ++l) {
    ASSERT_EQ(m.levels[l].uplink_gbps.size(), 1u);
  }
  ASSERT_EQ(m.levels[0].uplink_gbps.size(), 2u);
  ASSERT_DOUBLE_EQ(m.levels[0].uplink_gbps[0], 12.5);
  ASSERT_DOUBLE_EQ(m.levels[0].uplink_gbps[1], 12.5);
  const double port = port_Bps(m), U = 12.5e9;
  const double S = 1e9;
  double latency = 0;
  double lat_min = m.nvlink_latency_us;
  for (double l : m.reach_latency_us) lat_min = std::min(lat_min, l);
  int ring_dims = 0;
  for (auto& d : in.traffic.dims) {
    if (d.size <= 1) continue;
    ASSERT_EQ(d.pattern, Pattern::kRing);
    ASSERT_EQ(d.size, 2);
    d.bytes = S;
    ++ring_dims;
    latency += d.calls * 2.0 * (d.size - 1) * lat_min * 1e-6;
  }
  ASSERT_EQ(ring_dims, 2);
  const double V = S;  // 2 (n-1)/n S with n = 2
  const double per_dim_bound = 2 * V / port + latency;
  const double joint_bound = 2 * V / U + latency;
  const double whole_cut = 2 * V / U + V / port + latency;
  EXPECT_NEAR(routed_lower_bound(m, in.traffic, false), joint_bound, joint_bound * 1e-9);
  const double lb = routed_lower_bound(m, in.traffic);
  EXPECT_GT(lb, per_dim_bound * 1.5);
  EXPECT_GE(lb, whole_cut);
  const double best = brute_force_routed(in);
  EXPECT_LE(lb, best * (1 + 1e-12));
  EXPECT_GE(best, whole_cut);  // the best order pays one dim's crossing
  // With latency: the dim a leaf cuts waits for the spine, the other for its leaf. The latency
  // walk under the cut's floors charges both, and the bound reaches the optimum.
  ASSERT_EQ(m.reach_latency_us.size(), 4u);  // NVLink, a leaf, the spine, above it
  const double leaf = m.reach_latency_us[1], spine = m.reach_latency_us[2];
  double optimum = std::numeric_limits<double>::infinity();
  for (const auto& x : in.traffic.dims) {  // x: the dim the leaves cut
    if (x.size <= 1) continue;
    double v = 2 * V / U + V / port;
    for (const auto& d : in.traffic.dims) {
      if (d.size > 1) v += d.calls * 2.0 * (&d == &x ? spine : leaf) * 1e-6;
    }
    optimum = std::min(optimum, v);
  }
  EXPECT_NEAR(best, optimum, optimum * 1e-9);
  EXPECT_NEAR(lb, optimum, optimum * 1e-9);
}

// Latency above a switch under a whole cut, worked by hand in the routed model: four 1-GPU hosts,
// each under a leaf of its own, pods of two leaves at 4:1 (a pod's uplink U = 2 x 25 / 4 = 12.5
// GB/s, from the ports' nominal speed; a port carries 24), cp=2 x dp=2 rings of S bytes (V = S)
// and 200 calls each. A pod holds two ranks: a cp pair (both dp rings leave it), a dp pair, or
// neither, so some dim X sends 2V out of a pod over U, and its steps wait for the spine above the
// pods. The other dim Y leaves its
// hosts: V / port through a port, and its steps wait for the network. The whole cuts charged X
// its crossing but no latency past the least; the latency walk above a switch charged X the
// spine's latency but only a port's V / port. Run under the cut's floors, the latency walk
// charges both. What it still leaves out: Y's flows cross the leaves to a pod switch (1.45 us a
// step), where the bound counts a leaf's (1.15 us).
TEST(BoundTest, WholeCutsChargeTheLatencyAboveTheSwitchTheyCross) {
  Small s = small(three_tier(tiny(4, 1, 1, 1), 2, 4), {1, 1, 1, 1}, "cp=2,dp=2");
  Instance in = make_instance(s.fabric, s.nodes, s.request);
  const Machine& m = in.machine;
  ASSERT_EQ(m.levels.size(), 3u);  // leaves, pods, the spine
  ASSERT_EQ(m.levels[1].uplink_gbps.size(), 2u);
  ASSERT_DOUBLE_EQ(m.levels[1].uplink_gbps[0], 12.5);
  ASSERT_EQ(m.reach_latency_us.size(), 5u);  // NVLink, a leaf, a pod, the spine, above it
  const double nv = m.reach_latency_us[0], leaf = m.reach_latency_us[1],
               pod = m.reach_latency_us[2], spine = m.reach_latency_us[3];
  ASSERT_LT(nv, leaf);
  const double S = 1e9, port = port_Bps(m), U = 12.5e9, calls = 200;
  for (auto& d : in.traffic.dims) {
    if (d.size <= 1) continue;
    ASSERT_EQ(d.pattern, Pattern::kRing);
    ASSERT_EQ(d.size, 2);
    d.bytes = S;
    d.calls = calls;
  }
  const double V = S;
  const double step = calls * 2 * 1e-6;  // 2 (n - 1) steps a call
  const double best = brute_force_routed(in);
  const double optimum = 2 * V / U + step * spine + V / port + step * pod;
  EXPECT_NEAR(best, optimum, optimum * 1e-9);
  const double lb = routed_lower_bound(m, in.traffic);
  EXPECT_LE(lb, best * (1 + 1e-12));
  const double hand = 2 * V / U + step * spine + V / port + step * leaf;
  EXPECT_NEAR(lb, hand, hand * 1e-9)
      << "cut alone " << 2 * V / U + V / port + 2 * step * leaf << " s, latency walk alone "
      << V / port + step * spine + V / port + step * leaf << " s";
}

// Trees in the crossing term, worked by hand in the routed model: tp=2 x dp=4 all-reduces on four
// hosts of 2 GPUs, leaves of two hosts at 8:1 (a leaf's uplink U = 2 x 2 x 25 / 8 = 12.5 GB/s),
// S_tp = 3 GB, S_dp = 1 GB, no latency. A DP group over four hosts is a ring; on two hosts, a tree.
// With every TP pair inside a host (NVLink: S_tp / nv = 0.02 s) both DP rings cross each leaf with
// V = 1.5 S_dp: 3 GB over U, 0.24 s, 0.26 s in all. The crossing term used to credit each cut DP
// group with a tree's S_dp (2 GB over U, 0.16 s) while the walk kept TP inside hosts: 0.18 s. But a
// DP tree puts two members, of two TP groups, on one host of two slots: each alone in TP there, so
// TP's pairs leave their hosts (S_tp through a port charged 24 GB/s, 0.125 s). tree_case_bound
// takes the lesser of the two cases and reaches the optimum (0.255 s without the whole cuts, where
// the theta mix gives away 0.005 s).
TEST(BoundTest, CrossingTermChargesATreeToTheDimsItSplits) {
  Small s = small(tiny(4, 2, 2, 8), {2, 2, 2, 2}, "tp=2,dp=4");
  Instance in = routed_instance(s);
  const Machine& m = in.machine;
  ASSERT_EQ(m.levels[0].uplink_gbps.size(), 2u);
  ASSERT_DOUBLE_EQ(m.levels[0].uplink_gbps[0], 12.5);
  for (auto& d : in.traffic.dims) {
    if (d.size <= 1) continue;
    ASSERT_EQ(d.pattern, Pattern::kRing);
    ASSERT_TRUE(d.all_reduce);
    d.bytes = d.name == "tp" ? 3e9 : 1e9;
    d.calls = 0;
  }
  const double U = 12.5e9, nv = 150e9;
  const double rings = 1.5 * 2e9 / U + 3e9 / nv;  // TP in hosts, DP rings over both leaves
  const double best = brute_force_routed(in);
  const double lb = routed_lower_bound(m, in.traffic);
  EXPECT_NEAR(best, rings, rings * 1e-9);
  EXPECT_LE(lb, best * (1 + 1e-12));
  EXPECT_GT(lb, 0.95 * rings) << "bound " << lb << " s, optimum " << best << " s, tree credit "
                              << 2e9 / U + 3e9 / nv << " s";
}

// What the random bound tests below vary on a fabric, each one time in `one_in`: rails, ECMP
// (one or two cables), two NICs a GPU; and the NVLink speed (20, 60 or 150 GB/s).
FatTreeSpec vary(FatTreeSpec spec, std::mt19937_64& g, int one_in) {
  auto below = [&](int n) { return static_cast<int>(g() % static_cast<std::uint64_t>(n)); };
  spec.rail_optimized = below(one_in) == 0;
  const double nvlink[] = {20, 60, 150};
  spec.nvlink_gbps = nvlink[below(3)];
  spec.seed = g();
  if (below(one_in) == 0) spec = ecmp(spec, 1 + below(2));
  if (below(one_in) == 0) spec = two_nics(spec);
  return spec;
}

// Tasks for the random draws: 6 or 8 ranks over the hosts in name order, each host whole or, one
// time in `part_one_in`, a random part of it (none included); `world` receives the total.
std::vector<int> draw_tasks(std::mt19937_64& g, const FatTreeSpec& spec, int part_one_in,
                            int* world) {
  auto below = [&](int n) { return static_cast<int>(g() % static_cast<std::uint64_t>(n)); };
  std::vector<int> tasks;
  *world = 0;
  const int most = 6 + 2 * below(2);
  for (int h = 0; h < spec.hosts && *world < most; ++h) {
    int k = below(part_one_in) == 0 ? below(spec.gpus_per_host + 1) : spec.gpus_per_host;
    k = std::min(k, most - *world);
    tasks.push_back(k);
    *world += k;
  }
  return tasks;
}

// Trees in the crossing term against brute force where they count: whole hosts of 2 or 4 GPUs
// (8 ranks) under oversubscribed leaves, sometimes pods, rails, ECMP or two NICs, a layout with
// an all-reduce of 3 or 4 members (tp, dp or both; for the routed bound, as the public bound sees
// the framework's defaults) in either order, random bytes per dim, and each instance again with
// latency dominating.
TEST(BoundTest, TreeCaseBoundAtMostOptimumOnRandomInstances) {
  for (std::uint64_t seed = 1; seed <= instances(12u); ++seed) {
    std::mt19937_64 g(seed * 104729);
    auto below = [&](int n) { return static_cast<int>(g() % static_cast<std::uint64_t>(n)); };
    const int gpus = below(3) == 0 ? 4 : 2;
    const int hosts = 8 / gpus;
    const int oversub = 2 + below(7);  // drawn before per_leaf: see draw_order_note
    const int per_leaf = 1 + below(hosts == 4 ? 3 : 1);
    FatTreeSpec spec = tiny(hosts, per_leaf, gpus, oversub);
    if (hosts == 4 && spec.hosts_per_leaf == 1 && below(2) == 0) spec = three_tier(spec, 2, 4);
    spec = vary(spec, g, 4);
    const char* layouts[] = {"tp=2,dp=4", "tp=4,dp=2", "tp=2,cp=2,dp=2", "cp=2,dp=4"};
    std::string layout = layouts[below(4)];
    if (below(2) == 0) layout += ",order=dp-cp-tp";
    Small sm = small(spec, std::vector<int>(static_cast<std::size_t>(hosts), gpus), layout);
    Instance in = make_instance(sm.fabric, sm.nodes, sm.request);
    Instance routed = routed_instance(sm);
    for (std::size_t i = 0; i < in.traffic.dims.size(); ++i) {
      const double scale = 0.25 + 0.25 * below(12);
      in.traffic.dims[i].bytes *= scale;
      routed.traffic.dims[i].bytes *= scale;
    }
    ASSERT_NO_FATAL_FAILURE(expect_bounds_at_most_optima_both_ways(
        in, routed, g, "seed " + std::to_string(seed) + ": " + layout));
  }
}

// brute_force_hosts() is brute_force() where a host's GPUs are alike, in the cost model and in the
// routed model: 8 ranks on hosts of 2 and of 4 GPUs, one or two hosts a leaf, oversubscribed,
// three layouts.
TEST(BoundTest, SplitsOverHostsAreEveryPlacementWhereGpusAreAlike) {
  for (int gpus : {2, 4}) {
    for (const char* layout : {"tp=2,dp=4", "tp=2,cp=2,dp=2", "ep=4,dp=2"}) {
      Small s = small(tiny(8 / gpus, 2, gpus, 4), std::vector<int>(8 / gpus, gpus), layout);
      const Instance in = make_instance(s.fabric, s.nodes, s.request);
      const double best = brute_force(in);
      EXPECT_NEAR(brute_force_hosts(in), best, best * 1e-12) << gpus << " GPUs a host, " << layout;
      const double routed = brute_force_routed(in);
      EXPECT_NEAR(brute_force_routed_hosts(in), routed, routed * 1e-12)
          << gpus << " GPUs a host, " << layout << ", routed";
    }
  }
}

// A two-node tree's member and its peers, worked by hand in the routed model: tp=2 x cp=2 x dp=3
// (tp and dp all-reduces) on three hosts of 4 GPUs under one leaf, S = 1 GB a dim, no latency.
// Block keeps each host's TP and CP pairs on NVLink (S / nv each) and runs DP as a ring over the
// three hosts, 4/3 S through a port: 2 S / nv + 4/3 S / port, the optimum. The tree cases let a
// DP group run as a tree on two hosts (S / port from the host with one member) while TP and CP
// stay on NVLink: 2 S / nv + S / port, 20% below. But the host holding two members of that DP
// group holds, for one of them, at most 4 / 2 ranks sharing its DP coordinate: its TP and CP peers
// there number at most 2 with it, so TP or CP leaves the host (a pair across two hosts is a tree:
// S / port), and the DP pair sends S / 2 a member: S / nv + S / port + S / (2 port), above block.
TEST(BoundTest, TreeMemberFloorChargesTheTreesHostItsPeers) {
  Small s = small(tiny(3, 3, 4, 1), {4, 4, 4}, "tp=2,cp=2,dp=3");
  Instance in = routed_instance(s);
  ASSERT_TRUE(dim(in, "dp").all_reduce);
  const double S = 1e9, nv = 150e9, port = port_Bps(in.machine);
  for (auto& d : in.traffic.dims) {
    if (d.size <= 1) continue;
    d.bytes = S;
    d.calls = 0;
  }
  const double block = routed_reference_seconds(in.machine, in.traffic, in.block_slot);
  const double optimum = 2 * S / nv + 4.0 / 3 * S / port;
  EXPECT_NEAR(block, optimum, optimum * 1e-9);
  EXPECT_NEAR(brute_force_routed_hosts(in), optimum, optimum * 1e-9);
  const double lb = routed_lower_bound(in.machine, in.traffic);
  EXPECT_NEAR(lb, optimum, optimum * 1e-9)
      << "the tree case without the member's peers: " << 2 * S / nv + S / port << " s";
}

// The member floors against brute force where they count: 12 ranks on three hosts of 4 GPUs (one
// leaf, or a leaf each at 1:1 to 8:1, half of them hashing onto one or two ECMP cables), three
// dims of which one or two are all-reduces of 3 (a two-node tree puts 2 of 3 on one host; the
// routed bound's check, the public bound's as the framework's defaults issue them), in either
// order, random bytes per dim, some draws with latency.
TEST(BoundTest, MemberPeersBoundAtMostOptimumOnTwelveRanks) {
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    std::mt19937_64 g(seed * 7919);
    auto below = [&](int n) { return static_cast<int>(g() % static_cast<std::uint64_t>(n)); };
    const double oversub[] = {1, 2, 4, 8};
    const double leaf_oversub = oversub[below(4)];  // drawn first: see draw_order_note
    const int per_leaf = below(2) == 0 ? 3 : 1;
    FatTreeSpec spec = tiny(3, per_leaf, 4, leaf_oversub);
    if (below(2) == 0) spec = ecmp(spec, 1 + below(2));
    const double nvlink[] = {20, 60, 150};
    spec.nvlink_gbps = nvlink[below(3)];
    const char* layouts[] = {"tp=2,cp=2,dp=3", "tp=3,cp=2,dp=2", "tp=2,dp=3,pp=2", "tp=3,dp=4"};
    std::string layout = layouts[below(4)];
    if (below(2) == 0) layout += ",order=dp-pp-cp-tp";
    Small sm = small(spec, {4, 4, 4}, layout);
    Instance in = make_instance(sm.fabric, sm.nodes, sm.request);
    Instance routed = routed_instance(sm);
    const bool latency = below(3) == 0;
    for (std::size_t i = 0; i < in.traffic.dims.size(); ++i) {
      const double scale = 0.25 + 0.25 * below(12);
      const double calls = latency ? 1 + below(20000) : 0;
      for (Instance* x : {&in, &routed}) {
        x->traffic.dims[i].bytes *= scale;
        if (latency) x->traffic.dims[i].calls = calls;
      }
    }
    const double best = brute_force_hosts(in);
    const double lb = lower_bound(in.machine, in.traffic);
    EXPECT_LE(lb, best * (1 + 1e-12)) << "seed " << seed << ": " << layout;
    const double routed_best = brute_force_routed_hosts(routed);
    const double routed_lb = routed_lower_bound(routed.machine, routed.traffic);
    EXPECT_LE(routed_lb, routed_best * (1 + 1e-12)) << "seed " << seed << " (routed): " << layout;
    std::cout << "  seed " << seed << " " << layout << ": bound " << lb / best * 100
              << "% of the optimum, routed " << routed_lb / routed_best * 100 << "%\n";
  }
}

// Latency above a leaf against brute force: 8 ranks on whole hosts of 2 or 4 GPUs under leaves of
// one or two hosts (sometimes pods of two leaves), rails, ECMP or two NICs now and then, random
// bytes and calls so that latency and bandwidth both count. The routed bound's latency walk
// (level_latency_bound()) against the routed model's latency by level reached; the public bound,
// whose latency floors are NCCL's, against the cost model.
TEST(BoundTest, LevelLatencyBoundAtMostOptimumOnRandomInstances) {
  for (std::uint64_t seed = 1; seed <= instances(12u); ++seed) {
    std::mt19937_64 g(seed * 7727);
    auto below = [&](int n) { return static_cast<int>(g() % static_cast<std::uint64_t>(n)); };
    const int gpus = below(3) == 0 ? 4 : 2;
    const int hosts = 8 / gpus;
    const int oversub = 1 + below(4);  // drawn before per_leaf: see draw_order_note
    const int per_leaf = 1 + below(2);
    FatTreeSpec spec = tiny(hosts, per_leaf, gpus, oversub);
    if (below(2) == 0) spec = three_tier(spec, 2, 1 + below(3));
    spec = vary(spec, g, 5);
    const char* layouts[] = {"tp=2,dp=4",      "tp=4,dp=2", "tp=2,cp=2,dp=2",
                             "tp=2,pp=2,dp=2", "ep=4,dp=2", "tp=2,ep=2,dp=2"};
    std::string layout = layouts[below(6)];
    if (below(2) == 0) layout += ",order=dp-pp-ep-cp-tp";
    Small sm = small(spec, std::vector<int>(static_cast<std::size_t>(hosts), gpus), layout);
    Instance in = make_instance(sm.fabric, sm.nodes, sm.request);
    Instance routed = routed_instance(sm);
    draw_bytes_and_calls(in, routed, g);
    ASSERT_LE(lower_bound(in.machine, in.traffic), brute_force(in) * (1 + 1e-12))
        << "seed " << seed << ": " << layout;
    ASSERT_LE(routed_lower_bound(routed.machine, routed.traffic),
              brute_force_routed(routed) * (1 + 1e-12))
        << "seed " << seed << " (routed): " << layout;
  }
}

// Middle stages worked by hand in the routed model: four hosts of two GPUs, tp=2 x pp=4. Every
// host holds a TP pair
// at best (NVLink), so the stages lie on four hosts and a middle stage receives the pipeline's S
// from both neighbours by its own port: 2S/port. The walk alone speaks for an end stage (S/port)
// since it cannot choose the rank; walked from a middle stage it reaches the optimum.
TEST(BoundTest, MiddleStagesBoundThePipelineAtTwoNeighbours) {
  Small s = small(tiny(4, 4, 2, 1), {2, 2, 2, 2}, "tp=2,pp=4");
  const Instance in = make_instance(s.fabric, s.nodes, s.request);
  const double best = brute_force_routed(in);
  const double lb = routed_lower_bound(in.machine, in.traffic);
  EXPECT_LE(lb, best * (1 + 1e-12));
  EXPECT_GE(lb, best * (1 - 1e-9)) << "the bound should reach the optimum: " << lb << " < " << best;
  // A pipeline of two stages has no middle stage: the same hosts with tp=2 x pp=2 x dp=2 still
  // hold the bound below the optimum (nothing here may claim the middle floor), the public bound
  // in the cost model too.
  Small two = small(tiny(4, 4, 2, 1), {2, 2, 2, 2}, "tp=2,pp=2,dp=2");
  const Instance in2 = make_instance(two.fabric, two.nodes, two.request);
  EXPECT_LE(routed_lower_bound(in2.machine, in2.traffic), brute_force_routed(in2) * (1 + 1e-12));
  EXPECT_LE(lower_bound(in2.machine, in2.traffic), brute_force(in2) * (1 + 1e-12));
}

// Middle stages against brute force: pipelines of 3, 4 or 8 stages over up to 8 ranks on hosts
// of 1 to 4 GPUs lending some or all of them (so that places of several sizes hold the middle
// stages), leaves of one to three hosts, pods now and then, rails, ECMP, two NICs, NVLink
// domains; random bytes and calls so that latency and bandwidth both count. The public bound
// against the cost model, and the routed bound, whose middle-stage floors these are, against the
// routed model (tp and dp all-reduces): at its optimum on some, or the floors do not lift it.
TEST(BoundTest, MiddleStageBoundAtMostOptimumOnRandomInstances) {
  int checked = 0, at_optimum = 0;
  for (std::uint64_t seed = 1; checked < instances(60); ++seed) {
    ASSERT_LT(seed, 1000u) << "too few valid instances drawn";
    std::mt19937_64 g(seed * 6151);
    auto below = [&](int n) { return static_cast<int>(g() % static_cast<std::uint64_t>(n)); };
    const int gpus = 1 + below(4);
    const int oversub = 1 + below(4);  // drawn before per_leaf: see draw_order_note
    const int per_leaf = 1 + below(3);
    FatTreeSpec spec = tiny(8, per_leaf, gpus, oversub);
    if (below(3) == 0) spec = three_tier(spec, 2, 1 + below(3));
    spec = vary(spec, g, 4);
    if (below(5) == 0) spec = nvl(spec, 2 + below(2));
    int world = 0;
    const std::vector<int> tasks = draw_tasks(g, spec, 3, &world);
    std::vector<std::string> layouts;
    if (world % 3 == 0) layouts = {"pp=3,dp=auto", "tp=2,pp=3,dp=auto", "pp=3,tp=2,dp=auto"};
    if (world % 4 == 0) layouts = {"pp=4,dp=auto", "tp=2,pp=4,dp=auto", "pp=4,cp=2,dp=auto"};
    if (world == 8 && below(4) == 0) layouts = {"pp=8"};
    if (layouts.empty()) continue;
    std::string layout = layouts[static_cast<std::size_t>(below(static_cast<int>(layouts.size())))];
    if (below(3) == 0) layout += ",order=pp-dp-cp-tp";
    Small sm = small(spec, tasks, layout);
    Instance in = make_instance(sm.fabric, sm.nodes, sm.request);
    Instance routed = routed_instance(sm);
    if (below(2) == 0) draw_bytes_and_calls(in, routed, g);
    const double best = brute_force(in);
    const double lb = lower_bound(in.machine, in.traffic);
    ASSERT_LE(lb, best * (1 + 1e-12))
        << "seed " << seed << ": " << layout << " on " << world << " GPUs";
    const double routed_best = brute_force_routed(routed);
    const double routed_lb = routed_lower_bound(routed.machine, routed.traffic);
    ASSERT_LE(routed_lb, routed_best * (1 + 1e-12))
        << "seed " << seed << " (routed): " << layout << " on " << world << " GPUs";
    if (routed_lb >= routed_best * (1 - 1e-9)) ++at_optimum;
    ++checked;
  }
  std::cout << "  routed bound at the routed optimum on " << at_optimum << " of " << checked
            << "\n";
  // The middle stages must be what lifts some of them, or this test does not check them: 24 at the
  // time of writing, 20 without the walk from a middle stage (lower_bound.cc), 22 without the
  // middle-stage floor of host_floors() (21 and 17 in the cost model these were once checked in).
  EXPECT_GE(at_optimum, instances(22));
}

// Hashed flows in the bound (ecmp_exit(), ecmp_case_bound()) against brute force: every tier ECMP,
// hosts of 1 to 4 GPUs under leaves of 1 to 3 hosts, pods now and then, rails, two NICs, 6 or 8
// ranks in rings, all-to-alls and pipelines, random bytes per dim. The public bound against the
// cost model, and the routed bound, whose parts these are, against the routed model (tp and dp
// all-reduces), at its optimum on some.
TEST(BoundTest, EcmpFlowBoundAtMostOptimumOnRandomInstances) {
  int checked = 0, at_optimum = 0;
  for (std::uint64_t seed = 1; checked < instances(60); ++seed) {
    ASSERT_LT(seed, 1000u) << "too few valid instances drawn";
    std::mt19937_64 g(seed * 7919);
    auto below = [&](int n) { return static_cast<int>(g() % static_cast<std::uint64_t>(n)); };
    const int gpus = 1 + below(4);
    const int oversub = 1 + below(3);  // drawn before per_leaf: see draw_order_note
    const int per_leaf = 1 + below(3);
    FatTreeSpec spec = tiny(8, per_leaf, gpus, oversub);
    if (below(3) == 0) spec = three_tier(spec, 2, 1 + below(3));
    const int cables = 1 + below(2);  // drawn before vary's draws: see draw_order_note
    spec = ecmp(vary(spec, g, 4), cables);
    int world = 0;
    const std::vector<int> tasks = draw_tasks(g, spec, 4, &world);
    std::vector<std::string> layouts;
    if (world == 6) layouts = {"tp=2,dp=3", "tp=3,dp=2", "ep=3,dp=2", "cp=2,dp=3", "pp=2,dp=3"};
    if (world == 8) {
      layouts = {"tp=2,dp=4", "tp=4,dp=2", "tp=2,cp=2,dp=2", "ep=4,dp=2",
                 "tp=2,ep=4", "dp=8",      "cp=2,pp=2,dp=2"};
    }
    if (layouts.empty()) continue;
    const std::string layout =
        layouts[static_cast<std::size_t>(below(static_cast<int>(layouts.size())))];
    Small sm = small(spec, tasks, layout);
    Instance in = make_instance(sm.fabric, sm.nodes, sm.request);
    Instance routed = routed_instance(sm);
    for (std::size_t i = 0; i < in.traffic.dims.size(); ++i) {
      const double scale = 0.01 * (1 + below(100));
      in.traffic.dims[i].bytes *= scale;
      routed.traffic.dims[i].bytes *= scale;
    }
    const double best = brute_force(in);
    const double lb = lower_bound(in.machine, in.traffic);
    ASSERT_LE(lb, best * (1 + 1e-12))
        << "seed " << seed << ": " << layout << " on " << world << " GPUs";
    const double routed_best = brute_force_routed(routed);
    const double routed_lb = routed_lower_bound(routed.machine, routed.traffic);
    ASSERT_LE(routed_lb, routed_best * (1 + 1e-12))
        << "seed " << seed << " (routed): " << layout << " on " << world << " GPUs";
    if (routed_lb >= routed_best * (1 - 1e-6)) ++at_optimum;
    ++checked;
  }
  std::cout << "  routed bound at the routed optimum on " << at_optimum << " of " << checked
            << "\n";
  // 36 at the time of writing, 34 without the cases (ecmp_case_bound()); in the cost model these
  // were once checked in, 26 (261 of 900 over more seeds, none above the optimum), 25 without the
  // cases, 22 with every uplink priced at the most flows its ranks could send.
  EXPECT_GE(at_optimum, instances(36));
}

// An all-to-all cut by a place sends its pairs across, in the routed model: eight 1-GPU hosts
// under two leaves of four at 8:1 (a leaf's uplink is 4 x 25 / 8 = 12.5 GB/s), ep=4 x dp=2. A
// leaf holds four ranks: a whole ep group (the four dp pairs cross), two of each ep group (2 x 2 x
// 2 pairs each send S/4: 2S, where counting cut groups at (n - 1) S / n charged 1.5S), or three
// and one (6 pairs, and two dp pairs). Charged by pairs the whole cuts reach the optimum (51.98 s,
// but for the spine's latency on dp's calls, where the bound charges a leaf's: 0.2 ms; about 10%
// less counting groups).
TEST(BoundTest, WholeCutsChargeAnAllToAllItsPairsAcrossTheCut) {
  Small s = small(tiny(8, 4, 1, 8), std::vector<int>(8, 1), "ep=4,dp=2");
  const Instance in = routed_instance(s);
  const double best = brute_force_routed(in);
  const double lb = routed_lower_bound(in.machine, in.traffic);
  EXPECT_LE(lb, best * (1 + 1e-12));
  EXPECT_GE(lb, best * (1 - 1e-5)) << "the bound should reach the optimum: " << lb << " < " << best;
}

// Whole cuts counting all-to-alls by their pairs, and counting fewer dims than a job has (as on
// jobs of four or more, lower_bound_counting), against brute force: 6 to 8 ranks on hosts of one
// or two GPUs under oversubscribed leaves of two to four hosts, pods now and then, ECMP, rails. The
// public bound against the cost model, the routed bound (tp and dp all-reduces) against the routed
// model.
TEST(BoundTest, WholeCutsOfPairsAndUncountedDimsAtMostOptimum) {
  int checked = 0;
  for (std::uint64_t seed = 1; checked < instances(40); ++seed) {
    ASSERT_LT(seed, 1000u) << "too few valid instances drawn";
    std::mt19937_64 g(seed * 4243);
    auto below = [&](int n) { return static_cast<int>(g() % static_cast<std::uint64_t>(n)); };
    const int gpus = 1 + below(2);
    const int oversub = 2 + below(7);  // drawn before per_leaf: see draw_order_note
    const int per_leaf = (2 + below(3)) / gpus + 1;
    FatTreeSpec spec = tiny(8 / gpus, per_leaf, gpus, oversub);
    if (below(3) == 0) spec = three_tier(spec, 2, 1 + below(3));
    spec = vary(spec, g, 4);
    const char* layouts[] = {"ep=4,dp=2", "tp=2,ep=4",      "ep=8",           "cp=2,ep=4",
                             "ep=4,pp=2", "tp=2,ep=2,dp=2", "cp=2,ep=2,dp=2", "tp=2,cp=2,dp=2"};
    std::string layout = layouts[below(8)];
    if (below(2) == 0) layout += ",order=dp-pp-ep-cp-tp";
    Small sm = small(spec, std::vector<int>(static_cast<std::size_t>(8 / gpus), gpus), layout);
    Instance in = make_instance(sm.fabric, sm.nodes, sm.request);
    Instance routed = routed_instance(sm);
    if (below(2) == 0) {
      for (std::size_t i = 0; i < in.traffic.dims.size(); ++i) {
        const double scale = 0.01 * (1 + below(100));
        in.traffic.dims[i].bytes *= scale;
        routed.traffic.dims[i].bytes *= scale;
      }
    }
    const double best = brute_force(in);
    ASSERT_LE(lower_bound(in.machine, in.traffic), best * (1 + 1e-12))
        << "seed " << seed << ": " << layout;
    const double routed_best = brute_force_routed(routed);
    for (std::size_t counted : {1, 2}) {
      ASSERT_LE(lower_bound_counting(in.machine, in.traffic, counted), best * (1 + 1e-12))
          << "seed " << seed << ": " << layout << ", counting " << counted;
    }
    for (std::size_t counted : {1, 2, 3}) {
      ASSERT_LE(routed_lower_bound(routed.machine, routed.traffic, true, counted),
                routed_best * (1 + 1e-12))
          << "seed " << seed << " (routed): " << layout << ", counting " << counted;
    }
    ++checked;
  }
}

// ECMP in the routed bound, worked by hand in the routed model: 2 leaves of 1 host, 1 GPU and one
// 25 GB/s NIC each (24 as NCCL's channels run it); each leaf's 25 GB/s uplink is 4 links (one per
// spine). dp=2 must cross: one flow of S (a two-host
// tree) out of each leaf, which ECMP hashes onto one 6.25 GB/s link, E = 4: S / 6.25 GB/s. The
// bound used to charge the uplink its mean load, S / 25 GB/s; a leaf's ranks can send at most
// one flow each up, so its exit load is charged at least E(1 flow, 4 links) = 4.
TEST(BoundTest, BoundChargesEcmpsWorstLinkToFlowsThatMustCrossIt) {
  FatTreeSpec spec = tiny(2, 1, 1, 1);
  spec.routing = topology::Routing::kEcmp;
  Small s = small(spec, {1, 1}, "dp=2");
  Instance in = routed_instance(s);
  ASSERT_TRUE(in.machine.levels[0].ecmp);
  ASSERT_EQ(in.machine.levels[0].uplink_links[0], 4u);
  ASSERT_DOUBLE_EQ(in.machine.levels[0].uplink_gbps[0], 25.0);
  const double S = dim(in, "dp").bytes;
  const double best = brute_force_routed(in);
  const double lb = routed_lower_bound(in.machine, in.traffic);
  EXPECT_LE(lb, best * (1 + 1e-12));
  EXPECT_GE(lb, 4 * S / 25e9) << "bound " << lb << " s, optimum " << best << " s";
}

// ECMP's factor at the flows a cut really sends, worked by hand in the routed model: 4 hosts of 1
// GPU and one 25 GB/s NIC, leaves of 2 hosts whose 50 GB/s uplinks hash onto 4 links of 12.5 GB/s.
// dp=4 is a ring over the 4 hosts (no tree at 4 nodes); every placement puts 2 members in each
// leaf. In leaf order the ring leaves each leaf once: one flow of V, E(1 flow) = 4 (it runs on one
// link), V / 12.5 GB/s. Alternating leaves sends two flows of V out of each: 2 V x E(2 flows) / 50
// GB/s, slower. The bound used to price the uplink at the most flows the leaf's 2 ranks could send
// (2, E = 2.26 here); but each flow of a ring's hop carries V / (its group's members on the host),
// V here, so a leaf that sends u bytes up sends at most u / V flows, and the least u is V.
TEST(BoundTest, BoundCountsTheFlowsARingCanHashOntoAnEcmpUplink) {
  FatTreeSpec spec = ecmp(tiny(4, 2, 1, 1), 1);
  Small s = small(spec, {1, 1, 1, 1}, "dp=4");
  Instance in = make_instance(s.fabric, s.nodes, s.request);
  ASSERT_TRUE(in.machine.levels[0].ecmp);
  ASSERT_EQ(in.machine.levels[0].uplink_links[0], 4u);
  ASSERT_DOUBLE_EQ(in.machine.levels[0].uplink_gbps[0], 50.0);
  const DimTraffic& dp = dim(in, "dp");
  const double V = 2.0 * 3 / 4 * dp.bytes;
  const double best = brute_force_routed(in);
  const double block = routed_reference_seconds(in.machine, in.traffic, in.block_slot);
  const double latency = block - V / 12.5e9;  // the uplink is block's bottleneck
  EXPECT_NEAR(best, block, best * 1e-12);
  EXPECT_GT(latency, 0);
  const double lb = routed_lower_bound(in.machine, in.traffic);
  EXPECT_LE(lb, best * (1 + 1e-12));
  // Within a few microseconds, a spine's latency (the bound charges a leaf's); 57% at the most
  // flows.
  EXPECT_GE(lb, best * (1 - 1e-6)) << "bound " << lb << " s, optimum " << best << " s";
}

// The same for an all-to-all: 2 hosts of 2 GPUs, one 25 GB/s NIC each, a leaf each whose 50 GB/s
// uplink hashes onto 4 links. ep=4 puts 2 members on each host, and each sends S/4 to each of
// the 2 members across: 4 flows of S/4 leave each leaf, E(4 flows) = 1.89, S x 1.89 / 50 GB/s,
// the step's bottleneck (a NIC carries S/2 at 25 GB/s). The most flows 2 ranks could send is 6
// (3 peers each, E = 1.73); the cut's pairs carry S, and at S/4 a flow that is 4 flows.
TEST(BoundTest, BoundCountsTheFlowsAnAllToAllCanHashOntoAnEcmpUplink) {
  FatTreeSpec spec = ecmp(tiny(2, 1, 2, 1), 1);
  Small s = small(spec, {2, 2}, "ep=4");
  Instance in = make_instance(s.fabric, s.nodes, s.request);
  ASSERT_TRUE(in.machine.levels[0].ecmp);
  ASSERT_EQ(in.machine.levels[0].uplink_links[0], 4u);
  ASSERT_DOUBLE_EQ(in.machine.levels[0].uplink_gbps[0], 50.0);
  const double best = brute_force(in);
  const double lb = lower_bound(in.machine, in.traffic);
  EXPECT_LE(lb, best * (1 + 1e-12));
  // Within 0.02%, the spine's latency on ep's every call (the bound charges a leaf's); 11.97 s
  // (91%) at the most flows.
  EXPECT_GE(lb, best * (1 - 2e-4)) << "bound " << lb << " s, optimum " << best << " s";
}

// Which hops can be trees, by the members a host holds, in the routed model: four hosts of 2 GPUs,
// one 25 GB/s NIC each, leaves of two hosts whose 100 GB/s uplinks hash onto 4 links. tp=2 x dp=4
// all-reduces: block keeps
// each TP pair on its host and runs DP as a ring over the four hosts (V = 1.5 S a hop); each
// leaf sends 2 flows of V up, E(2 flows, 4 links) = 2.26, and that is optimal. The bound used to
// price DP as a two-host tree (S a hop) with TP still inside hosts, which no placement is: a DP
// group on two hosts takes 2 members a host, and a host of 2 GPUs then splits its TP pair. With
// at most one member a host (the ECMP cases' kappa = 1) every DP group is a ring; with two, TP
// leaves its hosts. The bound reaches the optimum (it was 90% of it with DP priced as trees).
TEST(BoundTest, EcmpCasesSeeThatFewMembersAHostMakeRingsNotTrees) {
  Small s = small(ecmp(tiny(4, 2, 2, 1), 1), {2, 2, 2, 2}, "tp=2,dp=4");
  Instance in = routed_instance(s);
  ASSERT_EQ(in.machine.levels[0].uplink_links[0], 4u);
  ASSERT_DOUBLE_EQ(in.machine.levels[0].uplink_gbps[0], 100.0);
  ASSERT_TRUE(dim(in, "dp").all_reduce);
  const double best = brute_force_routed(in);
  EXPECT_NEAR(routed_reference_seconds(in.machine, in.traffic, in.block_slot), best, best * 1e-12);
  const double lb = routed_lower_bound(in.machine, in.traffic);
  EXPECT_LE(lb, best * (1 + 1e-12));
  // Within a few microseconds, a spine's latency (the bound charges a leaf's).
  EXPECT_GE(lb, best * (1 - 1e-5)) << "bound " << lb << " s, optimum " << best << " s";
}

// Partner floors on islands, worked by hand and checked by brute force in the routed model. Hosts
// of 2 GPUs under one leaf, NVLink domains of 2 hosts; the step takes hosts 0, 2, 3 and 4: islands
// of 2 slots (host 0; its domain's other host is outside the step), 4 (hosts 2-3) and 2 (host 4);
// tp=2, dp=4 all-reduces. On a lone host, tp whole leaves one member of each of two DP groups. As
// a two-island tree, such a group has its other three members on one island, each in its own TP
// group, so some rank there has no TP peer on its island (4 slots over 3 members): TP leaves its
// island, far slower than a DP ring. The walk without partner floors took tp whole plus DP's tree
// (S_tp / nv + S_dp / port, 3.83 s); with them the bound is the optimum, 5.18 s: TP on NVLink
// (V_tp = S_tp) and DP rings whose lone members send V_dp = 1.5 S_dp through a port, plus each
// dim's latency (TP's on NVLink, DP's under the leaf).
TEST(BoundTest, IslandWalkPricesATreesPartnerDomain) {
  Small s = small(nvl(tiny(8, 8, 2, 1), 2), {2, 0, 2, 2, 2}, "tp=2,dp=4");
  const Instance in = routed_instance(s);
  const Machine& m = in.machine;
  ASSERT_EQ(m.reach_latency_us.size(), 3u);  // NVLink, the leaf, above it
  const DimTraffic &tp = dim(in, "tp"), &dp = dim(in, "dp");
  const double nv = 150e9, port = port_Bps(m);
  const double optimum =
      tp.bytes / nv + 1.5 * dp.bytes / port +
      (tp.calls * 2 * m.reach_latency_us[0] + dp.calls * 6 * m.reach_latency_us[1]) * 1e-6;
  const double best = brute_force_routed(in);
  EXPECT_NEAR(best, optimum, optimum * 1e-9);
  EXPECT_NEAR(routed_lower_bound(m, in.traffic), best, best * 1e-9)
      << "TP whole and DP's tree: " << tp.bytes / nv + dp.bytes / port << " s";
}

// Two-island trees against brute force, where the island walk's partner floors decide: hosts of
// 2 GPUs in NVLink domains of 2 or 3 hosts, 8 ranks on hosts lending 0-2 GPUs (islands of
// uneven size), a layout with an all-reduce of 2 to 4 members beside another dim, random bytes
// per dim (so that either a tree or its partner's other dims can be what binds), NVLink fast or
// slow, and each instance again with latency dominating (the all-reduces for the routed bound, the
// public bound as the framework's defaults issue them). IslandWalkPricesATreesPartnerDomain is one
// such instance worked by hand.
TEST(BoundTest, IslandTreeBoundAtMostOptimumOnRandomInstances) {
  int checked = 0;
  for (std::uint64_t seed = 1; checked < instances(40); ++seed) {
    ASSERT_LT(seed, 400u) << "too few valid instances drawn";
    std::mt19937_64 g(seed * 6151);
    auto below = [&](int n) { return static_cast<int>(g() % static_cast<std::uint64_t>(n)); };
    const int domain = 2 + below(2);  // drawn before oversub: see draw_order_note
    const int oversub = 1 + below(3);
    FatTreeSpec spec = nvl(tiny(7, 7, 2, oversub), domain);
    spec = vary(spec, g, 6);
    std::vector<int> tasks;
    int world = 0;
    for (int h = 0; h < spec.hosts && world < 8; ++h) {
      const int k = std::min(below(4) == 0 ? below(2) : 2, 8 - world);
      tasks.push_back(k);
      world += k;
    }
    if (world != 8) continue;
    const char* layouts[] = {"tp=2,dp=4", "tp=4,dp=2", "tp=2,cp=2,dp=2", "ep=2,dp=4",
                             "tp=2,pp=2,dp=2"};
    std::string layout = layouts[below(5)];
    if (below(3) == 0) layout += ",order=dp-pp-ep-cp-tp";
    Small sm = small(spec, tasks, layout);
    Instance in = make_instance(sm.fabric, sm.nodes, sm.request);
    Instance routed = routed_instance(sm);
    for (std::size_t i = 0; i < in.traffic.dims.size(); ++i) {
      const double scale = 0.125 * (1 + below(16));
      in.traffic.dims[i].bytes *= scale;
      routed.traffic.dims[i].bytes *= scale;
    }
    ASSERT_NO_FATAL_FAILURE(expect_bounds_at_most_optima_both_ways(
        in, routed, g, "seed " + std::to_string(seed) + ": " + layout));
    ++checked;
  }
}

// Whole cuts at full size, in the routed model: 32 hosts of 8 GPUs under two 16-host leaves at
// 4:1, tp=8, cp=4, dp=8 (tp and dp all-reduces; cp a quarter of tp's bytes and dp one call a step,
// the figures this case was worked with). A leaf holds half the job, so it cuts all the DP groups,
// all the CP groups or all the TP groups (docs/mapper.md, "Whole cuts"); the walk and the joint
// term alone price a mixture of those cuts and stop 13% short. With the whole cuts the bound
// reaches the placement the mapper found when this was its model, which is then optimal: each
// host holds half of a TP group (a two-host tree) for two CP coordinates, and each leaf half the
// DP groups' members (2.0074 s; Slurm's block order, TP whole in each host, takes 2.3734 s).
TEST(BoundTest, WholeCutsProveAPlacementOptimalOnTwoLeavesAtFourToOne) {
  Small s = small(tiny(32, 16, 8, 4), std::vector<int>(32, 8), "tp=8,cp=4,dp=auto");
  Instance in = routed_instance(s);
  ASSERT_EQ(in.machine.slots.size(), 256u);  // by host, then GPU: host h's GPU g is 8 h + g
  const double s_tp = dim(in, "tp").bytes, tp_calls = dim(in, "tp").calls;
  for (auto& d : in.traffic.dims) {
    if (d.name == "cp") {
      d.bytes = s_tp / 4;
      d.calls = tp_calls / 2;
    }
    if (d.name == "dp") d.calls = 1;
  }
  // Rank tp + 8 cp + 32 dp on host 4 dp + 2 (cp / 2) + tp / 4, GPU tp % 4 + 4 (cp % 2).
  std::vector<std::uint32_t> trees(256);
  for (std::uint32_t r = 0; r < 256; ++r) {
    const std::uint32_t tp = r % 8, cp = r / 8 % 4, dp = r / 32;
    trees[r] = (4 * dp + 2 * (cp / 2) + tp / 4) * 8 + tp % 4 + 4 * (cp % 2);
  }
  const double best = routed_reference_seconds(in.machine, in.traffic, trees);
  const double block = routed_reference_seconds(in.machine, in.traffic, in.block_slot);
  const double lb = routed_lower_bound(in.machine, in.traffic);
  const double without = routed_lower_bound(in.machine, in.traffic, false);
  EXPECT_LT(best, block);
  EXPECT_LE(lb, best * (1 + 1e-12));
  // But for microseconds of latency (a spine's where the bound charges a leaf's).
  EXPECT_GT(lb, best * (1 - 1e-5)) << "bound " << lb << " s, placement " << best << " s";
  EXPECT_LT(without, 0.9 * lb) << "without the whole cuts";
  std::cout << "  placement " << best << " s, block " << block << " s, bound " << lb
            << " s, without whole cuts " << without << " s\n";
}

}  // namespace
}  // namespace topoaware::mapper

namespace topoaware::mapper {
namespace {

// Hosts of 4 GPUs lending 4, 2 and 2 for tp=4,dp=2: one tp group fits a host, the other must
// span two and runs NCCL between hosts, slower than inside one. The slowest group sets the dim's
// NCCL time, so the bound takes tp at the NCCL time of its fastest split shape (any uneven split,
// the NICs of the smaller side) and dp at its own bound: 7.230 s against the optimum's 7.234 s,
// where tp's floor over every shape (one host included) left it at 7.162 s. Lending 3, 3 and 2,
// no host holds a group and the floor already started at two hosts; lending 4 and 4, no group
// splits and the bound stays inside hosts.
TEST(BoundTest, AGroupNoIslandCanHoldRunsAtNcclsTimeBetweenIslands) {
  for (const std::vector<int>& lend : {std::vector<int>{4, 2, 2}, std::vector<int>{3, 3, 2}}) {
    Small s = small(tiny(3, 3, 4, 1), lend, "tp=4,dp=2");
    Instance in = make_instance(s.fabric, s.nodes, s.request);
    const double best = brute_force(in);
    const double lb = lower_bound(in.machine, in.traffic);
    EXPECT_LE(lb, best * (1 + 1e-9));
    EXPECT_GE(lb, 0.998 * best) << "bound " << lb << " s, optimum " << best << " s, lending "
                                << lend[0] << "," << lend[1] << "," << lend[2];
  }
  Small whole = small(tiny(3, 3, 4, 1), {4, 4, 0}, "tp=4,dp=2");
  Instance in = make_instance(whole.fabric, whole.nodes, whole.request);
  EXPECT_LT(lower_bound(in.machine, in.traffic), 0.5 * 7.2);
}

}  // namespace
}  // namespace topoaware::mapper
