// `topo-aware map`: the exact plan a launch would make for a step, offline. Inputs are the
// fabric file, the step's hosts and node type (or plain GPUs per node) and the layout; output
// is a table for people, JSON for scripts (and `inspect`), the per-task environment, a
// hostfile for Slurm's arbitrary distribution, or the step's hosts in one order (block, plan or
// leaf-interleaved) for measuring the same step in each (scripts/calibrate.sh).
//
// `--of env` format (stable; the end-to-end test compares it with what tasks see): one line
// per task and variable, "<task> NAME=value", tasks ascending, names sorted within a task.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli.h"
#include "plan_io.h"
#include "text_table.h"
#include "topoaware/launch/port.h"
#include "topoaware/mapper/plan.h"

namespace topoaware::cli {
namespace {

struct MapOptions {
  MapInputs in;
  std::string format = "table";
  std::string output;
  std::uint32_t job_id = 0;
  std::uint32_t step_id = 0;
  std::string master_port;
  std::string master_addr;
  std::string topo_file;
  bool one_gpu_visible = false;
  std::string host_order = "plan";  // --of host-order: block, plan or interleaved
};

std::string coords_text(const mapper::TaskPlan& t) {
  std::string s;
  for (const auto& [n, c] : t.coords) s += (s.empty() ? "" : ",") + n + ":" + std::to_string(c);
  return s;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

std::string pct_faster(double plan, double block) {
  if (block <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", (plan - block) / block * 100);
  return buf;
}

// The framework's collective, short: "rs+ag" for reduce-scatter + all-gather.
std::string collective_text(const std::string& c) {
  return c == "reduce-scatter+all-gather" ? "rs+ag" : c;
}

std::string render_table(const mapper::RankPlan& p, const mapper::RankPlan* topo,
                         const std::vector<std::string>& health, const MapOptions& o) {
  std::ostringstream out;
  out << "topo-aware map: " << p.tasks.size()
      << (p.host_blocks ? " workers of a per-node launcher" : " tasks") << " on " << p.hosts.size()
      << " hosts, layout " << (p.layout.spec.empty() ? "(data parallel)" : p.layout.spec)
      << ", algorithm " << to_string(p.algorithm) << "\n";
  if (p.host_blocks) {
    out << "per-node launcher: one task a host, its workers ranks NODE_RANK*"
        << p.tasks.size() / std::max<std::size_t>(1, p.hosts.size())
        << "+LOCAL_RANK; the plan orders hosts (node) and each host's GPUs (gpu)\n";
  }
  out << "modeled communication the step waits for: " << seconds(p.cost.seconds)
      << " (block order " << seconds(p.block_cost.seconds) << ", "
      << pct_faster(p.cost.seconds, p.block_cost.seconds) << "; lower bound "
      << seconds(p.lower_bound) << "; all communication " << seconds(p.cost.raw_seconds)
      << ", dp's overlapped with compute)\n";
  out << mapper::model_line(p.layout) << "\n";
  if (const std::string s = mapper::splits_line(p.splits); !s.empty()) out << "split: " << s << "\n";
  if (topo && topo != &p) {
    out << "topo would give: " << seconds(topo->cost.seconds) << "\n";
  }
  if (!p.assumptions.empty()) out << mapper::assumptions_line(p.assumptions) << "\n";
  if (p.kept_block)
    out << "note: no assignment the model rates faster than block order was found\n";
  for (const auto& h : health) out << "degraded (health report): " << h << "\n";
  if (!p.cost.bottleneck.empty()) out << "bottleneck: " << p.cost.bottleneck << "\n";
  std::vector<std::vector<std::string>> dims = {{"dim", "size", "collective", "nccl", "time",
                                                 "exposed", "block", "in host", "in leaf",
                                                 "across"}};
  for (std::size_t i = 0; i < p.cost.dims.size(); ++i) {
    const auto& d = p.cost.dims[i];
    std::string size = "-";
    for (const auto& ld : p.layout.dims) {
      if (ld.name == d.dim) size = std::to_string(ld.size);
    }
    if (size == "1") continue;
    double block = i < p.block_cost.dims.size() ? p.block_cost.dims[i].exposed : 0;
    dims.push_back({d.dim, size, collective_text(d.collective), d.nccl.empty() ? "p2p" : d.nccl,
                    seconds(d.seconds), seconds(d.exposed), seconds(block),
                    std::to_string(d.groups_in_host), std::to_string(d.groups_in_leaf),
                    std::to_string(d.groups_across)});
  }
  out << "\nper dim (time: all of it; exposed: what the step waits for; groups whose traffic stays "
         "inside a host / a leaf group / crosses above):\n"
      << text_table(dims);
  std::vector<std::vector<std::string>> tiers = {{"tier", "bytes/step", "block"}};
  for (std::size_t i = 0; i < p.cost.tiers.size(); ++i) {
    double b = i < p.block_cost.tiers.size() ? p.block_cost.tiers[i].bytes : 0;
    tiers.push_back({p.cost.tiers[i].tier, gigabytes(p.cost.tiers[i].bytes), gigabytes(b)});
  }
  out << "\nbytes per tier:\n" << text_table(tiers);
  // The task's HCAs; a socket-only node's interface (NCCL_SOCKET_IFNAME) when it has none.
  auto nic_text = [](const mapper::TaskPlan& t) -> std::string {
    if (!t.nics.empty()) return join(t.nics);
    if (!t.netdev.empty()) return t.netdev + " (socket)";
    return "-";
  };
  std::vector<std::vector<std::string>> rows = {{p.host_blocks ? "node" : "task", "rank", "host",
                                                 "local", "gpu", "busid", "nic", "cpus", "coords"}};
  for (const auto& t : p.tasks) {
    rows.push_back({std::to_string(p.host_blocks ? t.node_rank : t.task), std::to_string(t.rank),
                    p.hosts[t.host], std::to_string(t.local_rank), std::to_string(t.gpu),
                    t.gpu_busid.empty() ? "-" : t.gpu_busid, nic_text(t),
                    t.cpus.empty() ? "-" : cpu_ranges(t.cpus), coords_text(t)});
  }
  out << "\ntasks:\n" << text_table(rows);
  (void)o;
  return out.str();
}

constexpr const char* kRanksMark = "\x01ranks\x01";

// The "ranks" array as nlohmann's dump(2) writes it at depth 1 (keys sorted), written to `os`
// through one reused buffer: at 131,072 ranks (some 50 MB) building the whole text first, with
// its temporaries and copies, was most of `map`'s time.
void write_ranks_json(const mapper::RankPlan& p, std::ostream& os) {
  if (p.tasks.empty()) {
    os << "[]";
    return;
  }
  constexpr std::size_t kFlush = 1 << 20;
  std::string out;
  out.reserve(kFlush + 4096);
  auto str = [&out](const std::string& v) { out += nlohmann::json(v).dump(); };
  auto num = [&out](long long v) { out += std::to_string(v); };
  out += "[\n";
  std::vector<std::pair<std::string, int>> coords;
  for (std::size_t i = 0; i < p.tasks.size(); ++i) {
    const auto& t = p.tasks[i];
    out += "    {\n      \"busid\": ";
    str(t.gpu_busid);
    out += ",\n      \"coords\": ";
    coords = t.coords;
    std::sort(coords.begin(), coords.end());
    if (coords.empty()) {
      out += "{}";
    } else {
      out += "{\n";
      for (std::size_t k = 0; k < coords.size(); ++k) {
        out += "        ";
        str(coords[k].first);
        out += ": ";
        num(coords[k].second);
        out += k + 1 < coords.size() ? ",\n" : "\n";
      }
      out += "      }";
    }
    out += ",\n      \"cpus\": ";
    str(cpu_ranges(t.cpus));
    out += ",\n      \"gpu\": ";
    num(t.gpu);
    out += ",\n      \"host\": ";
    str(p.hosts[t.host]);
    out += ",\n      \"local_rank\": ";
    num(t.local_rank);
    out += ",\n      \"netdev\": ";
    str(t.netdev);
    out += ",\n      \"nic\": ";
    str(t.nics.empty() ? std::string() : t.nics[0]);
    out += ",\n      \"nics\": ";
    if (t.nics.empty()) {
      out += "[]";
    } else {
      out += "[\n";
      for (std::size_t k = 0; k < t.nics.size(); ++k) {
        out += "        ";
        str(t.nics[k]);
        out += k + 1 < t.nics.size() ? ",\n" : "\n";
      }
      out += "      ]";
    }
    out += ",\n      \"node_rank\": ";
    num(t.node_rank);
    out += ",\n      \"rank\": ";
    num(t.rank);
    out += ",\n      \"task\": ";
    num(t.task);
    out += i + 1 < p.tasks.size() ? "\n    },\n" : "\n    }\n";
    if (out.size() >= kFlush) {
      if (!(os << out)) return;  // the writer reports the failed stream
      out.clear();
    }
  }
  out += "  ]";
  os << out;
}

void write_json(const mapper::RankPlan& p, const mapper::RankPlan& topo,
                const std::vector<std::string>& health, const MapOptions& o, std::ostream& os) {
  nlohmann::json j;
  j["version"] = 1;
  j["inputs"] = inputs_to_json(o.in);
  j["algorithm"] = to_string(p.algorithm);
  j["launcher"] = std::string(
      mapper::to_string(p.host_blocks ? mapper::Launcher::kPerNode : mapper::Launcher::kPerGpu));
  j["hosts"] = p.hosts;
  nlohmann::json layout;
  layout["spec"] = p.layout.spec;
  layout["dims"] = nlohmann::json::array();
  for (const auto& d : p.layout.dims) {
    layout["dims"].push_back({{"name", d.name},
                              {"size", d.size},
                              {"pattern", std::string(mapper::to_string(d.pattern))}});
  }
  layout["split"] = std::string(mapper::to_string(p.layout.split));
  layout["nccl"] = mapper::nccl::to_string(p.layout.nccl);
  layout["framework"] = {{"sequence_parallel", p.layout.framework.sequence_parallel},
                         {"distributed_optimizer", p.layout.framework.distributed_optimizer},
                         {"overlap_grad_reduce", p.layout.framework.overlap_grad_reduce},
                         {"overlap_param_gather", p.layout.framework.overlap_param_gather}};
  j["layout"] = layout;
  j["splits"] = nlohmann::json::array();
  for (const auto& s : p.splits) {
    j["splits"].push_back({{"dim", s.dim},
                           {"groups", s.groups},
                           {"split", s.split},
                           {"place", s.place},
                           {"why", s.why}});
  }
  // The ranks (131,072 at scale) are written directly, in the layout nlohmann's dump(2) gives
  // the rest: building them as a JSON tree first took most of `map`'s time and memory.
  j["ranks"] = kRanksMark;
  nlohmann::json cost;
  cost["plan"] = p.cost.seconds;
  cost["topo"] = topo.cost.seconds;
  cost["block"] = p.block_cost.seconds;
  cost["lower_bound"] = p.lower_bound;
  cost["unit"] = "seconds of communication the step waits for (modeled: each dim's exposed part)";
  cost["searched"] = p.searched_seconds;
  cost["kept_block"] = p.kept_block;
  cost["refine_moves"] = p.refine_moves;
  cost["plan_detail"] = cost_to_json(p.cost);
  cost["block_detail"] = cost_to_json(p.block_cost);
  j["cost"] = cost;
  j["rail_optimized"] = p.rail_optimized;
  j["degraded"] = health;
  j["assumptions"] = p.assumptions;
  const std::string rest = j.dump(2);
  const std::string mark = nlohmann::json(kRanksMark).dump();
  const std::size_t at = rest.find(mark);
  if (at == std::string::npos) throw std::logic_error("map: the ranks mark is missing");
  os.write(rest.data(), static_cast<std::streamsize>(at));
  write_ranks_json(p, os);
  os << std::string_view(rest).substr(at + mark.size()) << '\n';
}

// Per Slurm task: a per-node launcher's task t runs on host t (one a host, Slurm's order).
std::string render_env(const mapper::RankPlan& p, mapper::Ids ids, const MapOptions& o) {
  mapper::EnvOptions env;
  env.job_id = o.job_id;
  // As srun derives it for the step (launch/port.h), with this machine's ephemeral range.
  env.master_port =
      !o.master_port.empty()
          ? o.master_port
          : std::to_string(launch::master_port(o.job_id, o.step_id, launch::ephemeral_ports()));
  env.master_addr = o.master_addr;
  env.topo_file = o.topo_file;
  env.one_gpu_visible = o.one_gpu_visible;
  env.ids = ids;
  std::string out;
  const std::size_t tasks = p.host_blocks ? p.hosts.size() : p.tasks.size();
  for (std::size_t t = 0; t < tasks; ++t) {
    const mapper::Environment e =
        p.host_blocks ? mapper::launcher_environment(p, static_cast<std::uint32_t>(t), env)
                      : mapper::task_environment(p, static_cast<int>(t), env);
    for (const auto& [k, v] : e) out += std::to_string(t) + " " + k + "=" + v + "\n";
  }
  return out;
}

// Slurm's arbitrary distribution (SLURM_HOSTFILE, srun -m arbitrary): line r is rank r's host.
std::string render_hostfile(const mapper::RankPlan& p) {
  if (p.host_blocks) {
    throw UsageError(
        "--of hostfile is for one task per GPU (MPI, srun -m arbitrary); a per-node "
        "launcher runs one task a host in block order");
  }
  std::vector<std::string> by_rank(p.tasks.size());
  for (const auto& t : p.tasks) by_rank[static_cast<std::size_t>(t.rank)] = p.hosts[t.host];
  std::string out;
  for (const auto& h : by_rank) out += h + "\n";
  return out;
}

// --of host-order: the step's hosts, one a line, in one of three orders, so that a script can
// run the same step in each and see what host order costs (scripts/calibrate.sh):
//   block        the request's (Slurm's) order;
//   plan         the order the plan's ranks reach the hosts (first appearance in rank order);
//   interleaved  round-robin over the fabric's leaf groups, groups taken in block order: next to
//                each other in the order, hosts sit on different leaves wherever the step's
//                hosts allow, the worst locality a ring or tree can get from host order alone.
// Where the fabric has no leaf level, or every host is on one leaf, interleaved is block order.
std::string render_host_order(const mapper::RankPlan& p, const topology::Fabric& f,
                              const std::string& order) {
  std::vector<std::uint32_t> hosts;  // indexes into p.hosts
  if (order == "block") {
    for (std::uint32_t h = 0; h < p.hosts.size(); ++h) hosts.push_back(h);
  } else if (order == "plan") {
    std::vector<const mapper::TaskPlan*> by_rank;
    for (const auto& t : p.tasks) by_rank.push_back(&t);
    std::sort(
        by_rank.begin(), by_rank.end(),
        [](const mapper::TaskPlan* a, const mapper::TaskPlan* b) { return a->rank < b->rank; });
    std::vector<char> seen(p.hosts.size(), 0);
    for (const auto* t : by_rank) {
      if (seen[t->host] == 0) hosts.push_back(t->host);
      seen[t->host] = 1;
    }
  } else {  // interleaved
    // The leaves: the innermost level whose groups switches join (tier 1), whatever the fabric
    // calls it ("leaf", a topology/block "block", a TOML unit's own name).
    const topology::LocalityLevel* leaf = nullptr;
    for (const auto& lv : f.levels) {
      if (lv.tier >= 1 && lv.group_of_host.size() == f.hosts.size()) {
        leaf = &lv;
        break;
      }
    }
    // Each leaf group's hosts in block order, the groups in the order block order meets them.
    std::vector<std::vector<std::uint32_t>> groups;
    std::map<std::uint32_t, std::size_t> group_slot;
    // A host the fabric does not list is a group of its own kind (~0), never a real leaf's.
    for (std::uint32_t h = 0; h < p.hosts.size(); ++h) {
      std::uint32_t g = 0;
      if (leaf != nullptr) {
        const std::int64_t at = f.find_host(p.hosts[h]);
        g = at < 0 ? ~std::uint32_t{0} : leaf->group_of_host[static_cast<std::size_t>(at)];
      }
      auto [slot, fresh] = group_slot.emplace(g, groups.size());
      if (fresh) groups.emplace_back();
      groups[slot->second].push_back(h);
    }
    for (std::size_t i = 0; hosts.size() < p.hosts.size(); ++i) {
      for (const auto& members : groups) {
        if (i < members.size()) hosts.push_back(members[i]);
      }
    }
  }
  std::string out;
  for (std::uint32_t h : hosts) out += p.hosts[h] + "\n";
  return out;
}

}  // namespace

void add_map(CLI::App& app, Common& common) {
  auto o = std::make_shared<MapOptions>();
  auto* sub = app.add_subcommand(
      "map",
      "Plan which GPU, NIC and CPUs each task of a step gets, and its cost against Slurm's "
      "block order");
  auto* fabric = sub->add_option("--fabric", o->in.fabric,
                                 "Fabric file (ibnetdiscover dump, topology.conf, TOML or JSON)");
  add_input_format_option(*sub, o->in.fabric_format, topology::InputKind::kFabric,
                          "the --fabric file")
      ->needs(fabric);
  sub->add_option("--health-dir", o->in.health_dir,
                  "The node doctor's reports (<DIR>/<host>.json): degraded NICs carry what they "
                  "measured");
  sub->add_option("--config", o->in.config,
                  "The SPANK plugin's config (etc/topo-aware.toml): its fabric, GUID map and "
                  "[[node]] captures, exactly as a launch reads them");
  sub->add_option("--guid-map", o->in.guid_map, "GUID-to-hostname map for ibnetdiscover dumps");
  sub->add_option("--nodes", o->in.nodes, "The step's hosts, Slurm hostlist (node[01-16])")
      ->required();
  sub->add_option("--gpus-per-node", o->in.gpus_per_node,
                  "GPUs per node, for a plain node model (NVSwitch, a NIC per fabric port)");
  sub->add_option("--node-type", o->in.node_type,
                  "Node capture (hwloc or NCCL XML) describing every host");
  sub->add_option("--tasks-per-node", o->in.tasks_per_node, "Tasks per node (default: its GPUs)");
  sub->add_option("--ntasks", o->in.ntasks, "Total tasks, spread like Slurm's block distribution");
  sub->add_option("--layout", o->in.layout,
                  "Layout, as --topo-aware=SPEC takes it: tp=8,pp=4,dp=auto[,order=tp-cp-ep-dp-pp] "
                  "or file:JOB.toml, with launch keys launcher=, nproc=, ids= (default: data "
                  "parallel)");
  sub->add_option("--launcher", o->in.launcher,
                  "auto (default: per-node for one task a host on multi-GPU hosts), per-gpu, or "
                  "per-node (torchrun, accelerate, deepspeed: one task a host spawning workers)");
  sub->add_option("--nproc", o->in.nproc,
                  "Per-node launcher: workers per host (default: its GPUs); implies per-node");
  sub->add_option("--ids", o->in.ids,
                  "plan (default) or slurm: SLURM_PROCID/LOCALID/NODEID carry the plan too (--of "
                  "env)");
  sub->add_flag("--gpus-bound", o->in.gpus_bound,
                "Slurm binds the job's GPUs to the tasks (--gpus-per-node, --gpus-per-task): task "
                "k of each host keeps GPU k and the plan permutes ranks, as a launch plans it");
  add_capacity_options(*sub, o->in);
  sub->add_option("--algo", o->in.algo, "topo (default), block, cyclic or random");
  sub->add_option("--seed", o->in.seed, "Seed for --algo random");
  sub->add_option("--refine-moves", o->in.refine_moves,
                  "Refinement budget in evaluated moves (default: the mapper's)");
  sub->add_option("--of", o->format,
                  "Output: table (default), json, env, hostfile, or host-order (the hosts, one a "
                  "line, in the --order given)");
  sub->add_option("--order", o->host_order,
                  "With --of host-order: block (Slurm's), plan (default: as the plan's ranks reach "
                  "them) or interleaved (round-robin over the fabric's leaves)")
      ->check(CLI::IsMember({"block", "plan", "interleaved"}));
  sub->add_option("-o,--output", o->output, "Write to this file instead of stdout");
  sub->add_option("--job-id", o->job_id, "Job id (with --step-id, MASTER_PORT as srun derives it)");
  sub->add_option("--step-id", o->step_id, "Step id of the job (default 0)");
  sub->add_option("--master-port", o->master_port, "MASTER_PORT instead of the derived one");
  sub->add_option("--master-addr", o->master_addr,
                  "MASTER_ADDR instead of rank 0's host name (the plugin uses Slurm's NodeAddr "
                  "where the name does not resolve)");
  sub->add_option("--topo-file", o->topo_file, "NCCL_TOPO_FILE to export, when wanted");
  sub->add_flag("--one-gpu-visible", o->one_gpu_visible,
                "CUDA_VISIBLE_DEVICES lists only the task's GPU");
  sub->callback([o, &common] {
    (void)common;
    if (o->format != "table" && o->format != "json" && o->format != "env" &&
        o->format != "hostfile" && o->format != "host-order") {
      throw UsageError("--of " + o->format + ": expected table, json, env, hostfile or host-order");
    }
    Loaded l = load_inputs(o->in);
    mapper::RankPlan p = mapper::plan(l.fabric, l.nodes, l.request);
    std::string text;
    if (o->format == "env") {
      text = render_env(p, l.ids, *o);
    } else if (o->format == "hostfile") {
      text = render_hostfile(p);
    } else if (o->format == "host-order") {
      text = render_host_order(p, l.fabric, o->host_order);
    } else {
      mapper::RankPlan topo_plan;
      const mapper::RankPlan* topo = &p;
      if (p.algorithm != mapper::Algorithm::kTopo) {
        mapper::Request r = l.request;
        r.algorithm = mapper::Algorithm::kTopo;
        topo_plan = mapper::plan(l.fabric, l.nodes, r);
        topo = &topo_plan;
      }
      if (o->format == "json") {
        write_output(o->output, [&](std::ostream& os) { write_json(p, *topo, l.health, *o, os); });
        return;
      }
      text = render_table(p, topo, l.health, *o);
    }
    write_output(o->output, text);
  });
}

}  // namespace topoaware::cli
