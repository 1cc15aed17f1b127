#include "plan_io.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <system_error>
#include <utility>

#include "cli.h"
#include "topoaware/launch/config.h"
#include "topoaware/launch/inputs.h"
#include "topoaware/launch/request.h"
#include "topoaware/mapper/layout.h"
#include "topoaware/mapper/nccl_model.h"
#include "topoaware/mapper/synthetic.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/fabric_io.h"
#include "topoaware/topology/hostlist.h"
#include "topoaware/topology/sources.h"

namespace topoaware::cli {

mapper::Algorithm algorithm_from(const std::string& name) {
  if (name == "topo") return mapper::Algorithm::kTopo;
  if (name == "block") return mapper::Algorithm::kBlock;
  if (name == "cyclic") return mapper::Algorithm::kCyclic;
  if (name == "random") return mapper::Algorithm::kRandom;
  throw UsageError("--algo " + name + ": expected topo, block, cyclic or random");
}

std::string to_string(mapper::Algorithm a) {
  switch (a) {
    case mapper::Algorithm::kTopo:
      return "topo";
    case mapper::Algorithm::kBlock:
      return "block";
    case mapper::Algorithm::kCyclic:
      return "cyclic";
    case mapper::Algorithm::kRandom:
      return "random";
  }
  return "topo";
}

void add_capacity_options(CLI::App& sub, MapInputs& in) {
  sub.add_option("--oversubscription", in.oversubscription,
                 "Where the fabric gives no link speeds (topology.conf without LinkSpeed): each "
                 "tier's down:up ratio, tier 1 first (1,2: leaves non-blocking, the tier above "
                 "2:1); default: the plugin config's, else non-blocking");
  sub.add_option("--routing", in.routing,
                 "How every tier spreads flows over parallel uplinks: adaptive or ecmp (default: "
                 "the plugin config's, else the fabric's, else adaptive)");
  sub.add_flag("--overlap-dims", in.overlap_dims,
               "Model the dims' communication as overlapping (the busiest resource under all of "
               "them) instead of one after another (the default, an upper estimate)");
  sub.add_flag("--allow-split", in.allow_split,
               "Let the cost model split tp, cp or ep groups that fit an NVLink domain (a host, or "
               "an NVL72-style domain) over several; by default they stay inside one, as "
               "Megatron assumes (the SPEC's split=allow)");
  sub.add_option("--nccl-version", in.nccl_version,
                 "The NCCL release whose algorithm rules the model follows, 2.18 to 2.30 "
                 "(default: the SPEC's nccl=, else the newest)");
  sub.add_option("--calibration", in.calibration,
                 "A calibration file (`topo-aware calibrate`): the model corrected by this site's "
                 "nccl-tests runs (default: the plugin config's calibration, else none)");
}

namespace {
// What a step's options must say before anything is loaded.
void check_step_usage(const MapInputs& in) {
  if (in.nodes.empty()) throw UsageError("--nodes HOSTLIST is required");
  if (in.gpus_per_node > 0 && !in.node_type.empty()) {
    throw UsageError("give --gpus-per-node or --node-type, not both");
  }
  if (in.tasks_per_node > 0 && in.ntasks > 0) {
    throw UsageError("give --tasks-per-node or --ntasks, not both");
  }
}
}  // namespace

Site load_site(const MapInputs& in) {
  // The configuration a launch would read (the plugin's own, with --config), this command's
  // options over it: the same fabric, captures and defaults, read by the same library.
  Site out;
  launch::Config& site = out.config;
  if (!in.config.empty()) site = launch::parse_plugstack({"config=" + in.config});
  if (!in.fabric.empty()) {
    site.fabric = in.fabric;
    site.fabric_format =
        topology::parse_input_format(in.fabric_format, topology::InputKind::kFabric, "--format");
  }
  if (!in.guid_map.empty()) site.guid_map = in.guid_map;
  if (site.fabric.empty()) {
    throw UsageError(!in.config.empty()
                         ? "--config " + in.config + " names no fabric; give --fabric FILE"
                         : "--fabric FILE (or --config PLUGIN.toml) is required");
  }
  if (!in.oversubscription.empty()) {
    site.oversubscription =
        topology::parse_oversubscription(in.oversubscription, "--oversubscription");
  }
  if (!in.routing.empty()) site.routing = topology::parse_routing(in.routing, "--routing");
  if (!in.calibration.empty()) site.calibration = in.calibration;
  out.fabric = launch::load_configured_fabric(site);
  return out;
}

Loaded load_inputs(const MapInputs& in) {
  check_step_usage(in);
  Site s = load_site(in);
  return load_step(in, s.config, std::move(s.fabric));
}

Loaded load_step(const MapInputs& in, const launch::Config& site, topology::Fabric fabric) {
  check_step_usage(in);
  Loaded out;
  out.fabric = std::move(fabric);
  std::vector<std::string> hosts = topology::expand_hostlist(in.nodes, "--nodes");
  if (hosts.empty()) throw UsageError("--nodes names no host");
  // Node models: one capture for all hosts, a plain synthetic node, or, as a launch finds them,
  // each host's [[node]] capture, else its fabric node type's.
  int gpus = in.gpus_per_node;
  if (!in.node_type.empty()) {
    out.node_store.push_back(
        std::make_unique<topology::NodeTopology>(topology::load_node_file(in.node_type)));
    gpus = static_cast<int>(out.node_store.back()->gpus().size());
    if (gpus == 0) {
      throw topology::Error(topology::ErrorCode::kBadInput, "--node-type " + in.node_type,
                            "the capture has no GPU");
    }
    out.nodes.assign(hosts.size(), out.node_store.back().get());
  } else if (in.gpus_per_node > 0) {
    if (in.gpus_per_node > 1024) throw UsageError("--gpus-per-node: at most 1024");
    // A plain node: NVSwitch, one NIC per GPU (or per fabric port) at the fabric's port speed.
    std::int64_t first = out.fabric.find_host(hosts[0]);
    int nics = in.gpus_per_node;
    double port = 50;
    if (first >= 0) {
      const auto& hi = out.fabric.hosts[static_cast<std::size_t>(first)];
      if (!hi.port_gbps.empty()) {
        nics = static_cast<int>(hi.port_gbps.size());
        port = hi.port_gbps[0];
      }
    }
    auto node = std::make_unique<topology::NodeTopology>(
        mapper::make_node(in.gpus_per_node, nics, 450, port));
    // Its NICs are the hosts' fabric ports: "port-K" here, and in the plan each host's own name
    // for the port where the fabric has one (plan()); no netdev is invented.
    std::size_t k = 0;
    for (topology::VertexId v : node->nics()) {
      auto& nic = node->graph.vertex(v);
      nic.name = "port-" + std::to_string(k++);
      for (auto& p : nic.nic.ports) {
        p.name = nic.name;
        p.netdev.clear();
      }
    }
    out.node_store.push_back(std::move(node));
    out.nodes.assign(hosts.size(), out.node_store.back().get());
  } else {
    for (const auto& h : hosts) {
      // Offline there is no live machine to stand in for a host, as a node would for itself.
      if (launch::capture_for(site, out.fabric, h).empty()) {
        throw UsageError(
            "host " + h + " has no node type with a capture in " + site.fabric +
            (!in.config.empty() ? " nor a [[node]] capture in " + in.config : std::string()) +
            "; give --gpus-per-node N or --node-type CAPTURE");
      }
    }
    launch::NodeModels models = launch::load_nodes(site, out.fabric, hosts);
    out.nodes = models.per_host;
    for (auto& [source, node] : models.by_source) out.node_store.push_back(std::move(node));
    gpus = static_cast<int>(out.nodes[0]->gpus().size());
  }
  // The node doctor's reports: degraded NICs carry what they measured (health.h). Offline, a
  // report that does not parse is an error, not a line left out.
  out.health = launch::read_health_dir(in.health_dir, out.fabric, hosts, out.nodes,
                                       [&](const std::string& e) {
                                         throw topology::Error(topology::ErrorCode::kBadInput,
                                                               "--health-dir", e);
                                       })
                   .lines;

  // The SPEC as srun takes it, with the options' launch keys over it. A relative job description
  // is this command's: the launch reads it by its absolute path.
  mapper::LaunchSpec spec = mapper::parse_launch_spec(in.layout);
  if (spec.layout.rfind("file:", 0) == 0) {
    const std::string path = spec.layout.substr(5);
    std::error_code ec;
    if (!path.empty() && path.front() != '/') {
      const auto abs = std::filesystem::absolute(path, ec);
      if (!ec) spec.layout = "file:" + abs.lexically_normal().string();
    }
  }
  if (!in.launcher.empty()) spec.launcher = mapper::parse_launcher(in.launcher);
  if (in.nproc > 0) spec.nproc = in.nproc;
  if (!in.ids.empty()) {
    spec.ids = mapper::parse_ids(in.ids);
    spec.ids_given = true;
  }
  if (spec.nproc > 0 && spec.launcher == mapper::Launcher::kAuto) {
    spec.launcher = mapper::Launcher::kPerNode;
  }
  const bool per_node = spec.launcher == mapper::Launcher::kPerNode;
  if (per_node && (in.ntasks > 0 || in.tasks_per_node > 1)) {
    throw UsageError(
        "a per-node launcher runs one task per host: leave out --ntasks and "
        "--tasks-per-node (--nproc sets its workers)");
  }
  launch::StepShape shape;
  shape.hosts = hosts;
  if (per_node) {
    shape.tasks.assign(hosts.size(), 1);
  } else if (in.ntasks > 0) {
    shape.tasks = launch::block_tasks(static_cast<std::uint64_t>(in.ntasks), hosts.size());
  } else {
    shape.tasks.assign(hosts.size(), in.tasks_per_node > 0 ? in.tasks_per_node : gpus);
  }
  shape.gpus_per_host = launch::workers_per_host(spec, out.nodes, {});
  shape.gpus_bound = in.gpus_bound;
  launch::StepRequest req;
  try {
    req = launch::make_request(site, spec, shape);
  } catch (const launch::RequestError& e) {
    throw mapper::Error("--layout " + in.layout + ": " + e.what());
  }
  out.request = std::move(req.request);
  out.launcher =
      req.style == launch::Style::kPerNode ? mapper::Launcher::kPerNode : mapper::Launcher::kPerGpu;
  out.ids = req.ids;
  mapper::Request& r = out.request;
  r.algorithm = algorithm_from(in.algo);
  r.seed = in.seed;
  r.refine_moves = in.refine_moves;
  r.overlap_dims = in.overlap_dims;
  if (in.allow_split) r.layout.split = mapper::SplitPolicy::kAllow;
  if (!in.nccl_version.empty()) {
    try {
      r.layout.nccl = mapper::nccl::parse_version(in.nccl_version);
    } catch (const mapper::Error& e) {
      throw UsageError(std::string("--nccl-version: ") + e.what());
    }
  }
  return out;
}

nlohmann::json inputs_to_json(const MapInputs& in) {
  auto absolute = [](const std::string& p) {
    if (p.empty()) return p;
    std::error_code ec;
    auto a = std::filesystem::absolute(p, ec);
    return ec ? p : a.lexically_normal().string();
  };
  nlohmann::json j;
  j["fabric"] = absolute(in.fabric);
  if (!in.fabric_format.empty() && in.fabric_format != "auto") {
    j["fabric_format"] = in.fabric_format;
  }
  j["guid_map"] = absolute(in.guid_map);
  j["nodes"] = in.nodes;
  j["gpus_per_node"] = in.gpus_per_node;
  j["node_type"] = absolute(in.node_type);
  j["tasks_per_node"] = in.tasks_per_node;
  j["ntasks"] = in.ntasks;
  j["layout"] =
      in.layout.rfind("file:", 0) == 0 ? "file:" + absolute(in.layout.substr(5)) : in.layout;
  j["algo"] = in.algo;
  j["seed"] = in.seed;
  j["refine_moves"] = in.refine_moves;
  j["config"] = absolute(in.config);
  j["health_dir"] = absolute(in.health_dir);
  j["launcher"] = in.launcher;
  j["nproc"] = in.nproc;
  j["ids"] = in.ids;
  j["oversubscription"] = in.oversubscription;
  j["routing"] = in.routing;
  j["overlap_dims"] = in.overlap_dims;
  j["allow_split"] = in.allow_split;
  j["nccl_version"] = in.nccl_version;
  if (!in.calibration.empty()) j["calibration"] = absolute(in.calibration);
  if (in.gpus_bound) j["gpus_bound"] = true;
  return j;
}

MapInputs inputs_from_json(const nlohmann::json& j, const std::string& context) {
  MapInputs in;
  try {
    in.fabric = j.value("fabric", std::string());
    in.fabric_format = j.value("fabric_format", std::string());
    in.guid_map = j.value("guid_map", std::string());
    in.nodes = j.at("nodes").get<std::string>();
    in.gpus_per_node = j.value("gpus_per_node", 0);
    in.node_type = j.value("node_type", std::string());
    in.tasks_per_node = j.value("tasks_per_node", 0);
    in.ntasks = j.value("ntasks", 0LL);
    in.layout = j.value("layout", std::string());
    in.algo = j.value("algo", std::string("topo"));
    in.seed = j.value("seed", std::uint64_t{1});
    in.refine_moves = j.value("refine_moves", -1LL);
    in.config = j.value("config", std::string());
    in.launcher = j.value("launcher", std::string());
    in.health_dir = j.value("health_dir", std::string());
    in.nproc = j.value("nproc", 0);
    in.ids = j.value("ids", std::string());
    in.oversubscription = j.value("oversubscription", std::string());
    in.routing = j.value("routing", std::string());
    in.overlap_dims = j.value("overlap_dims", false);
    in.allow_split = j.value("allow_split", false);
    in.nccl_version = j.value("nccl_version", std::string());
    in.calibration = j.value("calibration", std::string());
    in.gpus_bound = j.value("gpus_bound", false);
  } catch (const nlohmann::json::exception& e) {
    throw topology::Error(topology::ErrorCode::kBadInput, context,
                          std::string("inputs: ") + e.what());
  }
  return in;
}

nlohmann::json cost_to_json(const mapper::CostReport& c) {
  nlohmann::json j;
  j["seconds"] = c.seconds;
  j["raw_seconds"] = c.raw_seconds;
  j["bottleneck"] = c.bottleneck;
  j["dims"] = nlohmann::json::array();
  for (const auto& d : c.dims) {
    j["dims"].push_back({{"dim", d.dim},
                         {"seconds", d.seconds},
                         {"exposed", d.exposed},
                         {"collective", d.collective},
                         {"nccl", d.nccl},
                         {"groups_in_host", d.groups_in_host},
                         {"groups_in_leaf", d.groups_in_leaf},
                         {"groups_across", d.groups_across}});
  }
  j["tiers"] = nlohmann::json::array();
  for (const auto& t : c.tiers) j["tiers"].push_back({{"tier", t.tier}, {"bytes", t.bytes}});
  return j;
}

}  // namespace topoaware::cli
