// What `map` and `inspect` share: turning command-line inputs (fabric file, hostlist, node type
// or GPUs per node, layout spec or job file) into a mapper::Request, through the launch library's
// builder that the plugin uses too, and a plan into JSON that carries those inputs so `inspect`
// can recompute every figure from the same sources.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "topoaware/launch/config.h"
#include "topoaware/mapper/plan.h"
#include "topoaware/topology/fabric.h"
#include "topoaware/topology/node.h"

namespace topoaware::cli {

struct MapInputs {
  std::string fabric;      // path; empty: the plugin configuration's
  std::string fabric_format;  // --format: "auto"/empty (detect) or a fabric format's name
  std::string config;      // the SPANK plugin's TOML (fabric, guid_map, [[node]] captures)
  std::string guid_map;    // path or empty
  std::string nodes;       // hostlist
  int gpus_per_node = 0;   // 0: from the node type
  std::string node_type;   // capture path, or empty
  int tasks_per_node = 0;  // 0: every GPU of the node
  long long ntasks = 0;    // > 0: Slurm's block distribution of this many tasks over the hosts
  std::string layout;      // SPEC as srun takes it: layout or file:PATH, with launch keys
  std::string launcher;    // auto, per-gpu, per-node; empty: the SPEC's (else auto)
  int nproc = 0;           // per-node workers per host; 0: the SPEC's, else the host's GPUs
  std::string ids;         // plan or slurm; empty: the SPEC's (else plan)
  std::string health_dir;  // the node doctor's reports (<dir>/<host>.json), empty: none
  std::string algo = "topo";
  std::uint64_t seed = 1;
  long long refine_moves = -1;
  // Where the fabric gives no capacities: the oversubscription per tier ("1,2"), and the routing
  // of every tier ("adaptive", "ecmp"); empty: the plugin configuration's, else the fabric's.
  std::string oversubscription;
  std::string routing;
  bool overlap_dims = false;  // model the dims' communication as overlapping
  bool allow_split = false;   // the model may split groups that fit an NVLink domain
  std::string nccl_version;   // the NCCL release the model follows; empty: the SPEC's (newest)
  std::string calibration;    // --calibration FILE; empty: the plugin configuration's, else none
  // Slurm binds GPUs to the tasks (--gpus-per-node, --gpus-per-task): one task per GPU keeps task
  // k of each host on its GPU k and the plan permutes ranks, as the plugin plans such a step.
  bool gpus_bound = false;
};

// Everything a plan needs, loaded. Node models live here; request.hosts index them.
struct Loaded {
  topology::Fabric fabric;
  std::vector<std::unique_ptr<topology::NodeTopology>> node_store;
  std::vector<const topology::NodeTopology*> nodes;  // per request host
  mapper::Request request;  // per-node launcher: tasks_per_host are its workers
  mapper::Launcher launcher = mapper::Launcher::kPerGpu;  // resolved: per-gpu or per-node
  mapper::Ids ids = mapper::Ids::kPlan;
  std::vector<std::string> health;  // one line per host whose NICs a health report degraded
};

// --oversubscription, --routing, --overlap-dims, --allow-split and --nccl-version, worded the same
// for map (and the inputs inspect replays).
void add_capacity_options(CLI::App& sub, MapInputs& in);

// Loads fabric, node models and layout (reading file: specs), checks usage. Throws
// topology::Error / mapper::Error for bad input, UsageError for usage.
Loaded load_inputs(const MapInputs& in);

// load_inputs in two halves, for a command that reads the fabric before it knows the step's
// hosts (place): the plugin configuration with the options over it and its fabric, then the
// step on that fabric.
struct Site {
  launch::Config config;
  topology::Fabric fabric;
};
Site load_site(const MapInputs& in);
Loaded load_step(const MapInputs& in, const launch::Config& site, topology::Fabric fabric);

mapper::Algorithm algorithm_from(const std::string& name);
std::string to_string(mapper::Algorithm a);

nlohmann::json inputs_to_json(const MapInputs& in);
MapInputs inputs_from_json(const nlohmann::json& j, const std::string& context);

nlohmann::json cost_to_json(const mapper::CostReport& c);

}  // namespace topoaware::cli
