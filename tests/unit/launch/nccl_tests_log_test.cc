// nccl-tests logs (nccl_tests_log.h): the real outputs of tests/fixtures/nccl-tests read back,
// every value checked against the file; the fit against each source's published bus bandwidth
// (tests/fixtures/nccl-tests/PROVENANCE.md); malformed rows refused naming the file and line.
#include "topoaware/launch/nccl_tests_log.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "topoaware/topology/error.h"

namespace topoaware::launch::nccltests {
namespace {

using topology::Error;
using topology::ErrorCode;
// Inside a TEST body `Run` and `Test` are gtest's (testing::Test::Run, testing::Test).
using LogRun = nccltests::Run;
using TestKind = nccltests::Test;

std::string fixture(const std::string& name) {
  return std::string(TOPOAWARE_TEST_FIXTURES) + "/nccl-tests/" + name;
}

std::string text_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// The files published without a licence (PROVENANCE.md) may be taken out: their tests skip then.
#define READ_OR_SKIP(runs, name)                                                   \
  const std::string path_##runs = fixture(name);                                   \
  if (!std::filesystem::exists(path_##runs)) GTEST_SKIP() << name << " is absent"; \
  const std::vector<LogRun> runs = read(path_##runs)

// Within 5% of a published figure.
void expect_recovers(double value, double published, const std::string& what) {
  EXPECT_NEAR(value, published, 0.05 * published) << what;
}

// The ErrorCode and context of what `f` throws.
template <typename F>
Error error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no topology::Error thrown";
  return Error(ErrorCode::kSystem, "", "none");
}

TEST(NcclTestsLog, SuperbenchAllReduceOneNodeOldFormat) {
  const std::string path = fixture("superbench-1x8-a100-sxm4-nccl-allreduce.log");
  const std::vector<LogRun> runs = read(path);
  ASSERT_EQ(runs.size(), 1u);
  const LogRun& run = runs[0];
  EXPECT_EQ(run.source, path);
  EXPECT_EQ(run.first_line, 1);
  EXPECT_EQ(run.test_name, "");
  EXPECT_EQ(run.test, TestKind::kAllReduce);  // told by its table: sum, busbw = algbw x 2(n-1)/n
  EXPECT_EQ(run.nranks, 8);
  ASSERT_EQ(run.ranks.size(), 8u);
  EXPECT_EQ(run.ranks[0].rank, 0);
  EXPECT_EQ(run.ranks[0].host, "localhost");
  EXPECT_EQ(run.ranks[7].device, 7);
  EXPECT_EQ(run.ranks[7].bus_id, "0x00");
  EXPECT_EQ(run.ranks[7].gpu, "A100-SXM4-40GB");
  EXPECT_EQ(run.ranks[7].line, 11);
  EXPECT_EQ(run.nccl_version, "");
  EXPECT_TRUE(run.nccl_env.empty());
  EXPECT_TRUE(run.calls.empty());
  EXPECT_EQ(run.channels, -1);
  EXPECT_DOUBLE_EQ(run.avg_busbw, 68.4048);
  // The NCCL INFO line between the header and the first row is not a row.
  ASSERT_EQ(run.rows.size(), 34u);
  const Row& first = run.rows.front();
  EXPECT_EQ(first.line, 17);
  EXPECT_EQ(first.bytes, 0);
  EXPECT_EQ(first.count, 0);
  EXPECT_EQ(first.type, "float");
  EXPECT_EQ(first.redop, "sum");
  EXPECT_EQ(first.root, -1);
  EXPECT_DOUBLE_EQ(first.oop_time_us, 35.20);
  EXPECT_DOUBLE_EQ(first.ip_time_us, 34.05);
  const Row& last = run.rows.back();
  EXPECT_EQ(last.line, 50);
  EXPECT_EQ(last.bytes, 8589934592.0);
  EXPECT_EQ(last.count, 2147483648LL);
  EXPECT_DOUBLE_EQ(last.oop_time_us, 63896);
  EXPECT_DOUBLE_EQ(last.oop_algbw, 134.44);
  EXPECT_DOUBLE_EQ(last.oop_busbw, 235.26);
  EXPECT_DOUBLE_EQ(last.ip_time_us, 63959);
  EXPECT_DOUBLE_EQ(last.ip_busbw, 235.03);

  const Fit f = fit(run);
  EXPECT_EQ(f.points, 32);  // the two zero-byte rows are not sizes
  expect_recovers(f.busbw_GBps, 235.26, "fit");
  expect_recovers(f.plateau_busbw_GBps, 235.26, "plateau");
  EXPECT_NEAR(f.busbw_GBps, f.algbw_GBps * 1.75, 1e-9);  // 2(8-1)/8
  // The small sizes measure 34-37 us: the fitted latency is of that order, not the large sizes'.
  EXPECT_GT(f.latency_us, 25);
  EXPECT_LT(f.latency_us, 60);
}

TEST(NcclTestsLog, SuperbenchAllToAllBlankRedop) {
  const std::vector<LogRun> runs = read(fixture("superbench-1x8-a100-sxm4-nccl-alltoall.log"));
  ASSERT_EQ(runs.size(), 1u);
  const LogRun& run = runs[0];
  EXPECT_EQ(run.nranks, 8);
  // No name in the log, no redop in its rows: alltoall and all_gather print the same factor.
  EXPECT_EQ(run.test, TestKind::kOther);
  ASSERT_EQ(run.rows.size(), 34u);
  const Row& sixth = run.rows[5];
  EXPECT_EQ(sixth.bytes, 32);
  EXPECT_EQ(sixth.count, 1);
  EXPECT_EQ(sixth.redop, "");
  EXPECT_DOUBLE_EQ(sixth.oop_time_us, 89.00);
  EXPECT_DOUBLE_EQ(sixth.ip_time_us, 85.13);
  const Row& last = run.rows.back();
  EXPECT_DOUBLE_EQ(last.oop_time_us, 33508);
  EXPECT_DOUBLE_EQ(last.oop_algbw, 256.36);
  EXPECT_DOUBLE_EQ(last.oop_busbw, 224.31);
  EXPECT_DOUBLE_EQ(last.ip_busbw, 226.16);
  EXPECT_DOUBLE_EQ(run.avg_busbw, 58.6481);

  const Fit f = fit(run);
  EXPECT_EQ(f.points, 29);
  expect_recovers(f.busbw_GBps, 224.31, "fit");  // factor: the ratio nccl-tests printed
  expect_recovers(f.plateau_busbw_GBps, 224.31, "plateau");
}

TEST(NcclTestsLog, SuperbenchAllGatherNoRedopColumn) {
  const std::vector<LogRun> runs = read(fixture("superbench-1x8-a100-sxm4-nccl-allgather.log"));
  ASSERT_EQ(runs.size(), 1u);
  const LogRun& run = runs[0];
  EXPECT_EQ(run.test, TestKind::kOther);
  ASSERT_EQ(run.rows.size(), 34u);
  EXPECT_EQ(run.rows.front().redop, "");
  EXPECT_DOUBLE_EQ(run.rows.front().oop_time_us, 34.27);
  const Row& last = run.rows.back();
  EXPECT_DOUBLE_EQ(last.oop_time_us, 33646);
  EXPECT_DOUBLE_EQ(last.oop_busbw, 223.39);
  EXPECT_DOUBLE_EQ(last.ip_time_us, 32669);
  EXPECT_DOUBLE_EQ(last.ip_busbw, 230.07);
  EXPECT_DOUBLE_EQ(run.avg_busbw, 58.2651);
  const Fit f = fit(run);
  expect_recovers(f.busbw_GBps, 223.39, "fit");
  expect_recovers(f.plateau_busbw_GBps, 223.39, "plateau");
}

TEST(NcclTestsLog, GcpA3MegaTwoNodesH100) {
  READ_OR_SKIP(runs, "gcp-a3mega-2x8-h100-tcpxo-all_reduce.txt");
  ASSERT_EQ(runs.size(), 1u);
  const LogRun& run = runs[0];
  EXPECT_EQ(run.first_line, 9);                 // "# nThread", after the mpirun command
  EXPECT_EQ(run.test_name, "all_reduce_perf");  // from the command line
  EXPECT_EQ(run.test, TestKind::kAllReduce);
  EXPECT_EQ(run.nranks, 16);
  ASSERT_EQ(run.ranks.size(), 16u);
  std::set<std::string> hosts;
  for (const RankLine& r : run.ranks) hosts.insert(r.host);
  EXPECT_EQ(hosts, (std::set<std::string>{"ztan-mig-235z", "ztan-mig-gq73"}));
  EXPECT_EQ(run.ranks[7].host, "ztan-mig-235z");
  EXPECT_EQ(run.ranks[8].host, "ztan-mig-gq73");
  EXPECT_EQ(run.ranks[10].device, 2);
  EXPECT_EQ(run.ranks[10].bus_id, "0000:0b:00");
  EXPECT_EQ(run.ranks[10].gpu, "NVIDIA H100 80GB HBM3");
  ASSERT_EQ(run.rows.size(), 31u);
  EXPECT_EQ(run.rows.front().bytes, 8);
  EXPECT_EQ(run.rows.front().count, 2);
  EXPECT_DOUBLE_EQ(run.rows.front().oop_time_us, 135.8);
  EXPECT_DOUBLE_EQ(run.rows.front().ip_time_us, 123.5);
  const Row& last = run.rows.back();
  EXPECT_EQ(last.bytes, 8589934592.0);
  EXPECT_DOUBLE_EQ(last.oop_time_us, 47535);
  EXPECT_DOUBLE_EQ(last.oop_algbw, 180.71);
  EXPECT_DOUBLE_EQ(last.oop_busbw, 338.82);
  EXPECT_DOUBLE_EQ(last.ip_time_us, 47743);
  EXPECT_DOUBLE_EQ(last.ip_algbw, 179.92);
  EXPECT_DOUBLE_EQ(last.ip_busbw, 337.35);
  EXPECT_DOUBLE_EQ(run.avg_busbw, 70.742);

  const Fit f = fit(run);
  EXPECT_EQ(f.points, 31);
  expect_recovers(f.busbw_GBps, 338.82, "fit");
  expect_recovers(f.plateau_busbw_GBps, 338.82, "plateau");
  EXPECT_DOUBLE_EQ(f.plateau_busbw_GBps, 330.58);  // median of 2, 4 and 8 GiB
  // The sizes under 64 KiB measure 123-155 us.
  EXPECT_GT(f.latency_us, 100);
  EXPECT_LT(f.latency_us, 250);
}

TEST(NcclTestsLog, CoreweaveFourRunsInOneFile) {
  READ_OR_SKIP(runs, "coreweave-h100-64gpu-sharp-and-gb200-nvl72-all_reduce.md");
  ASSERT_EQ(runs.size(), 4u);
  // H100, 64 GPUs: the rank lines were elided by the source, so the ranks are not known.
  EXPECT_EQ(runs[0].first_line, 10);
  EXPECT_EQ(runs[0].nranks, 0);
  EXPECT_TRUE(runs[0].ranks.empty());
  ASSERT_EQ(runs[0].rows.size(), 5u);
  EXPECT_EQ(runs[0].rows.front().bytes, 536870912);
  EXPECT_DOUBLE_EQ(runs[0].rows.front().oop_time_us, 2984.6);
  EXPECT_DOUBLE_EQ(runs[0].rows.back().oop_busbw, 386.56);
  EXPECT_DOUBLE_EQ(runs[0].rows.back().ip_busbw, 385.56);
  EXPECT_DOUBLE_EQ(runs[0].avg_busbw, 373.187);
  // GB200: only the last rank line of each run is shown; it says how many ranks there were.
  const int nranks[] = {72, 144, 1440};
  const int first_lines[] = {39, 55, 73};
  const std::size_t nrows[] = {5, 6, 6};
  const double figure[] = {834.57, 810.41, 405.74};
  const double avg[] = {745.53, 688.487, 297.808};
  for (int i = 0; i < 3; ++i) {
    const LogRun& run = runs[static_cast<std::size_t>(i) + 1];
    SCOPED_TRACE(nranks[i]);
    EXPECT_EQ(run.first_line, first_lines[i]);
    EXPECT_EQ(run.nranks, nranks[i]);
    ASSERT_EQ(run.ranks.size(), 1u);
    EXPECT_EQ(run.ranks[0].rank, nranks[i] - 1);
    EXPECT_EQ(run.ranks[0].device, 3);
    EXPECT_EQ(run.ranks[0].bus_id, "0x01");
    EXPECT_EQ(run.test, TestKind::kAllReduce);
    ASSERT_EQ(run.rows.size(), nrows[i]);
    EXPECT_DOUBLE_EQ(run.rows.back().oop_busbw, figure[i]);
    EXPECT_DOUBLE_EQ(run.avg_busbw, avg[i]);
  }
  EXPECT_EQ(runs[1].ranks[0].host, "slurm-gb200-207-171");
  EXPECT_EQ(runs[1].ranks[0].gpu, "NVIDIA Graphics Device");
  EXPECT_EQ(runs[3].ranks[0].gpu, "NVIDIA GB200");

  const Fit h100 = fit(runs[0]);
  expect_recovers(h100.busbw_GBps, 386.56, "H100 fit");
  expect_recovers(h100.plateau_busbw_GBps, 386.56, "H100 plateau");
  for (int i = 0; i < 2; ++i) {
    const Fit f = fit(runs[static_cast<std::size_t>(i) + 1]);
    expect_recovers(f.busbw_GBps, figure[i], "GB200 fit");
    expect_recovers(f.plateau_busbw_GBps, figure[i], "GB200 plateau");
    EXPECT_NEAR(f.busbw_GBps, f.algbw_GBps * busbw_factor(TestKind::kAllReduce, nranks[i]), 1e-9);
  }
  // 20 racks: still climbing at 16 GiB (PROVENANCE.md), so neither number reaches its largest
  // size's figure within 5%; both stay within 10%, on either side of it.
  const Fit racks20 = fit(runs[3]);
  EXPECT_NEAR(racks20.plateau_busbw_GBps, 381.48, 1e-9);
  EXPECT_LT(racks20.plateau_busbw_GBps, 0.95 * 405.74);
  EXPECT_GT(racks20.busbw_GBps, 1.05 * 405.74);
  EXPECT_NEAR(racks20.busbw_GBps, 405.74, 0.10 * 405.74);
}

TEST(NcclTestsLog, OciRoceOneAndTwoNodesOneSizeEach) {
  READ_OR_SKIP(runs, "oci-bm-gpu4.8-a100-rocev2-1n-and-2n-all_reduce.txt");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].first_line, 6);
  EXPECT_EQ(runs[1].first_line, 36);
  for (const LogRun& run : runs) {
    EXPECT_EQ(run.test_name, "all_reduce_perf");
    EXPECT_EQ(run.test, TestKind::kAllReduce);
    ASSERT_EQ(run.rows.size(), 1u);
    EXPECT_EQ(run.rows[0].bytes, 10737418240.0);
    EXPECT_EQ(run.rows[0].count, 2684354560LL);
  }
  EXPECT_EQ(runs[0].nranks, 8);
  EXPECT_EQ(runs[0].ranks[0].host, "inst-lscuv-ao-ub24");
  EXPECT_DOUBLE_EQ(runs[0].rows[0].oop_time_us, 80922);
  EXPECT_DOUBLE_EQ(runs[0].rows[0].oop_algbw, 132.69);
  EXPECT_DOUBLE_EQ(runs[0].rows[0].oop_busbw, 232.20);
  EXPECT_DOUBLE_EQ(runs[0].rows[0].ip_busbw, 232.13);
  EXPECT_DOUBLE_EQ(runs[0].avg_busbw, 232.167);
  EXPECT_EQ(runs[1].nranks, 16);
  EXPECT_EQ(runs[1].ranks[7].host, "inst-li3ob-ao-ub24");
  EXPECT_EQ(runs[1].ranks[8].host, "inst-wyzi7-ao-ub24");
  EXPECT_EQ(runs[1].ranks[8].device, 0);
  EXPECT_DOUBLE_EQ(runs[1].rows[0].oop_busbw, 191.76);
  EXPECT_DOUBLE_EQ(runs[1].avg_busbw, 191.752);
  // nccl-tests' factor is what it printed: busbw / algbw = 2(n-1)/n.
  EXPECT_NEAR(runs[0].rows[0].oop_busbw / runs[0].rows[0].oop_algbw,
              busbw_factor(TestKind::kAllReduce, runs[0].nranks), 1e-3);
  EXPECT_NEAR(runs[1].rows[0].oop_busbw / runs[1].rows[0].oop_algbw,
              busbw_factor(TestKind::kAllReduce, runs[1].nranks), 1e-3);
  // One size is nothing to fit: refused, naming the run.
  const Error e = error_of([&] { fit(runs[1]); });
  EXPECT_EQ(e.code(), ErrorCode::kBadInput);
  EXPECT_EQ(e.context(), path_runs + ":36");
}

TEST(NcclTestsLog, HandWrittenNcclInfoAndTuningLines) {
  const std::vector<LogRun> runs = read(fixture("handwritten-tuning-lines-from-enqueue-cc.log"));
  ASSERT_EQ(runs.size(), 1u);
  const LogRun& run = runs[0];
  EXPECT_EQ(run.first_line, 5);  // "# nccl-tests version"
  EXPECT_EQ(run.test, TestKind::kAllReduce);
  EXPECT_EQ(run.nccl_version, "2.21.5");
  EXPECT_EQ(run.nranks, 2);
  EXPECT_EQ(run.ranks[1].host, "example-b");
  EXPECT_EQ(run.nccl_env.at("NCCL_ALGO"), "Ring");
  EXPECT_EQ(run.nccl_env.at("NCCL_PROTO"), "Simple");
  EXPECT_EQ(run.nccl_env.at("NCCL_IB_GID_INDEX"), "3");  // param.cc's "%lld." without the dot
  EXPECT_EQ(run.nccl_env.size(), 3u);
  EXPECT_EQ(run.channels, 4);
  EXPECT_TRUE(run.rows.empty());
  ASSERT_EQ(run.calls.size(), 5u);
  // 2.20-2.22: no function, numeric ids.
  EXPECT_EQ(run.calls[0].func, "");
  EXPECT_EQ(run.calls[0].bytes, 1048576);
  EXPECT_EQ(run.calls[0].algo, "Ring");
  EXPECT_EQ(run.calls[0].proto, "Simple");
  EXPECT_EQ(run.calls[0].channels, -1);
  EXPECT_DOUBLE_EQ(run.calls[0].time_us, 36.28);
  EXPECT_EQ(run.calls[0].line, 23);
  // 2.23: the function in front.
  EXPECT_EQ(run.calls[1].func, "AllReduce");
  EXPECT_EQ(run.calls[1].algo, "Tree");
  EXPECT_EQ(run.calls[1].proto, "LL128");
  // 2.24+: names as ncclAlgoToString spells them, and the channel range.
  EXPECT_EQ(run.calls[2].func, "AllGather");
  EXPECT_EQ(run.calls[2].bytes, 2097152);
  EXPECT_EQ(run.calls[2].algo, "Ring");
  EXPECT_EQ(run.calls[2].proto, "Simple");
  EXPECT_EQ(run.calls[2].channels, 4);
  EXPECT_EQ(run.calls[3].algo, "NVLSTree");
  EXPECT_EQ(run.calls[3].proto, "LL128");
  EXPECT_EQ(run.calls[3].channels, 4);  // {2..5}
  EXPECT_DOUBLE_EQ(run.calls[3].time_us, -1);
  // Symmetric kernels (2.27+).
  EXPECT_EQ(run.calls[4].func, "AllReduce");
  EXPECT_EQ(run.calls[4].algo, "Symmetric");
  EXPECT_EQ(run.calls[4].kernel, "AllReduce_AGxLL_R");
  EXPECT_EQ(run.calls[4].proto, "");
  EXPECT_EQ(run.calls[4].channels, 8);
}

// ---- what surrounds the output, and what is refused -------------------------------------------

TEST(NcclTestsLog, LauncherPrefixesAndMarkdownHeadersReadTheSame) {
  const std::string text = text_of(fixture("superbench-1x8-a100-sxm4-nccl-allgather.log"));
  const LogRun plain = parse(text, "plain").at(0);
  std::istringstream lines(text);
  std::string line, tagged, srun, markdown;
  while (std::getline(lines, line)) {
    tagged += "[1,0]<stdout>:" + line + "\n";                              // OpenMPI --tag-output
    srun += "0: " + line + "\n";                                           // srun -l
    markdown += (line.rfind("#", 0) == 0 ? line.substr(1) : line) + "\n";  // '#' eaten
  }
  for (const std::string& variant : {tagged, srun, markdown}) {
    const std::vector<LogRun> runs = parse(variant, "variant");
    ASSERT_EQ(runs.size(), 1u);
    ASSERT_EQ(runs[0].rows.size(), plain.rows.size());
    EXPECT_EQ(runs[0].nranks, 8);
    EXPECT_DOUBLE_EQ(runs[0].rows.back().oop_busbw, plain.rows.back().oop_busbw);
    EXPECT_DOUBLE_EQ(runs[0].avg_busbw, plain.avg_busbw);
  }
}

TEST(NcclTestsLog, UnknownLinesAreIgnored) {
  std::string text = text_of(fixture("superbench-1x8-a100-sxm4-nccl-allreduce.log"));
  // Before row 26 (512 B): another rank's warning, a launcher's chatter, a blank line.
  const std::string marker = "         512           128";
  const std::size_t at = text.find(marker);
  ASSERT_NE(at, std::string::npos);
  text.insert(at,
              "node-b:3443:3460 [1] NCCL WARN NET/IB : some device warning\n"
              "Authorization required, but no authorization protocol specified\n"
              "\n"
              "node-b:3443:3443 [1] NCCL INFO comm 0x7f rank 1 nranks 8 - Destroy COMPLETE\n");
  const std::vector<LogRun> runs = parse(text, "noisy.log");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].rows.size(), 34u);
  EXPECT_EQ(runs[0].rows[9].bytes, 512);
  EXPECT_EQ(runs[0].rows[9].line, 30);  // four lines further down
}

TEST(NcclTestsLog, LetterInTheTimeColumnIsRefusedNamingTheLine) {
  std::string text = text_of(fixture("superbench-1x8-a100-sxm4-nccl-allreduce.log"));
  const std::size_t at = text.find("    35.20    0.00");  // line 17, out-of-place time
  ASSERT_NE(at, std::string::npos);
  text.replace(at + 4, 5, "3S.20");
  const Error e = error_of([&] { parse(text, "bad.log"); });
  EXPECT_EQ(e.code(), ErrorCode::kBadInput);
  EXPECT_EQ(e.context(), "bad.log:17");
  EXPECT_NE(std::string(e.what()).find("time '3S.20'"), std::string::npos) << e.what();
}

TEST(NcclTestsLog, TruncatedRowIsRefusedNamingTheLine) {
  std::string text = text_of(fixture("superbench-1x8-a100-sxm4-nccl-allreduce.log"));
  // The last row (line 50) cut after its out-of-place busbw, as a log cut short leaves it.
  const std::size_t at = text.find("235.26");
  ASSERT_NE(at, std::string::npos);
  text.erase(at + 6, text.find('\n', at) - (at + 6));
  const Error e = error_of([&] { parse(text, "cut.log"); });
  EXPECT_EQ(e.code(), ErrorCode::kBadInput);
  EXPECT_EQ(e.context(), "cut.log:50");
}

TEST(NcclTestsLog, WordInTheCountColumnIsRefused) {
  std::string text = text_of(fixture("superbench-1x8-a100-sxm4-nccl-allreduce.log"));
  const std::size_t at = text.find("  8589934592    2147483648");
  ASSERT_NE(at, std::string::npos);
  text.replace(at + 16, 10, "two-giga-n");
  const Error e = error_of([&] { parse(text, "word.log"); });
  EXPECT_EQ(e.code(), ErrorCode::kBadInput);
  EXPECT_EQ(e.context(), "word.log:50");
}

TEST(NcclTestsLog, NoRunIsRefusedNamingTheFile) {
  Error e = error_of([] { parse("", "empty.log"); });
  EXPECT_EQ(e.code(), ErrorCode::kBadInput);
  EXPECT_EQ(e.context(), "empty.log");
  e = error_of(
      [] { parse("host:1:2 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\nsome prose\n", "x"); });
  EXPECT_EQ(e.code(), ErrorCode::kBadInput);
  EXPECT_EQ(e.context(), "x");
  e = error_of([] { read("/nonexistent/nccl-tests.log"); });
  EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  EXPECT_EQ(e.context(), "/nonexistent/nccl-tests.log");
}

TEST(NcclTestsLog, TwoConcatenatedLogsAreTwoRuns) {
  const std::string a = text_of(fixture("superbench-1x8-a100-sxm4-nccl-allreduce.log"));
  const std::string b = text_of(fixture("superbench-1x8-a100-sxm4-nccl-allgather.log"));
  const std::vector<LogRun> runs = parse(a + b, "job.log");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].rows.size(), 34u);
  EXPECT_EQ(runs[1].rows.size(), 34u);
  EXPECT_EQ(runs[1].first_line, 54);
  EXPECT_EQ(runs[0].test, TestKind::kAllReduce);
  EXPECT_EQ(runs[1].rows.front().redop, "");
  // Without the "Avg bus bandwidth" line between them, the second header still starts a run.
  std::string cut = a.substr(0, a.find("# Out of bounds")) + b;
  EXPECT_EQ(parse(cut, "cut.log").size(), 2u);
  // The first run's name is its own: "concluded: alltoall_perf" does not name the next one.
  const std::string c = text_of(fixture("superbench-1x8-a100-sxm4-nccl-alltoall.log"));
  const std::vector<LogRun> named = parse("# Collective test starting: alltoall_perf\n" + c +
                                              "# Collective test concluded: alltoall_perf\n" + b,
                                          "named.log");
  ASSERT_EQ(named.size(), 2u);
  EXPECT_EQ(named[0].test, TestKind::kAllToAll);
  EXPECT_EQ(named[0].test_name, "alltoall_perf");
  EXPECT_EQ(named[1].test_name, "");
  EXPECT_EQ(named[1].test, TestKind::kOther);
}

TEST(NcclTestsLog, RingChannelsWhenNoCollChannelsLine) {
  const std::string text = text_of(fixture("superbench-1x8-a100-sxm4-nccl-allreduce.log"));
  const std::string info =
      "h:1:2 [0] NCCL INFO Channel 00/24 :    0   1   2   3   4   5   6   7\n"
      "h:1:2 [0] NCCL INFO Channel 23/24 :    0   1   2   3   4   5   6   7\n"
      "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read\n";
  const std::size_t at = text.find("#\n#  ");  // after the rank lines
  ASSERT_NE(at, std::string::npos);
  const LogRun run = parse(text.substr(0, at) + info + text.substr(at), "r").at(0);
  EXPECT_EQ(run.channels, 24);
}

TEST(NcclTestsLog, BusBandwidthFactorsOfNcclTests) {
  EXPECT_DOUBLE_EQ(busbw_factor(TestKind::kAllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(busbw_factor(TestKind::kAllReduce, 16), 1.875);
  EXPECT_DOUBLE_EQ(busbw_factor(TestKind::kReduceScatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(busbw_factor(TestKind::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor(TestKind::kAllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(busbw_factor(TestKind::kSendRecv, 2), 1);
  EXPECT_DOUBLE_EQ(busbw_factor(TestKind::kAllReduce, 0), 0);
  EXPECT_STREQ(to_string(TestKind::kAllToAll), "alltoall");
  EXPECT_STREQ(to_string(TestKind::kReduceScatter), "reduce_scatter");
  EXPECT_EQ(test_from_name("/opt/nccl-tests/build/all_gather_perf_mpi"), TestKind::kAllGather);
  EXPECT_EQ(test_from_name("sendrecv_perf"), TestKind::kSendRecv);
  EXPECT_EQ(test_from_name("broadcast_perf"), TestKind::kOther);
}

}  // namespace
}  // namespace topoaware::launch::nccltests
