// A SPANK plugin file as Slurm's plugin loader sees it, for `topo-aware doctor --spank`: the
// release it was built for (its plugin_version object, SLURM_VERSION_NUMBER of the headers it
// was compiled against), read from the ELF file itself. Never dlopen()ed: loading it would run
// its constructors and need the Slurm symbols only srun and slurmstepd carry.
//
// Slurm loads a plugin only where plugin_version & 0xffff00 equals its own release's
// (src/common/plugin.c): major.minor, the micro number ignored.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "topoaware/topology/fabric_io.h"

namespace topoaware::cli {

struct PluginFile {
  std::uint32_t plugin_version = 0;  // 0xMMmmuu
  topology::SlurmRelease release() const {
    return {static_cast<int>(plugin_version >> 16), static_cast<int>((plugin_version >> 8) & 0xff)};
  }
};

// From the bytes of a 64-bit little-endian ELF shared object (x86_64, aarch64); `name` stands
// for the file in errors. Throws topology::Error (kBadInput) for anything else, or for a file
// without a 4-byte plugin_version object in its dynamic symbols; every offset is bounds-checked.
PluginFile parse_plugin_file(std::string_view bytes, const std::string& name);
// The same for a file (at most 256 MiB); kNotFound when it does not exist.
PluginFile read_plugin_file(const std::string& path);

// The Slurm installed here, as its programs report it (`scontrol -V`, which needs the cluster's
// config; then `slurmd -V`, `srun -V`, `slurmctld -V`), with the command that said it; nullopt
// when none answers.
std::optional<std::pair<topology::SlurmRelease, std::string>> installed_slurm_release();

// Where plugstack.conf names the topo-aware plugin: the file (absolute, or joined to slurm.conf's
// PluginDir), the line that names it ("FILE:LINE"), and whether it is `required`.
struct PlugstackEntry {
  std::string plugin, line;
  bool required = false;
};
// Reads slurm.conf (SLURM_CONF, else /etc/slurm/slurm.conf) for PlugStackConfig (else
// plugstack.conf beside it) and that file, following its `include` globs one level deep, for a
// line naming a file called topo_aware*.so; nullopt when there is none.
std::optional<PlugstackEntry> plugin_in_plugstack();

// `topo-aware doctor --spank [SO]`: the release SO (else the plugin plugstack.conf names, else
// `installed`) was built for against the Slurm installed here, with a verdict; text or JSON
// (`format`) to `output`. Returns the exit code: 0 it loads here, 3 it does not (or no Slurm
// answers), and throws topology::Error for a file that cannot be read as a plugin.
int doctor_spank(const std::string& so, const std::string& installed, const std::string& format,
                 const std::string& output);

}  // namespace topoaware::cli
