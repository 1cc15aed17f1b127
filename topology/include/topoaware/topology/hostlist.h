// Slurm hostlist syntax: "node[001-004,7],gpu[1-2]-ib[0-1],login1".
//
// Expansion is bounded: a list that would expand past `max_hosts` is refused before any host is
// materialized, so "n[1-999999999]" costs nothing.
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
// Number of hosts the list names, without expanding it.
std::size_t hostlist_count(std::string_view list, const std::string& context = {});
// The shortest ranged form Slurm would write for these names, in the given order grouped by prefix.
std::string compress_hostlist(const std::vector<std::string>& hosts);

}  // namespace topoaware::topology
