// What srun does before launch, with the inputs every node will read: checks the SPEC against the
// step, reads the configuration, fabric, node models and health reports, and makes the digest the
// nodes compare with their own (digest.h). srun is the one process that sees the step before any
// node does, so it decides for all of them: the digest when it can plan, or, when it cannot, that
// every node runs the step unmodified (fail-open) or nothing launches (fail-closed).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "topoaware/launch/config.h"

namespace topoaware::spank {

// One line for the user: level 0 info, 1 verbose (srun -v), 3 warning.
using LineSink = std::function<void(int level, const std::string& line)>;

struct SrunStep {
  std::uint32_t job_id = 0;
  std::uint32_t step_id = 0;
  std::vector<std::string> hosts;  // the allocation's, empty when slurmctld gave none
  std::vector<std::string> gres;   // per host, Slurm's GRES detail, or empty
  std::uint32_t nnodes = 0;        // the step's
  std::uint32_t ntasks = 0;
  std::string mpi_type;
  const char* hostfile = nullptr;  // SLURM_HOSTFILE, or nullptr
};

// The SPEC against the step, before the configuration is needed where it can be: throws
// launch::RequestError for what no launch can honour. `config` may be null (unreadable).
void check_request(const launch::Config* config, const std::string& spec, const SrunStep& step);

struct SrunVerdict {
  std::string digest;  // encode()'d, for SLURM_TOPO_AWARE_DIGEST
  std::string health;  // health_text srun planned with, for SLURM_TOPO_AWARE_HEALTH
  std::string inputs;  // inputs_hash() of the digest: the shadow line's digest=
  std::string spread;  // launch::format_spread() of the allocation, "-" when it was not judged
  // srun's plan of the step against Slurm's block order (modeled seconds the step waits for),
  // when it made one; else why not.
  std::optional<double> plan_seconds;
  std::optional<double> block_seconds;
  std::string no_plan;
};

// Reads the inputs and plans as the nodes will; the allocation line and (srun -v) the plan summary
// go to `out`. Throws for what srun cannot read or plan. `shadow`: the step is planned also where
// the allocation is not judged (judge_allocation = false), for the shadow line's saving.
SrunVerdict check_on_srun(const launch::Config& config, const std::vector<std::string>& args,
                          const std::string& spec, const SrunStep& step, const LineSink& out,
                          bool shadow = false);

// The verdict srun hands the nodes when it cannot plan under fail-open.
std::string unmodified_digest();

// GPUs per host in Slurm's GRES detail ("gpu:8(IDX:0-7)", "gpu:h100:4(IDX:0-3),mps:0"); 0 when it
// names none.
int gpus_in_gres(const std::string& detail);

}  // namespace topoaware::spank
