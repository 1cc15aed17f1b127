// `topo-aware place` as an admin or cli_filter.lua runs it: the host set and Slurm's tree beside
// it, the outputs Slurm takes (--of nodelist, --of sbatch), JSON, and bad input named.
// Fabric: tests/fixtures/slurm-topology/place-12-nodes.topology.conf, leaves leaf1 node[1-2],
// leaf2 node[3-5], leaf3 node[6-8], leaf4 node[9-12]; spine1 = leaf1-2, spine2 = leaf3-4.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_support.h"

namespace topoaware {
namespace {

using test::cli;
using test::CliRun;

const std::string kFabric =
    "place --fabric slurm-topology/place-12-nodes.topology.conf --gpus-per-node 8 ";

TEST(PlaceCli, JobThatFitsALeafGetsTheBestFittingLeaf) {
  // node3 busy: leaf1 has node[1-2] (2 free), leaf2 node[4-5] (2 free), leaf3 3, leaf4 4.
  // Two hosts in one leaf cost the same anywhere, and leaf1 and leaf2 both fit exactly; Slurm's
  // tree takes the first (leaf1). Taking leaf2 leaves no partly free leaf behind (fragmentation
  // 0.111 against 0.222: leaf1 whole and spine1's 2 free hosts, against leaf2's 2 stranded).
  CliRun r = cli(kFabric + "-N 2 --busy node3 --of nodelist");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "node[4-5]\n");
  r = cli(kFabric + "-N 3 --busy node3 --of nodelist");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "node[6-8]\n");  // leaf3 holds exactly 3
}

TEST(PlaceCli, SbatchPinsTheHostsOrExcludesAllButTheCandidates) {
  CliRun r = cli(kFabric + "-N 2 --free node[2,4-5,9-12] --of sbatch");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "--nodelist=node[4-5]\n");
  r = cli(kFabric + "-N 2 --free node[2,4-5,9-12] --candidates 4 --of sbatch");
  ASSERT_EQ(r.rc, 0) << r.err;
  // leaf2's node[4-5], then the nearest: spine1's node2, then the first of spine2's.
  EXPECT_EQ(r.out, "--exclude=node[1,3,6-8,10-12] --switches=1\n");
}

TEST(PlaceCli, TextShowsTheChoiceAndSlurmsTreeBeside) {
  CliRun r = cli(kFabric + "-N 6 --layout tp=8,dp=2,pp=3 --free node[1-2,4-5,6,9-12]");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("topo-aware place: 6 hosts, layout tp=8,dp=2,pp=3, 9 of 12 hosts free"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("chosen: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Slurm's tree choice"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("why: no one leaf holds 6 hosts"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("considered"), std::string::npos) << r.out;
}

TEST(PlaceCli, JsonCarriesTheChoiceTreeAndSpread) {
  CliRun r = cli(kFabric + "-N 4 --free node[1-2,4-5,9-12] --of json");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["placed"], true);
  EXPECT_EQ(j["hosts_wanted"], 4);
  EXPECT_EQ(j["nodelist"], "node[9-12]");
  EXPECT_EQ(j["chosen"]["spread"]["leaf"], 1);
  EXPECT_EQ(j["sbatch"], "--nodelist=node[9-12]");
  EXPECT_TRUE(j["slurm_tree"].contains("hosts"));
  EXPECT_GE(j["considered"].size(), 1u);
  EXPECT_GE(j["fragmentation_before"].get<double>(), 0.0);
}

TEST(PlaceCli, CannotPlaceExitsFiveWithOneLine) {
  CliRun r = cli(kFabric + "-N 4 --free node[1-3] --of nodelist");
  EXPECT_EQ(r.rc, 5);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("cannot place now: the job wants 4 hosts"), std::string::npos) << r.err;
}

TEST(PlaceCli, BadInputNamesTheOption) {
  CliRun r = cli(kFabric + "-N 2 --free node[1-2],gpu99");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("--free"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("gpu99"), std::string::npos) << r.err;
  r = cli(kFabric + "-N 2 --partial node1:nine");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("--partial"), std::string::npos) << r.err;
  r = cli(kFabric + "--of nodelist");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("-N COUNT or --gpus G"), std::string::npos) << r.err;
  r = cli(kFabric + "-N 13");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("the fabric has 12"), std::string::npos) << r.err;
}

TEST(PlaceCli, HelpStatesTheExitCodes) {
  CliRun r = cli("place --help");
  ASSERT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("5 cannot place"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--candidates"), std::string::npos);
}

// --from-slurm against a stand-in scontrol answering with the lab's real captures
// (tests/fixtures/slurm-nodes): node[1-3] on leaf1, node[4-6] on leaf2. In the 22.05 capture
// node1 has no GPU free, node2 5 of 8 (a 3-GPU job), node3 is ALLOCATED, node4 idle, node5
// reserved and in maintenance, node6 down and not responding.
class PlaceFromSlurm : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        test::scratch("place-slurm-" +
                      std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // scontrol's `show nodes` prints `nodes` (a fixture), `show partitions` the partitions'.
  std::string scontrol(const std::string& nodes, const std::string& partitions) {
    const std::string fx = std::string(TOPOAWARE_TEST_FIXTURES) + "/slurm-nodes/";
    const std::string path = dir_ + "/scontrol";
    std::ofstream(path) << "#!/bin/sh\ncase $2 in\n  nodes) cat '" << fx << nodes
                        << "' ;;\n  partitions) cat '" << fx << partitions << "' ;;\nesac\n";
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
    return path;
  }
  CliRun place(const std::string& args, const std::string& release = "22.05") {
    const std::string sc =
        release == "22.05"
            ? scontrol("slurm-22.05-reserved-not-responding.details.oneliner",
                       "slurm-22.05-partitions.oneliner")
            : scontrol("slurm-24.11-drained-reserved-not-responding.details.oneliner",
                       "slurm-24.11-partitions.oneliner");
    return cli(
        "place --fabric slurm-nodes/lab-6-nodes.topology.conf --gpus-per-node 8 "
        "--from-slurm --scontrol " +
        sc + " " + args);
  }
  std::string dir_;
};

TEST_F(PlaceFromSlurm, OnlyHostsSlurmWouldStartAJobOn) {
  // One whole host free (node4): one host fits, two do not.
  CliRun r = place("-N 1 --of nodelist");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "node4\n");
  r = place("-N 2 --of sbatch");
  EXPECT_EQ(r.rc, 5) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  // Part of a host: node2's 5 free GPUs count, node1's none.
  r = place("--gpus 4 --of nodelist");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "node2\n");
  r = place("--gpus 6 --of nodelist");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "node4\n");
  // Slurm 24.11's capture: node2 drained, node4 the only usable host.
  r = place("--gpus 4 --of nodelist", "24.11");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "node4\n");
}

TEST_F(PlaceFromSlurm, ThePartitionAskedForElseSlurmsDefault) {
  CliRun r = place("--partition debug --gpus 4 --of nodelist");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "node4\n");  // node2 is not in debug
  r = place("--partition batch -N 1");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("partition 'batch' has no nodes in Slurm"), std::string::npos) << r.err;
}

TEST_F(PlaceFromSlurm, ScontrolMissingOrFailingIsOneClearLine) {
  CliRun r =
      cli("place --fabric slurm-nodes/lab-6-nodes.topology.conf --gpus-per-node 8 "
          "--from-slurm --scontrol /nonexistent/scontrol -N 1 --of sbatch");
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("/nonexistent/scontrol show"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("No such file or directory"), std::string::npos) << r.err;
  const std::string failing = dir_ + "/scontrol";
  std::ofstream(failing) << "#!/bin/sh\necho 'slurm_load_node error: Unable to contact slurm "
                            "controller (connect failure)' >&2\nexit 1\n";
  std::filesystem::permissions(failing, std::filesystem::perms::owner_all);
  r =
      cli("place --fabric slurm-nodes/lab-6-nodes.topology.conf --gpus-per-node 8 "
          "--from-slurm --scontrol " +
          failing + " -N 1 --of sbatch");
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("exit 1: slurm_load_node error: Unable to contact slurm controller"),
            std::string::npos)
      << r.err;
  r =
      cli("place --fabric slurm-nodes/lab-6-nodes.topology.conf --gpus-per-node 8 "
          "--from-slurm --free node4 -N 1");
  EXPECT_EQ(r.rc, 2) << r.err;
  r =
      cli("place --fabric slurm-nodes/lab-6-nodes.topology.conf --gpus-per-node 8 "
          "--partition gpu -N 1");
  EXPECT_EQ(r.rc, 2) << r.err;
}

}  // namespace
}  // namespace topoaware
