// Asking scontrol for the nodes' state (tools/topo-aware/slurm_state.h), against a stand-in
// scontrol that answers with the lab's real captures (tests/fixtures/slurm-nodes): the partition
// filter, the default partition, and each way scontrol can fail named in one message.
#include "slurm_state.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli_support.h"
#include "topoaware/topology/error.h"

namespace topoaware::cli {
namespace {

namespace fs = std::filesystem;
using test::scratch;
using test::slurp;

class SlurmState : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch("scontrol-" +
                   std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // A scontrol whose `show nodes` and `show partitions` print the given fixtures; `body` runs
  // first (to fail, or to sleep). Every call's SLURM_CONF and arguments go to the log.
  std::string scontrol(const std::string& nodes, const std::string& body = "") {
    std::string fx = std::string(TOPOAWARE_TEST_FIXTURES) + "/slurm-nodes/";
    std::string path = dir_ + "/scontrol";
    std::ofstream(path) << "#!/bin/sh\n"
                        << "echo \"$SLURM_CONF $*\" >>'" << dir_ << "/log'\n"
                        << body << "\n"
                        << "case $2 in\n"
                        << "  nodes) cat '" << fx << nodes << "' ;;\n"
                        << "  partitions) cat '" << fx << "slurm-22.05-partitions.oneliner' ;;\n"
                        << "esac\n";
    fs::permissions(path, fs::perms::owner_all);
    return path;
  }
  std::string error_of(const std::string& program, const std::string& partition, int timeout_s) {
    try {
      slurm_state(program, partition, timeout_s);
    } catch (const topology::Error& e) {
      return e.what();
    }
    return {};
  }
  std::string dir_;
};

std::vector<std::string> names(const cli::SlurmState& s) {
  std::vector<std::string> out;
  for (const auto& n : s.nodes) out.push_back(n.name);
  return out;
}

TEST_F(SlurmState, ThePartitionAskedForOrSlurmsDefault) {
  std::string sc = scontrol("slurm-22.05-reserved-not-responding.details.oneliner");
  ::setenv("SLURM_CONF", "/lab/etc/slurm.conf", 1);
  cli::SlurmState debug = slurm_state(sc, "debug", 5);
  EXPECT_EQ(debug.partition, "debug");
  EXPECT_EQ(names(debug), (std::vector<std::string>{"node4", "node5", "node6"}));
  EXPECT_TRUE(debug.nodes[0].usable());
  EXPECT_FALSE(debug.nodes[1].usable());
  cli::SlurmState dflt = slurm_state(sc, "", 5);
  EXPECT_EQ(dflt.partition, "gpu");
  EXPECT_EQ(dflt.nodes.size(), 6u);
  // scontrol reads the cluster from the caller's SLURM_CONF; --details for GresUsed.
  EXPECT_EQ(slurp(dir_ + "/log"),
            "/lab/etc/slurm.conf show nodes --details --oneliner\n"
            "/lab/etc/slurm.conf show partitions --oneliner\n"
            "/lab/etc/slurm.conf show nodes --details --oneliner\n");
  ::unsetenv("SLURM_CONF");
}

TEST_F(SlurmState, EachFailureNamedInOneMessage) {
  EXPECT_EQ(error_of(dir_ + "/no-scontrol", "gpu", 5),
            dir_ + "/no-scontrol show nodes --details --oneliner: " + dir_ +
                "/no-scontrol: No such file or directory (install slurm-client, or name it "
                "with --scontrol)");
  std::string down = scontrol("slurm-22.05-idle.details.oneliner",
                              "echo 'slurm_load_node error: Unable to contact slurm controller "
                              "(connect failure)' >&2; exit 1");
  EXPECT_EQ(error_of(down, "gpu", 5),
            down +
                " show nodes --details --oneliner: exit 1: slurm_load_node error: Unable to "
                "contact slurm controller (connect failure)");
  std::string slow = scontrol("slurm-22.05-idle.details.oneliner", "sleep 5");
  EXPECT_EQ(error_of(slow, "gpu", 1),
            slow + " show nodes --details --oneliner: " + slow + ": no answer within 1 s");
  std::string ok = scontrol("slurm-22.05-idle.details.oneliner");
  EXPECT_EQ(error_of(ok, "batch", 5), "--partition: partition 'batch' has no nodes in Slurm");
  std::string garbled = scontrol("README.md");
  EXPECT_NE(error_of(garbled, "gpu", 5).find("scontrol show nodes:1: not a node record"),
            std::string::npos);
}

}  // namespace
}  // namespace topoaware::cli
