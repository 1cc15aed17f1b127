// Helpers for the fabric tests: temporary files and small queries on a loaded Fabric.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <stdexcept>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "topoaware/topology/error.h"
#include "topoaware/topology/fabric_io.h"

namespace topoaware::test {

// Writes `text` to a fresh file under the test temp dir and returns its path.
inline std::string write_temp(const std::string& name, const std::string& text) {
  // Per process: ctest runs every test as its own process, several at once.
  std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                              ("topoaware-fabric-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::path p = dir / name;
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
  return p.string();
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline std::size_t switch_count(const topology::Fabric& f) {
  return f.graph.of_kind(topology::VertexKind::kSwitch).size();
}

inline int tier_of(const topology::Fabric& f, const std::string& sw) {
  topology::VertexId v = f.graph.find_name(topology::VertexKind::kSwitch, sw);
  return v.valid() ? f.graph.vertex(v).sw.tier : -100;
}

// Leaf switch name -> names of the hosts attached to it.
inline std::map<std::string, std::set<std::string>> leaf_membership(const topology::Fabric& f) {
  std::map<std::string, std::set<std::string>> out;
  for (const topology::HostInfo& h : f.hosts) {
    for (topology::VertexId s : h.leaves) out[f.graph.vertex(s).name].insert(h.name);
  }
  return out;
}

// `name` by pointer, not as a std::string: a temporary bound to a reference parameter of a
// function that returns a reference is GCC 13+'s -Wdangling-reference, an error under -Werror
// in `const HostInfo& h = host(f, "n1")` although the result refers into `f`.
inline const topology::HostInfo& host(const topology::Fabric& f, const char* name) {
  std::int64_t i = f.find_host(name);
  if (i < 0) throw std::runtime_error(std::string("no host ") + name);
  return f.hosts[static_cast<std::size_t>(i)];
}

inline const topology::LocalityLevel* level(const topology::Fabric& f, const std::string& name) {
  for (const auto& l : f.levels) {
    if (l.name == name) return &l;
  }
  return nullptr;
}

// Runs load_fabric and returns the error it throws (or fails the test).
inline topology::Error load_error(const std::string& path, const std::string& map = {}) {
  try {
    topology::load_fabric(path, map);
  } catch (const topology::Error& e) {
    return e;
  }
  ADD_FAILURE() << path << " loaded without error";
  return topology::Error(topology::ErrorCode::kBadInput, {}, "none");
}

}  // namespace topoaware::test
