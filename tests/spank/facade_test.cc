// The plugin's facade without Slurm: what srun's local_user_init and then slurmstepd's user_init
// and task_init calls do for one node of a 4-node step of DGX H100s (the lab's cluster), checked
// against the mapper called directly, plus the per-job directory's safety rules and the failures
// the shell relies on.
#include "facade.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "facade_fixture.h"

namespace {

TEST_F(Facade, StepEnvironmentIsTheMappersAndTheXmlIsWrittenSafely) {
  ASSERT_EQ(ta_set_spec("tp=8,pp=2", err_, sizeof err_), 0) << err_;
  ta_step s = step();
  ASSERT_EQ(prepare(s), 0) << err_;
  ASSERT_EQ(ta_step_ready(), 1);

  const fs::path job = dir_ / "jobs" / "77";
  const fs::path xml = job / "nccl-topo.0.node2.xml";
  struct stat st {};
  ASSERT_EQ(::stat(job.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(::stat(xml.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  // The XML is the node's own capture re-exported: it loads back with all 8 GPUs.
  EXPECT_EQ(topoaware::topology::load_node_file(xml.string()).gpus().size(), 8u);

  // The same inputs through the mapper directly.
  auto fabric = topoaware::topology::load_fabric(kFabric);
  auto node = topoaware::topology::load_node_file(kCapture);
  topoaware::mapper::Request request;
  request.hosts = {"node1", "node2", "node3", "node4"};
  request.tasks_per_host = {8, 8, 8, 8};
  request.layout = topoaware::mapper::parse_layout("tp=8,pp=2", 32);
  auto plan = topoaware::mapper::plan(fabric, {&node, &node, &node, &node}, request);
  topoaware::mapper::EnvOptions options;
  options.job_id = 77;
  options.topo_file = xml.string();
  for (std::uint32_t task = 8; task < 16; ++task) {
    std::map<std::string, std::string> want;
    for (const auto& [k, v] :
         topoaware::mapper::task_environment(plan, static_cast<int>(task), options)) {
      if (k != "MASTER_PORT") want[k] = v;  // the user set it: kept
    }
    EXPECT_EQ(env_of(task), want) << "task " << task;
  }

  ta_step_finish();
  EXPECT_FALSE(fs::exists(xml));
  EXPECT_FALSE(fs::exists(job));
}

// Without [[node]] entries a host uses its fabric node type's capture, which the lab cluster
// names relative to the fabric file (../tests/fixtures/...), not to the step's working directory.
TEST_F(Facade, FabricNodeTypeCaptureIsFoundRelativeToTheFabricFile) {
  std::ofstream(config_) << "fabric = \"" << kFabric << "\"\njob_dir = \""
                         << (dir_ / "jobs").string() << "\"\n";
  configure({"config=" + config_});
  ASSERT_EQ(ta_set_spec("tp=8", err_, sizeof err_), 0) << err_;
  ASSERT_NE(fs::current_path(), fs::path(kFabric).parent_path());
  ta_step s = step();
  ASSERT_EQ(prepare(s), 0) << err_;
  EXPECT_EQ(env_of(9).at("WORLD_SIZE"), "32");
}

TEST_F(Facade, SymlinkedJobDirectoryIsRefusedButThePlanStands) {
  fs::create_directories(dir_ / "elsewhere");
  fs::create_directory_symlink(dir_ / "elsewhere", dir_ / "jobs" / "77");
  ASSERT_EQ(ta_set_spec("tp=8", err_, sizeof err_), 0);
  ta_step s = step();
  EXPECT_EQ(prepare(s), TA_ENODE);
  EXPECT_NE(std::string(err_).find("job_dir"), std::string::npos) << err_;
  EXPECT_TRUE(fs::is_empty(dir_ / "elsewhere"));
  ASSERT_EQ(ta_step_ready(), 1);
  auto env = env_of(9);
  EXPECT_EQ(env.count("NCCL_TOPO_FILE"), 0u);
  EXPECT_EQ(env.count("RANK"), 1u);
}

// Tasks that are not where the plan puts them on this node alone: the node cannot apply the plan
// the others apply, so it fails the step (under either policy), naming the task.
TEST_F(Facade, TasksOutOfBlockOrderOnOneNodeFailTheStep) {
  ASSERT_EQ(ta_set_spec("tp=8", err_, sizeof err_), 0);
  ta_step s = step();
  for (std::uint32_t i = 0; i < 8; ++i) local_[i] = 1 + 4 * i;  // -m cyclic on node 2
  EXPECT_EQ(prepare(s), TA_EDISAGREE);
  EXPECT_NE(std::string(err_).find("block distribution (task 1 on node2)"), std::string::npos)
      << err_;
  EXPECT_EQ(ta_step_ready(), 0);
}

// -m arbitrary with SLURM_HOSTFILE node1,node1,node2,node3,node2: node1's own tasks (0, 1) may be
// where the plan puts ranks 0 and 1, the other nodes' are not. Every node must refuse alike, from
// the whole hostfile, or node1 alone would hand out its plan; cyclic is refused from the step's
// distribution.
TEST_F(Facade, NonBlockDistributionIsRefusedOnEveryNodeAlike) {
  ASSERT_EQ(ta_set_spec("", err_, sizeof err_), 0);
  const std::string hostfile = (dir_ / "hostfile").string();
  std::ofstream(hostfile) << "node1\nnode1\nnode2\nnode3\nnode2\n";
  ta_step s = step(0);
  s.ntasks = 5;
  s.hosts = "node1\nnode2\nnode3\n";
  s.tasks_per_node = "2(x2),1";
  s.nlocal = 2;
  for (std::uint32_t i = 0; i < 2; ++i) local_[i] = i;
  s.distribution = "arbitrary";
  s.hostfile = hostfile.c_str();
  EXPECT_EQ(prepare(s), TA_EFAIL);
  EXPECT_NE(std::string(err_).find("SLURM_HOSTFILE is not the plan's own"), std::string::npos)
      << err_;
  EXPECT_EQ(ta_step_ready(), 0);
  s.hostfile = nullptr;
  EXPECT_EQ(prepare(s), TA_EFAIL);
  EXPECT_NE(std::string(err_).find("without SLURM_HOSTFILE"), std::string::npos) << err_;
  s.distribution = "cyclic:block";
  EXPECT_EQ(prepare(s), TA_EFAIL);
  EXPECT_NE(std::string(err_).find("cyclic distribution"), std::string::npos) << err_;
  // Block across nodes, whatever the order inside a node, is what the plan assumes.
  s.distribution = "block:cyclic";
  EXPECT_EQ(prepare(s), 0) << err_;
}

TEST_F(Facade, SpecIsCheckedAndTheOptionCallbackIsIdempotent) {
  EXPECT_EQ(ta_set_spec("tp=x", err_, sizeof err_), TA_EFAIL);
  EXPECT_NE(std::string(err_).find("tp=x"), std::string::npos) << err_;
  EXPECT_EQ(ta_set_spec(nullptr, err_, sizeof err_), 0);  // slurmstepd: NULL, then ""
  EXPECT_EQ(ta_set_spec("", err_, sizeof err_), 0);
  EXPECT_EQ(ta_active(), 1);
  EXPECT_STREQ(ta_spec(), "");
}

// srun and slurmstepd read file:PATH from different working directories, and opening a FIFO
// would block until someone writes; a directory would read as an empty (data parallel) job.
TEST_F(Facade, JobDescriptionIsAnAbsolutePathToARegularFile) {
  const fs::path job = dir_ / "job.toml";
  std::ofstream(job) << "layout = \"tp=8\"\n";
  EXPECT_EQ(ta_set_spec(("file:" + job.string()).c_str(), err_, sizeof err_), 0) << err_;

  EXPECT_EQ(ta_set_spec("file:job.toml", err_, sizeof err_), -1);
  EXPECT_NE(std::string(err_).find("absolute path"), std::string::npos) << err_;
  EXPECT_NE(std::string(err_).find("job.toml"), std::string::npos) << err_;

  EXPECT_EQ(ta_set_spec(("file:" + dir_.string()).c_str(), err_, sizeof err_), -1);
  EXPECT_NE(std::string(err_).find("not a regular file"), std::string::npos) << err_;

  const fs::path fifo = dir_ / "job.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(ta_set_spec(("file:" + fifo.string()).c_str(), err_, sizeof err_), -1);
  EXPECT_NE(std::string(err_).find("not a regular file"), std::string::npos) << err_;
}

// slurmstepd reads TOPO_AWARE into a TA_SPEC_MAX buffer: anything that fits is taken (a job
// description in a deep directory), anything longer is refused where it is given.
TEST_F(Facade, LongSpecsFitTheBufferOrAreRefused) {
  fs::path deep = dir_;
  for (int i = 0; i < 9; ++i) deep /= std::string(120, 'd');
  fs::create_directories(deep);
  std::ofstream(deep / "job.toml") << "layout = \"tp=8\"\n";
  const std::string spec = "file:" + (deep / "job.toml").string();
  ASSERT_GT(spec.size(), 1100u);
  EXPECT_EQ(ta_set_spec(spec.c_str(), err_, sizeof err_), 0) << err_;
  const std::string huge = "tp=8," + std::string(TA_SPEC_MAX, 'x');
  EXPECT_EQ(ta_set_spec(huge.c_str(), err_, sizeof err_), -1);
  EXPECT_NE(std::string(err_).find("longer than"), std::string::npos) << err_;
}

// In slurmstepd the option callback runs as root and Slurm ignores its failure: the SPEC is kept
// as given and checked when the step is planned. A job description srun read and this node
// cannot is this node's disagreement: it fails the step, naming the file.
TEST_F(Facade, SlurmstepdChecksTheSpecWhenPlanningTheStep) {
  const fs::path job = dir_ / "job.toml";
  std::ofstream(job) << "layout = \"tp=8\"\n";
  const std::string spec = "file:" + job.string();
  EXPECT_EQ(ta_keep_spec(spec.c_str()), 0);
  EXPECT_EQ(ta_active(), 1);
  EXPECT_STREQ(ta_spec(), spec.c_str());
  ta_step s = step();
  ASSERT_EQ(srun_for(s), TA_OK) << err_;
  fs::remove(job);
  EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_EDISAGREE);
  EXPECT_NE(std::string(err_).find(job.string()), std::string::npos) << err_;
  EXPECT_EQ(ta_step_ready(), 0);

  EXPECT_EQ(ta_keep_spec("tp=8"), 0);
  ASSERT_EQ(prepare(s), 0) << err_;
  EXPECT_EQ(env_of(9).at("WORLD_SIZE"), "32");
}

// SLURM_STEP_GPUS is each node's own: srun -N2 -n4 --gpus-per-task=2 put 3 tasks on node1
// (GPUs 0-5) and 1 on node2 (GPUs 0-1). Both nodes must still compute one plan, or tasks end up
// without a RANK or with the same one.
TEST_F(Facade, SlurmBoundGpusGiveEveryNodeTheSamePlan) {
  ASSERT_EQ(ta_set_spec("tp=2", err_, sizeof err_), 0) << err_;
  gres_ = "gpu:6(IDX:0-5)\ngpu:2(IDX:0-1)\n";  // what slurmctld says the job holds
  auto ranks_as = [&](std::uint32_t node_id, const char* gpus, std::uint32_t first,
                      std::uint32_t nlocal) {
    ta_step s = step(node_id);
    for (std::uint32_t i = 0; i < nlocal; ++i) local_[i] = first + i;
    s.ntasks = 4;
    s.hosts = "node1\nnode2\n";
    s.tasks_per_node = "3,1";
    s.step_gpus = gpus;
    s.nlocal = nlocal;
    std::vector<std::map<std::string, std::string>> envs;
    EXPECT_EQ(prepare(s), 0) << err_;
    for (std::uint32_t task = 0; task < 4 && ta_step_ready() == 1; ++task) {
      envs.push_back(env_of(task));
    }
    return envs;
  };
  auto on_node1 = ranks_as(0, "0,1,2,3,4,5", 0, 3);
  // Slurm gave node1's task k GPUs 2k and 2k+1, not GPU k as the plan takes it: its tasks get
  // no NIC hint, and the user hears why.
  ASSERT_NE(ta_step_note(), nullptr);
  EXPECT_NE(std::string(ta_step_note()).find("GPUs 0,1,2,3,4,5"), std::string::npos);
  auto on_node2 = ranks_as(1, "0,1", 3, 1);
  EXPECT_EQ(ta_step_note(), nullptr);
  ASSERT_EQ(on_node1.size(), 4u);
  ASSERT_EQ(on_node2.size(), 4u);
  std::set<std::string> ranks;
  for (std::uint32_t task = 0; task < 4; ++task) {
    EXPECT_EQ(on_node1[task].at("RANK"), on_node2[task].at("RANK")) << "task " << task;
    EXPECT_EQ(on_node1[task].count("CUDA_VISIBLE_DEVICES"), 0u);  // Slurm's is kept
    ranks.insert(on_node2[task].at("RANK"));
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2", "3"}));
  EXPECT_EQ(on_node1[0].count("NCCL_IB_HCA"), 0u);
  EXPECT_EQ(on_node2[3].count("NCCL_IB_HCA"), 1u);
}

// srun cannot read the configuration either: it decides for every node (fail-closed: nothing
// launches; fail-open: the verdict that the step runs unmodified, which every node follows).
// Without any word from srun a node does not plan alone.
TEST_F(Facade, ConfigurationErrorsAreKeptForTheJobsThatAsk) {
  configure({"config=/nonexistent/topo-aware.toml", "policy=fail-closed"});
  ASSERT_NE(ta_config_error(), nullptr);
  EXPECT_NE(std::string(ta_config_error()).find("/nonexistent/topo-aware.toml"), std::string::npos);
  EXPECT_EQ(ta_fail_closed(), 1);
  ASSERT_EQ(ta_set_spec("tp=8", err_, sizeof err_), 0);
  ta_step s = step();
  EXPECT_EQ(srun_for(s), TA_EFAIL);
  EXPECT_NE(std::string(err_).find("not found"), std::string::npos) << err_;
  EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_UNMODIFIED);
  EXPECT_EQ(ta_step_ready(), 0);
  s.digest = nullptr;
  EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_EFAIL);
  EXPECT_NE(std::string(err_).find("not found"), std::string::npos) << err_;
}

}  // namespace

namespace {

// --gpus-per-node=8 with eight tasks a host: every task sees all the host's GPUs and takes device
// LOCAL_RANK, so Slurm's list is put in the plan's local rank order (each task's own GPU at its
// LOCAL_RANK). Under --gpus-per-task each task sees only its own GPU, and its list stays.
// tp=2,pp=2: the plan keeps each pipeline pair inside a host where Slurm's order puts its stages
// on two hosts, so it reorders each host's ranks (tp=8 alone fills a host in any order: nothing
// to reorder).
TEST_F(Facade, GpusPerNodeListsAreInTheOrderOfLocalRanks) {
  ASSERT_EQ(ta_set_spec("tp=2,pp=2", err_, sizeof err_), 0) << err_;
  gres_.clear();
  for (int h = 0; h < 4; ++h) gres_ += "gpu:8(IDX:0-7)\n";
  ta_step s = step(0);
  s.step_gpus = "0,1,2,3,4,5,6,7";
  ASSERT_EQ(prepare(s), TA_OK) << err_;
  EXPECT_EQ(ta_step_note(), nullptr);
  std::set<std::string> local_ranks;
  int moved = 0;
  for (std::uint32_t task = 0; task < 8; ++task) {
    std::map<std::string, std::string> env;
    ASSERT_EQ(ta_task_env(task, "0,1,2,3,4,5,6,7", collect, &env, err_, sizeof err_), TA_OK)
        << err_;
    const std::string& cvd = env.at("CUDA_VISIBLE_DEVICES");
    ASSERT_EQ(cvd.size(), 15u) << cvd;
    const int local = std::stoi(env.at("LOCAL_RANK"));
    // Task k of the host holds GPU k (Slurm's binding); device LOCAL_RANK must be that GPU.
    EXPECT_EQ(cvd[static_cast<std::size_t>(local) * 2], static_cast<char>('0' + task)) << cvd;
    moved += local != static_cast<int>(task);
    local_ranks.insert(env.at("LOCAL_RANK"));
    std::map<std::string, std::string> own;
    ASSERT_EQ(ta_task_env(task, "0", collect, &own, err_, sizeof err_), TA_OK) << err_;
    EXPECT_EQ(own.count("CUDA_VISIBLE_DEVICES"), 0u);  // Slurm's one GPU stays
  }
  EXPECT_EQ(local_ranks.size(), 8u);
  EXPECT_GT(moved, 0) << "the plan kept local ranks in Slurm's order: nothing was reordered";
}

}  // namespace

namespace {

// Shadow mode: srun plans the step as apply mode would and reports it in one line (srun -v, and
// appended to shadow_log), every line of the check at -v only; the nodes get the verdict that the
// step runs unmodified, so none plans or writes anything; and nothing fails the step.
struct Lines {
  std::vector<std::pair<int, std::string>> all;
  static void sink(void* arg, int level, const char* line) {
    static_cast<Lines*>(arg)->all.emplace_back(level, line);
  }
  std::string shadow() const {
    for (const auto& [level, line] : all) {
      if (line.find(" topo-aware shadow ") != std::string::npos) return line;
    }
    return {};
  }
};

TEST_F(Facade, ShadowStepIsPlannedReportedAndLeftUnmodified) {
  const std::string log = (dir_ / "shadow.log").string();
  std::ofstream(log).close();
  configure({"config=" + config_, "mode=shadow", "shadow_log=" + log});
  EXPECT_EQ(ta_shadow_for(nullptr), 1);
  ASSERT_EQ(ta_set_spec("tp=8,pp=2", err_, sizeof err_), 0);
  ta_step s = step();
  ta_local l{};
  l.job_id = s.job_id;
  l.step_id = s.step_id;
  l.hosts = s.hosts;
  l.nnodes = 4;
  l.ntasks = s.ntasks;
  Lines lines;
  ta_local_shadow(&l, nullptr, Lines::sink, &lines);
  for (const auto& [level, line] : lines.all) EXPECT_EQ(level, 1) << line;
  const std::string line = lines.shadow();
  EXPECT_NE(line.find(" topo-aware shadow job=77 step=0 user="), std::string::npos) << line;
  EXPECT_NE(line.find(" hosts=4 tasks=32 layout=tp=8,pp=2 plan_ms="), std::string::npos) << line;
  EXPECT_NE(line.find(" spread=leaf:2/2,spine:1/1 digest="), std::string::npos) << line;
  EXPECT_NE(line.find(" verdict=would-apply"), std::string::npos) << line;
  EXPECT_EQ(line.find(" saving=- "), std::string::npos) << line;
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, line + "\n");

  // Every node leaves the step alone: no plan, no file.
  const std::string digest = ta_local_digest();
  EXPECT_EQ(ta_unmodified_verdict(digest.c_str()), 1);
  s.digest = digest.c_str();
  EXPECT_EQ(ta_step_prepare(&s, err_, sizeof err_), TA_UNMODIFIED);
  EXPECT_EQ(ta_step_ready(), 0);
  EXPECT_TRUE(fs::is_empty(dir_ / "jobs"));

  // A SPEC that does not fit the step: what apply mode would refuse, and the step still runs.
  ASSERT_EQ(ta_set_spec("tp=7", err_, sizeof err_), 0);
  lines.all.clear();
  ta_local_shadow(&l, nullptr, Lines::sink, &lines);
  EXPECT_NE(lines.shadow().find(" verdict=would-refuse reason=\""), std::string::npos)
      << lines.shadow();
  EXPECT_EQ(ta_unmodified_verdict(ta_local_digest()), 1);
  // What the shell could not learn about the step: an error line.
  lines.all.clear();
  ta_local_shadow(&l, "job id not available", Lines::sink, &lines);
  EXPECT_NE(lines.shadow().find(" verdict=error reason=\"job id not available\""),
            std::string::npos)
      << lines.shadow();
}

TEST_F(Facade, ShadowIsAWordOfTheSpecUnderApplyMode) {
  EXPECT_EQ(ta_shadow_for(nullptr), 0);
  EXPECT_EQ(ta_shadow_for("tp=8"), 0);
  EXPECT_EQ(ta_shadow_for("shadow,tp=8"), 1);
  EXPECT_EQ(ta_shadow_for("shadow,tp=x"), 1);  // malformed: reported, never a failure
  // The plugstack line alone keeps shadow mode while the file is broken.
  configure({"config=/nonexistent/topo-aware.toml", "mode=shadow"});
  EXPECT_NE(ta_config_error(), nullptr);
  EXPECT_EQ(ta_shadow_for(nullptr), 1);
}

}  // namespace
