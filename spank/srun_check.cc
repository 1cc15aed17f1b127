// What srun checks and hands the nodes before launch (srun_check.h).
#include "srun_check.h"

#include <cctype>
#include <exception>

#include "digest.h"
#include "facade.h"
#include "summary.h"
#include "topoaware/launch/inputs.h"
#include "topoaware/launch/port.h"
#include "topoaware/launch/request.h"
#include "topoaware/launch/shadow.h"
#include "topoaware/topology/error.h"

namespace topoaware::spank {
namespace {

namespace topology = topoaware::topology;
using launch::RequestError;

}  // namespace

int gpus_in_gres(const std::string& detail) {
  // Items "name[:type]:count(IDX:...)" separated by commas outside the parentheses.
  int gpus = 0;
  std::size_t i = 0;
  while (i < detail.size()) {
    std::size_t end = i;
    int depth = 0;
    while (end < detail.size() && (depth > 0 || detail[end] != ',')) {
      if (detail[end] == '(') ++depth;
      if (detail[end] == ')') --depth;
      ++end;
    }
    const std::string item = detail.substr(i, end - i);
    if (item.rfind("gpu:", 0) == 0 || item == "gpu") {
      const std::string head = item.substr(0, item.find('('));
      const std::string count = head.substr(head.rfind(':') + 1);
      if (!count.empty() && count.size() <= 6 &&
          count.find_first_not_of("0123456789") == std::string::npos) {
        gpus += std::stoi(count);
      }
    }
    i = end + 1;
  }
  return gpus;
}

std::string unmodified_digest() {
  Digest d;
  d.unmodified = true;
  return encode(d);
}

void check_request(const launch::Config* config, const std::string& spec, const SrunStep& step) {
  try {
    const mapper::LaunchSpec launch_spec = launch::parse_spec(spec);
    const mapper::Ids ids = launch_spec.ids_given
                                ? launch_spec.ids
                                : (config != nullptr ? config->ids : mapper::Ids::kPlan);
    launch::check_ids(ids, step.mpi_type);
    const mapper::Launcher asked =
        launch_spec.launcher != mapper::Launcher::kAuto
            ? launch_spec.launcher
            : (config != nullptr ? config->launcher : mapper::Launcher::kAuto);
    // Several tasks on some host: one task per GPU, whatever the node models say.
    if (asked == mapper::Launcher::kPerGpu ||
        (asked == mapper::Launcher::kAuto && step.ntasks != step.nnodes)) {
      try {
        launch::layout_for(launch_spec, static_cast<int>(step.ntasks));
      } catch (const mapper::Error& e) {
        throw RequestError(std::string(e.what()) + " (" + std::to_string(step.ntasks) + " tasks)");
      }
    }
  } catch (const RequestError&) {
    throw;
  } catch (const std::exception& e) {
    throw RequestError(e.what());
  }
}

SrunVerdict check_on_srun(const launch::Config& config, const std::vector<std::string>& args,
                          const std::string& spec, const SrunStep& step, const LineSink& out,
                          bool shadow) {
  const mapper::LaunchSpec launch_spec = launch::parse_spec(spec);
  topology::Fabric fabric = launch::load_configured_fabric(config);
  const std::vector<std::string>& hosts = step.hosts;
  // What every node will read for its hosts, read here first: a host missing from the fabric or a
  // capture srun cannot load stops the step before any node plans.
  launch::check_hosts_in_fabric(fabric, hosts, config);
  launch::NodeModels nodes = launch::load_nodes(config, fabric, hosts);
  const launch::HealthRead health = launch::read_health_dir(
      config.health_dir, fabric, hosts, nodes.per_host,
      [&](const std::string& e) { out(1, "topo-aware: health report left out: " + e); });
  for (const auto& line : health.lines) out(0, "topo-aware: degraded (health report): " + line);
  if (health.text.size() >= TA_HEALTH_MAX) {
    throw topology::Error(topology::ErrorCode::kLimit, config.health_dir,
                          "the allocation's health reports make " +
                              std::to_string(health.text.size()) + " bytes for the nodes, over " +
                              std::to_string(TA_HEALTH_MAX - 1));
  }
  DigestInputs inputs;
  // Without the allocation's hosts srun cannot tell whether a host goes without a capture.
  inputs.with_live = hosts.empty() || uses_live(config, fabric, hosts);
  inputs.health = health.text;
  inputs.hostfile = step.hostfile;
  Digest digest = digest_of(config, args, fabric, spec, inputs);
  std::vector<int> gpus(hosts.size(), 0);
  for (std::size_t h = 0; h < hosts.size() && h < step.gres.size(); ++h) {
    gpus[h] = gpus_in_gres(step.gres[h]);
  }
  digest.gpus = encode_gpus(hosts, gpus);
  digest.port =
      std::to_string(launch::master_port(step.job_id, step.step_id, launch::ephemeral_ports()));
  SrunVerdict verdict;
  verdict.digest = encode(digest);
  verdict.health = health.text;
  verdict.inputs = inputs_hash(digest);
  verdict.spread = "-";

  if (hosts.empty()) {
    verdict.no_plan = "slurmctld gave no node list for the job";
    return verdict;
  }
  const bool judge = config.judge_allocation;
  if (!judge && !shadow) return verdict;
  verdict.spread = launch::format_spread(allocation_spread(fabric, hosts));
  if (judge) {
    bool spread = false;
    std::string line = "topo-aware: job " + std::to_string(step.job_id) + ": " +
                       judge_line(fabric, hosts, &spread);
    if (spread) line += "; more spread than the fabric allows";
    out(spread ? 3 : 0, line);
  }
  // The summary plans the step as Slurm's block distribution would lay it out; srun cannot know
  // before launch which hosts a step on part of the allocation gets.
  if (step.nnodes != hosts.size()) {
    verdict.no_plan = "the step uses " + std::to_string(step.nnodes) + " of the " +
                      std::to_string(hosts.size()) + " allocated hosts; its plan is made at launch";
    out(1, "topo-aware: " + verdict.no_plan);
    return verdict;
  }
  launch::StepShape shape;
  shape.hosts = hosts;
  shape.tasks = launch::block_tasks(step.ntasks, hosts.size());
  shape.mpi_type = step.mpi_type;
  shape.gpus_per_host = launch::workers_per_host(launch_spec, nodes.per_host, gpus);
  const launch::StepRequest req = launch::make_request(config, launch_spec, shape);
  try {
    const mapper::RankPlan plan = mapper::plan(fabric, nodes.per_host, req.request);
    verdict.plan_seconds = plan.cost.seconds;
    verdict.block_seconds = plan.block_cost.seconds;
    if (judge) {
      for (const auto& l : plan_summary(plan)) out(1, l);
      if (const std::string q = quality_line(fabric, nodes.per_host, req.request); !q.empty()) {
        out(1, q);
      }
    }
  } catch (const std::exception& e) {
    // The nodes plan the step as it is laid out; srun's guess of that layout may be off.
    verdict.no_plan = std::string("no plan summary: ") + e.what();
    out(1, "topo-aware: " + verdict.no_plan);
  }
  return verdict;
}

}  // namespace topoaware::spank
