// Fabric sources and exporters: ibnetdiscover dumps (+ GUID map), Slurm topology.conf (tree and
// block), the native TOML cluster description, Alibaba's Lingjun topology CSV; out to Slurm
// topology.conf, JSON, DOT.
// Importers read files through input_format.h (gzip, BOM, CRLF, shell prompt lines) and take the
// format from the content unless told; errors name file:line.
#pragma once

#include <compare>
#include <optional>
#include <string>
#include <string_view>

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

// A Slurm release as its files and plugins follow it: major.minor (the micro number never
// changes a format). Ordered, so `release < SlurmRelease{24, 5}` reads as it says.
struct SlurmRelease {
  int major = 0;
  int minor = 0;
  auto operator<=>(const SlurmRelease&) const = default;
};
// "24.05", "23.11.4", scontrol's "slurm 23.11.4" or Debian's "slurm-wlm 22.05.8"; nullopt for
// anything else.
std::optional<SlurmRelease> parse_slurm_release(std::string_view text);
std::string slurm_release_name(SlurmRelease release);  // "23.11"

std::string to_slurm_tree(const Fabric& fabric);
// topology/block for `release`: BlockSizes only from 24.05, where it arrived (a 23.11 slurmctld
// refuses a file that has it); before 23.11 there is no topology/block, an Error. `origin` says
// where the release came from, for the file's header ("scontrol --version", "--slurm-version").
std::string to_slurm_block(const Fabric& fabric, SlurmRelease release = {24, 5},
                           const std::string& origin = {});
std::string fabric_to_json(const Fabric& fabric);  // lossless enough to reload
std::string fabric_to_dot(const Fabric& fabric);

}  // namespace topoaware::topology
