// Layout spec grammar, size resolution, the TOML job description and the traffic model.
#include "topoaware/mapper/layout.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>

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

}  // namespace
}  // namespace topoaware::mapper
