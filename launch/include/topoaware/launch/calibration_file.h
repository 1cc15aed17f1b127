// The calibration file: a site's correction of the cost model (mapper/calibration.h) as TOML,
// written by `topo-aware calibrate` and read by `map --calibration`, `inspect` and the plugin
// (`calibration = PATH`). Its keys, one by one, are in docs/calibration.md ("The calibration
// file"). Reading is strict like the plugin's configuration: an unknown key, a wrong type, a
// factor out of range or an entry given twice is an error naming file:line.
#pragma once

#include <string>
#include <vector>

#include "topoaware/mapper/calibration.h"

namespace topoaware::launch {

// What the file says about where its factors came from (comments and informational keys).
struct CalibrationMeta {
  std::string created;               // ISO 8601 time it was written
  std::string nccl;                  // the NCCL release the runs used ("2.21.5"), if known
  int runs = 0;                      // nccl-tests runs it was fitted from
  std::vector<std::string> comments;  // lines written as "# ..." above the entries
  // Per measured entry (class, tier order): a comment written above it, e.g. the runs behind it.
  std::vector<std::string> entry_comments;
};

// Reads a calibration file; Calibration::source is set to `path`. Throws topology::Error
// (kNotFound, kBadInput naming path:line).
mapper::Calibration read_calibration(const std::string& path, CalibrationMeta* meta = nullptr);

// The file's text for a calibration: its measured entries only.
std::string write_calibration(const mapper::Calibration& calibration, const CalibrationMeta& meta);

}  // namespace topoaware::launch
