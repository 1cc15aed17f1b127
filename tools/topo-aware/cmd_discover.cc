// `topo-aware discover`: one node's GPUs, NICs, CPUs and the paths between them, from this
// machine or from a file, as a table for people or as JSON / NCCL XML / DOT for programs.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "node_input.h"
#include "text_table.h"
#include "topoaware/topology/node_io.h"
#include "topoaware/topology/paths.h"

namespace topoaware::cli {
namespace {

// "0-23,48-71": how people read CPU lists (as taskset and numactl print them).
std::string ranges(const std::vector<std::uint32_t>& pus) {
  std::string out = cpu_ranges(pus);
  return out.empty() ? "-" : out;
}

std::string or_dash(const std::string& s) { return s.empty() ? "-" : s; }
std::string num_or_dash(int v) { return v >= 0 ? std::to_string(v) : "-"; }

std::string plural(std::size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string nic_label(const topology::Vertex& v) { return v.name.empty() ? v.busid : v.name; }

std::string node_to_text(const topology::NodeTopology& node) {
  using namespace topology;
  const Graph& g = node.graph;
  std::ostringstream out;
  out << "node: " << (node.hostname.empty() ? "(unnamed)" : node.hostname)
      << "  source: " << node.source << "\n\n";

  std::vector<VertexId> gpus = node.gpus();
  std::vector<GpuLocality> loc = gpu_locality(node);
  out << plural(gpus.size(), "GPU", "GPUs") << " found\n";
  if (!gpus.empty()) {
    std::vector<std::vector<std::string>> rows = {
        {"GPU", "BUSID", "NUMA", "NEAREST NIC", "PATH", "GB/s", "NVLINK", "LOCAL CPUS"}};
    for (const GpuLocality& l : loc) {
      const Vertex& v = g.vertex(l.gpu);
      std::string nic = "-", path = "-", bw = "-";
      if (!l.nearest_nics.empty()) {
        nic = nic_label(g.vertex(l.nearest_nics.front()));
        if (l.nearest_nics.size() > 1)
          nic += " (+" + std::to_string(l.nearest_nics.size() - 1) + ")";
        path = std::string(to_string(l.path_to_nic));
        bw = figure(l.bandwidth_to_nic);
      }
      int lanes = 0;
      for (LinkId id : g.links_of(l.gpu)) {
        const Link& k = g.link(id);
        if (k.kind == LinkKind::kNvLink && k.a != k.b) lanes += k.count;
      }
      // hwloc names a GPU after its CUDA/NVML device; one without a driver has no name.
      rows.push_back({or_dash(v.name), v.busid, num_or_dash(l.numa), nic, path, bw,
                      lanes > 0 ? std::to_string(lanes) + " lanes" : "-", ranges(l.local_pus)});
    }
    out << text_table(rows);
  }
  out << "\n";

  std::vector<VertexId> nics = node.nics();
  // Only a live look can say a machine has no RDMA device; a file may just not list it (AWS's
  // static p5 file gives its 32 EFA as bare bus ids).
  bool live = node.source.find("live") != std::string::npos || node.source.rfind("sysfs", 0) == 0;
  if (nics.empty()) {
    out << "0 NICs found" << (live ? " (no RDMA devices)" : "") << "\n";
  } else {
    // Live discovery knows which ports verbs reported (they carry a link layer); files do not.
    bool rdma = false;
    for (VertexId id : nics) {
      for (const NetPort& p : g.vertex(id).nic.ports) rdma |= !p.link_layer.empty() && p.port >= 0;
    }
    out << plural(nics.size(), "NIC", "NICs") << " found"
        << (live && !rdma ? " (no RDMA devices)" : "") << "\n";
    std::vector<std::vector<std::string>> rows = {
        {"NIC", "BUSID", "NUMA", "SPEED", "PORTS", "KIND"}};
    for (VertexId id : nics) {
      const Vertex& v = g.vertex(id);
      double mbps = -1;
      std::string ports;
      for (const NetPort& p : v.nic.ports) {
        mbps = std::max(mbps, p.speed_mbps);
        if (!ports.empty()) ports += ",";
        ports += p.name;
        if (!p.state.empty()) ports += "(" + p.state + ")";
      }
      std::string kind = v.nic.virtual_nic ? "virtual" : or_dash(v.pci.pci_class);
      rows.push_back({or_dash(v.name), or_dash(v.busid), num_or_dash(v.numa),
                      mbps > 0 ? figure(mbps / 1000) + " Gb/s" : "-", or_dash(ports), kind});
    }
    out << text_table(rows);
  }
  out << "\n";

  std::vector<VertexId> cpus = node.cpus();
  out << plural(cpus.size(), "CPU/NUMA domain", "CPU/NUMA domains") << "\n";
  if (!cpus.empty()) {
    std::vector<std::vector<std::string>> rows = {
        {"CPU", "NUMA", "PUS", "ARCH", "VENDOR", "FAM/MODEL"}};
    for (VertexId id : cpus) {
      const Vertex& v = g.vertex(id);
      rows.push_back({v.name, num_or_dash(v.numa), ranges(v.cpu.pus), or_dash(v.cpu.arch),
                      or_dash(v.cpu.vendor),
                      num_or_dash(v.cpu.family) + "/" + num_or_dash(v.cpu.model)});
    }
    out << text_table(rows);
  }
  if (!node.notes.empty()) {
    out << "\nnotes:\n";
    for (const std::string& n : node.notes) out << "  - " << n << "\n";
  }
  return out.str();
}

}  // namespace

void add_discover(CLI::App& app, Common&) {
  struct Options {
    std::string input, input_format, fsroot, format = "text", output;
  };
  auto opt = std::make_shared<Options>();
  auto* sub = app.add_subcommand(
      "discover",
      "Describe one node: GPUs, NICs, CPUs, PCIe tree, NVLink, and each GPU's nearest NIC");
  sub->footer(
      "Without -i, discovers this machine (hwloc, NVML and RDMA where present).\n"
      "-i takes hwloc XML (lstopo --of xml) or NCCL topology XML, gzipped or not; the format is\n"
      "recognized from the content (--format to say it). A shell prompt line saved before or\n"
      "after the data is skipped, with a note.\n"
      "Exit codes: 0 ok, 1 bad input, 2 usage.");
  add_node_input_options(*sub, opt->input, opt->input_format, opt->fsroot);
  sub->add_option("--of", opt->format, "Output format")
      ->check(CLI::IsMember({"text", "json", "nccl-xml", "dot"}))
      ->capture_default_str();
  sub->add_option("-o,--output", opt->output, "Write to FILE instead of stdout")->type_name("FILE");
  sub->callback([opt] {
    topology::NodeTopology node = load_node(opt->input, opt->input_format, opt->fsroot);
    std::string text;
    if (opt->format == "json") {
      text = topology::node_to_json(node);
    } else if (opt->format == "nccl-xml") {
      text = topology::node_to_nccl_xml(node);
    } else if (opt->format == "dot") {
      text = topology::node_to_dot(node);
    } else {
      text = node_to_text(node);
    }
    write_output(opt->output, text);
  });
}

}  // namespace topoaware::cli
