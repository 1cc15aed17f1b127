// Fabric sources and exporters: ibnetdiscover dumps (+ GUID map), Slurm topology.conf (tree and
// block), the native TOML cluster description; out to Slurm topology.conf, JSON, DOT.
// Importers detect the format from content and report errors as file:line.
#pragma once

#include <string>

#include "topoaware/topology/fabric.h"

namespace topoaware::topology {

// Loads and analyze()s a fabric; `guid_map` is an optional GUID-to-hostname map file.
Fabric load_fabric(const std::string& path, const std::string& guid_map = {});

std::string to_slurm_tree(const Fabric& fabric);
std::string to_slurm_block(const Fabric& fabric);
std::string fabric_to_json(const Fabric& fabric);  // lossless enough to reload
std::string fabric_to_dot(const Fabric& fabric);

}  // namespace topoaware::topology
