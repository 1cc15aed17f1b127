// One node's hardware: GPUs, NICs, CPUs/NUMA domains, the PCIe tree and NVLink, in one Graph.
//
// Every node source (live hwloc, hwloc XML, NVML, verbs + sysfs, vendor NCCL topology XML) fills
// a NodeTopology; every node exporter (JSON, NCCL XML, DOT) reads one. Roots of the tree are the
// kCpu vertices (one per NUMA domain, NCCL's <cpu>); PCI switches, GPUs, NICs hang below them
// through parent ids. NVLink and C2C are extra links; an NVSwitch fabric is one kNvSwitch vertex.
#pragma once

#include <string>
#include <vector>

#include "topoaware/topology/graph.h"

namespace topoaware::topology {

struct NodeTopology {
  Graph graph;
  std::string hostname;           // where known
  std::string source;             // "hwloc:live", "hwloc-xml:/path", "nccl-xml:/path", ...
  std::vector<std::string> notes; // degradations a reader should know ("NVML not found: ...")

  std::vector<VertexId> gpus() const { return graph.of_kind(VertexKind::kGpu); }
  std::vector<VertexId> nics() const { return graph.of_kind(VertexKind::kNic); }
  std::vector<VertexId> cpus() const { return graph.of_kind(VertexKind::kCpu); }
};

}  // namespace topoaware::topology
