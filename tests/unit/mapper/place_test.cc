// place(): host sets built from the fabric's levels and the layout's cuts, scored by the model,
// against Slurm's tree on the same free hosts. Fabrics are synthetic fat trees (synthetic.h):
// 16 hosts a leaf, 2:1 at the leaves so that leaving a leaf costs.
#include "topoaware/mapper/place.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "topoaware/mapper/layout.h"
#include "topoaware/mapper/synthetic.h"
#include "topoaware/topology/fabric.h"
#include "topoaware/topology/node.h"

namespace topoaware::mapper {
namespace {

using Hosts = std::vector<std::uint32_t>;

topology::Fabric tree(int hosts = 64, int per_leaf = 16) {
  FatTreeSpec s;
  s.hosts = hosts;
  s.hosts_per_leaf = per_leaf;
  s.leaf_oversub = 2;
  return make_fat_tree(s);
}

struct Job {
  topology::NodeTopology node = make_node(8, 8, 450, 50);
  PlaceInput in;
};

// Every host free, the job's layout resolved for `hosts` hosts of 8 GPUs.
Job job(const topology::Fabric& f, std::uint32_t hosts, const std::string& layout = "tp=8") {
  Job j;
  j.in.free_gpus.assign(f.hosts.size(), 8);
  j.in.gpus_per_host = 8;
  j.in.hosts = hosts;
  j.in.request.layout = parse_layout(layout, static_cast<int>(hosts) * 8);
  j.in.request.refine_moves = 0;
  return j;
}
void with_nodes(Job& j, const topology::Fabric& f) { j.in.nodes.assign(f.hosts.size(), &j.node); }

std::set<std::uint32_t> leaves_of(const topology::Fabric& f, const Hosts& hosts) {
  const std::size_t leaf = group_levels(f).front();
  std::set<std::uint32_t> out;
  for (std::uint32_t h : hosts) out.insert(f.levels[leaf].group_of_host[h]);
  return out;
}

// Only these hosts free.
void only_free(Job& j, const Hosts& hosts) {
  std::fill(j.in.free_gpus.begin(), j.in.free_gpus.end(), 0);
  for (std::uint32_t h : hosts) j.in.free_gpus[h] = 8;
}

Hosts range(std::uint32_t from, std::uint32_t to) {  // [from, to)
  Hosts out;
  for (std::uint32_t h = from; h < to; ++h) out.push_back(h);
  return out;
}
Hosts join(Hosts a, const Hosts& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(Fragmentation, ShareOfFreeHostsInPartlyFreeGroups) {
  // 2 leaves of 4 under one spine (the whole fabric: not counted). Leaf 0 wholly free, leaf 1
  // one of four free: 1 of the 5 free hosts is stranded.
  const topology::Fabric f = tree(8, 4);
  ASSERT_EQ(group_levels(f).size(), 1u);
  std::vector<char> free = {1, 1, 1, 1, 1, 0, 0, 0};
  EXPECT_DOUBLE_EQ(fragmentation(f, free), 0.2);
  EXPECT_DOUBLE_EQ(fragmentation(f, std::vector<char>(8, 1)), 0.0);
  EXPECT_DOUBLE_EQ(fragmentation(f, std::vector<char>(8, 0)), 0.0);
  EXPECT_THROW(fragmentation(f, std::vector<char>(7, 1)), Error);
}

TEST(Place, EmptyClusterJobThatFitsALeafGetsOneLeaf) {
  const topology::Fabric f = tree();
  Job j = job(f, 4);
  with_nodes(j, f);
  const Placement p = place(f, j.in);
  ASSERT_TRUE(p.placed) << p.reason;
  EXPECT_EQ(p.chosen.hosts.size(), 4u);
  EXPECT_EQ(leaves_of(f, p.chosen.hosts).size(), 1u);
  EXPECT_EQ(p.chosen.spread.front(), 1u);
  EXPECT_EQ(p.chosen.label, "best-fit");
  EXPECT_TRUE(p.why.empty());
}

TEST(Place, BestFitLeafLeavesTheFreeHostsLeastFragmented) {
  // Leaf 0: 16 free; leaf 1: 5 free; leaf 2: 4 free; leaf 3 busy. A 4-host job in any one leaf
  // costs the same; leaf 2 (exactly 4) leaves no partly free leaf behind it.
  const topology::Fabric f = tree();
  Job j = job(f, 4);
  with_nodes(j, f);
  only_free(j, join(join(range(0, 16), range(16, 21)), range(32, 36)));
  const Placement p = place(f, j.in);
  ASSERT_TRUE(p.placed) << p.reason;
  EXPECT_EQ(p.chosen.hosts, range(32, 36));
  EXPECT_LT(p.chosen.fragmentation, p.fragmentation_before);
  for (const auto& a : p.considered) EXPECT_GE(a.seconds, p.chosen.seconds);
}

TEST(Place, SplitFallsOnPipelineStagesAndIsNeverWorseThanSlurmsTree) {
  // tp=8 (a host), dp=2, pp=3: 6 hosts, a pipeline stage is 2 hosts. Free: leaf 0 has 5, leaf 1
  // has 3, leaf 2 has 1. No leaf holds 6. Slurm's tree takes the fullest leaf (5) and then the
  // best fit for the last host (leaf 2's one): one stage split over two leaves. The pp cut keeps
  // every stage inside a leaf (4 + 2).
  const topology::Fabric f = tree();
  Job j = job(f, 6, "tp=8,dp=2,pp=3");
  with_nodes(j, f);
  only_free(j, join(join(range(0, 5), range(16, 19)), range(32, 33)));
  const Placement p = place(f, j.in);
  ASSERT_TRUE(p.placed) << p.reason;
  ASSERT_EQ(p.tree.hosts.size(), 6u);
  EXPECT_EQ(leaves_of(f, p.tree.hosts).size(), 2u);
  const HostSet* cut = nullptr;
  for (const auto& a : p.considered) {
    if (a.label == "pp-cut") cut = &a;
  }
  ASSERT_NE(cut, nullptr);
  // Stage-aligned: each leaf holds a multiple of 2 hosts.
  const std::size_t leaf = group_levels(f).front();
  std::vector<int> per_leaf(4, 0);
  for (std::uint32_t h : cut->hosts) ++per_leaf[f.levels[leaf].group_of_host[h]];
  for (int n : per_leaf) EXPECT_EQ(n % 2, 0) << "a stage split over leaves";
  EXPECT_LE(p.chosen.seconds, p.tree.seconds);
  EXPECT_LE(p.chosen.seconds, cut->seconds);
  EXPECT_FALSE(p.why.empty());
  EXPECT_NE(p.why.find("no one leaf holds 6 hosts"), std::string::npos) << p.why;
}

TEST(Place, TooFewFreeHostsIsNotPlacedAndSaysWhy) {
  const topology::Fabric f = tree();
  Job j = job(f, 8);
  with_nodes(j, f);
  only_free(j, range(0, 7));
  const Placement p = place(f, j.in);
  EXPECT_FALSE(p.placed);
  EXPECT_NE(p.reason.find("7 of the fabric's 64 hosts"), std::string::npos) << p.reason;
  EXPECT_TRUE(p.tree.hosts.empty());
  EXPECT_FALSE(p.tree_reason.empty());
}

TEST(Place, ExcludedHostsAreNeverUsedAndDegradedOnesGoLast) {
  topology::Fabric f = tree();
  f.hosts[0].excluded = true;
  f.hosts[1].degraded = 0.5;
  Job j = job(f, 3);
  with_nodes(j, f);
  only_free(j, range(0, 5));  // leaf 0: host 0 excluded, 1 degraded, 2-4 healthy
  const Placement p = place(f, j.in);
  ASSERT_TRUE(p.placed) << p.reason;
  EXPECT_EQ(p.chosen.hosts, (Hosts{2, 3, 4}));
  EXPECT_EQ(p.chosen.degraded, 0u);
  j.in.hosts = 4;
  j.in.request.layout = parse_layout("tp=8", 32);
  const Placement q = place(f, j.in);
  ASSERT_TRUE(q.placed) << q.reason;
  EXPECT_EQ(q.chosen.hosts, (Hosts{1, 2, 3, 4}));
  EXPECT_EQ(q.chosen.degraded, 1u);
}

TEST(Place, CandidatesGrowTheChoiceInsideItsLeafFirst) {
  const topology::Fabric f = tree();
  Job j = job(f, 2);
  with_nodes(j, f);
  only_free(j, join(range(0, 3), range(16, 32)));  // leaf 0: 3 free, leaf 1: 16
  j.in.candidates = 6;
  const Placement p = place(f, j.in);
  ASSERT_TRUE(p.placed) << p.reason;
  EXPECT_EQ(leaves_of(f, p.chosen.hosts), (std::set<std::uint32_t>{0}));
  ASSERT_EQ(p.candidates.size(), 6u);
  for (std::uint32_t h : p.chosen.hosts) {
    EXPECT_TRUE(std::find(p.candidates.begin(), p.candidates.end(), h) != p.candidates.end());
  }
  // The rest of leaf 0 first (host 0-2 all in), then leaf 1's first hosts.
  EXPECT_EQ(p.candidates, (Hosts{0, 1, 2, 16, 17, 18}));
}

TEST(Place, PartOfAHostTakesTheHostWithTheFewestFreeGpusThatHoldIt) {
  const topology::Fabric f = tree();
  Job j = job(f, 0);
  with_nodes(j, f);
  j.in.gpus = 2;
  j.in.request.layout = parse_layout("", 2);
  j.in.free_gpus[5] = 3;
  j.in.free_gpus[9] = 1;
  const Placement p = place(f, j.in);
  ASSERT_TRUE(p.placed) << p.reason;
  EXPECT_EQ(p.chosen.hosts, (Hosts{5}));
}

TEST(Place, BadInputThrows) {
  const topology::Fabric f = tree();
  Job j = job(f, 2);
  EXPECT_THROW(place(f, j.in), Error);  // no node models
  with_nodes(j, f);
  j.in.hosts = 0;
  EXPECT_THROW(place(f, j.in), Error);
}

TEST(Assess, SpreadAllocationIsSlowerThanTheBestTheFreeHostsAllowed) {
  // tp=8, dp=8 over 8 hosts: Slurm's first hosts by name on a cluster where leaf 0 is half
  // busy spread over two leaves; leaf 1 alone could have held the job.
  const topology::Fabric f = tree();
  Job j = job(f, 8, "tp=8,pp=8");
  with_nodes(j, f);
  only_free(j, join(range(8, 16), range(16, 32)));
  const Hosts spread = join(range(12, 16), range(16, 20));
  const Quality q = assess(f, j.in, spread);
  ASSERT_TRUE(q.best_found);
  EXPECT_EQ(q.allocation.spread.front(), 2u);
  EXPECT_EQ(q.best.spread.front(), 1u);
  EXPECT_GE(q.slowdown, 1.0);
  EXPECT_LE(q.best.seconds, q.allocation.seconds);
}

}  // namespace
}  // namespace topoaware::mapper
