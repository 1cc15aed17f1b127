// Node exporters: JSON (complete), NCCL topology XML (NCCL's exact dialect), Graphviz DOT.
#pragma once

#include <string>

#include "topoaware/topology/node.h"

namespace topoaware::topology {

std::string node_to_json(const NodeTopology& node);
// NCCL_TOPO_FILE dialect: no prolog, one start tag per line, no tabs, lowercase busids, full cpu
// and pci attributes (as the source had them, empty values included). Only the PCI paths from
// a CPU to GPUs, NICs and NVSwitch functions are written, as NCCL's own dump keeps. Throws
// kLimit, naming the element, for what NCCL's loader would refuse or cut: more than 255
// elements (or too little room left for what NCCL detects), more than 32 children, 16
// attributes or 253-character values.
std::string node_to_nccl_xml(const NodeTopology& node);
std::string node_to_dot(const NodeTopology& node);

}  // namespace topoaware::topology
