// Node exporters: JSON (complete), NCCL topology XML (NCCL's exact dialect), Graphviz DOT.
#pragma once

#include <string>

#include "topoaware/topology/node.h"

namespace topoaware::topology {

std::string node_to_json(const NodeTopology& node);
// NCCL_TOPO_FILE dialect: no prolog, one start tag per line, no tabs, lowercase busids, full cpu
// and pci attributes, at most 256 elements (throws kLimit beyond).
std::string node_to_nccl_xml(const NodeTopology& node);
std::string node_to_dot(const NodeTopology& node);

}  // namespace topoaware::topology
