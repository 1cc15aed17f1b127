// The native TOML cluster description into a Fabric. The format is documented by
// etc/cluster-dgx-h100.toml and docs/fabric.md; in short:
//
//   name = "..."                         # optional
//   [defaults] link = "4xNDR"            # or link_gbps = 50 (GB/s); used where a section has none
//   [node_types.<name>] capture = "PATH", gpus = 8   # PATH relative to this file
//   [[unit]] name, hosts = "<hostlist>", leaves = "<hostlist>", wiring = "rail"|"spread",
//            nics = 8, node_type = "...", link = "..."
//   [[uplinks]] from = "<switches>", to = "<switches>", cables = 4, link = "..."
//   [[tier]] tier = 1, oversubscription = 2.0       # declared; analyze() checks the wiring
//            routing = "adaptive"|"ecmp"            # how the tier spreads flows over uplinks
//   routing = "adaptive"|"ecmp"          # top level: every tier without its own
//   [[nvlink_domain]] name, hosts = "<hostlist>", gpu_bandwidth = 900
//   [hosts] excluded = "<hostlist>"; [hosts.degraded] "<host>" = 0.875
//
// Every table and key is checked: an unknown key is an error (a typo must not silently change
// the fabric). Errors name file:line from TOML++'s source positions.
#include <toml++/toml.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fabric_build.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/hostlist.h"

namespace topoaware::topology::detail {
namespace {

constexpr std::size_t kMaxTomlCables = 1u << 22;

// What the description will build, counted before building it: hosts and leaves of every
// [[unit]], host ports, one (merged) link per [[uplinks]] switch pair. Best effort: a table this
// cannot read counts nothing here and is refused, at its line, by the pass that builds.
struct Size {
  std::size_t vertices = 0, links = 0;
};

Size planned_size(const toml::table& root) {
  Size s;
  auto count = [](const toml::table& t, const char* key) -> std::size_t {
    auto v = t[key].value<std::string>();
    if (!v) return 0;
    try {
      return hostlist_count(*v);
    } catch (const Error&) {
      return 0;
    }
  };
  auto each = [&](const char* name, auto&& fn) {
    if (const toml::array* a = root[name].as_array()) {
      for (const toml::node& n : *a) {
        if (const toml::table* t = n.as_table()) fn(*t);
      }
    }
  };
  each("unit", [&](const toml::table& t) {
    const std::size_t hosts = count(t, "hosts"), leaves = count(t, "leaves");
    const auto nics = static_cast<std::size_t>(std::clamp<std::int64_t>(
        t["nics"].value<std::int64_t>().value_or(1), 1, 64));
    s.vertices += hosts + leaves;
    if (leaves > 0) s.links += hosts * nics;
  });
  each("uplinks", [&](const toml::table& t) {
    const std::size_t to = count(t, "to");
    s.vertices += to;
    s.links += count(t, "from") * to;
  });
  return s;
}

class Reader {
 public:
  Reader(const std::string& path) : path_(path) {}

  std::string at(const toml::node& n) const {
    return where(path_, static_cast<long>(n.source().begin.line));
  }
  [[noreturn]] void fail(const toml::node& n, const std::string& msg) const {
    throw Error(ErrorCode::kBadInput, at(n), msg);
  }

  void only(const toml::table& t, std::initializer_list<const char*> keys,
            const std::string& what) const {
    for (auto&& [k, v] : t) {
      bool ok = false;
      for (const char* a : keys) ok = ok || k.str() == a;
      if (!ok) {
        std::string list;
        for (const char* a : keys) list += std::string(list.empty() ? "" : ", ") + a;
        fail(v, "unknown key \"" + std::string(k.str()) + "\" in " + what + " (expected: " + list +
                    ")");
      }
    }
  }

  std::string str(const toml::table& t, const char* key, const std::string& what,
                  bool required = true, const std::string& fallback = {}) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) {
      if (required) fail(t, what + " needs \"" + key + "\"");
      return fallback;
    }
    auto v = n->value<std::string>();
    if (!v) fail(*n, std::string("\"") + key + "\" must be a string");
    return *v;
  }

  double num(const toml::table& t, const char* key, double fallback, double lo, double hi) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) return fallback;
    std::optional<double> v;
    if (n->is_integer())
      v = static_cast<double>(*n->value<std::int64_t>());
    else if (n->is_floating_point())
      v = n->value<double>();
    if (!v) fail(*n, std::string("\"") + key + "\" must be a number");
    if (!(*v >= lo && *v <= hi)) {
      fail(*n, std::string("\"") + key + "\" = " + std::to_string(*v) + " is out of range");
    }
    return *v;
  }

  // Link bandwidth of a section: "link" (rate text) or "link_gbps", else the default.
  std::pair<double, std::string> link(const toml::table& t,
                                      std::pair<double, std::string> dflt) const {
    if (const toml::node* n = t.get("link")) {
      auto v = n->value<std::string>();
      if (!v) fail(*n, "\"link\" must be a string such as \"4xNDR\" or \"400G\"");
      double g = rate_gbps(*v);
      if (g <= 0) fail(*n, "unknown link rate \"" + *v + "\" (e.g. 4xHDR, 4xNDR, 400G)");
      return {g, *v};
    }
    if (t.get("link_gbps")) return {num(t, "link_gbps", 0, 0.001, 1e6), {}};
    return dflt;
  }

  std::vector<std::string> hostlist(const toml::table& t, const char* key, const std::string& what,
                                    bool required = true) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) {
      if (required) fail(t, what + " needs \"" + key + "\"");
      return {};
    }
    auto v = n->value<std::string>();
    if (!v) fail(*n, std::string("\"") + key + "\" must be a hostlist string");
    return expand_hostlist(*v, at(*n), kMaxFabricHosts);
  }

  const toml::table& table_of(const toml::node& n, const std::string& what) const {
    const toml::table* t = n.as_table();
    if (t == nullptr) fail(n, what + " must be a table");
    return *t;
  }

  template <class F>
  void each_table(const toml::table& root, const char* key, F&& f) const {
    const toml::node* n = root.get(key);
    if (n == nullptr) return;
    const toml::array* arr = n->as_array();
    if (arr == nullptr)
      fail(*n, std::string("\"") + key + "\" must be an array of tables ([[" + key + "]])");
    for (const toml::node& e : *arr) f(table_of(e, std::string("[[") + key + "]]"));
  }

 private:
  const std::string& path_;
};

}  // namespace

Fabric parse_fabric_toml(const std::string& path, std::string_view text) {
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    throw Error(ErrorCode::kBadInput, where(path, static_cast<long>(e.source().begin.line)),
                "TOML: " + std::string(e.description()));
  }
  Reader r(path);
  r.only(root,
         {"name", "defaults", "node_types", "unit", "uplinks", "tier", "nvlink_domain", "hosts",
          "routing"},
         "the top level");
  if (!root.get("unit")) {
    throw Error(ErrorCode::kBadInput, path,
                "no [[unit]] table: a fabric description names its hosts in [[unit]]");
  }
  FabricBuilder b("toml:" + path);
  // Reserved only within the limits: a description past them is refused as it is built.
  if (Size want = planned_size(root);
      want.vertices <= 2 * kMaxFabricHosts && want.links <= 8 * kMaxFabricHosts) {
    b.fabric().graph.reserve(want.vertices, want.links);
  }
  Fabric& f = b.fabric();
  f.hierarchical = true;
  if (const toml::node* rn = root.get("routing")) {
    auto v = rn->value<std::string>();
    if (!v) r.fail(*rn, "\"routing\" must be a string");
    f.routing = parse_routing(*v, r.at(*rn));
  }

  std::pair<double, std::string> dflt{-1, {}};
  if (const toml::node* d = root.get("defaults")) {
    const toml::table& t = r.table_of(*d, "[defaults]");
    r.only(t, {"link", "link_gbps"}, "[defaults]");
    dflt = r.link(t, dflt);
  }
  auto need_link = [&](const toml::table& t, const std::string& what) {
    auto l = r.link(t, dflt);
    if (l.first <= 0) r.fail(t, what + " has no \"link\" and [defaults] gives none");
    return l;
  };

  std::filesystem::path base = std::filesystem::path(path).parent_path();
  if (const toml::node* nt = root.get("node_types")) {
    const toml::table& types = r.table_of(*nt, "[node_types]");
    for (auto&& [name, node] : types) {
      const toml::table& t = r.table_of(node, "[node_types." + std::string(name.str()) + "]");
      r.only(t, {"capture", "gpus"}, "[node_types." + std::string(name.str()) + "]");
      NodeType type;
      type.name = std::string(name.str());
      type.capture = r.str(t, "capture", "[node_types." + type.name + "]");
      type.gpus = static_cast<int>(r.num(t, "gpus", -1, -1, 4096));
      std::filesystem::path p(type.capture);
      type.capture_path = (p.is_absolute() ? p : base / p).lexically_normal().string();
      f.node_types.push_back(std::move(type));
    }
  }
  auto known_type = [&](const std::string& n) {
    for (const NodeType& t : f.node_types) {
      if (t.name == n) return true;
    }
    return false;
  };

  auto sw = [&](const std::string& name) {
    VertexId v = b.switch_named(name);
    return v.valid() ? v : b.add_switch(name);
  };
  // Cables in the whole description are bounded, so a few lines cannot ask for gigabytes.
  std::size_t cables_total = 0;
  auto cable_budget = [&](std::size_t n, const toml::table& at) {
    cables_total += n;
    if (n > kMaxTomlCables || cables_total > kMaxTomlCables) {
      throw Error(ErrorCode::kLimit, r.at(at),
                  "the description wires more than " + std::to_string(kMaxTomlCables) + " cables");
    }
  };
  std::unordered_map<std::string, long> host_line;
  r.each_table(root, "unit", [&](const toml::table& t) {
    r.only(t, {"name", "hosts", "leaves", "wiring", "nics", "node_type", "link", "link_gbps"},
           "[[unit]]");
    std::string what = "[[unit]] at " + r.at(t);
    std::vector<std::string> hosts = r.hostlist(t, "hosts", what);
    std::vector<std::string> leaves = r.hostlist(t, "leaves", what, false);
    std::string wiring = r.str(t, "wiring", what, false, "spread");
    int nics = static_cast<int>(r.num(t, "nics", 1, 1, 64));
    std::string type = r.str(t, "node_type", what, false);
    std::string unit_name = r.str(t, "name", what, false);
    if (!type.empty() && !known_type(type)) {
      r.fail(*t.get("node_type"), "node type \"" + type + "\" is not defined in [node_types]");
    }
    if (wiring != "rail" && wiring != "spread") {
      r.fail(*t.get("wiring"),
             "wiring must be \"rail\" (NIC k of every host to leaf k) or "
             "\"spread\" (hosts split evenly over the leaves, all NICs on one)");
    }
    if (wiring == "rail" && static_cast<int>(leaves.size()) != nics) {
      r.fail(t, what + ": rail wiring needs one leaf per NIC (" + std::to_string(leaves.size()) +
                    " leaves, nics = " + std::to_string(nics) + ")");
    }
    auto [gbps, rate] = leaves.empty() ? std::pair<double, std::string>{0, {}} : need_link(t, what);
    if (!leaves.empty()) cable_budget(hosts.size() * static_cast<std::size_t>(nics), t);
    std::vector<VertexId> leaf_ids;
    for (const std::string& l : leaves) leaf_ids.push_back(sw(l));
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      const std::string& h = hosts[i];
      long line = static_cast<long>(t.source().begin.line);
      auto [it, fresh] = host_line.emplace(h, line);
      if (!fresh) {
        r.fail(t, "host " + h + " is in two [[unit]] tables (also line " +
                      std::to_string(it->second) + ")");
      }
      std::uint32_t idx = b.host(h);
      f.hosts[idx].node_type = type;
      f.hosts[idx].unit = unit_name;
      if (leaf_ids.empty()) continue;
      // The unit names no NIC devices: the ports' NIC names stay unknown (the node type's
      // capture names them).
      for (int k = 0; k < nics; ++k) {
        if (wiring == "rail") {
          b.connect_host(idx, leaf_ids[static_cast<std::size_t>(k)], gbps, rate, {}, k);
        } else {
          std::size_t leaf = i * leaf_ids.size() / hosts.size();
          b.connect_host(idx, leaf_ids[leaf], gbps, rate, {}, k);
        }
      }
    }
  });

  r.each_table(root, "uplinks", [&](const toml::table& t) {
    r.only(t, {"from", "to", "cables", "link", "link_gbps"}, "[[uplinks]]");
    std::string what = "[[uplinks]] at " + r.at(t);
    std::vector<std::string> from = r.hostlist(t, "from", what);
    std::vector<std::string> to = r.hostlist(t, "to", what);
    int cables = static_cast<int>(r.num(t, "cables", 1, 1, 1024));
    auto [gbps, rate] = need_link(t, what);
    cable_budget(from.size() * to.size() * static_cast<std::size_t>(cables), t);
    for (const std::string& a : from) {
      if (!b.switch_named(a).valid()) {
        r.fail(*t.get("from"), "switch " + a +
                                   " is not a leaf of any [[unit]] nor the \"to\" of "
                                   "an earlier [[uplinks]]");
      }
      for (const std::string& c : to) {
        if (c == a) r.fail(t, "switch " + a + " is wired to itself");
        b.connect_switches(sw(c), b.switch_named(a), gbps, rate, -1, -1, false, cables);
      }
    }
  });

  r.each_table(root, "tier", [&](const toml::table& t) {
    r.only(t, {"tier", "oversubscription", "routing"}, "[[tier]]");
    int tier = static_cast<int>(r.num(t, "tier", 0, 1, 16));
    if (tier == 0) r.fail(t, "[[tier]] needs \"tier\"");
    if (t.get("oversubscription")) {
      f.declared_oversubscription[tier] = r.num(t, "oversubscription", 1.0, 0.001, 1e6);
    }
    if (const toml::node* rn = t.get("routing")) {
      auto v = rn->value<std::string>();
      if (!v) r.fail(*rn, "\"routing\" must be a string");
      f.routing_by_tier[tier] = parse_routing(*v, r.at(*rn));
    }
  });

  auto host_idx = [&](const toml::node& at, const std::string& h) {
    std::int64_t i = f.find_host(h);
    if (i < 0) r.fail(at, "host " + h + " is in no [[unit]]");
    return static_cast<std::uint32_t>(i);
  };
  std::set<std::uint32_t> in_domain;
  r.each_table(root, "nvlink_domain", [&](const toml::table& t) {
    r.only(t, {"name", "hosts", "gpu_bandwidth"}, "[[nvlink_domain]]");
    std::string what = "[[nvlink_domain]] at " + r.at(t);
    NvlinkDomain d;
    d.name = r.str(t, "name", what);
    d.gpu_bandwidth = r.num(t, "gpu_bandwidth", 0, 0, 1e6);
    for (const std::string& h : r.hostlist(t, "hosts", what)) {
      std::uint32_t i = host_idx(*t.get("hosts"), h);
      if (!in_domain.insert(i).second) r.fail(t, "host " + h + " is in two NVLink domains");
      d.hosts.push_back(i);
    }
    f.nvlink_domains.push_back(std::move(d));
  });

  if (const toml::node* hn = root.get("hosts")) {
    const toml::table& t = r.table_of(*hn, "[hosts]");
    r.only(t, {"excluded", "degraded"}, "[hosts]");
    for (const std::string& h : r.hostlist(t, "excluded", "[hosts]", false)) {
      f.hosts[host_idx(*t.get("excluded"), h)].excluded = true;
    }
    if (const toml::node* dn = t.get("degraded")) {
      const toml::table& deg = r.table_of(*dn, "[hosts.degraded]");
      for (auto&& [name, v] : deg) {
        auto frac = v.value<double>();
        // 0 would leave the host nothing: that is `excluded`, and a fraction of 0 must not pass
        // for healthy downstream.
        if (!frac || !(*frac > 0) || *frac > 1) {
          r.fail(v, "degraded fraction of " + std::string(name.str()) +
                        " must be above 0 and at most 1 (a host with nothing left belongs in "
                        "[hosts] excluded)");
        }
        for (const std::string& h : expand_hostlist(name.str(), r.at(v), kMaxFabricHosts)) {
          f.hosts[host_idx(v, h)].degraded = *frac;
        }
      }
    }
  }
  return b.take();
}

}  // namespace topoaware::topology::detail
