// The node doctor (doctor.h, doctor_source.h) on the DGX H100 sysfs tree and its fault copies
// (tests/fixtures/sysfs/make-doctor-faults.sh, generated at test time: doctor_fixtures.h): each
// check fires on its fault and stays silent on the healthy tree; NVLink through the fake NVML;
// counter deltas against a previous report; the JSON round trip; the health directory's atomic
// write.
#include "topoaware/topology/doctor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "doctor_fixtures.h"
#include "fake_nvml.h"
#include "test_support.h"
#include "topoaware/topology/doctor_source.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/sources.h"

namespace topoaware::topology {
namespace {

namespace fs = std::filesystem;

const fs::path& faults() {
  static const fs::path dir = test::doctor_faults();
  return dir;
}

NodeTopology discover(const fs::path& root, const NvmlApi* nvml = nullptr) {
  LiveOptions o;
  o.fsroot = root.string();
  o.use_hwloc = false;
  o.nvml = nvml;
  return discover_live(o);
}

struct DoctorRun {
  NodeTopology node;
  HealthReport report;
};

DoctorRun doctor(const std::string& fault, const DoctorOptions& options = {},
           const NvmlApi* nvml = nullptr) {
  DoctorRun r;
  fs::path root = faults() / fault;
  r.node = discover(root, nvml);
  HealthFacts facts = read_health_facts(r.node, root.string(), nvml);
  r.report = diagnose(r.node, facts, options);
  return r;
}

const CheckResult& check(const HealthReport& r, std::string_view id) {
  for (const auto& c : r.checks) {
    if (c.id == id) return c;
  }
  throw std::runtime_error("no check " + std::string(id));
}

std::vector<const Finding*> findings(const HealthReport& r, std::string_view id) {
  std::vector<const Finding*> out;
  for (const auto& f : r.findings) {
    if (f.check == id) out.push_back(&f);
  }
  return out;
}

std::string dump(const HealthReport& r) { return health_report_to_json(r); }

TEST(Doctor, HealthyTreeHasNoFindingAndRunsEverySysfsCheck) {
  DoctorRun r = doctor("healthy");
  EXPECT_TRUE(r.report.findings.empty()) << dump(r.report);
  EXPECT_EQ(r.report.status(), "healthy");
  EXPECT_EQ(r.report.host, "dgx-h100-sim");
  for (std::string_view id : {kCheckPcieLink, kCheckPcieAcs, kCheckRdmaPort, kCheckRdmaRate,
                              kCheckRdmaCounters, kCheckRdmaNetdev, kCheckAffinity}) {
    EXPECT_EQ(check(r.report, id).status, CheckStatus::kOk) << id << "\n" << dump(r.report);
    EXPECT_GT(check(r.report, id).examined, 0) << id;
  }
  // 8 GPUs, 8 HCAs, 2 storage ports, eno1, 4 NVSwitches and the 8 switch uplinks.
  EXPECT_EQ(check(r.report, kCheckPcieLink).examined, 31);
  // Two downstream ports and the upstream port above each GPU/HCA pair.
  EXPECT_EQ(check(r.report, kCheckPcieAcs).examined, 24);
  EXPECT_EQ(check(r.report, kCheckRdmaPort).examined, 10);
  EXPECT_EQ(check(r.report, kCheckNvlink).status, CheckStatus::kSkipped);
  EXPECT_EQ(check(r.report, kCheckCompare).status, CheckStatus::kSkipped);
  ASSERT_EQ(r.report.affinity.size(), 8u);
  EXPECT_EQ(r.report.affinity[0].nics, std::vector<std::string>{"mlx5_0"});
  EXPECT_EQ(r.report.affinity[0].path, "PIX");
  EXPECT_EQ(r.report.counters.size(), 10u);
}

// Each fault fixture: the check it is for fires, with the severity the one rule gives, on the
// device that is wrong; consequences a real machine would show too are allowed alongside.
struct FaultCase {
  std::string fault;
  std::string_view check;
  Severity severity;
  std::string device;
  std::string measured;
};

class DoctorFault : public ::testing::TestWithParam<FaultCase> {};

TEST_P(DoctorFault, FiresOnItsFault) {
  const FaultCase& c = GetParam();
  DoctorOptions o;
  NodeTopology capture;
  if (c.fault.rfind("compare", 0) == 0) {
    capture = load_node_file(test::fixture("nccl-topo/dgx-h100-topo.xml"));
    o.compare = &capture;
  }
  DoctorRun r = doctor(c.fault, o);
  auto f = findings(r.report, c.check);
  ASSERT_FALSE(f.empty()) << c.fault << "\n" << dump(r.report);
  EXPECT_EQ(f[0]->severity, c.severity) << dump(r.report);
  EXPECT_EQ(f[0]->device, c.device);
  EXPECT_EQ(f[0]->measured.rfind(c.measured, 0), 0u) << f[0]->measured;
  EXPECT_FALSE(f[0]->action.empty());
  EXPECT_EQ(check(r.report, c.check).status,
            c.severity == Severity::kCritical ? CheckStatus::kCritical : CheckStatus::kWarning);
  EXPECT_NE(r.report.status(), "healthy");
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, DoctorFault,
    ::testing::Values(
        FaultCase{"pcie-gpu-x8", kCheckPcieLink, Severity::kWarning, "GPU0", "32.0 GT/s x8"},
        FaultCase{"pcie-nic-gen3", kCheckPcieLink, Severity::kCritical, "mlx5_4", "8.0 GT/s x16"},
        FaultCase{"pcie-uplink-gen4", kCheckPcieLink, Severity::kWarning, "0000:3e:00.0",
                  "16.0 GT/s x16"},
        FaultCase{"acs-redirect", kCheckPcieAcs, Severity::kWarning, "0000:4e:01.0",
                  "ReqRedir+ CmpltRedir+"},
        FaultCase{"rdma-port-down", kCheckRdmaPort, Severity::kCritical, "mlx5_3",
                  "DOWN (Polling)"},
        FaultCase{"rdma-rate-hdr", kCheckRdmaRate, Severity::kWarning, "mlx5_2", "200 Gb/s"},
        FaultCase{"rdma-rate-1x", kCheckRdmaRate, Severity::kCritical, "mlx5_6", "100 Gb/s (1X)"},
        FaultCase{"rdma-counters", kCheckRdmaCounters, Severity::kWarning, "mlx5_1",
                  "symbol_error 1523"},
        FaultCase{"netdev-roce-mtu", kCheckRdmaNetdev, Severity::kWarning, "enp171s0f0np0",
                  "mtu 1500"},
        FaultCase{"netdev-carrier", kCheckRdmaNetdev, Severity::kCritical, "enp171s0f1np1",
                  "carrier 0"},
        FaultCase{"affinity-sys", kCheckAffinity, Severity::kWarning, "GPU4", "PHB to mlx5_8"},
        FaultCase{"compare-gpu-missing", kCheckCompare, Severity::kCritical, "GPUs", "7 GPUs"}),
    [](const auto& param_info) {
      std::string n = param_info.param.fault;
      std::replace(n.begin(), n.end(), '-', '_');
      return n;
    });

TEST(Doctor, DowntrainedLinkIsReportedOnceWithWhatCrossesIt) {
  DoctorRun r = doctor("pcie-uplink-gen4");
  auto f = findings(r.report, kCheckPcieLink);
  ASSERT_EQ(f.size(), 1u) << "the root port's view of the same link is not reported again";
  EXPECT_EQ(f[0]->kind, "bridge");
  EXPECT_EQ(f[0]->affects, (std::vector<std::string>{"GPU1", "mlx5_1"}));
  EXPECT_NEAR(f[0]->measured_gbps, 16 * 16 * 128.0 / 130, 1e-9);
  EXPECT_NEAR(f[0]->expected_gbps, 32 * 16 * 128.0 / 130, 1e-9);
  DoctorRun x8 = doctor("pcie-gpu-x8");
  ASSERT_EQ(findings(x8.report, kCheckPcieLink).size(), 1u) << dump(x8.report);
}

TEST(Doctor, AcsOnUpstreamPortsAndTheOtherPortsStaysSilent) {
  DoctorRun r = doctor("acs-redirect");
  EXPECT_EQ(findings(r.report, kCheckPcieAcs).size(), 1u);
  EXPECT_EQ(findings(r.report, kCheckPcieAcs)[0]->affects, std::vector<std::string>{"GPU2"});
}

// A card whose own maximum is below the slot's is right at its own best; an idle GPU at
// 2.5 GT/s with full width is power saving, noted but not judged.
class DoctorTree : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ =
        fs::path(::testing::TempDir()) /
        ("doctor-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root_);
    fs::copy(faults() / "healthy", root_,
             fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const std::string& rel, const std::string& text) {
    auto dir = fs::canonical((root_ / rel).parent_path());
    std::ofstream(dir / fs::path(rel).filename(), std::ios::binary | std::ios::trunc) << text;
  }
  HealthReport run(const NvmlApi* nvml = nullptr, const DoctorOptions& o = {}) {
    node_ = discover(root_, nvml);
    return diagnose(node_, read_health_facts(node_, root_.string(), nvml), o);
  }
  fs::path root_;
  NodeTopology node_;
};

TEST_F(DoctorTree, ACardSlowerThanItsSlotIsNotDegraded) {
  const std::string nic = "sys/bus/pci/devices/0000:18:00.0/";
  write(nic + "max_link_speed", "16.0 GT/s PCIe\n");
  write(nic + "current_link_speed", "16.0 GT/s PCIe\n");
  write("sys/bus/pci/devices/0000:17:00.0/current_link_speed", "16.0 GT/s PCIe\n");
  HealthReport r = run();
  EXPECT_TRUE(findings(r, kCheckPcieLink).empty()) << dump(r);
}

TEST_F(DoctorTree, IdleGpuAtGen1IsNotedNotJudged) {
  write("sys/bus/pci/devices/0000:43:00.0/current_link_speed", "2.5 GT/s PCIe\n");
  write("sys/bus/pci/devices/0000:3f:01.0/current_link_speed", "2.5 GT/s PCIe\n");
  HealthReport r = run();
  EXPECT_TRUE(findings(r, kCheckPcieLink).empty()) << dump(r);
  EXPECT_NE(check(r, kCheckPcieLink).note.find("1 GPU at 2.5 GT/s"), std::string::npos)
      << check(r, kCheckPcieLink).note;
  // The same link at x4 is judged: width does not drop when idle.
  write("sys/bus/pci/devices/0000:43:00.0/current_link_width", "4\n");
  HealthReport x4 = run();
  ASSERT_EQ(findings(x4, kCheckPcieLink).size(), 1u) << dump(x4);
  EXPECT_EQ(findings(x4, kCheckPcieLink)[0]->severity, Severity::kCritical);
}

TEST_F(DoctorTree, UnreadableConfigSpaceSkipsAcsWithTheReason) {
  // What a non-root reader gets: the kernel shows only the first 64 bytes.
  for (const char* b : {"16:00.0", "17:00.0", "17:01.0"}) {
    std::string rel = std::string("sys/bus/pci/devices/0000:") + b + "/config";
    auto path = fs::canonical(root_ / rel);
    fs::resize_file(path, 64);
  }
  HealthReport partial = run();
  EXPECT_EQ(check(partial, kCheckPcieAcs).status, CheckStatus::kOk);
  EXPECT_NE(check(partial, kCheckPcieAcs).note.find("3 switch ports with unreadable"),
            std::string::npos)
      << check(partial, kCheckPcieAcs).note;
  for (const auto& e : fs::recursive_directory_iterator(root_ / "sys/devices")) {
    if (e.path().filename() == "config") fs::resize_file(e.path(), 64);
  }
  HealthReport none = run();
  EXPECT_EQ(check(none, kCheckPcieAcs).status, CheckStatus::kSkipped);
  EXPECT_NE(check(none, kCheckPcieAcs).note.find("root"), std::string::npos);
}

TEST_F(DoctorTree, DisabledPortIsNotDownButAnInitPortIs) {
  write("sys/class/infiniband/mlx5_9/ports/1/state", "1: DOWN\n");
  write("sys/class/infiniband/mlx5_9/ports/1/phys_state", "3: Disabled\n");
  HealthReport r = run();
  EXPECT_TRUE(findings(r, kCheckRdmaPort).empty()) << dump(r);
  EXPECT_NE(check(r, kCheckRdmaPort).note.find("1 port administratively disabled"),
            std::string::npos);
  write("sys/class/infiniband/mlx5_5/ports/1/state", "2: INIT\n");
  HealthReport init = run();
  ASSERT_EQ(findings(init, kCheckRdmaPort).size(), 1u);
  EXPECT_EQ(findings(init, kCheckRdmaPort)[0]->device, "mlx5_5");
  EXPECT_NE(findings(init, kCheckRdmaPort)[0]->action.find("subnet manager"), std::string::npos);
}

TEST_F(DoctorTree, IpoibMtuOddOneOut) {
  write("sys/class/net/ibp64s0/mtu", "65520\n");
  HealthReport r = run();
  auto f = findings(r, kCheckRdmaNetdev);
  ASSERT_EQ(f.size(), 1u) << dump(r);
  EXPECT_EQ(f[0]->device, "ibp64s0");
  EXPECT_EQ(f[0]->expected, "mtu 4092 (the node's other IPoIB ports)");
}

// Counters: counts since boot are a warning; an increase between two runs of the counters
// that mean a failed link is critical; counters that went backwards were reset.
TEST_F(DoctorTree, CounterDeltasAgainstThePreviousReport) {
  HealthReport first = run();
  first.time = 1000;
  write("sys/class/infiniband/mlx5_1/ports/1/counters/link_downed", "1\n");
  write("sys/class/infiniband/mlx5_1/ports/1/counters/symbol_error", "5\n");
  DoctorOptions o;
  o.previous = &first;
  o.now = 1300;
  HealthReport second = run(nullptr, o);
  auto f = findings(second, kCheckRdmaCounters);
  ASSERT_EQ(f.size(), 1u) << dump(second);
  EXPECT_EQ(f[0]->severity, Severity::kCritical);
  EXPECT_EQ(f[0]->measured, "link_downed 1 since the last check 300 s ago");

  // The same counts without a previous report: a warning only (no time base).
  HealthReport alone = run();
  ASSERT_EQ(findings(alone, kCheckRdmaCounters).size(), 1u);
  EXPECT_EQ(findings(alone, kCheckRdmaCounters)[0]->severity, Severity::kWarning);

  // Counters cleared since (lower than before): judged as absolute counts again.
  second.time = 1300;
  for (auto& s : second.counters) s.values["symbol_error"] = 100;
  o.previous = &second;
  o.now = 1600;
  HealthReport third = run(nullptr, o);
  auto g = findings(third, kCheckRdmaCounters);
  ASSERT_EQ(g.size(), 1u) << dump(third);
  EXPECT_EQ(g[0]->severity, Severity::kWarning);
  EXPECT_NE(g[0]->measured.find("since the counters were cleared"), std::string::npos);
}

TEST_F(DoctorTree, NvlinkLanesDownThroughTheFakeNvml) {
  test::FakeNvml nvml = test::FakeNvml::dgx_h100();
  NvmlApi api = nvml.api();
  HealthReport ok = run(&api);
  EXPECT_EQ(check(ok, kCheckNvlink).status, CheckStatus::kOk) << dump(ok);
  EXPECT_EQ(check(ok, kCheckNvlink).examined, 8);
  EXPECT_EQ(nvml.init_calls, nvml.shutdown_calls);

  for (int l = 0; l < 4; ++l) nvml.gpus[5].links[static_cast<std::size_t>(l)].active = false;
  HealthReport down = run(&api);
  auto f = findings(down, kCheckNvlink);
  ASSERT_EQ(f.size(), 1u) << dump(down);
  EXPECT_EQ(f[0]->device, "GPU5");
  EXPECT_EQ(f[0]->severity, Severity::kWarning);
  EXPECT_EQ(f[0]->measured, "14 of 18 lanes up");

  // Against the node type's capture a GPU with 4 of 18 lanes is critical.
  for (auto& l : nvml.gpus[5].links) l.active = false;
  for (int l = 0; l < 4; ++l) nvml.gpus[5].links[static_cast<std::size_t>(l)].active = true;
  NodeTopology capture = load_node_file(test::fixture("nccl-topo/dgx-h100-topo.xml"));
  DoctorOptions o;
  o.compare = &capture;
  HealthReport bad = run(&api, o);
  ASSERT_EQ(findings(bad, kCheckNvlink).size(), 1u) << dump(bad);
  EXPECT_EQ(findings(bad, kCheckNvlink)[0]->severity, Severity::kCritical);
  EXPECT_NE(findings(bad, kCheckNvlink)[0]->expected.find("capture"), std::string::npos);
}

TEST(Doctor, CaptureRunsWhatItCanAndSaysWhatItSkipped) {
  NodeTopology n = load_node_file(test::fixture("nccl-topo/dgx-h100-topo.xml"));
  HealthReport r = diagnose(n, facts_from_capture(n));
  EXPECT_TRUE(r.findings.empty()) << dump(r);
  for (std::string_view id :
       {kCheckPcieLink, kCheckPcieAcs, kCheckRdmaCounters, kCheckRdmaNetdev}) {
    EXPECT_EQ(check(r, id).status, CheckStatus::kSkipped) << id;
    EXPECT_NE(check(r, id).note.find("capture"), std::string::npos) << check(r, id).note;
  }
  EXPECT_EQ(check(r, kCheckNvlink).status, CheckStatus::kOk);
  EXPECT_EQ(check(r, kCheckAffinity).status, CheckStatus::kOk);

  NodeTopology bad = load_node_file((faults() / "capture-nvlink-down.xml").string());
  HealthReport b = diagnose(bad, facts_from_capture(bad));
  ASSERT_EQ(findings(b, kCheckNvlink).size(), 1u) << dump(b);
  EXPECT_EQ(findings(b, kCheckNvlink)[0]->measured, "12 of 18 lanes up");
}

TEST(Doctor, CompareNamesAMissingNicByName) {
  NodeTopology capture = load_node_file(test::fixture("nccl-topo/dgx-h100-topo.xml"));
  DoctorOptions o;
  o.compare = &capture;
  DoctorRun healthy = doctor("healthy", o);
  EXPECT_TRUE(healthy.report.findings.empty()) << dump(healthy.report);
  EXPECT_EQ(check(healthy.report, kCheckCompare).examined, 16);
  DoctorRun r = doctor("affinity-sys", o);
  auto f = findings(r.report, kCheckCompare);
  ASSERT_EQ(f.size(), 4u) << dump(r.report);
  EXPECT_EQ(f[0]->device, "mlx5_4");
  EXPECT_TRUE(f[0]->busid.empty()) << "the capture's bus id is another board's";
}

TEST(Doctor, AcsCapabilityWalk) {
  std::string cfg(4096, '\0');
  auto put32 = [&](std::size_t at, std::uint32_t v) {
    for (int i = 0; i < 4; ++i)
      cfg[at + static_cast<std::size_t>(i)] = static_cast<char>(v >> (8 * i));
  };
  put32(0x100, 0x0001u | 2u << 16 | 0x148u << 20);  // AER -> 0x148
  put32(0x148, 0x000Du | 1u << 16);                 // ACS, last
  put32(0x14c, 0x001fu | 0x000cu << 16);            // control: both redirects
  auto a = acs_from_config("0000:01:00.0", cfg);
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->has_acs);
  EXPECT_EQ(a->control, kAcsRequestRedirect | kAcsCompletionRedirect);
  EXPECT_FALSE(acs_from_config("x", cfg.substr(0, 64))) << "non-root view";
  // A list pointing back at itself ends; no ACS found.
  put32(0x148, 0x0002u | 1u << 16 | 0x100u << 20);
  auto loop = acs_from_config("x", cfg);
  ASSERT_TRUE(loop);
  EXPECT_FALSE(loop->has_acs);
  EXPECT_TRUE(loop->readable);
}

TEST(Doctor, SeverityRuleAndPcieArithmetic) {
  EXPECT_DOUBLE_EQ(parse_pcie_gts("32.0 GT/s PCIe"), 32.0);
  EXPECT_DOUBLE_EQ(parse_pcie_gts("8 GT/s"), 8.0);
  EXPECT_LT(parse_pcie_gts("Unknown"), 0);
  EXPECT_DOUBLE_EQ(pcie_gbps(2.5, 1), 2.0);  // 8b/10b
  EXPECT_NEAR(pcie_gbps(32, 16), 504.1, 0.1);
}

TEST(Doctor, JsonRoundTripsAndRejectsOtherDocuments) {
  DoctorRun r = doctor("rdma-port-down");
  r.report.time = 1700000000;
  std::string text = health_report_to_json(r.report);
  HealthReport back = health_report_from_json(text, "mem");
  EXPECT_EQ(health_report_to_json(back), text);
  EXPECT_EQ(back.findings.front().severity, Severity::kCritical);
  EXPECT_THROW(health_report_from_json("{\"schema\":\"x\"}", "f.json"), Error);
  EXPECT_THROW(health_report_from_json("not json", "f.json"), Error);
  try {
    health_report_from_json(R"({"schema":"topo-aware-health/1","findings":3})", "f.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.context(), "f.json");
    EXPECT_NE(std::string(e.what()).find("findings"), std::string::npos);
  }
}

TEST(Doctor, HealthDirWriteIsAtomicAndNamedAfterTheHost) {
  fs::path dir = fs::path(::testing::TempDir()) / "doctor-health";
  fs::remove_all(dir);
  DoctorRun r = doctor("rdma-rate-hdr");
  r.report.host = "node3";
  write_health_report(dir.string(), r.report);
  write_health_report(dir.string(), r.report);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"node3.json"}) << "no temporary file left behind";
  EXPECT_EQ(fs::status(dir / "node3.json").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                fs::perms::others_read);
  auto back = read_health_report(dir.string(), "node3");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->findings.size(), r.report.findings.size());
  EXPECT_FALSE(read_health_report(dir.string(), "node4"));
  HealthReport bad = r.report;
  bad.host = "../etc";
  EXPECT_THROW(write_health_report(dir.string(), bad), Error);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace topoaware::topology
