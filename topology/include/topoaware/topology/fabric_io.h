// Fabric sources and exporters: ibnetdiscover dumps (+ GUID map), Slurm topology.conf (tree and
// block), the native TOML cluster description; out to Slurm topology.conf, JSON, DOT.
// Importers read files through input_format.h (gzip, BOM, CRLF, shell prompt lines) and take the
// format from the content unless told; errors name file:line.
#pragma once

#include <string>

#include "topoaware/topology/fabric.h"
#include "topoaware/topology/input_format.h"

namespace topoaware::topology {

// Loads and analyze()s a fabric; `guid_map` is an optional GUID-to-hostname map file. `format`
// kAuto detects it from the content; any other fabric format is used as given (a node format
// is an Error). Prompt lines skipped while reading are in Fabric::notes.
Fabric load_fabric(const std::string& path, const std::string& guid_map = {},
                   InputFormat format = InputFormat::kAuto);
// The same for a description held in memory (cleaned like a file); `name` stands for the path
// in errors and notes. No GUID map.
Fabric load_fabric_text(std::string text, const std::string& name,
                        InputFormat format = InputFormat::kAuto);

std::string to_slurm_tree(const Fabric& fabric);
std::string to_slurm_block(const Fabric& fabric);
std::string fabric_to_json(const Fabric& fabric);  // lossless enough to reload
std::string fabric_to_dot(const Fabric& fabric);

}  // namespace topoaware::topology
