// How `discover` and `nccl-topo` obtain a node: a file given with -i (hwloc or NCCL XML, told
// apart by content), or this machine, optionally seen through a fake sysfs root (--fsroot);
// and the two options that choose between them.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "cli.h"
#include "topoaware/topology/sources.h"

namespace topoaware::cli {

// -i, --format and --fsroot, worded the same in every command that reads a node (--fsroot
// excludes -i, and --format needs it).
inline void add_node_input_options(CLI::App& sub, std::string& input, std::string& format,
                                   std::string& fsroot) {
  auto* in = sub.add_option("-i,--input", input, "Read the node from FILE (hwloc or NCCL XML)")
                 ->type_name("FILE");
  add_input_format_option(sub, format, topology::InputKind::kNode, "the -i file")->needs(in);
  sub.add_option("--fsroot", fsroot, "Discover from a sysfs tree rooted at DIR (tests)")
      ->type_name("DIR")
      ->excludes(in);
}

inline topology::NodeTopology load_node(const std::string& input, const std::string& format,
                                        const std::string& fsroot) {
  if (!input.empty()) {
    return topology::load_node_file(
        input, topology::parse_input_format(format, topology::InputKind::kNode, "--format"));
  }
  topology::LiveOptions options;
  if (!fsroot.empty()) {
    options.fsroot = fsroot;
    // A fake tree describes its own machine; live hwloc would describe this one instead.
    options.use_hwloc = false;
  }
  return topology::discover_live(options);
}

}  // namespace topoaware::cli
