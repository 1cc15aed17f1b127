// analyze(): what the mapper and people need from a fabric, derived once from graph + hosts.
//
// Tiers: 1 = switches with hosts attached; upward by BFS over switch links (ibnetdiscover), or,
// where the source states direction (topology.conf, TOML), the height above the hosts so that a
// parent is always above its children. Levels (the locality chain): host, NVLink domain, leaf
// group (hosts sharing any leaf, transitively: a scalable unit when rail-optimized), then one level
// per higher tier formed by merging the groups each tier-t switch reaches downward; a level that
// merges nothing is dropped, so the last level is the connected fabric.
#include "topoaware/topology/fabric.h"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <queue>
#include <set>
#include <stdexcept>
#include <string>

#include "topoaware/topology/error.h"

namespace topoaware::topology {
namespace {

// Latencies used for LocalityLevel::latency_us: one NIC-to-NIC traversal plus per switch hop.
// Typical InfiniBand figures; the mapper uses them only to order levels.
constexpr double kNicLatencyUs = 1.0;
constexpr double kSwitchHopUs = 0.15;
constexpr double kNvlinkLatencyUs = 0.5;

struct UnionFind {
  std::vector<std::uint32_t> parent;
  explicit UnionFind(std::size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0u); }
  std::uint32_t find(std::uint32_t x) {
    while (parent[x] != x) {
      parent[x] = parent[parent[x]];
      x = parent[x];
    }
    return x;
  }
  void unite(std::uint32_t a, std::uint32_t b) {
    a = find(a);
    b = find(b);
    if (a == b) return;
    if (b < a) std::swap(a, b);
    parent[b] = a;  // smaller id wins: deterministic
  }
};

bool is_switch(const Graph& g, VertexId v) { return g.vertex(v).kind == VertexKind::kSwitch; }

std::string fmt_gbps(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g GB/s", v);
  return buf;
}

double host_capacity(const HostInfo& h) {
  double sum = 0;
  for (double b : h.port_gbps) sum += b;
  return sum * h.degraded;
}

// Switch tiers. Returns per-vertex tier (0 for non-switches, -1 unreachable).
std::vector<int> compute_tiers(const Fabric& f) {
  const Graph& g = f.graph;
  std::vector<int> tier(g.vertex_count(), 0);
  std::vector<char> has_hosts(g.vertex_count(), 0);
  for (const HostInfo& h : f.hosts) {
    for (VertexId s : h.port_switch) has_hosts[s.value] = 1;
  }
  for (std::uint32_t i = 0; i < g.vertex_count(); ++i) {
    if (g.vertices()[i].kind == VertexKind::kSwitch) tier[i] = -1;
  }
  if (f.hierarchical) {
    // Height over parent (a) -> child (b) links. Iterative DFS; an edge back into the current
    // path (a cycle, as in some generated topology.conf files) is ignored.
    // Roots and children are visited in name order, so which edge of a cycle is dropped does not
    // depend on the order of lines in the file (a written-out tree reloads with the same tiers).
    std::vector<char> state(g.vertex_count(), 0);  // 0 new, 1 on path, 2 done
    auto by_name = [&](std::uint32_t x, std::uint32_t y) {
      return g.vertices()[x].name < g.vertices()[y].name;
    };
    std::vector<std::vector<std::uint32_t>> kids(g.vertex_count());
    std::vector<std::uint32_t> roots;
    for (std::uint32_t i = 0; i < g.vertex_count(); ++i) {
      if (!is_switch(g, VertexId(i))) continue;
      roots.push_back(i);
      for (LinkId lid : g.links_of(VertexId(i))) {
        const Link& l = g.link(lid);
        if (l.a.value == i && is_switch(g, l.b)) kids[i].push_back(l.b.value);
      }
      std::sort(kids[i].begin(), kids[i].end(), by_name);
    }
    std::sort(roots.begin(), roots.end(), by_name);
    for (std::uint32_t root : roots) {
      if (state[root] != 0) continue;
      std::vector<std::pair<std::uint32_t, std::size_t>> stack{{root, 0}};
      state[root] = 1;
      while (!stack.empty()) {
        auto& [v, next] = stack.back();
        const auto& links = g.links_of(VertexId(v));
        if (next < kids[v].size()) {
          std::uint32_t c = kids[v][next++];
          if (state[c] == 0) {
            state[c] = 1;
            stack.emplace_back(c, 0);
          }
          continue;
        }
        int t = 1;
        for (LinkId lid : links) {
          const Link& l = g.link(lid);
          if (l.a.value == v && is_switch(g, l.b) && state[l.b.value] == 2) {
            t = std::max(t, tier[l.b.value] + 1);
          }
        }
        tier[v] = t;
        state[v] = 2;
        stack.pop_back();
      }
    }
    return tier;
  }
  std::queue<std::uint32_t> q;
  for (std::uint32_t i = 0; i < g.vertex_count(); ++i) {
    if (has_hosts[i]) {
      tier[i] = 1;
      q.push(i);
    }
  }
  while (!q.empty()) {
    std::uint32_t v = q.front();
    q.pop();
    for (LinkId lid : g.links_of(VertexId(v))) {
      VertexId o = g.other_end(lid, VertexId(v));
      if (is_switch(g, o) && tier[o.value] == -1) {
        tier[o.value] = tier[v] + 1;
        q.push(o.value);
      }
    }
  }
  return tier;
}

// Switches "below" s: children (hierarchical) or lower-tier neighbours.
std::vector<VertexId> down_neighbours(const Fabric& f, const std::vector<int>& tier, VertexId s) {
  std::vector<VertexId> out;
  for (LinkId lid : f.graph.links_of(s)) {
    const Link& l = f.graph.link(lid);
    VertexId o = f.graph.other_end(lid, s);
    if (!is_switch(f.graph, o) || o == s) continue;
    if (f.hierarchical ? (l.a == s && l.b == o)
                       : (tier[o.value] > 0 && tier[o.value] < tier[s.value])) {
      out.push_back(o);
    }
  }
  return out;
}

// Renumbers raw representatives densely, in order of first host.
std::vector<std::uint32_t> dense(const std::vector<std::uint32_t>& raw, std::size_t* groups) {
  std::unordered_map<std::uint32_t, std::uint32_t> ids;
  std::vector<std::uint32_t> out(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) {
    auto [it, fresh] = ids.emplace(raw[i], static_cast<std::uint32_t>(ids.size()));
    out[i] = it->second;
  }
  *groups = ids.size();
  return out;
}

void add_anomalies(Fabric& f, const std::vector<int>& tier, int top) {
  const Graph& g = f.graph;
  for (const HostInfo& h : f.hosts) {
    if (h.port_switch.empty()) {
      f.anomalies.push_back({"orphan-host", "host " + h.name + " is attached to no switch"});
    }
  }
  bool any_hosts_attached = false;
  for (const HostInfo& h : f.hosts) any_hosts_attached |= !h.port_switch.empty();
  for (std::uint32_t i = 0; i < g.vertex_count(); ++i) {
    if (is_switch(g, VertexId(i)) && tier[i] == -1 && any_hosts_attached) {
      f.anomalies.push_back(
          {"unreachable-switch", "switch " + g.vertices()[i].name + " reaches no host"});
    }
  }
  // Slow links: per switch, host-facing ports and upward ports compared with their siblings.
  for (std::uint32_t i = 0; i < g.vertex_count(); ++i) {
    VertexId s(i);
    if (!is_switch(g, s) || tier[i] < 1) continue;
    for (int cls = 0; cls < 2; ++cls) {  // 0: to hosts, 1: upward
      std::vector<const Link*> sib;
      for (LinkId lid : g.links_of(s)) {
        const Link& l = g.link(lid);
        VertexId o = g.other_end(lid, s);
        bool host = g.vertex(o).kind == VertexKind::kHost;
        bool up =
            is_switch(g, o) && (f.hierarchical ? l.b == s && l.a == o : tier[o.value] > tier[i]);
        if ((cls == 0 && host) || (cls == 1 && up)) sib.push_back(&l);
      }
      // Ports, not links: merged parallel cables (Link::count) are compared one cable each.
      auto cables = [](const Link* l) { return static_cast<std::size_t>(std::max(1, l->count)); };
      auto per_cable = [&](const Link* l) { return l->bandwidth / static_cast<double>(cables(l)); };
      std::size_t ports = 0;
      for (const Link* l : sib) ports += cables(l);
      if (ports < 2) continue;
      double best = 0;
      const Link* fast = nullptr;
      for (const Link* l : sib) {
        if (per_cable(l) > best) {
          best = per_cable(l);
          fast = l;
        }
      }
      std::vector<const Link*> slow;
      std::size_t slow_ports = 0;
      for (const Link* l : sib) {
        if (l->bandwidth > 0 && per_cable(l) < best * 0.999) {
          slow.push_back(l);
          slow_ports += cables(l);
        }
      }
      if (slow.empty()) continue;
      std::string msg = g.vertex(s).name + ": " + std::to_string(slow_ports) + " of " +
                        std::to_string(ports) + (cls == 0 ? " host" : " uplink") +
                        " ports run slower than " + fmt_gbps(best) +
                        (fast->rate.empty() ? "" : " (" + fast->rate + ")") + ":";
      std::size_t shown = 0;
      for (const Link* l : slow) {
        if (shown++ == 8) {
          msg += " ...";
          break;
        }
        VertexId o = l->a == s ? l->b : l->a;
        int port = l->a == s ? l->port_a : l->port_b;
        msg += " ";
        if (port >= 0) msg += "[" + std::to_string(port) + "]";
        if (l->count > 1) msg += std::to_string(l->count) + "x";
        msg += "->" + g.vertex(o).name + " " + fmt_gbps(per_cable(l));
        if (!l->rate.empty()) msg += " (" + l->rate + ")";
        msg += ";";
      }
      msg.pop_back();
      f.anomalies.push_back({"slow-link", msg});
    }
  }
  // Asymmetric uplinks: switches of one tier (below the top) with unequal upward capacity.
  for (int t = 1; t < top; ++t) {
    std::vector<std::pair<double, std::string>> up;
    for (VertexId s : f.tiers[static_cast<std::size_t>(t - 1)].switches) {
      double sum = 0;
      for (LinkId lid : g.links_of(s)) {
        const Link& l = g.link(lid);
        VertexId o = g.other_end(lid, s);
        if (!is_switch(g, o)) continue;
        if (f.hierarchical ? (l.b == s && l.a == o) : tier[o.value] > t) sum += l.bandwidth;
      }
      up.emplace_back(sum, g.vertex(s).name);
    }
    if (up.size() < 2) continue;
    auto [lo, hi] = std::minmax_element(up.begin(), up.end());
    if (lo->first < hi->first * 0.999) {
      std::size_t below = 0;
      for (auto& u : up) below += u.first < hi->first * 0.999 ? 1 : 0;
      f.anomalies.push_back(
          {"asymmetric-uplinks", "tier " + std::to_string(t) + ": " + std::to_string(below) +
                                     " of " + std::to_string(up.size()) +
                                     " switches have less upward capacity than " + hi->second +
                                     " (" + fmt_gbps(hi->first) + "), e.g. " + lo->second + " (" +
                                     fmt_gbps(lo->first) + ")"});
    }
  }
  for (const auto& [t, declared] : f.declared_oversubscription) {
    if (t < 1 || t > static_cast<int>(f.tiers.size())) {
      f.anomalies.push_back({"declared-oversubscription", "oversubscription declared for tier " +
                                                              std::to_string(t) +
                                                              ", which the fabric does not have"});
      continue;
    }
    // Where the source gives no speeds, the declaration sizes the tier (the mapper reads it).
    if (f.tiers[static_cast<std::size_t>(t - 1)].speeds_assumed) continue;
    double got = f.tiers[static_cast<std::size_t>(t - 1)].oversubscription;
    if (std::abs(got - declared) > 0.01 * declared) {
      char buf[160];
      std::snprintf(buf, sizeof buf,
                    "tier %d: declared oversubscription %g:1 but the wiring gives %.3g:1", t,
                    declared, got);
      f.anomalies.push_back({"declared-oversubscription", buf});
    }
  }
}

}  // namespace

std::vector<std::uint32_t> Fabric::locality_key(std::uint32_t host) const {
  if (host >= hosts.size()) {
    throw Error(ErrorCode::kNotFound, {}, "host index " + std::to_string(host) + " out of range");
  }
  std::vector<std::uint32_t> key;
  key.reserve(levels.size());
  for (const LocalityLevel& l : levels) key.push_back(l.group_of_host.at(host));
  return key;
}

void analyze(Fabric& f) {
  Graph& g = f.graph;
  f.tiers.clear();
  f.levels.clear();
  f.anomalies.clear();
  f.rail_optimized = false;
  f.rails = 0;
  const std::size_t nh = f.hosts.size();

  // Leaves per host.
  for (HostInfo& h : f.hosts) {
    h.leaves = h.port_switch;
    std::sort(h.leaves.begin(), h.leaves.end());
    h.leaves.erase(std::unique(h.leaves.begin(), h.leaves.end()), h.leaves.end());
  }
  for (std::uint32_t i = 0; i < f.nvlink_domains.size(); ++i) {
    for (std::uint32_t h : f.nvlink_domains[i].hosts) {
      if (h < nh) f.hosts[h].nvlink_domain = static_cast<int>(i);
    }
  }

  // Tiers.
  std::vector<int> tier = compute_tiers(f);
  int top = 0;
  for (std::uint32_t i = 0; i < g.vertex_count(); ++i) {
    if (is_switch(g, VertexId(i))) {
      g.vertex(VertexId(i)).sw.tier = tier[i];
      top = std::max(top, tier[i]);
    }
  }
  f.tiers.resize(static_cast<std::size_t>(top));
  for (int t = 1; t <= top; ++t) f.tiers[static_cast<std::size_t>(t - 1)].tier = t;
  for (std::uint32_t i = 0; i < g.vertex_count(); ++i) {
    if (is_switch(g, VertexId(i)) && tier[i] >= 1) {
      f.tiers[static_cast<std::size_t>(tier[i] - 1)].switches.emplace_back(i);
    }
  }
  for (const Link& l : g.links()) {
    bool sa = is_switch(g, l.a), sb = is_switch(g, l.b);
    if (sa && sb) {
      int ta = tier[l.a.value], tb = tier[l.b.value];
      if (ta < 1 || tb < 1 || ta == tb) continue;
      int lo = std::min(ta, tb), hi = std::max(ta, tb);
      f.tiers[static_cast<std::size_t>(lo - 1)].up_gbps += l.bandwidth;
      f.tiers[static_cast<std::size_t>(hi - 1)].down_gbps += l.bandwidth;
      if (l.speed_assumed) {
        f.tiers[static_cast<std::size_t>(lo - 1)].speeds_assumed = true;
        f.tiers[static_cast<std::size_t>(hi - 1)].speeds_assumed = true;
      }
    } else if (sa != sb) {
      VertexId s = sa ? l.a : l.b;
      VertexId o = sa ? l.b : l.a;
      if (g.vertex(o).kind == VertexKind::kHost && tier[s.value] >= 1) {
        f.tiers[static_cast<std::size_t>(tier[s.value] - 1)].down_gbps += l.bandwidth;
        if (l.speed_assumed)
          f.tiers[static_cast<std::size_t>(tier[s.value] - 1)].speeds_assumed = true;
      }
    }
  }
  for (FabricTier& t : f.tiers) {
    t.oversubscription = t.up_gbps > 0 ? t.down_gbps / t.up_gbps : 1.0;
  }

  // Levels. One union-find over hosts [0, nh) and vertices [nh, nh + V).
  UnionFind uf(nh + g.vertex_count());
  auto vnode = [nh](VertexId v) { return static_cast<std::uint32_t>(nh + v.value); };
  auto push_level = [&](const std::string& name, const std::vector<std::uint32_t>& raw,
                        double latency, int level_tier, bool force) {
    std::size_t groups = 0;
    std::vector<std::uint32_t> ids = dense(raw, &groups);
    if (!force && !f.levels.empty()) {
      std::size_t prev = f.levels.back().group_uplink_gbps.size();
      if (prev == groups) return;  // merges nothing new
    }
    LocalityLevel lv;
    lv.name = name;
    lv.latency_us = latency;
    lv.group_of_host = std::move(ids);
    lv.tier = level_tier;
    lv.group_uplink_gbps.assign(groups, 0.0);
    lv.group_downlink_gbps.assign(groups, 0.0);
    lv.group_uplink_links.assign(groups, 0);
    lv.group_uplink_assumed.assign(groups, 0);
    lv.group_name.assign(groups, {});
    for (std::size_t h = 0; h < nh; ++h) {
      lv.group_downlink_gbps[lv.group_of_host[h]] += host_capacity(f.hosts[h]);
    }
    // Group of each switch at this level (switches of tier <= level_tier joined to hosts).
    std::unordered_map<std::uint32_t, std::uint32_t> rep_group;
    for (std::size_t h = 0; h < nh; ++h) rep_group.emplace(raw[h], lv.group_of_host[h]);
    std::vector<std::int64_t> sw_group(g.vertex_count(), -1);
    std::vector<std::vector<std::string>> top_names(groups);
    if (level_tier >= 1) {
      for (std::uint32_t i = 0; i < g.vertex_count(); ++i) {
        if (!is_switch(g, VertexId(i)) || tier[i] < 1 || tier[i] > level_tier) continue;
        auto it = rep_group.find(uf.find(vnode(VertexId(i))));
        if (it == rep_group.end()) continue;
        sw_group[i] = it->second;
        if (tier[i] == level_tier) top_names[it->second].push_back(g.vertices()[i].name);
      }
      for (const Link& l : g.links()) {
        if (!is_switch(g, l.a) || !is_switch(g, l.b)) continue;
        std::int64_t ga = sw_group[l.a.value], gb = sw_group[l.b.value];
        if (ga == gb) continue;
        for (std::int64_t x : {ga, gb}) {
          if (x < 0) continue;
          const auto k = static_cast<std::size_t>(x);
          lv.group_uplink_gbps[k] += l.bandwidth;
          lv.group_uplink_links[k] += static_cast<std::uint32_t>(std::max(1, l.count));
          if (l.speed_assumed) lv.group_uplink_assumed[k] = 1;
        }
      }
    } else {
      lv.group_uplink_gbps = lv.group_downlink_gbps;
      for (std::size_t h = 0; h < nh; ++h) {
        const std::uint32_t k = lv.group_of_host[h];
        lv.group_uplink_links[k] += static_cast<std::uint32_t>(f.hosts[h].port_gbps.size());
        if (f.hosts[h].port_speed_assumed) lv.group_uplink_assumed[k] = 1;
      }
    }
    // A group is named by its one switch at this level's tier; else, at the leaf level, by the
    // [[unit]] all its hosts come from (when no other group or switch has that name).
    std::vector<std::string> unit_of(groups);
    std::vector<char> mixed(groups, 0);
    if (level_tier == 1) {
      for (std::size_t h = 0; h < nh; ++h) {
        std::uint32_t k = lv.group_of_host[h];
        const std::string& u = f.hosts[h].unit;
        if (u.empty() || (!unit_of[k].empty() && unit_of[k] != u)) mixed[k] = 1;
        unit_of[k] = u;
      }
    }
    std::unordered_map<std::string, int> unit_uses;
    for (std::size_t k = 0; k < groups; ++k) {
      if (!mixed[k] && !unit_of[k].empty()) ++unit_uses[unit_of[k]];
    }
    for (std::size_t k = 0; k < groups; ++k) {
      if (top_names[k].size() == 1) {
        lv.group_name[k] = top_names[k][0];
      } else if (!mixed[k] && !unit_of[k].empty() && unit_uses[unit_of[k]] == 1 &&
                 !g.find_name(VertexKind::kSwitch, unit_of[k]).valid()) {
        lv.group_name[k] = unit_of[k];
      } else {
        lv.group_name[k] = name + "-group" + std::to_string(k);
      }
    }
    if (level_tier < 1) {
      for (std::size_t h = 0; h < nh; ++h) {
        if (name == "host") lv.group_name[lv.group_of_host[h]] = f.hosts[h].name;
      }
      if (name == "nvlink") {
        for (std::size_t h = 0; h < nh; ++h) {
          int d = f.hosts[h].nvlink_domain;
          if (d >= 0)
            lv.group_name[lv.group_of_host[h]] = f.nvlink_domains[static_cast<std::size_t>(d)].name;
          else
            lv.group_name[lv.group_of_host[h]] = f.hosts[h].name;
        }
      }
    }
    f.levels.push_back(std::move(lv));
  };
  auto host_reps = [&] {
    std::vector<std::uint32_t> raw(nh);
    for (std::size_t h = 0; h < nh; ++h) raw[h] = uf.find(static_cast<std::uint32_t>(h));
    return raw;
  };

  {
    std::vector<std::uint32_t> raw(nh);
    std::iota(raw.begin(), raw.end(), 0u);
    push_level("host", raw, 0.0, 0, true);
  }
  if (!f.nvlink_domains.empty()) {
    for (const NvlinkDomain& d : f.nvlink_domains) {
      for (std::size_t k = 1; k < d.hosts.size(); ++k) {
        if (d.hosts[k] < nh && d.hosts[0] < nh) uf.unite(d.hosts[0], d.hosts[k]);
      }
    }
    push_level("nvlink", host_reps(), kNvlinkLatencyUs, 0, true);
  }
  if (top >= 1) {
    for (std::size_t h = 0; h < nh; ++h) {
      for (VertexId s : f.hosts[h].leaves) uf.unite(static_cast<std::uint32_t>(h), vnode(s));
    }
    // Leaf switches without hosts still belong to no group; that is fine.
    push_level(f.blocks.empty() ? "leaf" : "block", host_reps(), kNicLatencyUs + kSwitchHopUs, 1,
               true);
    for (int t = 2; t <= top; ++t) {
      for (VertexId s : f.tiers[static_cast<std::size_t>(t - 1)].switches) {
        for (VertexId c : down_neighbours(f, tier, s)) uf.unite(vnode(s), vnode(c));
      }
      std::string name =
          t == top ? "spine" : (t == 2 && top == 3 ? "pod" : "tier" + std::to_string(t));
      push_level(name, host_reps(), kNicLatencyUs + (2 * t - 1) * kSwitchHopUs, t, false);
    }
  }

  // The level that joins everything is the spine level, whatever tier formed it.
  if (f.levels.size() > 1 && f.levels.back().group_uplink_gbps.size() == 1 &&
      f.levels.back().name != "leaf" && f.levels.back().name != "host" &&
      f.levels.back().name != "nvlink") {
    LocalityLevel& last = f.levels.back();
    if (last.name != "spine") {
      if (last.group_name[0] == last.name + "-group0") last.group_name[0] = "spine-group0";
      last.name = "spine";
    }
  }
  if (!f.blocks.empty()) {
    // Slurm topology/block: the importer made one tier-1 switch per base block (the level above
    // is "block"); aggregates of consecutive base blocks follow BlockSizes.
    std::size_t base = f.block_sizes.empty() ? 0 : static_cast<std::size_t>(f.block_sizes[0]);
    for (std::size_t k = 1; k < f.block_sizes.size() && base > 0; ++k) {
      std::size_t per = static_cast<std::size_t>(f.block_sizes[k]) / base;
      if (per < 2) continue;
      for (std::size_t b = 0; b < f.blocks.size(); ++b) {
        std::size_t first = b - b % per;
        if (!f.blocks[b].second.empty() && !f.blocks[first].second.empty() &&
            f.blocks[b].second[0] < nh && f.blocks[first].second[0] < nh) {
          uf.unite(f.blocks[first].second[0], f.blocks[b].second[0]);
        }
      }
      push_level("block" + std::to_string(f.block_sizes[k]), host_reps(),
                 kNicLatencyUs + 3 * kSwitchHopUs, 1, false);
    }
  }

  // Rails: inside each leaf group, NIC k of every host reaches the same switch.
  std::size_t leaf_level = f.levels.size();
  for (std::size_t i = 0; i < f.levels.size(); ++i) {
    if (f.levels[i].name == "leaf") leaf_level = i;
  }
  if (leaf_level < f.levels.size()) {
    const LocalityLevel& lv = f.levels[leaf_level];
    std::vector<std::vector<std::uint32_t>> members(lv.group_uplink_gbps.size());
    for (std::uint32_t h = 0; h < nh; ++h) members[lv.group_of_host[h]].push_back(h);
    bool all_aligned = true;
    int considered = 0;
    int rails = 0;
    for (const auto& m : members) {
      if (m.size() < 2 || f.hosts[m[0]].port_switch.size() < 2) continue;
      ++considered;
      const auto& first = f.hosts[m[0]].port_switch;
      std::set<std::uint32_t> distinct;
      for (VertexId s : first) distinct.insert(s.value);
      bool ok = distinct.size() == first.size();
      for (std::uint32_t h : m) ok = ok && f.hosts[h].port_switch == first;
      all_aligned = all_aligned && ok;
      if (ok)
        rails = rails == 0 ? static_cast<int>(first.size())
                           : std::min(rails, static_cast<int>(first.size()));
    }
    if (considered > 0 && all_aligned) {
      f.rail_optimized = true;
      f.rails = rails;
    }
  }

  add_anomalies(f, tier, top);
}

void declare_oversubscription(Fabric& f, const std::vector<double>& per_tier) {
  for (std::size_t t = 0; t < per_tier.size(); ++t) {
    if (!(per_tier[t] >= 1) || per_tier[t] > 1e6) {
      throw Error(ErrorCode::kBadInput, "oversubscription",
                  "tier " + std::to_string(t + 1) + ": " + std::to_string(per_tier[t]) +
                      " is not a ratio down:up of at least 1");
    }
    f.declared_oversubscription[static_cast<int>(t + 1)] = per_tier[t];
  }
  // The check against the wiring (anomalies) runs in analyze().
  if (!f.tiers.empty()) analyze(f);
}

std::string_view to_string(Routing r) { return r == Routing::kEcmp ? "ecmp" : "adaptive"; }

Routing parse_routing(std::string_view text, const std::string& context) {
  if (text == "adaptive") return Routing::kAdaptive;
  if (text == "ecmp") return Routing::kEcmp;
  throw Error(ErrorCode::kBadInput, context,
              "routing must be \"adaptive\" or \"ecmp\", not \"" + std::string(text) + "\"");
}

std::vector<double> parse_oversubscription(std::string_view text, const std::string& context) {
  std::vector<double> out;
  std::string_view rest = text;
  while (true) {
    const std::size_t comma = rest.find(',');
    std::string tok(rest.substr(0, comma));
    while (!tok.empty() && (tok.front() == ' ' || tok.front() == '[')) tok.erase(0, 1);
    while (!tok.empty() && (tok.back() == ' ' || tok.back() == ']')) tok.pop_back();
    const std::size_t colon = tok.find(':');
    double ratio = -1;
    try {
      std::size_t used = 0;
      const double down = std::stod(tok.substr(0, colon), &used);
      if (used != tok.substr(0, colon).size()) throw std::invalid_argument(tok);
      double up = 1;
      if (colon != std::string::npos) {
        const std::string u = tok.substr(colon + 1);
        up = std::stod(u, &used);
        if (used != u.size()) throw std::invalid_argument(tok);
      }
      ratio = up > 0 ? down / up : -1;
    } catch (const std::exception&) {
      ratio = -1;
    }
    if (!(ratio >= 1) || ratio > 1e6) {
      throw Error(ErrorCode::kBadInput, context,
                  "oversubscription \"" + std::string(text) +
                      "\": each tier's ratio (down:up, tier 1 first, e.g. 1,2 or 1:1,2:1) must be "
                      "a number of at least 1, not \"" +
                      tok + "\"");
    }
    out.push_back(ratio);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (out.size() > 16) throw Error(ErrorCode::kBadInput, context, "more than 16 tiers");
  return out;
}

}  // namespace topoaware::topology
