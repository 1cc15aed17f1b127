// The site configuration a launch plans from: what an admin writes in the TOML file named by the
// plugstack argument `config=PATH` (documented, key by key, in etc/topo-aware.toml) and the
// `key=value` overrides that may follow it on the plugstack line. The plugin reads it at every
// launch and `topo-aware map --config` reads it offline, both through this library, so the two
// cannot read one file two ways.
//
// Parsing is strict, like the rest of Slurm's plugstack: an unknown key, a wrong type or a bad
// value is an error naming the file:line or the plugstack argument, so a typo never silently
// turns a feature off. Errors are thrown as topology::Error; the facade catches them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "topoaware/mapper/launch.h"
#include "topoaware/topology/fabric.h"
#include "topoaware/topology/input_format.h"

namespace topoaware::launch {

enum class Policy { kFailOpen, kFailClosed };
enum class GpuBinding { kLocalRank, kOneGpu };
// apply: a step that asks for topo-aware runs with its plan. shadow: srun plans every such step
// and reports it (one line, shadow_log), and the step runs as Slurm launched it (docs/spank.md,
// "Shadow mode").
enum class Mode { kApply, kShadow };

// Which node capture a host uses: the first entry whose glob (fnmatch) matches the host.
struct NodeCapture {
  std::string hosts;    // glob, e.g. "node*" or "gpu-[0-9]*"
  std::string capture;  // hwloc XML or NCCL topology XML of that node type
};

struct Config {
  std::string path;    // the TOML file, empty when none was given
  std::string fabric;  // load_fabric() input; empty: hosts are judged alone
  std::string guid_map;
  // The formats of the fabric file and of every node capture; kAuto: detected from content
  // (input_format.h). Set when a file's head does not say what it is.
  topology::InputFormat fabric_format = topology::InputFormat::kAuto;
  topology::InputFormat capture_format = topology::InputFormat::kAuto;
  std::string job_dir = "/tmp/topo-aware";
  Policy policy = Policy::kFailOpen;
  Mode mode = Mode::kApply;
  // Shadow mode: the file srun appends each step's line to (absolute; created by the admin,
  // writable by the jobs' users, since srun runs as them); empty: the line goes to srun -v only.
  std::string shadow_log;
  GpuBinding gpu_binding = GpuBinding::kLocalRank;
  bool overwrite_user_env = false;
  bool bind_cpus = true;
  bool judge_allocation = true;
  std::string master_port;  // empty: derived from the job id
  // Defaults for a SPEC that does not say (launcher=, ids=): the launch style, and whether
  // SLURM_PROCID/LOCALID/NODEID carry the plan's numbering too.
  mapper::Launcher launcher = mapper::Launcher::kAuto;
  mapper::Ids ids = mapper::Ids::kPlan;
  // The node doctor's reports (<dir>/<host>.json, docs/doctor.md): srun reads those of the
  // allocated hosts, names the degraded ones and plans with what their NICs measured.
  std::string health_dir;
  // doctor = "warn": each node also runs its own checks at step start (sysfs under
  // doctor_fsroot) and warns about what it finds.
  bool doctor_warn = false;
  std::string doctor_fsroot = "/";
  // Where live discovery reads sysfs for hosts without a capture: "/" on a real node (hwloc, NVML,
  // verbs), a sysfs tree otherwise (containers, tests).
  std::string discover_fsroot = "/";
  std::vector<NodeCapture> nodes;  // per-host node captures, first match wins
  // Where the fabric gives no link speeds (topology.conf without LinkSpeed): the oversubscription
  // of tiers 1, 2, ... (down:up, each >= 1); empty: non-blocking. Apply to the loaded fabric with
  // topology::declare_oversubscription() before planning.
  std::vector<double> oversubscription;
  // How every tier spreads flows over parallel uplinks; unset: the fabric's (TOML `routing`), else
  // adaptive. Apply as Fabric::routing (clearing routing_by_tier) before planning.
  std::optional<topology::Routing> routing;
  // The site's calibration file (`topo-aware calibrate`, docs/calibration.md): the cost model
  // corrected by the site's own nccl-tests runs; empty: the model as it is.
  std::string calibration;
};

// Parses plugstack arguments: `config=PATH` is read first wherever it appears, then every other
// `key=value` overrides the file. Throws topology::Error naming the argument or file:line.
Config parse_plugstack(const std::vector<std::string>& args);

// Applies one setting (from TOML or a plugstack override); `where` names its origin.
void apply_setting(Config& config, const std::string& key, const std::string& value,
                   const std::string& where);

// The node capture for `host`, or empty when the host has no entry.
std::string capture_for(const Config& config, const std::string& host);

// The capture a launch reads for `host`: its [[node]] entry, else its fabric node type's capture
// (resolved against the fabric file's folder); empty when neither gives one. srun, slurmstepd and
// `topo-aware map` all find a host's capture here, so they plan from the same files.
std::string capture_for(const Config& config, const topology::Fabric& fabric,
                        const std::string& host);

const char* to_string(Policy policy);
const char* to_string(GpuBinding binding);
const char* to_string(Mode mode);

}  // namespace topoaware::launch
