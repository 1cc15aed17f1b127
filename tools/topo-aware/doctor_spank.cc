// `topo-aware doctor --spank`: does the SPANK plugin here load in the Slurm installed here
// (plugin_file.h)? Slurm loads a plugin only where plugin_version's major.minor is its own; with
// `required` in plugstack.conf a mismatch stops every srun, sbatch and salloc on the host.
#include <glob.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli.h"
#include "plugin_file.h"
#include "topoaware/topology/error.h"

namespace topoaware::cli {
namespace {

namespace fs = std::filesystem;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line.substr(0, line.find('#')));
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// The value of `key` (case-insensitive) in slurm.conf, or empty.
std::string conf_value(const std::string& conf, const std::string& key) {
  std::ifstream in(conf);
  for (std::string line; std::getline(in, line);) {
    for (const std::string& w : words(line)) {
      const auto eq = w.find('=');
      if (eq != std::string::npos && lower(w.substr(0, eq)) == lower(key)) return w.substr(eq + 1);
    }
  }
  return {};
}

std::optional<PlugstackEntry> scan(const std::string& file, const std::string& plugin_dir,
                                   int depth) {
  std::ifstream in(file);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    const std::vector<std::string> w = words(line);
    if (w.size() >= 2 && w[0] == "include" && depth < 2) {
      glob_t g{};
      if (::glob(w[1].c_str(), 0, nullptr, &g) == 0) {
        for (std::size_t i = 0; i < g.gl_pathc; ++i) {
          if (auto hit = scan(g.gl_pathv[i], plugin_dir, depth + 1)) {
            ::globfree(&g);
            return hit;
          }
        }
      }
      ::globfree(&g);
      continue;
    }
    if (w.size() < 2 || (w[0] != "required" && w[0] != "optional")) continue;
    if (fs::path(w[1]).filename().string().rfind("topo_aware", 0) != 0) continue;
    PlugstackEntry e;
    e.plugin = w[1];
    // A relative file is looked for in PluginDir's folders in turn, as Slurm does; the first
    // where it exists, else the first folder (the read then names the path it tried).
    if (fs::path(e.plugin).is_relative() && !plugin_dir.empty()) {
      std::string first;
      std::istringstream dirs(plugin_dir);
      for (std::string dir; std::getline(dirs, dir, ':');) {
        if (dir.empty()) continue;
        const std::string candidate = (fs::path(dir) / e.plugin).string();
        if (first.empty()) first = candidate;
        if (fs::exists(candidate)) {
          first = candidate;
          break;
        }
      }
      if (!first.empty()) e.plugin = first;
    }
    e.line = file + ":" + std::to_string(n);
    e.required = w[0] == "required";
    return e;
  }
  return std::nullopt;
}

std::string hex(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%06x", v);
  return buf;
}

}  // namespace

std::optional<PlugstackEntry> plugin_in_plugstack() {
  const char* env = std::getenv("SLURM_CONF");
  const std::string conf = env != nullptr && *env != '\0' ? env : "/etc/slurm/slurm.conf";
  std::string stack = conf_value(conf, "PlugStackConfig");
  if (stack.empty()) stack = (fs::path(conf).parent_path() / "plugstack.conf").string();
  return scan(stack, conf_value(conf, "PluginDir"), 0);
}

int doctor_spank(const std::string& so, const std::string& installed, const std::string& format,
                 const std::string& output) {
  std::string plugin = so, named_in = "the command line";
  std::optional<bool> required;  // known where plugstack.conf named it
  if (plugin.empty()) {
    if (auto hit = plugin_in_plugstack()) {
      plugin = hit->plugin;
      named_in = hit->line + (hit->required ? ", required" : ", optional");
      required = hit->required;
    } else if (!installed.empty() && fs::exists(installed)) {
      plugin = installed;
      named_in = "where this build installs it (no plugstack.conf line names topo_aware*.so)";
    } else {
      throw topology::Error(topology::ErrorCode::kNotFound, "doctor --spank",
                            "no plugin given, no plugstack.conf line names topo_aware*.so, and "
                            "none at " + installed + ": name it (doctor --spank FILE)");
    }
  }
  const PluginFile f = read_plugin_file(plugin);
  const auto here = installed_slurm_release();
  const std::string built = topology::slurm_release_name(f.release());
  const std::string installed_name = here ? topology::slurm_release_name(here->first) : "";
  std::string verdict, message;
  int rc = 3;
  if (!here) {
    verdict = "unknown";
    message = "no Slurm here answers (scontrol, slurmd, srun, slurmctld -V): run this where the "
              "plugin is to load";
  } else if (installed_name == built) {
    verdict = "ok";
    rc = 0;
    message = "Slurm " + installed_name + " loads it (plugin_version's major.minor is "
              "its own)";
  } else {
    verdict = "mismatch";
    message = "Slurm " + installed_name + " refuses it (\"Incompatible Slurm plugin " +
              plugin + " version (" + built + "." +
              std::to_string(f.plugin_version & 0xff) + ")\")" +
              (!required   ? "; with `required` in plugstack.conf every srun, sbatch and salloc "
                               "here fails, with `optional` --topo-aware is an unknown option"
               : *required ? ", and as `required` every srun, sbatch and salloc here fails"
                           : "; as `optional`, --topo-aware is an unknown option here") +
              ": install the build for " + installed_name +
              " (configured against its headers), or upgrade Slurm and the plugin together";
  }
  if (format == "json") {
    nlohmann::ordered_json j;
    j["plugin"] = plugin;
    j["named_in"] = named_in;
    j["plugin_version"] = hex(f.plugin_version);
    j["built_for"] = built;
    j["installed"] = here ? nlohmann::ordered_json(installed_name) : nullptr;
    j["installed_from"] = here ? nlohmann::ordered_json(here->second) : nullptr;
    j["verdict"] = verdict;
    j["message"] = message;
    write_output(output, j.dump(2) + "\n");
  } else {
    std::ostringstream out;
    out << "plugin     " << plugin << " (" << named_in << ")\n"
        << "built for  Slurm " << built << " (plugin_version " << hex(f.plugin_version)
        << ")\n"
        << "installed  "
        << (here ? "Slurm " + installed_name + " (" + here->second + ")" : "none found")
        << "\n"
        << "verdict    "
        << (verdict == "ok" ? "OK" : verdict == "mismatch" ? "MISMATCH" : "UNKNOWN") << ": "
        << message << "\n";
    write_output(output, out.str());
  }
  return rc;
}

}  // namespace topoaware::cli
