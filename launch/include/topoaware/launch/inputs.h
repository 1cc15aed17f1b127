// The inputs a launch plans from, read the one way srun, every slurmstepd and `topo-aware map`
// read them: the SPEC's layout (reading file:PATH), the configured fabric, each host's node model
// (its capture, else live discovery), the node doctor's reports, and what Slurm says of the step
// (hosts, tasks per host). Errors are thrown (topology::Error, mapper::Error); the callers turn
// them into messages.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "topoaware/launch/config.h"
#include "topoaware/mapper/launch.h"
#include "topoaware/mapper/layout.h"
#include "topoaware/topology/fabric.h"
#include "topoaware/topology/node.h"

namespace topoaware::launch {

// Splits a SPEC into launch keys and layout, and checks the layout's syntax (reading a file:PATH
// job description) without a world size.
mapper::LaunchSpec parse_spec(const std::string& spec);
// The layout of a SPEC for `world` ranks (dp=auto resolved; throws when it does not fit). A
// file:PATH job description must be an absolute path to a regular file: srun and every node read
// it, each from its own working directory.
mapper::Layout layout_for(const mapper::LaunchSpec& launch, int world);

// The configuration's fabric, with what the site declares where the fabric is silent
// (oversubscription, routing) applied.
topology::Fabric load_configured_fabric(const Config& config);
void check_hosts_in_fabric(const topology::Fabric& fabric, const std::vector<std::string>& hosts,
                           const Config& config);

// Node models for the hosts: the capture named in config for each host, else the fabric's node
// type capture, else this machine discovered live (under config.discover_fsroot). Loaded once per
// source; `source` names each host's (the capture's path, or kLiveSource).
inline constexpr const char* kLiveSource = "live";
struct NodeModels {
  std::map<std::string, std::unique_ptr<topology::NodeTopology>> by_source;
  std::vector<const topology::NodeTopology*> per_host;
  std::vector<std::string> source;
};
NodeModels load_nodes(const Config& config, const topology::Fabric& fabric,
                      const std::vector<std::string>& hosts);
// This machine as live discovery sees it for hosts without a capture.
topology::NodeTopology discover_this_node(const Config& config);

// The node doctor's reports of `hosts` (<health_dir>/<host>.json), applied to `fabric`: the
// degraded NICs carry what they measured. A report that does not parse is left out and named to
// `skipped`. Returns the lines naming each degraded host and what it applied, as health_text()
// (the form srun hands the nodes).
struct HealthRead {
  std::vector<std::string> lines;  // "node3: mlx5_2 at 200 of 400 Gb/s", one per degraded NIC
  std::string text;                // topology::health_text of what was applied, or empty
};
HealthRead read_health_dir(const std::string& health_dir, topology::Fabric& fabric,
                           const std::vector<std::string>& hosts,
                           const std::vector<const topology::NodeTopology*>& models,
                           const std::function<void(const std::string&)>& skipped);

// SLURM_STEP_TASKS_PER_NODE: "8(x3),4" -> {8,8,8,4}.
std::vector<int> parse_tasks_per_node(const std::string& text);
// Slurm's block distribution of `ntasks` over `nhosts`: the first hosts take one task more.
std::vector<int> block_tasks(std::uint64_t ntasks, std::size_t nhosts);
std::vector<std::string> split_lines(const char* text);

}  // namespace topoaware::launch
