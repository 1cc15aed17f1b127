// `topo-aware nccl-topo`: write the NCCL_TOPO_FILE for a node (this machine, or a file given
// with -i) in the exact dialect NCCL's parser accepts.
#include <memory>
#include <string>

#include "cli.h"
#include "node_input.h"
#include "topoaware/topology/node_io.h"

namespace topoaware::cli {

void add_nccl_topo(CLI::App& app, Common&) {
  struct Options {
    std::string input, input_format, fsroot, output;
  };
  auto opt = std::make_shared<Options>();
  auto* sub =
      app.add_subcommand("nccl-topo", "Write NCCL topology XML (NCCL_TOPO_FILE) for a node");
  sub->footer(
      "Without -i, describes this machine. -i takes hwloc XML or NCCL topology XML.\n"
      "The output has no prolog, one tag per line, lowercase bus ids, and of the PCI tree only\n"
      "the paths to GPUs, NICs and NVSwitches. A node NCCL's loader could not take (over 255\n"
      "elements, 32 children, 16 attributes, 253-character values) is refused (exit 1) naming\n"
      "the element, rather than written for NCCL to abort on.\n"
      "Exit codes: 0 ok, 1 bad input, 2 usage.");
  add_node_input_options(*sub, opt->input, opt->input_format, opt->fsroot);
  sub->add_option("-o,--output", opt->output, "Write the XML to FILE ('-' for stdout)")
      ->type_name("OUT.xml")
      ->required();
  sub->callback([opt] {
    topology::NodeTopology node = load_node(opt->input, opt->input_format, opt->fsroot);
    write_output(opt->output, topology::node_to_nccl_xml(node));
  });
}

}  // namespace topoaware::cli
