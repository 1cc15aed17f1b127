// The node doctor's checks (doctor.h): pure functions of the node model and HealthFacts.
#include "topoaware/topology/doctor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <set>
#include <utility>

#include "topoaware/topology/paths.h"

namespace topoaware::topology {
namespace {

constexpr double kEpsilon = 1e-9;
constexpr double kIdleGpuGts = 2.5;  // NVIDIA GPUs retrain to Gen1 when idle (power saving)
constexpr int kRoceMinMtu = 4200;    // a 4096-byte RoCE path MTU plus RoCE/IP headers

// A capacity against what it should be: critical at or below a quarter, warning below, ok.
Severity by_fraction(double measured, double expected) {
  if (!(expected > 0) || !(measured >= 0)) return Severity::kOk;
  double f = measured / expected;
  if (f <= kCriticalFraction + kEpsilon) return Severity::kCritical;
  if (f < 1 - kEpsilon) return Severity::kWarning;
  return Severity::kOk;
}

std::string num(double v) {
  char buf[32];
  if (std::fabs(v - std::round(v)) < 1e-6) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f", v);
  }
  return buf;
}

std::string gts_text(double gts) {
  if (gts < 0) return "? GT/s";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GT/s", gts);
  return buf;
}

std::string link_text(double gts, int width) {
  return gts_text(gts) + " x" + (width > 0 ? std::to_string(width) : std::string("?"));
}

std::string gbps_text(double gbps) { return num(gbps) + " Gb/s"; }

CheckStatus status_of(Severity s) {
  switch (s) {
    case Severity::kCritical:
      return CheckStatus::kCritical;
    case Severity::kWarning:
      return CheckStatus::kWarning;
    case Severity::kOk:
      break;
  }
  return CheckStatus::kOk;
}

std::string plural(std::size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

const char* counter_action(const std::string& counter) {
  if (counter == "symbol_error" || counter == "local_link_integrity_errors") {
    return "Bit errors on the physical link: reseat or replace the cable or transceiver on both "
           "ends, and check the switch port's counters (ibdiagnet) to tell the cable from the "
           "port.";
  }
  if (counter == "link_error_recovery" || counter == "link_downed") {
    return "The link retrained or went down: a marginal cable or transceiver; replace it before "
           "the next job that uses this port fails.";
  }
  if (counter == "excessive_buffer_overrun_errors") {
    return "The receive buffer overflowed (flow-control credits violated): check the switch's "
           "buffer/VL configuration and the cable; this drops packets on a lossless fabric.";
  }
  return "Malformed packets received: usually bit errors on the link (see symbol_error); reseat "
         "or replace the cable, then clear the counters (perfquery -x -R) and watch them.";
}

class Doctor {
 public:
  Doctor(const NodeTopology& node, const HealthFacts& facts, const DoctorOptions& options)
      : node_(node), facts_(facts), opt_(options) {}

  HealthReport run() {
    r_.host = node_.hostname;
    r_.source = node_.source;
    r_.time = opt_.now;
    r_.notes = facts_.notes;
    index_names();
    check_pcie_link();
    check_pcie_acs();
    check_rdma_port();
    check_rdma_rate();
    check_rdma_counters();
    check_rdma_netdev();
    check_affinity();
    check_nvlink();
    check_compare();
    std::stable_sort(r_.findings.begin(), r_.findings.end(),
                     [](const Finding& a, const Finding& b) { return a.severity > b.severity; });
    return std::move(r_);
  }

 private:
  // ---- bookkeeping -------------------------------------------------------------------------

  void index_names() {
    for (VertexId v : node_.gpus()) {
      const Vertex& x = node_.graph.vertex(v);
      if (!x.busid.empty()) name_[x.busid] = x.name.empty() ? x.busid : x.name;
    }
    for (VertexId v : node_.nics()) {
      const Vertex& x = node_.graph.vertex(v);
      if (!x.busid.empty()) name_[x.busid] = x.name.empty() ? x.busid : x.name;
    }
    // What sits below each PCI function (for `affects`): every GPU/NIC whose chain crosses it.
    if (facts_.pcie) {
      std::map<std::string, const PcieLinkFacts*> by_busid;
      for (const auto& p : *facts_.pcie) by_busid[p.busid] = &p;
      for (const auto& p : *facts_.pcie) {
        if (p.kind == "bridge") continue;
        std::string who = device_name(p.busid);
        std::string at = p.busid;
        for (int hops = 0; !at.empty() && hops < 64; ++hops) {
          below_[at].insert(who);
          auto it = by_busid.find(at);
          at = it == by_busid.end() ? std::string() : it->second->upstream;
        }
      }
    }
  }

  std::string device_name(const std::string& busid) const {
    auto it = name_.find(busid);
    return it == name_.end() ? busid : it->second;
  }

  std::vector<std::string> affects(const std::string& busid) const {
    auto it = below_.find(busid);
    if (it == below_.end()) return {};
    return {it->second.begin(), it->second.end()};
  }

  CheckResult& begin(std::string_view id) {
    r_.checks.push_back(CheckResult{std::string(id), CheckStatus::kOk, 0, {}});
    return r_.checks.back();
  }

  void skip(CheckResult& c, const std::string& why) {
    c.status = CheckStatus::kSkipped;
    c.note = why;
  }

  void add(CheckResult& c, Finding f) {
    if (f.severity == Severity::kOk) return;
    f.check = c.id;
    CheckStatus s = status_of(f.severity);
    if (c.status == CheckStatus::kOk || (c.status != CheckStatus::kSkipped && s > c.status)) {
      c.status = s;
    }
    r_.findings.push_back(std::move(f));
  }

  static void append_note(CheckResult& c, const std::string& s) {
    if (s.empty()) return;
    if (!c.note.empty()) c.note += "; ";
    c.note += s;
  }

  // ---- pcie.link ---------------------------------------------------------------------------

  // A link is judged once, from the function that faces up (an endpoint or a switch's upstream
  // port): it and the port above it (a root or downstream port) report the same trained link,
  // and the expected speed/width is the lower of the two ends' maxima (a Gen4 card in a Gen5
  // slot is right at Gen4).
  void check_pcie_link() {
    CheckResult& c = begin(kCheckPcieLink);
    if (!facts_.pcie) return skip(c, facts_.why_no_pcie);
    std::map<std::string, const PcieLinkFacts*> by_busid;
    for (const auto& p : *facts_.pcie) by_busid[p.busid] = &p;
    int unknown = 0, idle = 0;
    for (const PcieLinkFacts& f : *facts_.pcie) {
      if (f.root_port) continue;  // a root port's link is its child's
      const PcieLinkFacts* up = nullptr;
      if (auto it = by_busid.find(f.upstream); it != by_busid.end()) up = it->second;
      // A downstream port faces down: its link is judged from the function below it.
      if (!faces_up(f, by_busid)) continue;
      double speed = f.speed_gts > 0 ? f.speed_gts : (up ? up->speed_gts : -1);
      int width = f.width > 0 ? f.width : (up ? up->width : -1);
      double max_speed = f.max_speed_gts;
      int max_width = f.max_width;
      if (up != nullptr) {
        if (up->max_speed_gts > 0)
          max_speed = max_speed > 0 ? std::min(max_speed, up->max_speed_gts) : up->max_speed_gts;
        if (up->max_width > 0)
          max_width = max_width > 0 ? std::min(max_width, up->max_width) : up->max_width;
      }
      if (speed <= 0 || width <= 0 || max_speed <= 0 || max_width <= 0) {
        ++unknown;
        continue;
      }
      ++c.examined;
      if (f.kind == "gpu" && std::fabs(speed - kIdleGpuGts) < kEpsilon && width >= max_width &&
          max_speed > kIdleGpuGts) {
        ++idle;
        continue;
      }
      double have = pcie_gbps(speed, width), want = pcie_gbps(max_speed, max_width);
      Severity sev = by_fraction(have, want);
      if (sev == Severity::kOk) continue;
      Finding x;
      x.severity = sev;
      x.busid = f.busid;
      x.device = f.kind == "bridge" ? f.busid : device_name(f.busid);
      x.kind = f.kind;
      x.measured = link_text(speed, width);
      x.expected = link_text(max_speed, max_width);
      x.measured_gbps = have;
      x.expected_gbps = want;
      x.affects = affects(f.busid);
      std::string what = f.kind == "bridge" ? "The PCIe switch uplink " + f.busid
                                            : x.device + " (" + f.busid + ")";
      if (width < max_width) {
        x.action = what + " trained at x" + std::to_string(width) + " of x" +
                   std::to_string(max_width) +
                   ": reseat the card (or its riser/cable) and "
                   "check the slot; if it persists, swap the card to tell card from slot.";
      } else {
        x.action = what + " trained at " + gts_text(speed) + " instead of " + gts_text(max_speed) +
                   ": check the BIOS PCIe speed setting for the slot, "
                   "then reseat; persistent downtraining is a riser, retimer or card fault.";
      }
      add(c, std::move(x));
    }
    if (idle > 0) {
      append_note(c, plural(static_cast<std::size_t>(idle), "GPU", "GPUs") +
                         " at 2.5 GT/s with full width: idle power saving, speed not judged "
                         "(rerun under load)");
    }
    if (unknown > 0) {
      append_note(c, plural(static_cast<std::size_t>(unknown), "link", "links") +
                         " without current and max speed/width in sysfs, not judged");
    }
  }

  // Up-facing: an endpoint, or a bridge at an odd depth below its root port (root port,
  // upstream port, downstream port, endpoint alternate down a sysfs chain).
  static bool faces_up(const PcieLinkFacts& f,
                       const std::map<std::string, const PcieLinkFacts*>& by_busid) {
    if (f.kind != "bridge") return true;
    if (f.root_port) return false;
    int depth = 0;
    std::string at = f.upstream;
    for (int hops = 0; !at.empty() && hops < 64; ++hops) {
      ++depth;
      auto it = by_busid.find(at);
      if (it == by_busid.end() || it->second->root_port) break;
      at = it->second->upstream;
    }
    return depth % 2 == 1;
  }

  // ---- pcie.acs ----------------------------------------------------------------------------

  void check_pcie_acs() {
    CheckResult& c = begin(kCheckPcieAcs);
    if (!facts_.acs) return skip(c, facts_.why_no_acs);
    int unreadable = 0;
    for (const AcsFacts& a : *facts_.acs) {
      if (!a.readable) {
        ++unreadable;
        continue;
      }
      ++c.examined;
      if (!a.has_acs) continue;
      bool rr = (a.control & kAcsRequestRedirect) != 0;
      bool cr = (a.control & kAcsCompletionRedirect) != 0;
      if (!rr && !cr) continue;
      Finding x;
      x.severity = Severity::kWarning;
      x.device = a.busid;
      x.busid = a.busid;
      x.kind = "bridge";
      x.measured = std::string("ReqRedir") + (rr ? "+" : "-") + " CmpltRedir" + (cr ? "+" : "-");
      x.expected = "ReqRedir- CmpltRedir-";
      x.affects = affects(a.busid);
      x.action = "ACS redirect on switch port " + a.busid +
                 " sends GPU peer-to-peer and GPUDirect RDMA traffic up to the root complex: "
                 "disable ACS in the BIOS (or clear it with setpci at boot) on bare metal; keep it "
                 "only where VM passthrough needs IOMMU isolation.";
      add(c, std::move(x));
    }
    if (unreadable > 0 && c.examined == 0) {
      skip(c,
           "PCI config space beyond 64 bytes is readable by root only: run as root to check "
           "ACS (" +
               plural(static_cast<std::size_t>(unreadable), "switch port", "switch ports") +
               " not read)");
    } else if (unreadable > 0) {
      append_note(c, plural(static_cast<std::size_t>(unreadable), "switch port", "switch ports") +
                         " with unreadable config space, not judged");
    }
  }

  // ---- rdma.port / rdma.rate ---------------------------------------------------------------

  struct PortRef {
    const Vertex* nic;
    const NetPort* port;
  };

  std::vector<PortRef> rdma_ports() const {
    std::vector<PortRef> out;
    for (VertexId v : node_.nics()) {
      const Vertex& x = node_.graph.vertex(v);
      for (const NetPort& p : x.nic.ports) {
        if (is_rdma(p)) out.push_back({&x, &p});
      }
    }
    return out;
  }

  const RdmaPortFacts* port_facts(const std::string& device, int port) const {
    if (!facts_.ports) return nullptr;
    for (const auto& f : *facts_.ports) {
      if (f.device == device && f.port == port) return &f;
    }
    return nullptr;
  }

  static bool active(const NetPort& p) { return p.state == "ACTIVE" || p.state == "ACTIVE_DEFER"; }

  void check_rdma_port() {
    CheckResult& c = begin(kCheckRdmaPort);
    auto ports = rdma_ports();
    if (ports.empty()) return skip(c, "no RDMA ports in this input");
    int disabled = 0, unknown = 0;
    for (const PortRef& pr : ports) {
      const NetPort& p = *pr.port;
      const RdmaPortFacts* f = port_facts(p.name, p.port);
      std::string phys = f ? f->phys_state : std::string();
      if (p.state.empty()) {
        ++unknown;
        continue;
      }
      ++c.examined;
      if (!active(p) && phys == "Disabled") {
        ++disabled;
        continue;
      }
      Severity sev = Severity::kOk;
      if (!active(p)) {
        sev = Severity::kCritical;
      } else if (!phys.empty() && phys != "LinkUp") {
        sev = Severity::kWarning;
      }
      if (sev == Severity::kOk) continue;
      Finding x;
      x.severity = sev;
      x.device = p.name;
      x.busid = pr.nic->busid;
      x.kind = "port";
      x.port = p.port;
      x.measured = p.state + (phys.empty() ? "" : " (" + phys + ")");
      x.expected = "ACTIVE (LinkUp)";
      x.measured_gbps = 0;
      x.expected_gbps = p.speed_mbps > 0 ? p.speed_mbps / 1000 : -1;
      if (!active(p)) x.measured_gbps = 0;
      x.affects = {p.name};
      std::string where = p.name + " port " + std::to_string(p.port);
      if (phys == "Polling") {
        x.action = where +
                   " sees no link partner (Polling): check the cable and the switch port "
                   "(ibstat); NCCL leaves this HCA out until the port is ACTIVE.";
      } else if (p.state == "INIT" || p.state == "ARMED") {
        x.action = where + " has a physical link but is " + p.state +
                   ": the subnet manager has not configured it; check that opensm/UFM sees it.";
      } else if (active(p)) {
        x.action = where + " is ACTIVE but its physical state is " + phys +
                   ": the link is recovering from errors; watch rdma.counters and the cable.";
      } else {
        x.action = where + " is " + p.state +
                   ": check the cable, the transceiver and the switch "
                   "port (ibstat); NCCL leaves this HCA out until the port is ACTIVE.";
      }
      add(c, std::move(x));
    }
    if (c.examined == 0) return skip(c, "no port state in this input");
    if (disabled > 0) {
      append_note(c, plural(static_cast<std::size_t>(disabled), "port", "ports") +
                         " administratively disabled, not judged");
    }
    if (unknown > 0) {
      append_note(c, plural(static_cast<std::size_t>(unknown), "port", "ports") +
                         " of unknown state, not judged");
    }
  }

  // Expected rate: the best rate among the node's ports of the same HCA model and link layer
  // (sysfs shows only the active rate, not what the HCA supports), raised to the node type's
  // capture where --compare gives one.
  void check_rdma_rate() {
    CheckResult& c = begin(kCheckRdmaRate);
    auto ports = rdma_ports();
    if (ports.empty()) return skip(c, "no RDMA ports in this input");
    std::map<std::string, double> best;  // model|link layer -> Gb/s
    auto key = [](const PortRef& pr) { return pr.nic->pci.device + "|" + pr.port->link_layer; };
    for (const PortRef& pr : ports) {
      if (!pr.port->state.empty() && !active(*pr.port)) continue;
      if (pr.port->speed_mbps > 0) {
        best[key(pr)] = std::max(best[key(pr)], pr.port->speed_mbps / 1000);
      }
    }
    for (const PortRef& pr : ports) {
      const NetPort& p = *pr.port;
      if (!p.state.empty() && !active(p)) continue;  // rdma.port reports it
      if (!(p.speed_mbps > 0)) continue;
      ++c.examined;
      double have = p.speed_mbps / 1000;
      double want = best[key(pr)];
      std::string from = "best port of this HCA model on the node";
      if (double cap = capture_speed(p.name); cap > want) {
        want = cap;
        from = "the node type's capture";
      }
      Severity sev = by_fraction(have, want);
      if (sev == Severity::kOk) continue;
      Finding x;
      x.severity = sev;
      x.device = p.name;
      x.busid = pr.nic->busid;
      x.kind = "port";
      x.port = p.port;
      x.measured = gbps_text(have) + (p.width > 0 ? " (" + std::to_string(p.width) + "X)" : "");
      x.expected = gbps_text(want);
      x.measured_gbps = have;
      x.expected_gbps = want;
      x.affects = {p.name};
      x.action = p.name + " port " + std::to_string(p.port) + " runs at " + num(have) + " of " +
                 num(want) + " Gb/s (" + from +
                 "): check the cable type and the switch port's "
                 "speed setting; a port at 1X or 2X has lost lanes: reseat or replace the cable.";
      add(c, std::move(x));
    }
    if (c.examined == 0) skip(c, "no port rates in this input");
  }

  double capture_speed(const std::string& name) const {
    if (opt_.compare == nullptr) return -1;
    double best = -1;
    for (VertexId v : opt_.compare->nics()) {
      for (const NetPort& p : opt_.compare->graph.vertex(v).nic.ports) {
        if (p.name == name && p.speed_mbps > 0) best = std::max(best, p.speed_mbps / 1000);
      }
    }
    return best;
  }

  // ---- rdma.counters -----------------------------------------------------------------------

  void check_rdma_counters() {
    CheckResult& c = begin(kCheckRdmaCounters);
    if (!facts_.ports) return skip(c, facts_.why_no_ports);
    bool any = false;
    for (const RdmaPortFacts& f : *facts_.ports) {
      if (f.counters.empty()) continue;
      any = true;
      r_.counters.push_back({f.device, f.port, f.counters});
      const CounterSnapshot* before = previous(f.device, f.port);
      bool reset = false;
      if (before != nullptr) {
        for (const auto& [name, v] : f.counters) {
          auto it = before->values.find(name);
          if (it != before->values.end() && v < it->second) reset = true;
        }
      }
      bool delta = before != nullptr && !reset;
      ++c.examined;
      for (const CounterThreshold& t : opt_.thresholds) {
        auto it = f.counters.find(t.counter);
        if (it == f.counters.end() || t.warning == 0) continue;
        std::uint64_t value = it->second;
        if (delta) {
          auto b = before->values.find(t.counter);
          if (b != before->values.end()) value -= b->second;
        }
        if (value < t.warning) continue;
        Finding x;
        x.severity = delta && t.critical_on_increase ? Severity::kCritical : Severity::kWarning;
        x.device = f.device;
        x.kind = "port";
        x.port = f.port;
        if (VertexId v = node_.graph.find_name(VertexKind::kNic, f.device); v.valid()) {
          x.busid = node_.graph.vertex(v).busid;
        }
        std::string since =
            delta ? "since the last check " +
                        std::to_string(std::max<std::int64_t>(0, opt_.now - opt_.previous->time)) +
                        " s ago"
                  : "since the counters were cleared";
        x.measured = t.counter + " " + std::to_string(value) + " " + since;
        x.expected = t.counter + " < " + std::to_string(t.warning);
        x.affects = {f.device};
        x.action = f.device + " port " + std::to_string(f.port) + ": " + counter_action(t.counter);
        add(c, std::move(x));
      }
    }
    if (!any) return skip(c, "no counters under sys/class/infiniband/*/ports/*/counters");
    if (opt_.previous == nullptr) {
      append_note(c, "counts since the counters were cleared (no earlier report: no deltas)");
    }
  }

  const CounterSnapshot* previous(const std::string& device, int port) const {
    if (opt_.previous == nullptr || opt_.previous->time >= opt_.now) return nullptr;
    for (const auto& s : opt_.previous->counters) {
      if (s.device == device && s.port == port) return &s;
    }
    return nullptr;
  }

  // ---- rdma.netdev -------------------------------------------------------------------------

  void check_rdma_netdev() {
    CheckResult& c = begin(kCheckRdmaNetdev);
    if (!facts_.ports) return skip(c, facts_.why_no_ports);
    std::map<std::string, std::string> layer;  // device|port -> link layer
    for (const PortRef& pr : rdma_ports()) {
      layer[pr.port->name + "|" + std::to_string(pr.port->port)] = pr.port->link_layer;
    }
    // IPoIB interfaces of one node should agree on the MTU (datagram 2044/4092, connected 65520).
    std::map<int, int> ib_mtus;
    for (const RdmaPortFacts& f : *facts_.ports) {
      if (f.netdev.empty() || f.mtu <= 0) continue;
      if (layer[f.device + "|" + std::to_string(f.port)] == "InfiniBand") ++ib_mtus[f.mtu];
    }
    int common_ib_mtu = -1, most = 0;
    for (const auto& [mtu, n] : ib_mtus) {
      if (n > most) {
        most = n;
        common_ib_mtu = mtu;
      }
    }
    for (const RdmaPortFacts& f : *facts_.ports) {
      if (f.netdev.empty()) continue;
      ++c.examined;
      const std::string& ll = layer[f.device + "|" + std::to_string(f.port)];
      bool roce = ll == "Ethernet";
      Finding x;
      x.device = f.netdev;
      x.kind = "netdev";
      x.port = f.port;
      x.affects = {f.device};
      if (VertexId v = node_.graph.find_name(VertexKind::kNic, f.device); v.valid()) {
        x.busid = node_.graph.vertex(v).busid;
      }
      if (f.carrier == 0) {
        Finding y = x;
        y.severity = roce ? Severity::kCritical : Severity::kWarning;
        y.measured = "carrier 0";
        y.expected = "carrier 1";
        y.action = f.netdev + " (" + f.device + " port " + std::to_string(f.port) + ") has no " +
                   "carrier: " + (roce ? "RoCE traffic cannot flow; " : "IPoIB is down; ") +
                   "check the cable and switch port, and that the interface is up (ip link).";
        add(c, std::move(y));
      }
      if (f.mtu > 0 && roce && f.mtu < kRoceMinMtu) {
        Finding y = x;
        y.severity = Severity::kWarning;
        y.measured = "mtu " + std::to_string(f.mtu);
        y.expected = "mtu >= " + std::to_string(kRoceMinMtu);
        y.action = "RoCE on " + f.netdev +
                   " gets a path MTU below 4096 at this netdev MTU, "
                   "which costs bandwidth: set MTU 9000 (or at least 4200) on the interface and "
                   "the switch ports.";
        add(c, std::move(y));
      }
      if (f.mtu > 0 && !roce && ll == "InfiniBand" && common_ib_mtu > 0 && f.mtu != common_ib_mtu) {
        Finding y = x;
        y.severity = Severity::kWarning;
        y.measured = "mtu " + std::to_string(f.mtu);
        y.expected = "mtu " + std::to_string(common_ib_mtu) + " (the node's other IPoIB ports)";
        y.action = f.netdev +
                   " differs from the node's other IPoIB interfaces (datagram vs "
                   "connected mode?): make the IPoIB configuration uniform.";
        add(c, std::move(y));
      }
    }
    if (c.examined == 0) skip(c, "no netdev on any RDMA port");
  }

  // ---- affinity.nic ------------------------------------------------------------------------

  void check_affinity() {
    CheckResult& c = begin(kCheckAffinity);
    if (node_.gpus().empty()) return skip(c, "no GPUs in this input");
    std::vector<GpuLocality> loc = gpu_locality(node_);
    auto rdma_nic = [&](VertexId n) {
      const auto& ports = node_.graph.vertex(n).nic.ports;
      return std::any_of(ports.begin(), ports.end(), rdma_port_up);
    };
    std::optional<PathType> best;
    for (const GpuLocality& l : loc) {
      const Vertex& g = node_.graph.vertex(l.gpu);
      AffinityRow row;
      row.gpu = g.name.empty() ? g.busid : g.name;
      row.busid = g.busid;
      for (VertexId n : l.nearest_nics) {
        const Vertex& v = node_.graph.vertex(n);
        row.nics.push_back(v.name.empty() ? v.busid : v.name);
      }
      row.path = l.nearest_nics.empty() ? "" : std::string(to_string(l.path_to_nic));
      row.gbps = l.bandwidth_to_nic;
      r_.affinity.push_back(row);
      if (!l.nearest_nics.empty() && rdma_nic(l.nearest_nics.front())) {
        best = best ? std::min(*best, l.path_to_nic) : l.path_to_nic;
      }
    }
    if (!best) return skip(c, "no RDMA NIC is up: the GPUs would use sockets (see rdma.port)");
    std::map<std::string, PathType> expected_by_busid;
    std::vector<PathType> expected_by_index;
    if (opt_.compare != nullptr) {
      for (const GpuLocality& l : gpu_locality(*opt_.compare)) {
        if (l.nearest_nics.empty()) continue;
        expected_by_busid[opt_.compare->graph.vertex(l.gpu).busid] = l.path_to_nic;
        expected_by_index.push_back(l.path_to_nic);
      }
    }
    // A capture of another layout (other bus ids) is matched GPU by GPU in bus order.
    bool busids_match = std::any_of(r_.affinity.begin(), r_.affinity.end(), [&](const auto& a) {
      return expected_by_busid.count(a.busid) > 0;
    });
    for (std::size_t i = 0; i < loc.size(); ++i) {
      const GpuLocality& l = loc[i];
      if (l.nearest_nics.empty() || !rdma_nic(l.nearest_nics.front())) continue;
      ++c.examined;
      PathType want = *best;
      std::string from = "the best of this node's GPUs";
      if (auto it = expected_by_busid.find(r_.affinity[i].busid); it != expected_by_busid.end()) {
        want = it->second;
        from = "the node type's capture";
      } else if (!busids_match && i < expected_by_index.size()) {
        want = expected_by_index[i];
        from = "the node type's capture";
      }
      bool cross = l.path_to_nic == PathType::SYS;
      bool lost_gdr = l.path_to_nic > want && l.path_to_nic > PathType::PXB;
      if (!cross && !lost_gdr) continue;
      const AffinityRow& row = r_.affinity[i];
      Finding x;
      x.severity = Severity::kWarning;
      x.device = row.gpu;
      x.busid = row.busid;
      x.kind = "gpu";
      x.measured = row.path + " to " + row.nics.front();
      x.expected = std::string(to_string(want)) + " (" + from + ")";
      x.affects = {row.gpu};
      x.action = row.gpu + "'s nearest RDMA NIC is " + row.nics.front() + " at " + row.path +
                 (cross ? ", across the CPU interconnect" : ", through the CPU's root complex") +
                 ", so GPUDirect RDMA is off for it: bring up the HCA under its PCIe switch (see "
                 "rdma.port) or move a NIC onto its socket.";
      add(c, std::move(x));
    }
  }

  // ---- nvlink.lanes ------------------------------------------------------------------------

  void check_nvlink() {
    CheckResult& c = begin(kCheckNvlink);
    if (!facts_.nvlink) return skip(c, facts_.why_no_nvlink);
    std::map<std::string, int> capture_lanes;
    int capture_max = -1;
    if (opt_.compare != nullptr) {
      for (const auto& [busid, lanes] : lanes_of(*opt_.compare)) {
        capture_lanes[busid] = lanes;
        capture_max = std::max(capture_max, lanes);
      }
    }
    int peers_max = 0;
    for (const NvlinkFacts& f : *facts_.nvlink) peers_max = std::max(peers_max, f.lanes);
    // A capture of another board layout (no bus id in common) gives one figure for every GPU.
    bool busids_match =
        std::any_of(facts_.nvlink->begin(), facts_.nvlink->end(),
                    [&](const NvlinkFacts& f) { return capture_lanes.count(f.busid) > 0; });
    if (peers_max <= 0 && capture_max <= 0) {
      c.examined = static_cast<int>(facts_.nvlink->size());
      append_note(c, "no GPU of this node has NVLink");
      return;
    }
    for (const NvlinkFacts& f : *facts_.nvlink) {
      if (f.active < 0) continue;
      ++c.examined;
      int want = peers_max;
      std::string from = "the node's other GPUs";
      if (auto it = capture_lanes.find(f.busid); it != capture_lanes.end()) {
        want = it->second;
        from = "the node type's capture";
      } else if (!busids_match && capture_max > 0) {
        want = capture_max;
        from = "the node type's capture";
      }
      if (f.active >= want) continue;
      VertexId v = node_.graph.find_busid(f.busid);
      int sm = v.valid() ? node_.graph.vertex(v).gpu.sm : -1;
      double lane = nvlink_lane_bandwidth(sm) * 8;  // Gb/s
      Finding x;
      x.severity = by_fraction(f.active, want);
      x.device = device_name(f.busid);
      x.busid = f.busid;
      x.kind = "gpu";
      x.measured = std::to_string(f.active) + " of " + std::to_string(want) + " lanes up";
      x.expected = std::to_string(want) + " lanes (" + from + ")";
      x.measured_gbps = f.active * lane;
      x.expected_gbps = want * lane;
      x.affects = {x.device};
      x.action = x.device + " has " + std::to_string(want - f.active) +
                 " NVLink lane(s) down: `nvidia-smi nvlink -s` shows which; reset the GPU or "
                 "reboot, and call the vendor if lanes stay down (baseboard or NVSwitch).";
      add(c, std::move(x));
    }
  }

  static std::map<std::string, int> lanes_of(const NodeTopology& n) {
    std::map<std::string, int> out;
    for (VertexId g : n.gpus()) {
      int lanes = 0;
      for (LinkId id : n.graph.links_of(g)) {
        const Link& l = n.graph.link(id);
        if (l.kind == LinkKind::kNvLink && l.a != l.b) lanes += l.count;
      }
      out[n.graph.vertex(g).busid] = lanes;
    }
    return out;
  }

  // ---- compare.inventory -------------------------------------------------------------------

  void check_compare() {
    CheckResult& c = begin(kCheckCompare);
    if (opt_.compare == nullptr) return skip(c, "no --compare capture given");
    const NodeTopology& want = *opt_.compare;
    // GPUs by bus id; by count when the capture's bus ids are another layout's.
    std::set<std::string> have_gpus, want_gpus;
    for (VertexId g : node_.gpus()) have_gpus.insert(node_.graph.vertex(g).busid);
    for (VertexId g : want.gpus()) want_gpus.insert(want.graph.vertex(g).busid);
    c.examined += static_cast<int>(want_gpus.size());
    bool by_busid = std::any_of(want_gpus.begin(), want_gpus.end(),
                                [&](const std::string& b) { return have_gpus.count(b) > 0; });
    if (by_busid) {
      for (const std::string& b : want_gpus) {
        if (have_gpus.count(b) > 0) continue;
        missing(
            c, Severity::kCritical, "gpu", b, b, "missing", "present",
            "GPU " + b +
                " of the node type is not on this node: check that the GPU is "
                "seated and powered (lspci, nvidia-smi); a job asking for every GPU fails here.");
      }
    } else if (have_gpus.size() < want_gpus.size()) {
      missing(c, Severity::kCritical, "gpu", "GPUs", "", std::to_string(have_gpus.size()) + " GPUs",
              std::to_string(want_gpus.size()) + " GPUs",
              "This node has fewer GPUs than its node type: find the missing one (lspci, "
              "nvidia-smi) before jobs asking for every GPU fail here.");
    }
    if (!by_busid && !want_gpus.empty()) {
      append_note(c, "the capture's GPU bus ids are not this node's: GPUs compared by count");
    }
    // NICs by name (mlx5_3 is the same port on every node of a type), else by bus id.
    std::set<std::string> have_nics, have_nic_busids;
    for (VertexId n : node_.nics()) {
      have_nics.insert(node_.graph.vertex(n).name);
      have_nic_busids.insert(node_.graph.vertex(n).busid);
    }
    for (VertexId n : want.nics()) {
      const Vertex& v = want.graph.vertex(n);
      if (v.nic.virtual_nic) continue;
      ++c.examined;
      bool rdma = std::any_of(v.nic.ports.begin(), v.nic.ports.end(), is_rdma);
      bool named = !v.name.empty();
      if (named ? have_nics.count(v.name) > 0 : have_nic_busids.count(v.busid) > 0) continue;
      std::string label = named ? v.name : v.busid;
      // Matched by name, the capture's bus id may be another board's: not quoted then.
      missing(
          c, rdma ? Severity::kCritical : Severity::kWarning, "nic", label,
          named ? std::string() : v.busid, "missing", "present",
          "NIC " + label +
              " of the node type is not on this node: check that the card is "
              "seated and its driver loaded (lspci, ibstat); its rail or network is missing here.");
    }
    // NVLink: an NVSwitch fabric the node type has and this node lacks (when NVLink was read).
    bool want_nvs = !want.graph.of_kind(VertexKind::kNvSwitch).empty();
    bool have_nvs = !node_.graph.of_kind(VertexKind::kNvSwitch).empty();
    if (want_nvs && !have_nvs && facts_.nvlink) {
      missing(c, Severity::kCritical, "nvswitch", "NVSwitch", "", "no NVLink to an NVSwitch",
              "NVSwitch fabric",
              "The node type's GPUs meet over NVSwitch, but no NVLink to a switch is up here: "
              "check the fabric manager (nv-fabricmanager) and `nvidia-smi nvlink -s`.");
    }
  }

  void missing(CheckResult& c, Severity sev, const std::string& kind, const std::string& device,
               const std::string& busid, const std::string& measured, const std::string& expected,
               const std::string& action) {
    Finding x;
    x.severity = sev;
    x.kind = kind;
    x.device = device;
    x.busid = busid;
    x.measured = measured;
    x.expected = expected;
    x.affects = {device};
    x.action = action;
    add(c, std::move(x));
  }

  const NodeTopology& node_;
  const HealthFacts& facts_;
  const DoctorOptions& opt_;
  HealthReport r_;
  std::map<std::string, std::string> name_;             // busid -> GPU/NIC name
  std::map<std::string, std::set<std::string>> below_;  // busid -> GPU/NIC names at or below
};

}  // namespace

std::string_view to_string(Severity s) {
  switch (s) {
    case Severity::kOk:
      return "ok";
    case Severity::kWarning:
      return "warning";
    case Severity::kCritical:
      return "critical";
  }
  return "?";
}

std::string_view to_string(CheckStatus s) {
  switch (s) {
    case CheckStatus::kOk:
      return "ok";
    case CheckStatus::kWarning:
      return "warning";
    case CheckStatus::kCritical:
      return "critical";
    case CheckStatus::kSkipped:
      return "skipped";
  }
  return "?";
}

Severity HealthReport::worst() const {
  Severity w = Severity::kOk;
  for (const Finding& f : findings) w = std::max(w, f.severity);
  return w;
}

std::string_view HealthReport::status() const {
  switch (worst()) {
    case Severity::kOk:
      return "healthy";
    case Severity::kWarning:
      return "degraded";
    case Severity::kCritical:
      return "critical";
  }
  return "?";
}

std::vector<CounterThreshold> default_counter_thresholds() {
  return {
      {"symbol_error", 10, false},
      {"link_error_recovery", 10, false},
      {"link_downed", 1, true},
      {"port_rcv_errors", 10, false},
      {"excessive_buffer_overrun_errors", 1, true},
      {"local_link_integrity_errors", 1, true},
  };
}

double parse_pcie_gts(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  std::size_t sp = s.find(' ');
  if (sp == std::string_view::npos || s.substr(sp + 1).rfind("GT/s", 0) != 0) return -1;
  std::string n(s.substr(0, sp));
  char* end = nullptr;
  double v = std::strtod(n.c_str(), &end);
  if (end == n.c_str() || *end != '\0' || !(v > 0) || v > 1024) return -1;
  return v;
}

double pcie_gbps(double gts, int width) {
  if (!(gts > 0) || width <= 0) return -1;
  // Gen1/2 use 8b/10b; Gen3-5 128b/130b; Gen6 FLIT mode carries 242 payload bytes in 256.
  double code = gts <= 5.0 + kEpsilon    ? 0.8
                : gts <= 32.0 + kEpsilon ? 128.0 / 130.0
                                         : 242.0 / 256.0;
  return gts * width * code;
}

HealthReport diagnose(const NodeTopology& node, const HealthFacts& facts,
                      const DoctorOptions& options) {
  return Doctor(node, facts, options).run();
}

std::string finding_line(const Finding& f) {
  const std::string device =
      f.device +
      (f.port >= 0 && f.kind != "netdev" ? " port " + std::to_string(f.port) : std::string());
  return f.check + " " + device + ": " + f.measured + " (expected " + f.expected + ")";
}

}  // namespace topoaware::topology
