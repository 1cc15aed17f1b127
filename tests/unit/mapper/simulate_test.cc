// replay(): the FIFO + EASY-backfill queue worked by hand on an 8-host fat tree (two leaves of
// 4 hosts, 8 GPUs each, 4:1 at the leaves), the same for every placer; sub-host jobs packed
// best-fit; --switches=1@300 waiting; run times stretched by the modeled slowdown.
#include "topoaware/mapper/simulate.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "topoaware/mapper/layout.h"
#include "topoaware/mapper/synthetic.h"
#include "topoaware/mapper/trace.h"
#include "topoaware/topology/fabric.h"
#include "topoaware/topology/node.h"

namespace topoaware::mapper {
namespace {

struct Cluster {
  topology::Fabric fabric;
  topology::NodeTopology node = make_node(8, 8, 450, 50);
};

// A fat tree of `hosts` hosts of 8 GPUs, `per_leaf` a leaf, `oversub`:1 at the leaves; three
// tiers with `leaves_per_pod` > 0.
Cluster fat_tree(int hosts, int per_leaf, double oversub = 4, int leaves_per_pod = 0) {
  FatTreeSpec s;
  s.hosts = hosts;
  s.hosts_per_leaf = per_leaf;
  s.leaf_oversub = oversub;
  s.leaves_per_pod = leaves_per_pod;
  return {make_fat_tree(s)};
}

// 8 hosts, two leaves of 4.
Cluster small() { return fat_tree(8, 4); }

const std::vector<Placer> kAll = {Placer::kFlat,  Placer::kTree,  Placer::kTreeSwitches,
                                  Placer::kBlock, Placer::kPlace, Placer::kPlaceLoad};

// Start time of each trace job (by its index), -1 for one that did not run.
std::vector<double> starts(const Replay& r, std::size_t n) {
  std::vector<double> out(n, -1);
  for (const JobOutcome& o : r.jobs) out[o.job] = o.start;
  return out;
}

Replay run(Cluster& c, const std::vector<TraceJob>& jobs, Placer p, double comm = 0) {
  ReplayOptions o;
  o.comm_fraction = comm;
  SlowdownModel model(c.fabric, c.node, 8);
  return replay(c.fabric, c.node, jobs, p, o, model);
}

TEST(Replay, FifoWithEasyBackfillForEveryPlacer) {
  // A takes 6 hosts until 100. B (4 hosts) waits: its reservation is at 100. C (2 hosts, ends at
  // 52) fits before it and backfills at 2. D (1 host until 552) starts when C ends at 52: at 100
  // B still has 7 hosts. E (2 hosts) queues behind B and starts with it at 100.
  // With --switches=1@300 no leaf holds A's 6 hosts: A waits until 300 and then spreads; C (at
  // 2) and D (at 52) leave A its 6 hosts and go first; B and E start when A ends at 400.
  const std::vector<TraceJob> jobs = {
      {"A", 0, 100, 48}, {"B", 1, 100, 32}, {"C", 2, 50, 16}, {"D", 3, 500, 8}, {"E", 4, 1000, 16}};
  Cluster c = small();
  for (Placer p : kAll) {
    const Replay r = run(c, jobs, p);
    const std::vector<double> want = p == Placer::kTreeSwitches
                                         ? std::vector<double>{300, 400, 2, 52, 400}
                                         : std::vector<double>{0, 100, 2, 52, 100};
    EXPECT_EQ(starts(r, jobs.size()), want) << to_string(p);
    EXPECT_EQ(r.too_large, 0u);
  }
}

TEST(Replay, BackfillNeverDelaysTheHeadsReservation) {
  // B wants 7 hosts at 100, leaving 1 spare: C (2 hosts, long) would delay it and waits until B
  // ends at 200; D behind C (2 hosts, ends at 53) fits before 100 and backfills at 3.
  // With --switches=1@300 A waits until 300 (no leaf holds 6 hosts), and C, long, goes at 2 since
  // it leaves A its 6 hosts; D would not (ends after A could start) and goes at 400 when A ends,
  // into the time B waits for C's hosts; B, larger than a leaf, past its wait, spreads at 1002.
  const std::vector<TraceJob> jobs = {{"A", 0, 100, 48},
                                      {"B", 1, 100, 56},
                                      {"C", 2, 1000, 16},
                                      {"D", 3, 50, 16},
                                      {"X", 5, 10, 128}};  // more GPUs than the cluster
  Cluster c = small();
  for (Placer p : kAll) {
    const Replay r = run(c, jobs, p);
    const std::vector<double> want = p == Placer::kTreeSwitches
                                         ? std::vector<double>{300, 1002, 2, 400, -1}
                                         : std::vector<double>{0, 100, 200, 3, -1};
    EXPECT_EQ(starts(r, jobs.size()), want) << to_string(p);
    EXPECT_EQ(r.too_large, 1u);
  }
}

TEST(Replay, PartsOfAHostArePackedBestFit) {
  // 4 GPUs on host 0; 2 more fit host 0's remaining 4 (fewest free that hold them); the next 4
  // do not fit host 0's 2 and take host 1; the last 2 fill host 0.
  const std::vector<TraceJob> jobs = {
      {"a", 0, 100, 4}, {"b", 0, 100, 2}, {"c", 0, 100, 4}, {"d", 0, 100, 2}};
  Cluster c = small();
  const Replay r = run(c, jobs, Placer::kTree);
  ASSERT_EQ(r.jobs.size(), 4u);
  const std::vector<std::vector<std::uint32_t>> want = {{0}, {0}, {1}, {0}};
  for (const JobOutcome& o : r.jobs) EXPECT_EQ(o.placed_on, want[o.job]) << jobs[o.job].id;
}

// GPUs held over time, worked by hand on the 64-GPU cluster: a 2-host job holds 16 GPUs for
// 0-100, a 4-GPU part of a host 10-60 and a 12-GPU job (two whole hosts: 16 held, since no one
// else can use the rest) 20-30. Fragmentation is sampled once per start.
TEST(Replay, UtilisationAndFragmentationOverTime) {
  const std::vector<TraceJob> jobs = {{"a", 0, 100, 16}, {"b", 10, 50, 4}, {"c", 20, 10, 12}};
  Cluster c = small();
  const Replay r = run(c, jobs, Placer::kTree);
  const std::vector<std::pair<double, double>> want = {
      {0, 16.0 / 64}, {10, 20.0 / 64}, {20, 36.0 / 64}, {30, 20.0 / 64}, {60, 16.0 / 64},
      {100, 0}};
  EXPECT_EQ(utilisation_over_time(r, jobs, 8), want);
  ASSERT_EQ(r.fragmentation_over_time.size(), 3u);
  EXPECT_EQ(r.fragmentation_over_time[0].first, 0);
  EXPECT_EQ(r.fragmentation_over_time[1].first, 10);
  EXPECT_EQ(r.fragmentation_over_time[2].first, 20);
  double sum = 0;
  for (const auto& [t, f] : r.fragmentation_over_time) {
    EXPECT_GE(f, 0);
    EXPECT_LE(f, 1);
    sum += f;
  }
  EXPECT_DOUBLE_EQ(sum, r.fragmentation_sum);
}

// Spread over two levels: on 8 hosts in 4 leaves of 2 and 2 pods of 2 leaves, flat gives a
// 6-host job hosts 0-5 (the first of one free run): 3 leaves in 2 pods; tree puts a 2-host job
// in one leaf, so one pod.
TEST(Replay, LeavesAndSpinesPerJob) {
  Cluster c = fat_tree(8, 2, 1, 2);
  const Replay flat = run(c, {{"a", 0, 100, 48}}, Placer::kFlat);
  ASSERT_EQ(flat.jobs.size(), 1u);
  EXPECT_EQ(flat.jobs[0].placed_on, (std::vector<std::uint32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(flat.jobs[0].leaves, 3u);
  EXPECT_EQ(flat.jobs[0].spines, 2u);
  const Replay tree = run(c, {{"b", 0, 100, 16}}, Placer::kTree);
  ASSERT_EQ(tree.jobs.size(), 1u);
  EXPECT_EQ(tree.jobs[0].leaves, 1u);
  EXPECT_EQ(tree.jobs[0].spines, 1u);
  const std::vector<TraceJob> jobs = {{"a", 0, 100, 48}};
  EXPECT_DOUBLE_EQ(summarize(flat, jobs).spines_mean, 2.0);
}

// Contention: on 12 hosts in 3 leaves of 4 (4:1: 400 GB/s up a leaf, 400 GB/s a host), flat
// puts 3, 2, 2 and 2-host jobs on hosts 0-2, 3-4, 5-6 and 7-8. b (3-4) and d (7-8) both cross
// leaf 1's uplink. b starts first, with no one else across: not shared. d starts next to b's
// host 4 in leaf 1, whose expected load (0.5 x 400 GB/s) plus d's 400 GB/s exceeds 400: d gets
// max(1 - 200/400, 400/600) = 2/3 of it and is charged for it. Off, nobody is.
TEST(Replay, JobsThatSpanLeavesShareTheirUplinks) {
  Cluster c = fat_tree(12, 4);
  const std::vector<TraceJob> jobs = {
      {"a", 0, 1000, 24}, {"b", 0, 1000, 16}, {"c", 0, 1000, 16}, {"d", 0, 1000, 16}};
  ReplayOptions o;
  o.comm_fraction = 0.5;
  SlowdownModel model(c.fabric, c.node, 8);
  const Replay on = replay(c.fabric, c.node, jobs, Placer::kFlat, o, model);
  ASSERT_EQ(on.jobs.size(), 4u);
  std::vector<const JobOutcome*> by(4);
  for (const JobOutcome& j : on.jobs) by[j.job] = &j;
  EXPECT_EQ(by[1]->placed_on, (std::vector<std::uint32_t>{3, 4}));
  EXPECT_EQ(by[3]->placed_on, (std::vector<std::uint32_t>{7, 8}));
  EXPECT_FALSE(by[0]->shared);
  EXPECT_FALSE(by[1]->shared);
  EXPECT_FALSE(by[2]->shared);  // in one leaf
  EXPECT_TRUE(by[3]->shared);
  EXPECT_EQ(summarize(on, jobs).shared, 1u);
  // Its slowdown is the model's on leaf 1's uplink cut to 2/3, which the model tells apart from
  // a cut to 1/2 or 5/6 (so the equality pins the share), and at least the uncut one.
  const double two_thirds = model.slowdown_sharing({7, 8}, {{1, 2.0 / 3}});
  ASSERT_NE(two_thirds, model.slowdown_sharing({7, 8}, {{1, 0.5}}));
  ASSERT_NE(two_thirds, model.slowdown_sharing({7, 8}, {{1, 5.0 / 6}}));
  EXPECT_DOUBLE_EQ(by[3]->slowdown, two_thirds);
  EXPECT_GE(by[3]->slowdown, model.slowdown({7, 8}));
  o.contention = false;
  const Replay off = replay(c.fabric, c.node, jobs, Placer::kFlat, o, model);
  for (const JobOutcome& j : off.jobs) EXPECT_FALSE(j.shared) << jobs[j.job].id;
}

// The cut is what the model sees: the uplinks a job crosses, cut to almost nothing, make it
// slower; cut to all of them (share 1), it is the job's own slowdown.
TEST(Replay, SharingUplinksSlowsAJobThatCrossesThem) {
  Cluster c = small();
  SlowdownModel model(c.fabric, c.node, 8);
  EXPECT_DOUBLE_EQ(model.leaf_uplink_gbps(0), 400.0);  // 4 hosts x 400 GB/s / 4
  const double alone = model.slowdown({3, 4});
  EXPECT_DOUBLE_EQ(model.slowdown_sharing({3, 4}, {{0, 1.0}, {1, 1.0}}), alone);
  EXPECT_GT(model.slowdown_sharing({3, 4}, {{0, 0.01}, {1, 0.01}}), alone * 1.5);
}

// place-load sees the running jobs' load. On 16 hosts in 4 leaves of 4 (4:1), job a (6 hosts)
// spans two leaves; b (6 hosts) must span two as well. place fills a's fragmented leaf (least
// fragmentation left); place-load sees that leaf's uplink already carrying a's expected load and
// takes the two whole leaves instead, so b shares no uplink.
TEST(Replay, PlaceLoadAvoidsLeavesOthersCross) {
  Cluster c = fat_tree(16, 4);
  const std::vector<TraceJob> jobs = {{"a", 0, 1000, 48}, {"b", 1, 1000, 48}};
  ReplayOptions o;
  o.comm_fraction = 0.5;
  SlowdownModel model(c.fabric, c.node, 8);
  const Replay alone = replay(c.fabric, c.node, jobs, Placer::kPlace, o, model);
  const Replay loaded = replay(c.fabric, c.node, jobs, Placer::kPlaceLoad, o, model);
  ASSERT_EQ(alone.jobs.size(), 2u);
  ASSERT_EQ(loaded.jobs.size(), 2u);
  // a: leaf 0 whole and 2 hosts of leaf 1, under both.
  const std::vector<std::uint32_t> a = {0, 1, 2, 3, 4, 5};
  EXPECT_EQ(alone.jobs[0].placed_on, a);
  EXPECT_EQ(loaded.jobs[0].placed_on, a);
  // b: place takes leaf 1's other 2 and leaf 2 (leaf 3 stays whole), next to a's traffic.
  EXPECT_EQ(alone.jobs[1].placed_on, (std::vector<std::uint32_t>{6, 7, 8, 9, 10, 11}));
  EXPECT_TRUE(alone.jobs[1].shared);
  EXPECT_GT(alone.jobs[1].slowdown, 1.0);
  // place-load: leaf 2 whole and 2 hosts of leaf 3, away from it.
  EXPECT_EQ(loaded.jobs[1].placed_on, (std::vector<std::uint32_t>{8, 9, 10, 11, 12, 13}));
  EXPECT_FALSE(loaded.jobs[1].shared);
  EXPECT_DOUBLE_EQ(loaded.jobs[1].slowdown, 1.0);
  // Without contention, place-load is place.
  o.contention = false;
  const Replay off = replay(c.fabric, c.node, jobs, Placer::kPlaceLoad, o, model);
  EXPECT_EQ(off.jobs[1].placed_on, alone.jobs[1].placed_on);
}

// topology/block trades waiting for locality: a and b (3 hosts each) take a leaf each; c (2
// hosts) finds 1 free host in each leaf. Tree spreads it at once; block waits for a leaf, until
// a ends at 100. Without BlockSizes the largest block is 16 base blocks (64 hosts in leaves of
// 4): block would leave a 68-host job pending for ever, so it is left out and counted.
TEST(Replay, BlockWaitsForALeafAndCountsWhatItNeverPlaces) {
  Cluster c = small();
  const std::vector<TraceJob> jobs = {
      {"a", 0, 100, 24}, {"b", 1, 200, 24}, {"c", 2, 50, 16}};
  const Replay tree = run(c, jobs, Placer::kTree);
  const Replay block = run(c, jobs, Placer::kBlock);
  EXPECT_EQ(starts(tree, 3), (std::vector<double>{0, 1, 2}));
  EXPECT_EQ(starts(block, 3), (std::vector<double>{0, 1, 100}));
  for (const JobOutcome& o : block.jobs) EXPECT_EQ(o.leaves, 1u) << jobs[o.job].id;
  Cluster three = fat_tree(80, 4, 1);
  const std::vector<TraceJob> big = {{"x", 0, 100, 68 * 8}, {"y", 0, 100, 16}};
  const Replay r = run(three, big, Placer::kBlock);
  EXPECT_EQ(r.never_placed, 1u);
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_EQ(big[r.jobs[0].job].id, "y");
  EXPECT_EQ(run(three, big, Placer::kTree).never_placed, 0u);
  EXPECT_EQ(placer_from("block"), Placer::kBlock);
}

TEST(Replay, SwitchesWaitBelongsToThePlacer) {
  // A and B leave one host in each leaf (flat packs them into hosts 0-5 and leaves 6-7 in one
  // leaf). C (2 hosts) spreads at once under tree and place; with --switches=1@300 it waits for
  // one leaf until its wait runs out at 301, then spreads. topology/block never spreads it: it
  // waits for a whole leaf, until A and B end at 1000.
  const std::vector<TraceJob> jobs = {{"A", 0, 1000, 24}, {"B", 0, 1000, 24}, {"C", 1, 100, 16}};
  Cluster c = small();
  for (Placer p : kAll) {
    const Replay r = run(c, jobs, p);
    const bool one_leaf = p == Placer::kFlat || p == Placer::kBlock;
    const double want = p == Placer::kTreeSwitches ? 301 : p == Placer::kBlock ? 1000 : 1;
    EXPECT_EQ(starts(r, jobs.size())[2], want) << to_string(p);
    for (const JobOutcome& o : r.jobs) {
      if (o.job == 2) {
        EXPECT_EQ(o.leaves, one_leaf ? 1u : 2u) << to_string(p);
        EXPECT_DOUBLE_EQ(o.locality, one_leaf ? 1.0 : 0.5) << to_string(p);
      }
    }
  }
}

TEST(Replay, RunTimeIsStretchedByTheModeledSlowdown) {
  // C is spread over the two leaves of a 4:1 tree: its slowdown is the model's, at least 1, and
  // its run time duration x (1 + f x (slowdown - 1)).
  const std::vector<TraceJob> jobs = {{"A", 0, 1000, 24}, {"B", 0, 1000, 24}, {"C", 1, 100, 16}};
  Cluster c = small();
  const Replay r = run(c, jobs, Placer::kTree, 0.5);
  const ReplaySummary s = summarize(r, jobs);
  for (const JobOutcome& o : r.jobs) {
    if (o.job != 2) continue;
    EXPECT_GE(o.slowdown, 1.0);
    EXPECT_DOUBLE_EQ(o.end - o.start, 100 * (1 + 0.5 * (o.slowdown - 1)));
    EXPECT_DOUBLE_EQ(s.slowdown_p95, o.slowdown);  // A and B, each in one leaf, are at 1
  }
  EXPECT_EQ(s.multi_host, 3u);
  EXPECT_GT(s.utilisation, 0);
  EXPECT_LE(s.utilisation, 1);
}

TEST(Replay, SlowdownModelCachesBySetStructureAndNamesTheLayout) {
  Cluster c = small();
  SlowdownModel m(c.fabric, c.node, 8);
  EXPECT_EQ(SlowdownModel::layout_for(2, 8), "tp=8");  // dp=2
  EXPECT_EQ(SlowdownModel::layout_for(8, 8), "tp=8,pp=4");
  EXPECT_EQ(SlowdownModel::layout_for(12, 8), "tp=8,pp=6");
  EXPECT_EQ(SlowdownModel::layout_for(64, 8), "tp=8,pp=8");
  EXPECT_EQ(SlowdownModel::layout_for(11, 8), "tp=8");
  EXPECT_DOUBLE_EQ(m.slowdown({0, 1}), 1.0);  // one leaf: as good as an empty cluster's best
  const double spread = m.slowdown({0, 4});
  const std::size_t evaluations = m.evaluations();
  EXPECT_DOUBLE_EQ(m.slowdown({1, 5}), spread);  // the same structure: from the cache
  EXPECT_EQ(m.evaluations(), evaluations);
  EXPECT_EQ(m.cache_hits(), 1u);
  EXPECT_EQ(m.slowdown({3}), 1.0);
}

TEST(Replay, UnknownPlacerIsAnError) {
  EXPECT_THROW(placer_from("random"), Error);
  EXPECT_EQ(placer_from("tree-switches"), Placer::kTreeSwitches);
}

}  // namespace
}  // namespace topoaware::mapper
