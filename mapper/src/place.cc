// place(): candidate host sets built from the fabric's locality levels and the layout's cuts,
// each scored by the mapper's model. docs/placement.md, "How place chooses", is the prose.
#include "topoaware/mapper/place.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "topoaware/mapper/layout.h"
#include "topoaware/mapper/plan.h"
#include "topoaware/mapper/slurm_select.h"

namespace topoaware::mapper {
namespace {

using topology::Fabric;

std::size_t groups_of(const topology::LocalityLevel& lv) {
  std::size_t n = 0;
  for (std::uint32_t g : lv.group_of_host) n = std::max<std::size_t>(n, g + 1);
  return n;
}

bool is_degraded(const topology::HostInfo& h) {
  if (h.degraded < 1.0) return true;
  for (const auto& [nic, f] : h.nic_fraction) {
    if (f < 1.0) return true;
  }
  return false;
}

// The grouping levels as a tree: level k's groups, each with its children at level k-1 (hosts at
// k = 0), and a root above that holds every top group.
struct Hierarchy {
  std::vector<std::size_t> fabric_level;          // per level k: index into Fabric::levels
  std::vector<std::vector<std::uint32_t>> group;  // per level k: group of each host
  // kids[k][g]: level k-1 groups inside group g of level k; kids[0][g]: hosts, ascending.
  std::vector<std::vector<std::vector<std::uint32_t>>> kids;
  std::vector<std::size_t> largest;  // per level k: hosts in its largest group
  std::size_t root = 0;  // level index of the root (one group)
  std::size_t leaf = 0;  // first level joined by switches (tier >= 1), else 0
};

Hierarchy hierarchy(const Fabric& fabric) {
  Hierarchy h;
  h.fabric_level = group_levels(fabric);
  const std::size_t hosts = fabric.hosts.size();
  for (std::size_t li : h.fabric_level) h.group.push_back(fabric.levels[li].group_of_host);
  h.group.emplace_back(hosts, 0);  // the root
  h.root = h.group.size() - 1;
  h.leaf = 0;
  for (std::size_t k = 0; k < h.fabric_level.size(); ++k) {
    if (fabric.levels[h.fabric_level[k]].tier >= 1) {
      h.leaf = k;
      break;
    }
  }
  h.kids.resize(h.group.size());
  h.largest.assign(h.group.size(), 0);
  for (std::size_t k = 0; k < h.group.size(); ++k) {
    std::size_t n = 0;
    for (std::uint32_t g : h.group[k]) n = std::max<std::size_t>(n, g + 1);
    h.kids[k].resize(n);
    if (k == 0) {
      for (std::uint32_t host = 0; host < hosts; ++host) h.kids[0][h.group[0][host]].push_back(host);
      for (const auto& g : h.kids[0]) h.largest[0] = std::max(h.largest[0], g.size());
      continue;
    }
    std::vector<std::size_t> size(n, 0);
    for (std::uint32_t host = 0; host < hosts; ++host) ++size[h.group[k][host]];
    h.largest[k] = size.empty() ? 0 : *std::max_element(size.begin(), size.end());
    std::vector<char> seen(h.kids[k - 1].size(), 0);
    for (std::uint32_t host = 0; host < hosts; ++host) {
      const std::uint32_t below = h.group[k - 1][host];
      if (seen[below]) continue;
      seen[below] = 1;
      h.kids[k][h.group[k][host]].push_back(below);
    }
  }
  return h;
}

// Hosts a job can take, per level's group, with a cut of `chunk` hosts kept whole at level
// `align` and above (a chunk of the layout -- a pipeline stage -- never spans two groups of it).
struct Capacity {
  std::vector<std::vector<std::uint32_t>> cap;  // per level k, per group
};

Capacity capacity(const Hierarchy& h, const std::vector<char>& usable, std::uint32_t chunk,
                  std::size_t align) {
  Capacity c;
  c.cap.resize(h.group.size());
  for (std::size_t k = 0; k < h.group.size(); ++k) {
    c.cap[k].assign(h.kids[k].size(), 0);
    for (std::size_t g = 0; g < h.kids[k].size(); ++g) {
      std::uint32_t sum = 0;
      if (k == 0) {
        for (std::uint32_t host : h.kids[0][g]) sum += usable[host] ? 1 : 0;
      } else {
        for (std::uint32_t kid : h.kids[k][g]) sum += c.cap[k - 1][kid];
      }
      if (k == align && chunk > 1) sum -= sum % chunk;
      c.cap[k][g] = sum;
    }
  }
  return c;
}

// Takes `need` hosts from group g of level k: among its children the smallest that holds the
// rest, else the fullest (ties: the earlier), as Slurm's tree compares leaves -- but in units of
// the cut, and healthy hosts first inside the innermost group. `fullest`: always the fullest
// child first, so a split takes the emptiest groups whole and leaves partly used ones alone
// (where other jobs run, and their traffic may load the uplinks).
void take(const Hierarchy& h, const Capacity& c, const Fabric& fabric,
          const std::vector<char>& usable, std::size_t k, std::uint32_t g, std::uint32_t need,
          std::vector<std::uint32_t>& out, bool fullest = false) {
  if (k == 0) {
    std::vector<std::uint32_t> hosts;
    for (std::uint32_t host : h.kids[0][g]) {
      if (usable[host]) hosts.push_back(host);
    }
    std::stable_sort(hosts.begin(), hosts.end(), [&](std::uint32_t a, std::uint32_t b) {
      return is_degraded(fabric.hosts[a]) < is_degraded(fabric.hosts[b]);
    });
    for (std::size_t i = 0; i < hosts.size() && i < need; ++i) out.push_back(hosts[i]);
    return;
  }
  const auto& kids = h.kids[k][g];
  std::vector<char> used(kids.size(), 0);
  std::uint32_t rest = need;
  while (rest > 0) {
    std::size_t best = kids.size();
    bool best_holds = false;
    for (std::size_t i = 0; i < kids.size(); ++i) {
      const std::uint32_t cap = c.cap[k - 1][kids[i]];
      if (used[i] || cap == 0) continue;
      const bool holds = cap >= rest;
      if (best == kids.size()) {
        best = i;
        best_holds = holds;
        continue;
      }
      const std::uint32_t bc = c.cap[k - 1][kids[best]];
      if (fullest) {
        if (cap > bc) best = i;
      } else if (holds && (!best_holds || cap < bc)) {
        best = i;
        best_holds = true;
      } else if (!holds && !best_holds && cap > bc) {
        best = i;
      }
    }
    if (best == kids.size()) return;  // capacity said it fits; cannot happen
    used[best] = 1;
    const std::uint32_t n = std::min(rest, c.cap[k - 1][kids[best]]);
    take(h, c, fabric, usable, k - 1, kids[best], n, out, fullest);
    rest -= n;
  }
}

// The layout's cuts, cheapest first: with dims innermost first, cutting between the outermost
// dim's coordinates keeps every group of the inner dims whole (Megatron's order ends in pp: a
// cut between pipeline stages), then between the next dim's. Each as hosts per chunk.
std::vector<std::pair<std::string, std::uint32_t>> cuts(const Layout& layout, std::uint32_t hosts) {
  std::vector<std::pair<std::string, std::uint32_t>> out;
  std::uint64_t outer = 1;
  for (auto it = layout.dims.rbegin(); it != layout.dims.rend(); ++it) {
    if (it->size <= 1) continue;
    outer *= static_cast<std::uint64_t>(it->size);
    if (outer > hosts || hosts % outer != 0) break;
    const auto chunk = static_cast<std::uint32_t>(hosts / outer);
    if (chunk <= 1) break;
    out.emplace_back(it->name, chunk);
  }
  return out;
}

std::string hosts_needed_text(std::uint32_t n) {
  return std::to_string(n) + (n == 1 ? " host" : " hosts");
}

}  // namespace

std::string level_plural(const std::string& name) {
  if (name.size() > 1 && name.back() == 'f') return name.substr(0, name.size() - 1) + "ves";
  return name + "s";
}

std::size_t leaf_level(const Fabric& fabric) {
  const auto levels = group_levels(fabric);
  for (std::size_t i = 0; i < levels.size(); ++i) {
    if (fabric.levels[levels[i]].tier >= 1) return i;
  }
  return 0;
}

std::string spread_text(const Fabric& fabric, const HostSet& set) {
  const auto levels = group_levels(fabric);
  std::string s;
  for (std::size_t i = 0; i < set.spread.size() && i < levels.size(); ++i) {
    const std::string& name = fabric.levels[levels[i]].name;
    s += (s.empty() ? "" : ", ") + std::to_string(set.spread[i]) + " " +
         (set.spread[i] == 1 ? name : level_plural(name));
  }
  return s.empty() ? "-" : s;
}

std::vector<std::size_t> group_levels(const Fabric& fabric) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < fabric.levels.size(); ++i) {
    const auto& lv = fabric.levels[i];
    const std::size_t n = groups_of(lv);
    if (n == 0 || n >= fabric.hosts.size()) continue;  // every host alone
    if (n == 1 && i + 1 == fabric.levels.size()) continue;  // the whole fabric
    if (!out.empty() && groups_of(fabric.levels[out.back()]) == n) continue;  // same partition
    out.push_back(i);
  }
  return out;
}

double fragmentation(const Fabric& fabric, const std::vector<char>& free) {
  if (free.size() != fabric.hosts.size()) throw Error("fragmentation: one flag per host expected");
  const std::size_t total = static_cast<std::size_t>(std::count(free.begin(), free.end(), 1));
  const auto levels = group_levels(fabric);
  if (total == 0 || levels.empty()) return 0;
  double sum = 0;
  for (std::size_t li : levels) {
    const auto& lv = fabric.levels[li];
    const std::size_t n = groups_of(lv);
    std::vector<std::size_t> size(n, 0), avail(n, 0);
    for (std::size_t host = 0; host < lv.group_of_host.size(); ++host) {
      ++size[lv.group_of_host[host]];
      if (free[host]) ++avail[lv.group_of_host[host]];
    }
    std::size_t stranded = 0;
    for (std::size_t g = 0; g < n; ++g) {
      if (avail[g] < size[g]) stranded += avail[g];
    }
    sum += static_cast<double>(stranded) / static_cast<double>(total);
  }
  return sum / static_cast<double>(levels.size());
}

HostSet score_allocation(const Fabric& fabric, const PlaceInput& input,
                            std::vector<std::uint32_t> hosts) {
  std::sort(hosts.begin(), hosts.end());
  HostSet a;
  a.hosts = hosts;
  if (hosts.empty()) return a;
  Request r = input.request;
  r.hosts.clear();
  r.tasks_per_host.clear();
  std::vector<const topology::NodeTopology*> nodes;
  const int per_host = input.gpus > 0 && input.hosts <= 1 ? input.gpus : input.gpus_per_host;
  for (std::uint32_t host : hosts) {
    if (host >= fabric.hosts.size()) throw Error("place: host index out of range");
    r.hosts.push_back(fabric.hosts[host].name);
    r.tasks_per_host.push_back(per_host);
    nodes.push_back(host < input.nodes.size() ? input.nodes[host] : nullptr);
    if (nodes.back() == nullptr) {
      throw Error("place: host " + fabric.hosts[host].name + " has no node model");
    }
    if (is_degraded(fabric.hosts[host])) ++a.degraded;
  }
  const RankPlan p = plan(fabric, nodes, r);
  a.seconds = p.cost.seconds;
  a.raw_seconds = p.cost.raw_seconds;
  a.assumptions = p.assumptions;
  for (std::size_t li : group_levels(fabric)) {
    std::vector<std::uint32_t> g;
    for (std::uint32_t host : hosts) g.push_back(fabric.levels[li].group_of_host[host]);
    std::sort(g.begin(), g.end());
    a.spread.push_back(static_cast<std::size_t>(std::unique(g.begin(), g.end()) - g.begin()));
  }
  return a;
}

Placement place(const Fabric& fabric, const PlaceInput& input) {
  const std::size_t n_hosts = fabric.hosts.size();
  if (input.free_gpus.size() != n_hosts || input.nodes.size() != n_hosts) {
    throw Error("place: free GPUs and node models are needed for each of the fabric's " +
                std::to_string(n_hosts) + " hosts");
  }
  if (input.hosts == 0 && input.gpus <= 0) throw Error("place: the job asks for no hosts");
  if (input.gpus_per_host <= 0) throw Error("place: GPUs per host must be positive");
  const bool one_host_part = input.gpus > 0 && input.gpus < input.gpus_per_host;
  const std::uint32_t want =
      one_host_part ? 1
                    : (input.hosts > 0 ? input.hosts
                                       : static_cast<std::uint32_t>(
                                             (input.gpus + input.gpus_per_host - 1) /
                                             input.gpus_per_host));
  const int need_gpus = one_host_part ? input.gpus : input.gpus_per_host;

  Placement out;
  for (std::size_t li : group_levels(fabric)) out.level_names.push_back(fabric.levels[li].name);
  std::vector<char> usable(n_hosts, 0), free(n_hosts, 0);
  std::size_t n_usable = 0;
  for (std::size_t host = 0; host < n_hosts; ++host) {
    const bool ok = !fabric.hosts[host].excluded && input.nodes[host] != nullptr;
    free[host] = ok && input.free_gpus[host] >= input.gpus_per_host ? 1 : 0;
    usable[host] = ok && input.free_gpus[host] >= need_gpus ? 1 : 0;
    n_usable += usable[host];
  }
  out.fragmentation_before = fragmentation(fabric, free);
  PlaceInput scored = input;
  scored.hosts = want;

  auto finish = [&](HostSet a, const std::string& label) {
    a.label = label;
    std::vector<char> left = free;
    for (std::uint32_t host : a.hosts) left[host] = 0;
    a.fragmentation = fragmentation(fabric, left);
    return a;
  };

  // Slurm's own choice on the same free hosts, whole nodes only (slurm_select.h).
  {
    std::vector<slurm::Node> nodes = slurm::nodes_of(fabric);
    for (std::size_t host = 0; host < n_hosts; ++host) nodes[host].free = usable[host] != 0;
    slurm::Job job;
    job.nodes = want;
    const slurm::Selection s = slurm::select_tree(nodes, slurm::switches_of(fabric), job);
    if (s.outcome == slurm::Outcome::kSelected) {
      out.tree = finish(score_allocation(fabric, scored, s.nodes), "slurm-tree");
    } else {
      out.tree.label = "slurm-tree";
      out.tree_reason = s.reason;
    }
  }

  if (n_usable < want) {
    out.reason = "the job wants " + hosts_needed_text(want) + " with " +
                 std::to_string(need_gpus) + " free GPUs each; " + std::to_string(n_usable) +
                 " of the fabric's " + std::to_string(n_hosts) + " hosts have them";
    return out;
  }

  // A single host of a partial job: the best fit (fewest free GPUs that hold it), healthy first.
  if (one_host_part || want == 1) {
    std::uint32_t best = 0;
    bool found = false;
    for (std::uint32_t host = 0; host < n_hosts; ++host) {
      if (!usable[host]) continue;
      auto key = [&](std::uint32_t x) {
        return std::make_pair(is_degraded(fabric.hosts[x]), input.free_gpus[x]);
      };
      if (!found || key(host) < key(best)) best = host;
      found = true;
    }
    out.chosen = finish(score_allocation(fabric, scored, {best}), "best-fit");
    out.considered.push_back(out.chosen);
    out.placed = true;
  } else {
    const Hierarchy h = hierarchy(fabric);
    std::vector<std::pair<std::string, std::uint32_t>> plans = cuts(input.request.layout, want);
    plans.emplace_back("", 1);  // counts alone
    for (const auto& [dim, chunk] : plans) {
      // Keep each chunk inside one group of the lowest level that has a group that large.
      std::size_t align = h.root;
      for (std::size_t k = h.leaf; k <= h.root; ++k) {
        if (h.largest[k] >= chunk) {
          align = k;
          break;
        }
      }
      const Capacity c = capacity(h, usable, chunk, align);
      // The lowest level with a group that holds the job; its best-fitting groups (two).
      for (std::size_t k = 0; k <= h.root; ++k) {
        std::vector<std::uint32_t> fit;
        for (std::uint32_t g = 0; g < c.cap[k].size(); ++g) {
          if (c.cap[k][g] >= want) fit.push_back(g);
        }
        if (fit.empty()) continue;
        std::stable_sort(fit.begin(), fit.end(),
                         [&](std::uint32_t a, std::uint32_t b) { return c.cap[k][a] < c.cap[k][b]; });
        // Where the job is split (above the leaves), the best-fitting group is also taken
        // fullest child first: a split over whole empty groups, away from partly used ones.
        std::vector<std::pair<std::uint32_t, bool>> tries;  // (group, fullest first)
        for (std::size_t i = 0; i < fit.size() && i < 2; ++i) tries.emplace_back(fit[i], false);
        if (k > h.leaf) tries.emplace_back(fit[0], true);
        for (const auto& [group, fullest] : tries) {
          std::vector<std::uint32_t> hosts;
          take(h, c, fabric, usable, k, group, want, hosts, fullest);
          if (hosts.size() != want) continue;
          std::sort(hosts.begin(), hosts.end());
          bool seen = false;
          for (const auto& a : out.considered) seen = seen || a.hosts == hosts;
          if (seen) continue;
          std::string label = k <= h.leaf ? "best-fit" : (dim.empty() ? "counts" : dim + "-cut");
          if (fullest) label += ", fullest first";
          out.considered.push_back(finish(score_allocation(fabric, scored, hosts), label));
        }
        break;
      }
    }
    if (!out.tree.hosts.empty()) {
      bool seen = false;
      for (const auto& a : out.considered) seen = seen || a.hosts == out.tree.hosts;
      if (!seen) out.considered.push_back(out.tree);
    }
    if (out.considered.empty()) {
      out.reason = "no set of " + hosts_needed_text(want) + " found among the free hosts";
      return out;
    }
    // Cheapest first; ties (the model times them alike) to the least fragmentation left, then
    // the fewest groups (outermost level first), then fewer degraded hosts, then the order they
    // were built in.
    std::stable_sort(out.considered.begin(), out.considered.end(),
                     [](const HostSet& a, const HostSet& b) {
                       const double tol = 1e-9 * std::max({1e-12, a.seconds, b.seconds});
                       if (std::abs(a.seconds - b.seconds) > tol) return a.seconds < b.seconds;
                       if (a.fragmentation != b.fragmentation) {
                         return a.fragmentation < b.fragmentation;
                       }
                       // Fewer groups, the outermost level first: fewer pods, then leaves.
                       if (a.spread != b.spread) {
                         return std::lexicographical_compare(a.spread.rbegin(), a.spread.rend(),
                                                             b.spread.rbegin(), b.spread.rend());
                       }
                       return a.degraded < b.degraded;
                     });
    out.chosen = out.considered.front();
    out.placed = true;

    // Why, where the choice spans more than one leaf.
    const std::size_t leaf_pos = leaf_level(fabric);
    if (!out.chosen.spread.empty() && out.chosen.spread[leaf_pos] > 1) {
      const Capacity plain = capacity(h, usable, 1, h.root);
      const std::uint32_t most = plain.cap[h.leaf].empty()
                                     ? 0
                                     : *std::max_element(plain.cap[h.leaf].begin(),
                                                         plain.cap[h.leaf].end());
      std::string w = "no one " + out.level_names[leaf_pos] + " holds " +
                      hosts_needed_text(want) + " (the most one has free: " +
                      std::to_string(most) + "); ";
      // Which cut the chosen set keeps, whichever way it was built: the first of the layout's
      // cuts whose chunks every leaf holds whole.
      std::vector<std::uint32_t> per_leaf(h.kids[h.leaf].size(), 0);
      for (std::uint32_t host : out.chosen.hosts) ++per_leaf[h.group[h.leaf][host]];
      std::string kept;
      std::uint32_t chunk = 1;
      for (const auto& [dim, ch] : plans) {
        if (dim.empty()) continue;
        bool whole = true;
        for (std::uint32_t n : per_leaf) whole = whole && n % ch == 0;
        if (whole) {
          kept = dim;
          chunk = ch;
          break;
        }
      }
      if (kept == "pp") {
        w += "split at pipeline stage boundaries, " + hosts_needed_text(chunk) + " a stage";
      } else if (!kept.empty()) {
        w += "split between " + kept + " coordinates, " + hosts_needed_text(chunk) +
             " a piece, every inner group whole";
      } else {
        w += "split by counts (no cut of the layout that the free hosts allow was cheaper)";
      }
      w += " over " + std::to_string(out.chosen.spread[leaf_pos]) + " " +
           level_plural(out.level_names[leaf_pos]);
      if (out.chosen.label == "slurm-tree") w += " (Slurm's tree choice)";
      out.why = w;
    }
  }

  // Candidates: the choice, then usable hosts nearest it -- its innermost groups first.
  if (input.candidates > out.chosen.hosts.size()) {
    std::vector<char> in(n_hosts, 0);
    for (std::uint32_t host : out.chosen.hosts) in[host] = 1;
    out.candidates = out.chosen.hosts;
    const auto levels = group_levels(fabric);
    for (std::size_t k = 0; k <= levels.size() && out.candidates.size() < input.candidates; ++k) {
      std::vector<char> mine;
      if (k < levels.size()) {
        const auto& lv = fabric.levels[levels[k]];
        mine.assign(groups_of(lv), 0);
        for (std::uint32_t host : out.chosen.hosts) mine[lv.group_of_host[host]] = 1;
      }
      for (std::uint32_t host = 0; host < n_hosts && out.candidates.size() < input.candidates;
           ++host) {
        if (in[host] || !usable[host]) continue;
        if (k < levels.size() && !mine[fabric.levels[levels[k]].group_of_host[host]]) continue;
        in[host] = 1;
        out.candidates.push_back(host);
      }
    }
    std::sort(out.candidates.begin(), out.candidates.end());
  }
  return out;
}

Quality assess(const Fabric& fabric, const PlaceInput& input,
               const std::vector<std::uint32_t>& allocation) {
  Quality q;
  PlaceInput in = input;
  in.hosts = static_cast<std::uint32_t>(allocation.size());
  in.candidates = 0;
  q.allocation = score_allocation(fabric, in, allocation);
  q.allocation.label = "allocation";
  const Placement best = place(fabric, in);
  if (best.placed) {
    q.best = best.chosen;
    q.best_found = true;
    // The allocation itself was possible: the best is never worse than it.
    if (q.allocation.seconds < q.best.seconds) q.best = q.allocation;
    q.slowdown = q.best.seconds > 0 ? q.allocation.seconds / q.best.seconds : 1;
  }
  return q;
}

Quality assess_step(const Fabric& fabric, const topology::NodeTopology* node,
                    const Request& request, const std::vector<char>& free) {
  if (request.tasks_per_host.empty() || node == nullptr) return {};
  const int per_host = request.tasks_per_host[0];
  for (int t : request.tasks_per_host) {
    if (t != per_host) return {};
  }
  if (!free.empty() && free.size() != fabric.hosts.size()) {
    throw Error("assess: one free flag per fabric host expected");
  }
  PlaceInput in;
  in.gpus_per_host = per_host;
  in.request = request;
  in.request.bound_gpu.clear();
  in.nodes.assign(fabric.hosts.size(), node);
  in.free_gpus.assign(fabric.hosts.size(), per_host);
  if (!free.empty()) {
    for (std::size_t h = 0; h < free.size(); ++h) in.free_gpus[h] = free[h] ? per_host : 0;
  }
  std::vector<std::uint32_t> mine;
  for (const auto& name : request.hosts) {
    const std::int64_t i = fabric.find_host(name);
    if (i < 0) continue;
    mine.push_back(static_cast<std::uint32_t>(i));
    in.free_gpus[static_cast<std::size_t>(i)] = per_host;
  }
  return assess(fabric, in, mine);
}

}  // namespace topoaware::mapper
