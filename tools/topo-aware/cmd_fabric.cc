// `topo-aware fabric`: import a cluster fabric (ibnetdiscover dump, Slurm topology.conf, TOML
// description, or our JSON) and show its tiers, hosts, rails and anomalies, or write it out as a
// Slurm topology.conf (tree or block), JSON or DOT.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli.h"
#include "plugin_file.h"
#include "text_table.h"
#include "topoaware/topology/fabric_io.h"
#include "topoaware/topology/hostlist.h"

namespace topoaware::cli {
namespace {

struct FabricOptions {
  std::string input;
  std::string input_format;
  std::string guid_map;
  std::string format = "text";
  std::string output;
  std::string slurm_version;  // MAJOR.MINOR the topology.conf is for; empty: the installed one
};

// The Slurm release a topology.conf is written for, and where that came from: --slurm-version,
// else the installed Slurm's (installed_slurm_release()), else the newest format.
std::pair<topology::SlurmRelease, std::string> slurm_release_for(const std::string& option) {
  if (!option.empty()) return {*topology::parse_slurm_release(option), "--slurm-version"};
  if (auto installed = installed_slurm_release()) return *installed;
  return {{24, 5}, "no Slurm found here: --slurm-version names the release"};
}

std::string gb(double v) { return figure(v) + " GB/s"; }

// The names as a Slurm hostlist, cut after about `width` characters with "... (N more)"; a
// width of 0 never cuts.
std::string some(std::vector<std::string> names, std::size_t width) {
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
    return topology::hostname_less(a, b);
  });
  std::string all = topology::compress_hostlist(names);
  if (width == 0 || all.size() <= width) return all;
  auto prefix = [&](std::size_t k) {
    return topology::compress_hostlist(
        std::vector<std::string>(names.begin(), names.begin() + static_cast<long>(k)));
  };
  // The most names whose hostlist fits (at least one): the length grows with k.
  std::size_t lo = 1, hi = names.size();
  while (lo < hi) {
    std::size_t mid = (lo + hi + 1) / 2;
    if (prefix(mid).size() <= width)
      lo = mid;
    else
      hi = mid - 1;
  }
  return prefix(lo) + " ... (" + std::to_string(names.size() - lo) + " more)";
}

std::string fabric_to_text(const topology::Fabric& f, int verbose) {
  using namespace topology;
  const Graph& g = f.graph;
  std::ostringstream out;
  std::size_t nsw = 0;
  for (const Vertex& v : g.vertices()) nsw += v.kind == VertexKind::kSwitch ? 1 : 0;
  out << "fabric: " << f.source << "\n";
  out << "  " << nsw << " switches, " << f.hosts.size() << " hosts";
  if (f.channel_adapters > 0) out << ", " << f.channel_adapters << " channel adapters";
  out << ", " << f.tiers.size() << (f.tiers.size() == 1 ? " tier" : " tiers") << "\n\n";

  out << "tiers:\n";
  std::vector<std::vector<std::string>> rows = {
      {"TIER", "SWITCHES", "DOWN", "UP", "OVERSUB", "NAMES"}};
  for (const FabricTier& t : f.tiers) {
    std::vector<std::string> names;
    for (VertexId s : t.switches) names.push_back(g.vertex(s).name);
    char ov[48];
    std::snprintf(ov, sizeof ov, "%.3g:1", t.oversubscription);
    if (t.speeds_assumed) {
      // Placeholder speeds (topology.conf without LinkSpeed): no ratio to show but a declared one.
      auto d = f.declared_oversubscription.find(t.tier);
      if (d != f.declared_oversubscription.end()) {
        std::snprintf(ov, sizeof ov, "%.3g:1 declared", d->second);
      } else {
        std::snprintf(ov, sizeof ov, "unknown");
      }
      rows.push_back({std::to_string(t.tier), std::to_string(t.switches.size()), "unknown",
                      "unknown", t.up_gbps > 0 ? ov : "-", some(names, verbose > 0 ? 0 : 120)});
      continue;
    }
    rows.push_back({std::to_string(t.tier), std::to_string(t.switches.size()), gb(t.down_gbps),
                    gb(t.up_gbps), t.up_gbps > 0 ? ov : "-", some(names, verbose > 0 ? 0 : 120)});
  }
  out << text_table(rows) << "\n";

  out << "hosts per leaf group:\n";
  for (const LocalityLevel& lv : f.levels) {
    if (lv.name != "leaf" && lv.name != "block") continue;
    std::vector<std::vector<std::string>> members(lv.group_uplink_gbps.size());
    for (std::size_t h = 0; h < f.hosts.size(); ++h)
      members[lv.group_of_host[h]].push_back(f.hosts[h].name);
    std::vector<std::vector<std::string>> r = {{"GROUP", "HOSTS", "DOWN", "UP", "NAMES"}};
    std::size_t shown = 0;
    for (std::size_t k = 0; k < members.size(); ++k) {
      if (verbose == 0 && shown++ == 40) {
        r.push_back({"...", std::to_string(members.size() - 40) + " more groups", "", "", ""});
        break;
      }
      const bool assumed = k < lv.group_uplink_assumed.size() && lv.group_uplink_assumed[k] != 0;
      r.push_back({lv.group_name[k], std::to_string(members[k].size()),
                   assumed ? "unknown" : gb(lv.group_downlink_gbps[k]),
                   assumed ? "unknown" : gb(lv.group_uplink_gbps[k]),
                   some(members[k], verbose > 0 ? 0 : 64)});
    }
    out << text_table(r);
  }
  out << "\nlocality levels (innermost first):\n";
  std::vector<std::vector<std::string>> lr = {{"LEVEL", "GROUPS", "LATENCY"}};
  for (const LocalityLevel& lv : f.levels) {
    char lat[32];
    std::snprintf(lat, sizeof lat, "%.3g us", lv.latency_us);
    lr.push_back({lv.name, std::to_string(lv.group_uplink_gbps.size()), lat});
  }
  out << text_table(lr);

  out << "\nrails: ";
  if (f.rail_optimized) {
    out << f.rails
        << " (rail-optimized: NIC k of every host in a leaf group reaches the same switch)\n";
  } else {
    out << "none detected\n";
  }
  if (!f.nvlink_domains.empty()) {
    out << "\nNVLink domains:\n";
    for (const NvlinkDomain& d : f.nvlink_domains) {
      std::vector<std::string> names;
      for (std::uint32_t h : d.hosts) names.push_back(f.hosts[h].name);
      out << "  " << d.name << ": " << d.hosts.size() << " hosts (" << some(names, 64) << ")";
      if (d.gpu_bandwidth > 0) out << ", " << gb(d.gpu_bandwidth) << " per GPU";
      out << "\n";
    }
  }
  std::vector<std::string> excluded, degraded;
  for (const HostInfo& h : f.hosts) {
    if (h.excluded) excluded.push_back(h.name);
    if (h.degraded < 1.0) degraded.push_back(h.name);
  }
  if (!excluded.empty()) out << "\nexcluded hosts: " << some(excluded, 120) << "\n";
  if (!degraded.empty()) out << "degraded hosts: " << some(degraded, 120) << "\n";
  if (!f.node_types.empty()) {
    out << "\nnode types:\n";
    for (const NodeType& t : f.node_types) {
      std::size_t n = 0;
      for (const HostInfo& h : f.hosts) n += h.node_type == t.name ? 1 : 0;
      out << "  " << t.name << ": " << n << " hosts, capture " << t.capture;
      if (t.gpus >= 0) out << ", " << t.gpus << " GPUs";
      out << "\n";
    }
  }
  out << "\nanomalies: " << (f.anomalies.empty() ? "none" : std::to_string(f.anomalies.size()))
      << "\n";
  std::size_t shown = 0;
  for (const Anomaly& a : f.anomalies) {
    if (verbose == 0 && shown++ == 30) {
      out << "  ... " << f.anomalies.size() - 30 << " more (-v shows all)\n";
      break;
    }
    out << "  [" << a.kind << "] " << a.message << "\n";
  }
  if (!f.notes.empty()) {
    out << "\nnotes:\n";
    for (const std::string& n : f.notes) out << "  " << n << "\n";
  }
  return out.str();
}

}  // namespace

void add_fabric(CLI::App& app, Common& common) {
  auto opt = std::make_shared<FabricOptions>();
  auto* sub = app.add_subcommand(
      "fabric",
      "Import a cluster fabric (ibnetdiscover dump, Slurm topology.conf, TOML description or "
      "topo-aware JSON; recognized from the content) and show its tiers, leaf groups, rails and "
      "anomalies, or write it as a Slurm topology.conf (tree or block), JSON or DOT");
  auto* in =
      sub->add_option("-i,--input", opt->input, "The fabric file (gzipped or not)")->required();
  add_input_format_option(*sub, opt->input_format, topology::InputKind::kFabric, "the -i file")
      ->needs(in);
  // --guid-map as `map` spells it (and guid_map in topo-aware.toml); --map kept for scripts.
  sub->add_option("--map,--guid-map", opt->guid_map,
                  "GUID-to-hostname map for an ibnetdiscover dump (\"H-<guid> name\" or "
                  "\"0x<guid> name\" per line)");
  sub->add_option("--of", opt->format, "Output format")
      ->check(CLI::IsMember({"text", "json", "slurm-tree", "slurm-block", "dot"}))
      ->capture_default_str();
  sub->add_option("-o,--output", opt->output, "Write to FILE instead of stdout");
  sub->add_option("--slurm-version", opt->slurm_version,
                  "The Slurm release the topology.conf is for (--of slurm-block: BlockSizes only "
                  "from 24.05, no topology/block before 23.11); default: the installed Slurm's "
                  "(scontrol, slurmd, srun or slurmctld -V), else 24.05 and later")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            return topology::parse_slurm_release(v)
                       ? std::string()
                       : "\"" + v + "\" is not a Slurm release (MAJOR.MINOR, e.g. 24.05)";
          },
          "MAJOR.MINOR"));
  sub->callback([opt, &common] {
    topology::Fabric f = topology::load_fabric(
        opt->input, opt->guid_map,
        topology::parse_input_format(opt->input_format, topology::InputKind::kFabric, "--format"));
    std::string text;
    if (opt->format == "json") {
      text = topology::fabric_to_json(f);
    } else if (opt->format == "slurm-tree") {
      text = topology::to_slurm_tree(f);
    } else if (opt->format == "slurm-block") {
      const auto [release, origin] = slurm_release_for(opt->slurm_version);
      text = topology::to_slurm_block(f, release, origin);
    } else if (opt->format == "dot") {
      text = topology::fabric_to_dot(f);
    } else {
      text = fabric_to_text(f, common.verbose);
    }
    write_output(opt->output, text);
  });
}

}  // namespace topoaware::cli
