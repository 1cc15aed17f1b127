// `topo-aware doctor` as a sysadmin and slurmd run it: exit codes (0 healthy, 3 degraded,
// 1 bad input or failed drain, 2 usage), --help, golden JSON per fault fixture, captures, the
// health directory, and --slurm against a recording stand-in for scontrol (no Slurm daemon).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_support.h"
#include "doctor_fixtures.h"

namespace topoaware {
namespace {

namespace fs = std::filesystem;
using test::cli;
using test::CliRun;
using test::expect_golden;
using test::joined_option_names;
using test::scratch;
using test::slurp;

// Reports carry their time; goldens pin it. SLURMD_NODENAME is cleared so a test run inside a
// Slurm job does not change the node name.
const std::string kEnv = "env -u SLURMD_NODENAME SOURCE_DATE_EPOCH=1700000000";

std::string faults() { return test::doctor_faults().string(); }

// The fault folder's absolute path replaced, so goldens do not depend on the temp folder.
std::string portable(std::string s) {
  const std::string root = faults();
  for (std::size_t at; (at = s.find(root)) != std::string::npos;) {
    s.replace(at, root.size(), "@FAULTS@");
  }
  return s;
}

TEST(DoctorCli, Help) {
  CliRun r = cli("doctor --help");
  EXPECT_EQ(r.rc, 0);
  for (const char* s :
       {"-i,--input", "--fsroot", "--compare", "--of", "--health-dir", "--slurm", "--resume",
        "--node", "--scontrol", "SLURMD_NODENAME", "Exit codes", "3 degraded", "docs/doctor.md"}) {
    EXPECT_NE(joined_option_names(r.out).find(s), std::string::npos) << s << "\n" << r.out;
  }
  EXPECT_NE(cli("--help").out.find("doctor"), std::string::npos);
}

TEST(DoctorCli, UsageErrorsExitTwo) {
  for (const char* args :
       {"doctor --of yaml", "doctor --resume", "doctor -i a.xml --fsroot sysfs/dgx-h100",
        "doctor --no-such-flag", "doctor --slurm -i nccl-topo/dgx-h100-topo.xml"}) {
    CliRun r = cli(args);
    EXPECT_EQ(r.rc, 2) << args << "\n" << r.err;
    EXPECT_FALSE(r.err.empty()) << args;
  }
}

TEST(DoctorCli, BadInputExitsOneNamingIt) {
  struct Case {
    std::string args, fragment;
  };
  const Case cases[] = {
      {"doctor --fsroot /nonexistent/root", "/nonexistent/root"},
      {"doctor -i /nonexistent/node.xml", "/nonexistent/node.xml"},
      {"doctor --fsroot sysfs/dgx-h100 --compare /nonexistent/type.xml", "/nonexistent/type.xml"},
      {"doctor --fsroot sysfs/dgx-h100 --health-dir /proc/no/such/dir", "/proc/no/such/dir"},
  };
  for (const Case& c : cases) {
    CliRun r = cli(c.args);
    EXPECT_EQ(r.rc, 1) << c.args << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("topo-aware: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(c.fragment), std::string::npos) << c.args << "\n" << r.err;
  }
}

TEST(DoctorCli, HealthySnapshotExitsZeroGolden) {
  CliRun t = cli("doctor --fsroot sysfs/dgx-h100", kEnv);
  ASSERT_EQ(t.rc, 0) << t.err;
  expect_golden("doctor-dgx-h100-healthy.txt", t.out);
  CliRun j = cli("doctor --of json --fsroot sysfs/dgx-h100", kEnv);
  ASSERT_EQ(j.rc, 0) << j.err;
  expect_golden("doctor-dgx-h100-healthy.json", j.out);
  nlohmann::json doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["schema"], "topo-aware-health/1");
  EXPECT_EQ(doc["status"], "healthy");
  EXPECT_EQ(doc["time"], 1700000000);
  EXPECT_TRUE(doc["findings"].empty());
}

// Every fault fixture exits 3 with its JSON pinned; the fields scripts and the planner rely on
// are there.
TEST(DoctorCli, EachFaultExitsThreeGolden) {
  for (const char* fault :
       {"pcie-gpu-x8", "pcie-nic-gen3", "pcie-uplink-gen4", "acs-redirect", "rdma-port-down",
        "rdma-rate-hdr", "rdma-rate-1x", "rdma-counters", "netdev-roce-mtu", "netdev-carrier",
        "affinity-sys", "compare-gpu-missing"}) {
    SCOPED_TRACE(fault);
    std::string args = "doctor --of json --fsroot '" + faults() + "/" + fault + "'";
    if (std::string(fault).rfind("compare", 0) == 0)
      args += " --compare nccl-topo/dgx-h100-topo.xml";
    CliRun r = cli(args, kEnv);
    ASSERT_EQ(r.rc, 3) << r.err;
    expect_golden(std::string("doctor-") + fault + ".json", portable(r.out));
    nlohmann::json doc = nlohmann::json::parse(r.out);
    ASSERT_FALSE(doc["findings"].empty());
    for (const auto& f : doc["findings"]) {
      for (const char* key : {"check", "severity", "device", "kind", "measured", "expected",
                              "measured_gbps", "expected_gbps", "affects", "action"}) {
        EXPECT_TRUE(f.contains(key)) << key;
      }
    }
  }
}

TEST(DoctorCli, TextNamesTheFindingAndWhatToDo) {
  CliRun r = cli("doctor --fsroot '" + faults() + "/rdma-rate-1x'", kEnv);
  ASSERT_EQ(r.rc, 3) << r.err;
  EXPECT_NE(r.out.find("status: critical"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CRITICAL  rdma.rate  mlx5_6 port 1 (0000:ce:00.0): 100 Gb/s (1X), "
                       "expected 400 Gb/s"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("-> mlx5_6 port 1 runs at 100 of 400 Gb/s"), std::string::npos) << r.out;
}

TEST(DoctorCli, CaptureRunsWhatItSupports) {
  CliRun ok = cli("doctor -i nccl-topo/dgx-h100-topo.xml", kEnv);
  ASSERT_EQ(ok.rc, 0) << ok.err;
  EXPECT_NE(ok.out.find("pcie.link          skipped"), std::string::npos) << ok.out;
  CliRun bad = cli("doctor --of json -i '" + faults() + "/capture-nvlink-down.xml'", kEnv);
  ASSERT_EQ(bad.rc, 3) << bad.err;
  expect_golden("doctor-capture-nvlink-down.json", portable(bad.out));
}

TEST(DoctorCli, HealthDirGetsOneReportPerHost) {
  std::string dir = scratch("health");
  fs::remove_all(dir);
  CliRun a = cli("doctor -q --fsroot '" + faults() + "/rdma-rate-hdr' --health-dir " + dir +
                     " --node gpu017 -o /dev/null",
                 kEnv);
  ASSERT_EQ(a.rc, 3) << a.err;
  CliRun b = cli("doctor --fsroot sysfs/dgx-h100 --health-dir " + dir + " -o /dev/null", kEnv);
  ASSERT_EQ(b.rc, 0) << b.err;
  nlohmann::json doc = nlohmann::json::parse(slurp(dir + "/gpu017.json"));
  EXPECT_EQ(doc["host"], "gpu017");
  EXPECT_EQ(doc["status"], "degraded");
  const auto& f = doc["findings"][0];
  EXPECT_EQ(f["device"], "mlx5_2");
  EXPECT_EQ(f["kind"], "port");
  EXPECT_DOUBLE_EQ(f["measured_gbps"].get<double>(), 200.0);
  EXPECT_DOUBLE_EQ(f["expected_gbps"].get<double>(), 400.0);
  EXPECT_TRUE(fs::exists(dir + "/dgx-h100-sim.json")) << "named after the tree's hostname";
  fs::remove_all(dir);
}

// A stand-in for scontrol: records each call's arguments as [a][b]... lines, answers
// `-o show node` from FAKE_SHOW, and exits FAKE_RC on updates.
class DoctorSlurm : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch("slurm-" +
                   std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    script_ = dir_ + "/scontrol";
    std::ofstream(script_) << "#!/bin/sh\n"
                              "for a in \"$@\"; do printf '[%s]' \"$a\"; done >>\"$FAKE_LOG\"\n"
                              "echo >>\"$FAKE_LOG\"\n"
                              "if [ \"$1\" = -o ] && [ \"$2\" = show ]; then\n"
                              "  cat \"$FAKE_SHOW\"; exit 0\n"
                              "fi\n"
                              "exit \"${FAKE_RC:-0}\"\n";
    fs::permissions(script_, fs::perms::owner_all);
    show(
        "NodeName=gpu017 Arch=x86_64 CoresPerSocket=56 State=IDLE ThreadsPerCore=2 "
        "TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=gpu CurrentWatts=0 AveWatts=0");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void show(const std::string& record) { std::ofstream(dir_ + "/show") << record << "\n"; }
  CliRun doctor(const std::string& fault, const std::string& extra, const std::string& env = "") {
    return cli("doctor -o /dev/null --fsroot '" + faults() + "/" + fault + "' --slurm --scontrol " +
                   script_ + " " + extra,
               kEnv + " FAKE_LOG=" + dir_ + "/log FAKE_SHOW=" + dir_ + "/show " + env);
  }
  std::string log() { return slurp(dir_ + "/log"); }
  std::string dir_, script_;
};

TEST_F(DoctorSlurm, CriticalFindingDrainsTheNodeWithTheFindingAsReason) {
  CliRun r = doctor("rdma-port-down", "--node gpu017");
  EXPECT_EQ(r.rc, 3) << r.err;
  EXPECT_EQ(log(),
            "[-o][show][node][gpu017]\n"
            "[update][nodename=gpu017][state=drain][reason=topo-aware: rdma.port mlx5_3 port 1: "
            "DOWN (Polling) (expected ACTIVE (LinkUp))]\n");
  EXPECT_NE(r.err.find("topo-aware: slurm: drained gpu017: topo-aware: rdma.port"),
            std::string::npos)
      << r.err;
}

TEST_F(DoctorSlurm, NodeNameFromSlurmdWhenNotGiven) {
  CliRun r = doctor("netdev-carrier", "", "SLURMD_NODENAME=node3");
  EXPECT_EQ(r.rc, 3) << r.err;
  EXPECT_NE(log().find("[update][nodename=node3][state=drain][reason=topo-aware: rdma.netdev "
                       "enp171s0f1np1: carrier 0 (expected carrier 1)]"),
            std::string::npos)
      << log();
  // --node wins over the environment: an admin running it by hand names the node.
  fs::remove(dir_ + "/log");
  doctor("netdev-carrier", "--node gpu020", "SLURMD_NODENAME=node3");
  EXPECT_NE(log().find("[nodename=gpu020]"), std::string::npos) << log();
}

TEST_F(DoctorSlurm, HealthyOrDegradedNodesAreLeftAlone) {
  CliRun h = doctor("healthy", "--node gpu017");
  EXPECT_EQ(h.rc, 0) << h.err;
  CliRun w = doctor("pcie-gpu-x8", "--node gpu017");
  EXPECT_EQ(w.rc, 3) << w.err;
  EXPECT_EQ(log(), "[-o][show][node][gpu017]\n[-o][show][node][gpu017]\n") << "no update";
  EXPECT_NE(w.err.find("left gpu017 as it is"), std::string::npos) << w.err;
}

TEST_F(DoctorSlurm, AnAdminsDrainIsNotOverwritten) {
  show(
      "NodeName=gpu017 State=IDLE+DRAIN ThreadsPerCore=2 CurrentWatts=0 AveWatts=0 "
      "Reason=bad DIMM B3 [root@2024-05-01T10:00:00]");
  CliRun r = doctor("rdma-port-down", "--node gpu017");
  EXPECT_EQ(r.rc, 3) << r.err;
  EXPECT_EQ(log(), "[-o][show][node][gpu017]\n");
  EXPECT_NE(r.err.find("another reason (bad DIMM B3)"), std::string::npos) << r.err;
}

TEST_F(DoctorSlurm, ResumeOnlyWhenAskedAndOnlyItsOwnDrain) {
  show(
      "NodeName=gpu017 State=IDLE+DRAIN ThreadsPerCore=2 "
      "Reason=topo-aware: rdma.port mlx5_3 port 1: DOWN (Polling) [root@2024-05-01T10:00:00] "
      "Comment=rack 4");
  CliRun keep = doctor("healthy", "--node gpu017");
  EXPECT_EQ(keep.rc, 0) << keep.err;
  EXPECT_EQ(log(), "[-o][show][node][gpu017]\n") << "no resume without --resume";
  fs::remove(dir_ + "/log");
  CliRun back = doctor("healthy", "--node gpu017 --resume");
  EXPECT_EQ(back.rc, 0) << back.err;
  EXPECT_EQ(log(), "[-o][show][node][gpu017]\n[update][nodename=gpu017][state=resume]\n");
  fs::remove(dir_ + "/log");
  show("NodeName=gpu017 State=IDLE+DRAIN Reason=firmware update [root@2024-05-01T10:00:00]");
  doctor("healthy", "--node gpu017 --resume");
  EXPECT_EQ(log(), "[-o][show][node][gpu017]\n") << "an admin's drain stays";
}

TEST_F(DoctorSlurm, AFailedDrainIsAnError) {
  CliRun r = doctor("rdma-port-down", "--node gpu017", "FAKE_RC=1");
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_NE(r.err.find("could not drain gpu017"), std::string::npos) << r.err;
  CliRun missing =
      cli("doctor -o /dev/null --fsroot '" + faults() +
              "/rdma-port-down' --slurm --node gpu017 --scontrol /nonexistent/scontrol",
          kEnv);
  EXPECT_EQ(missing.rc, 1) << missing.err;
  EXPECT_NE(missing.err.find("/nonexistent/scontrol"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace topoaware
