// srun's lines about a step (summary.h).
#include "summary.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>

#include "topoaware/launch/shadow.h"
#include "topoaware/mapper/place.h"

namespace topoaware::spank {
namespace {

std::string plural(size_t n, const std::string& word) {
  if (n == 1 || word.empty()) return std::to_string(n) + " " + word;
  if (word.back() == 'f') return std::to_string(n) + " " + word.substr(0, word.size() - 1) + "ves";
  return std::to_string(n) + " " + word + "s";
}

std::string seconds_text(double s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  return buf;
}

}  // namespace

std::vector<launch::SpreadLevel> allocation_spread(const topology::Fabric& fabric,
                                                   const std::vector<std::string>& hosts) {
  std::vector<std::uint32_t> index;
  for (const auto& h : hosts) index.push_back(static_cast<std::uint32_t>(fabric.find_host(h)));
  std::vector<launch::SpreadLevel> out;
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
    out.push_back({level.name, used.size(), fewest});
  }
  return out;
}

std::string judge_line(const topology::Fabric& fabric, const std::vector<std::string>& hosts,
                       bool* spread) {
  std::string spans, best;
  *spread = false;
  for (const auto& l : allocation_spread(fabric, hosts)) {
    if (l.used > l.fewest) *spread = true;
    spans += ", " + plural(l.used, l.level);
    best += (best.empty() ? "" : ", ") + plural(l.fewest, l.level);
  }
  std::string line = plural(hosts.size(), "host") + spans;
  if (!best.empty()) line += " (fewest possible: " + best + ")";
  return line;
}

std::vector<std::string> plan_summary(const mapper::RankPlan& plan) {
  std::vector<std::string> out;
  char buf[512];
  const double base = plan.block_cost.seconds;
  // The shadow line's saving, as the plan's change (0.0 - : never "-0.0%").
  const double change = 0.0 - launch::saving_percent(plan.cost.seconds, base);
  std::snprintf(buf, sizeof buf,
                "topo-aware: plan %s: modeled communication the step waits for %s, "
                "Slurm's order %s (%+.1f%%)%s",
                plan.layout.spec.empty() ? "dp" : plan.layout.spec.c_str(),
                seconds_text(plan.cost.seconds).c_str(), seconds_text(base).c_str(), change,
                plan.rail_optimized ? ", rail-optimized fabric" : "");
  out.emplace_back(buf);
  // What the figure models (the framework's collectives, NCCL's choice, dp's overlap), and any
  // group the plan splits over a fast domain, with why: a saving is a claim with its assumptions.
  out.push_back("topo-aware:   " + mapper::model_line(plan.layout));
  if (const std::string s = mapper::splits_line(plan.splits); !s.empty()) {
    out.push_back("topo-aware:   split: " + s);
  }
  // What the figures rest on where the inputs gave no capacity (topology.conf: no speeds).
  if (!plan.assumptions.empty()) {
    out.push_back("topo-aware:   " + mapper::assumptions_line(plan.assumptions));
  }
  if (plan.host_blocks) {
    std::snprintf(buf, sizeof buf,
                  "topo-aware:   per-node launcher: %zu hosts, %zu workers; NODE_RANK "
                  "and "
                  "CUDA_VISIBLE_DEVICES carry the plan (torchrun: static rendezvous)",
                  plan.hosts.size(), plan.tasks.size());
    out.emplace_back(buf);
  }
  for (std::size_t i = 0; i < plan.cost.dims.size(); ++i) {
    const auto& dim = plan.cost.dims[i];
    // A dim of size 1 has no groups that communicate: nothing to say.
    if (dim.groups_in_host + dim.groups_in_leaf + dim.groups_across == 0) continue;
    const double slurm = i < plan.block_cost.dims.size() ? plan.block_cost.dims[i].exposed : 0;
    std::snprintf(buf, sizeof buf,
                  "topo-aware:   %s: %s%s, exposed %s (Slurm's order %s), groups inside a host "
                  "%d, inside a leaf %d, across %d",
                  dim.dim.c_str(), dim.nccl.empty() ? "" : (dim.nccl + " ").c_str(),
                  seconds_text(dim.seconds).c_str(), seconds_text(dim.exposed).c_str(),
                  seconds_text(slurm).c_str(), dim.groups_in_host, dim.groups_in_leaf,
                  dim.groups_across);
    out.emplace_back(buf);
  }
  return out;
}

std::string quality_line(const topology::Fabric& fabric,
                         const std::vector<const topology::NodeTopology*>& nodes,
                         const mapper::Request& request) {
  if (nodes.empty()) return {};
  const mapper::Quality q = mapper::assess_step(fabric, nodes[0], request);
  if (!q.best_found) return {};
  auto spread = [&](const mapper::HostSet& a) { return mapper::spread_text(fabric, a); };
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "topo-aware:   allocation: %s; plan there %s, on the best allocation of an empty "
                "cluster %s (%s): %.2fx",
                spread(q.allocation).c_str(), seconds_text(q.allocation.seconds).c_str(),
                seconds_text(q.best.seconds).c_str(), spread(q.best).c_str(), q.slowdown);
  return buf;
}

}  // namespace topoaware::spank
