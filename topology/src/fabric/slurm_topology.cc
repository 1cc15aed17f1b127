// Slurm topology.conf (topology/tree and topology/block) into a Fabric.
//
// Rules, matching what slurmctld accepts:
//  - parameter names are case-insensitive; '#' starts a comment; a trailing '\' continues a line;
//  - tree: SwitchName=<name> [Switches=<hostlist>] [Nodes=<hostlist>] [LinkSpeed=<n>]; every
//    switch named in Switches= must have its own SwitchName= line; a name defined twice is an
//    error;
//  - a node listed under two switches is an error naming both lines (Slurm's tree plugin gives
//    each node one leaf; silently picking one would hide a wiring or file mistake);
//  - LinkSpeed is read as Gb/s per link (Slurm leaves the unit open and does not use it); a
//    switch without it gets kDefaultLinkGbit as a placeholder on its links (Link::speed_assumed,
//    HostInfo::port_speed_assumed), and the fabric carries a note saying so: the mapper then
//    takes host NICs from the node model and sizes uplinks from what they carry;
//  - block: BlockName=<name> Nodes=<hostlist>, optional BlockSizes=<n>,... where the first size is
//    the base block size, every size is base * 2^k (k <= 15) and no block has fewer nodes than
//    the base (slurmctld's checks). Each block becomes a tier-1 switch holding its nodes.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fabric_build.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/hostlist.h"

namespace topoaware::topology::detail {
namespace {

constexpr double kDefaultLinkGbit = 100.0;  // 4xEDR; said in Fabric::notes when used

std::string lower(std::string_view s) {
  std::string out;
  for (char c : s) out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return out;
}

struct Entry {
  long line = 0;
  std::unordered_map<std::string, std::string> kv;  // lowercase key -> value
  std::string first_key;                            // lowercase
};

struct SwitchLine {
  std::string name;
  long line = 0;
  std::vector<std::string> children;
  std::vector<std::string> nodes;
  double link_gbit = -1;
};

}  // namespace

Fabric parse_slurm_topology(const std::string& path, std::string_view text) {
  // Logical lines.
  std::vector<Entry> entries;
  std::string pending;
  long pending_line = 0;
  long line_no = 0;
  auto flush = [&](long at) {
    std::string_view body = trim(pending);
    if (!body.empty()) {
      Entry e;
      e.line = at;
      std::size_t i = 0;
      while (i < body.size()) {
        while (i < body.size() && (body[i] == ' ' || body[i] == '\t')) ++i;
        if (i >= body.size()) break;
        std::size_t start = i;
        while (i < body.size() && body[i] != ' ' && body[i] != '\t') ++i;
        std::string_view tok = body.substr(start, i - start);
        std::size_t eq = tok.find('=');
        if (eq == std::string_view::npos || eq == 0) {
          throw Error(ErrorCode::kBadInput, where(path, at),
                      "expected Key=Value, got \"" + std::string(tok.substr(0, 60)) + "\"");
        }
        std::string key = lower(tok.substr(0, eq));
        std::string value(tok.substr(eq + 1));
        if (e.first_key.empty()) e.first_key = key;
        if (!e.kv.emplace(key, value).second) {
          throw Error(ErrorCode::kBadInput, where(path, at),
                      "\"" + std::string(tok.substr(0, eq)) + "\" given twice on one line");
        }
      }
      entries.push_back(std::move(e));
    }
    pending.clear();
  };
  for (std::string_view raw : split_lines(text)) {
    ++line_no;
    std::string_view line = raw;
    std::size_t hash = line.find('#');
    if (hash != std::string_view::npos) line = line.substr(0, hash);
    line = trim(line);
    if (pending.empty()) pending_line = line_no;
    if (!line.empty() && line.back() == '\\') {
      pending += std::string(line.substr(0, line.size() - 1)) + " ";
      continue;
    }
    pending += std::string(line);
    flush(pending_line);
  }
  flush(pending_line);
  if (entries.empty()) throw Error(ErrorCode::kBadInput, path, "no SwitchName= or BlockName= line");

  FabricBuilder b("slurm-topology:" + path);
  Fabric& f = b.fabric();
  f.hierarchical = true;
  bool tree = false, block = false;
  std::vector<SwitchLine> switches;
  std::unordered_map<std::string, std::size_t> switch_line;
  std::unordered_map<std::string, std::pair<std::string, long>> node_owner;  // node -> switch, line
  std::size_t total_nodes = 0;
  auto count_guard = [&](std::size_t add, long at) {
    total_nodes += add;
    if (total_nodes > kMaxFabricHosts) {
      throw Error(ErrorCode::kLimit, where(path, at),
                  "more than " + std::to_string(kMaxFabricHosts) + " node entries in the file");
    }
  };
  long block_sizes_line = 0;
  std::string block_sizes_text;
  struct BlockLine {
    std::string name;
    long line;
    std::vector<std::string> nodes;
  };
  std::vector<BlockLine> blocks;

  for (const Entry& e : entries) {
    std::string ctx = where(path, e.line);
    auto allowed = [&](std::initializer_list<const char*> keys) {
      for (const auto& [k, v] : e.kv) {
        bool ok = false;
        for (const char* a : keys) ok = ok || k == a;
        if (!ok) {
          throw Error(ErrorCode::kBadInput, ctx,
                      "unknown parameter \"" + k + "\" on a " + e.first_key + " line");
        }
      }
    };
    if (e.first_key == "switchname") {
      tree = true;
      allowed({"switchname", "switches", "nodes", "linkspeed"});
      SwitchLine s;
      s.name = e.kv.at("switchname");
      s.line = e.line;
      if (s.name.empty()) throw Error(ErrorCode::kBadInput, ctx, "empty SwitchName");
      if (s.name.find_first_of("[],") != std::string::npos) {
        throw Error(ErrorCode::kBadInput, ctx, "SwitchName \"" + s.name + "\" must be one name");
      }
      auto [it, fresh] = switch_line.emplace(s.name, switches.size());
      if (!fresh) {
        throw Error(ErrorCode::kBadInput, ctx,
                    "switch " + s.name + " is defined twice (also line " +
                        std::to_string(switches[it->second].line) + ")");
      }
      if (auto sw = e.kv.find("switches"); sw != e.kv.end()) {
        s.children = expand_hostlist(sw->second, ctx, kMaxFabricHosts);
        count_guard(s.children.size(), e.line);
      }
      if (auto nd = e.kv.find("nodes"); nd != e.kv.end()) {
        s.nodes = expand_hostlist(nd->second, ctx, kMaxFabricHosts);
        count_guard(s.nodes.size(), e.line);
      }
      if (auto ls = e.kv.find("linkspeed"); ls != e.kv.end()) {
        const std::string& v = ls->second;
        unsigned long speed = 0;
        auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), speed);
        if (ec != std::errc() || p != v.data() + v.size() || speed == 0 || speed > 1000000) {
          throw Error(ErrorCode::kBadInput, ctx,
                      "LinkSpeed \"" + v + "\" is not a positive number");
        }
        s.link_gbit = static_cast<double>(speed);
      }
      switches.push_back(std::move(s));
    } else if (e.first_key == "blockname") {
      block = true;
      allowed({"blockname", "nodes"});
      BlockLine bl{e.kv.at("blockname"), e.line, {}};
      if (bl.name.empty()) throw Error(ErrorCode::kBadInput, ctx, "empty BlockName");
      auto nd = e.kv.find("nodes");
      if (nd == e.kv.end() || nd->second.empty()) {
        throw Error(ErrorCode::kBadInput, ctx, "block " + bl.name + " has no Nodes=");
      }
      bl.nodes = expand_hostlist(nd->second, ctx, kMaxFabricHosts);
      count_guard(bl.nodes.size(), e.line);
      for (const BlockLine& other : blocks) {
        if (other.name == bl.name) {
          throw Error(ErrorCode::kBadInput, ctx,
                      "block " + bl.name + " is defined twice (also line " +
                          std::to_string(other.line) + ")");
        }
      }
      blocks.push_back(std::move(bl));
    } else if (e.first_key == "blocksizes") {
      block = true;
      allowed({"blocksizes"});
      if (block_sizes_line != 0) {
        throw Error(ErrorCode::kBadInput, ctx,
                    "BlockSizes given twice (also line " + std::to_string(block_sizes_line) + ")");
      }
      block_sizes_line = e.line;
      block_sizes_text = e.kv.at("blocksizes");
    } else {
      throw Error(ErrorCode::kBadInput, ctx,
                  "unknown parameter \"" + e.first_key +
                      "\" (a topology.conf line starts with SwitchName=, BlockName= or "
                      "BlockSizes=)");
    }
    if (tree && block) {
      throw Error(ErrorCode::kBadInput, ctx,
                  "mixes topology/tree (SwitchName=) and topology/block (BlockName=) lines");
    }
  }

  if (tree) {
    std::size_t defaulted = 0;
    for (const SwitchLine& s : switches) {
      b.add_switch(s.name);
      if (s.link_gbit < 0) ++defaulted;
    }
    for (const SwitchLine& s : switches) {
      double gbps = (s.link_gbit > 0 ? s.link_gbit : kDefaultLinkGbit) / 8.0;
      VertexId sv = b.switch_named(s.name);
      for (const std::string& c : s.children) {
        VertexId cv = b.switch_named(c);
        if (!cv.valid()) {
          throw Error(ErrorCode::kBadInput, where(path, s.line),
                      "switch " + s.name + " lists child switch " + c +
                          ", which no SwitchName= line defines");
        }
        if (cv == sv) {
          throw Error(ErrorCode::kBadInput, where(path, s.line),
                      "switch " + s.name + " lists itself in Switches=");
        }
        b.connect_switches(sv, cv, gbps, {}, -1, -1, s.link_gbit < 0);
      }
      for (const std::string& n : s.nodes) {
        auto [it, fresh] = node_owner.emplace(n, std::make_pair(s.name, s.line));
        if (!fresh) {
          throw Error(ErrorCode::kBadInput, where(path, s.line),
                      "node " + n + " is listed under switch " + s.name + " and under switch " +
                          it->second.first + " (line " + std::to_string(it->second.second) +
                          "); Slurm's topology/tree gives each node one leaf switch");
        }
        b.connect_host(b.host(n), sv, gbps, {}, {}, -1, -1, s.link_gbit < 0);
      }
    }
    if (defaulted > 0) {
      f.notes.push_back(std::to_string(defaulted) + " of " + std::to_string(switches.size()) +
                        " switches have no LinkSpeed: their links carry a placeholder of 100 Gb/s "
                        "(12.5 GB/s); the mapper takes host NICs from the node capture and sizes "
                        "uplinks from what they carry (non-blocking unless an oversubscription is "
                        "declared)");
    }
    if (f.hosts.empty()) {
      throw Error(ErrorCode::kBadInput, path, "no switch lists any Nodes=");
    }
    return b.take();
  }

  // topology/block.
  if (blocks.empty()) throw Error(ErrorCode::kBadInput, path, "BlockSizes= without any BlockName=");
  std::size_t smallest = SIZE_MAX;
  for (const BlockLine& bl : blocks) {
    smallest = std::min(smallest, bl.nodes.size());
    VertexId sv = b.add_switch(bl.name);
    std::vector<std::uint32_t> members;
    for (const std::string& n : bl.nodes) {
      auto [it, fresh] = node_owner.emplace(n, std::make_pair(bl.name, bl.line));
      if (!fresh) {
        throw Error(ErrorCode::kBadInput, where(path, bl.line),
                    "node " + n + " is in block " + bl.name + " and in block " + it->second.first +
                        " (line " + std::to_string(it->second.second) + ")");
      }
      std::uint32_t h = b.host(n);
      b.connect_host(h, sv, kDefaultLinkGbit / 8.0, {}, {}, -1, -1, true);
      members.push_back(h);
    }
    f.blocks.emplace_back(bl.name, std::move(members));
  }
  if (block_sizes_line != 0) {
    std::string ctx = where(path, block_sizes_line);
    std::string_view rest = block_sizes_text;
    int base = 0;
    while (!rest.empty()) {
      std::size_t comma = rest.find(',');
      std::string_view tok = rest.substr(0, comma);
      int v = 0;
      auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
      if (ec != std::errc() || p != tok.data() + tok.size() || v <= 0) {
        throw Error(ErrorCode::kBadInput, ctx,
                    "BlockSizes value \"" + std::string(tok) + "\" is not a positive number");
      }
      if (base == 0) base = v;
      int ratio = v / base;
      if (v % base != 0 || (ratio & (ratio - 1)) != 0 || ratio > (1 << 15)) {
        throw Error(ErrorCode::kBadInput, ctx,
                    "BlockSizes value " + std::to_string(v) + " is not the base size " +
                        std::to_string(base) +
                        " times a power of two (up to 2^15), as slurmctld requires");
      }
      if (!f.block_sizes.empty() && v <= f.block_sizes.back()) {
        throw Error(ErrorCode::kBadInput, ctx, "BlockSizes must increase");
      }
      f.block_sizes.push_back(v);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    if (f.block_sizes.empty()) throw Error(ErrorCode::kBadInput, ctx, "empty BlockSizes");
    for (const BlockLine& bl : blocks) {
      if (bl.nodes.size() < static_cast<std::size_t>(base)) {
        throw Error(ErrorCode::kBadInput, where(path, bl.line),
                    "block " + bl.name + " has " + std::to_string(bl.nodes.size()) +
                        " nodes, fewer than the base block size " + std::to_string(base));
      }
    }
  } else {
    // slurmctld's default: the base block size is the first block's node count, and levels
    // 1, 2, 4, 8, 16 base blocks.
    int base = static_cast<int>(blocks.front().nodes.size());
    for (int k = 0; k < 5; ++k) f.block_sizes.push_back(base << k);
  }
  f.notes.push_back(
      "topology/block has no link speeds: a placeholder of 100 Gb/s (12.5 GB/s) per node; the "
      "mapper takes host NICs from the node capture and sizes blocks' uplinks from what they "
      "carry (non-blocking unless an oversubscription is declared)");
  (void)smallest;
  return b.take();
}

}  // namespace topoaware::topology::detail
