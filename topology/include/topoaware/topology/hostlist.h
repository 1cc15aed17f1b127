// Slurm hostlist syntax: "node[001-004,7],gpu[1-2]-ib[0-1],login1".
//
// Expansion is bounded: a list that would expand past `max_hosts` is refused before any host is
// materialized, so "n[1-999999999]" costs nothing.
//
// Why this is our own code and not libslurm's slurm_hostlist_create/shift/ranged_string (which
// DESIGN.md prefers by default), measured against Debian's libslurm 22.05.8 (libslurm.so.38):
//  - it prints to stderr itself ("error: _parse_single_range: Invalid range: `3-1'") and returns
//    NULL without a reason we could put into a file:line message; a library must not print;
//  - malformed input is accepted silently: "n[1-3" expands to one host named "n]";
//  - its only bound is a fixed per-range cap (65536; "n[1-70000]" is refused but
//    "a[1-60000],b[1-60000],..." is not), so the total bound must be ours anyway;
//  - linking -lslurm ties the CLI, the tests and the static library to the exact libslurm soname
//    of the build host (it changes with every Slurm release), although only the SPANK plugin runs
//    inside a Slurm process.
// The syntax implemented is Slurm's: comma-separated items; each item is literal text with any
// number of bracket groups, each group a comma list of N or N-M; a lower bound written with a
// leading zero fixes the width ("[08-10]" -> 08, 09, 10); several groups expand as a cartesian
// product, leftmost slowest ("gpu[1-2]-ib[0-1]" -> gpu1-ib0, gpu1-ib1, gpu2-ib0, gpu2-ib1).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace topoaware::topology {

inline constexpr std::size_t kDefaultMaxHosts = 1u << 20;

// Throws Error(kBadInput / kLimit) with `context` (e.g. "topology.conf:12") in front.
std::vector<std::string> expand_hostlist(std::string_view list, const std::string& context = {},
                                         std::size_t max_hosts = kDefaultMaxHosts);
// Number of hosts the list names, without expanding it (saturates at SIZE_MAX). Throws
// Error(kBadInput) on malformed syntax.
std::size_t hostlist_count(std::string_view list, const std::string& context = {});
// The shortest ranged form Slurm would write for these names, in the given order grouped by prefix.
std::string compress_hostlist(const std::vector<std::string>& hosts);
// Natural order of host names: digit runs compare as numbers ("n9" < "n10", "mlx5_2" < "mlx5_10").
bool hostname_less(std::string_view a, std::string_view b);

}  // namespace topoaware::topology
