// The one builder from a SPEC and a step's shape to a mapper::Request (request.h), which srun,
// every node and `topo-aware map` call: the launch style, the ranks it plans, and the requests no
// launch can honour, refused naming the fix.
#include "topoaware/launch/request.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "topoaware/launch/inputs.h"
#include "topoaware/mapper/synthetic.h"

namespace topoaware::launch {
namespace {

struct Hosts {
  topology::NodeTopology node = mapper::make_node(8, 8, 450, 50);
  std::vector<const topology::NodeTopology*> models;
  StepShape shape;
  explicit Hosts(int n, int tasks_each) {
    for (int h = 1; h <= n; ++h) {
      shape.hosts.push_back("node" + std::to_string(h));
      shape.tasks.push_back(tasks_each);
      models.push_back(&node);
    }
  }
  StepRequest make(const std::string& spec, const Config& config = {},
                   const std::vector<int>& held = {}) {
    const mapper::LaunchSpec launch = parse_spec(spec);
    shape.gpus_per_host = workers_per_host(launch, models, held);
    return make_request(config, launch, shape);
  }
};

TEST(Request, StyleFollowsTheShape) {
  Hosts per_gpu(4, 8);
  StepRequest r = per_gpu.make("tp=8,pp=2");
  EXPECT_EQ(r.style, Style::kPerGpu);
  EXPECT_EQ(r.request.tasks_per_host, (std::vector<int>{8, 8, 8, 8}));
  EXPECT_FALSE(r.request.host_blocks);
  int ranks = 1;
  for (const auto& d : r.request.layout.dims) ranks *= d.size;
  EXPECT_EQ(ranks, 32);  // dp filled in

  Hosts one_each(4, 1);
  r = one_each.make("tp=8,pp=2");
  EXPECT_EQ(r.style, Style::kPerNode);
  EXPECT_EQ(r.request.tasks_per_host, (std::vector<int>{8, 8, 8, 8}));  // the workers
  EXPECT_TRUE(r.request.host_blocks);
  // Held GPUs (slurmctld's word) decide the workers where nproc= does not.
  r = one_each.make("tp=2", {}, {2, 2, 2, 2});
  EXPECT_EQ(r.request.tasks_per_host, (std::vector<int>{2, 2, 2, 2}));
  r = one_each.make("nproc=4,tp=2", {}, {2, 2, 2, 2});
  EXPECT_EQ(r.request.tasks_per_host, (std::vector<int>{4, 4, 4, 4}));
  // A host holding one GPU: one task a GPU, not a launcher.
  r = one_each.make("", {}, {2, 1, 2, 2});
  EXPECT_EQ(r.style, Style::kPerGpu);

  // Slurm binding the job's GPUs: task k of each host keeps GPU k, a launcher chooses its own.
  Hosts bound(2, 3);
  bound.shape.gpus_bound = true;
  EXPECT_EQ(bound.make("").request.bound_gpu, (std::vector<int>{0, 1, 2, 0, 1, 2}));
  one_each.shape.gpus_bound = true;
  EXPECT_TRUE(one_each.make("tp=2", {}, {2, 2, 2, 2}).request.bound_gpu.empty());

  Hosts arbitrary(4, 2);
  arbitrary.shape.distribution = "arbitrary";
  EXPECT_EQ(arbitrary.make("tp=2").style, Style::kMpi);
}

TEST(Request, TheSiteDefaultsApplyWhereTheSpecIsSilent) {
  Config config;
  config.ids = mapper::Ids::kSlurm;
  config.launcher = mapper::Launcher::kPerGpu;
  Hosts one_each(4, 1);
  StepRequest r = one_each.make("", config);
  EXPECT_EQ(r.style, Style::kPerGpu);
  EXPECT_EQ(r.ids, mapper::Ids::kSlurm);
  EXPECT_EQ(one_each.make("ids=plan", config).ids, mapper::Ids::kPlan);
}

TEST(Request, RequestsNoLaunchCanHonourAreRefusedNamingTheFix) {
  Hosts per_gpu(4, 8);
  try {
    per_gpu.make("tp=8,pp=3");
    ADD_FAILURE() << "tp=8,pp=3 planned for 32 tasks";
  } catch (const RequestError& e) {
    EXPECT_NE(std::string(e.what()).find("(32 tasks)"), std::string::npos) << e.what();
  }
  Hosts one_each(3, 1);
  try {
    one_each.make("tp=3");
    ADD_FAILURE() << "tp=3 over hosts of 8 workers planned";
  } catch (const RequestError& e) {
    EXPECT_NE(std::string(e.what()).find("would straddle hosts; run nproc=6"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(per_gpu.make("launcher=per-node,tp=8"), RequestError);
  per_gpu.shape.mpi_type = "pmix";
  EXPECT_THROW(per_gpu.make("tp=8,ids=slurm"), RequestError);
  per_gpu.shape.mpi_type = "none";
  EXPECT_NO_THROW(per_gpu.make("tp=8,ids=slurm"));
  // Cyclic puts other tasks on each slot: not a request error, a distribution topo-aware does not
  // map (the policy decides).
  per_gpu.shape.distribution = "cyclic";
  try {
    per_gpu.make("tp=8");
    ADD_FAILURE() << "cyclic distribution planned";
  } catch (const RequestError&) {
    ADD_FAILURE() << "cyclic refused as the user's request";
  } catch (const mapper::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cyclic distribution"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace topoaware::launch
