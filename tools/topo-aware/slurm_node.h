// `topo-aware doctor --slurm`: act on a health report the way a Slurm HealthCheckProgram does
// (LBNL NHC's node-mark-offline / node-mark-online, docs/doctor.md).
//
// On a critical finding the node is drained with the finding as the reason, prefixed
// "topo-aware:" so the reason says who drained it; a node already drained or down for another
// reason is left alone (an admin's note is never overwritten). Otherwise the node is left as it
// is; with `resume_own` a node that topo-aware itself drained is resumed once healthy. Slurm is
// driven through the scontrol command (a path, or a name looked up in PATH): no libslurm link,
// and a test can stand a recording script in its place. Each scontrol call has a timeout, since
// slurmd kills a HealthCheckProgram after 60 s.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "topoaware/topology/doctor.h"

namespace topoaware::cli {

// What a program printed and how it ended; rc -1 when it could not start or timed out.
struct ProgramRun {
  int rc = -1;
  std::string out;
  std::string err;         // its stderr, when captured (StderrTo::kCapture), bounded
  bool truncated = false;  // stdout was longer than max_output: `out` holds the start only
  std::string error;       // why it did not run (empty when it ran)
};
enum class StderrTo { kTerminal, kNull, kCapture };
struct ProgramOptions {
  int timeout_s = 20;
  StderrTo stderr_to = StderrTo::kTerminal;
  std::size_t max_output = std::size_t{1} << 20;  // bytes of stdout kept
};
// Runs argv[0] (PATH lookup when it has no '/') without a shell, stdout captured (bounded),
// stderr where `o` says; kills it after `o.timeout_s`.
ProgramRun run_program(const std::vector<std::string>& argv, const ProgramOptions& o);
// The same with stderr passed through (or to /dev/null when `quiet`).
ProgramRun run_program(const std::vector<std::string>& argv, int timeout_s, bool quiet = false);

// The Slurm node name: --node, else SLURMD_NODENAME (set by slurmd for HealthCheckProgram),
// else the short host name of the node model, else this machine's short host name.
std::string slurm_node_name(const std::string& option, const std::string& model_hostname);

struct SlurmAction {
  std::string did;      // one line for the log: "drained node3: ...", "left node3 as it is"
  bool failed = false;  // scontrol could not be run or refused
};

inline constexpr const char* kReasonLeader = "topo-aware:";

// The drain reason for a report: "topo-aware: <check> <device>: <measured> (expected ...)",
// with "(+N more)" for further critical findings; one line, at most 200 characters.
std::string drain_reason(const topology::HealthReport& report);

SlurmAction apply_to_slurm(const topology::HealthReport& report, const std::string& node,
                           const std::string& scontrol, bool resume_own);

}  // namespace topoaware::cli
