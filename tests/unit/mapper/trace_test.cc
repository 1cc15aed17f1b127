// Trace readers: small inline samples of each format (what is kept, what is skipped and
// counted, bad input named by file:line), and the real traces in ../shared/traces when present.
#include "topoaware/mapper/trace.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "topoaware/mapper/layout.h"

namespace topoaware::mapper {
namespace {

std::string error_of(const std::string& text, TraceFormat f) {
  try {
    read_trace(text, "t.csv", f);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A file under ../shared/traces, or empty when shared/ is absent (the caller skips).
std::string shared_trace(const std::string& rel) {
  const std::string p = std::string(TOPOAWARE_SHARED_DIR) + "/traces/" + rel;
  if (!std::filesystem::exists(p)) return "";
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(Trace, ElasticFlowRowsInSubmitOrderWithoutAFinalNewline) {
  const std::string text =
      "job_id,submission_time,duration,num_gpu\n"
      "a,100,3600,8\n"
      "b,50,60,1\n"
      "c,100,10,16";  // no final newline, as in the real files
  const Trace t = read_elasticflow(text, "t.csv");
  ASSERT_EQ(t.jobs.size(), 3u);
  EXPECT_EQ(t.jobs[0].id, "b");
  EXPECT_EQ(t.jobs[1].id, "a");  // equal submits keep the file's order
  EXPECT_EQ(t.jobs[2].id, "c");
  EXPECT_DOUBLE_EQ(t.jobs[2].duration, 10);
  EXPECT_EQ(t.jobs[2].gpus, 16);
  EXPECT_EQ(detect_trace_format(text, "t.csv"), TraceFormat::kElasticFlow);
}

TEST(Trace, BadRowsAreNamedByFileAndLine) {
  const std::string head = "job_id,submission_time,duration,num_gpu\n";
  EXPECT_EQ(error_of(head + "a,1,2,8\nb,x,2,8\n", TraceFormat::kElasticFlow),
            "t.csv:3: submission_time 'x' is not a number");
  EXPECT_EQ(error_of(head + "a,1,0,8\n", TraceFormat::kElasticFlow),
            "t.csv:2: job a: duration must be positive");
  EXPECT_EQ(error_of(head + "a,1,2\n", TraceFormat::kElasticFlow),
            "t.csv:2: 3 fields; the header has 4");
  EXPECT_EQ(error_of("job_id,when\n", TraceFormat::kElasticFlow),
            "t.csv:1: no column submission_time in the header");
  EXPECT_EQ(error_of("", TraceFormat::kKalos), "t.csv:1: empty trace: no header line");
  EXPECT_THROW(detect_trace_format("a,b,c\n", "t.csv"), Error);
}

TEST(Trace, KalosDurationIsHalfASecondPerIterationAndGpusAreWorkersTimesPerWorker) {
  const std::string text =
      "job_id,arrival_time,num_iteration,iteration_computing_time,iteration_networking_time,"
      "gpu_workers,ps,gpu_per_worker,cpu_per_gpu_worker,cpu_per_ps_worker,tensorsizes,"
      "profiled_network\n"
      "0,0.0,208,0.5,0.25,8,0,8.0,15.0,15.0,10.0,500\r\n"
      "1,313.0,156,0.5,0.25,1,0,2.0,60.0,60.0,1.0,500\n";
  EXPECT_EQ(detect_trace_format(text, "k.csv"), TraceFormat::kKalos);
  const Trace t = read_kalos(text, "k.csv");
  ASSERT_EQ(t.jobs.size(), 2u);
  EXPECT_DOUBLE_EQ(t.jobs[0].duration, 104);
  EXPECT_EQ(t.jobs[0].gpus, 64);
  EXPECT_DOUBLE_EQ(t.jobs[1].submit, 313);
  EXPECT_EQ(t.jobs[1].gpus, 2);
}

TEST(Trace, SacctSkipsAndCountsStepsUnfinishedAndGpuLessJobs) {
  const std::string text =
      "JobID|JobName|Submit|Start|End|NNodes|AllocTRES|State\n"
      "100|train|2026-01-01T10:00:00|2026-01-01T10:05:00|2026-01-01T12:05:00|2|"
      "cpu=128,mem=1T,node=2,billing=128,gres/gpu=16|COMPLETED\n"
      "100.batch|batch|2026-01-01T10:00:00|2026-01-01T10:05:00|2026-01-01T12:05:00|1|"
      "cpu=64,gres/gpu=8|COMPLETED\n"
      "100.0|python|2026-01-01T10:05:01|2026-01-01T10:05:01|2026-01-01T12:05:00|2|"
      "gres/gpu=16|COMPLETED\n"
      "101|wait|2026-01-01T09:59:00|Unknown|Unknown|1||PENDING\n"
      "102|run|2026-01-01T11:00:00|2026-01-01T11:00:00|Unknown|1|gres/gpu=8|RUNNING\n"
      "103|cpu|2026-01-01T11:00:00|2026-01-01T11:00:00|2026-01-01T11:10:00|1|cpu=4,mem=8G|"
      "COMPLETED\n"
      "104|typed|2026-01-01T23:59:30|2026-01-02T00:00:30|2026-01-02T00:01:30|1|"
      "cpu=8,gres/gpu:h100=4|FAILED\n";
  EXPECT_EQ(detect_trace_format(text, "s.txt"), TraceFormat::kSacct);
  const Trace t = read_sacct(text, "s.txt");
  ASSERT_EQ(t.jobs.size(), 2u);
  EXPECT_EQ(t.steps_skipped, 2u);
  EXPECT_EQ(t.unfinished_skipped, 2u);
  EXPECT_EQ(t.no_gpu_skipped, 1u);
  // The origin is the first kept job's submit (10:00); 104 crosses midnight.
  EXPECT_EQ(t.jobs[0].id, "100");
  EXPECT_DOUBLE_EQ(t.jobs[0].submit, 0);
  EXPECT_DOUBLE_EQ(t.jobs[0].duration, 7200);
  EXPECT_EQ(t.jobs[0].gpus, 16);
  EXPECT_EQ(t.jobs[1].id, "104");
  EXPECT_DOUBLE_EQ(t.jobs[1].submit, 13 * 3600 + 59 * 60 + 30);
  EXPECT_DOUBLE_EQ(t.jobs[1].duration, 60);
  EXPECT_EQ(t.jobs[1].gpus, 4);
}

TEST(Trace, SacctBadSubmitIsNamed) {
  const std::string text =
      "JobID|Submit|Start|End|AllocTRES\n"
      "7|yesterday|2026-01-01T10:05:00|2026-01-01T12:05:00|gres/gpu=8\n";
  EXPECT_EQ(error_of(text, TraceFormat::kSacct),
            "t.csv:2: job 7: Submit 'yesterday' is not YYYY-MM-DDTHH:MM:SS");
  EXPECT_EQ(error_of("JobID|Submit|Start|End\n", TraceFormat::kSacct),
            "t.csv:1: no column AllocTRES in the header");
}

TEST(Trace, RealElasticFlowCluster04) {
  const std::string text = shared_trace("elasticflow/cluster04.csv");
  if (text.empty()) GTEST_SKIP() << "../shared/traces/elasticflow/cluster04.csv absent";
  const Trace t = read_trace(text, "cluster04.csv", detect_trace_format(text, "cluster04.csv"));
  // PROVENANCE.md: 15,802 jobs, 705,683 GPU-hours, 1 to 64 GPUs.
  ASSERT_EQ(t.jobs.size(), 15802u);
  double gpu_hours = 0;
  int most = 0;
  for (const TraceJob& j : t.jobs) {
    gpu_hours += j.gpus * j.duration / 3600;
    most = std::max(most, j.gpus);
  }
  EXPECT_NEAR(gpu_hours, 705683, 1);
  EXPECT_EQ(most, 64);
}

TEST(Trace, RealKalos) {
  const std::string text = shared_trace("kalos/converted_kalos_trace.csv");
  if (text.empty()) GTEST_SKIP() << "../shared/traces/kalos/converted_kalos_trace.csv absent";
  const Trace t = read_trace(text, "kalos.csv", detect_trace_format(text, "kalos.csv"));
  // PROVENANCE.md: 319 jobs, 456,843 GPU-hours, 38 of 1,024 GPUs.
  ASSERT_EQ(t.jobs.size(), 319u);
  double gpu_hours = 0;
  int of_1024 = 0;
  for (const TraceJob& j : t.jobs) {
    gpu_hours += j.gpus * j.duration / 3600;
    of_1024 += j.gpus == 1024 ? 1 : 0;
  }
  EXPECT_NEAR(gpu_hours, 456843, 1);
  EXPECT_EQ(of_1024, 38);
}

}  // namespace
}  // namespace topoaware::mapper
