// `topo-aware shadow-report` as an admin runs it over a period's shadow logs: the summary (golden
// files tests/golden/shadow-report.*; UPDATE_GOLDEN=1 after a deliberate change), the figures
// scripts read from --of json, and malformed lines refused naming file:line or, with --lenient,
// skipped and counted.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_support.h"

namespace topoaware {
namespace {

using test::cli;
using test::CliRun;
using test::expect_golden;

TEST(ShadowReportCli, SummarizesAPeriod) {
  CliRun r = cli("shadow-report shadow/period.log");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err, "");
  expect_golden("shadow-report.txt", r.out);
}

TEST(ShadowReportCli, JsonCarriesTheFigures) {
  CliRun r = cli("shadow-report --of json shadow/period.log");
  ASSERT_EQ(r.rc, 0) << r.err;
  expect_golden("shadow-report.json", r.out);
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["steps"], 12);
  EXPECT_EQ(j["first"], "2026-12-07T08:00:05Z");
  EXPECT_EQ(j["last"], "2026-12-07T08:45:09Z");
  EXPECT_EQ(j["verdicts"]["would-apply"], 8);
  EXPECT_EQ(j["verdicts"]["would-refuse"], 3);
  EXPECT_EQ(j["verdicts"]["error"], 1);
  EXPECT_EQ(j["over_spread"], 2);
  // Seven planned savings: -1.5 0 3.2 12.5 18 25.4 47.9; nearest rank.
  EXPECT_EQ(j["saving"]["steps"], 7);
  EXPECT_EQ(j["saving"]["without_plan"], 1);
  EXPECT_DOUBLE_EQ(j["saving"]["min"].get<double>(), -1.5);
  EXPECT_DOUBLE_EQ(j["saving"]["median"].get<double>(), 12.5);
  EXPECT_DOUBLE_EQ(j["saving"]["p90"].get<double>(), 47.9);
  EXPECT_DOUBLE_EQ(j["saving"]["max"].get<double>(), 47.9);
  int in_histogram = 0;
  for (const auto& h : j["saving"]["histogram"]) in_histogram += h["steps"].get<int>();
  EXPECT_EQ(in_histogram, 7);
  ASSERT_EQ(j["refusals"].size(), 2u);
  EXPECT_EQ(j["refusals"][0]["steps"], 2);  // the most frequent first
  EXPECT_EQ(j["refusals"][0]["reason"], "tp=8 does not divide the world of 12 ranks (12 tasks)");
  ASSERT_EQ(j["errors"].size(), 1u);
  EXPECT_EQ(j["skipped"], 0);
}

// The log tests/e2e/shadow.sh left on the real-Slurm lab: what srun wrote, read whole.
TEST(ShadowReportCli, ReadsWhatSrunWroteInTheLab) {
  CliRun r = cli("shadow-report --of json shadow/lab.log");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["steps"], 16);
  EXPECT_EQ(j["verdicts"]["would-apply"], 12);
  EXPECT_EQ(j["verdicts"]["would-refuse"], 3);
  EXPECT_EQ(j["verdicts"]["error"], 1);
  EXPECT_EQ(j["saving"]["steps"], 12);
  EXPECT_DOUBLE_EQ(j["saving"]["min"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(j["saving"]["max"].get<double>(), 78.1);  // the fabric cabled across names
}

TEST(ShadowReportCli, SeveralLogsAreOnePeriod) {
  CliRun r = cli("shadow-report --of json shadow/period.log shadow/period.log");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["steps"], 24);
  EXPECT_EQ(j["logs"].size(), 2u);
}

TEST(ShadowReportCli, MalformedLinesAreRefusedNamingWhere) {
  CliRun r = cli("shadow-report shadow/malformed.log");
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "topo-aware: shadow/malformed.log:2: no hosts=\n");

  r = cli("shadow-report --lenient --of json shadow/malformed.log");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["steps"], 2);
  EXPECT_EQ(j["skipped"], 2);

  r = cli("shadow-report --lenient shadow/malformed.log");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("skipped 2 malformed lines (--lenient); first: "
                       "shadow/malformed.log:2: no hosts=\n"),
            std::string::npos)
      << r.out;
}

TEST(ShadowReportCli, UsageAndMissingFiles) {
  CliRun r = cli("shadow-report shadow/no-such.log");
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, "topo-aware: shadow/no-such.log: cannot read it\n");
  EXPECT_EQ(cli("shadow-report").rc, 2);
  EXPECT_EQ(cli("shadow-report --of yaml shadow/period.log").rc, 2);
  r = cli("shadow-report --help");
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("--lenient"), std::string::npos);
  EXPECT_NE(r.out.find("file:line"), std::string::npos);
}

}  // namespace
}  // namespace topoaware
