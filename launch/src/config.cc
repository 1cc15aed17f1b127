#include "topoaware/launch/config.h"

#include <fnmatch.h>
#include <toml++/toml.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <utility>

#include "topoaware/mapper/layout.h"
#include "toml_file.h"
#include "topoaware/topology/error.h"

namespace topoaware::launch {
namespace {

using topology::Error;
using topology::ErrorCode;

constexpr const char* kKeys =
    "fabric, fabric_format, guid_map, job_dir, policy, mode, shadow_log, gpu_binding, "
    "overwrite_user_env, bind_cpus, judge_allocation, master_port, launcher, ids, health_dir, "
    "doctor, doctor_fsroot, discover_fsroot, capture, oversubscription, routing, calibration";

bool parse_bool(const std::string& value, const std::string& where, const std::string& key) {
  if (value == "true" || value == "yes" || value == "1") return true;
  if (value == "false" || value == "no" || value == "0") return false;
  throw Error(ErrorCode::kBadInput, where, key + " must be true or false, not '" + value + "'");
}

// Paths in a config file are relative to that file, so a lab or a test can move as a whole.
std::string resolve(const std::string& value, const std::string& base_file) {
  if (value.empty() || base_file.empty() || value.front() == '/') return value;
  return (std::filesystem::path(base_file).parent_path() / value).lexically_normal().string();
}

std::string where_of(const toml::node& node, const std::string& path) {
  return topology::where(path, static_cast<long>(node.source().begin.line));
}

std::string scalar_text(const toml::node& node, const std::string& key, const std::string& where) {
  if (auto s = node.value<std::string>()) return *s;
  if (node.is_boolean()) return *node.value<bool>() ? "true" : "false";
  if (node.is_integer()) return std::to_string(*node.value<std::int64_t>());
  throw Error(ErrorCode::kBadInput, where, key + " must be a string, boolean or integer");
}

void load_file(Config& config, const std::string& path) {
  const toml::table table = internal::parse_toml_file(path, "config file not found (plugstack config=)");
  config.path = path;
  for (const auto& [key_node, value] : table) {
    const std::string key(key_node.str());
    const std::string where = where_of(value, path);
    if (key == "node") {
      const auto* array = value.as_array();
      if (array == nullptr) {
        throw Error(ErrorCode::kBadInput, where, "node must be an array of tables ([[node]])");
      }
      for (const auto& entry : *array) {
        const auto* t = entry.as_table();
        const std::string ewhere = where_of(entry, path);
        if (t == nullptr) throw Error(ErrorCode::kBadInput, ewhere, "[[node]] must be a table");
        NodeCapture capture;
        for (const auto& [k, v] : *t) {
          const std::string name(k.str());
          const std::string vwhere = where_of(v, path);
          if (name == "hosts") {
            capture.hosts = scalar_text(v, name, vwhere);
          } else if (name == "capture") {
            capture.capture = resolve(scalar_text(v, name, vwhere), path);
          } else {
            throw Error(ErrorCode::kBadInput, vwhere,
                        "unknown key '" + name + "' in [[node]] (known: hosts, capture)");
          }
        }
        if (capture.hosts.empty() || capture.capture.empty()) {
          throw Error(ErrorCode::kBadInput, ewhere, "[[node]] needs both hosts and capture");
        }
        config.nodes.push_back(std::move(capture));
      }
      continue;
    }
    if (key == "oversubscription" && value.is_array()) {
      // oversubscription = [1, 2]: the same setting as the plugstack's oversubscription=1,2.
      std::string text;
      for (const auto& x : *value.as_array()) {
        std::string v;
        if (x.is_integer()) {
          v = std::to_string(*x.value<std::int64_t>());
        } else if (x.is_floating_point()) {
          v = std::to_string(*x.value<double>());
        } else {
          throw Error(ErrorCode::kBadInput, where_of(x, path),
                      "oversubscription must be an array of numbers, e.g. [1, 2]");
        }
        text += (text.empty() ? "" : ",") + v;
      }
      apply_setting(config, key, text, where);
      continue;
    }
    if (value.is_table() || value.is_array()) {
      throw Error(ErrorCode::kBadInput, where, "unknown table '" + key + "' (known: [[node]])");
    }
    std::string text = scalar_text(value, key, where);
    if (key == "fabric" || key == "guid_map" || key == "job_dir" || key == "capture" ||
        key == "health_dir" || key == "doctor_fsroot" || key == "discover_fsroot" ||
        key == "shadow_log" || key == "calibration") {
      text = resolve(text, path);
    }
    apply_setting(config, key, text, where);
  }
}

}  // namespace

void apply_setting(Config& config, const std::string& key, const std::string& value,
                   const std::string& where) {
  if (key == "fabric") {
    config.fabric = value;
  } else if (key == "fabric_format") {
    config.fabric_format = topology::parse_input_format(value, topology::InputKind::kFabric,
                                                        where);
  } else if (key == "capture_format") {
    config.capture_format = topology::parse_input_format(value, topology::InputKind::kNode, where);
  } else if (key == "guid_map") {
    config.guid_map = value;
  } else if (key == "job_dir") {
    if (value.empty() || value.front() != '/') {
      throw Error(ErrorCode::kBadInput, where, "job_dir must be an absolute path");
    }
    config.job_dir = value;
  } else if (key == "policy") {
    if (value == "fail-open") {
      config.policy = Policy::kFailOpen;
    } else if (value == "fail-closed") {
      config.policy = Policy::kFailClosed;
    } else {
      throw Error(ErrorCode::kBadInput, where,
                  "policy must be fail-open or fail-closed, not '" + value + "'");
    }
  } else if (key == "mode") {
    if (value == "apply") {
      config.mode = Mode::kApply;
    } else if (value == "shadow") {
      config.mode = Mode::kShadow;
    } else {
      throw Error(ErrorCode::kBadInput, where, "mode must be apply or shadow, not '" + value + "'");
    }
  } else if (key == "shadow_log") {
    if (!value.empty() && value.front() != '/') {
      throw Error(ErrorCode::kBadInput, where, "shadow_log must be an absolute path");
    }
    config.shadow_log = value;
  } else if (key == "gpu_binding") {
    if (value == "local-rank") {
      config.gpu_binding = GpuBinding::kLocalRank;
    } else if (value == "one-gpu") {
      config.gpu_binding = GpuBinding::kOneGpu;
    } else {
      throw Error(ErrorCode::kBadInput, where,
                  "gpu_binding must be local-rank or one-gpu, not '" + value + "'");
    }
  } else if (key == "overwrite_user_env") {
    config.overwrite_user_env = parse_bool(value, where, key);
  } else if (key == "bind_cpus") {
    config.bind_cpus = parse_bool(value, where, key);
  } else if (key == "judge_allocation") {
    config.judge_allocation = parse_bool(value, where, key);
  } else if (key == "master_port") {
    if (!value.empty()) {
      char* end = nullptr;
      long port = std::strtol(value.c_str(), &end, 10);
      if (*end != '\0' || port < 1 || port > 65535) {
        throw Error(ErrorCode::kBadInput, where,
                    "master_port must be 1-65535, not '" + value + "'");
      }
    }
    config.master_port = value;
  } else if (key == "health_dir") {
    config.health_dir = value;
  } else if (key == "doctor") {
    if (value != "off" && value != "warn") {
      throw Error(ErrorCode::kBadInput, where, "doctor must be off or warn, not '" + value + "'");
    }
    config.doctor_warn = value == "warn";
  } else if (key == "doctor_fsroot") {
    if (value.empty() || value.front() != '/') {
      throw Error(ErrorCode::kBadInput, where, "doctor_fsroot must be an absolute path");
    }
    config.doctor_fsroot = value;
  } else if (key == "discover_fsroot") {
    if (value.empty() || value.front() != '/') {
      throw Error(ErrorCode::kBadInput, where, "discover_fsroot must be an absolute path");
    }
    config.discover_fsroot = value;
  } else if (key == "launcher" || key == "ids") {
    try {
      if (key == "launcher") {
        config.launcher = mapper::parse_launcher(value);
      } else {
        config.ids = mapper::parse_ids(value);
      }
    } catch (const mapper::Error& e) {
      throw Error(ErrorCode::kBadInput, where, e.what());
    }
  } else if (key == "capture") {
    config.nodes.push_back({"*", value});
  } else if (key == "oversubscription") {
    config.oversubscription =
        value.empty() ? std::vector<double>{} : topology::parse_oversubscription(value, where);
  } else if (key == "routing") {
    config.routing = topology::parse_routing(value, where);
  } else if (key == "calibration") {
    if (!value.empty() && value.front() != '/') {
      throw Error(ErrorCode::kBadInput, where,
                  "calibration must be an absolute path (or relative to the config file), not '" +
                      value + "'");
    }
    config.calibration = value;
  } else {
    throw Error(ErrorCode::kBadInput, where,
                "unknown key '" + key + "' (known: " + kKeys + ", [[node]])");
  }
}

Config parse_plugstack(const std::vector<std::string>& args) {
  Config config;
  std::vector<std::pair<std::string, std::string>> overrides;
  for (const auto& arg : args) {
    auto eq = arg.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw Error(ErrorCode::kBadInput, "plugstack argument '" + arg + "'",
                  "expected key=value (config=PATH or a setting)");
    }
    overrides.emplace_back(arg.substr(0, eq), arg.substr(eq + 1));
  }
  // The policy on the plugstack line must hold even when the file is broken, so it is applied
  // before the file is read, and again after (the line wins).
  for (const auto& [key, value] : overrides) {
    if (key == "policy") apply_setting(config, key, value, "plugstack argument '" + key + "'");
  }
  for (const auto& [key, value] : overrides) {
    if (key == "config") load_file(config, value);
  }
  for (const auto& [key, value] : overrides) {
    if (key == "config") continue;
    apply_setting(config, key, value, "plugstack argument '" + key + "=" + value + "'");
  }
  return config;
}

std::string capture_for(const Config& config, const std::string& host) {
  for (const auto& node : config.nodes) {
    if (fnmatch(node.hosts.c_str(), host.c_str(), 0) == 0) return node.capture;
  }
  return {};
}

std::string capture_for(const Config& config, const topology::Fabric& fabric,
                        const std::string& host) {
  std::string capture = capture_for(config, host);
  std::int64_t index = fabric.find_host(host);
  if (!capture.empty() || index < 0) return capture;
  const std::string& type = fabric.hosts[static_cast<std::size_t>(index)].node_type;
  for (const auto& t : fabric.node_types) {
    // capture_path: resolved against the fabric file's folder (capture is as written, and srun
    // and slurmstepd run elsewhere).
    if (t.name == type && !t.capture.empty()) {
      capture = t.capture_path.empty() ? t.capture : t.capture_path;
    }
  }
  return capture;
}

const char* to_string(Policy policy) {
  return policy == Policy::kFailClosed ? "fail-closed" : "fail-open";
}
const char* to_string(Mode mode) { return mode == Mode::kShadow ? "shadow" : "apply"; }
const char* to_string(GpuBinding binding) {
  return binding == GpuBinding::kOneGpu ? "one-gpu" : "local-rank";
}

}  // namespace topoaware::launch
