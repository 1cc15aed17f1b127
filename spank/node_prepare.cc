// A node's part of a step (node_prepare.h).
#include "node_prepare.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <exception>
#include <map>

#include "digest.h"
#include "job_dir.h"
#include "topoaware/launch/build.h"
#include "topoaware/launch/fd.h"
#include "topoaware/launch/inputs.h"
#include "topoaware/topology/doctor.h"
#include "topoaware/topology/doctor_source.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/health.h"
#include "topoaware/topology/node_io.h"
#include "topoaware/topology/sources.h"

namespace topoaware::spank {
namespace {

namespace topology = topoaware::topology;

std::string text_or_empty(const char* s) { return s != nullptr ? s : ""; }

// SLURM_HOSTFILE's text (a regular file under 1 MiB). Under -m arbitrary every node checks it whole
// against the plan, so that all decide alike.
std::string read_hostfile(const std::string& path) {
  launch::Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
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

// Reading an input srun read: this node failing to is a disagreement (it would leave its tasks
// out of a plan the others apply), not a failure every node shares.
template <typename F>
auto reading(F&& read) {
  try {
    return read();
  } catch (const DisagreeError&) {
    throw;
  } catch (const std::exception& e) {
    throw DisagreeError(std::string("srun read its inputs, this node cannot: ") + e.what());
  }
}

}  // namespace

bool prepare_on_node(const launch::Config& config, const std::vector<std::string>& args,
                     const std::string& spec, const ta_step& step, PreparedStep* out) {
  // srun decides first (srun_check.h): without its digest nothing says this node's inputs are
  // the others', and this node does not plan alone.
  if (step.digest == nullptr || *step.digest == '\0') {
    throw topology::Error(topology::ErrorCode::kNotFound, TA_DIGEST_ENV,
                          "srun handed the nodes no digest of its inputs (its topo-aware plugin "
                          "did not plan this step), and nodes do not plan alone");
  }
  Digest srun;
  try {
    srun = decode(step.digest);
  } catch (const std::exception& e) {
    throw DisagreeError(std::string("srun's digest is not this build's (") + launch::build_id() +
                        "): " + e.what());
  }
  if (srun.unmodified) return false;

  const mapper::LaunchSpec launch_spec = reading([&] { return launch::parse_spec(spec); });
  StepShape shape;
  shape.hosts = launch::split_lines(step.hosts);
  if (shape.hosts.empty()) {
    throw topology::Error(topology::ErrorCode::kBadInput, "SLURM_STEP_NODELIST", "empty node list");
  }
  shape.tasks = step.tasks_per_node != nullptr && *step.tasks_per_node != '\0'
                    ? launch::parse_tasks_per_node(step.tasks_per_node)
                    : launch::block_tasks(step.ntasks, shape.hosts.size());
  if (shape.tasks.size() != shape.hosts.size()) {
    throw topology::Error(topology::ErrorCode::kBadInput, "SLURM_STEP_TASKS_PER_NODE",
                          std::to_string(shape.tasks.size()) + " counts for " +
                              std::to_string(shape.hosts.size()) + " hosts");
  }
  shape.distribution = text_or_empty(step.distribution);
  shape.mpi_type = text_or_empty(step.mpi_type);

  // The inputs, compared with srun's before anything is planned from them.
  topology::Fabric fabric = reading([&] { return launch::load_configured_fabric(config); });
  const std::string health = text_or_empty(step.health);
  DigestInputs inputs;
  inputs.with_live = uses_live(config, fabric, shape.hosts);
  inputs.health = health;
  inputs.hostfile = step.hostfile != nullptr && *step.hostfile != '\0' ? step.hostfile : nullptr;
  const Digest here = reading([&] { return digest_of(config, args, fabric, spec, inputs); });
  const std::string differ = differences(srun, here, config);
  if (!differ.empty()) throw DisagreeError("its inputs differ from srun's: " + differ);
  // The degraded NICs srun planned with: every node applies the same (nodes do not read the
  // health directory themselves, whose reports change while a step starts).
  if (!health.empty())
    topology::apply_health(fabric, topology::parse_health(health, TA_HEALTH_ENV));
  launch::check_hosts_in_fabric(fabric, shape.hosts, config);
  const launch::NodeModels nodes =
      reading([&] { return launch::load_nodes(config, fabric, shape.hosts); });

  // This node is the node_id-th of the step's node list (Slurm's own numbering). The
  // environment's SLURMD_NODENAME cannot be trusted here: in a batch job it is inherited from the
  // batch host.
  NodeStep node;
  node.job_id = step.job_id;
  node.step_id = step.step_id;
  node.node = step.node_id;
  node.local_global.assign(step.local_global, step.local_global + step.nlocal);
  node.step_gpus = text_or_empty(step.step_gpus);
  node.master_port = srun.port;
  // The GPUs the job holds on each host, as srun learned them from slurmctld: every node plans
  // with the same counts (SLURM_STEP_GPUS is each node's own).
  const std::map<std::string, int> held_by_host = decode_gpus(srun.gpus);
  std::vector<int> held;
  for (const auto& h : shape.hosts) {
    auto it = held_by_host.find(h);
    held.push_back(it == held_by_host.end() ? 0 : it->second);
  }
  shape.gpus_bound = std::any_of(held.begin(), held.end(), [](int g) { return g > 0; });
  shape.gpus_per_host = launch::workers_per_host(launch_spec, nodes.per_host, held);
  // Under -m arbitrary the plan's own hostfile, read whole (its text is in the digest). No
  // SLURM_HOSTFILE at all is the same on every node: a failure under the policy.
  std::string hostfile;
  if (shape.distribution.rfind("arbitrary", 0) == 0) {
    if (inputs.hostfile == nullptr) {
      throw topology::Error(topology::ErrorCode::kNotFound, "SLURM_HOSTFILE",
                            "-m arbitrary without SLURM_HOSTFILE: topo-aware takes tasks placed "
                            "by the plan's own hostfile (`topo-aware map ... --of hostfile`)");
    }
    hostfile = reading([&] { return read_hostfile(inputs.hostfile); });
  }
  out->plan = plan_step(config, launch_spec, shape, node, fabric, nodes, hostfile);
  for (const auto& t : out->plan.plan.tasks) {
    if (t.rank == 0) out->master_host = out->plan.plan.hosts[t.host];
  }
  for (const auto& name : launch::split_lines(step.user_env)) out->user_env.insert(name);
  out->ready = true;

  // Last, because it is the one node-local part: the plan above is already valid.
  const std::string& host = shape.hosts[node.node];
  const std::string xml = topology::node_to_nccl_xml(*nodes.per_host[node.node]);
  out->file_name = "nccl-topo." + std::to_string(step.step_id) + "." + host + ".xml";
  try {
    out->plan.env.topo_file =
        write_job_file(config.job_dir, step.job_id, out->file_name, xml, &out->dir_path);
    if (out->plan.style == Style::kPerNode) {
      out->hosts_name = "hosts." + std::to_string(step.step_id) + "." + host;
      out->plan.hosts_file = write_job_file(config.job_dir, step.job_id, out->hosts_name,
                                            launcher_hostfile(out->plan), &out->dir_path);
    }
  } catch (const NodeLocalError& e) {
    throw NodeLocalError(std::string(e.what()) + " on " + host);
  }
  return true;
}

std::string doctor_line(const launch::Config& config, const std::string& host) {
  if (!config.doctor_warn) return {};
  const auto t0 = std::chrono::steady_clock::now();
  topology::LiveOptions live;
  live.fsroot = config.doctor_fsroot;
  live.use_hwloc = live.fsroot == "/";
  const topology::NodeTopology node = topology::discover_live(live);
  const topology::HealthReport report =
      topology::diagnose(node, topology::read_health_facts(node, live.fsroot, nullptr), {});
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (report.findings.empty()) return {};
  char took[48];
  std::snprintf(took, sizeof took, "; checked in %.0f ms", ms);
  return (host.empty() ? std::string("this node") : host) + " is " + std::string(report.status()) +
         ": " + topology::finding_line(report.findings.front()) +
         (report.findings.size() > 1 ? " (+" + std::to_string(report.findings.size() - 1) + " more)"
                                     : std::string()) +
         took;
}

}  // namespace topoaware::spank
