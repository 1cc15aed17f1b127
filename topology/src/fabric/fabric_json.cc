// Reloads the JSON that fabric_to_json() writes ("format": "topo-aware-fabric"), so a fabric
// imported once (and perhaps edited) can be passed around as one file.
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>

#include "fabric_build.h"
#include "topoaware/topology/error.h"

namespace topoaware::topology::detail {
namespace {

using nlohmann::json;

long line_of(std::string_view text, std::size_t byte) {
  long line = 1;
  for (std::size_t i = 0; i < byte && i < text.size(); ++i) line += text[i] == '\n' ? 1 : 0;
  return line;
}

// "cables": parallel cables of one switch link (fabric_to_json writes it when more than one), as
// bounded as a TOML description's.
int cables_of(const json& l, const std::string& at) {
  const long n = l.value("cables", 1L);
  if (n < 1 || n > 1024) {
    throw Error(ErrorCode::kBadInput, at, "\"cables\" must be 1 to 1024, not " + std::to_string(n));
  }
  return static_cast<int>(n);
}

}  // namespace

Fabric parse_fabric_json(const std::string& path, std::string_view text) {
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    throw Error(ErrorCode::kBadInput, where(path, line_of(text, e.byte)),
                std::string("JSON: ") + e.what());
  } catch (const json::exception& e) {
    // A number too large for a double (out_of_range.406) is thrown outside parse_error; found
    // by fuzzing (tests/fuzz/regressions/fabric_json).
    throw Error(ErrorCode::kBadInput, path, std::string("JSON: ") + e.what());
  }
  std::string at = path;
  try {
    if (!j.is_object() || j.value("format", std::string()) != "topo-aware-fabric") {
      throw Error(
          ErrorCode::kUnsupported, path,
          "JSON that is not topo-aware's fabric format (\"format\": \"topo-aware-fabric\")");
    }
    FabricBuilder b(j.value("source", std::string("json:") + path));
    Fabric& f = b.fabric();
    f.hierarchical = j.value("hierarchical", false);
    f.channel_adapters = j.value("channel_adapters", std::size_t{0});
    const json& switches = j.at("switches");
    for (std::size_t i = 0; i < switches.size(); ++i) {
      at = path + ": switches[" + std::to_string(i) + "]";
      const json& s = switches[i];
      std::string name = s.at("name").get<std::string>();
      if (name.empty() || b.switch_named(name).valid()) {
        throw Error(ErrorCode::kBadInput, at, "empty or repeated switch name \"" + name + "\"");
      }
      b.add_switch(name, s.value("guid", std::string()), s.value("model", std::string()),
                   s.value("ports", -1));
    }
    auto sw = [&](const std::string& name) {
      VertexId v = b.switch_named(name);
      if (!v.valid()) throw Error(ErrorCode::kBadInput, at, "unknown switch \"" + name + "\"");
      return v;
    };
    if (j.contains("switch_links")) {
      const json& links = j.at("switch_links");
      for (std::size_t i = 0; i < links.size(); ++i) {
        at = path + ": switch_links[" + std::to_string(i) + "]";
        const json& l = links[i];
        b.connect_switches(sw(l.at("a").get<std::string>()), sw(l.at("b").get<std::string>()),
                           l.at("gbps").get<double>(), l.value("rate", std::string()),
                           l.value("port_a", -1), l.value("port_b", -1),
                           l.value("speed_assumed", false), cables_of(l, at));
      }
    }
    std::unordered_map<std::string, std::vector<std::uint32_t>> domains;
    const json& hosts = j.at("hosts");
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      at = path + ": hosts[" + std::to_string(i) + "]";
      const json& h = hosts[i];
      std::string name = h.at("name").get<std::string>();
      if (name.empty() || b.has_host(name)) {
        throw Error(ErrorCode::kBadInput, at, "empty or repeated host name \"" + name + "\"");
      }
      std::uint32_t idx = b.host(name);
      if (h.contains("ports")) {
        for (const json& p : h.at("ports")) {
          double gbps = p.at("gbps").get<double>();
          if (!(gbps >= 0)) throw Error(ErrorCode::kBadInput, at, "negative port bandwidth");
          b.connect_host(idx, sw(p.at("switch").get<std::string>()), gbps, {},
                         p.value("nic", std::string()), -1, -1, p.value("speed_assumed", false));
        }
      }
      HostInfo& hi = f.hosts[idx];
      hi.node_type = h.value("node_type", std::string());
      hi.excluded = h.value("excluded", false);
      hi.degraded = h.value("degraded", 1.0);
      hi.unit = h.value("unit", std::string());
      hi.source_id = h.value("source_id", std::string());
      if (!(hi.degraded > 0 && hi.degraded <= 1)) {
        throw Error(ErrorCode::kBadInput, at, "degraded must be above 0 and at most 1");
      }
      if (h.contains("nvlink_domain"))
        domains[h.at("nvlink_domain").get<std::string>()].push_back(idx);
    }
    if (j.contains("nvlink_domains")) {
      for (const json& d : j.at("nvlink_domains")) {
        NvlinkDomain nd;
        nd.name = d.at("name").get<std::string>();
        nd.gpu_bandwidth = d.value("gpu_bandwidth", 0.0);
        nd.hosts = domains[nd.name];
        f.nvlink_domains.push_back(std::move(nd));
      }
    }
    if (j.contains("node_types")) {
      for (const json& t : j.at("node_types")) {
        NodeType nt;
        nt.name = t.at("name").get<std::string>();
        nt.capture = t.value("capture", std::string());
        nt.gpus = t.value("gpus", -1);
        f.node_types.push_back(std::move(nt));
      }
    }
    if (j.contains("blocks")) {
      for (const json& bl : j.at("blocks")) {
        std::vector<std::uint32_t> members;
        for (const json& n : bl.at("hosts")) {
          std::int64_t h = f.find_host(n.get<std::string>());
          if (h < 0) throw Error(ErrorCode::kBadInput, at, "block names unknown host");
          members.push_back(static_cast<std::uint32_t>(h));
        }
        f.blocks.emplace_back(bl.at("name").get<std::string>(), std::move(members));
      }
      f.block_sizes = j.value("block_sizes", std::vector<int>{});
    }
    if (j.contains("declared_oversubscription")) {
      for (const auto& [t, v] : j.at("declared_oversubscription").items()) {
        int tier = 0;
        auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), tier);
        if (ec != std::errc() || p != t.data() + t.size()) {
          throw Error(ErrorCode::kBadInput, at,
                      "declared_oversubscription key \"" + t + "\" is not a tier");
        }
        f.declared_oversubscription[tier] = v.get<double>();
      }
    }
    if (j.contains("routing")) {
      const json& rj = j.at("routing");
      f.routing = parse_routing(rj.value("default", std::string("adaptive")), at);
      if (rj.contains("tiers")) {
        for (const auto& [t, v] : rj.at("tiers").items()) {
          f.routing_by_tier[std::stoi(t)] = parse_routing(v.get<std::string>(), at);
        }
      }
    }
    if (j.contains("notes")) f.notes = j.at("notes").get<std::vector<std::string>>();
    return b.take();
  } catch (const json::exception& e) {
    throw Error(ErrorCode::kBadInput, at, std::string("JSON: ") + e.what());
  }
}

}  // namespace topoaware::topology::detail
