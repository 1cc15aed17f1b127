// `topo-aware place` as an admin or cli_filter.lua runs it: the host set and Slurm's tree beside
// it, the outputs Slurm takes (--of nodelist, --of sbatch), JSON, and bad input named.
// Fabric: tests/fixtures/slurm-topology/place-12-nodes.topology.conf, leaves leaf1 node[1-2],
// leaf2 node[3-5], leaf3 node[6-8], leaf4 node[9-12]; spine1 = leaf1-2, spine2 = leaf3-4.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace topoaware
