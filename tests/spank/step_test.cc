// Launch styles through the facade, as slurmstepd's user_init and task_init drive it on the lab's
// cluster (node[1-4], DGX H100s): a per-node launcher (one task per host spawning its workers),
// ids=slurm, MPI tasks placed by the plan's own hostfile, and the requests no style can honour,
// which srun and every node refuse alike under either policy.
#include "step.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "facade_fixture.h"
#include "topoaware/launch/inputs.h"
#include "topoaware/mapper/synthetic.h"

namespace {

namespace mapper = topoaware::mapper;

class LaunchStyle : public Facade {
 protected:
  // Node `node_id` of node[1-N], one task a host (a per-node launcher's shape).
  ta_step per_node(std::uint32_t node_id, std::uint32_t hosts = 4) {
    ta_step s = step(node_id);
    static const char* const lists[] = {"", "node1\n", "node1\nnode2\n", "node1\nnode2\nnode3\n",
                                        "node1\nnode2\nnode3\nnode4\n"};
    s.hosts = lists[hosts];
    s.ntasks = hosts;
    s.tasks_per_node = hosts == 4 ? "1(x4)" : hosts == 3 ? "1(x3)" : "1(x2)";
    s.nlocal = 1;
    local_[0] = node_id;
    return s;
  }
  // The per-node plan computed by the mapper directly, for comparison.
  mapper::RankPlan direct_plan(const std::string& layout, int workers, int hosts = 4) {
    static auto fabric = topoaware::topology::load_fabric(kFabric);
    static auto node = topoaware::topology::load_node_file(kCapture);
    mapper::Request request;
    for (int h = 1; h <= hosts; ++h) request.hosts.push_back("node" + std::to_string(h));
    request.tasks_per_host.assign(static_cast<std::size_t>(hosts), workers);
    request.layout = mapper::parse_layout(layout, workers * hosts);
    request.host_blocks = true;
    return mapper::plan(fabric,
                        std::vector<const topoaware::topology::NodeTopology*>(
                            static_cast<std::size_t>(hosts), &node),
                        request);
  }
  int local_check(std::uint32_t nnodes, std::uint32_t ntasks, const char* mpi = nullptr) {
    ta_local l{};
    l.job_id = 77;
    l.hosts = "node1\nnode2\nnode3\nnode4\n";
    l.nnodes = nnodes;
    l.ntasks = ntasks;
    l.mpi_type = mpi;
    lines_.clear();
    return ta_local_check(&l, collect_line, &lines_, err_, sizeof err_);
  }
  static void collect_line(void* arg, int, const char* line) {
    static_cast<std::vector<std::string>*>(arg)->push_back(line);
  }
  std::vector<std::string> lines_;
};

TEST_F(LaunchStyle, OneTaskPerHostIsAPerNodeLauncherAndEveryNodeAgrees) {
  ASSERT_EQ(ta_set_spec("tp=8,pp=2", err_, sizeof err_), 0) << err_;
  const mapper::RankPlan want = direct_plan("tp=8,pp=2", 8);
  std::set<std::string> node_ranks, masters;
  for (std::uint32_t node = 0; node < 4; ++node) {
    ta_step s = per_node(node);
    ASSERT_EQ(prepare(s), TA_OK) << err_;
    ASSERT_NE(ta_step_master_host(), nullptr);
    masters.insert(ta_step_master_host());
    auto env = env_of(node);
    mapper::EnvOptions o;
    o.job_id = 77;
    o.master_port = master_port(77, 0);
    o.topo_file = env["NCCL_TOPO_FILE"];
    std::map<std::string, std::string> expected;
    for (const auto& [k, v] : mapper::launcher_environment(want, node, o)) {
      if (k != "MASTER_PORT") expected[k] = v;  // the fixture's user set it
    }
    expected["TOPO_AWARE_HOSTFILE"] = env["TOPO_AWARE_HOSTFILE"];
    EXPECT_EQ(env, expected) << "node" << node + 1;
    EXPECT_EQ(env["WORLD_SIZE"], "32");
    EXPECT_EQ(env["NPROC_PER_NODE"], "8");
    EXPECT_EQ(env.count("RANK"), 0u);
    node_ranks.insert(env["NODE_RANK"]);
    ta_step_finish();
  }
  EXPECT_EQ(node_ranks, (std::set<std::string>{"0", "1", "2", "3"}));
  EXPECT_EQ(masters.size(), 1u);
  // DeepSpeed's --no_ssh indexes a hostfile with --node_rank: the hosts in NODE_RANK order.
  ta_step s = per_node(2);
  ASSERT_EQ(prepare(s), TA_OK) << err_;
  auto env = env_of(2);
  ASSERT_EQ(env.count("TOPO_AWARE_HOSTFILE"), 1u);
  std::vector<std::string> by_node_rank(4);
  for (const auto& t : want.tasks) {
    by_node_rank[static_cast<std::size_t>(t.node_rank)] = want.hosts[t.host] + " slots=8\n";
  }
  std::string hosts;
  for (const auto& line : by_node_rank) hosts += line;
  std::ifstream in(env["TOPO_AWARE_HOSTFILE"]);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), hosts);
  ta_step_finish();
  EXPECT_FALSE(fs::exists(env["TOPO_AWARE_HOSTFILE"]));
  // srun: 4 tasks for tp=8,pp=2 fit, as 4 hosts x 8 workers.
  EXPECT_EQ(local_check(4, 4), TA_OK) << err_;
  bool said = false;
  for (const auto& l : lines_)
    said |= l.find("per-node launcher: 4 hosts, 32 workers") != std::string::npos;
  EXPECT_TRUE(said);
}

// One task a host is block order whatever SLURM_DISTRIBUTION says (srun in a batch job of one
// task a node inherits "cyclic").
TEST_F(LaunchStyle, OneTaskAHostIsBlockOrderUnderAnyDistribution) {
  ASSERT_EQ(ta_set_spec("tp=8", err_, sizeof err_), 0) << err_;
  for (const char* dist : {"cyclic", "plane", "cyclic:cyclic"}) {
    ta_step s = per_node(2);
    s.distribution = dist;
    EXPECT_EQ(prepare(s), TA_OK) << dist << ": " << err_;
  }
  // Several tasks a host in cyclic order: refused alike by every node (it is the step's
  // distribution, which all see), under the policy.
  ta_step s = step(1);
  s.distribution = "cyclic";
  EXPECT_EQ(prepare(s), TA_EFAIL);
  EXPECT_NE(std::string(err_).find("cyclic distribution"), std::string::npos) << err_;
}

TEST_F(LaunchStyle, NprocSetsTheWorkersPerHost) {
  ASSERT_EQ(ta_set_spec("nproc=2,tp=2,pp=2", err_, sizeof err_), 0) << err_;
  ta_step s = per_node(1);
  ASSERT_EQ(prepare(s), TA_OK) << err_;
  auto env = env_of(1);
  EXPECT_EQ(env["WORLD_SIZE"], "8");
  EXPECT_EQ(env["NPROC_PER_NODE"], "2");
  EXPECT_EQ(env["PET_NPROC_PER_NODE"], "2");
  EXPECT_EQ(std::count(env["CUDA_VISIBLE_DEVICES"].begin(), env["CUDA_VISIBLE_DEVICES"].end(), ','),
            1);
}

TEST_F(LaunchStyle, RequestsNoLaunchCanHonourAreRefusedAlikeUnderEitherPolicy) {
  for (const char* policy : {"policy=fail-open", "policy=fail-closed"}) {
    configure({"config=" + config_, policy});
    // 4 hosts x 8 workers cannot hold tp=16,pp=3: srun sees it when it plans the step's summary.
    ASSERT_EQ(ta_set_spec("tp=16,pp=3", err_, sizeof err_), 0) << err_;
    EXPECT_EQ(local_check(4, 4), TA_EREQUEST) << policy;
    EXPECT_NE(std::string(err_).find("4 hosts x 8 workers (per-node launcher)"), std::string::npos)
        << err_;
    // Where srun does not plan the step (judge_allocation = false, or a step on part of the
    // allocation), every node refuses alike.
    configure({"config=" + config_, policy, "judge_allocation=false"});
    ta_step s = per_node(2);
    EXPECT_EQ(prepare(s), TA_EREQUEST) << policy;
    // tp=3 groups would straddle hosts of 8 workers: nproc=6 fits.
    ASSERT_EQ(ta_set_spec("tp=3", err_, sizeof err_), 0) << err_;
    s = per_node(0, 3);
    EXPECT_EQ(prepare(s), TA_EREQUEST) << policy;
    EXPECT_NE(std::string(err_).find("would straddle hosts; run nproc=6"), std::string::npos)
        << err_;
    ASSERT_EQ(ta_set_spec("tp=3,nproc=6", err_, sizeof err_), 0) << err_;
    EXPECT_EQ(prepare(s), TA_OK) << err_;
    // A per-node launcher runs one task per host.
    ASSERT_EQ(ta_set_spec("launcher=per-node,tp=8", err_, sizeof err_), 0) << err_;
    s = step(1);
    EXPECT_EQ(prepare(s), TA_EREQUEST) << policy;
    EXPECT_NE(std::string(err_).find("--ntasks-per-node=1"), std::string::npos) << err_;
    // ids=slurm renumbers SLURM_PROCID, which MPI ranks do not follow.
    ASSERT_EQ(ta_set_spec("ids=slurm,tp=8", err_, sizeof err_), 0) << err_;
    EXPECT_EQ(local_check(4, 32, "pmix"), TA_EREQUEST) << policy;
    EXPECT_NE(std::string(err_).find("--mpi=none"), std::string::npos) << err_;
    s = step(1);
    s.mpi_type = "pmix";
    EXPECT_EQ(prepare(s), TA_EREQUEST) << policy;
    s.mpi_type = "none";
    EXPECT_EQ(prepare(s), TA_OK) << err_;
  }
}

TEST_F(LaunchStyle, IdsSlurmCarriesThePlanInSlurmsVariables) {
  ASSERT_EQ(ta_set_spec("tp=4,ids=slurm", err_, sizeof err_), 0) << err_;
  ta_step s = step(1);
  ASSERT_EQ(prepare(s), TA_OK) << err_;
  std::set<std::string> procids;
  for (std::uint32_t task = 8; task < 16; ++task) {
    auto env = env_of(task);
    EXPECT_EQ(env["SLURM_PROCID"], env["RANK"]);
    EXPECT_EQ(env["SLURM_LOCALID"], env["LOCAL_RANK"]);
    EXPECT_EQ(env["SLURM_NODEID"], env["NODE_RANK"]);
    EXPECT_EQ(env["TOPO_AWARE_SLURM_PROCID"], std::to_string(task));
    EXPECT_EQ(env["TOPO_AWARE_SLURM_NODEID"], "1");
    EXPECT_EQ(env["JAX_COORDINATOR_ADDRESS"], env["MASTER_ADDR"] + ":" + master_port(77, 0));
    procids.insert(env["SLURM_PROCID"]);
  }
  EXPECT_EQ(procids.size(), 8u);
  // The site's default applies where the SPEC does not say.
  std::ofstream(config_, std::ios::app) << "";
  configure({"config=" + config_, "ids=slurm"});
  ASSERT_EQ(ta_set_spec("tp=4", err_, sizeof err_), 0) << err_;
  ASSERT_EQ(prepare(s), TA_OK) << err_;
  EXPECT_EQ(env_of(9).count("SLURM_PROCID"), 1u);
  ASSERT_EQ(ta_set_spec("tp=4,ids=plan", err_, sizeof err_), 0) << err_;
  ASSERT_EQ(prepare(s), TA_OK) << err_;
  EXPECT_EQ(env_of(9).count("SLURM_PROCID"), 0u);
}

// MPI ranks are Slurm's task ids: Slurm placing the tasks from the plan's own hostfile makes them
// the plan's. Task g is rank g, on the GPU the plan gives rank g.
TEST_F(LaunchStyle, MpiTasksPlacedByThePlansHostfileAreItsRanks) {
  ASSERT_EQ(ta_set_spec("tp=4,pp=2", err_, sizeof err_), 0) << err_;
  // The plan of 2 tasks a host on node[1-4] in block order, its hostfile, and its GPUs.
  auto fabric = topoaware::topology::load_fabric(kFabric);
  auto node = topoaware::topology::load_node_file(kCapture);
  mapper::Request request;
  request.hosts = {"node1", "node2", "node3", "node4"};
  request.tasks_per_host = {2, 2, 2, 2};
  request.layout = mapper::parse_layout("tp=4,pp=2", 8);
  auto plan = mapper::plan(fabric, {&node, &node, &node, &node}, request);
  std::vector<std::string> host_of(8);
  std::vector<int> gpu_of(8);
  for (const auto& t : plan.tasks) {
    host_of[static_cast<std::size_t>(t.rank)] = plan.hosts[t.host];
    gpu_of[static_cast<std::size_t>(t.rank)] = t.gpu;
  }
  const std::string hostfile = (dir_ / "hostfile").string();
  {
    std::ofstream out(hostfile);
    for (const auto& h : host_of) out << h << "\n";
  }
  for (std::uint32_t n = 0; n < 4; ++n) {
    ta_step s = step(n);
    s.ntasks = 8;
    s.tasks_per_node = "2(x4)";
    s.distribution = "arbitrary";
    s.hostfile = hostfile.c_str();
    s.nlocal = 0;
    for (std::uint32_t g = 0; g < 8; ++g) {
      if (host_of[g] == "node" + std::to_string(n + 1)) local_[s.nlocal++] = g;
    }
    ASSERT_EQ(prepare(s), TA_OK) << err_;
    for (std::uint32_t i = 0; i < s.nlocal; ++i) {
      const std::uint32_t g = local_[i];
      auto env = env_of(g);
      EXPECT_EQ(env["RANK"], std::to_string(g));
      EXPECT_EQ(env["LOCAL_RANK"], std::to_string(i));
      // Device LOCAL_RANK of CUDA_VISIBLE_DEVICES is the plan's GPU for rank g.
      std::vector<std::string> devs;
      std::stringstream cvd(env["CUDA_VISIBLE_DEVICES"]);
      for (std::string d; std::getline(cvd, d, ',');) devs.push_back(d);
      ASSERT_EQ(devs.size(), s.nlocal);
      EXPECT_EQ(devs[i], std::to_string(gpu_of[g])) << "rank " << g;
    }
    ta_step_finish();
  }
}

TEST_F(LaunchStyle, PerNodeOnSlurmBoundGpusReordersSlurmsDevices) {
  ASSERT_EQ(ta_set_spec("tp=2,pp=2", err_, sizeof err_), 0) << err_;
  gres_ = "gpu:4(IDX:0-3)\ngpu:4(IDX:0-3)\ngpu:4(IDX:0-3)\ngpu:4(IDX:0-3)\n";
  ta_step s = per_node(1);
  s.step_gpus = "0,1,2,3";  // --gpus-per-node=4: the plan uses GPUs 0-3 of every host
  ASSERT_EQ(prepare(s), TA_OK) << err_;
  EXPECT_EQ(ta_step_note(), nullptr);
  std::map<std::string, std::string> env;
  ASSERT_EQ(ta_task_env(1, "0,1,2,3", collect, &env, err_, sizeof err_), TA_OK) << err_;
  EXPECT_EQ(env["WORLD_SIZE"], "16");
  std::multiset<char> devs(env["CUDA_VISIBLE_DEVICES"].begin(), env["CUDA_VISIBLE_DEVICES"].end());
  EXPECT_EQ(devs, (std::multiset<char>{'0', '1', '2', '3', ',', ',', ','}));
  // Slurm bound other GPUs than the plan's: its order stays, without NIC hints.
  s.step_gpus = "4,5,6,7";
  ASSERT_EQ(prepare(s), TA_OK) << err_;
  ASSERT_NE(ta_step_note(), nullptr);
  env.clear();
  ASSERT_EQ(ta_task_env(1, "0,1,2,3", collect, &env, err_, sizeof err_), TA_OK) << err_;
  EXPECT_EQ(env.count("CUDA_VISIBLE_DEVICES"), 0u);
  EXPECT_EQ(env.count("NCCL_IB_HCA"), 0u);
}

// Nodes that must agree: srun's digest of what it read, compared by every node before it plans.
TEST_F(LaunchStyle, NodesThatReadOtherInputsFailTheStep) {
  // The lab's fabric and capture copied where this test can change them, as on one node.
  const fs::path fabric = dir_ / "fabric.toml", capture = dir_ / "dgx.xml";
  fs::copy_file(kSource + "/tests/e2e/lab-crossed.toml", fabric);
  fs::copy_file(kCapture, capture);
  std::ofstream(config_) << "fabric = \"" << fabric.string() << "\"\njob_dir = \""
                         << (dir_ / "jobs").string() << "\"\n[[node]]\nhosts = \"node*\"\n"
                         << "capture = \"" << capture.string() << "\"\n";
  configure({"config=" + config_});
  ASSERT_EQ(ta_set_spec("tp=8", err_, sizeof err_), 0) << err_;
  ta_step s = step(1);
  ASSERT_EQ(srun_for(s), TA_OK) << err_;
  const std::string digest = digest_;
  EXPECT_EQ(digest.rfind("v2 build=", 0), 0u) << digest;
  EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_OK) << err_;

  // The fabric updated here only: named, and the step must fail whatever the policy.
  std::ofstream(fabric, std::ios::app) << "# updated on this node only\n";
  EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_EDISAGREE);
  EXPECT_EQ(std::string(err_),
            "its inputs differ from srun's: the fabric (" + fabric.string() + ")");
  EXPECT_EQ(ta_step_ready(), 0);
  // Without srun's digest the node cannot know, and it does not plan alone: a failure every
  // node meets alike, under the policy.
  s.digest = nullptr;
  EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_EFAIL);
  EXPECT_NE(std::string(err_).find("nodes do not plan alone"), std::string::npos) << err_;

  // The capture missing here only.
  fs::copy_file(kSource + "/tests/e2e/lab-crossed.toml", fabric,
                fs::copy_options::overwrite_existing);
  fs::remove(capture);
  s.digest = digest.c_str();
  EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_EDISAGREE);
  EXPECT_EQ(std::string(err_), "its inputs differ from srun's: the node captures");
  // A capture that is there but does not load here (unreadable, cut short): the same.
  std::ofstream(capture) << "<system version=\"1\"><cpu";
  EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_EDISAGREE);

  // A configuration this node cannot read, where srun could.
  fs::copy_file(kCapture, capture, fs::copy_options::overwrite_existing);
  EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_OK) << err_;
  configure({"config=" + (dir_ / "nonexistent.toml").string()});
  EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_EDISAGREE);
  EXPECT_NE(std::string(err_).find("srun read its inputs, this node cannot"), std::string::npos)
      << err_;
  configure({"config=" + config_});
  // Another build's digest, or none that this build reads.
  for (const char* other : {"v1 build=0 config=0 fabric=0 captures=0 spec=0", "v2 something"}) {
    s.digest = other;
    EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_EDISAGREE) << other;
    EXPECT_NE(std::string(err_).find("not this build's"), std::string::npos) << err_;
  }
  // Another build of the plugin: its digest's build part differs.
  std::string other_build = digest;
  other_build.replace(other_build.find("build=") + 6, 4, "ffff");
  s.digest = other_build.c_str();
  EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_EDISAGREE);
  EXPECT_NE(std::string(err_).find("the plugin's build ("), std::string::npos) << err_;
  // The health reports srun planned with, cut short or lost on the way: never planned without.
  s.digest = digest.c_str();
  s.health = "node3 mlx5_2 200\n";
  EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_EDISAGREE);
  EXPECT_NE(std::string(err_).find("the health reports srun planned with"), std::string::npos)
      << err_;
}

// srun could not plan (fail-open): it hands every node the verdict, and none plans alone, even
// where this node could.
TEST_F(LaunchStyle, SrunsFailureLeavesEveryNodeUnmodified) {
  ASSERT_EQ(ta_set_spec("tp=8", err_, sizeof err_), 0) << err_;
  ta_step s = step(1);
  ASSERT_EQ(srun_for(s), TA_OK) << err_;
  const std::string planned = digest_;
  // srun's own fabric unreadable (a copy on the submit host only, say): srun fails, its verdict
  // goes to the nodes.
  configure({"config=" + config_, "fabric=" + (dir_ / "missing.toml").string()});
  EXPECT_EQ(srun_for(s), TA_EFAIL);
  EXPECT_NE(std::string(err_).find("missing.toml"), std::string::npos) << err_;
  EXPECT_EQ(digest_, "v2 unmodified");
  configure({"config=" + config_});
  EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_UNMODIFIED);
  EXPECT_EQ(ta_step_ready(), 0);
  s.digest = planned.c_str();
  EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_OK) << err_;
}

// A host without a capture is modeled by live discovery, on srun's machine and on every node:
// where one node's hardware differs from srun's, its plan would differ, so it fails the step.
TEST_F(LaunchStyle, ALiveModelThatDiffersOnOneNodeFailsTheStep) {
  const fs::path sysfs = dir_ / "sysfs";
  fs::copy(kSource + "/tests/fixtures/sysfs/dgx-h100", sysfs,
           fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  std::ofstream(config_) << "fabric = \"" << kFabric << "\"\njob_dir = \""
                         << (dir_ / "jobs").string() << "\"\ndiscover_fsroot = \"" << sysfs.string()
                         << "\"\n";
  // No [[node]] and a fabric whose node types name no capture: every host is modeled live.
  const fs::path fabric = dir_ / "fabric.conf";
  std::ofstream(fabric) << "SwitchName=leaf1 Nodes=node[1-2]\nSwitchName=leaf2 Nodes=node[3-4]\n"
                        << "SwitchName=spine Switches=leaf[1-2]\n";
  configure({"config=" + config_, "fabric=" + fabric.string()});
  ASSERT_EQ(ta_set_spec("tp=8", err_, sizeof err_), 0) << err_;
  ta_step s = step(1);
  ASSERT_EQ(srun_for(s), TA_OK) << err_;
  EXPECT_EQ(digest_.find(" live=- "), std::string::npos) << digest_;
  EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_OK) << err_;
  // This node's GPU 0 trained at x8: another machine than the one srun modeled.
  const fs::path width = sysfs / "sys/bus/pci/devices/0000:1b:00.0/current_link_width";
  ASSERT_TRUE(fs::exists(width));
  std::ofstream(width) << "8\n";
  EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_EDISAGREE);
  EXPECT_NE(std::string(err_).find("the live-discovered model of hosts without a capture"),
            std::string::npos)
      << err_;
}

// SLURM_STEP_GPUS is each node's own; what every node plans with is what slurmctld told srun the
// job holds on each host. --gpus=3 over 2 hosts, one task a host: 2 GPUs on node1, 1 on node2.
TEST_F(LaunchStyle, UnevenGpusHeldGiveEveryNodeOnePlanOrFailTheStep) {
  gres_ = "gpu:2(IDX:0-1)\ngpu:1(IDX:0)\n";
  ASSERT_EQ(ta_set_spec("", err_, sizeof err_), 0) << err_;
  std::vector<std::map<std::string, std::string>> envs;
  for (std::uint32_t node : {0u, 1u}) {
    ta_step s = per_node(node, 2);
    s.step_gpus = node == 0 ? "0,1" : "0";
    ASSERT_EQ(prepare(s), TA_OK) << err_;
    envs.push_back(env_of(node));
  }
  // One host holds a single GPU: not a per-node launcher on either node, one task a GPU on both.
  for (const auto& env : envs) {
    EXPECT_EQ(env.count("NODE_RANK"), 1u);
    EXPECT_EQ(env.count("NPROC_PER_NODE"), 0u);
    EXPECT_EQ(env.at("WORLD_SIZE"), "2");
  }
  EXPECT_NE(envs[0].at("RANK"), envs[1].at("RANK"));
  // Asked as a per-node launcher: the workers are what each host holds (2 and 1), alike on both,
  // and data parallel over 2 + 1 workers numbered node_rank*G + i is refused alike on both.
  ASSERT_EQ(ta_set_spec("launcher=per-node", err_, sizeof err_), 0) << err_;
  configure({"config=" + config_, "judge_allocation=false"});
  for (std::uint32_t node : {0u, 1u}) {
    ta_step s = per_node(node, 2);
    s.step_gpus = node == 0 ? "0,1" : "0";
    EXPECT_EQ(prepare(s), TA_EREQUEST) << node;
    EXPECT_NE(std::string(err_).find("would straddle hosts"), std::string::npos) << err_;
  }
  // A node that Slurm bound fewer GPUs than the job holds there (and the plan gives its
  // launcher) cannot apply the plan: it fails the step.
  gres_ = "gpu:2(IDX:0-1)\ngpu:2(IDX:0-1)\n";
  ta_step s = per_node(0, 2);
  s.step_gpus = "0";
  EXPECT_EQ(prepare(s), TA_EDISAGREE);
  EXPECT_NE(std::string(err_).find("Slurm bound 1 GPUs to its launcher"), std::string::npos)
      << err_;
  EXPECT_NE(std::string(err_).find("nproc=1"), std::string::npos) << err_;
}

// One list names every variable a task may get (the shell checks which the user set against it):
// every name task_env() exports in any launch style is in it, and every name in it is exported by
// some style. A rail-optimized fabric (NCCL_CROSS_NIC) and a node whose name does not resolve
// (GLOO_SOCKET_IFNAME) so that every producer speaks.
TEST(ExportedNames, AreWhatTheLaunchStylesSet) {
  namespace launch = topoaware::launch;
  namespace spank = topoaware::spank;
  std::set<std::string> listed;
  for (const auto& n : spank::exported_names()) {
    EXPECT_TRUE(listed.insert(n).second) << n << " listed twice";
  }
  std::set<std::string> c_listed;
  for (const char* const* n = ta_exported_names(); *n != nullptr; ++n) c_listed.insert(*n);
  EXPECT_EQ(c_listed, listed);

  mapper::FatTreeSpec tree;
  tree.hosts = 4;
  tree.hosts_per_leaf = 2;
  tree.rail_optimized = true;
  const topoaware::topology::Fabric fabric = mapper::make_fat_tree(tree);
  launch::NodeModels nodes;
  auto& node = nodes.by_source["synthetic"];
  node = std::make_unique<topoaware::topology::NodeTopology>(mapper::make_node(8, 8, 450, 50));
  launch::StepShape shape;
  for (const auto& h : fabric.hosts) {
    shape.hosts.push_back(h.name);
    nodes.per_host.push_back(node.get());
  }
  std::set<std::string> produced;
  for (const char* spec : {"tp=8,pp=2", "tp=8,pp=2,ids=slurm", "launcher=per-node,tp=8",
                           "launcher=per-node,tp=8,ids=slurm"}) {
    const mapper::LaunchSpec launch_spec = launch::parse_spec(spec);
    const bool per_node = launch_spec.launcher == mapper::Launcher::kPerNode;
    shape.tasks.assign(shape.hosts.size(), per_node ? 1 : 8);
    shape.gpus_per_host = launch::workers_per_host(launch_spec, nodes.per_host, {});
    spank::NodeStep here;
    here.node = 1;
    for (std::uint32_t t = 0; t < static_cast<std::uint32_t>(shape.tasks[1]); ++t) {
      here.local_global.push_back(static_cast<std::uint32_t>(shape.tasks[0]) + t);
    }
    spank::StepPlan plan =
        spank::plan_step(launch::Config{}, launch_spec, shape, here, fabric, nodes, "");
    ASSERT_TRUE(plan.plan.rail_optimized) << spec;
    plan.env.topo_file = "/jobs/1/nccl-topo.0.host.xml";
    plan.hosts_file = "/jobs/1/hosts.0.host";
    plan.gloo_ifname = "eth0";
    for (const auto& [name, value] : spank::task_env(plan, here.local_global.front(), "")) {
      // Always set when asked for (ids=slurm): not the user's to keep.
      if (name.rfind("SLURM_", 0) == 0 || name.rfind("TOPO_AWARE_SLURM_", 0) == 0) continue;
      EXPECT_EQ(listed.count(name), 1u) << name << " is exported (" << spec << ") but not listed";
      produced.insert(name);
    }
  }
  EXPECT_EQ(produced, listed);
}

}  // namespace
