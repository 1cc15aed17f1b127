// C++ bodies of the C facade (facade.h). Every entry point catches everything: an exception
// escaping into slurmstepd would kill the step daemon, so each function turns failures into a
// failure kind and a one-line reason. The work is elsewhere, one concern a file: inputs.cc (SPEC,
// fabric, node models), step.cc (the plan by launch style), summary.cc (srun's lines), job_dir.cc
// (the per-node XML), network.cc (names and routes); this file keeps the process-wide state and the
// C boundary.
#include "facade.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "config.h"
#include "digest.h"
#include "fd.h"
#include "inputs.h"
#include "job_dir.h"
#include "network.h"
#include "step.h"
#include "summary.h"
#include "topoaware/topology/doctor_source.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/health.h"
#include "topoaware/topology/node_io.h"
#include "topoaware/topology/sources.h"

namespace {

using topoaware::spank::Config;
using topoaware::spank::NodeLocalError;
using topoaware::spank::Policy;
using topoaware::spank::RequestError;
namespace mapper = topoaware::mapper;
namespace spank = topoaware::spank;
namespace topology = topoaware::topology;

struct StepState {
  bool ready = false;
  spank::StepPlan plan;
  std::set<std::string> user_env;
  std::string master_host;  // the plan's rank 0 host
  std::string gloo_ifname;  // GLOO_SOCKET_IFNAME, when this node's name does not resolve
  std::string dir_path;     // the per-job directory
  std::string file_name;    // the node's NCCL XML inside it
  std::string hosts_name;   // a per-node launcher's hostfile inside it, or empty
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
  std::string digest;  // srun: the digest of the inputs it read, or empty
  std::string health;  // srun: the degraded NICs it planned with (health_text), or empty
  std::string doctor;  // a node's warning from its own checks (doctor = "warn"), or empty
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
  // The policy is read from the plugstack line on its own first, so a broken file still fails the
  // way the admin asked.
  s.fail_closed = false;
  for (const auto& a : s.args) {
    if (a == "policy=fail-closed") s.fail_closed = true;
  }
  try {
    s.config = spank::parse_plugstack(s.args);
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

// Runs `body`; an exception becomes its failure kind with its message.
template <typename F>
int guarded(char* err, size_t errlen, F&& body) {
  try {
    return body();
  } catch (const RequestError& e) {
    copy_err(err, errlen, e.what());
    return TA_EREQUEST;
  } catch (const NodeLocalError& e) {
    copy_err(err, errlen, e.what());
    return TA_ENODE;
  } catch (const spank::DisagreeError& e) {
    copy_err(err, errlen, e.what());
    return TA_EDISAGREE;
  } catch (const std::exception& e) {
    copy_err(err, errlen, e.what());
    return TA_EFAIL;
  } catch (...) {
    copy_err(err, errlen, "unknown failure");
    return TA_EFAIL;
  }
}

std::string text_or_empty(const char* s) { return s != nullptr ? s : ""; }

// The GPU count in SLURM_GPUS_PER_NODE ("4", "h100:4"), 0 when absent or unreadable.
int gpus_in(const std::string& text) {
  const std::string count = text.substr(text.rfind(':') + 1);
  if (count.empty() || count.size() > 6 ||
      count.find_first_not_of("0123456789") != std::string::npos) {
    return 0;
  }
  return std::stoi(count);
}

// SLURM_HOSTFILE's text (a regular file under 1 MiB). Under -m arbitrary every node checks it whole
// against the plan, so that all decide alike: one that cannot read it refuses.
std::string read_hostfile(const std::string& path) {
  if (path.empty()) {
    throw topology::Error(topology::ErrorCode::kNotFound, "SLURM_HOSTFILE",
                          "-m arbitrary without SLURM_HOSTFILE: topo-aware takes tasks placed "
                          "by the plan's own hostfile (`topo-aware map ... --of hostfile`)");
  }
  spank::Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  struct stat st {};
  if (fd.fd < 0 || ::fstat(fd.fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (1 << 20)) {
    throw topology::Error(topology::ErrorCode::kNotFound, path,
                          "SLURM_HOSTFILE must be a regular file under 1 MiB that every node "
                          "can read (-m arbitrary)");
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    ssize_t n = ::read(fd.fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  return text;
}

}  // namespace

namespace {

// srun: the node doctor's reports of the allocated hosts (health_dir), applied to `fabric`; one
// line per degraded host for the user. A report that does not parse is named and left out.
// Returns what the nodes must apply alike (health_text), or empty.
std::string read_health(const Config& config, topology::Fabric& fabric,
                        const std::vector<std::string>& hosts, ta_line_fn out, void* arg) {
  if (config.health_dir.empty()) return {};
  spank::NodeModels nodes = spank::load_nodes(config, fabric, hosts);
  std::map<std::string, std::vector<topology::NicHealth>> health;
  for (std::size_t h = 0; h < hosts.size(); ++h) {
    try {
      if (auto report = topology::read_health_report(config.health_dir, hosts[h])) {
        health[hosts[h]] = topology::nic_health(*report, nodes.per_host[h]);
      }
    } catch (const std::exception& e) {
      out(arg, 1, (std::string("topo-aware: health report left out: ") + e.what()).c_str());
    }
  }
  for (const auto& line : topology::apply_health(fabric, health)) {
    out(arg, 0, ("topo-aware: degraded (health report): " + line).c_str());
  }
  return topology::health_text(health);
}

// ta_step_prepare's work; throws.
int prepare_step(State& s, const struct ta_step* step) {
  {
    const Config& config = s.config;
    const bool agree = step->digest != nullptr && *step->digest != '\0';
    // Reading the inputs. Where srun read them (its digest came) and this node cannot, or reads
    // other ones, the step fails: this node would leave its tasks out of a plan the others apply.
    // What follows from the inputs and the step's shape fails alike on every node, and follows
    // the policy.
    auto reading = [&](auto&& read) {
      try {
        return read();
      } catch (const spank::DisagreeError&) {
        throw;
      } catch (const std::exception& e) {
        if (!agree) throw;
        throw spank::DisagreeError(std::string("srun read its inputs, this node cannot: ") +
                                   e.what());
      }
    };
    const mapper::LaunchSpec launch = reading([&] { return spank::parse_spec(s.spec); });
    spank::StepShape shape;
    shape.hosts = spank::split_lines(step->hosts);
    if (shape.hosts.empty()) {
      throw topology::Error(topology::ErrorCode::kBadInput, "SLURM_STEP_NODELIST",
                            "empty node list");
    }
    shape.tasks = step->tasks_per_node != nullptr && *step->tasks_per_node != '\0'
                      ? spank::parse_tasks_per_node(step->tasks_per_node)
                      : spank::block_tasks(step->ntasks, shape.hosts.size());
    if (shape.tasks.size() != shape.hosts.size()) {
      throw topology::Error(topology::ErrorCode::kBadInput, "SLURM_STEP_TASKS_PER_NODE",
                            std::to_string(shape.tasks.size()) + " counts for " +
                                std::to_string(shape.hosts.size()) + " hosts");
    }
    shape.distribution = text_or_empty(step->distribution);
    shape.mpi_type = text_or_empty(step->mpi_type);
    // This node is the node_id-th of the step's node list (Slurm's own numbering). The
    // environment's SLURMD_NODENAME cannot be trusted here: in a batch job it is inherited from the
    // batch host.
    spank::NodeStep here;
    here.job_id = step->job_id;
    here.step_id = step->step_id;
    here.node = step->node_id;
    here.local_global.assign(step->local_global, step->local_global + step->nlocal);
    here.step_gpus = text_or_empty(step->step_gpus);
    const int bound =
        here.step_gpus.empty()
            ? 0
            : static_cast<int>(std::count(here.step_gpus.begin(), here.step_gpus.end(), ',') + 1);

    topology::Fabric fabric = reading([&] { return spank::load_configured_fabric(config); });
    if (agree) {
      const std::string differ = spank::differences(
          spank::decode(step->digest),
          reading([&] { return spank::digest_of(config, s.args, fabric, s.spec); }), config);
      if (!differ.empty()) {
        throw spank::DisagreeError("its inputs differ from srun's: " + differ);
      }
    }
    // The degraded NICs srun planned with: every node applies the same (nodes do not read the
    // health directory themselves, whose reports change while a step starts).
    if (step->health != nullptr && *step->health != '\0') {
      topology::apply_health(fabric,
                             topology::parse_health(step->health, "SLURM_TOPO_AWARE_HEALTH"));
    }
    spank::check_hosts_in_fabric(fabric, shape.hosts, config);
    spank::NodeModels nodes =
        reading([&] { return spank::load_nodes(config, fabric, shape.hosts); });
    shape.gpus_per_host = spank::workers_per_host(launch, nodes, bound);
    const std::string hostfile =
        shape.distribution.rfind("arbitrary", 0) == 0
            ? reading([&] { return read_hostfile(text_or_empty(step->hostfile)); })
            : std::string();
    s.step.plan = spank::plan_step(config, launch, shape, here, fabric, nodes, hostfile);
    for (const auto& t : s.step.plan.plan.tasks) {
      if (t.rank == 0) s.step.master_host = s.step.plan.plan.hosts[t.host];
    }
    for (const auto& name : spank::split_lines(step->user_env)) s.step.user_env.insert(name);
    s.step.ready = true;

    // Last, because it is the one node-local part: the plan above is already valid.
    const std::string& host = shape.hosts[here.node];
    std::string xml = topology::node_to_nccl_xml(*nodes.per_host[here.node]);
    s.step.file_name = "nccl-topo." + std::to_string(step->step_id) + "." + host + ".xml";
    try {
      s.step.plan.env.topo_file = spank::write_job_file(config.job_dir, step->job_id,
                                                        s.step.file_name, xml, &s.step.dir_path);
      if (s.step.plan.style == spank::Style::kPerNode) {
        s.step.hosts_name = "hosts." + std::to_string(step->step_id) + "." + host;
        s.step.plan.hosts_file =
            spank::write_job_file(config.job_dir, step->job_id, s.step.hosts_name,
                                  spank::launcher_hostfile(s.step.plan), &s.step.dir_path);
      }
    } catch (const NodeLocalError& e) {
      throw NodeLocalError(std::string(e.what()) + " on " + host);
    }
    return TA_OK;
  }
}

}  // namespace

extern "C" {

int ta_configure(int argc, char** argv, char* err, size_t errlen) {
  return guarded(err, errlen, [&] {
    State& s = state();
    s.args.clear();
    for (int i = 0; i < argc; ++i) s.args.emplace_back(argv[i] != nullptr ? argv[i] : "");
    s.parsed = false;
    return TA_OK;
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
    spank::parse_spec(text);
    s.spec = text;
    s.active = true;
    return TA_OK;
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

int ta_local_check(const struct ta_local* step, ta_line_fn out, void* arg, char* err,
                   size_t errlen) {
  State& s = ensure_config();
  const std::string mpi_type = text_or_empty(step->mpi_type);
  mapper::LaunchSpec launch;
  // What the SPEC asks that cannot be honoured is the user's error whatever the policy; most of it
  // is known before the configuration is read.
  int rc = guarded(err, errlen, [&] {
    try {
      launch = spank::parse_spec(s.spec);
      const mapper::Ids ids =
          launch.ids_given ? launch.ids : (s.config_ok ? s.config.ids : mapper::Ids::kPlan);
      spank::check_ids(ids, mpi_type);
      const mapper::Launcher asked =
          launch.launcher != mapper::Launcher::kAuto
              ? launch.launcher
              : (s.config_ok ? s.config.launcher : mapper::Launcher::kAuto);
      // Several tasks on some host: one task per GPU, whatever the node models say.
      if (asked == mapper::Launcher::kPerGpu ||
          (asked == mapper::Launcher::kAuto && step->ntasks != step->nnodes)) {
        try {
          spank::layout_for(launch, static_cast<int>(step->ntasks));
        } catch (const mapper::Error& e) {
          throw RequestError(std::string(e.what()) + " (" + std::to_string(step->ntasks) +
                             " tasks)");
        }
      }
    } catch (const RequestError&) {
      throw;
    } catch (const std::exception& e) {
      throw RequestError(e.what());
    }
    return TA_OK;
  });
  if (rc != TA_OK) return rc;
  s.digest.clear();
  if (!s.config_ok) {
    copy_err(err, errlen, s.config_error);
    return TA_EFAIL;
  }
  return guarded(err, errlen, [&] {
    topology::Fabric fabric = spank::load_configured_fabric(s.config);
    s.digest = spank::encode(spank::digest_of(s.config, s.args, fabric, s.spec));
    std::vector<std::string> hosts = spank::split_lines(step->hosts);
    s.health = read_health(s.config, fabric, hosts, out, arg);
    if (!s.config.judge_allocation) return TA_OK;
    spank::check_hosts_in_fabric(fabric, hosts, s.config);
    bool spread = false;
    std::string line = "topo-aware: job " + std::to_string(step->job_id) + ": " +
                       spank::judge_line(fabric, hosts, &spread);
    if (spread) line += "; more spread than the fabric allows";
    out(arg, spread ? 3 : 0, line.c_str());
    // The summary plans the step as Slurm's block distribution would lay it out; srun cannot know
    // before launch which hosts a step on part of the allocation gets.
    if (step->nnodes != hosts.size()) {
      out(arg, 1,
          ("topo-aware: the step uses " + std::to_string(step->nnodes) + " of the " +
           std::to_string(hosts.size()) + " allocated hosts; its plan is made at launch")
              .c_str());
      return TA_OK;
    }
    spank::NodeModels nodes = spank::load_nodes(s.config, fabric, hosts);
    spank::StepShape shape;
    shape.hosts = hosts;
    shape.tasks = spank::block_tasks(step->ntasks, hosts.size());
    shape.mpi_type = mpi_type;
    shape.gpus_per_host =
        spank::workers_per_host(launch, nodes, gpus_in(text_or_empty(step->gpus_per_node)));
    spank::StepRequest req = spank::make_request(s.config, launch, shape);
    for (const auto& l : spank::plan_summary(mapper::plan(fabric, nodes.per_host, req.request))) {
      out(arg, 1, l.c_str());
    }
    return TA_OK;
  });
}

const char* ta_local_health(void) {
  const State& s = state();
  return s.health.empty() ? nullptr : s.health.c_str();
}

const char* ta_step_doctor(const char* host) {
  try {
    State& s = ensure_config();
    s.doctor.clear();
    if (!s.config_ok || !s.config.doctor_warn) return nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    topology::LiveOptions live;
    live.fsroot = s.config.doctor_fsroot;
    live.use_hwloc = live.fsroot == "/";
    const topology::NodeTopology node = topology::discover_live(live);
    const topology::HealthReport report = topology::diagnose(
        node, topology::read_health_facts(node, live.fsroot, nullptr), {});
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (report.findings.empty()) return nullptr;
    char took[48];
    std::snprintf(took, sizeof took, "; checked in %.0f ms", ms);
    s.doctor = std::string(host != nullptr ? host : "this node") + " is " +
               std::string(report.status()) + ": " +
               topology::finding_line(report.findings.front()) +
               (report.findings.size() > 1
                    ? " (+" + std::to_string(report.findings.size() - 1) + " more)"
                    : std::string()) +
               took;
    return s.doctor.c_str();
  } catch (const std::exception& e) {
    state().doctor = std::string("the node doctor could not run: ") + e.what();
    return state().doctor.c_str();
  } catch (...) {
    return nullptr;
  }
}

const char* ta_local_digest(void) {
  const State& s = state();
  return s.digest.empty() ? nullptr : s.digest.c_str();
}

int ta_step_prepare(const struct ta_step* step, char* err, size_t errlen) {
  State& s = ensure_config();
  s.step = StepState{};
  if (!s.config_ok) {
    copy_err(err, errlen, s.config_error);
    // srun read its configuration: this node, reading another (or none), must not launch alone.
    if (step->digest != nullptr && *step->digest != '\0') {
      copy_err(err, errlen, "srun read its inputs, this node cannot: " + s.config_error);
      return TA_EDISAGREE;
    }
    return TA_EFAIL;
  }
  const int rc = guarded(err, errlen, [&] { return prepare_step(s, step); });
  if (rc == TA_EDISAGREE) s.step = StepState{};
  return rc;
}

const char* ta_step_master_host(void) {
  const State& s = state();
  return s.step.ready && !s.step.master_host.empty() ? s.step.master_host.c_str() : nullptr;
}

const char* ta_step_unresolved_master(void) {
  try {
    const char* master = ta_step_master_host();
    return master != nullptr && !spank::resolves(master) ? master : nullptr;
  } catch (...) {
    return nullptr;
  }
}

void ta_step_set_master(const char* addr) {
  try {
    State& s = state();
    if (!s.step.ready) return;
    if (addr != nullptr && *addr != '\0') s.step.plan.env.master_addr = addr;
    char self[256] = "";
    if (::gethostname(self, sizeof self - 1) != 0 || spank::resolves(self)) return;
    const std::string& master =
        s.step.plan.env.master_addr.empty() ? s.step.master_host : s.step.plan.env.master_addr;
    s.step.gloo_ifname = spank::interface_towards(master);
  } catch (...) {
  }
}

int ta_step_ready(void) { return state().step.ready ? 1 : 0; }

const char* ta_step_note(void) {
  const State& s = state();
  return s.step.plan.note.empty() ? nullptr : s.step.plan.note.c_str();
}

int ta_task_env(uint32_t global_task, const char* slurm_cvd, ta_env_fn set, void* arg, char* err,
                size_t errlen) {
  return guarded(err, errlen, [&] {
    const State& s = state();
    if (!s.step.ready) throw std::runtime_error("no plan for this step");
    mapper::Environment env = spank::task_env(s.step.plan, global_task, text_or_empty(slurm_cvd));
    if (!s.step.gloo_ifname.empty()) env.emplace_back("GLOO_SOCKET_IFNAME", s.step.gloo_ifname);
    for (const auto& [name, value] : env) {
      if (!s.config.overwrite_user_env && s.step.user_env.count(name) != 0) continue;
      if (set(arg, name.c_str(), value.c_str()) != 0) {
        throw std::runtime_error("cannot set " + name);
      }
    }
    return TA_OK;
  });
}

int ta_task_bind(uint32_t global_task, int slurm_bound, char* err, size_t errlen) {
  return guarded(err, errlen, [&] {
    const State& s = state();
    if (!s.config.bind_cpus || slurm_bound != 0 || !s.step.ready) return 1;
    const std::vector<std::uint32_t> cpus = spank::task_cpus(s.step.plan, global_task);
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
      throw std::runtime_error(std::string("sched_getaffinity: ") + std::strerror(errno));
    }
    // Only CPUs this task may use: a node model from a capture of a bigger machine names CPUs that
    // do not exist here.
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
    return TA_OK;
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
    if (!s.step.hosts_name.empty()) spank::remove_job_file(s.step.dir_path, s.step.hosts_name);
    spank::remove_job_file(s.step.dir_path, s.step.file_name);
    s.step = StepState{};
  } catch (...) {
  }
}

}  // extern "C"
