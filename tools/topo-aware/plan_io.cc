#include "plan_io.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "cli.h"
#include "topoaware/mapper/layout.h"
#include "topoaware/mapper/synthetic.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/fabric_io.h"
#include "topoaware/topology/hostlist.h"
#include "topoaware/topology/sources.h"

namespace topoaware::cli {
namespace {

std::string read_text(const std::string& path, const std::string& option) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw topology::Error(topology::ErrorCode::kNotFound, option + " " + path, "cannot open");
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

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

Loaded load_inputs(const MapInputs& in) {
  if (in.fabric.empty()) throw UsageError("--fabric FILE is required");
  if (in.nodes.empty()) throw UsageError("--nodes HOSTLIST is required");
  if (in.gpus_per_node > 0 && !in.node_type.empty()) {
    throw UsageError("give --gpus-per-node or --node-type, not both");
  }
  if (in.tasks_per_node > 0 && in.ntasks > 0) {
    throw UsageError("give --tasks-per-node or --ntasks, not both");
  }
  Loaded out;
  out.fabric = topology::load_fabric(
      in.fabric, in.guid_map,
      topology::parse_input_format(in.fabric_format, topology::InputKind::kFabric, "--format"));
  std::vector<std::string> hosts = topology::expand_hostlist(in.nodes, "--nodes");
  if (hosts.empty()) throw UsageError("--nodes names no host");
  // Node models: one capture for all hosts, a plain synthetic node, or the fabric's node types.
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
    std::map<std::string, const topology::NodeTopology*> by_type;
    for (const auto& h : hosts) {
      std::int64_t i = out.fabric.find_host(h);
      const topology::NodeType* type = nullptr;
      if (i >= 0) {
        for (const auto& t : out.fabric.node_types) {
          if (t.name == out.fabric.hosts[static_cast<std::size_t>(i)].node_type) type = &t;
        }
      }
      if (!type || type->capture_path.empty()) {
        throw UsageError("host " + h + " has no node type with a capture in " + in.fabric +
                         "; give --gpus-per-node N or --node-type CAPTURE");
      }
      auto it = by_type.find(type->name);
      if (it == by_type.end()) {
        out.node_store.push_back(
            std::make_unique<topology::NodeTopology>(topology::load_node_file(type->capture_path)));
        it = by_type.emplace(type->name, out.node_store.back().get()).first;
      }
      out.nodes.push_back(it->second);
    }
    gpus = static_cast<int>(out.nodes[0]->gpus().size());
  }
  mapper::Request& r = out.request;
  r.hosts = hosts;
  if (in.ntasks > 0) {
    // Slurm's block distribution: the first ntasks % hosts hosts take one more.
    const long long n = static_cast<long long>(hosts.size());
    for (long long i = 0; i < n; ++i) {
      r.tasks_per_host.push_back(static_cast<int>(in.ntasks / n + (i < in.ntasks % n ? 1 : 0)));
    }
  } else {
    int per = in.tasks_per_node > 0 ? in.tasks_per_node : gpus;
    r.tasks_per_host.assign(hosts.size(), per);
  }
  long long world = 0;
  for (int t : r.tasks_per_host) world += t;
  if (in.layout.rfind("file:", 0) == 0) {
    std::string path = in.layout.substr(5);
    r.layout = mapper::parse_job_toml(read_text(path, "--layout"), path, static_cast<int>(world));
  } else {
    try {
      r.layout = mapper::parse_layout(in.layout, static_cast<int>(world));
    } catch (const mapper::Error& e) {
      throw mapper::Error("--layout " + in.layout + ": " + e.what());
    }
  }
  r.algorithm = algorithm_from(in.algo);
  r.seed = in.seed;
  r.refine_moves = in.refine_moves;
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
  return j;
}

MapInputs inputs_from_json(const nlohmann::json& j, const std::string& context) {
  MapInputs in;
  try {
    in.fabric = j.at("fabric").get<std::string>();
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
  } catch (const nlohmann::json::exception& e) {
    throw topology::Error(topology::ErrorCode::kBadInput, context,
                          std::string("inputs: ") + e.what());
  }
  return in;
}

nlohmann::json cost_to_json(const mapper::CostReport& c) {
  nlohmann::json j;
  j["seconds"] = c.seconds;
  j["bottleneck"] = c.bottleneck;
  j["dims"] = nlohmann::json::array();
  for (const auto& d : c.dims) {
    j["dims"].push_back({{"dim", d.dim},
                         {"seconds", d.seconds},
                         {"groups_in_host", d.groups_in_host},
                         {"groups_in_leaf", d.groups_in_leaf},
                         {"groups_across", d.groups_across}});
  }
  j["tiers"] = nlohmann::json::array();
  for (const auto& t : c.tiers) j["tiers"].push_back({{"tier", t.tier}, {"bytes", t.bytes}});
  return j;
}

}  // namespace topoaware::cli
