#include "topoaware/launch/calibration_file.h"

#include <toml++/toml.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "toml_file.h"
#include "topoaware/topology/error.h"

namespace topoaware::launch {
namespace {

using topology::Error;
using topology::ErrorCode;

// A factor is measured over modeled: outside these a run was broken, not slow.
constexpr double kLeastFactor = 0.01;
constexpr double kMostFactor = 100;

std::string where_of(const toml::node& node, const std::string& path) {
  return topology::where(path, static_cast<long>(node.source().begin.line));
}

double factor(const toml::node& v, const std::string& key, const std::string& where) {
  double x = 0;
  if (v.is_floating_point()) {
    x = *v.value<double>();
  } else if (v.is_integer()) {
    x = static_cast<double>(*v.value<std::int64_t>());
  } else {
    throw Error(ErrorCode::kBadInput, where, key + " must be a number");
  }
  if (!(x >= kLeastFactor && x <= kMostFactor)) {
    throw Error(ErrorCode::kBadInput, where,
                key + " must be between 0.01 and 100 (measured over modeled), not " +
                    std::to_string(x));
  }
  return x;
}

std::string text(const toml::node& v, const std::string& key, const std::string& where) {
  if (auto s = v.value<std::string>()) return *s;
  throw Error(ErrorCode::kBadInput, where, key + " must be a string");
}

void read_entry(mapper::Calibration& c, const toml::table& t, const std::string& path,
                const std::string& where) {
  int cls = -1;
  bool have_tier = false;
  mapper::Tier tier = mapper::Tier::kNvlink;
  mapper::Calibration::Entry e;
  e.cases = 1;
  bool have_bw = false;
  for (const auto& [k, v] : t) {
    const std::string key(k.str());
    const std::string vwhere = where_of(v, path);
    if (key == "algorithm") {
      const std::string name = text(v, key, vwhere);
      cls = mapper::calibration_class(name);
      if (cls < 0) {
        throw Error(ErrorCode::kBadInput, vwhere,
                    "algorithm '" + name +
                        "' is not one NCCL runs (Ring, Tree, CollNetDirect, CollNetChain, NVLS, "
                        "NVLSTree, PAT) or p2p");
      }
    } else if (key == "tier") {
      const std::string name = text(v, key, vwhere);
      if (!mapper::parse_tier(name, tier)) {
        throw Error(ErrorCode::kBadInput, vwhere,
                    "tier '" + name + "' is not nvlink, leaf or spine");
      }
      have_tier = true;
    } else if (key == "bandwidth") {
      e.bandwidth = factor(v, key, vwhere);
      have_bw = true;
    } else if (key == "latency") {
      e.latency = factor(v, key, vwhere);
    } else if (key == "cases") {
      if (!v.is_integer() || *v.value<std::int64_t>() < 1 || *v.value<std::int64_t>() > 1000000) {
        throw Error(ErrorCode::kBadInput, vwhere, "cases must be a positive integer");
      }
      e.cases = static_cast<int>(*v.value<std::int64_t>());
    } else {
      throw Error(ErrorCode::kBadInput, vwhere,
                  "unknown key '" + key +
                      "' in [[entry]] (known: algorithm, tier, bandwidth, latency, cases)");
    }
  }
  if (cls < 0 || !have_tier || !have_bw) {
    throw Error(ErrorCode::kBadInput, where, "[[entry]] needs algorithm, tier and bandwidth");
  }
  mapper::Calibration::Entry& slot = c.at(static_cast<std::size_t>(cls), tier);
  if (slot.cases > 0) {
    throw Error(ErrorCode::kBadInput, where,
                "a second [[entry]] for " +
                    std::string(mapper::calibration_class_name(static_cast<std::size_t>(cls))) +
                    "/" + std::string(mapper::to_string(tier)));
  }
  slot = e;
}

}  // namespace

mapper::Calibration read_calibration(const std::string& path, CalibrationMeta* meta) {
  const toml::table table = internal::parse_toml_file(path, "calibration file not found");
  mapper::Calibration c;
  c.source = path;
  CalibrationMeta m;
  bool have_format = false;
  for (const auto& [k, v] : table) {
    const std::string key(k.str());
    const std::string where = where_of(v, path);
    if (key == "format") {
      if (!v.is_integer() || *v.value<std::int64_t>() != 1) {
        throw Error(ErrorCode::kBadInput, where, "format must be 1 (the only one this reads)");
      }
      have_format = true;
    } else if (key == "created") {
      m.created = text(v, key, where);
    } else if (key == "nccl") {
      m.nccl = text(v, key, where);
    } else if (key == "runs") {
      if (!v.is_integer() || *v.value<std::int64_t>() < 0) {
        throw Error(ErrorCode::kBadInput, where, "runs must be a non-negative integer");
      }
      m.runs = static_cast<int>(*v.value<std::int64_t>());
    } else if (key == "entry") {
      const auto* array = v.as_array();
      if (array == nullptr) {
        throw Error(ErrorCode::kBadInput, where, "entry must be an array of tables ([[entry]])");
      }
      for (const auto& item : *array) {
        const auto* t = item.as_table();
        const std::string ewhere = where_of(item, path);
        if (t == nullptr) throw Error(ErrorCode::kBadInput, ewhere, "[[entry]] must be a table");
        read_entry(c, *t, path, ewhere);
      }
    } else {
      throw Error(ErrorCode::kBadInput, where,
                  "unknown key '" + key + "' (known: format, created, nccl, runs, [[entry]])");
    }
  }
  if (!have_format) {
    throw Error(ErrorCode::kBadInput, path,
                "not a topo-aware calibration file: no 'format = 1' (write one with `topo-aware "
                "calibrate`)");
  }
  if (meta) *meta = m;
  return c;
}

std::string write_calibration(const mapper::Calibration& c, const CalibrationMeta& meta) {
  std::string out =
      "# topo-aware calibration: the cost model corrected by this site's nccl-tests runs.\n"
      "# Written by `topo-aware calibrate`; every key: docs/calibration.md, \"The calibration "
      "file\".\n";
  for (const std::string& line : meta.comments) out += "# " + line + "\n";
  out += "format = 1\n";
  if (!meta.created.empty()) out += "created = \"" + meta.created + "\"\n";
  if (!meta.nccl.empty()) out += "nccl = \"" + meta.nccl + "\"\n";
  if (meta.runs > 0) out += "runs = " + std::to_string(meta.runs) + "\n";
  std::size_t k = 0;
  for (std::size_t cls = 0; cls < mapper::kCalibrationClasses; ++cls) {
    for (mapper::Tier t : {mapper::Tier::kNvlink, mapper::Tier::kLeaf, mapper::Tier::kSpine}) {
      const mapper::Calibration::Entry& e = c.at(cls, t);
      if (e.cases <= 0) continue;
      out += "\n";
      if (k < meta.entry_comments.size() && !meta.entry_comments[k].empty()) {
        out += "# " + meta.entry_comments[k] + "\n";
      }
      ++k;
      char buf[96];
      out += "[[entry]]\nalgorithm = \"" + std::string(mapper::calibration_class_name(cls)) +
             "\"\ntier = \"" + std::string(mapper::to_string(t)) + "\"\n";
      std::snprintf(buf, sizeof buf, "bandwidth = %.4f\nlatency = %.4f\n", e.bandwidth, e.latency);
      out += buf;
      out += "cases = " + std::to_string(e.cases) + "\n";
    }
  }
  return out;
}

}  // namespace topoaware::launch
