// Fabric exporters: Slurm topology.conf (tree, block), JSON, Graphviz DOT.
//
// Slurm tree: when every host hangs from exactly one leaf, the real switches are written (a
// switch's Switches= are its children: the switches below it); when hosts have ports on several
// leaves (rail-optimized fabrics), Slurm's one-leaf-per-node rule cannot hold the wiring, so the
// locality levels are written instead: each leaf group (a scalable unit) becomes one Slurm leaf
// switch and each higher group a switch above it. Either way Slurm sees the same nesting the mapper
// uses. Slurm block: the leaf groups are the base blocks; BlockSizes are base * 2^k, as slurmctld
// requires, with base = the smallest block.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>

#include "topoaware/topology/error.h"
#include "topoaware/topology/fabric_io.h"
#include "topoaware/topology/hostlist.h"

namespace topoaware::topology {
namespace {

bool is_switch(const Graph& g, VertexId v) { return g.vertex(v).kind == VertexKind::kSwitch; }

// Children of switch s: switches below it.
std::vector<VertexId> children_of(const Fabric& f, VertexId s) {
  std::vector<VertexId> out;
  const Graph& g = f.graph;
  int ts = g.vertex(s).sw.tier;
  for (LinkId lid : g.links_of(s)) {
    const Link& l = g.link(lid);
    VertexId o = g.other_end(lid, s);
    if (!is_switch(g, o) || o == s) continue;
    bool child = f.hierarchical ? (l.a == s && l.b == o)
                                : (g.vertex(o).sw.tier > 0 && g.vertex(o).sw.tier < ts);
    if (child && std::find(out.begin(), out.end(), o) == out.end()) out.push_back(o);
  }
  return out;
}

std::vector<std::string> host_names(const Fabric& f, const std::vector<std::uint32_t>& idx) {
  std::vector<std::string> out;
  out.reserve(idx.size());
  for (std::uint32_t h : idx) out.push_back(f.hosts[h].name);
  return out;
}

// Names in natural order, compressed: what a person (and Slurm) reads best.
std::string ranged(std::vector<std::string> names) {
  std::sort(names.begin(), names.end(),
            [](const std::string& a, const std::string& b) { return hostname_less(a, b); });
  return compress_hostlist(names);
}

std::string link_speed_gbit(double gbps) {
  long gbit = static_cast<long>(gbps * 8.0 + 0.5);
  return gbit > 0 ? " LinkSpeed=" + std::to_string(gbit) : std::string();
}

// Index of the "leaf" (or "block") level, or levels.size().
std::size_t leaf_level(const Fabric& f) {
  for (std::size_t i = 0; i < f.levels.size(); ++i) {
    if (f.levels[i].name == "leaf" || f.levels[i].name == "block") return i;
  }
  return f.levels.size();
}

}  // namespace

std::string to_slurm_tree(const Fabric& f) {
  const Graph& g = f.graph;
  std::ostringstream out;
  out << "# Slurm topology.conf (topology/tree) written by topo-aware from " << f.source << "\n";
  bool one_leaf = true;
  for (const HostInfo& h : f.hosts) one_leaf = one_leaf && h.leaves.size() <= 1;
  if (one_leaf) {
    // Real switches, leaves first, each tier in id order.
    std::vector<std::vector<std::uint32_t>> hosts_of(g.vertex_count());
    for (std::uint32_t i = 0; i < f.hosts.size(); ++i) {
      if (!f.hosts[i].leaves.empty()) hosts_of[f.hosts[i].leaves[0].value].push_back(i);
    }
    for (const FabricTier& t : f.tiers) {
      for (VertexId s : t.switches) {
        std::vector<std::string> kids;
        for (VertexId c : children_of(f, s)) kids.push_back(g.vertex(c).name);
        const auto& hs = hosts_of[s.value];
        if (kids.empty() && hs.empty()) continue;  // Slurm wants children on every line
        double speed = 0;
        // A placeholder speed (the source had none) is not written back as if it were known.
        // One cable's speed: Slurm's LinkSpeed is a link's, and merged cables count as one.
        for (LinkId lid : g.links_of(s)) {
          const Link& l = g.link(lid);
          if (!l.speed_assumed) speed = std::max(speed, l.bandwidth / std::max(1, l.count));
        }
        out << "SwitchName=" << g.vertex(s).name;
        if (!kids.empty()) out << " Switches=" << ranged(kids);
        if (!hs.empty()) out << " Nodes=" << ranged(host_names(f, hs));
        out << link_speed_gbit(speed) << "\n";
      }
    }
    return out.str();
  }
  out << "# Hosts have ports on several leaf switches (rail-optimized); each leaf group is "
         "written\n"
         "# as one Slurm leaf switch and each higher group as a switch above it.\n";
  std::size_t first = leaf_level(f);
  if (first >= f.levels.size()) return out.str();
  for (std::size_t li = first; li < f.levels.size(); ++li) {
    const LocalityLevel& lv = f.levels[li];
    std::size_t groups = lv.group_uplink_gbps.size();
    std::vector<std::vector<std::uint32_t>> members(groups);
    for (std::uint32_t h = 0; h < f.hosts.size(); ++h) members[lv.group_of_host[h]].push_back(h);
    auto gname = [&](const LocalityLevel& l, std::size_t k) {
      return l.group_name[k].empty() ? l.name + std::to_string(k) : l.group_name[k];
    };
    for (std::size_t k = 0; k < groups; ++k) {
      if (li == first) {
        bool attached = !f.hosts[members[k][0]].leaves.empty();
        if (!attached) continue;
        out << "SwitchName=" << gname(lv, k) << " Nodes=" << ranged(host_names(f, members[k]))
            << "\n";
      } else {
        const LocalityLevel& below = f.levels[li - 1];
        std::vector<std::string> kids;
        std::set<std::uint32_t> seen;
        for (std::uint32_t h : members[k]) {
          std::uint32_t c = below.group_of_host[h];
          if (f.hosts[h].leaves.empty() || !seen.insert(c).second) continue;
          kids.push_back(gname(below, c));
        }
        if (kids.size() < 2) continue;
        out << "SwitchName=" << gname(lv, k) << " Switches=" << ranged(kids) << "\n";
      }
    }
  }
  return out.str();
}

std::optional<SlurmRelease> parse_slurm_release(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  for (std::string_view name : {"slurm ", "slurm-wlm "}) {  // scontrol; Debian's slurmd -V
    if (text.starts_with(name)) text.remove_prefix(name.size());
  }
  // major.minor[.micro[-suffix]], each a number of at most 3 digits.
  int parts[2] = {0, 0};
  std::size_t at = 0;
  for (int k = 0; k < 2; ++k) {
    std::size_t digits = 0;
    int v = 0;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9' && digits < 3) {
      v = v * 10 + (text[at] - '0');
      ++at;
      ++digits;
    }
    if (digits == 0) return std::nullopt;
    parts[k] = v;
    if (k == 0) {
      if (at >= text.size() || text[at] != '.') return std::nullopt;
      ++at;
    }
  }
  if (at < text.size() && text[at] != '.') return std::nullopt;
  if (at < text.size()) {
    for (std::size_t i = at + 1; i < text.size(); ++i) {
      const char c = text[i];
      const bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '-' || c == '.';
      if (!ok) return std::nullopt;
    }
  }
  if (parts[0] < 1 || parts[1] > 12) return std::nullopt;
  return SlurmRelease{parts[0], parts[1]};
}

std::string slurm_release_name(SlurmRelease r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%d.%02d", r.major, r.minor);
  return buf;
}

std::string to_slurm_block(const Fabric& f, SlurmRelease release, const std::string& origin) {
  // topology/block arrived in 23.11, BlockSizes in 24.05 (topology.conf(5) of each release).
  constexpr SlurmRelease kBlockPlugin{23, 11}, kBlockSizes{24, 5};
  const std::string from = origin.empty() ? "" : " (" + origin + ")";
  if (release < kBlockPlugin) {
    throw Error(ErrorCode::kBadInput, "Slurm " + slurm_release_name(release) + from,
                "has no topology/block (Slurm 23.11 and later): write a tree (--of slurm-tree), "
                "or name the release the file is for (--slurm-version)");
  }
  std::ostringstream out;
  out << "# Slurm topology.conf (topology/block) for Slurm " << slurm_release_name(release) << from
      << ", written by topo-aware from " << f.source << "\n";
  std::vector<std::pair<std::string, std::vector<std::uint32_t>>> blocks;
  if (!f.blocks.empty()) {
    blocks = f.blocks;
  } else {
    std::size_t li = leaf_level(f);
    if (li < f.levels.size()) {
      const LocalityLevel& lv = f.levels[li];
      std::vector<std::vector<std::uint32_t>> members(lv.group_uplink_gbps.size());
      for (std::uint32_t h = 0; h < f.hosts.size(); ++h) members[lv.group_of_host[h]].push_back(h);
      for (std::size_t k = 0; k < members.size(); ++k) {
        if (f.hosts[members[k][0]].leaves.empty()) continue;
        blocks.emplace_back("block" + std::to_string(blocks.size() + 1), members[k]);
      }
    }
  }
  if (blocks.empty()) {
    throw Error(ErrorCode::kBadInput, f.source,
                "no host is attached to a switch: no blocks to write");
  }
  std::size_t base = SIZE_MAX;
  for (const auto& [name, members] : blocks) {
    base = std::min(base, members.size());
    out << "BlockName=" << name << " Nodes=" << ranged(host_names(f, members)) << "\n";
  }
  // base * 2^k up to the first size covering all blocks, which is where slurmctld stops.
  std::ostringstream sizes;
  std::size_t n = 1;
  for (int k = 0; k <= 15; ++k) {
    if (k > 0) sizes << ",";
    sizes << base * n;
    if (n >= blocks.size()) break;
    n *= 2;
  }
  if (release < kBlockSizes) {
    out << "# BlockSizes left out: Slurm " << slurm_release_name(release)
        << " reads none (24.05 and later) and refuses a file that has it; from 24.05 it would be "
        << "BlockSizes=" << sizes.str() << "\n";
  } else {
    out << "BlockSizes=" << sizes.str() << "\n";
  }
  return out.str();
}

std::string fabric_to_json(const Fabric& f) {
  using nlohmann::ordered_json;
  const Graph& g = f.graph;
  ordered_json j;
  j["format"] = "topo-aware-fabric";
  j["version"] = 1;
  j["source"] = f.source;
  j["rail_optimized"] = f.rail_optimized;
  j["rails"] = f.rails;
  j["channel_adapters"] = f.channel_adapters;
  j["hierarchical"] = f.hierarchical;
  ordered_json sw = ordered_json::array();
  for (const Vertex& v : g.vertices()) {
    if (v.kind != VertexKind::kSwitch) continue;
    ordered_json s;
    s["name"] = v.name;
    s["tier"] = v.sw.tier;
    if (!v.sw.guid.empty()) s["guid"] = v.sw.guid;
    if (!v.sw.model.empty()) s["model"] = v.sw.model;
    if (v.sw.ports > 0) s["ports"] = v.sw.ports;
    sw.push_back(std::move(s));
  }
  j["switches"] = std::move(sw);
  ordered_json hosts = ordered_json::array();
  for (std::uint32_t i = 0; i < f.hosts.size(); ++i) {
    const HostInfo& h = f.hosts[i];
    ordered_json o;
    o["name"] = h.name;
    ordered_json leaves = ordered_json::array();
    for (VertexId s : h.leaves) leaves.push_back(g.vertex(s).name);
    o["leaves"] = std::move(leaves);
    ordered_json ports = ordered_json::array();
    for (std::size_t k = 0; k < h.port_switch.size(); ++k) {
      ordered_json p;
      p["switch"] = g.vertex(h.port_switch[k]).name;
      p["gbps"] = h.port_gbps[k];
      if (h.port_speed_assumed) p["speed_assumed"] = true;
      if (!h.port_nic[k].empty()) p["nic"] = h.port_nic[k];
      ports.push_back(std::move(p));
    }
    o["ports"] = std::move(ports);
    if (!h.node_type.empty()) o["node_type"] = h.node_type;
    if (h.nvlink_domain >= 0)
      o["nvlink_domain"] = f.nvlink_domains[static_cast<std::size_t>(h.nvlink_domain)].name;
    if (h.excluded) o["excluded"] = true;
    if (h.degraded != 1.0) o["degraded"] = h.degraded;
    if (!h.unit.empty()) o["unit"] = h.unit;
    if (!h.source_id.empty()) o["source_id"] = h.source_id;
    o["locality_key"] = f.locality_key(i);
    hosts.push_back(std::move(o));
  }
  j["hosts"] = std::move(hosts);
  ordered_json links = ordered_json::array();
  for (const Link& l : g.links()) {
    if (!is_switch(g, l.a) || !is_switch(g, l.b)) continue;
    ordered_json o;
    o["a"] = g.vertex(l.a).name;
    o["b"] = g.vertex(l.b).name;
    // One cable's speed; merged parallel cables say how many (the reader merges them again).
    o["gbps"] = l.bandwidth / std::max(1, l.count);
    if (l.count > 1) o["cables"] = l.count;
    if (l.speed_assumed) o["speed_assumed"] = true;
    if (!l.rate.empty()) o["rate"] = l.rate;
    if (l.port_a >= 0) o["port_a"] = l.port_a;
    if (l.port_b >= 0) o["port_b"] = l.port_b;
    links.push_back(std::move(o));
  }
  j["switch_links"] = std::move(links);
  ordered_json tiers = ordered_json::array();
  for (const FabricTier& t : f.tiers) {
    ordered_json o;
    o["tier"] = t.tier;
    o["switches"] = t.switches.size();
    o["down_gbps"] = t.down_gbps;
    o["up_gbps"] = t.up_gbps;
    o["oversubscription"] = t.oversubscription;
    if (t.speeds_assumed) o["speeds_assumed"] = true;
    tiers.push_back(std::move(o));
  }
  j["tiers"] = std::move(tiers);
  ordered_json rails = ordered_json::array();
  if (f.rail_optimized && !f.hosts.empty()) {
    // Rail k: the switches port k of the hosts reach.
    for (int k = 0; k < f.rails; ++k) {
      std::set<std::string> names;
      for (const HostInfo& h : f.hosts) {
        if (static_cast<int>(h.port_switch.size()) > k)
          names.insert(g.vertex(h.port_switch[static_cast<std::size_t>(k)]).name);
      }
      ordered_json r;
      r["rail"] = k;
      r["switches"] = names;
      rails.push_back(std::move(r));
    }
  }
  j["rails"] = f.rails;
  j["rail_switches"] = std::move(rails);
  ordered_json levels = ordered_json::array();
  for (const LocalityLevel& l : f.levels) {
    ordered_json o;
    o["name"] = l.name;
    o["groups"] = l.group_uplink_gbps.size();
    o["latency_us"] = l.latency_us;
    o["group_name"] = l.group_name;
    o["group_uplink_gbps"] = l.group_uplink_gbps;
    o["group_downlink_gbps"] = l.group_downlink_gbps;
    levels.push_back(std::move(o));
  }
  j["levels"] = std::move(levels);
  ordered_json doms = ordered_json::array();
  for (const NvlinkDomain& d : f.nvlink_domains) {
    ordered_json o;
    o["name"] = d.name;
    o["hosts"] = host_names(f, d.hosts);
    o["gpu_bandwidth"] = d.gpu_bandwidth;
    doms.push_back(std::move(o));
  }
  j["nvlink_domains"] = std::move(doms);
  ordered_json types = ordered_json::array();
  for (const NodeType& t : f.node_types) {
    ordered_json o;
    o["name"] = t.name;
    o["capture"] = t.capture;
    if (t.gpus >= 0) o["gpus"] = t.gpus;
    types.push_back(std::move(o));
  }
  j["node_types"] = std::move(types);
  if (!f.blocks.empty()) {
    ordered_json bl = ordered_json::array();
    for (const auto& [name, members] : f.blocks) {
      bl.push_back({{"name", name}, {"hosts", host_names(f, members)}});
    }
    j["blocks"] = std::move(bl);
    j["block_sizes"] = f.block_sizes;
  }
  ordered_json an = ordered_json::array();
  for (const Anomaly& a : f.anomalies) an.push_back({{"kind", a.kind}, {"message", a.message}});
  j["anomalies"] = std::move(an);
  ordered_json declared = ordered_json::object();
  for (const auto& [t, v] : f.declared_oversubscription) declared[std::to_string(t)] = v;
  j["declared_oversubscription"] = std::move(declared);
  if (f.routing != Routing::kAdaptive || !f.routing_by_tier.empty()) {
    ordered_json routing;
    routing["default"] = std::string(to_string(f.routing));
    ordered_json tiers_routing = ordered_json::object();
    for (const auto& [t, r] : f.routing_by_tier) tiers_routing[std::to_string(t)] = to_string(r);
    routing["tiers"] = std::move(tiers_routing);
    j["routing"] = std::move(routing);
  }
  j["notes"] = f.notes;
  // Names and notes come from files: a byte that is not UTF-8 is written as U+FFFD rather than
  // making the whole export throw (found by fuzzing, tests/fuzz/regressions/fabric_toml).
  return j.dump(2, ' ', false, ordered_json::error_handler_t::replace) + "\n";
}

std::string fabric_to_dot(const Fabric& f) {
  const Graph& g = f.graph;
  auto quote = [](const std::string& s) {
    std::string q = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') q += '\\';
      q += c;
    }
    return q + "\"";
  };
  std::ostringstream out;
  out << "// topo-aware fabric from " << f.source << "\n";
  out << "graph fabric {\n  rankdir=BT;\n  node [fontname=\"Helvetica\", fontsize=10];\n";
  // One rank per tier, hosts at the bottom.
  int top = static_cast<int>(f.tiers.size());
  for (int t = top; t >= 1; --t) {
    out << "  { rank=same; // tier " << t << "\n";
    for (VertexId s : f.tiers[static_cast<std::size_t>(t - 1)].switches) {
      out << "    " << quote(g.vertex(s).name)
          << " [shape=box, style=filled, fillcolor=" << (t == 1 ? "\"#cfe2f3\"" : "\"#f4cccc\"")
          << "];\n";
    }
    out << "  }\n";
  }
  out << "  { rank=same; // hosts\n";
  for (const HostInfo& h : f.hosts) {
    out << "    " << quote(h.name) << " [shape=ellipse" << (h.excluded ? ", style=dashed" : "")
        << "];\n";
  }
  out << "  }\n";
  // Parallel cables merged: one edge per pair, labelled with count and total bandwidth.
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::pair<int, double>> edges;
  // Lower end first: host before switch, lower tier before higher.
  auto rank = [&](VertexId v) {
    return g.vertex(v).kind == VertexKind::kHost ? 0 : std::max(1, g.vertex(v).sw.tier);
  };
  for (const Link& l : g.links()) {
    bool swap = rank(l.b) < rank(l.a) || (rank(l.b) == rank(l.a) && l.b.value < l.a.value);
    auto& e =
        edges[swap ? std::make_pair(l.b.value, l.a.value) : std::make_pair(l.a.value, l.b.value)];
    e.first += std::max(1, l.count);
    e.second += l.bandwidth;
  }
  for (const auto& [k, e] : edges) {
    char label[64];
    if (e.first > 1) {
      std::snprintf(label, sizeof label, "%dx %g GB/s", e.first, e.second / e.first);
    } else {
      std::snprintf(label, sizeof label, "%g GB/s", e.second);
    }
    out << "  " << quote(g.vertex(VertexId(k.first)).name) << " -- "
        << quote(g.vertex(VertexId(k.second)).name) << " [label=" << quote(label) << "];\n";
  }
  out << "}\n";
  return out.str();
}

}  // namespace topoaware::topology
