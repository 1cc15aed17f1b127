// A node's part of a step, once per node per step in slurmstepd's user_init (as the job's user):
// take srun's verdict, read the inputs as srun did, check that they are srun's (digest.h), plan the
// step, check that this node can apply the plan, and write the node's NCCL topology XML. A node
// never plans alone: without srun's digest, or with its verdict that the step runs unmodified,
// it leaves the step as Slurm launched it.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "facade.h"
#include "step.h"
#include "topoaware/launch/config.h"

namespace topoaware::spank {

// The step as this node runs it.
struct PreparedStep {
  bool ready = false;
  StepPlan plan;
  std::set<std::string> user_env;  // names the user set: kept
  std::string master_host;         // the plan's rank 0 host
  std::string dir_path;            // the per-job directory
  std::string file_name;           // the node's NCCL XML inside it
  std::string hosts_name;          // a per-node launcher's hostfile inside it, or empty
};

// Returns false when srun decided that the step runs unmodified (it told the user). Throws
// DisagreeError (step.h), launch::RequestError, NodeLocalError (job_dir.h: `out` is ready, the XML
// is missing) and, for what fails alike on every node, anything else.
bool prepare_on_node(const launch::Config& config, const std::vector<std::string>& args,
                     const std::string& spec, const ta_step& step, PreparedStep* out);

// doctor = "warn": this node's own checks under doctor_fsroot; one line naming `host` and the
// worst finding when it is degraded, else empty.
std::string doctor_line(const launch::Config& config, const std::string& host);

}  // namespace topoaware::spank
