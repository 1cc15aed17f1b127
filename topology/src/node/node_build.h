// Shared by the node sources that build a graph from a description (hwloc XML, NCCL XML): the
// steps every one of them ends with, so each model of the socket interconnect is the same
// whichever file it came from. Not installed.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "topoaware/topology/node.h"
#include "topoaware/topology/paths.h"

namespace topoaware::topology {

// One kSmp link between every pair of CPU vertices, bandwidth from the first one's CPU model
// (the contract in paths.h).
inline void add_smp_links(NodeTopology& node) {
  std::vector<VertexId> cpus = node.cpus();
  for (std::size_t i = 0; i < cpus.size(); ++i) {
    for (std::size_t j = i + 1; j < cpus.size(); ++j) {
      Link l;
      l.a = cpus[i];
      l.b = cpus[j];
      l.kind = LinkKind::kSmp;
      l.bandwidth = smp_bandwidth(node.graph.vertex(cpus[i]).cpu);
      node.graph.add_link(std::move(l));
    }
  }
}

// The PCIe link from a tree child up to its parent, child first as the contract in paths.h says,
// so every source orders tree links alike.
inline LinkId add_pcie_uplink(Graph& graph, VertexId child, VertexId parent, double bandwidth) {
  Link l;
  l.a = child;
  l.b = parent;
  l.kind = LinkKind::kPcie;
  l.bandwidth = bandwidth;
  return graph.add_link(std::move(l));
}

}  // namespace topoaware::topology
