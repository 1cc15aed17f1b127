// A site's calibration in the cost model (calibration.h): a group of a measured (class, tier)
// weighs 1 / bandwidth on every resource and in NCCL's own time, its latency x latency; groups of
// other classes and tiers are untouched; the lower bound stays a bound; refinement's incremental
// cost agrees with a full evaluation.
#include "topoaware/mapper/calibration.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "small_instances.h"
#include "topoaware/mapper/cost.h"
#include "topoaware/mapper/synthetic.h"

namespace topoaware::mapper {
namespace {

std::vector<std::uint32_t> block(const Instance& in) {
  return std::vector<std::uint32_t>(in.block_slot.begin(), in.block_slot.end());
}

// The class of the algorithm a report's dim runs ("Ring" -> its class).
std::size_t class_of(const DimCost& d) {
  const int c = calibration_class(d.nccl.empty() ? "p2p" : d.nccl);
  EXPECT_GE(c, 0) << d.nccl;
  return static_cast<std::size_t>(c);
}

const DimCost& dim(const CostReport& r, const char* name) {
  for (const auto& d : r.dims) {
    if (d.dim == name) return d;
  }
  ADD_FAILURE() << "no dim " << name;
  return r.dims.front();
}

TEST(CalibrationTest, NamesAndTiersReadBack) {
  for (std::size_t c = 0; c < kCalibrationClasses; ++c) {
    EXPECT_EQ(calibration_class(calibration_class_name(c)), static_cast<int>(c));
  }
  EXPECT_EQ(calibration_class("ring"), static_cast<int>(nccl::Algo::kRing));
  EXPECT_EQ(calibration_class("nvlstree"), static_cast<int>(nccl::Algo::kNvlsTree));
  EXPECT_EQ(calibration_class("NVLS_TREE"), static_cast<int>(nccl::Algo::kNvlsTree));
  EXPECT_EQ(calibration_class("COLLNET_DIRECT"), static_cast<int>(nccl::Algo::kCollNetDirect));
  EXPECT_EQ(calibration_class("RING_"), static_cast<int>(nccl::Algo::kRing));
  EXPECT_EQ(calibration_class("RIN"), -1);
  EXPECT_EQ(calibration_class("P2P"), static_cast<int>(kP2pClass));
  EXPECT_EQ(calibration_class("Butterfly"), -1);
  Tier t = Tier::kNvlink;
  EXPECT_TRUE(parse_tier("Spine", t));
  EXPECT_EQ(t, Tier::kSpine);
  EXPECT_FALSE(parse_tier("pod", t));
  Calibration c;
  EXPECT_FALSE(c.measured());
  EXPECT_DOUBLE_EQ(c.least_factor(), 1);
  c.at(kP2pClass, Tier::kLeaf) = {0.5, 3, 2};
  EXPECT_TRUE(c.measured());
  EXPECT_DOUBLE_EQ(c.least_factor(), 1);  // only slower
  c.at(0, Tier::kSpine) = {2, 0.8, 1};
  EXPECT_DOUBLE_EQ(c.least_factor(), 0.5);  // bandwidth 2: half the time
  EXPECT_EQ(describe(c),
            "model corrected by a calibration: Tree/spine bandwidth x2.00, latency x0.80 (1 run); "
            "p2p/leaf bandwidth x0.50, latency x3.00 (2 runs)");
}

// One all-reduce over two hosts under one leaf: every term of its time (routed loads, NCCL's own
// time, latency) is the group's, so bandwidth 0.5 and latency 2 double it exactly; an entry of
// another tier or class leaves it as it was.
TEST(CalibrationTest, AGroupOfTheMeasuredClassAndTierTakesItsFactors) {
  Small s = small(tiny(2, 2, 4, 1), {4, 4}, "dp=8");
  Instance in = make_instance(s.fabric, s.nodes, s.request);
  const CostReport plain = evaluate(in.machine, in.traffic, block(in));
  const DimCost& dp = dim(plain, "dp");
  ASSERT_EQ(dp.groups_in_leaf, 1);
  const std::size_t cls = class_of(dp);

  Instance other = in;
  other.traffic.calibration.at(cls, Tier::kSpine) = {0.5, 2, 1};
  other.traffic.calibration.at((cls + 1) % kCalibrationClasses, Tier::kLeaf) = {0.5, 2, 1};
  EXPECT_DOUBLE_EQ(evaluate(other.machine, other.traffic, block(other)).seconds, plain.seconds);

  Instance slow = in;
  slow.traffic.calibration.at(cls, Tier::kLeaf) = {0.5, 2, 3};
  const CostReport doubled = evaluate(slow.machine, slow.traffic, block(slow));
  EXPECT_NEAR(dim(doubled, "dp").seconds, 2 * dp.seconds, 1e-12 * dp.seconds);
  // The bytes the tiers carry are what the job sends, calibrated or not.
  ASSERT_EQ(doubled.tiers.size(), plain.tiers.size());
  for (std::size_t i = 0; i < plain.tiers.size(); ++i) {
    EXPECT_DOUBLE_EQ(doubled.tiers[i].bytes, plain.tiers[i].bytes) << plain.tiers[i].tier;
  }
  // Faster than modeled: bandwidth 4, latency 0.25 -> a quarter.
  Instance fast = in;
  fast.traffic.calibration.at(cls, Tier::kLeaf) = {4, 0.25, 1};
  EXPECT_NEAR(dim(evaluate(fast.machine, fast.traffic, block(fast)), "dp").seconds,
              dp.seconds / 4, 1e-12 * dp.seconds);
}

// tp inside each host and dp across two: a leaf entry changes dp only, an nvlink entry tp only.
TEST(CalibrationTest, EachDimTakesTheEntryOfWhereItsGroupsReach) {
  Small s = small(tiny(2, 2, 4, 1), {4, 4}, "tp=4,dp=2");
  Instance in = make_instance(s.fabric, s.nodes, s.request);
  const CostReport plain = evaluate(in.machine, in.traffic, block(in));
  const DimCost& tp = dim(plain, "tp");
  const DimCost& dp = dim(plain, "dp");
  ASSERT_EQ(tp.groups_in_host, 2);
  ASSERT_EQ(dp.groups_in_leaf, 4);

  Instance leaf = in;
  leaf.traffic.calibration.at(class_of(dp), Tier::kLeaf) = {0.5, 2, 1};
  const CostReport l = evaluate(leaf.machine, leaf.traffic, block(leaf));
  EXPECT_DOUBLE_EQ(dim(l, "tp").seconds, tp.seconds);
  EXPECT_NEAR(dim(l, "dp").seconds, 2 * dp.seconds, 1e-12 * dp.seconds);
  EXPECT_NEAR(l.raw_seconds, plain.raw_seconds + dp.seconds, 1e-12 * plain.raw_seconds);

  Instance nvl = in;
  nvl.traffic.calibration.at(class_of(tp), Tier::kNvlink) = {0.5, 2, 1};
  const CostReport n = evaluate(nvl.machine, nvl.traffic, block(nvl));
  EXPECT_NEAR(dim(n, "tp").seconds, 2 * tp.seconds, 1e-12 * tp.seconds);
  EXPECT_DOUBLE_EQ(dim(n, "dp").seconds, dp.seconds);
}

// Through plan(): the request's calibration reaches the traffic and the plan's assumptions say so.
TEST(CalibrationTest, TheRequestCarriesItAndTheAssumptionsSayIt) {
  Small s = small(tiny(2, 2, 4, 1), {4, 4}, "dp=8");
  s.request.calibration.source = "site.toml";
  s.request.calibration.at(static_cast<std::size_t>(nccl::Algo::kRing), Tier::kLeaf) = {0.8, 1.5,
                                                                                        4};
  const Instance in = make_instance(s.fabric, s.nodes, s.request);
  EXPECT_TRUE(in.traffic.calibration.measured());
  ASSERT_FALSE(in.machine.assumptions.empty());
  EXPECT_EQ(in.machine.assumptions.back(),
            "model corrected by site.toml: Ring/leaf bandwidth x0.80, latency x1.50 (4 runs)");
}

// The bound stays under every assignment's calibrated cost, whether the calibration slows groups
// (the uncalibrated bound) or speeds some up (the raw bound scaled, less the hidden windows), and
// the incremental cost refinement uses agrees with a full evaluation.
TEST(CalibrationTest, TheBoundHoldsAndIncrementalAgrees) {
  std::mt19937_64 g(7);
  for (int trial = 0; trial < 6; ++trial) {
    Small s = small(tiny(4, 2, 2, 2), {2, 2, 2, 2}, trial % 2 ? "tp=2,pp=2,dp=2" : "tp=2,dp=4");
    Instance in = make_instance(s.fabric, s.nodes, s.request);
    for (std::size_t c = 0; c < kCalibrationClasses; ++c) {
      for (Tier t : {Tier::kNvlink, Tier::kLeaf, Tier::kSpine}) {
        if (g() % 2) continue;
        // Trials 0-2 only slow groups down; 3-5 also speed some up.
        const double hi = trial < 3 ? 1.0 : 3.0;
        const double bw = 0.2 + (hi - 0.2) * static_cast<double>(g() % 1000) / 1000.0;
        const double lat = trial < 3 ? 1.0 + static_cast<double>(g() % 3)
                                     : 0.3 + static_cast<double>(g() % 30) / 10.0;
        in.traffic.calibration.at(c, t) = {bw, lat, 1};
      }
    }
    in.traffic.calibration.at(static_cast<std::size_t>(nccl::Algo::kRing), Tier::kLeaf) = {
        trial < 3 ? 0.5 : 2.0, 1, 1};
    const double bound = lower_bound(in.machine, in.traffic);
    const double best = brute_force(in);
    EXPECT_LE(bound, best * (1 + 1e-9)) << "trial " << trial;
    if (trial < 3) {
      EXPECT_GT(bound, 0) << "trial " << trial;
    }
    std::vector<std::uint32_t> a = block(in);
    IncrementalCost inc(in.machine, in.traffic, a);
    inc.exchange({{0, 5}, {2, 7}});
    std::swap(a[0], a[5]);
    std::swap(a[2], a[7]);
    const double full = evaluate_seconds(in.machine, in.traffic, a);
    EXPECT_NEAR(inc.seconds(), full, 1e-9 * full) << "trial " << trial;
  }
}

}  // namespace
}  // namespace topoaware::mapper
