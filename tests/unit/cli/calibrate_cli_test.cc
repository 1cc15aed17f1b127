// `topo-aware calibrate` and `map --calibration` as a site runs them: a calibration changes the
// modeled figures exactly as computed here by hand, and calibrate fits and checks the model on
// real nccl-tests outputs (tests/fixtures/nccl-tests, PROVENANCE.md there).
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_support.h"
#include "test_support.h"

namespace {

using topoaware::test::cli;
using topoaware::test::CliRun;

using topoaware::test::lab_args;
using topoaware::test::source_dir;

std::string write_scratch(const std::string& name, const std::string& text) {
  const std::string path = topoaware::test::scratch(name);
  std::ofstream(path) << text;
  return path;
}

const nlohmann::json& dim(const nlohmann::json& detail, const char* name) {
  for (const auto& d : detail["dims"]) {
    if (d["dim"] == name) return d;
  }
  ADD_FAILURE() << "no dim " << name;
  return detail;
}

// tp=8 inside each host, dp=4 over the lab's four hosts under two leaves (its groups reach the
// spine), in Slurm's block order. A calibration of dp's algorithm at the spine, bandwidth 0.5
// and latency 2, doubles dp's time (all of it: routed loads, NCCL's own time and latency) and
// leaves tp's; a calibration of another tier changes nothing.
TEST(CalibrateCliTest, MapCalibrationChangesTheFiguresAsWorkedByHand) {
  const std::string base =
      "map " + lab_args() + " --nodes 'node[1-4]' --layout tp=8,dp=4 --algo block --of json";
  CliRun plain = cli(base);
  ASSERT_EQ(plain.rc, 0) << plain.err;
  const auto p = nlohmann::json::parse(plain.out)["cost"]["block_detail"];
  const auto& dp = dim(p, "dp");
  const auto& tp = dim(p, "tp");
  ASSERT_GT(dp["groups_across"].get<int>(), 0);
  ASSERT_EQ(tp["groups_in_host"].get<int>(), 4);
  const std::string algo = dp["nccl"];
  const std::string file = write_scratch(
      "spine.toml", "format = 1\n[[entry]]\nalgorithm = \"" + algo +
                        "\"\ntier = \"spine\"\nbandwidth = 0.5\nlatency = 2\ncases = 3\n");
  CliRun cal = cli(base + " --calibration " + file);
  ASSERT_EQ(cal.rc, 0) << cal.err;
  const auto cj = nlohmann::json::parse(cal.out);
  const auto c = cj["cost"]["block_detail"];
  const double dps = dp["seconds"].get<double>(), tps = tp["seconds"].get<double>();
  EXPECT_NEAR(dim(c, "dp")["seconds"].get<double>(), 2 * dps, 1e-12 * dps);
  EXPECT_DOUBLE_EQ(dim(c, "tp")["seconds"].get<double>(), tps);
  EXPECT_NEAR(c["raw_seconds"].get<double>(), p["raw_seconds"].get<double>() + dps,
              1e-12 * p["raw_seconds"].get<double>());
  const std::string said = "model corrected by " + file + ": " + algo +
                           "/spine bandwidth x0.50, latency x2.00 (3 runs)";
  bool found = false;
  for (const auto& a : cj["assumptions"]) found |= a.get<std::string>() == said;
  EXPECT_TRUE(found) << cj["assumptions"].dump();
  EXPECT_EQ(cj["inputs"]["calibration"], file);
  // The table says it too.
  CliRun table = cli("map " + lab_args() +
                     " --nodes 'node[1-4]' --layout tp=8,dp=4 --algo block --calibration " + file);
  ASSERT_EQ(table.rc, 0) << table.err;
  EXPECT_NE(table.out.find(said), std::string::npos) << table.out;

  const std::string leaf = write_scratch(
      "leaf.toml", "format = 1\n[[entry]]\nalgorithm = \"" + algo +
                       "\"\ntier = \"leaf\"\nbandwidth = 0.5\nlatency = 2\n");
  CliRun other = cli(base + " --calibration " + leaf);
  ASSERT_EQ(other.rc, 0) << other.err;
  EXPECT_DOUBLE_EQ(
      nlohmann::json::parse(other.out)["cost"]["block_detail"]["raw_seconds"].get<double>(),
      p["raw_seconds"].get<double>());

  // inspect replays the plan with the calibration its inputs name.
  const std::string plan = topoaware::test::scratch("calibrated-plan.json");
  ASSERT_EQ(cli(base + " --calibration " + file + " -o " + plan).rc, 0);
  CliRun ins = cli("inspect " + plan + " --of json");
  ASSERT_EQ(ins.rc, 0) << ins.err;
  const auto ij = nlohmann::json::parse(ins.out);
  EXPECT_DOUBLE_EQ(ij["plan"]["seconds"].get<double>(), cj["cost"]["plan"].get<double>());
  EXPECT_NE(ij["assumptions"].dump().find("model corrected by"), std::string::npos)
      << ij["assumptions"].dump();

  // A broken calibration file is refused naming its line, as bad input (exit 1).
  const std::string bad =
      write_scratch("bad.toml", "format = 1\n[[entry]]\nalgorithm = \"Ring\"\ntier = \"rack\"\n"
                                "bandwidth = 0.5\n");
  CliRun b = cli(base + " --calibration " + bad);
  EXPECT_EQ(b.rc, 1);
  EXPECT_NE(b.err.find(bad + ":4: tier 'rack' is not nvlink, leaf or spine"), std::string::npos)
      << b.err;
}

}  // namespace

namespace {

// A result file as scripts/calibrate.sh writes one: its header line, then nccl-tests' output for
// `hosts` (in rank order, `gpus` ranks each) whose bus bandwidth is `busbw` GB/s from 1 MiB to
// 1 GiB after 20 us of latency. Made up for the ranking's logic, never for a figure.
std::string synthetic_run(const std::string& test, const std::vector<std::string>& hosts,
                          int gpus, const std::string& order, double busbw,
                          const std::string& info = "") {
  const int n = static_cast<int>(hosts.size()) * gpus;
  const double factor = test == "all_reduce" ? 2.0 * (n - 1) / n : (n - 1.0) / n;
  std::string hostlist;
  for (const auto& h : hosts) hostlist += (hostlist.empty() ? "" : ",") + h;
  std::string out = "# topo-aware-calibrate case=" + std::to_string(hosts.size()) + "n" +
                    std::to_string(gpus) + "g nodes=" + std::to_string(hosts.size()) +
                    " gpus_per_node=" + std::to_string(gpus) + " order=" + order + " test=" +
                    test + " hosts=" + hostlist + "\n";
  out += "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 1073741824 step: 4(factor) warmup iters: "
         "5 iters: 20 agg iters: 1 validation: 1 graph: 0\n#\n# Using devices\n";
  for (int r = 0; r < n; ++r) {
    out += "#  Rank " + std::to_string(r) + " Group  0 Pid 100 on " +
           hosts[static_cast<std::size_t>(r / gpus)] + " device  " + std::to_string(r % gpus) +
           " [0000:1" + std::to_string(r % gpus) + ":00] NVIDIA H100 80GB HBM3\n";
  }
  out += info;
  out += "#\n#                                                              out-of-place        "
         "               in-place\n"
         "#       size         count      type   redop    root     time   algbw   busbw #wrong"
         "     time   algbw   busbw #wrong\n"
         "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)        "
         "    (us)  (GB/s)  (GB/s)\n";
  for (double bytes = 1 << 20; bytes <= (1 << 30); bytes *= 4) {
    const double algbw = busbw / factor;
    const double us = 20 + bytes / (algbw * 1e3);
    char row[256];
    std::snprintf(row, sizeof row,
                  "%12.0f  %12.0f     float     %s      -1  %7.1f  %6.2f  %6.2f      0  %7.1f  "
                  "%6.2f  %6.2f      0\n",
                  bytes, bytes / 4, test == "all_reduce" ? "sum" : "none", us,
                  bytes / us / 1e3, bytes / us / 1e3 * factor, us, bytes / us / 1e3,
                  bytes / us / 1e3 * factor);
    out += row;
  }
  out += "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : " + std::to_string(busbw) +
         "\n#\n";
  return out;
}

// The lab's four DGX-H100-like hosts under two leaves whose uplinks carry a quarter of what
// their hosts can send (4:1): crossing the spine costs, so host orders differ in the model.
std::string oversubscribed_fabric() {
  return write_scratch("fabric-4to1.toml",
                       "name = \"lab-4to1\"\n[defaults]\nlink = \"4xNDR\"\n"
                       "[node_types.dgx-h100]\ncapture = \"" +
                           topoaware::test::fixture("nccl-topo/dgx-h100-topo.xml") +
                           "\"\ngpus = 8\n[[unit]]\nname = \"lab\"\nhosts = \"node[1-4]\"\n"
                           "node_type = \"dgx-h100\"\nleaves = \"leaf[1-2]\"\nwiring = "
                           "\"spread\"\nnics = 8\n[[uplinks]]\nfrom = \"leaf[1-2]\"\nto = "
                           "\"spine\"\ncables = 4\n");
}

// Published nccl-tests outputs: calibrate fits one entry per (algorithm, tier) from them and
// writes the file; --check with that file brings each fitted run to its measurement.
TEST(CalibrateCliTest, FitsPublishedRunsAndTheFitReproducesThem) {
  const std::string runs = topoaware::test::fixture("nccl-tests/gcp-a3mega-2x8-h100-tcpxo-all_reduce.txt") +
                           " " +
                           topoaware::test::fixture("nccl-tests/superbench-1x8-a100-sxm4-nccl-allreduce.log");
  const std::string file = topoaware::test::scratch("fitted.toml");
  CliRun fit = cli("calibrate " + runs + " --nic-gbps 25 -o " + file);
  ASSERT_EQ(fit.rc, 0) << fit.err;
  EXPECT_NE(fit.out.find("2 runs fitted into 2 entries, written to " + file), std::string::npos)
      << fit.out;
  const std::string text = topoaware::test::slurp(file);
  EXPECT_NE(text.find("format = 1\n"), std::string::npos);
  EXPECT_NE(text.find("algorithm = \"Ring\"\ntier = \"nvlink\""), std::string::npos) << text;
  EXPECT_NE(text.find("tier = \"leaf\""), std::string::npos) << text;
  EXPECT_NE(text.find("# from 2n x 8g all_reduce"), std::string::npos) << text;

  CliRun before = cli("calibrate --check " + runs + " --nic-gbps 25 --of json");
  ASSERT_TRUE(before.rc == 0 || before.rc == 4) << before.err;
  CliRun after =
      cli("calibrate --check " + runs + " --nic-gbps 25 --of json --calibration " + file);
  ASSERT_TRUE(after.rc == 0 || after.rc == 4) << after.err;
  const auto b = nlohmann::json::parse(before.out), a = nlohmann::json::parse(after.out);
  ASSERT_EQ(a["runs"].size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    // The bandwidth factor is measured / modeled at the plateau: corrected, the model meets the
    // measurement there (the latency factor moves the plateau's smaller sizes a little).
    EXPECT_NEAR(a["runs"][i]["ratio"].get<double>(), 1.0, 0.03) << a["runs"][i].dump();
    EXPECT_DOUBLE_EQ(a["runs"][i]["uncalibrated_busbw_gbps"].get<double>(),
                     b["runs"][i]["modeled_busbw_gbps"].get<double>());
  }
  // The A100 node is modeled from the GPU name in its rank lines, and the output says so.
  EXPECT_NE(a["assumptions"].get<std::string>().find("A100"), std::string::npos);
  EXPECT_EQ(a["calibration"], file);
}

// Cases run in several host orders: the model must order them as measured. Two cases on the 4:1
// lab: 4 hosts whose leaf-interleaved order measured slower than block order (the model agrees:
// it crosses the spine four times), and 2 hosts that measured faster across the spine than
// inside a leaf (the model disagrees). One of two, and exit 4.
TEST(CalibrateCliTest, CheckSaysWhetherTheModelRanksHostOrdersAsMeasured) {
  const std::string dir = topoaware::test::scratch("orders");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto put = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + "/" + name) << text;
  };
  // NCCL's TUNING lines (2.24+ form, src/enqueue.cc) in the block run: what NCCL ran at the
  // plateau, by count (the 1 MiB call is under a quarter of the largest and does not vote).
  put("4n-8g-block-all_reduce.txt",
      synthetic_run("all_reduce", {"node1", "node2", "node3", "node4"}, 8, "block", 180,
                    "node1:100:100 [0] NCCL INFO AllReduce: 1048576 Bytes -> Algo TREE proto LL128 "
          "channel{Lo..Hi}={0..15}\n"
          "node1:100:100 [0] NCCL INFO AllReduce: 268435456 Bytes -> Algo RING proto SIMPLE "
          "channel{Lo..Hi}={0..15}\n"
          "node1:100:100 [0] NCCL INFO AllReduce: 1073741824 Bytes -> Algo RING proto SIMPLE "
          "channel{Lo..Hi}={0..15}\n"
          "node1:100:100 [0] NCCL INFO AllGather: 1073741824 Bytes -> Algo NVLS proto SIMPLE "
          "channel{Lo..Hi}={0..15}\n"));
  put("4n-8g-interleaved-all_reduce.txt",
      synthetic_run("all_reduce", {"node1", "node3", "node2", "node4"}, 8, "interleaved", 110));
  put("2n-8g-leaf-all_gather.txt", synthetic_run("all_gather", {"node1", "node2"}, 8, "leaf", 150));
  put("2n-8g-spine-all_gather.txt",
      synthetic_run("all_gather", {"node1", "node3"}, 8, "spine", 200));
  put("manifest.txt", "case order test status\n");  // not a result: left out
  const std::string args = "calibrate --check " + dir + " --fabric " + oversubscribed_fabric();
  CliRun r = cli(args);
  EXPECT_EQ(r.rc, 4) << r.err;
  EXPECT_NE(r.out.find("host orders:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("verdict: the model ranks orders as measured in 1 of 2 cases; worst ratio "),
            std::string::npos)
      << r.out;
  CliRun j = cli(args + " --of json");
  EXPECT_EQ(j.rc, 4);
  const auto doc = nlohmann::json::parse(j.out);
  ASSERT_EQ(doc["runs"].size(), 4u);
  ASSERT_EQ(doc["cases"].size(), 2u);
  for (const auto& c : doc["cases"]) {
    if (c["case"] == "4n x 8g all_reduce") {
      EXPECT_TRUE(c["ranked_as_measured"].get<bool>()) << c.dump();
      EXPECT_EQ(c["measured_best"], "block");
      EXPECT_EQ(c["modeled_best"], "block");
    } else {
      EXPECT_EQ(c["case"], "2n x 8g all_gather");
      EXPECT_FALSE(c["ranked_as_measured"].get<bool>()) << c.dump();
      EXPECT_EQ(c["measured_best"], "spine");
      EXPECT_EQ(c["modeled_best"], "leaf");
    }
  }
  EXPECT_FALSE(doc["agrees"].get<bool>());
  // The model's own algorithm for each run; NCCL's only where the log has TUNING lines.
  EXPECT_EQ(doc["algorithm_known"], 1);
  for (const auto& run : doc["runs"]) {
    EXPECT_FALSE(run["model_algorithm"].get<std::string>().empty());
    const bool tuned = run["file"].get<std::string>().find("4n-8g-block") != std::string::npos;
    EXPECT_EQ(run["nccl_algorithm"], tuned ? "Ring" : "") << run.dump();
    if (tuned) {
      EXPECT_EQ(doc["algorithm_agrees"], run["model_algorithm"] == "Ring" ? 1 : 0);
    }
  }
}

TEST(CalibrateCliTest, BadInputIsNamedAndUsageIsExplained) {
  CliRun help = cli("calibrate --help");
  EXPECT_EQ(help.rc, 0);
  EXPECT_NE(help.out.find("--check"), std::string::npos);
  EXPECT_NE(help.out.find("--calibration"), std::string::npos);
  const std::string bad = write_scratch(
      "bad-row.txt",
      "# nThread 1 nGpus 8 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong"
      "     time   algbw   busbw #wrong\n"
      "           8             2     float     sum      -1    12x.8    0.00    0.00      0"
      "    123.5    0.00    0.00      0\n");
  CliRun r = cli("calibrate --check " + bad);
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find(bad + ":3"), std::string::npos) << r.err;
  EXPECT_EQ(cli("calibrate --calibration x.toml " + bad).rc, 2);
  EXPECT_EQ(cli("calibrate /nonexistent/results").rc, 1);
  EXPECT_EQ(cli("calibrate --check " + bad + " --of yaml").rc, 2);
}

}  // namespace
