// The node doctor: checks one node's links and placement for what makes a training job straggle
// (a PCIe link trained below its slot, an HCA port down or at a lower rate, climbing port error
// counters, a GPU whose nearest NIC is across the CPU interconnect, ACS redirect on a PCIe
// switch, NVLink lanes down, a device missing against the node type's capture).
//
// The checks are a pure function, diagnose(), of the node model discovery built and of
// HealthFacts, the few readings discovery does not keep (maximum link speeds, PCI config space,
// port counters, netdev carrier and MTU, NVLink lanes as NVML reports them). The facts come
// from sources (doctor_source.h: a sysfs tree with NVML, or a capture file), so every check is
// tested on fixtures without the hardware. A source that cannot tell a fact leaves it unknown,
// and the check that needs it reports "skipped" with the reason instead of guessing.
//
// Severities, one rule for every capacity (doc: docs/doctor.md): a link at or below a quarter of
// what it should carry, a port down, a device missing is critical (a job there fails or crawls:
// drain the node); anything else below expectation is a warning (the node works, slower; the
// plan can model it from the health report). HealthReport serializes to a JSON document with a
// stable schema ("topo-aware-health/1"), written per host to a health directory and read back
// by later runs (counter deltas) and by the planner.
//
// Errors: health_report_from_json() throws topology::Error (kBadInput) naming the file; nothing
// else here throws.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topoaware/topology/node.h"

namespace topoaware::topology {

enum class Severity : std::uint8_t { kOk, kWarning, kCritical };
std::string_view to_string(Severity s);

// Stable check ids (the JSON and the docs use these strings).
inline constexpr std::string_view kCheckPcieLink = "pcie.link";
inline constexpr std::string_view kCheckPcieAcs = "pcie.acs";
inline constexpr std::string_view kCheckRdmaPort = "rdma.port";
inline constexpr std::string_view kCheckRdmaRate = "rdma.rate";
inline constexpr std::string_view kCheckRdmaCounters = "rdma.counters";
inline constexpr std::string_view kCheckRdmaNetdev = "rdma.netdev";
inline constexpr std::string_view kCheckAffinity = "affinity.nic";
inline constexpr std::string_view kCheckNvlink = "nvlink.lanes";
inline constexpr std::string_view kCheckCompare = "compare.inventory";

// A capacity at or below this fraction of its expected value is critical.
inline constexpr double kCriticalFraction = 0.25;

// One PCIe link as a PCI function reports it (sysfs current_/max_link_speed and _width).
struct PcieLinkFacts {
  std::string busid;
  std::string upstream;  // bus id of the PCI function above (its port), empty below a root
  std::string kind;      // "gpu", "nic", "nvswitch", "bridge"
  bool root_port = false;
  double speed_gts = -1, max_speed_gts = -1;  // GT/s per lane; -1 unknown
  int width = -1, max_width = -1;             // lanes; -1 unknown
};

// ACS of one PCIe switch port above a GPU or NIC, from its config space.
struct AcsFacts {
  std::string busid;
  bool readable = false;      // the extended config space could be read (root only)
  bool has_acs = false;       // an ACS extended capability (0x000D) was found
  std::uint16_t control = 0;  // ACS Control register
};

// One RDMA port, beyond what NetPort keeps: physical state, counters, its netdev's state.
struct RdmaPortFacts {
  std::string device;  // mlx5_0
  int port = -1;
  std::string phys_state;                         // "LinkUp", "Polling", "Disabled"; empty unknown
  std::map<std::string, std::uint64_t> counters;  // counters/<name>; absent ones are not listed
  std::string netdev;                             // ib0, enp171s0f0np0; empty when none
  int carrier = -1;  // sys/class/net/<netdev>/carrier: 1 up, 0 down, -1 unknown
  int mtu = -1;      // sys/class/net/<netdev>/mtu; -1 unknown
};

// NVLink lanes of one GPU: how many the GPU has and how many are up.
struct NvlinkFacts {
  std::string busid;
  int lanes = -1;   // links the GPU reports (NVML: links whose state can be read); -1 unknown
  int active = -1;  // links up
};

// What a source could read beyond the node model. An absent category is reported as skipped,
// with `why_*` saying why.
struct HealthFacts {
  std::optional<std::vector<PcieLinkFacts>> pcie;
  std::string why_no_pcie;
  std::optional<std::vector<AcsFacts>> acs;
  std::string why_no_acs;
  std::optional<std::vector<RdmaPortFacts>> ports;  // sysfs ports/<n> (counters, phys_state)
  std::string why_no_ports;
  std::optional<std::vector<NvlinkFacts>> nvlink;
  std::string why_no_nvlink;
  std::vector<std::string> notes;  // what the source could not read
};

// One thing found wrong (or, with severity kOk, nothing: not listed in reports).
struct Finding {
  std::string check;  // a kCheck* id
  Severity severity = Severity::kOk;
  std::string device;              // GPU0, mlx5_3, 0000:17:01.0
  std::string busid;               // where known
  std::string kind;                // "gpu", "nic", "nvswitch", "bridge", "port", "netdev", "node"
  int port = -1;                   // RDMA port number for port findings
  std::string measured, expected;  // as a person reads them: "32.0 GT/s x8", "400 Gb/s"
  double measured_gbps = -1, expected_gbps = -1;  // capacity in Gb/s where the check has one
  std::vector<std::string> affects;               // GPUs and NICs whose traffic crosses it (names)
  std::string action;                             // one sentence a sysadmin can act on
};

enum class CheckStatus : std::uint8_t { kOk, kWarning, kCritical, kSkipped };
std::string_view to_string(CheckStatus s);

struct CheckResult {
  std::string id;
  CheckStatus status = CheckStatus::kOk;
  int examined = 0;  // devices, links or ports looked at
  std::string note;  // why skipped, or what was not judged
};

// Each GPU's nearest RDMA NIC(s) by NCCL's rules (gpu_locality), as the report lists them.
struct AffinityRow {
  std::string gpu, busid;
  std::vector<std::string> nics;
  std::string path;  // PIX, PXB, PHB, SYS
  double gbps = 0;   // NCCL's GPU->NET bandwidth, GB/s
};

// The counters of one port as recorded in a report, for the next run's deltas.
struct CounterSnapshot {
  std::string device;
  int port = -1;
  std::map<std::string, std::uint64_t> values;
};

struct HealthReport {
  std::string host;
  std::string source;
  std::int64_t time = 0;  // seconds since the epoch when the facts were read
  std::vector<CheckResult> checks;
  std::vector<Finding> findings;  // non-ok only, most severe first
  std::vector<AffinityRow> affinity;
  std::vector<CounterSnapshot> counters;
  std::vector<std::string> notes;

  Severity worst() const;
  // "healthy" (no finding), "degraded" (warnings only), "critical".
  std::string_view status() const;
};

// Per counter, the count (since the counters were cleared, or since the previous report) from
// which it is reported. The defaults are documented in docs/doctor.md.
struct CounterThreshold {
  std::string counter;
  std::uint64_t warning = 0;          // >= this: warning
  bool critical_on_increase = false;  // an increase >= warning between two runs is critical
};
std::vector<CounterThreshold> default_counter_thresholds();

struct DoctorOptions {
  const NodeTopology* compare = nullptr;   // the node type's capture (--compare)
  const HealthReport* previous = nullptr;  // the last report for this host (counter deltas)
  std::int64_t now = 0;                    // stamped into the report
  std::vector<CounterThreshold> thresholds = default_counter_thresholds();
};

// Runs every check over the node model and the facts. Pure: no I/O, deterministic.
HealthReport diagnose(const NodeTopology& node, const HealthFacts& facts,
                      const DoctorOptions& options = {});

// The "topo-aware-health/1" JSON document (indented, stable key order, trailing newline).
std::string health_report_to_json(const HealthReport& report);
// One finding in one line, as a drain reason or a warning shows it:
// "rdma.rate mlx5_6 port 1: 100 Gb/s (1X) (expected 400 Gb/s)".
std::string finding_line(const Finding& finding);
// Parses one; `where` names the file in errors (kBadInput).
HealthReport health_report_from_json(std::string_view text, const std::string& where);

// PCIe helpers the checks use, exposed for tests and the docs' table.
// "32.0 GT/s PCIe", "8 GT/s", "2.5 GT/s" -> GT/s; -1 for "Unknown" or garbage.
double parse_pcie_gts(std::string_view sysfs_speed);
// Usable Gb/s of a link: GT/s x lanes x line-code efficiency (8b/10b to 5 GT/s, 128b/130b above).
double pcie_gbps(double gts, int width);
// ACS Control register bits that send peer-to-peer traffic up to the root complex.
inline constexpr std::uint16_t kAcsRequestRedirect = 1u << 2;
inline constexpr std::uint16_t kAcsCompletionRedirect = 1u << 3;

}  // namespace topoaware::topology
