// The crossing terms of the lower bound (docs/mapper.md, "Lower bound", "Joint crossing"): the
// places whose exits a cut group's bytes must leave by (islands, switch groups), what each dim's
// cut groups send out of them, and the joint bound that splits each dim's time between the walk
// and a crossing term.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <utility>
#include <vector>

#include "bound/bound.h"
#include "routing.h"
#include "topoaware/mapper/cost.h"
#include "topoaware/mapper/layout.h"

namespace topoaware::mapper::internal {

namespace {

// Islands, then each network level with its groups merged where an NVLink domain spans them (a
// flow between hosts of one domain uses NVLink and loads no uplink). A level whose groups do not
// nest inside the next level's is left out, and so are the levels above it: the routing stops
// climbing at the first level where both hosts share a group.
std::vector<CrossTier> cross_tiers(const Machine& machine,
                                   const std::vector<long long>& host_slots) {
  std::vector<CrossTier> tiers;
  const std::vector<double> host_ports = host_port_capacity(machine);
  auto add_tier = [&](const std::vector<std::size_t>& bin_of_host, std::size_t bins,
                      const std::vector<double>& bin_cap,
                      const std::vector<std::uint32_t>& bin_links) {
    CrossTier tier;
    std::vector<long long> slots(bins, 0);
    for (std::size_t h = 0; h < machine.hosts.size(); ++h) slots[bin_of_host[h]] += host_slots[h];
    for (std::size_t b = 0; b < bins; ++b) {
      if (slots[b] == 0) continue;
      tier.slots.push_back(slots[b]);
      tier.cap.push_back(bin_cap[b]);
      tier.links.push_back(b < bin_links.size() ? bin_links[b] : 0);
      tier.total_cap += bin_cap[b];
    }
    tiers.push_back(std::move(tier));
  };
  // Union-find over the bins of a tier: hosts of one NVLink domain share a bin.
  auto merge_domains = [&](std::vector<std::size_t> key, std::size_t keys,
                           const std::vector<double>& key_cap,
                           const std::vector<std::uint32_t>& key_links) {
    std::vector<std::size_t> parent(keys);
    std::iota(parent.begin(), parent.end(), 0);
    auto root = [&](std::size_t x) {
      while (parent[x] != x) x = parent[x] = parent[parent[x]];
      return x;
    };
    std::map<int, std::size_t> domain_key;
    for (std::size_t h = 0; h < machine.hosts.size(); ++h) {
      if (machine.domain_of_host[h] < 0) continue;
      auto [it, fresh] = domain_key.emplace(machine.domain_of_host[h], key[h]);
      if (!fresh) parent[root(key[h])] = root(it->second);
    }
    std::vector<std::size_t> dense(keys, keys);
    std::vector<double> cap;
    std::size_t bins = 0;
    for (std::size_t k = 0; k < keys; ++k) {
      std::size_t r = root(k);
      if (dense[r] == keys) {
        dense[r] = bins++;
        cap.push_back(0);
      }
      // Only groups holding a host of the step exist in the machine, so each one's uplink counts.
      cap[dense[r]] += key_cap[k];
    }
    for (auto& k : key) k = dense[root(k)];
    // A bin that merged groups spreads its flows over several groups' links: no ECMP factor.
    std::vector<std::uint32_t> links(bins, 0);
    if (bins == keys) {
      for (std::size_t k = 0; k < keys && k < key_links.size(); ++k) links[dense[k]] = key_links[k];
    }
    add_tier(key, bins, cap, links);
  };
  std::vector<std::size_t> by_host(machine.hosts.size());
  std::iota(by_host.begin(), by_host.end(), 0);
  merge_domains(by_host, machine.hosts.size(), host_ports, {});
  const std::size_t nest = nested_levels(machine);
  for (std::size_t l = 0; l < nest; ++l) {
    const NetLevel& nl = machine.levels[l];
    std::vector<double> cap(nl.uplink_gbps.size());
    for (std::size_t g = 0; g < cap.size(); ++g) cap[g] = nl.uplink_gbps[g] * kGB;
    std::vector<std::uint32_t> links;
    if (nl.ecmp) {
      links.assign(cap.size(), 1);
      for (std::size_t g = 0; g < cap.size() && g < nl.uplink_links.size(); ++g) {
        links[g] = nl.uplink_links[g];
      }
    }
    merge_domains(std::vector<std::size_t>(nl.group_of_host.begin(), nl.group_of_host.end()),
                  nl.uplink_gbps.size(), cap, links);
  }
  return tiers;
}

// H[c] for c = 0..cmax: at most the least sum_d w_d p_d(A) over sets A of c ranks, p_d(A) the
// number of d-groups that A meets but does not hold whole. Peeling the outermost dim D off the
// rank space splits A into n_D slices A_i (one per coordinate of D): inner dims' p add up over
// slices, and p_D = |union A_i| - |intersection A_i| >= max |A_i| - min |A_i|. With the slice
// sizes in [x1, x2], sum_i H_inner(|A_i|) is at least n_D times the convex hull of H_inner over
// [x1, x2] at the mean c/n_D, which is a mix of two points. `n` and `w` innermost first.
std::vector<double> least_cut(const std::vector<long long>& n, const std::vector<double>& w,
                              long long cmax) {
  std::vector<double> h = {0.0, 0.0};  // the empty space's one point: 0 or 1 rank
  long long space = 1;
  for (std::size_t k = 0; k < n.size(); ++k) {
    const long long nk = n[k];
    const double nd = static_cast<double>(nk);
    const long long inner = static_cast<long long>(h.size()) - 1;  // largest slice size
    space = std::min(cmax, space * nk);
    std::vector<double> next(static_cast<std::size_t>(space + 1));
    for (long long c = 0; c <= space; ++c) {
      const double mu = static_cast<double>(c) / nd;
      double best = std::numeric_limits<double>::infinity();
      if (c % nk == 0) best = nd * h[static_cast<std::size_t>(c / nk)];
      const long long lo = c / nk, top = std::min(inner, c);
      for (long long x1 = 0; x1 <= lo; ++x1) {
        const double h1 = h[static_cast<std::size_t>(x1)];
        for (long long x2 = std::max(lo + 1, x1 + 1); x2 <= top; ++x2) {
          const double spread = w[k] * static_cast<double>(x2 - x1);
          if (spread >= best) break;  // only grows with x2; the hull term is never negative
          const double h2 = h[static_cast<std::size_t>(x2)];
          const double v =
              nd * (h1 * (static_cast<double>(x2) - mu) + h2 * (mu - static_cast<double>(x1))) /
                  static_cast<double>(x2 - x1) +
              spread;
          best = std::min(best, v);
        }
      }
      next[static_cast<std::size_t>(c)] = best;
    }
    h = std::move(next);
  }
  return h;
}

// The least bytes one flow of a dim carries over the network (route_group(), route_flow(): a
// flow is cut into at most `pieces` pieces): a ring's hop shared by the `members` of its group on
// the sending node (at most that many: V, or a two-node tree's S where two nodes of that many
// hold the group), an all-to-all pair's S/n, a pipeline's S.
double least_flow_bytes(const DimTraffic& dt, long long members, std::uint32_t pieces) {
  const double p = static_cast<double>(pieces);
  if (dt.pattern == Pattern::kAllToAll) return dt.bytes / static_cast<double>(dt.size) / p;
  if (dt.pattern == Pattern::kPipeline) return dt.bytes / p;
  members = std::max(1LL, members);
  return any_split_hop(dt, members) / static_cast<double>(members) / p;
}

}  // namespace

// The dims with more than one member, innermost first, when they tile the ranks as a mixed radix
// (stride of each = product of the sizes inside it, product = world); empty otherwise.
std::vector<std::size_t> radix_dims(const Traffic& traffic) {
  std::vector<std::size_t> idx;
  for (std::size_t d = 0; d < traffic.dims.size(); ++d) {
    if (traffic.dims[d].size > 1) idx.push_back(d);
  }
  std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
    return traffic.dims[a].stride < traffic.dims[b].stride;
  });
  long long expect = 1;
  for (std::size_t d : idx) {
    if (traffic.dims[d].stride != expect) return {};
    expect *= traffic.dims[d].size;
  }
  if (expect != traffic.world) return {};
  return idx;
}

// How many levels, from the lowest, nest: hosts sharing a level l-1 group share their level l
// group. Routing climbs to the first level where two hosts share a group, so a flow between
// hosts of different groups of a nesting level l reaches above l.
std::size_t nested_levels(const Machine& machine) {
  for (std::size_t l = 1; l < machine.levels.size(); ++l) {
    std::vector<long long> up(machine.levels[l - 1].uplink_gbps.size(), -1);
    for (std::size_t h = 0; h < machine.hosts.size(); ++h) {
      auto& u = up[machine.levels[l - 1].group_of_host[h]];
      const auto g = static_cast<long long>(machine.levels[l].group_of_host[h]);
      if (u >= 0 && u != g) return l;
      u = g;
    }
  }
  return machine.levels.size();
}

// `rings`, where given: dims known to run no group as a two-node tree, so each group a place cuts
// sends V out; `members`, where given: per dim, the most members of one group any NCCL node holds
// (else its size, at most kmax), which bounds how finely a ring's hop is cut into flows.
bool cross_setup(const Machine& machine, const Traffic& traffic,
                 const std::vector<long long>& host_slots, long long kmax,
                 const std::vector<bool>& rings, CrossSetup* setup,
                 const std::vector<long long>& members) {
  // Every slot a rank.
  if (static_cast<long long>(machine.slots.size()) != traffic.world) return false;
  setup->radix = radix_dims(traffic);
  if (setup->radix.empty()) return false;
  for (auto& tier : cross_tiers(machine, host_slots)) {
    const long long most = *std::max_element(tier.slots.begin(), tier.slots.end());
    // A tier of one place, or one without a real uplink limit, is crossed by nothing.
    if (tier.slots.size() < 2 || most > kCutSlots || tier.total_cap >= kUnlimitedGbps * kGB) {
      continue;
    }
    setup->cmax = std::max(setup->cmax, most);
    setup->tiers.push_back(std::move(tier));
  }
  if (setup->tiers.empty()) return false;
  // Bytes a d-group that a place meets but does not hold sends out of the place, at least: a
  // ring hands the ring to a host off the place at least once (V), an all-to-all member pair
  // split j | n-j sends j (n-j) S/n >= (n-1) S/n, a pipeline chain crosses the edge once (S).
  const std::vector<std::size_t>& radix = setup->radix;
  setup->n.assign(radix.size(), 0);
  setup->out.assign(radix.size(), 0.0);
  for (std::size_t i = 0; i < radix.size(); ++i) {
    const DimTraffic& dt = traffic.dims[radix[i]];
    setup->n[i] = dt.size;
    const double nd = static_cast<double>(dt.size);
    if (dt.bytes <= 0) continue;
    if (dt.pattern == Pattern::kRing) {
      const bool ring = !rings.empty() && rings[radix[i]];
      setup->out[i] = ring ? internal::ring_volume(dt.size, dt.bytes) : any_split_hop(dt, kmax);
    } else if (dt.pattern == Pattern::kAllToAll) {
      setup->out[i] = (nd - 1) / nd * dt.bytes;
    } else {
      setup->out[i] = dt.bytes;
    }
    setup->live.push_back(i);
  }
  if (setup->live.empty()) return false;
  // ECMP: a dim's time on a place's uplink is its exit load / cap times E(F, L), E falling as the
  // effective flow count F grows, and F is at most the flows the place's ranks can send up: per
  // rank one ring or tree hop to the next node, two pipeline neighbours, n-1 all-to-all peers,
  // each cut into at most `pieces` (the most ports a GPU or a PXN relay has); the most over the
  // dims is kept per place (ecmp_exit() prices the exit load with it).
  std::uint32_t pieces = 1;
  for (const Slot& sl : machine.slots) pieces = std::max(pieces, sl.ports.count);
  for (const PortRange& r : machine.relay_ranges) pieces = std::max(pieces, r.count);
  setup->flow.assign(radix.size(), 0.0);
  for (std::size_t i : setup->live) {
    const std::size_t d = radix[i];
    const long long most =
        members.empty() ? std::min<long long>(traffic.dims[d].size, kmax) : members[d];
    setup->flow[i] = least_flow_bytes(traffic.dims[d], most, pieces);
  }
  setup->flows.assign(setup->tiers.size(), {});
  for (std::size_t ti = 0; ti < setup->tiers.size(); ++ti) {
    const CrossTier& tier = setup->tiers[ti];
    setup->flows[ti].assign(tier.slots.size(), 0.0);
    for (std::size_t b = 0; b < tier.slots.size(); ++b) {
      if (tier.links[b] <= 1) continue;
      double most = 0;
      for (std::size_t i : setup->live) {
        const DimTraffic& dt = traffic.dims[radix[i]];
        const double per_rank = dt.pattern == Pattern::kAllToAll   ? dt.size - 1.0
                                : dt.pattern == Pattern::kPipeline ? 2.0
                                                                   : 1.0;
        most = std::max(most, static_cast<double>(tier.slots[b]) * per_rank * pieces);
      }
      setup->flows[ti][b] = most;
    }
  }
  return true;
}

// A place's exit load on an ECMP tier times its expected worst link, at least. Each dim's time
// there is its load u_d times E(F_d), F_d its effective flow count, at most the place's `most`
// flows and, every flow carrying `least` bytes or more, at most u_d / least (F <= sum b / min b).
// E never rises with F, so u E(min(most, max(1, u / least))) bounds each dim's term; it never
// falls as u grows and its ratio to u never rises, so it is subadditive: the dims' terms
// together are at least its value at their summed load, and at any floor h under that sum.
double ecmp_exit(double load, double least, double most, std::uint32_t links) {
  if (links <= 1 || load <= 0) return load;
  double flows = most;
  if (least > 0) flows = std::min(most, std::max(1.0, load / least));
  return load * internal::ecmp_factor(flows, links);
}

// The joint crossing bound. For any theta in [0,1]^D, sum_d T_d = sum_d theta_d T_d +
// sum_d (1 - theta_d) T_d: the first part is at least the walk bound over the floors scaled by
// theta, the second at least the crossing bound with each dim's bytes scaled by 1 - theta (each
// part minimized over placements on its own). Every theta gives a true bound; a coordinate
// search picks a good one. `by_host`, `by_island`: the walk's host and island floors; `rings`,
// `members`: as cross_setup() takes them; `seed`, where given: a theta to start from, and the best
// one found.
double joint_crossing_bound(const Machine& machine, const Traffic& traffic, const Floors& by_host,
                            const Floors& by_island, const std::vector<long long>& sizes,
                            const std::vector<long long>& host_slots,
                            const std::vector<long long>& island_slots, long long kmax,
                            const std::vector<bool>& rings, const std::vector<long long>& members,
                            std::vector<double>* seed) {
  CrossSetup setup;
  if (!cross_setup(machine, traffic, host_slots, kmax, rings, &setup, members)) return 0;
  const std::vector<double>& flow = setup.flow;
  const std::vector<std::size_t>& radix = setup.radix;
  const std::vector<long long>& n = setup.n;
  const std::vector<double>& out = setup.out;
  const std::vector<std::size_t>& live = setup.live;
  const std::vector<CrossTier>& tiers = setup.tiers;
  const long long cmax = setup.cmax;
  constexpr std::size_t kPlaceSizes = 32;
  Floors scaled_by_host = by_host, scaled_by_island = by_island;
  std::vector<double> weights(radix.size());
  std::vector<double> full_cut;                        // least_cut at theta = 0
  auto eval = [&](const std::vector<double>& theta) {  // theta per radix index
    for (std::size_t i = 0; i < radix.size(); ++i) {
      const std::size_t d = radix[i];
      for (std::size_t k = 0; k < by_host[d].size(); ++k)
        scaled_by_host[d][k] = theta[i] * by_host[d][k];
      for (std::size_t k = 0; k < by_island[d].size(); ++k)
        scaled_by_island[d][k] = theta[i] * by_island[d][k];
      weights[i] = (1 - theta[i]) * out[i];
    }
    const double walk =
        std::max(least_sum_over(scaled_by_host, sizes, host_slots, kPlaceSizes, true),
                 least_sum_over(scaled_by_island, sizes, island_slots, kPlaceSizes, true));
    // least_cut is a least sum of w-weighted counts: scaling every weight by one factor scales
    // it alike, so a theta common to all dims reuses the cut at full weight.
    std::vector<double> cut;
    if (std::all_of(theta.begin(), theta.end(), [&](double x) { return x == theta[0]; })) {
      if (full_cut.empty()) full_cut = least_cut(n, out, cmax);
      cut = full_cut;
      for (double& x : cut) x *= 1 - theta[0];
    } else {
      cut = least_cut(n, weights, cmax);
    }
    // A dim's share (1 - theta_d) of its exit load u_d = (1 - theta_d) l_d has flows of at least
    // flow_d bytes each, so F_d <= l_d / flow_d = u_d / ((1 - theta_d) flow_d) (ecmp_exit()).
    double least = std::numeric_limits<double>::infinity();
    for (std::size_t i : live) {
      if (theta[i] < 1) least = std::min(least, (1 - theta[i]) * flow[i]);
    }
    double cross = 0;
    for (std::size_t ti = 0; ti < tiers.size(); ++ti) {
      const CrossTier& tier = tiers[ti];
      double sum = 0;
      for (std::size_t b = 0; b < tier.slots.size(); ++b) {
        // time_d >= this place's exit load / cap (x ECMP's expected worst link)
        const double load = cut[static_cast<std::size_t>(tier.slots[b])];
        const double hb = ecmp_exit(load, least, setup.flows[ti][b], tier.links[b]);
        sum += hb;
        cross = std::max(cross, hb / tier.cap[b]);
      }
      cross = std::max(cross, sum / tier.total_cap);  // ... and >= all exit load / all caps
    }
    return walk + cross;
  };
  // The same theta for every dim first (theta = 1 alone is the walk bound), then each dim's own.
  std::vector<double> theta(radix.size(), 1.0);
  double best = eval(theta);
  double same = 1.0;
  for (int g = 0; g < 10; ++g) {
    std::vector<double> common(radix.size(), g * 0.1);
    const double x = eval(common);
    if (x > best) {
      best = x;
      same = g * 0.1;
    }
  }
  std::fill(theta.begin(), theta.end(), same);
  if (seed && seed->size() == theta.size()) {  // a start from a like search: it may do better
    const double x = eval(*seed);
    if (x > best) {
      best = x;
      theta = *seed;
    }
  } else if (same == 1.0) {
    // Where no common theta beats the walk alone the crossings cost less than the floors they
    // would replace; the per-dim search (some 200 passes of least_cut) is then skipped.
    return best;
  }
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t i : live) {
      const double start = theta[i];
      double at = start;
      auto try_value = [&](double v) {
        theta[i] = std::clamp(v, 0.0, 1.0);
        const double x = eval(theta);
        if (x > best) {
          best = x;
          at = theta[i];
        }
      };
      for (int g = 0; g <= 10; ++g) {
        if (g * 0.1 != start) try_value(g * 0.1);
      }
      const double coarse = at;
      for (int g = -4; g <= 4; ++g) {
        if (g != 0) try_value(coarse + g * 0.025);
      }
      theta[i] = at;
    }
  }
  if (seed) *seed = theta;
  return best;
}

}  // namespace topoaware::mapper::internal
