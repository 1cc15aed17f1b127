#include "topoaware/mapper/calibration.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstddef>
#include <string>
#include <string_view>

namespace topoaware::mapper {
namespace {

// Names compare case-insensitive and without underscores: NCCL's logs spell "NVLS_TREE" and
// "RING" (2.24+ ncclAlgoToString), its tables "NVLSTree" and "Ring".
bool same_name(std::string_view a, std::string_view b) {
  std::size_t i = 0, j = 0;
  for (;; ++i, ++j) {
    while (i < a.size() && a[i] == '_') ++i;
    while (j < b.size() && b[j] == '_') ++j;
    if (i == a.size() || j == b.size()) return i == a.size() && j == b.size();
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[j]))) {
      return false;
    }
  }
}

}  // namespace

std::string_view to_string(Tier t) {
  switch (t) {
    case Tier::kNvlink:
      return "nvlink";
    case Tier::kLeaf:
      return "leaf";
    case Tier::kSpine:
      return "spine";
  }
  return "?";
}

std::string_view calibration_class_name(std::size_t cls) {
  if (cls < static_cast<std::size_t>(nccl::kAlgos)) {
    return nccl::to_string(static_cast<nccl::Algo>(cls));
  }
  return "p2p";
}

int calibration_class(std::string_view name) {
  for (std::size_t c = 0; c < kCalibrationClasses; ++c) {
    if (same_name(name, calibration_class_name(c))) return static_cast<int>(c);
  }
  return -1;
}

bool parse_tier(std::string_view name, Tier& out) {
  for (Tier t : {Tier::kNvlink, Tier::kLeaf, Tier::kSpine}) {
    if (same_name(name, to_string(t))) {
      out = t;
      return true;
    }
  }
  return false;
}

bool Calibration::measured() const {
  for (const auto& row : entries) {
    for (const Entry& e : row) {
      if (e.cases > 0) return true;
    }
  }
  return false;
}

double Calibration::least_factor() const {
  double f = 1;
  for (const auto& row : entries) {
    for (const Entry& e : row) {
      if (e.cases <= 0) continue;
      f = std::min({f, 1.0 / e.bandwidth, e.latency});
    }
  }
  return f;
}

std::string describe(const Calibration& c) {
  std::string out = "model corrected by " + (c.source.empty() ? std::string("a calibration") : c.source) + ":";
  bool first = true;
  for (std::size_t cls = 0; cls < kCalibrationClasses; ++cls) {
    for (Tier t : {Tier::kNvlink, Tier::kLeaf, Tier::kSpine}) {
      const Calibration::Entry& e = c.at(cls, t);
      if (e.cases <= 0) continue;
      char buf[160];
      std::snprintf(buf, sizeof buf, "%s %s/%s bandwidth x%.2f, latency x%.2f (%d run%s)",
                    first ? "" : ";", std::string(calibration_class_name(cls)).c_str(),
                    std::string(to_string(t)).c_str(), e.bandwidth, e.latency, e.cases,
                    e.cases == 1 ? "" : "s");
      out += buf;
      first = false;
    }
  }
  return out;
}

}  // namespace topoaware::mapper
