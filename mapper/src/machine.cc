// Building the cost model's Machine (cost.h, build_machine()): the step's hosts in name order,
// their ports, the slots of the GPUs they lend and the NICs each uses, PXN relays, then the network
// levels restricted to the step with their capacities, and a sentence for each capacity the inputs
// did not give (Machine::assumptions).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "node_facts.h"
#include "routing.h"
#include "topoaware/mapper/cost.h"
#include "topoaware/mapper/nccl_model.h"
#include "topoaware/mapper/layout.h"
#include "topoaware/topology/fabric.h"
#include "topoaware/topology/node.h"

namespace topoaware::mapper {
namespace {

using internal::kUnlimitedGbps;

constexpr double kPlainNvlinkGbps = 300;  // a node given without a model
constexpr int kPlainSm = 90;              // ... and its GPUs' generation (Hopper)
constexpr double kPlainPortGbps = 25;     // a host the fabric lists without ports (200 Gb/s)

}  // namespace

double Machine::slot_port_gbps(std::size_t slot) const {
  const Slot& s = slots[slot];
  double sum = 0;
  for (std::uint32_t i = 0; i < s.ports.count; ++i) {
    sum += port_gbps[port_base[s.host] + port_list[s.ports.begin + i]];
  }
  return sum;
}

namespace {

// A step host's ports as the machine sees them: the fabric's, or the node model's NICs where the
// fabric gives no speeds.
struct HostPorts {
  std::vector<double> gbps;        // nominal (before `degraded`)
  std::vector<std::string> names;  // NIC name per port, empty where unknown
  std::vector<int> node_ordinal;   // per port: the node NIC it is (index into nic_names), or -1
  bool from_node = false;          // taken from the node model (the fabric gave no speeds)
  bool invented = false;           // neither fabric nor capture gave a speed
};

std::string gbps_text(double gbps) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g GB/s", std::round(gbps * 100) / 100);
  return buf;
}

// Builds a Machine step by step: hosts in name order, each host's ports, its GPUs' slots and
// the NICs each uses, PXN relays, then the network levels with their capacities and what was
// assumed on the way.
class MachineBuilder {
 public:
  MachineBuilder(const topology::Fabric& fabric, const std::vector<std::string>& hosts,
                 const std::vector<const topology::NodeTopology*>& nodes,
                 const std::vector<std::vector<int>>& gpus)
      : f_(fabric), hosts_(hosts), nodes_(nodes), gpus_(gpus) {}

  Machine build() {
    for (std::size_t i : name_order()) add_host(i);
    m_.rail_optimized = f_.rail_optimized;
    add_levels();
    add_latencies();
    state_assumptions();
    return std::move(m_);
  }

 private:
  // Step hosts sorted by name; a name twice is an error.
  std::vector<std::size_t> name_order() const {
    if (hosts_.size() != nodes_.size() || hosts_.size() != gpus_.size()) {
      throw Error("mapper: " + std::to_string(hosts_.size()) + " hosts but " +
                  std::to_string(nodes_.size()) + " node models and " +
                  std::to_string(gpus_.size()) + " GPU lists");
    }
    std::vector<std::size_t> order(hosts_.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](auto a, auto b) { return hosts_[a] < hosts_[b]; });
    for (std::size_t i = 1; i < order.size(); ++i) {
      if (hosts_[order[i]] == hosts_[order[i - 1]]) {
        throw Error("mapper: host " + hosts_[order[i]] + " appears twice in the step");
      }
    }
    return order;
  }

  const internal::NodeFacts* facts_of(const topology::NodeTopology* node) {
    if (!node) return nullptr;
    auto it = facts_.find(node);
    if (it == facts_.end()) it = facts_.emplace(node, internal::node_facts(*node)).first;
    return &it->second;
  }

  // The fabric's ports, unless it gives no speeds and the node model (a capture) does: then the
  // node's usable NICs, at their ports' speeds.
  HostPorts host_ports(const topology::HostInfo& hi, const internal::NodeFacts* nf) const {
    HostPorts p;
    const bool fabric_known = !hi.port_gbps.empty() && !hi.port_speed_assumed;
    if (!fabric_known && nf && nf->capture) {
      for (std::size_t k = 0; k < nf->nic_names.size(); ++k) {
        if (!nf->nic_usable[k] || !(nf->nic_gbps[k] > 0)) continue;
        p.gbps.push_back(nf->nic_gbps[k]);
        p.names.push_back(nf->nic_names[k]);
        p.node_ordinal.push_back(static_cast<int>(k));
      }
      if (!p.gbps.empty()) {
        p.from_node = true;
        return p;
      }
    }
    if (!hi.port_gbps.empty()) {
      for (std::size_t k = 0; k < hi.port_gbps.size(); ++k) {
        p.gbps.push_back(hi.port_gbps[k] > 0 ? hi.port_gbps[k] : kPlainPortGbps);
        p.names.push_back(k < hi.port_nic.size() ? hi.port_nic[k] : std::string());
        p.node_ordinal.push_back(-1);
      }
      p.invented = hi.port_speed_assumed;
    } else {
      const std::size_t n = nf && !nf->nic_names.empty() ? nf->nic_names.size() : 1;
      for (std::size_t k = 0; k < n; ++k) {
        p.gbps.push_back(kPlainPortGbps);
        p.names.emplace_back();
        p.node_ordinal.push_back(-1);
      }
      p.invented = true;
    }
    return p;
  }

  // The host ports a GPU's traffic uses: its nearest NICs, matched by name, else by their
  // position among the node's NICs; else spread by GPU position (a node without NIC facts).
  std::vector<std::uint32_t> gpu_ports(const internal::GpuFacts* gf, const internal::NodeFacts* nf,
                                       const HostPorts& hp, int gpu) const {
    const auto ports = static_cast<std::uint32_t>(hp.gbps.size());
    std::vector<std::uint32_t> out;
    auto add = [&](std::uint32_t p) {
      if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
    };
    if (gf) {
      for (const auto& name : gf->nics) {
        for (std::uint32_t p = 0; p < ports; ++p) {
          if (!hp.names[p].empty() && hp.names[p] == name) add(p);
        }
      }
      if (out.empty()) {
        for (int o : gf->nic_ordinals) {
          bool matched = false;
          for (std::uint32_t p = 0; p < ports; ++p) {
            if (hp.node_ordinal[p] == o) {
              add(p);
              matched = true;
            }
          }
          if (!matched && !hp.from_node) add(static_cast<std::uint32_t>(o) % ports);
        }
      }
      if (out.empty() && nf && !nf->gpus.empty()) {
        const auto ordinal = static_cast<std::uint32_t>(gf - nf->gpus.data());
        add(ordinal * ports / static_cast<std::uint32_t>(nf->gpus.size()));
      }
    }
    if (out.empty()) add(static_cast<std::uint32_t>(std::max(gpu, 0)) % ports);
    return out;
  }

  PortRange keep_ports(const std::vector<std::uint32_t>& ports) {
    PortRange r{static_cast<std::uint32_t>(m_.port_list.size()),
                static_cast<std::uint32_t>(ports.size())};
    m_.port_list.insert(m_.port_list.end(), ports.begin(), ports.end());
    return r;
  }

  void add_host(std::size_t i) {
    const std::string& name = hosts_[i];
    const std::int64_t fi = f_.find_host(name);
    if (fi < 0) {
      throw Error("host " + name + " is not in the fabric" +
                  (f_.source.empty() ? std::string() : " (" + f_.source + ")"));
    }
    const topology::HostInfo& hi = f_.hosts[static_cast<std::size_t>(fi)];
    const auto h = static_cast<std::uint32_t>(m_.hosts.size());
    m_.hosts.push_back(name);
    m_.fabric_host.push_back(static_cast<std::uint32_t>(fi));
    const internal::NodeFacts* nf = facts_of(nodes_[i]);
    const HostPorts hp = host_ports(hi, nf);
    // A host with nothing left belongs in `excluded`; a degraded 0 must not read as healthy.
    const double degraded = std::clamp(hi.degraded, 1e-6, 1.0);
    m_.port_base.push_back(static_cast<std::uint32_t>(m_.port_gbps.size()));
    double nominal = 0;
    // A NIC the node doctor found degraded (HostInfo::nic_fraction) carries what it measured.
    for (std::size_t p = 0; p < hp.gbps.size(); ++p) {
      const double g = hp.gbps[p];
      // The port's NIC: its name, else the node NIC it is, else the node's p-th NIC (as a GPU's
      // nearest NIC ordinal finds its port, gpu_ports()).
      std::string nic = p < hp.names.size() ? hp.names[p] : std::string();
      const int ordinal = p < hp.node_ordinal.size() && hp.node_ordinal[p] >= 0
                              ? hp.node_ordinal[p]
                              : static_cast<int>(p);
      if (nic.empty() && nf && static_cast<std::size_t>(ordinal) < nf->nic_names.size()) {
        nic = nf->nic_names[static_cast<std::size_t>(ordinal)];
      }
      const auto health = hi.nic_fraction.find(nic);
      m_.port_gbps.push_back(g * degraded *
                             (health == hi.nic_fraction.end() ? 1.0 : health->second));
      nominal += g;
      fastest_port_ = std::max(fastest_port_, g);
    }
    m_.port_count.push_back(static_cast<std::uint32_t>(hp.gbps.size()));
    host_nominal_.push_back(nominal);
    ports_from_node_ |= hp.from_node;
    ports_invented_ |= hp.invented;
    if (hp.from_node) node_port_text_ = port_text(hp);
    if (hp.invented) invented_port_text_ = port_text(hp);

    int domain = -1;
    double domain_gbps = 0;
    if (hi.nvlink_domain >= 0 &&
        static_cast<std::size_t>(hi.nvlink_domain) < f_.nvlink_domains.size()) {
      domain = dense_domain_.emplace(hi.nvlink_domain, static_cast<int>(dense_domain_.size()))
                   .first->second;
      domain_gbps = f_.nvlink_domains[static_cast<std::size_t>(hi.nvlink_domain)].gpu_bandwidth;
    }
    m_.domain_of_host.push_back(domain);
    // What NCCL's tuning reads off the host; a node without a model (or a capture that does not
    // say) is taken to be Hopper on NVSwitch, the GPUs most training runs on.
    const int sm = nf && nf->sm > 0 ? nf->sm : kPlainSm;
    if (nf && nf->capture && nf->sm <= 0) sm_assumed_ = true;
    m_.host_sm.push_back(sm);
    m_.host_nvswitch.push_back(nf && nf->capture ? nf->nvswitch : 1);
    m_.host_amd_cpu.push_back(nf && nf->amd_cpu ? 1 : 0);
    // A NIC carries what NCCL's channels run at over it (search.cc's speed arrays: 48 GB/s of a
    // 400 Gb/s port's 50), for every pattern: the cost model charges it that.
    for (std::size_t p = m_.port_base[h]; p < m_.port_gbps.size(); ++p) {
      m_.port_gbps[p] = nccl::nic_channel_GBps(m_.port_gbps[p], sm);
    }
    add_slots(h, name, nf, hp, domain_gbps, gpus_[i]);
    add_relays(nf, hp, gpus_[i]);
  }

  static std::string port_text(const HostPorts& hp) {
    std::map<double, int> by_speed;
    for (double g : hp.gbps) ++by_speed[g];
    std::string s;
    for (const auto& [g, n] : by_speed) {
      s += (s.empty() ? "" : " + ") + std::to_string(n) + " x " + gbps_text(g);
    }
    return s;
  }

  // One slot per GPU the step uses on the host, in NVML order, with the ports its traffic uses.
  void add_slots(std::uint32_t h, const std::string& name, const internal::NodeFacts* nf,
                 const HostPorts& hp, double domain_gbps, std::vector<int> used) {
    std::sort(used.begin(), used.end());
    for (std::size_t k = 1; k < used.size(); ++k) {
      if (used[k] == used[k - 1]) {
        throw Error("host " + name + ": GPU " + std::to_string(used[k]) + " used by two tasks");
      }
    }
    const int node_gpus = nf ? static_cast<int>(nf->gpus.size()) : 0;
    for (int gpu : used) {
      if (gpu < 0) throw Error("host " + name + ": negative GPU index");
      Slot s;
      s.host = h;
      s.gpu = gpu;
      double nv = kPlainNvlinkGbps;
      const internal::GpuFacts* gf = nullptr;
      if (nf && !nf->gpus.empty()) {
        gf = nf->find(gpu);
        if (!gf) {
          throw Error("host " + name + ": GPU " + std::to_string(gpu) +
                      " is not in its node model (" + std::to_string(node_gpus) + " GPUs)");
        }
        nv = gf->nvlink_gbps;
      }
      const std::vector<std::uint32_t> ports = gpu_ports(gf, nf, hp, gpu);
      s.port = static_cast<int>(ports.front());
      s.ports = keep_ports(ports);
      m_.slots.push_back(s);
      m_.slot_nvlink_gbps.push_back(std::max(nv, domain_gbps));
    }
  }

  // PXN: the ports of every GPU of the node by NVML index (a relay need not be in the step), and
  // whether the node's GPUs reach each other over NVLink. A plain node (no model) has NVSwitch.
  void add_relays(const internal::NodeFacts* nf, const HostPorts& hp,
                  const std::vector<int>& used) {
    m_.relay_base.push_back(static_cast<std::uint32_t>(m_.relay_ranges.size()));
    bool nvlink = true;
    int count = 0;
    if (nf && !nf->gpus.empty()) {
      for (const auto& g : nf->gpus) {
        nvlink = nvlink && g.nvlink;
        count = std::max(count, g.dev + 1);
      }
    } else {
      for (int g : used) count = std::max(count, g + 1);
    }
    for (int g = 0; g < count; ++g) {
      const internal::GpuFacts* gf = nf && !nf->gpus.empty() ? nf->find(g) : nullptr;
      if (nf && !nf->gpus.empty() && !gf) {
        m_.relay_ranges.push_back({});
        continue;
      }
      m_.relay_ranges.push_back(keep_ports(gpu_ports(gf, nf, hp, g)));
    }
    m_.relay_count.push_back(static_cast<std::uint32_t>(count));
    m_.pxn.push_back(nvlink ? 1 : 0);
  }

  // Per fabric level (tier >= 1), every group's uplink capacity: the fabric's, or where it gives
  // none (topology.conf without LinkSpeed) what the group carries over the declared
  // oversubscription of its tier: the hosts' NICs below a first-tier group, the uplinks of the
  // groups below a higher one. Hosts outside the step are taken to have the NICs of the step's
  // largest host (a guess that invents no bottleneck).
  std::vector<std::vector<double>> sized_uplinks() {
    const std::size_t nh = f_.hosts.size();
    std::vector<double> host_cap(nh, 0.0);
    double typical = 0;
    for (double c : host_nominal_) typical = std::max(typical, c);
    for (std::size_t h = 0; h < nh; ++h) host_cap[h] = typical;
    for (std::size_t h = 0; h < m_.hosts.size(); ++h)
      host_cap[m_.fabric_host[h]] = host_nominal_[h];
    std::vector<std::vector<double>> up(f_.levels.size());
    int below = -1;  // the last network level sized
    for (std::size_t l = 0; l < f_.levels.size(); ++l) {
      const topology::LocalityLevel& lv = f_.levels[l];
      if (lv.tier < 1 || lv.group_of_host.size() != nh) continue;
      const std::size_t groups = lv.group_uplink_gbps.size();
      std::vector<double> down(groups, 0.0);
      if (below < 0) {
        for (std::size_t h = 0; h < nh; ++h) down[lv.group_of_host[h]] += host_cap[h];
      } else {
        const auto& inner = f_.levels[static_cast<std::size_t>(below)];
        std::vector<char> seen(inner.group_uplink_gbps.size(), 0);
        for (std::size_t h = 0; h < nh; ++h) {
          const std::uint32_t c = inner.group_of_host[h];
          if (seen[c]) continue;
          seen[c] = 1;
          down[lv.group_of_host[h]] += up[static_cast<std::size_t>(below)][c];
        }
      }
      up[l].assign(groups, 0.0);
      for (std::size_t g = 0; g < groups; ++g) {
        const bool assumed = g < lv.group_uplink_assumed.size() && lv.group_uplink_assumed[g];
        const double given = lv.group_uplink_gbps[g];
        if (assumed) {
          up[l][g] = down[g] / declared(lv.tier);
          uplinks_sized_ = true;
          sized_tiers_.insert(lv.tier);
        } else {
          up[l][g] = given > 0 ? given : kUnlimitedGbps;  // no uplink: the top, not a limit
        }
      }
      below = static_cast<int>(l);
    }
    return up;
  }

  double declared(int tier) const {
    auto it = f_.declared_oversubscription.find(tier);
    return it != f_.declared_oversubscription.end() && it->second >= 1 ? it->second : 1.0;
  }

  // The fabric's network levels restricted to the step's hosts, group ids made dense.
  void add_levels() {
    const std::vector<std::vector<double>> up = sized_uplinks();
    for (std::size_t l = 0; l < f_.levels.size(); ++l) {
      const topology::LocalityLevel& level = f_.levels[l];
      if (level.name == "host" || level.name == "nvlink") continue;
      if (level.group_of_host.size() != f_.hosts.size()) continue;
      NetLevel nl;
      nl.name = level.name;
      nl.latency_us = level.latency_us > 0 ? level.latency_us
                                           : 1.0 + 0.3 * static_cast<double>(m_.levels.size() + 1);
      nl.ecmp = level.tier >= 1 && f_.routing_of_tier(level.tier) == topology::Routing::kEcmp;
      std::map<std::uint32_t, std::uint32_t> dense;
      for (std::size_t h = 0; h < m_.hosts.size(); ++h) {
        std::uint32_t g = level.group_of_host[m_.fabric_host[h]];
        auto [it, fresh] = dense.emplace(g, static_cast<std::uint32_t>(dense.size()));
        if (fresh) {
          double cap = g < up[l].size() ? up[l][g] : 0;
          if (up[l].empty()) {
            const double given =
                g < level.group_uplink_gbps.size() ? level.group_uplink_gbps[g] : 0;
            cap = given > 0 ? given : kUnlimitedGbps;
          }
          nl.uplink_gbps.push_back(cap);
          std::uint32_t links =
              g < level.group_uplink_links.size() ? std::max(1u, level.group_uplink_links[g]) : 1;
          if (g < level.group_uplink_assumed.size() && level.group_uplink_assumed[g] &&
              fastest_port_ > 0 && cap < kUnlimitedGbps) {
            // A sized uplink's links (what ECMP hashes onto) are taken as fast as a host port.
            links = static_cast<std::uint32_t>(std::max(1.0, std::round(cap / fastest_port_)));
          }
          nl.uplink_links.push_back(links);
          std::string label = g < level.group_name.size() && !level.group_name[g].empty()
                                  ? level.group_name[g]
                                  : m_.hosts[h];
          nl.group_label.push_back(level.name + " " + label);
        }
        nl.group_of_host.push_back(it->second);
      }
      m_.levels.push_back(std::move(nl));
    }
  }

  void add_latencies() {
    m_.reach_latency_us.push_back(m_.nvlink_latency_us);
    for (const auto& l : m_.levels) m_.reach_latency_us.push_back(l.latency_us);
    m_.reach_latency_us.push_back((m_.levels.empty() ? 1.0 : m_.levels.back().latency_us) + 0.3);
  }

  // One sentence per capacity the inputs did not give (Machine::assumptions).
  void state_assumptions() {
    if (sm_assumed_) {
      m_.assumptions.push_back(
          "GPU generation not in the node capture: NCCL's Hopper tables assumed");
    }
    if (ports_from_node_) {
      m_.assumptions.push_back("host NICs from the node capture (" + node_port_text_ +
                               " per host): the fabric gives no port speeds");
    }
    if (ports_invented_) {
      m_.assumptions.push_back("host NICs assumed " + invented_port_text_ +
                               " per host: neither the fabric nor a node capture gives their "
                               "speed, so figures are relative only");
    }
    if (uplinks_sized_) {
      std::string how;
      bool any_declared = false;
      for (int t : sized_tiers_) any_declared |= declared(t) > 1;
      if (!any_declared) {
        how = "non-blocking (declare an oversubscription per tier to change it)";
      } else {
        for (int t : sized_tiers_) {
          char buf[48];
          std::snprintf(buf, sizeof buf, "%stier %d %g:1", how.empty() ? "" : ", ", t, declared(t));
          how += buf;
        }
        how = "at the declared oversubscription (" + how + ")";
      }
      m_.assumptions.push_back("switch uplinks sized from what they carry, " + how +
                               ": the fabric gives no link speeds");
      if (f_.hosts.size() > m_.hosts.size()) {
        double typical = 0;
        for (double c : host_nominal_) typical = std::max(typical, c);
        m_.assumptions.push_back("hosts outside the step taken to have " + gbps_text(typical) +
                                 " of NICs, like the step's");
      }
    }
  }

  const topology::Fabric& f_;
  const std::vector<std::string>& hosts_;
  const std::vector<const topology::NodeTopology*>& nodes_;
  const std::vector<std::vector<int>>& gpus_;
  Machine m_;
  std::map<const topology::NodeTopology*, internal::NodeFacts> facts_;
  std::map<int, int> dense_domain_;
  std::vector<double> host_nominal_;  // per Machine host: its NICs' nominal capacity
  double fastest_port_ = 0;           // GB/s
  bool ports_from_node_ = false, ports_invented_ = false, uplinks_sized_ = false;
  bool sm_assumed_ = false;
  std::set<int> sized_tiers_;  // tiers whose uplinks were sized from what they carry
  std::string node_port_text_, invented_port_text_;
};

}  // namespace

Machine build_machine(const topology::Fabric& fabric, const std::vector<std::string>& hosts,
                      const std::vector<const topology::NodeTopology*>& nodes,
                      const std::vector<std::vector<int>>& gpus) {
  return MachineBuilder(fabric, hosts, nodes, gpus).build();
}

}  // namespace topoaware::mapper
