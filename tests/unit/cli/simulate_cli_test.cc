// `topo-aware simulate` on a hand-checkable trace (tests/fixtures/traces/simulate-20.csv) on an
// 8-host synthetic tree, two leaves of 4 hosts: FIFO order, the head's reservation, backfilled
// jobs' start times, the report's counts, determinism, and bad input named by file:line.
#include <gtest/gtest.h>

#include <cstddef>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/cli_support.h"

namespace topoaware {
namespace {

using test::cli;
using test::CliRun;

const std::string kRun =
    "simulate --trace traces/simulate-20.csv --synthetic tree4:1 --hosts 8 --hosts-per-leaf 4 "
    "--comm-fraction 0 ";

// placer -> job -> start (s), from the --per-job CSV.
std::map<std::string, std::map<std::string, std::string>> starts(const std::string& csv) {
  std::map<std::string, std::map<std::string, std::string>> out;
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::istringstream row(line);
    std::string field;
    while (std::getline(row, field, ',')) f.push_back(field);
    if (f.size() >= 5) out[f[0]][f[1]] = f[4];
  }
  return out;
}

TEST(SimulateCli, QueueIsFifoWithEasyBackfillUnderEveryPlacer) {
  const std::string per_job = test::scratch("per-job.csv");
  CliRun r = cli(kRun + "--of json --per-job '" + per_job + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["jobs"], 20);
  ASSERT_EQ(j["placers"].size(), 6u);
  const auto s = starts(test::slurp(per_job));
  for (const char* placer : {"flat", "tree", "tree-switches", "block", "place", "place-load"}) {
    SCOPED_TRACE(placer);
    const auto& st = s.at(placer);
    // j01 takes 6 hosts until 100; j02 (4 hosts) waits for its reservation at 100; j03 (2
    // hosts, 50 s) backfills at 2; j04 (1 host, 500 s) and j06 (1 GPU, 20 s) start at 52 when
    // j03 ends, neither delaying j02; j05 (2 hosts) starts with j02 at 100, in FIFO order.
    // --switches=1@300: no leaf holds j01's 6 hosts, so it waits until 300 and runs to 400;
    // j02 and j05 start then; the backfilled jobs go as before. Block: j01's 6 hosts round up
    // to 2 base blocks (the leaves), the aligned block of both, free at 0: as tree.
    const bool waits = std::string(placer) == "tree-switches";
    EXPECT_EQ(st.at("j01"), waits ? "300" : "0");
    EXPECT_EQ(st.at("j02"), waits ? "400" : "100");
    EXPECT_EQ(st.at("j03"), "2");
    EXPECT_EQ(st.at("j04"), "52");
    EXPECT_EQ(st.at("j05"), waits ? "400" : "100");
    EXPECT_EQ(st.at("j06"), "52");
    // The rest arrive on an idle cluster: each starts when it is submitted.
    for (int i = 7; i <= 20; ++i) {
      const std::string id = (i < 10 ? "j0" : "j") + std::to_string(i);
      EXPECT_EQ(st.at(id), std::to_string(5000 + 100 * (i - 7))) << id;
    }
  }
  for (const auto& p : j["placers"]) {
    EXPECT_EQ(p["jobs"], 20);
    // j01 j02 j03 j05 and the 16- and 32-GPU jobs of j07-j20 (j11 j12 j17 j18).
    EXPECT_EQ(p["multi_host_jobs"], 8) << p["placer"];
    EXPECT_GE(p["slowdown_multi_host"]["median"].get<double>(), 1.0) << p["placer"];
  }
}

TEST(SimulateCli, TextTableIsDeterministic) {
  CliRun a = cli(kRun + "--placers tree,place -q");
  CliRun b = cli(kRun + "--placers tree,place -q");
  ASSERT_EQ(a.rc, 0) << a.err;
  // The wall column differs from run to run; every other figure must not.
  auto strip = [](const std::string& t) {
    std::string out;
    std::istringstream in(t);
    std::string line;
    while (std::getline(in, line)) {
      const std::size_t s = line.rfind(" s");
      out += (s != std::string::npos && s + 2 == line.size() ? line.substr(0, line.rfind("  "))
                                                             : line) +
             "\n";
    }
    return out;
  };
  EXPECT_EQ(strip(a.out), strip(b.out));
  EXPECT_NE(a.out.find("placer"), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("20 jobs of traces/simulate-20.csv"), std::string::npos) << a.out;
}

TEST(SimulateCli, SacctExportReplaysItsJobsAndCountsWhatItSkips) {
  // Two jobs (16 GPUs for 2 h, 8 GPUs for 10 min), a batch step and an extern step, a pending
  // job and a CPU-only job. On an idle 8-host tree both start at their submit.
  const std::string trace = test::scratch("sacct.txt");
  {
    std::ofstream out(trace);
    out << "JobID|JobName|Submit|Start|End|NNodes|AllocTRES|State\n"
           "100|train|2026-01-01T10:00:00|2026-01-01T10:00:00|2026-01-01T12:00:00|2|"
           "cpu=128,node=2,gres/gpu=16|COMPLETED\n"
           "100.batch|batch|2026-01-01T10:00:00|2026-01-01T10:00:00|2026-01-01T12:00:00|1|"
           "cpu=64,gres/gpu=8|COMPLETED\n"
           "100.extern|extern|2026-01-01T10:00:00|2026-01-01T10:00:00|2026-01-01T12:00:00|2|"
           "cpu=128,gres/gpu=16|COMPLETED\n"
           "101|eval|2026-01-01T10:30:00|2026-01-01T10:30:00|2026-01-01T10:40:00|1|"
           "cpu=16,gres/gpu=8|COMPLETED\n"
           "102|later|2026-01-01T11:00:00|Unknown|Unknown|1|cpu=16|PENDING\n"
           "103|cpu|2026-01-01T11:00:00|2026-01-01T11:00:00|2026-01-01T11:05:00|1|cpu=4|"
           "COMPLETED\n";
  }
  const std::string per_job = test::scratch("sacct-per-job.csv");
  CliRun r = cli("simulate --trace '" + trace +
                 "' --synthetic tree4:1 --hosts 8 --hosts-per-leaf 4 --placers tree --of json "
                 "--comm-fraction 0 --per-job '" +
                 per_job + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["jobs"], 2);
  EXPECT_EQ(j["skipped"]["steps"], 2);
  EXPECT_EQ(j["skipped"]["unfinished"], 1);
  EXPECT_EQ(j["skipped"]["no_gpu"], 1);
  EXPECT_EQ(j["placers"][0]["multi_host_jobs"], 1);
  EXPECT_EQ(test::slurp(per_job),
            "placer,job,submit,gpus,start,end,hosts,leaves,spines,slowdown\n"
            "tree,100,0,16,0,7200,2,1,1,1.0000\n"
            "tree,101,1800,8,1800,2400,1,1,1,1.0000\n");
}

// The points of each polyline of an SVG chart, by its data-name: (x, y) in SVG units.
std::map<std::string, std::vector<std::pair<double, double>>> polylines(const std::string& svg) {
  std::map<std::string, std::vector<std::pair<double, double>>> out;
  for (std::size_t at = svg.find("<polyline"); at != std::string::npos;
       at = svg.find("<polyline", at + 1)) {
    const std::size_t n = svg.find("data-name=\"", at) + 11;
    const std::string name = svg.substr(n, svg.find('"', n) - n);
    const std::size_t p = svg.find("points=\"", at) + 8;
    std::istringstream pts(svg.substr(p, svg.find('"', p) - p));
    std::string xy;
    while (pts >> xy) {
      const std::size_t comma = xy.find(',');
      out[name].emplace_back(std::stod(xy.substr(0, comma)), std::stod(xy.substr(comma + 1)));
    }
  }
  return out;
}

TEST(SimulateCli, SvgPicturesDrawOneLinePerPlacer) {
  const std::string dir = test::scratch("svg");
  CliRun r = cli(kRun + "--svg '" + dir + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const char* file : {"wait-cdf.svg", "slowdown-cdf.svg", "utilisation.svg",
                           "fragmentation.svg"}) {
    SCOPED_TRACE(file);
    const std::string svg = test::slurp(dir + "/" + file);
    ASSERT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u) << svg.substr(0, 80);
    EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
    const auto lines = polylines(svg);
    ASSERT_EQ(lines.size(), 6u);
    for (const char* placer : {"flat", "tree", "tree-switches", "block", "place", "place-load"}) {
      ASSERT_TRUE(lines.count(placer)) << placer;
      ASSERT_FALSE(lines.at(placer).empty()) << placer;
      for (const auto& [x, y] : lines.at(placer)) {  // inside the plot area (80-760, 50-480)
        EXPECT_GE(x, 80);
        EXPECT_LE(x, 760);
        EXPECT_GE(y, 50);
        EXPECT_LE(y, 480);
      }
    }
    // A CDF ends at share 1 (the top of the plot area); the GPUs held end at 0 (the bottom).
    const std::string f = file;
    if (f != "fragmentation.svg") {
      for (const auto& [placer, pts] : lines) {
        EXPECT_DOUBLE_EQ(pts.back().second, f == "utilisation.svg" ? 480.0 : 50.0) << placer;
      }
    }
  }
  // tree-switches makes j01 wait 300 s: its wait CDF starts lower than tree's (fewer jobs wait
  // nothing: 15 of 20 against 16), so its first point sits lower on the plot (larger y).
  const auto wait = polylines(test::slurp(dir + "/wait-cdf.svg"));
  EXPECT_GT(wait.at("tree-switches").front().second, wait.at("tree").front().second);
  // A folder that cannot be made is named.
  const std::string file = test::scratch("not-a-folder");
  { std::ofstream(file) << "x"; }
  r = cli(kRun + "--svg '" + file + "/pictures'");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find(file + "/pictures"), std::string::npos) << r.err;
}

TEST(SimulateCli, LoadDividesSubmitTimes) {
  const std::string per_job = test::scratch("load-per-job.csv");
  CliRun r = cli(kRun + "--placers tree --load 2 --of json --per-job '" + per_job + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["load"], 2.0);
  // j03 was submitted at 2 s, j04 at 3 s: now at 1 s and 1.5 s (printed to the second).
  const std::string csv = test::slurp(per_job);
  EXPECT_NE(csv.find("\ntree,j03,1,16,"), std::string::npos) << csv;
  r = cli(kRun + "--placers tree --load 2");
  EXPECT_NE(r.out.find("comm fraction 0.00, load x2.00"), std::string::npos) << r.out;
  for (const char* bad : {"0", "-1", "nan"}) {
    r = cli(kRun + "--load " + bad);
    EXPECT_EQ(r.rc, 2) << bad;
    EXPECT_NE(r.err.find("--load"), std::string::npos) << r.err;
  }
}

TEST(SimulateCli, ContentionIsOnByDefaultAndCanBeTurnedOff) {
  CliRun r = cli(kRun + "--placers flat --of json");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["contention"], true);
  // --comm-fraction 0: other jobs put no load on an uplink, so nobody shares.
  EXPECT_EQ(j["placers"][0]["multi_host_jobs_shared"], 0);
  r = cli(kRun + "--placers flat --of json --contention off");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["contention"], false);
  r = cli(kRun + "--placers flat --contention off");
  EXPECT_NE(r.out.find("no contention between jobs"), std::string::npos) << r.out;
  r = cli(kRun + "--contention maybe");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--contention"), std::string::npos) << r.err;
}

// topology/block needs blocks of at least the base block's size; Lingjun's ToRs hold 4 to 8
// hosts. Among other placers block is left out, with its reason; alone, it is the error.
TEST(SimulateCli, APlacerTheFabricDoesNotSuitIsLeftOutWithItsReason) {
  const std::string run = "simulate --trace traces/simulate-20.csv --fabric lingjun/topo.csv ";
  CliRun r = cli(run + "--placers tree,block --of json");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["placers"].size(), 1u);
  EXPECT_EQ(j["placers"][0]["placer"], "tree");
  ASSERT_EQ(j["placers_left_out"].size(), 1u);
  EXPECT_NE(j["placers_left_out"][0].get<std::string>().find(
                "block: slurm selection: block "),
            std::string::npos)
      << j["placers_left_out"];
  r = cli(run + "--placers tree,block");
  EXPECT_NE(r.out.find("placer left out: block: "), std::string::npos) << r.out;
  r = cli(run + "--placers block");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("fewer nodes than the base block"), std::string::npos) << r.err;
}

TEST(SimulateCli, BadTraceIsNamedByFileAndLine) {
  const std::string bad = test::scratch("bad-trace.csv");
  {
    std::ofstream out(bad);
    out << "job_id,submission_time,duration,num_gpu\na,0,10,8\nb,1,ten,8\n";
  }
  CliRun r = cli("simulate --trace '" + bad + "' --synthetic tree4:1 --hosts 8");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find(bad + ":3: duration 'ten' is not a number"), std::string::npos) << r.err;
  r = cli("simulate --trace traces/simulate-20.csv --hosts 8");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("--fabric FILE or --synthetic"), std::string::npos) << r.err;
  r = cli("simulate --trace traces/simulate-20.csv --synthetic tree4:1 --placers flat,random");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("unknown placer 'random'"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace topoaware
