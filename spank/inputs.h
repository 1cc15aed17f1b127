// The inputs a plan is made from, as the plugin gathers them: the SPEC (launch keys and layout,
// reading file:PATH), the configured fabric and node models, and what Slurm says of the step
// (hosts, tasks per host). srun and every slurmstepd call the same functions, so they read the same
// inputs the same way. Errors are thrown (topology::Error, mapper::Error, RequestError); the facade
// turns them into messages.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "config.h"
#include "topoaware/mapper/launch.h"
#include "topoaware/mapper/layout.h"
#include "topoaware/topology/fabric.h"
#include "topoaware/topology/node.h"

namespace topoaware::spank {

// The user's request contradicts itself or the step (a SPEC that does not fit the world, ids=slurm
// beside an MPI plugin, ...): refused under either policy, since running the job unmodified would
// not be what was asked either.
struct RequestError : mapper::Error {
  using mapper::Error::Error;
};

// This node would plan from other inputs than srun did, or cannot plan a step srun could: a
// step with mixed rank numberings cannot run, so it fails under either policy.
struct DisagreeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Splits a SPEC into launch keys and layout, and checks the layout's syntax (reading a file:PATH
// job description) without a world size.
mapper::LaunchSpec parse_spec(const std::string& spec);
// The layout of a SPEC for `world` ranks (dp=auto resolved; throws when it does not fit).
mapper::Layout layout_for(const mapper::LaunchSpec& launch, int world);

// ids=slurm renumbers SLURM_PROCID, which MPI does not follow: refused (RequestError) when the step
// runs an MPI plugin (SLURM_MPI_TYPE other than none).
void check_ids(mapper::Ids ids, const std::string& mpi_type);

topology::Fabric load_configured_fabric(const Config& config);
void check_hosts_in_fabric(const topology::Fabric& fabric, const std::vector<std::string>& hosts,
                           const Config& config);

// Node models for the hosts: the capture named in config for each host, else the fabric's node type
// capture, else this machine discovered live. Loaded once per file.
struct NodeModels {
  std::map<std::string, std::unique_ptr<topology::NodeTopology>> by_source;
  std::vector<const topology::NodeTopology*> per_host;
};
NodeModels load_nodes(const Config& config, const topology::Fabric& fabric,
                      const std::vector<std::string>& hosts);

// SLURM_STEP_TASKS_PER_NODE: "8(x3),4" -> {8,8,8,4}.
std::vector<int> parse_tasks_per_node(const std::string& text);
// Slurm's block distribution of `ntasks` over `nhosts`: the first hosts take one task more.
std::vector<int> block_tasks(std::uint32_t ntasks, std::size_t nhosts);
std::vector<std::string> split_lines(const char* text);

}  // namespace topoaware::spank
