// Digests of a step's inputs (digest.h).
#include "digest.h"

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "topoaware/launch/build.h"
#include "topoaware/topology/error.h"
#include "topoaware/topology/hostlist.h"
#include "topoaware/topology/node_io.h"

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

std::string hash_of(const std::string& text) {
  Hash h;
  h.add(text);
  return h.hex();
}

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

// The parts in the order encode() writes them.
struct Part {
  const char* name;
  std::string Digest::*field;
};
constexpr Part kParts[] = {{"build", &Digest::build},       {"config", &Digest::config},
                           {"fabric", &Digest::fabric},     {"captures", &Digest::captures},
                           {"live", &Digest::live},         {"health", &Digest::health},
                           {"hostfile", &Digest::hostfile}, {"spec", &Digest::spec},
                           {"gpus", &Digest::gpus},         {"port", &Digest::port}};
constexpr const char* kVersion = "v2";
constexpr const char* kUnmodified = "unmodified";

}  // namespace

std::string inputs_hash(const Digest& digest) {
  Hash h;
  for (const auto& part : kParts) {
    if (part.field == &Digest::gpus || part.field == &Digest::port) continue;
    h.add(part.name);
    h.add(digest.*part.field);
  }
  return h.hex();
}

bool uses_live(const Config& config, const topology::Fabric& fabric,
               const std::vector<std::string>& hosts) {
  for (const auto& host : hosts) {
    if (launch::capture_for(config, fabric, host).empty()) return true;
  }
  return false;
}

Digest digest_of(const Config& config, const std::vector<std::string>& plugstack_args,
                 const topology::Fabric& fabric, const std::string& spec,
                 const DigestInputs& inputs) {
  Digest d;
  d.build = hash_of(launch::build_id());
  Hash conf;
  for (const auto& a : plugstack_args) conf.add(a);
  if (!config.path.empty()) conf.add_file(config.path);
  if (!config.calibration.empty()) conf.add_file(config.calibration);
  d.config = conf.hex();
  Hash fab;
  fab.add_file(config.fabric);
  if (!config.guid_map.empty()) fab.add_file(config.guid_map);
  d.fabric = fab.hex();
  Hash caps;
  for (const auto& path : captures_of(config, fabric)) caps.add_file(path, true);
  d.captures = caps.hex();
  // The live model as used: what this machine's discovery gives, the one thing a capture-less
  // host's model depends on besides the configuration.
  d.live =
      inputs.with_live ? hash_of(topology::node_to_json(launch::discover_this_node(config))) : "-";
  d.health = hash_of(inputs.health);
  if (inputs.hostfile == nullptr) {
    d.hostfile = "-";
  } else {
    Hash hf;
    hf.add(inputs.hostfile);
    hf.add_file(inputs.hostfile, true);
    d.hostfile = hf.hex();
  }
  Hash sp;
  sp.add(spec);
  if (spec.rfind("file:", 0) == 0) sp.add_file(spec.substr(5));
  d.spec = sp.hex();
  d.gpus = "-";
  d.port = "-";
  return d;
}

std::string encode_gpus(const std::vector<std::string>& hosts, const std::vector<int>& gpus) {
  std::map<int, std::vector<std::string>> by_count;
  for (std::size_t h = 0; h < hosts.size() && h < gpus.size(); ++h) {
    if (gpus[h] > 0) by_count[gpus[h]].push_back(hosts[h]);
  }
  std::string out;
  for (const auto& [count, names] : by_count) {
    out +=
        (out.empty() ? "" : ";") + std::to_string(count) + ":" + topology::compress_hostlist(names);
  }
  return out.empty() ? "-" : out;
}

std::map<std::string, int> decode_gpus(const std::string& text) {
  std::map<std::string, int> out;
  if (text == "-") return out;
  std::istringstream in(text);
  std::string group;
  while (std::getline(in, group, ';')) {
    const auto colon = group.find(':');
    int count = 0;
    if (colon == std::string::npos ||
        std::sscanf(group.substr(0, colon).c_str(), "%d", &count) != 1 || count < 1) {
      throw topology::Error(topology::ErrorCode::kBadInput, "SLURM_TOPO_AWARE_DIGEST",
                            "cannot read gpus '" + group + "'");
    }
    for (auto& host :
         topology::expand_hostlist(group.substr(colon + 1), "SLURM_TOPO_AWARE_DIGEST")) {
      out[host] = count;
    }
  }
  return out;
}

std::string encode(const Digest& d) {
  std::string out = kVersion;
  if (d.unmodified) return out + " " + kUnmodified;
  for (const Part& p : kParts) out += std::string(" ") + p.name + "=" + d.*p.field;
  return out;
}

Digest decode(const std::string& text) {
  Digest d;
  std::istringstream in(text);
  std::string item;
  in >> item;
  if (item != kVersion) {
    throw topology::Error(topology::ErrorCode::kBadInput, "SLURM_TOPO_AWARE_DIGEST",
                          "not this build's digest ('" + text.substr(0, 40) + "')");
  }
  std::set<std::string> seen;
  while (in >> item) {
    if (item == kUnmodified && seen.empty()) {
      d.unmodified = true;
      seen.insert(item);
      continue;
    }
    const auto eq = item.find('=');
    const std::string name = eq == std::string::npos ? item : item.substr(0, eq);
    const Part* part = nullptr;
    for (const Part& p : kParts) {
      if (name == p.name) part = &p;
    }
    if (part == nullptr || d.unmodified || !seen.insert(name).second) {
      throw topology::Error(topology::ErrorCode::kBadInput, "SLURM_TOPO_AWARE_DIGEST",
                            "unexpected '" + item.substr(0, 40) + "'");
    }
    d.*part->field = item.substr(eq + 1);
  }
  if (!d.unmodified && seen.size() != std::size(kParts)) {
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
  add(srun.build != here.build,
      std::string("the plugin's build (") + launch::build_id() + " here)");
  add(srun.config != here.config,
      "the configuration" + (config.path.empty() ? std::string() : " (" + config.path + ")"));
  add(srun.fabric != here.fabric, "the fabric (" + config.fabric + ")");
  add(srun.captures != here.captures, "the node captures");
  add(here.live != "-" && srun.live != here.live,
      "the live-discovered model of hosts without a capture (give them one: [[node]] capture)");
  add(srun.health != here.health, "the health reports srun planned with");
  add(srun.hostfile != here.hostfile, "SLURM_HOSTFILE");
  add(srun.spec != here.spec, "the SPEC or its job description");
  return out;
}

}  // namespace topoaware::spank
