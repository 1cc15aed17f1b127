// The plugin's facade without Slurm, set up as the lab configures it: shared by the facade's and
// the launch styles' tests.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "facade.h"
#include "topoaware/launch/port.h"
#include "topoaware/mapper/plan.h"
#include "topoaware/topology/fabric_io.h"
#include "topoaware/topology/sources.h"

namespace {

namespace fs = std::filesystem;
const std::string kSource = TOPOAWARE_SOURCE_DIR;
const std::string kFabric = kSource + "/etc/lab-cluster.toml";
const std::string kCapture = kSource + "/tests/fixtures/nccl-topo/dgx-h100-topo.xml";

// The facade of one slurmstepd (or srun) configured for the lab's cluster: node[1-4], DGX H100
// captures, a private job directory.
class Facade : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kFabric)) GTEST_SKIP() << kFabric << " absent";
    dir_ = fs::temp_directory_path() / ("topo-aware-facade-test-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "jobs");
    config_ = (dir_ / "topo-aware.toml").string();
    std::ofstream(config_) << "fabric = \"" << kFabric << "\"\njob_dir = \""
                           << (dir_ / "jobs").string()
                           << "\"\n[[node]]\nhosts = \"node*\"\ncapture = \"" << kCapture << "\"\n";
    configure({"config=" + config_});
  }
  void TearDown() override {
    ta_step_finish();
    fs::remove_all(dir_);
  }
  void configure(std::vector<std::string> args) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    ASSERT_EQ(ta_configure(static_cast<int>(argv.size()), argv.data(), err_, sizeof err_), 0);
  }
  // Node 2 (index 1) of node[1-4], 8 tasks each, block distribution.
  ta_step step(std::uint32_t node_id = 1) {
    for (std::uint32_t i = 0; i < 8; ++i) local_[i] = node_id * 8 + i;
    ta_step s{};
    s.job_id = 77;
    s.step_id = 0;
    s.node_id = node_id;
    s.ntasks = 32;
    s.hosts = "node1\nnode2\nnode3\nnode4\n";
    s.tasks_per_node = "8(x4)";
    s.step_gpus = "";
    s.user_env = "MASTER_PORT\n";
    s.local_global = local_;
    s.nlocal = 8;
    return s;
  }
  // What srun hands the nodes for this step (ta_local_check on the step's hosts and tasks, as srun
  // sees them), into `s`: the digest, or srun's verdict that the step runs unmodified. This srun
  // sees no MPI type; `gres_` is what slurmctld says the job holds on each host.
  int srun_for(ta_step& s) {
    std::size_t nhosts = 0;
    for (const char* c = s.hosts; c != nullptr && *c != '\0'; ++c) nhosts += *c == '\n';
    ta_local l{};
    l.job_id = s.job_id;
    l.step_id = s.step_id;
    l.hosts = s.hosts;
    l.gres = gres_.empty() ? nullptr : gres_.c_str();
    l.nnodes = static_cast<std::uint32_t>(nhosts);
    l.ntasks = s.ntasks;
    l.hostfile = s.hostfile;
    const int rc = ta_local_check(
        &l, [](void*, int, const char*) {}, nullptr, err_, sizeof err_);
    digest_ = ta_local_digest();
    health_ = ta_local_health() != nullptr ? ta_local_health() : "";
    s.digest = digest_.c_str();
    s.health = health_.c_str();
    return rc;
  }
  // srun, then this node: the node's ta_step_prepare.
  int prepare(ta_step& s) {
    srun_for(s);
    return ta_step_prepare(&s, err_, sizeof err_);
  }
  // MASTER_PORT as srun derives it on this machine.
  static std::string master_port(std::uint32_t job, std::uint32_t step) {
    return std::to_string(
        topoaware::launch::master_port(job, step, topoaware::launch::ephemeral_ports()));
  }
  static int collect(void* arg, const char* name, const char* value) {
    (*static_cast<std::map<std::string, std::string>*>(arg))[name] = value;
    return 0;
  }
  std::map<std::string, std::string> env_of(std::uint32_t task) {
    std::map<std::string, std::string> env;
    EXPECT_EQ(ta_task_env(task, nullptr, collect, &env, err_, sizeof err_), 0) << err_;
    return env;
  }

  fs::path dir_;
  std::string config_;
  std::string gres_, digest_, health_;
  char err_[1024] = "";
  std::uint32_t local_[8] = {};
};

}  // namespace
