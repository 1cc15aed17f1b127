// Slurm's node selection (flat, tree, block), reimplemented from Slurm 24.11 (tag
// slurm-24-11-7-1) for whole free nodes. Citations name the file under src/plugins/ and the
// function; "24.11" unless stated. Each function keeps Slurm's order of operations, including
// where it looks accidental, because the point is to predict what slurmctld does.
//
// The whole-node reduction: every free node gives the job the same CPUs, so Slurm's CPU tests
// (rem_cpus, switch_cpu_cnt, consec_cpus) follow its node counts and are written as node counts;
// the job has min = max nodes, so eval_nodes_enough_nodes(avail, rem, min, req) is avail >= rem;
// no node is required (--nodelist), so req_nodes_bitmap is empty; no GRES.
#include "topoaware/mapper/slurm_select.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "topoaware/mapper/layout.h"
#include "topoaware/topology/fabric.h"
#include "topoaware/topology/graph.h"

namespace topoaware::mapper::slurm {

std::string_view to_string(Outcome o) {
  switch (o) {
    case Outcome::kSelected:
      return "selected";
    case Outcome::kWait:
      return "wait";
    case Outcome::kNotModeled:
      return "not-modeled";
  }
  return "?";
}

namespace {

using NodeSet = std::vector<char>;  // per node index: in the set (Slurm's bitstr_t)

std::size_t count(const NodeSet& s) {
  return static_cast<std::size_t>(std::count(s.begin(), s.end(), 1));
}

void check_job(const Job& job) {
  if (job.nodes == 0) throw Error("slurm selection: a job of 0 nodes");
}

void check_index(std::uint32_t node, std::size_t node_count, const std::string& where) {
  if (node >= node_count) {
    throw Error("slurm selection: " + where + " names node index " + std::to_string(node) +
                ", past the " + std::to_string(node_count) + " nodes");
  }
}

std::string node_list(const std::vector<Node>& nodes, const std::vector<std::uint32_t>& idx) {
  std::string out;
  for (std::uint32_t i : idx) {
    if (!out.empty()) out += ",";
    out += nodes[i].name;
  }
  return out;
}

std::vector<std::uint32_t> members(const NodeSet& s) {
  std::vector<std::uint32_t> out;
  for (std::uint32_t i = 0; i < s.size(); ++i) {
    if (s[i]) out.push_back(i);
  }
  return out;
}

Selection pending(std::string reason, std::vector<std::string> trace) {
  Selection s;
  s.outcome = Outcome::kWait;
  s.reason = std::move(reason);
  s.trace = std::move(trace);
  return s;
}

Selection selected(const NodeSet& chosen, std::vector<std::string> trace) {
  Selection s;
  s.outcome = Outcome::kSelected;
  s.nodes = members(chosen);
  s.trace = std::move(trace);
  return s;
}

// Free nodes grouped by weight, lowest first: eval_nodes_topo_weight_find/_sort
// (topology/common/eval_nodes.c), built in _eval_nodes_topo and eval_nodes_block.
struct WeightGroup {
  std::uint64_t weight = 0;
  NodeSet nodes;
};
std::vector<WeightGroup> weight_groups(const std::vector<Node>& nodes, const NodeSet& avail) {
  std::map<std::uint64_t, NodeSet> by_weight;
  for (std::uint32_t i = 0; i < nodes.size(); ++i) {
    if (!avail[i]) continue;
    auto [it, added] = by_weight.try_emplace(nodes[i].weight, NodeSet(nodes.size(), 0));
    it->second[i] = 1;
  }
  std::vector<WeightGroup> out;
  for (auto& [w, s] : by_weight) out.push_back({w, std::move(s)});
  return out;
}

// Lowest weight among a set's nodes: list_find_first(node_weight_list,
// eval_nodes_topo_node_find, set) over the sorted list. False when none of the set is free.
bool lowest_weight(const std::vector<WeightGroup>& groups, const NodeSet& set,
                   std::uint64_t* weight) {
  for (const WeightGroup& g : groups) {
    for (std::size_t i = 0; i < set.size(); ++i) {
      if (set[i] && g.nodes[i]) {
        *weight = g.weight;
        return true;
      }
    }
  }
  return false;
}

// The weight pass shared by _eval_nodes_topo (topology/tree/eval_nodes_tree.c) and
// eval_nodes_block (topology/block/eval_nodes_block.c): walk the weight groups upward, adding
// each group's nodes inside `within` to `best` until best holds the job; every group before the
// last one added becomes `req2` ("all of the lower priority nodes should be included in the
// job's allocation"). False when all of them together do not hold the job.
bool weight_pass(const std::vector<WeightGroup>& groups, const NodeSet& within,
                 std::size_t rem_nodes, NodeSet* best, NodeSet* req2) {
  std::size_t best_count = 0;
  for (const WeightGroup& g : groups) {
    if (best_count >= rem_nodes) break;  // `requested`
    if (best_count > 0) *req2 = *best;
    for (std::size_t i = 0; i < within.size(); ++i) {
      if (g.nodes[i] && within[i]) {
        (*best)[i] = 1;
        ++best_count;
      }
    }
  }
  return best_count >= rem_nodes;  // `sufficient`
}

// The free nodes as a set, and how many (eval_nodes' avail_node_bitmap of a whole-node job).
std::size_t free_nodes(const std::vector<Node>& nodes, NodeSet& avail) {
  avail.assign(nodes.size(), 0);
  std::size_t n = 0;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    avail[i] = nodes[i].free ? 1 : 0;
    n += avail[i];
  }
  return n;
}

// "Add lowest weight nodes. Treat similar to required nodes for the job." (both
// _eval_nodes_topo and eval_nodes_block): req2's nodes go into `chosen` first, off rem_nodes.
void take_lowest_weights(const std::vector<Node>& nodes, const NodeSet& req2, NodeSet& chosen,
                         std::size_t& rem_nodes, std::vector<std::string>& trace) {
  for (std::size_t v = 0; v < nodes.size(); ++v) {
    if (req2[v]) {
      chosen[v] = 1;
      --rem_nodes;
    }
  }
  trace.push_back("all " + std::to_string(count(req2)) +
                  " free nodes of the lowest weights taken first: " +
                  node_list(nodes, members(req2)));
}

// ---------------------------------------------------------------------------------------------
// Flat: _eval_nodes_consec (topology/common/eval_nodes.c since 24.05; in 22.05 to 23.11 the
// consecutive-node part of _eval_nodes in select/cons_tres/job_test.c, the same rules).

struct Run {
  std::uint32_t start = 0, end = 0;  // node indexes, inclusive
  std::size_t count = 0;             // usable nodes left in the run
  std::uint64_t weight = 0;
};

}  // namespace

Selection select_flat(const std::vector<Node>& nodes, const Job& job) {
  check_job(job);
  std::vector<std::string> trace;
  std::size_t rem_nodes = job.nodes;
  // eval_nodes (eval_nodes.c) refuses at once when fewer nodes are free than asked for.
  std::size_t free_count = 0;
  for (const Node& n : nodes) free_count += n.free ? 1 : 0;
  if (free_count < rem_nodes) {
    return pending(
        std::to_string(free_count) + " free nodes, the job asks for " + std::to_string(rem_nodes),
        std::move(trace));
  }
  // The run table: a run ends at a node that is not free, and (unless --contiguous) where the
  // node weight changes ("If job requested contiguous nodes, do not worry about matching node
  // weights").
  std::vector<Run> runs;
  bool open = false;
  for (std::uint32_t i = 0; i < nodes.size(); ++i) {
    if (!nodes[i].free) {
      open = false;
      continue;
    }
    if (open && !job.contiguous && nodes[i].weight != runs.back().weight) open = false;
    if (!open) {
      runs.push_back({i, i, 0, nodes[i].weight});
      open = true;
    }
    runs.back().end = i;
    runs.back().count++;
    runs.back().weight = nodes[i].weight;  // consec_weight: the last node's weight
  }
  NodeSet chosen(nodes.size(), 0);
  std::size_t max_nodes = job.nodes;
  while (!runs.empty() && max_nodes > 0) {
    // The best run: the first one; or one of a lower weight, whatever its size; at equal
    // weight, the first one that holds the job, then the smallest that holds it (best fit),
    // else, while none holds it, the largest. Ties keep the earlier run (strict comparisons).
    // --contiguous: the first run that holds the job.
    int best = -1;
    bool best_sufficient = false;
    for (std::size_t r = 0; r < runs.size(); ++r) {
      const Run& run = runs[r];
      if (run.count == 0) continue;
      bool sufficient = run.count >= rem_nodes;
      bool new_best = best < 0 || run.weight < runs[static_cast<std::size_t>(best)].weight;
      if (!new_best && run.weight == runs[static_cast<std::size_t>(best)].weight) {
        std::size_t bc = runs[static_cast<std::size_t>(best)].count;
        new_best = (sufficient && !best_sufficient) || (sufficient && run.count < bc) ||
                   (!sufficient && run.count > bc);
      }
      if (!new_best && !best_sufficient && job.contiguous && sufficient) new_best = true;
      if (new_best) {
        best = static_cast<int>(r);
        best_sufficient = sufficient;
      }
    }
    if (best < 0) break;
    Run& run = runs[static_cast<std::size_t>(best)];
    if (job.contiguous && !best_sufficient) {
      trace.push_back("--contiguous: no run of " + std::to_string(rem_nodes) + " free nodes");
      break;  // "no hole large enough"
    }
    trace.push_back("run " + nodes[run.start].name + ".." + nodes[run.end].name + " (" +
                    std::to_string(run.count) + " free, weight " + std::to_string(run.weight) +
                    "): " +
                    (best_sufficient ? "smallest run that holds the rest"
                                     : "largest run, none holds the rest"));
    // Nodes in index order from the run's start. (A one-node job takes the run's node with the
    // fewest CPUs; with identical nodes that is its first.)
    for (std::uint32_t i = run.start; i <= run.end && rem_nodes > 0 && max_nodes > 0; ++i) {
      if (!nodes[i].free || chosen[i]) continue;
      chosen[i] = 1;
      --rem_nodes;
      --max_nodes;
    }
    if (rem_nodes == 0) return selected(chosen, std::move(trace));
    run.count = 0;
  }
  return pending("no set of free node runs holds " + std::to_string(job.nodes) + " nodes" +
                     (job.contiguous ? " contiguously" : ""),
                 std::move(trace));
}

// ---------------------------------------------------------------------------------------------
// Tree: eval_nodes_tree and _eval_nodes_topo (topology/tree/eval_nodes_tree.c; 22.05-23.11:
// _eval_nodes_topo in select/cons_tres/job_test.c), the switch table from switch_record.c.

namespace {

constexpr std::uint32_t kInfinite = std::numeric_limits<std::uint32_t>::max();
constexpr int kNoParent = -1;  // SWITCH_NO_PARENT

struct SwitchTable {
  std::vector<int> level;   // 0: leaf
  std::vector<int> parent;  // the last switch that lists it (switch_record.c), or kNoParent
  std::vector<NodeSet> nodes;
  std::vector<std::vector<std::uint32_t>> dist;  // hops between switches, kInfinite if none
};

// switch_record_validate (topology/tree/switch_record.c): a switch with Nodes= is level 0, one
// with Switches= is one above its highest child; a switch's nodes are its children's; the
// distance between two switches is the hop count over parent-child links (Floyd-Warshall in
// _check_better_path).
SwitchTable build_table(const std::vector<Switch>& sw, std::size_t node_count) {
  const std::size_t n = sw.size();
  SwitchTable t;
  t.level.assign(n, -1);
  t.parent.assign(n, kNoParent);
  t.nodes.assign(n, NodeSet(node_count, 0));
  for (std::size_t i = 0; i < n; ++i) {
    if (!sw[i].nodes.empty() && !sw[i].switches.empty()) {
      throw Error("slurm selection: switch " + sw[i].name + " names both nodes and switches");
    }
    for (std::uint32_t v : sw[i].nodes) {
      check_index(v, node_count, "switch " + sw[i].name);
      t.nodes[i][v] = 1;
    }
    if (!sw[i].nodes.empty()) t.level[i] = 0;
    for (std::uint32_t c : sw[i].switches) {
      if (c >= n || c == i) {
        throw Error("slurm selection: switch " + sw[i].name + " names a bad child switch index " +
                    std::to_string(c));
      }
      t.parent[c] = static_cast<int>(i);
    }
  }
  // Levels and node sets bottom-up; a cycle or an empty switch never settles.
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t i = 0; i < n; ++i) {
      if (t.level[i] >= 0 || sw[i].switches.empty()) continue;
      int lv = -1;
      bool ready = true;
      for (std::uint32_t c : sw[i].switches) {
        if (t.level[c] < 0) ready = false;
        lv = std::max(lv, t.level[c]);
      }
      if (!ready) continue;
      t.level[i] = lv + 1;
      for (std::uint32_t c : sw[i].switches) {
        for (std::size_t v = 0; v < node_count; ++v) t.nodes[i][v] |= t.nodes[c][v];
      }
      changed = true;
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (t.level[i] < 0) {
      throw Error("slurm selection: switch " + sw[i].name +
                  " has no nodes below it (empty, or a cycle)");
    }
  }
  // Hop counts between switches (switch_record.c's switches_dist): the graph is unweighted, so a
  // breadth-first search from each switch gives what Slurm's all-pairs loop gives, in
  // O(n * links) rather than O(n^3) -- 16,384 hosts under 600 switches in milliseconds.
  std::vector<std::vector<std::uint32_t>> adj(n);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::uint32_t c : sw[i].switches) {
      adj[i].push_back(c);
      adj[c].push_back(static_cast<std::uint32_t>(i));
    }
  }
  t.dist.assign(n, std::vector<std::uint32_t>(n, kInfinite));
  std::vector<std::uint32_t> queue;
  queue.reserve(n);
  for (std::size_t src = 0; src < n; ++src) {
    std::vector<std::uint32_t>& d = t.dist[src];
    d[src] = 0;
    queue.assign(1, static_cast<std::uint32_t>(src));
    for (std::size_t head = 0; head < queue.size(); ++head) {
      const std::uint32_t u = queue[head];
      for (std::uint32_t v : adj[u]) {
        if (d[v] != kInfinite) continue;
        d[v] = d[u] + 1;
        queue.push_back(v);
      }
    }
  }
  return t;
}

// _topo_compare_switches (eval_nodes_tree.c): 1 if leaf i is the better fit, -1 if j is, 0 if
// neither. Both hold the rest: the smaller wins. One holds it: that one. Neither: climb to the
// parents while they differ and compare them the same way, so that a leaf under a spine that
// holds the rest beats one that is not, and of two spines that hold it the smaller wins. Where
// the climb stops (a common parent), the larger count wins (the fuller leaf or subtree), then
// the lower level. `i_fit` is set on every round, so it ends as the fit of the last pair
// compared, which _topo_choose_best_switch then uses; Slurm does exactly that.
// One departure: Slurm climbs to SWITCH_NO_PARENT and indexes past its table when one of the
// two reaches the root before the other (leaves at different depths) and neither side fits;
// here the climb stops. It takes a root that does not hold the rest, which the root's count
// (every free node still wanted below the top switch) rules out except after the
// num_nodes_taken over-count in select_tree.
int compare_switches(const SwitchTable& t, const std::vector<std::size_t>& cnt, int i, int j,
                     std::size_t rem_nodes, bool* i_fit) {
  for (;;) {
    bool fi = cnt[static_cast<std::size_t>(i)] >= rem_nodes;
    bool fj = cnt[static_cast<std::size_t>(j)] >= rem_nodes;
    *i_fit = fi;
    if (fi && fj) {
      if (cnt[static_cast<std::size_t>(i)] < cnt[static_cast<std::size_t>(j)]) return 1;
      if (cnt[static_cast<std::size_t>(i)] > cnt[static_cast<std::size_t>(j)]) return -1;
      break;
    }
    if (fi) return 1;
    if (fj) return -1;
    int pi = t.parent[static_cast<std::size_t>(i)], pj = t.parent[static_cast<std::size_t>(j)];
    if (pi != pj && pi != kNoParent && pj != kNoParent) {
      i = pi;
      j = pj;
      continue;
    }
    break;
  }
  std::size_t ci = cnt[static_cast<std::size_t>(i)], cj = cnt[static_cast<std::size_t>(j)];
  if (ci > cj) return 1;
  if (ci < cj) return -1;
  if (t.level[static_cast<std::size_t>(i)] < t.level[static_cast<std::size_t>(j)]) return 1;
  if (t.level[static_cast<std::size_t>(i)] > t.level[static_cast<std::size_t>(j)]) return -1;
  return 0;
}

// _topo_choose_best_switch (eval_nodes_tree.c): the first leaf with free nodes (in switch index
// order) is the best so far; a later leaf replaces it when it is closer (hop distance from the
// leaves already used) and fits, or at the same distance compares better. A closer leaf that
// does not hold the rest does not displace a farther one found first.
// 22.05 to 23.11 (select/cons_tres/job_test.c): "closer and compare >= 0" instead of "closer
// and fits"; 24.05 has the rule used here.
void choose_best_switch(const SwitchTable& t, const std::vector<std::uint32_t>& dist,
                        const std::vector<std::size_t>& cnt, std::size_t rem_nodes, int i,
                        int* best) {
  std::size_t ui = static_cast<std::size_t>(i);
  if (*best == -1 || dist[ui] == kInfinite || cnt[ui] == 0) {
    if (cnt[ui] > 0 && dist[ui] < kInfinite && *best == -1) *best = i;
    return;
  }
  bool i_fit = false;
  int tcs = compare_switches(t, cnt, i, *best, rem_nodes, &i_fit);
  std::size_t ub = static_cast<std::size_t>(*best);
  if ((dist[ui] < dist[ub] && i_fit) || (dist[ui] == dist[ub] && tcs > 0)) *best = i;
}

// _decrement_node_cnt (eval_nodes_tree.c): a leaf's taken nodes leave it and every switch above.
void decrement_node_cnt(const SwitchTable& t, std::size_t taken, int sw,
                        std::vector<std::size_t>* cnt) {
  for (int i = sw; i != kNoParent; i = t.parent[static_cast<std::size_t>(i)]) {
    std::size_t& c = (*cnt)[static_cast<std::size_t>(i)];
    c = c <= taken ? 0 : c - taken;
  }
}

void add_dist(const SwitchTable& t, std::size_t sw, std::vector<std::uint32_t>* dist) {
  for (std::size_t i = 0; i < dist->size(); ++i) {
    if (t.dist[sw][i] == kInfinite || (*dist)[i] == kInfinite) {
      (*dist)[i] = kInfinite;
    } else {
      (*dist)[i] += t.dist[sw][i];
    }
  }
}

}  // namespace

Selection select_tree(const std::vector<Node>& nodes, const std::vector<Switch>& switches,
                      const Job& job, const Settings& settings) {
  check_job(job);
  std::vector<std::string> trace;
  // Which algorithm runs: eval_nodes (topology/common/eval_nodes.c) tries, in order,
  // --spread-job (_eval_nodes_spread), bf_busy_nodes while backfilling (_eval_nodes_busy),
  // LLN (_eval_nodes_lln), pack_serial_at_end for one-CPU jobs (_eval_nodes_serial), then the
  // topology plugin's eval_nodes_tree, then _eval_nodes_consec. eval_nodes_tree returns
  // ESLURM_NOT_SUPPORTED (-> consec) for --contiguous and for TopologyParam=TopoOptional
  // without --switches. 22.05 to 23.11: the same order inside _eval_nodes (cons_tres/job_test.c),
  // 23.11 with _eval_nodes_block first.
  if (job.spread_job) {
    Selection s;
    s.outcome = Outcome::kNotModeled;
    s.reason = "--spread-job: Slurm runs _eval_nodes_spread before any topology plugin";
    return s;
  }
  if (settings.lln) {
    Selection s;
    s.outcome = Outcome::kNotModeled;
    s.reason = "LLN: Slurm runs _eval_nodes_lln (least loaded nodes) before any topology plugin";
    return s;
  }
  if (job.contiguous || (settings.topo_optional && job.max_switches == 0)) {
    Selection s = select_flat(nodes, job);
    s.trace.insert(s.trace.begin(),
                   job.contiguous
                       ? "tree not used: --contiguous (eval_nodes_tree: ESLURM_NOT_SUPPORTED); "
                         "flat best fit"
                       : "tree not used: TopologyParam=TopoOptional without --switches; flat "
                         "best fit");
    return s;
  }

  const SwitchTable t = build_table(switches, nodes.size());
  const std::size_t ns = switches.size();
  NodeSet avail;
  const std::size_t free_count = free_nodes(nodes, avail);
  std::size_t rem_nodes = job.nodes;
  if (free_count < rem_nodes) {  // eval_nodes: fewer free nodes than min_nodes
    return pending(
        std::to_string(free_count) + " free nodes, the job asks for " + std::to_string(rem_nodes),
        std::move(trace));
  }
  const std::vector<WeightGroup> groups = weight_groups(nodes, avail);

  // The top switch: among switches that hold the job, the highest level; at the same or a
  // higher level a later switch wins when its lowest free weight is no higher.
  std::vector<NodeSet> sw_nodes(ns);
  std::vector<std::size_t> cnt(ns, 0);
  int top = -1;
  std::uint64_t top_weight = 0;
  for (std::size_t i = 0; i < ns; ++i) {
    sw_nodes[i] = t.nodes[i];
    for (std::size_t v = 0; v < nodes.size(); ++v) sw_nodes[i][v] &= avail[v];
    cnt[i] = count(sw_nodes[i]);
    if (cnt[i] < rem_nodes) continue;
    std::uint64_t w = 0;
    if (!lowest_weight(groups, sw_nodes[i], &w)) continue;
    if (top == -1 || (t.level[i] >= t.level[static_cast<std::size_t>(top)] && w <= top_weight)) {
      top = static_cast<int>(i);
      top_weight = w;
    }
  }
  if (top == -1) {
    // ESLURM_REQUESTED_TOPO_CONFIG_UNAVAILABLE: no one switch reaches enough free nodes.
    return pending("no switch has " + std::to_string(rem_nodes) + " free nodes below it",
                   std::move(trace));
  }
  const std::size_t utop = static_cast<std::size_t>(top);
  trace.push_back("top switch " + switches[utop].name + " (level " + std::to_string(t.level[utop]) +
                  ", " + std::to_string(cnt[utop]) + " free)");
  for (std::size_t i = 0; i < ns; ++i) {
    if (i == utop) continue;
    for (std::size_t v = 0; v < nodes.size(); ++v) sw_nodes[i][v] &= sw_nodes[utop][v];
  }

  NodeSet best(nodes.size(), 0), req2(nodes.size(), 0);
  if (!weight_pass(groups, sw_nodes[utop], rem_nodes, &best, &req2)) {
    return pending("insufficient free nodes below " + switches[utop].name, std::move(trace));
  }
  NodeSet chosen(nodes.size(), 0);
  std::vector<char> required(ns, 0);
  const bool have_req2 = count(req2) > 0;
  if (have_req2) {
    // The lowest weights first; every switch they touch, at any level, becomes required.
    take_lowest_weights(nodes, req2, chosen, rem_nodes, trace);
    for (std::size_t i = 0; i < ns; ++i) {
      for (std::size_t v = 0; v < nodes.size(); ++v) {
        if (req2[v] && sw_nodes[i][v]) required[i] = 1;
      }
    }
  }
  for (std::size_t i = 0; i < ns; ++i) {
    for (std::size_t v = 0; v < nodes.size(); ++v) sw_nodes[i][v] &= best[v];
    cnt[i] = count(sw_nodes[i]);
  }
  auto leaves_used = [&] {
    std::size_t used = 0;
    for (std::size_t i = 0; i < ns; ++i) {
      if (t.level[i] != 0) continue;
      bool any = false;
      for (std::size_t v = 0; v < nodes.size(); ++v) any = any || (sw_nodes[i][v] && chosen[v]);
      used += any ? 1 : 0;
    }
    return used;
  };
  // --switches (the end of _eval_nodes_topo): more leaves than asked for makes the job wait
  // (best_switch = false) until it has waited wait4switch; then it runs on what it got.
  // (With a node range Slurm first retries with one node fewer; min = max here.)
  auto finish = [&]() -> Selection {
    if (job.max_switches > 0) {
      std::size_t used = leaves_used();
      if (job.switch_wait_expired) {
        trace.push_back("--switches=" + std::to_string(job.max_switches) + ": wait over, runs on " +
                        std::to_string(used) + " leaves");
      } else if (used > job.max_switches) {
        return pending("--switches=" + std::to_string(job.max_switches) + ": the choice spans " +
                           std::to_string(used) + " leaf switches; waits for fewer",
                       std::move(trace));
      }
    }
    return selected(chosen, std::move(trace));
  };
  if (have_req2 && rem_nodes == 0) return finish();  // "Scheduling anomaly"

  // More nodes from the leaves already required, in switch then node index order.
  // num_nodes_taken runs on across those leaves (declared before the loop), so each later leaf
  // decrements its parents by everything taken so far; kept as Slurm has it.
  if (have_req2) {
    std::size_t num_taken = 0;
    for (std::size_t i = 0; i < ns; ++i) {
      if (!required[i] || t.level[i] != 0) continue;
      for (std::size_t v = 0; v < nodes.size(); ++v) {
        if (!sw_nodes[i][v] || chosen[v]) continue;
        chosen[v] = 1;
        ++num_taken;
        if (--rem_nodes == 0) {
          trace.push_back("rest from leaf " + switches[i].name + ", already in use");
          return finish();
        }
      }
      decrement_node_cnt(t, num_taken, static_cast<int>(i), &cnt);
    }
  }

  std::vector<std::uint32_t> dist(ns, 0);
  for (std::size_t i = 0; i < ns; ++i) {
    if (required[i]) add_dist(t, i, &dist);
  }
  // Leaves one at a time until the job is whole.
  std::size_t prev_rem = rem_nodes + 1;
  while (prev_rem != rem_nodes) {
    prev_rem = rem_nodes;
    int best_sw = -1;
    for (std::size_t i = 0; i < ns; ++i) {
      if (required[i] || t.level[i] != 0) continue;
      choose_best_switch(t, dist, cnt, rem_nodes, static_cast<int>(i), &best_sw);
    }
    if (best_sw == -1) break;
    const std::size_t ub = static_cast<std::size_t>(best_sw);
    add_dist(t, ub, &dist);
    std::string why = cnt[ub] >= rem_nodes ? "smallest leaf that holds the rest"
                                           : "no leaf holds the rest: leaf by spine fit, "
                                             "distance, fullest";
    trace.push_back("leaf " + switches[ub].name + " (" + std::to_string(cnt[ub]) +
                    " free): " + why);
    for (std::size_t v = 0; v < nodes.size(); ++v) {
      if (!sw_nodes[ub][v] || chosen[v]) continue;
      chosen[v] = 1;
      if (--rem_nodes == 0) return finish();
    }
    decrement_node_cnt(t, cnt[ub], best_sw, &cnt);
    cnt[ub] = 0;
  }
  return pending("the leaves below " + switches[utop].name + " ran out before " +
                     std::to_string(job.nodes) + " nodes",
                 std::move(trace));
}

// ---------------------------------------------------------------------------------------------
// Block: eval_nodes_block and _choose_best_bblock (topology/block/eval_nodes_block.c, 24.11;
// topology/block arrived in 23.11, its selection then _eval_nodes_block in
// select/cons_tres/job_test.c without BlockSizes, not compared rule by rule here; BlockSizes and
// this file since 24.05), BlockSizes from block_record.c.
// Block trumps the other algorithms (topology_block.c sets trump_others), so --spread-job,
// LLN and --contiguous do not change it.

namespace {

// bit_fls_from_bit / bit_ffs_from_bit over the BlockSizes levels (src/common/bitstring.c).
int last_level_at_or_below(const std::vector<char>& levels, int from) {
  for (int l = std::min(from, static_cast<int>(levels.size()) - 1); l >= 0; --l) {
    if (levels[static_cast<std::size_t>(l)]) return l;
  }
  return -1;
}
int first_level_at_or_above(const std::vector<char>& levels, int from) {
  for (int l = std::max(from, 0); l < static_cast<int>(levels.size()); ++l) {
    if (levels[static_cast<std::size_t>(l)]) return l;
  }
  return -1;
}

// _bblocks_in_same_block: the same aggregate of 2^level base blocks (index >> level). Slurm
// passes -1 for "none yet", which is in no aggregate.
bool same_aggregate(int a, int b, int level) {
  if (a < 0 || b < 0) return false;
  return (a >> level) == (b >> level);
}

}  // namespace

Selection select_block(const std::vector<Node>& nodes, const BlockTopology& topo, const Job& job) {
  check_job(job);
  std::vector<std::string> trace;
  const std::size_t nb = topo.blocks.size();
  if (nb == 0) throw Error("slurm selection: no blocks");
  // block_record.c: BlockSizes' first value is the base-block size; each value is the base
  // times 2^level (up to level 15); no BlockSizes: base = the first block's node count and
  // levels 0-4. A block smaller than the base is an error to slurmctld (fatal).
  std::vector<char> levels(16, 0);
  std::size_t base = 0;
  if (topo.block_sizes.empty()) {
    base = topo.blocks[0].nodes.size();
    for (int l = 0; l <= 4; ++l) levels[static_cast<std::size_t>(l)] = 1;
  } else {
    base = topo.block_sizes[0];
    for (std::uint32_t size : topo.block_sizes) {
      std::size_t per = base > 0 ? size / base : 0;
      if (base == 0 || size % base != 0 || per == 0 || (per & (per - 1)) != 0 || per > 32768) {
        throw Error("slurm selection: BlockSizes " + std::to_string(size) +
                    " is not the base size times a power of two");
      }
      int l = 0;
      while ((std::size_t{1} << l) < per) ++l;
      levels[static_cast<std::size_t>(l)] = 1;
    }
  }
  for (const Block& b : topo.blocks) {
    if (b.nodes.size() < base || base == 0) {
      throw Error("slurm selection: block " + b.name + " has fewer nodes than the base block (" +
                  std::to_string(base) + ")");
    }
    for (std::uint32_t v : b.nodes) check_index(v, nodes.size(), "block " + b.name);
  }
  NodeSet avail;
  const std::size_t free_count = free_nodes(nodes, avail);
  std::size_t rem_nodes = job.nodes;
  if (free_count < rem_nodes) {
    return pending(
        std::to_string(free_count) + " free nodes, the job asks for " + std::to_string(rem_nodes),
        std::move(trace));
  }
  std::vector<NodeSet> bblock(nb, NodeSet(nodes.size(), 0));
  for (std::size_t i = 0; i < nb; ++i) {
    for (std::uint32_t v : topo.blocks[i].nodes) bblock[i][v] = 1;
  }

  // The block size: the smallest BlockSizes level of at least ceil(N / base) base blocks
  // (-1: larger than every level, the whole system is one block). The "lower-level block"
  // (llblock): the largest level below it; max_llblock, how many of those the job may touch.
  std::size_t bblock_per_block = (rem_nodes + base - 1) / base;
  int block_level = 0;
  while ((std::size_t{1} << block_level) < bblock_per_block) ++block_level;
  int ll_level = block_level > 0 ? last_level_at_or_below(levels, block_level - 1) : 0;
  block_level = first_level_at_or_above(levels, block_level);
  if (ll_level < 0) ll_level = 0;
  const std::size_t bblock_per_ll = std::size_t{1} << ll_level;
  const std::size_t ll_size = bblock_per_ll * base;
  long max_llblock = static_cast<long>((rem_nodes + ll_size - 1) / ll_size);
  std::size_t block_cnt = 1;
  if (block_level < 0) {
    bblock_per_block = nb;
  } else {
    bblock_per_block = std::size_t{1} << block_level;
    block_cnt = (nb + bblock_per_block - 1) / bblock_per_block;
  }
  const bool use_ll = bblock_per_block != bblock_per_ll * static_cast<std::size_t>(max_llblock);
  const std::size_t ll_cnt = (nb + bblock_per_ll - 1) / bblock_per_ll;
  trace.push_back("block size " + std::to_string(bblock_per_block) + " base blocks (" +
                  std::to_string(bblock_per_block * base) + " nodes), at most " +
                  std::to_string(max_llblock) + " blocks of " + std::to_string(ll_size) +
                  " nodes inside it");

  std::vector<NodeSet> block_nodes(block_cnt, NodeSet(nodes.size(), 0));
  std::vector<std::size_t> ll_nodes(ll_cnt, 0);
  for (std::size_t i = 0; i < nb; ++i) {
    for (std::size_t v = 0; v < nodes.size(); ++v) {
      block_nodes[i / bblock_per_block][v] |= bblock[i][v];
      ll_nodes[i / bblock_per_ll] += (bblock[i][v] && avail[v]) ? 1 : 0;
    }
  }
  const std::vector<WeightGroup> groups = weight_groups(nodes, avail);
  // The block: one that holds the job (counting only its max_llblock fullest lower-level
  // blocks), with the lowest free weight, then the fewest free nodes; ties go to the later block
  // (`bnc <= block_node_cnt`).
  int block_inx = -1;
  std::uint64_t block_weight = 0;
  std::size_t block_free = 0;
  for (std::size_t b = 0; b < block_cnt; ++b) {
    for (std::size_t v = 0; v < nodes.size(); ++v) block_nodes[b][v] &= avail[v];
    std::size_t bnc = count(block_nodes[b]);
    std::size_t avail_bnc = bnc;
    if (use_ll) {
      std::size_t ll_per_block = bblock_per_block / bblock_per_ll;
      std::size_t offset = b * ll_per_block;
      ll_per_block = std::min(ll_per_block, ll_cnt - offset);
      // Slurm sorts this slice of nodes_on_llblock in place (qsort, descending); it is
      // recomputed before it is read again.
      auto first = ll_nodes.begin() + static_cast<std::ptrdiff_t>(offset);
      std::sort(first, first + static_cast<std::ptrdiff_t>(ll_per_block),
                [](std::size_t a, std::size_t c) { return a > c; });
      avail_bnc = 0;
      std::size_t take = std::min(static_cast<std::size_t>(max_llblock), ll_per_block);
      for (std::size_t j = 0; j < take; ++j) avail_bnc += ll_nodes[offset + j];
    }
    if (avail_bnc < rem_nodes) continue;
    std::uint64_t w = 0;
    if (!lowest_weight(groups, block_nodes[b], &w)) continue;
    if (block_inx == -1 || w < block_weight || (w == block_weight && bnc <= block_free)) {
      block_inx = static_cast<int>(b);
      block_weight = w;
      block_free = bnc;
    }
  }
  if (block_inx == -1) {
    return pending("no aligned block of " + std::to_string(bblock_per_block * base) +
                       " nodes has " + std::to_string(rem_nodes) + " free nodes",
                   std::move(trace));
  }
  const std::size_t ub = static_cast<std::size_t>(block_inx);
  trace.push_back("block of base blocks " + topo.blocks[ub * bblock_per_block].name + ".." +
                  topo.blocks[std::min(nb, (ub + 1) * bblock_per_block) - 1].name + " (" +
                  std::to_string(block_free) + " free)");
  auto in_block = [&](std::size_t i) { return i / bblock_per_block == ub; };

  NodeSet best(nodes.size(), 0), req2(nodes.size(), 0);
  if (!weight_pass(groups, block_nodes[ub], rem_nodes, &best, &req2)) {
    return pending("insufficient free nodes in the block", std::move(trace));
  }
  NodeSet chosen(nodes.size(), 0);
  std::vector<char> required(nb, 0);
  const bool have_req2 = count(req2) > 0;
  if (have_req2) {
    take_lowest_weights(nodes, req2, chosen, rem_nodes, trace);
    if (rem_nodes == 0) return selected(chosen, std::move(trace));  // "Scheduling anomaly"
    int last_ll = -1;
    for (std::size_t i = 0; i < nb; ++i) {
      if (!in_block(i)) continue;
      if (required[i]) {
        last_ll = static_cast<int>(i);
        continue;
      }
      bool touches = false;
      for (std::size_t v = 0; v < nodes.size(); ++v) touches = touches || (req2[v] && bblock[i][v]);
      if (!touches) continue;
      required[i] = 1;
      if (!same_aggregate(last_ll, static_cast<int>(i), ll_level)) {
        --max_llblock;
        last_ll = static_cast<int>(i);
      }
    }
  }
  if (max_llblock < 0) {
    return pending("the lowest-weight nodes span more lower-level blocks than the job may",
                   std::move(trace));
  }
  if (have_req2) {
    for (std::size_t i = 0; i < nb; ++i) {
      if (!required[i]) continue;
      for (std::size_t v = 0; v < nodes.size(); ++v) {
        if (!bblock[i][v] || !block_nodes[ub][v] || !best[v] || chosen[v]) continue;
        chosen[v] = 1;
        if (--rem_nodes == 0) return selected(chosen, std::move(trace));
      }
    }
  }
  std::vector<std::size_t> on_bblock(nb, 0);
  std::vector<NodeSet> bb_nodes(nb, NodeSet(nodes.size(), 0));
  std::fill(ll_nodes.begin(), ll_nodes.end(), 0);
  for (std::size_t i = 0; i < nb; ++i) {
    if (!in_block(i) || required[i]) continue;
    for (std::size_t v = 0; v < nodes.size(); ++v) {
      bb_nodes[i][v] = bblock[i][v] && block_nodes[ub][v] && best[v];
    }
    on_bblock[i] = count(bb_nodes[i]);
    ll_nodes[i / bblock_per_ll] += on_bblock[i];
  }

  // _choose_best_bblock: with lower-level blocks in play, first keep inside the lower-level
  // blocks already used (same_block); else prefer a lower-level block that holds the rest, the
  // smallest such, else the fullest. Then among base blocks: one that holds the rest, the
  // smallest such; else the largest; ties go to the later base block (<=, >=).
  auto choose = [&](std::size_t i, bool* best_same, bool* best_fit, int* best_bb) {
    bool fit = on_bblock[i] >= rem_nodes;
    int ii = static_cast<int>(i);
    if (use_ll && !same_aggregate(*best_bb, ii, ll_level)) {
      bool same = false;
      std::size_t lo = i & ~(bblock_per_ll - 1), hi = i | (bblock_per_ll - 1);
      for (std::size_t j = lo; j < nb && j <= hi; ++j) {
        if (required[j]) {
          same = true;
          break;
        }
      }
      if (*best_bb == -1 || (same && !*best_same)) {
        *best_bb = ii;
        *best_fit = fit;
        *best_same = same;
        return;
      }
      if (!same && *best_same) return;
      std::size_t best_ll = ll_nodes[static_cast<std::size_t>(*best_bb) / bblock_per_ll];
      std::size_t this_ll = ll_nodes[i / bblock_per_ll];
      bool ll_fit = this_ll >= rem_nodes, best_ll_fit = best_ll >= rem_nodes;
      if (ll_fit && !best_ll_fit) {
        *best_bb = ii;
        *best_fit = fit;
        *best_same = same;
        return;
      }
      if (!ll_fit && best_ll_fit) return;
      if (ll_fit ? this_ll < best_ll : this_ll > best_ll) {
        *best_bb = ii;
        *best_fit = fit;
        *best_same = same;
        return;
      }
      if (ll_fit ? this_ll > best_ll : this_ll < best_ll) return;
    }
    std::size_t bc = *best_bb < 0 ? 0 : on_bblock[static_cast<std::size_t>(*best_bb)];
    if (*best_bb == -1 || (fit && !*best_fit) || (!fit && !*best_fit && on_bblock[i] >= bc) ||
        (fit && on_bblock[i] <= bc)) {
      *best_bb = ii;
      *best_fit = fit;
    }
  };
  std::size_t prev_rem = rem_nodes + 1;
  while (prev_rem != rem_nodes) {
    prev_rem = rem_nodes;
    int best_bb = -1;
    bool best_fit = false, best_same = true;
    for (std::size_t i = 0; i < nb; ++i) {
      if (!in_block(i) || required[i]) continue;
      choose(i, &best_same, &best_fit, &best_bb);
    }
    if (best_bb == -1) break;
    if (max_llblock <= 0 && !best_same) {
      trace.push_back("no more lower-level blocks allowed");
      break;
    }
    const std::size_t bi = static_cast<std::size_t>(best_bb);
    required[bi] = 1;
    trace.push_back(
        "base block " + topo.blocks[bi].name + " (" + std::to_string(on_bblock[bi]) +
        " free): " + (best_fit ? "smallest that holds the rest" : "largest, none holds the rest"));
    for (std::size_t v = 0; v < nodes.size(); ++v) {
      if (!bb_nodes[bi][v] || chosen[v]) continue;
      chosen[v] = 1;
      if (--rem_nodes == 0) return selected(chosen, std::move(trace));
    }
    if (!best_same) --max_llblock;
  }
  return pending("the block's base blocks could not give " + std::to_string(job.nodes) +
                     " nodes within its lower-level block limit",
                 std::move(trace));
}

// ---------------------------------------------------------------------------------------------
// From a fabric model.

std::vector<Node> nodes_of(const topology::Fabric& fabric) {
  std::vector<Node> out;
  out.reserve(fabric.hosts.size());
  for (const topology::HostInfo& h : fabric.hosts) out.push_back({h.name, 1, !h.excluded});
  return out;
}

namespace {
// The first switch level of the fabric (named "leaf" or "block", as the topology.conf
// exporter reads it), or levels.size().
std::size_t first_switch_level(const topology::Fabric& f) {
  for (std::size_t i = 0; i < f.levels.size(); ++i) {
    if (f.levels[i].name == "leaf" || f.levels[i].name == "block") return i;
  }
  return f.levels.size();
}
std::string group_name(const topology::LocalityLevel& lv, std::size_t k) {
  return k < lv.group_name.size() && !lv.group_name[k].empty() ? lv.group_name[k]
                                                               : lv.name + std::to_string(k);
}

// Every host on one leaf: the fabric's own switches in vertex id order, which for a
// topology.conf import is the file's line order, Slurm's switch index order (slurm_topology.cc
// adds one switch per SwitchName= line, in order). Children are the switches below (the
// parent -> child direction the source states, else the lower tier), as the slurm-tree exporter
// writes them; a switch with neither nodes nor children is left out (Slurm refuses it).
std::vector<Switch> real_switches(const topology::Fabric& fabric) {
  using topology::LinkId;
  using topology::VertexId;
  using topology::VertexKind;
  const topology::Graph& g = fabric.graph;
  const std::vector<VertexId> all = g.of_kind(VertexKind::kSwitch);
  std::vector<std::vector<std::uint32_t>> hosts_of(g.vertex_count());
  for (std::uint32_t h = 0; h < fabric.hosts.size(); ++h) {
    if (!fabric.hosts[h].leaves.empty()) hosts_of[fabric.hosts[h].leaves[0].value].push_back(h);
  }
  auto children = [&](VertexId sw) {
    std::vector<VertexId> out;
    const int tier = g.vertex(sw).sw.tier;
    for (LinkId lid : g.links_of(sw)) {
      const topology::Link& l = g.link(lid);
      VertexId o = g.other_end(lid, sw);
      if (o == sw || g.vertex(o).kind != VertexKind::kSwitch) continue;
      bool child = fabric.hierarchical ? (l.a == sw && l.b == o)
                                       : (g.vertex(o).sw.tier > 0 && g.vertex(o).sw.tier < tier);
      if (child && std::find(out.begin(), out.end(), o) == out.end()) out.push_back(o);
    }
    return out;
  };
  // Which switches Slurm would see: those with nodes, then (bottom-up) those with a kept child.
  std::vector<char> kept(g.vertex_count(), 0);
  for (VertexId sw : all) kept[sw.value] = hosts_of[sw.value].empty() ? 0 : 1;
  for (bool changed = true; changed;) {
    changed = false;
    for (VertexId sw : all) {
      if (kept[sw.value]) continue;
      for (VertexId c : children(sw)) {
        if (kept[c.value]) {
          kept[sw.value] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  std::vector<std::uint32_t> index(g.vertex_count(), 0);
  std::uint32_t next = 0;
  for (VertexId sw : all) {
    if (kept[sw.value]) index[sw.value] = next++;
  }
  std::vector<Switch> out;
  for (VertexId sw : all) {
    if (!kept[sw.value]) continue;
    Switch s;
    s.name = g.vertex(sw).name;
    s.nodes = hosts_of[sw.value];
    if (s.nodes.empty()) {
      for (VertexId c : children(sw)) {
        if (kept[c.value]) s.switches.push_back(index[c.value]);
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

std::vector<Switch> switches_of(const topology::Fabric& fabric) {
  bool one_leaf = true;
  for (const topology::HostInfo& h : fabric.hosts) one_leaf = one_leaf && h.leaves.size() <= 1;
  if (one_leaf) return real_switches(fabric);
  // Hosts on several leaves (rail-optimized): Slurm's one-leaf-per-node tree cannot hold the
  // wiring, so the locality levels stand in, as the slurm-tree exporter writes them.
  const std::size_t first = first_switch_level(fabric);
  if (first >= fabric.levels.size()) {
    throw Error("slurm selection: the fabric has no leaf level to make switches of");
  }
  std::vector<Switch> out;
  std::vector<std::uint32_t> below_index;  // switch index of each group of the level below
  for (std::size_t li = first; li < fabric.levels.size(); ++li) {
    const topology::LocalityLevel& lv = fabric.levels[li];
    std::size_t groups = lv.group_uplink_gbps.size();
    for (std::uint32_t g : lv.group_of_host) groups = std::max<std::size_t>(groups, g + 1);
    std::vector<std::uint32_t> here(groups, 0);
    for (std::size_t k = 0; k < groups; ++k) {
      Switch s;
      s.name = group_name(lv, k);
      std::set<std::uint32_t> kids;
      for (std::uint32_t h = 0; h < lv.group_of_host.size(); ++h) {
        if (lv.group_of_host[h] != k) continue;
        if (li == first) {
          s.nodes.push_back(h);
        } else {
          kids.insert(below_index[fabric.levels[li - 1].group_of_host[h]]);
        }
      }
      s.switches.assign(kids.begin(), kids.end());
      here[k] = static_cast<std::uint32_t>(out.size());
      out.push_back(std::move(s));
    }
    below_index = std::move(here);
  }
  return out;
}

BlockTopology blocks_of(const topology::Fabric& fabric) {
  BlockTopology out;
  if (!fabric.blocks.empty()) {
    for (const auto& [name, hosts] : fabric.blocks) out.blocks.push_back({name, hosts});
    for (int s : fabric.block_sizes) {
      if (s > 0) out.block_sizes.push_back(static_cast<std::uint32_t>(s));
    }
    return out;
  }
  const std::size_t first = first_switch_level(fabric);
  if (first >= fabric.levels.size()) {
    throw Error("slurm selection: the fabric has neither blocks nor a leaf level");
  }
  const topology::LocalityLevel& lv = fabric.levels[first];
  std::map<std::uint32_t, std::vector<std::uint32_t>> groups;
  for (std::uint32_t h = 0; h < lv.group_of_host.size(); ++h) {
    groups[lv.group_of_host[h]].push_back(h);
  }
  for (auto& [g, hosts] : groups) {
    out.blocks.push_back({"block" + std::to_string(out.blocks.size() + 1), std::move(hosts)});
  }
  return out;
}

}  // namespace topoaware::mapper::slurm
