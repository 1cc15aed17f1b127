// The inputs a launch plans from (inputs.h).
#include "topoaware/launch/inputs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <sstream>
#include <utility>

#include "topoaware/launch/fd.h"
#include "topoaware/topology/doctor_source.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/fabric_io.h"
#include "topoaware/topology/health.h"
#include "topoaware/topology/sources.h"

namespace topoaware::launch {
namespace {

namespace topology = topoaware::topology;

// The text of the job description named by `file:PATH`. The path must be absolute: srun reads it
// from its own working directory, every slurmstepd from another one, so a relative path that srun
// accepted would be missing on the nodes. Only a regular file is read: a directory would read as an
// empty description (plain data parallel), and a FIFO would block srun or slurmstepd until someone
// writes to it (hence O_NONBLOCK before the type is known).
std::string read_job_file(const std::string& path) {
  if (path.empty() || path.front() != '/') {
    throw topology::Error(topology::ErrorCode::kBadInput, "file:" + path,
                          "the job description needs an absolute path (every node reads it, "
                          "from another working directory than srun's)");
  }
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (fd.fd < 0) {
    throw topology::Error(
        topology::ErrorCode::kNotFound, path,
        std::string("cannot read the job description (--topo-aware=file:PATH): ") +
            std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    throw topology::Error(topology::ErrorCode::kBadInput, path,
                          "not a regular file (--topo-aware=file:PATH names a TOML file)");
  }
  constexpr size_t kMaxJobFile = 1 << 20;
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw topology::Error(
          topology::ErrorCode::kSystem, path,
          std::string("cannot read the job description: ") + std::strerror(errno));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxJobFile) {
      throw topology::Error(topology::ErrorCode::kLimit, path, "job description over 1 MiB");
    }
  }
  return text;
}

}  // namespace

mapper::LaunchSpec parse_spec(const std::string& spec) {
  mapper::LaunchSpec launch = mapper::parse_launch_spec(spec);
  // The syntax is checked now, in the process that read the option (srun, sbatch), so a typo stops
  // the launch before anything runs.
  layout_for(launch, 0);
  return launch;
}

// `file:PATH` names a TOML job description, read here by whoever runs the plugin (srun as the user,
// slurmstepd's user_init as the job's user), so it must be visible on every node.
mapper::Layout layout_for(const mapper::LaunchSpec& launch, int world) {
  const std::string& text = launch.layout;
  mapper::Layout layout;
  if (text.rfind("file:", 0) == 0) {
    const std::string path = text.substr(5);
    layout = mapper::parse_job_toml(read_job_file(path), path, world);
  } else {
    layout = mapper::parse_layout(text, world);
  }
  if (world > 0) mapper::resolve_layout(layout, world);
  return layout;
}

topology::Fabric load_configured_fabric(const Config& config) {
  if (config.fabric.empty()) {
    throw topology::Error(topology::ErrorCode::kNotFound,
                          config.path.empty() ? "plugstack" : config.path,
                          "no fabric configured (set fabric = \"FILE\")");
  }
  topology::Fabric fabric =
      topology::load_fabric(config.fabric, config.guid_map, config.fabric_format);
  // What the site declares where the fabric gives no capacities, and how its tiers route, as
  // `topo-aware map --config` applies them.
  if (!config.oversubscription.empty()) {
    topology::declare_oversubscription(fabric, config.oversubscription);
  }
  if (config.routing) {
    fabric.routing = *config.routing;
    fabric.routing_by_tier.clear();
  }
  return fabric;
}

topology::NodeTopology discover_this_node(const Config& config) {
  topology::LiveOptions live;
  live.fsroot = config.discover_fsroot;
  live.use_hwloc = live.fsroot == "/";
  return topology::discover_live(live);
}

// A host without a capture is taken to be like the machine reading it: every node and srun must
// then be alike, which the plugin's digest checks (spank/digest.h).
NodeModels load_nodes(const Config& config, const topology::Fabric& fabric,
                      const std::vector<std::string>& hosts) {
  NodeModels models;
  for (const auto& host : hosts) {
    const std::string capture = capture_for(config, fabric, host);
    const std::string key = capture.empty() ? std::string(kLiveSource) : capture;
    auto it = models.by_source.find(key);
    if (it == models.by_source.end()) {
      auto node = std::make_unique<topology::NodeTopology>(
          capture.empty() ? discover_this_node(config)
                          : topology::load_node_file(capture, config.capture_format));
      it = models.by_source.emplace(key, std::move(node)).first;
    }
    models.per_host.push_back(it->second.get());
    models.source.push_back(key);
  }
  return models;
}

HealthRead read_health_dir(const std::string& health_dir, topology::Fabric& fabric,
                           const std::vector<std::string>& hosts,
                           const std::vector<const topology::NodeTopology*>& models,
                           const std::function<void(const std::string&)>& skipped) {
  HealthRead out;
  if (health_dir.empty()) return out;
  std::map<std::string, std::vector<topology::NicHealth>> health;
  for (std::size_t h = 0; h < hosts.size(); ++h) {
    try {
      if (auto report = topology::read_health_report(health_dir, hosts[h])) {
        health[hosts[h]] = topology::nic_health(*report, h < models.size() ? models[h] : nullptr);
      }
    } catch (const std::exception& e) {
      if (skipped) skipped(e.what());
    }
  }
  out.lines = topology::apply_health(fabric, health);
  out.text = topology::health_text(health);
  return out;
}

void check_hosts_in_fabric(const topology::Fabric& fabric, const std::vector<std::string>& hosts,
                           const Config& config) {
  for (const auto& host : hosts) {
    if (fabric.find_host(host) < 0) {
      throw topology::Error(topology::ErrorCode::kNotFound, config.fabric,
                            "host " + host + " is not in the fabric");
    }
  }
}

std::vector<std::string> split_lines(const char* text) {
  std::vector<std::string> out;
  if (text == nullptr) return out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

std::vector<int> parse_tasks_per_node(const std::string& text) {
  std::vector<int> out;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    int count = 0, repeat = 1;
    if (std::sscanf(item.c_str(), "%d(x%d)", &count, &repeat) < 1 || count < 0 || repeat < 1 ||
        repeat > 1 << 20) {
      throw topology::Error(topology::ErrorCode::kBadInput, "SLURM_STEP_TASKS_PER_NODE",
                            "cannot read '" + text + "'");
    }
    out.insert(out.end(), static_cast<size_t>(repeat), count);
  }
  return out;
}

// When nothing better is known (srun before launch).
std::vector<int> block_tasks(std::uint64_t ntasks, std::size_t nhosts) {
  std::vector<int> out(nhosts, 0);
  if (nhosts == 0) return out;
  for (std::size_t i = 0; i < nhosts; ++i) {
    out[i] = static_cast<int>(ntasks / nhosts + (i < ntasks % nhosts ? 1 : 0));
  }
  return out;
}

}  // namespace topoaware::launch
