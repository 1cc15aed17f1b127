// How every subcommand prints for people: one column formatter (so `discover`, `fabric`, `map`
// and `inspect` tables line up the same way) and the few number formats they share. Golden
// files under tests/golden/ pin these outputs byte for byte.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace topoaware::cli {

// Left-aligned columns, widths from the content, rows indented by two spaces and two spaces
// between columns; no trailing blanks. The first row is usually the header.
std::string text_table(const std::vector<std::vector<std::string>>& rows);

// A measured figure to four significant digits ("%.4g": 400, 23.5, 0.125).
std::string figure(double v);

// "0-31,64-95": sorted, consecutive ids folded into ranges; empty for no ids.
std::string cpu_ranges(const std::vector<std::uint32_t>& cpus);

// Modeled time as ms below a second, else s; bytes as GB (1e9).
std::string seconds(double s);
std::string gigabytes(double bytes);

}  // namespace topoaware::cli
