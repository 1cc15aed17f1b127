// Layout spec grammar, size resolution, the TOML job description and the traffic model.
#include "topoaware/mapper/layout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace topoaware::mapper {
namespace {

int size_of(const Layout& l, const std::string& name) {
  for (const auto& d : l.dims) {
    if (d.name == name) return d.size;
  }
  return -1;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(LayoutTest, MegatronOrderWithDpFillingTheRest) {
  Layout l = parse_layout("tp=8,cp=2,ep=4,dp=auto,pp=4,order=tp-cp-ep-dp-pp", 1024);
  ASSERT_EQ(l.dims.size(), 5u);
  EXPECT_EQ(l.dims[0].name, "tp");
  EXPECT_EQ(l.dims[3].name, "dp");
  EXPECT_EQ(l.dims[4].name, "pp");
  EXPECT_EQ(size_of(l, "dp"), 1024 / (8 * 2 * 4 * 4));
  EXPECT_EQ(l.dims[2].pattern, Pattern::kAllToAll);
  EXPECT_EQ(l.dims[4].pattern, Pattern::kPipeline);
  EXPECT_EQ(world_size(l), 1024);
}

TEST(LayoutTest, MissingDimsAreOneAndNoSpecIsDataParallel) {
  Layout l = parse_layout("tp=8,pp=2", 64);
  EXPECT_EQ(size_of(l, "cp"), 1);
  EXPECT_EQ(size_of(l, "ep"), 1);
  EXPECT_EQ(size_of(l, "dp"), 4);
  Layout dp = parse_layout("", 16);
  EXPECT_EQ(size_of(dp, "dp"), 16);
  EXPECT_EQ(size_of(dp, "tp"), 1);
}

TEST(LayoutTest, RanksFollowTheOrderInnermostFirst) {
  Layout l = parse_layout("tp=2,pp=2,dp=2,order=pp-tp-dp", 8);
  EXPECT_EQ(l.dims[0].name, "pp");
  auto c = rank_coords(l, 5);  // 5 = pp 1 + tp 0*2 + dp 1*4
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0], (std::pair<std::string, int>{"pp", 1}));
  EXPECT_EQ(c[1], (std::pair<std::string, int>{"tp", 0}));
  EXPECT_EQ(c[2], (std::pair<std::string, int>{"dp", 1}));
}

TEST(LayoutTest, PreciseErrors) {
  EXPECT_EQ(error_of([] { parse_layout("tp=8,cp=1,ep=1,pp=4,dp=3", 128); }),
            "tp*cp*ep*dp*pp = 96 does not divide 128 slots");
  EXPECT_EQ(error_of([] { parse_layout("tp=8,pp=6", 128); }),
            "tp*cp*ep*pp = 48 does not divide 128 slots");
  EXPECT_NE(error_of([] { parse_layout("tp=8,dp=2", 32); }).find("but the step has 32 slots"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_layout("tp=eight"); }).find("tp=eight is not a size"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_layout("tp=0"); }).find("not a size"), std::string::npos);
  EXPECT_NE(error_of([] { parse_layout("tp=2,tp=4"); }).find("tp given twice"), std::string::npos);
  EXPECT_NE(error_of([] { parse_layout("tp"); }).find("not key=value"), std::string::npos);
  EXPECT_NE(error_of([] { parse_layout("tp=2,order=pp-dp"); }).find("tp is not in order"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_layout("tp=auto,dp=auto"); }).find("more than one"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_layout("file:/x.toml"); }).find("read by the caller"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_layout("TP=2"); }).find("bad dim name"), std::string::npos);
}

TEST(LayoutTest, DefaultTrafficMakesTensorParallelHeaviest) {
  Layout l = parse_layout("tp=8,pp=4,dp=auto", 256);
  auto t = default_traffic(l);
  double tp = 0, dp = 0, pp = 0;
  for (const auto& d : t) {
    if (d.name == "tp") tp = d.bytes;
    if (d.name == "dp") dp = d.bytes;
    if (d.name == "pp") pp = d.bytes;
  }
  EXPECT_GT(tp, 3 * dp);
  EXPECT_GT(dp, pp);
  EXPECT_GT(pp, 0);
  // Strides: tp 1, cp 8, ep 8, dp 8, pp 64.
  EXPECT_EQ(t[0].stride, 1);
  EXPECT_EQ(t[4].stride, 64);
}

TEST(JobTomlTest, DimsModelAndMatrix) {
  const char* text = R"(
layout = "tp=4,dp=auto"
[model]
hidden = 4096
dtype = "fp32"
[dims.pp]
size = 2
bytes_per_step = 1e6
[dims.tp]
pattern = "all-to-all"
[[flow]]
from = 0
to = 15
bytes = 123
)";
  Layout l = parse_job_toml(text, "job.toml", 16);
  EXPECT_EQ(size_of(l, "tp"), 4);
  EXPECT_EQ(size_of(l, "pp"), 2);
  EXPECT_EQ(size_of(l, "dp"), 2);
  EXPECT_EQ(l.model.hidden, 4096);
  EXPECT_EQ(l.model.dtype_bytes, 4);
  EXPECT_EQ(l.dims[0].pattern, Pattern::kAllToAll);
  ASSERT_EQ(l.matrix.size(), 1u);
  EXPECT_EQ(l.matrix[0].to, 15);
  for (const auto& d : default_traffic(l)) {
    if (d.name == "pp") {
      EXPECT_EQ(d.bytes, 1e6);
    }
  }
}

TEST(JobTomlTest, ErrorsNameFileAndLine) {
  EXPECT_EQ(error_of([] { parse_job_toml("layout = \"tp=2\"\n[model]\nhiden = 3\n", "j.toml"); }),
            "j.toml:3: unknown key model.hiden");
  EXPECT_NE(error_of([] { parse_job_toml("layout = [", "j.toml"); }).find("j.toml:1"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_job_toml("[[flow]]\nfrom = 0\nto = 99\nbytes = 1\n", "j.toml", 8);
            }).find("outside 0..7"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_job_toml("[dims.tp]\nsize = 3\n", "j.toml", 8);
            }).find("does not divide 8 slots"),
            std::string::npos);
}

const DimTraffic& dim_of(const std::vector<DimTraffic>& t, const std::string& name) {
  for (const auto& d : t) {
    if (d.name == name) return d;
  }
  throw Error("no dim " + name);
}

TEST(LayoutTest, MegatronDefaultsIssueGathersForTensorAndDataParallelism) {
  // Sequence parallelism and the distributed optimizer on (Megatron-core's large-model recipes):
  // tp and dp issue reduce-scatter + all-gather, cp a ring exchange, ep all-to-all, pp send/recv.
  Layout l = parse_layout("tp=8,cp=2,ep=2,pp=2,dp=auto", 128);
  const auto t = default_traffic(l);
  EXPECT_EQ(dim_of(t, "tp").collective, Collective::kGather);
  EXPECT_FALSE(dim_of(t, "tp").all_reduce);
  EXPECT_EQ(dim_of(t, "dp").collective, Collective::kGather);
  EXPECT_EQ(dim_of(t, "cp").collective, Collective::kRingExchange);
  EXPECT_EQ(dim_of(t, "ep").collective, Collective::kAllToAll);
  EXPECT_EQ(dim_of(t, "pp").collective, Collective::kSendRecv);
  // tp: 10 calls a layer and micro-batch (4 reduce-scatters, 6 all-gathers), each of the rank's
  // activations: 1 x 4096 / cp tokens x 8192 x 2 bytes.
  const double act = 4096.0 / 2 * 8192 * 2;
  const double layers = 80.0 / 2, mb = 8;
  EXPECT_DOUBLE_EQ(dim_of(t, "tp").calls, 10 * layers * mb);
  EXPECT_DOUBLE_EQ(dim_of(t, "tp").bytes, 10 * layers * mb * act);
  // Without sequence parallelism: four all-reduces of the same buffer.
  l.framework.sequence_parallel = false;
  const auto ar = default_traffic(l);
  EXPECT_EQ(dim_of(ar, "tp").collective, Collective::kAllReduce);
  EXPECT_TRUE(dim_of(ar, "tp").all_reduce);
  EXPECT_DOUBLE_EQ(dim_of(ar, "tp").bytes, 4 * layers * mb * act);
}

TEST(LayoutTest, DataParallelReductionHidesBehindOneMicroBatch) {
  Layout l = parse_layout("tp=8,pp=2,dp=auto", 64);
  const DimTraffic dp = dim_of(default_traffic(l), "dp");
  // 40 layers x 8192^2 x 12 / 8 = 4.03e9 parameters a rank; gradients (2 bytes) reduced, bf16
  // parameters (2 bytes) gathered, in 40M-parameter buckets.
  const double params = 40.0 * 8192 * 8192 * 12 / 8;
  EXPECT_DOUBLE_EQ(dp.bytes, params * 4);
  EXPECT_DOUBLE_EQ(dp.calls, 2 * std::ceil(params / 40e6));
  EXPECT_DOUBLE_EQ(dp.hidden_share, 0.5);
  // Forward of one micro-batch: 2 x params x 4096 tokens + attention 2 x 40 x 4096^2 x 8192 / 8,
  // at 400 TFLOP/s; the reduce-scatter hides behind the backward (twice that).
  const double forward = (2 * params * 4096 + 2 * 40.0 * 4096 * 4096 * 8192 / 8) / 400e12;
  EXPECT_NEAR(dp.hidden_rest_s, forward, 1e-12);
  EXPECT_NEAR(dp.hidden_first_s, 2 * forward, 1e-12);
  // What the step waits for: each half's excess over its window.
  EXPECT_DOUBLE_EQ(exposed_seconds(dp, 0.15), 0.0);  // 0.075 s each, under both windows
  const double t = 4 * forward + 0.3;
  EXPECT_NEAR(exposed_seconds(dp, t), (t / 2 - 2 * forward) + (t / 2 - forward), 1e-12);
  // Overlap off: all of it.
  l.framework.overlap_grad_reduce = l.framework.overlap_param_gather = false;
  EXPECT_DOUBLE_EQ(exposed_seconds(dim_of(default_traffic(l), "dp"), 0.2), 0.2);
}

TEST(LayoutTest, SplitAndNcclVersionInTheSpec) {
  EXPECT_EQ(parse_layout("tp=8,dp=auto", 16).split, SplitPolicy::kDomains);
  Layout l = parse_layout("tp=8,split=allow,nccl=2.27.3,dp=auto", 16);
  EXPECT_EQ(l.split, SplitPolicy::kAllow);
  EXPECT_EQ(nccl::to_string(l.nccl), "2.27");
  EXPECT_EQ(size_of(l, "dp"), 2);
  EXPECT_NE(error_of([] { parse_layout("tp=8,split=yes", 8); }).find("split=allow"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_layout("tp=8,nccl=2.10", 8); }).find("2.18 to 2.30"),
            std::string::npos);
}

TEST(JobTomlTest, FrameworkCollectivesAndNccl) {
  const char* text = R"(
layout = "tp=4,cp=2,dp=auto"
split = "allow"
[framework]
sequence_parallel = false
overlap_grad_reduce = false
[nccl]
version = "2.21"
collnet = true
[model]
gpu_tflops = 700
kv_fraction = 1
[dims.cp]
collective = "all-gather"
)";
  Layout l = parse_job_toml(text, "job.toml", 16);
  EXPECT_EQ(l.split, SplitPolicy::kAllow);
  EXPECT_FALSE(l.framework.sequence_parallel);
  EXPECT_TRUE(l.framework.distributed_optimizer);
  EXPECT_FALSE(l.framework.overlap_grad_reduce);
  EXPECT_EQ(nccl::to_string(l.nccl), "2.21");
  EXPECT_TRUE(l.collnet);
  EXPECT_EQ(l.model.gpu_tflops, 700);
  const auto t = default_traffic(l);
  EXPECT_EQ(dim_of(t, "tp").collective, Collective::kAllReduce);
  EXPECT_EQ(dim_of(t, "cp").collective, Collective::kGather);
  EXPECT_EQ(dim_of(t, "dp").hidden_first_s, 0);
  EXPECT_EQ(error_of([] {
              parse_job_toml("[framework]\nsequence_parallel = 1\n", "j.toml");
            }),
            "j.toml:2: sequence_parallel must be true or false");
  EXPECT_NE(error_of([] {
              parse_job_toml("layout = \"tp=2\"\n[dims.tp]\ncollective = \"allreduce\"\n", "j.toml");
            }).find("j.toml:3: collective must be"),
            std::string::npos);
  EXPECT_EQ(error_of([] { parse_job_toml("split = \"maybe\"\n", "j.toml"); }).substr(0, 9),
            "j.toml:1:");
}

}  // namespace
}  // namespace topoaware::mapper
