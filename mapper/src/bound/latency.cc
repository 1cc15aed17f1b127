// Latency beyond a leaf (docs/mapper.md, "Lower bound"): the walk on each level's switch groups,
// a group that leaves one charged the latency of the level above it.
#include <algorithm>
#include <cstddef>
#include <limits>
#include <map>
#include <vector>

#include "bound/bound.h"
#include "routing.h"
#include "topoaware/mapper/cost.h"
#include "topoaware/mapper/layout.h"

namespace topoaware::mapper::internal {

// Latency beyond a leaf. The model charges a dim the latency of the highest level any of its flows
// reaches, and the host floors charge a group that leaves its host the least latency beyond one
// (a leaf's). A group that leaves its level-l switch group reaches a level above l (routing climbs
// to the first level where both hosts share a group, and levels 0..l nest). So for a rank with
// k < n members of its group under its level-l switch: as a ring, the host's ring floor for at
// most min(k, kmax) members on its host; as a two-host tree, its host holds all k and the tree's
// floor for k, with the partner host's floors on the other dims; either plus the latency above
// level l over a leaf's. A switch of one host then prices a group split over hosts (a two-host
// TP tree) at the latency it pays. The walk runs on each level's places, without NVLink domains
// (a flow between hosts of one domain reaches no switch).
double level_latency_bound(const Machine& machine, const Traffic& traffic,
                           const BoundMachine& summary, const Floors& by_host,
                           const Floors& by_host_ring, const std::vector<long long>& sizes,
                           bool full, const Floors* partner_by_host, std::size_t loose,
                           long long middle) {
  if (!full || summary.has_domains) return 0;
  constexpr std::size_t kPlaceSizes = 32;
  double best = 0;
  const std::size_t nest = nested_levels(machine);
  for (std::size_t l = 0; l < nest; ++l) {
    double above = std::numeric_limits<double>::infinity();
    for (std::size_t r = l + 2; r < std::max<std::size_t>(machine.reach_latency_us.size(), l + 3);
         ++r) {
      above = std::min(above, internal::reach_latency_us(machine, static_cast<int>(r)));
    }
    if (!(above > summary.lat_network)) continue;
    std::vector<long long> slots(machine.levels[l].uplink_gbps.size(), 0);
    for (const auto& sl : machine.slots) ++slots[machine.levels[l].group_of_host[sl.host]];
    const long long cmax = std::min(*std::max_element(slots.begin(), slots.end()), kCutSlots);
    const std::size_t dims = traffic.dims.size();
    Floors ring(dims), any(dims);
    for (std::size_t d = 0; d < dims; ++d) {
      const DimTraffic& dt = traffic.dims[d];
      if (dt.size <= 1 || dt.bytes <= 0) {
        ring[d] = any[d] = {0.0};
        continue;
      }
      const double extra = dt.calls * latency_steps(dt) * (above - summary.lat_network) * 1e-6;
      const std::vector<double> f_min = prefix_min(by_host[d]),
                                fr_min = prefix_min(by_host_ring[d]);
      const auto kcap = static_cast<std::size_t>(std::min<long long>(dt.size, cmax));
      ring[d].resize(kcap);
      any[d].resize(kcap);
      for (std::size_t k = 1; k <= kcap; ++k) {
        const std::size_t on_host = std::min(k, f_min.size());
        if (static_cast<long long>(k) == dt.size) {  // whole under the switch: any host count
          ring[d][k - 1] = any[d][k - 1] = f_min[on_host - 1];
          continue;
        }
        ring[d][k - 1] = fr_min[std::min(k, fr_min.size()) - 1] + extra;
        any[d][k - 1] = ring[d][k - 1];
        if (k <= by_host[d].size())
          any[d][k - 1] = std::min(any[d][k - 1], by_host[d][k - 1] + extra);
      }
      // The group's other n - k members sit under other switches, at most n - k under each.
      if (dt.pattern != Pattern::kPipeline) {
        const std::vector<double> any_min = prefix_min(any[d]);
        for (long long k = 1; k <= static_cast<long long>(kcap) && k < dt.size; ++k) {
          const auto j = static_cast<std::size_t>(std::min<long long>(dt.size - k, kcap));
          for (auto* v : {&ring[d], &any[d]}) {
            (*v)[static_cast<std::size_t>(k - 1)] =
                std::max((*v)[static_cast<std::size_t>(k - 1)], any_min[j - 1]);
          }
        }
      }
    }
    std::map<long long, double> value;  // per place size; 0 where not searched
    for (long long c : place_sizes(slots, kPlaceSizes)) {
      if (c > kCutSlots) break;  // the search grows with c; small switches are where it tells
      value[c] = least_sum_trees(ring, any, sizes, c, summary.kmax, true, full,
                                 partner_by_host ? partner_by_host : &by_host, loose);
    }
    if (loose == kNoDim) {
      for (const auto& [c, v] : value) best = std::max(best, v);
      continue;
    }
    best = std::max(best, middle_stage_bound(slots, middle, [&](long long c) {
                      const auto it = value.find(c);
                      return it == value.end() ? 0.0 : it->second;
                    }));
  }
  return best;
}

}  // namespace topoaware::mapper::internal
