// C++ bodies of the C facade (facade.h). Every entry point catches everything: an exception
// escaping into slurmstepd would kill the step daemon, so each function turns failures into -1
// and a one-line reason. The topo-aware libraries do the work; this file only gathers inputs
// (config, captures, fabric), calls the same mapper::plan() that `topo-aware map` calls, and
// does the plugin's own I/O (the per-job directory, CPU affinity).
#include "facade.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "config.h"
#include "topoaware/mapper/layout.h"
#include "topoaware/mapper/plan.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/fabric_io.h"
#include "topoaware/topology/node_io.h"
#include "topoaware/topology/sources.h"

namespace {

using topoaware::spank::Config;
using topoaware::spank::Policy;
namespace mapper = topoaware::mapper;
namespace topology = topoaware::topology;

// A failure that concerns this node only (its job directory): the plan itself is still the one
// every other node computes, so ranks stay consistent across the job.
struct NodeLocalError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct StepState {
  bool ready = false;
  mapper::RankPlan plan;
  mapper::EnvOptions env_options;
  std::set<std::string> user_env;
  bool bound = false;     // Slurm bound GPUs: keep its CUDA_VISIBLE_DEVICES
  bool gpu_hints = true;  // NIC and CPU hints fit the GPUs Slurm bound here
  std::string note;       // a node-local degradation to tell the user, or empty
  std::string dir_path;   // the per-job directory
  std::string file_name;  // the node's NCCL XML inside it
};

struct State {
  std::vector<std::string> args;  // plugstack arguments
  bool parsed = false;
  Config config;
  bool config_ok = false;
  std::string config_error;
  bool fail_closed = false;
  bool active = false;
  std::string spec;
  StepState step;
};

State& state() {
  static State s;
  return s;
}

// The configuration is read on first use, not in slurm_spank_init: a job that does not ask for
// topo-aware pays nothing for it (and hears nothing about a broken file).
State& ensure_config() {
  State& s = state();
  if (s.parsed) return s;
  s.parsed = true;
  // The policy is read from the plugstack line on its own first, so a broken file still fails
  // the way the admin asked.
  s.fail_closed = false;
  for (const auto& a : s.args) {
    if (a == "policy=fail-closed") s.fail_closed = true;
  }
  try {
    s.config = topoaware::spank::parse_plugstack(s.args);
    s.fail_closed = s.config.policy == Policy::kFailClosed;
    s.config_ok = true;
  } catch (const std::exception& e) {
    s.config_ok = false;
    s.config_error = e.what();
  } catch (...) {
    s.config_ok = false;
    s.config_error = "unknown failure reading the configuration";
  }
  return s;
}

void copy_err(char* err, size_t errlen, const std::string& message) {
  if (err == nullptr || errlen == 0) return;
  std::snprintf(err, errlen, "%s", message.c_str());
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

// Runs `body`; any exception becomes -1 with its message.
template <typename F>
int guarded(char* err, size_t errlen, F&& body) {
  try {
    return body();
  } catch (const NodeLocalError& e) {
    copy_err(err, errlen, e.what());
    return -2;
  } catch (const std::exception& e) {
    copy_err(err, errlen, e.what());
    return -1;
  } catch (...) {
    copy_err(err, errlen, "unknown failure");
    return -1;
  }
}

// SLURM_STEP_TASKS_PER_NODE: "8(x3),4" -> {8,8,8,4}.
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

// Slurm's block distribution of `ntasks` over `nhosts` when nothing better is known (srun
// before launch): the first hosts take one task more.
std::vector<int> block_tasks(std::uint32_t ntasks, std::size_t nhosts) {
  std::vector<int> out(nhosts, 0);
  if (nhosts == 0) return out;
  for (std::size_t i = 0; i < nhosts; ++i) {
    out[i] = static_cast<int>(ntasks / nhosts + (i < ntasks % nhosts ? 1 : 0));
  }
  return out;
}

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// The text of the job description named by `file:PATH`. The path must be absolute: srun reads
// it from its own working directory, every slurmstepd from another one, so a relative path that
// srun accepted would be missing on the nodes. Only a regular file is read: a directory would
// read as an empty description (plain data parallel), and a FIFO would block srun or slurmstepd
// until someone writes to it (hence O_NONBLOCK before the type is known).
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

// SPEC text -> layout. `file:PATH` names a TOML job description, read here by whoever runs the
// plugin (srun as the user, slurmstepd's user_init as the job's user), so it must be visible on
// every node.
mapper::Layout layout_for(const std::string& spec, int world) {
  mapper::Layout layout;
  if (spec.rfind("file:", 0) == 0) {
    const std::string path = spec.substr(5);
    layout = mapper::parse_job_toml(read_job_file(path), path, world);
  } else {
    layout = mapper::parse_layout(spec, world);
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
  return topology::load_fabric(config.fabric, config.guid_map);
}

// Node models for the hosts: the capture named in config for each host, else the fabric's node
// type capture, else this machine discovered live (hosts without a capture are taken to be like
// the node the plugin runs on). Captures are loaded once per file.
struct NodeModels {
  std::map<std::string, std::unique_ptr<topology::NodeTopology>> by_source;
  std::vector<const topology::NodeTopology*> per_host;
};

NodeModels load_nodes(const Config& config, const topology::Fabric& fabric,
                      const std::vector<std::string>& hosts) {
  NodeModels models;
  for (const auto& host : hosts) {
    std::string capture = topoaware::spank::capture_for(config, host);
    if (capture.empty()) {
      std::int64_t index = fabric.find_host(host);
      if (index >= 0) {
        const std::string& type = fabric.hosts[static_cast<size_t>(index)].node_type;
        for (const auto& t : fabric.node_types) {
          // capture_path: resolved against the fabric file's directory, as the description
          // says (capture is as written, and srun and slurmstepd run elsewhere).
          if (t.name == type && !t.capture.empty()) {
            capture = t.capture_path.empty() ? t.capture : t.capture_path;
          }
        }
      }
    }
    const std::string key = capture.empty() ? std::string("live:") : capture;
    auto it = models.by_source.find(key);
    if (it == models.by_source.end()) {
      auto node = std::make_unique<topology::NodeTopology>(
          capture.empty() ? topology::discover_live() : topology::load_node_file(capture));
      it = models.by_source.emplace(key, std::move(node)).first;
    }
    models.per_host.push_back(it->second.get());
  }
  return models;
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

std::string plural(size_t n, const std::string& word) {
  if (n == 1 || word.empty()) return std::to_string(n) + " " + word;
  if (word.back() == 'f') return std::to_string(n) + " " + word.substr(0, word.size() - 1) + "ves";
  return std::to_string(n) + " " + word + "s";
}

// One line on how spread the allocation is: per locality level above the host, the groups it
// spans against the fewest groups that could hold the same number of usable hosts.
std::string judge_line(const topology::Fabric& fabric, const std::vector<std::string>& hosts,
                       bool* spread) {
  std::vector<std::uint32_t> index;
  for (const auto& h : hosts) index.push_back(static_cast<std::uint32_t>(fabric.find_host(h)));
  std::string spans, best;
  *spread = false;
  for (const auto& level : fabric.levels) {
    if (level.name == "host" || level.group_of_host.size() != fabric.hosts.size()) continue;
    std::set<std::uint32_t> used;
    for (auto i : index) used.insert(level.group_of_host[i]);
    std::map<std::uint32_t, size_t> usable;
    for (size_t h = 0; h < fabric.hosts.size(); ++h) {
      if (!fabric.hosts[h].excluded) ++usable[level.group_of_host[h]];
    }
    std::vector<size_t> sizes;
    for (const auto& [group, n] : usable) sizes.push_back(n);
    std::sort(sizes.rbegin(), sizes.rend());
    size_t fewest = 0, held = 0;
    for (size_t n : sizes) {
      if (held >= hosts.size()) break;
      held += n;
      ++fewest;
    }
    if (used.size() > fewest) *spread = true;
    spans += ", " + plural(used.size(), level.name);
    best += (best.empty() ? "" : ", ") + plural(fewest, level.name);
  }
  std::string line = plural(hosts.size(), "host") + spans;
  if (!best.empty()) line += " (fewest possible: " + best + ")";
  return line;
}

std::string seconds_text(double s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  return buf;
}

void summarize(const mapper::RankPlan& plan, ta_line_fn out, void* arg) {
  char buf[512];
  const double base = plan.block_cost.seconds;
  const double change = base > 0 ? (plan.cost.seconds - base) / base * 100 : 0;
  std::snprintf(buf, sizeof buf,
                "topo-aware: plan %s: modeled communication %s per step, Slurm's order %s "
                "(%+.1f%%)%s",
                plan.layout.spec.empty() ? "dp" : plan.layout.spec.c_str(),
                seconds_text(plan.cost.seconds).c_str(), seconds_text(base).c_str(), change,
                plan.rail_optimized ? ", rail-optimized fabric" : "");
  out(arg, 1, buf);
  for (std::size_t i = 0; i < plan.cost.dims.size(); ++i) {
    const auto& dim = plan.cost.dims[i];
    // A dim of size 1 has no groups that communicate: nothing to say.
    if (dim.groups_in_host + dim.groups_in_leaf + dim.groups_across == 0) continue;
    const double slurm = i < plan.block_cost.dims.size() ? plan.block_cost.dims[i].seconds : 0;
    std::snprintf(buf, sizeof buf,
                  "topo-aware:   %s: %s (Slurm's order %s), groups inside a host %d, inside a "
                  "leaf %d, across %d",
                  dim.dim.c_str(), seconds_text(dim.seconds).c_str(),
                  seconds_text(slurm).c_str(), dim.groups_in_host, dim.groups_in_leaf,
                  dim.groups_across);
    out(arg, 1, buf);
  }
}

// --- the per-job directory -----------------------------------------------------------------

[[noreturn]] void fail_local(const std::string& what) {
  throw NodeLocalError(what + ": " + std::strerror(errno));
}

// Writes `text` as <job_dir>/<job>/<file> with the calling (job) user's identity: the base is
// opened without following symlinks, the per-job directory is created 0700 (or reused only when
// it is a real directory owned by this user with that mode), and the file is created exclusively
// with O_NOFOLLOW, 0644.
std::string write_job_file(const std::string& base, std::uint32_t job_id,
                           const std::string& file_name, const std::string& text,
                           std::string* dir_path) {
  Fd basefd(::open(base.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (basefd.fd < 0) fail_local("job_dir " + base);
  const std::string job = std::to_string(job_id);
  *dir_path = base + "/" + job;
  if (::mkdirat(basefd.fd, job.c_str(), 0700) != 0 && errno != EEXIST) {
    fail_local("job_dir " + *dir_path);
  }
  Fd dirfd(::openat(basefd.fd, job.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dirfd.fd < 0) fail_local("job_dir " + *dir_path);
  struct stat st {};
  if (::fstat(dirfd.fd, &st) != 0) fail_local("job_dir " + *dir_path);
  if (st.st_uid != ::geteuid()) {
    throw NodeLocalError("job_dir " + *dir_path + " is owned by uid " + std::to_string(st.st_uid) +
                         ", not the job's user");
  }
  if ((st.st_mode & 07777) != 0700 && ::fchmod(dirfd.fd, 0700) != 0) {
    fail_local("job_dir " + *dir_path);
  }
  // A file left by an earlier step with the same name (a restarted controller reuses job ids) is
  // replaced; O_EXCL then guarantees we write a file we created.
  ::unlinkat(dirfd.fd, file_name.c_str(), 0);
  Fd file(::openat(dirfd.fd, file_name.c_str(),
                   O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (file.fd < 0) fail_local(*dir_path + "/" + file_name);
  if (::fchmod(file.fd, 0644) != 0) fail_local(*dir_path + "/" + file_name);
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(file.fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail_local(*dir_path + "/" + file_name);
    p += n;
    left -= static_cast<size_t>(n);
  }
  return *dir_path + "/" + file_name;
}

}  // namespace

extern "C" {

int ta_configure(int argc, char** argv, char* err, size_t errlen) {
  return guarded(err, errlen, [&] {
    State& s = state();
    s.args.clear();
    for (int i = 0; i < argc; ++i) s.args.emplace_back(argv[i] != nullptr ? argv[i] : "");
    s.parsed = false;
    return 0;
  });
}

const char* ta_config_error(void) {
  const State& s = ensure_config();
  return s.config_ok ? nullptr : s.config_error.c_str();
}

int ta_fail_closed(void) { return ensure_config().fail_closed ? 1 : 0; }

int ta_set_spec(const char* spec, char* err, size_t errlen) {
  return guarded(err, errlen, [&] {
    State& s = state();
    std::string text = spec != nullptr ? spec : "";
    if (text.size() >= TA_SPEC_MAX) {
      throw topology::Error(topology::ErrorCode::kLimit, "SPEC",
                            "longer than " + std::to_string(TA_SPEC_MAX - 1) + " characters");
    }
    // The syntax is checked now, in the process that read the option (srun, sbatch), so a typo
    // stops the launch before anything runs.
    if (!text.empty()) layout_for(text, 0);
    s.spec = text;
    s.active = true;
    return 0;
  });
}

int ta_keep_spec(const char* spec) {
  try {
    State& s = state();
    s.spec = spec != nullptr ? spec : "";
    s.active = true;
    return 0;
  } catch (...) {
    return -1;
  }
}

int ta_active(void) { return state().active ? 1 : 0; }
const char* ta_spec(void) { return state().spec.c_str(); }

int ta_local_check(uint32_t job_id, const char* hosts_text, uint32_t nnodes, uint32_t ntasks,
                   ta_line_fn out, void* arg, char* err, size_t errlen) {
  State& s = ensure_config();
  // A SPEC that cannot fill the world is the user's error whatever the policy.
  int rc = guarded(err, errlen, [&] {
    layout_for(s.spec, static_cast<int>(ntasks));
    return 0;
  });
  if (rc != 0) return -1;
  if (!s.config_ok) {
    copy_err(err, errlen, s.config_error);
    return -2;
  }
  if (!s.config.judge_allocation) return 0;
  rc = guarded(err, errlen, [&] {
    std::vector<std::string> hosts = split_lines(hosts_text);
    topology::Fabric fabric = load_configured_fabric(s.config);
    check_hosts_in_fabric(fabric, hosts, s.config);
    bool spread = false;
    std::string line =
        "topo-aware: job " + std::to_string(job_id) + ": " + judge_line(fabric, hosts, &spread);
    if (spread) line += "; more spread than the fabric allows";
    out(arg, spread ? 3 : 0, line.c_str());
    // The summary plans the step as Slurm's block distribution would lay it out; srun cannot
    // know before launch which hosts a step on part of the allocation gets.
    if (nnodes != hosts.size()) {
      out(arg, 1,
          ("topo-aware: the step uses " + std::to_string(nnodes) + " of the " +
           std::to_string(hosts.size()) + " allocated hosts; its plan is made at launch")
              .c_str());
      return 0;
    }
    NodeModels nodes = load_nodes(s.config, fabric, hosts);
    mapper::Request request;
    request.hosts = hosts;
    request.tasks_per_host = block_tasks(ntasks, hosts.size());
    request.layout = layout_for(s.spec, static_cast<int>(ntasks));
    summarize(mapper::plan(fabric, nodes.per_host, request), out, arg);
    return 0;
  });
  return rc == 0 ? 0 : -2;
}

int ta_step_prepare(const struct ta_step* step, char* err, size_t errlen) {
  State& s = ensure_config();
  s.step = StepState{};
  if (!s.config_ok) {
    copy_err(err, errlen, s.config_error);
    return -1;
  }
  return guarded(err, errlen, [&] {
    const Config& config = s.config;
    std::vector<std::string> hosts = split_lines(step->hosts);
    if (hosts.empty()) {
      throw topology::Error(topology::ErrorCode::kBadInput, "SLURM_STEP_NODELIST",
                            "empty node list");
    }
    std::vector<int> tasks = step->tasks_per_node != nullptr && *step->tasks_per_node != '\0'
                                 ? parse_tasks_per_node(step->tasks_per_node)
                                 : block_tasks(step->ntasks, hosts.size());
    if (tasks.size() != hosts.size()) {
      throw topology::Error(
          topology::ErrorCode::kBadInput, "SLURM_STEP_TASKS_PER_NODE",
          std::to_string(tasks.size()) + " counts for " + std::to_string(hosts.size()) + " hosts");
    }
    // The plan numbers tasks in Slurm's block order; any other distribution (-m cyclic, plane)
    // would put a different task on each slot, so it is refused rather than silently misapplied.
    // The refusal must be the same on every node: a node's own tasks can look like block order
    // while other nodes' do not (-m arbitrary with node1,node1,node2,node3,node2; cyclic over
    // nodes of unequal size), and a plan applied on some nodes only leaves tasks without a RANK.
    // So the step's distribution, which every node sees alike, decides first.
    const std::string dist = step->distribution != nullptr ? step->distribution : "";
    const std::string across_nodes = dist.substr(0, dist.find_first_of(":,"));
    if (across_nodes == "cyclic" || across_nodes == "plane" || across_nodes == "arbitrary") {
      throw mapper::Error("tasks are in " + across_nodes + " distribution (SLURM_DISTRIBUTION=" +
                          dist + "); topo-aware maps Slurm's block order only (-m block)");
    }
    // This node is the node_id-th of the step's node list (Slurm's own numbering). The
    // environment's SLURMD_NODENAME cannot be trusted here: in a batch job it is inherited from
    // the batch host.
    if (step->node_id >= hosts.size()) {
      throw topology::Error(topology::ErrorCode::kBadInput, "SLURM_STEP_NODELIST",
                            "node id " + std::to_string(step->node_id) + " beyond its " +
                                std::to_string(hosts.size()) + " hosts");
    }
    const size_t node = step->node_id;
    const std::string& host = hosts[node];
    std::uint32_t first = 0;
    for (size_t i = 0; i < node; ++i) first += static_cast<std::uint32_t>(tasks[i]);
    for (std::uint32_t i = 0; i < step->nlocal; ++i) {
      if (step->local_global[i] != first + i) {
        throw mapper::Error("tasks are not in block distribution (task " +
                            std::to_string(step->local_global[i]) + " on " + host +
                            "); topo-aware maps Slurm's block order only (-m block)");
      }
    }

    topology::Fabric fabric = load_configured_fabric(config);
    check_hosts_in_fabric(fabric, hosts, config);
    NodeModels nodes = load_nodes(config, fabric, hosts);

    mapper::Request request;
    request.hosts = hosts;
    request.tasks_per_host = tasks;
    request.layout = layout_for(s.spec, static_cast<int>(step->ntasks));
    if (step->step_gpus != nullptr && *step->step_gpus != '\0') {
      // Slurm bound GPUs (gres, maybe cgroups): keep them, the plan permutes ranks only. Every
      // node must compute the same plan, but SLURM_STEP_GPUS lists this node's GPUs alone, and
      // nodes differ (--gpus-per-task=2 with 3 tasks here and 1 there lists 0-5 here, 0-1
      // there). So the plan takes every host's k-th task to hold its GPU k, from the tasks per
      // node that all nodes share; this node then checks that Slurm bound its own tasks that
      // way, and where it did not, its tasks keep their ranks (the same on every node) but not
      // the NIC and CPU hints, which would be another GPU's.
      for (int count : tasks) {
        for (int t = 0; t < count; ++t) request.bound_gpu.push_back(t);
      }
      s.step.bound = true;
      std::vector<long> mine;
      std::istringstream in(step->step_gpus);
      std::string item;
      bool readable = true;
      while (std::getline(in, item, ',')) {
        char* end = nullptr;
        long g = std::strtol(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0') readable = false;
        mine.push_back(g);
      }
      const size_t k = static_cast<size_t>(tasks[node]);
      bool as_planned = readable && k > 0 && mine.size() >= k && mine.size() % k == 0;
      const size_t per_task = as_planned ? mine.size() / k : 1;
      for (size_t j = 0; as_planned && j < k; ++j) {
        as_planned = mine[j * per_task] == static_cast<long>(j);
      }
      if (!as_planned) {
        s.step.gpu_hints = false;
        s.step.note = "Slurm bound " + host + "'s " + std::to_string(k) + " tasks to GPUs " +
                      step->step_gpus +
                      ", not task k to GPU k as the plan takes it on every node; its tasks keep "
                      "their ranks, without NCCL_IB_HCA, NCCL_SOCKET_IFNAME and CPU binding";
      }
    }
    s.step.plan = mapper::plan(fabric, nodes.per_host, request);

    s.step.env_options.job_id = step->job_id;
    s.step.env_options.master_port = config.master_port;
    s.step.env_options.one_gpu_visible =
        config.gpu_binding == topoaware::spank::GpuBinding::kOneGpu;
    for (const auto& name : split_lines(step->user_env)) s.step.user_env.insert(name);
    s.step.ready = true;

    // Last, because it is the one node-local part: the plan above is already valid.
    std::string xml = topology::node_to_nccl_xml(*nodes.per_host[node]);
    s.step.file_name = "nccl-topo." + std::to_string(step->step_id) + "." + host + ".xml";
    try {
      s.step.env_options.topo_file =
          write_job_file(config.job_dir, step->job_id, s.step.file_name, xml, &s.step.dir_path);
    } catch (const NodeLocalError& e) {
      throw NodeLocalError(std::string(e.what()) + " on " + host);
    }
    return 0;
  });
}

int ta_step_ready(void) { return state().step.ready ? 1 : 0; }

const char* ta_step_note(void) {
  const State& s = state();
  return s.step.note.empty() ? nullptr : s.step.note.c_str();
}

int ta_task_env(uint32_t global_task, ta_env_fn set, void* arg, char* err, size_t errlen) {
  return guarded(err, errlen, [&] {
    const State& s = state();
    if (!s.step.ready) throw std::runtime_error("no plan for this step");
    auto env =
        mapper::task_environment(s.step.plan, static_cast<int>(global_task), s.step.env_options);
    for (const auto& [name, value] : env) {
      if (s.step.bound && name == "CUDA_VISIBLE_DEVICES") continue;
      if (!s.step.gpu_hints && (name == "NCCL_IB_HCA" || name == "NCCL_SOCKET_IFNAME")) continue;
      if (!s.config.overwrite_user_env && s.step.user_env.count(name) != 0) continue;
      if (set(arg, name.c_str(), value.c_str()) != 0) {
        throw std::runtime_error("cannot set " + name);
      }
    }
    return 0;
  });
}

int ta_task_bind(uint32_t global_task, int slurm_bound, char* err, size_t errlen) {
  return guarded(err, errlen, [&] {
    const State& s = state();
    if (!s.config.bind_cpus || slurm_bound != 0 || !s.step.ready || !s.step.gpu_hints) return 1;
    if (global_task >= s.step.plan.tasks.size()) return 1;
    const auto& cpus = s.step.plan.tasks[global_task].cpus;
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
      throw std::runtime_error(std::string("sched_getaffinity: ") + std::strerror(errno));
    }
    // Only CPUs this task may use: a node model from a capture of a bigger machine names CPUs
    // that do not exist here.
    cpu_set_t want;
    CPU_ZERO(&want);
    int count = 0;
    for (auto c : cpus) {
      if (c < static_cast<std::uint32_t>(CPU_SETSIZE) && CPU_ISSET(c, &allowed)) {
        CPU_SET(c, &want);
        ++count;
      }
    }
    if (count == 0) return 1;
    if (::sched_setaffinity(0, sizeof want, &want) != 0) {
      throw std::runtime_error(std::string("sched_setaffinity: ") + std::strerror(errno));
    }
    return 0;
  });
}

int ta_prepare_job_dir_base(void) {
  try {
    const State& s = ensure_config();
    if (!s.config_ok) return -1;
    // Like /tmp: root-owned, world-writable, sticky, so each job's user can create its own 0700
    // directory and nobody can remove another's.
    if (::mkdir(s.config.job_dir.c_str(), 01777) == 0) {
      ::chmod(s.config.job_dir.c_str(), 01777);
      return 0;
    }
    return errno == EEXIST ? 0 : -1;
  } catch (...) {
    return -1;
  }
}

void ta_step_finish(void) {
  try {
    State& s = state();
    if (!s.step.dir_path.empty()) {
      Fd dirfd(::open(s.step.dir_path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (dirfd.fd >= 0 && !s.step.file_name.empty()) {
        ::unlinkat(dirfd.fd, s.step.file_name.c_str(), 0);
      }
      // Other steps or nodes sharing this filesystem may still use it: ENOTEMPTY is fine.
      ::rmdir(s.step.dir_path.c_str());
    }
    s.step = StepState{};
  } catch (...) {
  }
}

}  // extern "C"
