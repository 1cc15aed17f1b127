// Slurm's own node selection (slurm_select.h): cases worked by hand from Slurm 24.11's code
// (topology/common/eval_nodes.c _eval_nodes_consec, topology/tree/eval_nodes_tree.c
// _eval_nodes_topo, topology/block/eval_nodes_block.c). Each test's comment is the working:
// what Slurm's loop sees at each step, so a failure says which rule moved.
#include "topoaware/mapper/slurm_select.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "topoaware/mapper/layout.h"
#include "topoaware/topology/fabric.h"
#include "topoaware/topology/fabric_io.h"

namespace topoaware::mapper::slurm {
namespace {

using Indexes = std::vector<std::uint32_t>;

// n0..n{count-1}, all free, weight 1, except those listed.
std::vector<Node> cluster(std::uint32_t count, std::initializer_list<std::uint32_t> busy = {}) {
  std::vector<Node> nodes;
  for (std::uint32_t i = 0; i < count; ++i) nodes.push_back({"n" + std::to_string(i), 1, true});
  for (std::uint32_t b : busy) nodes[b].free = false;
  return nodes;
}

Job job_of(std::uint32_t n) {
  Job j;
  j.nodes = n;
  return j;
}

Indexes range(std::uint32_t first, std::uint32_t last) {
  Indexes out;
  for (std::uint32_t i = first; i <= last; ++i) out.push_back(i);
  return out;
}

// Fixture A, two levels (topology.conf order = switch index):
//   SwitchName=s0 Nodes=n[0-3]     (0)
//   SwitchName=s1 Nodes=n[4-7]     (1)
//   SwitchName=s2 Nodes=n[8-11]    (2)
//   SwitchName=spine Switches=s[0-2]  (3)
// Leaves are level 0, the spine level 1; leaf to leaf is 2 hops.
std::vector<Switch> two_level() {
  return {{"s0", range(0, 3), {}},
          {"s1", range(4, 7), {}},
          {"s2", range(8, 11), {}},
          {"spine", {}, {0, 1, 2}}};
}

// Fixture B, three levels:
//   l0 n[0-3] (0), l1 n[4-7] (1), l2 n[8-11] (2), l3 n[12-15] (3)
//   p0 Switches=l[0-1] (4), p1 Switches=l[2-3] (5), core Switches=p[0-1] (6)
// Hops: l0-l1 2, l0-l2 4.
std::vector<Switch> three_level() {
  return {{"l0", range(0, 3), {}},   {"l1", range(4, 7), {}}, {"l2", range(8, 11), {}},
          {"l3", range(12, 15), {}}, {"p0", {}, {0, 1}},      {"p1", {}, {2, 3}},
          {"core", {}, {4, 5}}};
}

// Fixture C: 8 base blocks of 2 nodes, b0 = n[0-1] ... b7 = n[14-15].
BlockTopology eight_blocks(std::vector<std::uint32_t> sizes) {
  BlockTopology t;
  for (std::uint32_t b = 0; b < 8; ++b) {
    t.blocks.push_back({"b" + std::to_string(b), {2 * b, 2 * b + 1}});
  }
  t.block_sizes = std::move(sizes);
  return t;
}

// ---- tree -----------------------------------------------------------------------------------

// Free: s0 3 (n0 busy), s1 2 (n4,n5 busy), s2 4. N=2.
// Top switch: every switch holds 2; the highest level wins: spine. One weight, no req2.
// Leaves in index order: s0 (3) is first; s1 both fit, 2 < 3 -> s1; s2 4 > 2 -> stays s1.
// s1's free nodes in index order: n6, n7.
TEST(SlurmTree, JobThatFitsOneLeafGetsTheSmallestLeafThatHoldsIt) {
  Selection s = select_tree(cluster(12, {0, 4, 5}), two_level(), job_of(2));
  ASSERT_EQ(s.outcome, Outcome::kSelected) << s.reason;
  EXPECT_EQ(s.nodes, (Indexes{6, 7}));
  ASSERT_EQ(s.trace.size(), 2u);
  EXPECT_EQ(s.trace[0], "top switch spine (level 1, 9 free)");
  EXPECT_EQ(s.trace[1], "leaf s1 (2 free): smallest leaf that holds the rest");
}

// Free: s0 2 (n0,n1 busy), s1 4, s2 2 (n8,n9 busy). N=2.
// s0 first; s1 4 > 2 -> -1; s2 vs s0: equal counts, equal levels -> 0, not replaced. s0: n2,n3.
TEST(SlurmTree, EqualLeavesGoToTheLowerSwitchIndex) {
  Selection s = select_tree(cluster(12, {0, 1, 8, 9}), two_level(), job_of(2));
  ASSERT_EQ(s.outcome, Outcome::kSelected) << s.reason;
  EXPECT_EQ(s.nodes, (Indexes{2, 3}));
}

// Free: s0 3 (n3 busy), s1 2 (n6,n7 busy), s2 4. N=6: no leaf holds it.
// Round 1 (rem 6): s0 first; s1 vs s0: neither fits, same parent -> larger wins, 2 < 3 no;
// s2 vs s0: 4 > 3 -> s2 (the fullest). Takes n8-n11, rem 2; spine 9 -> 5.
// Round 2 (rem 2, both left 2 hops away): s0 first (3); s1 both fit, 2 < 3 -> s1. n4, n5.
TEST(SlurmTree, SpanningLeavesTakesTheFullestThenTheBestFitForTheRest) {
  Selection s = select_tree(cluster(12, {3, 6, 7}), two_level(), job_of(6));
  ASSERT_EQ(s.outcome, Outcome::kSelected) << s.reason;
  EXPECT_EQ(s.nodes, (Indexes{4, 5, 8, 9, 10, 11}));
  ASSERT_EQ(s.trace.size(), 3u);
  EXPECT_EQ(s.trace[1],
            "leaf s2 (4 free): no leaf holds the rest: leaf by spine fit, distance, "
            "fullest");
  EXPECT_EQ(s.trace[2], "leaf s1 (2 free): smallest leaf that holds the rest");
}

// Three levels. Free: l0 2 (n0,n1), l1 2 (n4,n5), l2 4 (n8-11), l3 2 (n12,n13). N=6.
// Top switch: p1 (6) holds it, core (10) is higher: core.
// Round 1 (rem 6, no leaf fits): l0 first; l1 vs l0 same parent, equal -> 0; l2 vs l0: neither
// fits, parents p1 vs p0 differ -> climb: p1 has 6 (fits), p0 4 -> l2 wins; l3 vs l2: same
// parent, 2 < 4. Takes l2: n8-n11, rem 2.
// Round 2 (rem 2): distance from l2: l0 4, l1 4, l3 2. l0 first; l1 equal -> 0; l3 fits and is
// closer (2 < 4) -> l3. n12, n13: the job stays in pod p1.
TEST(SlurmTree, ThreeLevelsSpineThatHoldsTheJobThenHopDistance) {
  Selection s = select_tree(cluster(16, {2, 3, 6, 7, 14, 15}), three_level(), job_of(6));
  ASSERT_EQ(s.outcome, Outcome::kSelected) << s.reason;
  EXPECT_EQ(s.nodes, (Indexes{8, 9, 10, 11, 12, 13}));
  EXPECT_EQ(s.trace[0], "top switch core (level 2, 10 free)");
}

// Three levels, Slurm's switch comparison as it is. Free: l0 3 (n0-n2), l1 0, l2 1 (n8),
// l3 4 (n12-15). N=6.
// Round 1 (rem 6): l0 first; l1 empty; l2 vs l0: neither fits, climb p1 (5) vs p0 (3): neither
// fits, common parent -> larger: p1 -> l2 replaces l0 (its pod is fuller); l3 vs l2: same
// parent, 4 > 1 -> l3. Takes n12-n15, rem 2.
// Round 2 (rem 2): distances from l3: l0 4, l2 2. l0 first (holds 2); l2 is closer but does
// not hold the rest (1 < 2), and "closer" only counts when it fits -> stays l0. n0, n1.
TEST(SlurmTree, ACloserLeafThatCannotHoldTheRestDoesNotDisplaceAFartherOne) {
  Selection s = select_tree(cluster(16, {3, 4, 5, 6, 7, 9, 10, 11}), three_level(), job_of(6));
  ASSERT_EQ(s.outcome, Outcome::kSelected) << s.reason;
  EXPECT_EQ(s.nodes, (Indexes{0, 1, 12, 13, 14, 15}));
}

// Where 22.05 to 23.11 (Settings::release below 2405) choose another leaf. Three levels. Free:
// l0 1 (n0), l1 1 (n5), l2 3 (n9-n11), l3 2 (n12,n13). N=4. Top switch: core (7).
// Round 1 (rem 4), the same in both: l0 first; l1 vs l0: same parent, 1 = 1 -> 0; l2 vs l0:
// neither leaf holds 4, climb: p1 (5) holds it -> l2; l3 vs l2: same parent, 2 < 3. Takes
// n9-n11, rem 1.
// Round 2 (rem 1): distances from l2: l0 4, l1 4, l3 2. l0 first; l1 equal -> 0. l3 vs l0: both
// hold 1, l3 is larger -> compare -1; l3 is closer.
// - 24.11: closer and holds the rest -> l3: n12.
// - 22.05: closer and compare >= 0? -1: no -> stays l0: n0. (The 22.05 lab agrees:
//   tests/fixtures/slurm-select.)
TEST(SlurmTree, Release2205KeepsAFartherLeafWhenTheCloserOneComparesWorse) {
  const std::vector<Node> nodes = cluster(16, {1, 2, 3, 4, 6, 7, 8, 14, 15});
  Selection now = select_tree(nodes, three_level(), job_of(4));
  ASSERT_EQ(now.outcome, Outcome::kSelected) << now.reason;
  EXPECT_EQ(now.nodes, (Indexes{9, 10, 11, 12}));
  Settings old;
  old.release = 2205;
  Selection then = select_tree(nodes, three_level(), job_of(4), old);
  ASSERT_EQ(then.outcome, Outcome::kSelected) << then.reason;
  EXPECT_EQ(then.nodes, (Indexes{0, 9, 10, 11}));
  old.release = 2311;  // the last release with the old rule
  EXPECT_EQ(select_tree(nodes, three_level(), job_of(4), old).nodes, then.nodes);
  old.release = 2405;  // the first with the new one
  EXPECT_EQ(select_tree(nodes, three_level(), job_of(4), old).nodes, now.nodes);
}

// Three levels, all free, N=4: l0..l3 all hold it with 4; l0 first, the others equal -> l0.
// N=8: no leaf holds it; p0 and p1 both do. Round 1: l0 first; l1 same parent equal; l2 vs
// l0: climb, p1 (8) and p0 (8) both fit, equal -> break, tail equal -> 0. l0: n0-n3, rem 4,
// p0 8 -> 4. Round 2: l1 (dist 2) fits -> first; l2, l3 (dist 4) fit but are not closer. n4-n7.
TEST(SlurmTree, ThreeLevelsAJobOfOnePodStaysInTheFirstPod) {
  Selection a = select_tree(cluster(16), three_level(), job_of(4));
  ASSERT_EQ(a.outcome, Outcome::kSelected) << a.reason;
  EXPECT_EQ(a.nodes, range(0, 3));
  Selection b = select_tree(cluster(16), three_level(), job_of(8));
  ASSERT_EQ(b.outcome, Outcome::kSelected) << b.reason;
  EXPECT_EQ(b.nodes, range(0, 7));
}

// Free: s0 2 (n2,n3), s1 2 (n6,n7), s2 2 (n10,n11). N=3, --switches=1.
// Round 1 (rem 3): s0 first, s1 and s2 equal -> s0: n2, n3, rem 1. Round 2: s1 (2 hops) first,
// s2 equal -> s1: n6. Two leaves > 1: Slurm sets best_switch = false, the job waits.
// Once the wait is over the same choice runs.
TEST(SlurmTree, SwitchesOneWaitsWhenNoLeafHoldsTheJobThenSpreadsAfterItsTime) {
  std::vector<Node> nodes = cluster(12, {0, 1, 4, 5, 8, 9});
  Job j = job_of(3);
  j.max_switches = 1;
  Selection waiting = select_tree(nodes, two_level(), j);
  EXPECT_EQ(waiting.outcome, Outcome::kWait);
  EXPECT_EQ(waiting.reason, "--switches=1: the choice spans 2 leaf switches; waits for fewer");
  j.switch_wait_expired = true;
  Selection after = select_tree(nodes, two_level(), j);
  ASSERT_EQ(after.outcome, Outcome::kSelected) << after.reason;
  EXPECT_EQ(after.nodes, (Indexes{2, 3, 6}));
  // Without --switches Slurm spreads at once.
  Selection plain = select_tree(nodes, two_level(), job_of(3));
  ASSERT_EQ(plain.outcome, Outcome::kSelected);
  EXPECT_EQ(plain.nodes, (Indexes{2, 3, 6}));
}

// --switches=1 with a leaf that holds the job: s2 all free (4), N=3 -> s2, one leaf, runs.
TEST(SlurmTree, SwitchesOneRunsAtOnceWhenALeafHoldsTheJob) {
  Job j = job_of(3);
  j.max_switches = 1;
  Selection s = select_tree(cluster(12, {0, 1, 4, 5}), two_level(), j);
  ASSERT_EQ(s.outcome, Outcome::kSelected) << s.reason;
  EXPECT_EQ(s.nodes, (Indexes{8, 9, 10}));
}

// Weights, all free. Weight 1: n4-n9 (s1 whole, half of s2); weight 10: s0 and n10, n11. N=8.
// Weight pass: group 1 gives 6 < 8; group 10 is needed, so all of group 1 becomes req2 and is
// taken (n4-n9), rem 2; s1, s2 and the spine become required. More from the required leaves in
// index order: s1 has nothing left, s2 gives n10, n11. The untouched leaf s0 is not used.
TEST(SlurmTree, LowestWeightNodesFirstThenTheRestFromLeavesAlreadyUsed) {
  std::vector<Node> nodes = cluster(12);
  for (std::uint32_t i : {0u, 1u, 2u, 3u, 10u, 11u}) nodes[i].weight = 10;
  Selection s = select_tree(nodes, two_level(), job_of(8));
  ASSERT_EQ(s.outcome, Outcome::kSelected) << s.reason;
  EXPECT_EQ(s.nodes, range(4, 11));
  ASSERT_EQ(s.trace.size(), 3u);
  EXPECT_EQ(s.trace[1], "all 6 free nodes of the lowest weights taken first: n4,n5,n6,n7,n8,n9");
  EXPECT_EQ(s.trace[2], "rest from leaf s2, already in use");
}

// Weights beat fit: s0 weight 5 with 2 free (n0,n1 busy) would be the best fit for N=2;
// s1 (3 free, n4 busy) and s2 (4) are weight 1. Group 1 alone holds 2, so best = group 1 and s0
// counts 0. s1 (3) beats s2 (4): n5, n6.
TEST(SlurmTree, NodeWeightComesBeforeBestFit) {
  std::vector<Node> nodes = cluster(12, {0, 1, 4});
  for (std::uint32_t i = 0; i < 4; ++i) nodes[i].weight = 5;
  Selection s = select_tree(nodes, two_level(), job_of(2));
  ASSERT_EQ(s.outcome, Outcome::kSelected) << s.reason;
  EXPECT_EQ(s.nodes, (Indexes{5, 6}));
}

// No switch has enough free nodes: every switch is short, so there is no top switch (Slurm:
// ESLURM_REQUESTED_TOPO_CONFIG_UNAVAILABLE): with 3 free and N=4 eval_nodes refuses first.
TEST(SlurmTree, TooFewFreeNodesWaits) {
  Selection s = select_tree(cluster(12, {0, 1, 2, 3, 4, 5, 6, 7, 8}), two_level(), job_of(4));
  EXPECT_EQ(s.outcome, Outcome::kWait);
  EXPECT_EQ(s.reason, "3 free nodes, the job asks for 4");
}

// Slurm's testsuite 4-level unbalanced tree (tests/fixtures/slurm-topology, test_133_1
// testcase2) through the importer: switches keep topology.conf's order (root, im0, grp10-35,
// leaf100-599); leaf100-349 hang from grp10-22 under im0, leaf350-599 from grp23-35 straight
// under root; 20 nodes a leaf, 20 leaves a group except grp22 and grp23 (10). All free.
// N=20: every leaf holds it exactly; the first, leaf100: peta10000-10019 (indexes 0-19).
// N=21: no leaf holds it. Round 1: leaf100 first; leaves under another group of 20 leaves climb
// to equal groups (400 free each) -> 0; leaf340 climbs to grp22 (200) against grp10 (400):
// both hold 21, the smaller wins -> leaf340; leaf350 climbs to grp23 (200) against grp22 (200):
// equal -> 0. Takes leaf340 (indexes 4800-4819), rem 1.
// Round 2: leaf100 first (4 hops, holds 1); leaf341 is 2 hops away and holds 1 -> leaf341:
// index 4820.
TEST(SlurmTree, SlurmTestsuiteUnbalancedFourLevelTree) {
  topology::Fabric f =
      topology::load_fabric(std::string(TOPOAWARE_TEST_FIXTURES) +
                            "/slurm-topology/"
                            "slurm-testsuite-4level-tree-unbalanced.topology.conf");
  std::vector<Switch> switches = switches_of(f);
  std::vector<Node> nodes = nodes_of(f);
  ASSERT_EQ(switches.size(), 528u);
  EXPECT_EQ(switches[0].name, "root");
  EXPECT_EQ(switches[28].name, "leaf100");
  ASSERT_EQ(nodes.size(), 10000u);
  ASSERT_EQ(nodes[4800].name, "peta14800");
  Selection a = select_tree(nodes, switches, job_of(20));
  ASSERT_EQ(a.outcome, Outcome::kSelected) << a.reason;
  EXPECT_EQ(a.nodes, range(0, 19));
  Selection b = select_tree(nodes, switches, job_of(21));
  ASSERT_EQ(b.outcome, Outcome::kSelected) << b.reason;
  EXPECT_EQ(b.nodes, range(4800, 4820));
  ASSERT_EQ(b.trace.size(), 3u);
  EXPECT_EQ(b.trace[0], "top switch root (level 3, 10000 free)");
}

// The settings that take the tree out (eval_nodes, eval_nodes_tree): the same free nodes as the
// first test (s0 3: n1-n3, s1 2: n6,n7, s2 4: n8-n11), N=2.
// - TopologyParam=TopoOptional without --switches: _eval_nodes_consec. Runs n1-n3 (3) and
//   n6-n11 (6): the smallest that holds 2 is n1-n3 -> n1, n2 (the tree gives n6, n7).
// - TopoOptional with --switches=1: the tree again -> n6, n7.
// - --contiguous: consec again -> n1, n2.
// - LLN and --spread-job: Slurm's other algorithms, before the tree: not modeled.
TEST(SlurmTree, SettingsThatDisableTheTree) {
  std::vector<Node> nodes = cluster(12, {0, 4, 5});
  Settings optional;
  optional.topo_optional = true;
  Selection flat = select_tree(nodes, two_level(), job_of(2), optional);
  ASSERT_EQ(flat.outcome, Outcome::kSelected);
  EXPECT_EQ(flat.nodes, (Indexes{1, 2}));
  EXPECT_EQ(flat.trace[0],
            "tree not used: TopologyParam=TopoOptional without --switches; flat best fit");
  Job sw = job_of(2);
  sw.max_switches = 1;
  Selection tree = select_tree(nodes, two_level(), sw, optional);
  ASSERT_EQ(tree.outcome, Outcome::kSelected);
  EXPECT_EQ(tree.nodes, (Indexes{6, 7}));
  Job contiguous = job_of(2);
  contiguous.contiguous = true;
  EXPECT_EQ(select_tree(nodes, two_level(), contiguous).nodes, (Indexes{1, 2}));
  Settings lln;
  lln.lln = true;
  Selection l = select_tree(nodes, two_level(), job_of(2), lln);
  EXPECT_EQ(l.outcome, Outcome::kNotModeled);
  EXPECT_NE(l.reason.find("_eval_nodes_lln"), std::string::npos);
  Job spread = job_of(2);
  spread.spread_job = true;
  Selection sp = select_tree(nodes, two_level(), spread);
  EXPECT_EQ(sp.outcome, Outcome::kNotModeled);
  EXPECT_NE(sp.reason.find("_eval_nodes_spread"), std::string::npos);
}

// The lab fabric (etc/lab-cluster.toml): leaf1 = node[1-2], leaf2 = node[3-4], one spine.
// node1 busy, N=2: leaf1 has 1, leaf2 2 -> leaf2: node3, node4.
// All free, N=3: no leaf holds 3; leaf1 first, leaf2 equal -> leaf1 (node1, node2), then
// leaf2 gives node3.
TEST(SlurmTree, LabFabricTwoLeaves) {
  topology::Fabric f =
      topology::load_fabric(std::string(TOPOAWARE_SOURCE_DIR) + "/etc/lab-cluster.toml");
  std::vector<Node> nodes = nodes_of(f);
  std::vector<Switch> switches = switches_of(f);
  ASSERT_EQ(nodes.size(), 4u);
  ASSERT_EQ(nodes[0].name, "node1");
  std::vector<Node> busy1 = nodes;
  busy1[0].free = false;
  Selection a = select_tree(busy1, switches, job_of(2));
  ASSERT_EQ(a.outcome, Outcome::kSelected) << a.reason;
  EXPECT_EQ(a.nodes, (Indexes{2, 3}));
  Selection b = select_tree(nodes, switches, job_of(3));
  ASSERT_EQ(b.outcome, Outcome::kSelected) << b.reason;
  EXPECT_EQ(b.nodes, (Indexes{0, 1, 2}));
  // Its blocks (one per leaf, base 2 nodes): N=2 with node1 busy -> the second block.
  Selection c = select_block(busy1, blocks_of(f), job_of(2));
  ASSERT_EQ(c.outcome, Outcome::kSelected) << c.reason;
  EXPECT_EQ(c.nodes, (Indexes{2, 3}));
}

// ---- flat -----------------------------------------------------------------------------------

// n0-n9, n3 and n6 busy: runs n0-n2 (3), n4-n5 (2), n7-n9 (3).
// N=2: the smallest run that holds it: n4-n5.
// N=3: n0-n2 first and sufficient; n7-n9 is not smaller -> n0-n2 (ties keep the earlier run).
TEST(SlurmFlat, SmallestRunThatHoldsTheJob) {
  std::vector<Node> nodes = cluster(10, {3, 6});
  EXPECT_EQ(select_flat(nodes, job_of(2)).nodes, (Indexes{4, 5}));
  EXPECT_EQ(select_flat(nodes, job_of(3)).nodes, (Indexes{0, 1, 2}));
}

// Same runs, N=5: none holds 5. Pass 1: the largest, n0-n2 (n7-n9 is not larger) -> rem 2.
// Pass 2: n4-n5 is the first that holds 2, n7-n9 not smaller -> n4, n5.
TEST(SlurmFlat, NoRunHoldsTheJobLargestRunsFirst) {
  Selection s = select_flat(cluster(10, {3, 6}), job_of(5));
  ASSERT_EQ(s.outcome, Outcome::kSelected) << s.reason;
  EXPECT_EQ(s.nodes, (Indexes{0, 1, 2, 4, 5}));
  ASSERT_EQ(s.trace.size(), 2u);
  EXPECT_EQ(s.trace[0], "run n0..n2 (3 free, weight 1): largest run, none holds the rest");
}

// n0-n3 weight 1, n4-n7 weight 2, n2 busy: runs n0-n1 (w1), n3 (w1), n4-n7 (w2; a weight
// change ends a run). N=4: n4-n7 would hold it, but a lower weight always wins: n0-n1
// (largest of weight 1), then n3, then n4 from the weight-2 run.
TEST(SlurmFlat, LowerWeightRunsFirstWhateverTheirSize) {
  std::vector<Node> nodes = cluster(8, {2});
  for (std::uint32_t i = 4; i < 8; ++i) nodes[i].weight = 2;
  EXPECT_EQ(select_flat(nodes, job_of(4)).nodes, (Indexes{0, 1, 3, 4}));
}

// --contiguous: runs n0-n1, n3-n4, n6-n11 (n2, n5 busy); N=3: the first run that holds it,
// n6-n11 -> n6, n7, n8. N=7: no run holds it -> wait.
TEST(SlurmFlat, ContiguousTakesTheFirstRunThatHoldsTheJobOrWaits) {
  std::vector<Node> nodes = cluster(12, {2, 5});
  Job j = job_of(3);
  j.contiguous = true;
  EXPECT_EQ(select_flat(nodes, j).nodes, (Indexes{6, 7, 8}));
  j.nodes = 7;
  EXPECT_EQ(select_flat(nodes, j).outcome, Outcome::kWait);
}

// ---- block ----------------------------------------------------------------------------------

// BlockSizes=2,4,8,16 (levels 0-3). n2 busy, n8, n9 busy. N=3: ceil(3/2) = 2 base blocks ->
// level 1, aligned pairs A0 = b0+b1 (3 free), A1 = b2+b3 (4), A2 = b4+b5 (2), A3 = b6+b7 (4).
// A0 holds 3 with the fewest free nodes. Inside: b0 (2) first, b1 (1) smaller and not fit ->
// b0: n0, n1; then b1 holds 1: n3.
TEST(SlurmBlock, SmallestAlignedBlockThatHoldsTheJob) {
  Selection s = select_block(cluster(16, {2, 8, 9}), eight_blocks({2, 4, 8, 16}), job_of(3));
  ASSERT_EQ(s.outcome, Outcome::kSelected) << s.reason;
  EXPECT_EQ(s.nodes, (Indexes{0, 1, 3}));
}

// Same nodes, N=4: A1 and A3 both have exactly 4 free; Slurm keeps the later one on a tie
// (bnc <= block_node_cnt): A3. Inside: b6 (2) first, b7 not fit and 2 >= 2 -> b7: n14, n15;
// then b6 holds 2: n12, n13.
TEST(SlurmBlock, EqualBlocksGoToTheLaterOne) {
  Selection s = select_block(cluster(16, {2, 8, 9}), eight_blocks({2, 4, 8, 16}), job_of(4));
  ASSERT_EQ(s.outcome, Outcome::kSelected) << s.reason;
  EXPECT_EQ(s.nodes, range(12, 15));
  ASSERT_EQ(s.trace.size(), 4u);
  EXPECT_EQ(s.trace[2], "base block b7 (2 free): largest, none holds the rest");
}

// Only n2-n5 free: four free nodes in a row, but across two aligned pairs (A0 has n2,n3, A1 has
// n4,n5): no aligned 4-node block has 4 free -> wait. Flat takes them at once.
TEST(SlurmBlock, WaitsWhenNoAlignedBlockIsFree) {
  std::vector<Node> nodes = cluster(16, {0, 1, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  Selection s = select_block(nodes, eight_blocks({2, 4, 8, 16}), job_of(4));
  EXPECT_EQ(s.outcome, Outcome::kWait);
  EXPECT_EQ(s.reason, "no aligned block of 4 nodes has 4 free nodes");
  EXPECT_EQ(select_flat(nodes, job_of(4)).nodes, range(2, 5));
}

// BlockSizes=2,8 (levels 0 and 2). N=4: 2 base blocks -> level 1, not configured: the block is
// the next level up, 4 base blocks (X0 = b0-b3, X1 = b4-b7), and the job may touch at most
// max_llblock = ceil(4/2) = 2 base blocks (the level below, 0).
// X0: one free node in each of b0-b3 (n0, n2, n4, n6): its 2 fullest base blocks give 2 < 4 ->
// not a candidate. X1: b4 2, b5 0, b6 1 (n12), b7 2: fullest two give 4 -> X1.
// Round 1 (rem 4): b4 first; b5, b6 emptier -> out; b7 equal to b4 and >= -> b7: n14, n15.
// Round 2 (rem 2): b4 holds 2 -> n8, n9. n12 (b6) is not used: it would be a third base block.
TEST(SlurmBlock, BlockSizesLevelsAndTheBaseBlockLimit) {
  std::vector<Node> nodes = cluster(16, {1, 3, 5, 7, 10, 11, 13});
  Selection s = select_block(nodes, eight_blocks({2, 8}), job_of(4));
  ASSERT_EQ(s.outcome, Outcome::kSelected) << s.reason;
  EXPECT_EQ(s.nodes, (Indexes{8, 9, 14, 15}));
  EXPECT_EQ(s.trace[0],
            "block size 4 base blocks (8 nodes), at most 2 blocks of 2 nodes inside it");
}

// Weights: all free, n8-n11 (b4, b5) weight 1, the rest weight 2. N=4: all four pairs hold it;
// A2's lowest weight is 1, lower than every other -> A2: n8-n11.
TEST(SlurmBlock, TheBlockWithTheLowestWeightWins) {
  std::vector<Node> nodes = cluster(16);
  for (std::uint32_t i = 0; i < 16; ++i) nodes[i].weight = (i >= 8 && i <= 11) ? 1 : 2;
  Selection s = select_block(nodes, eight_blocks({2, 4, 8, 16}), job_of(4));
  ASSERT_EQ(s.outcome, Outcome::kSelected) << s.reason;
  EXPECT_EQ(s.nodes, range(8, 11));
}

// Slurm's own testsuite, test_150_1 (testsuite/python/tests/test_150_1.py, SchedMD/slurm
// 284c3b95): BlockName=b1 Nodes=node[1-4], b2 Nodes=node[5-8], BlockSizes=4,8; -N 2, then -N 3
// run, a third -N 3 must stay pending. Worked: base 4, levels 0 and 1.
// -N 2: one base block (level 0); b1 and b2 both have 4 free, the tie goes to the later: b2,
// node5, node6. -N 3: b1 has 4, b2 2 -> b1: node1-node3. -N 3 again: b1 has 1, b2 2 -> no block
// holds 3: waits, as Slurm's test asserts.
// test_const2: -N 3 then -N 5 both run: -N 3 goes to b2 (tie) -> node5-node7; -N 5 needs 2 base
// blocks (level 1, one block of both): 4 + 1 free -> b1 whole (the larger, rem 1), then node8.
TEST(SlurmBlock, SlurmTestsuiteTest150_1) {
  BlockTopology t;
  t.blocks = {{"b1", range(0, 3)}, {"b2", range(4, 7)}};
  t.block_sizes = {4, 8};
  std::vector<Node> nodes = cluster(8);
  for (std::uint32_t i = 0; i < 8; ++i) nodes[i].name = "node" + std::to_string(i + 1);
  Selection j1 = select_block(nodes, t, job_of(2));
  ASSERT_EQ(j1.outcome, Outcome::kSelected) << j1.reason;
  EXPECT_EQ(j1.nodes, (Indexes{4, 5}));
  for (std::uint32_t i : j1.nodes) nodes[i].free = false;
  Selection j2 = select_block(nodes, t, job_of(3));
  ASSERT_EQ(j2.outcome, Outcome::kSelected) << j2.reason;
  EXPECT_EQ(j2.nodes, (Indexes{0, 1, 2}));
  for (std::uint32_t i : j2.nodes) nodes[i].free = false;
  EXPECT_EQ(select_block(nodes, t, job_of(3)).outcome, Outcome::kWait);

  std::vector<Node> fresh = cluster(8);
  Selection k1 = select_block(fresh, t, job_of(3));
  EXPECT_EQ(k1.nodes, (Indexes{4, 5, 6}));
  for (std::uint32_t i : k1.nodes) fresh[i].free = false;
  Selection k2 = select_block(fresh, t, job_of(5));
  ASSERT_EQ(k2.outcome, Outcome::kSelected) << k2.reason;
  EXPECT_EQ(k2.nodes, (Indexes{0, 1, 2, 3, 7}));
}

// The testsuite's 8x4 block topology (tests/fixtures/slurm-topology, BlockSizes=4,8,16,32,64)
// through the importer and blocks_of. -N 6: 2 base blocks, level 1: pairs (b1,b2) .. (b7,b8).
// All free: every pair has 8, the tie goes to the last, (b7,b8); inside, b7 (4) first, b8 not
// smaller -> b8: node29-node32, rem 2; then b7 holds 2: node25, node26.
// node29 busy: (b7,b8) has 7, the fewest -> it again; b7 (4) beats b8 (3) -> node25-node28,
// rem 2; b8 holds 2: node30, node31.
TEST(SlurmBlock, SlurmTestsuiteEightBlocksOfFourThroughTheImporter) {
  topology::Fabric f = topology::load_fabric(std::string(TOPOAWARE_TEST_FIXTURES) +
                                             "/slurm-topology/"
                                             "slurm-testsuite-block-8x4-blocksizes.topology.conf");
  BlockTopology t = blocks_of(f);
  ASSERT_EQ(t.blocks.size(), 8u);
  EXPECT_EQ(t.block_sizes, (std::vector<std::uint32_t>{4, 8, 16, 32, 64}));
  std::vector<Node> nodes = nodes_of(f);
  ASSERT_EQ(nodes.size(), 32u);
  ASSERT_EQ(nodes[24].name, "node25");
  Selection a = select_block(nodes, t, job_of(6));
  ASSERT_EQ(a.outcome, Outcome::kSelected) << a.reason;
  EXPECT_EQ(a.nodes, (Indexes{24, 25, 28, 29, 30, 31}));
  nodes[28].free = false;
  Selection b = select_block(nodes, t, job_of(6));
  ASSERT_EQ(b.outcome, Outcome::kSelected) << b.reason;
  EXPECT_EQ(b.nodes, (Indexes{24, 25, 26, 27, 29, 30}));
}

// Block trumps --spread-job and LLN (trump_others): they change nothing; a bad BlockSizes is
// refused as slurmctld refuses it.
TEST(SlurmBlock, BlockIgnoresSpreadAndRejectsBadBlockSizes) {
  Job j = job_of(3);
  j.spread_job = true;
  Selection s = select_block(cluster(16, {2, 8, 9}), eight_blocks({2, 4, 8, 16}), j);
  EXPECT_EQ(s.nodes, (Indexes{0, 1, 3}));
  EXPECT_THROW(select_block(cluster(16), eight_blocks({2, 6}), job_of(2)),
               topoaware::mapper::Error);
}

}  // namespace
}  // namespace topoaware::mapper::slurm
