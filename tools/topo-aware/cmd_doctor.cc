// `topo-aware doctor`: check this node (or a sysfs snapshot, or a capture) for degraded links,
// downtrained PCIe, wrong NIC affinity, ACS redirect, NVLink lanes down and missing devices;
// print a table or JSON, keep a per-host report in a health directory, and, as a Slurm
// HealthCheckProgram (--slurm), drain the node on a critical finding. Exit 0 healthy, 3 degraded
// (any warning or critical finding), 1 bad input or a failed drain, 2 usage.
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli.h"
#include "node_input.h"
#include "plugin_file.h"
#include "slurm_node.h"
#include "text_table.h"
#include "topoaware/topology/doctor.h"
#include "topoaware/topology/doctor_source.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/nvml_source.h"

namespace topoaware::cli {
namespace {

struct DoctorOptions {
  std::string input, input_format, fsroot, compare, format = "text", output, health_dir, node;
  std::string scontrol = "scontrol";
  std::string spank;  // doctor --spank [SO]: the plugin file, empty for the one plugstack.conf names
  bool slurm = false, resume = false;
};

// SOURCE_DATE_EPOCH (the reproducible-builds convention) pins the report's time for tests.
std::int64_t now() {
  if (const char* e = std::getenv("SOURCE_DATE_EPOCH"); e != nullptr && *e != '\0') {
    char* end = nullptr;
    long long v = std::strtoll(e, &end, 10);
    if (end != e && *end == '\0' && v >= 0) return v;
  }
  return static_cast<std::int64_t>(std::time(nullptr));
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string report_to_text(const topology::HealthReport& r) {
  std::ostringstream out;
  out << "node: " << (r.host.empty() ? "(unnamed)" : r.host) << "  source: " << r.source
      << "  status: " << r.status() << "\n\n";
  std::vector<std::vector<std::string>> rows = {{"CHECK", "STATUS", "EXAMINED", "NOTE"}};
  for (const auto& c : r.checks) {
    rows.push_back({c.id, std::string(topology::to_string(c.status)),
                    c.status == topology::CheckStatus::kSkipped ? "-" : std::to_string(c.examined),
                    c.note.empty() ? "-" : c.note});
  }
  out << text_table(rows) << "\n";
  if (r.findings.empty()) {
    out << "no findings\n";
  } else {
    out << r.findings.size() << (r.findings.size() == 1 ? " finding" : " findings") << "\n";
    for (const auto& f : r.findings) {
      std::string device = f.device;
      if (f.port >= 0 && f.kind == "port") device += " port " + std::to_string(f.port);
      if (!f.busid.empty() && f.busid != f.device) device += " (" + f.busid + ")";
      out << "  " << upper(topology::to_string(f.severity)) << "  " << f.check << "  " << device
          << ": " << f.measured << ", expected " << f.expected << "\n";
      if (!f.affects.empty() && !(f.affects.size() == 1 && f.affects[0] == f.device)) {
        std::string list;
        for (const auto& a : f.affects) list += (list.empty() ? "" : ", ") + a;
        out << "      affects " << list << "\n";
      }
      out << "      -> " << f.action << "\n";
    }
  }
  if (!r.affinity.empty()) {
    out << "\n";
    std::vector<std::vector<std::string>> aff = {
        {"GPU", "BUSID", "NEAREST RDMA NIC", "PATH", "GB/s"}};
    for (const auto& a : r.affinity) {
      std::string nics;
      for (const auto& n : a.nics) nics += (nics.empty() ? "" : ",") + n;
      aff.push_back({a.gpu, a.busid, nics.empty() ? "-" : nics, a.path.empty() ? "-" : a.path,
                     a.path.empty() ? "-" : figure(a.gbps)});
    }
    out << text_table(aff);
  }
  if (!r.notes.empty()) {
    out << "\nnotes:\n";
    for (const auto& n : r.notes) out << "  - " << n << "\n";
  }
  return out.str();
}

int run(const DoctorOptions& o, bool quiet) {
  if ((o.slurm || !o.health_dir.empty()) && !o.input.empty() && o.node.empty()) {
    throw UsageError("doctor: -i describes a capture, not a node: name the host with --node");
  }
  topology::NodeTopology node;
  topology::HealthFacts facts;
  if (!o.input.empty()) {
    node = topology::load_node_file(o.input);
    facts = topology::facts_from_capture(node);
  } else {
    node = load_node(o.input, o.input_format, o.fsroot);
    const std::string root = o.fsroot.empty() ? "/" : o.fsroot;
    // With a fake root the real NVML describes another machine: NVLink is not read there.
    const topology::NvmlApi* nvml = o.fsroot.empty() ? topology::load_nvml() : nullptr;
    facts = topology::read_health_facts(node, root, nvml);
    if (!o.fsroot.empty())
      facts.why_no_nvlink = "not read with --fsroot (NVML describes this machine)";
  }
  std::unique_ptr<topology::NodeTopology> compare;
  if (!o.compare.empty()) {
    compare = std::make_unique<topology::NodeTopology>(topology::load_node_file(o.compare));
  }
  if (o.slurm || !o.health_dir.empty() || !o.node.empty()) {
    node.hostname = slurm_node_name(o.node, node.hostname);
  }
  topology::DoctorOptions d;
  d.compare = compare.get();
  d.now = now();
  std::optional<topology::HealthReport> previous;
  std::vector<std::string> extra_notes;
  if (!o.health_dir.empty()) {
    try {
      previous = topology::read_health_report(o.health_dir, node.hostname);
    } catch (const topology::Error& e) {
      extra_notes.push_back(std::string("doctor: previous report ignored: ") + e.what());
    }
    if (previous) d.previous = &*previous;
  }
  topology::HealthReport report = topology::diagnose(node, facts, d);
  for (auto& n : extra_notes) report.notes.push_back(std::move(n));
  if (!o.health_dir.empty()) topology::write_health_report(o.health_dir, report);

  int rc = report.worst() == topology::Severity::kOk ? 0 : 3;
  std::string slurm_line;
  if (o.slurm) {
    SlurmAction a = apply_to_slurm(report, node.hostname, o.scontrol, o.resume);
    slurm_line = "slurm: " + a.did;
    if (a.failed) rc = 1;
  }
  write_output(o.output, o.format == "json" ? topology::health_report_to_json(report)
                                            : report_to_text(report));
  if (!slurm_line.empty() && (!quiet || rc == 1)) std::cerr << "topo-aware: " << slurm_line << "\n";
  return rc;
}

}  // namespace

void add_doctor(CLI::App& app, Common& common) {
  auto opt = std::make_shared<DoctorOptions>();
  auto* sub = app.add_subcommand(
      "doctor",
      "Check this node for degraded links, downtrained PCIe, wrong NIC affinity, ACS redirect, "
      "NVLink lanes down and missing devices");
  sub->footer(
      "Without -i, checks this machine (or the sysfs tree of --fsroot). With -i FILE (hwloc or\n"
      "NCCL XML) only the checks a capture supports run; the others say why they were skipped.\n"
      "--slurm acts as a Slurm HealthCheckProgram: a critical finding drains the node\n"
      "(scontrol update nodename=NODE state=drain reason=\"topo-aware: ...\"); a node drained or\n"
      "down for another reason is left alone; --resume also resumes a node topo-aware drained\n"
      "once it is healthy again. Node name: --node, else SLURMD_NODENAME, else the short host\n"
      "name. Checks and thresholds: docs/doctor.md.\n"
      "--spank [SO] checks a SPANK plugin file instead: the Slurm release it was built for\n"
      "against the one installed here (Slurm loads it only where major.minor match);\n"
      "0 it loads, 3 it does not or no Slurm answers (docs/install.md).\n"
      "Exit codes: 0 healthy, 3 degraded (a warning or critical finding), 1 bad input or a\n"
      "failed drain, 2 usage.");
  add_node_input_options(*sub, opt->input, opt->input_format, opt->fsroot);
  sub->add_option("--compare", opt->compare,
                  "The node type's capture (hwloc or NCCL XML): report a GPU, NIC or NVLink "
                  "missing against it")
      ->type_name("FILE");
  sub->add_option("--of", opt->format, "Output format")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  sub->add_option("-o,--output", opt->output, "Write to FILE instead of stdout")->type_name("FILE");
  sub->add_option("--health-dir", opt->health_dir,
                  "Also write the report to DIR/<node>.json (atomically); the previous one there "
                  "gives the error counters' increase since the last run")
      ->type_name("DIR");
  sub->add_flag("--slurm", opt->slurm,
                "Act as a Slurm HealthCheckProgram: drain this node on a critical finding");
  sub->add_flag("--resume", opt->resume,
                "With --slurm: resume the node when healthy, if topo-aware drained it");
  sub->add_option("--node", opt->node, "Slurm node name (default: SLURMD_NODENAME, hostname)")
      ->type_name("NAME");
  sub->add_option("--scontrol", opt->scontrol, "The scontrol to run (a path, or a PATH name)")
      ->type_name("PATH")
      ->capture_default_str();
  auto* spank = sub->add_option("--spank", opt->spank,
                                "Check a SPANK plugin file instead of the node: built for the "
                                "Slurm release installed here or not (default: the file "
                                "plugstack.conf names, else where this build installs it)")
                    ->expected(0, 1)
                    ->type_name("[SO]");
  sub->callback([opt, &common, spank] {
    if (spank->count() > 0) {
      if (opt->slurm || !opt->input.empty() || !opt->health_dir.empty()) {
        throw UsageError("doctor: --spank checks a plugin file, not the node: it takes no -i, "
                         "--slurm or --health-dir");
      }
      int rc = doctor_spank(opt->spank, TOPOAWARE_INSTALLED_SPANK, opt->format, opt->output);
      if (rc != 0) throw Exit{rc};
      return;
    }
    if (opt->resume && !opt->slurm) throw UsageError("doctor: --resume needs --slurm");
    int rc = run(*opt, common.quiet);
    if (rc != 0) throw Exit{rc};
  });
}

}  // namespace topoaware::cli
