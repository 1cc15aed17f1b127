// A site's correction of the cost model from its own nccl-tests runs (`topo-aware calibrate`,
// docs/calibration.md "Correct the model with your runs"): per algorithm NCCL runs (or p2p for
// send/recv and all-to-all) and per network tier a group reaches, how much slower or faster than
// modeled that group's bandwidth and latency measured. The cost model applies it to each group
// it routes (routing.h route_group): the group's bytes on every resource and NCCL's own time of
// it divided by `bandwidth`, its latency multiplied by `latency`. NCCL's algorithm choice is left
// as NCCL makes it (by its own uncorrected estimate): a calibration corrects what a choice costs,
// never which choice NCCL makes.
//
// Pure data: the TOML file is read and written by launch/calibration_file.h.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "topoaware/mapper/nccl_model.h"

namespace topoaware::mapper {

// How far a group's members reach: one host or NVLink domain, one leaf (the innermost level's
// group), or beyond it.
enum class Tier { kNvlink, kLeaf, kSpine };
constexpr std::size_t kTiers = 3;
std::string_view to_string(Tier t);  // "nvlink", "leaf", "spine"

// NCCL's algorithms (nccl::Algo, in its order) and one more class: point-to-point (send/recv,
// all-to-all), which NCCL does not tune.
constexpr std::size_t kCalibrationClasses = static_cast<std::size_t>(nccl::kAlgos) + 1;
constexpr std::size_t kP2pClass = static_cast<std::size_t>(nccl::kAlgos);
std::string_view calibration_class_name(std::size_t cls);  // "Ring", ..., "p2p"

struct Calibration {
  struct Entry {
    double bandwidth = 1;  // measured / modeled bandwidth (0.8: the groups ran at 80% of the model)
    double latency = 1;    // measured / modeled latency
    int cases = 0;         // measured runs behind it; 0: not measured (the model as it is)
  };
  std::array<std::array<Entry, kTiers>, kCalibrationClasses> entries{};
  std::string source;  // where it came from (the file), for the assumptions line

  // Whether any entry was measured: a calibration without one changes nothing.
  bool measured() const;
  const Entry& at(std::size_t cls, Tier tier) const {
    return entries[cls][static_cast<std::size_t>(tier)];
  }
  Entry& at(std::size_t cls, Tier tier) { return entries[cls][static_cast<std::size_t>(tier)]; }
  // The smallest factor any group's time can be multiplied by (1 / bandwidth, latency), at most
  // 1: what keeps lower_bound() a bound under this calibration.
  double least_factor() const;
};

// One sentence for a plan's assumptions: "model corrected by FILE: Ring/leaf bandwidth x0.93,
// latency x1.40 (3 runs); ...", the measured entries only.
std::string describe(const Calibration& c);

// "Ring" -> its class, "p2p" -> kP2pClass, as NCCL spells them (case-insensitive); -1 if unknown.
int calibration_class(std::string_view name);
// "nvlink" / "leaf" / "spine" -> the tier; false if unknown.
bool parse_tier(std::string_view name, Tier& out);

}  // namespace topoaware::mapper
