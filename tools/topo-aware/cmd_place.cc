// `topo-aware place`: which hosts a job should get (mapper::place), with Slurm's own tree choice
// on the same free hosts beside it, as a table, JSON, a Slurm hostlist or submission arguments.
//
// The free hosts come from --free / --partial / --busy (offline), or from the running Slurm
// (--from-slurm: scontrol, read by launch/slurm_nodes.h); none of them: an empty cluster (every
// host the fabric does not exclude).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli.h"
#include "plan_io.h"
#include "slurm_state.h"
#include "text_table.h"
#include "topoaware/launch/inputs.h"
#include "topoaware/mapper/place.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/hostlist.h"

namespace topoaware::cli {
namespace {

struct PlaceOptions {
  MapInputs in;
  std::uint32_t count = 0;  // -N
  int gpus = 0;             // --gpus
  std::string free;         // --free HOSTLIST
  std::string busy;         // --busy HOSTLIST
  std::string partial;      // --partial HOST:G,...
  bool from_slurm = false;  // --from-slurm
  std::string partition;    // --partition (with --from-slurm; empty: Slurm's default)
  std::string scontrol = "scontrol";
  int slurm_timeout_s = 10;  // per scontrol call
  std::uint32_t candidates = 0;
  std::string format = "text";
  std::string output;
};

// Exit code when the job cannot be placed on the free hosts now.
constexpr int kCannotPlace = 5;

topology::Error bad(const std::string& where, const std::string& what) {
  return topology::Error(topology::ErrorCode::kBadInput, where, what);
}

std::uint32_t host_of(const topology::Fabric& f, const std::string& name, const char* option) {
  const std::int64_t i = f.find_host(name);
  if (i < 0) throw bad(option, "host " + name + " is not in the fabric (" + f.source + ")");
  return static_cast<std::uint32_t>(i);
}

// Free GPUs per fabric host from the running Slurm: a host of the partition that Slurm would
// start a job on now (up, not drained, reserved or in maintenance: SlurmNode::unusable) offers
// its free GPUs, every other host none. Hosts Slurm has and the fabric does not are left out:
// place can choose only what it can model.
std::vector<int> slurm_free_gpus(const topology::Fabric& f, const PlaceOptions& o, int per_host) {
  const SlurmState s = slurm_state(o.scontrol, o.partition, o.slurm_timeout_s);
  std::vector<int> out(f.hosts.size(), 0);
  for (const launch::SlurmNode& n : s.nodes) {
    const std::int64_t i = f.find_host(n.name);
    if (i >= 0 && n.usable()) out[static_cast<std::size_t>(i)] = std::min(n.free_gpus(), per_host);
  }
  return out;
}

// Free GPUs per fabric host from the options.
std::vector<int> free_gpus(const topology::Fabric& f, const PlaceOptions& o, int per_host) {
  if (o.from_slurm) return slurm_free_gpus(f, o, per_host);
  std::vector<int> out(f.hosts.size(), o.free.empty() ? per_host : 0);
  for (const auto& h : topology::expand_hostlist(o.free, "--free")) {
    out[host_of(f, h, "--free")] = per_host;
  }
  for (const auto& h : topology::expand_hostlist(o.busy, "--busy")) {
    out[host_of(f, h, "--busy")] = 0;
  }
  std::string item;
  std::istringstream in(o.partial);
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const auto colon = item.rfind(':');
    int g = -1;
    if (colon != std::string::npos) {
      try {
        std::size_t used = 0;
        g = std::stoi(item.substr(colon + 1), &used);
        if (used != item.size() - colon - 1) g = -1;
      } catch (const std::exception&) {
        g = -1;
      }
    }
    if (colon == std::string::npos || g < 0 || g > per_host) {
      throw bad("--partial", "'" + item + "': expected HOST:GPUS with GPUS from 0 to " +
                                 std::to_string(per_host));
    }
    out[host_of(f, item.substr(0, colon), "--partial")] = g;
  }
  return out;
}

std::string names(const topology::Fabric& f, const std::vector<std::uint32_t>& hosts) {
  std::vector<std::string> n;
  n.reserve(hosts.size());
  for (std::uint32_t h : hosts) n.push_back(f.hosts[h].name);
  return topology::compress_hostlist(n);
}

std::string pct(double x, double base) {
  if (base <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", (x - base) / base * 100);
  return buf;
}

std::string fixed(double x, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

// The submission arguments that hand the choice to Slurm: the hosts pinned, or with candidates
// everything else excluded (candidate-set semantics on every Slurm release) and --switches at
// the choice's leaf count, so that Slurm's tree choosing inside keeps to as few leaves.
std::string sbatch_args(const topology::Fabric& f, const mapper::Placement& p) {
  if (p.candidates.empty()) return "--nodelist=" + names(f, p.chosen.hosts);
  std::vector<char> in(f.hosts.size(), 0);
  for (std::uint32_t h : p.candidates) in[h] = 1;
  std::vector<std::uint32_t> out;
  for (std::uint32_t h = 0; h < f.hosts.size(); ++h) {
    if (!in[h]) out.push_back(h);
  }
  std::string s = out.empty() ? std::string() : "--exclude=" + names(f, out);
  const std::size_t leaf = mapper::leaf_level(f);
  if (leaf < p.chosen.spread.size()) {
    s += (s.empty() ? "" : " ") + std::string("--switches=") + std::to_string(p.chosen.spread[leaf]);
  }
  return s;
}

nlohmann::ordered_json allocation_json(const topology::Fabric& f, const mapper::Placement& p,
                                       const mapper::HostSet& a) {
  nlohmann::ordered_json j;
  j["label"] = a.label;
  j["hosts"] = names(f, a.hosts);
  j["seconds"] = a.seconds;
  j["raw_seconds"] = a.raw_seconds;
  nlohmann::ordered_json spread = nlohmann::ordered_json::object();
  for (std::size_t i = 0; i < a.spread.size() && i < p.level_names.size(); ++i) {
    spread[p.level_names[i]] = a.spread[i];
  }
  j["spread"] = spread;
  j["fragmentation"] = a.fragmentation;
  j["degraded_hosts"] = a.degraded;
  return j;
}

std::string render_json(const topology::Fabric& f, const mapper::Placement& p,
                        const mapper::Layout& layout, std::uint32_t want) {
  nlohmann::ordered_json j;
  j["placed"] = p.placed;
  if (!p.placed) j["reason"] = p.reason;
  j["hosts_wanted"] = want;
  j["layout"] = layout.spec;
  j["fabric"] = f.source;
  j["fragmentation_before"] = p.fragmentation_before;
  if (p.placed) {
    j["chosen"] = allocation_json(f, p, p.chosen);
    j["nodelist"] = names(f, p.chosen.hosts);
    if (!p.candidates.empty()) j["candidates"] = names(f, p.candidates);
    j["sbatch"] = sbatch_args(f, p);
    j["why"] = p.why;
  }
  if (!p.tree.hosts.empty()) {
    j["slurm_tree"] = allocation_json(f, p, p.tree);
  } else {
    j["slurm_tree"] = {{"label", "slurm-tree"}, {"wait", p.tree_reason}};
  }
  j["considered"] = nlohmann::ordered_json::array();
  for (const auto& a : p.considered) j["considered"].push_back(allocation_json(f, p, a));
  return j.dump(2) + "\n";
}

std::string render_text(const topology::Fabric& f, const mapper::Placement& p,
                        const mapper::Layout& layout, std::uint32_t want, std::size_t free_hosts,
                        const std::vector<std::string>& assumptions) {
  std::ostringstream out;
  out << "topo-aware place: " << want << (want == 1 ? " host" : " hosts") << ", layout "
      << (layout.spec.empty() ? "(data parallel)" : layout.spec) << ", " << free_hosts << " of "
      << f.hosts.size() << " hosts free\n";
  if (!p.placed) {
    out << "cannot place now: " << p.reason << "\n";
    return out.str();
  }
  out << "chosen: " << names(f, p.chosen.hosts) << " (" << p.chosen.label << "; "
      << mapper::spread_text(f, p.chosen) << ")\n";
  out << "modeled communication the step waits for: " << seconds(p.chosen.seconds);
  if (!p.tree.hosts.empty()) {
    out << "; Slurm's tree choice " << names(f, p.tree.hosts) << ": " << seconds(p.tree.seconds)
        << " (" << mapper::spread_text(f, p.tree) << "; "
        << pct(p.tree.seconds, p.chosen.seconds) << ")";
  } else {
    out << "; Slurm's tree would not start it now: " << p.tree_reason;
  }
  out << "\n";
  out << "fragmentation of the free hosts: " << fixed(p.fragmentation_before, 3) << " before, "
      << fixed(p.chosen.fragmentation, 3) << " after\n";
  if (!p.why.empty()) out << "why: " << p.why << "\n";
  if (!p.candidates.empty()) out << "candidates: " << names(f, p.candidates) << "\n";
  out << mapper::model_line(layout) << "\n";
  if (!assumptions.empty()) out << mapper::assumptions_line(assumptions) << "\n";
  std::vector<std::vector<std::string>> rows = {
      {"set", "hosts", "exposed", "all comm", "spread", "frag after", "degraded"}};
  for (const auto& a : p.considered) {
    rows.push_back({a.label, names(f, a.hosts), seconds(a.seconds), seconds(a.raw_seconds),
                    mapper::spread_text(f, a), fixed(a.fragmentation, 3),
                    std::to_string(a.degraded)});
  }
  out << "\nconsidered (cheapest first; ties to the least fragmentation left):\n"
      << text_table(rows);
  return out.str();
}

void run(const PlaceOptions& o) {
  if (o.count == 0 && o.gpus <= 0) throw UsageError("give -N COUNT or --gpus G");
  if (o.count > 0 && o.gpus > 0) throw UsageError("give -N COUNT or --gpus G, not both");
  if (o.in.gpus_per_node > 0 && !o.in.node_type.empty()) {
    throw UsageError("give --gpus-per-node or --node-type, not both");
  }
  Site site = load_site(o.in);
  topology::Fabric& fabric = site.fabric;
  if (fabric.hosts.empty()) throw bad(fabric.source, "the fabric has no host");

  // GPUs per host: the options', else the first host's node model (a capture per node type).
  MapInputs step = o.in;
  step.health_dir.clear();  // read below for every host, not just the template's
  int per_host = o.in.gpus_per_node;
  std::vector<std::string> all;
  all.reserve(fabric.hosts.size());
  for (const auto& h : fabric.hosts) all.push_back(h.name);
  // A template step of the job's size on the first hosts: its request (layout resolved, launch
  // keys, calibration) and, for one node model, that model.
  auto load_template = [&](std::uint32_t n) {
    step.nodes = topology::compress_hostlist(
        std::vector<std::string>(all.begin(), all.begin() + std::min<std::size_t>(n, all.size())));
    return load_step(step, site.config, std::move(fabric));
  };
  // First one host without the layout, for the node model's GPUs (the layout is resolved for
  // the whole job below).
  const std::string layout_spec = step.layout;
  step.layout.clear();
  Loaded first = load_template(1);
  step.layout = layout_spec;
  const int model_gpus = static_cast<int>(first.nodes[0]->gpus().size());
  if (per_host <= 0) per_host = model_gpus;
  fabric = std::move(first.fabric);
  const std::uint32_t want =
      o.count > 0 ? o.count
                  : static_cast<std::uint32_t>(o.gpus < per_host ? 1 : (o.gpus + per_host - 1) / per_host);
  if (want > fabric.hosts.size()) {
    throw bad("-N", std::to_string(want) + " hosts wanted; the fabric has " +
                        std::to_string(fabric.hosts.size()));
  }
  if (o.gpus > per_host && o.gpus % per_host != 0) {
    throw UsageError("--gpus " + std::to_string(o.gpus) + ": more than one host's " +
                     std::to_string(per_host) + " GPUs must be whole hosts");
  }
  Loaded tmpl = load_template(o.gpus > 0 && o.gpus < per_host ? 1 : want);
  fabric = std::move(tmpl.fabric);
  if (o.gpus > 0 && o.gpus < per_host) {
    // The template ran every GPU of its host; a partial job runs o.gpus of them.
    step.tasks_per_node = o.gpus;
    Loaded partial = load_step(step, site.config, std::move(fabric));
    fabric = std::move(partial.fabric);
    tmpl.request = partial.request;
  }

  mapper::PlaceInput input;
  input.gpus_per_host = per_host;
  input.hosts = o.count;
  input.gpus = o.gpus;
  input.request = tmpl.request;
  input.candidates = o.candidates;
  input.free_gpus = free_gpus(fabric, o, per_host);
  // Node models: one for every host (--gpus-per-node, --node-type), else each host's capture as
  // a launch finds it; a host without one is not usable.
  std::vector<std::unique_ptr<topology::NodeTopology>> store;
  if (o.in.gpus_per_node > 0 || !o.in.node_type.empty()) {
    input.nodes.assign(fabric.hosts.size(), tmpl.nodes[0]);
  } else {
    std::vector<std::string> with;
    for (const auto& h : all) {
      if (!launch::capture_for(site.config, fabric, h).empty()) with.push_back(h);
    }
    launch::NodeModels models = launch::load_nodes(site.config, fabric, with);
    input.nodes.assign(fabric.hosts.size(), nullptr);
    for (std::size_t i = 0; i < with.size(); ++i) {
      input.nodes[host_of(fabric, with[i], "--fabric")] = models.per_host[i];
    }
    for (auto& [source, node] : models.by_source) store.push_back(std::move(node));
  }
  if (!o.in.health_dir.empty()) {
    std::vector<std::string> hosts;
    std::vector<const topology::NodeTopology*> models;
    for (std::size_t i = 0; i < fabric.hosts.size(); ++i) {
      if (input.nodes[i] == nullptr) continue;
      hosts.push_back(fabric.hosts[i].name);
      models.push_back(input.nodes[i]);
    }
    launch::read_health_dir(o.in.health_dir, fabric, hosts, models, [&](const std::string& e) {
      throw topology::Error(topology::ErrorCode::kBadInput, "--health-dir", e);
    });
  }
  std::size_t free_hosts = 0;
  for (std::size_t i = 0; i < fabric.hosts.size(); ++i) {
    free_hosts += input.free_gpus[i] >= per_host && !fabric.hosts[i].excluded ? 1 : 0;
  }

  const mapper::Placement p = mapper::place(fabric, input);
  const mapper::Layout& layout = input.request.layout;
  const std::vector<std::string>& assumptions = p.chosen.assumptions;
  std::string text;
  if (o.format == "json") {
    text = render_json(fabric, p, layout, want);
  } else if (!p.placed) {
    if (o.format == "text") write_output(o.output, render_text(fabric, p, layout, want, free_hosts, {}));
    std::fprintf(stderr, "topo-aware place: cannot place now: %s\n", p.reason.c_str());
    throw Exit{kCannotPlace};
  } else if (o.format == "nodelist") {
    text = names(fabric, p.candidates.empty() ? p.chosen.hosts : p.candidates) + "\n";
  } else if (o.format == "sbatch") {
    text = sbatch_args(fabric, p) + "\n";
  } else {
    text = render_text(fabric, p, layout, want, free_hosts, assumptions);
  }
  write_output(o.output, text);
  if (!p.placed) throw Exit{kCannotPlace};
}

}  // namespace

void add_place(CLI::App& app, Common&) {
  auto o = std::make_shared<PlaceOptions>();
  auto* sub = app.add_subcommand(
      "place", "Choose the hosts for a job by its modeled communication, against Slurm's choice");
  sub->footer(
      "The free hosts: --free (and --partial, --busy) offline, or --from-slurm (scontrol show\n"
      "nodes: hosts up, not drained, reserved or in maintenance, with their free GPUs), else\n"
      "every host the fabric does not exclude (an empty cluster). Candidate sets come from the\n"
      "fabric's locality levels and the layout's cuts (pipeline stage boundaries before\n"
      "data-parallel ones); each is scored by the mapper's model on the plan it would make\n"
      "there, with Slurm's topology/tree choice on the same free hosts beside it\n"
      "(docs/placement.md, \"How place chooses\").\n"
      "--of nodelist: one Slurm hostlist (the candidates with --candidates); --of sbatch: the\n"
      "submission arguments (--nodelist=..., or with --candidates --exclude=... --switches=N).\n"
      "Exit codes: 0 placed, 1 bad input, 2 usage, 5 cannot place on the free hosts now.");
  auto* fabric = sub->add_option("--fabric", o->in.fabric,
                                 "Fabric file (ibnetdiscover dump, topology.conf, TOML or JSON)");
  add_input_format_option(*sub, o->in.fabric_format, topology::InputKind::kFabric,
                          "the --fabric file")
      ->needs(fabric);
  sub->add_option("--config", o->in.config,
                  "The SPANK plugin's config (etc/topo-aware.toml): its fabric, captures, "
                  "calibration, as a launch reads them");
  sub->add_option("--guid-map", o->in.guid_map, "GUID-to-hostname map for ibnetdiscover dumps");
  sub->add_option("--health-dir", o->in.health_dir,
                  "The node doctor's reports (<DIR>/<host>.json): degraded hosts go last");
  sub->add_option("-N,--count", o->count, "Whole hosts the job wants");
  sub->add_option("--gpus", o->gpus,
                  "GPUs the job wants (fewer than a host's: one host; more: whole hosts)");
  auto* free = sub->add_option("--free", o->free,
                               "The hosts free now, Slurm hostlist (default: every host the "
                               "fabric does not exclude)");
  auto* busy = sub->add_option("--busy", o->busy, "Hosts taken (applied after --free)");
  auto* partial =
      sub->add_option("--partial", o->partial, "Hosts with only some GPUs free: HOST:GPUS,...");
  auto* from_slurm = sub->add_flag("--from-slurm", o->from_slurm,
                                   "The free hosts and GPUs from the running Slurm (scontrol, "
                                   "SLURM_CONF's cluster), instead of --free/--busy/--partial");
  from_slurm->excludes(free)->excludes(busy)->excludes(partial);
  sub->add_option("--partition", o->partition,
                  "With --from-slurm: the partition's hosts (default: Slurm's default partition)")
      ->needs(from_slurm);
  sub->add_option("--scontrol", o->scontrol,
                  "With --from-slurm: the scontrol to run (a path, or a PATH name)")
      ->needs(from_slurm);
  sub->add_option("--slurm-timeout", o->slurm_timeout_s,
                  "With --from-slurm: seconds each scontrol call may take")
      ->check(CLI::Range(1, 600))
      ->needs(from_slurm)
      ->capture_default_str();
  sub->add_option("--gpus-per-node", o->in.gpus_per_node,
                  "GPUs per node, for a plain node model (NVSwitch, a NIC per fabric port)");
  sub->add_option("--node-type", o->in.node_type,
                  "Node capture (hwloc or NCCL XML) describing every host");
  sub->add_option("--layout", o->in.layout,
                  "The job's layout SPEC as srun takes it (tp=8,pp=4 or file:JOB.toml); default: "
                  "data parallel");
  add_capacity_options(*sub, o->in);
  sub->add_option("--refine-moves", o->in.refine_moves,
                  "Refinement budget of each plan scored, in moves (default: the mapper's)");
  sub->add_option("--candidates", o->candidates,
                  "Return this many hosts around the choice for Slurm to choose within");
  sub->add_option("--of", o->format, "Output: text, json, nodelist or sbatch")
      ->check(CLI::IsMember({"text", "json", "nodelist", "sbatch"}))
      ->capture_default_str();
  sub->add_option("-o,--output", o->output, "Write to this file instead of stdout");
  sub->callback([o] { run(*o); });
}

}  // namespace topoaware::cli
