// Digests of a step's inputs (digest.h).
#include "digest.h"

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "topoaware/topology/error.h"

#ifndef TOPOAWARE_VERSION
#define TOPOAWARE_VERSION "unknown"
#endif

namespace topoaware::spank {
namespace {

namespace topology = topoaware::topology;

// 64-bit FNV-1a: the inputs are an admin's files, not an adversary's, and 64 bits make an
// accidental collision between two versions of a file negligible.
struct Hash {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  void add(const char* p, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      h ^= static_cast<unsigned char>(p[i]);
      h *= 0x100000001b3ULL;
    }
  }
  void add(const std::string& s) {
    add(s.data(), s.size());
    add("\0", 1);  // "ab","c" and "a","bc" differ
  }
  // A file's bytes. Throws naming the file when it cannot be read, or, with `missing_ok`, hashes
  // that it is missing (a capture no host uses may be absent everywhere).
  void add_file(const std::string& path, bool missing_ok = false) {
    std::ifstream in(path, std::ios::binary);
    if (!in && missing_ok) {
      add("(missing) " + path);
      return;
    }
    if (!in) {
      throw topology::Error(topology::ErrorCode::kNotFound, path, "cannot read it");
    }
    char buf[65536];
    while (in.read(buf, sizeof buf) || in.gcount() > 0) {
      add(buf, static_cast<std::size_t>(in.gcount()));
    }
    add("\0", 1);
  }
  std::string hex() const {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016" PRIx64, h);
    return buf;
  }
};

// Every capture a host of this configuration may use: [[node]] entries, then the fabric's node
// types. Sorted, so that the order of the entries does not matter.
std::set<std::string> captures_of(const Config& config, const topology::Fabric& fabric) {
  std::set<std::string> out;
  for (const auto& n : config.nodes) out.insert(n.capture);
  for (const auto& t : fabric.node_types) {
    if (!t.capture_path.empty()) out.insert(t.capture_path);
  }
  return out;
}

constexpr const char* kNames[] = {"build", "config", "fabric", "captures", "spec"};

std::string* field(Digest& d, const std::string& name) {
  std::string* fields[] = {&d.build, &d.config, &d.fabric, &d.captures, &d.spec};
  for (std::size_t i = 0; i < 5; ++i) {
    if (name == kNames[i]) return fields[i];
  }
  return nullptr;
}

}  // namespace

Digest digest_of(const Config& config, const std::vector<std::string>& plugstack_args,
                 const topology::Fabric& fabric, const std::string& spec) {
  Digest d;
  Hash build;
  build.add(TOPOAWARE_VERSION);
  d.build = build.hex();
  Hash conf;
  for (const auto& a : plugstack_args) conf.add(a);
  if (!config.path.empty()) conf.add_file(config.path);
  d.config = conf.hex();
  Hash fab;
  fab.add_file(config.fabric);
  if (!config.guid_map.empty()) fab.add_file(config.guid_map);
  d.fabric = fab.hex();
  Hash caps;
  for (const auto& path : captures_of(config, fabric)) caps.add_file(path, true);
  d.captures = caps.hex();
  Hash sp;
  sp.add(spec);
  if (spec.rfind("file:", 0) == 0) sp.add_file(spec.substr(5));
  d.spec = sp.hex();
  return d;
}

std::string encode(const Digest& d) {
  Digest copy = d;
  std::string out = "v1";
  for (const char* name : kNames) out += std::string(" ") + name + "=" + *field(copy, name);
  return out;
}

Digest decode(const std::string& text) {
  Digest d;
  std::istringstream in(text);
  std::string item;
  in >> item;
  if (item != "v1") {
    throw topology::Error(topology::ErrorCode::kBadInput, "SLURM_TOPO_AWARE_DIGEST",
                          "not a topo-aware digest ('" + text.substr(0, 40) + "')");
  }
  std::size_t seen = 0;
  while (in >> item) {
    const auto eq = item.find('=');
    std::string* f = eq == std::string::npos ? nullptr : field(d, item.substr(0, eq));
    if (f == nullptr || !f->empty()) {
      throw topology::Error(topology::ErrorCode::kBadInput, "SLURM_TOPO_AWARE_DIGEST",
                            "unexpected '" + item + "'");
    }
    *f = item.substr(eq + 1);
    ++seen;
  }
  if (seen != 5) {
    throw topology::Error(topology::ErrorCode::kBadInput, "SLURM_TOPO_AWARE_DIGEST",
                          "incomplete ('" + text.substr(0, 80) + "')");
  }
  return d;
}

std::string differences(const Digest& srun, const Digest& here, const Config& config) {
  std::string out;
  auto add = [&](bool differ, const std::string& what) {
    if (differ) out += (out.empty() ? "" : ", ") + what;
  };
  add(srun.build != here.build, "the plugin's version (" TOPOAWARE_VERSION " here)");
  add(srun.config != here.config,
      "the configuration" + (config.path.empty() ? std::string() : " (" + config.path + ")"));
  add(srun.fabric != here.fabric, "the fabric (" + config.fabric + ")");
  add(srun.captures != here.captures, "the node captures");
  add(srun.spec != here.spec, "the SPEC or its job description");
  return out;
}

}  // namespace topoaware::spank
