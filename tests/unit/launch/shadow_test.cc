// The shadow line (launch/shadow.h): what srun writes is what shadow-report reads, field for
// field; the promises the format makes to admins' scripts (one line, bare or quoted values,
// unknown keys ignored) and the refusals naming where.
#include "topoaware/launch/shadow.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "topoaware/topology/error.h"

namespace topoaware::launch {
namespace {

ShadowRecord sample() {
  ShadowRecord r;
  r.time = "2026-12-07T08:00:00Z";
  r.job = 123;
  r.step = 0;
  r.user = "alice";
  r.hosts = 4;
  r.tasks = 32;
  r.layout = "tp=8,pp=2";
  r.plan_ms = 1.5;
  r.block_ms = 2.0;
  r.saving_pct = saving_percent(0.0015, 0.002);
  r.spread = "leaf:2/2,spine:1/1";
  r.digest = "0123456789abcdef";
  return r;
}

std::string error_of(const std::string& line) {
  try {
    parse_shadow_line(line, "log:7");
  } catch (const topology::Error& e) {
    return e.what();
  }
  return {};
}

TEST(ShadowLine, WrittenAsDocumented) {
  EXPECT_EQ(format_shadow_line(sample()),
            "2026-12-07T08:00:00Z topo-aware shadow job=123 step=0 user=alice hosts=4 tasks=32 "
            "layout=tp=8,pp=2 plan_ms=1.500 block_ms=2.000 saving=25.0% "
            "spread=leaf:2/2,spine:1/1 digest=0123456789abcdef verdict=would-apply");
  ShadowRecord r = sample();
  r.layout = "";
  r.plan_ms.reset();
  r.block_ms.reset();
  r.saving_pct.reset();
  r.verdict = ShadowVerdict::kWouldRefuse;
  r.reason = "tp=8: 12 ranks is not \"a multiple\"\nof 8";
  EXPECT_EQ(format_shadow_line(r),
            "2026-12-07T08:00:00Z topo-aware shadow job=123 step=0 user=alice hosts=4 tasks=32 "
            "layout=dp plan_ms=- block_ms=- saving=- spread=leaf:2/2,spine:1/1 "
            "digest=0123456789abcdef verdict=would-refuse "
            "reason=\"tp=8: 12 ranks is not \\\"a multiple\\\" of 8\"");
}

TEST(ShadowLine, ReadsBackWhatWasWritten) {
  ShadowRecord r = sample();
  r.layout = "file:/jobs/my job.toml";  // a space: quoted
  r.verdict = ShadowVerdict::kError;
  r.reason = "C:\\path \"x\"";
  const ShadowRecord back = parse_shadow_line(format_shadow_line(r), "log:1");
  EXPECT_EQ(back.time, r.time);
  EXPECT_EQ(back.job, 123u);
  EXPECT_EQ(back.user, "alice");
  EXPECT_EQ(back.hosts, 4u);
  EXPECT_EQ(back.tasks, 32u);
  EXPECT_EQ(back.layout, r.layout);
  ASSERT_TRUE(back.saving_pct.has_value());
  EXPECT_DOUBLE_EQ(*back.saving_pct, 25.0);
  EXPECT_DOUBLE_EQ(*back.plan_ms, 1.5);
  EXPECT_EQ(back.spread, r.spread);
  EXPECT_EQ(back.digest, r.digest);
  EXPECT_EQ(back.verdict, ShadowVerdict::kError);
  EXPECT_EQ(back.reason, r.reason);
}

TEST(ShadowLine, LongValuesAreCutSoALineIsOneWrite) {
  ShadowRecord r = sample();
  r.layout = std::string(9000, 'x');
  r.verdict = ShadowVerdict::kError;
  r.reason = std::string(9000, 'y');
  const std::string line = format_shadow_line(r);
  EXPECT_LT(line.size(), 1200u);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_NO_THROW(parse_shadow_line(line, "log:1"));
}

TEST(ShadowLine, UnknownKeysAreIgnoredForLaterVersions) {
  const std::string line = format_shadow_line(sample()) + " nodes_planned=4";
  EXPECT_EQ(parse_shadow_line(line, "log:1").job, 123u);
}

TEST(ShadowLine, MalformedLinesNameWhere) {
  const std::string good = format_shadow_line(sample());
  EXPECT_EQ(error_of("hello"),
            "log:7: not a shadow line: expected a UTC time (2026-12-07T08:00:00Z) first, found "
            "'hello'");
  EXPECT_EQ(error_of("2026-12-07T08:00:00Z topo-aware plan job=1"),
            "log:7: not a shadow line: expected 'topo-aware shadow' after the time");
  std::string no_job = good;
  no_job.replace(no_job.find("job=123 "), 8, "");
  EXPECT_EQ(error_of(no_job), "log:7: no job=");
  std::string bad_job = good;
  bad_job.replace(bad_job.find("job=123"), 7, "job=12x");
  EXPECT_EQ(error_of(bad_job), "log:7: job=12x: expected a whole number");
  std::string bad_saving = good;
  bad_saving.replace(bad_saving.find("saving=25.0%"), 12, "saving=25.0");
  EXPECT_EQ(error_of(bad_saving), "log:7: saving=25.0: expected a percentage");
  std::string nan_saving = good;
  nan_saving.replace(nan_saving.find("saving=25.0%"), 12, "saving=nan%");
  EXPECT_EQ(error_of(nan_saving), "log:7: saving=nan: expected a number or -");
  std::string verdict = good;
  verdict.replace(verdict.find("would-apply"), 11, "maybe");
  EXPECT_EQ(error_of(verdict), "log:7: verdict=maybe: expected would-apply, would-refuse or error");
  std::string refuse = good;
  refuse.replace(refuse.find("would-apply"), 11, "would-refuse");
  EXPECT_EQ(error_of(refuse), "log:7: would-refuse without reason=");
  EXPECT_EQ(error_of(good + " reason=\"open"), "log:7: reason: unterminated quoted value");
  EXPECT_EQ(error_of(good + " job=5"), "log:7: job given twice");
  EXPECT_EQ(error_of(good + " stray"), "log:7: expected key=value, found 'stray'");
  EXPECT_EQ(error_of(good.substr(0, 25)),
            "log:7: not a shadow line: expected 'topo-aware shadow' after the time");
}

// The spread field has one format, written by srun and read by shadow-report.
TEST(ShadowLine, SpreadReadsBackAndSkipsWhatIsNotALevel) {
  const std::vector<SpreadLevel> levels = {{"leaf", 2, 1}, {"spine", 1, 1}};
  EXPECT_EQ(format_spread(levels), "leaf:2/1,spine:1/1");
  EXPECT_EQ(format_spread({}), "-");
  const auto back = parse_spread("leaf:2/1,spine:1/1");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].level, "leaf");
  EXPECT_EQ(back[0].used, 2u);
  EXPECT_EQ(back[0].fewest, 1u);
  EXPECT_EQ(back[1].level, "spine");
  EXPECT_TRUE(parse_spread("-").empty());
  const auto some = parse_spread("leaf:x/1,pod:3/,rack/2:1,spine:4/2");
  ASSERT_EQ(some.size(), 1u);
  EXPECT_EQ(some[0].level, "spine");
  EXPECT_EQ(some[0].used, 4u);
}

TEST(ShadowLine, SavingIsAgainstSlurmsOrder) {
  EXPECT_DOUBLE_EQ(saving_percent(1.0, 4.0), 75.0);
  EXPECT_DOUBLE_EQ(saving_percent(5.0, 4.0), -25.0);
  EXPECT_DOUBLE_EQ(saving_percent(1.0, 0.0), 0.0);
}

}  // namespace
}  // namespace topoaware::launch
