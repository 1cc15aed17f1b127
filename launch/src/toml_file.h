// One way the launch library opens a TOML file an admin writes (the plugin's configuration, the
// calibration file): missing is kNotFound naming the path and what it is, a syntax error is
// kBadInput naming path:line. Private to launch/src.
#pragma once

#include <toml++/toml.h>

#include <filesystem>
#include <string>
#include <system_error>

#include "topoaware/topology/error.h"

namespace topoaware::launch::internal {

// `what`: the message when the file is missing ("config file not found (plugstack config=)").
inline toml::table parse_toml_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw topology::Error(topology::ErrorCode::kNotFound, path, what);
  }
  try {
    return toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw topology::Error(topology::ErrorCode::kBadInput,
                          topology::where(path, static_cast<long>(e.source().begin.line)),
                          std::string(e.description()));
  }
}

}  // namespace topoaware::launch::internal
