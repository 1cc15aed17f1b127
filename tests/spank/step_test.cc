// Launch styles through the facade, as slurmstepd's user_init and task_init drive it on the lab's
// cluster (node[1-4], DGX H100s): a per-node launcher (one task per host spawning its workers),
// ids=slurm, MPI tasks placed by the plan's own hostfile, and the requests no style can honour,
// which srun and every node refuse alike under either policy.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "facade_fixture.h"

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
    ASSERT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_OK) << err_;
    ASSERT_NE(ta_step_master_host(), nullptr);
    masters.insert(ta_step_master_host());
    auto env = env_of(node);
    mapper::EnvOptions o;
    o.job_id = 77;
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
  ASSERT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_OK) << err_;
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
    EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_OK) << dist << ": " << err_;
  }
  ta_step s = step(1);
  s.distribution = "cyclic";
  EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_EFAIL);
}

TEST_F(LaunchStyle, NprocSetsTheWorkersPerHost) {
  ASSERT_EQ(ta_set_spec("nproc=2,tp=2,pp=2", err_, sizeof err_), 0) << err_;
  ta_step s = per_node(1);
  ASSERT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_OK) << err_;
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
    // 4 hosts x 8 workers cannot hold tp=16,pp=3.
    ASSERT_EQ(ta_set_spec("tp=16,pp=3", err_, sizeof err_), 0) << err_;
    EXPECT_EQ(local_check(4, 4), TA_EREQUEST) << policy;
    EXPECT_NE(std::string(err_).find("4 hosts x 8 workers (per-node launcher)"), std::string::npos)
        << err_;
    ta_step s = per_node(2);
    EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_EREQUEST) << policy;
    // tp=3 groups would straddle hosts of 8 workers: nproc=6 fits.
    ASSERT_EQ(ta_set_spec("tp=3", err_, sizeof err_), 0) << err_;
    s = per_node(0, 3);
    EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_EREQUEST) << policy;
    EXPECT_NE(std::string(err_).find("would straddle hosts; run nproc=6"), std::string::npos)
        << err_;
    ASSERT_EQ(ta_set_spec("tp=3,nproc=6", err_, sizeof err_), 0) << err_;
    EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_OK) << err_;
    // A per-node launcher runs one task per host.
    ASSERT_EQ(ta_set_spec("launcher=per-node,tp=8", err_, sizeof err_), 0) << err_;
    s = step(1);
    EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_EREQUEST) << policy;
    EXPECT_NE(std::string(err_).find("--ntasks-per-node=1"), std::string::npos) << err_;
    // ids=slurm renumbers SLURM_PROCID, which MPI ranks do not follow.
    ASSERT_EQ(ta_set_spec("ids=slurm,tp=8", err_, sizeof err_), 0) << err_;
    EXPECT_EQ(local_check(4, 32, "pmix"), TA_EREQUEST) << policy;
    EXPECT_NE(std::string(err_).find("--mpi=none"), std::string::npos) << err_;
    s = step(1);
    s.mpi_type = "pmix";
    EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_EREQUEST) << policy;
    s.mpi_type = "none";
    EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_OK) << err_;
  }
}

TEST_F(LaunchStyle, IdsSlurmCarriesThePlanInSlurmsVariables) {
  ASSERT_EQ(ta_set_spec("tp=4,ids=slurm", err_, sizeof err_), 0) << err_;
  ta_step s = step(1);
  ASSERT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_OK) << err_;
  std::set<std::string> procids;
  for (std::uint32_t task = 8; task < 16; ++task) {
    auto env = env_of(task);
    EXPECT_EQ(env["SLURM_PROCID"], env["RANK"]);
    EXPECT_EQ(env["SLURM_LOCALID"], env["LOCAL_RANK"]);
    EXPECT_EQ(env["SLURM_NODEID"], env["NODE_RANK"]);
    EXPECT_EQ(env["TOPO_AWARE_SLURM_PROCID"], std::to_string(task));
    EXPECT_EQ(env["TOPO_AWARE_SLURM_NODEID"], "1");
    EXPECT_EQ(env["JAX_COORDINATOR_ADDRESS"], env["MASTER_ADDR"] + ":" + "20077");
    procids.insert(env["SLURM_PROCID"]);
  }
  EXPECT_EQ(procids.size(), 8u);
  // The site's default applies where the SPEC does not say.
  std::ofstream(config_, std::ios::app) << "";
  configure({"config=" + config_, "ids=slurm"});
  ASSERT_EQ(ta_set_spec("tp=4", err_, sizeof err_), 0) << err_;
  ASSERT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_OK) << err_;
  EXPECT_EQ(env_of(9).count("SLURM_PROCID"), 1u);
  ASSERT_EQ(ta_set_spec("tp=4,ids=plan", err_, sizeof err_), 0) << err_;
  ASSERT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_OK) << err_;
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
    ASSERT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_OK) << err_;
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
  ta_step s = per_node(1);
  s.step_gpus = "0,1,2,3";  // --gpus-per-node=4: the plan uses GPUs 0-3 of every host
  ASSERT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_OK) << err_;
  EXPECT_EQ(ta_step_note(), nullptr);
  std::map<std::string, std::string> env;
  ASSERT_EQ(ta_task_env(1, "0,1,2,3", collect, &env, err_, sizeof err_), TA_OK) << err_;
  EXPECT_EQ(env["WORLD_SIZE"], "16");
  std::multiset<char> devs(env["CUDA_VISIBLE_DEVICES"].begin(), env["CUDA_VISIBLE_DEVICES"].end());
  EXPECT_EQ(devs, (std::multiset<char>{'0', '1', '2', '3', ',', ',', ','}));
  // Slurm bound other GPUs than the plan's: its order stays, without NIC hints.
  s.step_gpus = "4,5,6,7";
  ASSERT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_OK) << err_;
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
  ASSERT_EQ(local_check(4, 32), TA_OK) << err_;
  ASSERT_NE(ta_local_digest(), nullptr);
  const std::string digest = ta_local_digest();
  EXPECT_EQ(digest.rfind("v1 build=", 0), 0u) << digest;
  ta_step s = step(1);
  s.digest = digest.c_str();
  EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_OK) << err_;

  // The fabric updated here only: named, and the step must fail whatever the policy.
  std::ofstream(fabric, std::ios::app) << "# updated on this node only\n";
  EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_EDISAGREE);
  EXPECT_EQ(std::string(err_),
            "its inputs differ from srun's: the fabric (" + fabric.string() + ")");
  EXPECT_EQ(ta_step_ready(), 0);
  // Without srun's digest the node cannot know: it plans (and the policy applies to failures).
  s.digest = nullptr;
  EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_OK) << err_;

  // The capture missing here only.
  fs::copy_file(kSource + "/tests/e2e/lab-crossed.toml", fabric,
                fs::copy_options::overwrite_existing);
  fs::remove(capture);
  s.digest = digest.c_str();
  EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_EDISAGREE);
  EXPECT_EQ(std::string(err_), "its inputs differ from srun's: the node captures");
  s.digest = nullptr;
  EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_EFAIL);
  EXPECT_NE(std::string(err_).find("dgx.xml"), std::string::npos) << err_;

  // A configuration this node cannot read, where srun could.
  fs::copy_file(kCapture, capture);
  configure({"config=" + (dir_ / "nonexistent.toml").string()});
  s.digest = digest.c_str();
  EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_EDISAGREE);
  EXPECT_NE(std::string(err_).find("srun read its inputs, this node cannot"), std::string::npos)
      << err_;
  // A digest that is not one.
  configure({"config=" + config_});
  s.digest = "v2 something";
  EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_EFAIL);
  EXPECT_NE(std::string(err_).find("SLURM_TOPO_AWARE_DIGEST"), std::string::npos) << err_;
}

}  // namespace
