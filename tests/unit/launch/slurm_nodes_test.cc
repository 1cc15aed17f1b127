// scontrol's node records (launch/slurm_nodes.h) on real captures from the lab's Slurm 22.05
// (tests/fixtures/slurm-nodes/README.md says how each was made): which nodes a new job could
// start on, and how many GPUs each has free, with and without --details, one line or several.
// Edited lines (marked so) cover what the lab cannot show: typed GPUs, TRES accounting of GPUs.
#include "topoaware/launch/slurm_nodes.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "topoaware/topology/error.h"

namespace topoaware::launch {
namespace {

std::string fixture(const std::string& name) {
  std::string path = std::string(TOPOAWARE_TEST_FIXTURES) + "/slurm-nodes/" + name;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<SlurmNode> read(const std::string& name) {
  return parse_scontrol_nodes(fixture(name), name);
}

std::string error_of(const std::string& text) {
  try {
    parse_scontrol_nodes(text, "scontrol");
  } catch (const topology::Error& e) {
    return e.what();
  }
  return {};
}

// 22.05, six nodes: node1 --exclusive (ALLOCATED: Slurm gives an exclusive job every GPU),
// node2 a 3-GPU job then drained, node3 an 8-GPU job on 2 of 8 CPUs (MIXED, no GPU left), node4
// drained idle, node5 in a MAINT reservation made two seconds before (not flagged yet), node6 down.
TEST(SlurmNodes, DetailsSayWhatIsFreeAndWhy) {
  auto nodes = read("slurm-22.05-drained-down.details.oneliner");
  ASSERT_EQ(nodes.size(), 6u);
  EXPECT_EQ(nodes[0].name, "node1");
  EXPECT_EQ(nodes[0].state, "ALLOCATED");
  EXPECT_EQ(nodes[0].gpus, 8);
  EXPECT_EQ(nodes[0].gpus_used, 8);
  EXPECT_EQ(nodes[0].unusable(), "state ALLOCATED");

  EXPECT_EQ(nodes[1].state, "MIXED");
  EXPECT_EQ(nodes[1].flags, std::vector<std::string>{"DRAIN"});
  EXPECT_EQ(nodes[1].gpus_used, 3);
  EXPECT_EQ(nodes[1].free_gpus(), 5);
  EXPECT_EQ(nodes[1].unusable(), "flag DRAIN");

  EXPECT_EQ(nodes[2].free_gpus(), 0);
  EXPECT_EQ(nodes[2].unusable(), "no free GPU");
  EXPECT_EQ(nodes[2].partitions, (std::vector<std::string>{"gpu", "debug"}));
  EXPECT_TRUE(nodes[2].in_partition("debug"));
  EXPECT_FALSE(nodes[0].in_partition("debug"));

  EXPECT_EQ(nodes[3].unusable(), "flag DRAIN");
  EXPECT_TRUE(nodes[4].usable());
  EXPECT_EQ(nodes[4].free_gpus(), 8);
  EXPECT_EQ(nodes[5].unusable(), "state DOWN");
  for (const SlurmNode& n : nodes) EXPECT_TRUE(n.gpus_used_known) << n.name;
}

// The second capture: reservations and a slurmd that stopped answering, as scontrol prints them
// (flags after '+', NOT_RESPONDING spelled out, not sinfo's '*').
TEST(SlurmNodes, ReservedAndNotResponding) {
  auto nodes = read("slurm-22.05-reserved-not-responding.details.oneliner");
  ASSERT_EQ(nodes.size(), 6u);
  std::vector<std::string> why;
  for (const SlurmNode& n : nodes) why.push_back(n.unusable());
  EXPECT_EQ(why, (std::vector<std::string>{"no free GPU", "", "state ALLOCATED", "",
                                           "flag MAINTENANCE", "state DOWN"}));
  EXPECT_EQ(nodes[1].free_gpus(), 5);
  EXPECT_EQ(nodes[4].flags, (std::vector<std::string>{"MAINTENANCE", "RESERVED"}));
  EXPECT_EQ(nodes[5].flags, std::vector<std::string>{"NOT_RESPONDING"});
  auto multi = read("slurm-22.05-reserved-not-responding.details.multiline");
  ASSERT_EQ(multi.size(), nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    EXPECT_EQ(multi[i].unusable(), why[i]) << nodes[i].name;
    EXPECT_EQ(multi[i].free_gpus(), nodes[i].free_gpus()) << nodes[i].name;
  }
  EXPECT_EQ(default_partition(fixture("slurm-22.05-partitions.oneliner")), "gpu");
}

// Slurm 24.11.5 (Debian 13) on the same lab: the same fields in the same order, a new one
// (ResumeAfterTime) ignored; node2 drained before its job started.
TEST(SlurmNodes, Slurm2411) {
  auto nodes = read("slurm-24.11-drained-reserved-not-responding.details.oneliner");
  ASSERT_EQ(nodes.size(), 6u);
  std::vector<std::string> why;
  for (const SlurmNode& n : nodes) why.push_back(n.unusable());
  EXPECT_EQ(why, (std::vector<std::string>{"no free GPU", "flag DRAIN", "state ALLOCATED", "",
                                           "flag RESERVED", "flag NOT_RESPONDING"}));
  EXPECT_EQ(nodes[3].free_gpus(), 8);
  EXPECT_EQ(nodes[3].partitions, (std::vector<std::string>{"gpu", "debug"}));
  for (const char* other : {"slurm-24.11-drained-reserved-not-responding.details.multiline",
                            "slurm-24.11-drained-reserved-not-responding.oneliner"}) {
    auto again = read(other);
    ASSERT_EQ(again.size(), nodes.size()) << other;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      EXPECT_EQ(again[i].unusable(), why[i]) << other << " " << nodes[i].name;
    }
  }
  EXPECT_EQ(default_partition(fixture("slurm-24.11-partitions.oneliner")), "gpu");
}

// Without --details there is no GresUsed, and the lab accounts no gres/gpu TRES: an idle node's
// GPUs are free, a MIXED node's are taken as busy (never offer a GPU that may be in use).
TEST(SlurmNodes, WithoutDetailsABusyNodeOffersNothing) {
  auto nodes = read("slurm-22.05-drained-down.oneliner");
  ASSERT_EQ(nodes.size(), 6u);
  EXPECT_FALSE(nodes[2].gpus_used_known);
  EXPECT_EQ(nodes[2].free_gpus(), 0);
  EXPECT_EQ(nodes[4].free_gpus(), 8);
  EXPECT_TRUE(nodes[4].usable());
}

TEST(SlurmNodes, SeveralLinesReadAsOne) {
  auto one = read("slurm-22.05-drained-down.oneliner");
  auto multi = read("slurm-22.05-drained-down.multiline");
  ASSERT_EQ(one.size(), multi.size());
  for (std::size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(one[i].name, multi[i].name);
    EXPECT_EQ(one[i].state, multi[i].state);
    EXPECT_EQ(one[i].flags, multi[i].flags);
    EXPECT_EQ(one[i].partitions, multi[i].partitions);
    EXPECT_EQ(one[i].gpus, multi[i].gpus);
    EXPECT_EQ(one[i].unusable(), multi[i].unusable());
  }
}

TEST(SlurmNodes, AllIdle) {
  auto nodes = read("slurm-22.05-idle.details.oneliner");
  ASSERT_EQ(nodes.size(), 6u);
  for (const SlurmNode& n : nodes) {
    EXPECT_TRUE(n.usable()) << n.name << ": " << n.unusable();
    EXPECT_EQ(n.free_gpus(), 8) << n.name;
    EXPECT_EQ(n.partitions, std::vector<std::string>{"gpu"});
  }
}

// Edited from the capture's node2: typed GPUs with sockets (commas inside the parentheses),
// GresUsed with indexes and a "(null)" type, GPUs accounted as TRES.
TEST(SlurmNodes, TypedGpusAndTres) {
  auto nodes = parse_scontrol_nodes(
      "NodeName=a Gres=gpu:h100:4(S:0,2),gpu:a100:4(S:1),nic:2 "
      "GresUsed=gpu:h100:2(IDX:0-1),gpu:a100:0(IDX:N/A) State=MIXED Partitions=p\n"
      "NodeName=b Gres=gpu:8(S:0-1) GresUsed=gpu:(null):3(IDX:0,2,5) State=MIXED+PLANNED\n"
      "NodeName=c Gres=(null) State=IDLE CfgTRES=cpu=8,gres/gpu=8,gres/gpu:h100=8 "
      "AllocTRES=cpu=2,gres/gpu=6\n"
      "NodeName=d Gres=(null) State=IDLE+COMPLETING CfgTRES=cpu=8,gres/gpu=4 AllocTRES=\n",
      "edited");
  ASSERT_EQ(nodes.size(), 4u);
  EXPECT_EQ(nodes[0].gpus, 8);
  EXPECT_EQ(nodes[0].gpus_used, 2);
  EXPECT_EQ(nodes[1].gpus_used, 3);
  EXPECT_TRUE(nodes[1].usable()) << nodes[1].unusable();
  EXPECT_EQ(nodes[2].gpus, 8);
  EXPECT_EQ(nodes[2].free_gpus(), 2);
  EXPECT_TRUE(nodes[3].gpus_used_known);
  EXPECT_EQ(nodes[3].free_gpus(), 4);
  EXPECT_TRUE(nodes[3].usable()) << nodes[3].unusable();
}

// A reason is free text printed after every field read here: what it says cannot change them.
TEST(SlurmNodes, AReasonCannotChangeTheState) {
  auto nodes = parse_scontrol_nodes(
      "NodeName=n1 Gres=gpu:8 State=IDLE+DRAIN Partitions=gpu "
      "Reason=was State=IDLE Partitions=other GresUsed=gpu:0 [root@2026-12-07T12:40:00]\n",
      "edited");
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].unusable(), "flag DRAIN");
  EXPECT_EQ(nodes[0].partitions, std::vector<std::string>{"gpu"});
}

TEST(SlurmNodes, FlagsThatKeepJobsOff) {
  for (const char* state : {"IDLE+RESERVED", "IDLE+MAINTENANCE", "IDLE+NOT_RESPONDING", "IDLE*",
                            "IDLE+CLOUD+POWERED_DOWN", "IDLE+POWERING_UP", "IDLE+REBOOT_REQUESTED",
                            "IDLE+FAIL", "IDLE+SOMETHING_NEW", "FUTURE", "UNKNOWN"}) {
    auto nodes =
        parse_scontrol_nodes(std::string("NodeName=n Gres=gpu:8 State=") + state + "\n", "edited");
    ASSERT_EQ(nodes.size(), 1u);
    EXPECT_FALSE(nodes[0].usable()) << state;
  }
  auto star = parse_scontrol_nodes("NodeName=n Gres=gpu:8 State=DOWN*+DRAIN\n", "edited");
  EXPECT_EQ(star[0].state, "DOWN");
  EXPECT_EQ(star[0].flags, (std::vector<std::string>{"NOT_RESPONDING", "DRAIN"}));
}

TEST(SlurmNodes, RefusalsNameTheLine) {
  EXPECT_EQ(error_of("NodeName=a State=IDLE\nslurm_load_node error: Unable to contact slurm "
                     "controller\n"),
            "scontrol:2: not a node record of scontrol show nodes: 'slurm_load_node error: "
            "Unable to contact slurm controller'");
  EXPECT_EQ(error_of("\nNodeName=a Gres=gpu:x State=IDLE\n"),
            "scontrol:2: Gres=gpu:x: 'x' is not a GPU count");
  EXPECT_EQ(error_of("NodeName=a Gres=gpu:8\n"), "scontrol:1: node a has no State");
  EXPECT_NE(error_of("NodeName=a Gres=gpu:99999999999999999999 State=IDLE\n").find("more than"),
            std::string::npos);
  EXPECT_TRUE(parse_scontrol_nodes("", "scontrol").empty());
}

TEST(SlurmNodes, DefaultPartition) {
  EXPECT_EQ(default_partition("PartitionName=debug AllowGroups=ALL Default=NO State=UP\n"
                              "PartitionName=gpu AllowGroups=ALL Default=YES State=UP\n"),
            "gpu");
  EXPECT_EQ(default_partition("PartitionName=gpu\n   AllowGroups=ALL Default=YES\n"), "gpu");
  EXPECT_EQ(default_partition("PartitionName=gpu Default=NO\n"), "");
}

}  // namespace
}  // namespace topoaware::launch
