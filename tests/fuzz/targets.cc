#include "targets.h"

#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <string>

#include "topoaware/launch/config.h"
#include "topoaware/launch/shadow.h"
#include "topoaware/mapper/launch.h"
#include "topoaware/mapper/layout.h"
#include "topoaware/mapper/trace.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/fabric_io.h"
#include "topoaware/topology/hostlist.h"
#include "topoaware/topology/input_format.h"
#include "topoaware/topology/node_io.h"
#include "topoaware/topology/sources.h"

namespace topoaware::fuzz {
namespace {

using topology::InputFormat;

// Runs `body`, accepting the library's own error types only.
template <class F>
void guarded(F&& body) {
  try {
    body();
  } catch (const topology::Error&) {
  } catch (const mapper::Error&) {
  }
}

// What a loaded fabric is then used for: every exporter runs on it, for fabrics of a size the
// sanitizers get through in the time limit (a 64 KiB topology.conf may name 10^6 hosts, legal
// and exported in about a second in a release build; the exporters' scale is the benchmarks').
constexpr std::size_t kMaxExportedHosts = 4096;

void use(const topology::Fabric& f) {
  if (f.hosts.size() > kMaxExportedHosts) return;
  (void)topology::fabric_to_json(f);
  (void)topology::fabric_to_dot(f);
  guarded([&] { (void)topology::to_slurm_tree(f); });
  guarded([&] { (void)topology::to_slurm_block(f); });
}

void fabric(std::string_view data, InputFormat format) {
  guarded([&] { use(topology::load_fabric_text(std::string(data), "fuzz", format)); });
}

void node(std::string_view data, InputFormat format) {
  guarded([&] {
    topology::NodeTopology n = topology::load_node_text(std::string(data), "fuzz", format);
    (void)topology::node_to_json(n);
    (void)topology::node_to_dot(n);
    guarded([&] { (void)topology::node_to_nccl_xml(n); });
  });
}

// The plugin reads its config from a file (config=PATH), so the input goes through one: a
// per-process file in /dev/shm (or /tmp), rewritten for every input.
std::string scratch_file() {
  std::string dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  return dir + "/topo-aware-fuzz-config-" + std::to_string(getpid()) + ".toml";
}

void plugin_config(std::string_view data) {
  static const std::string path = scratch_file();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return;
  std::fwrite(data.data(), 1, data.size(), f);
  std::fclose(f);
  guarded([&] { (void)launch::parse_plugstack({"config=" + path}); });
}

// Plugstack arguments: one per line (slurm splits the line on spaces). A config= argument
// would make the fuzzer read arbitrary files; the config file has its own target.
void plugstack(std::string_view data) {
  std::vector<std::string> args;
  std::size_t pos = 0;
  while (pos <= data.size() && args.size() < 64) {
    std::size_t nl = data.find_first_of(" \n", pos);
    std::string arg(
        data.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos));
    if (!arg.empty() && arg.rfind("config=", 0) != 0) args.push_back(arg);
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  guarded([&] { (void)launch::parse_plugstack(args); });
}

// Shadow logs, line by line (what `topo-aware shadow-report` reads), and the SPEC's `shadow`
// word. Two properties beyond not crashing: a line that parses is written back (format) into one
// that parses again, and a SPEC without its shadow words asks for no shadow.
void shadow_line(std::string_view data) {
  std::size_t pos = 0;
  while (pos <= data.size()) {
    const std::size_t nl = data.find('\n', pos);
    const std::string_view line =
        data.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    bool parsed = false;
    launch::ShadowRecord r;
    guarded([&] {
      r = launch::parse_shadow_line(line, "fuzz");
      parsed = true;
    });
    if (parsed) {
      try {
        (void)launch::parse_shadow_line(launch::format_shadow_line(r), "fuzz");
      } catch (const topology::Error& e) {
        throw std::logic_error(std::string("a parsed line, written back, does not parse: ") +
                               e.what());
      }
    }
    if (mapper::asks_shadow(mapper::without_shadow(line))) {
      throw std::logic_error("without_shadow left a shadow word");
    }
    guarded([&] { (void)mapper::parse_launch_spec(line); });
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
}

// The first byte picks the world size the layout resolves against (0: unresolved).
int world_of(std::string_view& data) {
  if (data.empty()) return 0;
  int world = static_cast<unsigned char>(data[0]);
  data.remove_prefix(1);
  return world;
}

const std::vector<Target> kTargets = {
    {"input_format",
     [](std::string_view d) {
       guarded([&] {
         topology::InputText t = topology::clean_input(std::string(d), "fuzz");
         guarded([&] { topology::detect_format(t.text, topology::InputKind::kFabric, "fuzz"); });
         guarded([&] { topology::detect_format(t.text, topology::InputKind::kNode, "fuzz"); });
       });
     }},
    {"nccl_xml", [](std::string_view d) { node(d, InputFormat::kNcclXml); }},
    {"hwloc_xml", [](std::string_view d) { node(d, InputFormat::kHwlocXml); }},
    {"ibnetdiscover", [](std::string_view d) { fabric(d, InputFormat::kIbnetdiscover); }},
    {"slurm_topology", [](std::string_view d) { fabric(d, InputFormat::kSlurmTopology); }},
    {"fabric_toml", [](std::string_view d) { fabric(d, InputFormat::kFabricToml); }},
    {"fabric_json", [](std::string_view d) { fabric(d, InputFormat::kFabricJson); }},
    {"lingjun_csv", [](std::string_view d) { fabric(d, InputFormat::kLingjunCsv); }},
    {"hostlist",
     [](std::string_view d) {
       guarded([&] {
         std::vector<std::string> hosts = topology::expand_hostlist(d, "fuzz");
         (void)topology::compress_hostlist(hosts);
       });
     }},
    {"plugin_config", plugin_config},
    {"plugstack", plugstack},
    {"shadow_line", shadow_line},
    {"layout_spec",
     [](std::string_view d) {
       int world = world_of(d);
       guarded([&] { (void)mapper::parse_layout(d, world); });
     }},
    {"trace",
     [](std::string_view d) {
       guarded([&] {
         const mapper::TraceFormat f = mapper::detect_trace_format(d, "fuzz");
         (void)mapper::read_trace(d, "fuzz", f);
       });
     }},
    {"job_toml",
     [](std::string_view d) {
       int world = world_of(d);
       guarded([&] { (void)mapper::parse_job_toml(d, "fuzz", world); });
     }},
};

}  // namespace

const std::vector<Target>& targets() { return kTargets; }

const Target* find_target(std::string_view name) {
  for (const Target& t : kTargets) {
    if (name == t.name) return &t;
  }
  return nullptr;
}

}  // namespace topoaware::fuzz
