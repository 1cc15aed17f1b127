// Where the node doctor's facts come from, and where its reports go.
//
// read_health_facts() reads what the checks of doctor.h need beyond the node model from a sysfs
// tree (this machine's, or a fake root under LiveOptions::fsroot as in tests) and from NVML
// through its seam: PCIe current/max link speed and width of every GPU, NIC and NVSwitch and of
// the bridges above them; ACS control of the switch ports above GPUs and NICs (PCI config space:
// readable by root only, so a non-root run skips that check with a note); per RDMA port its
// physical state, counters and netdev carrier/MTU; NVLink lanes per GPU. Every read is bounded
// and confined to the root (sysfs_read.h); nothing malformed throws, it leaves the fact unknown.
//
// facts_from_capture() gives the facts a capture (hwloc or NCCL XML) can support: NVLink lanes
// from its links, nothing else (no maximum link speed, config space or counters in a capture).
//
// write_health_report() puts a report in a health directory as <dir>/<host>.json, atomically
// (a temporary file in the same directory, fsync, rename), so a reader (the planner, the next
// run) sees the old report or the new one, never half of one. Throws topology::Error naming the
// path on failure.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "topoaware/topology/doctor.h"
#include "topoaware/topology/node.h"

namespace topoaware::topology {

struct NvmlApi;

// Facts from sysfs under `fsroot` ("/" for this machine) and, when `nvml` is not null, NVLink
// lanes from NVML. `node` is the model discovery built from the same root (names the devices).
HealthFacts read_health_facts(const NodeTopology& node, const std::string& fsroot,
                              const NvmlApi* nvml);

// Facts a capture file supports: NVLink lanes per GPU from the model's NVLink links.
HealthFacts facts_from_capture(const NodeTopology& node);

// The ACS Control register of a PCI function from its config space bytes (as sysfs `config`
// gives them): walks the extended capability list from offset 0x100 to capability 0x000D.
// nullopt when the bytes stop before 0x104 (unreadable extended space: not root); a value with
// has_acs false when the list holds no ACS capability.
std::optional<AcsFacts> acs_from_config(const std::string& busid, std::string_view config);

// <dir>/<host>.json; the host name must be a plain file name (no '/', not "." or "..").
std::string health_report_path(const std::string& dir, const std::string& host);
void write_health_report(const std::string& dir, const HealthReport& report);
// The report stored for `host`, nullopt when there is none. A file that does not parse throws
// (kBadInput, naming it).
std::optional<HealthReport> read_health_report(const std::string& dir, const std::string& host);

}  // namespace topoaware::topology
