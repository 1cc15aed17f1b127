// The node doctor's reports fed to the plan (health.h).
#include "topoaware/topology/health.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <utility>

#include "topoaware/topology/error.h"

namespace topoaware::topology {
namespace {

// A port down: NCCL leaves the HCA out and the GPU's traffic takes a longer path. Modelled as
// next to nothing, so that no plan puts traffic there, without dividing by zero.
constexpr double kDownFraction = 0.01;

std::string gbps_text(double g) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", g);
  return buf;
}

// A NIC's own nominal speed in Gb/s from the node model (its fastest port), or -1.
double nic_gbps(const NodeTopology* node, const std::string& name) {
  if (node == nullptr) return -1;
  for (VertexId v : node->nics()) {
    const Vertex& nic = node->graph.vertex(v);
    double best = -1;
    bool named = nic.name == name;
    for (const auto& p : nic.nic.ports) {
      named |= p.name == name;
      if (p.speed_mbps > 0) best = std::max(best, p.speed_mbps / 1000);
    }
    if (named) return best;
  }
  return -1;
}

}  // namespace

std::vector<NicHealth> nic_health(const HealthReport& report, const NodeTopology* node) {
  std::map<std::string, NicHealth> worst;
  auto note = [&](const std::string& nic, double fraction, const std::string& what) {
    fraction = std::clamp(fraction, kDownFraction, 1.0);
    if (fraction >= 1.0) return;
    auto it = worst.find(nic);
    if (it == worst.end() || fraction < it->second.fraction) worst[nic] = {nic, fraction, what};
  };
  for (const Finding& f : report.findings) {
    if (f.check == kCheckRdmaRate && f.measured_gbps > 0 && f.expected_gbps > 0) {
      note(f.device, f.measured_gbps / f.expected_gbps,
           f.device + " at " + gbps_text(f.measured_gbps) + " of " + gbps_text(f.expected_gbps) +
               " Gb/s");
    } else if (f.check == kCheckRdmaPort && f.severity == Severity::kCritical) {
      note(f.device, kDownFraction, f.device + " port down");
    } else if (f.check == kCheckPcieLink && f.measured_gbps > 0) {
      for (const std::string& nic : f.affects) {
        double own = nic_gbps(node, nic);
        if (own <= 0 && nic != f.device && f.kind != "nic") continue;  // a GPU, or unknown
        if (own <= 0) own = f.expected_gbps;
        if (own <= 0) continue;
        note(nic, f.measured_gbps / own,
             nic + " behind a PCIe link at " + gbps_text(f.measured_gbps) + " Gb/s (the NIC " +
                 gbps_text(own) + ")");
      }
    }
  }
  std::vector<NicHealth> out;
  for (auto& [name, h] : worst) out.push_back(std::move(h));
  return out;
}

std::vector<std::string> apply_health(Fabric& fabric,
                                      const std::map<std::string, std::vector<NicHealth>>& health) {
  std::vector<std::string> lines;
  for (const auto& [host, nics] : health) {
    const std::int64_t i = fabric.find_host(host);
    if (i < 0 || nics.empty()) continue;
    HostInfo& hi = fabric.hosts[static_cast<std::size_t>(i)];
    std::string line = host + ":";
    for (const NicHealth& n : nics) {
      hi.nic_fraction[n.nic] = n.fraction;
      line += (line.back() == ':' ? " " : ", ") + (n.what.empty() ? n.nic : n.what);
    }
    lines.push_back(line);
  }
  return lines;
}

std::string health_text(const std::map<std::string, std::vector<NicHealth>>& health) {
  std::string out;
  for (const auto& [host, nics] : health) {
    if (nics.empty()) continue;
    out += host + ":";
    for (std::size_t k = 0; k < nics.size(); ++k) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.4f", nics[k].fraction);
      out += (k ? "," : "") + nics[k].nic + "=" + buf;
    }
    out += ";";
  }
  return out;
}

std::map<std::string, std::vector<NicHealth>> parse_health(const std::string& text,
                                                           const std::string& where) {
  std::map<std::string, std::vector<NicHealth>> out;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ';')) {
    if (item.empty()) continue;
    const auto colon = item.find(':');
    if (colon == std::string::npos || colon == 0) {
      throw Error(ErrorCode::kBadInput, where,
                  "expected host:nic=fraction,..., not '" + item + "'");
    }
    auto& nics = out[item.substr(0, colon)];
    std::istringstream list(item.substr(colon + 1));
    std::string pair;
    while (std::getline(list, pair, ',')) {
      const auto eq = pair.find('=');
      char* end = nullptr;
      const double f = eq == std::string::npos ? -1 : std::strtod(pair.c_str() + eq + 1, &end);
      if (eq == std::string::npos || eq == 0 || end == nullptr || *end != '\0' || !(f > 0) ||
          f > 1) {
        throw Error(ErrorCode::kBadInput, where,
                    "expected nic=fraction in (0, 1], not '" + pair + "'");
      }
      nics.push_back({pair.substr(0, eq), f, pair.substr(0, eq)});
    }
  }
  return out;
}

}  // namespace topoaware::topology
