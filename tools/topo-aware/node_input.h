// How `discover` and `nccl-topo` obtain a node: a file given with -i (hwloc or NCCL XML, told
// apart by content), or this machine, optionally seen through a fake sysfs root (--fsroot).
#pragma once

#include <string>

#include "topoaware/topology/sources.h"

namespace topoaware::cli {

inline topology::NodeTopology load_node(const std::string& input, const std::string& fsroot) {
  if (!input.empty()) return topology::load_node_file(input);
  topology::LiveOptions options;
  if (!fsroot.empty()) {
    options.fsroot = fsroot;
    // A fake tree describes its own machine; live hwloc would describe this one instead.
    options.use_hwloc = false;
  }
  return topology::discover_live(options);
}

}  // namespace topoaware::cli
