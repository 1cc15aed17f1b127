// The cluster half of the model: switches, hosts and the links between them, plus what is
// derived from them once (tiers, locality levels, rails, NVLink domains, anomalies).
//
// Importers (ibnetdiscover, Slurm topology.conf, TOML) fill `graph` and `hosts`; analyze()
// derives the rest. The mapper never walks the graph per rank pair: it reads `levels`, a chain
// of nested host groups (innermost first) with the capacity leaving each group, which is the
// locality key of DESIGN.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "topoaware/topology/graph.h"
#include "topoaware/topology/node.h"

namespace topoaware::topology {

struct HostInfo {
  VertexId vertex;                 // kHost vertex in Fabric::graph
  std::string name;
  std::vector<VertexId> leaves;    // tier-1 switches its ports attach to (sorted, unique)
  // Per fabric-facing port in NIC order (port k of a rail-optimized host goes to rail k):
  std::vector<VertexId> port_switch;   // switch the port attaches to
  std::vector<double> port_gbps;       // its bandwidth (GB/s, one direction)
  std::vector<std::string> port_nic;   // HCA/NIC name when known ("mlx5_3"), else empty
  int nvlink_domain = -1;          // index into Fabric::nvlink_domains, -1 if none
  std::string node_type;           // node type name (TOML description), empty if unknown
  bool excluded = false;           // down / drained: not to be used
  double degraded = 1.0;           // fraction of nominal fabric bandwidth still available
  // Per NIC (by name), the fraction of its nominal capacity it still carries, from the node
  // doctor's report (health.h); a NIC not listed carries all of it.
  std::map<std::string, double> nic_fraction;
  std::string unit;                // TOML [[unit]] name (a scalable unit), empty if none
  // The source's own id for a host whose name was made up on import (a Lingjun CSV's blinded
  // sha256 id: its hosts are named lj001...), empty when the source names hosts itself.
  std::string source_id;
  // The source gives no port speeds (topology.conf): port_gbps are placeholders, and the mapper
  // takes the host's NICs from its node model instead.
  bool port_speed_assumed = false;
};

// How a tier's switches spread flows over a group's parallel uplinks: adaptive routing spreads
// every flow's packets evenly; ECMP hashes each flow onto one link, so a few large flows can
// collide on one uplink (docs/mapper.md, "ECMP").
enum class Routing { kAdaptive, kEcmp };
std::string_view to_string(Routing r);  // "adaptive", "ecmp"
// Parses "adaptive" or "ecmp"; throws Error (kBadInput) naming `context` otherwise.
Routing parse_routing(std::string_view text, const std::string& context);
// Parses a declared oversubscription per tier, tier 1 first: "1,2" or "1:1,2:1" (down:up, each
// at least 1). Throws Error (kBadInput) naming `context`.
std::vector<double> parse_oversubscription(std::string_view text, const std::string& context);

struct FabricTier {
  int tier = 0;                    // 1 = leaf (hosts attached), upward by BFS
  std::vector<VertexId> switches;
  double down_gbps = 0;            // total bandwidth from this tier down (to hosts / tier-1)
  double up_gbps = 0;              // total bandwidth from this tier up
  double oversubscription = 1.0;   // down / up; 1.0 for the top tier
  bool speeds_assumed = false;     // some of its links have no speed in the source
};

// One level of locality: a partition of the hosts into groups. Level 0 is the innermost
// (a host alone, or an NVLink domain), the last level holds the whole connected fabric.
struct LocalityLevel {
  std::string name;                          // "host", "nvlink", "leaf", "pod", "spine"
  std::vector<std::uint32_t> group_of_host;  // per host index
  std::vector<double> group_uplink_gbps;     // per group: capacity leaving the group upward
  std::vector<double> group_downlink_gbps;   // per group: capacity of its host-facing side
  double latency_us = 0;                     // one-way latency of crossing this level
  std::vector<std::string> group_name;       // per group: its switch's name, or "<name><k>"
  // Per group: parallel links in its uplink (what ECMP hashes flows onto), and whether any of
  // them has an assumed speed (Link::speed_assumed), so that the uplink figure is a placeholder.
  std::vector<std::uint32_t> group_uplink_links;
  std::vector<char> group_uplink_assumed;
  int tier = 0;  // the switch tier whose switches join this level's groups (0: host, nvlink)
};

struct NvlinkDomain {
  std::string name;                 // clusterUUID/cliqueId or a rack name
  std::vector<std::uint32_t> hosts; // host indexes
  double gpu_bandwidth = 0;         // GB/s per GPU inside the domain
};

struct Anomaly {
  std::string kind;     // "slow-link", "orphan-host", "asymmetric-uplinks", ...
  std::string message;  // human-readable, names the vertices and ports
};

// A node type: the hardware every host of that type has (a capture: hwloc XML, NCCL XML).
struct NodeType {
  std::string name;
  std::string capture;  // path as written in the description
  int gpus = -1;
  std::string capture_path;  // `capture` resolved against the description's directory
};

struct Fabric {
  Graph graph;
  std::vector<HostInfo> hosts;
  std::unordered_map<std::string, std::uint32_t> host_index;  // name -> index in hosts
  std::string source;                 // "ibnetdiscover:/path", "slurm-topology:/path", "toml:/path"

  // Derived by analyze():
  std::vector<FabricTier> tiers;      // tiers[0] is tier 1
  std::vector<LocalityLevel> levels;  // innermost first
  std::vector<NvlinkDomain> nvlink_domains;
  bool rail_optimized = false;
  int rails = 0;                      // ports per host that go to distinct rail switches
  std::vector<Anomaly> anomalies;
  std::vector<NodeType> node_types;   // TOML descriptions only

  // Slurm block topology (topology/block) when imported from one: block name -> host indexes.
  std::vector<std::pair<std::string, std::vector<std::uint32_t>>> blocks;
  std::vector<int> block_sizes;

  // Channel adapters in an ibnetdiscover dump (hosts' HCAs and others, e.g. SHARP aggregation
  // nodes, which are not hosts); 0 for other sources.
  std::size_t channel_adapters = 0;
  // True when the source states direction (topology.conf, TOML): links between switches run
  // parent (Link::a) -> child (Link::b) and a switch's tier is its height above its hosts.
  // Otherwise (ibnetdiscover) tiers come from a BFS upward from the host-attached switches.
  bool hierarchical = false;
  // Assumptions made while importing ("no LinkSpeed: assumed 12.5 GB/s per link"), for people.
  std::vector<std::string> notes;
  // Declared oversubscription per tier; tier -> down/up. Where the source gives capacities
  // (TOML, ibnetdiscover) analyze() checks the wiring against it; where it gives none
  // (topology.conf without LinkSpeed) it sizes each tier's uplinks for the mapper (missing tiers:
  // 1, non-blocking). From TOML [[tier]], or declare_oversubscription() (map --oversubscription,
  // the plugin's `oversubscription` key).
  std::map<int, double> declared_oversubscription;
  // Routing per tier (TOML `routing`, [[tier]] routing; the plugin's `routing` key); tiers not
  // listed use `routing`.
  Routing routing = Routing::kAdaptive;
  std::map<int, Routing> routing_by_tier;
  Routing routing_of_tier(int tier) const {
    auto it = routing_by_tier.find(tier);
    return it == routing_by_tier.end() ? routing : it->second;
  }

  // Index of a host by name, or -1.
  std::int64_t find_host(const std::string& name) const {
    auto it = host_index.find(name);
    return it == host_index.end() ? -1 : static_cast<std::int64_t>(it->second);
  }
  // Group ids of a host, innermost level first.
  std::vector<std::uint32_t> locality_key(std::uint32_t host) const;
};

// Derives tiers, levels, rails, NVLink domains and anomalies from graph + hosts.
void analyze(Fabric& fabric);

// Declares the oversubscription of tiers 1, 2, ... (per_tier[0] is tier 1), replacing earlier
// declarations of those tiers, and checks it again where the wiring gives capacities.
void declare_oversubscription(Fabric& fabric, const std::vector<double>& per_tier);

}  // namespace topoaware::topology
