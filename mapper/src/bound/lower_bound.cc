// lower_bound() (cost.h): every part of the bound (bound.h) on one instance, the largest taken, and
// the bound of overlapping dims (docs/mapper.md, "Lower bound").
#include <algorithm>
#include <cstddef>
#include <vector>

#include "bound/bound.h"
#include "routing.h"
#include "topoaware/mapper/cost.h"
#include "topoaware/mapper/layout.h"

namespace topoaware::mapper::internal {

namespace {

// Overlapping dims take at least as long as the slowest dim alone (its loads are part of the
// combined ones) and as every byte over all egress together; latency terms still add up.

double overlapped_lower_bound(const Machine& machine, const Traffic& traffic, bool whole_cuts,
                              std::size_t counted) {
  Traffic one = traffic;
  one.overlap = false;
  one.matrix.clear();
  double slowest = 0, latency = 0, bytes = 0;
  const BoundMachine summary = bound_machine(machine);
  for (std::size_t d = 0; d < traffic.dims.size(); ++d) {
    const DimTraffic& dt = traffic.dims[d];
    if (dt.size <= 1 || dt.bytes <= 0) continue;
    one.dims.assign(traffic.dims.size(), DimTraffic{});
    one.dims[d] = dt;
    one.dims[d].calls = 0;
    slowest = std::max(slowest, routed_bound(machine, one, whole_cuts, counted, nullptr));
    latency += dt.calls * latency_steps(dt) * summary.lat_min * 1e-6;
    const double nd = static_cast<double>(dt.size);
    bytes += dt.pattern == Pattern::kRing
                 ? static_cast<double>(traffic.world) * any_split_hop(dt, summary.island_kmax)
             : dt.pattern == Pattern::kAllToAll
                 ? static_cast<double>(traffic.world) * (nd - 1) / nd * dt.bytes
                 : 2.0 * static_cast<double>(traffic.world / dt.size) * (nd - 1) * dt.bytes;
  }
  for (const auto& fl : traffic.matrix) bytes += fl.from != fl.to ? fl.bytes : 0;
  return std::max(slowest, bytes / summary.total_egress) + latency;
}

}  // namespace

double routed_bound(const Machine& machine, const Traffic& traffic, bool whole_cuts,
                    std::size_t counted, const std::vector<char>* whole) {
  if (machine.slots.empty()) return 0;
  if (traffic.overlap) return overlapped_lower_bound(machine, traffic, whole_cuts, counted);
  // Seconds no placement can take: the floor of a count of members the placements never have.
  constexpr double kNever = 1e18;
  const BoundMachine summary = bound_machine(machine);
  // Per dim, two families of floors, each combined with the crossing floor (valid for any
  // placement): by_host given the rank's host holds k of its group, by_island given its island
  // does.
  const std::size_t dims = traffic.dims.size();
  Floors by_host(dims), by_island(dims);
  Floors by_host_ring(dims);    // host floors of all-reduces as rings, never trees
  Floors by_island_ring(dims);  // island floors of all-reduces as rings, never trees
  double fixed = 0;             // latency floors
  for (std::size_t d = 0; d < dims; ++d) {
    const DimTraffic& dt = traffic.dims[d];
    if (dt.size <= 1 || dt.bytes <= 0) {
      by_host[d] = {0.0};
      by_island[d] = {0.0};
      by_host_ring[d] = {0.0};
      by_island_ring[d] = {0.0};
      continue;
    }
    const double cross = crossing_floor(dt, traffic.world, summary);
    double pipe_floor = 0;
    by_host[d] = host_floors(dt, summary, cross, &pipe_floor);
    by_host_ring[d] =
        dt.all_reduce ? host_floors(dt, summary, cross, &pipe_floor, true) : by_host[d];
    by_island[d] = island_floors(dt, summary, cross, pipe_floor, by_host[d]);
    by_island_ring[d] = dt.all_reduce
                            ? island_floors(dt, summary, cross, pipe_floor, by_host_ring[d], true)
                            : by_island[d];
    fixed += dt.calls * latency_steps(dt) * summary.lat_min * 1e-6;
    // A group that leaves its island reaches the network: the dim's every step then waits at
    // least the network's least latency, not NVLink's. Without NVLink domains islands are hosts.
    const double network = network_latency(dt, summary);
    auto leaves = [&](std::vector<double>& floors) {  // k < n: the group leaves the place
      for (std::size_t k = 1; k <= floors.size() && static_cast<long long>(k) < dt.size; ++k) {
        floors[k - 1] += network;
      }
    };
    leaves(by_island[d]);
    leaves(by_island_ring[d]);
    if (!summary.has_domains) {
      leaves(by_host[d]);
      leaves(by_host_ring[d]);
    }
    // A dim whose every group lies inside one island (the fast-domain rule, `whole`) never has
    // fewer than all its members on the rank's island: no placement the bound covers does.
    if (whole && d < whole->size() && (*whole)[d]) {
      auto pin = [&](std::vector<double>& floors) {
        for (std::size_t k = 1; k <= floors.size() && static_cast<long long>(k) < dt.size; ++k) {
          floors[k - 1] = kNever;
        }
      };
      pin(by_island[d]);
      pin(by_island_ring[d]);
      if (!summary.has_domains) {
        pin(by_host[d]);
        pin(by_host_ring[d]);
      }
    }
  }
  // Take a place (a host, or an island) with c slots and the c ranks S on it. For each dim let
  // m_d be the fewest members of its own d-group that any rank of S finds on the place, and r_d
  // a rank with that few: time_d >= f_d(m_d) through r_d. Walking from any rank of S along dim
  // 1 (at least m_1 choices), then dim 2 (m_2 choices each), ... reaches prod_d m_d distinct
  // ranks of S, so prod_d m_d <= c. Where m_d = n_d for every d of a set F, S is closed under
  // moves in F: a union of F-cosets of prod_F n_d ranks each, so prod_F n_d divides c. And d's
  // groups cut S into lines of m_d..n_d ranks, one of m_d, and a line of j members charges its
  // dim f_d(j) too (place_lines_floor). Minimize sum_d f_d(m_d) under the three, each dim at
  // least its other lines' floor; every place gives a true bound, so take the largest.
  std::vector<long long> sizes(dims);
  for (std::size_t d = 0; d < dims; ++d) sizes[d] = traffic.dims[d].size;
  constexpr std::size_t kPlaceSizes = 32;
  // Every slot holds a rank (plan()'s instances): the closure and lines conditions hold.
  const bool full = static_cast<long long>(machine.slots.size()) == traffic.world;
  // Host places (the trees' floors apart).
  const std::vector<long long> places = place_sizes(summary.host_slots, kPlaceSizes);
  auto walk = [&](const Floors& host, const Floors& ring, const Floors& island) {
    double v = least_sum_over(island, sizes, summary.island_slots, kPlaceSizes, full);
    for (long long c : places) {
      v = std::max(v,
                   least_sum_trees(ring, host, sizes, c, summary.kmax, !summary.has_domains, full));
    }
    return v;
  };
  // The latency walk above a switch holds under any true floors whose latency part is at most
  // the network's least (every floor here: a bandwidth floor, plus that latency where the group
  // leaves its island), so the cases below run it under their floors too (docs/mapper.md,
  // "Latency under the cases").
  auto walk_latency = [&](const Floors& host, const Floors& ring, const Floors& island) {
    return std::max(walk(host, ring, island),
                    level_latency_bound(machine, traffic, summary, host, ring, sizes, full));
  };
  double lb = walk(by_host, by_host_ring, by_island);
  lb = std::max(
      lb, tree_chain_bound(traffic, summary, by_host, by_host_ring, by_island, full, walk_latency));
  lb = std::max(
      lb, joint_crossing_bound(machine, traffic, by_host, by_island, sizes, summary.host_slots,
                               summary.island_slots, summary.island_kmax));
  const std::vector<CutSets> cuts =
      whole_cuts ? place_cut_vectors(machine, traffic, summary, full, counted)
                 : std::vector<CutSets>{};
  lb = std::max(lb, cut_case_bound(machine, traffic, summary, by_host, by_host_ring, by_island, {},
                                   cuts, lb, walk_latency));
  lb = std::max(lb, tree_case_bound(machine, traffic, summary, by_host, by_host_ring, by_island,
                                    sizes, full, cuts, walk_latency));
  lb = std::max(lb, ecmp_case_bound(machine, traffic, summary, by_host, by_host_ring, by_island,
                                    sizes, cuts, walk_latency));
  lb = std::max(lb,
                level_latency_bound(machine, traffic, summary, by_host, by_host_ring, sizes, full));
  // Middle stages: the walk and the latency walk again with a pipeline's middle-stage floors.
  std::size_t pipe = kNoDim;
  for (std::size_t d = 0; d < dims && pipe == kNoDim; ++d) {
    const DimTraffic& dt = traffic.dims[d];
    if (dt.pattern == Pattern::kPipeline && dt.size >= 3 && dt.bytes > 0) pipe = d;
  }
  if (full && pipe != kNoDim) {
    const DimTraffic& dt = traffic.dims[pipe];
    Floors middle_by_host = by_host;
    const double cross = crossing_floor(dt, traffic.world, summary);
    for (std::size_t k = 1; k <= middle_by_host[pipe].size(); ++k) {
      // Two neighbours' S; leaving the host, a step's network latency too (as `leaves` above).
      const auto kk = static_cast<long long>(k);
      double v = std::max(
          cross, pipe_stage(2, kk, summary.has_domains, dt.bytes, summary.nv, summary.port));
      if (!summary.has_domains && kk < dt.size)
        v += dt.calls * (summary.lat_network - summary.lat_min) * 1e-6;
      middle_by_host[pipe][k - 1] = std::max(middle_by_host[pipe][k - 1], v);
    }
    Floors middle_by_host_ring = by_host_ring;
    middle_by_host_ring[pipe] = middle_by_host[pipe];
    const long long middle = traffic.world * (dt.size - 2) / dt.size;
    lb =
        std::max(lb, middle_stage_bound(summary.host_slots, middle, [&](long long c) {
                   return least_sum_trees(middle_by_host_ring, middle_by_host, sizes, c,
                                          summary.kmax, !summary.has_domains, full, &by_host, pipe);
                 }));
    lb =
        std::max(lb, level_latency_bound(machine, traffic, summary, middle_by_host,
                                         middle_by_host_ring, sizes, full, &by_host, pipe, middle));
  }
  // The walk over islands with two-node trees priced as on hosts: a group that is a tree between
  // the rank's island and one other has its other n - k members there, in n - k distinct groups
  // of every other dim, so some rank of that island has at most island_kmax / (n - k) peers of
  // each on it (least_sum_trees' partner floors, with island floors and island sizes).
  if (summary.has_domains) {
    for (long long c : place_sizes(summary.island_slots, kPlaceSizes)) {
      lb = std::max(lb, least_sum_trees(by_island_ring, by_island, sizes, c, summary.island_kmax,
                                        true, full));
    }
  }
  if (!traffic.matrix.empty()) {
    double bytes = 0;
    for (const auto& fl : traffic.matrix) bytes += fl.from != fl.to ? fl.bytes : 0;
    lb += bytes / summary.total_egress;
  }
  return lb + fixed;
}

}  // namespace topoaware::mapper::internal
